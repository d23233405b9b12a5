"""Integer outputs of a normalized convert (issue 21 item 1, SPEC §2 `output.dtype: uint8 |
uint16`): out = rint(float32(w) x float32(MAX)) in float32, half to even, clamped to [0, MAX],
w the float32 value of SPEC §5. NumPy is the oracle:
    np.rint(w.astype(np.float32) * np.float32(MAX)).clip(0, MAX).astype(uint8 / uint16)
(NaN would be 0; the CT is int16, so it has none: the C unit test covers NaN).

Usage: /usr/bin/python3 test_convert_intout.py --shardmill BIN --work DIR --case CASE
Cases (one ctest each, label `convert`), on the head CT (data/ct/matrix.dat, raw int16
[108, 256, 256], read by the raw source) or skipped (77) without it:
  window_u8, window_u16   window [-1020, 1020] (~0.8 M exact .5 ties): level 0 (the NumPy sharding decoder and
              `shardmill read`) equals NumPy byte for byte; zarr.json data_type and fill 0; the
              report's output.dtype and output checksums (SPEC §5 over the integer values, as for
              integer inputs) are NumPy's; the provenance says output_dtype; verify passes
  percentile_u8, percentile_u16   percentile [1, 99] (the SPEC §5 percentiles of NumPy's
              histogram), output.ome levels 2 and an HDF5 export: level 0 = NumPy's, level 1 =
              SPEC §2's mean of level 0 (float64 sum of the values, divided by the count, rint half
              to even), the export's dataset has the integer dtype and level 0's values
  scale_u8    scale divisor 1000: w beyond [0, 1] on both sides (CT values -1024 .. 3071), the
              product clamped to [0, 255]
  bad_dtype   output.dtype int16 (and float64) with mode window: exit 2, one line naming
              output.dtype with the allowed types, nothing written
"""

import json
import os

import numpy as np

from shardmill_test import report_json
from shardmill_test import inputs
from shardmill_test import ome_ngff_check as ngff
from shardmill_test import spec_oracle
from shardmill_test import runner as cc
from shardmill_test import zarr_decode

SKIP = 77
MAX = {"uint8": 255, "uint16": 65535}
# (v + 1020) / 2040 x 255 lands on exact .5 ties for 819,060 CT voxels, 489,476 of which half to
# even rounds down (half up would not): the window tests the rounding rule, not only the formula
WINDOW = (-1020, 1020)
PCT = (1, 99)
LAYOUT = {"shard": [12, 256, 256], "chunk": [6, 128, 128]}


def to_int(w, dtype):
    """SPEC §2: w (float32) to uint8/uint16, by NumPy."""
    m = MAX[dtype]
    with np.errstate(invalid="ignore"):
        y = np.rint(w.astype(np.float32) * np.float32(m))
    assert y.dtype == np.float32  # the product and rint in float32
    return np.nan_to_num(y.clip(0, m), nan=0).astype(dtype)


