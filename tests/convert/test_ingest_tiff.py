"""`shardmill run` (job: ingest) of TIFF stacks (SPEC §2) written by independent writers.

Usage: /usr/bin/python3 test_ingest_tiff.py --shardmill BIN --node NODE --work DIR --group GROUP
Groups (one ctest each, label `convert`):
  types    uint8, uint16, uint32, int8, int16, int32 and float32 (NaN, +-Inf, -0.0) volumes written
           by python3-tifffile as a directory of slices named s1.tif ... s12.tif (natural order:
           s10 after s9) in strips of 4 rows, and as a multi-page deflate file in 16x16 tiles
           (partial edge tiles); int16 also recompressed by libtiff-tools' tiffcp to LZW and
           PackBits (Debian's tifffile writes neither without imagecodecs) - every output vs the
           NumPy array, bit for bit (shardmill read, zarrita.js, the NumPy sharding decoder)
  ct       the real head CT (data/ct/matrix.dat) as one tifffile slice per file and as a
           multi-page LZW file: each ingest is bit-identical to the raw CT and its shards are
           byte-identical to the raw ingest's; exit 77 (skipped) when the CT is absent
  bad      a slice of another size, a slice of another type, an RGB slice, a file that is not a
           TIFF, an empty directory: exit 3, one error line naming the file, no output; a strip
           cut short (found when it is read): exit 3, no marker, no temporary object
"""

import os
import shutil
import subprocess

import numpy as np

from shardmill_test import ingest as ti
from shardmill_test import inputs
from shardmill_test import runner as cc
from shardmill_test.inputs import tifffile, write_multipage, write_stack

SKIP = 77
SHAPE = (12, 37, 45)
LAYOUT = ((4, 32, 32), (2, 16, 16))  # small shards: several per axis, partial edges


def tiffcp(src, dst, comp):
    r = subprocess.run(["tiffcp", "-c", comp, src, dst], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"tiffcp -c {comp}: {r.stderr}")


