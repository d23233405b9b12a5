#!/usr/bin/python3
"""`shardmill run` of the read-bench job (SPEC §4, §8 W3) against independent oracles.

    test_readbench.py --shardmill BIN --work DIR [--http]

W3-like arrays (rb_common.py: 512x512 uint16 written by zarr-python 2.13 and
tests/lib/shardmill_test/shard_writer.py) are read at offset [7, 11] with extents 64, 256 and 500. Checked
per case: the report's offset, shape, repetitions, read_ns (min <= median <= max, one sample per
repetition), bytes, voxels/s, and the region's SPEC §5 checksums against NumPy; the counters
against the files themselves: with the encoded-object cache on, payload requests = the chunks
the region touches and payload bytes = those chunk files' sizes; with it off, both times the
number of reads; for a sharded array (cache off) index requests = shards touched with the
shard-index cache on and shards touched x reads with it off, payload bytes = the touched inner
chunks' sizes (from the shard index) x reads; the 65,540-byte index of the index-stress array.
Every SPEC §7 top-level section is checked (null only where read-bench has nothing to report).
--http serves the arrays with nginx on loopback and compares the report's request and byte
counters with nginx's access log (metadata, index = suffix ranges, payload).
Prints one line per check and a closing 'N passed, N failed'; exit 1 on any failure.
"""

import argparse
import os
import sys


from shardmill_test.checks import Checks

import rb_common as rc  # noqa: E402

OFF = [7, 11]
EXTENTS = [64, 256, 500]
META = ("zarr.json", ".zarray", ".zattrs", ".zgroup")


def bench(args, c, store, name, tag, reps=3, warm=1, extents=EXTENTS, sets=()):
    """Runs read-bench; returns the report (or None after a failed check)."""
    d = os.path.join(args.work, "runs")
    os.makedirs(d, exist_ok=True)
    cfg = os.path.join(d, f"{name}-{tag}.yaml")
    rep = os.path.join(d, f"{name}-{tag}.json")
    rc.write_config(cfg, ["job: read-bench", "input:", f"  store: {store}",
                          f"roi: {{offset: {OFF}}}",
                          f"read_bench: {{extents: {list(extents)}, repeats: {reps}, "
                          f"warmup: {warm}}}", "progress: false"])
    cmd = [args.shardmill, "run", cfg, "--report", rep] + [x for s in sets for x in ("--set", s)]
    p = rc.run(cmd)
    if not c.expect(p.returncode == 0, f"{name} {tag}: exit 0", p.stderr.strip()):
        return None
    lines = p.stdout.splitlines()
    c.expect(0 < len(lines) <= 12 and lines[0].startswith("read-bench: ")
            and any("report: " in ln for ln in lines),
            f"{name} {tag}: a short summary on stdout", repr(p.stdout[:300]))
    return rc.load_json(rep)


def check_cases(c, a, name, tag, rep, reps, warm, extents=EXTENTS):
    probs = rc.schema_problems(rep, "read-bench")
    c.expect(not probs, f"{name} {tag}: every SPEC §7 section", "; ".join(probs))
    rb = rep.get("read_bench", {})
    cases = rb.get("cases", [])
    c.expect(rb.get("repeats") == reps and rb.get("warmup") == warm and len(cases) == len(extents),
            f"{name} {tag}: read_bench.repeats/warmup/cases", str({k: rb.get(k) for k in
                                                                    ("repeats", "warmup")}))
    tot_s, tot_w, tot_v = 0, 0, 0
    for e, cs in zip(extents, cases):
        shape = [e, e]
        s, w = rc.checksums(a, OFF, shape, a.shape)
        tot_s += s
        tot_w += w
        tot_v += e * e
        label = f"{name} {tag} {e}x{e}"
        c.expect(cs["offset"] == OFF and cs["shape"] == shape and cs["repetitions"] == reps
                and cs["voxels"] == e * e and cs["bytes"] == 2 * e * e,
                f"{label}: offset, shape, repetitions, voxels, bytes",
                str({k: cs.get(k) for k in ("offset", "shape", "repetitions", "voxels", "bytes")}))
        c.expect(cs["checksum"] == s and cs["weighted_checksum"] == w,
                f"{label}: checksums equal NumPy's",
                f"got {cs['checksum']}, {cs['weighted_checksum']}; NumPy {s}, {w}")
        t = cs["read_ns"]
        c.expect(len(t["samples"]) == reps and 0 < t["min"] <= t["median"] <= t["max"]
                and t["min"] == min(t["samples"]) and t["max"] == max(t["samples"]),
                f"{label}: read_ns min <= median <= max, one sample per repetition", str(t))
        vps = cs["voxels_per_s"]
        c.expect(abs(vps - e * e / (t["median"] / 1e9)) <= 1e-6 * vps,
                f"{label}: voxels_per_s = voxels / median read time", str(vps))
    res = rep["result"]
    c.expect(res["voxels"] == tot_v and res["voxels_processed"] == tot_v * reps
            and res["checksum"] == tot_s and res["weighted_checksum"] == tot_w % 2**64,
            f"{name} {tag}: result sums the cases", str(res))
    return cases


