"""The S3 tier's servers: s3rver (npm, tests/interop/js/node_modules) serving buckets from a
temporary directory, and tests/s3/sigv4_proxy.py in front of it verifying every request's SigV4
signature with botocore. Both bind 127.0.0.1 on free ports and are stopped by pid.

Objects are uploaded straight to s3rver with plain PUTs (s3rver takes unsigned requests); every
request shardmill sends goes through the proxy."""

import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
NODE_MODULES = os.path.join(REPO, "tests", "interop", "js", "node_modules")

ACCESS_KEY = "AKIDSHARDMILLTEST"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
REGION = "eu-test-1"


def _wait_port(proc, port_file, what, timeout=30):
    t0 = time.monotonic()
    while not os.path.exists(port_file):
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode} before listening")
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"{what} did not start within {timeout} s")
        time.sleep(0.02)
    with open(port_file) as f:
        return int(f.read())


def _stop(proc):
    if proc is not None and proc.poll() is None:
        proc.terminate()  # by pid
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


class S3rver:
    """s3rver on a free port, its buckets under a temporary directory."""

    def __init__(self, node):
        if not os.path.exists(os.path.join(NODE_MODULES, "s3rver", "package.json")):
            sys.exit(f"s3rver is not installed in {NODE_MODULES}: run scripts/install-deps.sh "
                     "(npm ci --prefix tests/interop/js)")
        if not node or not shutil.which(node):
            sys.exit(f"node not found ({node!r}): run scripts/install-deps.sh")
        self.dir = tempfile.mkdtemp(prefix="shardmill-s3rver-")
        os.makedirs(os.path.join(self.dir, "data"))
        self.port_file = os.path.join(self.dir, "port")
        env = dict(os.environ, NODE_PATH=NODE_MODULES)
        self.proc = subprocess.Popen([node, os.path.join(HERE, "s3rver_run.cjs"),
                                      os.path.join(self.dir, "data"), self.port_file, "300"],
                                     env=env)
        self.port = None

    def wait_ready(self):
        """Blocks until s3rver listens (start-up overlaps with the caller's work until then)."""
        if self.port is None:
            self.port = _wait_port(self.proc, self.port_file, "s3rver")
        return self

    def _req(self, method, path, body=None):
        self.wait_ready()
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request(method, urllib.parse.quote(path, safe="/~"), body=body,
                      headers={"Content-Length": str(len(body or b""))})
            r = c.getresponse()
            data = r.read()
            if r.status >= 300:
                raise RuntimeError(f"s3rver {method} {path}: HTTP {r.status} {data[:300]!r}")
        finally:
            c.close()

    def make_bucket(self, bucket):
        self._req("PUT", f"/{bucket}")

    def upload_tree(self, bucket, local_dir, prefix):
        """Every file under local_dir as an object under prefix/ (its relative path as key)."""
        n = 0
        for root, _, files in os.walk(local_dir):
            for name in files:
                p = os.path.join(root, name)
                rel = os.path.relpath(p, local_dir).replace(os.sep, "/")
                with open(p, "rb") as f:
                    self._req("PUT", f"/{bucket}/{prefix}/{rel}", f.read())
                n += 1
        return n

    def close(self):
        _stop(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


class Proxy:
    """sigv4_proxy.py in front of s3rver; log() returns its request records."""

    def __init__(self, upstream_port, access_key=ACCESS_KEY, secret=SECRET, region=REGION):
        self.dir = tempfile.mkdtemp(prefix="shardmill-s3proxy-")
        port_file = os.path.join(self.dir, "port")
        self.log_path = os.path.join(self.dir, "log.jsonl")
        self.control = os.path.join(self.dir, "control.json")
        self.generation = 0
        cmd = [sys.executable, os.path.join(HERE, "sigv4_proxy.py"), "--upstream-port",
               str(upstream_port), "--port-file", port_file, "--log", self.log_path,
               "--access-key", access_key, "--secret", secret, "--region", region,
               "--control", self.control, "--max-lifetime", "300"]
        self.proc = subprocess.Popen(cmd)
        self.port_file = port_file
        self.port = None
        self.endpoint = None

    def wait_ready(self):
        """Blocks until the proxy listens (importing botocore takes a while)."""
        if self.port is None:
            self.port = _wait_port(self.proc, self.port_file, "sigv4_proxy.py")
            self.endpoint = f"http://127.0.0.1:{self.port}"
        return self

    def reset(self):
        open(self.log_path, "w").close()
        self.configure()

    def configure(self, token=None, inject_503=None, redirect_301=None):
        """token: the x-amz-security-token required; inject_503: (path substring, count);
        redirect_301: a path substring answered with 301 PermanentRedirect."""
        self.generation += 1
        tmp = self.control + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"token": token, "inject_503": inject_503, "redirect_301": redirect_301,
                       "generation": self.generation}, f)
        os.replace(tmp, self.control)

    def log(self):
        if not os.path.exists(self.log_path):
            return []
        with open(self.log_path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def close(self):
        _stop(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


def s3_env(endpoint, home, access_key=ACCESS_KEY, secret=SECRET, region=REGION, **extra):
    """A process environment with only the AWS settings given (HOME: no stray ~/.aws)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["HOME"] = home
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    if access_key:
        env["AWS_ACCESS_KEY_ID"] = access_key
    if secret:
        env["AWS_SECRET_ACCESS_KEY"] = secret
    if region:
        env["AWS_REGION"] = region
    env.update(extra)
    return env
