"""An independent NumPy decoder of the Zarr v3 output (zarr.json only; the sharding index's
CRC32C verified with the `crc32c` module): chunks, shards, whole arrays, and the shard keys of a
grid. Always /usr/bin/python3 (Debian numpy, zstandard, crc32c)."""

import json
import os
import zlib

import crc32c as _crc32c
import numpy as np

EMPTY = 2**64 - 1
DTYPES = {"bool": "?", "int8": "<i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
          "uint8": "<u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
          "float32": "<f4", "float64": "<f8"}


# ---- an independent decoder of the output (Zarr v3 spec, NumPy) ----

def decode_chunk(codecs, data, dtype, shape):
    """Runs a [bytes, (zstd|gzip|blosc)?] chain backwards."""
    for c in reversed(codecs[1:]):
        name = c["name"]
        if name == "zstd":
            import zstandard
            data = zstandard.ZstdDecompressor().decompress(data)
        elif name == "gzip":
            data = zlib.decompress(data, 31)
        elif name == "blosc":
            from numcodecs import Blosc
            data = Blosc().decode(data)
        else:
            raise ValueError(f"unexpected codec {name}")
    assert codecs[0]["name"] == "bytes", codecs
    dt = np.dtype(DTYPES[dtype])
    if codecs[0].get("configuration", {}).get("endian") == "big":
        dt = dt.newbyteorder(">")
    n = int(np.prod(shape))
    if len(data) != n * dt.itemsize:
        raise ValueError(f"inner chunk decodes to {len(data)} bytes, want {n * dt.itemsize}")
    return np.frombuffer(bytes(data), dtype=dt).reshape(shape).astype(dt.newbyteorder("="))


def fill_of(meta):
    fv = meta["fill_value"]
    return {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}.get(fv, fv)


def decode_shard(cfg, data, dtype, shard_shape, fill):
    """Decodes one shard object; raises ValueError on a bad index (CRC32C, bounds)."""
    inner = cfg["chunk_shape"]
    cps = [s // c for s, c in zip(shard_shape, inner)]
    n = int(np.prod(cps))
    has_crc = any(c["name"] == "crc32c" for c in cfg["index_codecs"])
    index_len = 16 * n + (4 if has_crc else 0)
    if len(data) < index_len:
        raise ValueError(f"shard of {len(data)} bytes is shorter than its index ({index_len})")
    raw = data[-index_len:] if cfg["index_location"] == "end" else data[:index_len]
    if has_crc:
        want = int.from_bytes(raw[-4:], "little")
        got = _crc32c.crc32c(raw[:-4])
        if want != got:
            raise ValueError(f"index crc32c {got:08x} != stored {want:08x}")
        raw = raw[:-4]
    pairs = np.frombuffer(raw, dtype="<u8").reshape(n, 2)
    body_lo = 0 if cfg["index_location"] == "end" else index_len
    body_hi = len(data) - index_len if cfg["index_location"] == "end" else len(data)
    out = np.full(shard_shape, fill, dtype=np.dtype(DTYPES[dtype]).newbyteorder("="))
    for i, (off, nb) in enumerate(pairs):
        off, nb = int(off), int(nb)
        if off == EMPTY and nb == EMPTY:
            continue
        if off < body_lo or off + nb > body_hi:
            raise ValueError(f"inner chunk {i}: [{off}, {off + nb}) outside the shard body")
        idx = np.unravel_index(i, cps)
        sl = tuple(slice(k * c, (k + 1) * c) for k, c in zip(idx, inner))
        out[sl] = decode_chunk(cfg["codecs"], data[off:off + nb], dtype, inner)
    return out


def shard_grid(meta):
    grid_shape = meta["chunk_grid"]["configuration"]["chunk_shape"]
    return grid_shape, [-(-s // c) for s, c in zip(meta["shape"], grid_shape)]


def decode_object(meta, data):
    """The decoded block of one stored object (a shard or a plain chunk)."""
    grid_shape, _ = shard_grid(meta)
    codecs = meta["codecs"]
    fill = fill_of(meta)
    if codecs[0]["name"] == "sharding_indexed":
        return decode_shard(codecs[0]["configuration"], data, meta["data_type"], grid_shape, fill)
    return decode_chunk(codecs, data, meta["data_type"], grid_shape)


def spec_decode(path):
    """The whole output array decoded from its files by zarr.json alone (every shard is written:
    SPEC §2, so a missing shard is an error here)."""
    meta = json.load(open(os.path.join(path, "zarr.json")))
    shape = meta["shape"]
    grid_shape, grid = shard_grid(meta)
    full = np.full(shape, fill_of(meta), dtype=np.dtype(DTYPES[meta["data_type"]])
                   .newbyteorder("="))
    for idx in np.ndindex(*grid):
        data = open(os.path.join(path, "c", *[str(i) for i in idx]), "rb").read()
        block = decode_object(meta, data)
        sl = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, grid_shape, shape))
        full[sl] = block[tuple(slice(0, x.stop - x.start) for x in sl)]
    return full


def shard_keys(meta):
    _, grid = shard_grid(meta)
    return ["c/" + "/".join(str(i) for i in idx) for idx in np.ndindex(*grid)]
