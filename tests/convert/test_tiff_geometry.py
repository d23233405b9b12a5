"""Voxel size and unit from a TIFF's own metadata (issue 21 items 6 and 8; SPEC §2 "Sources"),
with tifffile as the independent writer, into an OME-Zarr output (`output.ome.levels: 2`).

Usage: /usr/bin/python3 test_tiff_geometry.py --shardmill BIN --work DIR --group GROUP
Groups (one ctest each, label `convert`):
  imagej      a multi-page ImageJ hyperstack (imagej=True, resolution 2 px/um, spacing 2.0,
              unit 'um'): level 0 scale [2, 0.5, 0.5], axes in micrometer, every level's scale
              the level-0 scale times its factor (level shapes), report input.geometry_from
              imagej; ImageJ's 'micron' and ResolutionUnit CENTIMETER with unit=um likewise
  ome         OME-TIFF (ome=True, PhysicalSize* in µm): scale [2, 0.5, 0.5] micrometer, from
              ome-xml; X/Y in nm with Z in µm: [2000, 500, 500] nanometer (Z converted, exact)
  stack       a directory of slices: only the first carries ImageJ metadata and it is used
  resolution  plain TIFF with XResolution 254 dpi (inch) and 400 px/cm: x and y in centimeter,
              z = x, from tiff-resolution; tifffile's default (1 px per no unit): no geometry
  override    input.spacing + input.unit given: they win (geometry_from config); input.unit alone
              converts the file's spacing into it (micrometer -> nanometer) and says unit config,
              spacing imagej
  ome_zarr    an OME-Zarr input whose axes say 'um' becomes micrometer; 'furlong' is dropped
              (report input.geometry.unit_dropped, no unit on the axes)
Each output's level 0 also equals NumPy's scale normalization (value / 255, float32).
"""

import json
import os
import shutil

import numpy as np

from shardmill_test import ome_ngff_check as ngff
from shardmill_test import spec_oracle
from shardmill_test import runner as cc
from shardmill_test import zarr_decode

SHAPE = (8, 20, 24)


def tf():
    import tifffile
    return tifffile


def volume():
    return np.random.default_rng(21).integers(0, 4000, SHAPE, dtype=np.uint16)


def convert(c, args, work, label, inp, levels=2, extra=None):
    """Runs a convert of inp to an OME-Zarr image; returns (report, multiscales, out) or None."""
    out = os.path.join(work, label + ".zarr")
    rep_path = os.path.join(work, label + ".report.json")
    cfg = cc.write_config(os.path.join(work, label + ".yaml"), dict({
        "job": "convert", "input": inp, "normalize": {"mode": "scale"},
        "output": {"path": out, "fsync": False, "ome": {"levels": levels}}, "progress": False},
        **(extra or {})))
    r = cc.run([args.shardmill, "run", cfg, "--report", rep_path], cwd=work)
    if not c.check(f"{label}: convert exits 0", r.returncode == 0, cc.describe(r)):
        return None
    rep = json.load(open(rep_path))
    ms = json.load(open(os.path.join(out, "zarr.json")))["attributes"]["ome"]["multiscales"][0]
    ngff.check(c, out, label)
    return rep, ms, out


def scales(ms):
    res = []
    for d in ms["datasets"]:
        t = {x["type"]: x.get(x["type"]) for x in d["coordinateTransformations"]}
        res.append(t.get("scale"))
    return res


