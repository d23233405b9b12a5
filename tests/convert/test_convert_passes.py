"""A convert's reads per pass, counted honestly (issue 33 item 4; SPEC §7 io.source, docs/internals/
report.md): io.source.passes gives, per pass that read the input (range, scan, write), the
encoded bytes its reads fetched from storage, summed over ranks and the most of one rank, and the
kernel's count of the same phase (/proc/self/io rchar); input_bytes is the input's size on disk,
ratio = bytes_read / input_bytes, read_ratio the largest.

Usage: /usr/bin/python3 test_convert_passes.py --shardmill BIN --work DIR --case CASE
       [--mpiexec MPIEXEC]
Cases (one ctest each: convert.passes.<case>), each a percentile job whose input does not fit
limits.memory_bytes (two passes: scan, write) with shards narrower than the input's blocks, run
under one process and, with --mpiexec, under mpirun -n 2:
  tiff   a tifffile stack, one deflate strip per slice (and a notes.txt beside them, not counted
         in input_bytes): every pass fetches at least every strip's stored bytes (tifffile's
         byte counts), and its bytes_read agrees with rchar.
  tiff_plain  an uncompressed stack (one strip per slice) and an uncompressed tiled big-endian
         multi-page file: each pass preads every sample once (bytes_read = the volume's bytes;
         libtiff decoded whole strips before issue 33) and rchar agrees.
  hdf5   an h5py dataset in gzip chunks (1, H, W) of very compressible values: bytes_read agrees
         with rchar and counts stored chunk bytes (h5py's chunk storage sizes), not the bytes of
         the boxes (before issue 33 it counted the decoded boxes: 10x and more above rchar).
  hdf5_random  an HDF5 file with the volume contiguous and in unfiltered chunks (1, H, W): each
         pass fetches every byte once (bytes_read = the volume's bytes) and rchar agrees (before
         issue 33 HDF5's sieve buffer and chunk cache read 4x the boxes here).
  raw    a raw file: each pass preads every byte exactly once (bytes_read = the file's size,
         ratio 1.0) and rchar agrees.
Agreement: bytes_read <= rchar <= bytes_read * 1.02 + 128 KiB per rank (rchar also counts the
TIFF directories, HDF5 metadata and /proc/self/io itself). The amplification itself (read_ratio
<= 1.05) is checked by tests/convert/read_once*.py.
Prints one ok/FAIL line per check and a closing count; exit 1 on any failure.
"""

import json
import os
import sys

import numpy as np

from shardmill_test import runner as cc
from shardmill_test.ranks import launch

SHAPE = (16, 384, 512)  # 6 MiB of uint16; shards [8, 128, 128]: 12 shard columns per slice
SHARD = [8, 128, 128]
MEMORY = "2MiB"  # below the input: the scan does not keep it, the write reads it again
SLACK = 128 * 1024  # per rank: directories, metadata, /proc/self/io, MPI's own reads
MPIEXEC = None


