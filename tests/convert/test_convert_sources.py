"""`convert` reads every source (issue 20, SPEC §2 "Sources"): one job from a TIFF stack, an HDF5
dataset or a NIfTI-1 file to a windowed OME-Zarr pyramid, checked against independent oracles
(NumPy, tifffile, h5py, a NIfTI header parsed here with gzip + struct).

Usage: /usr/bin/python3 test_convert_sources.py --shardmill BIN --work DIR --group GROUP
Groups (one ctest each, label `convert`):
  tiff        the head CT (data/ct) written by tifffile as 108 deflate slices, ONE convert with
              input.format tiff, input.spacing (main.plist, z y x), percentile [1, 99] and
              output.ome.levels 2: level 0 (the NumPy sharding decoder) equals NumPy's float32
              window at the SPEC §5 percentiles of the histogram NumPy counts, bit for bit; level
              1 is SPEC §2's mean of level 0 over the blocks output.ome.downsample auto picks
              (test_convert_ome's statement of the rule); the report's histogram and window are
              NumPy's; scale = spacing x the level's factors, the translations line voxel centres
              up; the OME-NGFF 0.5 checker passes; input described as the source
  hdf5        the same CT as an h5py dataset (chunked (8, 64, 64), gzip + shuffle), input.format
              hdf5 + input.hdf5.dataset: the same checks
  nifti       data/mri/ch2better.nii.gz: its header parsed here (gzip + struct, no nibabel),
              percentile [1, 99], levels 2, no input.spacing: the same checks, scale = pixdim
              (z y x), the translations from the sform offsets, the axes' unit from xyzt_units
  bytes       a uint16 TIFF stack (tifffile, deflate tag 32946, 3 strips per slice) under one
              process, normalize window (one pass), shards of whole slices: io.source.bytes_read
              is the stored bytes of the volume's strips exactly (tifffile's byte counts: each
              strip fetched once, encoded bytes, not decoded ones), slab_bytes one strip,
              beyond_share_max_rank <= slab_bytes; a z ROI reads only its slices
  alias       job: ingest + normalize.mode window is exit 2 naming normalize.mode, nothing
              written; job: ingest + roi crops raw, TIFF, HDF5 and .nii.gz sources (output = the
              NumPy crop, report roi and checksums of SPEC §5 over the crop)
  alias_keys  job: ingest with other normalize keys (normalize.lo/hi, normalize.divisor without a
              mode; mode none + divisor) is exit 2 naming the key (docs/CONFIG.md: "any other
              normalize key or mode is refused")
  summary     the run's summary on stdout names the source it read ("  input: PATH [shape]
              dtype"), never "(null)"
  none_histogram  a float32 source, normalize none, no histogram keys (ingest of raw, convert of
              TIFF): report result.histogram null, and the provenance's histogram summary claims
              no bins or range either (the engine's placeholder of 1 bin over [0, 1) is "never
              shown"); its sums are NumPy's
tiff, hdf5 and nifti exit 77 (skipped) when data/ (scripts/fetch-data.sh) is absent.
"""

import gzip
import json
import os
import struct

import numpy as np

# SPEC §2's downsampling rule and mean, stated in the OME tests

from shardmill_test import report_json
from shardmill_test import ingest as ti
from shardmill_test import inputs
from shardmill_test import ome_ngff_check as ngff
from shardmill_test import spec_oracle
from shardmill_test import runner as cc
from shardmill_test import zarr_decode
from shardmill_test.inputs import (CT_H5_DATASET, PCT, ct_input, ct_or_skip, pyramid_job,
                                   write_ct_hdf5, write_ct_tiff)

from test_convert_ome import ome_levels, pyramid, want_transforms  # noqa: E402


SKIP = 77
MRI = os.path.join(cc.REPO, "data", "mri", "ch2better.nii.gz")
# Shards of whole slices ([12, 256, 256]: 9 along z): a TIFF slice (the source's slab) is never
# cut by a shard, so no rank decodes a slice another rank's shard holds (tests/mpi too).

# ---- the CT as sources (also used by tests/mpi/test_mpi_sources.py) ----


