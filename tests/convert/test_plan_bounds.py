"""`shardmill plan` in bounded time and memory whatever --ranks and the input's chunking (issue 32
item 17). No timing is asserted: peak RSS (GNU time's %M), output size and request counts are.

Usage: /usr/bin/python3 test_plan_bounds.py --shardmill BIN --work DIR --case CASE
Cases (one ctest each: convert.plan_bounds.<case>):
  ranks   a 64-shard convert (64^3 uint8, zarr-python, chunks and shards 16^3: every shard costs
          the same) planned for --ranks 1048576, text and --json: exit 0, peak RSS under 64 MiB,
          the JSON under 64 KiB and the text under 200 lines; `ranks` lists exactly the 64 ranks
          that get a tile / shard: balanced = the owner formula of docs/internals/ranks.md
          computed here (tile i to rank floor((i + 1/2) * N / 64)), block = ranks 0..63, each
          with one item, in rank order; `idle_ranks` = N - 64, `idle_listed` false; the text says
          "1048512 of the 1048576 ranks get no shards". With --ranks 3 (fewer ranks than items)
          every rank is listed as before (`idle_listed` true).
  sample  a 2^60-voxel uint8 array of [1,1,1] chunks (zarr.json only: every chunk missing),
          served over HTTP by Python's http.server with a request log: plan (default auto
          layout: 64^3 output chunks, 2^18 input chunks each) exits 0 after at most a few
          requests (metadata only: ratio_from "metadata", input_chunks_needed 262144, the text
          names --ratio); the same array with [16,16,16] chunks is still sampled (ratio_from
          "sample") in at most 4096 chunk requests plus the metadata.
  parts   the peak-RSS bound's parts follow what a rank holds: plan --json of a two-pass scan over
          HTTP (http.server) of a 128^3 uint16 zarr-python array (32^3 chunks, zstd) has input 0 and
          its cache part within 0.95..1.15x the array's stored bytes (its chunk files' sizes); a
          convert of the same local array with shards [64,64,64] (whole in input chunks, one pass:
          no object is read twice, so the run skips the cache) counts no cache and no chunk memo;
          with shards [48,64,64] the stored bytes and a window or memos.
Prints one ok/FAIL line per check and a closing count; exit 1 on any failure.
"""

import argparse
import json
import os
import subprocess
import sys
import time

from shardmill_test import runner as cc
from shardmill_test.checks import Checks

N = 1048576
RSS_MAX_KIB = 64 * 1024


