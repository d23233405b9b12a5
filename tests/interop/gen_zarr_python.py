"""Write Zarr v2 fixtures with zarr-python 2.13 (Debian python3-zarr) for shardmill's interop tests.

Usage: /usr/bin/python3 gen_zarr_python.py OUTDIR
Covers every dtype, byte orders < > |, order C and F, fill values (ints, NaN, Infinity,
-Infinity, None), dimension separators . and /, compressors gzip, zlib, zstd, blosc (lz4, lz4hc,
blosclz, zstd, zlib x noshuffle/shuffle/bitshuffle) and None, missing chunks (chunks equal to
the fill value not written, and deleted chunk files), edge chunks, 1-D/2-D/3-D, a group with
nested arrays, and an OME-Zarr-like multiscale group. The expected values of each array are
what zarr-python reads back (checked against the data written), saved as NAME.npy / NAME.raw.
"""

import itertools
import os
import shutil
import sys

import numcodecs
import numpy as np
import zarr

from fixture_common import (fill_to_json, same_values, sample_values, save_expected, v3_name,
                            write_manifest)

BLOSC_CNAMES = ["lz4", "lz4hc", "blosclz", "zstd", "zlib"]
SHUFFLES = [numcodecs.Blosc.NOSHUFFLE, numcodecs.Blosc.SHUFFLE, numcodecs.Blosc.BITSHUFFLE]
SHUFFLE_NAMES = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}
DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float32", "float64"]


def _compressor(spec):
    if spec is None:
        return None
    kind = spec[0]
    if kind == "gzip":
        return numcodecs.GZip(level=spec[1])
    if kind == "zlib":
        return numcodecs.Zlib(level=spec[1])
    if kind == "zstd":
        return numcodecs.Zstd(level=spec[1])
    if kind == "blosc":
        return numcodecs.Blosc(cname=spec[1], clevel=5, shuffle=spec[2],
                               blocksize=spec[3] if len(spec) > 3 else 0)
    raise ValueError(spec)


def _fill_region(data, fill, chunks, chunk_idx):
    """Set the whole chunk chunk_idx of data to fill (so zarr does not write it)."""
    sl = tuple(slice(i * c, (i + 1) * c) for i, c in zip(chunk_idx, chunks))
    data[sl] = fill


class Gen:
    """Accumulates fixtures and their manifest entries."""

    def __init__(self, outdir):
        self.outdir = outdir
        self.arrays = []

    def array(self, name, dtype, shape, chunks, compressor=("zstd", 3), order="C",
              fill=0, sep=".", empty_chunks=(), delete_chunks=(), group=None, seed=None,
              data=None):
        """Create one v2 array; empty_chunks are left unwritten by zarr (equal to fill),
        delete_chunks are written then removed from disk (read back as fill)."""
        store_dir = os.path.join(self.outdir, group if group else name)
        if group is None and os.path.exists(store_dir):
            shutil.rmtree(store_dir)
        if data is None:
            data = sample_values(dtype, shape, seed if seed is not None else len(self.arrays))
        data = np.array(data, dtype=np.dtype(dtype).newbyteorder("="))
        for c in list(empty_chunks) + list(delete_chunks):
            if fill is None:
                raise ValueError("missing chunks need a fill value")
            _fill_region(data, fill, chunks, c)
        store = zarr.DirectoryStore(store_dir, dimension_separator=sep)
        path = name[len(group) + 1:] if group else None
        z = zarr.create(shape=shape, chunks=chunks, dtype=dtype, compressor=_compressor(compressor),
                        fill_value=fill, order=order, store=store, path=path,
                        dimension_separator=sep, write_empty_chunks=not empty_chunks,
                        overwrite=True)
        z[...] = data
        z.attrs["fixture"] = name
        node_dir = os.path.join(store_dir, path) if path else store_dir
        for c in empty_chunks:
            key = sep.join(str(i) for i in c)
            assert not os.path.exists(os.path.join(node_dir, *key.split("/"))), \
                f"{name}: zarr wrote fill chunk {key}"
        for c in delete_chunks:
            key = sep.join(str(i) for i in c)
            os.remove(os.path.join(node_dir, *key.split("/")))
        back = zarr.open_array(zarr.DirectoryStore(store_dir, dimension_separator=sep),
                               path=path, mode="r")[...]
        assert back.dtype.newbyteorder("=") == data.dtype
        assert same_values(back, data), f"{name}: zarr read-back"
        self.arrays.append({
            "name": name, "family": "zarr_python_v2",
            "path": os.path.relpath(store_dir, self.outdir), "array": path,
            "dtype": v3_name(dtype), "shape": list(shape), "chunks": list(chunks),
            "shards": None, "zarr_format": 2, "fill_value": fill_to_json(fill, dtype),
            "order": order, "v2_dtype": np.dtype(dtype).str, "separator": sep,
            "compressor": None if compressor is None else list(compressor),
            "missing_chunks": [list(c) for c in list(empty_chunks) + list(delete_chunks)],
            "expected": save_expected(self.outdir, name, back),
        })
        return z


