"""`shardmill plan` models the bytes each pass reads from storage and their time at the file
system's read bandwidth (issue 33 item 6). No timing is measured: the oracles are the TIFF files'
sizes (os.stat) and the shard geometry computed here.

Usage: /usr/bin/python3 test_plan_reads.py --shardmill BIN --work DIR --case reads
  reads  an 8x256x256 uint16 TIFF stack (tifffile, deflate, one strip per slice) planned with
         narrow explicit shards [8,64,64] and a memory limit whose half cannot hold a group's
         window (1 MiB of a slice row): the write pass reads 16x the files (each of the 16
         shards of a slice inflates the whole strip), `read.layout.windowed` false; with 64 MiB
         the group of 16 shards is read once into a window: 1.00x, two windows fit (the next group
         is read ahead: `windows` 2), and the peak RSS bound's input part is both windows (0
         without one). --fs-read-bandwidth B gives
         each pass read_s = bytes_read / B exactly and the write term is at least that; a
         percentile job whose input is kept reads in the scan pass only; a float32 stack's
         min/max pass (SPEC §5) is a `range` pass before the write; a rates file without
         read bandwidths models no read time (fs_read_from "none", read_s 0); the text has the
         groups and reads lines; --fs-bandwidth B (a shared file system's aggregate) caps the
         nodes' reads (read at B, from "--fs-bandwidth") and the output's flush (sync >= bytes /
         B), --fs-read-bandwidth still sets the reads; --fs-read-bandwidth 0, --fs-bandwidth 0
         or fast and --cache hot are usage errors (exit 2, one line).
  calibrate  scaling/calibrate --fs-read-only (a 4 MiB probe, 2 repeats, no wait) on a copy of
         scaling/rates.json: the two read bandwidths written positive, warm >= a tenth of cold,
         the probe's cold reads accounted, every other rate unchanged; `plan --rates` of that
         file uses its cold bandwidth by default and its warm one with --cache warm; with
         --nodes 2 each node reads at it (2x), while --fs-read-bandwidth is the aggregate.
  http   a uint16 Zarr (zarr-python, 32 chunks of 32³, zstd) and a sharded one (4 shards of
         [64,64,64], inner 32³) served by a real nginx on 127.0.0.1, scans planned with rates
         whose HTTP fetch rate is made up (1 ms a request, 100 MB/s a connection): each chunk
         one request (sharded: each inner chunk, and each shard index once), the bytes the chunk
         files' (sampled, +-10 %), read_s the busiest thread's share of requests x 1 ms + bytes /
         100 MB/s; --fs-read-bandwidth caps it; rates without it read at the file system's cold
         bandwidth as before; a local path to the same volume has no requests.
Prints one ok/FAIL line per check and a closing count; exit 1 on any failure.
"""

import json
import os
import subprocess
import sys

from shardmill_test import REPO
from shardmill_test import runner as cc

SHAPE = (8, 256, 256)


def make_stack(path):
    import numpy as np
    import tifffile
    os.makedirs(path, exist_ok=True)
    rng = np.random.default_rng(33)
    for z in range(SHAPE[0]):
        a = rng.integers(0, 4096, SHAPE[1:], dtype=np.uint16)
        tifffile.imwrite(os.path.join(path, f"s{z:03d}.tif"), a, compression="zlib",
                         rowsperstrip=SHAPE[1])
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def plan(args, cfg, *extra):
    return subprocess.run([args.shardmill, "plan", cfg] + list(extra), capture_output=True,
                          text=True, timeout=120)


def plan_json(c, label, args, cfg, *extra):
    r = plan(args, cfg, *extra, "--json")
    if not c.check(f"{label}: exit 0", r.returncode == 0, cc.describe(r)):
        return None
    return json.loads(r.stdout)["estimate"]


def passes(est):
    return {p["pass"]: p for p in est["read"]["passes"]}


