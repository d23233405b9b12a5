"""`shardmill run` (job: ingest): raw and NIfTI-1 volumes -> Zarr v3 arrays of the input's dtype.

Usage: /usr/bin/python3 test_ingest.py --shardmill BIN --node NODE --work DIR --group GROUP
Groups (one ctest each, label `convert`):
  raw         int16 little and big endian, with and without header bytes (and a float32
              big-endian volume with NaN, +-Inf and -0.0) vs np.fromfile
  nifti       NIfTI-1 .nii and .nii.gz written by nibabel (uint8, int16, float32; a big-endian
              header, an extension (vox_offset > 352), scl_slope set, a 4-D file with a trailing
              axis of 1) vs nibabel's img.dataobj.get_unscaled() transposed to [z, y, x] (scaled
              files: float32(get_fdata()))
  nifti_pixdim  the voxel sizes of the report and the provenance are NIfTI pixdim[1..3]
  nifti_scaled  scl_slope 2 / scl_inter -5 applied (float32 values = nibabel's get_fdata), the
              provenance's shardmill.spacing [z, y, x], shardmill.unit and shardmill.origin (sform,
              or qform without one: input.sform_code/qform_code) against nibabel's header; a
              float64 file stays float64; a dim product that overflows, a volume larger than its
              file and a .nii.gz volume larger than limits.memory_bytes are refused; bytes past
              the volume in a .nii.gz are streamed through, not held (a 4 MiB budget ingests a
              file inflating to 8 MiB)
  bad_inputs  raw size mismatch, a non-NIfTI file, a non-gzip .nii.gz, an unsupported NIfTI
              datatype, a truncated NIfTI, a NaN, negative or zero pixdim voxel size: exit 3,
              one error line naming the file, no output; input.spacing replacing a bad pixdim
              is the OME scale
  real_data   data/ct/matrix.dat and data/mri/ch2better.nii.gz (scripts/fetch-data.sh) vs
              NumPy / nibabel; exit 77 (skipped) when they are absent
Each ingested array is read back by `shardmill read`, by zarrita.js and (small volumes) by the
NumPy decoder of the sharding spec; the report's checksums (SPEC §5) and the completion marker
are checked, and `shardmill verify` must pass. `ingest` is `convert` with normalize none (issue
20): the provenance is convert's (shardmill.input is the source's description, normalization
none) and so is the report (job "ingest", roi, tile, io.source).
"""

import gzip
import json
import os
import shutil

import numpy as np

from shardmill_test import ome_ngff_check as ngff
from shardmill_test import runner as cc
from shardmill_test import zarr_decode
from shardmill_test.ingest import do_ingest, expect_bad, ingest_config

SKIP = 77
NII_SHAPE = (17, 23, 11)  # x, y, z as nibabel holds it; the Zarr array is [11, 23, 17]


# ---- the real CT as the reference of other sources (test_ingest_tiff.py, test_ingest_hdf5.py) ----


# ---- raw ----

def group_raw(c, args, work):
    rng = np.random.default_rng(81)
    shape = (13, 29, 37)
    base = rng.integers(-32768, 32767, shape, endpoint=True, dtype=np.int16)
    base.flat[:4] = [-32768, 32767, -1, 0]
    reads = []
    cases = [  # label, dtype, byte order, header bytes, give input.format
        ("raw_i16_le", "int16", "little", 0, False),
        ("raw_i16_le_hdr352", "int16", "little", 352, True),
        ("raw_i16_be", "int16", "big", 0, True),
        ("raw_i16_be_hdr100", "int16", "big", 100, False),
    ]
    for label, dtype, order, hdr, give_fmt in cases:
        path = os.path.join(work, label + ".dat")
        ne = np.dtype(dtype).newbyteorder("<" if order == "little" else ">")
        with open(path, "wb") as f:
            f.write(rng.integers(0, 256, hdr, dtype=np.uint8).tobytes())  # junk header
            f.write(base.astype(ne).tobytes())
        want = np.fromfile(path, dtype=ne, offset=hdr).reshape(shape).astype(np.int16)
        assert np.array_equal(want, base)
        raw = {"dtype": dtype, "shape": list(shape), "byte_order": order, "header_bytes": hdr}
        res = do_ingest(c, args, work, label, path, want, raw, "raw" if give_fmt else None,
                        expect_fmt="raw")
        if res:
            reads.append(res)
    # float32 big endian: NaN, +-Inf, -0.0 and a subnormal must survive bit for bit
    f = (rng.standard_normal((7, 19, 21)) * 1000).astype(np.float32)
    f.flat[:5] = [np.nan, np.inf, -np.inf, -0.0, np.finfo(np.float32).tiny / 4]
    path = os.path.join(work, "raw_f32_be_hdr16.dat")
    with open(path, "wb") as fh:
        fh.write(b"HEADER--16-bytes")
        fh.write(f.astype(">f4").tobytes())
    want = np.fromfile(path, dtype=">f4", offset=16).reshape(f.shape).astype(np.float32)
    res = do_ingest(c, args, work, "raw_f32_be_hdr16", path, want,
                    {"dtype": "float32", "shape": list(f.shape), "byte_order": "big",
                     "header_bytes": 16}, "raw")
    if res:
        reads.append(res)
    cc.zarrita_read_all(c, args.node, work, reads)