def unsharded(args, c, a, paths, name):
    store = paths[name]
    reps, warm = 3, 1
    reads = reps + warm
    rep = bench(args, c, store, name, "cache-on", reps, warm)
    if rep is None:
        return
    cases = check_cases(c, a, name, "cache-on", rep, reps, warm)
    meta = []
    for e, cs in zip(EXTENTS, cases):
        shape = [e, e]
        files = rc.touched_files(store, name, OFF, shape)
        io = cs["io"]
        label = f"{name} cache-on {e}x{e}"
        c.expect(cs["chunks_touched"] == len(files), f"{label}: chunks_touched = {len(files)}",
                str(cs["chunks_touched"]))
        c.expect(io["requests"]["payload"] == len(files),
                f"{label}: payload requests = chunks touched ({len(files)})", str(io["requests"]))
        c.expect(io["bytes"]["payload"] == sum(files),
                f"{label}: payload bytes = the touched chunk files ({sum(files)})",
                str(io["bytes"]))
        c.expect(io["cache"]["misses"] == len(files) + io["requests"]["metadata"]
                and io["cache"]["hits"] == len(files) * reps,
                f"{label}: cache misses = chunks + metadata, hits = chunks x timed reads",
                str(io["cache"]))
        meta.append(io["requests"]["metadata"])
    c.expect(len(set(meta)) == 1 and 1 <= meta[0] <= 3,
            f"{name}: metadata requests once per case, never per read", str(meta))
    tot = sum(cs["io"]["requests"]["payload"] for cs in cases)
    c.expect(rep["io"]["requests"]["payload"] == tot, f"{name}: io sums the cases",
            str(rep["io"]["requests"]))
    rep = bench(args, c, store, name, "cache-off", reps, warm, sets=["input.cache.enabled=false"])
    if rep is None:
        return
    cases = check_cases(c, a, name, "cache-off", rep, reps, warm)
    for e, cs in zip(EXTENTS, cases):
        files = rc.touched_files(store, name, OFF, [e, e])
        io = cs["io"]
        c.expect(io["requests"]["payload"] == len(files) * reads
                and io["bytes"]["payload"] == sum(files) * reads
                and io["cache"]["enabled"] is False,
                f"{name} cache-off {e}x{e}: payload requests and bytes = chunks x {reads} reads",
                str(io))


