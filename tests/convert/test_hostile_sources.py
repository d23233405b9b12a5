"""Hostile and odd source files (issue 32 items 8, 9, 11, 12, 15; SPEC §2 "Sources", §4, §5.5).
Every input is written here at test time (NumPy, h5py, tifffile, os.mkfifo); the expectations
come from NumPy, the OME-XML schema's xsd:float syntax and the limits' documented meaning.

Usage: /usr/bin/python3 test_hostile_sources.py --shardmill BIN --work DIR --group GROUP
Groups (one ctest each, label `convert`):
  hdf5_chunk_limit  a 260 KB HDF5 file whose one gzip chunk [256, 1024, 1024] holds 256 MiB of
              zeros (h5py write_direct_chunk), read by 8 threads under limits.memory_bytes 64MiB:
              with limits.max_chunk_bytes 16MiB exit 5 naming that limit and the chunk; with the
              default max_chunk_bytes exit 5 naming limits.memory_bytes; each before any output
              exists and with a peak RSS (wait4) below 128 MiB (SM_HOSTILE_MAX_RSS_MIB). A
              control: 2 MiB chunks under the same limits and 8 threads (5 reads at once) convert,
              the output is h5py's values and the peak RSS stays below the same bound
  fifo        a FIFO as the raw input, as the .nii.gz input, among the slices of a TIFF stack
              and as a multi-page TIFF: exit 3 within seconds, naming the FIFO, nothing written
              (main hung in open(2), and SIGTERM could not stop it)
  fifo_hdf5   a FIFO as the HDF5 input: the same
  nonfinite   level scales and translations that are no finite number: input.spacing
              [1e308, 1, 1] halved twice is exit 2 naming input.spacing; OME-XML PhysicalSizeZ
              1.7e308 (µm) likewise from the file is exit 3 naming the file, and 1.7e308 m with X
              in µm (inf after the unit conversion) too, as 1e305 µm into input.unit picometer;
              input.spacing given replaces the file's sizes and converts; nothing is written on
              a refusal (main wrote a short scale list, or dropped the geometry)
  ome_xml     OME-XML read as XML: a commented-out <Pixels> (and one in a CDATA section or a
              processing instruction) is no element; PhysicalSize "0x10" is not xsd:float (no
              OME geometry: scale 1, no unit); the real element's sizes are the scale
  signed_zero a float32 input holding -0.0, +0.0, negatives that clamp and one that underflows,
              normalize window [0, 1] into float32 and uint8: the output equals NumPy's
              np.clip((x - lo) / (hi - lo), 0, 1) bit for bit (+0.0 where NumPy gives +0.0)
"""

import json
import os
import subprocess
import sys
import zlib

import numpy as np

from shardmill_test import runner as cc
from shardmill_test import spec_oracle
from shardmill_test import zarr_decode

MIB = 1 << 20
# The peak RSS allowed (ASan's shadow memory raises every process's: CMake passes more then).
MAX_RSS_MIB = int(os.environ.get("SM_HOSTILE_MAX_RSS_MIB", "128"))

# Linux carries a process's peak RSS across exec, so the command is started by a bare
# interpreter (-S -I, nothing imported) that reports its wait4 peak (as bad_input/rss_bounds.py).
LAUNCHER = """
import os, sys
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
_, status, ru = os.wait4(pid, 0)
os.write(int(sys.argv[1]), b"%d %d" % (os.waitstatus_to_exitcode(status), ru.ru_maxrss))
"""


def run_measured(cmd, cwd, timeout=120):
    """Runs cmd; (exit code, stderr text, peak RSS in KiB of that child)."""
    r, w = os.pipe()
    p = subprocess.Popen([sys.executable, "-S", "-I", "-c", LAUNCHER, str(w), *cmd], cwd=cwd,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(w,))
    os.close(w)
    try:
        err = p.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        os.close(r)
        return -1, "timed out", 0
    with os.fdopen(r, "rb") as f:
        res = f.read().split()
    if p.returncode != 0 or len(res) != 2:
        return -1, f"launcher failed ({p.returncode}): " + err.decode(errors="replace"), 0
    return int(res[0]), err.decode(errors="replace"), int(res[1])


