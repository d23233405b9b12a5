"""Outputs written by shardmill's writer (engine/write/) read back by independent readers.

Usage: /usr/bin/python3 test_write_zarrita.py --helper SM_WRITE_FIXTURE --shardmill BIN
           --node NODE --out DIR
The helper (tests/helpers/sm_write_fixture.c) writes a deterministic pattern array per case and
its expected values (raw little-endian C order). Then:
  * zarrita.js 0.7.5 reads every case whose layout it supports (js/read_arrays.mjs) and compares
    every value, whole array and sub-regions;
  * an independent NumPy decoder of the v3 sharding spec (shardmill_test.zarr_decode: index at
    either end, CRC32C of the index verified, inner chunks via zstandard / zlib / numcodecs
    blosc) decodes every shard of every case, zarrita's blind spots (index at the start) included;
  * `shardmill read` of the whole array equals the expected bytes;
  * `shardmill verify` says ok, and exits 1 on a damaged copy, 3 on a non-output, 2 on bad usage;
  * 1 and 2 threads, and a killed-then-resumed run, give byte-identical trees.
Prints one line per check and "write_zarrita: N passed, N failed"; exit 1 on any failure.
"""

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys

import numpy as np

from shardmill_test import zarr_decode
from shardmill_test.checks import Checks

HERE = os.path.dirname(os.path.abspath(__file__))

# name, helper arguments, zarrita can read it (else why not)
CASES = [
    ("default_f32", ["--dtype", "float32", "--shape", "20,70,45", "--zero-below", "3000"], None),
    ("u16_gzip", ["--dtype", "uint16", "--shape", "9,33,50", "--shard", "4,16,32", "--chunk",
                  "2,8,16", "--codec", "gzip", "--level", "6", "--fill", "7"], None),
    ("u16_gzip_index_start", ["--dtype", "uint16", "--shape", "9,33,50", "--shard", "4,16,32",
                              "--chunk", "2,8,16", "--codec", "gzip", "--level", "6",
                              "--index", "start"],
     "zarrita 0.7.5 reads the shard index from the end whatever index_location says"),
    ("i32_blosc_nocrc", ["--dtype", "int32", "--shape", "17,17,17", "--shard", "8,8,8",
                         "--chunk", "4,4,4", "--codec", "blosc", "--level", "5",
                         "--no-index-crc"], None),
    ("f64_unsharded_zstd", ["--dtype", "float64", "--shape", "5,40,30", "--shard", "none",
                            "--chunk", "2,16,16", "--codec", "zstd", "--level", "1"], None),
    ("u8_raw_fill255", ["--dtype", "uint8", "--shape", "3,70,70", "--codec", "none",
                        "--fill", "255", "--zero-below", "5000"], None),
    ("i16_2d", ["--dtype", "int16", "--shape", "100,77", "--shard", "32,32", "--chunk", "16,8",
                "--fill", "-3"], None),
    ("f32_nan_fill", ["--dtype", "float32", "--shape", "8,40,40", "--fill", "nan",
                      "--zero-below", "6000"], None),
    ("i64_blosc_unsharded", ["--dtype", "int64", "--shape", "7,9,11", "--shard", "none",
                             "--chunk", "4,4,4", "--codec", "blosc", "--level", "3"], None),
]

def same_values(a, b):
    if a.dtype.kind == "f":
        return np.array_equal(a, b, equal_nan=True)
    return np.array_equal(a, b)


