"""Shared pieces of the HTTP tier: the fixture manifest, running `shardmill read`, the NumPy
oracle of a region, and checks of the SPEC §4 error line."""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np



def test_args():
    """--shardmill and --fixtures (made absolute) of a unittest module of this tier; returns them
    and the argv that unittest.main takes for the rest."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--fixtures", required=True)
    args, rest = ap.parse_known_args()
    args.shardmill = os.path.abspath(args.shardmill)
    args.fixtures = os.path.abspath(args.fixtures)
    return args, [sys.argv[0]] + rest


def env_or_die(name):
    v = os.environ.get(name)
    if not v:
        sys.exit(f"{name} is not set (run through ctest, or set it by hand)")
    return v


def load_manifest(fixtures):
    with open(os.path.join(fixtures, "manifest.json")) as f:
        return {a["name"]: a for a in json.load(f)["arrays"]}


def expected(fixtures, entry):
    return np.load(os.path.join(fixtures, entry["expected"]))


def region_bytes(arr, offset, shape):
    sl = tuple(slice(o, o + n) for o, n in zip(offset, shape))
    a = np.ascontiguousarray(arr[sl])
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


class ReadResult:
    def __init__(self, rc, stdout, stderr, data, stats, out_path):
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.data = data
        self.stats = stats
        self.out_path = out_path

    def total_requests(self):
        return sum(self.stats["requests"].values()) if self.stats else None

    def describe(self):
        reqs = self.stats and self.stats["requests"]
        return f"rc={self.rc} stderr={self.stderr.strip()!r} stats={reqs}"


def run_read(shardmill, store, offset=None, shape=None, extra=(), timeout=60, env=None):
    """Runs `shardmill read STORE ... -o OUT --stats S`; returns a ReadResult (data None when
    no output file was written)."""
    with tempfile.TemporaryDirectory(prefix="shardmill-http-") as d:
        out = os.path.join(d, "region.bin")
        st = os.path.join(d, "stats.json")
        cmd = [shardmill, "read", store, "-o", out, "--stats", st]
        if offset is not None:
            cmd += ["--offset", ",".join(map(str, offset))]
        if shape is not None:
            cmd += ["--shape", ",".join(map(str, shape))]
        cmd += list(extra)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        data = stats = None
        if os.path.exists(out):
            with open(out, "rb") as fh:
                data = fh.read()
        if os.path.exists(st):
            with open(st) as fh:
                stats = json.load(fh)
        leftovers = [f for f in os.listdir(d) if f not in ("region.bin", "stats.json")]
        if leftovers:
            raise AssertionError(f"shardmill left temporary files behind: {leftovers}")
        return ReadResult(p.returncode, p.stdout, p.stderr, data, stats, out)


def check_error_line(tc, res, code, where_contains, what_contains=()):
    """SPEC §4: exit `code`, one stderr line `shardmill: error: <where>: <what>`, where naming
    the URL; never an output file after an error."""
    tc.assertEqual(res.rc, code, res.describe())
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    tc.assertEqual(len(lines), 1, f"want exactly one error line, got {lines!r}")
    line = lines[0]
    tc.assertTrue(line.startswith("shardmill: error: "), line)
    body = line[len("shardmill: error: "):]
    where, _, what = body.partition(": ")  # a URL has ':' but never ': '
    tc.assertIn(where_contains, where, f"<where> does not name {where_contains}: {line}")
    tc.assertTrue(what, line)
    for w in what_contains:
        tc.assertIn(w, body, line)
    tc.assertIsNone(res.data, "an output file was written despite the error")
    return line
