#!/usr/bin/python3
"""OME-NGFF 0.4 output (output.ome.version "0.4", issue 35 #1) and downsample yx (#2).

Cases:
  ct        the real CT, 0.4 with downsample yx and auto (3 levels): zarr-python 2.13 reads every
            level, bit for bit equal to NumPy's window and block means; every level equals the
            0.5 output of the same job (decoded from the Zarr v3 spec); .zgroup/.zattrs/.zarray
            as the 0.4 checker (tests/lib/shardmill_test/ome_ngff_check04.py) and bioformats2raw
            want them (blosc lz4, byte shuffle, "/" keys, C order); one file per chunk; verify
            passes; `plan` counts the files.
  checker   the 0.4 checker passes a conformant image and names each rule a mutated copy breaks.
  identity  the tree (chunks, documents, marker) is byte-identical for 1 and 2 threads and under
            mpirun -n 2 (one writer per chunk).
  kill      a run SIGKILLed while its chunks are written, then `exists: auto`: the tree equals a
            clean run's, byte for byte, and verifies.
  ingest    uint16 labels ingested with method nearest and downsample yx: levels == NumPy's
            strides, the omero window restated after the scan equals 0.5's, chunks within shape.
  verify    verify names a truncated chunk and a missing one (exit 1); `exists: auto` repairs
            both to the clean tree.
  refuse    output.shard and export.hdf5.path with version 0.4 are exit 2 with one error line
            naming the key; nothing is created.
Usage: test_convert_ome04.py --shardmill BIN --work DIR --case CASE [--mpiexec BIN]
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

from shardmill_test import ome_ngff_check04 as ngff04
from shardmill_test import runner as cc
from shardmill_test import spec_oracle
from shardmill_test import zarr_decode
from shardmill_test.checks import Checks
from shardmill_test.ranks import mpi_env, plain_env

HERE = os.path.dirname(os.path.abspath(__file__))
CT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "data", "ct", "matrix.dat")
CT_SHAPE = [108, 256, 256]
CT_SPACING = [1.5, 0.95703119999999997, 0.95703119999999997]
SHAPE = (40, 70, 90)


def ome_levels(shape, spacing, n, mode):
    """SPEC §2 output.ome.downsample, independent of the engine: per level (extents, factors).
    auto: the axes whose spacing is below 3/4 of the largest (one-voxel axes out), every one
    when none is; yx: the last two axes of more than one voxel."""
    cur, f = list(shape), [1] * len(shape)
    out = [(list(cur), list(f))]
    for _ in range(1, n):
        sp = [s * x for s, x in zip(spacing, f)]
        cand = [d for d in range(len(cur)) if cur[d] > 1]
        if mode == "yx":
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


def pyramid(l0, plan):
    out = [l0]
    for k in range(1, len(plan)):
        block = [f1 // f0 for f0, f1 in zip(plan[k - 1][1], plan[k][1])]
        out.append(spec_oracle.block_mean(out[-1], block))
    return out


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def zarr2_levels(out, n):
    import zarr  # zarr-python 2.13: a Zarr v2 reader independent of shardmill
    g = zarr.open_group(out, mode="r")
    return g, [g[str(k)][:] for k in range(n)]


def ct_job(path, out, ome, extra=None):
    cfg = {"job": "convert",
           "input": {"store": CT, "format": "raw",
                     "raw": {"dtype": "int16", "shape": CT_SHAPE, "byte_order": "little"},
                     "spacing": CT_SPACING, "unit": "millimeter"},
           "normalize": {"mode": "window", "lo": -1024, "hi": 1210},
           "output": {"path": out, "fsync": False, "ome": ome},
           "progress": False}
    return cc.write_config(path, cc.merge_config(cfg, extra or {}))


def chunk_files(out):
    """Chunk files of every level (relative paths), documents and temporary files left out."""
    got = []
    for d, _dirs, files in os.walk(out):
        rel = os.path.relpath(d, out)
        if rel == "." or rel.startswith(".shardmill"):
            continue
        got += [os.path.join(rel, f) for f in files if not f.startswith(".") and ".tmp." not in f]
    return sorted(got)


def case_ct(c, args, work):
    if not os.path.exists(CT):
        print("SKIP: data/ct/matrix.dat missing (scripts/fetch-data.sh)")
        return 77
    ct = np.fromfile(CT, "<i2").reshape(CT_SHAPE)
    l0 = np.clip((ct.astype(np.float32) - np.float32(-1024)) /
                 (np.float32(1210) - np.float32(-1024)), 0, 1).astype(np.float32)
    shapes = {"yx": [[108, 256, 256], [108, 128, 128], [108, 64, 64]],
              "auto": [[108, 256, 256], [108, 128, 128], [54, 64, 64]]}
    for mode in ("yx", "auto"):
        out = os.path.join(work, f"{mode}04.zarr")
        cfg = ct_job(os.path.join(work, f"{mode}04.yaml"), out,
                     {"levels": 3, "downsample": mode, "version": "0.4"})
        r = cc.run([args.shardmill, "run", cfg])
        if not c.check(f"CT 0.4 {mode}: exit 0", r.returncode == 0, cc.describe(r)):
            continue
        plan = ome_levels(CT_SHAPE, CT_SPACING, 3, mode)
        c.check(f"{mode}: the rule gives the shapes the issue states",
                [x[0] for x in plan] == shapes[mode], plan)
        want = pyramid(l0, plan)
        g, got = zarr2_levels(out, 3)
        for k in range(3):
            c.check(f"CT 0.4 {mode} level {k} {shapes[mode][k]} by zarr-python 2.13 == NumPy's "
                    f"window and block means, bit for bit", same(got[k], want[k]),
                    (got[k].dtype, got[k].shape))
        ms = g.attrs["multiscales"][0]
        cts = [d["coordinateTransformations"] for d in ms["datasets"]]
        scales = [[s * f for s, f in zip(CT_SPACING, x[1])] for x in plan]
        c.check(f"{mode}: per-level scale = spacing x factor",
                [t[0]["scale"] for t in cts] == scales, cts)
        ngff04.check(c, out, f"CT 0.4 {mode}")
        za = json.load(open(os.path.join(out, "0", ".zarray")))
        c.check(f"{mode}: level 0's automatic chunk [4, 256, 256] (4 planes, 1 MiB of float32)",
                za.get("chunks") == [4, 256, 256], za.get("chunks"))
        c.check(f"{mode}: .zarray as bioformats2raw writes it: blosc lz4 clevel 5, byte shuffle, "
                f"'/' keys, C order, <f4",
                za.get("compressor") == {"blocksize": 0, "clevel": 5, "cname": "lz4",
                                         "id": "blosc", "shuffle": 1} and
                za.get("dimension_separator") == "/" and za.get("order") == "C" and
                za.get("dtype") == "<f4" and za.get("filters") is None, za)
        want_files = []
        for k, shp in enumerate(shapes[mode]):
            ch = json.load(open(os.path.join(out, str(k), ".zarray")))["chunks"]
            grid = [-(-s // x) for s, x in zip(shp, ch)]
            want_files += [os.path.join(str(k), *map(str, ix)) for ix in np.ndindex(*grid)]
        c.check(f"{mode}: one file per chunk, at its v2 key", chunk_files(out) == sorted(want_files),
                (len(chunk_files(out)), len(want_files)))
        c.check(f"{mode}: no zarr.json anywhere", not any(
            "zarr.json" in f for _d, _s, fs in os.walk(out) for f in fs))
        r = cc.run([args.shardmill, "verify", out])
        c.check(f"{mode}: verify passes", r.returncode == 0, cc.describe(r))
        r = cc.run([args.shardmill, "plan", cfg, "--json"])
        files = sum(len(fs) for _d, _s, fs in os.walk(out))
        est = json.loads(r.stdout).get("estimate", {}) if r.returncode == 0 else {}
        c.check(f"{mode}: plan counts the files ({files}: chunks, .zarray, .zgroup, .zattrs, "
                f"marker)", est.get("files") == files, (est.get("files"), files, cc.describe(r)))
        # the same job's 0.5 image holds the same values
        out5 = os.path.join(work, f"{mode}05.zarr")
        cfg5 = ct_job(os.path.join(work, f"{mode}05.yaml"), out5,
                      {"levels": 3, "downsample": mode})
        r = cc.run([args.shardmill, "run", cfg5])
        if c.check(f"CT 0.5 {mode}: exit 0", r.returncode == 0, cc.describe(r)):
            for k in range(3):
                v5 = zarr_decode.spec_decode(os.path.join(out5, str(k)))
                c.check(f"{mode} level {k}: 0.4 == 0.5, bit for bit", same(got[k], v5))
            m5 = json.load(open(os.path.join(out5, "zarr.json")))["attributes"]["ome"]
            c.check(f"{mode}: the 0.4 multiscales and omero are the 0.5 ones (version moved)",
                    {k: v for k, v in ms.items() if k != "version"} == m5["multiscales"][0] and
                    g.attrs.get("omero") == m5.get("omero"), (ms, m5))


def write_good(args, work, name="good.zarr", levels=3, run_dir=None):
    """The input (once, in work) and a job writing output `name`; with run_dir the job lies there
    and names its output relative to it (run with cwd=run_dir: the same provenance anywhere)."""
    import zarr
    inp = os.path.join(work, "in.zarr")
    if not os.path.exists(inp):
        a = np.random.default_rng(7).integers(0, 4096, SHAPE).astype(np.uint16)
        z = zarr.open(inp, mode="w", shape=SHAPE, chunks=(16, 16, 16), dtype="uint16")
        z[:] = a
    base = run_dir or work
    out = os.path.join(base, name)
    cfg = cc.write_config(os.path.join(base, name + ".yaml"), {
        "job": "convert", "input": {"store": inp, "spacing": [2.0, 1.0, 1.0],
                                    "unit": "micrometer"},
        "normalize": {"mode": "scale", "divisor": 4095.0},
        "output": {"path": name if run_dir else out, "fsync": False, "chunk": [8, 16, 16],
                   "ome": {"levels": levels, "version": "0.4"}},
        "parallel": {"threads": 2}, "progress": False})
    return inp, out, cfg


def case_checker(c, args, work):
    """The 0.4 checker is not a rubber stamp: each mutation of a conformant image is named."""
    _, out, cfg = write_good(args, work)
    r = cc.run([args.shardmill, "run", cfg])
    if not c.check("a conformant 0.4 image is written", r.returncode == 0, cc.describe(r)):
        return
    c.check("the 0.4 checker passes it", ngff04.check_image(out) == [], ngff04.check_image(out))

    def ms(g):
        return g["multiscales"][0]

    mutations = [
        ("version 0.5", ".zattrs", lambda g: ms(g).update(version="0.5"), "version"),
        ("0.5 layout (ome member)", ".zattrs",
         lambda g: g.update(ome={"version": "0.5", "multiscales": g.pop("multiscales")}),
         "multiscales"),
        (".zgroup v3", ".zgroup", lambda g: g.update(zarr_format=3), "zarr_format 2"),
        ("unit um", ".zattrs", lambda g: ms(g)["axes"][1].update(unit="um"), "UDUNITS"),
        ("two scales", ".zattrs",
         lambda g: ms(g)["datasets"][0]["coordinateTransformations"].append(
             {"type": "scale", "scale": [1, 1, 1]}), "exactly one scale"),
        ("translation first", ".zattrs",
         lambda g: ms(g)["datasets"][1]["coordinateTransformations"].reverse(), "one scale"),
        ("level 1 scale not a factor", ".zattrs",
         lambda g: ms(g)["datasets"][1]["coordinateTransformations"][0]["scale"].__setitem__(
             2, 1.5), "integer multiple"),
        ("translation off-centre", ".zattrs",
         lambda g: ms(g)["datasets"][2]["coordinateTransformations"][1]["translation"]
         .__setitem__(1, 0.0), "voxel centres"),
        ("omero window inverted", ".zattrs",
         lambda g: g["omero"]["channels"][0]["window"].update(start=2.0), "min <= start"),
        ("omero color", ".zattrs",
         lambda g: g["omero"]["channels"][0].update(color="white"), "hex"),
        ("level 1 shape", "1/.zarray", lambda d: d["shape"].__setitem__(1, 99), "ceil("),
        ("level 1 '.' keys", "1/.zarray", lambda d: d.update(dimension_separator="."),
         "dimension_separator"),
        ("level 2 a v3 array", "2/.zarray", lambda d: d.update(zarr_format=3), "Zarr v2"),
        ("level 0 of 2 axes", "0/.zarray", lambda d: d.update(shape=d["shape"][1:]),
         "dimensions"),
    ]
    for label, doc, mutate, expect in mutations:
        bad = os.path.join(work, "bad.zarr")
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(out, bad)
        path = os.path.join(bad, *doc.split("/"))
        d = json.load(open(path))
        mutate(d)
        json.dump(d, open(path, "w"))
        got = ngff04.check_image(bad)
        c.check(f"checker names '{label}' ({expect!r} in a message)",
                any(expect in g for g in got), got)
    bad = os.path.join(work, "bad.zarr")
    shutil.rmtree(bad, ignore_errors=True)
    shutil.copytree(out, bad)
    open(os.path.join(bad, "zarr.json"), "w").write("{}")
    c.check("checker names a zarr.json beside .zgroup",
            any("zarr.json" in g for g in ngff04.check_image(bad)), ngff04.check_image(bad))


def case_identity(c, args, work):
    trees = []
    for threads in (1, 2):
        d = cc.fresh_dir(os.path.join(work, f"t{threads}"))
        _, _, cfg = write_good(args, work, "out.zarr", run_dir=d)
        r = cc.run([args.shardmill, "run", cfg, "--set", f"parallel.threads={threads}"],
                   cwd=d, env=plain_env())
        c.check(f"{threads} threads: exit 0", r.returncode == 0, cc.describe(r))
        trees.append((f"{threads} threads", os.path.join(d, "out.zarr")))
    if args.mpiexec:
        d = cc.fresh_dir(os.path.join(work, "n2"))
        _, _, cfg = write_good(args, work, "out.zarr", run_dir=d)
        cmd = [args.mpiexec, "--oversubscribe", "-np", "2", args.shardmill, "run", cfg,
               "--set", "parallel.threads=1"]
        r = cc.run(cmd, cwd=d, env=mpi_env(), timeout=120)
        c.check("mpirun -n 2: exit 0", r.returncode == 0, cc.describe(r))
        trees.append(("mpirun -n 2", os.path.join(d, "out.zarr")))
    else:
        print("note: no --mpiexec, the mpirun run is left out")
    ref_label, ref = trees[0]
    c.check(f"{ref_label}: many chunk files (each a writer's unit)", len(chunk_files(ref)) > 20,
            len(chunk_files(ref)))
    for label, t in trees[1:]:
        diffs = cc.tree_diff(ref, t)
        c.check(f"{label} tree == {ref_label} tree, byte for byte", not diffs, diffs[:6])


def kill_during_write(cmd, cwd, out, want):
    """Starts cmd and SIGKILLs it (SIGSTOP first) once `want` chunk files exist; returns its exit
    status and the chunk count then."""
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None:
        if len(chunk_files(out)) >= want:
            os.kill(p.pid, signal.SIGSTOP)
            break
        time.sleep(0.0005)
    if p.poll() is None:
        os.kill(p.pid, signal.SIGKILL)
    return p.wait(), len(chunk_files(out))


def case_kill(c, args, work):
    ref_dir = cc.fresh_dir(os.path.join(work, "clean"))
    _, ref, cfg = write_good(args, work, "out.zarr", run_dir=ref_dir)
    r = cc.run([args.shardmill, "run", cfg], cwd=ref_dir)
    if not c.check("clean run exits 0", r.returncode == 0, cc.describe(r)):
        return
    total = len(chunk_files(ref))
    kdir = cc.fresh_dir(os.path.join(work, "killed"))
    _, out, cfg = write_good(args, work, "out.zarr", run_dir=kdir)
    # one chunk at a time with fsync: slow enough to be stopped half-way (same bytes)
    slow = ["--set", "output.fsync=true", "--set", "output.sync=fsync",
            "--set", "parallel.threads=1"]
    for attempt in range(3):
        shutil.rmtree(out, ignore_errors=True)
        rc, got = kill_during_write([args.shardmill, "run", cfg] + slow, kdir, out, total // 3)
        if got < total:
            break
    ok = c.check(f"SIGKILL while the chunks are written ({got} of {total}, run {attempt + 1})",
                 rc == -signal.SIGKILL and 1 <= got < total, f"exit {rc}, {got} of {total}")
    if not ok:
        return
    c.check("no completion marker after the kill",
            not os.path.exists(os.path.join(out, "shardmill.complete.json")))
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify of the killed output fails", r.returncode != 0, cc.describe(r))
    r = cc.run([args.shardmill, "run", cfg, "--set", "output.exists=auto"], cwd=kdir)
    c.check("exists: auto after the kill exits 0", r.returncode == 0, cc.describe(r))
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify then passes", r.returncode == 0, cc.describe(r))
    diffs = cc.tree_diff(ref, out)
    c.check("the tree == the clean run's, byte for byte", not diffs, diffs[:6])
    r = cc.run([args.shardmill, "run", cfg, "--set", "output.exists=auto", "--report",
                os.path.join(kdir, "again.json")], cwd=kdir)
    o = json.load(open(os.path.join(kdir, "again.json"))).get("output", {}) if (
        r.returncode == 0) else {"run": cc.describe(r)}
    c.check("exists: auto of the complete output: complete (its .zattrs names this input), "
            "nothing written", o.get("action") == "complete" and o.get("written") == 0, o)


def case_verify(c, args, work):
    d = cc.fresh_dir(os.path.join(work, "run"))
    _, out, cfg = write_good(args, d, "out.zarr")
    r = cc.run([args.shardmill, "run", cfg], cwd=d)
    if not c.check("clean run exits 0", r.returncode == 0, cc.describe(r)):
        return
    ref = os.path.join(work, "clean.zarr")  # a copy of the clean tree
    shutil.copytree(out, ref)
    files = chunk_files(out)
    trunc, gone = files[1], files[-1]
    with open(os.path.join(out, trunc), "r+b") as f:
        f.truncate(10)
    r = cc.run([args.shardmill, "verify", out])
    c.check(f"verify names the truncated chunk {trunc}", r.returncode == 1 and
            trunc in r.stdout + r.stderr, cc.describe(r))
    os.remove(os.path.join(out, gone))
    r = cc.run([args.shardmill, "verify", out])
    c.check(f"verify names the missing chunk {gone}", r.returncode == 1 and
            gone in r.stdout + r.stderr, cc.describe(r))
    r = cc.run([args.shardmill, "run", cfg, "--set", "output.exists=auto"], cwd=d)
    c.check("exists: auto repairs the damaged output", r.returncode == 0, cc.describe(r))
    diffs = cc.tree_diff(ref, out)
    c.check("repaired tree == clean tree, byte for byte", not diffs, diffs[:6])
    for doc in (".zgroup", "1/.zarray"):  # the documents too
        bad = os.path.join(work, "bad.zarr")
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(ref, bad)
        os.remove(os.path.join(bad, doc))
        r = cc.run([args.shardmill, "verify", bad])
        c.check(f"verify names a missing {doc}", r.returncode == 1 and doc in r.stdout + r.stderr,
                cc.describe(r))


def case_ingest(c, args, work):
    """ingest of uint16 labels (method nearest, downsample yx) as 0.4: the omero window known only
    after the scan (a pending member, top level in .zattrs) is restated; automatic chunks never
    pass the level's extent."""
    lab = np.random.default_rng(3).integers(0, 60000, (5, 300, 200)).astype("<u2")
    raw = os.path.join(work, "lab.raw")
    lab.tofile(raw)
    outs = {}
    for ver in ("0.4", "0.5"):
        out = os.path.join(work, f"lab{ver}.zarr")
        cfg = cc.write_config(os.path.join(work, f"lab{ver}.yaml"), {
            "job": "ingest",
            "input": {"store": raw, "format": "raw",
                      "raw": {"dtype": "uint16", "shape": list(lab.shape)}},
            "output": {"path": out, "fsync": False,
                       "ome": {"levels": 3, "method": "nearest", "downsample": "yx",
                               "version": ver}},
            "progress": False})
        r = cc.run([args.shardmill, "run", cfg])
        c.check(f"ingest {ver}: exit 0", r.returncode == 0, cc.describe(r))
        outs[ver] = (out, cfg)
    out, cfg = outs["0.4"]
    g, got = zarr2_levels(out, 3)
    for k in range(3):
        c.check(f"level {k} by zarr-python == NumPy's strides ::{2 ** k} on y, x only",
                same(got[k], lab[:, ::2 ** k, ::2 ** k]), got[k].shape)
    for k in range(3):
        za = json.load(open(os.path.join(out, str(k), ".zarray")))
        c.check(f"level {k}: automatic chunk {za['chunks']} within the shape {za['shape']}",
                all(a <= b for a, b in zip(za["chunks"], za["shape"])) and za["dtype"] == "<u2",
                za)
    w5 = json.load(open(os.path.join(outs["0.5"][0], "zarr.json")))["attributes"]["ome"]["omero"]
    c.check("the omero window (p1/p99 after the scan) is the 0.5 image's",
            g.attrs.get("omero") == w5, (g.attrs.get("omero"), w5))
    ngff04.check(c, out, "ingest 0.4")
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify passes", r.returncode == 0, cc.describe(r))


