#!/usr/bin/python3
"""An OME-NGFF 0.4 image checker written from the specification
(https://ngff.openmicroscopy.org/0.4/, "multiscales", "axes", "coordinateTransformations",
"omero", and its Zarr v2 storage), independent of shardmill's code: it reads the image's .zgroup,
.zattrs and .zarray documents and lists every rule an image breaks. The axes, transformation and
omero rules are those 0.4 introduced and 0.5 kept, so they are shared with ome_ngff_check.py.

Checked:
  group      .zgroup: zarr_format 2; .zattrs: one or more `multiscales` at the top level (0.4 has
             no `ome` member), each with `version` "0.4"; no zarr.json beside them (a Zarr v3
             reader would see another image).
  axes       as 0.5 (2..5, unique names, types, 2 or 3 space axes, time, channel, space order,
             UDUNITS-2 units).
  datasets   at least one; each a `path` and `coordinateTransformations`: exactly one scale first,
             then at most one translation; one number per axis; scales > 0.
  omero      (optional, top level of .zattrs) channels with a window min <= start <= end <= max,
             a 6-hex-digit color, boolean active, string label.
  cross-file every dataset path is a Zarr v2 array (.zarray zarr_format 2) with as many
             dimensions as axes, `dimension_separator` "/" (0.4: nested chunk keys), `order`
             "C" or "F", `chunks` one positive extent per axis, no filters it cannot name;
             levels ordered largest first; per axis the scale never shrinks, and with
             r = scale_k / scale_(k-1) an integer factor the shape is ceil(shape_(k-1) / r); a
             translation keeps voxel centres aligned: t_k = t_0 + (scale_k - scale_0) / 2.
  metadata   (optional) `type` a string; `metadata.method` an identifier.
Usage: ome_ngff_check04.py IMAGE_DIR...   (exit 1 and one line per problem when a rule is broken)
"""

import os
import re
import sys

from shardmill_test.ome_ngff_check import _load, check_axes, check_omero, check_transforms