def factors(shape0, shape1):
    """The per-axis factor (1 or 2) of level 1 from the shapes (halving every axis, or only some
    of them: the downsample rule is the pyramid's, not this test's)."""
    f = []
    for a, b in zip(shape0, shape1):
        assert b in (a, (a + 1) // 2), (shape0, shape1)
        f.append(1 if b == a and a > 1 else 2)
    return f


def job(work, name, ct, normalize, dtype, extra=None):
    out = os.path.join(work, name + ".zarr")
    output = {"path": out, "fsync": False, "dtype": dtype, **LAYOUT}
    output.update(extra or {})
    cfg = cc.write_config(os.path.join(work, name + ".yaml"), {
        "job": "convert",
        "input": {"store": ct, "format": "raw",
                  "raw": {"dtype": "int16", "shape": [108, 256, 256], "byte_order": "little"}},
        "normalize": normalize, "output": output,
        "parallel": {"threads": 2}, "progress": False})
    return cfg, out


def run_job(c, args, work, name, cfg, extra_args=()):
    rep_path = os.path.join(work, name + ".report.json")
    r = cc.run([args.shardmill, "run", cfg, "--report", rep_path, *extra_args], cwd=work,
               timeout=300)
    if not c.check(f"{name}: convert exits 0", r.returncode == 0, cc.describe(r)):
        return None
    return report_json.load(rep_path)


def check_level0(c, args, work, name, arr_path, rep, want, dtype, prov_at):
    """Level 0 decoded by NumPy and by `shardmill read` = want; zarr.json; report; provenance."""
    meta = json.load(open(os.path.join(arr_path, "zarr.json")))
    c.check(f"{name}: zarr.json data_type {dtype}, fill_value 0",
            meta.get("data_type") == dtype and meta.get("fill_value") == 0,
            {k: meta.get(k) for k in ("data_type", "fill_value")})
    try:
        got = zarr_decode.spec_decode(arr_path)
    except Exception as e:  # noqa: BLE001 - a decoding problem is a failure to report
        c.check(f"{name}: level 0 decodes", False, repr(e))
        return None
    c.check(f"{name}: level 0 {list(want.shape)} {dtype} = NumPy's, byte for byte",
            got.dtype == np.dtype(dtype) and spec_oracle.same_bits(got, want), spec_oracle.first_diff(got, want))
    cc.shardmill_read(c, args.shardmill, name, arr_path, want, work)
    res = rep.get("result", {})
    s, w = spec_oracle.checksums(want, want.shape, [0, 0, 0])
    c.check(f"{name}: report output checksums = NumPy's over the {dtype} values (SPEC §5)",
            res.get("output_checksum") == s and res.get("output_weighted_checksum") == w,
            (res.get("output_checksum"), res.get("output_weighted_checksum"), s, w))
    c.check(f"{name}: report output.dtype {dtype}",
            rep.get("output", {}).get("dtype") == dtype, rep.get("output"))
    prov = json.load(open(os.path.join(prov_at, "zarr.json"))).get("attributes", {}).get(
        "shardmill", {})
    c.check(f"{name}: provenance output_dtype {dtype}", prov.get("output_dtype") == dtype,
            prov.get("output_dtype"))
    hist = np.bincount(want.ravel(), minlength=MAX[dtype] + 1)
    print(f"note: {name}: {int(np.count_nonzero(hist))} distinct values, "
          f"{int(hist[0])} zeros, {int(hist[MAX[dtype]])} at {MAX[dtype]}")
    return got


def case_window(dtype):
    def run_case(c, args, work):
        ct, vol = inputs.real_ct()
        if ct is None:
            return SKIP
        name = f"window_{dtype}"
        norm = {"mode": "window", "lo": WINDOW[0], "hi": WINDOW[1]}
        cfg, out = job(work, name, ct, norm, dtype)
        rep = run_job(c, args, work, name, cfg)
        if rep is None:
            return None
        w = spec_oracle.normalize(vol, "window", lo=WINDOW[0], hi=WINDOW[1])
        y = w * np.float32(MAX[dtype])
        down = int(np.count_nonzero(np.rint(y) != np.floor(y + np.float32(0.5))))
        c.check(f"{name}: the window has ties that half to even rounds down ({down})", down > 0)
        want = to_int(w, dtype)
        check_level0(c, args, work, name, out, rep, want, dtype, out)
        r = cc.run([args.shardmill, "verify", out])
        c.check(f"{name}: verify passes", r.returncode == 0, cc.describe(r) + r.stdout)
        return None
    return run_case


def case_percentile(dtype):
    def run_case(c, args, work):
        ct, vol = inputs.real_ct()
        if ct is None:
            return SKIP
        name = f"percentile_{dtype}"
        h5 = os.path.join(work, name + ".h5")
        norm = {"mode": "percentile", "lo": PCT[0], "hi": PCT[1]}
        cfg, out = job(work, name, ct, norm, dtype, {"ome": {"levels": 2}})
        rep = run_job(c, args, work, name, cfg, ("--set", f"export.hdf5.path={h5}"))
        if rep is None:
            return None
        bins, hlo, hhi = spec_oracle.default_hist(vol.dtype)
        counts, under, over, _ = spec_oracle.histogram(vol, bins, hlo, hhi)
        lo = spec_oracle.percentile(counts, under, over, hlo, hhi, PCT[0])
        hi = spec_oracle.percentile(counts, under, over, hlo, hhi, PCT[1])
        nm = rep.get("result", {}).get("normalization", {})
        c.check(f"{name}: report window = NumPy's percentiles [{float(lo)}, {float(hi)}]",
                nm.get("lo") == float(lo) and nm.get("hi") == float(hi), nm)
        want = to_int(spec_oracle.normalize(vol, "window", lo=lo, hi=hi), dtype)
        check_level0(c, args, work, name, os.path.join(out, "0"), rep, want, dtype, out)
        ngff.check(c, out, name)
        l1_path = os.path.join(out, "1")
        m1 = json.load(open(os.path.join(l1_path, "zarr.json")))
        c.check(f"{name}: level 1 data_type {dtype}", m1.get("data_type") == dtype,
                m1.get("data_type"))
        f = factors(want.shape, m1.get("shape"))
        mean = spec_oracle.block_mean(want, f)
        try:
            l1 = zarr_decode.spec_decode(l1_path)
        except Exception as e:  # noqa: BLE001
            c.check(f"{name}: level 1 decodes", False, repr(e))
            return None
        c.check(f"{name}: level 1 {list(mean.shape)} (factors {f}) = SPEC §2's mean of NumPy's "
                f"level 0 (float64 sums, rint half to even), byte for byte",
                l1.dtype == np.dtype(dtype) and spec_oracle.same_bits(l1, mean), spec_oracle.first_diff(l1, mean))
        if f == [2, 2, 2] and all(n % 2 == 0 for n in want.shape):
            # how often half to even decided: block sums / 8 ending in exactly .5
            z, y, x = (n // 2 for n in want.shape)
            blk = want.astype(np.float64).reshape(z, 2, y, 2, x, 2).sum(axis=(1, 3, 5)) / 8
            print(f"note: {name}: {int(np.count_nonzero(blk - np.floor(blk) == 0.5))} level-1 "
                  f"means were exact .5 ties")
        import h5py
        with h5py.File(h5, "r") as hf:
            d = hf["data"]
            c.check(f"{name}: HDF5 export dataset dtype {dtype} (little-endian), shape of "
                    f"level 0", d.dtype == np.dtype(dtype).newbyteorder("<") and
                    d.shape == want.shape, (d.dtype, d.shape))
            c.check(f"{name}: HDF5 export values = level 0", spec_oracle.same_bits(d[...], want),
                    spec_oracle.first_diff(d[...], want))
        c.check(f"{name}: report export complete",
                rep.get("export", {}).get("complete") is True, rep.get("export"))
        r = cc.run([args.shardmill, "verify", out])
        c.check(f"{name}: verify passes", r.returncode == 0, cc.describe(r) + r.stdout)
        return None
    return run_case


def case_scale_u8(c, args, work):
    ct, vol = inputs.real_ct()
    if ct is None:
        return SKIP
    name = "scale_u8"
    cfg, out = job(work, name, ct, {"mode": "scale", "divisor": 1000}, "uint8")
    rep = run_job(c, args, work, name, cfg)
    if rep is None:
        return None
    w = spec_oracle.normalize(vol, "scale", divisor=1000)
    c.check(f"{name}: the CT's w reaches below 0 and above 1 (the clamp is exercised)",
            float(w.min()) < 0 and float(w.max()) > 1, (float(w.min()), float(w.max())))
    check_level0(c, args, work, name, out, rep, to_int(w, "uint8"), "uint8", out)
    return None


def case_bad_dtype(c, args, work):
    ct, vol = inputs.real_ct()
    if ct is None:
        return SKIP
    for dt in ("int16", "float64"):
        name = f"bad_{dt}"
        cfg, out = job(work, name, ct, {"mode": "window", "lo": 0, "hi": 1}, dt)
        r = cc.run([args.shardmill, "run", cfg], cwd=work)
        lines = cc.one_error_line(r.stderr)
        c.check(f"{name}: output.dtype {dt} with mode window: exit 2, one line naming "
                f"output.dtype and float32, uint8, uint16",
                r.returncode == 2 and len(lines) == 1 and "output.dtype" in lines[0] and
                "float32, uint8 or uint16" in lines[0] and dt in lines[0], cc.describe(r))
        c.check(f"{name}: nothing written", not os.path.exists(out), out)
    return None


def case_auto_layout(c, args, work):
    """The default layout of a uint8 output is laid out for uint8, not float32: a 256^3 uint16
    volume makes one 16 MiB uint8 shard where float32 would need two (before the fix the write
    phase planned the float32 grid and failed with 'plan of 2 shards for a grid of 1')."""
    shape = [256, 256, 256]
    vol = (np.arange(np.prod(shape), dtype=np.uint64) % 4001).astype(np.uint16).reshape(shape)
    raw = os.path.join(work, "vol.raw")
    vol.tofile(raw)
    for dt, itemsize in (("uint8", 1), ("uint16", 2)):
        name = f"auto_layout_{dt}"
        out = os.path.join(work, name + ".zarr")
        cfg = cc.write_config(os.path.join(work, name + ".yaml"), {
            "job": "convert",
            "input": {"store": raw, "format": "raw",
                      "raw": {"dtype": "uint16", "shape": shape}},
            "normalize": {"mode": "window", "lo": 0, "hi": 4000},
            "output": {"path": out, "dtype": dt, "fsync": False}, "progress": False})
        rep = run_job(c, args, work, name, cfg)
        if rep is None:
            continue
        meta = json.load(open(os.path.join(out, "zarr.json")))
        shard, chunk = cc.auto_layout(shape, itemsize)
        got = meta["chunk_grid"]["configuration"]["chunk_shape"]
        c.check(f"{name}: SPEC §2's auto layout for {dt} ({shard}), not float32's",
                got == shard and got != cc.auto_layout(shape, 4)[0], got)
        want = to_int(spec_oracle.normalize(vol, "window", lo=0, hi=4000), dt)
        cc.shardmill_read(c, args.shardmill, name, out, want, work)
    return None


CASES = {"window_u8": case_window("uint8"), "window_u16": case_window("uint16"),
         "percentile_u8": case_percentile("uint8"), "percentile_u16": case_percentile("uint16"),
         "scale_u8": case_scale_u8, "bad_dtype": case_bad_dtype,
         "auto_layout": case_auto_layout}


def main():
    return cc.group_main("convert.intout", CASES, SKIP, no_node=tuple(CASES), flag="case")


if __name__ == "__main__":
    cc.main_guard(main)
