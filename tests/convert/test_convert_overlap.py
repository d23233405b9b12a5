"""Output vs input (SPEC §6): an output that is the input, lies inside it or contains it is
refused with exit 2 and one line naming both paths, before anything is created or deleted.

Usage: /usr/bin/python3 test_convert_overlap.py --shardmill BIN --work DIR --case CASE
Every case builds its own tree: `in.zarr`, a finished shardmill output (so that
`exists: overwrite` would delete it), made by a convert of a zarr-python store. Each refused run
must exit 2 with exactly one stderr line `shardmill: error: <key>: <path> <relation> the
<input|output> <path>` naming both configured paths, and the whole tree (every file's bytes,
every entry's mode and mtime, no entry added) must be unchanged.
Cases (one ctest each, label `convert`):
  same      output.path == input.store with exists: overwrite and limits.memory_bytes 64KiB
            (the run that used to delete the input, then die reading it); also as a file:// URL,
            with "./" and a trailing slash, and with exists: error
  inside    output in.zarr/c/9 and in.zarr/sub (new), exists overwrite and error
  contains  input at out/in.zarr, output out (and "."), exists overwrite
  symlink   the same comparisons through links: input via a link, output via a link to the
            input, output inside a link to the input, output under a linked parent directory
  ingest    a raw source src/vol.raw: output == the source, inside it, the directory holding it
            (also through a link to that directory)
  export    export.hdf5.path inside the input, == the input, containing it; inside the output
            (the output dir not created either)
  validate  `shardmill validate` reports the same line without opening any store (exit 2)
  read      `shardmill read in.zarr -o FILE` with FILE inside the input (or --stats there):
            exit 2, nothing written
Prints one ok/FAIL line per check and a closing count; exit 1 on any failure.
"""

import argparse
import os
import re
import time

import numpy as np

from shardmill_test import runner as cc
from shardmill_test.checks import Checks

REL = {"same": "is", "inside": "lies inside", "contains": "contains"}


def make_tree(args, root):
    """root/in.zarr: a complete shardmill output (float32, 20x40x40, shards 8x16x16)."""
    import zarr
    src = os.path.join(root, "src.zarr")
    vals = (np.arange(20 * 40 * 40, dtype=np.uint64) % 251).astype(np.uint8)
    zarr.open(src, mode="w", shape=(20, 40, 40), chunks=(16, 16, 16),
              dtype="u1")[:] = vals.reshape(20, 40, 40)
    cfg = cc.write_config(os.path.join(root, "make.yaml"), {
        "job": "convert", "input": {"store": "src.zarr"}, "normalize": {"mode": "scale"},
        "output": {"path": "in.zarr", "shard": [8, 16, 16], "chunk": [4, 8, 8], "fsync": False},
        "progress": False})
    r = cc.run([args.shardmill, "run", cfg], cwd=root)
    if r.returncode != 0 or not os.path.exists(os.path.join(root, "in.zarr",
                                                            "shardmill.complete.json")):
        raise SystemExit(f"cannot make the input: {cc.describe(r)}")


def convert_cfg(root, name, store, out, extra=None):
    cfg = {"job": "convert", "input": {"store": store}, "normalize": {"mode": "scale"},
           "histogram": {"bins": 16, "range": [0, 1]},
           "output": {"path": out, "exists": "overwrite", "fsync": False},
           "limits": {"memory_bytes": "64KiB", "memory_ceiling": False}, "progress": False}
    return cc.write_config(os.path.join(root, name), cc.merge_config(cfg, extra))


def refused(c, label, cmd, root, key, path, rel, noun, other, cwd=None, alt=None):
    """Runs cmd expecting exit 2, one line '<key>: <path> <rel> the <noun> <other>' (or the
    regex alt: a rule of the config loader that refuses the same path first), and the tree under
    root unchanged (bytes, modes, mtimes; nothing added or removed)."""
    before = cc.snapshot(root)
    time.sleep(0.01)  # any rewrite would show in the mtimes
    r = cc.run(cmd, cwd=cwd or root)
    lines = cc.one_error_line(r.stderr)
    want = (rf"^shardmill: error: {re.escape(key)}: {re.escape(path)} {REL[rel]} the {noun} "
            rf"{re.escape(other)}\b")
    if alt is not None:
        want = f"(?:{want})|(?:{alt})"
    c.check(f"{label}: exit 2, one line naming both paths ({REL[rel]})",
            r.returncode == 2 and len(lines) == 1 and re.search(want, lines[0]) is not None,
            f"{cc.describe(r)}; want /{want}/")
    after = cc.snapshot(root)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    c.check(f"{label}: the tree is unchanged byte for byte, nothing created", not changed,
            f"changed entries: {changed[:8]}")


