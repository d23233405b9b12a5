"""Every input byte read once per pass (issue 33 item 5): a convert of every source and layout
reads each pass at most 1.05x the input's size on disk, by the report and by the kernel.

Usage: /usr/bin/python3 test_read_once.py --shardmill BIN --work DIR --case CASE [--mpiexec BIN]
Cases (one ctest each, label `convert`; the hdf5 ones also `hdf5`): a CT-like uint16 volume of
SHAPE (shardmill_test.volumes.phantom, slice by slice) written by an independent writer as
  tiff_strip          a tifffile slice per file, one strip per slice, deflate
  tiff_strip_none     the same, uncompressed
  tiff_strips_lzw     a multi-page file of 16-row strips, LZW (libtiff-tools' tiffcp: tifffile
                      writes no LZW or zstd without imagecodecs)
  tiff_tiles_deflate  slices of 64x64 tiles, deflate (tifffile)
  tiff_tiles_zstd     a multi-page file of 64x64 tiles, zstd (tiffcp)
  tiff_multipage      one multi-page file, one strip per page, deflate (tifffile)
  hdf5_slices         h5py, chunks (1, H, W), gzip
  hdf5_cubes          h5py, chunks (64, 64, 64), gzip
  hdf5_contiguous     h5py, contiguous
  raw                 NumPy's tofile
  nifti               nibabel, .nii
  nifti_gz            nibabel, .nii.gz (a stream)
  zarr_v3             shardmill_test.shard_writer (written from the Zarr v3 spec), plain gzip
                      chunks (32, 64, 192): each spans many output shards
Each is converted with configs/convert-tiff-ome.yaml's normalization (percentile [1, 99]) to
uint16, limits.memory_bytes 7 MiB (the 3 MiB input is not kept between the passes of one rank:
two passes), under 1x2 (one process, 2 threads) and, with --mpiexec, 2x1 (ranks x threads), with
the default layout (output.shard auto) and with explicit shards NARROW = [16, 32, 32], narrower
than every input's read block (a slice, a strip, a tile, a chunk). Checks per run:
  - exit 0;
  - per pass of `io.source.passes` (issue 33 item 4, docs/internals/report.md): `ratio` <= 1.05
    and bytes_read / (the input's size on disk, the sum of st_size of its files as os.stat gives
    them here; a Zarr input: its chunk objects) <= 1.05, the pass's rchar (summed over ranks) <=
    1.05 x that size + 1 MiB; `input_bytes` equals that size; `read_ratio` the largest ratio;
  - the kernel's count: the rchar (/proc/self/io) of the whole process tree (mpiexec and ranks
    included: a waited-for child's counts are added to its parent's) is at most 1.05 x passes x
    the size on disk + 1 MiB (the configuration, libraries' reads, MPI's start);
  - the output values: the first run of a layout decoded by shardmill_test.zarr_decode equals
    NumPy's SPEC §5 percentile window of the volume scaled to uint16 (rint(float32(w) x 65535)),
    and every other run of the layout wrote the same shard files, byte for byte.
tiff_strip_none also runs the narrow layout at 1x2 under strace: the scan of a source read at any
box reads whole planes (docs/internals/reading.md), so at least one pread64 per slice reads the
whole plane (group by group, NARROW[1] rows at a time, none would).
Where the report has no `io.source.passes` yet (main before issue 33's item 4), the per-pass
ratio is measured with what it has: io.source.bytes_read (a Zarr input: io.bytes.payload) over
the passes the run made (two unless every rank kept its input) and the volume's DECODED bytes
(bytes_read counted decoded bytes then), and fails the same 1.05 bound.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

from shardmill_test import report_json
from shardmill_test import runner as cc
from shardmill_test import spec_oracle
from shardmill_test import volumes
from shardmill_test import zarr_decode
from shardmill_test.checks import Checks
from shardmill_test.ranks import mpi_env, plain_env

SKIP = 77
SHAPE = (64, 128, 192)
NARROW = [16, 32, 32]
MEMORY = 7 << 20
RATIO = 1.05
SLACK = 1 << 20
PCT = (1, 99)
H5_DATASET = "/volume"


# ---- the volume and its oracle ----

def volume():
    """The CT-like phantom (bench/read_once/w9.py's generator), slice by slice."""
    return volumes.phantom_slices(SHAPE)


def oracle(vol):
    """SPEC §5 by NumPy: the percentile window of the default uint16 histogram, to uint16."""
    w = spec_oracle.percentile_window(vol, PCT[0], PCT[1])
    y = np.rint(w.astype(np.float32) * np.float32(65535))
    return y.clip(0, 65535).astype(np.uint16)


# ---- the sources (each returns (input config, files whose sizes are the input's size)) ----

def tiffcp(src, dst, args):
    r = subprocess.run(["tiffcp"] + args + [src, dst], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"tiffcp {args}: {r.stderr}")


def stack(work, vol, **kw):
    """A directory of slices s1.tif .. sN.tif (tifffile)."""
    import tifffile
    d = os.path.join(work, "stack")
    os.makedirs(d)
    files = []
    for z in range(vol.shape[0]):
        path = os.path.join(d, f"s{z + 1}.tif")
        tifffile.imwrite(path, vol[z], **kw)
        files.append(path)
    return {"store": d, "format": "tiff"}, files


def src_tiff_strip(work, vol):
    return stack(work, vol, compression="zlib", rowsperstrip=vol.shape[1])


def src_tiff_strip_none(work, vol):
    return stack(work, vol, rowsperstrip=vol.shape[1])


def multipage_tiffcp(work, vol, args):
    """One multi-page file rewritten by tiffcp (one process, not one per slice)."""
    import tifffile
    plain, path = os.path.join(work, "plain.tif"), os.path.join(work, "multi.tif")
    with tifffile.TiffWriter(plain) as w:
        for z in range(vol.shape[0]):
            w.write(vol[z], contiguous=False)
    tiffcp(plain, path, args)
    os.unlink(plain)
    return {"store": path, "format": "tiff"}, [path]


def src_tiff_strips_lzw(work, vol):
    return multipage_tiffcp(work, vol, ["-c", "lzw", "-s", "-r", "16"])


def src_tiff_tiles_deflate(work, vol):
    return stack(work, vol, compression="zlib", tile=(64, 64))


def src_tiff_tiles_zstd(work, vol):
    return multipage_tiffcp(work, vol, ["-c", "zstd", "-t", "-w", "64", "-l", "64"])


def src_tiff_multipage(work, vol):
    import tifffile
    path = os.path.join(work, "multi.tif")
    with tifffile.TiffWriter(path) as w:
        for z in range(vol.shape[0]):
            w.write(vol[z], contiguous=False, compression="zlib", rowsperstrip=vol.shape[1])
    return {"store": path, "format": "tiff"}, [path]


def h5(work, vol, **kw):
    import h5py
    path = os.path.join(work, "volume.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset(H5_DATASET, data=vol, **kw)
    return {"store": path, "format": "hdf5", "hdf5": {"dataset": H5_DATASET}}, [path]


def src_hdf5_slices(work, vol):
    return h5(work, vol, chunks=(1,) + vol.shape[1:], compression="gzip", compression_opts=4)


def src_hdf5_cubes(work, vol):
    return h5(work, vol, chunks=(64, 64, 64), compression="gzip", compression_opts=4)


def src_hdf5_contiguous(work, vol):
    return h5(work, vol)


def src_raw(work, vol):
    path = os.path.join(work, "volume.raw")
    vol.astype("<u2").tofile(path)
    return {"store": path, "format": "raw",
            "raw": {"dtype": "uint16", "shape": list(vol.shape), "byte_order": "little"}}, [path]


def nii(work, vol, name):
    import nibabel as nib
    path = os.path.join(work, name)
    img = nib.Nifti1Image(np.ascontiguousarray(vol.transpose(2, 1, 0)), np.eye(4))
    img.header.set_data_dtype(np.uint16)
    nib.save(img, path)
    return {"store": path, "format": "nifti"}, [path]


def src_nifti(work, vol):
    return nii(work, vol, "volume.nii")


def src_nifti_gz(work, vol):
    return nii(work, vol, "volume.nii.gz")


def src_zarr_v3(work, vol):
    from shardmill_test import shard_writer
    path = os.path.join(work, "volume.zarr")
    shard_writer.write_plain_v3(path, vol, [32, 64, 192], codec="gzip")
    files = [os.path.join(dp, f) for dp, _, fn in os.walk(path) for f in fn if f != "zarr.json"]
    return {"store": path}, files


CASES = {name[4:]: fn for name, fn in list(globals().items()) if name.startswith("src_")}
TIFFCP_CASES = ("tiff_strips_lzw", "tiff_tiles_zstd")


# ---- one run ----

def rchar():
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return None


def run_counted(cmd, env, cwd, base):
    """cmd with stdout/stderr to files (this process reads nothing while it runs); returns
    (exit status, stderr text, rchar of the whole waited-for process tree or None)."""
    r0 = rchar()
    with open(base + ".stdout", "wb") as so, open(base + ".stderr", "wb") as se:
        try:
            rc = subprocess.run(cmd, env=env, cwd=cwd, stdout=so, stderr=se,
                                stdin=subprocess.DEVNULL, timeout=300).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    r1 = rchar()
    with open(base + ".stderr", errors="replace") as f:
        err = f.read().strip()
    return rc, err, (r1 - r0 if r0 is not None and r1 is not None else None)


def tree_digest(out):
    h = hashlib.sha256()
    root = os.path.join(out, "c")
    for dp, dn, fn in sorted(os.walk(root)):
        dn.sort()
        for f in sorted(fn):
            p = os.path.join(dp, f)
            h.update(os.path.relpath(p, root).encode() + b"\0")
            with open(p, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def source_section(rep):
    """(the report's io.source object or {}, what it counts bytes_read in when there is no
    `passes`: 'decoded' for a source on main, 'payload' for a Zarr input (io.bytes.payload))."""
    io = rep.get("io") or {}
    src = io.get("source")
    if isinstance(src, dict):
        return src, "decoded"
    return {"bytes_read": ((io.get("bytes") or {}).get("payload"))}, "payload"


def check_passes(c, label, rep, ranks, disk, decoded, rch):
    src, unit = source_section(rep)
    passes = src.get("passes")
    if isinstance(passes, list):
        names = [p.get("pass") for p in passes]
        c.check(f"{label}: io.source.passes name range/scan/write phases, in order, at least "
                f"one ({names})", bool(passes) and all(n in ("range", "scan", "write")
                                                      for n in names) and
                names == sorted(names, key=["range", "scan", "write"].index), passes)
        c.check(f"{label}: io.source.input_bytes = the input's size on disk ({disk})",
                src.get("input_bytes") == disk, src.get("input_bytes"))
        worst = 0.0
        for p in passes:
            br, ratio = p.get("bytes_read"), p.get("ratio")
            mine = br / disk if isinstance(br, int) else None
            ok = isinstance(ratio, (int, float)) and ratio <= RATIO and mine is not None and \
                mine <= RATIO
            worst = max(worst, mine or 0.0, ratio or 0.0)
            c.check(f"{label}: pass {p.get('pass')}: read {br} B = {mine and round(mine, 3)}x "
                    f"the input on disk (report ratio {ratio}) <= {RATIO}", ok, p)
            rc_ = p.get("rchar")
            c.check(f"{label}: pass {p.get('pass')}: the report's rchar {rc_} <= {RATIO} x the "
                    f"input on disk + 1 MiB", isinstance(rc_, int) and
                    rc_ <= RATIO * disk + SLACK, p)
        c.check(f"{label}: io.source.read_ratio = the largest pass ratio",
                isinstance(src.get("read_ratio"), (int, float)) and passes and
                abs(src["read_ratio"] - max(p.get("ratio") or 0 for p in passes)) < 1e-9,
                src.get("read_ratio"))
        npasses = len(passes)
    else:
        mem = rep.get("memory") or {}
        npasses = 1 if (mem.get("kept_input_ranks") or 0) >= ranks else 2
        br = src.get("bytes_read")
        base = decoded if unit == "decoded" else disk
        per = br / (npasses * base) if isinstance(br, int) else None
        print(f"note: {label}: no io.source.passes in the report: {unit} bytes_read {br} over "
              f"{npasses} pass(es) of {base} B")
        c.check(f"{label}: per pass read {per and round(per, 3)}x the input ({unit} bytes, "
                f"{npasses} pass(es), no io.source.passes) <= {RATIO}",
                per is not None and per <= RATIO, src)
    if rch is not None and ranks > 1 and "detect_leaks=1" in os.environ.get("ASAN_OPTIONS", ""):
        # a sanitized rank reads /proc/self/maps and its libraries' symbols at exit (LeakSanitizer),
        # tens of MB that are no input reads: the per-pass rchar of the report still holds
        print(f"note: {label}: process-tree rchar {rch} B not checked under ASan with mpiexec")
    elif rch is not None:
        bound = RATIO * npasses * disk + SLACK
        c.check(f"{label}: rchar of the process tree {rch} B = {rch / disk:.3f}x the input on "
                f"disk <= {RATIO} x {npasses} pass(es) + 1 MiB ({int(bound)})", rch <= bound)


def run_case(c, args, name, work):
    t0 = time.monotonic()
    vol = volume()
    want = oracle(vol)
    inp, files = CASES[name](work, vol)
    print(f"note: {name}: volume, oracle and source in {time.monotonic() - t0:.2f} s")
    disk = sum(os.stat(f).st_size for f in files)
    decoded = vol.size * vol.dtype.itemsize
    print(f"note: {name}: {len(files)} file(s), {disk} B on disk, {decoded} B decoded")
    configs = [(1, 2)] + ([(2, 1)] if args.mpiexec else [])
    for layout, shard in (("default", None), ("narrow", NARROW)):
        first = None
        for ranks, threads in configs:
            label = f"{name} {layout} {ranks}x{threads}"
            tag = f"{layout}-{ranks}x{threads}"
            out = os.path.join(work, tag + ".zarr")
            output = {"path": out, "dtype": "uint16", "exists": "error", "fsync": False}
            if shard is not None:
                output["shard"] = shard
            cfg = cc.write_config(os.path.join(work, tag + ".yaml"), {
                "job": "convert", "input": inp,
                "normalize": {"mode": "percentile", "lo": PCT[0], "hi": PCT[1]},
                "output": output, "limits": {"memory_bytes": MEMORY, "memory_ceiling": False},
                "parallel": {"threads": threads}, "progress": False})
            rep_path = os.path.join(work, tag + ".report.json")
            argv = [args.shardmill, "run", cfg, "--report", rep_path]
            if ranks == 1:
                cmd, env = argv, plain_env()
            else:
                cmd, env = [args.mpiexec, "--oversubscribe", "-np", str(ranks)] + argv, mpi_env()
            env["OMP_NUM_THREADS"] = str(threads)
            t0 = time.monotonic()
            rc, err, rch = run_counted(cmd, env, work, os.path.join(work, tag))
            wall = time.monotonic() - t0
            if not c.check(f"{label}: convert exits 0", rc == 0, f"exit {rc}: {err[-600:]}"):
                continue
            rep = report_json.load(rep_path)
            shard_shape = json.load(open(os.path.join(out, "zarr.json")))["chunk_grid"][
                "configuration"]["chunk_shape"]
            print(f"note: {label}: shard {shard_shape}, io.source {source_section(rep)[0]}, "
                  f"rchar {rch}, {wall:.2f} s")
            check_passes(c, label, rep, ranks, disk, decoded, rch)
            digest = tree_digest(out)
            if first is None:
                got = zarr_decode.spec_decode(out)
                c.check(f"{label}: output = NumPy's percentile window as uint16, value for value",
                        got.dtype == want.dtype and np.array_equal(got, want),
                        spec_oracle.first_diff(got, want))
                first = (label, digest)
            else:
                c.check(f"{label}: the same shard files as {first[0]}", digest == first[1])
            shutil.rmtree(out, ignore_errors=True)


def plane_reads(c, args, work, inp):
    """A source read at any box (uncompressed strips) scans in slabs of whole planes: under
    strace, the narrow layout's 1x2 run reads every slice file's strip in one pread of the whole
    plane (the scan), where group by group it would read NARROW[1] rows at a time."""
    if shutil.which("strace") is None:
        c.check("strace (scripts/install-deps.sh installs it) is on PATH", False)
        return
    plane = SHAPE[1] * SHAPE[2] * 2
    out, trace = os.path.join(work, "planes.zarr"), os.path.join(work, "planes.strace")
    cfg = cc.write_config(os.path.join(work, "planes.yaml"), {
        "job": "convert", "input": inp,
        "normalize": {"mode": "percentile", "lo": PCT[0], "hi": PCT[1]},
        "output": {"path": out, "dtype": "uint16", "shard": NARROW, "fsync": False},
        "limits": {"memory_bytes": MEMORY, "memory_ceiling": False},
        "parallel": {"threads": 2}, "progress": False})
    env = plain_env()
    env["OMP_NUM_THREADS"] = "2"
    # LeakSanitizer cannot run under ptrace: a sanitizer build is traced without it
    env["ASAN_OPTIONS"] = ":".join(x for x in (env.get("ASAN_OPTIONS"), "detect_leaks=0") if x)
    r = subprocess.run(["strace", "-f", "-qq", "-e", "trace=pread64", "-e", "signal=none",
                        "-o", trace, args.shardmill, "run", cfg], env=env, cwd=work,
                       capture_output=True, text=True, timeout=300)
    if not c.check("planes: convert under strace exits 0", r.returncode == 0, r.stderr[-600:]):
        return
    sizes = []
    with open(trace) as f:
        for line in f:
            # a call another thread interrupted ends on its "<... pread64 resumed>" line
            if "pread64" in line and "unfinished" not in line and "= " in line:
                tail = line.rsplit("= ", 1)[1].split()[0]
                sizes.append(int(tail) if tail.lstrip("-").isdigit() else -1)
    whole = sum(1 for n in sizes if n >= plane)
    print(f"note: planes: {len(sizes)} pread64 calls, {whole} of a whole plane ({plane} B) or more")
    c.check(f"planes: the scan reads each of the {SHAPE[0]} slices whole ({whole} preads of >= "
            f"{plane} B)", whole >= SHAPE[0])
    shutil.rmtree(out, ignore_errors=True)


def traced_lines(trace):
    """The lines of `strace -ff -o trace`'s files, one per thread (so no call is split into an
    "unfinished" and a "resumed" line by another thread's)."""
    lines = []
    d, base = os.path.split(trace)
    for name in sorted(os.listdir(d)):
        if name.startswith(base + "."):
            with open(os.path.join(d, name)) as f:
                lines += f.read().splitlines()
    return lines


DIRECT_SHAPE = (8, 1024, 768)  # 1.5 MiB slices: each read past the page cache (input.direct_io)


def direct_io(c, args, work):
    """Reads and writes past the page cache (input.direct_io, output.direct_io: always; auto takes
    them for data of half the machine's memory, as W9's): under strace, a stack of 1.5 MiB
    one-strip slices is read through O_DIRECT descriptors of its files and its shards (codec none,
    3 MiB) are written with O_DIRECT set; the shards equal NumPy's SPEC §5 values and are
    byte-identical to a run with both keys never, which opens nothing O_DIRECT; the default (auto)
    on this small input does neither (checked in the OME run's trace)."""
    if shutil.which("strace") is None:
        c.check("strace (scripts/install-deps.sh installs it) is on PATH", False)
        return
    vol = volumes.phantom_slices(DIRECT_SHAPE)
    inp, files = stack(cc.fresh_dir(os.path.join(work, "dio")), vol, rowsperstrip=DIRECT_SHAPE[1])
    try:  # a file system without O_DIRECT (tmpfs before Linux 6.6): the fallback is all there is
        os.close(os.open(files[0], os.O_RDONLY | os.O_DIRECT))
    except OSError as e:
        print(f"note: direct_io: this file system refuses O_DIRECT ({e}): buffered fallback only")
        files = None
    env = plain_env()
    env["ASAN_OPTIONS"] = ":".join(x for x in (env.get("ASAN_OPTIONS"), "detect_leaks=0") if x)
    digests = {}
    for on in (True, False):
        tag = "direct" if on else "buffered"
        out, trace = os.path.join(work, tag + ".zarr"), os.path.join(work, tag + ".strace")
        cfg = cc.write_config(os.path.join(work, tag + ".yaml"), {
            "job": "convert", "input": dict(inp, direct_io="always" if on else "never"),
            "normalize": {"mode": "percentile", "lo": PCT[0], "hi": PCT[1]},
            "output": {"path": out, "dtype": "uint16", "shard": [8, 512, 384],
                       "codec": {"name": "none"}, "fsync": True,
                       "direct_io": "always" if on else "never"},
            "limits": {"memory_bytes": 64 << 20, "memory_ceiling": False},
            "parallel": {"threads": 2}, "progress": False})
        r = subprocess.run(["strace", "-ff", "-qq", "-e", "trace=openat,fcntl", "-e",
                            "signal=none", "-o", trace, args.shardmill, "run", cfg], env=env,
                           cwd=work, capture_output=True, text=True, timeout=300)
        if not c.check(f"direct_io {tag}: convert under strace exits 0", r.returncode == 0,
                       r.stderr[-600:]):
            return
        lines = traced_lines(trace)
        opens = sum(1 for ln in lines if "/proc/self/fd/" in ln and "O_DIRECT" in ln
                    and "= -1" not in ln)
        sets = sum(1 for ln in lines if "F_SETFL" in ln and "O_DIRECT" in ln and "= 0" in ln)
        print(f"note: direct_io {tag}: {opens} O_DIRECT opens, {sets} O_DIRECT fcntls")
        if on and files is not None:
            c.check(f"direct_io: every slice is read through an O_DIRECT descriptor ({opens} "
                    f">= {DIRECT_SHAPE[0]} opens)", opens >= DIRECT_SHAPE[0])
            c.check(f"direct_io: the 4 shards are written with O_DIRECT ({sets} >= 4)", sets >= 4)
        if on:
            got = zarr_decode.spec_decode(out)
            c.check("direct_io: the shards equal NumPy's SPEC §5 values",
                    got.shape == vol.shape and np.array_equal(got, oracle(vol)))
        else:
            c.check(f"direct_io false: nothing opened or set O_DIRECT ({opens}, {sets})",
                    opens == 0 and sets == 0)
        digests[tag] = tree_digest(out)
        shutil.rmtree(out, ignore_errors=True)
    c.check("direct_io: the shards are byte-identical with and without it",
            digests.get("direct") == digests.get("buffered"))
    # an OME pyramid of explicit shards (no level on level 0's grid): level 1 is made from level
    # 0's values in the write phase (the spill file), so level 0 is never read back and goes
    # past the page cache; level 1, read back for level 2, stays in it
    out, trace = os.path.join(work, "ome.zarr"), os.path.join(work, "ome.strace")
    cfg = cc.write_config(os.path.join(work, "ome.yaml"), {
        "job": "convert", "input": inp,
        "normalize": {"mode": "percentile", "lo": PCT[0], "hi": PCT[1]},
        "output": {"path": out, "dtype": "uint16", "shard": [8, 512, 384],
                   "codec": {"name": "none"}, "ome": {"levels": 3}, "direct_io": "always"},
        "limits": {"memory_bytes": 64 << 20, "memory_ceiling": False},
        "parallel": {"threads": 2}, "progress": False})
    r = subprocess.run(["strace", "-ff", "-qq", "-y", "-e", "trace=openat,fcntl", "-e", "signal=none",
                        "-o", trace, args.shardmill, "run", cfg], env=env, cwd=work,
                       capture_output=True, text=True, timeout=300)
    if not c.check("direct_io ome: convert under strace exits 0", r.returncode == 0,
                   r.stderr[-600:]):
        return
    lines = traced_lines(trace)
    sets = [ln for ln in lines if "F_SETFL" in ln and "|O_DIRECT" in ln and "= 0" in ln]
    opens = sum(1 for ln in lines if "/proc/self/fd/" in ln and "O_DIRECT" in ln)
    c.check(f"direct_io auto: a 12 MiB input, far below half the memory, is read buffered "
            f"({opens} O_DIRECT opens)", opens == 0)
    lv0 = sum(1 for ln in sets if "/ome.zarr/0/c/" in ln)
    lv1 = sum(1 for ln in sets if "/ome.zarr/1/c/" in ln)
    def shard_reads(k):  # shard files of level k opened for reading (the result's path)
        return [ln for ln in lines if ln.startswith("openat(") and "O_RDONLY" in ln and
                "O_DIRECTORY" not in ln and f"/ome.zarr/{k}/c/" in ln.rsplit("= ", 1)[-1]]
    reads0, reads1 = shard_reads(0), shard_reads(1)
    print(f"note: direct_io ome: O_DIRECT set on {lv0} level-0 and {lv1} level-1 shard files; "
          f"{len(reads0)} level-0 and {len(reads1)} level-1 shard files opened for reading")
    c.check(f"direct_io ome: level 0, spilled and not read back, is written past the page cache "
            f"({lv0} >= 4 O_DIRECT) and level 1, read back for level 2, through it ({lv1})",
            (lv0 >= 4 or files is None) and lv1 == 0)
    c.check(f"direct_io ome: the pyramid opens no level-0 shard for reading, and level 1's "
            f"to make level 2 ({len(reads1)} >= 1)", not reads0 and len(reads1) >= 1, reads0[:3])
    shutil.rmtree(out, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    ap.add_argument("--mpiexec", default="")
    args = ap.parse_args()
    args.shardmill = os.path.abspath(args.shardmill)
    if args.case in TIFFCP_CASES and shutil.which("tiffcp") is None:
        print("SKIP: tiffcp (libtiff-tools) not installed")
        return SKIP
    work = cc.fresh_dir(os.path.abspath(os.path.join(args.work, args.case)))
    c = Checks(f"read_once.{args.case}")
    run_case(c, args, args.case, work)
    if args.case == "tiff_strip_none":
        plane_reads(c, args, work, CASES[args.case](cc.fresh_dir(os.path.join(work, "pl")),
                                                     volume())[0])
        direct_io(c, args, work)
    status = c.done()
    if status == 0:
        shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