def volume(rng, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        v = (rng.standard_normal(SHAPE) * 1000).astype(dt)
        v.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
        return v
    info = np.iinfo(dt)
    v = rng.integers(info.min, info.max, SHAPE, endpoint=True, dtype=dt)
    v.flat[:2] = [info.min, info.max]
    return v


def group_types(c, args, work):
    rng = np.random.default_rng(91)
    reads = []
    for dtype in ("uint8", "uint16", "uint32", "int8", "int16", "int32", "float32"):
        vol = volume(rng, dtype)
        d = os.path.join(work, f"stack_{dtype}")
        write_stack(d, vol, rowsperstrip=4)
        res = ti.do_ingest(c, args, work, f"stack_{dtype}", d, vol, fmt="tiff", layout=LAYOUT)
        if res:
            reads.append(res)
        mp = os.path.join(work, f"multi_{dtype}.tif")
        write_multipage(mp, vol, tile=(16, 16), compression="zlib")
        # input.format inferred from the .tif suffix
        res = ti.do_ingest(c, args, work, f"multi_tiled_deflate_{dtype}", mp, vol,
                           expect_fmt="tiff", layout=LAYOUT)
        if res:
            reads.append(res)
        if dtype == "int16":
            for comp in ("lzw", "packbits"):
                dst = os.path.join(work, f"multi_{comp}_{dtype}.tif")
                tiffcp(mp, dst, comp)
                res = ti.do_ingest(c, args, work, f"multi_{comp}_{dtype}", dst, vol, fmt="tiff",
                                   layout=LAYOUT)
                if res:
                    reads.append(res)
    cc.zarrita_read_all(c, args.node, work, reads)


def group_ct(c, args, work):
    ct, want = inputs.real_ct()
    if ct is None:
        return SKIP
    raw = ti.ingest_raw_ct(c, args, work, ct, want)
    stack = os.path.join(work, "ct_slices")
    write_stack(stack, want)
    plain = os.path.join(work, "ct_plain.tif")
    write_multipage(plain, want)
    lzw = os.path.join(work, "ct_lzw.tif")
    tiffcp(plain, lzw, "lzw")
    os.unlink(plain)
    runs = [ti.do_ingest(c, args, work, "ct_stack", stack, want, fmt="tiff", decode=False,
                         layout=ti.CT_LAYOUT),
            ti.do_ingest(c, args, work, "ct_lzw", lzw, want, fmt="tiff", decode=False,
                         layout=ti.CT_LAYOUT)]
    ti.same_shards_as_raw(c, raw, runs)
    cc.zarrita_read_all(c, args.node, work, [(r[0], r[1], r[2], []) for r in runs if r])
    return None


def group_bad(c, args, work):
    rng = np.random.default_rng(93)
    vol = rng.integers(0, 4000, (4, 20, 30), dtype=np.uint16)
    tf = tifffile()

    d = os.path.join(work, "bad_size")
    write_stack(d, vol)
    tf.imwrite(os.path.join(d, "s3.tif"), vol[2, :, :29])
    ti.expect_bad(c, args, work, "bad_slice_size", d, fmt="tiff")
    check_names(c, args, work, "bad_slice_size", "s3.tif")

    d = os.path.join(work, "bad_type")
    write_stack(d, vol)
    tf.imwrite(os.path.join(d, "s4.tif"), vol[3].astype(np.int16))
    ti.expect_bad(c, args, work, "bad_slice_type", d, fmt="tiff")
    check_names(c, args, work, "bad_slice_type", "s4.tif")

    d = os.path.join(work, "bad_rgb")
    write_stack(d, vol)
    tf.imwrite(os.path.join(d, "s2.tif"), np.zeros((20, 30, 3), np.uint8), photometric="rgb")
    ti.expect_bad(c, args, work, "bad_rgb_slice", d, fmt="tiff")
    check_names(c, args, work, "bad_rgb_slice", "s2.tif")

    d = os.path.join(work, "bad_junk")
    write_stack(d, vol)
    open(os.path.join(d, "s1.tif"), "wb").write(rng.integers(0, 256, 4096, np.uint8).tobytes())
    ti.expect_bad(c, args, work, "bad_not_tiff", d, fmt="tiff")
    check_names(c, args, work, "bad_not_tiff", "s1.tif")

    # a multi-page file whose last strip is cut off
    mp = os.path.join(work, "bad_truncated.tif")
    write_multipage(mp, vol)
    data = open(mp, "rb").read()
    with tf.TiffFile(mp) as t:
        ifds = [p.offset for p in t.pages]
        last = max(p.dataoffsets[0] for p in t.pages)
    c.check("tifffile writes every page's IFD before the last strip", max(ifds) < last, ifds)
    open(mp, "wb").write(data[:last + 100])
    # found only when the last slice is read, after the output exists: the run fails like a
    # convert that meets a corrupt chunk - no marker, no temporary object left, verify refuses
    label = "bad_truncated_strip"
    out = os.path.join(work, label + ".zarr")
    cfg = ti.ingest_config(os.path.join(work, label + ".yaml"), mp, out,
                           extra={"output": {"shard": [1, 20, 30], "chunk": [1, 20, 30]}})
    r = cc.run([args.shardmill, "run", cfg], cwd=work)
    lines = cc.one_error_line(r.stderr)
    c.check(f"{label}: exit 3", r.returncode == 3, cc.describe(r))
    c.check(f"{label}: one error line naming the file and the strip",
            len(lines) == 1 and "bad_truncated.tif" in lines[0] and "strip" in lines[0], lines)
    files = cc.files_under(out) if os.path.isdir(out) else []
    c.check(f"{label}: no completion marker, no temporary object",
            "shardmill.complete.json" not in files and not any(".tmp" in f for f in files),
            files)
    r = cc.run([args.shardmill, "verify", out])
    c.check(f"{label}: verify refuses the incomplete output", r.returncode != 0, cc.describe(r))

    d = os.path.join(work, "bad_empty")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    open(os.path.join(d, "readme.txt"), "w").write("no slices here\n")
    ti.expect_bad(c, args, work, "bad_empty_dir", d, fmt="tiff")


def check_names(c, args, work, label, fname):
    """The error line of the last expect_bad run names the offending slice file."""
    out = os.path.join(work, label + ".zarr")
    cfg = os.path.join(work, label + ".yaml")
    r = cc.run([args.shardmill, "run", cfg], cwd=work)
    lines = cc.one_error_line(r.stderr)
    c.check(f"{label}: the error names {fname}", len(lines) == 1 and fname in lines[0], lines)
    shutil.rmtree(out, ignore_errors=True)


GROUPS = {"types": group_types, "ct": group_ct, "bad": group_bad}


def tiffcp_ok(c, args):
    """The types and ct groups need tiffcp (Debian libtiff-tools)."""
    if shutil.which("tiffcp") is None and args.group in ("types", "ct"):
        return c.check("tiffcp (Debian libtiff-tools) available", False, "install libtiff-tools")
    return True


def main():
    return cc.group_main("convert.ingest_tiff", GROUPS, SKIP, no_node=("bad",), precheck=tiffcp_ok)


if __name__ == "__main__":
    cc.main_guard(main)
