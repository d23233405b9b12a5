"""Golden error corpus for shardmill (tests/bad_input, STYLE B11): broken stores and the table.

Each CASE: name → build(dir) writes a broken (or valid) store under dir and returns the store
path; args (after `shardmill`, with {store} and {out} placeholders); exit (expected code, SPEC
§4, or a list of acceptable codes where the SPEC allows two readings); must (substrings the one
error line must contain, case-insensitive; they name the object: metadata document, chunk key,
codec, limit); must_not (substrings it must not contain); any (groups of alternatives, one of
each group must appear); control (optional args that must succeed on the same store, so a limit
case proves the limit, not a broken store, caused the failure). Stores are built with shard_writer.py (v3) and zarr-python 2.13 (v2), then
damaged. `python3 bad_cases.py OUTDIR` writes every store and the table as OUTDIR/cases.json
(read by run_bad.py, which so needs no zarr import); `--list` prints the case names.
"""

import json
import os
import shutil
import struct
import sys
import zlib

import crc32c
import numcodecs
import numpy as np
import zarr

from shardmill_test import shard_writer as sw

EMPTY = 2**64 - 1


def _data(shape, dtype="<u2"):
    return (np.arange(int(np.prod(shape))) % 1000 + 1).astype(dtype).reshape(shape)


def _v2(d, compressor, shape=(10, 10), chunks=(5, 5), dtype="<u2", sep="."):
    store = os.path.join(d, "a.zarr")
    z = zarr.create(shape=shape, chunks=chunks, dtype=dtype, compressor=compressor,
                    store=zarr.DirectoryStore(store, dimension_separator=sep), fill_value=0,
                    dimension_separator=sep)
    z[...] = _data(shape, dtype)
    return store


def _v3(d, codec="raw", shape=(10, 10), chunks=(5, 5)):
    store = os.path.join(d, "a.zarr")
    sw.write_plain_v3(store, _data(shape), chunks, codec=codec)
    return store


def _sharded(d, shape=(16, 16), shard=(16, 16), inner=(4, 4), codec="raw", crc=True,
             location="end"):
    store = os.path.join(d, "s.zarr")
    sw.write_sharded_array(store, _data(shape), shard, inner, inner_codec=codec,
                           index_crc32c=crc, index_location=location)
    return store


def _edit_json(path, fn):
    with open(path) as f:
        meta = json.load(f)
    fn(meta)
    with open(path, "w") as f:
        json.dump(meta, f, indent=2)


def _write_text(path, text):
    with open(path, "w") as f:
        f.write(text)


def _patch(path, fn):
    with open(path, "rb") as f:
        b = bytearray(f.read())
    b = fn(b)
    with open(path, "wb") as f:
        f.write(bytes(b))


# ---- builders --------------------------------------------------------------------------------

def _write_bad_json(path, text, line):
    """Write malformed JSON whose error Python's json module also places on `line`."""
    try:
        json.loads(text)
        raise AssertionError("JSON unexpectedly valid")
    except json.JSONDecodeError as e:
        assert e.lineno == line, (e.lineno, line)
    _write_text(path, text)


def b_json_v3(d):
    """zarr.json with a doubled comma on line 4."""
    store = os.path.join(d, "a.zarr")
    os.makedirs(store)
    _write_bad_json(os.path.join(store, "zarr.json"),
                    '{\n  "zarr_format": 3,\n  "node_type": "array",\n  "shape": [4, 4],,\n'
                    '  "data_type": "uint8"\n}\n', 4)
    return store


def b_json_v2(d):
    """.zarray with a doubled comma on line 6."""
    store = _v2(d, None)
    _write_bad_json(os.path.join(store, ".zarray"),
                    '{\n    "chunks": [5, 5],\n    "compressor": null,\n    "dtype": "<u2",\n'
                    '    "fill_value": 0,\n    "filters": null,, \n    "order": "C",\n'
                    '    "shape": [10, 10],\n    "zarr_format": 2\n}\n', 6)
    return store


def b_ndim(d):
    store = _v3(d)
    _edit_json(os.path.join(store, "zarr.json"),
               lambda m: m["chunk_grid"]["configuration"].update(chunk_shape=[5]))
    return store


def b_zero_chunk_v2(d):
    store = _v2(d, None)
    _edit_json(os.path.join(store, ".zarray"), lambda m: m.update(chunks=[0, 5]))
    return store


def b_negative_chunk_v3(d):
    store = _v3(d)
    _edit_json(os.path.join(store, "zarr.json"),
               lambda m: m["chunk_grid"]["configuration"].update(chunk_shape=[-5, 5]))
    return store


def b_dtype_v3(d):
    store = _v3(d)
    _edit_json(os.path.join(store, "zarr.json"), lambda m: m.update(data_type="complex64"))
    return store


def b_dtype_v2(d):
    store = _v2(d, None)
    _edit_json(os.path.join(store, ".zarray"), lambda m: m.update(dtype="<c8"))
    return store


def b_codec_v3(d):
    store = _v3(d)
    _edit_json(os.path.join(store, "zarr.json"),
               lambda m: m["codecs"].append({"name": "lzma_fancy", "configuration": {}}))
    return store


def b_codec_v2(d):
    store = _v2(d, None)
    _edit_json(os.path.join(store, ".zarray"), lambda m: m.update(compressor={"id": "lz77x"}))
    return store


def b_no_meta(d):
    store = os.path.join(d, "empty.zarr")
    os.makedirs(store)
    return store


def b_group_v3(d):
    store = os.path.join(d, "g.zarr")
    sw.write_group_v3(store)
    sw.write_plain_v3(os.path.join(store, "arr"), _data((4, 4)), (2, 2))
    return store


def b_bad_fill(d):
    store = os.path.join(d, "a.zarr")
    sw.write_plain_v3(store, _data((10, 10), "<f4"), (5, 5))
    _edit_json(os.path.join(store, "zarr.json"), lambda m: m.update(fill_value="banana"))
    return store


def b_zarr_format(d):
    store = _v3(d)
    _edit_json(os.path.join(store, "zarr.json"), lambda m: m.update(zarr_format=4))
    return store


