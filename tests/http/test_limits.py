#!/usr/bin/python3
"""The `limits.*` keys of docs/CONFIG.md, each enforced by a `shardmill run` through the YAML key
(issue 19 item 10): one over the limit is exit 5 with one error line naming the key; exactly at
the limit (or above) the same run passes.

- limits.max_requests: a scan of the v2_gzip fixture makes N store requests (the report's
  io.requests); with max_requests N it passes, with N - 1 it stops with exit 5 -- from a
  directory (the dispatch admits each request) and over HTTP (the driver admits each attempt).
- limits.max_object_bytes: below the largest chunk object: exit 5; above: ok.
- limits.max_chunk_bytes: below a decoded chunk (8*32*32 int16 = 16 KiB): exit 5; at it: ok.
(limits.memory_bytes: tests/bad_input read_bench_memory and tests/convert/test_ingest.py.)

Usage: test_limits.py --shardmill BIN --fixtures DIR [unittest args]
"""

import functools
import http.server
import json
import os
import subprocess
import tempfile
import threading
import unittest

from shardmill_test.http_reads import test_args

ARGS = None


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass


class Server:
    """Python's file server on 127.0.0.1 in a thread of this process."""

    def __init__(self, root):
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                   functools.partial(Quiet, directory=root))
        self.srv.daemon_threads = True
        threading.Thread(target=self.srv.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


class Limits(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="shardmill-limits-")
        cls.server = Server(ARGS.fixtures)

    @classmethod
    def tearDownClass(cls):
        cls.server.close()
        cls.tmp.cleanup()

    def scan(self, store, *sets):
        cfg = os.path.join(self.tmp.name, "scan.yaml")
        with open(cfg, "w") as f:
            f.write(f"job: scan\ninput: {{store: '{store}'}}\nprogress: false\n"
                    "parallel: {threads: 2}\n")
        args = [ARGS.shardmill, "run", cfg, "--report", "-"]
        for s in sets:
            args += ["--set", s]
        return subprocess.run(args, capture_output=True, text=True, timeout=120)

    def assert_limit(self, p, key):
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        self.assertEqual(p.returncode, 5, p.stderr)
        self.assertEqual(len(lines), 1, lines)
        self.assertTrue(lines[0].startswith("shardmill: error: "), lines[0])
        self.assertIn(key, lines[0])

    def requests_of(self, p):
        self.assertEqual(p.returncode, 0, p.stderr)
        return sum(json.loads(p.stdout)["io"]["requests"].values())

    def check_max_requests(self, store):
        n = self.requests_of(self.scan(store))
        self.assertGreater(n, 3)
        self.assertEqual(self.requests_of(self.scan(store, f"limits.max_requests={n}")), n)
        self.assert_limit(self.scan(store, f"limits.max_requests={n - 1}"),
                          f"would exceed limits.max_requests ({n - 1})")
        self.assert_limit(self.scan(store, "limits.max_requests=1"),
                          "would exceed limits.max_requests (1)")

    def test_max_requests_directory(self):
        self.check_max_requests(os.path.join(ARGS.fixtures, "v2_gzip.zarr"))

    def test_max_requests_http(self):
        self.check_max_requests(self.server.url + "/v2_gzip.zarr")

    def test_max_object_bytes(self):
        store = self.server.url + "/v2_gzip.zarr"
        self.assert_limit(self.scan(store, "limits.max_object_bytes=4KiB"),
                          "limits.max_object_bytes")
        self.requests_of(self.scan(store, "limits.max_object_bytes=16KiB"))

    def test_max_chunk_bytes(self):
        store = os.path.join(ARGS.fixtures, "v2_gzip.zarr")
        self.assert_limit(self.scan(store, "limits.max_chunk_bytes=8KiB"),
                          "limits.max_chunk_bytes")
        self.requests_of(self.scan(store, "limits.max_chunk_bytes=16KiB"))


def main():
    global ARGS
    ARGS, argv = test_args()
    unittest.main(argv=argv, verbosity=2)


if __name__ == "__main__":
    main()
