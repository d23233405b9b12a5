#!/usr/bin/python3
"""An OME-NGFF 0.5 image checker written from the specification
(https://ngff.openmicroscopy.org/0.5/, "multiscales", "axes", "coordinateTransformations",
"omero"), independent of shardmill's code: it reads the image's zarr.json documents and lists
every rule an image breaks.

Checked:
  group      zarr.json: zarr_format 3, node_type group, attributes.ome.version "0.5", one or more
             multiscales; no `version` inside a multiscales entry (0.5 moved it to `ome`).
  axes       2..5 entries, unique names, type space/time/channel (or custom), 2 or 3 space axes,
             time first, then channel, then space; a space unit from the UDUNITS-2 list the spec
             gives, a time unit from its list.
  datasets   at least one; each a `path` string and `coordinateTransformations`: exactly one
             scale first, then at most one translation, nothing else; every vector one number per
             axis; scales > 0.
  omero      (optional) channels list; each channel a window {start, end, min, max} of numbers
             with min <= start <= end <= max, color a 6-hex-digit string, active boolean, label
             string.
  cross-file every dataset path is a Zarr v3 array with as many dimensions as axes and
             `dimension_names` equal to the axis names; levels ordered largest first; per axis
             the scale never shrinks, and with r = scale_k / scale_(k-1) an integer factor the
             shape is ceil(shape_(k-1) / r) (one scale per axis, shapes and scales consistent);
             the translation, when given, keeps voxel centres aligned:
             t_k = t_0 + (scale_k - scale_0) / 2 (t_0 = 0 when level 0 has none).
  metadata   (optional) `type` a string; `metadata.method` an identifier (no spaces).
Usage: ome_ngff_check.py IMAGE_DIR...   (exit 1 and one line per problem when a rule is broken)
"""

import json
import math
import os
import re
import sys

SPACE_UNITS = {
    "angstrom", "attometer", "centimeter", "decimeter", "exameter", "femtometer", "foot",
    "gigameter", "hectometer", "inch", "kilometer", "megameter", "meter", "micrometer", "mile",
    "millimeter", "nanometer", "parsec", "petameter", "picometer", "terameter", "yard",
    "yoctometer", "yottameter", "zeptometer", "zettameter"}
TIME_UNITS = {
    "attosecond", "centisecond", "day", "decisecond", "exasecond", "femtosecond", "gigasecond",
    "hectosecond", "hour", "kilosecond", "megasecond", "microsecond", "millisecond", "minute",
    "nanosecond", "petasecond", "picosecond", "second", "terasecond", "yoctosecond",
    "yottasecond", "zeptosecond", "zettasecond"}


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _load(path):
    try:
        with open(path) as f:
            return json.load(f), None
    except (OSError, ValueError) as e:
        return None, f"{path}: {e}"


def check_axes(axes, bad):
    if not isinstance(axes, list) or not 2 <= len(axes) <= 5:
        bad.append(f"axes: a list of 2 to 5 axes, got {axes!r}")
        return []
    names, kinds = [], []
    for i, a in enumerate(axes):
        if not isinstance(a, dict) or not isinstance(a.get("name"), str) or not a["name"]:
            bad.append(f"axes[{i}]: an object with a non-empty string name, got {a!r}")
            continue
        names.append(a["name"])
        t = a.get("type")
        if t is not None and not isinstance(t, str):
            bad.append(f"axes[{i}].type: a string, got {t!r}")
        kinds.append(t)
        unit = a.get("unit")
        if unit is not None:
            if t == "space" and unit not in SPACE_UNITS:
                bad.append(f"axes[{i}].unit {unit!r}: not a UDUNITS-2 space unit of the spec")
            if t == "time" and unit not in TIME_UNITS:
                bad.append(f"axes[{i}].unit {unit!r}: not a UDUNITS-2 time unit of the spec")
    if len(set(names)) != len(names):
        bad.append(f"axes: names must be unique, got {names}")
    nspace = kinds.count("space")
    if not 2 <= nspace <= 3:
        bad.append(f"axes: 2 or 3 axes of type space, got {nspace}")
    if kinds.count("time") > 1:
        bad.append("axes: at most one time axis")
    order = {"time": 0, "channel": 1, "space": 3}
    ranks = [order.get(k, 2) for k in kinds]
    if ranks != sorted(ranks):
        bad.append(f"axes: time first, then channel or custom, then space; got {kinds}")
    return names


