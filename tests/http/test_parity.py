#!/usr/bin/python3
"""nginx parity (SPEC §3 "identical values and counters"): the same regions of the HTTP fixtures
read through a file path and through a real nginx give identical bytes (equal to NumPy) and
identical request and byte counters in --stats; nginx's access log agrees with the counters
(every request counted, SPEC §5), shows keep-alive reuse (many requests on few connections),
metadata fetched once, and shards read by range only. `shardmill info` agrees too.

Usage: test_parity.py --shardmill BIN --fixtures DIR [unittest args]
"""

import argparse
import json
import os
import subprocess
import sys
import unittest

import numpy as np

from shardmill_test.http_reads import expected, load_manifest, region_bytes, run_read, check_error_line
from shardmill_test.nginx_server import NginxServer

ARGS = None
SRV = None


def regions(shape):
    nd = len(shape)
    out = [(None, None, "whole")]
    off = [1, 2, 3][-nd:]
    ext = [max(1, s - o - e) for s, o, e in zip(shape, off, [1, 3, 5][-nd:])]
    out.append((off, ext, "unaligned interior"))
    out.append(([s // 2 for s in shape], [1] * nd, "one voxel"))
    out.append(([s - 3 for s in shape], [3] * nd, "last corner (edge chunks)"))
    return out


class Parity(unittest.TestCase):
    maxDiff = None

    def compare(self, name, offset, shape, what, extra=()):
        m = MANIFEST[name]
        exp = EXPECTED[name]
        want = region_bytes(exp, offset or [0] * exp.ndim, shape or list(exp.shape))
        f = run_read(ARGS.shardmill, os.path.join(ARGS.fixtures, m["path"]), offset, shape, extra)
        self.assertEqual(f.rc, 0, f"file read of {name} {what}: {f.describe()}")
        mark = SRV.mark()
        url = f"{SRV.url}/{m['path']}"
        h = run_read(ARGS.shardmill, url, offset, shape, extra)
        self.assertEqual(h.rc, 0, f"http read of {name} {what}: {h.describe()}")
        log = SRV.requests(since=mark, expect=h.total_requests() if h.stats else None)
        ctx = f"{name} {what} {offset}+{shape} {list(extra)}"
        self.assertEqual(f.data, want, f"file bytes differ from NumPy: {ctx}")
        self.assertEqual(h.data, want, f"http bytes differ from NumPy: {ctx}")
        self.assertEqual(h.stats["requests"], f.stats["requests"], f"request counters: {ctx}")
        self.assertEqual(h.stats["bytes"], f.stats["bytes"], f"byte counters: {ctx}")
        self.assertEqual(h.stats["chunks"], f.stats["chunks"], f"chunk counters: {ctx}")
        # nginx saw exactly the requests the counters report (404s included, SPEC §5) ...
        self.assertEqual(len(log), h.total_requests(), f"nginx log vs counters: {ctx}\n{log}")
        # ... and delivered exactly the counted bytes (bodies of 200/206 only)
        sent = sum(r["bytes"] for r in log if r["status"] in (200, 206))
        self.assertEqual(sent, sum(h.stats["bytes"].values()), f"nginx bytes vs counters: {ctx}")
        self.assertTrue(all(r["status"] in (200, 206, 404) for r in log), log)
        self.assertTrue(all(r["method"] == "GET" for r in log), log)
        # keep-alive: at most one connection per reading thread (the default: one per core)
        conns = {r["conn"] for r in log}
        threads = max(2, len(os.sched_getaffinity(0)))
        self.assertLessEqual(len(conns), threads, f"keep-alive not reused: {len(log)} requests "
                                                  f"on {len(conns)} connections ({ctx})")
        per_conn = max(r["conn_req"] for r in log)
        self.assertGreaterEqual(per_conn, min(len(log), 2), f"connection_requests: {log}")
        # metadata once per opened array
        doc = m["meta_doc"]
        n_doc = sum(1 for r in log if r["uri"] == f"/{m['path']}/{doc}")
        self.assertEqual(n_doc, 1, f"{doc} fetched {n_doc} times: {ctx}")
        if m.get("sharded"):
            shard_reqs = [r for r in log if r["uri"].startswith(f"/{m['path']}/c/")]
            self.assertTrue(shard_reqs)
            full = [r for r in shard_reqs if not r["range"]]
            self.assertEqual(full, [], f"shards must be read by range only: {ctx}")
            self.assertEqual(h.stats["requests"]["index"],
                             sum(1 for r in shard_reqs
                                 if r["range"].startswith("bytes=-") or
                                 r["range"].startswith("bytes=0-") and m["name"].endswith("start")),
                             f"index requests: {ctx}")
        return h

    def test_every_fixture_and_region(self):
        for name in sorted(MANIFEST):
            for offset, shape, what in regions(MANIFEST[name]["shape"]):
                with self.subTest(array=name, region=what):
                    self.compare(name, offset, shape, what)

    def test_missing_chunk_region_is_fill_over_http(self):
        for name in sorted(MANIFEST):
            m = MANIFEST[name]
            box = m["fault_box"]
            with self.subTest(array=name):
                # a region inside the fault box: read normally here (the chunk exists)
                self.compare(name, [b[0] for b in box], [b[1] - b[0] for b in box], "fault box")
        # v2_gzip's chunk 0.0.2 and v3_sharded's shard c/1/1/1 are absent (all fill)
        h = self.compare("v2_gzip", [0, 0, 64], [8, 32, 26], "absent chunk")
        self.assertEqual(h.stats["requests"]["payload"], 1)
        self.assertEqual(h.stats["bytes"]["payload"], 0)
        if "v3_sharded" in MANIFEST:
            h = self.compare("v3_sharded", [8, 64, 64], [8, 36, 36], "absent shard")
            self.assertEqual(h.stats["requests"]["index"], 1)
            self.assertEqual(h.stats["requests"]["payload"], 0)

    def test_index_cache_off_and_small(self):
        for name in sorted(n for n in MANIFEST if MANIFEST[n].get("sharded")):
            for extra in (["--index-cache-entries", "0"], ["--index-cache-entries", "1"],
                          ["--repeat", "3"]):
                with self.subTest(array=name, opts=extra):
                    self.compare(name, [1, 2, 3], [20, 90, 95], "interior", extra)

    def test_info_is_identical(self):
        for name in sorted(MANIFEST):
            m = MANIFEST[name]
            with self.subTest(array=name):
                a = subprocess.run([ARGS.shardmill, "info", os.path.join(ARGS.fixtures, m["path"])],
                                   capture_output=True, text=True, timeout=30)
                b = subprocess.run([ARGS.shardmill, "info", f"{SRV.url}/{m['path']}"],
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(a.returncode, 0, a.stderr)
                self.assertEqual(b.returncode, 0, b.stderr)
                ja, jb = json.loads(a.stdout), json.loads(b.stdout)
                for k in ("shape", "dtype", "chunks", "shards", "codecs", "fill_value",
                          "zarr_format"):
                    self.assertIn(k, ja)
                ja.pop("store", None)
                jb.pop("store", None)
                self.assertEqual(ja, jb)
                self.assertEqual(ja["shape"], m["shape"])

    def test_node_names_are_percent_encoded(self):
        names = NAMES["arrays"]
        if not names:
            self.skipTest("no shard_writer.py")
        for n, npy in sorted(names.items()):
            with self.subTest(name=n):
                want = region_bytes(np.load(os.path.join(ARGS.fixtures, npy)), [0, 0], [6, 7])
                f = run_read(ARGS.shardmill, os.path.join(ARGS.fixtures, NAMES["group"]),
                             extra=["--array", n])
                self.assertEqual(f.rc, 0, f.describe())
                self.assertEqual(f.data, want)
                mark = SRV.mark()
                h = run_read(ARGS.shardmill, f"{SRV.url}/{NAMES['group']}", extra=["--array", n])
                log = SRV.requests(since=mark)
                self.assertEqual(h.rc, 0, f"{n!r}: {h.describe()}\n{log}")
                self.assertEqual(h.data, want, f"WRONG DATA for node {n!r} over HTTP: {log}")
                self.assertEqual(h.stats["requests"], f.stats["requests"])
                self.assertEqual(h.stats["bytes"], f.stats["bytes"])

    def test_tls_verification_is_on(self):
        # nginx with a fresh self-signed certificate: the default client must refuse it.
        with NginxServer(ARGS.fixtures, tls=True) as tls:
            self.assertTrue(tls.url.startswith("https://"))
            name = sorted(MANIFEST)[0]
            url = f"{tls.url}/{MANIFEST[name]['path']}"
            res = run_read(ARGS.shardmill, url, extra=["--http-retries", "0"])
            line = check_error_line(self, res, 4, url)
            self.assertRegex(line.lower(), "certificate|ssl|tls|peer", line)
            self.assertEqual(tls.requests(), [], "a request was sent over an unverified TLS")

    def test_missing_array_over_http_is_exit_3(self):
        url = f"{SRV.url}/no_such_array.zarr"
        res = run_read(ARGS.shardmill, url)
        check_error_line(self, res, 3, url, ["no Zarr metadata"])
        self.assertEqual(res.stats, None)


def main():
    global ARGS, SRV, MANIFEST, EXPECTED, NAMES
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--fixtures", required=True)
    ARGS, rest = ap.parse_known_args()
    MANIFEST = load_manifest(ARGS.fixtures)
    with open(os.path.join(ARGS.fixtures, "manifest.json")) as fh:
        NAMES = json.load(fh).get("names", {"group": "", "arrays": {}})
    EXPECTED = {n: expected(ARGS.fixtures, m) for n, m in MANIFEST.items()}
    SRV = NginxServer(ARGS.fixtures)
    SRV.start()
    try:
        prog = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    finally:
        SRV.stop()
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