# ---- NIfTI ----

def nifti_cases(rng):
    import nibabel as nib
    u8 = rng.integers(0, 256, NII_SHAPE, dtype=np.uint8)
    i16 = rng.integers(-32768, 32767, NII_SHAPE, endpoint=True, dtype=np.int16)
    f32 = (rng.standard_normal(NII_SHAPE) * 100).astype(np.float32)
    f32.flat[:4] = [np.nan, np.inf, -0.0, -np.inf]
    aff = np.diag([0.5, 0.75, 2.0, 1.0])
    cases = []
    for name, data in (("u8", u8), ("i16", i16), ("f32", f32)):
        img = nib.Nifti1Image(data, aff)
        img.header.set_data_dtype(data.dtype)
        cases.append((f"nii_{name}", img))
    be = nib.Nifti1Header(endianness=">")
    be.set_data_dtype(np.int16)
    img = nib.Nifti1Image(i16, aff, header=be)
    cases.append(("nii_i16_bigendian", img))
    img = nib.Nifti1Image(u8, aff)
    img.header.extensions.append(nib.nifti1.Nifti1Extension(6, b"shardmill test comment " * 9))
    cases.append(("nii_u8_extension", img))
    img = nib.Nifti1Image(i16, aff)
    img.header.set_data_dtype(np.int16)
    img.header.set_slope_inter(2.5, -10)  # applied: float32(get_fdata()) (SPEC §2)
    cases.append(("nii_i16_scaled", img))
    img = nib.Nifti1Image(u8.reshape(NII_SHAPE + (1,)), aff)
    cases.append(("nii_u8_4d_trailing1", img))
    return cases


def group_nifti(c, args, work):
    import nibabel as nib
    rng = np.random.default_rng(82)
    reads = []
    for name, img in nifti_cases(rng):
        for suffix in (".nii", ".nii.gz"):
            label = name + ("_gz" if suffix.endswith("gz") else "")
            path = os.path.join(work, name + suffix)
            nib.save(img, path)
            back = nib.load(path)
            # nibabel moves the stored scaling into the proxy (the loaded header reads NaN)
            slope, inter = float(back.dataobj.slope), float(back.dataobj.inter)
            if (slope, inter) != (1.0, 0.0):
                data = back.get_fdata(dtype=np.float64).astype(np.float32)
            else:
                data = np.asarray(back.dataobj.get_unscaled())
            while data.ndim > 3 and data.shape[-1] == 1:
                data = data[..., 0]
            want = np.ascontiguousarray(data.transpose(tuple(reversed(range(data.ndim)))))
            want = want.astype(want.dtype.newbyteorder("="))
            if name == "nii_u8_extension":
                raw_hdr = open(path, "rb").read(348) if suffix == ".nii" else \
                    gzip.open(path).read(348)
                vox = float(np.frombuffer(raw_hdr[108:112], "<f4")[0])
                c.check(f"{label} fixture has vox_offset {vox} > 352", vox > 352, vox)
            res = do_ingest(c, args, work, label, path, want, expect_fmt="nifti")
            if res:
                reads.append(res)
    cc.zarrita_read_all(c, args.node, work, reads)


