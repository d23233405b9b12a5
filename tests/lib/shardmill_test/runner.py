"""The convert tier's runner (tests/convert, tests/hdf5, the W7 benchmarks): running shardmill and
describing a failed run, writing job YAML, SPEC §2's default layout, the completion-marker check of
SPEC §6, directory snapshots, zarrita.js reads through tests/convert/js/zarrita_io.mjs
(node_modules of tests/interop/js), and the main() of a test whose ctest cases are groups.
The NumPy oracle is shardmill_test.spec_oracle, the independent decoder shardmill_test.zarr_decode.

Always run with /usr/bin/python3 (Debian numpy, zarr 2.13, nibabel, zstandard, crc32c).
"""

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys

import crc32c as _crc32c
import numpy as np

from shardmill_test import REPO
from shardmill_test.checks import Checks
from shardmill_test.file_tree import tree_files as files_under  # noqa: F401 (relative paths)
from shardmill_test.spec_oracle import first_diff, same_bits
from shardmill_test.zarr_decode import shard_keys

JS_DIR = os.path.join(REPO, "tests", "interop", "js")  # zarrita.js 0.7.5 is installed there


# The report's input members the provenance's input does not have: the path as the config named
# it, an array's layout, and the geometry of a convert (docs/internals/report.md).
REPORT_ONLY_INPUT = ("store", "chunks", "shards", "geometry", "geometry_from")


# ---- shardmill ----

def auto_layout(shape, itemsize):
    """SPEC §2's default layout, from its text: inner chunks of 64 voxels per axis clipped to the
    array; shards the inner chunk times powers of two (an axis doubled at a time, z, y, x in
    turn, only while the shard is shorter than the array on that axis) until a full shard holds
    at least 32 MiB of values or covers the array. Returns (shard, chunk) as lists."""
    chunk = [min(64, int(s)) for s in shape]
    shard = list(chunk)
    nbytes = itemsize * math.prod(shard)
    d = idle = 0
    while nbytes < 32 << 20 and idle < len(shape):
        if shard[d] >= shape[d]:
            idle += 1
        else:
            idle = 0
            shard[d] *= 2
            nbytes *= 2
        d = (d + 1) % len(shape)
    return shard, chunk


def run(cmd, cwd=None, timeout=300, env=None):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def describe(r):
    cmd = " ".join(r.args) if isinstance(r.args, list) else str(r.args)
    return f"`{cmd}` exit {r.returncode}; stderr: {r.stderr.strip()[-1500:]}"


def yaml_scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(yaml_scalar(x) for x in v) + "]"
    return json.dumps(str(v))  # a double-quoted YAML string


def yaml_text(cfg, indent=0):
    """Block YAML of nested dicts; lists and scalars in flow style."""
    lines = []
    for k, v in cfg.items():
        if isinstance(v, dict):
            lines.append(" " * indent + f"{k}:")
            lines.append(yaml_text(v, indent + 2))
        else:
            lines.append(" " * indent + f"{k}: {yaml_scalar(v)}")
    return "\n".join(lines)


def merge_config(cfg, extra):
    """cfg with each key of `extra` laid over it: a mapping updates the section of that name,
    anything else replaces the key. Returns cfg."""
    for k, v in (extra or {}).items():
        if isinstance(v, dict):
            cfg.setdefault(k, {}).update(v)
        else:
            cfg[k] = v
    return cfg


def write_config(path, cfg):
    with open(path, "w") as f:
        f.write(yaml_text(cfg) + "\n")
    return path


def engine_version(shardmill):
    """(version, commit) from `shardmill --version`: "shardmill 0.1.0 (commit abc)"."""
    r = run([shardmill, "--version"])
    m = re.match(r"shardmill (\S+) \(commit (\S+)\)", r.stdout.strip())
    return (m.group(1), m.group(2)) if m else (None, None)


def one_error_line(stderr):
    """The stderr lines that are not progress output; SPEC §4 wants exactly one error line."""
    return [ln for ln in stderr.splitlines() if ln.strip()]


# ---- the completion marker (SPEC §6) ----