def check_geometry(c, label, res, vol, spacing, unit, sp_from, unit_from):
    rep, ms, out = res
    sc = scales(ms)
    c.check(f"{label}: level 0 scale = {spacing}", sc[0] == spacing, sc)
    shapes = [json.load(open(os.path.join(out, d["path"], "zarr.json")))["shape"]
              for d in ms["datasets"]]
    for k in range(1, len(sc)):
        f = [round(a / b) for a, b in zip(shapes[0], shapes[k])]
        want = [s * x for s, x in zip(spacing, f)]
        c.check(f"{label}: level {k} scale = level 0 x its factors {f}", sc[k] == want,
                (sc[k], want))
    c.check(f"{label}: axes z, y, x with unit {unit}",
            [(a.get("name"), a.get("unit")) for a in ms["axes"]] == [(n, unit) for n in "zyx"],
            ms["axes"])
    inp = rep.get("input", {})
    c.check(f"{label}: report input.geometry spacing {spacing}, unit {unit}",
            inp.get("geometry", {}).get("spacing") == spacing and
            inp.get("geometry", {}).get("unit") == unit, inp.get("geometry"))
    c.check(f"{label}: report input.geometry_from spacing {sp_from}, unit {unit_from}",
            inp.get("geometry_from") == {"spacing": sp_from, "unit": unit_from,
                                         "origin": "default"}, inp.get("geometry_from"))
    prov = json.load(open(os.path.join(out, "zarr.json")))["attributes"].get("shardmill", {})
    c.check(f"{label}: provenance spacing and unit", prov.get("spacing") == spacing and
            prov.get("unit") == unit, {k: prov.get(k) for k in ("spacing", "unit")})
    got = zarr_decode.spec_decode(os.path.join(out, "0"))
    want = spec_oracle.normalize(vol, "scale", divisor=255.0)
    c.check(f"{label}: level 0 = NumPy's value / 255 (float32), bit for bit",
            spec_oracle.same_bits(got, want), spec_oracle.first_diff(got, want))


def imagej_file(path, vol, res, spacing, unit, **kw):
    tf().imwrite(path, vol, imagej=True, resolution=res,
                 metadata={"spacing": spacing, "unit": unit, "axes": "ZYX"}, **kw)
    return path


def group_imagej(c, args, work):
    vol = volume()
    p = imagej_file(os.path.join(work, "ij.tif"), vol, (2.0, 2.0), 2.0, "um")
    res = convert(c, args, work, "imagej_um", {"store": p})
    if res:
        check_geometry(c, "imagej_um", res, vol, [2.0, 0.5, 0.5], "micrometer", "imagej", "imagej")
    p = imagej_file(os.path.join(work, "ij_micron.tif"), vol, (4.0, 8.0), 0.75, "micron",
                    resolutionunit="CENTIMETER")
    res = convert(c, args, work, "imagej_micron", {"store": p})
    if res:
        check_geometry(c, "imagej_micron", res, vol, [0.75, 0.125, 0.25], "micrometer", "imagej",
                       "imagej")


def ome_file(path, vol, md):
    tf().imwrite(path, vol, ome=True, metadata=dict(md, axes="ZYX"))
    return path


def group_ome(c, args, work):
    vol = volume()
    p = ome_file(os.path.join(work, "ome.tif"), vol, {
        "PhysicalSizeX": 0.5, "PhysicalSizeXUnit": "µm", "PhysicalSizeY": 0.5,
        "PhysicalSizeYUnit": "µm", "PhysicalSizeZ": 2.0, "PhysicalSizeZUnit": "µm"})
    res = convert(c, args, work, "ome_um", {"store": p})
    if res:
        check_geometry(c, "ome_um", res, vol, [2.0, 0.5, 0.5], "micrometer", "ome-xml", "ome-xml")
    p = ome_file(os.path.join(work, "ome_nm.tif"), vol, {
        "PhysicalSizeX": 500, "PhysicalSizeXUnit": "nm", "PhysicalSizeY": 500,
        "PhysicalSizeYUnit": "nm", "PhysicalSizeZ": 2.0, "PhysicalSizeZUnit": "µm"})
    res = convert(c, args, work, "ome_nm", {"store": p})
    if res:
        check_geometry(c, "ome_nm", res, vol, [2000.0, 500.0, 500.0], "nanometer", "ome-xml",
                       "ome-xml")


def group_stack(c, args, work):
    vol = volume()
    d = os.path.join(work, "slices")
    os.makedirs(d)
    tf().imwrite(os.path.join(d, "s1.tif"), vol[0], imagej=True, resolution=(2.0, 2.0),
                 metadata={"spacing": 3.0, "unit": "um"})
    for z in range(1, vol.shape[0]):  # later slices say something else: not read
        tf().imwrite(os.path.join(d, f"s{z + 1}.tif"), vol[z], imagej=True, resolution=(5.0, 5.0),
                     metadata={"spacing": 9.0, "unit": "mm"})
    res = convert(c, args, work, "stack", {"store": d, "format": "tiff"})
    if res:
        check_geometry(c, "stack", res, vol, [3.0, 0.5, 0.5], "micrometer", "imagej", "imagej")