def run_cfg(args, cfg, sets=()):
    cmd = [args.shardmill, "run", cfg]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def case_same(c, args, root):
    cfg = convert_cfg(root, "job.yaml", "in.zarr", "in.zarr")
    refused(c, "output == input, exists: overwrite, 4KiB memory", run_cfg(args, cfg), root,
            "output.path", "in.zarr", "same", "input", "in.zarr")
    url = "file://" + os.path.join(root, "in.zarr")
    refused(c, "input as a file:// URL", run_cfg(args, cfg, [f"input.store={url}"]), root,
            "output.path", "in.zarr", "same", "input", os.path.join(root, "in.zarr"))
    refused(c, "output './in.zarr/'", run_cfg(args, cfg, ["output.path=./in.zarr/"]), root,
            "output.path", "./in.zarr/", "same", "input", "in.zarr")
    refused(c, "output == input, exists: error", run_cfg(args, cfg, ["output.exists=error"]),
            root, "output.path", "in.zarr", "same", "input", "in.zarr")
    # a run beside the input still works: the check compares whole components
    r = cc.run(run_cfg(args, cfg, ["output.path=in.zarr.out"]), cwd=root)
    c.check("output in.zarr.out beside the input: exit 0", r.returncode == 0, cc.describe(r))


def case_inside(c, args, root):
    cfg = convert_cfg(root, "job.yaml", "in.zarr", "in.zarr/c/9")
    for out in ("in.zarr/c/9", "in.zarr/sub", "in.zarr/c/0"):
        for policy in ("overwrite", "error"):
            refused(c, f"output {out}, exists: {policy}",
                    run_cfg(args, cfg, [f"output.path={out}", f"output.exists={policy}"]), root,
                    "output.path", out, "inside", "input", "in.zarr")


def case_contains(c, args, root):
    os.makedirs(os.path.join(root, "out"))
    os.rename(os.path.join(root, "in.zarr"), os.path.join(root, "out", "in.zarr"))
    cfg = convert_cfg(root, "job.yaml", "out/in.zarr", "out")
    refused(c, "output out containing the input out/in.zarr", run_cfg(args, cfg), root,
            "output.path", "out", "contains", "input", "out/in.zarr")
    refused(c, "output '.' (the working directory)",
            run_cfg(args, cfg, ["input.store=in.zarr", "output.path=."]),
            os.path.join(root, "out"), "output.path", ".", "contains", "input", "in.zarr",
            cwd=os.path.join(root, "out"),
            alt=r"output\.path '\.': the output path must name a directory of its own")
    refused(c, "output an absolute parent", run_cfg(args, cfg, [f"output.path={root}"]), root,
            "output.path", root, "contains", "input", "out/in.zarr")


def case_symlink(c, args, root):
    os.symlink("in.zarr", os.path.join(root, "link.zarr"))
    os.symlink(root, os.path.join(root, "alias"))
    cfg = convert_cfg(root, "job.yaml", "link.zarr", "in.zarr")
    refused(c, "input through a link, output the target", run_cfg(args, cfg), root,
            "output.path", "in.zarr", "same", "input", "link.zarr")
    refused(c, "output a link to the input", run_cfg(args, cfg, ["input.store=in.zarr",
                                                                 "output.path=link.zarr"]),
            root, "output.path", "link.zarr", "same", "input", "in.zarr")
    refused(c, "output inside a link to the input",
            run_cfg(args, cfg, ["input.store=in.zarr", "output.path=link.zarr/c/9"]), root,
            "output.path", "link.zarr/c/9", "inside", "input", "in.zarr")
    refused(c, "output under a linked parent directory",
            run_cfg(args, cfg, ["input.store=in.zarr", "output.path=alias/in.zarr"]), root,
            "output.path", "alias/in.zarr", "same", "input", "in.zarr")
    refused(c, "input under a linked parent, output containing it",
            run_cfg(args, cfg, ["input.store=alias/in.zarr", f"output.path={root}"]), root,
            "output.path", root, "contains", "input", "alias/in.zarr")


