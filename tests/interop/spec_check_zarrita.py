"""Decode zarrita.js-written v3 chunks with NumPy by the Zarr v3 spec: validates the JS writer.

Usage: /usr/bin/python3 spec_check_zarrita.py ZARRITA_FIXTURE_DIR
Independently of zarrita and shardmill, every chunk file is decoded from the spec's codec
definitions (crc32c: 4-byte little-endian CRC32C suffix, gzip RFC 1952, zstd, bytes with
endian, transpose order: the stored array is chunk.transpose(order)) using the key encoding in
zarr.json; missing chunks become the fill value; the result must equal the expected raw values
(bit patterns). Arbitrates between zarrita and shardmill if they ever disagree on the layout.
Last line "spec_check_zarrita: N passed, N failed".
"""

import gzip
import json
import os
import sys

import crc32c
import numpy as np
import zstandard

from fixture_common import load_expected, read_manifest


def decode_chunk(blob, meta, chunk_shape):
    """Chunk bytes -> NumPy chunk of chunk_shape in C order, by the v3 codec chain."""
    codecs = meta["codecs"]
    a2b = next(i for i, c in enumerate(codecs) if c["name"] == "bytes")
    for c in reversed(codecs[a2b + 1:]):
        if c["name"] == "crc32c":
            body, want = blob[:-4], int.from_bytes(blob[-4:], "little")
            assert crc32c.crc32c(body) == want, "crc32c"
            blob = body
        elif c["name"] == "gzip":
            blob = gzip.decompress(blob)
        elif c["name"] == "zstd":
            blob = zstandard.ZstdDecompressor().decompress(blob, max_output_size=1 << 30)
        else:
            raise ValueError(c["name"])
    endian = (codecs[a2b].get("configuration") or {}).get("endian", "little")
    dt = np.dtype(meta["data_type"])
    if dt.itemsize > 1:
        dt = dt.newbyteorder("<" if endian == "little" else ">")
    stored_shape = list(chunk_shape)
    perms = [c["configuration"]["order"] for c in codecs[:a2b] if c["name"] == "transpose"]
    for order in perms:
        stored_shape = [stored_shape[i] for i in order]
    arr = np.frombuffer(blob, dtype=dt)
    assert arr.size == int(np.prod(stored_shape)), "decoded size"
    arr = arr.reshape(stored_shape)
    for order in reversed(perms):
        arr = arr.transpose(np.argsort(order))
    return arr.astype(dt.newbyteorder("="))


def fill_of(meta):
    fv = meta["fill_value"]
    special = {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}
    return 0 if fv is None else special.get(fv, fv) if isinstance(fv, str) else fv


def decode_array(node_dir):
    """Whole array from its chunk files."""
    with open(os.path.join(node_dir, "zarr.json")) as f:
        meta = json.load(f)
    shape = meta["shape"]
    cs = meta["chunk_grid"]["configuration"]["chunk_shape"]
    kenc = meta["chunk_key_encoding"]
    sep = (kenc.get("configuration") or {}).get("separator", "/" if kenc["name"] == "default"
                                                 else ".")
    dt = np.dtype(meta["data_type"])
    grid = [-(-s // c) for s, c in zip(shape, cs)]
    out = np.full([g * c for g, c in zip(grid, cs)], fill_of(meta), dtype=dt)
    for idx in np.ndindex(*grid):
        parts = [str(i) for i in idx]
        key = sep.join(["c"] + parts) if kenc["name"] == "default" else sep.join(parts)
        p = os.path.join(node_dir, *key.split("/"))
        if not os.path.exists(p):
            continue
        with open(p, "rb") as f:
            chunk = decode_chunk(f.read(), meta, cs)
        out[tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, cs))] = chunk
    return out[tuple(slice(0, s) for s in shape)]


def _bits(a):
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


def main(argv):
    fixdir = argv[1]
    passed = failed = 0
    for e in read_manifest(fixdir):
        node = os.path.join(fixdir, e["path"], *(e["array"] or "").split("/"))
        try:
            got = decode_array(node)
            want = load_expected(fixdir, e)
            ok = np.array_equal(_bits(np.ascontiguousarray(got)), _bits(want))
            why = "values differ"
        except (AssertionError, ValueError, OSError) as ex:
            ok, why = False, f"{type(ex).__name__}: {ex}"
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {e['name']}: {why}")
    print(f"spec_check_zarrita: {passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