def b_transpose(d):
    store = os.path.join(d, "a.zarr")
    sw.write_plain_v3(store, _data((10, 10)), (5, 5), transpose=(1, 0))
    _edit_json(os.path.join(store, "zarr.json"),
               lambda m: m["codecs"][0]["configuration"].update(order=[0, 0]))
    return store


def b_no_endian(d):
    store = _v3(d)
    _edit_json(os.path.join(store, "zarr.json"), lambda m: m["codecs"][0].pop("configuration"))
    return store


def b_shard_indivisible(d):
    store = _sharded(d)
    _edit_json(os.path.join(store, "zarr.json"),
               lambda m: m["codecs"][0]["configuration"].update(chunk_shape=[5, 4]))
    return store


def b_v2_filter(d):
    """A v2 filter (numcodecs Delta) shardmill does not implement: must not be ignored."""
    store = os.path.join(d, "a.zarr")
    z = zarr.create(shape=(10, 10), chunks=(5, 5), dtype="<u2", compressor=None,
                    filters=[numcodecs.Delta(dtype="<u2")], store=zarr.DirectoryStore(store))
    z[...] = _data((10, 10))
    return store


def b_v2_order(d):
    store = _v2(d, None)
    _edit_json(os.path.join(store, ".zarray"), lambda m: m.update(order="X"))
    return store


def b_key_encoding(d):
    store = _v3(d)
    _edit_json(os.path.join(store, "zarr.json"),
               lambda m: m.update(chunk_key_encoding={"name": "morton"}))
    return store


def b_no_array_to_bytes(d):
    store = _v3(d, codec="gzip")
    _edit_json(os.path.join(store, "zarr.json"), lambda m: m["codecs"].pop(0))
    return store


def b_truncated_v3(d):
    store = _v3(d)
    _patch(os.path.join(store, "c", "0", "1"), lambda b: b[:-3])
    return store


def b_truncated_v2(d):
    store = _v2(d, None)
    _patch(os.path.join(store, "1.0"), lambda b: b[:-2])
    return store


def b_zstd(d):
    store = _v3(d, codec="zstd", shape=(64, 64), chunks=(32, 32))

    def corrupt(b):
        for i in range(8, min(len(b) - 4, 40)):
            b[i] ^= 0x5A
        return b
    _patch(os.path.join(store, "c", "1", "0"), corrupt)
    return store


def b_gzip_v2(d):
    store = _v2(d, numcodecs.GZip(5), shape=(64, 64), chunks=(32, 32))

    def corrupt(b):
        for i in range(12, min(len(b) - 8, 40)):
            b[i] ^= 0xA5
        return b
    _patch(os.path.join(store, "0.1"), corrupt)
    return store


def b_gzip_v3_trailer(d):
    """gzip member whose CRC-32 trailer is wrong (the deflate stream itself is fine)."""
    store = _v3(d, codec="gzip")
    _patch(os.path.join(store, "c", "1", "1"), lambda b: b[:-8] + bytes([b[-8] ^ 1]) + b[-7:])
    return store


def b_zlib_v2(d):
    store = _v2(d, numcodecs.Zlib(1))
    _patch(os.path.join(store, "0.0"), lambda b: bytearray(b"\x78\x9c") + b"\xff" * (len(b) - 2))
    return store


def b_blosc_nbytes(d):
    """blosc header claims 4x the decoded bytes the chunk holds."""
    store = _v2(d, numcodecs.Blosc("lz4", 5, 1), shape=(32, 32), chunks=(16, 16))

    def lie(b):
        nbytes = struct.unpack_from("<I", b, 4)[0]
        struct.pack_into("<I", b, 4, nbytes * 4)
        return b
    _patch(os.path.join(store, "1.1"), lie)
    return store


def b_blosc_cbytes(d):
    """blosc header claims more compressed bytes than the object has."""
    store = _v2(d, numcodecs.Blosc("zstd", 5, 2), shape=(32, 32), chunks=(16, 16))

    def lie(b):
        cbytes = struct.unpack_from("<I", b, 12)[0]
        struct.pack_into("<I", b, 12, cbytes + 1000)
        return b
    _patch(os.path.join(store, "0.1"), lie)
    return store


def _shard_path(store, *idx):
    return os.path.join(store, "c", *map(str, idx))


def b_index_crc(d):
    store = _sharded(d, shape=(32, 16), shard=(16, 16))

    def flip(b):
        b[-10] ^= 0x01  # inside the last index entry, before the 4-byte CRC32C
        return b
    _patch(_shard_path(store, 1, 0), flip)
    return store


def b_index_past_end(d):
    """Index entry (offset, length) ends past the shard object; CRC32C recomputed (valid)."""
    store = _sharded(d, shape=(32, 16), shard=(16, 16))

    def move(b):
        n = 16 * 16 // 16  # 16 inner chunks
        ib = bytearray(b[-(n * 16 + 4):-4])
        entries = np.frombuffer(bytes(ib), dtype="<u8").reshape(n, 2).copy()
        entries[5, 0] = len(b) - 8  # inner chunk (1, 1) starts 8 bytes before the end
        ib = entries.tobytes()
        return b[:-(n * 16 + 4)] + ib + crc32c.crc32c(ib).to_bytes(4, "little")
    _patch(_shard_path(store, 1, 0), move)
    return store


def b_shard_short(d):
    """Shard object shorter than its index."""
    store = _sharded(d)
    _patch(_shard_path(store, 0, 0), lambda b: b[:10])
    return store


def b_inner_crc(d):
    store = _sharded(d, codec=["zstd", "crc32c"])
    _patch(_shard_path(store, 0, 0), lambda b: bytearray([b[0]]) + bytearray([b[1] ^ 0x10]) + b[2:])
    return store


def b_inner_wrong_size(d):
    """Index length of an inner chunk one byte short (raw inner chunks: decoded size wrong)."""
    store = _sharded(d, crc=False)

    def shorten(b):
        n = 16
        entries = np.frombuffer(bytes(b[-n * 16:]), dtype="<u8").reshape(n, 2).copy()
        entries[2, 1] -= 1
        return b[:-n * 16] + entries.tobytes()
    _patch(_shard_path(store, 0, 0), shorten)
    return store