def check_marker(c, label, out, report=None, version=None):
    """Field-by-field check of OUT/shardmill.complete.json against the files on disk."""
    mpath = os.path.join(out, "shardmill.complete.json")
    if not c.check(f"{label} marker exists", os.path.isfile(mpath), mpath):
        return
    marker = json.load(open(mpath))
    zbytes = open(os.path.join(out, "zarr.json"), "rb").read()
    meta = json.loads(zbytes)
    keys = shard_keys(meta)
    c.check(f"{label} marker shardmill_complete (format version 2)",
            marker.get("shardmill_complete") == 2, marker.get("shardmill_complete"))
    c.check(f"{label} every record carries the 16-hex-digit digest of its values",
            all(re.fullmatch(r"[0-9a-f]{16}", str(r.get("values", "")))
                for r in marker.get("shards", [])), marker.get("shards", [])[:2])
    if version is not None:
        c.check(f"{label} marker engine", marker.get("engine") ==
                {"version": version[0], "commit": version[1]}, marker.get("engine"))
    c.check(f"{label} marker zarr_json_sha256 = sha256(zarr.json)",
            marker.get("zarr_json_sha256") == hashlib.sha256(zbytes).hexdigest(),
            marker.get("zarr_json_sha256"))
    c.check(f"{label} marker shard_count = prod(ceil(shape/shard)) = {len(keys)}",
            marker.get("shard_count") == len(keys), marker.get("shard_count"))
    recs = marker.get("shards", [])
    c.check(f"{label} marker lists every shard in grid order",
            [r.get("key") for r in recs] == keys,
            f"{len(recs)} records; first keys {[r.get('key') for r in recs[:4]]}")
    bad = []
    total = 0
    for r in recs:
        p = os.path.join(out, *r["key"].split("/"))
        if not os.path.isfile(p):
            bad.append(f"{r['key']} missing")
            continue
        data = open(p, "rb").read()
        total += len(data)
        if len(data) != r.get("size"):
            bad.append(f"{r['key']} size {len(data)} != {r.get('size')}")
        if _crc32c.crc32c(data) != r.get("crc32c"):
            bad.append(f"{r['key']} crc32c {_crc32c.crc32c(data)} != {r.get('crc32c')}")
    c.check(f"{label} marker sizes and crc32c match the files", not bad, "; ".join(bad[:5]))
    c.check(f"{label} marker bytes = sum of shard sizes", marker.get("bytes") == total,
            f"{marker.get('bytes')} vs {total}")
    stored = [f for f in files_under(out) if f.startswith("c" + os.sep)]
    c.check(f"{label} no object under c/ but the grid's shards",
            sorted(stored) == sorted(k.replace("/", os.sep) for k in keys),
            f"extra {sorted(set(stored) - set(keys))[:5]}")
    if report is not None:
        o = report.get("output", {})
        c.check(f"{label} report output.shards/bytes/complete",
                o.get("shards") == len(keys) and o.get("bytes") == total and
                o.get("complete") is True, o)


# ---- trees ----

def tree_diff(a, b):
    """Differences between two directory trees, byte for byte, every file."""
    fa, fb = files_under(a), files_under(b)
    diffs = [f"only in first: {x}" for x in sorted(set(fa) - set(fb))]
    diffs += [f"only in second: {x}" for x in sorted(set(fb) - set(fa))]
    for x in sorted(set(fa) & set(fb)):
        if open(os.path.join(a, x), "rb").read() != open(os.path.join(b, x), "rb").read():
            diffs.append(f"differs: {x}")
    return diffs


