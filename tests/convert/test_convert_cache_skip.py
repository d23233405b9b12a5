"""The encoded-object cache skipped when no input object is read twice (issue 34, SPEC §3).

Usage: /usr/bin/python3 test_convert_cache_skip.py --shardmill BIN --work DIR --case CASE
Inputs are written by zarr-python 2.13 (Zarr v2, 128^3 uint16 in 32^3 chunks, a NumPy ramp with
noise: 64 chunks of a few KiB encoded).
Cases (one ctest each, label `convert`):
  aligned     a one-pass convert (normalize scale) whose output shards [32,64,64] lie on the
              input's chunk grid: the report says io.cache {enabled: false, why: "no input
              object is read twice"}, no hit, and the output's shard files are byte-identical to
              a run with input.cache.enabled: false (and to one with 2 threads); `plan`'s memory
              bound counts no cache (its caches part equals the run with the cache off)
  misaligned  output shards [24,48,48] (no multiple of the chunk) with limits.memory_bytes 1MiB,
              too small for a group window or the threads' decoded-chunk memos to hold what
              neighbouring shards share, so each shard reads the chunks it touches again: the
              cache stays on and hits (io.cache.enabled true, hits > 0, why null); its shard
              files equal those of a run with input.cache.enabled: false
  percentile  the aligned layout with normalize percentile (two passes over the input): the
              cache stays on and hits
  scan        a scan with tiles [32,32,32] on the chunk grid, one pass: the cache is skipped
              (why "no input object is read twice"), 64 payload requests, the histogram equals
              NumPy's and the cache-off run's, and `plan` counts no cache; with `passes: 2` the
              cache stays on and hits
Prints one ok/FAIL line per check and a closing count; exit 1 on any failure.
"""

import json
import os

import numpy as np

from shardmill_test import runner as cc
from shardmill_test.file_tree import same_tree

SHAPE = (128, 128, 128)
CHUNK = (32, 32, 32)


def make_input(root):
    import zarr
    rng = np.random.default_rng(34)
    # a ramp with a little noise: chunks of a few KiB encoded, so the misaligned case's cache
    # holds them all
    z, y, x = np.indices(SHAPE, dtype=np.uint16)
    vals = (z * 16 + y * 8 + x + rng.integers(0, 4, size=SHAPE, dtype=np.uint16)) % 4096
    zarr.open(os.path.join(root, "in.zarr"), mode="w", shape=SHAPE, chunks=CHUNK,
              dtype="u2")[:] = vals


def run_job(c, args, root, tag, cfg, extra=None):
    """Runs the job cfg (merged with extra) as TAG.yaml; (report or None, config path)."""
    path = cc.write_config(os.path.join(root, tag + ".yaml"), cc.merge_config(cfg, extra))
    rep = os.path.join(root, tag + ".report.json")
    r = cc.run([args.shardmill, "run", path, "--report", rep], cwd=root)
    c.check(f"{tag}: exit 0", r.returncode == 0, cc.describe(r))
    if r.returncode != 0:
        return None, path
    with open(rep) as f:
        return json.load(f), path


def convert(c, args, root, tag, extra=None, normalize=None):
    """Runs a convert of in.zarr into TAG.zarr; (report, output dir) or (None, None)."""
    cfg = {"job": "convert", "input": {"store": "in.zarr"},
           "normalize": normalize or {"mode": "scale", "divisor": 4095},
           "output": {"path": tag + ".zarr", "shard": [32, 64, 64], "chunk": [32, 32, 32],
                      "codec": {"name": "zstd", "level": 1}, "fsync": False},
           "parallel": {"threads": 1}, "progress": False}
    rep, _ = run_job(c, args, root, tag, cfg, extra)
    return (rep, os.path.join(root, tag + ".zarr")) if rep is not None else (None, None)


def same_shards(c, label, a, b):
    """The shard files (the output's chunk keys under c/) of two outputs are byte-identical."""
    ok, why = same_tree(os.path.join(a, "c"), os.path.join(b, "c"))
    c.check(f"{label}: the shard files are byte-identical", ok, why)


def plan_caches(c, args, root, tag, extra=None):
    cfg = {"job": "convert", "input": {"store": "in.zarr"},
           "normalize": {"mode": "scale", "divisor": 4095},
           "output": {"path": tag + ".zarr", "shard": [32, 64, 64], "chunk": [32, 32, 32]},
           "parallel": {"threads": 1}, "progress": False}
    path = cc.write_config(os.path.join(root, tag + ".plan.yaml"), cc.merge_config(cfg, extra))
    r = cc.run([args.shardmill, "plan", path, "--json"], cwd=root)
    c.check(f"{tag}: plan exit 0", r.returncode == 0, cc.describe(r))
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)


def find_key(doc, key):
    """The first value of `key` anywhere in doc (depth first), or None."""
    if isinstance(doc, dict):
        if key in doc:
            return doc[key]
        for v in doc.values():
            got = find_key(v, key)
            if got is not None:
                return got
    elif isinstance(doc, list):
        for v in doc:
            got = find_key(v, key)
            if got is not None:
                return got
    return None