def oracle(vol, spacing):
    """SPEC §5 by NumPy: the default histogram of vol's type, the percentiles PCT, level 0 as the
    float32 window, level 1 as SPEC §2's mean of level 0. Returns (hist, (lo, hi), [l0, l1])."""
    bins, hlo, hhi = spec_oracle.default_hist(vol.dtype)
    counts, under, over, _ = spec_oracle.histogram(vol, bins, hlo, hhi)
    lo = spec_oracle.percentile(counts, under, over, hlo, hhi, PCT[0])
    hi = spec_oracle.percentile(counts, under, over, hlo, hhi, PCT[1])
    l0 = spec_oracle.normalize(vol, "window", lo=lo, hi=hi)
    return (counts, under, over, bins, hlo, hhi), (lo, hi), pyramid(
        l0, ome_levels(vol.shape, spacing, 2))


def check_pyramid(c, args, work, label, cfg, out, vol, spacing, unit, fmt, store, origin=None):
    """Runs cfg (the pyramid job over vol, writing out) in work and checks the image against the
    NumPy oracle. Returns the report, or None when the run failed."""
    rep_path = os.path.join(work, label + ".report.json")
    r = cc.run([args.shardmill, "run", cfg, "--report", rep_path], cwd=work, timeout=300)
    if not c.check(f"{label}: convert from {fmt} exits 0", r.returncode == 0, cc.describe(r)):
        return None
    rep = report_json.load(rep_path)
    (counts, under, over, bins, hlo, hhi), (lo, hi), want = oracle(vol, spacing)
    print(f"note: {label}: NumPy percentiles p{PCT[0]} = {float(lo)}, p{PCT[1]} = {float(hi)}")
    res = rep.get("result", {})
    h = res.get("histogram", {})
    c.check(f"{label}: report histogram = NumPy's ({bins} bins over [{hlo}, {hhi}))",
            h.get("bins") == bins and h.get("range") == [float(hlo), float(hhi)] and
            h.get("counts") == counts.tolist() and h.get("underflow") == under and
            h.get("overflow") == over and h.get("nan") == 0,
            {k: h.get(k) for k in ("bins", "range", "underflow", "overflow", "nan")})
    nm = res.get("normalization", {})
    c.check(f"{label}: report window = NumPy's SPEC §5 percentiles [{float(lo)}, {float(hi)}]",
            nm.get("mode") == "percentile" and nm.get("lo") == float(lo) and
            nm.get("hi") == float(hi) and nm.get("percentiles") == [float(p) for p in PCT], nm)
    s, w = spec_oracle.checksums(vol, vol.shape, [0] * vol.ndim)
    c.check(f"{label}: report voxels and checksums = NumPy's (SPEC §5)",
            res.get("voxels") == vol.size and res.get("checksum") == s and
            res.get("weighted_checksum") == w, {k: res.get(k) for k in
                                               ("voxels", "checksum", "weighted_checksum")})
    inp = rep.get("input", {})
    # the path resolved (issue 32: the input's identity keys on it, not on its spelling)
    c.check(f"{label}: report input describes the {fmt} source (format, path, shape, dtype)",
            inp.get("format") == fmt and inp.get("path") == os.path.realpath(store) and
            inp.get("shape") == list(vol.shape) and inp.get("dtype") == vol.dtype.name, inp)
    c.check(f"{label}: report output levels 2, complete",
            rep.get("output", {}).get("levels") == 2 and
            rep.get("output", {}).get("complete") is True, rep.get("output"))
    g = json.load(open(os.path.join(out, "zarr.json")))
    attrs = g.get("attributes", {})
    prov = attrs.get("shardmill", {})
    c.check(f"{label}: provenance input = the report's input",
            prov.get("input") == {k: v for k, v in inp.items()
                                  if k not in cc.REPORT_ONLY_INPUT} and
            os.path.realpath(inp.get("store")) == prov.get("input", {}).get("path"),
            (prov.get("input"), inp))
    c.check(f"{label}: provenance normalization = the report's",
            prov.get("normalization") == nm, prov.get("normalization"))
    ms = attrs.get("ome", {}).get("multiscales", [{}])[0]
    ds = ms.get("datasets", [])
    c.check(f"{label}: datasets 0 and 1", [d.get("path") for d in ds] == ["0", "1"], ds)
    plan = ome_levels(vol.shape, spacing, 2)
    for k, d in enumerate(ds):
        ct = d.get("coordinateTransformations", [])
        want_ct = want_transforms(spacing, plan[k][1], origin, k)
        c.check(f"{label}: level {k} scale = spacing x {plan[k][1]}, translation = origin + "
                f"spacing x (factor - 1) / 2: {want_ct}", ct == want_ct, ct)
    ngff.check(c, out, label)
    c.check(f"{label}: axes z, y, x with unit {unit}",
            [(a.get("name"), a.get("unit")) for a in ms.get("axes", [])] ==
            [(n, unit) for n in "zyx"], ms.get("axes"))
    got = []
    for k in range(2):
        try:
            a = zarr_decode.spec_decode(os.path.join(out, str(k)))
        except Exception as e:  # noqa: BLE001 - a decoding problem is a failure to report
            c.check(f"{label}: level {k} decodes", False, repr(e))
            return rep
        got.append(a)
        c.check(f"{label}: level {k} {list(want[k].shape)} float32 = NumPy's, bit for bit",
                a.dtype == np.float32 and spec_oracle.same_bits(a, want[k]), spec_oracle.first_diff(a, want[k]))
    mean = pyramid(got[0], plan)[1]
    c.check(f"{label}: level 1 = SPEC §2's mean of the level 0 read back, bit for bit",
            spec_oracle.same_bits(got[1], mean), spec_oracle.first_diff(got[1], mean))
    r = cc.run([args.shardmill, "verify", out])
    c.check(f"{label}: verify passes", r.returncode == 0, cc.describe(r) + r.stdout)
    return rep


