#!/usr/bin/python3
"""OME-Zarr output of convert (SPEC §2 "OME-Zarr output", §6 marker, issue 13).

Cases:
  levels    an odd-shaped ROI (edge blocks of 1, 2 and 4 children) with output.ome.levels 4:
            every level read by zarrita.js equals the NumPy reference of SPEC §2 (float64 sums of
            the float32 values of each 2x2x2 block in C order, divided by the count, rounded
            once) bit for bit; the group and level zarr.json against OME-Zarr 0.5 field by field;
            the marker covers every level; `verify` passes and catches a damaged level-2 shard;
            `info` shows the group; levels: auto; a bad levels value is refused.
  identity  the output tree is byte-identical for 1 and 2 threads and (when --mpiexec is given)
            mpirun -n 2 and 3.
  resume    a run stopped by SIGKILL while level 2 is being written (no marker, verify fails)
            and resumed gives the same tree as a clean run.
  spacing   input.spacing/unit/origin reach scale and translation exactly (also through
            @fideus-labs/ngff-zarr); an OME-Zarr input's own scale is the default.
  ingest    ingest with output.ome: NIfTI pixdim/units/origin and raw input.spacing reach the
            OME scale exactly; uint16 levels are the means rounded half to even.
  anisotropic  the real CT (1.5 x 0.957 x 0.957 mm) straight from its raw file: downsample auto
            gives [108,256,256] -> [108,128,128] -> [54,64,64], `all` halves every axis, `yx`
            gives [108,128,128] -> [108,64,64] (z never halved); shapes, scales and translations
            against an independent Python statement of the rule, every level (decoded from the
            Zarr v3 spec) against the NumPy mean over its blocks, ngff-zarr reads them.
  nearest   output.ome.method nearest on a uint16 label volume: every level is the first voxel
            of each block (NumPy strides), no value is invented; metadata.method identifiers.
  omero     attributes.ome.omero's window in output values: percentile and scale (float32),
            none with a histogram (the input's p1/p99 by NumPy) and without (the type's range).
  checker   the OME-NGFF 0.5 checker (tests/lib/shardmill_test/ome_ngff_check.py) passes a conformant image
            and names each rule broken in a mutated copy.
  aligned   the one-pass pyramid: automatic shards, 136x264x264 float32 in 1x2x3 level-0 shards;
            levels 1-2 on level 0's grid (made while it is written), 3-4 their own (read back);
            every level == the NumPy mean; 1 and 2 threads and 2 ranks byte-identical; one read
            of each input chunk; a damaged aligned and read-back shard rewritten by resume.
  spill     level 1 of explicit shards made in the write phase (the spill file) and read back
            from level 0 (odd shards, no spill) give the NumPy mean on every level and the same
            bytes; the report names the spill and its size; a run killed in level 1 keeps
            .shardmill/spill-1 and resumes to the clean run's values, with no spill left.
Every OME output a case writes is checked by tests/lib/shardmill_test/ome_ngff_check.py.
Usage: test_convert_ome.py --shardmill BIN --node NODE --work DIR --case CASE [--mpiexec BIN]
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

from shardmill_test import ome_ngff_check as ngff
from shardmill_test import spec_oracle
from shardmill_test import runner as cc
from shardmill_test import zarr_decode
from shardmill_test.checks import Checks
from shardmill_test.ranks import mpi_env, plain_env

HERE = os.path.dirname(os.path.abspath(__file__))

FULL = (41, 47, 57)
ROI_OFF = [2, 1, 3]
ROI = [37, 45, 51]  # odd on every axis: edge blocks of 1, 2 and 4 children
DIVISOR = 4095.0


def make_input(path, seed=5):
    import zarr
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4096, FULL).astype(np.uint16)
    z = zarr.open(path, mode="w", shape=FULL, chunks=(16, 16, 16), dtype="uint16")
    z[:] = a
    return a


def make_input_huge_sum(path):
    """An int16 input, mostly negative (negatives sign-extend to 64 bits, so SPEC §5's sums wrap
    to just below 2^64), whose ROI's weighted checksum, by NumPy, lies above 2^63: the first seed
    from 3 on that gives one. Returns (values, that weighted checksum)."""
    import zarr
    for seed in range(3, 64):
        a = np.random.default_rng(seed).integers(-4096, 1024, FULL).astype(np.int16)
        roi = a[tuple(slice(o, o + n) for o, n in zip(ROI_OFF, ROI))]
        _, w = spec_oracle.checksums(roi, FULL, ROI_OFF)
        if w >= 1 << 63:
            z = zarr.open(path, mode="w", shape=FULL, chunks=(16, 16, 16), dtype="int16")
            z[:] = a
            return a, w
    raise AssertionError("no seed in 3..63 gives a weighted checksum above 2^63")


def job(path, inp, out, levels=4, threads=2, extra=None):
    cfg = {"job": "convert", "input": {"store": inp},
           "roi": {"offset": ROI_OFF, "shape": ROI},
           "histogram": {"bins": 64, "range": [0, 4096]},
           "normalize": {"mode": "scale", "divisor": DIVISOR},
           "output": {"path": out, "shard": [16, 16, 16], "chunk": [8, 8, 8],
                      "ome": {"levels": levels}},
           "parallel": {"threads": threads}, "progress": False}
    for k, v in (extra or {}).items():
        cfg[k] = v
    return cc.write_config(path, cfg)


def ome_levels(shape, spacing, n, mode="auto"):
    """SPEC §2 output.ome.downsample, stated here independently of the engine: per level its
    extents and the cumulative factor of each axis. auto halves the axes whose spacing is below
    3/4 of the level's largest (axes of one voxel left out), every one when none is; yx halves
    the last two axes (y, x) of more than one voxel, never z."""
    cur, f = list(shape), [1] * len(shape)
    out = [(list(cur), list(f))]
    for _ in range(1, n):
        sp = [s * x for s, x in zip(spacing, f)]
        cand = [d for d in range(len(cur)) if cur[d] > 1]
        if mode == "all":
            halve = [True] * len(cur)
        elif mode == "yx":
            halve = [d >= len(cur) - 2 and cur[d] > 1 for d in range(len(cur))]
        else:
            top = max([sp[d] for d in cand], default=0.0)
            halve = [d in cand and sp[d] < 0.75 * top for d in range(len(cur))]
            if not any(halve):
                halve = [d in cand for d in range(len(cur))]
        cur = [(x + 1) // 2 if h else x for x, h in zip(cur, halve)]
        f = [x * 2 if h else x for x, h in zip(f, halve)]
        out.append((list(cur), list(f)))
    return out


def reduce_blocks(a, block, how="mean"):
    """One level from the one above: `nearest` the first voxel of each block (NumPy strides);
    `mean` the float64 sum of the block's float32 values in C order / count, rounded once to the
    type (half to even for integers)."""
    if how == "nearest":
        return a[tuple(slice(None, None, b) for b in block)].copy()
    return spec_oracle.block_mean(a, block)


def pyramid(l0, plan, how="mean"):
    out = [l0]
    for k in range(1, len(plan)):
        block = [f1 // f0 for f0, f1 in zip(plan[k - 1][1], plan[k][1])]
        out.append(reduce_blocks(out[-1], block, how))
    return out


def want_transforms(spacing, factor, origin=None, k=0):
    """scale = spacing x factor; translation (levels >= 1, or an origin) = origin +
    (factor - 1) / 2 x spacing."""
    ct = [{"type": "scale", "scale": [s * f for s, f in zip(spacing, factor)]}]
    if k > 0 or origin is not None:
        o = origin or [0.0] * len(spacing)
        ct.append({"type": "translation",
                   "translation": [a + s * (f - 1) / 2 for a, s, f in zip(o, spacing, factor)]})
    return ct


def reference(a, levels):
    roi = a[tuple(slice(o, o + s) for o, s in zip(ROI_OFF, ROI))]
    l0 = roi.astype(np.float32) / np.float32(DIVISOR)
    return pyramid(l0, ome_levels(ROI, [1.0, 1.0, 1.0], levels))


def check_ome(c, out, nlev, spacing=(1.0, 1.0, 1.0)):
    """OME-Zarr 0.5 (https://ngff.openmicroscopy.org/0.5/) field by field."""
    g = json.load(open(os.path.join(out, "zarr.json")))
    c.check("group zarr.json: zarr_format 3, node_type group",
            g.get("zarr_format") == 3 and g.get("node_type") == "group", g)
    ome = g.get("attributes", {}).get("ome", {})
    c.check("attributes.ome.version == \"0.5\"", ome.get("version") == "0.5", ome.get("version"))
    ms = ome.get("multiscales", [])
    c.check("one multiscales entry", isinstance(ms, list) and len(ms) == 1, ms)
    if not ms:
        return
    m = ms[0]
    c.check("multiscales entry carries no version (0.5 moved it to ome)", "version" not in m, m)
    axes = m.get("axes", [])
    c.check("axes z, y, x of type space",
            [(x.get("name"), x.get("type")) for x in axes] ==
            [("z", "space"), ("y", "space"), ("x", "space")], axes)
    ds = m.get("datasets", [])
    c.check(f"{nlev} datasets with paths 0..{nlev - 1}",
            [d.get("path") for d in ds] == [str(k) for k in range(nlev)], ds)
    for k, d in enumerate(ds):
        ct = d.get("coordinateTransformations", [])
        want = [{"type": "scale", "scale": [s * 2 ** k for s in spacing]}]
        if k > 0:  # voxel centres line up: (2^k - 1) / 2 level-0 voxels in
            want.append({"type": "translation",
                         "translation": [s * (2 ** k - 1) / 2 for s in spacing]})
        c.check(f"level {k} transformations: scale = spacing x 2^{k}, translation from level 1",
                ct == want, ct)
    ngff.check(c, out)
    c.check("provenance next to ome", "shardmill" in g.get("attributes", {}), g.get("attributes"))
    shape = list(ROI)
    for k in range(nlev):
        a = json.load(open(os.path.join(out, str(k), "zarr.json")))
        c.check(f"level {k} zarr.json: array, shape {shape}, float32, dimension_names z,y,x",
                a.get("node_type") == "array" and a.get("shape") == shape and
                a.get("data_type") == "float32" and a.get("dimension_names") == ["z", "y", "x"],
                {x: a.get(x) for x in ("node_type", "shape", "data_type", "dimension_names")})
        shape = [(n + 1) // 2 for n in shape]


def check_ngff(c, args, out, shapes, spacing, unit, scales=None):
    """@fideus-labs/ngff-zarr (an independent OME-Zarr reader, with its schema validation) opens
    the image and lists the levels, their shapes and scales."""
    env = dict(os.environ, SM_ZARRITA_JS=cc.JS_DIR)
    mod = os.path.join(cc.JS_DIR, "node_modules", "@fideus-labs", "ngff-zarr", "package.json")
    if not os.path.exists(mod):
        c.check("@fideus-labs/ngff-zarr installed (scripts/install-deps.sh)", False, mod)
        return
    r = cc.run([args.node, os.path.join(HERE, "js", "ngff_levels.mjs"), out], env=env)
    if not c.check("ngff-zarr opens the image (validate: true)", r.returncode == 0,
                   cc.describe(r)):
        return
    d = json.loads(r.stdout.strip().splitlines()[-1])
    c.check("ngff-zarr: version 0.5, axes z y x space with the unit",
            d.get("version") == "0.5" and d.get("axes") ==
            [[n, "space", unit] for n in ("z", "y", "x")], d.get("axes"))
    got = [(x["path"], x["shape"], x["scale"]) for x in d.get("levels", [])]
    if scales is None:
        scales = [[s * 2 ** k for s in spacing] for k in range(len(shapes))]
    want = [(str(k), shp, scales[k]) for k, shp in enumerate(shapes)]
    c.check(f"ngff-zarr lists {len(shapes)} levels with shapes and scales", got == want,
            f"{got} vs {want}")


def check_marker_levels(c, out, nlev):
    mk = json.load(open(os.path.join(out, "shardmill.complete.json")))
    keys = []
    for k in range(nlev):
        meta = json.load(open(os.path.join(out, str(k), "zarr.json")))
        keys += [f"{k}/{x}" for x in zarr_decode.shard_keys(meta)]
    got = [r.get("key") for r in mk.get("shards", [])]
    c.check(f"marker lists the shards of every level in order ({len(keys)})", got == keys,
            got[:4])
    c.check("marker shard_count", mk.get("shard_count") == len(keys), mk.get("shard_count"))
    bad = [r["key"] for r in mk.get("shards", [])
           if os.path.getsize(os.path.join(out, *r["key"].split("/"))) != r["size"]]
    c.check("marker sizes match the files", not bad, bad[:4])


def case_levels(c, args, work):
    inp = os.path.join(work, "in.zarr")
    a = make_input(inp)
    out = os.path.join(work, "out.zarr")
    cfg = job(os.path.join(work, "job.yaml"), inp, out)
    r = cc.run([args.shardmill, "run", cfg, "--report", os.path.join(work, "rep.json")])
    if not c.check("convert with output.ome.levels 4 exits 0", r.returncode == 0, cc.describe(r)):
        return
    refs = reference(a, 4)
    check_ome(c, out, 4)
    check_marker_levels(c, out, 4)
    err = cc.node_ok(args.node)
    if err is None:
        cc.zarrita_read_all(c, args.node, work, [
            (f"level {k}", os.path.join(out, str(k)), refs[k],
             [([0] * 3, [1, 1, 1]), ([n - 1 for n in refs[k].shape], [1, 1, 1])])
            for k in range(4)])
    else:
        c.check("node with zarrita.js available", False, err)
    for k in range(4):
        cc.shardmill_read(c, args.shardmill, f"level {k}", os.path.join(out, str(k)), refs[k],
                          work)
    if err is None:
        check_ngff(c, args, out, [list(x.shape) for x in refs], [1.0, 1.0, 1.0], None)
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify of the image passes", r.returncode == 0, cc.describe(r) + r.stdout)
    r = cc.run([args.shardmill, "info", out])
    c.check("info on the image exits 0", r.returncode == 0, cc.describe(r))
    if r.returncode == 0:
        lv = json.loads(r.stdout).get("multiscales", [{}])[0].get("levels", [])
        c.check("info lists every level with its shape and scale",
                [(x.get("path"), x.get("shape"), x.get("scale")) for x in lv] ==
                [(str(k), list(refs[k].shape), [float(2 ** k)] * 3) for k in range(4)], lv)
    # damage one level-2 shard: verify must name it
    victim = os.path.join(out, "2", "c", "0", "0", "0")
    data = bytearray(open(victim, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(victim, "wb").write(bytes(data))
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify fails on a damaged level-2 shard, naming it",
            r.returncode == 1 and "2/c/0/0/0" in (r.stdout + r.stderr), cc.describe(r) + r.stdout)
    # resume rewrites exactly that shard and gives the clean bytes back
    r = cc.run([args.shardmill, "run", cfg, "--set", "output.exists=resume", "--report",
                os.path.join(work, "rep2.json")])
    c.check("resume after the damage exits 0", r.returncode == 0, cc.describe(r))
    rep = json.load(open(os.path.join(work, "rep2.json"))) if r.returncode == 0 else {}
    c.check("resume rewrote one shard", rep.get("output", {}).get("written") == 1,
            rep.get("output"))
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify after resume passes", r.returncode == 0, cc.describe(r) + r.stdout)
    # overwrite an image with a plain array (output.ome.method: null): no level is left
    r = cc.run([args.shardmill, "run", cfg, "--set", "output.exists=overwrite", "--set",
                "output.ome.method=null"])
    c.check("overwrite of the image by a plain array exits 0", r.returncode == 0, cc.describe(r))
    left = sorted(os.listdir(out))
    c.check("no level directory left after the overwrite",
            left == ["c", "shardmill.complete.json", "zarr.json"], left)
    # and back: overwrite the plain array with the image, verify
    r = cc.run([args.shardmill, "run", cfg, "--set", "output.exists=overwrite"])
    c.check("overwrite of the plain array by the image exits 0", r.returncode == 0,
            cc.describe(r))
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify after the overwrites passes", r.returncode == 0, cc.describe(r) + r.stdout)
    # levels: auto on a small ROI (largest axis 51 <= 256): one level
    out2 = os.path.join(work, "auto.zarr")
    cfg2 = job(os.path.join(work, "auto.yaml"), inp, out2, levels="auto")
    r = cc.run([args.shardmill, "run", cfg2])
    c.check("levels: auto exits 0", r.returncode == 0, cc.describe(r))
    if r.returncode == 0:
        ds = json.load(open(os.path.join(out2, "zarr.json")))["attributes"]["ome"][
            "multiscales"][0]["datasets"]
        c.check("levels: auto on a 51-voxel ROI makes level 0 only", len(ds) == 1, ds)
    # too many levels for the shape: exit 2 naming the key
    cfg3 = job(os.path.join(work, "bad.yaml"), inp, os.path.join(work, "bad.zarr"), levels=9)
    r = cc.run([args.shardmill, "run", cfg3])
    lines = cc.one_error_line(r.stderr)
    c.check("levels 9 on a 51-voxel ROI: exit 2, one line naming output.ome.levels",
            r.returncode == 2 and len(lines) == 1 and "output.ome.levels" in lines[0],
            cc.describe(r))


def case_spill(c, args, work):
    inp = os.path.join(work, "in.zarr")
    a = make_input(inp, seed=17)
    refs = reference(a, 4)
    trees = {}
    for tag, shard in (("spilled", [16, 16, 16]), ("read back", [15, 15, 15])):
        out = os.path.join(work, tag.replace(" ", "_") + ".zarr")
        rep_path = out + ".json"
        cfg = job(out + ".yaml", inp, out, extra={
            "output": {"path": out, "shard": shard, "chunk": [5, 5, 5] if shard[0] == 15
                       else [8, 8, 8], "ome": {"levels": 4}}})
        r = cc.run([args.shardmill, "run", cfg, "--report", rep_path])
        if not c.check(f"{tag}: shards {shard} convert exits 0", r.returncode == 0,
                       cc.describe(r)):
            return
        for k in range(4):
            got = zarr_decode.spec_decode(os.path.join(out, str(k)))
            c.check(f"{tag}: level {k} == the NumPy mean", spec_oracle.same_bits(got, refs[k]),
                    spec_oracle.first_diff(got, refs[k]))
        spill = json.load(open(rep_path))["output"].get("spill", "absent")
        if tag == "spilled":
            elem = np.dtype(refs[0].dtype).itemsize
            grid = [-(-n // 16) for n in ROI]
            want = {"level": 1, "bytes": grid[0] * grid[1] * grid[2] * 8 * 8 * 8 * elem}
            c.check(f"spilled: the report's output.spill is {want}", spill == want, spill)
        else:
            c.check("read back: odd shards spill nothing (output.spill null)", spill is None,
                    spill)
        c.check(f"{tag}: no .shardmill/ left with the marker",
                not os.path.exists(os.path.join(out, ".shardmill")), sorted(os.listdir(out)))
        trees[tag] = [zarr_decode.spec_decode(os.path.join(out, str(k))) for k in range(4)]
    c.check("the spilled and the read-back images hold the same values on every level",
            len(trees) == 2 and all(np.array_equal(x, y) for x, y in
                                    zip(trees["spilled"], trees["read back"])))
    # a run killed while level 1 is written from the spill: the file is left in .shardmill/ (the
    # output is not complete), and resume spills again and finishes the clean tree
    clean = os.path.join(work, "spilled.zarr")
    extra = {"output": {"path": "out.zarr", "shard": [16, 16, 16], "chunk": [8, 8, 8],
                        "fsync": False, "ome": {"levels": 4}}}
    cfg = job(os.path.join(work, "kill.yaml"), inp, "out.zarr", threads=1, extra=extra)
    rc, after, out, attempt = kill_before_next(args, cfg, work, 1)
    kdir = os.path.dirname(out)
    ok = c.check(f"killed by SIGKILL in level 1, before level 2 ({after} level-1 shards, run "
                 f"{attempt})", rc == -signal.SIGKILL and after >= 1 and
                 level_files(out, 2) == 0, f"exit {rc}")
    if not ok:
        return
    c.check("the killed output keeps .shardmill/spill-1",
            os.path.isfile(os.path.join(out, ".shardmill", "spill-1")))
    r = cc.run([args.shardmill, "run", cfg] + RESUME, cwd=kdir)
    c.check("resume exits 0", r.returncode == 0, cc.describe(r))
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify of the resumed output passes", r.returncode == 0, cc.describe(r))
    for k in range(4):
        got = zarr_decode.spec_decode(os.path.join(out, str(k)))
        want = zarr_decode.spec_decode(os.path.join(clean, str(k)))
        c.check(f"resumed level {k} == the clean run's", np.array_equal(got, want))
    c.check("no .shardmill/ left after the resume",
            not os.path.exists(os.path.join(out, ".shardmill")), sorted(os.listdir(out)))


def case_identity(c, args, work):
    inp = os.path.join(work, "in.zarr")
    make_input(inp, seed=9)
    trees = []
    for threads in (1, 2):
        d = cc.fresh_dir(os.path.join(work, f"t{threads}"))
        cfg = job(os.path.join(d, "job.yaml"), inp, "out.zarr", threads=threads)
        r = cc.run([args.shardmill, "run", cfg], cwd=d, env=plain_env())
        c.check(f"plain run, {threads} threads, exits 0", r.returncode == 0, cc.describe(r))
        trees.append((f"{threads} threads", os.path.join(d, "out.zarr")))
    if args.mpiexec:
        for n in [int(x) for x in args.ranks.split(",") if x]:
            d = cc.fresh_dir(os.path.join(work, f"n{n}"))
            cfg = job(os.path.join(d, "job.yaml"), inp, "out.zarr", threads=1)
            cmd = [args.mpiexec, "--oversubscribe", "-np", str(n), args.shardmill, "run", cfg]
            r = cc.run(cmd, cwd=d, env=mpi_env(), timeout=120)
            c.check(f"mpirun -n {n} exits 0", r.returncode == 0, cc.describe(r))
            trees.append((f"{n} ranks", os.path.join(d, "out.zarr")))
    ref_label, ref = trees[0]
    for label, t in trees[1:]:
        diffs = cc.tree_diff(ref, t)
        c.check(f"{label} tree == {ref_label} tree, byte for byte", not diffs, diffs[:6])


def level_files(out, k):
    n = 0
    for _d, _s, files in os.walk(os.path.join(out, str(k), "c")):
        n += sum(1 for f in files if ".tmp." not in f)
    return n


def kill_in_level(shardmill, run_args, cwd, out, level):
    """Starts `shardmill run` and freezes it (SIGSTOP, then SIGKILL) as soon as `level` has a
    file; returns its exit status and that level's file count after the kill."""
    p = subprocess.Popen([shardmill, "run"] + run_args, cwd=cwd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None:
        if level_files(out, level) >= 1:
            os.kill(p.pid, signal.SIGSTOP)  # freeze it at once, then kill it
            break
        time.sleep(0.0005)
    if p.poll() is None:
        os.kill(p.pid, signal.SIGKILL)
    rc = p.wait()
    return rc, level_files(out, level)


KILL_SLOW = ["--set", "output.fsync=true", "--set", "output.sync=fsync"]
RESUME = ["--set", "output.exists=resume"]


def kill_before_next(args, cfg, work, level):
    """Runs cfg (resume, slowed by fsync) in a fresh work/killed and kills it in `level`; a
    loaded machine may deschedule the poll until level+1 has begun: such a miss is retried (up to
    3 runs), so the kill lands in `level`. Returns (exit status, level's files, output, run)."""
    for attempt in range(3):
        kdir = cc.fresh_dir(os.path.join(work, "killed"))
        out = os.path.join(kdir, "out.zarr")
        rc, after = kill_in_level(args.shardmill, [cfg] + RESUME + KILL_SLOW, kdir, out, level)
        if level_files(out, level + 1) == 0:
            break
    return rc, after, out, attempt + 1


def case_resume(c, args, work):
    inp = os.path.join(work, "in.zarr")
    make_input(inp, seed=13)
    # small shards; the killed run writes them one at a time with fsync (output.sync does not
    # change the bytes), slow enough to be stopped in level 2; the others do not sync
    extra = {"output": {"path": "out.zarr", "shard": [8, 8, 8], "chunk": [8, 8, 8],
                        "fsync": False, "ome": {"levels": 4}}}
    ref_dir = cc.fresh_dir(os.path.join(work, "clean"))
    cfg = job(os.path.join(work, "job.yaml"), inp, "out.zarr", threads=1, extra=extra)
    resume = RESUME
    r = cc.run([args.shardmill, "run", cfg] + resume, cwd=ref_dir)
    if not c.check("clean run exits 0", r.returncode == 0, cc.describe(r)):
        return
    ref = os.path.join(ref_dir, "out.zarr")
    total2 = level_files(ref, 2)
    rc, after, out, attempt = kill_before_next(args, cfg, work, 2)
    kdir = os.path.dirname(out)
    # level 2 has few shards: a late poll may find all of them, and the kill still lands before
    # level 3 (the pyramid's end) with the marker missing
    ok = c.check(f"killed by SIGKILL in level 2, before level 3 ({after} of {total2} level-2 "
                 f"shards, run {attempt})", rc == -signal.SIGKILL and 1 <= after <= total2
                 and level_files(out, 3) == 0, f"exit {rc}, {after} of {total2}")
    if not ok:
        return
    c.check("no completion marker after the kill",
            not os.path.exists(os.path.join(out, "shardmill.complete.json")))
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify of the killed output fails", r.returncode in (1, 3), cc.describe(r))
    r = cc.run([args.shardmill, "run", cfg] + resume, cwd=kdir)
    c.check("resume exits 0", r.returncode == 0, cc.describe(r))
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify of the resumed output passes", r.returncode == 0, cc.describe(r))
    diffs = cc.tree_diff(ref, out)
    c.check("resumed tree == clean tree, byte for byte", not diffs, diffs[:6])


def case_spacing(c, args, work):
    """input.spacing/unit/origin reach the OME scale and translation exactly; an OME-Zarr input's
    own scale is the default (also when the image's provenance holds a weighted checksum above
    2^63, issue 32 #2); a wrong count is refused."""
    inp = os.path.join(work, "in.zarr")
    _, huge = make_input_huge_sum(inp)
    sp = [1.5, 0.957, 0.957]
    org = [-10.25, 3.5, 7.0]
    out = os.path.join(work, "mm.zarr")
    cfg = job(os.path.join(work, "mm.yaml"), inp, out, levels=3,
              extra={"input": {"store": inp, "spacing": sp, "unit": "millimeter",
                               "origin": org}})
    r = cc.run([args.shardmill, "run", cfg])
    if not c.check("convert with input.spacing/unit/origin exits 0", r.returncode == 0,
                   cc.describe(r)):
        return
    g = json.load(open(os.path.join(out, "zarr.json")))["attributes"]
    m = g["ome"]["multiscales"][0]
    c.check("axes carry unit millimeter",
            [a.get("unit") for a in m["axes"]] == ["millimeter"] * 3, m["axes"])
    plan = ome_levels(ROI, sp, 3)
    for k, d in enumerate(m["datasets"]):
        ct = d["coordinateTransformations"]
        c.check(f"level {k}: scale = spacing x factor {plan[k][1]} exactly, translation = "
                "origin + spacing x (factor - 1) / 2",
                ct == want_transforms(sp, plan[k][1], org, k), ct)
    ngff.check(c, out)
    c.check("provenance shardmill.spacing/unit/origin",
            g["shardmill"].get("spacing") == sp and g["shardmill"].get("unit") == "millimeter"
            and g["shardmill"].get("origin") == org, g["shardmill"])
    # SPEC §6.3/§7: a checksum is a decimal string, exact for every JSON reader
    hw = g["shardmill"].get("histogram", {}).get("weighted_checksum")
    c.check(f"provenance weighted_checksum is NumPy's {huge} (above 2^63) as a decimal string",
            hw == str(huge) and huge >= 1 << 63, hw)
    if cc.node_ok(args.node) is None:
        check_ngff(c, args, out, [x[0] for x in plan], sp, "millimeter",
                   [[s * f for s, f in zip(sp, x[1])] for x in plan])
    # the HDF5 export (of level 0) carries spacing, unit and origin as attributes
    h5 = os.path.join(work, "mm.h5")
    r = cc.run([args.shardmill, "run", cfg, "--set", "output.exists=overwrite", "--set",
                f"export.hdf5.path={h5}"])
    if r.returncode == 0 or "HDF5" not in r.stderr:
        if c.check("convert with an HDF5 export exits 0", r.returncode == 0, cc.describe(r)):
            import h5py
            with h5py.File(h5, "r") as f:
                d = f["data"]
                c.check("HDF5 export: shape of level 0, attributes spacing/unit/origin",
                        d.shape == tuple(ROI) and list(d.attrs["spacing"]) == sp and
                        d.attrs["unit"] in ("millimeter", b"millimeter") and
                        list(d.attrs["origin"]) == org, dict(d.attrs))
    # an OME-Zarr input: level 0 of that image, a ROI inside it, no spacing given
    out2 = os.path.join(work, "from_ome.zarr")
    cfg2 = cc.write_config(os.path.join(work, "from_ome.yaml"), {
        "job": "convert", "input": {"store": out, "array": "0"},
        "roi": {"offset": [1, 2, 3], "shape": [8, 9, 10]},
        "histogram": {"bins": 16, "range": [0, 2]}, "normalize": {"mode": "scale", "divisor": 1},
        "output": {"path": out2, "ome": {"levels": 2}}, "progress": False})
    r = cc.run([args.shardmill, "run", cfg2])
    if c.check("convert of an OME-Zarr level exits 0", r.returncode == 0, cc.describe(r)):
        m2 = json.load(open(os.path.join(out2, "zarr.json")))["attributes"]["ome"][
            "multiscales"][0]
        ct = m2["datasets"][0]["coordinateTransformations"]
        c.check("the input's scale, unit and translation (moved to the ROI) are kept",
                ct == [{"type": "scale", "scale": sp},
                       {"type": "translation",
                        "translation": [o + s * f for o, s, f in zip(org, sp, [1, 2, 3])]}]
                and m2["axes"][2].get("unit") == "millimeter", ct)
        ngff.check(c, out2)
    # the image's group document does not parse: an error naming it, never "no geometry"
    import shutil
    broken = os.path.join(work, "broken.zarr")
    shutil.copytree(out, broken)
    with open(os.path.join(broken, "zarr.json"), "r+") as f:
        f.truncate(len(f.read()) // 2)
    cfg5 = cc.write_config(os.path.join(work, "from_broken.yaml"), {
        "job": "convert", "input": {"store": broken, "array": "0"},
        "histogram": {"bins": 16, "range": [0, 2]}, "normalize": {"mode": "scale", "divisor": 1},
        "output": {"path": os.path.join(work, "from_broken.zarr"), "ome": {"levels": 2}},
        "progress": False})
    r = cc.run([args.shardmill, "run", cfg5])
    lines = cc.one_error_line(r.stderr)
    c.check("an OME input whose group zarr.json does not parse: exit 3, one line naming it",
            r.returncode == 3 and len(lines) == 1
            and os.path.join(broken, "zarr.json") in lines[0] and "malformed JSON" in lines[0]
            and not os.path.exists(os.path.join(work, "from_broken.zarr")), cc.describe(r))
    cfg3 = job(os.path.join(work, "bad.yaml"), inp, os.path.join(work, "bad.zarr"),
               extra={"input": {"store": inp, "spacing": [1.0, 2.0]}})
    r = cc.run([args.shardmill, "run", cfg3])
    lines = cc.one_error_line(r.stderr)
    c.check("input.spacing of 2 values for 3 axes: exit 2, one line naming input.spacing",
            r.returncode == 2 and len(lines) == 1 and "input.spacing" in lines[0],
            cc.describe(r))
    cfg4 = job(os.path.join(work, "neg.yaml"), inp, os.path.join(work, "neg.zarr"),
               extra={"input": {"store": inp, "spacing": [1.0, -2.0, 1.0]}})
    r = cc.run([args.shardmill, "run", cfg4])
    c.check("a negative spacing: exit 2 naming input.spacing[1]",
            r.returncode == 2 and "input.spacing[1]" in r.stderr, cc.describe(r))


def case_ingest(c, args, work):
    """ingest with output.ome: NIfTI pixdim/units/origin and raw input.spacing reach the OME
    scale exactly; uint16 levels are the rounded-half-to-even means."""
    import nibabel as nib
    rng = np.random.default_rng(21)
    xyz = rng.integers(0, 60000, (27, 22, 13)).astype(np.uint16)
    aff = np.array([[0.8, 0, 0, -12.5], [0, 0.9, 0, 7.25], [0, 0, 1.5, 30.0], [0, 0, 0, 1]])
    img = nib.Nifti1Image(xyz, aff)
    img.header.set_xyzt_units("mm", "sec")
    nii = os.path.join(work, "v.nii.gz")
    nib.save(img, nii)
    pix = [float(x) for x in nib.load(nii).header["pixdim"][1:4]][::-1]  # z, y, x
    out = os.path.join(work, "nii.zarr")
    cfg = cc.write_config(os.path.join(work, "nii.yaml"), {
        "job": "ingest", "input": {"store": nii},
        "output": {"path": out, "shard": [8, 8, 8], "chunk": [8, 8, 8], "fsync": False,
                   "ome": {"levels": 3}},
        "parallel": {"threads": 2}, "progress": False})
    r = cc.run([args.shardmill, "run", cfg])
    if not c.check("ingest of a NIfTI file with output.ome exits 0", r.returncode == 0,
                   cc.describe(r)):
        return
    g = json.load(open(os.path.join(out, "zarr.json")))["attributes"]
    m = g["ome"]["multiscales"][0]
    plan = ome_levels([13, 22, 27], pix, 3)
    for k, d in enumerate(m["datasets"]):
        ct = d["coordinateTransformations"]
        c.check(f"NIfTI level {k}: scale = pixdim (z, y, x) x factor {plan[k][1]} exactly",
                ct[0] == {"type": "scale", "scale": [p * f for p, f in zip(pix, plan[k][1])]},
                ct)
    ngff.check(c, out)
    c.check("NIfTI unit millimeter on the axes",
            [a.get("unit") for a in m["axes"]] == ["millimeter"] * 3, m["axes"])
    prov_origin = g["shardmill"].get("origin")
    ct0 = m["datasets"][0]["coordinateTransformations"]
    c.check("NIfTI origin = level-0 translation",
            len(ct0) == 2 and ct0[1].get("translation") == prov_origin, (ct0, prov_origin))
    want = pyramid(np.ascontiguousarray(xyz.transpose(2, 1, 0)), plan)
    for k in range(3):
        cc.shardmill_read(c, args.shardmill, f"NIfTI level {k}", os.path.join(out, str(k)),
                          want[k], work)
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify of the ingested image passes", r.returncode == 0, cc.describe(r))
    # raw with input.spacing/unit
    raw = os.path.join(work, "v.raw")
    want[0].tofile(raw)
    out2 = os.path.join(work, "raw.zarr")
    cfg2 = cc.write_config(os.path.join(work, "raw.yaml"), {
        "job": "ingest",
        "input": {"store": raw, "format": "raw", "spacing": [2.0, 0.3, 0.3],
                  "unit": "micrometer",
                  "raw": {"dtype": "uint16", "shape": list(want[0].shape)}},
        "output": {"path": out2, "fsync": False, "ome": {"levels": 2}}, "progress": False})
    r = cc.run([args.shardmill, "run", cfg2])
    if c.check("raw ingest with input.spacing exits 0", r.returncode == 0, cc.describe(r)):
        m = json.load(open(os.path.join(out2, "zarr.json")))["attributes"]["ome"][
            "multiscales"][0]
        c.check("raw: scale = input.spacing x factor exactly (auto: y, x halved first), unit "
                "micrometer",
                [d["coordinateTransformations"][0]["scale"] for d in m["datasets"]] ==
                [[2.0, 0.3, 0.3], [2.0, 0.6, 0.6]] and m["axes"][0].get("unit") == "micrometer",
                m)
        ngff.check(c, out2)
        raw1 = pyramid(want[0], ome_levels(want[0].shape, [2.0, 0.3, 0.3], 2))[1]
        cc.shardmill_read(c, args.shardmill, "raw level 1", os.path.join(out2, "1"), raw1,
                          work)


CT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "data", "ct", "matrix.dat")
CT_SHAPE = [108, 256, 256]
CT_SPACING = [1.5, 0.95703119999999997, 0.95703119999999997]


def ct_job(path, out, extra_ome, extra=None):
    cfg = {"job": "convert",
           "input": {"store": CT, "format": "raw",
                     "raw": {"dtype": "int16", "shape": CT_SHAPE, "byte_order": "little"},
                     "spacing": CT_SPACING, "unit": "millimeter"},
           "normalize": {"mode": "window", "lo": -1024, "hi": 1210},
           "output": dict({"path": out, "fsync": False}, ome=extra_ome),
           "progress": False}
    for k, v in (extra or {}).items():
        cfg[k] = v
    return cc.write_config(path, cfg)


def case_anisotropic(c, args, work):
    """The real CT: downsample auto halves y and x first, `all` every axis, `yx` never z."""
    if not os.path.exists(CT):
        print("SKIP: data/ct/matrix.dat missing (scripts/fetch-data.sh)")
        sys.exit(77)
    ct = np.fromfile(CT, "<i2").reshape(CT_SHAPE)
    l0 = np.clip((ct.astype(np.float32) - np.float32(-1024)) /
                 (np.float32(1210) - np.float32(-1024)), 0, 1).astype(np.float32)
    shapes = {"auto": [[108, 256, 256], [108, 128, 128], [54, 64, 64]],
              "all": [[108, 256, 256], [54, 128, 128], [27, 64, 64]],
              "yx": [[108, 256, 256], [108, 128, 128], [108, 64, 64]]}
    for mode in ("auto", "all", "yx"):
        out = os.path.join(work, f"{mode}.zarr")
        cfg = ct_job(os.path.join(work, f"{mode}.yaml"), out, {"levels": 3, "downsample": mode})
        r = cc.run([args.shardmill, "run", cfg])
        if not c.check(f"CT, downsample {mode}: exit 0", r.returncode == 0, cc.describe(r)):
            continue
        plan = ome_levels(CT_SHAPE, CT_SPACING, 3, mode)
        c.check(f"downsample {mode}: the rule gives the shapes the issue states",
                [x[0] for x in plan] == shapes[mode], plan)
        m = json.load(open(os.path.join(out, "zarr.json")))["attributes"]["ome"]["multiscales"][0]
        got = [d["coordinateTransformations"] for d in m["datasets"]]
        c.check(f"downsample {mode}: scales and translations (voxel centres line up)",
                got == [want_transforms(CT_SPACING, x[1], None, k) for k, x in enumerate(plan)],
                got)
        for k, shp in enumerate(shapes[mode]):
            a = json.load(open(os.path.join(out, str(k), "zarr.json")))
            c.check(f"downsample {mode}: level {k} shape {shp}", a.get("shape") == shp,
                    a.get("shape"))
        ngff.check(c, out, f"CT downsample {mode}")
        want = pyramid(l0, plan)
        for k in range(1, 3):
            cc.shardmill_read(c, args.shardmill, f"CT {mode} level {k}",
                              os.path.join(out, str(k)), want[k], work)
        for k in range(3):  # decoded from the Zarr v3 spec alone, not by the engine
            got = zarr_decode.spec_decode(os.path.join(out, str(k)))
            c.check(f"CT {mode} level {k} (spec decoder) == NumPy's block means, bit for bit",
                    got.dtype == want[k].dtype and got.shape == want[k].shape and
                    got.tobytes() == want[k].tobytes(), (got.dtype, got.shape))
        if cc.node_ok(args.node) is None:
            check_ngff(c, args, out, shapes[mode], CT_SPACING, "millimeter",
                       [[s * f for s, f in zip(CT_SPACING, x[1])] for x in plan])
    # levels: auto on the CT stops at level 0 (256 <= 256); with a 512-wide stand-in it would
    # not: the rule over a shape alone
    plan = ome_levels([108, 1024, 1024], CT_SPACING, 4)
    c.check("auto on [108,1024,1024] at CT spacing halves y, x twice before z",
            [x[0] for x in plan] == [[108, 1024, 1024], [108, 512, 512], [54, 256, 256],
                                     [27, 128, 128]], plan)


def case_nearest(c, args, work):
    """method nearest on labels: the first voxel of each block, never a mean."""
    rng = np.random.default_rng(31)
    lab = np.repeat(rng.integers(0, 7, (9, 12, 15)), 3, axis=0)[:25].astype(np.uint16) * 1000 + 1
    raw = os.path.join(work, "labels.raw")
    lab.tofile(raw)
    sp = [3.0, 1.0, 1.0]
    out = os.path.join(work, "labels.zarr")
    cfg = cc.write_config(os.path.join(work, "labels.yaml"), {
        "job": "ingest",
        "input": {"store": raw, "format": "raw", "spacing": sp, "unit": "micrometer",
                  "raw": {"dtype": "uint16", "shape": list(lab.shape)}},
        "output": {"path": out, "shard": [8, 8, 8], "chunk": [4, 4, 4], "fsync": False,
                   "ome": {"levels": 4, "method": "nearest"}},
        "parallel": {"threads": 2}, "progress": False})
    r = cc.run([args.shardmill, "run", cfg])
    if not c.check("ingest of labels with method nearest exits 0", r.returncode == 0,
                   cc.describe(r)):
        return
    plan = ome_levels(list(lab.shape), sp, 4)
    want = pyramid(lab, plan, "nearest")
    for k in range(4):
        cc.shardmill_read(c, args.shardmill, f"labels level {k} (strided)",
                          os.path.join(out, str(k)), want[k], work)
    values = set(np.unique(lab).tolist())
    c.check("every level holds only label values", all(
        set(np.unique(w).tolist()) <= values for w in want), values)
    m = json.load(open(os.path.join(out, "zarr.json")))["attributes"]["ome"]["multiscales"][0]
    md = m.get("metadata", {})
    c.check("type nearest, metadata.method shardmill.nearest, a description, the version",
            m.get("type") == "nearest" and md.get("method") == "shardmill.nearest" and
            isinstance(md.get("description"), str) and " " in md["description"] and
            md.get("version") == cc.engine_version(args.shardmill)[0], m)
    ngff.check(c, out)
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify of the label image passes", r.returncode == 0, cc.describe(r))


def omero_window(out):
    g = json.load(open(os.path.join(out, "zarr.json")))["attributes"]["ome"]
    chans = g.get("omero", {}).get("channels", [])
    return chans[0] if len(chans) == 1 else {"channels": chans}


def case_omero(c, args, work):
    """The window viewers open with, in output values (SPEC §2)."""
    inp = os.path.join(work, "in.zarr")
    a = make_input(inp, seed=17)
    roi = a[tuple(slice(o, o + s) for o, s in zip(ROI_OFF, ROI))]
    cases = [
        ("percentile", {"mode": "percentile", "lo": 1, "hi": 99},
         {"start": 0.0, "end": 1.0, "min": 0.0, "max": 1.0}),
        ("scale", {"mode": "scale", "divisor": DIVISOR},
         {"start": 0.0, "end": 1.0, "min": 0.0,
          "max": float(np.float32(65535) / np.float32(DIVISOR))}),
    ]
    for dt, top in (("uint8", 255.0), ("uint16", 65535.0)):  # integer outputs: 0 .. MAX
        cases.append((f"window_{dt}", {"mode": "window", "lo": 100, "hi": 3000}, dt,
                      {"start": 0.0, "end": top, "min": 0.0, "max": top}))
    # none with a histogram (uint16: one bin per value): the input's p1 and p99 (SPEC §5 rank)
    v = np.sort(roi.ravel())
    n = v.size
    p1, p99 = (float(v[int(np.ceil(p / 100 * n)) - 1]) for p in (1, 99))
    cases.append(("none", {"mode": "none"},
                  {"start": p1, "end": p99, "min": 0.0, "max": 65535.0}))
    for case in cases:
        name, norm, want = case[0], case[1], case[-1]
        out = os.path.join(work, f"{name}.zarr")
        extra = {"normalize": norm}
        if name == "none":
            extra["histogram"] = {"bins": 65536, "range": [0, 65536]}
        if len(case) == 4:
            extra["output"] = {"path": out, "shard": [16, 16, 16], "chunk": [8, 8, 8],
                               "dtype": case[2], "ome": {"levels": 2}}
        cfg = job(os.path.join(work, f"{name}.yaml"), inp, out, levels=2, extra=extra)
        r = cc.run([args.shardmill, "run", cfg])
        if not c.check(f"{name}: exit 0", r.returncode == 0, cc.describe(r)):
            continue
        ch = omero_window(out)
        c.check(f"{name}: omero window {want}", ch.get("window") == want, ch)
        c.check(f"{name}: color FFFFFF, active, a label",
                ch.get("color") == "FFFFFF" and ch.get("active") is True and
                isinstance(ch.get("label"), str), ch)
        ngff.check(c, out, f"omero {name}")
        if name == "none":
            # one pass (SPEC §1): zarr.json's histogram and the omero window both pending until
            # the statistics are reduced; a resume of the complete image keeps every shard and
            # accepts the restated group document
            rep = os.path.join(work, "none-resume.json")
            r = cc.run([args.shardmill, "run", cfg, "--set", "output.exists=resume", "--report",
                        rep])
            kept = json.load(open(rep)).get("output", {}) if r.returncode == 0 else {}
            c.check("none: resume of the complete image keeps every shard, writes none",
                    r.returncode == 0 and kept.get("written") == 0 and kept.get("shards", 0) > 0,
                    cc.describe(r) + str(kept))
            c.check("none: the resumed image's omero window is unchanged",
                    omero_window(out).get("window") == want, omero_window(out))
            mem = json.load(open(rep)).get("memory", {}) if r.returncode == 0 else {}
            c.check("none: one pass (no decoded input kept between a scan and the write)",
                    mem.get("kept_input_bytes") == 0, mem)
    # none without a histogram: an int32 input has no default range: the type's range
    import zarr
    i32 = os.path.join(work, "i32.zarr")
    z = zarr.open(i32, mode="w", shape=(6, 7, 8), chunks=(6, 7, 8), dtype="int32")
    z[:] = np.arange(6 * 7 * 8, dtype=np.int32).reshape(6, 7, 8) - 100
    out = os.path.join(work, "i32_out.zarr")
    cfg = cc.write_config(os.path.join(work, "i32.yaml"), {
        "job": "ingest", "input": {"store": i32, "format": "zarr"},
        "output": {"path": out, "ome": {"levels": 2}}, "progress": False})
    r = cc.run([args.shardmill, "run", cfg])
    if c.check("int32 ingest with output.ome exits 0", r.returncode == 0, cc.describe(r)):
        ch = omero_window(out)
        lo, hi = float(-2 ** 31), float(2 ** 31 - 1)
        c.check("none without a histogram: the type's range",
                ch.get("window") == {"start": lo, "end": hi, "min": lo, "max": hi}, ch)
        ngff.check(c, out, "omero int32")


def case_checker(c, args, work):
    """The checker is not a rubber stamp: each mutation of a conformant image is named."""
    inp = os.path.join(work, "in.zarr")
    make_input(inp, seed=23)
    out = os.path.join(work, "good.zarr")
    cfg = job(os.path.join(work, "good.yaml"), inp, out, levels=3,
              extra={"input": {"store": inp, "spacing": [2.0, 1.0, 1.0], "unit": "micrometer"}})
    r = cc.run([args.shardmill, "run", cfg])
    if not c.check("a conformant image is written", r.returncode == 0, cc.describe(r)):
        return
    c.check("the checker passes it", ngff.check_image(out) == [], ngff.check_image(out))

    def ms(g):
        return g["attributes"]["ome"]["multiscales"][0]

    mutations = [
        ("version 0.4", "zarr.json", lambda g: g["attributes"]["ome"].update(version="0.4"),
         "version"),
        ("unit um", "zarr.json", lambda g: ms(g)["axes"][1].update(unit="um"), "UDUNITS"),
        ("two scales", "zarr.json",
         lambda g: ms(g)["datasets"][0]["coordinateTransformations"].append(
             {"type": "scale", "scale": [1, 1, 1]}), "exactly one scale"),
        ("translation first", "zarr.json",
         lambda g: ms(g)["datasets"][1]["coordinateTransformations"].reverse(), "one scale"),
        ("scale of 2 values", "zarr.json",
         lambda g: ms(g)["datasets"][0]["coordinateTransformations"][0].update(scale=[1, 1]),
         "one per axis"),
        ("level 1 scale not a factor", "zarr.json",
         lambda g: ms(g)["datasets"][1]["coordinateTransformations"][0]["scale"].__setitem__(
             2, 1.5), "integer multiple"),
        ("translation off-centre", "zarr.json",
         lambda g: ms(g)["datasets"][2]["coordinateTransformations"][1]["translation"]
         .__setitem__(0, 0.0), "voxel centres"),
        ("x before y", "zarr.json", lambda g: ms(g)["axes"].reverse(), "dimension_names"),
        ("channel after space", "zarr.json",
         lambda g: ms(g)["axes"].append({"name": "c", "type": "channel"}), "time first"),
        ("omero window inverted", "zarr.json",
         lambda g: g["attributes"]["ome"]["omero"]["channels"][0]["window"].update(start=2.0),
         "min <= start"),
        ("omero color", "zarr.json",
         lambda g: g["attributes"]["ome"]["omero"]["channels"][0].update(color="white"), "hex"),
        ("method with spaces", "zarr.json",
         lambda g: ms(g)["metadata"].update(method="a sentence here"), "identifier"),
        ("version in the entry", "zarr.json", lambda g: ms(g).update(version="0.5"),
         "no version"),
        ("level 1 shape", "1/zarr.json", lambda d: d["shape"].__setitem__(1, 99), "ceil("),
        ("dimension_names", "1/zarr.json", lambda d: d.update(dimension_names=["a", "b", "c"]),
         "dimension_names"),
    ]
    import shutil
    for label, doc, mutate, expect in mutations:
        bad = os.path.join(work, "bad.zarr")
        if os.path.exists(bad):
            shutil.rmtree(bad)
        shutil.copytree(out, bad)
        path = os.path.join(bad, *doc.split("/"))
        d = json.load(open(path))
        mutate(d)
        json.dump(d, open(path, "w"))
        got = ngff.check_image(bad)
        c.check(f"checker names '{label}' ({expect!r} in a message)",
                any(expect in b for b in got), got)
    r = cc.run(["/usr/bin/python3", ngff.__file__, bad])
    c.check("the checker's command line exits 1 on a broken image", r.returncode == 1,
            cc.describe(r))


ALIGNED = (136, 264, 264)  # float32: level 0 in 1 x 2 x 3 automatic shards of 256 x 256 x 128


def aligned_job(path, inp, out, threads=2):
    cfg = {"job": "convert", "input": {"store": inp},
           "normalize": {"mode": "scale", "divisor": DIVISOR},
           "output": {"path": out, "ome": {"levels": 5, "downsample": "all"}},
           "parallel": {"threads": threads}, "progress": False}
    return cc.write_config(path, cfg)


def case_aligned(c, args, work):
    """The one-pass pyramid (docs/internals/pyramid.md "One pass"): with automatic shards the
    levels whose shards stay >= 512 KiB share level 0's shard grid and are made from its values
    in memory while it is written; the deeper ones get their own layout and are read back. Every
    level equals the SPEC 5.9 mean computed by NumPy from level 0, whatever the threads and
    ranks; a damaged shard of each kind is rewritten by resume."""
    import zarr
    inp = os.path.join(work, "in.zarr")
    a = np.random.default_rng(21).integers(0, 4096, ALIGNED).astype(np.uint16)
    zarr.open(inp, mode="w", shape=ALIGNED, chunks=(64, 64, 64), dtype="uint16")[:] = a
    plan = ome_levels(list(ALIGNED), [1.0, 1.0, 1.0], 5, mode="all")
    refs = pyramid(a.astype(np.float32) / np.float32(DIVISOR), plan)
    trees = []
    for threads in (2, 1):
        d = cc.fresh_dir(os.path.join(work, f"t{threads}"))
        rep = os.path.join(d, "rep.json")
        cfg = aligned_job(os.path.join(d, "job.yaml"), inp, "out.zarr", threads=threads)
        r = cc.run([args.shardmill, "run", cfg, "--report", rep], cwd=d, env=plain_env())
        if not c.check(f"{threads} threads: exits 0", r.returncode == 0, cc.describe(r)):
            return
        trees.append((f"{threads} threads", os.path.join(d, "out.zarr"), json.load(open(rep))))
    if args.mpiexec:
        d = cc.fresh_dir(os.path.join(work, "n2"))
        cfg = aligned_job(os.path.join(d, "job.yaml"), inp, "out.zarr", threads=1)
        cmd = [args.mpiexec, "--oversubscribe", "-np", "2", args.shardmill, "run", cfg]
        r = cc.run(cmd, cwd=d, env=mpi_env(), timeout=120)
        c.check("mpirun -n 2 exits 0", r.returncode == 0, cc.describe(r))
        trees.append(("2 ranks", os.path.join(d, "out.zarr"), None))
    _, out, rep = trees[0]
    shards = []
    for k in range(5):
        meta = json.load(open(os.path.join(out, str(k), "zarr.json")))
        shards.append(meta["chunk_grid"]["configuration"]["chunk_shape"])
        got = zarr_decode.spec_decode(os.path.join(out, str(k)))
        c.check(f"level {k} {list(got.shape)} == the NumPy mean of level {k - 1}" if k else
                "level 0 == the input / divisor", spec_oracle.same_bits(got, refs[k]),
                spec_oracle.first_diff(got, refs[k]))
    inner = [json.load(open(os.path.join(out, str(k), "zarr.json")))["codecs"][0]
             ["configuration"]["chunk_shape"] for k in range(5)]
    c.check("levels 0-2 on level 0's shard grid (256x256x128 / 2^k), levels 3-4 their own; "
            "inner chunks 4 planes deep (a divisor of the shard's), square y and x within the "
            "shard whose chunks span <= 4/3 of the level's y and x (issue 35)",
            shards == [[256, 256, 128], [128, 128, 64], [64, 64, 32], [17, 33, 33], [9, 17, 17]]
            and inner == [[4, 64, 64], [4, 32, 32], [4, 16, 16], [1, 33, 33], [3, 17, 17]],
            (shards, inner))
    wrote = (rep or {}).get("output", {}).get("shards")
    c.check("3 x 6 aligned shards + 2 read-back shards written", wrote == 20, wrote)
    # one pass: each of the 3 x 5 x 5 input chunks read once, the statistics restated after
    reads = rep.get("io", {}).get("requests", {}).get("payload")
    kept = rep.get("memory", {}).get("kept_input_bytes")
    c.check("one pass: 75 input chunk reads for 75 chunks, no input kept for a second pass",
            reads == 75 and kept == 0, (reads, kept))
    pv = json.load(open(os.path.join(out, "zarr.json")))["attributes"].get("shardmill", {})
    c.check("the group's provenance restated with the histogram",
            pv.get("histogram", {}).get("voxels") == a.size, pv.get("histogram"))
    check_marker_levels(c, out, 5)
    for label, t, _ in trees[1:]:
        diffs = cc.tree_diff(out, t)
        c.check(f"{label} tree == 2 threads tree, byte for byte", not diffs, diffs[:6])
    bad = ngff.check_image(out)
    c.check("the image keeps the OME-NGFF 0.5 rules", not bad, bad[:4])
    # damage an aligned level-1 shard and the read-back level-3 shard: resume rewrites both
    d = os.path.join(work, "t1")
    for key in ("1/c/0/1/2", "3/c/0/0/0"):
        with open(os.path.join(d, "out.zarr", *key.split("/")), "r+b") as f:
            f.truncate(100)
    cfg = os.path.join(d, "job.yaml")
    rep = os.path.join(d, "resume.json")
    r = cc.run([args.shardmill, "run", cfg, "--set", "output.exists=resume", "--report", rep],
               cwd=d, env=plain_env())
    written = json.load(open(rep)).get("output", {}).get("written") if r.returncode == 0 else r
    c.check("resume rewrote exactly the two damaged shards", written == 2, written)
    diffs = cc.tree_diff(out, os.path.join(d, "out.zarr"))
    c.check("resumed tree == clean tree, byte for byte", not diffs, diffs[:6])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--node", default="")
    ap.add_argument("--work", required=True)
    ap.add_argument("--mpiexec", default="")
    ap.add_argument("--ranks", default="2,3", help="mpirun -n values of the identity case")
    cases = {"levels": case_levels, "identity": case_identity, "resume": case_resume,
             "spacing": case_spacing, "ingest": case_ingest, "anisotropic": case_anisotropic,
             "nearest": case_nearest, "omero": case_omero, "checker": case_checker,
             "aligned": case_aligned, "spill": case_spill}
    ap.add_argument("--case", required=True, choices=sorted(cases))
    args = ap.parse_args()
    work = cc.fresh_dir(os.path.join(args.work, args.case))
    c = Checks(f"convert.ome.{args.case}")
    cases[args.case](c, args, work)
    return c.done()


if __name__ == "__main__":
    cc.main_guard(main)
