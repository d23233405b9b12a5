"""Independent Zarr v3 writer (plain and sharded) for shardmill's interop tests and benchmarks.

Written from the Zarr v3 core and sharding_indexed specifications
(https://zarr-specs.readthedocs.io/en/latest/v3/core/v3.0.html,
https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html) with NumPy,
zlib/gzip, zstandard and crc32c only: it never uses shardmill or zarr-python, so it can serve as
an oracle for both. zarrita.js reads back every array it can (tests/interop/js/read_arrays.mjs); gen_sharded.py
checks the index-at-start and nested layouts zarrita cannot read against twins it can.

Python API (`from shardmill_test import shard_writer`; always run /usr/bin/python3):

    write_sharded_array(path, data, shard_shape, inner_shape, inner_codec="raw",
                        index_location="end", index_crc32c=True, fill_value=0,
                        skip_fill_chunks=True, nested_inner_shape=None, endian="little",
                        attributes=None, write_empty_shards=False, level=None,
                        nested_index_location="end")
    write_plain_v3(path, data, chunk_shape, codec="raw", endian="little", fill_value=0,
                   skip_fill_chunks=True, transpose=None, chunk_key_encoding="default",
                   separator="/", attributes=None, level=None)
    write_group_v3(path, attributes=None)

`inner_codec` / `codec` is "raw", "gzip", "zstd", "blosc[:cname[:shuffle[:clevel]]]" (blosc
needs numcodecs' c-blosc) or a list of those names plus "crc32c" (e.g. ["zstd", "crc32c"]): the
bytes-to-bytes codecs after `bytes`. Shards are laid out as the spec says: inner chunks in C
order of the inner grid, the index an array of shape inner_grid + [2] of little-endian uint64
(offset, nbytes) followed by its CRC32C when index_crc32c, placed at the start or end of the
shard; offsets count from the start of the shard object, so with index_location="start" they
include the index length. An inner chunk whose bytes equal the fill value's is not stored when
skip_fill_chunks (offset = nbytes = 2**64-1); a shard with no stored chunk is not written unless
write_empty_shards. Edge shards and edge chunks are padded to full size with the fill value.
With nested_inner_shape, each inner chunk is itself a sharding_indexed chunk (inner chunks of
nested_inner_shape, same inner codecs, index at nested_index_location with crc32c). `data` is a
NumPy array; its dtype picks data_type (bool, int8..uint64, float32, float64), its byte order is
ignored (values are what count).

CLI: PYTHONPATH=$PWD/tests/lib /usr/bin/python3 -m shardmill_test.shard_writer --help
"""

import argparse
import gzip
import json
import math
import os
import sys

import crc32c as _crc32c
import numpy as np
import zstandard

EMPTY = 2**64 - 1

_DTYPES = {
    "bool": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float32": "float32", "float64": "float64",
}


def v3_dtype_name(dtype):
    """The Zarr v3 data_type name of a NumPy dtype."""
    name = np.dtype(dtype).newbyteorder("=").name
    if name not in _DTYPES:
        raise ValueError(f"unsupported dtype {dtype}")
    return _DTYPES[name]


def fill_json(fill_value, dtype):
    """Fill value as the v3 JSON encoding (NaN/Infinity/-Infinity strings, bool literals)."""
    if fill_value is None:
        return None
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return bool(fill_value)
    if dt.kind == "f":
        f = float(fill_value)
        if math.isnan(f):
            return "NaN"
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        return f
    return int(fill_value)


def _fill_scalar(fill_value, dtype):
    return np.array(0 if fill_value is None else fill_value).astype(dtype)


def _codec_names(codec):
    if codec is None:
        return []
    names = [codec] if isinstance(codec, str) else list(codec)
    out = [n for n in names if n != "raw"]
    for n in out:
        if n not in ("gzip", "zstd", "crc32c") and not n.startswith("blosc"):
            raise ValueError(f"unknown codec {n}")
    return out


_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