def group_tiff(c, args, work):
    vol, spacing = ct_or_skip()
    if vol is None:
        return SKIP
    stack = write_ct_tiff(os.path.join(work, "ct_slices"), vol)
    import tifffile
    with tifffile.TiffFile(os.path.join(stack, "s1.tif")) as t:
        comp = t.pages[0].compression
    c.check(f"fixture: 108 slices, deflate ({comp!r})",
            len([n for n in os.listdir(stack) if n.endswith(".tif")]) == 108 and
            int(comp) == 8, comp)
    back = np.stack([tifffile.imread(os.path.join(stack, f"s{z + 1}.tif")) for z in range(108)])
    c.check("fixture: tifffile reads the stack back as the CT", np.array_equal(back, vol))
    out = os.path.join(work, "tiff.zarr")
    cfg = pyramid_job(os.path.join(work, "tiff.yaml"), ct_input("tiff", stack, spacing), out,
                      inputs.CT_SOURCE_LAYOUT)
    check_pyramid(c, args, work, "ct_tiff", cfg, out, vol, spacing, "millimeter", "tiff", stack)
    return None


def group_hdf5(c, args, work):
    vol, spacing = ct_or_skip()
    if vol is None:
        return SKIP
    h5 = write_ct_hdf5(os.path.join(work, "ct.h5"), vol)
    import h5py
    with h5py.File(h5, "r") as f:
        d = f[CT_H5_DATASET]
        c.check("fixture: h5py dataset chunked (8, 64, 64), gzip, equal to the CT",
                d.chunks == (8, 64, 64) and d.compression == "gzip" and
                np.array_equal(d[...], vol), (d.chunks, d.compression))
    out = os.path.join(work, "hdf5.zarr")
    cfg = pyramid_job(os.path.join(work, "hdf5.yaml"), ct_input("hdf5", h5, spacing), out,
                      inputs.CT_SOURCE_LAYOUT)
    rep = check_pyramid(c, args, work, "ct_hdf5", cfg, out, vol, spacing, "millimeter", "hdf5",
                        h5)
    if rep is not None:
        inp = rep.get("input", {})
        c.check(f"ct_hdf5: report input.dataset = {CT_H5_DATASET}",
                inp.get("dataset") == CT_H5_DATASET, inp)
    return None


# ---- NIfTI-1, read here (https://nifti.nimh.nih.gov/pub/dist/src/niftilib/nifti1.h) ----

NII_TYPES = {2: "u1", 4: "i2", 8: "i4", 16: "f4", 64: "f8", 256: "i1", 512: "u2", 768: "u4"}
NII_UNITS = {1: "meter", 2: "millimeter", 3: "micrometer"}