def timed(cmd, cwd, timeout=120):
    """(CompletedProcess or None on timeout, peak RSS KiB) of cmd under GNU time."""
    rss_file = os.path.join(cwd, "rss.txt")
    try:
        r = subprocess.run(["/usr/bin/time", "-o", rss_file, "-f", "%M"] + cmd, cwd=cwd,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, None
    try:
        rss = int(open(rss_file).read().split()[-1])
    except (OSError, ValueError, IndexError):
        rss = None
    return r, rss


def owners_balanced(items, n):
    """The balanced owner of each equal-cost item: floor((i + 1/2) * n / items)."""
    return [min(n - 1, (2 * i + 1) * n // (2 * items)) for i in range(items)]


def check_listing(c, label, ph, items, n, want_ranks):
    ranks = ph.get("ranks", [])
    c.check(f"{label}: lists exactly the {items} ranks with work, in rank order, one item each "
            f"covering the items once", [r["rank"] for r in ranks] == want_ranks and
            [r["first"] for r in ranks] == list(range(items)) and
            all(r["count"] == 1 for r in ranks), ranks[:4])
    c.check(f"{label}: idle_ranks {n - items}, idle_listed false",
            ph.get("idle_ranks") == n - items and ph.get("idle_listed") is False,
            {k: ph.get(k) for k in ("idle_ranks", "idle_listed", "items")})


def case_ranks(c, args, work):
    import numpy as np
    import zarr
    inp = os.path.join(work, "in.zarr")
    zarr.open(inp, mode="w", shape=(64, 64, 64), chunks=(16, 16, 16), dtype="u1")[:] = \
        np.random.default_rng(17).integers(0, 256, (64, 64, 64), dtype=np.uint8)
    cfg = cc.write_config(os.path.join(work, "job.yaml"), {
        "job": "convert", "input": {"store": inp}, "progress": False,
        "output": {"path": "out.zarr", "shard": [16, 16, 16], "chunk": [8, 8, 8]}})
    for part, want in (("balanced", owners_balanced(64, N)), ("block", list(range(64)))):
        base = [args.shardmill, "plan", cfg, "--ranks", str(N), "--set",
                f"parallel.partition={part}"]
        r, rss = timed(base + ["--json"], work)
        label = f"--ranks {N} --json ({part})"
        if not c.check(f"{label}: exit 0 within 120 s", r is not None and r.returncode == 0,
                       cc.describe(r) if r else "timed out"):
            continue
        c.check(f"{label}: peak RSS {rss} KiB under {RSS_MAX_KIB} KiB",
                rss is not None and rss < RSS_MAX_KIB, rss)
        c.check(f"{label}: the JSON is under 64 KiB ({len(r.stdout)} bytes)",
                len(r.stdout) < 64 << 10)
        plan = json.loads(r.stdout)
        for key in ("tiles", "shards"):
            check_listing(c, f"{label} {key}", plan.get(key, {}), 64, N, want)
        r, rss = timed(base, work)
        label = f"--ranks {N} ({part}, text)"
        if not c.check(f"{label}: exit 0 within 120 s", r is not None and r.returncode == 0,
                       cc.describe(r) if r else "timed out"):
            continue
        lines = r.stdout.splitlines()
        c.check(f"{label}: peak RSS {rss} KiB under {RSS_MAX_KIB} KiB, {len(lines)} lines "
                f"under 200", rss is not None and rss < RSS_MAX_KIB and len(lines) < 200)
        c.check(f"{label}: says the ranks beyond the shards get nothing",
                f"{N - 64} of the {N} ranks get no shards" in r.stdout and
                f"{N - 64} of the {N} ranks get no tiles" in r.stdout, r.stdout[:600])
        rows = [ln.split() for ln in lines if "|" in ln and ln.split()[0].isdigit()]
        c.check(f"{label}: one row per rank with work, those ranks",
                [int(x[0]) for x in rows] == want, [x[:1] for x in rows[:4]])
    r, _ = timed([args.shardmill, "plan", cfg, "--ranks", "3", "--json"], work)
    ok = r is not None and r.returncode == 0
    plan = json.loads(r.stdout) if ok else {}
    c.check("--ranks 3: every rank listed (idle_listed true, idle_ranks 0)",
            ok and [x["rank"] for x in plan["shards"]["ranks"]] == [0, 1, 2] and
            plan["shards"]["idle_listed"] is True and plan["shards"]["idle_ranks"] == 0,
            plan.get("shards", cc.describe(r) if r else "timed out"))


class Server:
    """Python's http.server (shardmill_test.plain_server) with its request log, by pid."""

    def __init__(self, root, work):
        self.root, self.work = root, work
        self.log_path = os.path.join(work, "requests.jsonl")
        port_file = os.path.join(work, "port")
        for p in (self.log_path, port_file):
            if os.path.exists(p):
                os.unlink(p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "shardmill_test.plain_server", "--root", root,
             "--port-file", port_file, "--log", self.log_path, "--max-lifetime", "600"],
            stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("plain_server did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{int(open(port_file).read())}"

    def requests(self):
        prev = -1
        lines = []
        for _ in range(50):  # a handler logs after the client may have its last byte
            lines = open(self.log_path).read().splitlines() if os.path.exists(
                self.log_path) else []
            if len(lines) == prev:
                break
            prev = len(lines)
            time.sleep(0.1)
        return [json.loads(x) for x in lines]

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None


def huge_array(path, chunk):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "zarr.json"), "w") as f:
        json.dump({"zarr_format": 3, "node_type": "array", "shape": [1 << 20] * 3,
                   "data_type": "uint8",
                   "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunk}},
                   "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                   "fill_value": 0,
                   "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}, f)


def case_sample(c, args, work):
    root = os.path.join(work, "root")
    huge_array(os.path.join(root, "ones.zarr"), [1, 1, 1])
    huge_array(os.path.join(root, "sixteen.zarr"), [16, 16, 16])
    srv = Server(root, work)
    try:
        for name, want_from, max_req in (("ones", "metadata", 16), ("sixteen", "sample", 4096 + 16)):
            cfg = cc.write_config(os.path.join(work, f"{name}.yaml"), {
                "job": "convert", "input": {"store": f"{srv.url}/{name}.zarr"},
                "output": {"path": "out.zarr"}, "progress": False})
            before = len(srv.requests())
            r, rss = timed([args.shardmill, "plan", cfg, "--ranks", "4", "--json"], work,
                           timeout=300)
            n = len(srv.requests()) - before
            label = f"[{name}] chunks of a 2^60-voxel array"
            if not c.check(f"{label}: plan exits 0", r is not None and r.returncode == 0,
                           cc.describe(r) if r else "timed out after 300 s"):
                continue
            est = json.loads(r.stdout).get("estimate", {}).get("sample", {})
            c.check(f"{label}: ratio_from {want_from!r}", est.get("ratio_from") == want_from, est)
            c.check(f"{label}: {n} HTTP requests, at most {max_req}", n <= max_req, n)
            c.check(f"{label}: peak RSS {rss} KiB under {RSS_MAX_KIB} KiB",
                    rss is not None and rss < RSS_MAX_KIB, rss)
            if want_from == "metadata":
                c.check(f"{label}: input_chunks_needed 262144 (a 64^3 output chunk)",
                        est.get("input_chunks_needed") == 64 ** 3, est)
                r, _ = timed([args.shardmill, "plan", cfg, "--ranks", "4"], work)
                c.check(f"{label}: the text says the ratio was not sampled and names --ratio",
                        r is not None and "not sampled" in r.stdout and "--ratio" in r.stdout,
                        r.stdout[-600:] if r else "timed out")
            else:
                c.check(f"{label}: input_chunks_read {est.get('input_chunks_read')} <= 4096",
                        0 < est.get("input_chunks_read", 0) <= 4096, est)
    finally:
        srv.stop()


def stored_bytes(path):
    """The array's chunk files' bytes (its .zarray/.zattrs/.zgroup left out): what the
    encoded-object cache can hold of it."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path)
               for f in fs if not f.startswith("."))


def case_parts(c, args, work):
    """The peak-RSS bound's parts follow what a rank holds (issue 34: bound <= 1.3x the peak):
    a scan keeps no input and its cache holds the input's stored bytes (sampled over HTTP); a
    convert whose shards are whole in input chunks reads them straight in (no chunk memo)."""
    import numpy as np
    import zarr
    from numcodecs import Zstd
    root = os.path.join(work, "root")
    path = os.path.join(root, "vol.zarr")
    rng = np.random.default_rng(34)  # 12-bit values, the same statistics in every chunk
    vol = rng.integers(0, 4096, size=(128, 128, 128), dtype=np.uint16)
    z = zarr.open(path, mode="w", shape=vol.shape, chunks=(32, 32, 32), dtype="<u2",
                  compressor=Zstd(level=3))
    z[:] = vol
    stored, decoded = stored_bytes(path), vol.nbytes
    c.check(f"the input compresses ({stored} of {decoded} bytes)", stored < 0.9 * decoded)
    srv = Server(root, work)
    try:
        cfg = cc.write_config(os.path.join(work, "scan.yaml"), {
            "job": "scan", "input": {"store": f"{srv.url}/vol.zarr",
                                     "cache": {"enabled": True, "max_bytes": "256MiB"}},
            # two passes: the second reads every chunk again, so the run keeps the cache (one
            # pass of tiles on the chunk grid skips it: convert.cache_skip.scan)
            "tile": [32, 32, 32], "passes": 2, "progress": False})
        r, _ = timed([args.shardmill, "plan", cfg, "--ranks", "1", "--threads", "2", "--json"],
                     work)
        if c.check("scan over HTTP: plan exits 0", r is not None and r.returncode == 0,
                   cc.describe(r) if r else "timed out"):
            parts = json.loads(r.stdout)["estimate"]["rss_parts_bytes"]
            c.check("scan: the input part is 0 (a scan keeps nothing)", parts["input"] == 0,
                    parts)
            c.check(f"scan: the cache part {parts['caches']} within 0.95..1.15x the stored "
                    f"bytes {stored} (sampled, not the decoded {decoded})",
                    0.95 * stored <= parts["caches"] <= 1.15 * stored, parts)
    finally:
        srv.stop()
    for shard, memo in (([64, 64, 64], False), ([48, 64, 64], True)):
        cfg = cc.write_config(os.path.join(work, "convert.yaml"), {
            "job": "convert", "input": {"store": path,
                                        "cache": {"enabled": True, "max_bytes": "256MiB"}},
            "normalize": {"mode": "scale", "divisor": 4095},
            "output": {"path": os.path.join(work, "out.zarr"), "shard": shard,
                       "chunk": [16, 16, 16]}, "progress": False})
        r, _ = timed([args.shardmill, "plan", cfg, "--ranks", "1", "--threads", "2", "--json"],
                     work)
        if not c.check(f"convert, shards {shard}: plan exits 0",
                       r is not None and r.returncode == 0, cc.describe(r) if r else "timed out"):
            continue
        parts = json.loads(r.stdout)["estimate"]["rss_parts_bytes"]
        # a shard's box cutting input chunks: the cache holds the stored bytes (the local files'
        # sizes) and a chunk memo per thread (or a group's window); whole chunks: the run skips
        # the cache (sm_run_cache_useful) and keeps no memo
        extra = parts["caches"] - stored
        if memo:  # read through a group's window (input) or the threads' chunk memos
            c.check(f"convert, shards {shard} across input chunks: the stored bytes and a "
                    f"window or memos of at least a chunk per thread ({extra} + "
                    f"{parts['input']})", extra >= 0 and extra + parts["input"] >= 2 * 65536,
                    parts)
        else:
            c.check(f"convert, shards {shard} whole in input chunks: no cache and no chunk memo "
                    f"(caches {parts['caches']})", parts["caches"] < 65536, parts)


CASES = {"ranks": case_ranks, "sample": case_sample, "parts": case_parts}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    args = ap.parse_args()
    args.shardmill = os.path.abspath(args.shardmill)
    work = cc.fresh_dir(os.path.join(os.path.abspath(args.work), args.case))
    c = Checks(f"convert.plan_bounds.{args.case}")
    CASES[args.case](c, args, work)
    return c.done()


if __name__ == "__main__":
    cc.main_guard(main)