def case_reads(c, args, work):
    stack = os.path.join(work, "stack")
    disk = make_stack(stack)
    base = {"job": "convert", "input": {"store": stack, "format": "tiff"}, "progress": False,
            "output": {"path": os.path.join(work, "out.zarr"), "dtype": "uint16",
                       "shard": [8, 64, 64], "chunk": [8, 32, 32]},
            "normalize": {"mode": "window", "lo": 0, "hi": 4095},
            "parallel": {"threads": 1}, "limits": {"memory_bytes": "1MiB"}}
    cfg = cc.write_config(os.path.join(work, "narrow.yaml"), base)
    shards_per_slice = (SHAPE[1] // 64) * (SHAPE[2] // 64)

    est = plan_json(c, "narrow shards, no window", args, cfg)
    if est is not None:
        rd = est["read"]
        p = passes(est)
        c.check(f"input_bytes = the files' {disk} bytes", rd["input_bytes"] == disk, rd)
        c.check("one pass (window normalization): the write pass alone reads",
                list(p) == ["write"], rd["passes"])
        w = p.get("write", {})
        c.check(f"the write pass reads {shards_per_slice}x the files (each shard inflates the "
                "whole strip)", abs(w.get("bytes_read", 0) - shards_per_slice * disk) <= 1 and
                abs(w.get("ratio", 0) - shards_per_slice) < 1e-9 and
                abs(rd["read_ratio"] - shards_per_slice) < 1e-9, w)
        c.check("layout: not windowed, one group of the whole slices",
                rd["layout"]["windowed"] is False and rd["layout"]["groups"] == 1, rd["layout"])
        c.check("no window, no input part in the peak RSS bound",
                est["rss_parts_bytes"]["input"] == 0, est["rss_parts_bytes"])

    big = cc.write_config(os.path.join(work, "window.yaml"),
                          dict(base, limits={"memory_bytes": "64MiB"}))
    est = plan_json(c, "narrow shards, 64 MiB", args, big)
    if est is not None:
        w = passes(est).get("write", {})
        c.check("windowed: the write pass reads the files once",
                est["read"]["layout"]["windowed"] is True and
                est["read"]["layout"]["window_bytes"] == SHAPE[0] * SHAPE[1] * SHAPE[2] * 2 and
                abs(w.get("bytes_read", 0) - disk) <= 1 and abs(w.get("ratio", 0) - 1) < 1e-9,
                est["read"])
        lay = est["read"]["layout"]
        c.check("two windows fit half of 64 MiB: the next group is read ahead (windows 2)",
                lay.get("windows") == 2, lay)
        c.check("the peak RSS bound holds both windows (input part)",
                est["rss_parts_bytes"]["input"] == lay["window_bytes"] * lay.get("windows", 1),
                est["rss_parts_bytes"])

    bw = 1 << 20
    est = plan_json(c, f"--fs-read-bandwidth {bw}", args, cfg, "--fs-read-bandwidth", "1MiB")
    if est is not None:
        w = passes(est).get("write", {})
        want = w.get("bytes_read", 0) / bw
        c.check("read_s = bytes_read / bandwidth; the write term is at least it",
                abs(w.get("read_s", -1) - want) < 1e-6 and est["terms_s"]["write"] >= want - 1e-9
                and est["read"]["fs_read_from"] == "--fs-read-bandwidth" and
                est["read"]["fs_read_bytes_per_s"] == bw, {"want": want, "write": w,
                                                           "terms": est["terms_s"]})
        c.check("seconds include it", est["seconds"] >= want, est["seconds"])

    pct = cc.write_config(os.path.join(work, "pct.yaml"),
                          dict(base, normalize={"mode": "percentile", "lo": 1, "hi": 99},
                               limits={"memory_bytes": "256MiB"}))
    est = plan_json(c, "percentile, input kept", args, pct)
    if est is not None:
        c.check("kept: the scan pass reads, the write pass does not",
                est["assumes"]["kept_input"] is True and list(passes(est)) == ["scan"],
                est["read"]["passes"])

    import numpy as np
    import tifffile
    fstack = os.path.join(work, "float")
    os.makedirs(fstack, exist_ok=True)
    for z in range(4):
        tifffile.imwrite(os.path.join(fstack, f"f{z}.tif"),
                         np.full((64, 64), z + 0.5, dtype=np.float32))
    fcfg = cc.write_config(os.path.join(work, "float.yaml"), {
        "job": "convert", "input": {"store": fstack, "format": "tiff"}, "progress": False,
        "output": {"path": os.path.join(work, "f.zarr")},
        "normalize": {"mode": "window", "lo": 0, "hi": 4}})
    est = plan_json(c, "float32 input, window", args, fcfg)
    if est is not None:
        p = passes(est)
        c.check("a float input's min/max pass reads too (range, then write), and costs its read",
                list(p) == ["range", "write"] and est["terms_s"]["range"] == p["range"]["read_s"]
                and p["range"]["read_s"] > 0, est["read"]["passes"])

    with open(os.path.join(REPO, "scaling", "rates.json")) as f:
        rates = json.load(f)
    for k in ("fs_read_cold_bytes_per_s", "fs_read_warm_bytes_per_s"):
        rates["rates"].pop(k, None)
    old = os.path.join(work, "old-rates.json")
    with open(old, "w") as f:
        json.dump(rates, f)
    est = plan_json(c, "rates without read bandwidths", args, cfg, "--rates", old)
    if est is not None:
        w = passes(est).get("write", {})
        c.check("no read time modelled (fs_read_from none)",
                est["read"]["fs_read_from"] == "none" and est["read"]["fs_read_bytes_per_s"]
                is None and w.get("read_s") == 0 and
                abs(w.get("bytes_read", 0) - shards_per_slice * disk) <= 1, est["read"])

    r = plan(args, cfg, "--fs-read-bandwidth", "1MiB")
    c.check("text: the groups line and the reads line with the ratio and the bandwidth",
            r.returncode == 0 and "    groups   1 group of [8,256,256]" in r.stdout and
            "no window" in r.stdout and "write " in r.stdout and "(16.00x" in r.stdout and
            "at 1.0 MiB/s (--fs-read-bandwidth)" in r.stdout, r.stdout[-900:])
    # --fs-bandwidth (issue 34 item 7): a shared file system's aggregate, divided among the
    # nodes: 4 nodes of the rates' cold bandwidth each, capped at 1 MiB/s for reads and flushes
    wide = plan_json(c, "--ranks 4 --nodes 4", args, cfg, "--ranks", "4", "--nodes", "4")
    est = plan_json(c, "--ranks 4 --nodes 4 --fs-bandwidth 1MiB", args, cfg, "--ranks", "4",
                    "--nodes", "4", "--fs-bandwidth", "1MiB")
    if est is not None and wide is not None:
        w = passes(est).get("write", {})
        c.check("--fs-bandwidth caps the nodes' reads: the aggregate read bandwidth is it",
                est["read"]["fs_read_bytes_per_s"] == bw and
                est["read"]["fs_read_from"] == "--fs-bandwidth" and
                est["assumes"]["fs_bandwidth_bytes_per_s"] == bw and
                abs(w.get("read_s", 0) - w.get("bytes_read", 0) / bw) < 1e-6, est["read"])
        c.check("--fs-bandwidth caps the output's flush: sync >= output bytes / 1 MiB/s, "
                "without it less",
                est["terms_s"]["sync"] >= est["output_bytes"] / bw and
                wide["terms_s"]["sync"] < est["output_bytes"] / bw and
                wide["assumes"]["fs_bandwidth_bytes_per_s"] is None,
                [est["terms_s"], wide["terms_s"], est["output_bytes"]])
    est = plan_json(c, "--fs-bandwidth 1MiB --fs-read-bandwidth 3MiB", args, cfg,
                    "--fs-bandwidth", "1MiB", "--fs-read-bandwidth", "3MiB")
    if est is not None:
        c.check("--fs-read-bandwidth sets the reads even with --fs-bandwidth",
                est["read"]["fs_read_bytes_per_s"] == 3 * bw and
                est["read"]["fs_read_from"] == "--fs-read-bandwidth", est["read"])
    r = plan(args, cfg, "--fs-bandwidth", "1MiB", "--ranks", "2", "--nodes", "2")
    c.check("text: the storage line names the shared file system's aggregate",
            r.returncode == 0 and "    storage  a shared file system of 1.0 MiB/s aggregate "
            "(--fs-bandwidth)" in r.stdout and "(--fs-bandwidth)\n" in r.stdout, r.stdout[-900:])
    for bad, opt in ((["--fs-read-bandwidth", "0"], "--fs-read-bandwidth"),
                     (["--fs-bandwidth", "0"], "--fs-bandwidth"),
                     (["--fs-bandwidth", "fast"], "--fs-bandwidth"),
                     (["--cache", "hot"], "--cache")):
        r = plan(args, cfg, *bad)
        c.check(f"{' '.join(bad)}: exit 2, one error line naming {opt}",
                r.returncode == 2 and r.stdout == "" and
                r.stderr.startswith(f"shardmill: error: {opt}:") and
                len(r.stderr.strip().splitlines()) == 1, cc.describe(r))


def case_calibrate(c, args, work):
    src = os.path.join(REPO, "scaling", "rates.json")
    with open(src) as f:
        before = json.load(f)
    rates = os.path.join(work, "rates.json")
    with open(rates, "w") as f:
        json.dump(before, f)
    r = subprocess.run([sys.executable, os.path.join(REPO, "scaling", "calibrate"),
                        "--fs-read-only", "-o", rates, "--work", work, "--read-mib", "4",
                        "--repeats", "2", "--wait-idle", "0"], capture_output=True, text=True,
                       timeout=120)
    if not c.check("calibrate --fs-read-only: exit 0", r.returncode == 0, cc.describe(r)):
        return
    with open(rates) as f:
        after = json.load(f)
    ra = after["rates"]
    cold, warm = ra.get("fs_read_cold_bytes_per_s", 0), ra.get("fs_read_warm_bytes_per_s", 0)
    c.check("both read bandwidths positive, warm not far below cold",
            cold > 0 and warm > 0 and warm >= cold / 10, {"cold": cold, "warm": warm})
    fr = after["basis"].get("fs_read", {})
    c.check("the basis records the probe (4 MiB, 2 repeats each way)",
            fr.get("file_mib") == 4 and len(fr.get("cold_all", [])) == 2 and
            len(fr.get("warm_all", [])) == 2, fr)
    c.check("every other rate unchanged",
            {k: v for k, v in ra.items() if not k.startswith("fs_read_")} ==
            {k: v for k, v in before["rates"].items() if not k.startswith("fs_read_")})
    make_stack(os.path.join(work, "stack"))
    job = cc.write_config(os.path.join(work, "job.yaml"), {
        "job": "convert", "progress": False,
        "input": {"store": os.path.join(work, "stack"), "format": "tiff"},
        "output": {"path": os.path.join(work, "out.zarr")}})
    for cache, want in (("cold", cold), ("warm", warm)):
        est = plan_json(c, f"plan --rates (calibrated) --cache {cache}", args, job, "--rates",
                        rates, "--cache", cache)
        if est is not None:
            c.check(f"--cache {cache}: the rates' {cache} bandwidth",
                    abs(est["read"]["fs_read_bytes_per_s"] - want) <= 1e-6 * want and
                    est["read"]["fs_read_from"] == f"rates ({cache})" and
                    est["assumes"]["page_cache"] == cache, est["read"])
    est = plan_json(c, "plan --rates (calibrated) --ranks 2 --nodes 2", args, job, "--rates",
                    rates, "--ranks", "2", "--nodes", "2")
    if est is not None:
        c.check("two nodes: each reads at the calibrated node's bandwidth (2x cold)",
                abs(est["read"]["fs_read_bytes_per_s"] - 2 * cold) <= 1e-6 * cold, est["read"])
    est = plan_json(c, "--nodes 2 --fs-read-bandwidth 3GiB", args, job, "--rates", rates,
                    "--ranks", "2", "--nodes", "2", "--fs-read-bandwidth", "3GiB")
    if est is not None:
        c.check("--fs-read-bandwidth is the aggregate, whatever the nodes",
                est["read"]["fs_read_bytes_per_s"] == 3 << 30, est["read"])


def chunk_files(root):
    """(objects, bytes) of a Zarr array's chunk or shard files (its metadata documents apart)."""
    n = b = 0
    for d, _, files in os.walk(root):
        for f in files:
            if not f.startswith(".") and f != "zarr.json":
                n += 1
                b += os.path.getsize(os.path.join(d, f))
    return n, b


def case_http(c, args, work):
    """An http input (a real nginx on 127.0.0.1): each pass's requests and its fetch time at the
    rates' HTTP fetch rate (made up here: 1 ms a request, 100 MB/s a connection), the busiest
    thread's share; the stored bytes from the sample. Oracles: the chunk files (count, sizes) and
    the shard geometry."""
    import numcodecs
    import numpy as np
    import zarr
    from shardmill_test import volumes as mv
    from shardmill_test.nginx_server import NginxServer
    root = os.path.join(work, "www")
    os.makedirs(root, exist_ok=True)
    a = np.random.default_rng(34).normal(1000, 40, (64, 128, 128)).clip(0, 4095).astype("<u2")
    z = zarr.open(os.path.join(root, "v.zarr"), mode="w", shape=a.shape, chunks=(32, 32, 32),
                  dtype="<u2", compressor=numcodecs.Zstd(level=3))
    z[:] = a
    objects, stored = chunk_files(os.path.join(root, "v.zarr"))
    mv.ensure_volume(os.path.join(root, "s.zarr"), (64, 128, 128), chunk=(32, 32, 32),
                     shard=(64, 64, 64), quiet=True)
    with open(os.path.join(REPO, "scaling", "rates.json")) as f:
        doc = json.load(f)
    doc["rates"].pop("http_request_s", None)
    doc["rates"].pop("http_bytes_per_s", None)
    plain = os.path.join(work, "plain.json")
    with open(plain, "w") as f:
        json.dump(doc, f)
    cold = doc["rates"]["fs_read_cold_bytes_per_s"]
    doc["rates"].update(http_request_s=1e-3, http_bytes_per_s=1e8)
    rates = os.path.join(work, "http.json")
    with open(rates, "w") as f:
        json.dump(doc, f)

    def scan_job(store, name):
        return cc.write_config(os.path.join(work, name), {
            "job": "scan", "progress": False, "input": {"store": store},
            "tile": [32, 32, 32], "passes": 1, "parallel": {"threads": 2}})

    with NginxServer(root) as srv:
        job = scan_job(srv.url + "/v.zarr", "http.yaml")
        est = plan_json(c, "plan an http scan --rates (HTTP fetch rate)", args, job, "--rates",
                        rates, "--ranks", "1", "--threads", "2")
        if est is not None:
            p = passes(est).get("scan", {})
            c.check(f"one request a chunk: {objects}", p.get("requests") == objects, p)
            c.check("bytes read: the chunk files' stored bytes (the sample's ratio, +-10 %)",
                    abs(p.get("bytes_read", 0) - stored) <= 0.1 * stored and
                    est["read"]["input_bytes_from"] == "sample", (p, stored))
            want = 0.5 * (objects * 1e-3 + p.get("bytes_read", 0) / 1e8)  # 16 of 32 tiles
            c.check("read_s: the busiest thread's half of the requests and bytes",
                    abs(p.get("read_s", 0) - want) <= 1e-6 * want, (p, want))
            c.check("priced at the rates' HTTP fetch, not the file system's read",
                    est["read"].get("http") == {"request_s": 1e-3,
                                            "bytes_per_s_per_connection": 1e8} and
                    est["read"]["fs_read_from"] == "rates (http)" and
                    est["read"]["fs_read_bytes_per_s"] is None, est["read"])
            c.check("the scan term holds the fetch (a thread a core: they add)",
                    est["terms_s"]["scan"] >= want, est["terms_s"])
        est = plan_json(c, "--fs-read-bandwidth 1000", args, job, "--rates", rates,
                        "--fs-read-bandwidth", "1000")
        if est is not None:
            p = passes(est).get("scan", {})
            c.check("--fs-read-bandwidth caps the connections together",
                    abs(p.get("read_s", 0) - p.get("bytes_read", 0) / 1000) <= 1e-6 *
                    p.get("read_s", 1) and est["read"]["fs_read_from"] == "--fs-read-bandwidth",
                    est["read"])
        est = plan_json(c, "rates without an HTTP fetch rate", args, job, "--rates", plain)
        if est is not None:
            p = passes(est).get("scan", {})
            c.check("no HTTP fetch rate: the file system's cold read, as before",
                    est["read"].get("http") is None and est["read"]["fs_read_from"] == "rates (cold)"
                    and abs(p.get("read_s", 0) - p.get("bytes_read", 0) / cold) <= 1e-6,
                    est["read"])
        r = plan(args, job, "--rates", rates)
        c.check("the text names the requests and the HTTP fetch",
                r.returncode == 0 and f"in {objects} requests" in r.stdout and
                "over HTTP" in r.stdout, cc.describe(r) + r.stdout)
        sjob = scan_job(srv.url + "/s.zarr", "sharded.yaml")
        est = plan_json(c, "plan a sharded http scan", args, sjob, "--rates", rates)
        if est is not None:
            p = passes(est).get("scan", {})
            c.check("sharded: one request an inner chunk (32) and one a shard index (4)",
                    p.get("requests") == 32 + 4, p)
    est = plan_json(c, "the same volume as a local path", args,
                    scan_job(os.path.join(root, "v.zarr"), "local.yaml"), "--rates", rates)
    if est is not None:
        c.check("a local input: the file system's read, no requests",
                est["read"].get("http") is None and "requests" not in passes(est).get("scan", {}) and
                est["read"]["fs_read_from"] == "rates (cold)", est["read"])


if __name__ == "__main__":
    cc.main_guard(lambda: cc.case_main("convert.plan_reads",
                                       {"reads": case_reads, "calibrate": case_calibrate,
                                        "http": case_http}))