def b_index_start_crc(d):
    store = _sharded(d, location="start")
    _patch(_shard_path(store, 0, 0), lambda b: bytearray([b[0] ^ 0x80]) + b[1:])
    return store


def b_chunk_symlink_loop(d):
    """Chunk key 1.1 is a symlink to itself: opening it fails with ELOOP (an I/O error)."""
    store = _v2(d, None)
    os.remove(os.path.join(store, "1.1"))
    os.symlink("1.1", os.path.join(store, "1.1"))
    return store


def b_chunk_is_dir(d):
    store = _v2(d, None)
    os.remove(os.path.join(store, "1.1"))
    os.makedirs(os.path.join(store, "1.1"))
    return store


def b_big_zlib(d):
    """Valid v2 array, random data: each encoded chunk is about 8 KiB (limits tests)."""
    store = os.path.join(d, "a.zarr")
    z = zarr.create(shape=(64, 64), chunks=(64, 64), dtype="<u2", compressor=numcodecs.Zlib(1),
                    store=zarr.DirectoryStore(store), fill_value=0)
    z[...] = np.random.default_rng(1).integers(0, 65535, (64, 64), dtype="<u2")
    return store


def b_big_index(d):
    """Valid sharded array: one 64x64 shard of 1x1 inner chunks (a 65,540-byte index)."""
    return _sharded(d, shape=(64, 64), shard=(64, 64), inner=(1, 1))


def b_valid_v3(d):
    return _v3(d, codec="zstd")


def _read_bench_config(d, lines):
    """A valid 10x10 uint16 v3 store and a read-bench config on it; returns the config's path
    (the case's {store}), so `run {store}` runs the job."""
    store = _v3(d, codec="zstd")
    cfg = os.path.join(d, "rb.yaml")
    _write_text(cfg, f"job: read-bench\ninput: {{store: {json.dumps(store)}}}\nprogress: false\n"
                + "".join(line + "\n" for line in lines))
    return cfg


def b_tile_over_memory(d):
    """A valid 10x10 uint16 v3 store and a scan whose 2 tile buffers of [10, 10] (200 bytes each)
    exceed limits.memory_bytes 256; returns the config's path."""
    store = _v3(d, codec="zstd")
    cfg = os.path.join(d, "scan.yaml")
    _write_text(cfg, f"job: scan\ninput: {{store: {json.dumps(store)}}}\nprogress: false\n"
                "tile: [10, 10]\nparallel: {threads: 2}\nlimits: {memory_bytes: 256}\n")
    return cfg


def b_hdf5_2_60_voxels(d):
    """A 1.4 KB HDF5 file declaring a [2^20]^3 uint8 dataset (h5py, nothing written) and its
    ingest: the output's per-shard records alone exceed limits.memory_bytes (issue 19 #11)."""
    import h5py
    h5 = os.path.join(d, "huge.h5")
    with h5py.File(h5, "w") as f:
        f.create_dataset("vol", shape=(2**20,) * 3, dtype="u1", chunks=(64, 64, 64))
    cfg = os.path.join(d, "ingest.yaml")
    _write_text(cfg, f"job: ingest\ninput: {{store: {json.dumps(h5)}, format: hdf5, "
                "hdf5: {dataset: /vol}}\n"
                f"output: {{path: {json.dumps(os.path.join(d, 'out', 'ing.zarr'))}}}\n"
                "progress: false\n")
    return cfg


def b_big_zlib_scan(d):
    """b_big_zlib's store and a scan of it under limits.max_chunk_bytes 4KiB (its chunks decode to
    8 KiB); returns the config's path (issue 32 #19: the error once read "shardmill: error:
    shardmill: decoded chunk ...", naming no object)."""
    store = b_big_zlib(d)
    cfg = os.path.join(d, "scan.yaml")
    _write_text(cfg, f"job: scan\ninput: {{store: {json.dumps(store)}}}\nprogress: false\n"
                "limits: {max_chunk_bytes: 4KiB}\n")
    return cfg


def b_hdf5_gzip_corrupt(d):
    """An HDF5 dataset /scan/vol (h5py, gzip, chunks [8, 16, 16]) whose chunk at [8, 16, 0] has
    its stored bytes overwritten (no zlib stream), and its ingest; returns the config's path
    (issue 32 #19: the error named no chunk)."""
    import h5py
    import numpy as np
    h5 = os.path.join(d, "scan.h5")
    with h5py.File(h5, "w") as f:
        ds = f.create_dataset("scan/vol", data=np.arange(16 * 32 * 32, dtype="<u2").reshape(
            16, 32, 32), chunks=(8, 16, 16), compression="gzip")
        info = ds.id.get_chunk_info_by_coord((8, 16, 0))
    with open(h5, "r+b") as f:
        f.seek(info.byte_offset)
        f.write(b"\xff" * info.size)
    cfg = os.path.join(d, "ingest.yaml")
    _write_text(cfg, f"job: ingest\ninput: {{store: {json.dumps(h5)}, format: hdf5, "
                "hdf5: {dataset: /scan/vol}}\n"  # the output is begun when the chunk is read
                f"output: {{path: {json.dumps(os.path.join(d, 'ing.zarr'))}, exists: overwrite}}\n"
                "progress: false\n")
    return cfg


def b_none_narrowing(d):
    """A valid 10x10 uint16 v3 store and a convert with normalize none to uint8 (a narrowing
    cast: SPEC §2 keeps every value); returns the config's path."""
    store = _v3(d, codec="zstd")
    cfg = os.path.join(d, "none.yaml")
    out = os.path.join(d, "out.zarr")
    _write_text(cfg, f"job: convert\ninput: {{store: {json.dumps(store)}}}\nprogress: false\n"
                f"normalize: {{mode: none}}\noutput: {{path: {json.dumps(out)}, dtype: uint8, "
                "exists: overwrite}\n")
    return cfg


def b_rb_outside(d):
    return _read_bench_config(d, ["roi: {offset: [7, 1]}", "read_bench: {extents: [2, 4]}"])


def b_rb_offset_past_end(d):
    return _read_bench_config(d, ["roi: {offset: [10, 0]}"])


def b_rb_wrong_ndim(d):
    return _read_bench_config(d, ["roi: {offset: [0, 0, 0]}"])