def generate(outdir):
    """Write every v2 fixture and the manifest."""
    os.makedirs(outdir, exist_ok=True)
    g = Gen(outdir)
    comps = [("gzip", 5), ("zlib", 1), ("zstd", 3), None, ("blosc", "lz4", 1), ("zstd", 19)]
    # Every dtype and byte order; orders, separators and compressors rotate among them.
    k = 0
    for dt in DTYPES:
        orders = ["|"] if np.dtype(dt).itemsize == 1 else ["<", ">"]
        for bo in orders:
            dtype = np.dtype(dt).newbyteorder(bo) if bo != "|" else np.dtype(dt)
            fill = {"b": True, "f": -1.5}.get(dtype.kind, 42 if dtype.kind == "u" else -7)
            g.array(f"v2_{dt}_{'le' if bo == '<' else 'be' if bo == '>' else 'na'}",
                    dtype.str if dt != "bool" else "|b1", (23, 31), (8, 10),
                    compressor=comps[k % len(comps)], order="CF"[k % 2], fill=fill,
                    sep="./"[(k // 2) % 2], empty_chunks=[(1, 1)] if k % 3 == 0 else (),
                    delete_chunks=[(2, 3)] if k % 3 == 1 else ())
            k += 1
    # Float fill values, incl. NaN / ±Infinity / None.
    g.array("v2_f32_fill_nan", "<f4", (40, 12), (16, 8), fill=np.nan, empty_chunks=[(0, 1)])
    g.array("v2_f64_fill_inf_be", ">f8", (19, 7), (5, 5), fill=np.inf, order="F",
            delete_chunks=[(3, 1)], compressor=("gzip", 1))
    g.array("v2_f32_fill_neginf", "<f4", (50,), (16,), fill=-np.inf, sep="/",
            empty_chunks=[(1,)], compressor=("zlib", 9))
    g.array("v2_f64_fill_none", "<f8", (9, 10), (4, 4), fill=None, compressor=("zstd", 1))
    g.array("v2_i32_fill_none_F", ">i4", (6, 7, 8), (3, 3, 3), fill=None, order="F",
            compressor=None)
    g.array("v2_u16_fill_max", "<u2", (30, 30), (16, 16), fill=65535, delete_chunks=[(1, 0)])
    g.array("v2_i64_fill_neg", "<i8", (33,), (10,), fill=-(2**62), empty_chunks=[(2,)],
            compressor=("gzip", 9))
    g.array("v2_u64_fill_big", ">u8", (12, 5), (5, 5), fill=2**63 + 5, delete_chunks=[(1, 0)])
    # Blosc: every cname x shuffle, dtypes rotating; 3-D, edge chunks.
    bdt = ["<u2", "<i4", "<f8", ">u4", "|u1", "<f4", ">i8", "<i2"]
    for j, (cname, sh) in enumerate(itertools.product(BLOSC_CNAMES, SHUFFLES)):
        dt = bdt[j % len(bdt)]
        g.array(f"v2_blosc_{cname}_{SHUFFLE_NAMES[sh]}_{dt[1:]}", dt, (10, 21, 19), (4, 8, 8),
                compressor=("blosc", cname, sh), order="CF"[j % 2], fill=0,
                sep="./"[(j // 2) % 2], empty_chunks=[(0, 1, 1)] if j % 2 else ())
    # Blosc with a small blocksize: several blocks per chunk.
    g.array("v2_blosc_lz4_blocks_u16", "<u2", (64, 64), (64, 64),
            compressor=("blosc", "lz4", 1, 1024), seed=101)
    g.array("v2_blosc_zstd_bitshuffle_blocks_f32", "<f4", (70, 40), (32, 32),
            compressor=("blosc", "zstd", 2, 512), seed=102)
    # Smooth data (compresses well) in a larger 3-D array, gzip and zstd.
    z, y, x = np.meshgrid(np.arange(20), np.arange(33), np.arange(35), indexing="ij")
    smooth = ((z * 7 + y * 3 + x) % 251).astype("u1")
    g.array("v2_u8_smooth_gzip_3d", "|u1", (20, 33, 35), (8, 16, 16), compressor=("gzip", 6),
            data=smooth)
    g.array("v2_u8_smooth_blosc_zlib_3d", "|u1", (20, 33, 35), (8, 16, 16),
            compressor=("blosc", "zlib", 2), data=smooth, sep="/")
    # 1-D arrays.
    g.array("v2_i16_1d_nocomp", "<i2", (1001,), (100,), compressor=None, delete_chunks=[(4,)],
            fill=-3)
    g.array("v2_f64_1d_be_blosc", ">f8", (77,), (77,), compressor=("blosc", "lz4hc", 1))
    # 4-D and 5-D (the CLI is not limited to z,y,x), with an F-order 4-D.
    g.array("v2_u16_4d_zstd", "<u2", (3, 5, 7, 9), (2, 2, 4, 4), compressor=("zstd", 3),
            delete_chunks=[(1, 1, 0, 1)], fill=3)
    g.array("v2_f32_4d_F_blosc", "<f4", (4, 3, 6, 5), (3, 2, 4, 4), order="F",
            compressor=("blosc", "lz4", 2))
    g.array("v2_i8_5d_gzip", "|i1", (2, 3, 2, 3, 4), (1, 2, 2, 2, 3), compressor=("gzip", 1))
    # A group with nested arrays (addressed with --array).
    gdir = os.path.join(outdir, "v2_group")
    if os.path.exists(gdir):
        shutil.rmtree(gdir)
    root = zarr.open_group(zarr.DirectoryStore(gdir), mode="w")
    root.attrs["title"] = "nested"
    root.create_group("a").create_group("b")
    g.array("v2_group/a/b/deep_u16", "<u2", (25, 26), (10, 10), group="v2_group",
            delete_chunks=[(0, 0)], fill=9)
    g.array("v2_group/top_f32", "<f4", (15, 16), (8, 8), group="v2_group", order="F")
    # OME-Zarr-like multiscale group: levels 0, 1, 2 (2x downsampled), addressed by path.
    odir = os.path.join(outdir, "v2_ome")
    if os.path.exists(odir):
        shutil.rmtree(odir)
    ome = zarr.open_group(zarr.DirectoryStore(odir, dimension_separator="/"), mode="w")
    base = sample_values("<u2", (16, 24, 28), 777)
    datasets = []
    for lvl in range(3):
        s = 2 ** lvl
        g.array(f"v2_ome/{lvl}", "<u2", base[::s, ::s, ::s].shape, (4, 8, 8), group="v2_ome",
                data=base[::s, ::s, ::s], sep="/", compressor=("blosc", "zstd", 1))
        datasets.append({"path": str(lvl), "coordinateTransformations": [
            {"type": "scale", "scale": [float(s)] * 3}]})
    ome.attrs["multiscales"] = [{"version": "0.4", "name": "ct", "datasets": datasets,
                                 "axes": [{"name": n, "type": "space"} for n in "zyx"]}]
    write_manifest(outdir, g.arrays)
    return g.arrays


def main(argv):
    out = argv[1] if len(argv) > 1 else "zarr_python_out"
    arrays = generate(out)
    print(f"gen_zarr_python: wrote {len(arrays)} arrays to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
