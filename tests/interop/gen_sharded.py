"""Write sharded (and plain) Zarr v3 fixtures with shard_writer.py for shardmill's interop tests.

Usage: /usr/bin/python3 gen_sharded.py OUTDIR
Sharded arrays: index at end and start, with and without crc32c, empty inner chunks, a missing
(all-fill) shard, edge shards, raw/gzip/zstd/blosc inner codecs, inner crc32c, big-endian
inner chunks, nested sharding. Plain v3 arrays: blosc (cnames x shuffles) and v2 chunk key
encoding. zarrita.js reads back every array it supports (js/read_arrays.mjs); it cannot read an
index at the start (it always reads the index from the shard's suffix) or nested sharding (no
sharding_indexed inside its inner codec chain), so those arrays get a twin zarrita can read and
self_check() proves each is a byte-exact re-layout of its twin:
- index "start": same body bytes, offsets shifted by the index length;
- nested: each outer inner chunk equals the twin's shard at the same grid coordinate.
"""

import os
import shutil
import sys

import crc32c
import numpy as np

from shardmill_test import shard_writer as sw

from fixture_common import fill_to_json, sample_values, save_expected, v3_name, write_manifest

EMPTY = 2**64 - 1


def _read_index(blob, n_entries, location, has_crc):
    """Decode a shard index -> (entries (n,2) uint64, index length). Checks the CRC32C."""
    ilen = n_entries * 16 + (4 if has_crc else 0)
    ib = blob[:ilen] if location == "start" else blob[len(blob) - ilen:]
    if has_crc:
        body, crc = ib[:-4], int.from_bytes(ib[-4:], "little")
        assert crc32c.crc32c(body) == crc, "index crc32c"
    else:
        body = ib
    return np.frombuffer(body, dtype="<u8").reshape(n_entries, 2), ilen


def _shard_files(path):
    out = {}
    root = os.path.join(path, "c")
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[tuple(int(x) for x in os.path.relpath(p, root).split(os.sep))] = p
    return out


def check_start_twin(start_dir, end_dir, n_entries, has_crc):
    """Assert every shard of start_dir is end_dir's shard with the index moved to the start."""
    a, b = _shard_files(start_dir), _shard_files(end_dir)
    assert a.keys() == b.keys() and a, (start_dir, sorted(a), sorted(b))
    for k in a:
        sa, sb = open(a[k], "rb").read(), open(b[k], "rb").read()
        ia, ilen = _read_index(sa, n_entries, "start", has_crc)
        ib, _ = _read_index(sb, n_entries, "end", has_crc)
        assert sa[ilen:] == sb[:len(sb) - ilen], k
        full = ib[:, 0] != EMPTY
        assert np.array_equal(ia[full, 0], ib[full, 0] + ilen), k
        assert np.array_equal(ia[full, 1], ib[full, 1]), k
        assert np.all(ia[~full] == EMPTY), k


def check_nested_twin(nested_dir, twin_dir, outer_grid, n_outer_entries, location="end"):
    """Assert each outer inner chunk of nested_dir equals twin_dir's shard at that coordinate."""
    shards = _shard_files(nested_dir)
    twin = _shard_files(twin_dir)
    seen = set()
    for k, p in shards.items():
        blob = open(p, "rb").read()
        idx, _ = _read_index(blob, n_outer_entries, location, True)
        for lin, (off, n) in enumerate(idx):
            local = np.unravel_index(lin, outer_grid)
            coord = tuple(int(s * g + l) for s, g, l in zip(k, outer_grid, local))
            if off == EMPTY:
                assert coord not in twin, coord
                continue
            seen.add(coord)
            assert blob[off:off + n] == open(twin[coord], "rb").read(), coord
    assert seen == set(twin), sorted(set(twin) - seen)


class Gen:
    """Accumulates fixtures and their manifest entries."""

    def __init__(self, outdir):
        self.outdir = outdir
        self.arrays = []

    def _entry(self, name, data, chunks, shards, fill, zarrita=True, why=None, **extra):
        e = {"name": name, "family": "sharded", "path": name, "array": None,
             "dtype": v3_name(data.dtype), "shape": list(data.shape), "chunks": list(chunks),
             "shards": None if shards is None else list(shards), "zarr_format": 3,
             "fill_value": fill_to_json(fill, data.dtype),
             "expected": save_expected(self.outdir, name, data), "zarrita": zarrita}
        e["raw"] = e["expected"][:-4] + ".raw"
        if why:
            e["why"] = why
        e.update(extra)
        self.arrays.append(e)

    def sharded(self, name, data, shard, inner, fill=0, zarrita=True, why=None, **kw):
        """One sharded array through shard_writer.write_sharded_array."""
        path = os.path.join(self.outdir, name)
        if os.path.exists(path):
            shutil.rmtree(path)
        sw.write_sharded_array(path, data, shard, inner, fill_value=fill, **kw)
        self._entry(name, data, inner, shard, fill, zarrita, why,
                    index_location=kw.get("index_location", "end"),
                    nested=kw.get("nested_inner_shape"),
                    nested_index_location=kw.get("nested_index_location"))

    def plain(self, name, data, chunks, fill=0, **kw):
        """One unsharded v3 array through shard_writer.write_plain_v3."""
        path = os.path.join(self.outdir, name)
        if os.path.exists(path):
            shutil.rmtree(path)
        sw.write_plain_v3(path, data, chunks, fill_value=fill, **kw)
        self._entry(name, data, chunks, None, fill)


