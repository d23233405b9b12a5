#!/usr/bin/python3
"""A server that ignores Range (SPEC §3): Python's http.server (tests/lib/shardmill_test/plain_server.py,
which only adds a request log to it) answers every ranged GET with 200 and the whole file.
shardmill must detect it, fetch each shard ONCE, keep it and slice every later range from it,
count the bytes that really crossed the wire, and say so in the report (io.http).

For `shardmill read` of regions and a `shardmill run` scan of the sharded fixtures:
- values equal NumPy (read) / the NumPy checksums and histogram (scan);
- every shard object is requested exactly once, metadata once;
- io.bytes (all classes) == the body bytes the server sent (sum of the Content-Length served),
  io.requests == the requests in the server's log;
- io.http.range_ignored is true, io.http.whole_objects == the shards fetched.

Usage: test_range_ignored.py --shardmill BIN --fixtures DIR [unittest args]
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

from shardmill_test import report_json
from shardmill_test.http_reads import check_error_line, expected, load_manifest, region_bytes, run_read

ARGS = None
MANIFEST = None


class PlainServer:
    """plain_server.py as a child process on a free 127.0.0.1 port, stopped by its pid."""

    def __init__(self, root):
        self.root = root
        self.dir = tempfile.mkdtemp(prefix="shardmill-plain-")
        self.log_path = os.path.join(self.dir, "requests.jsonl")
        self.proc = None

    def __enter__(self):
        port_file = os.path.join(self.dir, "port")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "shardmill_test.plain_server", "--root", self.root,
             "--port-file", port_file, "--log", self.log_path, "--max-lifetime", "240"],
            stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError("plain_server did not start")
            time.sleep(0.02)
        with open(port_file) as f:
            self.url = f"http://127.0.0.1:{int(f.read())}"
        return self

    def __exit__(self, *exc):
        p, self.proc = self.proc, None
        if p is not None and p.poll() is None:
            p.terminate()  # by pid
            p.wait(timeout=10)
        return False

    def log(self, since=0):
        """Requests logged from line `since` on, once the log stops growing (a handler writes
        its line after the client may already have its last byte)."""
        prev = -1
        lines = []
        for _ in range(50):
            if os.path.exists(self.log_path):
                with open(self.log_path) as f:
                    lines = f.read().splitlines()
            if len(lines) == prev:
                break
            prev = len(lines)
            time.sleep(0.1)
        return [json.loads(l) for l in lines[since:]]

    def mark(self):
        return len(self.log())


def scan_oracle(arr):
    """SPEC §5 checksum, weighted checksum and (uint16) one-bin-per-value histogram."""
    v = arr.reshape(-1).astype(np.uint64)
    checksum = int(np.sum(v, dtype=np.uint64).view(np.int64))
    i = np.arange(1, v.size + 1, dtype=np.uint64)
    weighted = int(np.sum(v * i, dtype=np.uint64))
    return checksum, weighted


class RangeIgnored(unittest.TestCase):
    maxDiff = None

    def check_io(self, log, stats, m, ctx):
        """Each shard once, metadata once, counters == the server's log."""
        self.assertTrue(all(r["status"] in (200, 404) for r in log), log)
        per_path = collections.Counter(r["path"] for r in log)
        shards = [p for p in per_path if p.startswith(f"{m['path']}/c/")]
        self.assertTrue(shards, f"no shard requested: {ctx}")
        again = {p: n for p, n in per_path.items() if n != 1}
        self.assertEqual(again, {}, f"objects requested more than once: {ctx}\n{log}")
        self.assertEqual(sum(stats["requests"].values()), len(log), f"requests vs log: {ctx}")
        sent = sum(r["sent"] for r in log)
        self.assertEqual(sum(stats["bytes"].values()), sent, f"io.bytes vs bytes sent: {ctx}")
        got = [r for r in log if r["path"] in shards and r["status"] == 200]
        http = stats["http"]
        self.assertIsNotNone(http, f"no io.http section: {ctx}")
        # a region inside the missing shard gets only a 404: nothing to learn about ranges
        self.assertEqual(http["range_ignored"], bool(got), f"range_ignored: {ctx}\n{log}")
        self.assertEqual(http["whole_objects"], len(got), f"whole_objects: {ctx}")
        return got

    def test_read_regions(self):
        for name in ("v3_sharded", "v3_sharded_start"):
            if name not in MANIFEST:
                continue
            m = MANIFEST[name]
            exp = expected(ARGS.fixtures, m)
            shape = m["shape"]
            regions = [([0] * len(shape), list(shape)),
                       ([2, 10, 30], [12, 80, 60]),  # several shards, part of each
                       ([9, 64, 64], [6, 30, 30]),   # inside the missing shard c/1/1/1
                       ([9, 60, 60], [6, 30, 30])]   # the missing shard and three others
            for off, shp in regions:
                with self.subTest(array=name, offset=off), PlainServer(ARGS.fixtures) as srv:
                    ctx = f"{name} {off}+{shp}"
                    res = run_read(ARGS.shardmill, f"{srv.url}/{m['path']}", off, shp)
                    self.assertEqual(res.rc, 0, f"{ctx}: {res.describe()}")
                    self.assertEqual(res.data, region_bytes(exp, off, shp), f"WRONG DATA {ctx}")
                    log = srv.log()
                    got = self.check_io(log, res.stats, m, ctx)
                    # the shards touched were all read: inner ranges came from the kept copies
                    if got:
                        self.assertGreater(res.stats["http"]["kept_slices"], 0, ctx)

    def test_scan_with_threads_and_cache_on_and_off(self):
        name = "v3_sharded"
        if name not in MANIFEST:
            self.skipTest("no sharded fixture")
        m = MANIFEST[name]
        exp = expected(ARGS.fixtures, m)
        checksum, weighted = scan_oracle(exp)
        hist = np.bincount(exp.reshape(-1), minlength=65536)
        for cache in ("true", "false"):
            for threads in (1, 4):
                with self.subTest(cache=cache, threads=threads), \
                        PlainServer(ARGS.fixtures) as srv, \
                        tempfile.TemporaryDirectory(prefix="shardmill-ri-") as d:
                    ctx = f"scan cache={cache} threads={threads}"
                    cfg = os.path.join(d, "scan.yaml")
                    rep = os.path.join(d, "report.json")
                    with open(cfg, "w") as f:
                        f.write(f"job: scan\ninput:\n  store: {srv.url}/{m['path']}\n"
                                f"  cache: {{enabled: {cache}}}\ntile: [4, 32, 32]\n"
                                f"parallel: {{threads: {threads}}}\n")
                    p = subprocess.run([ARGS.shardmill, "run", cfg, "--report", rep],
                                       capture_output=True, text=True, timeout=120)
                    self.assertEqual(p.returncode, 0, f"{ctx}: {p.stderr}")
                    with open(rep) as f:
                        r = report_json.with_int_checksums(json.load(f))
                    self.assertEqual(r["result"]["checksum"], checksum, ctx)
                    self.assertEqual(r["result"]["weighted_checksum"], weighted, ctx)
                    self.assertEqual(r["result"]["histogram"]["counts"], hist.tolist(), ctx)
                    self.check_io(srv.log(), r["io"], m, ctx)

    def test_max_object_bytes_bounds_the_keep(self):
        # The kept objects are capped at limits.max_object_bytes: with the cap at the largest
        # shard a one-thread read, which reads shard after shard, still fetches every shard once
        # (the keep holds the shard being read; with more threads the shards read side by side
        # evict each other, which the cap allows); one byte less and the largest shard is
        # refused (exit 5) before it is buffered.
        if "v3_sharded" not in MANIFEST:
            self.skipTest("no sharded fixture")
        m = MANIFEST["v3_sharded"]
        root = os.path.join(ARGS.fixtures, m["path"], "c")
        biggest = max(os.path.getsize(os.path.join(dp, f))
                      for dp, _, fs in os.walk(root) for f in fs)
        exp = expected(ARGS.fixtures, m)
        with PlainServer(ARGS.fixtures) as srv:
            res = run_read(ARGS.shardmill, f"{srv.url}/{m['path']}",
                           extra=["--max-object-bytes", str(biggest), "--threads", "1"])
            self.assertEqual(res.rc, 0, res.describe())
            self.assertEqual(res.data, region_bytes(exp, [0, 0, 0], list(exp.shape)))
            self.check_io(srv.log(), res.stats, m, f"max_object_bytes={biggest}")
        with PlainServer(ARGS.fixtures) as srv:
            res = run_read(ARGS.shardmill, f"{srv.url}/{m['path']}",
                           extra=["--max-object-bytes", str(biggest - 1)])
            check_error_line(self, res, 5, f"{srv.url}/{m['path']}/c/",
                             ["exceeds limits.max_object_bytes"])

    def test_file_store_reports_no_http_section(self):
        m = MANIFEST["v3_sharded"] if "v3_sharded" in MANIFEST else None
        if m is None:
            self.skipTest("no sharded fixture")
        res = run_read(ARGS.shardmill, os.path.join(ARGS.fixtures, m["path"]), [0, 0, 0],
                       [4, 4, 4])
        self.assertEqual(res.rc, 0, res.describe())
        self.assertIn("http", res.stats)
        self.assertIsNone(res.stats["http"])


def main():
    global ARGS, MANIFEST
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--fixtures", required=True)
    ARGS, rest = ap.parse_known_args()
    MANIFEST = load_manifest(ARGS.fixtures)
    prog = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
