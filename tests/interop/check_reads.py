"""Check `shardmill info` and `shardmill read` against the fixtures' expected values (NumPy).

Usage: /usr/bin/python3 check_reads.py --shardmill BIN --fixtures DIR [--family NAME] [-j N]
For every array in DIR/manifest.json: `info` fields (zarr_format, node_type, shape, dtype,
chunks, shards, fill_value, codecs) are compared with what the generator wrote; `read` of the
whole array and of sub-regions (aligned, nonaligned, crossing chunk and shard boundaries, edge
chunks, single voxels, a one-plane slab, through `-o -` too; sharded arrays once more with the
shard-index cache off) is compared bit for bit with the expected values. Group members are read
both as `GROUP --array PATH` and as `GROUP/PATH`, and some stores are given as file:// URLs.
Every mismatching case is printed (FAIL lines) with its command; the last line is "<family>: N
passed, N failed"; the exit status is 1 on any failure.
"""

import argparse
import concurrent.futures
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

from fixture_common import load_expected, read_manifest

ITEMSIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4,
            "uint32": 4, "int64": 8, "uint64": 8, "float32": 4, "float64": 8}


def regions(shape, chunks, shards):
    """(label, offset, shape) cases for an array; deduplicated, always inside the array."""
    nd = len(shape)
    out = [("whole", [0] * nd, list(shape)),
           ("voxel_first", [0] * nd, [1] * nd),
           ("voxel_last", [s - 1 for s in shape], [1] * nd),
           ("voxel_mid", [s // 2 for s in shape], [1] * nd)]
    off = [c if s > c else 0 for s, c in zip(shape, chunks)]
    out.append(("aligned_chunk", off, [min(c, s - o) for s, c, o in zip(shape, chunks, off)]))
    off = [min(c // 2 + 1, s - 1) for s, c in zip(shape, chunks)]
    out.append(("cross_chunks", off, [min(c + 3, s - o) for s, c, o in zip(shape, chunks, off)]))
    off = [max(0, ((s - 1) // c) * c - 1) for s, c in zip(shape, chunks)]
    out.append(("edge_chunks", off, [s - o for s, o in zip(shape, off)]))
    if nd >= 2:
        off = [shape[0] // 2] + [1] * (nd - 1)
        out.append(("plane", off, [1] + [s - 1 for s in shape[1:]]))
    if shards:
        off = [max(0, min(sh - c // 2 - 1, s - 1)) for s, c, sh in zip(shape, chunks, shards)]
        out.append(("cross_shards", off,
                    [min(2 * c + 1, s - o) for s, c, o in zip(shape, chunks, off)]))
        off = [sh if s > sh else 0 for s, sh in zip(shape, shards)]
        out.append(("aligned_shard", off, [min(sh, s - o) for s, sh, o in zip(shape, shards, off)]))
    seen, uniq = set(), []
    for label, o, n in out:
        key = (tuple(o), tuple(n))
        if key not in seen and all(x >= 1 for x in n):
            seen.add(key)
            uniq.append((label, o, n))
    return uniq


def run(cmd, timeout=120):
    """Run a command, return (exit code, stdout bytes, stderr text)."""
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -999, b"", "timeout"
    err = p.stderr.decode(errors="replace").strip()
    if len(err) > 400 or err.count("\n") > 2:  # keep FAIL lines readable (tracebacks, floods)
        err = "[...] " + "\n".join(err.splitlines()[-2:])[-400:]
    return p.returncode, p.stdout, err


def _fill_equal(got, want, dtype):
    if want is None or got is None:
        return got is None and want is None
    if isinstance(want, str) or isinstance(got, str):
        if isinstance(want, str) and isinstance(got, str):
            return want == got
        return False
    if dtype == "bool":
        return isinstance(got, bool) and got == want
    if dtype.startswith("float"):
        return isinstance(got, (int, float)) and float(got) == float(want) and \
            math.copysign(1, float(got)) == math.copysign(1, float(want))
    return isinstance(got, int) and not isinstance(got, bool) and got == want


def _v3_meta(fixdir, entry):
    if entry["zarr_format"] != 3:
        return None
    p = os.path.join(fixdir, entry["path"], *(entry["array"] or "").split("/"), "zarr.json")
    with open(p) as f:
        return json.load(f)


def check_info(sm, fixdir, entry, store, array):
    """Compare `shardmill info` with the generator's knowledge; return a list of problems."""
    cmd = [sm, "info", store] + (["--array", array] if array else [])
    code, out, err = run(cmd)
    if code != 0:
        return [f"exit {code}, stderr {err.strip()!r} ({' '.join(cmd)})"]
    try:
        info = json.loads(out)
    except ValueError as e:
        return [f"stdout is not JSON: {e} ({' '.join(cmd)})"]
    bad = []

    def want(key, value):
        if key not in info:
            bad.append(f"info.{key} missing")
        elif info[key] != value:
            bad.append(f"info.{key} = {info[key]!r}, expected {value!r}")

    want("zarr_format", entry["zarr_format"])
    want("node_type", "array")
    want("shape", entry["shape"])
    want("dtype", entry["dtype"])
    want("chunks", entry["chunks"])
    want("shards", entry["shards"])
    if "fill_value" not in info:
        bad.append("info.fill_value missing")
    elif not _fill_equal(info["fill_value"], entry["fill_value"], entry["dtype"]):
        bad.append(f"info.fill_value = {info['fill_value']!r}, expected {entry['fill_value']!r}")
    codecs = info.get("codecs")
    if not isinstance(codecs, list) or not all(isinstance(c, dict) and "name" in c
                                               for c in codecs):
        bad.append(f"info.codecs is not a list of {{name, configuration}}: {codecs!r}")
    else:
        names = [c["name"] for c in codecs]
        meta = _v3_meta(fixdir, entry)
        if meta is not None:
            expect = [c["name"] for c in meta["codecs"]]
            if names != expect:
                bad.append(f"info.codecs names {names}, expected {expect}")
        elif entry.get("compressor"):
            comp = entry["compressor"][0]
            if not any(comp in n for n in names):
                bad.append(f"info.codecs names {names} lack the v2 compressor {comp}")
    attrs = info.get("attributes")
    if not isinstance(attrs, dict):
        bad.append(f"info.attributes = {attrs!r}, expected an object")
    elif entry["family"] != "sharded" and attrs.get("fixture") != entry["name"]:
        bad.append(f"info.attributes = {attrs!r}, expected fixture={entry['name']!r}")
    return [f"{b} ({' '.join(cmd)})" for b in bad]


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


def compare(got_bytes, expected, dtype):
    """Problems comparing raw little-endian bytes with the expected NumPy region."""
    n = expected.size * ITEMSIZE[dtype]
    if len(got_bytes) != n:
        return f"{len(got_bytes)} bytes, expected {n}"
    got = np.frombuffer(got_bytes, dtype=np.dtype(dtype).newbyteorder("<")).reshape(expected.shape)
    if dtype == "bool":
        if not np.all((np.frombuffer(got_bytes, "u1") <= 1)):
            return "bool bytes other than 0/1"
    g, w = _bits(got.astype(got.dtype.newbyteorder("="))), _bits(expected)
    diff = np.argwhere(g != w)
    if diff.size == 0:
        return None
    first = [tuple(int(x) for x in d) for d in diff[:4]]
    samples = ", ".join(f"{i}: got {got[i]!r} want {expected[i]!r}" for i in first)
    nan_eq = ""
    if expected.dtype.kind == "f" and np.array_equal(got, expected, equal_nan=True):
        nan_eq = " (equal as values: NaN payload or -0.0 bits differ)"
    return f"{len(diff)} of {expected.size} values differ{nan_eq}; {samples}"


def check_read(sm, entry, expected, store, array, label, off, shape, tmpdir, to_stdout=False,
               extra=()):
    """Read one region with `shardmill read`; return a problem string or None."""
    out = "-" if to_stdout else os.path.join(tmpdir, f"{label}.bin")
    cmd = [sm, "read", store] + (["--array", array] if array else []) + [
        "--offset", ",".join(map(str, off)), "--shape", ",".join(map(str, shape)), "-o", out,
        *extra]
    code, stdout, err = run(cmd)
    if code != 0:
        return f"exit {code}, stderr {err.strip()!r} ({' '.join(cmd)})"
    if to_stdout:
        data = stdout
    else:
        try:
            with open(out, "rb") as f:
                data = f.read()
            os.remove(out)
        except OSError as e:
            return f"no output file: {e} ({' '.join(cmd)})"
    sl = tuple(slice(o, o + n) for o, n in zip(off, shape))
    problem = compare(data, expected[sl], entry["dtype"])
    return None if problem is None else f"{problem} ({' '.join(cmd)})"


def check_entry(sm, fixdir, entry, k):
    """All cases of one manifest entry -> list of (case label, problem or None)."""
    results = []
    store_dir = os.path.join(fixdir, entry["path"])
    array = entry["array"]
    store = ("file://" + os.path.abspath(store_dir)) if k % 4 == 3 else store_dir
    for p in check_info(sm, fixdir, entry, store, array) or [None]:
        results.append((f"{entry['name']} info", p))
    if array:
        node = os.path.join(store_dir, *array.split("/"))
        for p in check_info(sm, fixdir, entry, node, None) or [None]:
            results.append((f"{entry['name']} info(node path)", p))
    expected = load_expected(fixdir, entry)
    if list(expected.shape) != entry["shape"]:
        return [(f"{entry['name']} expected", "expected values have the wrong shape")]
    with tempfile.TemporaryDirectory(prefix="sm_interop_") as tmp:
        for i, (label, off, shape) in enumerate(regions(entry["shape"], entry["chunks"],
                                                         entry["shards"])):
            case = f"{entry['name']} read {label} [{','.join(map(str, off))}]+" \
                   f"[{','.join(map(str, shape))}]"
            if array and i % 2 == 1:
                p = check_read(sm, entry, expected, os.path.join(store_dir, *array.split("/")),
                               None, label, off, shape, tmp)
            else:
                p = check_read(sm, entry, expected, store, array, label, off, shape, tmp,
                               to_stdout=(label == "voxel_mid"))
            results.append((case, p))
        if entry["shards"]:  # the same whole read with the shard-index cache off
            p = check_read(sm, entry, expected, store, array, "whole_nocache",
                           [0] * len(entry["shape"]), entry["shape"], tmp,
                           extra=["--index-cache-bytes", "0"])
            results.append((f"{entry['name']} read whole (--index-cache-bytes 0)", p))
    return results


def check_groups(sm, fixdir, arrays):
    """Every group store in the manifest: `info` says node_type group."""
    results = []
    for g in sorted({e["path"] for e in arrays if e["array"]}):
        cmd = [sm, "info", os.path.join(fixdir, g)]
        code, out, err = run(cmd)
        problem = None
        if code != 0:
            problem = f"exit {code}, stderr {err.strip()!r}"
        else:
            try:
                info = json.loads(out)
                if info.get("node_type") != "group":
                    problem = f"node_type {info.get('node_type')!r}, expected 'group'"
            except ValueError as e:
                problem = f"stdout is not JSON: {e}"
        results.append((f"{g} info(group)", None if problem is None
                        else f"{problem} ({' '.join(cmd)})"))
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--family", help="only manifest entries of this family")
    ap.add_argument("--label", help="name printed on the closing line")
    ap.add_argument("-j", type=int, default=2)
    a = ap.parse_args(argv)
    arrays = [e for e in read_manifest(a.fixtures) if not a.family or e["family"] == a.family]
    if not arrays:
        print(f"no fixtures in {a.fixtures} for family {a.family}")
        return 1
    results = check_groups(a.shardmill, a.fixtures, arrays)
    with concurrent.futures.ThreadPoolExecutor(a.j) as ex:
        futs = [ex.submit(check_entry, a.shardmill, a.fixtures, e, k) for k, e in enumerate(arrays)]
        for f in futs:
            results += f.result()
    failed = [(c, p) for c, p in results if p is not None]
    for c, p in failed:
        print(f"FAIL {c}: {p}")
    passed = len(results) - len(failed)
    print(f"{a.label or a.family or 'interop'}: {passed} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
