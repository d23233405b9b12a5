#!/usr/bin/python3
"""The s3 store (SPEC §3) against s3rver behind a SigV4-verifying proxy (botocore), both started
here on 127.0.0.1 and stopped by pid (s3_common.py). Fixtures are tests/http/gen_fixtures.py's
arrays (zarr-python 2.13 v2 gzip with unwritten chunks, a v3 sharded array, a v3 group with names a
URL must percent-encode), uploaded to s3rver and kept on disk as the file-store reference.

- `read` through s3 equals NumPy and the file store, byte for byte, with the same request and
  byte counters; every request was signed (host, x-amz-content-sha256, x-amz-date) and verified;
  shards are read by range;
- `scan` and `convert` through s3 equal the file-store runs (result checksums, output shards
  byte for byte) and report the same `io` counters;
- a wrong secret, an unknown access key id and no credentials: exit 4, one line naming the
  object's s3:// URL, "refused" and the access key id; never retried;
- a missing bucket: exit 3 naming the bucket; a missing key: exit 3 (no metadata); a missing
  chunk: the fill value;
- 503 SlowDown is retried and counted as for HTTP; profile credentials with a session token.

Usage: test_s3.py --shardmill BIN --node NODE --work DIR [Values|Errors] [unittest args]
"""

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

from shardmill_test.http_reads import check_error_line, region_bytes, run_read

from s3_common import ACCESS_KEY, REGION, SECRET, Proxy, S3rver, s3_env  # noqa: E402

ARGS = None
BUCKET = "shardmill-test"
PREFIX = "fixtures"
ARRAYS = ("v2_gzip", "v3_sharded")


class S3Base(unittest.TestCase):
    """Servers and fixtures, once per test class (each class is its own ctest test)."""
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="shardmill-s3-", dir=ARGS.work)
        cls.home = os.path.join(cls.work, "home")
        os.makedirs(cls.home)
        cls.s3rver = S3rver(ARGS.node)  # starts while the fixtures are written
        cls.proxy = None
        try:
            cls.fx = os.path.join(cls.work, "fixtures")
            subprocess.run([sys.executable, os.path.join(HERE, "..", "http", "gen_fixtures.py"),
                            cls.fx], check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(cls.fx, "manifest.json")) as f:
                doc = json.load(f)
            cls.manifest = {a["name"]: a for a in doc["arrays"]}
            cls.names = doc["names"]
            cls.proxy = Proxy(cls.s3rver.wait_ready().port)  # starts while objects upload
            cls.s3rver.make_bucket(BUCKET)
            for path in [cls.manifest[n]["path"] for n in ARRAYS] + [cls.names["group"]]:
                cls.s3rver.upload_tree(BUCKET, os.path.join(cls.fx, path), f"{PREFIX}/{path}")
            cls.proxy.wait_ready()
        except BaseException:
            if cls.proxy is not None:
                cls.proxy.close()
            cls.s3rver.close()
            raise
        cls.env = s3_env(cls.proxy.endpoint, cls.home)

    @classmethod
    def tearDownClass(cls):
        cls.proxy.close()
        cls.s3rver.close()
        shutil.rmtree(cls.work, ignore_errors=True)

    def setUp(self):
        self.proxy.reset()

    def url(self, path):
        return f"s3://{BUCKET}/{PREFIX}/{path}"

    def run_sm(self, args, env=None, timeout=60):
        return subprocess.run([ARGS.shardmill] + args, capture_output=True, text=True,
                              env=env or self.env, timeout=timeout)

    def assert_all_signed(self, log):
        self.assertTrue(log, "the proxy saw no request")
        for r in log:
            self.assertEqual(r["akid"], ACCESS_KEY, r)
            for h in ("host", "x-amz-content-sha256", "x-amz-date"):
                self.assertIn(h, r["signed"], r)


