"""Our own outputs as inputs (issue 32): every output kind shardmill writes is read back by
shardmill as an input, and keeps its values, its geometry (spacing / scale, unit, origin /
translation) and its unit. Oracles: NumPy (the input's values), the NumPy decoder of the sharding
spec (zarr_decode) for the Zarr outputs, h5py for the HDF5 export.

Cases (one ctest each, convert.roundtrip.<case>):
  plain  a plain v3 array (normalize none, input.spacing/unit/origin) converted again with
         normalize none and no geometry given: values bit for bit, the report's input.geometry
         and the new provenance carry the first output's spacing, unit and origin; `shardmill
         read` of it equals NumPy's values.
  ome    an OME-Zarr 0.5 image (2 levels) and its HDF5 export: each level read back through its
         group ({store: img.zarr, array: "<k>"}) into a new image with normalize none keeps the
         level's values and its scale, translation and unit; the level array opened as a store
         (`shardmill read img.zarr/1`) equals its decoded values; the HDF5 export ingested keeps
         h5py's values and the export's spacing, unit and origin attributes.
  checksum  an image whose provenance holds a weighted checksum above 2^63 (NumPy) read back
         through its group: the geometry is kept (issue 32 #2's exact repro).
"""

import argparse
import json
import os

import numpy as np

from shardmill_test import report_json
from shardmill_test import runner as cc
from shardmill_test import spec_oracle
from shardmill_test import zarr_decode
from shardmill_test.checks import Checks

SHAPE = (20, 24, 28)
SP = [2.5, 0.75, 0.5]
ORG = [-4.0, 1.25, 10.5]
UNIT = "micrometer"


def make_source(path, seed=7, lo=0, hi=4096, dtype="uint16"):
    import zarr
    a = np.random.default_rng(seed).integers(lo, hi, SHAPE).astype(dtype)
    z = zarr.open(path, mode="w", shape=SHAPE, chunks=(8, 8, 8), dtype=dtype)
    z[:] = a
    return a


def run_job(c, args, label, path, cfg):
    rep = path + ".report.json"
    cc.write_config(path, cfg)
    r = cc.run([args.shardmill, "run", path, "--report", rep])
    if not c.check(f"{label}: exits 0", r.returncode == 0, cc.describe(r)):
        return None
    return report_json.load(rep)


def geometry_of(rep):
    g = (rep.get("input") or {}).get("geometry") or {}
    return g.get("spacing"), g.get("unit"), g.get("origin")


def image_transforms(path):
    """[(scale, translation)] per level and the axes' units of an OME-Zarr image."""
    m = report_json.load(os.path.join(path, "zarr.json"))["attributes"]["ome"]["multiscales"][0]
    levels = []
    for d in m["datasets"]:
        ct = {t["type"]: t.get(t["type"]) for t in d["coordinateTransformations"]}
        levels.append((ct.get("scale"), ct.get("translation")))
    return levels, [a.get("unit") for a in m["axes"]]


def same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def case_plain(c, args, work):
    src = os.path.join(work, "src.zarr")
    a = make_source(src)
    plain = os.path.join(work, "plain.zarr")
    rep = run_job(c, args, "plain v3 output", os.path.join(work, "plain.yaml"), {
        "job": "convert", "input": {"store": src, "spacing": SP, "unit": UNIT, "origin": ORG},
        "normalize": {"mode": "none"}, "output": {"path": plain, "shard": [16, 16, 16],
                                                  "chunk": [8, 8, 8]}, "progress": False})
    if rep is None:
        return
    c.check("plain output: values = NumPy's (sharding-spec decoder)",
            same_bits(zarr_decode.spec_decode(plain), a))
    again = os.path.join(work, "again.zarr")
    rep = run_job(c, args, "the plain output as an input", os.path.join(work, "again.yaml"), {
        "job": "convert", "input": {"store": plain}, "normalize": {"mode": "none"},
        "output": {"path": again}, "progress": False})
    if rep is None:
        return
    c.check("read back: values bit for bit", same_bits(zarr_decode.spec_decode(again), a))
    c.check("read back: the report's input geometry is the first output's spacing, unit, origin",
            geometry_of(rep) == (SP, UNIT, ORG), (rep.get("input") or {}).get("geometry"))
    pv = report_json.load(os.path.join(again, "zarr.json"))["attributes"]["shardmill"]
    c.check("read back: its provenance keeps spacing, unit and origin",
            (pv.get("spacing"), pv.get("unit"), pv.get("origin")) == (SP, UNIT, ORG), pv)
    with open(os.path.join(work, "again.yaml.report.json")) as f:
        raw = json.load(f)["result"]  # SPEC §7: checksums are decimal strings, counts integers
    c.check("the report's checksums are decimal strings, its counts integers",
            all(isinstance(raw[k], str) for k in report_json.CHECKSUM_KEYS)
            and isinstance(raw["voxels"], int), raw)
    s, w = spec_oracle.checksums(a, a.shape, [0, 0, 0])
    c.check("read back: report checksums (decimal strings) = NumPy's",
            rep["result"]["checksum"] == s and rep["result"]["weighted_checksum"] == w,
            rep["result"])
    cc.shardmill_read(c, args.shardmill, "plain output", plain, a, work)