def check_transforms(ct, nd, where, bad):
    """-> (scale, translation or None), or (None, None)."""
    if not isinstance(ct, list) or not ct:
        bad.append(f"{where}.coordinateTransformations: a non-empty list, got {ct!r}")
        return None, None
    types = [t.get("type") if isinstance(t, dict) else None for t in ct]
    if types not in (["scale"], ["scale", "translation"]):
        bad.append(f"{where}.coordinateTransformations: exactly one scale, then at most one "
                   f"translation; got types {types}")
        return None, None
    vals = []
    for t, name in zip(ct, types):
        v = t.get(name)
        if "path" in t:
            bad.append(f"{where}: a {name} by path is not supported here")
        if not isinstance(v, list) or len(v) != nd or not all(_num(x) for x in v):
            bad.append(f"{where}.{name}: {nd} finite numbers (one per axis), got {v!r}")
            return None, None
        vals.append(v)
    if any(x <= 0 for x in vals[0]):
        bad.append(f"{where}.scale: every value > 0, got {vals[0]}")
    return vals[0], (vals[1] if len(vals) > 1 else None)


def check_omero(om, bad):
    if not isinstance(om, dict) or not isinstance(om.get("channels"), list):
        bad.append(f"omero: an object with a channels list, got {om!r}")
        return
    for i, ch in enumerate(om["channels"]):
        w = ch.get("window") if isinstance(ch, dict) else None
        if not isinstance(w, dict) or not all(_num(w.get(k)) for k in
                                              ("start", "end", "min", "max")):
            bad.append(f"omero.channels[{i}].window: numbers start, end, min, max; got {w!r}")
        elif not w["min"] <= w["start"] <= w["end"] <= w["max"]:
            bad.append(f"omero.channels[{i}].window: min <= start <= end <= max, got {w}")
        color = ch.get("color") if isinstance(ch, dict) else None
        if not isinstance(color, str) or not re.fullmatch(r"[0-9A-Fa-f]{6}", color):
            bad.append(f"omero.channels[{i}].color: 6 hex digits RRGGBB, got {color!r}")
        if isinstance(ch, dict) and "active" in ch and not isinstance(ch["active"], bool):
            bad.append(f"omero.channels[{i}].active: a boolean, got {ch['active']!r}")
        if isinstance(ch, dict) and "label" in ch and not isinstance(ch["label"], str):
            bad.append(f"omero.channels[{i}].label: a string, got {ch['label']!r}")


def check_levels(image, names, levels, bad):
    """levels: [(path, scale, translation)] -> cross-file rules against each array's zarr.json."""
    nd = len(names)
    shapes = []
    for path, _, _ in levels:
        meta, e = _load(os.path.join(image, *path.split("/"), "zarr.json"))
        if meta is None:
            bad.append(f"dataset {path}: {e}")
            return
        if meta.get("zarr_format") != 3 or meta.get("node_type") != "array":
            bad.append(f"dataset {path}: not a Zarr v3 array")
            return
        shape = meta.get("shape")
        if not isinstance(shape, list) or len(shape) != nd:
            bad.append(f"dataset {path}: shape {shape} has not {nd} dimensions (the axes)")
            return
        if meta.get("dimension_names") != names:
            bad.append(f"dataset {path}: dimension_names {meta.get('dimension_names')} != axes "
                       f"{names}")
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
    """Every broken rule of the OME-Zarr 0.5 image at `image`, as strings (empty: conformant)."""
    bad = []
    g, e = _load(os.path.join(image, "zarr.json"))
    if g is None:
        return [e]
    if g.get("zarr_format") != 3 or g.get("node_type") != "group":
        bad.append("zarr.json: a Zarr v3 group (zarr_format 3, node_type group)")
    ome = (g.get("attributes") or {}).get("ome")
    if not isinstance(ome, dict):
        return bad + ["zarr.json: attributes.ome missing"]
    if ome.get("version") != "0.5":
        bad.append(f"attributes.ome.version: \"0.5\", got {ome.get('version')!r}")
    mss = ome.get("multiscales")
    if not isinstance(mss, list) or not mss:
        return bad + ["attributes.ome.multiscales: a non-empty list"]
    if "omero" in ome:
        check_omero(ome["omero"], bad)
    for i, ms in enumerate(mss):
        where = f"multiscales[{i}]"
        if "version" in ms:
            bad.append(f"{where}: no version (0.5 keeps it in attributes.ome)")
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
    return c.check(f"{label or image}: OME-NGFF 0.5 rules (tests/lib/shardmill_test/ome_ngff_check.py)",
                   not bad, "; ".join(bad[:6]))


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