class Values(S3Base):
    """Values, checksums, output bytes and counters through s3 equal the file store's."""

    def test_read_equals_numpy_and_file_store(self):
        for name in ARRAYS:
            m = self.manifest[name]
            want = np.load(os.path.join(self.fx, m["expected"]))
            shape = list(want.shape)
            offset = [1] * len(shape)
            ext = [s - 2 for s in shape]
            with self.subTest(array=name):
                self.proxy.reset()
                s = run_read(ARGS.shardmill, self.url(m["path"]), offset, ext, env=self.env)
                log = self.proxy.log()
                f = run_read(ARGS.shardmill, os.path.join(self.fx, m["path"]), offset, ext)
                self.assertEqual(s.rc, 0, s.describe())
                self.assertEqual(s.data, region_bytes(want, offset, ext), "values vs NumPy")
                self.assertEqual(s.data, f.data, "values vs the file store")
                self.assertEqual(s.stats["requests"], f.stats["requests"], "request counters")
                self.assertEqual(s.stats["bytes"], f.stats["bytes"], "byte counters")
                self.assertEqual(len(log), sum(s.stats["requests"].values()),
                                 f"proxy log vs counters: {log}")
                self.assertEqual(sum(r["sent"] for r in log), sum(s.stats["bytes"].values()),
                                 "wire bytes vs counters")
                self.assert_all_signed(log)
                if m.get("sharded"):
                    ranged = [r for r in log if r["range"] and r["status"] == 206]
                    self.assertTrue(ranged, f"a sharded array is read by range: {log}")

    def test_percent_encoded_keys_are_signed_as_s3_wants(self):
        """Names with space, %, #, ?, +, ; and non-ASCII: the proxy canonicalises the path as S3
        does (decode, then encode all but unreserved), so a differently encoded key fails."""
        for node, npy in self.names["arrays"].items():
            with self.subTest(node=node):
                want = np.load(os.path.join(self.fx, npy))
                s = run_read(ARGS.shardmill, self.url(self.names["group"]),
                             extra=["--array", node], env=self.env)
                self.assertEqual(s.rc, 0, s.describe())
                self.assertEqual(s.data, region_bytes(want, [0] * want.ndim, list(want.shape)))

    def test_scan_equals_file_store(self):
        m = self.manifest["v3_sharded"]
        reps = {}
        for where in ("file", "s3"):
            store = os.path.join(self.fx, m["path"]) if where == "file" else self.url(m["path"])
            extra = ("  s3: {endpoint: \"%s\", region: %s, path_style: true}\n"
                     % (self.proxy.endpoint, REGION)) if where == "s3" else ""
            cfg = os.path.join(self.work, f"scan-{where}.yaml")
            with open(cfg, "w") as f:
                f.write(f"job: scan\ninput:\n  store: \"{store}\"\n{extra}"
                        "tile: [8, 64, 64]\nprogress: false\n")
            rep = os.path.join(self.work, f"scan-{where}.json")
            env = dict(self.env)
            env.pop("AWS_ENDPOINT_URL")  # the endpoint comes from input.s3.endpoint
            env.pop("AWS_REGION")
            self.proxy.reset()
            p = self.run_sm(["run", cfg, "--report", rep], env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(rep) as f:
                reps[where] = json.load(f)
            if where == "s3":
                self.assert_all_signed(self.proxy.log())
        for k in ("voxels", "checksum", "weighted_checksum", "histogram"):
            self.assertEqual(reps["s3"]["result"][k], reps["file"]["result"][k], k)
        for k in ("requests", "bytes"):
            self.assertEqual(reps["s3"]["io"][k], reps["file"]["io"][k], f"io.{k}")
        self.assertIsNotNone(reps["s3"]["io"]["http"], "the s3 store reports its HTTP section")

    def test_convert_equals_file_store(self):
        m = self.manifest["v2_gzip"]
        outs, reps = {}, {}
        for where in ("file", "s3"):
            store = os.path.join(self.fx, m["path"]) if where == "file" else self.url(m["path"])
            out = os.path.join(self.work, f"conv-{where}.zarr")
            cfg = os.path.join(self.work, f"conv-{where}.yaml")
            with open(cfg, "w") as f:
                f.write(f"job: convert\ninput:\n  store: \"{store}\"\n"
                        "normalize: {mode: window, lo: -100, hi: 3000}\n"
                        f"output:\n  path: \"{out}\"\n  shard: [8, 32, 32]\n  chunk: [4, 16, 16]\n"
                        "  exists: overwrite\nprogress: false\n")
            rep = os.path.join(self.work, f"conv-{where}.json")
            p = self.run_sm(["run", cfg, "--report", rep])
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(rep) as f:
                reps[where] = json.load(f)
            outs[where] = out
        for k in ("checksum", "weighted_checksum", "output_checksum", "output_weighted_checksum"):
            self.assertEqual(reps["s3"]["result"][k], reps["file"]["result"][k], k)
        # the input identity (SPEC §6.5) asks an object store for the input's marker (one more
        # metadata request, a 404 here: no bytes); a file store's identity is its files' records
        want = dict(reps["file"]["io"]["requests"])
        want["metadata"] += 1
        self.assertEqual(reps["s3"]["io"]["requests"], want, "io.requests")
        self.assertEqual(reps["s3"]["io"]["bytes"], reps["file"]["io"]["bytes"], "io.bytes")
        shards = []
        for root, _, files in os.walk(outs["file"]):
            for fn in files:
                rel = os.path.relpath(os.path.join(root, fn), outs["file"])
                if rel.startswith("c" + os.sep):
                    shards.append(rel)
        self.assertTrue(shards, "the convert wrote no shard")
        match, mismatch, errors = filecmp.cmpfiles(outs["file"], outs["s3"], shards, shallow=False)
        self.assertEqual((mismatch, errors), ([], []), "output shards differ")


class Errors(S3Base):
    """Refused requests, missing buckets and keys, redirects, retries, credentials."""

    def test_wrong_secret_is_refused_exit_4(self):
        env = s3_env(self.proxy.endpoint, self.home, secret="not-the-secret")
        key = f"{self.url(self.manifest['v3_sharded']['path'])}/zarr.json"
        res = run_read(ARGS.shardmill, self.url(self.manifest["v3_sharded"]["path"]), env=env)
        check_error_line(self, res, 4, key, ("refused", "403", "SignatureDoesNotMatch",
                                             ACCESS_KEY))
        self.assertNotIn("not-the-secret", res.stderr, "a secret was printed")
        self.assertEqual(len(self.proxy.log()), 1, "a refused request is never retried")

    def test_unknown_key_id_and_no_credentials_exit_4(self):
        path = self.url(self.manifest["v2_gzip"]["path"])
        env = s3_env(self.proxy.endpoint, self.home, access_key="AKIDUNKNOWN")
        res = run_read(ARGS.shardmill, path, env=env)
        check_error_line(self, res, 4, path, ("refused", "InvalidAccessKeyId", "AKIDUNKNOWN"))
        env = s3_env(self.proxy.endpoint, self.home, access_key=None, secret=None)
        res = run_read(ARGS.shardmill, path, env=env)
        check_error_line(self, res, 4, path, ("refused", "AccessDenied", "no AWS credentials"))
        env = s3_env(self.proxy.endpoint, self.home, secret=None)  # a key id alone
        res = run_read(ARGS.shardmill, path, env=env)
        check_error_line(self, res, 2, path, ("AWS_SECRET_ACCESS_KEY",))

    def test_missing_bucket_exit_3(self):
        res = run_read(ARGS.shardmill, "s3://no-such-bucket/x.zarr", env=self.env)
        check_error_line(self, res, 3, "s3://no-such-bucket/x.zarr",
                         ("'no-such-bucket' does not exist", "NoSuchBucket"))

    def test_missing_key_exit_3(self):
        res = run_read(ARGS.shardmill, self.url("absent.zarr"), env=self.env)
        check_error_line(self, res, 3, self.url("absent.zarr"), ("no Zarr metadata",))
        self.assert_all_signed(self.proxy.log())

    def test_wrong_region_exit_4(self):
        env = s3_env(self.proxy.endpoint, self.home, region="us-west-2")
        path = self.url(self.manifest["v2_gzip"]["path"])
        res = run_read(ARGS.shardmill, path, env=env)
        check_error_line(self, res, 4, path, ("HTTP 400", "AuthorizationHeaderMalformed"))

    def test_redirect_is_an_error_not_followed(self):
        """A signature holds for one host: S3's 301 (a bucket in another region) is an error
        naming S3's code, and the Location is never requested."""
        path = self.url(self.manifest["v2_gzip"]["path"])
        self.proxy.configure(redirect_301=f"/{BUCKET}/")
        res = run_read(ARGS.shardmill, path, env=self.env)
        check_error_line(self, res, 4, path, ("HTTP 301", "PermanentRedirect"))
        self.assertEqual(len(self.proxy.log()), 1)

    def test_plan_reads_metadata_through_s3(self):
        cfg = os.path.join(self.work, "plan.yaml")
        with open(cfg, "w") as f:
            store = self.url(self.manifest["v3_sharded"]["path"])
            f.write(f"job: scan\ninput:\n  store: \"{store}\"\ntile: [8, 64, 64]\n")
        p = self.run_sm(["plan", cfg, "--ranks", "2", "--json"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["ranks"], 2)
        self.assert_all_signed(self.proxy.log())

    # ---- retries, profiles ----

    def test_slowdown_is_retried_and_counted(self):
        m = self.manifest["v3_sharded"]
        key = f"{PREFIX}/{m['path']}/{m['fault_key']}"
        base = run_read(ARGS.shardmill, self.url(m["path"]), env=self.env)
        self.assertEqual(base.rc, 0, base.describe())
        self.proxy.reset()
        self.proxy.configure(inject_503=(key, 2))
        res = run_read(ARGS.shardmill, self.url(m["path"]), extra=["--http-backoff-ms", "10"],
                       env=self.env)
        log = self.proxy.log()
        self.assertEqual(res.rc, 0, res.describe())
        self.assertEqual(res.data, base.data)
        self.assertEqual(sum(1 for r in log if r["status"] == 503), 2, log)
        self.assertEqual(sum(res.stats["requests"].values()),
                         sum(base.stats["requests"].values()) + 2, "retries count as requests")
        self.assertEqual(res.stats["bytes"], base.stats["bytes"], "a 503 body is no payload")
        # retries run out: exit 4 naming the object and the attempts
        self.proxy.configure(inject_503=(key, 100))
        res = run_read(ARGS.shardmill, self.url(m["path"]),
                       extra=["--http-backoff-ms", "1", "--http-retries", "2"], env=self.env)
        check_error_line(self, res, 4, self.url(f"{m['path']}/{m['fault_key']}"),
                         ("HTTP 503", "after 3 attempts"))

    def test_profile_with_session_token(self):
        home = os.path.join(self.work, "home-profile")
        os.makedirs(os.path.join(home, ".aws"), exist_ok=True)
        with open(os.path.join(home, ".aws", "credentials"), "w") as f:
            f.write(f"[default]\naws_access_key_id = WRONG\naws_secret_access_key = x\n"
                    f"[ct]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET}\n"
                    "aws_session_token = FQoGZXIvYXdzEXAMPLETOKEN/+=\n")
        with open(os.path.join(home, ".aws", "config"), "w") as f:
            f.write(f"[profile ct]\nregion = {REGION}\n")
        self.proxy.configure(token="FQoGZXIvYXdzEXAMPLETOKEN/+=")
        env = s3_env(self.proxy.endpoint, home, access_key=None, secret=None, region=None,
                     AWS_PROFILE="ct")
        path = self.url(self.manifest["v2_gzip"]["path"])
        res = run_read(ARGS.shardmill, path, env=env)
        self.assertEqual(res.rc, 0, res.describe())
        log = self.proxy.log()
        self.assertTrue(log)
        self.assertTrue(all("x-amz-security-token" in r["signed"] for r in log), log)
        # the same profile without its token is refused by the proxy
        with open(os.path.join(home, ".aws", "credentials"), "w") as f:
            f.write(f"[ct]\naws_access_key_id = {ACCESS_KEY}\n"
                    f"aws_secret_access_key = {SECRET}\n")
        res = run_read(ARGS.shardmill, path, env=env)
        check_error_line(self, res, 4, path, ("refused", "InvalidToken", "profile 'ct'"))
        env["AWS_PROFILE"] = "absent"
        res = run_read(ARGS.shardmill, path, env=env)
        check_error_line(self, res, 2, path, ("'absent'",))


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--work", default=None)
    ARGS, rest = ap.parse_known_args()
    if ARGS.work:
        os.makedirs(ARGS.work, exist_ok=True)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