def group_nifti_pixdim(c, args, work):
    """The report's input.pixdim (and zarr.json's source.pixdim) are the NIfTI voxel sizes
    pixdim[1..3] (header bytes 80..91; pixdim[0] at byte 76 is qfac)."""
    import nibabel as nib
    rng = np.random.default_rng(84)
    u8 = rng.integers(0, 256, NII_SHAPE, dtype=np.uint8)
    files = []
    for zooms in ((0.5, 0.75, 2.0), (1.25, 3.0, 0.8)):
        img = nib.Nifti1Image(u8, np.diag(list(zooms) + [1.0]))
        img.header.set_xyzt_units("mm", "sec")
        img.header["pixdim"][4] = 2.5  # a time step: must not show up as a voxel size
        path = os.path.join(work, f"px_{zooms[0]}_{zooms[1]}_{zooms[2]}.nii.gz")
        nib.save(img, path)
        files.append(path)
    mri = os.path.join(cc.REPO, "data", "mri", "ch2better.nii.gz")
    if os.path.isfile(mri):
        files.append(mri)
    for path in files:
        hdr = nib.load(path).header
        want_px = [float(x) for x in hdr["pixdim"][1:4]]
        label = os.path.basename(path)
        out = os.path.join(work, label + ".zarr")
        shutil.rmtree(out, ignore_errors=True)
        cfg = ingest_config(os.path.join(work, label + ".yaml"), path, out,
                            extra={"output": {"shard": [32, 64, 64], "chunk": [16, 32, 32]}})
        rep_path = os.path.join(work, label + ".report.json")
        r = cc.run([args.shardmill, "run", cfg, "--report", rep_path], cwd=work, timeout=600)
        if not c.check(f"{label} ingest exits 0", r.returncode == 0, cc.describe(r)):
            continue
        got = [float(x) for x in json.load(open(rep_path))["input"].get("pixdim", [])]
        # the axis order is not documented: NIfTI's [x, y, z] or the array's [z, y, x]
        c.check(f"{label} report input.pixdim = pixdim[1..3] {want_px} (or reversed)",
                got in (want_px, want_px[::-1]), f"got {got}")
        prov = json.load(open(os.path.join(out, "zarr.json")))["attributes"]["shardmill"]
        got = [float(x) for x in prov.get("input", {}).get("pixdim", [])]
        c.check(f"{label} zarr.json input.pixdim = pixdim[1..3] {want_px} (or reversed)",
                got in (want_px, want_px[::-1]), f"got {got}")