def case_aligned(c, args, root):
    make_input(root)
    rep, out = convert(c, args, root, "skip")
    rep_off, out_off = convert(c, args, root, "off", {"input": {"cache": {"enabled": False}}})
    rep2, out2 = convert(c, args, root, "skip2", {"parallel": {"threads": 2}})
    if rep is None or rep_off is None or rep2 is None:
        return
    for tag, r in (("1 thread", rep), ("2 threads", rep2)):
        cache = r["io"]["cache"]
        c.check(f"aligned {tag}: io.cache says skipped: no input object is read twice",
                cache.get("enabled") is False and
                cache.get("why") == "no input object is read twice" and cache.get("hits") == 0,
                cache)
    c.check("cache off: io.cache says off in the configuration",
            rep_off["io"]["cache"].get("enabled") is False and
            rep_off["io"]["cache"].get("why") == "off in the configuration",
            rep_off["io"]["cache"])
    c.check("aligned: payload requests = the input's 64 chunks, as with the cache off",
            rep["io"]["requests"]["payload"] == 64 ==
            rep_off["io"]["requests"]["payload"],
            (rep["io"]["requests"], rep_off["io"]["requests"]))
    c.check("aligned: output bytes equal the cache-off run's",
            rep["output"]["bytes"] == rep_off["output"]["bytes"] == rep2["output"]["bytes"],
            (rep["output"]["bytes"], rep_off["output"]["bytes"], rep2["output"]["bytes"]))
    same_shards(c, "aligned vs cache off", out, out_off)
    same_shards(c, "aligned 1 vs 2 threads", out, out2)
    # plan and run agree: plan's bound counts no object cache for this layout
    on = plan_caches(c, args, root, "plan-on")
    off = plan_caches(c, args, root, "plan-off", {"input": {"cache": {"enabled": False}}})
    if on is not None and off is not None:
        a, b = find_key(on, "peak_rss_bytes_per_rank"), find_key(off, "peak_rss_bytes_per_rank")
        c.check("plan: the peak RSS bound is the cache-off job's", a is not None and a == b,
                (a, b))


def case_misaligned(c, args, root):
    make_input(root)
    small = {"output": {"shard": [24, 48, 48], "chunk": [8, 16, 16]},
             "limits": {"memory_bytes": "1MiB", "memory_ceiling": False}}
    rep, out = convert(c, args, root, "on", small)
    rep_off, out_off = convert(c, args, root, "off",
                               cc.merge_config(small, {"input": {"cache": {"enabled": False}}}))
    if rep is None or rep_off is None:
        return
    cache = rep["io"]["cache"]
    c.check("misaligned: the cache stays on and hits",
            cache.get("enabled") is True and cache.get("why") is None and cache["hits"] > 0,
            cache)
    c.check("misaligned: output bytes equal the cache-off run's",
            rep["output"]["bytes"] == rep_off["output"]["bytes"],
            (rep["output"]["bytes"], rep_off["output"]["bytes"]))
    same_shards(c, "misaligned vs cache off", out, out_off)


def case_percentile(c, args, root):
    make_input(root)
    rep, _ = convert(c, args, root, "pct", normalize={"mode": "percentile", "lo": 1, "hi": 99})
    if rep is None:
        return
    cache = rep["io"]["cache"]
    c.check("percentile: two passes keep the cache on", cache.get("enabled") is True, cache)


def scan(c, args, root, tag, extra=None):
    """Runs a scan of in.zarr in 32^3 tiles (the chunk grid); (report or None, config path)."""
    cfg = {"job": "scan", "input": {"store": "in.zarr"}, "tile": [32, 32, 32],
           "histogram": {"bins": 4096, "range": [0, 4096]}, "progress": False}
    return run_job(c, args, root, tag, cfg, extra)


def case_scan(c, args, root):
    make_input(root)
    import zarr
    want = np.bincount(zarr.open(os.path.join(root, "in.zarr"), mode="r")[:].ravel(),
                       minlength=4096)
    rep, path = scan(c, args, root, "scan")
    rep_off, path_off = scan(c, args, root, "scan-off", {"input": {"cache": {"enabled": False}}})
    rep2, _ = scan(c, args, root, "scan2", {"passes": 2})
    if rep is None or rep_off is None or rep2 is None:
        return
    cache = rep["io"]["cache"]
    c.check("scan, one pass on the chunk grid: io.cache says skipped",
            cache.get("enabled") is False and
            cache.get("why") == "no input object is read twice", cache)
    c.check("scan: payload requests = the input's 64 chunks, as with the cache off",
            rep["io"]["requests"]["payload"] == 64 == rep_off["io"]["requests"]["payload"],
            (rep["io"]["requests"], rep_off["io"]["requests"]))
    hist = find_key(rep["result"], "counts")
    c.check("scan: the histogram equals NumPy's bincount",
            hist is not None and list(hist) == [int(v) for v in want], "counts differ")
    c.check("scan: the histogram equals the cache-off run's",
            hist == find_key(rep_off["result"], "counts"), "counts differ")
    c.check("scan, two passes: the cache stays on and hits",
            rep2["io"]["cache"].get("enabled") is True and rep2["io"]["cache"]["hits"] > 0,
            rep2["io"]["cache"])
    on = cc.run([args.shardmill, "plan", path, "--json"], cwd=root)
    off = cc.run([args.shardmill, "plan", path_off, "--json"], cwd=root)
    if c.check("scan: plan exits 0", on.returncode == 0 and off.returncode == 0,
               cc.describe(on if on.returncode else off)):
        a = find_key(json.loads(on.stdout), "peak_rss_bytes_per_rank")
        b = find_key(json.loads(off.stdout), "peak_rss_bytes_per_rank")
        c.check("scan: plan's peak RSS bound is the cache-off job's", a is not None and a == b,
                (a, b))


if __name__ == "__main__":
    cc.main_guard(lambda: cc.case_main("convert.cache_skip", {
        "aligned": case_aligned, "misaligned": case_misaligned, "percentile": case_percentile,
        "scan": case_scan}))