def check_levels(image, names, levels, bad):
    """levels: [(path, scale, translation)] -> cross-file rules against each .zarray."""
    nd = len(names)
    shapes = []
    for path, _, _ in levels:
        if os.path.exists(os.path.join(image, *path.split("/"), "zarr.json")):
            bad.append(f"dataset {path}: a zarr.json beside .zarray (two Zarr versions)")
        meta, e = _load(os.path.join(image, *path.split("/"), ".zarray"))
        if meta is None:
            bad.append(f"dataset {path}: {e}")
            return
        if meta.get("zarr_format") != 2:
            bad.append(f"dataset {path}: not a Zarr v2 array (.zarray zarr_format 2)")
            return
        shape, chunks = meta.get("shape"), meta.get("chunks")
        if not isinstance(shape, list) or len(shape) != nd:
            bad.append(f"dataset {path}: shape {shape} has not {nd} dimensions (the axes)")
            return
        if (not isinstance(chunks, list) or len(chunks) != nd or
                not all(isinstance(x, int) and x > 0 for x in chunks)):
            bad.append(f"dataset {path}: chunks {chunks}: {nd} positive extents")
        if meta.get("dimension_separator") != "/":
            bad.append(f"dataset {path}: dimension_separator {meta.get('dimension_separator')!r}"
                       f", 0.4 stores chunks nested: \"/\"")
        if meta.get("order") not in ("C", "F"):
            bad.append(f"dataset {path}: order {meta.get('order')!r} (C or F)")
        if meta.get("filters") not in (None, []):
            bad.append(f"dataset {path}: filters {meta.get('filters')!r} (none expected)")
        shapes.append(shape)
    s0, t0 = levels[0][1], levels[0][2] or [0.0] * nd
    for k in range(1, len(levels)):
        (pp, ps, _), (p, s, t) = levels[k - 1], levels[k]
        for d in range(nd):
            r = s[d] / ps[d]
            if r < 1 - 1e-9 or abs(r - round(r)) > 1e-6:
                bad.append(f"dataset {p} axis {names[d]}: scale {s[d]} is not an integer "
                           f"multiple of level {pp}'s {ps[d]}")
                continue
            want = -(-shapes[k - 1][d] // int(round(r)))
            if shapes[k][d] != want:
                bad.append(f"dataset {p} axis {names[d]}: shape {shapes[k][d]} != "
                           f"ceil({shapes[k - 1][d]} / {int(round(r))}) = {want}")
            if shapes[k][d] > shapes[k - 1][d]:
                bad.append(f"dataset {p}: larger than {pp} (levels largest first)")
            if t is not None:
                tw = t0[d] + (s[d] - s0[d]) / 2
                if abs(t[d] - tw) > 1e-9 * max(1.0, abs(tw)):
                    bad.append(f"dataset {p} axis {names[d]}: translation {t[d]} does not keep "
                               f"voxel centres aligned (want {tw})")


def check_image(image):
    """Every broken rule of the OME-NGFF 0.4 image at `image`, as strings (empty: conformant)."""
    bad = []
    zg, e = _load(os.path.join(image, ".zgroup"))
    if zg is None:
        return [e]
    if zg.get("zarr_format") != 2:
        bad.append(f".zgroup: zarr_format 2, got {zg.get('zarr_format')!r}")
    if os.path.exists(os.path.join(image, "zarr.json")):
        bad.append("zarr.json beside .zgroup (a Zarr v3 reader would see another image)")
    g, e = _load(os.path.join(image, ".zattrs"))
    if g is None:
        return bad + [e]
    if "ome" in g:
        bad.append(".zattrs: an `ome` member (0.5's layout), 0.4 keeps multiscales at the top")
    mss = g.get("multiscales")
    if not isinstance(mss, list) or not mss:
        return bad + [".zattrs: multiscales, a non-empty list"]
    if "omero" in g:
        check_omero(g["omero"], bad)
    for i, ms in enumerate(mss):
        where = f"multiscales[{i}]"
        if not isinstance(ms, dict):
            bad.append(f"{where}: an object")
            continue
        if ms.get("version") != "0.4":
            bad.append(f"{where}.version: \"0.4\", got {ms.get('version')!r}")
        if "name" in ms and not isinstance(ms["name"], str):
            bad.append(f"{where}.name: a string")
        if "type" in ms and not isinstance(ms["type"], str):
            bad.append(f"{where}.type: a string")
        md = ms.get("metadata")
        if isinstance(md, dict) and "method" in md and (
                not isinstance(md["method"], str) or not re.fullmatch(r"[\w.:-]+", md["method"])):
            bad.append(f"{where}.metadata.method: an identifier, got {md['method']!r}")
        names = check_axes(ms.get("axes"), bad)
        ds = ms.get("datasets")
        if not isinstance(ds, list) or not ds:
            bad.append(f"{where}.datasets: a non-empty list")
            continue
        levels = []
        for k, d in enumerate(ds):
            if not isinstance(d, dict) or not isinstance(d.get("path"), str):
                bad.append(f"{where}.datasets[{k}]: an object with a string path")
                continue
            sc, tr = check_transforms(d.get("coordinateTransformations"), len(names),
                                      f"{where}.datasets[{k}]", bad)
            if sc is not None:
                levels.append((d["path"], sc, tr))
        if names and len(levels) == len(ds):
            check_levels(image, names, levels, bad)
    return bad


def check(c, image, label=None):
    """For tests: one c.check per image (c: a shardmill_test.checks.Checks)."""
    bad = check_image(image)
    return c.check(f"{label or image}: OME-NGFF 0.4 rules "
                   f"(tests/lib/shardmill_test/ome_ngff_check04.py)", not bad, "; ".join(bad[:6]))


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    rc = 0
    for image in sys.argv[1:]:
        for b in check_image(image):
            print(f"{image}: {b}")
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