def make_image(c, args, work, src, label, h5=None):
    img = os.path.join(work, label + ".zarr")
    cfg = {"job": "convert",
           "input": {"store": src, "spacing": SP, "unit": UNIT, "origin": ORG},
           "histogram": {"bins": 16, "range": [-4096, 4096]},
           "normalize": {"mode": "scale", "divisor": 4095},
           "output": {"path": img, "shard": [16, 16, 16], "chunk": [8, 8, 8],
                      "ome": {"levels": 2}}, "progress": False}
    if h5 is not None:
        cfg["export"] = {"hdf5": {"path": h5}}
    rep = run_job(c, args, f"{label}: OME-Zarr output", os.path.join(work, label + ".yaml"), cfg)
    return img if rep is not None else None


def level_back(c, args, work, img, k):
    """Level k of img read back through its group into a 1-level image, normalize none."""
    back = os.path.join(work, f"back{k}.zarr")
    rep = run_job(c, args, f"level {k} through its group", os.path.join(work, f"back{k}.yaml"), {
        "job": "convert", "input": {"store": img, "array": str(k)},
        "normalize": {"mode": "none"}, "output": {"path": back, "ome": {"levels": 1}},
        "progress": False})
    if rep is None:
        return
    want = zarr_decode.spec_decode(os.path.join(img, str(k)))
    c.check(f"level {k} read back: values bit for bit",
            same_bits(zarr_decode.spec_decode(os.path.join(back, "0")), want))
    (lv, units), (got, got_units) = image_transforms(img), image_transforms(back)
    c.check(f"level {k} read back: scale, translation and unit kept",
            got[0] == lv[k] and got_units == units == [UNIT] * 3, (got, lv[k], got_units))


def case_ome(c, args, work):
    src = os.path.join(work, "src.zarr")
    make_source(src)
    h5 = os.path.join(work, "img.h5")
    img = make_image(c, args, work, src, "img", h5=h5)
    if img is None:
        return
    for k in (0, 1):
        level_back(c, args, work, img, k)
    l1 = zarr_decode.spec_decode(os.path.join(img, "1"))
    cc.shardmill_read(c, args.shardmill, "level 1 opened as a store", os.path.join(img, "1"),
                      l1, work)
    import h5py
    with h5py.File(h5, "r") as f:
        d = f["data"]
        vals = d[...]
        attrs = (list(d.attrs["spacing"]), d.attrs["unit"], list(d.attrs["origin"]))
    attrs = (attrs[0], attrs[1].decode() if isinstance(attrs[1], bytes) else attrs[1], attrs[2])
    c.check("HDF5 export: values = level 0's, attributes spacing/unit/origin",
            same_bits(vals, zarr_decode.spec_decode(os.path.join(img, "0")))
            and attrs == (SP, UNIT, ORG), attrs)
    back = os.path.join(work, "h5back.zarr")
    rep = run_job(c, args, "the HDF5 export ingested", os.path.join(work, "h5back.yaml"), {
        "job": "ingest", "input": {"store": h5, "format": "hdf5", "hdf5": {"dataset": "/data"}},
        "output": {"path": back, "ome": {"levels": 1}}, "progress": False})
    if rep is None:
        return
    c.check("HDF5 export read back: values = h5py's bit for bit",
            same_bits(zarr_decode.spec_decode(os.path.join(back, "0")), vals))
    c.check("HDF5 export read back: spacing, unit and origin kept",
            geometry_of(rep) == (SP, UNIT, ORG), (rep.get("input") or {}).get("geometry"))
    lv, units = image_transforms(back)
    c.check("HDF5 export read back: the image's scale, translation and unit",
            lv[0] == (SP, ORG) and units == [UNIT] * 3, (lv, units))


def case_checksum(c, args, work):
    src = os.path.join(work, "src.zarr")
    a = make_source(src, seed=11, lo=-4096, hi=1024, dtype="int16")
    _, w = spec_oracle.checksums(a, a.shape, [0, 0, 0])
    if not c.check("the input's weighted checksum is above 2^63 (NumPy)", w >= 1 << 63, w):
        return
    img = make_image(c, args, work, src, "img")
    if img is None:
        return
    pv = report_json.load(os.path.join(img, "zarr.json"))["attributes"]["shardmill"]
    c.check("the image's provenance holds it exactly", pv["histogram"]["weighted_checksum"] == w,
            pv["histogram"])
    level_back(c, args, work, img, 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    cases = {"plain": case_plain, "ome": case_ome, "checksum": case_checksum}
    ap.add_argument("--case", required=True, choices=sorted(cases))
    args = ap.parse_args()
    work = cc.fresh_dir(os.path.join(args.work, args.case))
    c = Checks(f"convert.roundtrip.{args.case}")
    cases[args.case](c, args, work)
    return c.done()


if __name__ == "__main__":
    cc.main_guard(main)