def _blosc_conf(name):
    """'blosc[:cname[:shuffle[:clevel]]]' -> (cname, shuffle name, clevel)."""
    parts = name.split(":")[1:] + [None, None, None]
    return parts[0] or "lz4", parts[1] or "shuffle", int(parts[2] or 5)


def _b2b_json(names, level, itemsize=1):
    out = []
    for n in names:
        if n.startswith("blosc"):
            cname, shuffle, clevel = _blosc_conf(n)
            out.append({"name": "blosc", "configuration": {
                "cname": cname, "clevel": clevel, "shuffle": shuffle, "typesize": itemsize,
                "blocksize": 0}})
        if n == "gzip":
            out.append({"name": "gzip", "configuration": {"level": 5 if level is None else level}})
        elif n == "zstd":
            lvl = 3 if level is None else level
            out.append({"name": "zstd", "configuration": {"level": lvl, "checksum": False}})
        elif n == "crc32c":
            out.append({"name": "crc32c"})
    return out


def _b2b_encode(names, raw, level, itemsize=1):
    for n in names:
        if n.startswith("blosc"):
            from numcodecs import blosc  # the c-blosc library, only needed for blosc arrays
            cname, shuffle, clevel = _blosc_conf(n)
            buf = np.frombuffer(raw, dtype=f"u{itemsize}")  # typesize = buffer itemsize
            raw = bytes(blosc.compress(buf, cname.encode(), clevel, _SHUFFLE[shuffle], 0))
        if n == "gzip":
            raw = gzip.compress(raw, compresslevel=5 if level is None else level, mtime=0)
        elif n == "zstd":
            raw = zstandard.ZstdCompressor(level=3 if level is None else level).compress(raw)
        elif n == "crc32c":
            raw = raw + _crc32c.crc32c(raw).to_bytes(4, "little")
    return raw


def _bytes_json(endian):
    return {"name": "bytes", "configuration": {"endian": endian}}


def _to_bytes(arr, endian):
    """C-order bytes of arr in the requested endianness (bool as 0/1 bytes)."""
    if arr.dtype.kind == "b" or arr.dtype.itemsize == 1:
        return np.ascontiguousarray(arr).tobytes()
    order = "<" if endian == "little" else ">"
    return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder(order)).tobytes()


def _padded_block(data, start, shape, fill):
    """The block of `shape` at `start`, cut from data and padded with fill past its end."""
    sl = tuple(slice(s, min(s + n, d)) for s, n, d in zip(start, shape, data.shape))
    part = data[sl]
    if part.shape == tuple(shape):
        return np.ascontiguousarray(part)
    block = np.full(shape, fill, dtype=data.dtype)
    block[tuple(slice(0, n) for n in part.shape)] = part
    return block