def smooth(shape):
    """Very compressible uint16 values (gzip: far below 1/10 of the decoded bytes)."""
    z, y, x = np.indices(shape)
    return ((z * 7 + y // 16 + x // 32) % 4096).astype(np.uint16)


def noisy(shape, seed):
    rng = np.random.default_rng(seed)
    return (smooth(shape) + rng.integers(0, 64, shape)).astype(np.uint16)


def job(work, name, inp):
    return cc.write_config(os.path.join(work, name + ".yaml"), {
        "job": "convert", "input": inp,
        "normalize": {"mode": "percentile", "lo": 1, "hi": 99},
        "output": {"path": name + ".zarr", "dtype": "uint16", "fsync": False,
                   "shard": SHARD, "chunk": SHARD},
        "limits": {"memory_bytes": MEMORY, "memory_ceiling": False},
        "parallel": {"threads": 2}, "progress": False})


def runs(c, args, work, name, inp):
    """The job under one process and, with --mpiexec, two ranks: [(label, ranks, io.source)]."""
    cfg = job(work, name, inp)
    out = []
    for ranks in ((0, 2) if MPIEXEC else (0,)):
        label = f"{name} {'1 process' if ranks == 0 else f'mpirun -n {ranks}'}"
        rep = os.path.join(work, f"{name}-{ranks}.report.json")
        outdir = os.path.join(work, name + ".zarr")
        if os.path.isdir(outdir):
            import shutil
            shutil.rmtree(outdir)
        p = launch(args.shardmill, MPIEXEC, ["run", cfg, "--report", rep, "-q"], ranks, work, 300)
        if not c.check(f"{label}: exit 0", p is not None and p.returncode == 0,
                       p and cc.describe(p)):
            continue
        src = json.load(open(rep)).get("io", {}).get("source", {})
        out.append((label, max(ranks, 1), src))
    return out


def check_common(c, label, ranks, src, input_bytes):
    """The members every source's io.source has; returns {pass name: entry}."""
    c.check(f"{label}: io.source.input_bytes = the files' size on disk ({input_bytes})",
            src.get("input_bytes") == input_bytes, src.get("input_bytes"))
    passes = src.get("passes")
    names = [p.get("pass") for p in passes] if isinstance(passes, list) else None
    c.check(f"{label}: io.source.passes: scan then write (the input does not fit "
            f"limits.memory_bytes: read twice)", names == ["scan", "write"], names)
    got = {}
    for p in passes if isinstance(passes, list) else []:
        n, b, r = p.get("pass"), p.get("bytes_read"), p.get("rchar")
        got[n] = p
        if not c.check(f"{label}: {n}: bytes_read and rchar are integers",
                       isinstance(b, int) and isinstance(r, int), p):
            continue
        c.check(f"{label}: {n}: bytes_read <= rchar (the kernel's count of the phase)",
                b <= r, (b, r))
        c.check(f"{label}: {n}: rchar <= bytes_read * 1.02 + {SLACK} per rank",
                r <= b * 1.02 + SLACK * ranks, (b, r, r / max(b, 1)))
        c.check(f"{label}: {n}: the most of one rank <= the sum",
                0 < p.get("bytes_read_max_rank", -1) <= b and
                0 < p.get("rchar_max_rank", -1) <= r, p)
        if ranks == 1:
            c.check(f"{label}: {n}: one process: max_rank = sum",
                    p.get("bytes_read_max_rank") == b and p.get("rchar_max_rank") == r, p)
        c.check(f"{label}: {n}: ratio = bytes_read / input_bytes",
                isinstance(p.get("ratio"), float) and
                abs(p["ratio"] - b / input_bytes) <= 1e-9 * max(1.0, p["ratio"]), p)
    total = sum(p.get("bytes_read", 0) for p in got.values())
    c.check(f"{label}: io.source.bytes_read (the run's) = the passes' sum ({total})",
            src.get("bytes_read") == total, src.get("bytes_read"))
    ratios = [p["ratio"] for p in got.values() if isinstance(p.get("ratio"), float)]
    c.check(f"{label}: read_ratio = the largest pass ratio",
            ratios and src.get("read_ratio") == max(ratios), (src.get("read_ratio"), ratios))
    return got


def case_tiff(c, args, work):
    import tifffile
    vol = noisy(SHAPE, 33)
    stack = os.path.join(work, "stack")
    os.makedirs(stack)
    stored = 0
    for z in range(SHAPE[0]):
        path = os.path.join(stack, f"s{z + 1:02d}.tif")
        tifffile.imwrite(path, vol[z], compression="zlib", rowsperstrip=SHAPE[1])
        with tifffile.TiffFile(path) as t:
            c.check(f"fixture: slice {z}: one strip", len(t.pages[0].databytecounts) == 1)
            stored += sum(t.pages[0].databytecounts)
    size = sum(os.path.getsize(os.path.join(stack, f)) for f in os.listdir(stack))
    with open(os.path.join(stack, "notes.txt"), "w") as f:  # no slice: not read, not counted
        f.write("scanner notes\n" * 100)
    for label, ranks, src in runs(c, args, work, "tiff", {"store": stack, "format": "tiff"}):
        for n, p in check_common(c, label, ranks, src, size).items():
            c.check(f"{label}: {n}: every strip's stored bytes fetched at least once "
                    f"({p.get('bytes_read')} >= {stored}, tifffile's byte counts)",
                    isinstance(p.get("bytes_read"), int) and p["bytes_read"] >= stored, p)
            c.check(f"{label}: {n}: strips are fetched whole (a multiple of the stored bytes "
                    f"of one pass over them)",
                    isinstance(p.get("bytes_read"), int) and p["bytes_read"] % stored == 0, p)


def case_tiff_plain(c, args, work):
    """An uncompressed stack (one strip per slice, and a tiled multi-page file, big-endian): read in
    part by pread, each pass fetches every sample once (libtiff decoded whole strips: 12x here)."""
    import tifffile
    vol = noisy(SHAPE, 36)
    stack = os.path.join(work, "plain")
    os.makedirs(stack)
    for z in range(SHAPE[0]):
        tifffile.imwrite(os.path.join(stack, f"s{z + 1:02d}.tif"), vol[z], rowsperstrip=SHAPE[1])
    size = sum(os.path.getsize(os.path.join(stack, f)) for f in os.listdir(stack))
    tiled = os.path.join(work, "tiled.tif")
    with tifffile.TiffWriter(tiled, byteorder=">") as w:
        for z in range(SHAPE[0]):
            w.write(vol[z], tile=(128, 256), contiguous=False)
    for name, store, nbytes in (("tiff_plain", stack, size),
                                ("tiff_tiled", tiled, os.path.getsize(tiled))):
        for label, ranks, src in runs(c, args, work, name, {"store": store, "format": "tiff"}):
            for n, p in check_common(c, label, ranks, src, nbytes).items():
                c.check(f"{label}: {n}: every sample read once, in part (bytes_read = "
                        f"{vol.nbytes})", p.get("bytes_read") == vol.nbytes, p)
    from shardmill_test import zarr_decode
    a, b = (os.path.join(work, n + ".zarr") for n in ("tiff_plain", "tiff_tiled"))
    if os.path.isdir(a) and os.path.isdir(b):
        c.check("the little-endian strips and the big-endian tiles convert to the same values",
                np.array_equal(zarr_decode.spec_decode(a), zarr_decode.spec_decode(b)))


def case_hdf5(c, args, work):
    import h5py
    vol = smooth(SHAPE)
    path = os.path.join(work, "v.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("/scan/data", data=vol, chunks=(1,) + SHAPE[1:], compression="gzip")
    with h5py.File(path, "r") as f:
        dsid = f["/scan/data"].id
        stored = sum(dsid.get_chunk_info(i).size for i in range(dsid.get_num_chunks()))
    c.check(f"fixture: gzip chunks store under a tenth of the values ({stored} of {vol.nbytes})",
            stored * 10 < vol.nbytes)
    inp = {"store": path, "format": "hdf5", "hdf5": {"dataset": "/scan/data"}}
    for label, ranks, src in runs(c, args, work, "hdf5", inp):
        for n, p in check_common(c, label, ranks, src, os.path.getsize(path)).items():
            b = p.get("bytes_read")
            c.check(f"{label}: {n}: every chunk's stored bytes fetched at least once "
                    f"({b} >= {stored}, h5py's chunk storage sizes)",
                    isinstance(b, int) and b >= stored, p)
            c.check(f"{label}: {n}: chunks are fetched whole (a multiple of their stored bytes)",
                    isinstance(b, int) and b % stored == 0, p)
            c.check(f"{label}: {n}: stored bytes, not the boxes' decoded bytes "
                    f"({b} < {vol.nbytes})", isinstance(b, int) and b < vol.nbytes, p)


def case_hdf5_random(c, args, work):
    """HDF5 read in part: contiguous data and unfiltered chunks (1, H, W) of 384 KiB (under HDF5's
    1 MiB chunk cache, which read them whole for a box that needs a quarter; the 64 KiB sieve
    buffer read the whole plane of contiguous data). Each pass fetches every byte once."""
    import h5py
    vol = noisy(SHAPE, 35)
    path = os.path.join(work, "r.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("/contiguous", data=vol)
        f.create_dataset("/chunked", data=vol, chunks=(1,) + SHAPE[1:])
    for dset in ("contiguous", "chunked"):
        inp = {"store": path, "format": "hdf5", "hdf5": {"dataset": "/" + dset}}
        for label, ranks, src in runs(c, args, work, "hdf5_" + dset, inp):
            for n, p in check_common(c, label, ranks, src, os.path.getsize(path)).items():
                c.check(f"{label}: {n}: every byte read once, in part (bytes_read = "
                        f"{vol.nbytes})", p.get("bytes_read") == vol.nbytes, p)


def case_raw(c, args, work):
    vol = noisy(SHAPE, 34)
    path = os.path.join(work, "v.raw")
    vol.tofile(path)
    inp = {"store": path, "format": "raw", "raw": {"dtype": "uint16", "shape": list(SHAPE)}}
    for label, ranks, src in runs(c, args, work, "raw", inp):
        for n, p in check_common(c, label, ranks, src, vol.nbytes).items():
            c.check(f"{label}: {n}: every byte pread exactly once (bytes_read = {vol.nbytes}, "
                    f"ratio 1.0)", p.get("bytes_read") == vol.nbytes and p.get("ratio") == 1.0, p)


CASES = {"tiff": case_tiff, "tiff_plain": case_tiff_plain, "hdf5": case_hdf5, "hdf5_random": case_hdf5_random,
         "raw": case_raw}

if __name__ == "__main__":
    if "--mpiexec" in sys.argv:  # case_main parses the rest
        i = sys.argv.index("--mpiexec")
        MPIEXEC = sys.argv[i + 1]
        del sys.argv[i:i + 2]
    sys.exit(cc.case_main("convert.passes", CASES))
