#!/usr/bin/python3
"""Credentials in URLs are never written out (issue 19 item 9). A server on 127.0.0.1 that
demands HTTP basic auth serves the fixtures; shardmill gets the password only in the URL
(http://alice:PASSWORD@127.0.0.1:PORT/...). Every command that takes the URL -- info, read,
validate, plan (text and JSON), run scan and run convert (report file and summary), and failing
cases (a missing array, a missing key, a wrong password, a bad --set) -- must succeed where the
credentials are right (so they were used) and leave the password nowhere: not on stdout, not on
stderr, not in any file of the output, the report or read's --stats.

Usage: test_secrets.py --shardmill BIN --fixtures DIR [unittest args]
"""

import base64
import functools
import http.server
import json
import os
import subprocess
import tempfile
import threading
import unittest

from shardmill_test.http_reads import expected, load_manifest, test_args

ARGS = None
MANIFEST = None
USER = "alice"
PASSWORD = "Pw7xQ2sEcretZ9"
ROTATED = "Rot8dPw3Secret"  # the same user's next password (issue 32 item 10)
TOKEN = "Tk4vSigSecretQ8"  # a query secret: only where a URL may carry a query (errors)


class AuthHandler(http.server.SimpleHTTPRequestHandler):
    """Python's file server behind basic auth: 401 without the right credentials."""

    def log_message(self, fmt, *args):
        pass

    def _authorized(self):
        want = ["Basic " + base64.b64encode(f"{USER}:{pw}".encode()).decode()
                for pw in (PASSWORD, ROTATED)]
        if self.headers.get("Authorization") in want:
            return True
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="t"')
        self.send_header("Content-Length", "0")
        self.end_headers()
        return False

    def do_GET(self):
        if self._authorized():
            super().do_GET()

    def do_HEAD(self):
        if self._authorized():
            super().do_HEAD()