def case_refuse(c, args, work):
    inp, out, _ = write_good(args, work)
    for label, extra, key in [
            ("output.shard", {"output": {"shard": [16, 32, 32]}}, "output.shard"),
            ("export.hdf5.path", {"export": {"hdf5": {"path": os.path.join(work, "x.h5")}}},
             "export.hdf5.path")]:
        cfg = cc.write_config(os.path.join(work, "refuse.yaml"), cc.merge_config({
            "job": "convert", "input": {"store": inp},
            "normalize": {"mode": "scale", "divisor": 4095.0},
            "output": {"path": out, "ome": {"levels": 2, "version": "0.4"}},
            "progress": False}, extra))
        r = cc.run([args.shardmill, "run", cfg])
        lines = cc.one_error_line(r.stderr)
        c.check(f"{label} with version 0.4: exit 2, one error line naming {key}",
                r.returncode == 2 and len(lines) == 1 and key in lines[0], cc.describe(r))
        c.check(f"{label}: nothing created", not os.path.exists(out) and
                not os.path.exists(os.path.join(work, "x.h5")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--mpiexec", default="")
    cases = {"ct": case_ct, "checker": case_checker, "identity": case_identity,
             "ingest": case_ingest,
             "kill": case_kill, "verify": case_verify, "refuse": case_refuse}
    ap.add_argument("--case", required=True, choices=sorted(cases))
    args = ap.parse_args()
    args.shardmill = os.path.abspath(args.shardmill)
    work = cc.fresh_dir(os.path.abspath(os.path.join(args.work, args.case)))
    c = Checks(f"convert.ome04.{args.case}")
    if cases[args.case](c, args, work) == 77:
        return 77
    return c.done()


if __name__ == "__main__":
    cc.main_guard(main)