def case_ingest(c, args, root):
    src = os.path.join(root, "src")
    os.makedirs(src)
    vals = np.arange(6 * 8 * 10, dtype="<i2").reshape(6, 8, 10)
    with open(os.path.join(src, "vol.raw"), "wb") as f:
        f.write(vals.tobytes())
    os.symlink("src", os.path.join(root, "srclink"))
    cfg = cc.write_config(os.path.join(root, "ingest.yaml"), {
        "job": "ingest", "input": {"store": "src/vol.raw", "format": "raw",
                                   "raw": {"dtype": "int16", "shape": [6, 8, 10]}},
        "output": {"path": "src", "exists": "overwrite", "fsync": False, "shard": [2, 4, 5],
                   "chunk": [1, 2, 5]}, "progress": False})
    refused(c, "ingest: output the directory holding the source", run_cfg(args, cfg), root,
            "output.path", "src", "contains", "input", "src/vol.raw")
    refused(c, "ingest: output == the source file",
            run_cfg(args, cfg, ["output.path=src/vol.raw"]), root, "output.path", "src/vol.raw",
            "same", "input", "src/vol.raw")
    refused(c, "ingest: output inside the source path",
            run_cfg(args, cfg, ["output.path=src/vol.raw/z"]), root, "output.path",
            "src/vol.raw/z", "inside", "input", "src/vol.raw")
    refused(c, "ingest: output a link to the source's directory",
            run_cfg(args, cfg, ["output.path=srclink", "output.exists=error"]), root,
            "output.path", "srclink", "contains", "input", "src/vol.raw")
    r = cc.run(run_cfg(args, cfg, ["output.path=vol.zarr"]), cwd=root)
    c.check("ingest beside the source: exit 0", r.returncode == 0, cc.describe(r))


def case_export(c, args, root):
    cfg = convert_cfg(root, "job.yaml", "in.zarr", "o.zarr")
    for exp, rel in (("in.zarr/x.h5", "inside"), ("in.zarr", "same"), (".", "contains")):
        refused(c, f"export.hdf5.path {exp} vs the input",
                run_cfg(args, cfg, [f"export.hdf5.path={exp}"]), root, "export.hdf5.path", exp,
                rel, "input", "in.zarr",
                alt=r"export\.hdf5\.path '\.': the export path must name a file of its own")
    refused(c, "export.hdf5.path inside the output (nothing created)",
            run_cfg(args, cfg, ["export.hdf5.path=o.zarr/x.h5"]), root, "export.hdf5.path",
            "o.zarr/x.h5", "inside", "output", "o.zarr",
            alt=r"export\.hdf5\.path 'o\.zarr/x\.h5' lies inside the output 'o\.zarr'")


def case_validate(c, args, root):
    cfg = convert_cfg(root, "job.yaml", "in.zarr", "in.zarr/c/9")
    refused(c, "validate: output inside the input", [args.shardmill, "validate", cfg], root,
            "output.path", "in.zarr/c/9", "inside", "input", "in.zarr")
    refused(c, "validate: export inside the input",
            [args.shardmill, "validate", cfg, "--set", "output.path=o.zarr", "--set",
             "export.hdf5.path=in.zarr/e.h5"], root, "export.hdf5.path", "in.zarr/e.h5",
            "inside", "input", "in.zarr")
    # the store is never opened: a missing input with disjoint paths validates
    r = cc.run([args.shardmill, "validate", "-q", cfg, "--set", "input.store=nowhere.zarr",
                "--set", "output.path=o.zarr"], cwd=root)
    c.check("validate: disjoint paths, missing store: exit 0", r.returncode == 0,
            cc.describe(r))


def case_read(c, args, root):
    base = [args.shardmill, "read", "in.zarr", "--shape", "2,2,2"]
    refused(c, "read -o the input itself", base + ["-o", "in.zarr"], root, "-o", "in.zarr",
            "same", "input", "in.zarr")
    refused(c, "read -o inside the input", base + ["-o", "in.zarr/c/x.raw"], root, "-o",
            "in.zarr/c/x.raw", "inside", "input", "in.zarr")
    refused(c, "read -o over the input's zarr.json", base + ["-o", "in.zarr/zarr.json"], root,
            "-o", "in.zarr/zarr.json", "inside", "input", "in.zarr")
    refused(c, "read --stats inside the input",
            base + ["-o", "-", "--stats", "in.zarr/stats.json"], root, "--stats",
            "in.zarr/stats.json", "inside", "input", "in.zarr")
    r = cc.run(base + ["-o", "region.raw"], cwd=root)
    c.check("read -o beside the input: exit 0, 16 bytes", r.returncode == 0 and
            os.path.getsize(os.path.join(root, "region.raw")) == 2 * 2 * 2 * 4, cc.describe(r))


CASES = {"same": case_same, "inside": case_inside, "contains": case_contains,
         "symlink": case_symlink, "ingest": case_ingest, "export": case_export,
         "validate": case_validate, "read": case_read}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    args = ap.parse_args()
    args.shardmill = os.path.abspath(args.shardmill)
    root = cc.fresh_dir(os.path.abspath(os.path.join(args.work, args.case)))
    c = Checks(f"convert.overlap.{args.case}")
    make_tree(args, root)
    CASES[args.case](c, args, root)
    return c.done()


if __name__ == "__main__":
    cc.main_guard(main)