def one_error_line(err):
    lines = err.split("\n")
    return len(lines) == 2 and lines[1] == "" and lines[0].startswith("shardmill: error: ")


def run_job(args, work, label, cfg, timeout=60):
    """Writes cfg as label.yaml and runs it; the CompletedProcess, or None when it timed out."""
    path = cc.write_config(os.path.join(work, label + ".yaml"), cfg)
    try:
        return cc.run([args.shardmill, "run", path], cwd=work, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def check_refused(c, label, r, code, must, out):
    """r exits `code` with one error line holding every string of `must`; out does not exist."""
    if not c.check(f"{label}: exits {code} (within the timeout)", r is not None and
                   r.returncode == code, "timed out" if r is None else cc.describe(r)):
        return
    c.check(f"{label}: one 'shardmill: error:' line", one_error_line(r.stderr), r.stderr)
    for s in must:
        c.check(f"{label}: the message names {s!r}", s in r.stderr, r.stderr.strip())
    c.check(f"{label}: nothing written", not os.path.exists(out), out)


# ---- item 8: HDF5 chunk buffers within the limits ----

def zeros_zlib(nbytes):
    """nbytes of zeros as one zlib stream (HDF5's gzip filter), deflated 1 MiB at a time."""
    co = zlib.compressobj(6)
    z = bytes(MIB)
    return b"".join(co.compress(z) for _ in range(nbytes // MIB)) + co.flush()


def group_hdf5_chunk_limit(c, args, work):
    import h5py
    big = os.path.join(work, "big_chunk.h5")
    with h5py.File(big, "w") as f:  # one chunk of 256 MiB; the dataset is 8 MiB of it
        d = f.create_dataset("data", shape=(8, 1024, 1024), maxshape=(None, 1024, 1024),
                             dtype="u1", chunks=(256, 1024, 1024), compression="gzip")
        d.id.write_direct_chunk((0, 0, 0), zeros_zlib(256 * MIB))
    c.check("the file is small (a 256 MiB chunk of zeros deflated)", os.path.getsize(big) < 2 * MIB,
            os.path.getsize(big))
    for label, limits, must in (
            ("max_chunk_bytes", {"memory_bytes": "64MiB", "max_chunk_bytes": "16MiB"},
             ["limits.max_chunk_bytes", "[256, 1024, 1024]", "268435456", "big_chunk.h5",
              "/data"]),
            ("memory_bytes", {"memory_bytes": "64MiB"},
             ["limits.memory_bytes", "[256, 1024, 1024]", "268435456", "big_chunk.h5"])):
        out = os.path.join(work, label + ".zarr")
        cfg = cc.write_config(os.path.join(work, label + ".yaml"), {
            "job": "ingest", "input": {"store": big, "format": "hdf5",
                                       "hdf5": {"dataset": "/data"}},
            "output": {"path": out, "shard": [1, 1024, 1024], "fsync": False},
            "limits": limits, "parallel": {"threads": 8}, "progress": False})
        rc, err, rss = run_measured([args.shardmill, "run", cfg], work)
        c.check(f"{label}: exit 5", rc == 5, (rc, err.strip()))
        c.check(f"{label}: one 'shardmill: error:' line", one_error_line(err), err)
        for s in must:
            c.check(f"{label}: the message names {s!r}", s in err, err.strip())
        c.check(f"{label}: peak RSS {rss // 1024} MiB < {MAX_RSS_MIB} MiB (main: 1.7 GB)",
                0 < rss < MAX_RSS_MIB * 1024, rss)
        c.check(f"{label}: nothing written", not os.path.exists(out), out)
    # control: 2 MiB chunks (6 MiB of buffers a read: 5 reads at once in half of 64 MiB, so the
    # 8 threads wait their turn), one shard per chunk
    vol = np.random.default_rng(32).integers(0, 60000, (32, 512, 512), dtype=np.uint16)
    small = os.path.join(work, "small_chunk.h5")
    with h5py.File(small, "w") as f:
        f.create_dataset("data", data=vol, chunks=(4, 512, 512), compression="gzip", shuffle=True)
    out = os.path.join(work, "control.zarr")
    cfg = cc.write_config(os.path.join(work, "control.yaml"), {
        "job": "ingest", "input": {"store": small, "format": "hdf5",
                                   "hdf5": {"dataset": "/data"}},
        "output": {"path": out, "shard": [4, 512, 512], "fsync": False},
        "limits": {"memory_bytes": "64MiB", "max_chunk_bytes": "16MiB"},
        "parallel": {"threads": 8}, "progress": False})
    rc, err, rss = run_measured([args.shardmill, "run", cfg], work)
    if c.check("control: 2 MiB chunks under the same limits convert (exit 0)", rc == 0,
               (rc, err.strip())):
        got = zarr_decode.spec_decode(out)
        c.check("control: the output is h5py's values", spec_oracle.same_bits(got, vol),
                spec_oracle.first_diff(got, vol))
        c.check(f"control: peak RSS {rss // 1024} MiB < {MAX_RSS_MIB} MiB",
                0 < rss < MAX_RSS_MIB * 1024, rss)


# ---- item 9: a FIFO is refused, never waited on ----

def check_fifo(c, args, work, label, inp, fifo):
    out = os.path.join(work, label + ".zarr")
    r = run_job(args, work, label, {"job": "ingest", "input": inp,
                                    "output": {"path": out, "fsync": False}, "progress": False},
                timeout=20)
    check_refused(c, label, r, 3, [fifo, "FIFO", "not a regular file"], out)


def group_fifo(c, args, work):
    import tifffile
    raw = os.path.join(work, "raw.fifo")
    os.mkfifo(raw)
    check_fifo(c, args, work, "raw", {"store": raw, "format": "raw",
                                      "raw": {"dtype": "uint8", "shape": [4, 4, 4]}}, raw)
    nii = os.path.join(work, "head.nii.gz")
    os.mkfifo(nii)
    check_fifo(c, args, work, "nifti_gz", {"store": nii, "format": "nifti"}, nii)
    stack = os.path.join(work, "stack")
    os.makedirs(stack)
    for i in range(3):
        tifffile.imwrite(os.path.join(stack, f"slice_{i}.tif"), np.full((4, 4), i, np.uint8))
    slice_fifo = os.path.join(stack, "slice_3.tif")
    os.mkfifo(slice_fifo)
    check_fifo(c, args, work, "tiff_slice", {"store": stack, "format": "tiff"}, slice_fifo)
    tif = os.path.join(work, "pages.tif")
    os.mkfifo(tif)
    check_fifo(c, args, work, "tiff_file", {"store": tif, "format": "tiff"}, tif)


def group_fifo_hdf5(c, args, work):
    h5 = os.path.join(work, "data.h5")
    os.mkfifo(h5)
    check_fifo(c, args, work, "hdf5", {"store": h5, "format": "hdf5",
                                       "hdf5": {"dataset": "/data"}}, h5)


# ---- item 11: every level's scale and translation finite ----

def ome_tiff(path, md):
    import tifffile
    vol = np.arange(8 * 16 * 16, dtype=np.uint16).reshape(8, 16, 16)
    tifffile.imwrite(path, vol, ome=True, metadata=dict(md, axes="ZYX"))
    return path


def convert_cfg(inp, out, extra_ome=None):
    return {"job": "convert", "input": inp, "normalize": {"mode": "scale"},
            "output": {"path": out, "fsync": False,
                       "ome": dict({"levels": 2, "downsample": "all"}, **(extra_ome or {}))},
            "progress": False}


def scales_of(out):
    ms = json.load(open(os.path.join(out, "zarr.json")))["attributes"]["ome"]["multiscales"][0]
    return [{t["type"]: t[t["type"]] for t in d["coordinateTransformations"]}
            for d in ms["datasets"]], ms["axes"]


def group_nonfinite(c, args, work):
    raw = os.path.join(work, "v.raw")
    np.arange(8 * 16 * 16, dtype="<u2").tofile(raw)
    inp = {"store": raw, "format": "raw", "raw": {"dtype": "uint16", "shape": [8, 16, 16]}}
    out = os.path.join(work, "config.zarr")
    r = run_job(args, work, "config", convert_cfg(dict(inp, spacing=[1e308, 1, 1]), out))
    check_refused(c, "input.spacing [1e308, 1, 1], z halved", r, 2,
                  ["input.spacing", "level 1", "inf"], out)
    b = ome_tiff(os.path.join(work, "z_huge.tif"), {
        "PhysicalSizeX": 1.0, "PhysicalSizeY": 1.0, "PhysicalSizeZ": 1.7e308})
    out = os.path.join(work, "ome_huge.zarr")
    r = run_job(args, work, "ome_huge", convert_cfg({"store": b, "format": "tiff"}, out))
    check_refused(c, "OME-XML PhysicalSizeZ 1.7e308 um, z halved", r, 3,
                  ["z_huge.tif", "ome-xml", "level 1", "inf"], out)
    a = ome_tiff(os.path.join(work, "z_meter.tif"), {
        "PhysicalSizeX": 1.0, "PhysicalSizeY": 1.0, "PhysicalSizeZ": 1.7e308,
        "PhysicalSizeZUnit": "m"})
    out = os.path.join(work, "ome_meter.zarr")
    r = run_job(args, work, "ome_meter", convert_cfg({"store": a, "format": "tiff"}, out))
    check_refused(c, "OME-XML PhysicalSizeZ 1.7e308 m with X in um (inf in um)", r, 3,
                  ["z_meter.tif", "PhysicalSizeZ", "meter", "micrometer"], out)
    big = ome_tiff(os.path.join(work, "z_1e305.tif"), {
        "PhysicalSizeX": 1.0, "PhysicalSizeY": 1.0, "PhysicalSizeZ": 1e305})
    out = os.path.join(work, "unit_over.zarr")
    r = run_job(args, work, "unit_over", convert_cfg(
        {"store": big, "format": "tiff", "unit": "picometer"}, out, {"downsample": "auto"}))
    check_refused(c, "OME-XML 1e305 um into input.unit picometer (x 1e6: inf)", r, 3,
                  ["z_1e305.tif", "level 0", "inf"], out)
    # input.spacing replaces what the file states: converted, finite
    out = os.path.join(work, "given.zarr")
    r = run_job(args, work, "given", convert_cfg(
        {"store": a, "format": "tiff", "spacing": [2.0, 0.5, 0.5], "unit": "micrometer"}, out))
    if c.check("input.spacing given: the file's unusable sizes are not read (exit 0)",
               r is not None and r.returncode == 0, r and cc.describe(r)):
        ts, _ = scales_of(out)
        c.check("input.spacing given: level scales [2, .5, .5] and [4, 1, 1]",
                [t["scale"] for t in ts] == [[2.0, 0.5, 0.5], [4.0, 1.0, 1.0]], ts)


# ---- item 12: OME-XML as XML ----

def slice_stack(work, name, description):
    """A directory of 4 uint16 slices whose first carries `description`."""
    import tifffile
    d = os.path.join(work, name)
    os.makedirs(d)
    for i in range(4):
        kw = {"description": description, "metadata": None} if i == 0 else {}
        tifffile.imwrite(os.path.join(d, f"s{i}.tif"), np.full((6, 5), i, np.uint16), **kw)
    return d


def pixels(attrs):
    return (f'<?xml version="1.0" encoding="UTF-8"?><OME xmlns="http://www.openmicroscopy.org/'
            f'Schemas/OME/2016-06"><Image ID="Image:0">{attrs}</Image></OME>')


def group_ome_xml(c, args, work):
    real = ('<Pixels ID="Pixels:0" DimensionOrder="XYZCT" Type="uint16" SizeX="5" SizeY="6" '
            'SizeZ="4" SizeC="1" SizeT="1" PhysicalSizeX="0.5" PhysicalSizeY="0.25" '
            'PhysicalSizeZ="2"><Channel ID="Channel:0:0"/></Pixels>')
    fake = '<Pixels PhysicalSizeX="9" PhysicalSizeY="9" PhysicalSizeZ="9">'
    cases = [
        ("comment", pixels(f"<!-- {fake} -->{real}"), [2.0, 0.25, 0.5], "micrometer"),
        ("cdata", pixels(f"<Description><![CDATA[{fake}]]></Description>{real}"),
         [2.0, 0.25, 0.5], "micrometer"),
        ("pi", pixels(f"<?note {fake} ?>{real}"), [2.0, 0.25, 0.5], "micrometer"),
        ("hex", pixels('<Pixels PhysicalSizeX="0x10" PhysicalSizeY="0x10" PhysicalSizeZ="0x10">'
                       '</Pixels>'), [1.0, 1.0, 1.0], None),
        ("only_commented", pixels(f"<!-- {fake} -->"), [1.0, 1.0, 1.0], None),
    ]
    for label, desc, want, unit in cases:
        stack = slice_stack(work, label, desc)
        out = os.path.join(work, label + ".zarr")
        r = run_job(args, work, label, convert_cfg({"store": stack, "format": "tiff"}, out,
                                                   {"levels": 1}))
        if not c.check(f"{label}: exit 0", r is not None and r.returncode == 0,
                       r and cc.describe(r)):
            continue
        ts, axes = scales_of(out)
        c.check(f"{label}: level 0 scale {want}", ts[0]["scale"] == want, ts)
        c.check(f"{label}: axes unit {unit}", [a.get("unit") for a in axes] == [unit] * 3, axes)


# ---- item 15: the sign of zero is NumPy's ----

def group_signed_zero(c, args, work):
    vals = np.array([-0.0, 0.0, -1e-45, -1.0, -np.inf, 0.25, 1.0, 2.0, np.nan, -1e-30, 1e-30],
                    np.float32)
    vol = np.resize(vals, (4, 8, 16)).astype(np.float32)
    raw = os.path.join(work, "z.raw")
    vol.astype("<f4").tofile(raw)
    inp = {"store": raw, "format": "raw", "raw": {"dtype": "float32", "shape": list(vol.shape)}}
    for lo, hi in ((0, 1), (0, 1e30), (-0.0, 1)):
        want = spec_oracle.normalize(vol, "window", lo=lo, hi=hi)
        for dt in ("float32", "uint8"):
            label = f"window [{lo}, {hi}] {dt}"
            out = os.path.join(work, f"w_{lo}_{hi}_{dt}.zarr")
            r = run_job(args, work, f"w_{lo}_{hi}_{dt}", {
                "job": "convert", "input": inp,
                "normalize": {"mode": "window", "lo": lo, "hi": hi},
                "output": {"path": out, "fsync": False, "dtype": dt}, "progress": False})
            if not c.check(f"{label}: exit 0", r is not None and r.returncode == 0,
                           r and cc.describe(r)):
                continue
            got = zarr_decode.spec_decode(out)
            w = want
            if dt == "uint8":  # SPEC §5.6 by NumPy
                with np.errstate(invalid="ignore"):
                    y = np.rint(want.astype(np.float32) * np.float32(255)).clip(0, 255)
                w = np.where(np.isnan(y), 0, y).astype(np.uint8)
            c.check(f"{label}: NumPy's np.clip bit for bit", spec_oracle.same_bits(got, w),
                    spec_oracle.first_diff(got, w))
    c.check("the oracle itself gives +0.0 for -0.0 (np.clip's lower bound)",
            not np.signbit(spec_oracle.normalize(np.float32([-0.0]), "window", lo=0, hi=1))[0])


GROUPS = {"hdf5_chunk_limit": group_hdf5_chunk_limit, "fifo": group_fifo,
          "fifo_hdf5": group_fifo_hdf5, "nonfinite": group_nonfinite, "ome_xml": group_ome_xml,
          "signed_zero": group_signed_zero}

if __name__ == "__main__":
    cc.main_guard(lambda: cc.group_main("convert.hostile_sources", GROUPS, no_node=set(GROUPS)))
