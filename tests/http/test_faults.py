#!/usr/bin/python3
"""HTTP fault injection (SPEC §3 retries, §4 exit codes, §5 counters) against
tests/lib/shardmill_test/fault_server.py serving the HTTP fixtures.

Every case ends in exactly one of two ways, never in wrong data:
- exit 0 with the region equal to NumPy, the retries visible in --stats (each retry is one
  more request of its class; the bytes grow by what the failed attempts received: the byte
  counters count the body bytes of 200/206 responses that crossed the wire, SPEC §3) and in the
  server's request log, whose `sent` field is the oracle of the byte counters;
- exit 4 (3 for missing metadata) with one error line whose <where> is the object's URL, the
  number of attempts in the message when retries ran out, and no output file.

Usage: test_faults.py --shardmill BIN --fixtures DIR --array NAME [unittest args]
"""

import argparse
import socket
import sys
import time
import unittest

from shardmill_test.fault_server import FaultServer
from shardmill_test.http_reads import check_error_line, expected, load_manifest, region_bytes, run_read

ARGS = None
SRV = None
M = None  # the manifest entry of --array
EXP = None

FAST = ["--http-backoff-ms", "10"]  # keeps the retry delays of most cases at 5..80 ms


class Faults(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        box = M["fault_box"]
        # A region that covers the fault chunk/shard and its neighbours.
        cls.offset = [max(0, b[0] - 2) for b in box]
        cls.shape = [min(s, b[1] + 2) - o for s, b, o in zip(M["shape"], box, cls.offset)]
        cls.want = region_bytes(EXP, cls.offset, cls.shape)
        cls.fault_path = f"{M['path']}/{M['fault_key']}"
        cls.fault_url = f"{SRV.url}/{cls.fault_path}"
        cls.url = f"{SRV.url}/{M['path']}"
        SRV.reset()
        base = run_read(ARGS.shardmill, cls.url, cls.offset, cls.shape, FAST)
        assert base.rc == 0 and base.data == cls.want, base.describe()
        cls.base = base.stats
        log = SRV.log()
        cls.base_fault_reqs = [r for r in log if r["path"] == cls.fault_path]
        assert cls.base_fault_reqs, "the region does not touch the fault key"
        # the I/O class of the first and second request to the fault key
        cls.first_cls = "index" if M.get("sharded") else "payload"

    def setUp(self):
        SRV.reset()

    def read(self, rules, extra=(), timeout=60):
        SRV.set_faults(rules)
        t0 = time.monotonic()
        res = run_read(ARGS.shardmill, self.url, self.offset, self.shape, list(extra),
                       timeout=timeout)
        res.elapsed = time.monotonic() - t0
        res.log = SRV.log()
        res.fault_log = [r for r in res.log if r["path"] == self.fault_path]
        return res

    # ---- checks ----

    def assert_recovered(self, res, retries, cls=None):
        """Correct data; `retries` more requests than the fault-free run, all in class cls."""
        cls = cls or self.first_cls
        self.assertEqual(res.rc, 0, res.describe())
        self.assertEqual(res.data, self.want, "WRONG DATA after a recovered fault")
        want = dict(self.base["requests"])
        want[cls] += retries
        self.assertEqual(res.stats["requests"], want, "retries must count as requests (SPEC §5)")
        self.assert_wire_bytes(res, cls)
        self.assertEqual(len(res.log), res.total_requests(), "server log vs counters")
        self.assertEqual(len(res.fault_log), len(self.base_fault_reqs) + retries, res.fault_log)
        self.assertEqual(sum(1 for r in res.log if r["fault"]), retries, res.log)

    def assert_wire_bytes(self, res, cls):
        """io.bytes: the fault-free bytes plus what the faulted attempts received, in their
        class; in total exactly the 2xx body bytes the server wrote. A reset (RST may discard
        bytes in flight) or a stall (the client gave up, the server wrote on) sent at most."""
        extra = sum(r["sent"] for r in res.log if r["fault"])
        got, base = res.stats["bytes"], self.base["bytes"]
        for c in base:
            if c != cls:
                self.assertEqual(got[c], base[c], f"class {c}: {res.log}")
        if any(r["fault"] in ("reset", "stall") for r in res.log):
            self.assertGreaterEqual(got[cls], base[cls])
            self.assertLessEqual(got[cls], base[cls] + extra)
        else:
            self.assertEqual(got[cls], base[cls] + extra, res.log)
            self.assertEqual(sum(got.values()), sum(r["sent"] for r in res.log))

    def assert_failed(self, res, attempts, what=(), code=4):
        line = check_error_line(self, res, code, self.fault_url, what)
        if attempts is not None:
            self.assertIn(f"after {attempts} attempts", line)
            n = sum(1 for r in res.fault_log if r["fault"])
            self.assertEqual(n, attempts, f"server saw {n} faulted requests: {res.fault_log}")
        return line

    # ---- transient faults: recovered ----

    def test_500_twice_then_ok(self):
        res = self.read([{"path": self.fault_path, "fault": "status", "status": 500, "times": 2}],
                        FAST)
        self.assert_recovered(res, 2)

    def test_503_twice_then_ok(self):
        res = self.read([{"path": self.fault_path, "fault": "status", "status": 503, "times": 2}],
                        FAST)
        self.assert_recovered(res, 2)

    def test_429_retry_after_is_honoured(self):
        res = self.read([{"path": self.fault_path, "fault": "status", "status": 429, "times": 1,
                          "retry_after": 1}], FAST)
        self.assert_recovered(res, 1)
        # the retry came Retry-After (1 s) later, not after the 10 ms backoff
        t429 = next(r["t"] for r in res.fault_log if r["fault"])
        after = [r["t"] for r in res.fault_log if not r["fault"] and r["t"] > t429]
        self.assertTrue(after, res.fault_log)
        self.assertGreaterEqual(after[0] - t429, 0.9, res.fault_log)

    def test_reset_mid_body_then_ok(self):
        res = self.read([{"path": self.fault_path, "fault": "reset", "times": 1}], FAST)
        self.assert_recovered(res, 1)

    def test_truncated_body_then_ok(self):
        res = self.read([{"path": self.fault_path, "fault": "truncate", "times": 1}], FAST)
        self.assert_recovered(res, 1)

    def test_wrong_content_range_once_then_ok(self):
        res = self.read([{"path": self.fault_path, "fault": "bad_range", "times": 1}], FAST)
        self.assert_recovered(res, 1)

    def test_short_content_range_once_then_ok(self):
        # 206 for one byte less than asked although the total says the bytes exist: a broken
        # response to retry, not an object shorter than the range (that would be exit 3)
        res = self.read([{"path": self.fault_path, "fault": "short_range", "times": 1}], FAST)
        self.assert_recovered(res, 1)

    def test_faults_on_payload_range_then_ok(self):
        if not M.get("sharded"):
            self.skipTest("only shards have index and payload requests to one key")
        # let the index read through, fault the inner-chunk ranges
        for fault in ("reset", "truncate", "bad_range", "short_range", "chunked_truncate"):
            with self.subTest(fault=fault):
                SRV.reset()
                res = self.read([{"path": self.fault_path, "fault": fault, "times": 1,
                                  "skip": 1}], FAST)
                self.assert_recovered(res, 1, cls="payload")

    def test_server_ignoring_range_is_sliced(self):
        res = self.read([{"path": self.fault_path, "fault": "ignore_range", "times": 100}], FAST)
        self.assertEqual(res.rc, 0, res.describe())
        self.assertEqual(res.data, self.want)
        self.assertEqual(len(res.log), res.total_requests(), "server log vs counters")
        # the bytes that crossed the wire, not the bytes asked for
        self.assertEqual(sum(res.stats["bytes"].values()), sum(r["sent"] for r in res.log))
        http = res.stats["http"]
        if not M.get("sharded"):  # whole-object GETs: Range never sent, nothing to ignore
            self.assertEqual(res.stats["requests"], self.base["requests"])
            self.assertEqual(res.stats["bytes"], self.base["bytes"])
            self.assertFalse(http["range_ignored"])
            return
        # the shard that ignores Range is fetched once, whole, and sliced for every range
        self.assertEqual(len(res.fault_log), 1, res.fault_log)
        self.assertEqual(res.fault_log[0]["status"], 200, res.fault_log)
        self.assertGreater(len(self.base_fault_reqs), 1)
        self.assertTrue(http["range_ignored"], http)
        self.assertGreaterEqual(http["whole_objects"], 1, http)
        self.assertGreater(http["kept_slices"], 0, http)
        self.assertEqual(http["whole_objects"],
                         sum(1 for r in res.log if r["status"] == 200 and
                             r["path"].startswith(f"{M['path']}/c/")), res.log)

    def test_chunked_response_without_content_length(self):
        res = self.read([{"path": self.fault_path, "fault": "chunked", "times": 100}], FAST)
        self.assertEqual(res.rc, 0, res.describe())
        self.assertEqual(res.data, self.want)
        self.assertEqual(res.stats["requests"], self.base["requests"])
        self.assertEqual(res.stats["bytes"], self.base["bytes"])

    def test_chunked_truncated_then_ok(self):
        res = self.read([{"path": self.fault_path, "fault": "chunked_truncate", "times": 1}],
                        FAST)
        self.assert_recovered(res, 1)

    def test_chunked_metadata(self):
        path = f"{M['path']}/{M['meta_doc']}"
        res = self.read([{"path": path, "fault": "chunked", "times": 100}], FAST)
        self.assertEqual(res.rc, 0, res.describe())
        self.assertEqual(res.data, self.want)
        self.assertEqual(res.stats["requests"], self.base["requests"])
        self.assertEqual(res.stats["bytes"], self.base["bytes"])

    def test_retry_after_is_capped(self):
        if M["name"] != "v2_gzip":
            self.skipTest("slow (5 s): run on one array only")
        # Retry-After: 3600 must not hang the job for an hour: capped at backoff_max_ms (5 s)
        res = self.read([{"path": self.fault_path, "fault": "status", "status": 503,
                          "times": 1, "retry_after": 3600}], FAST, timeout=30)
        self.assert_recovered(res, 1)
        self.assertGreater(res.elapsed, 4.5)
        self.assertLess(res.elapsed, 9.0)

    def test_metadata_503_then_ok(self):
        path = f"{M['path']}/{M['meta_doc']}"
        res = self.read([{"path": path, "fault": "status", "status": 503, "times": 2}], FAST)
        self.assertEqual(res.rc, 0, res.describe())
        self.assertEqual(res.data, self.want)
        want = dict(self.base["requests"])
        want["metadata"] += 2
        self.assertEqual(res.stats["requests"], want)
        self.assertEqual(len(res.log), res.total_requests())

    def test_short_stall_then_ok(self):
        # The server stalls one response 6 s; with a 1 s low-speed timeout the client gives up
        # on it (curl checks once a second: after 1..2 s) and the retry succeeds.
        res = self.read([{"path": self.fault_path, "fault": "stall", "seconds": 6, "times": 1}],
                        FAST + ["--http-timeout-ms", "1000"])
        self.assert_recovered(res, 1)
        self.assertLess(res.elapsed, 5.0, "the stalled transfer was not timed out")
        print(f"stall recovered in {res.elapsed:.2f} s", file=sys.stderr)

    # ---- persistent faults: exit 4 naming the URL ----

    def test_persistent_500_fails_after_retry_budget(self):
        res = self.read([{"path": self.fault_path, "fault": "status", "status": 500,
                          "times": 50}], FAST + ["--http-retries", "3"])
        self.assert_failed(res, 4, ["HTTP 500"])

    def test_persistent_503_default_budget_is_5_attempts(self):
        res = self.read([{"path": self.fault_path, "fault": "status", "status": 503,
                          "times": 50}])  # defaults: 4 retries, 100 ms doubling
        self.assert_failed(res, 5, ["HTTP 503"])
        self.assertGreater(res.elapsed, 0.7, "backoff 100+200+400+800 ms x [0.5, 1) skipped")

    def test_persistent_wrong_content_range_fails(self):
        res = self.read([{"path": self.fault_path, "fault": "bad_range", "times": 50}],
                        FAST + ["--http-retries", "2"])
        self.assert_failed(res, 3, ["Content-Range"])

    def test_persistent_short_content_range_fails(self):
        if not M.get("sharded"):
            self.skipTest("whole-object GETs have no range to shorten")
        res = self.read([{"path": self.fault_path, "fault": "short_range", "times": 50}],
                        FAST + ["--http-retries", "2"])
        self.assert_failed(res, 3, ["Content-Range"])

    def test_persistent_truncation_fails(self):
        res = self.read([{"path": self.fault_path, "fault": "truncate", "times": 50}],
                        FAST + ["--http-retries", "2"])
        self.assert_failed(res, 3)

    def test_persistent_reset_fails(self):
        res = self.read([{"path": self.fault_path, "fault": "reset", "times": 50}],
                        FAST + ["--http-retries", "2"])
        self.assert_failed(res, 3)

    def test_stall_past_timeout_fails(self):
        res = self.read([{"path": self.fault_path, "fault": "stall", "seconds": 6, "times": 50}],
                        FAST + ["--http-timeout-ms", "1000", "--http-retries", "1"])
        self.assert_failed(res, 2, ["Timeout"])
        self.assertLess(res.elapsed, 9.0, "2 attempts of a 6 s stall were not timed out")
        print(f"stall failed in {res.elapsed:.2f} s", file=sys.stderr)

    def test_500_500_then_reset_names_status_url_and_first_error(self):
        # the last failure, the attempts, and the first failure (the HTTP status) in one line
        res = self.read([{"path": self.fault_path, "fault": "status", "status": 500, "times": 2},
                         {"path": self.fault_path, "fault": "reset", "times": 50}],
                        FAST + ["--http-retries", "2"])
        line = self.assert_failed(res, 3)
        self.assertIn("first: server answered HTTP 500", line)

    def test_500_500_then_403_names_the_statuses(self):
        res = self.read([{"path": self.fault_path, "fault": "status", "status": 500, "times": 2},
                         {"path": self.fault_path, "fault": "status", "status": 403,
                          "times": 50}], FAST + ["--http-retries", "4"])
        line = self.assert_failed(res, None, ["HTTP 403", "first: server answered HTTP 500"])
        self.assertIn("after 3 attempts", line)
        self.assertEqual(sum(1 for r in res.fault_log if r["fault"]), 3, res.fault_log)

    def test_redirect_to_http_is_followed(self):
        path = self.fault_path
        res = self.read([{"path": path, "fault": "redirect", "location": "{url}/" + path,
                          "times": 1}], FAST)
        self.assertEqual(res.rc, 0, res.describe())
        self.assertEqual(res.data, self.want)

    def test_redirect_to_other_protocols_is_refused(self):
        # exit 4 (I/O: the store cannot be read as served), not retried, naming the target
        for loc in ("file:///etc/passwd", "ftp://127.0.0.1:9/x", "gopher://127.0.0.1:9/x"):
            with self.subTest(location=loc):
                SRV.reset()
                res = self.read([{"path": self.fault_path, "fault": "redirect", "location": loc,
                                  "times": 50}], FAST)
                line = self.assert_failed(res, None, ["redirect", loc, "not followed"])
                self.assertEqual(len(res.fault_log), 1, res.fault_log)
                self.assertNotIn("root:", line)

    def test_403_is_not_retried(self):
        res = self.read([{"path": self.fault_path, "fault": "status", "status": 403,
                          "times": 50}], FAST)
        self.assert_failed(res, None, ["HTTP 403"])
        self.assertEqual(sum(1 for r in res.fault_log if r["fault"]), 1, res.fault_log)
        self.assertNotIn("attempts", res.stderr)

    def test_429_persistent_fails(self):
        res = self.read([{"path": self.fault_path, "fault": "status", "status": 429,
                          "times": 50, "retry_after": 0}], FAST + ["--http-retries", "2"])
        self.assert_failed(res, 3, ["HTTP 429"])

    # ---- 404 ----

    def test_404_on_metadata_is_exit_3(self):
        path = f"{M['path']}/{M['meta_doc']}"
        res = self.read([{"path": path, "fault": "status", "status": 404, "times": 50}], FAST)
        check_error_line(self, res, 3, self.url, ["no Zarr metadata"])
        self.assertTrue(all(r["path"].startswith(M["path"] + "/") for r in res.log))
        self.assertFalse(any(r["path"].startswith(f"{M['path']}/c") for r in res.log),
                         "payload requested without metadata")

    def test_404_on_chunk_reads_fill(self):
        res = self.read([{"path": self.fault_path, "fault": "status", "status": 404,
                          "times": 50}], FAST)
        self.assertEqual(res.rc, 0, res.describe())
        exp = EXP.copy()
        exp[tuple(slice(a, b) for a, b in M["fault_box"])] = M["fill"]
        self.assertEqual(res.data, region_bytes(exp, self.offset, self.shape))
        self.assertEqual(res.data is not None and res.data != self.want, True)
        # the 404 is one request with no bytes; nothing else is asked of a missing shard
        self.assertEqual(len(res.fault_log), 1, res.fault_log)
        self.assertEqual(len(res.log), res.total_requests())

    # ---- no server ----

    def test_connection_refused_fails_after_retries(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # bound, never listening: connect() is refused
            url = f"http://127.0.0.1:{port}/{M['path']}"
            res = run_read(ARGS.shardmill, url, self.offset, self.shape,
                           FAST + ["--http-retries", "2"])
        line = check_error_line(self, res, 4, url)
        self.assertIn("after 3 attempts", line)


def main():
    global ARGS, SRV, M, EXP
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--array", required=True)
    ARGS, rest = ap.parse_known_args()
    man = load_manifest(ARGS.fixtures)
    if ARGS.array not in man:
        print(f"array {ARGS.array} is not in the manifest (no sharded writer?): skipped")
        return 0
    M = man[ARGS.array]
    EXP = expected(ARGS.fixtures, M)
    SRV = FaultServer(ARGS.fixtures, max_lifetime=240)
    SRV.start()
    try:
        prog = unittest.main(argv=[sys.argv[0]] + rest, exit=False, verbosity=2)
    finally:
        SRV.stop()
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