def read_nifti(path):
    """(header fields, [z, y, x] volume) of a single-file NIfTI-1 (.nii or .nii.gz)."""
    data = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    e = "<" if struct.unpack("<i", data[:4])[0] == 348 else ">"
    assert struct.unpack(e + "i", data[:4])[0] == 348 and data[344:348] == b"n+1\0", path
    dim = struct.unpack(e + "8h", data[40:56])
    datatype, _bitpix = struct.unpack(e + "2h", data[70:74])
    pixdim = struct.unpack(e + "8f", data[76:108])
    vox_offset, slope, inter = struct.unpack(e + "3f", data[108:120])
    units = data[123] & 0x07
    qform_code, sform_code = struct.unpack(e + "2h", data[252:256])
    qoffset = struct.unpack(e + "3f", data[268:280])
    srow = [struct.unpack(e + "4f", data[280 + 16 * i:296 + 16 * i]) for i in range(3)]
    nx, ny, nz = dim[1:4]
    assert dim[0] == 3 or all(n == 1 for n in dim[4:dim[0] + 1]), dim
    dt = np.dtype(e + NII_TYPES[datatype])
    # x runs fastest in the file: C order [z, y, x]
    vol = np.frombuffer(data, dtype=dt, count=nx * ny * nz, offset=int(vox_offset))
    vol = vol.reshape(nz, ny, nx).astype(dt.newbyteorder("="))
    if sform_code > 0:
        origin_xyz = [float(srow[i][3]) for i in range(3)]
    elif qform_code > 0:
        origin_xyz = [float(x) for x in qoffset]
    else:
        origin_xyz = None
    hdr = {"pixdim_zyx": [float(pixdim[3]), float(pixdim[2]), float(pixdim[1])],
           "unit": NII_UNITS.get(units), "slope": float(slope), "inter": float(inter),
           "origin_zyx": origin_xyz[::-1] if origin_xyz else None}
    return hdr, vol


def write_nifti_gz(path, vol_zyx, pixdim_xyz=(1.0, 1.0, 1.0)):
    """A minimal NIfTI-1 .nii.gz (no qform/sform, no scaling) of a [z, y, x] integer volume."""
    code = {v: k for k, v in NII_TYPES.items()}[vol_zyx.dtype.newbyteorder("=").str[1:]]
    hdr = bytearray(352)
    struct.pack_into("<i", hdr, 0, 348)
    nz, ny, nx = vol_zyx.shape
    struct.pack_into("<8h", hdr, 40, 3, nx, ny, nz, 1, 1, 1, 1)
    struct.pack_into("<2h", hdr, 70, code, vol_zyx.dtype.itemsize * 8)
    struct.pack_into("<8f", hdr, 76, 1.0, *pixdim_xyz, 0, 0, 0, 0)
    struct.pack_into("<3f", hdr, 108, 352.0, 1.0, 0.0)
    hdr[123] = 2  # millimetres
    hdr[344:348] = b"n+1\0"
    body = np.ascontiguousarray(vol_zyx).astype(vol_zyx.dtype.newbyteorder("<")).tobytes()
    with gzip.open(path, "wb") as f:
        f.write(bytes(hdr) + body)
    return path


def group_nifti(c, args, work):
    if not os.path.isfile(MRI):
        print(f"SKIP nifti: {MRI} absent (scripts/fetch-data.sh)")
        return SKIP
    hdr, vol = read_nifti(MRI)
    c.check(f"fixture: the MRI is uint8 [316, 370, 301], unscaled (slope {hdr['slope']}, inter "
            f"{hdr['inter']})", vol.dtype == np.uint8 and vol.shape == (316, 370, 301) and
            hdr["slope"] in (0.0, 1.0) and hdr["inter"] == 0.0, (vol.dtype, vol.shape, hdr))
    if vol.dtype != np.uint8 or hdr["slope"] not in (0.0, 1.0) or hdr["inter"] != 0.0:
        return None
    layout = {"shard": [64, 128, 128], "chunk": [32, 64, 64]}
    out = os.path.join(work, "nifti.zarr")
    cfg = pyramid_job(os.path.join(work, "nifti.yaml"), {"store": MRI, "format": "nifti"}, out,
                      layout)
    check_pyramid(c, args, work, "mri_nifti", cfg, out, vol, hdr["pixdim_zyx"], hdr["unit"],
                  "nifti", MRI, origin=hdr["origin_zyx"])
    return None


# ---- bytes read ----

BYTES_SHAPE = (40, 96, 80)