class Server:
    def __init__(self, root):
        handler = functools.partial(AuthHandler, directory=root)
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.srv.daemon_threads = True
        self.thread = threading.Thread(target=self.srv.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.srv.shutdown()
        self.srv.server_close()
        return False

    def url(self, path, user=USER, password=PASSWORD):
        return f"http://{user}:{password}@127.0.0.1:{self.srv.server_address[1]}/{path}"


class Secrets(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.server = Server(ARGS.fixtures).__enter__()
        cls.tmp = tempfile.TemporaryDirectory(prefix="shardmill-secrets-")
        cls.dir = cls.tmp.name

    @classmethod
    def tearDownClass(cls):
        cls.server.__exit__()
        cls.tmp.cleanup()

    def run_cmd(self, args, want_rc=0):
        p = subprocess.run([ARGS.shardmill] + args, capture_output=True, text=True, timeout=120,
                           cwd=self.dir)
        if want_rc is not None:
            self.assertEqual(p.returncode, want_rc, f"{args}: rc={p.returncode}\n{p.stderr}")
        for name, text in (("stdout", p.stdout), ("stderr", p.stderr)):
            self.assertNotIn(PASSWORD, text, f"{args}: the password is on {name}:\n{text}")
            self.assertNotIn(ROTATED, text, f"{args}: the password is on {name}:\n{text}")
            self.assertNotIn(TOKEN, text, f"{args}: the token is on {name}:\n{text}")
        return p

    def assert_no_secret_in_files(self, root):
        seen = 0
        for d, _, files in os.walk(root):
            for f in files:
                path = os.path.join(d, f)
                with open(path, "rb") as fh:
                    data = fh.read()
                seen += 1
                self.assertNotIn(PASSWORD.encode(), data, f"the password is in {path}")
                self.assertNotIn(ROTATED.encode(), data, f"the password is in {path}")
                self.assertNotIn(TOKEN.encode(), data, f"the token is in {path}")
        return seen

    def config(self, name, job, store, extra=""):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(f"job: {job}\ninput: {{store: '{store}'}}\nprogress: false\n{extra}")
        return path

    def test_info_and_read_redact_and_use_the_credentials(self):
        url = self.server.url("v3_sharded.zarr")
        p = self.run_cmd(["info", url])
        self.assertIn("uint16", p.stdout)
        out = os.path.join(self.dir, "region.bin")
        stats = os.path.join(self.dir, "stats.json")
        self.run_cmd(["read", url, "-o", out, "--stats", stats, "--shape", "2,5,5"])
        want = expected(ARGS.fixtures, MANIFEST["v3_sharded"])[:2, :5, :5]
        with open(out, "rb") as f:
            self.assertEqual(f.read(), want.astype("<u2").tobytes())
        with open(stats, "rb") as f:
            self.assertNotIn(PASSWORD.encode(), f.read())

    def test_validate_and_plan_print_no_credentials(self):
        cfg = self.config("plan.yaml", "convert", self.server.url("v3_sharded.zarr"),
                          "output: {path: out-plan.zarr}\n")
        p = self.run_cmd(["validate", cfg])
        self.assertIn("<redacted>@127.0.0.1", p.stdout)
        p = self.run_cmd(["plan", cfg, "--ranks", "2"])
        self.assertIn("<redacted>@127.0.0.1", p.stdout)
        self.run_cmd(["plan", cfg, "--ranks", "2", "--json"])

    def test_scan_report_and_summary_carry_no_credentials(self):
        rep = os.path.join(self.dir, "scan-report.json")
        cfg = self.config("scan.yaml", "scan", self.server.url("v2_gzip.zarr"),
                          f"report: {rep}\n")
        p = self.run_cmd(["run", cfg])
        self.assertIn("<redacted>@127.0.0.1", p.stdout)
        with open(rep) as f:
            self.assertIn("<redacted>@127.0.0.1", f.read())
        self.assert_no_secret_in_files(rep)
        self.run_cmd(["run", cfg, "--report", "-"])

    def test_convert_output_and_report_carry_no_credentials(self):
        out = os.path.join(self.dir, "out-convert.zarr")
        rep = os.path.join(self.dir, "convert-report.json")
        cfg = self.config("convert.yaml", "convert", self.server.url("v3_sharded.zarr"),
                          f"output: {{path: {out}}}\nreport: {rep}\n")
        self.run_cmd(["run", cfg])
        self.assertGreater(self.assert_no_secret_in_files(out), 2)
        with open(os.path.join(out, "zarr.json")) as f:
            self.assertIn("<redacted>@127.0.0.1", f.read())  # the provenance names the input
        self.assert_no_secret_in_files(rep)
        self.run_cmd(["verify", out])

    def test_config_sha256_is_the_redacted_url(self):
        """Issue 32 item 10: config_sha256 hashes the URL without its password, so the hash is
        no offline guessing oracle and a rotated password is the same job: two converts that
        differ only in the password get the same config_sha256, and output.exists: auto with
        the new password over the old output is not refused. An HTTP input without a marker has
        no identity that binds its values (SPEC §6.5): auto resumes it, re-reading every shard
        against its values digest, and the output stays byte for byte what it was."""
        shas, outs = {}, {}
        for tag, pw in (("old", PASSWORD), ("new", ROTATED)):
            out = os.path.join(self.dir, f"out-rotated-{tag}.zarr")
            cfg = self.config(f"rotated-{tag}.yaml", "convert",
                              self.server.url("v3_sharded.zarr", password=pw),
                              f"output: {{path: {out}}}\n")
            self.run_cmd(["run", cfg])
            self.assertGreater(self.assert_no_secret_in_files(out), 2)
            with open(os.path.join(out, "zarr.json")) as f:
                shas[tag] = json.load(f)["attributes"]["shardmill"]["config_sha256"]
            outs[tag] = out
        self.assertEqual(shas["old"], shas["new"], "the password changed config_sha256")
        before = {}
        for d, _, files in os.walk(outs["old"]):
            for name in files:
                with open(os.path.join(d, name), "rb") as f:
                    before[os.path.relpath(os.path.join(d, name), outs["old"])] = f.read()
        rep = os.path.join(self.dir, "rotated-auto.json")
        self.run_cmd(["run", os.path.join(self.dir, "rotated-new.yaml"), "--set",
                      f"output.path={outs['old']}", "--set", "output.exists=auto",
                      "--report", rep])
        with open(rep) as f:
            got = json.load(f)["output"]
        self.assertEqual(got.get("action"), "resumed", got)
        self.assertIn("values digest", str(got.get("found_problem")), got)
        self.assertEqual(got.get("written"), 0, got)
        after = {}
        for d, _, files in os.walk(outs["old"]):
            for name in files:
                with open(os.path.join(d, name), "rb") as f:
                    after[os.path.relpath(os.path.join(d, name), outs["old"])] = f.read()
        self.assertEqual(sorted(after), sorted(before))
        self.assertTrue(after == before, "the resumed output's bytes changed")
        self.assert_no_secret_in_files(outs["old"])
        self.run_cmd(["verify", outs["old"]])

    def test_failures_name_the_url_without_credentials(self):
        cases = [
            (["info", self.server.url("missing.zarr")], 3),
            (["read", self.server.url("missing.zarr"), "-o", "x.bin"], 3),
            (["info", self.server.url("v3_sharded.zarr", password="wrong" + TOKEN)], 4),
            (["info", self.server.url("v3_sharded.zarr") + f"/sub?token={TOKEN}&sig={TOKEN}"],
             None),
        ]
        for args, rc in cases:
            with self.subTest(args=args[:1]):
                p = self.run_cmd(args, want_rc=rc)
                self.assertNotEqual(p.returncode, 0)
                self.assertIn("shardmill: error: ", p.stderr)
        cfg = self.config("bad.yaml", "scan", self.server.url("missing.zarr"))
        p = self.run_cmd(["run", cfg], want_rc=None)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("<redacted>@127.0.0.1", p.stderr)
        self.run_cmd(["plan", cfg], want_rc=None)
        self.run_cmd(["validate", cfg, "--set", "tile=nonsense"], want_rc=2)
        self.run_cmd(["validate", cfg, "--set", f"input.store={self.server.url('x')}?token="
                      f"{TOKEN}"], want_rc=0)


def main():
    global ARGS, MANIFEST
    ARGS, argv = test_args()
    MANIFEST = load_manifest(ARGS.fixtures)
    unittest.main(argv=argv, verbosity=2)


if __name__ == "__main__":
    main()
