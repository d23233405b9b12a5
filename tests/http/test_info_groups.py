#!/usr/bin/python3
"""`shardmill info` on groups (issue 10), from files and through nginx.

- An OME-Zarr 0.4 image written by zarr-python 2.13 (Zarr v2: .zgroup, .zattrs "multiscales"),
  three levels with scale transforms (and a translation on level 0), and a v2 subgroup.
- An OME-Zarr 0.5 image written here by hand (Zarr v3: zarr.json files, attributes "ome"), two
  levels, and a v3 subgroup.

Checked field by field: every member of a listed group carries zarr_format and node_type (v3
members read it from their zarr.json, like v2 ones from .zarray/.zgroup); "multiscales" gives each
level's path, shape and dtype (from the level's own metadata) and scale (from the dataset's
coordinateTransformations). Over HTTP, which cannot list, "members" are the arrays the metadata
names. Expected values come from what this script wrote, not from shardmill.

Usage: /usr/bin/python3 test_info_groups.py --shardmill BIN
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import zarr

from shardmill_test.checks import Checks
from shardmill_test.nginx_server import NginxServer

C = Checks("http.info_groups")


def check(what, got, want):
    """got == want, one check line (the info fields of a group or array)."""
    return C.check(what, got == want, f"got {got!r}, want {want!r}")


V2_LEVELS = [("0", (16, 32, 40), [2.0, 0.5, 0.5]),
             ("1", (8, 16, 20), [4.0, 1.0, 1.0]),
             ("2", (4, 8, 10), [8.0, 2.0, 2.0])]
V2_TRANSLATION = [10.0, -3.5, 0.25]
V3_LEVELS = [("s0", (6, 12, 14), [1.5, 0.9, 0.8]),
             ("s1", (3, 6, 7), [3.0, 1.8, 1.6])]


def write_v2_ome(root):
    g = zarr.open_group(root, mode="w")
    for path, shape, _ in V2_LEVELS:
        a = g.create_dataset(path, shape=shape, chunks=(4, 8, 8), dtype="<u2")
        a[...] = np.arange(np.prod(shape), dtype=np.uint16).reshape(shape)
    g.create_group("labels")
    axes = [{"name": n, "type": "space", "unit": "millimeter"} for n in "zyx"]
    datasets = []
    for i, (path, _, scale) in enumerate(V2_LEVELS):
        ct = [{"type": "scale", "scale": scale}]
        if i == 0:
            ct.append({"type": "translation", "translation": V2_TRANSLATION})
        datasets.append({"path": path, "coordinateTransformations": ct})
    g.attrs["multiscales"] = [{"version": "0.4", "name": "ct", "axes": axes,
                               "datasets": datasets}]


def v3_array(shape, dtype):
    return {"zarr_format": 3, "node_type": "array", "shape": list(shape), "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 4, 4]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "dimension_names": ["z", "y", "x"]}


def write_json(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f)


def write_v3_ome(root):
    axes = [{"name": n, "type": "space", "unit": "micrometer"} for n in "zyx"]
    datasets = [{"path": p, "coordinateTransformations": [{"type": "scale", "scale": s}]}
                for p, _, s in V3_LEVELS]
    write_json(os.path.join(root, "zarr.json"), {
        "zarr_format": 3, "node_type": "group",
        "attributes": {"ome": {"version": "0.5", "multiscales": [
            {"name": "mri", "axes": axes, "datasets": datasets}]}}})
    for p, shape, _ in V3_LEVELS:
        write_json(os.path.join(root, p, "zarr.json"), v3_array(shape, "float32"))
    write_json(os.path.join(root, "extra", "zarr.json"),
               {"zarr_format": 3, "node_type": "group", "attributes": {}})


def info(shardmill, store):
    p = subprocess.run([shardmill, "info", store], capture_output=True, timeout=60)
    if p.returncode != 0:
        C.check(f"info {store} exits 0", False, f"exit {p.returncode}: {p.stderr.decode()!r}")
        return {}
    return json.loads(p.stdout)


def check_levels(tag, d, levels, dtype, version, translation0=None):
    ms = d.get("multiscales")
    if not C.check(f"{tag}: one multiscales entry", isinstance(ms, list) and len(ms) == 1, ms):
        return
    check(f"{tag} version", ms[0].get("version"), version)
    got = ms[0].get("levels", [])
    check(f"{tag} level count", len(got), len(levels))
    for i, ((path, shape, scale), lv) in enumerate(zip(levels, got)):
        check(f"{tag} level {i} path", lv.get("path"), path)
        check(f"{tag} level {i} shape", lv.get("shape"), list(shape))
        check(f"{tag} level {i} dtype", lv.get("dtype"), dtype)
        check(f"{tag} level {i} scale", lv.get("scale"), scale)
        if i == 0 and translation0 is not None:
            check(f"{tag} level 0 translation", lv.get("translation"), translation0)
        else:
            C.check(f"{tag} level {i}: no translation", "translation" not in lv,
                    lv.get("translation"))


def members(d):
    return sorted((m.get("path"), m.get("zarr_format"), m.get("node_type"))
                  for m in d.get("members", []))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sm_info_groups_") as tmp:
        v2 = os.path.join(tmp, "v2_ome.zarr")
        v3 = os.path.join(tmp, "v3_ome.zarr")
        write_v2_ome(v2)
        write_v3_ome(v3)
        with NginxServer(tmp) as srv:
            for via, base in (("file", tmp), ("http", srv.url)):
                d = info(a.shardmill, f"{base}/v2_ome.zarr")
                check(f"{via} v2 node_type", d.get("node_type"), "group")
                check(f"{via} v2 zarr_format", d.get("zarr_format"), 2)
                check_levels(f"{via} v2", d, V2_LEVELS, "uint16", "0.4", V2_TRANSLATION)
                want = [(p, 2, "array") for p, _, _ in V2_LEVELS]
                if via == "file":
                    want.append(("labels", 2, "group"))
                check(f"{via} v2 members", members(d), sorted(want))

                d = info(a.shardmill, f"{base}/v3_ome.zarr")
                check(f"{via} v3 node_type", d.get("node_type"), "group")
                check(f"{via} v3 zarr_format", d.get("zarr_format"), 3)
                check_levels(f"{via} v3", d, V3_LEVELS, "float32", "0.5")
                want = [(p, 3, "array") for p, _, _ in V3_LEVELS]
                if via == "file":
                    want.append(("extra", 3, "group"))
                check(f"{via} v3 members", members(d), sorted(want))
                # a level addressed by its path inside the group is an array
                lv = info(a.shardmill, f"{base}/v3_ome.zarr/s1")
                check(f"{via} v3 s1 shape", lv.get("shape"), list(V3_LEVELS[1][1]))
    return C.done()


if __name__ == "__main__":
    sys.exit(main())