def group_bytes(c, args, work):
    """io.source of a TIFF stack under one process, one pass (window), shards of whole slices."""
    import tifffile
    rng = np.random.default_rng(2020)
    vol = rng.integers(0, 65536, BYTES_SHAPE, dtype=np.uint16)
    stack = os.path.join(work, "stack")
    inputs.write_stack(stack, vol, compression="deflate", rowsperstrip=32)  # tag 32946, 3 strips
    with tifffile.TiffFile(os.path.join(stack, "s1.tif")) as t:
        pg = t.pages[0]
        strips, comp = len(pg.dataoffsets), int(pg.compression)
    stored = []  # the stored bytes of every slice's strips (tifffile's byte counts)
    for z in range(BYTES_SHAPE[0]):
        with tifffile.TiffFile(os.path.join(stack, f"s{z + 1}.tif")) as t:
            stored.append(sum(t.pages[0].databytecounts))
    c.check(f"fixture: slices of 3 strips, deflate tag 32946 ({strips} strips, tag {comp})",
            strips == 3 and comp == 32946, (strips, comp))
    slab = 32 * BYTES_SHAPE[2] * vol.dtype.itemsize  # one strip, decoded
    lo, hi = 1000, 60000
    for label, roi in (("whole", None), ("roi_z", ([5, 0, 0], [30, 96, 80]))):
        out = os.path.join(work, label + ".zarr")
        cfg = {"job": "convert", "input": {"store": stack, "format": "tiff"},
               "normalize": {"mode": "window", "lo": lo, "hi": hi},
               "output": {"path": out, "fsync": False, "shard": [4, 96, 80],
                          "chunk": [2, 48, 40]},
               "parallel": {"threads": 2}, "progress": False}
        if roi is not None:
            cfg["roi"] = {"offset": roi[0], "shape": roi[1]}
        cfg = cc.write_config(os.path.join(work, label + ".yaml"), cfg)
        rep_path = os.path.join(work, label + ".report.json")
        r = cc.run([args.shardmill, "run", cfg, "--report", rep_path], cwd=work)
        if not c.check(f"{label}: convert (window) exits 0", r.returncode == 0, cc.describe(r)):
            continue
        rep = report_json.load(rep_path)
        sub = vol if roi is None else vol[tuple(slice(o, o + n) for o, n in zip(*roi))]
        z0, nz = (0, BYTES_SHAPE[0]) if roi is None else (roi[0][0], roi[1][0])
        want_read = sum(stored[z0:z0 + nz])
        src = rep.get("io", {}).get("source", {})
        c.check(f"{label}: io.source.bytes_read = the stored bytes of the "
                f"{'ROI' if roi else 'volume'}'s strips, each read once ({want_read})",
                src.get("bytes_read") == want_read, src)
        c.check(f"{label}: one process: bytes_read_max_rank = bytes_read",
                src.get("bytes_read_max_rank") == src.get("bytes_read"), src)
        c.check(f"{label}: io.source.slab_bytes = one decoded strip ({slab})",
                src.get("slab_bytes") == slab, src)
        c.check(f"{label}: beyond_share_max_rank <= slab_bytes",
                isinstance(src.get("beyond_share_max_rank"), int) and
                src["beyond_share_max_rank"] <= slab, src)
        got = zarr_decode.spec_decode(out)
        want = spec_oracle.normalize(sub, "window", lo=lo, hi=hi)
        c.check(f"{label}: output = NumPy's float32 window, bit for bit",
                spec_oracle.same_bits(got, want), spec_oracle.first_diff(got, want))


# ---- ingest, the alias ----