def sharded(args, c, a, paths, name, extents):
    store = paths[name]
    reps, warm = 3, 1
    reads = reps + warm
    per = {}
    for tag, sets in (("icache-on", []), ("icache-off", ["input.index_cache.max_entries=0"])):
        sets = sets + ["input.cache.enabled=false"]
        rep = bench(args, c, store, name, tag, reps, warm, extents, sets)
        if rep is None:
            return
        cases = check_cases(c, a, name, tag, rep, reps, warm, extents)
        c.expect(rep["read_bench"]["index_cache"]["enabled"] == (tag == "icache-on"),
                f"{name} {tag}: read_bench.index_cache.enabled", str(rep["read_bench"]))
        per[tag] = cases
        for e, cs in zip(extents, cases):
            nshards, inner_bytes = rc.touched_inner(store, name, OFF, [e, e])
            io = cs["io"]
            label = f"{name} {tag} {e}x{e}"
            want = nshards if tag == "icache-on" else nshards * reads
            c.expect(cs["chunks_touched"] == nshards, f"{label}: chunks_touched = shards touched",
                    str(cs["chunks_touched"]))
            c.expect(io["requests"]["index"] == want,
                    f"{label}: index requests = {want} (shards {nshards}, {reads} reads)",
                    str(io["requests"]))
            nidx = (ARR_INNER[name]) * 16 + 4
            c.expect(io["bytes"]["index"] == want * nidx,
                    f"{label}: index bytes = {want} x {nidx}", str(io["bytes"]))
            c.expect(io["bytes"]["payload"] == inner_bytes * reads,
                    f"{label}: payload bytes = touched inner chunks x {reads} reads",
                    f"{io['bytes']['payload']} vs {inner_bytes * reads}")
            ninner = rc.count(rc.grid_range(OFF, [e, e], rc.ARRAYS[name]["chunks"]))
            c.expect(nshards * reads <= io["requests"]["payload"] <= ninner * reads,
                    f"{label}: payload requests between shards and inner chunks x reads",
                    str(io["requests"]))
            ic = io["index_cache"]
            if tag == "icache-on":
                c.expect(ic["misses"] == nshards and ic["hits"] == nshards * (reads - 1),
                        f"{label}: index cache misses = shards, hits = shards x later reads",
                        str(ic))
            else:
                c.expect(ic["hits"] == 0, f"{label}: no index cache hits when disabled", str(ic))
    on = sum(cs["io"]["requests"]["index"] for cs in per["icache-on"])
    off = sum(cs["io"]["requests"]["index"] for cs in per["icache-off"])
    c.expect(off == on * reads, f"{name}: index cache off sends {reads}x the index requests",
            f"on {on}, off {off}")
    # the encoded-object cache on: later reads cost no payload request
    r1 = bench(args, c, store, name, "cache-on-1", 1, 0, extents)
    r3 = bench(args, c, store, name, "cache-on-3", 3, 0, extents)
    if r1 and r3:
        p1 = [cs["io"]["requests"]["payload"] for cs in r1["read_bench"]["cases"]]
        p3 = [cs["io"]["requests"]["payload"] for cs in r3["read_bench"]["cases"]]
        c.expect(p1 == p3, f"{name}: cache on, payload requests the same for 1 and 3 reads",
                f"{p1} vs {p3}")


ARR_INNER = {"v3_shard_gzip": (256 // 64) ** 2, "v3_index_stress": (512 // 8) ** 2}


def over_http(args, c, a, paths):
    from shardmill_test.nginx_server import NginxServer
    root = os.path.dirname(paths["v2_gzip"])
    with NginxServer(root) as srv:
        for name, extents in (("v2_gzip", [64, 256]), ("v3_shard_gzip", [64, 256])):
            for cache in ("true", "false"):
                mark = srv.mark()
                rep = bench(args, c, f"{srv.url}/{name}.zarr", name, f"http-cache-{cache}", 2, 1,
                            extents, [f"input.cache.enabled={cache}"])
                if rep is None:
                    continue
                check_cases(c, a, name, f"http-cache-{cache}", rep, 2, 1, extents)
                io = rep["io"]
                # nginx logs a request after its response: wait for as many lines as the report
                # counts (a short count then shows as a mismatch below, not as a race)
                log = srv.requests(since=mark, expect=sum(io["requests"].values()), timeout=10)
                m = [r for r in log if r["uri"].rsplit("/", 1)[-1] in META]
                idx = [r for r in log if r not in m and (r.get("range") or "").startswith("bytes=-")]
                pay = [r for r in log if r not in m and r not in idx]
                got = {k: io["requests"][k] for k in ("metadata", "index", "payload")}
                want = {"metadata": len(m), "index": len(idx), "payload": len(pay)}
                c.expect(got == want, f"{name} http cache {cache}: requests = nginx's log",
                        f"report {got}, nginx {want}")
                wb = {"index": sum(r["bytes"] for r in idx),
                      "payload": sum(r["bytes"] for r in pay)}
                gb = {k: io["bytes"][k] for k in ("index", "payload")}
                c.expect(gb == wb, f"{name} http cache {cache}: bytes = nginx's body bytes",
                        f"report {gb}, nginx {wb}")
                if name == "v2_gzip" and cache == "true":
                    n = sum(len(rc.touched_files(paths[name], name, OFF, [e, e])) for e in extents)
                    c.expect(len(pay) == n, f"{name} http: payload GETs = chunks touched ({n})",
                            str(len(pay)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--http", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    paths = rc.generate(os.path.join(args.work, "arrays"))
    a = rc.w3()
    c = Checks("readbench")
    if args.http:
        over_http(args, c, a, paths)
    else:
        unsharded(args, c, a, paths, "v2_gzip")
        unsharded(args, c, a, paths, "v3_gzip")
        sharded(args, c, a, paths, "v3_shard_gzip", EXTENTS)
        sharded(args, c, a, paths, "v3_index_stress", [64])
    return c.done()


if __name__ == "__main__":
    sys.exit(main())