def group_nifti_scaled(c, args, work):
    """SPEC §2: scl_slope/scl_inter applied (never ignored); spacing, unit and origin kept."""
    import nibabel as nib
    rng = np.random.default_rng(85)
    i16 = rng.integers(-2000, 2000, NII_SHAPE, dtype=np.int16)
    f64 = rng.standard_normal(NII_SHAPE) * 1e3
    # pixdim (x, y, z) = (0.8, 0.9, 1.5) mm: [z, y, x] spacing (1.5, 0.9, 0.8); an sform origin
    aff = np.array([[0.8, 0, 0, -12.5], [0, 0.9, 0, 7.25], [0, 0, 1.5, 30.0], [0, 0, 0, 1]])
    cases = []
    img = nib.Nifti1Image(i16, aff)
    img.header.set_data_dtype(np.int16)
    img.header.set_slope_inter(2, -5)
    img.header.set_xyzt_units("mm", "sec")
    cases.append(("scaled_i16_sform", img, "millimeter", "sform"))
    img = nib.Nifti1Image(f64, None)
    img.header.set_data_dtype(np.float64)
    img.header.set_slope_inter(0.5, 100)
    img.header.set_qform(aff * np.array([[1], [1], [1], [1]]), code=1)
    img.header.set_sform(None, code=0)
    img.header.set_xyzt_units("micron")
    cases.append(("scaled_f64_qform", img, "micrometer", "qform"))
    reads = []
    for name, img, unit, origin_from in cases:
        for suffix in (".nii", ".nii.gz"):
            label = name + ("_gz" if suffix.endswith("gz") else "")
            path = os.path.join(work, label + suffix)
            nib.save(img, path)
            back = nib.load(path)
            hdr = back.header
            # nibabel moves the stored scaling into the proxy (the loaded header reads NaN)
            slope, inter = float(back.dataobj.slope), float(back.dataobj.inter)
            c.check(f"{label} fixture is scaled (slope {slope}, inter {inter})",
                    slope not in (0.0, 1.0), (slope, inter))
            data = back.get_fdata(dtype=np.float64)
            out_dt = np.float64 if hdr.get_data_dtype() == np.float64 else np.float32
            want = np.ascontiguousarray(data.astype(out_dt).transpose(2, 1, 0))
            res = do_ingest(c, args, work, label, path, want, expect_fmt="nifti")
            if not res:
                continue
            reads.append(res)
            prov = json.load(open(os.path.join(res[1], "zarr.json")))["attributes"]["shardmill"]
            zooms = [float(x) for x in hdr.get_zooms()[:3]]
            c.check(f"{label} shardmill.spacing = nibabel zooms reversed [z, y, x]",
                    prov.get("spacing") == zooms[::-1], f"{prov.get('spacing')} vs {zooms[::-1]}")
            c.check(f"{label} shardmill.unit = {unit}", prov.get("unit") == unit, prov.get("unit"))
            if origin_from == "sform":
                xyz = [float(x) for x in hdr.get_sform()[:3, 3]]
            else:
                xyz = [float(x) for x in hdr.get_qform()[:3, 3]]
            c.check(f"{label} shardmill.origin = {origin_from} offsets [z, y, x]",
                    prov.get("origin") == xyz[::-1], f"{prov.get('origin')} vs {xyz[::-1]}")
            # the provenance's input (the source's description) has no origin_from any more: it
            # states the header's sform_code and qform_code (the origin is the sform's when its
            # code is > 0, else the qform's)
            inp = prov.get("input", {})
            codes = (int(hdr["sform_code"]), int(hdr["qform_code"]))
            c.check(f"{label} input.sform_code/qform_code = the header's {codes} (origin from "
                    f"the {origin_from})",
                    (inp.get("sform_code"), inp.get("qform_code")) == codes and
                    (codes[0] > 0) == (origin_from == "sform"),
                    (inp.get("sform_code"), inp.get("qform_code")))
            sc = inp.get("scaling", {})
            c.check(f"{label} input.scaling = header slope/inter, stored dtype",
                    sc.get("scl_slope") == float(slope) and sc.get("scl_inter") == float(inter) and
                    sc.get("stored_dtype") == hdr.get_data_dtype().name, sc)
    cc.zarrita_read_all(c, args.node, work, reads)
    # hostile headers: a dim product that overflows 64 bits, a volume larger than the file
    plain = os.path.join(work, "plain.nii")
    nib.save(nib.Nifti1Image(i16[:4, :4, :4], np.eye(4)), plain)
    full = bytearray(open(plain, "rb").read())
    ovf = bytearray(full)
    ovf[40:56] = np.array([7, 32767, 32767, 32767, 32767, 32767, 32767, 32767], "<i2").tobytes()
    ovf[70:72] = (1024).to_bytes(2, "little")  # int64
    open(os.path.join(work, "overflow.nii"), "wb").write(bytes(ovf))
    expect_bad(c, args, work, "dim_product_overflows", os.path.join(work, "overflow.nii"))
    open(os.path.join(work, "overflow.nii.gz"), "wb").write(gzip.compress(bytes(ovf)))
    expect_bad(c, args, work, "dim_product_overflows_gz", os.path.join(work, "overflow.nii.gz"))
    big = bytearray(full)
    big[42:48] = np.array([4000, 4000, 4000], "<i2").tobytes()
    open(os.path.join(work, "big.nii.gz"), "wb").write(gzip.compress(bytes(big)))
    expect_bad(c, args, work, "volume_larger_than_file_gz", os.path.join(work, "big.nii.gz"))
    # a .nii.gz is streamed, never inflated whole: 8 MiB of bytes after a small volume (a "gzip
    # bomb" for a reader that inflates the file into memory) are read through and dropped, so
    # the ingest fits a 4 MiB budget and writes the volume's values
    bomb = os.path.join(work, "bomb.nii.gz")
    open(bomb, "wb").write(gzip.compress(bytes(full) + bytes(8 << 20)))
    out = os.path.join(work, "bomb.zarr")
    shutil.rmtree(out, ignore_errors=True)
    cfg = ingest_config(os.path.join(work, "bomb.yaml"), bomb, out,
                        extra={"limits": {"memory_bytes": "4MiB", "memory_ceiling": False}})
    r = cc.run([args.shardmill, "run", cfg], cwd=work)
    c.check("gz_streamed: 8 MiB past the volume fit a 4 MiB budget (exit 0)", r.returncode == 0,
            cc.describe(r))
    if r.returncode == 0:
        got = zarr_decode.spec_decode(out)
        want = np.ascontiguousarray(i16[:4, :4, :4].transpose(2, 1, 0))
        c.check("gz_streamed: values == the volume", got.shape == want.shape and
                np.array_equal(got, want))
    # a volume whose own values exceed limits.memory_bytes: exit 5 before anything is written
    huge = os.path.join(work, "huge.nii.gz")
    nib.save(nib.Nifti1Image(np.zeros((256, 128, 160), np.int16), np.eye(4)), huge)  # 10 MiB
    out = os.path.join(work, "huge.zarr")
    shutil.rmtree(out, ignore_errors=True)
    cfg = ingest_config(os.path.join(work, "huge.yaml"), huge, out,
                        extra={"limits": {"memory_bytes": "4MiB", "memory_ceiling": False}})
    r = cc.run([args.shardmill, "run", cfg], cwd=work)
    lines = cc.one_error_line(r.stderr)
    c.check("gz_past_memory_limit: exit 5, one line naming limits.memory_bytes",
            r.returncode == 5 and len(lines) == 1 and "limits.memory_bytes" in lines[0],
            cc.describe(r))
    c.check("gz_past_memory_limit: no output", not os.path.exists(out))