def _grid(shape, chunk):
    return tuple(-(-s // c) for s, c in zip(shape, chunk))


def _encode_shard(block, inner_shape, names, endian, index_location, index_crc32c, fill,
                  skip_fill_chunks, nested_inner_shape, level, nested_index_location="end"):
    """Encode one shard-shaped block; return bytes or None if every inner chunk is empty."""
    grid = _grid(block.shape, inner_shape)
    if any(b % i for b, i in zip(block.shape, inner_shape)):
        raise ValueError("shard shape must be a multiple of the inner chunk shape")
    fill_bytes = _to_bytes(np.full(inner_shape, fill, dtype=block.dtype), endian)
    index = np.full(grid + (2,), EMPTY, dtype="<u8")
    parts = []
    pos = 0
    for idx in np.ndindex(*grid):
        start = tuple(i * n for i, n in zip(idx, inner_shape))
        chunk = block[tuple(slice(s, s + n) for s, n in zip(start, inner_shape))]
        raw = _to_bytes(chunk, endian)
        if skip_fill_chunks and raw == fill_bytes:
            continue
        if nested_inner_shape is not None:
            enc = _encode_shard(np.ascontiguousarray(chunk), nested_inner_shape, names, endian,
                                nested_index_location, True, fill, skip_fill_chunks, None, level)
        else:
            enc = _b2b_encode(names, raw, level, block.dtype.itemsize)
        index[idx] = (pos, len(enc))
        parts.append(enc)
        pos += len(enc)
    if not parts:
        return None
    index_len = int(np.prod(grid)) * 16 + (4 if index_crc32c else 0)
    if index_location == "start":
        index[index[..., 0] != EMPTY, 0] += index_len
    ib = index.tobytes()
    if index_crc32c:
        ib += _crc32c.crc32c(ib).to_bytes(4, "little")
    assert len(ib) == index_len
    body = b"".join(parts)
    return ib + body if index_location == "start" else body + ib


def _sharding_json(inner_shape, names, endian, index_location, index_crc32c,
                   nested_inner_shape, level, itemsize, nested_index_location="end"):
    if nested_inner_shape is not None:
        inner = [_sharding_json(nested_inner_shape, names, endian, nested_index_location, True,
                                None, level, itemsize)]
    else:
        inner = [_bytes_json(endian)] + _b2b_json(names, level, itemsize)
    index_codecs = [_bytes_json("little")] + ([{"name": "crc32c"}] if index_crc32c else [])
    return {"name": "sharding_indexed",
            "configuration": {"chunk_shape": list(inner_shape), "codecs": inner,
                              "index_codecs": index_codecs, "index_location": index_location}}


def _write_atomic(path, blob):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(blob)
    os.replace(tmp, path)


def _array_json(data, chunk_shape, codecs, fill_value, attributes, key_encoding):
    return {"zarr_format": 3, "node_type": "array", "shape": list(data.shape),
            "data_type": v3_dtype_name(data.dtype),
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunk_shape)}},
            "chunk_key_encoding": key_encoding,
            "fill_value": fill_json(fill_value, data.dtype),
            "codecs": codecs, "attributes": attributes or {}}


def _chunk_key(idx, encoding, separator):
    if encoding == "default":
        return "/".join(["c"] + [str(i) for i in idx]) if idx else "c"
    return separator.join(str(i) for i in idx) if idx else "0"


def _write_meta(path, meta):
    os.makedirs(path, exist_ok=True)
    _write_atomic(os.path.join(path, "zarr.json"), json.dumps(meta, indent=2).encode())


def write_sharded_array(path, data, shard_shape, inner_shape, inner_codec="raw",
                        index_location="end", index_crc32c=True, fill_value=0,
                        skip_fill_chunks=True, nested_inner_shape=None, endian="little",
                        attributes=None, write_empty_shards=False, level=None,
                        nested_index_location="end"):
    """Write `data` as a Zarr v3 array with one sharding_indexed codec; return the metadata."""
    data = np.asarray(data)
    if data.dtype.byteorder not in ("=", "|"):
        data = data.astype(data.dtype.newbyteorder("="))
    if index_location not in ("start", "end"):
        raise ValueError("index_location must be start or end")
    if len(shard_shape) != data.ndim or len(inner_shape) != data.ndim:
        raise ValueError("shard/inner shape rank differs from data")
    names = _codec_names(inner_codec)
    fill = _fill_scalar(fill_value, data.dtype)
    codec = _sharding_json(inner_shape, names, endian, index_location, index_crc32c,
                           nested_inner_shape, level, data.dtype.itemsize, nested_index_location)
    meta = _array_json(data, shard_shape, [codec], fill_value, attributes,
                       {"name": "default", "configuration": {"separator": "/"}})
    _write_meta(path, meta)
    for sidx in np.ndindex(*_grid(data.shape, shard_shape)):
        start = tuple(i * n for i, n in zip(sidx, shard_shape))
        block = _padded_block(data, start, tuple(shard_shape), fill)
        blob = _encode_shard(block, tuple(inner_shape), names, endian, index_location,
                             index_crc32c, fill, skip_fill_chunks,
                             None if nested_inner_shape is None else tuple(nested_inner_shape),
                             level, nested_index_location)
        if blob is None:
            if not write_empty_shards:
                continue
            grid = _grid(shard_shape, inner_shape)
            ib = np.full(grid + (2,), EMPTY, dtype="<u8").tobytes()
            blob = ib + (_crc32c.crc32c(ib).to_bytes(4, "little") if index_crc32c else b"")
        _write_atomic(os.path.join(path, _chunk_key(sidx, "default", "/")), blob)
    return meta