def multipage(path, vol, **kw):
    with tf().TiffWriter(path) as w:
        for z in range(vol.shape[0]):
            w.write(vol[z], contiguous=False, **kw)
    return path


def group_resolution(c, args, work):
    vol = volume()
    p = multipage(os.path.join(work, "dpi.tif"), vol, resolution=(254, 254),
                  resolutionunit="INCH")
    res = convert(c, args, work, "dpi", {"store": p})
    if res:
        x = 2.54 / 254
        check_geometry(c, "dpi", res, vol, [x, x, x], "centimeter", "tiff-resolution",
                       "tiff-resolution")
    p = multipage(os.path.join(work, "cm.tif"), vol, resolution=(400, 200),
                  resolutionunit="CENTIMETER")
    res = convert(c, args, work, "cm", {"store": p})
    if res:
        check_geometry(c, "cm", res, vol, [1 / 400, 1 / 200, 1 / 400], "centimeter",
                       "tiff-resolution", "tiff-resolution")
    p = multipage(os.path.join(work, "plain.tif"), vol)  # tifffile: 1 pixel per no unit
    res = convert(c, args, work, "plain", {"store": p})
    if res:
        rep, ms, _ = res
        c.check("plain: scale 1, no unit, geometry_from default",
                scales(ms)[0] == [1.0, 1.0, 1.0] and all("unit" not in a for a in ms["axes"]) and
                rep["input"].get("geometry_from") == {"spacing": "default", "unit": "default",
                                                      "origin": "default"},
                (scales(ms), ms["axes"], rep["input"].get("geometry_from")))


def group_override(c, args, work):
    vol = volume()
    p = imagej_file(os.path.join(work, "ij.tif"), vol, (2.0, 2.0), 2.0, "um")
    res = convert(c, args, work, "given", {"store": p, "spacing": [3.0, 1.0, 1.0],
                                           "unit": "millimeter"})
    if res:
        check_geometry(c, "given", res, vol, [3.0, 1.0, 1.0], "millimeter", "config", "config")
    res = convert(c, args, work, "unit_only", {"store": p, "unit": "nanometer"})
    if res:
        check_geometry(c, "unit_only", res, vol, [2000.0, 500.0, 500.0], "nanometer", "imagej",
                       "config")


def group_ome_zarr(c, args, work):
    vol = volume()
    p = imagej_file(os.path.join(work, "ij.tif"), vol, (2.0, 2.0), 2.0, "um")
    res = convert(c, args, work, "src", {"store": p})
    if not res:
        return
    src = res[2]
    for unit, want, dropped in (("um", "micrometer", None), ("furlong", None, "furlong")):
        img = os.path.join(work, f"img_{unit}.zarr")
        shutil.copytree(src, img)
        zj = os.path.join(img, "zarr.json")
        doc = json.load(open(zj))
        for a in doc["attributes"]["ome"]["multiscales"][0]["axes"]:
            a["unit"] = unit
        doc["attributes"].get("shardmill", {}).pop("unit", None)
        json.dump(doc, open(zj, "w"))
        res = convert(c, args, work, f"from_{unit}", {"store": img, "array": "0"},
                      extra={"histogram": {"bins": 256, "range": [0.0, 16.0]}})  # float32 in
        if not res:
            continue
        rep, ms, _ = res
        axes = [a.get("unit") for a in ms["axes"]]
        g, f = rep["input"].get("geometry", {}), rep["input"].get("geometry_from", {})
        c.check(f"from_{unit}: axes unit {want}, scale [2, 0.5, 0.5] from ome-zarr",
                axes == [want] * 3 and scales(ms)[0] == [2.0, 0.5, 0.5] and
                f.get("spacing") == "ome-zarr", (axes, scales(ms)[0], f))
        c.check(f"from_{unit}: report unit {want} from {'ome-zarr' if want else 'default'}, "
                f"unit_dropped {dropped}",
                g.get("unit") == want and g.get("unit_dropped") == dropped and
                f.get("unit") == ("ome-zarr" if want else "default"), (g, f))


GROUPS = {"imagej": group_imagej, "ome": group_ome, "stack": group_stack,
          "resolution": group_resolution, "override": group_override, "ome_zarr": group_ome_zarr}


def main():
    return cc.group_main("convert.tiff_geometry", GROUPS, no_node=tuple(GROUPS))


if __name__ == "__main__":
    cc.main_guard(main)
