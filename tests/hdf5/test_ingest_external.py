"""HDF5 ingest input whose data lies outside the input file (issue 19 item 6; SPEC §2,
`input.hdf5.allow_external`): files written by h5py (Debian python3-h5py, HDF5 1.10).

Usage: /usr/bin/python3 test_ingest_external.py --shardmill BIN --work DIR --group GROUP
Groups (one ctest each, label `hdf5`):
  refused  without input.hdf5.allow_external: external storage in a mode-600 file of another
           directory (absolute and relative name), an external link as the dataset, as a group on
           its path and reached through a soft link, a virtual dataset with a source in another
           file, and one whose same-file (".") source lies behind an external link: exit 3, one
           error line naming the input file, the dataset and what lies outside, no output; a
           virtual dataset with only same-file sources and a soft link inside the file are read
           (exit 0, values), also with `allow_external: false` spelt out
  allowed  the same inputs with `input.hdf5.allow_external: true`: exit 0 and the values bit for
           bit (a relative external file found next to the HDF5 file, not in the working
           directory)
"""

import json
import os
import shutil

import numpy as np

from shardmill_test import ingest as ti
from shardmill_test import runner as cc

SHAPE = (4, 5, 6)
LAYOUT = ((4, 8, 8), (2, 4, 4))


def h5py():
    import h5py as h
    return h


def make_inputs(work):
    """The inputs of both groups, the volume they hold and the bytes kept outside."""
    h = h5py()
    vol = (np.arange(np.prod(SHAPE), dtype=np.uint16).reshape(SHAPE) * 7 + 12345)
    secret_dir = os.path.join(work, "elsewhere")
    os.makedirs(secret_dir, mode=0o700, exist_ok=True)
    secret = os.path.join(secret_dir, "secret.raw")
    with open(secret, "wb") as f:
        f.write(vol.tobytes())
    os.chmod(secret, 0o600)
    inputs = os.path.join(work, "inputs")
    os.makedirs(inputs, exist_ok=True)
    # a relative external file lies next to the HDF5 file; the working directory has none
    shutil.copy(secret, os.path.join(inputs, "side.raw"))
    os.chmod(os.path.join(inputs, "side.raw"), 0o600)
    with h.File(os.path.join(inputs, "target.h5"), "w") as f:
        f["/grp/data"] = vol
    p = {k: os.path.join(inputs, k + ".h5") for k in ("extabs", "extrel", "elink", "vds")}
    with h.File(p["extabs"], "w") as f:
        f.create_dataset("/data", shape=SHAPE, dtype=vol.dtype,
                         external=[(secret, 0, vol.nbytes)])
    with h.File(p["extrel"], "w") as f:
        f.create_dataset("/data", shape=SHAPE, dtype=vol.dtype,
                         external=[("side.raw", 0, vol.nbytes)])
    with h.File(p["elink"], "w") as f:
        f["/data"] = h.ExternalLink("target.h5", "/grp/data")
        f["/grp"] = h.ExternalLink("target.h5", "/grp")
        f["/soft"] = h.SoftLink("/grp")
        f["/inside/data"] = vol
        f["/alias"] = h.SoftLink("/inside")
    with h.File(p["vds"], "w") as f:
        lay = h.VirtualLayout(shape=SHAPE, dtype=vol.dtype)
        lay[:] = h.VirtualSource("target.h5", "/grp/data", shape=SHAPE)
        f.create_virtual_dataset("/other_file", lay)
        f["/local"] = vol
        same = h.VirtualLayout(shape=SHAPE, dtype=vol.dtype)
        same[:] = h.VirtualSource(f["/local"])
        f.create_virtual_dataset("/same_file", same)
        f["/grp"] = h.ExternalLink("target.h5", "/grp")
        behind = h.VirtualLayout(shape=SHAPE, dtype=vol.dtype)
        behind[:] = h.VirtualSource(".", "/grp/data", shape=SHAPE)
        f.create_virtual_dataset("/same_file_behind_link", behind)
    return vol, secret, p


# (label, input, dataset, words the error line names besides the file and the dataset)
OUTSIDE = [
    ("external_storage_mode600", "extabs", "/data", ["external storage", "secret.raw"]),
    ("external_storage_relative", "extrel", "/data", ["external storage", "side.raw"]),
    ("external_link_dataset", "elink", "/data", ["external link", "target.h5"]),
    ("external_link_group", "elink", "/grp/data", ["external link", "target.h5", "/grp"]),
    ("external_link_via_soft", "elink", "/soft/data", ["external link", "target.h5", "/soft"]),
    ("virtual_other_file", "vds", "/other_file", ["virtual dataset", "target.h5"]),
    ("virtual_source_behind_link", "vds", "/same_file_behind_link",
     ["external link", "target.h5", "/grp"]),
]
INSIDE = [
    ("virtual_same_file", "vds", "/same_file"),
    ("soft_link_inside", "elink", "/alias/data"),
]


def config(work, label, store, dataset, allow):
    out = os.path.join(work, label + ".zarr")
    shutil.rmtree(out, ignore_errors=True)
    h5 = {"dataset": dataset}
    if allow is not None:
        h5["allow_external"] = allow
    extra = {"input": {"hdf5": h5},
             "output": {"shard": list(LAYOUT[0]), "chunk": list(LAYOUT[1])}}
    return ti.ingest_config(os.path.join(work, label + ".yaml"), store, out, fmt="hdf5",
                            extra=extra), out


def run_ok(c, args, work, label, store, dataset, vol, allow):
    cfg, out = config(work, label, store, dataset, allow)
    rep_path = os.path.join(work, label + ".report.json")
    r = cc.run([args.shardmill, "run", cfg, "--report", rep_path], cwd=work)
    if not c.check(f"{label}: exit 0", r.returncode == 0, cc.describe(r)):
        return
    ti.check_ingested(c, args, work, label, out, vol, json.load(open(rep_path)), fmt="hdf5",
                      layout=LAYOUT)


def group_refused(c, args, work):
    vol, secret, p = make_inputs(work)
    for label, key, dataset, names in OUTSIDE:
        for allow in (None, False):
            lab = label + ("" if allow is None else "_false")
            cfg, out = config(work, lab, p[key], dataset, allow)
            r = cc.run([args.shardmill, "run", cfg], cwd=work)
            lines = cc.one_error_line(r.stderr)
            c.check(f"{lab}: exit 3", r.returncode == 3, cc.describe(r))
            want = [os.path.basename(p[key]), dataset, "input.hdf5.allow_external"] + names
            c.check(f"{lab}: one error line naming {want}",
                    len(lines) == 1 and lines[0].startswith("shardmill: error: ") and
                    all(w in lines[0] for w in want), lines)
            c.check(f"{lab}: no output written", not os.path.exists(out),
                    os.listdir(out) if os.path.isdir(out) else "")
    for label, key, dataset in INSIDE:
        run_ok(c, args, work, label, p[key], dataset, vol, None)
    run_ok(c, args, work, "plain_allow_false", p["elink"], "/inside/data", vol, False)


def group_allowed(c, args, work):
    vol, secret, p = make_inputs(work)
    for label, key, dataset, _ in OUTSIDE:
        run_ok(c, args, work, label + "_allowed", p[key], dataset, vol, True)
    for label, key, dataset in INSIDE:
        run_ok(c, args, work, label + "_allowed", p[key], dataset, vol, True)


GROUPS = {"refused": group_refused, "allowed": group_allowed}


def main():
    return cc.group_main("hdf5.ingest_external", GROUPS, no_node=tuple(GROUPS))


if __name__ == "__main__":
    cc.main_guard(main)