def write_plain_v3(path, data, chunk_shape, codec="raw", endian="little", fill_value=0,
                   skip_fill_chunks=True, transpose=None, chunk_key_encoding="default",
                   separator="/", attributes=None, level=None):
    """Write `data` as an unsharded Zarr v3 array; return the metadata.

    transpose: a permutation (v3 `transpose` codec `order`): chunk bytes hold
    chunk.transpose(order) in C order. chunk_key_encoding "default" (c/i/j) or "v2" (i.j or i/j).
    """
    data = np.asarray(data)
    if data.dtype.byteorder not in ("=", "|"):
        data = data.astype(data.dtype.newbyteorder("="))
    names = _codec_names(codec)
    fill = _fill_scalar(fill_value, data.dtype)
    codecs = []
    if transpose is not None:
        codecs.append({"name": "transpose", "configuration": {"order": list(transpose)}})
    codecs += [_bytes_json(endian)] + _b2b_json(names, level, data.dtype.itemsize)
    if chunk_key_encoding == "default":
        kenc = {"name": "default", "configuration": {"separator": separator}}
    else:
        kenc = {"name": "v2", "configuration": {"separator": separator}}
    meta = _array_json(data, chunk_shape, codecs, fill_value, attributes, kenc)
    _write_meta(path, meta)
    fill_chunk = np.full(chunk_shape, fill, dtype=data.dtype)
    for cidx in np.ndindex(*_grid(data.shape, chunk_shape)):
        start = tuple(i * n for i, n in zip(cidx, chunk_shape))
        block = _padded_block(data, start, tuple(chunk_shape), fill)
        if skip_fill_chunks and _to_bytes(block, endian) == _to_bytes(fill_chunk, endian):
            continue
        if transpose is not None:
            block = block.transpose(transpose)
        blob = _b2b_encode(names, _to_bytes(block, endian), level, data.dtype.itemsize)
        if chunk_key_encoding == "default":
            key = "/".join(["c"] + [str(i) for i in cidx])
        else:
            key = separator.join(str(i) for i in cidx)
        _write_atomic(os.path.join(path, key), blob)
    return meta


def write_group_v3(path, attributes=None):
    """Write a Zarr v3 group document."""
    meta = {"zarr_format": 3, "node_type": "group", "attributes": attributes or {}}
    _write_meta(path, meta)
    return meta


def _ints(text):
    return tuple(int(x) for x in text.split(","))


def main(argv=None):
    """CLI: write an .npy file as a sharded (or plain) v3 array."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("npy", help="input .npy file (its dtype and shape are the array's)")
    p.add_argument("out", help="output array directory")
    p.add_argument("--shard", type=_ints, help="shard shape, e.g. 512,512 (omit: unsharded)")
    p.add_argument("--inner", type=_ints, required=True, help="inner chunk (or chunk) shape")
    p.add_argument("--codec", default="raw", help="raw|gzip|zstd, comma list may add crc32c")
    p.add_argument("--index-location", default="end", choices=["start", "end"])
    p.add_argument("--no-index-crc32c", action="store_true")
    p.add_argument("--fill", default="0", help="fill value (number, NaN, Infinity, -Infinity)")
    p.add_argument("--write-fill-chunks", action="store_true")
    p.add_argument("--nested", type=_ints, help="nested inner chunk shape")
    p.add_argument("--endian", default="little", choices=["little", "big"])
    a = p.parse_args(argv)
    data = np.load(a.npy)
    fill = float(a.fill) if data.dtype.kind == "f" else int(a.fill)
    codec = a.codec.split(",")
    if a.shard:
        write_sharded_array(a.out, data, a.shard, a.inner, codec, a.index_location,
                            not a.no_index_crc32c, fill, not a.write_fill_chunks, a.nested,
                            a.endian)
    else:
        write_plain_v3(a.out, data, a.inner, codec, a.endian, fill, not a.write_fill_chunks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