def b_rb_memory(d):
    return _read_bench_config(d, ["read_bench: {extents: [10]}", "limits: {memory_bytes: 64}"])


def b_store_is_file(d):
    path = os.path.join(d, "a.zarr")
    _write_text(path, '{"zarr_format": 3}\n')  # a file where the store directory should be
    return path


def b_store_missing(d):
    return os.path.join(d, "nowhere.zarr")  # never created


# ---- sizes the input declares (issue 10): codec headers after another bytes->bytes codec, shard
# indexes and shapes. Bombs are generated here, never committed: a gzip member of n zero bytes is
# about n / 1000 bytes, a zstd frame of RLE blocks 4 bytes per 128 KiB.

MIB = 1 << 20


def gzip_zeros(n):
    """A gzip member of n zero bytes, compressed in 1 MiB pieces (ISIZE = n mod 2^32)."""
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    piece = bytes(MIB)
    parts = [co.compress(piece) for _ in range(n // MIB)]
    parts.append(co.compress(bytes(n % MIB)))
    parts.append(co.flush())
    return b"".join(parts)


def set_isize(member, isize):
    return member[:-4] + struct.pack("<I", isize & 0xFFFFFFFF)


def zstd_rle_zeros(n, content_size=True):
    """A zstd frame of n zero bytes (n a multiple of 128 KiB) as RLE blocks (RFC 8878 §3.1.1):
    with an 8-byte content size (single segment), or streamed (no content size, 128 KiB window)."""
    blk = 1 << 17
    assert n % blk == 0 and n > 0
    if content_size:
        head = b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + struct.pack("<Q", n)
    else:
        head = b"\x28\xb5\x2f\xfd" + bytes([0x00, (17 - 10) << 3])
    blocks = []
    for i in range(n // blk):
        last = 1 if i == n // blk - 1 else 0
        blocks.append(struct.pack("<I", last | (1 << 1) | (blk << 3))[:3] + b"\x00")
    return head + b"".join(blocks)


def zstd_content_size_lie(declared, payload=b"hello"):
    """One raw block of `payload` under a header declaring `declared` decoded bytes."""
    head = b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + struct.pack("<Q", declared)
    return head + struct.pack("<I", 1 | (len(payload) << 3))[:3] + payload


def blosc_zeros(n):
    from numcodecs import blosc
    return bytes(blosc.compress(np.zeros(n, dtype="u1"), b"lz4", 5, 1, 0))


def blosc_one_block_lie(nbytes):
    """A 1-block blosc header declaring nbytes (its block size too): consistent, but a lie."""
    b = bytearray(blosc_zeros(4096))
    struct.pack_into("<I", b, 4, nbytes)
    struct.pack_into("<I", b, 8, nbytes)
    return bytes(b)


def blosc_many_blocks_lie(nbytes):
    """Real blosc whose nbytes claims many more blocks than the buffer has start offsets for."""
    b = bytearray(blosc_zeros(MIB))
    struct.pack_into("<I", b, 4, nbytes)
    return bytes(b)


def chunk_store(d, b2b, blob, dtype="<u2", key=("c", "0", "0")):
    """A (10, 10) v3 array with chunks (5, 5) and codecs [bytes, *b2b] whose chunk `key` is
    replaced by `blob` (the other chunks stay valid)."""
    store = os.path.join(d, "a.zarr")
    sw.write_plain_v3(store, _data((10, 10), dtype), (5, 5), codec=list(b2b))
    with open(os.path.join(store, *key), "wb") as f:
        f.write(blob)
    return store


def huge_index_store(d, shape, inner, dtype="uint8"):
    """A sharded v3 array whose one shard (chunk grid = shape) of `inner` chunks would have an
    enormous index; the shard object is 100 bytes."""
    store = os.path.join(d, "s.zarr")
    key = os.path.join(store, "c", *["0"] * len(shape))
    os.makedirs(os.path.dirname(key))
    meta = {"zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(shape)}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0,
            "codecs": [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": list(inner), "codecs": [{"name": "bytes"}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                 {"name": "crc32c"}], "index_location": "end"}}]}
    _write_text(os.path.join(store, "zarr.json"), json.dumps(meta, indent=2))
    with open(key, "wb") as f:
        f.write(b"\x5a" * 100)
    return store


def sharded_bomb_store(d, blob):
    """A (8, 8) uint16 v3 array of one shard with 2 x 2 inner chunks [bytes, zstd, gzip] (index
    [bytes, crc32c] at the end): inner chunk (0, 0) is `blob`, the others are valid."""
    store = os.path.join(d, "s.zarr")
    sw.write_sharded_array(store, _data((8, 8)), (8, 8), (4, 4), inner_codec=["zstd", "gzip"])
    path = _shard_path(store, 0, 0)
    with open(path, "rb") as f:
        shard = f.read()
    n = 4
    entries = np.frombuffer(shard[-(n * 16 + 4):-4], dtype="<u8").reshape(n, 2)
    pieces = [shard[int(o):int(o) + int(ln)] for o, ln in entries]
    pieces[0] = blob
    body, index = b"", []
    for p in pieces:
        index += [len(body), len(p)]
        body += p
    ib = np.array(index, dtype="<u8").tobytes()
    with open(path, "wb") as f:
        f.write(body + ib + crc32c.crc32c(ib).to_bytes(4, "little"))
    return store


def b_sharded_inner_gzip_bomb(d):
    return sharded_bomb_store(d, gzip_zeros(64 * MIB))


def b_gzip_isize_past_limit(d):
    return chunk_store(d, ["zstd", "gzip"], gzip_zeros(64 * MIB))


def b_gzip_bomb_small_isize(d):
    return chunk_store(d, ["zstd", "gzip"], set_isize(gzip_zeros(64 * MIB), 1000))


def b_gzip_isize_impossible(d):
    return chunk_store(d, ["zstd", "gzip"], set_isize(gzip_zeros(MIB), 0xFFFFFFF0))


def b_zstd_content_size_lie(d):
    return chunk_store(d, ["gzip", "zstd"], zstd_content_size_lie(4 << 30))


def b_zstd_content_size_past_limit(d):
    return chunk_store(d, ["gzip", "zstd"], zstd_rle_zeros(64 * MIB))


def b_zstd_streamed_bomb(d):
    return chunk_store(d, ["gzip", "zstd"], zstd_rle_zeros(64 * MIB, content_size=False))


# Two frames without a content size whose 108 bytes decode to more than such bytes can hold
# (found by fuzz.codec_zstd, tests/fuzz/corpus/codec_zstd/oom-unsized-frames-grow-to-512mib):
# refused as data at once, where the buffer once grew toward limits.max_chunk_bytes.
ZSTD_UNSIZED_PAST_BYTES = bytes.fromhex(
    "28b52ffd00450300000028b52ffd201085000001010100000000000001010169a2a2a22fa2a2a2a2a2a2a2a2"
    "a2a2a2a2a2a2efefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefef"
    "efefefefefefa2a2efefefefefefa2a2a27aec62")


def b_zstd_unsized_past_bytes(d):
    return chunk_store(d, ["gzip", "zstd"], ZSTD_UNSIZED_PAST_BYTES)


def b_blosc_nbytes_past_limit(d):
    # real blosc of 8 MiB of zeros: plausible, consistent, and past --max-chunk-bytes 1MiB
    return chunk_store(d, ["zstd", "blosc"], blosc_zeros(8 * MIB), dtype="u1")


def b_blosc_expansion_impossible(d):
    # one block of 4096 zeros whose header claims 2 GiB: more than any blosc codec expands
    return chunk_store(d, ["zstd", "blosc"], blosc_one_block_lie(0x7FFFFF00), dtype="u1")


def b_blosc_blocks_impossible(d):
    return chunk_store(d, ["zstd", "blosc"], blosc_many_blocks_lie(0x7FFFFF00), dtype="u1")


def b_shard_index_2_59(d):
    return huge_index_store(d, [2**59], [1])


def b_shard_index_2_31(d):
    return huge_index_store(d, [2**31], [1])


def b_shard_index_2_62(d):
    return huge_index_store(d, [2**31, 2**31], [1, 1])


def b_shape_bytes_overflow(d):
    store = _v3(d)
    _edit_json(os.path.join(store, "zarr.json"), lambda m: m.update(shape=[2**21] * 3) or
               m["chunk_grid"]["configuration"].update(chunk_shape=[1, 1, 1]) or
               m.update(data_type="float64"))
    return store


R = ["read", "{store}", "-o", "{out}"]


# ---- N5 (SPEC §2): zarr-python 2.13's N5Store, then damaged ----------------------------------

def _n5(d, compressor=None, shape=(10, 10), chunks=(5, 5)):
    import warnings
    warnings.simplefilter("ignore")
    store = os.path.join(d, "a.n5")
    z = zarr.create(shape=shape, chunks=chunks, dtype="<u2", compressor=compressor,
                    store=zarr.n5.N5Store(store))
    z[...] = _data(shape)
    return store


def b_n5_truncated_header(d):
    store = _n5(d)
    _patch(os.path.join(store, "1", "0"), lambda b: b[:7])
    return store


def b_n5_wrong_ndim(d):
    store = _n5(d)
    _patch(os.path.join(store, "1", "0"), lambda b: b[:2] + struct.pack(">H", 3) + b[4:])
    return store


def b_n5_block_size(d):
    store = _n5(d)
    _patch(os.path.join(store, "1", "0"), lambda b: b[:4] + struct.pack(">I", 6) + b[8:])
    return store


def b_n5_varlength(d):
    store = _n5(d)
    _patch(os.path.join(store, "1", "0"),
           lambda b: struct.pack(">H", 1) + b[2:12] + struct.pack(">I", 24) + b[12:])
    return store


def b_n5_compression(d):
    store = _n5(d)
    _edit_json(os.path.join(store, "attributes.json"),
               lambda m: m.update(compression={"type": "lz4", "blockSize": 65536}))
    return store


def b_n5_gzip_corrupt(d):
    store = _n5(d, numcodecs.GZip(5))
    _patch(os.path.join(store, "0", "1"), lambda b: b[:12] + b"\x1f\x8b" + b"\xff" * 20)
    return store


def b_n5_no_datatype(d):
    store = _n5(d)
    _edit_json(os.path.join(store, "attributes.json"), lambda m: m.pop("dataType"))
    return store


def _read(offset="0,0", shape="10,10", extra=()):
    return ["read", "{store}", "--offset", offset, "--shape", shape, "-o", "{out}", *extra]


CASES = [
    dict(name="json_malformed_zarr_json", build=b_json_v3, args=["info", "{store}"], exit=3,
         must=["zarr.json"], any=[["line 4", ":4:", "line: 4"], ["col"]]),
    dict(name="json_malformed_zarray", build=b_json_v2, args=_read(), exit=3,
         must=[".zarray"], any=[["line 6", ":6:", "line: 6"], ["col"]]),
    dict(name="ndim_mismatch_shape_chunks", build=b_ndim, args=["info", "{store}"], exit=3,
         must=["zarr.json"], any=[["chunk"]]),
    dict(name="zero_chunk_v2", build=b_zero_chunk_v2, args=_read(), exit=3,
         must=[".zarray"], any=[["chunk"]]),
    dict(name="negative_chunk_v3", build=b_negative_chunk_v3, args=["info", "{store}"], exit=3,
         must=["zarr.json"], any=[["chunk"]]),
    dict(name="unknown_dtype_v3", build=b_dtype_v3, args=["info", "{store}"], exit=3,
         must=["complex64"]),
    dict(name="unknown_dtype_v2", build=b_dtype_v2, args=_read(), exit=3, must=["<c8"]),
    dict(name="unknown_codec_v3", build=b_codec_v3, args=_read(), exit=3, must=["lzma_fancy"]),
    dict(name="unknown_compressor_v2", build=b_codec_v2, args=["info", "{store}"], exit=3,
         must=["lz77x"]),
    dict(name="missing_metadata", build=b_no_meta, args=_read(), exit=3,
         any=[["zarr.json", ".zarray"]]),
    dict(name="missing_metadata_info", build=b_no_meta, args=["info", "{store}"], exit=3,
         any=[["zarr.json", ".zarray"]]),
    dict(name="missing_array_in_group", build=b_group_v3,
         args=["read", "{store}", "--array", "nope", "--offset", "0,0", "--shape", "1,1",
               "-o", "{out}"], exit=3, must=["nope"]),
    dict(name="bad_fill_value", build=b_bad_fill, args=["info", "{store}"], exit=3,
         must=["fill_value"]),
    dict(name="unsupported_zarr_format", build=b_zarr_format, args=["info", "{store}"], exit=3,
         must=["zarr_format"]),
    dict(name="transpose_not_a_permutation", build=b_transpose, args=_read(), exit=3,
         must=["transpose"]),
    dict(name="bytes_codec_without_endian", build=b_no_endian, args=_read(), exit=3,
         must=["endian"]),
    dict(name="shard_shape_not_multiple_of_inner", build=b_shard_indivisible,
         args=_read("0,0", "16,16"), exit=3, any=[["sharding", "chunk_shape"]]),
    dict(name="unsupported_v2_filter", build=b_v2_filter, args=_read(), exit=3, must=["delta"]),
    dict(name="invalid_v2_order", build=b_v2_order, args=["info", "{store}"], exit=3,
         must=[".zarray", "order"]),
    dict(name="unknown_chunk_key_encoding", build=b_key_encoding, args=_read(), exit=3,
         must=["morton"]),
    dict(name="codecs_without_array_to_bytes", build=b_no_array_to_bytes, args=_read(), exit=3,
         must=["zarr.json"], any=[["bytes", "array", "codec"]]),
    dict(name="truncated_chunk_raw_v3", build=b_truncated_v3, args=_read(), exit=3,
         must=["c/0/1"], any=[["size", "length", "bytes", "short", "truncat"]]),
    dict(name="truncated_chunk_raw_v2", build=b_truncated_v2, args=_read(), exit=3,
         must=["1.0"], any=[["size", "length", "bytes", "short", "truncat"]]),
    dict(name="corrupt_zstd_stream", build=b_zstd, args=_read("0,0", "64,64"), exit=3,
         must=["c/1/0", "zstd"]),
    dict(name="corrupt_gzip_stream_v2", build=b_gzip_v2, args=_read("0,0", "64,64"), exit=3,
         must=["0.1"], any=[["gzip", "deflate", "inflate"]]),
    dict(name="gzip_crc_trailer_wrong_v3", build=b_gzip_v3_trailer, args=_read(), exit=3,
         must=["c/1/1"], any=[["gzip", "crc", "checksum"]]),
    dict(name="corrupt_zlib_stream_v2", build=b_zlib_v2, args=_read(), exit=3,
         must=["0.0"], any=[["zlib", "deflate", "inflate"]]),
    dict(name="blosc_header_nbytes_lie", build=b_blosc_nbytes, args=_read("0,0", "32,32"),
         exit=3, must=["1.1", "blosc"]),
    dict(name="blosc_header_cbytes_lie", build=b_blosc_cbytes, args=_read("0,0", "32,32"),
         exit=3, must=["0.1", "blosc"]),
    dict(name="shard_index_crc32c_mismatch", build=b_index_crc, args=_read("0,0", "32,16"),
         exit=3, must=["c/1/0", "crc32c"]),
    dict(name="shard_index_start_crc32c_mismatch", build=b_index_start_crc,
         args=_read("0,0", "16,16"), exit=3, must=["c/0/0", "crc32c"]),
    dict(name="shard_index_entry_past_end", build=b_index_past_end, args=_read("0,0", "32,16"),
         exit=3, must=["c/1/0"], any=[["offset", "past", "beyond", "outside", "exceed", "range"]]),
    dict(name="shard_shorter_than_index", build=b_shard_short, args=_read("0,0", "16,16"),
         exit=3, must=["c/0/0"]),
    dict(name="inner_chunk_crc32c_mismatch", build=b_inner_crc, args=_read("0,0", "16,16"),
         exit=3, must=["c/0/0", "crc32c"]),
    dict(name="inner_chunk_wrong_size", build=b_inner_wrong_size, args=_read("0,0", "16,16"),
         exit=3, must=["c/0/0"], any=[["size", "length", "bytes", "short", "truncat"]]),
    dict(name="chunk_key_is_a_directory", build=b_chunk_is_dir, args=_read(), exit=[3, 4],
         must=["1.1"]),
    dict(name="chunk_key_symlink_loop", build=b_chunk_symlink_loop, args=_read(), exit=4,
         must=["1.1"]),
    dict(name="limit_max_object_bytes", build=b_big_zlib,
         args=_read("0,0", "64,64", ["--max-object-bytes", "4KiB"]), exit=5,
         control=_read("0,0", "64,64", ["--max-object-bytes", "16KiB"]),
         must=["0.0"], any=[["max_object_bytes", "max-object-bytes"]]),
    dict(name="limit_max_object_bytes_shard_index", build=b_big_index,
         args=_read("0,0", "2,2", ["--max-object-bytes", "32KiB"]), exit=5,
         control=_read("0,0", "2,2", ["--max-object-bytes", "128KiB"]),
         must=["c/0/0"], any=[["max_object_bytes", "max-object-bytes"]]),
    dict(name="limit_max_chunk_bytes", build=b_big_zlib,
         args=_read("0,0", "1,1", ["--max-chunk-bytes", "4KiB"]), exit=5,
         control=_read("0,0", "1,1", ["--max-chunk-bytes", "8KiB"]),
         any=[["max_chunk_bytes", "max-chunk-bytes"]]),
    dict(name="limit_max_region_bytes", build=b_valid_v3,
         args=_read("0,0", "10,10", ["--max-region-bytes", "64"]), exit=5,
         control=_read("0,0", "10,10", ["--max-region-bytes", "200"]),
         any=[["max_region_bytes", "max-region-bytes"]]),
    # sizes the input declares (issue 10); the control reads a valid chunk under the same limit
    dict(name="gzip_isize_past_max_chunk_bytes", build=b_gzip_isize_past_limit,
         args=_read("0,0", "5,5", ["--max-chunk-bytes", "1MiB"]), exit=5,
         control=_read("5,5", "5,5", ["--max-chunk-bytes", "1MiB"]),
         must=["c/0/0", "gzip", "67108864"], any=[["max_chunk_bytes", "max-chunk-bytes"]]),
    dict(name="gzip_bomb_with_small_isize", build=b_gzip_bomb_small_isize,
         args=_read("0,0", "5,5", ["--max-chunk-bytes", "1MiB"]), exit=5,
         control=_read("5,5", "5,5", ["--max-chunk-bytes", "1MiB"]),
         must=["c/0/0", "gzip", "1048576"], any=[["max_chunk_bytes", "max-chunk-bytes"]]),
    dict(name="gzip_isize_impossible", build=b_gzip_isize_impossible, args=_read("0,0", "5,5"),
         exit=3, control=_read("5,5", "5,5"), must=["c/0/0", "gzip", "4294967280"]),
    dict(name="zstd_content_size_lie_4gib", build=b_zstd_content_size_lie,
         args=_read("0,0", "5,5"), exit=3, control=_read("5,5", "5,5"),
         must=["c/0/0", "zstd", "4294967296"]),
    dict(name="zstd_content_size_past_max_chunk_bytes", build=b_zstd_content_size_past_limit,
         args=_read("0,0", "5,5", ["--max-chunk-bytes", "1MiB"]), exit=5,
         control=_read("5,5", "5,5", ["--max-chunk-bytes", "1MiB"]),
         must=["c/0/0", "zstd", "67108864"], any=[["max_chunk_bytes", "max-chunk-bytes"]]),
    dict(name="zstd_streamed_bomb", build=b_zstd_streamed_bomb,
         args=_read("0,0", "5,5", ["--max-chunk-bytes", "1MiB"]), exit=5,
         control=_read("5,5", "5,5", ["--max-chunk-bytes", "1MiB"]),
         must=["c/0/0", "zstd", "content size"], any=[["max_chunk_bytes", "max-chunk-bytes"]]),
    dict(name="zstd_unsized_frames_past_their_bytes", build=b_zstd_unsized_past_bytes,
         args=_read("0,0", "5,5"), exit=3, control=_read("5,5", "5,5"),
         must=["c/0/0", "zstd", "108 bytes of frames can hold"]),
    dict(name="blosc_nbytes_past_max_chunk_bytes", build=b_blosc_nbytes_past_limit,
         args=_read("0,0", "5,5", ["--max-chunk-bytes", "1MiB"]), exit=5,
         control=_read("5,5", "5,5", ["--max-chunk-bytes", "1MiB"]),
         must=["c/0/0", "blosc", "8388608"], any=[["max_chunk_bytes", "max-chunk-bytes"]]),
    dict(name="blosc_header_expansion_impossible", build=b_blosc_expansion_impossible,
         args=_read("0,0", "5,5"), exit=3, control=_read("5,5", "5,5"),
         must=["c/0/0", "blosc", "2147483392", "more than any codec blosc uses can expand"]),
    dict(name="blosc_header_blocks_impossible", build=b_blosc_blocks_impossible,
         args=_read("0,0", "5,5"), exit=3, control=_read("5,5", "5,5"),
         must=["c/0/0", "blosc", "blocks"]),
    dict(name="sharded_inner_gzip_bomb", build=b_sharded_inner_gzip_bomb,
         args=_read("0,0", "4,4", ["--max-chunk-bytes", "1MiB"]), exit=5,
         control=_read("4,4", "4,4", ["--max-chunk-bytes", "1MiB"]),
         must=["c/0/0", "inner chunk", "gzip", "67108864"],
         any=[["max_chunk_bytes", "max-chunk-bytes"]]),
    dict(name="shard_index_2_59_entries", build=b_shard_index_2_59,
         args=["read", "{store}", "--offset", "0", "--shape", "1", "-o", "{out}"], exit=5,
         must=["c/0", "shard index", "576460752303423488 inner chunks"],
         any=[["max_object_bytes", "max-object-bytes"]]),
    dict(name="shard_index_2_31_entries_past_the_shard", build=b_shard_index_2_31,
         args=["read", "{store}", "--offset", "0", "--shape", "1", "-o", "{out}",
               "--max-object-bytes", "1024TiB"], exit=3, must=["c/0", "shorter than"]),
    dict(name="shard_index_2_62_entries", build=b_shard_index_2_62, args=["info", "{store}"],
         exit=3, must=["zarr.json", "too many inner chunks"]),
    dict(name="shape_byte_size_overflow", build=b_shape_bytes_overflow, args=["info", "{store}"],
         exit=3, must=["zarr.json", "float64", "overflows"]),
    dict(name="region_outside_array", build=b_valid_v3, args=_read("0,0", "11,5"), exit=2,
         control=_read("0,0", "10,5"),
         any=[["outside", "exceed", "beyond", "bound", "out of", "past"]]),
    dict(name="region_offset_past_end", build=b_valid_v3, args=_read("10,0", "1,1"), exit=2,
         control=_read("9,0", "1,1"),
         any=[["outside", "exceed", "beyond", "bound", "out of", "past"]]),
    dict(name="region_negative_offset", build=b_valid_v3, args=_read("-1,0", "1,1"), exit=2,
         must=["offset"]),
    dict(name="region_wrong_ndim", build=b_valid_v3, args=_read("0,0,0", "1,1,1"), exit=2,
         any=[["offset", "shape"]]),
    # normalize none (SPEC §2): values kept, so a narrowing output.dtype is refused
    dict(name="convert_none_narrowing_cast", build=b_none_narrowing, args=["run", "{store}"],
         exit=2, must=["output.dtype", "uint16 -> uint8", "narrowing"],
         control=["run", "{store}", "--set", "output.dtype=uint32"]),
    # read-bench (`run` of a config the builder writes next to a valid store)
    dict(name="readbench_region_outside", build=b_rb_outside, args=["run", "{store}"], exit=2,
         must=["read_bench.extents", "[7, 1] + [4, 4]", "outside the array of shape [10, 10]"],
         control=["run", "{store}", "--set", "read_bench.extents=[2, 3]", "--set", "read_bench.repeats=1"]),
    dict(name="readbench_offset_past_end", build=b_rb_offset_past_end, args=["run", "{store}"],
         exit=2, must=["roi.offset", "outside"],
         control=["run", "{store}", "--set", "roi.offset=[9, 0]"]),
    dict(name="readbench_wrong_ndim", build=b_rb_wrong_ndim, args=["run", "{store}"], exit=2,
         must=["roi.offset", "3 values", "2 dimensions"]),
    dict(name="readbench_region_over_memory", build=b_rb_memory, args=["run", "{store}"], exit=5,
         must=["read_bench.extents", "limits.memory_bytes"],
         control=["run", "{store}", "--set", "limits.memory_bytes=200"]),
    # issue 19 #11: what a tiny input declares is bounded by the budget (exit 5), never a failed
    # allocation (exit 1) or a run without end
    dict(name="tile_buffer_over_memory", build=b_tile_over_memory, args=["run", "{store}"],
         exit=5, must=["tile", "limits.memory_bytes", "[10, 10]"],
         control=["run", "{store}", "--set", "limits.memory_bytes=400"]),
    dict(name="limit_max_chunk_bytes_scan", build=b_big_zlib_scan, args=["run", "{store}"],
         exit=5, must=["a.zarr: decoded chunk", "limits.max_chunk_bytes"],
         must_not=["error: shardmill:"],
         control=["run", "{store}", "--set", "limits.max_chunk_bytes=8KiB"]),
    dict(name="hdf5_gzip_chunk_corrupt", build=b_hdf5_gzip_corrupt, args=["run", "{store}"],
         exit=3, must=["scan.h5", "/scan/vol", "gzip chunk at offset [8, 16, 0]"]),
    dict(name="hdf5_2_60_voxels_ingest", build=b_hdf5_2_60_voxels, args=["run", "{store}"],
         exit=5, must=["output.shard", "limits.memory_bytes"]),
    dict(name="read_without_output", build=b_valid_v3,
         args=["read", "{store}", "--offset", "0,0", "--shape", "1,1"], exit=2, must=["-o"]),
    # SPEC §4: a store path that is no store is invalid input (3), with words for each reason
    dict(name="store_is_a_regular_file", build=b_store_is_file, args=_read(), exit=3,
         must=["a.zarr", "not a Zarr store directory"]),
    dict(name="store_is_a_regular_file_info", build=b_store_is_file, args=["info", "{store}"],
         exit=3, must=["a.zarr", "not a Zarr store directory"]),
    dict(name="store_below_a_regular_file", build=b_store_is_file,
         args=["info", "{store}/0"], exit=3, must=["not a Zarr store directory"]),
    dict(name="store_path_missing", build=b_store_missing, args=_read(), exit=3,
         must=["nowhere.zarr", "does not exist"]),
    dict(name="store_path_missing_info", build=b_store_missing, args=["info", "{store}"],
         exit=3, must=["nowhere.zarr", "does not exist"]),
    dict(name="region_zero_shape", build=b_valid_v3, args=_read("0,0", "5,0"), exit=2,
         must=["--shape[1]", "positive"], control=_read("0,0", "5,1")),
    dict(name="unknown_command", build=b_valid_v3, args=["frobnicate", "{store}"], exit=2,
         must=["error: frobnicate: unknown command"], must_not=["error: shardmill:"]),
    # SPEC §6: `read -o` may not write into the store it reads
    dict(name="read_output_inside_store", build=b_valid_v3,
         args=["read", "{store}", "-o", "{store}/c/region.bin"], exit=2,
         must=["-o", "lies inside the input", "a.zarr"]),
    dict(name="read_threads_too_many", build=b_valid_v3,
         args=_read("0,0", "1,1", ["--threads", "65"]), exit=2, must=["--threads", "at most 64"],
         control=_read("0,0", "1,1", ["--threads", "2"])),
    dict(name="bad_size_suffix", build=b_valid_v3,
         args=_read("0,0", "1,1", ["--max-object-bytes", "12XB"]), exit=2,
         must=["max-object-bytes"]),
    # N5: block headers and attributes.json, each named by its key / document.
    dict(name="n5_truncated_header", build=b_n5_truncated_header, args=_read(), exit=3,
         must=["1/0", "N5 block header truncated"]),
    dict(name="n5_wrong_ndim", build=b_n5_wrong_ndim, args=_read(), exit=3,
         must=["1/0", "header has 3 dimensions, the dataset 2"]),
    dict(name="n5_block_size_mismatch", build=b_n5_block_size, args=_read(), exit=3,
         must=["1/0", "block size 6 in dimension 0 exceeds the blockSize 5"]),
    dict(name="n5_varlength_count", build=b_n5_varlength, args=_read(), exit=3,
         must=["1/0", "varlength block declares 24 elements"]),
    dict(name="n5_unknown_compression", build=b_n5_compression, args=_read(), exit=3,
         must=["attributes.json", "unsupported N5 compression 'lz4'"]),
    dict(name="n5_corrupt_gzip", build=b_n5_gzip_corrupt, args=_read(), exit=3,
         must=["0/1", "gzip"]),
    dict(name="n5_missing_datatype", build=b_n5_no_datatype, args=["info", "{store}"], exit=3,
         must=["attributes.json", "missing field 'dataType'"]),
]

# Cases that also put an existing file at {out}: a failed read must leave it untouched.
KEEP_EXISTING = {"corrupt_zstd_stream", "shard_index_crc32c_mismatch", "limit_max_region_bytes"}


def build_all(outdir):
    """Build every case's store under OUTDIR/<case>/ and the table as OUTDIR/cases.json."""
    os.makedirs(outdir, exist_ok=True)
    table = [{k: v for k, v in c.items() if k != "build"} for c in CASES]
    for t in table:
        t["keep_existing"] = t["name"] in KEEP_EXISTING
    with open(os.path.join(outdir, "cases.json"), "w") as f:
        json.dump(table, f, indent=1)
    for c in CASES:
        d = os.path.join(outdir, c["name"])
        if os.path.exists(d):
            shutil.rmtree(d)
        os.makedirs(d)
        store = c["build"](d)
        with open(os.path.join(d, "store.txt"), "w") as f:
            f.write(os.path.relpath(store, d))


def main(argv):
    if len(argv) > 1 and argv[1] == "--list":
        print(";".join(c["name"] for c in CASES), end="")
        return 0
    outdir = argv[1] if len(argv) > 1 else "bad_input_out"
    build_all(outdir)
    print(f"bad_cases: built {len(CASES)} cases in {outdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
