#!/usr/bin/python3
"""A server that trickles (issue 19 item 12): the metadata of the v2_gzip fixture is served
normally, every chunk announces a 100 MiB body and sends it at about 2 KiB/s -- above the default
low-speed limit (1 KiB/s), so only a total deadline ends such a transfer.

- input.http.request_timeout_ms: with a 1.5 s deadline and one retry, `shardmill run` fails
  with exit 4 and one error line naming the key, well within 30 s (the old code waits for the
  100 MiB: the test's own timeout ends it, by pid).
- SIGTERM during the trickle (default deadline, 5 minutes): the process ends with exit 143
  within a few seconds (the transfer aborts on the stop flag), never waiting for the body.

Usage: test_deadline.py --shardmill BIN --fixtures DIR [unittest args]
"""

import functools
import http.server
import os
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from shardmill_test.http_reads import test_args

ARGS = None
BODY = 100 << 20   # announced Content-Length of every chunk
RATE_CHUNK = 512   # bytes per write ...
RATE_PERIOD = 0.25  # ... every 0.25 s: 2 KiB/s


class Trickle(http.server.SimpleHTTPRequestHandler):
    """Serves files whose name starts with '.' (the v2 metadata) as usual, and trickles every
    other existing file (the chunks)."""

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        path = self.translate_path(self.path)
        if os.path.basename(path).startswith(".") or not os.path.isfile(path):
            return super().do_GET()
        self.server.trickling.set()
        self.send_response(200)
        self.send_header("Content-Length", str(BODY))
        self.end_headers()
        sent = 0
        try:
            while sent < BODY and not self.server.closing.is_set():
                self.wfile.write(b"\0" * RATE_CHUNK)
                self.wfile.flush()
                sent += RATE_CHUNK
                time.sleep(RATE_PERIOD)
        except OSError:
            pass  # the client went away: what the test wants
        self.close_connection = True


class Server:
    def __init__(self, root):
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                   functools.partial(Trickle, directory=root))
        self.srv.daemon_threads = True
        self.srv.trickling = threading.Event()
        self.srv.closing = threading.Event()
        threading.Thread(target=self.srv.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"

    def close(self):
        self.srv.closing.set()
        self.srv.shutdown()
        self.srv.server_close()


class Deadline(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="shardmill-deadline-")
        self.server = Server(ARGS.fixtures)
        self.cfg = os.path.join(self.tmp.name, "scan.yaml")
        with open(self.cfg, "w") as f:
            f.write(f"job: scan\ninput: {{store: '{self.server.url}/v2_gzip.zarr'}}\n"
                    "progress: false\nparallel: {threads: 2}\n")

    def tearDown(self):
        self.server.close()
        self.tmp.cleanup()

    def start(self, *sets):
        args = [ARGS.shardmill, "run", self.cfg]
        for s in sets:
            args += ["--set", s]
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def finish(self, p, limit):
        """Waits up to `limit` s; a process still running then (the old code, stuck in the
        transfer) is killed by its pid and the test fails."""
        try:
            out, err = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            self.fail(f"shardmill still running after {limit} s: the transfer was not aborted")
        return p.returncode, err

    def test_request_timeout_fails_the_run_within_a_bound(self):
        t0 = time.monotonic()
        p = self.start("input.http.request_timeout_ms=1500", "input.http.retries=1",
                       "input.http.backoff_base_ms=100")
        rc, err = self.finish(p, 60)
        took = time.monotonic() - t0
        lines = [l for l in err.splitlines() if l.strip()]
        self.assertEqual(rc, 4, err)
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("input.http.request_timeout_ms (1500 ms)", lines[0])
        self.assertIn("after 2 attempts", lines[0])
        self.assertLess(took, 30, f"took {took:.1f} s")

    def test_sigterm_during_a_trickle_stops_within_seconds(self):
        p = self.start()
        if not self.server.srv.trickling.wait(30):
            p.kill()
            p.communicate()
            self.fail("shardmill never requested a chunk")
        time.sleep(1.0)  # well inside the transfer
        self.assertIsNone(p.poll(), "shardmill ended before the signal")
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)  # by pid
        rc, err = self.finish(p, 20)
        took = time.monotonic() - t0
        self.assertEqual(rc, 128 + signal.SIGTERM, err)
        self.assertIn("SIGTERM", err)
        self.assertLess(took, 5, f"SIGTERM took {took:.1f} s")


def main():
    global ARGS
    ARGS, argv = test_args()
    unittest.main(argv=argv, verbosity=2)


if __name__ == "__main__":
    main()