def snapshot(root):
    """{relpath: (bytes, mtime_ns, mode)} of every entry under root, root included."""
    snap = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files + ([] if d != root else ["."]):
            p = os.path.normpath(os.path.join(d, name))
            st = os.lstat(p)
            data = open(p, "rb").read() if os.path.isfile(p) and not os.path.islink(p) else None
            snap[os.path.relpath(p, root)] = (data, st.st_mtime_ns, st.st_mode)
    return snap


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def case_main(name, cases, skip=77):
    """The driver of a `--shardmill BIN --work DIR --case NAME` test file: runs cases[NAME](checks,
    args, a fresh WORK/NAME) and returns its exit status (`skip` when the case returns it)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", required=True, choices=sorted(cases))
    args = ap.parse_args()
    args.shardmill = os.path.abspath(args.shardmill)
    work = fresh_dir(os.path.abspath(os.path.join(args.work, args.case)))
    c = Checks(f"{name}.{args.case}")
    if cases[args.case](c, args, work) == skip:
        return skip
    return c.done()


# ---- zarrita.js ----

def node_ok(node):
    if not node or node.endswith("NOTFOUND") or not os.path.exists(node):
        return "node not found (configure with SM_NODE=/path/to/node; scripts/install-deps.sh)"
    if not os.path.exists(os.path.join(JS_DIR, "node_modules", "zarrita", "package.json")):
        return f"{JS_DIR}/node_modules missing: run scripts/install-deps.sh (npm ci)"
    return None


def zarrita(node, job, workdir):
    """Runs tests/convert/js/zarrita_io.mjs on a job {"write": [...], "read": [...]}; returns
    (ok, text)."""
    jpath = os.path.join(workdir, "zarrita_job.json")
    with open(jpath, "w") as f:
        json.dump(job, f, indent=1)
    env = dict(os.environ, SM_ZARRITA_JS=JS_DIR)
    r = run([node, os.path.join(REPO, "tests", "convert", "js", "zarrita_io.mjs"), jpath], env=env,
            timeout=600)
    return r.returncode == 0, (r.stdout + r.stderr).strip()


def zarrita_read_all(c, node, workdir, arrays):
    """arrays: [(label, path, want ndarray, [(offset, shape), ...])]: zarrita.js reads the whole
    array and each region; each is compared bit for bit with `want`."""
    reads = []
    for k, (label, path, want, regions) in enumerate(arrays):
        for j, (off, shp) in enumerate([([0] * want.ndim, list(want.shape))] + list(regions)):
            rd = {"path": os.path.abspath(path), "offset": list(off), "shape": list(shp),
                  "out": os.path.join(workdir, f"zr_{k}_{j}.bin"), "label": label, "k": k,
                  "j": j}
            if int(np.prod(shp)) > 4 * 1024 * 1024:  # see zarrita_io.mjs: file descriptors
                rd["slab"] = 8
            reads.append(rd)
    ok, text = zarrita(node, {"read": reads}, workdir)
    if not c.check("zarrita.js ran", ok, text[-2000:]):
        return
    info = {}
    for line in text.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            info[d["out"]] = d
    for rd in reads:
        label, path, want, _ = arrays[rd["k"]]
        d = info.get(rd["out"], {})
        region = tuple(slice(o, o + s) for o, s in zip(rd["offset"], rd["shape"]))
        w = np.ascontiguousarray(want[region])
        tag = f"{label} zarrita [{','.join(map(str, rd['offset']))}]+" \
              f"[{','.join(map(str, rd['shape']))}]"
        if d.get("dtype") != np.dtype(w.dtype).name or d.get("shape") != list(want.shape):
            c.check(tag + " dtype/shape", False, f"zarrita says {d}")
            continue
        got = np.fromfile(rd["out"], dtype=w.dtype.newbyteorder("<")).reshape(w.shape)
        c.check(tag + " bit for bit", same_bits(got.astype(w.dtype), w), first_diff(got, w))


def shardmill_read(c, shardmill, label, path, want, workdir):
    """`shardmill read` of the whole array equals `want` bit for bit."""
    out = os.path.join(workdir, "smread.bin")
    r = run([shardmill, "read", path, "--offset", ",".join("0" * want.ndim), "--shape",
             ",".join(str(s) for s in want.shape), "-o", out])
    if not c.check(f"{label} shardmill read", r.returncode == 0, describe(r)):
        return
    got = np.fromfile(out, dtype=want.dtype.newbyteorder("<")).reshape(want.shape)
    c.check(f"{label} shardmill read bit for bit", same_bits(got.astype(want.dtype), want),
            first_diff(got, want))


def group_main(test, groups, skip=None, no_node=(), precheck=None, flag="group"):
    """main() of a test script whose ctest cases are groups (--FLAG NAME runs groups[NAME](c,
    args, work)): the common flags, a fresh work directory, the checks named TEST.NAME, the
    engine version in args.version; zarrita.js must be available unless the group is in no_node;
    precheck(c, args), if given, may fail the run first (False). A group returning `skip` (not
    None) skips."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--node", default="")
    ap.add_argument("--work", required=True)
    ap.add_argument(f"--{flag}", dest="group", required=True, choices=sorted(groups))
    args = ap.parse_args()
    args.shardmill = os.path.abspath(args.shardmill)
    work = fresh_dir(os.path.abspath(os.path.join(args.work, args.group)))
    c = Checks(f"{test}.{args.group}")
    args.version = engine_version(args.shardmill)
    if precheck is not None and not precheck(c, args):
        return c.done()
    if args.group not in no_node:
        why = node_ok(args.node)
        if not c.check("zarrita.js available", why is None, why):
            return c.done()
    if groups[args.group](c, args, work) == skip and skip is not None:
        return skip
    return c.done()


def main_guard(fn):
    try:
        sys.exit(fn())
    except KeyboardInterrupt:
        sys.exit(130)