# ---- bad inputs ----


def group_bad_inputs(c, args, work):
    import nibabel as nib
    rng = np.random.default_rng(83)
    shape = [10, 20, 30]
    good = rng.integers(-100, 100, shape, dtype=np.int16)
    short = os.path.join(work, "short.dat")
    good.tofile(short)
    with open(short, "r+b") as f:
        f.truncate(good.nbytes - 2)
    expect_bad(c, args, work, "raw_too_short", short,
               {"dtype": "int16", "shape": shape}, "raw")
    long_ = os.path.join(work, "long.dat")
    with open(long_, "wb") as f:
        f.write(good.tobytes() + b"\0\0")
    expect_bad(c, args, work, "raw_too_long", long_, {"dtype": "int16", "shape": shape}, "raw")
    hdr = os.path.join(work, "hdr.dat")
    good.tofile(hdr)
    expect_bad(c, args, work, "raw_header_bytes_mismatch", hdr,
               {"dtype": "int16", "shape": shape, "header_bytes": 64}, "raw")
    junk = os.path.join(work, "junk.nii")
    with open(junk, "wb") as f:
        f.write(rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
    expect_bad(c, args, work, "not_nifti", junk)
    txt = os.path.join(work, "text.nii")
    with open(txt, "w") as f:
        f.write("this is not a NIfTI file\n" * 40)
    expect_bad(c, args, work, "text_as_nifti", txt)
    notgz = os.path.join(work, "plain.nii.gz")
    img = nib.Nifti1Image(good.transpose(2, 1, 0), np.eye(4))
    nib.save(img, os.path.join(work, "plain.nii"))
    shutil.copy(os.path.join(work, "plain.nii"), notgz)  # uncompressed bytes under .gz
    expect_bad(c, args, work, "nii_gz_not_gzip", notgz)
    cplx = os.path.join(work, "complex.nii")
    nib.save(nib.Nifti1Image(np.zeros((4, 5, 6), np.complex64), np.eye(4)), cplx)
    expect_bad(c, args, work, "unsupported_datatype_complex64", cplx)
    rgb = os.path.join(work, "rgb24.nii")
    data = bytearray(open(os.path.join(work, "plain.nii"), "rb").read())
    data[70:72] = (128).to_bytes(2, "little")  # datatype RGB24
    data[72:74] = (24).to_bytes(2, "little")   # bitpix
    open(rgb, "wb").write(bytes(data))
    expect_bad(c, args, work, "unsupported_datatype_rgb24", rgb)
    trunc = os.path.join(work, "truncated.nii")
    full = open(os.path.join(work, "plain.nii"), "rb").read()
    open(trunc, "wb").write(full[:len(full) - 100])
    expect_bad(c, args, work, "truncated_nifti", trunc)
    tgz = os.path.join(work, "truncated.nii.gz")
    open(tgz, "wb").write(gzip.compress(full)[:-40])
    expect_bad(c, args, work, "truncated_nii_gz", tgz)
    # pixdim (qfac 1, NaN, -1, 0): each bad voxel size alone, then all three, is exit 3 naming
    # pixdim (it was accepted and wrote the OME scale [0.0, -1.0]: two values for three axes)
    for name, px in (("nan", [1, np.nan, 1, 1]), ("negative", [1, 1, -1, 1]),
                     ("zero", [1, 1, 1, 0]), ("nan_negative_zero", [1, np.nan, -1, 0])):
        img = nib.Nifti1Image(good.transpose(2, 1, 0), np.eye(4))
        img.header["pixdim"][:4] = px
        path = os.path.join(work, f"pixdim_{name}.nii")
        nib.save(img, path)
        expect_bad(c, args, work, f"pixdim_{name}", path, extra={"output": {"ome": {"levels": 1}}},
                   names=["pixdim"])
    # input.spacing replaces the bad pixdim: the OME scale and provenance are the given ones
    out = os.path.join(work, "pixdim_replaced.zarr")
    cfg = ingest_config(os.path.join(work, "pixdim_replaced.yaml"), path, out,
                        extra={"input": {"spacing": [2.0, 0.5, 0.25]},
                               "output": {"ome": {"levels": 1}}})
    r = cc.run([args.shardmill, "run", cfg], cwd=work)
    if c.check("pixdim_replaced by input.spacing: exit 0", r.returncode == 0, cc.describe(r)):
        attrs = json.load(open(os.path.join(out, "zarr.json")))["attributes"]
        ds = attrs["ome"]["multiscales"][0]["datasets"][0]["coordinateTransformations"]
        scale = [t.get("scale") for t in ds if t.get("type") == "scale"]
        c.check("pixdim_replaced: OME scale = input.spacing [2.0, 0.5, 0.25]",
                scale == [[2.0, 0.5, 0.25]], ds)
        c.check("pixdim_replaced: provenance spacing = input.spacing",
                attrs["shardmill"].get("spacing") == [2.0, 0.5, 0.25], attrs["shardmill"])
        ngff.check(c, out, "pixdim_replaced")


# ---- real data (SPEC §9) ----
# Larger shards than the default (the small volumes above cover the default layout): a few
# hundred objects instead of thousands keep the test short.

def group_real_data(c, args, work):
    ct = os.path.join(cc.REPO, "data", "ct", "matrix.dat")
    mri = os.path.join(cc.REPO, "data", "mri", "ch2better.nii.gz")
    have = [p for p in (ct, mri) if os.path.isfile(p)]
    if not have:
        print(f"SKIP real_data: neither {ct} nor {mri} exists (run scripts/fetch-data.sh)")
        return SKIP
    reads = []
    if os.path.isfile(ct):
        want = np.fromfile(ct, dtype="<i2").reshape(108, 256, 256).astype(np.int16)
        print(f"note: CT values {int(want.min())}..{int(want.max())} (SPEC §9: -1024..2986)")
        res = do_ingest(c, args, work, "real_ct", ct, want,
                        {"dtype": "int16", "shape": [108, 256, 256], "byte_order": "little"},
                        "raw", decode=False, layout=((16, 64, 64), (8, 32, 32)))
        if res:
            reads.append((res[0], res[1], res[2], []))
    else:
        print(f"SKIP real_ct: {ct} absent (scripts/fetch-data.sh)")
    if os.path.isfile(mri):
        import nibabel as nib
        img = nib.load(mri)
        data = np.asarray(img.dataobj.get_unscaled())
        want = np.ascontiguousarray(data.transpose(2, 1, 0)).astype(np.uint8)
        c.check("MRI is uint8 [316, 370, 301] as SPEC §9 says",
                want.dtype == np.uint8 and want.shape == (316, 370, 301), (want.dtype, want.shape))
        res = do_ingest(c, args, work, "real_mri", mri, want, expect_fmt="nifti", decode=False,
                        layout=((32, 64, 64), (16, 32, 32)))
        if res:
            reads.append((res[0], res[1], res[2], []))
    else:
        print(f"SKIP real_mri: {mri} absent (scripts/fetch-data.sh)")
    cc.zarrita_read_all(c, args.node, work, reads)
    return None


GROUPS = {"raw": group_raw, "nifti": group_nifti, "nifti_pixdim": group_nifti_pixdim,
          "nifti_scaled": group_nifti_scaled,
          "bad_inputs": group_bad_inputs,
          "real_data": group_real_data}


def main():
    return cc.group_main("convert.ingest", GROUPS, SKIP, no_node=("bad_inputs", "nifti_pixdim"))


if __name__ == "__main__":
    cc.main_guard(main)
