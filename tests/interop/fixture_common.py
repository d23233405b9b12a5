"""Shared helpers for shardmill's interop fixture generators and runners (tests/interop).

A generator writes arrays under OUTDIR and a manifest OUTDIR/manifest.json:
{"arrays": [{"name", "family", "path" (STORE, relative to OUTDIR), "array" (node path inside
STORE or null), "dtype" (v3 name), "shape", "chunks" (inner chunk shape when sharded),
"shards" (shard shape or null), "zarr_format", "fill_value" (JSON form: "NaN"/"Infinity"/
"-Infinity"/null/number/bool), "expected" (values file: .npy, or .raw = little-endian C order),
"zarrita" (false if zarrita.js cannot read it), "why"}]}.
Expected values always come from NumPy data that zarr-python / zarrita / shard_writer read back.
"""

import json
import os

import numpy as np

from shardmill_test import shard_writer

V3_NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float32", "float64"]


def v3_name(dtype):
    """v3 data_type name of a NumPy dtype, whatever its byte order."""
    name = np.dtype(dtype).newbyteorder("=").name
    assert name in V3_NAMES, name
    return name


def fill_to_json(fill, dtype):
    """Fill value as Zarr JSON spells it (v2 and v3 agree for these types)."""
    return shard_writer.fill_json(fill, dtype)


def sample_values(dtype, shape, seed):
    """Deterministic values spanning the dtype's range; floats include NaN, ±Inf and -0.0."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype).newbyteorder("=")
    n = int(np.prod(shape))
    if dt.kind == "b":
        v = rng.integers(0, 3, n) == 0
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(int(info.min), int(info.max), n, dtype=dt, endpoint=True)
    else:
        v = (rng.standard_normal(n) * 1000).astype(dt)
        if n > 12:
            v[3] = np.nan
            v[5] = np.inf
            v[7] = -np.inf
            v[9] = -0.0
            v[11] = np.finfo(dt).tiny / 2  # a subnormal
    return v.reshape(shape).astype(dt)


def same_values(a, b):
    """Values equal elementwise (NaN equals NaN, -0.0 differs from 0.0), any byte order."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape or a.dtype.newbyteorder("=") != b.dtype.newbyteorder("="):
        return False
    if a.dtype.kind != "f":
        return bool(np.array_equal(a, b))
    return bool(np.array_equal(a, b, equal_nan=True)
                and np.array_equal(np.signbit(a), np.signbit(b)))


def save_expected(outdir, name, values):
    """Save expected values both as .npy (Python oracle) and .raw (zarrita reader)."""
    base = name.replace("/", "__")
    arr = np.ascontiguousarray(values)
    np.save(os.path.join(outdir, base + ".npy"), arr)
    le = arr.astype(arr.dtype.newbyteorder("<")) if arr.dtype.itemsize > 1 else arr
    le.tofile(os.path.join(outdir, base + ".raw"))
    return base + ".npy"


def load_expected(outdir, entry):
    """Expected values of a manifest entry as a native-endian NumPy array."""
    p = os.path.join(outdir, entry["expected"])
    dt = np.dtype(entry["dtype"])
    if p.endswith(".npy"):
        a = np.load(p)
    else:
        a = np.fromfile(p, dtype=dt.newbyteorder("<")).reshape(entry["shape"])
    return np.ascontiguousarray(a, dtype=dt.newbyteorder("="))


def write_manifest(outdir, arrays):
    """Write OUTDIR/manifest.json."""
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump({"arrays": arrays}, f, indent=1)


def read_manifest(outdir):
    """Read OUTDIR/manifest.json."""
    with open(os.path.join(outdir, "manifest.json")) as f:
        return json.load(f)["arrays"]