def trees_equal(a, b):
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    if mismatch or errors:
        return False
    return all(trees_equal(os.path.join(a, d), os.path.join(b, d)) for d in cmp.common_dirs)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--helper", required=True)
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    c = Checks("write_zarrita")
    manifest = {"arrays": []}
    for name, extra, no_zarrita in CASES:
        path = os.path.join(out, name + ".zarr")
        raw = os.path.join(out, name + ".raw")
        r = run([args.helper, path, "--raw", raw, "--threads", "2"] + extra)
        c.check(f"{name} write", r.returncode == 0, r.stderr.strip())
        if r.returncode != 0:
            continue
        meta = json.load(open(os.path.join(path, "zarr.json")))
        shape, dtype = meta["shape"], meta["data_type"]
        expected = np.fromfile(raw, dtype=np.dtype(zarr_decode.DTYPES[dtype])).reshape(shape)
        try:
            decoded = zarr_decode.spec_decode(path)
            c.check(f"{name} spec decode (NumPy)", same_values(decoded, expected),
                    "values differ")
        except Exception as e:  # noqa: BLE001 - any decoding problem is a failure to report
            c.check(f"{name} spec decode (NumPy)", False, repr(e))
        got = os.path.join(out, name + ".read")
        r = run([args.shardmill, "read", path, "--offset", ",".join("0" * len(shape)),
                 "--shape", ",".join(str(s) for s in shape), "-o", got])
        c.check(f"{name} shardmill read", r.returncode == 0 and
                open(got, "rb").read() == open(raw, "rb").read(), r.stderr.strip())
        r = run([args.shardmill, "verify", path])
        c.check(f"{name} shardmill verify", r.returncode == 0 and ": ok (" in r.stdout,
                r.stdout + r.stderr)
        entry = {"name": name, "path": name + ".zarr", "dtype": dtype, "shape": shape,
                 "raw": name + ".raw",
                 "regions": [{"offset": [1] * len(shape), "shape": [s - 1 for s in shape]},
                             {"offset": [s // 2 for s in shape], "shape": [1] * len(shape)}]}
        if no_zarrita:
            entry.update({"zarrita": False, "why": no_zarrita})
        manifest["arrays"].append(entry)
    mpath = os.path.join(out, "manifest.json")
    json.dump(manifest, open(mpath, "w"), indent=1)
    r = run([sys.executable, os.path.join(HERE, "run_node.py"), args.node, "read_arrays.mjs",
             mpath])
    print(r.stdout, end="")
    c.check("zarrita.js reads every output", r.returncode == 0, r.stderr.strip()[-2000:])

    # Thread count and resume leave no trace in the bytes.
    base = os.path.join(out, "default_f32.zarr")
    extra = CASES[0][1]
    one = os.path.join(out, "one_thread.zarr")
    r = run([args.helper, one, "--threads", "1"] + extra)
    c.check("1 thread == 2 threads (byte-identical tree)", r.returncode == 0 and
            trees_equal(one, base), r.stderr.strip())
    killed = os.path.join(out, "killed.zarr")
    r = run([args.helper, killed, "--threads", "2", "--fail-shard", "9"] + extra)
    c.check("killed run fails and leaves no marker", r.returncode == 1 and not os.path.exists(
        os.path.join(killed, "shardmill.complete.json")), r.stderr.strip())
    r = run([args.shardmill, "verify", killed])
    c.check("verify of a killed run exits 1", r.returncode == 1 and "did not complete" in r.stdout,
            r.stdout + r.stderr)
    r = run([args.helper, killed, "--threads", "2", "--exists", "resume"] + extra)
    try:
        written = json.loads(r.stdout)["written"]
    except ValueError:
        written = -1
    c.check("resume writes only the missing shards", r.returncode == 0 and 0 < written < 18,
            r.stdout + r.stderr)
    c.check("resumed == clean (byte-identical tree)", trees_equal(killed, base))
    r = run([args.helper, killed, "--exists", "error"] + extra)
    c.check("exists: error refuses", r.returncode == 1 and "output exists" in r.stderr, r.stderr)

    # verify failures and exit codes (SPEC §4).
    damaged = os.path.join(out, "damaged.zarr")
    shutil.copytree(base, damaged)
    shard = os.path.join(damaged, "c", "1", "1", "0")
    data = bytearray(open(shard, "rb").read())
    data[len(data) // 3] ^= 0x10
    open(shard, "wb").write(bytes(data))
    os.remove(os.path.join(damaged, "c", "2", "0", "1"))
    r = run([args.shardmill, "verify", damaged])
    c.check("verify of a damaged output exits 1 and names both shards",
            r.returncode == 1 and "c/1/1/0: crc32c" in r.stdout and "c/2/0/1: missing" in r.stdout
            and "verify failed: 2 problems" in r.stderr, r.stdout + r.stderr)
    plain = os.path.join(out, "plain")
    os.makedirs(plain)
    r = run([args.shardmill, "verify", plain])
    c.check("verify of a non-output exits 3", r.returncode == 3 and "not a shardmill output" in
            r.stderr, r.stderr)
    r = run([args.shardmill, "verify"])
    c.check("verify without OUTPUT exits 2", r.returncode == 2, r.stderr)
    r = run([args.shardmill, "verify", "--help"])
    c.check("verify --help exits 0", r.returncode == 0 and "usage: shardmill verify" in r.stdout,
            r.stdout)

    return c.done()


if __name__ == "__main__":
    sys.exit(main())