def _with_fill_blocks(data, fill, blocks):
    data = data.copy()
    for sl in blocks:
        data[sl] = fill
    return data


def generate(outdir):
    """Write every sharded / plain v3 fixture, self-check the twins, write the manifest."""
    os.makedirs(outdir, exist_ok=True)
    g = Gen(outdir)
    start_why = "zarrita 0.7.5 reads the shard index from the suffix only; checked as a twin"
    nested_why = "zarrita 0.7.5 has no nested sharding; checked against a twin"
    # 2-D uint16, gzip, index at end + crc32c, edge shards, empty inner chunks.
    d = _with_fill_blocks(sample_values("<u2", (37, 45), 1), 0,
                          [np.s_[0:4, 0:8], np.s_[16:20, 40:45], np.s_[32:37, 32:40]])
    g.sharded("sh_u16_end_crc_gzip", d, (16, 16), (4, 8), inner_codec="gzip")
    # Same with the index at the start (and its end twin).
    g.sharded("sh_u16_start_crc_gzip", d, (16, 16), (4, 8), inner_codec="gzip",
              index_location="start", zarrita=False, why=start_why)
    check_start_twin(os.path.join(outdir, "sh_u16_start_crc_gzip"),
                     os.path.join(outdir, "sh_u16_end_crc_gzip"), 4 * 2, True)
    # 3-D int32 zstd, index at start and at end, no crc32c, one whole shard of fill (not written).
    d = _with_fill_blocks(sample_values("<i4", (10, 20, 18), 2), -1,
                          [np.s_[4:8, 8:16, 0:8], np.s_[0:2, 0:4, 0:4]])
    for loc in ("end", "start"):
        g.sharded(f"sh_i32_{loc}_nocrc_zstd_3d", d, (4, 8, 8), (2, 4, 4), fill=-1,
                  inner_codec="zstd", index_location=loc, index_crc32c=False,
                  zarrita=loc == "end", why=None if loc == "end" else start_why)
    check_start_twin(os.path.join(outdir, "sh_i32_start_nocrc_zstd_3d"),
                     os.path.join(outdir, "sh_i32_end_nocrc_zstd_3d"), 8, False)
    assert not os.path.exists(os.path.join(outdir, "sh_i32_end_nocrc_zstd_3d", "c", "1", "1", "0"))
    # float32 raw, fill NaN, big-endian inner chunks, index at end without crc32c.
    d = _with_fill_blocks(sample_values("<f4", (33, 50), 3), np.nan, [np.s_[8:16, 0:8]])
    g.sharded("sh_f32_be_raw_nan", d, (16, 32), (8, 8), fill=np.nan, endian="big",
              index_crc32c=False)
    # float64 gzip big-endian, index at start with crc32c, fill -Infinity.
    d = _with_fill_blocks(sample_values("<f8", (19, 23), 4), -np.inf, [np.s_[0:5, 5:10]])
    for loc in ("end", "start"):
        g.sharded(f"sh_f64_be_{loc}_gzip_neginf", d, (10, 10), (5, 5), fill=-np.inf,
                  endian="big", inner_codec="gzip", index_location=loc,
                  zarrita=loc == "end", why=None if loc == "end" else start_why)
    check_start_twin(os.path.join(outdir, "sh_f64_be_start_gzip_neginf"),
                     os.path.join(outdir, "sh_f64_be_end_gzip_neginf"), 4, True)
    # Inner codecs zstd + crc32c; 1-D uint64.
    g.sharded("sh_u64_1d_zstd_crc_inner", sample_values("<u8", (1000,), 5), (256,), (32,),
              inner_codec=["zstd", "crc32c"])
    # bool and int8, int16, uint32, int64 with assorted codecs.
    g.sharded("sh_bool_zstd", sample_values("bool", (30, 41), 6), (16, 16), (8, 8), fill=False,
              inner_codec="zstd")
    g.sharded("sh_i8_raw", sample_values("i1", (25, 26), 7), (12, 12), (4, 6), fill=-128)
    d = sample_values("<i2", (8, 9, 10), 8)
    for loc in ("end", "start"):
        g.sharded(f"sh_i16_gzip_{loc}", d, (4, 4, 4), (2, 2, 2), fill=0, inner_codec="gzip",
                  index_location=loc, zarrita=loc == "end", why=None if loc == "end" else start_why)
    check_start_twin(os.path.join(outdir, "sh_i16_gzip_start"),
                     os.path.join(outdir, "sh_i16_gzip_end"), 8, True)
    g.sharded("sh_u32_blosc_lz4", sample_values("<u4", (40, 40), 9), (32, 32), (16, 16),
              inner_codec="blosc:lz4:shuffle")
    g.sharded("sh_i64_blosc_zstd_bitshuffle", sample_values("<i8", (20, 20), 10), (10, 20),
              (5, 10), inner_codec="blosc:zstd:bitshuffle")
    # A single shard holding many small inner chunks (a large index), like W3's index stress.
    smooth = (np.arange(128)[:, None] * 17 + np.arange(128)[None, :] * 31) % 65521 + 1
    g.sharded("sh_u16_one_shard_many_chunks", smooth.astype("<u2"), (128, 128), (8, 8))
    # Nested sharding: outer shards 16^3, inner chunks 8^3 each a shard of 4^3 chunks.
    d = _with_fill_blocks(sample_values("u1", (40, 36, 33), 11), 0,
                          [np.s_[0:8, 0:8, 0:8], np.s_[16:20, 16:20, 16:20]])
    g.sharded("sh_u8_nested_zstd", d, (16, 16, 16), (8, 8, 8), inner_codec="zstd",
              nested_inner_shape=(4, 4, 4), zarrita=False, why=nested_why)
    g.sharded("sh_u8_nested_zstd_twin", d, (8, 8, 8), (4, 4, 4), inner_codec="zstd")
    check_nested_twin(os.path.join(outdir, "sh_u8_nested_zstd"),
                      os.path.join(outdir, "sh_u8_nested_zstd_twin"), (2, 2, 2), 8)
    d = sample_values("<f4", (20, 30), 12)
    g.sharded("sh_f32_nested_start_gzip", d, (20, 20), (10, 10), inner_codec="gzip",
              index_location="start", nested_inner_shape=(5, 5), zarrita=False, why=nested_why)
    g.sharded("sh_f32_nested_start_gzip_twin", d, (10, 10), (5, 5), inner_codec="gzip")
    check_nested_twin(os.path.join(outdir, "sh_f32_nested_start_gzip"),
                      os.path.join(outdir, "sh_f32_nested_start_gzip_twin"), (2, 2), 4, "start")
    # Outer index at the end, nested index at the start (twin: flat array with index at start).
    d = _with_fill_blocks(sample_values("<u2", (24, 24), 13), 0, [np.s_[0:6, 6:12]])
    g.sharded("sh_u16_nested_inner_start_raw", d, (12, 12), (6, 6), nested_inner_shape=(3, 3),
              nested_index_location="start", zarrita=False, why=nested_why)
    g.sharded("sh_u16_nested_inner_start_raw_twin", d, (6, 6), (3, 3), index_location="start",
              zarrita=False, why=start_why)
    check_nested_twin(os.path.join(outdir, "sh_u16_nested_inner_start_raw"),
                      os.path.join(outdir, "sh_u16_nested_inner_start_raw_twin"), (2, 2), 4)
    g.sharded("sh_u16_nested_inner_start_raw_twin_end", d, (6, 6), (3, 3))
    check_start_twin(os.path.join(outdir, "sh_u16_nested_inner_start_raw_twin"),
                     os.path.join(outdir, "sh_u16_nested_inner_start_raw_twin_end"), 4, True)
    # 4-D sharded, index at the end.
    g.sharded("sh_i16_4d_zstd", sample_values("<i2", (5, 6, 7, 8), 14), (4, 4, 4, 4), (2, 2, 2, 4),
              inner_codec="zstd")
    # Plain (unsharded) v3: blosc cnames x shuffles, v2 chunk key encoding.
    dtypes = ["<u2", "<i4", "<f8", "<f4", "u1"]
    j = 0
    for cname in ("lz4", "lz4hc", "blosclz", "zstd", "zlib"):
        for sh in ("noshuffle", "shuffle", "bitshuffle"):
            dt = dtypes[j % len(dtypes)]
            g.plain(f"v3_blosc_{cname}_{sh}_{dt.strip('<|')}", sample_values(dt, (17, 30), 20 + j),
                    (8, 16), codec=f"blosc:{cname}:{sh}")
            j += 1
    d = _with_fill_blocks(sample_values("<i2", (21, 22), 40), 5, [np.s_[0:10, 10:20]])
    g.plain("v3_keyenc_v2_dot", d, (10, 10), fill=5, codec="zstd", chunk_key_encoding="v2",
            separator=".")
    g.plain("v3_keyenc_v2_slash", d, (10, 10), fill=5, codec="gzip", chunk_key_encoding="v2",
            separator="/")
    g.plain("v3_transpose_py_be", sample_values(">u4", (7, 9, 11), 41), (4, 4, 4), codec="zstd",
            transpose=(2, 0, 1), endian="big")
    write_manifest(outdir, g.arrays)
    return g.arrays


def main(argv):
    out = argv[1] if len(argv) > 1 else "sharded_out"
    arrays = generate(out)
    print(f"gen_sharded: wrote {len(arrays)} arrays to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