def group_alias(c, args, work):
    rng = np.random.default_rng(2021)
    vol = rng.integers(-3000, 3000, (9, 21, 26), dtype=np.int16)
    raw = os.path.join(work, "v.raw")
    vol.astype(">i2").tofile(raw)
    raw_keys = {"dtype": "int16", "shape": list(vol.shape), "byte_order": "big"}
    # normalize.mode other than none: refused before anything is written
    out = os.path.join(work, "window.zarr")
    cfg = ti.ingest_config(os.path.join(work, "window.yaml"), raw, out, raw_keys, "raw",
                           {"normalize": {"mode": "window", "lo": 0, "hi": 1}})
    r = cc.run([args.shardmill, "run", cfg], cwd=work)
    lines = cc.one_error_line(r.stderr)
    c.check("ingest + normalize.mode window: exit 2, one error line naming normalize.mode",
            r.returncode == 2 and len(lines) == 1 and "normalize.mode" in lines[0],
            cc.describe(r))
    c.check("ingest + normalize.mode window: no output", not os.path.exists(out))
    # roi crops every source
    stack = os.path.join(work, "multi.tif")
    inputs.write_multipage(stack, vol, compression="zlib")
    import h5py
    h5 = os.path.join(work, "v.h5")
    with h5py.File(h5, "w") as f:
        f.create_dataset("/v", data=vol, chunks=(4, 8, 8), compression="gzip")
    nii = write_nifti_gz(os.path.join(work, "v.nii.gz"), vol)
    _, back = read_nifti(nii)
    c.check("fixture: the .nii.gz written here reads back as the volume",
            np.array_equal(back, vol))
    off, shp = [2, 5, 3], [5, 11, 19]
    crop = vol[tuple(slice(o, o + n) for o, n in zip(off, shp))]
    s, w = spec_oracle.checksums(crop, vol.shape, off)
    os_, ow = spec_oracle.checksums(crop, crop.shape, [0, 0, 0])
    for fmt, store, extra in (("raw", raw, {"raw": raw_keys}), ("tiff", stack, {}),
                              ("hdf5", h5, {"hdf5": {"dataset": "/v"}}), ("nifti", nii, {})):
        label = f"ingest_roi_{fmt}"
        out = os.path.join(work, label + ".zarr")
        cfg = ti.ingest_config(os.path.join(work, label + ".yaml"), store, out, fmt=fmt,
                               extra={"input": extra, "roi": {"offset": off, "shape": shp},
                                      "output": {"shard": [4, 8, 8], "chunk": [2, 4, 4]}})
        rep_path = os.path.join(work, label + ".report.json")
        r = cc.run([args.shardmill, "run", cfg, "--report", rep_path], cwd=work)
        if not c.check(f"{label}: ingest with roi exits 0", r.returncode == 0, cc.describe(r)):
            continue
        rep = report_json.load(rep_path)
        meta = json.load(open(os.path.join(out, "zarr.json")))
        c.check(f"{label}: zarr.json shape = roi.shape {shp}, int16",
                meta.get("shape") == shp and meta.get("data_type") == "int16",
                (meta.get("shape"), meta.get("data_type")))
        got = zarr_decode.spec_decode(out)
        c.check(f"{label}: output = NumPy's crop, bit for bit", spec_oracle.same_bits(got, crop),
                spec_oracle.first_diff(got, crop))
        c.check(f"{label}: report job ingest, roi = the ROI given",
                rep.get("job") == "ingest" and rep.get("roi") == {"offset": off, "shape": shp},
                (rep.get("job"), rep.get("roi")))
        res = rep.get("result", {})
        c.check(f"{label}: report checksums = NumPy's over the crop (SPEC §5: indices in the "
                "source; output indices in the output)",
                res.get("voxels") == crop.size and res.get("checksum") == s and
                res.get("weighted_checksum") == w and res.get("output_checksum") == os_ and
                res.get("output_weighted_checksum") == ow,
                {k: res.get(k) for k in ("voxels", "checksum", "weighted_checksum",
                                         "output_checksum", "output_weighted_checksum")})
        c.check(f"{label}: report normalization mode none",
                res.get("normalization", {}).get("mode") == "none", res.get("normalization"))


def group_alias_keys(c, args, work):
    vol = np.arange(4 * 5 * 6, dtype=np.int16).reshape(4, 5, 6)
    raw = os.path.join(work, "v.raw")
    vol.tofile(raw)
    raw_keys = {"dtype": "int16", "shape": [4, 5, 6]}
    for label, norm, key in (("lo_hi", {"lo": 0, "hi": 1}, "normalize.lo"),
                             ("divisor", {"divisor": 3}, "normalize.divisor"),
                             ("none_divisor", {"mode": "none", "divisor": 3},
                              "normalize.divisor")):
        out = os.path.join(work, label + ".zarr")
        cfg = ti.ingest_config(os.path.join(work, label + ".yaml"), raw, out, raw_keys, "raw",
                               {"normalize": norm})
        r = cc.run([args.shardmill, "run", cfg], cwd=work)
        lines = cc.one_error_line(r.stderr)
        c.check(f"ingest + normalize {norm}: exit 2, one error line naming {key}",
                r.returncode == 2 and len(lines) == 1 and key in lines[0],
                cc.describe(r) + f"; stdout: {r.stdout.strip()[:200]}")
        c.check(f"ingest + normalize {norm}: no output", not os.path.exists(out))


