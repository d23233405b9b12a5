"""What a benchmark or scaling driver records and how: progress lines on stderr, UTC stamps,
result files that are never overwritten, min/median/max summaries of repeated runs, and JSON
written atomically. Shared by bench/ and scaling/ (docs/BENCHMARKS.md); import it as
`shardmill_test.results` with tests/lib on PYTHONPATH."""

import datetime
import json
import os
import statistics
import sys


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def utc_stamp():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def unique_path(directory, stem, suffix):
    """directory/stem+suffix, or stem-2, stem-3...: results are never overwritten."""
    os.makedirs(directory, exist_ok=True)
    n = 1
    while True:
        name = f"{stem}{'' if n == 1 else f'-{n}'}{suffix}"
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            return path
        n += 1


# ---- statistics ----

def summarize(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
            "n": len(vals)}


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def timing(rec, key, agg="max"):
    t = ((rec.get("report") or {}).get("timing_ms") or {}).get(agg) or {}
    return t.get(key)


def write_report(directory, workload, doc):
    """doc as directory/<workload>-<UTC>.json (-2, -3... if taken), never overwriting one."""
    path = unique_path(directory, f"{workload}-{utc_stamp()}", ".json")
    write_json(path, doc)
    return path


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