def group_summary(c, args, work):
    vol = np.arange(4 * 5 * 6, dtype=np.int16).reshape(4, 5, 6)
    raw = os.path.join(work, "v.raw")
    vol.tofile(raw)
    stack = os.path.join(work, "stack")
    inputs.write_stack(stack, vol)
    for job, fmt, store, extra in (
            ("ingest", "raw", raw, {"raw": {"dtype": "int16", "shape": [4, 5, 6]}}),
            ("convert", "tiff", stack, {})):
        cfg = cc.write_config(os.path.join(work, f"{job}_{fmt}.yaml"), {
            "job": job, "input": dict({"store": store, "format": fmt}, **extra),
            "output": {"path": os.path.join(work, f"{job}_{fmt}.zarr"), "fsync": False},
            "progress": False})
        r = cc.run([args.shardmill, "run", cfg], cwd=work)
        if not c.check(f"{job} from {fmt} exits 0", r.returncode == 0, cc.describe(r)):
            continue
        line = [ln for ln in r.stdout.splitlines() if ln.startswith("  input: ")]
        c.check(f"{job} from {fmt}: the summary's input line names {store}, not (null)",
                len(line) == 1 and line[0] == f"  input: {store} [4, 5, 6] int16", line)


def group_none_histogram(c, args, work):
    """A float32 source with normalize none and no histogram keys: the report's result.histogram
    is null (SPEC §5 has no default range for floats, none needs none); the provenance's
    histogram summary must not claim bins and a range either, and its sums are NumPy's."""
    rng = np.random.default_rng(2022)
    vol = (rng.standard_normal((6, 17, 19)) * 1000).astype(np.float32)
    raw = os.path.join(work, "f.raw")
    vol.tofile(raw)
    stack = os.path.join(work, "f.tif")
    inputs.write_multipage(stack, vol)
    s, w = spec_oracle.checksums(vol, vol.shape, [0, 0, 0])
    for job, fmt, store, extra in (
            ("ingest", "raw", raw, {"raw": {"dtype": "float32", "shape": list(vol.shape)}}),
            ("convert", "tiff", stack, {})):
        label = f"{job}_{fmt}_float32"
        out = os.path.join(work, label + ".zarr")
        cfg = {"job": job, "input": dict({"store": store, "format": fmt}, **extra),
               "output": {"path": out, "fsync": False}, "progress": False}
        if job == "convert":
            cfg["normalize"] = {"mode": "none"}
        cfg = cc.write_config(os.path.join(work, label + ".yaml"), cfg)
        rep_path = os.path.join(work, label + ".report.json")
        r = cc.run([args.shardmill, "run", cfg, "--report", rep_path], cwd=work)
        if not c.check(f"{label}: exits 0", r.returncode == 0, cc.describe(r)):
            continue
        res = report_json.load(rep_path).get("result", {})
        c.check(f"{label}: report result.histogram null (no range for float32)",
                res.get("histogram") is None, res.get("histogram"))
        h = report_json.load(os.path.join(out, "zarr.json"))["attributes"]["shardmill"].get(
            "histogram")
        c.check(f"{label}: provenance histogram claims no bins or range (the report has none)",
                h is None or (h.get("bins") is None and h.get("range") is None), h)
        c.check(f"{label}: provenance sums (when stated) = NumPy's",
                h is None or (h.get("voxels") == vol.size and h.get("checksum") == s and
                              h.get("weighted_checksum") == w), h)


GROUPS = {"tiff": group_tiff, "hdf5": group_hdf5, "nifti": group_nifti, "bytes": group_bytes,
          "alias": group_alias, "alias_keys": group_alias_keys, "summary": group_summary,
          "none_histogram": group_none_histogram}


def main():
    return cc.group_main("convert.sources", GROUPS, SKIP, no_node=tuple(GROUPS))


if __name__ == "__main__":
    cc.main_guard(main)
