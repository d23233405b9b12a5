"""Recoveries that used to dead-end (issue 32 items 4, 5, 6, 13, 14; docs/internals/writing.md).

Usage: /usr/bin/python3 test_convert_recovery.py --shardmill BIN --work DIR --case CASE
Every case starts from a clean run's output (an OME-Zarr image of 3 levels, or a plain array),
breaks it the way a kill, a person or a disk would, and runs `exists: auto` (and `resume`).
Allowed outcomes: a refusal naming the reason, or an output byte-identical to the clean run's
that passes `shardmill verify` and that the next `auto` finds complete. Cases (one ctest each,
convert.recovery.<case>):
  journal   item 4: .shardmill/ without journal/ (a truncated marker; an owner record alone, as
            an overwrite stopped half-way leaves it; journal/ a plain file): auto and resume
            finish the output instead of exit 4 "cannot open for fsync '.shardmill/journal'".
  levels    item 5: a run killed between the level documents (root and 0/zarr.json there, 1/
            missing or holding only a temporary name; a complete output's 2/zarr.json deleted):
            auto writes the missing documents instead of exit 2 "existing 1/zarr.json differs".
  grid      item 6: a shard copied outside the grid (`c/0/0/7`), a file where a directory
            belongs, a level directory beyond output.ome.levels, a c/ at an image's root:
            auto repairs once (the entries removed), the next auto says complete, verify passes.
  tree      item 13: verify and auto apply one rule: a directory named like a shard (in and
            outside the grid), zero-padded names (`c/0/0/01`, `c/00/`, a level `00/`) and a
            `*.tmp.*` directory fail verify; auto removes what is outside the grid and refuses,
            naming the entry, what no shardmill output holds.
  export    item 14: export.hdf5.path holding no HDF5 file (no signature at 0, 512, 1024, ...):
            auto no longer calls the output complete: exit 2 naming the file (under either
            export.hdf5.exists: the export never replaces a file that is not HDF5), untouched;
            once it is moved away the export is written again (h5py reads the values); a
            valid file with a 512-byte user block is trusted. A run killed between the export's
            rename and the marker's, and a damaged shard with the export there: auto finishes
            (the export written again) instead of exit 2 "export exists" for ever.
Prints one ok/FAIL line per check and a closing count; exit 1 on any failure, 77 when skipped.
"""

import json
import os
import shutil
import subprocess

from shardmill_test import runner as cc
from shardmill_test.ranks import plain_env

import test_convert_safety as ts  # noqa: E402  (the input writer)

SKIP = 77
SHAPE = (40, 48, 48)
AUTO = ["--set", "output.exists=auto"]
RESUME = ["--set", "output.exists=resume"]
MARKER = "shardmill.complete.json"
LINE = "is already complete and verified: nothing to do"


def run(args, cmd, cwd):
    return subprocess.run([args.shardmill] + cmd, cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=plain_env())


def job(work, ome=True, extra=None):
    inp = os.path.join(work, "in.zarr")
    if not os.path.exists(inp):
        ts.make_input(inp, SHAPE, 32, chunks=(16, 16, 16))
    cfg = {"job": "convert", "input": {"store": inp}, "normalize": {"mode": "scale"},
           "output": {"path": "out.zarr", "shard": [8, 16, 16], "chunk": [8, 8, 8]},
           "parallel": {"threads": 1}, "progress": False}
    if ome:
        cfg["output"]["ome"] = {"levels": 3}
    name = "ome.yaml" if ome else "array.yaml"
    return cc.write_config(os.path.join(work, name), cc.merge_config(cfg, extra))


class Job:
    """A job, its clean reference output, and fresh copies of it to break."""

    def __init__(self, c, args, work, ome=True, extra=None, tag=""):
        self.c, self.args, self.work = c, args, work
        self.cfg = job(work, ome, extra)
        d = cc.fresh_dir(os.path.join(work, f"ref{tag}-{'ome' if ome else 'array'}"))
        r = run(args, ["run", self.cfg], d)
        c.check(f"clean run ({'OME, 3 levels' if ome else 'array'}) exits 0", r.returncode == 0,
                cc.describe(r))
        self.ref = os.path.join(d, "out.zarr")
        self.n = 0

    def copy(self):
        """A new directory holding a copy of the clean output as out.zarr; its path."""
        self.n += 1
        d = cc.fresh_dir(os.path.join(self.work, f"case{self.n}"))
        shutil.copytree(self.ref, os.path.join(d, "out.zarr"))
        return d

    def finishes(self, label, d, policy=AUTO, action=None):
        """policy run in d: exit 0 (the action when given), verify passes, tree == clean, and
        the next auto says complete."""
        c, out = self.c, os.path.join(d, "out.zarr")
        r = run(self.args, ["run", self.cfg, "--report", "rep.json"] + policy, d)
        if not c.check(f"{label}: exit 0", r.returncode == 0, cc.describe(r)):
            return False
        if action is not None:
            got = (json.load(open(os.path.join(d, "rep.json"))).get("output") or {})
            c.check(f"{label}: report output.action {action!r}", got.get("action") == action, got)
        r = run(self.args, ["verify", out], d)
        c.check(f"{label}: shardmill verify passes", r.returncode == 0, cc.describe(r) + r.stdout)
        diffs = cc.tree_diff(self.ref, out)
        c.check(f"{label}: tree byte-identical to the clean run's (every file)", not diffs,
                "; ".join(diffs[:8]))
        r = run(self.args, ["run", self.cfg] + AUTO, d)
        c.check(f"{label}: the next auto says complete", r.returncode == 0 and LINE in r.stdout,
                cc.describe(r) + r.stdout[-400:])
        return True

    def verify_names(self, label, d, entry):
        """verify fails (exit 1) and names entry."""
        r = run(self.args, ["verify", os.path.join(d, "out.zarr")], d)
        self.c.check(f"{label}: verify fails (exit 1) naming {entry}",
                     r.returncode == 1 and entry in r.stdout + r.stderr,
                     cc.describe(r) + r.stdout[-600:])

    def refused(self, label, d, words, policy=AUTO):
        """policy run: exit 2, one error line holding every one of words, nothing touched."""
        out = os.path.join(d, "out.zarr")
        before = cc.snapshot(out)
        r = run(self.args, ["run", self.cfg] + policy, d)
        lines = cc.one_error_line(r.stderr)
        self.c.check(f"{label}: exit 2, one error line naming {words}",
                     r.returncode == 2 and len(lines) == 1 and all(w in lines[0] for w in words),
                     cc.describe(r))
        after = cc.snapshot(out)
        self.c.check(f"{label}: nothing touched", after == before,
                     sorted(k for k in set(before) | set(after)
                            if before.get(k) != after.get(k))[:8])


def first_shard(out, level="0"):
    base = os.path.join(out, level, "c") if level else os.path.join(out, "c")
    for p, _, fs in sorted(os.walk(base)):
        for f in sorted(fs):
            return os.path.join(p, f)
    return None


def owner_only(out):
    """.shardmill/ holding the owner record alone (an overwrite stopped before its delete)."""
    os.makedirs(os.path.join(out, ".shardmill"), exist_ok=True)
    with open(os.path.join(out, ".shardmill", "owner"), "w") as f:
        f.write("host h pid 1 started 0\n")


def case_journal(c, args, work):
    j = Job(c, args, work)
    d = j.copy()
    open(os.path.join(d, "out.zarr", MARKER), "w").close()  # truncated: damaged, no .shardmill
    j.finishes("a truncated marker, auto", d, action="repaired")
    d = j.copy()
    with open(os.path.join(d, "out.zarr", MARKER), "r+b") as f:
        f.truncate(100)
    j.finishes("a marker cut at 100 bytes, resume", d, policy=RESUME)
    d = j.copy()
    owner_only(os.path.join(d, "out.zarr"))
    j.finishes("the owner record alone (no journal/), auto", d, action="repaired")
    d = j.copy()
    out = os.path.join(d, "out.zarr")
    owner_only(out)
    os.unlink(os.path.join(out, MARKER))
    j.finishes("no marker, the owner record alone, auto", d, action="resumed")
    d = j.copy()
    out = os.path.join(d, "out.zarr")
    owner_only(out)
    open(os.path.join(out, ".shardmill", "journal"), "w").write("not a directory\n")
    j.finishes(".shardmill/journal a plain file, auto", d, action="repaired")


def begun_state(out, levels_done, tmp_level=None):
    """The state a run killed during begin leaves: root zarr.json, the first levels_done level
    documents (no shard, no marker), .shardmill/ with its journal directory; with tmp_level, that
    level's directory holding only a temporary name of its zarr.json."""
    os.unlink(os.path.join(out, MARKER))
    for k in range(3):
        lv = os.path.join(out, str(k))
        if k < levels_done:
            shutil.rmtree(os.path.join(lv, "c"))
        else:
            shutil.rmtree(lv)
    os.makedirs(os.path.join(out, ".shardmill", "journal"))
    open(os.path.join(out, ".shardmill", "owner"), "w").write("host h pid 1 started 0\n")
    if tmp_level is not None:
        lv = os.path.join(out, str(tmp_level))
        os.makedirs(lv)
        open(os.path.join(lv, "zarr.json.tmp.4242.3"), "w").write("{")


def case_levels(c, args, work):
    j = Job(c, args, work)
    d = j.copy()
    begun_state(os.path.join(d, "out.zarr"), 1)
    j.finishes("killed after 0/zarr.json (no 1/), auto", d, action="resumed")
    d = j.copy()
    begun_state(os.path.join(d, "out.zarr"), 1)
    j.finishes("killed after 0/zarr.json (no 1/), resume", d, policy=RESUME)
    d = j.copy()
    begun_state(os.path.join(d, "out.zarr"), 1, tmp_level=1)
    j.finishes("killed in 1/zarr.json's rename (a temporary name only), auto", d,
               action="resumed")
    d = j.copy()
    begun_state(os.path.join(d, "out.zarr"), 2)
    j.finishes("killed after 1/zarr.json (no 2/), auto", d, action="resumed")
    d = j.copy()
    os.unlink(os.path.join(d, "out.zarr", "2", "zarr.json"))
    j.finishes("a complete output's 2/zarr.json deleted, auto", d, action="repaired")
    d = j.copy()  # a level document of another job is still refused
    p = os.path.join(d, "out.zarr", "1", "zarr.json")
    doc = json.load(open(p))
    doc["attributes"] = {"other": 1}
    json.dump(doc, open(p, "w"))
    os.unlink(os.path.join(d, "out.zarr", MARKER))
    owner_only(os.path.join(d, "out.zarr"))
    j.refused("1/zarr.json of another job", d, ["1/zarr.json", "differs"])


def case_grid(c, args, work):
    j = Job(c, args, work, ome=False)
    d = j.copy()
    out = os.path.join(d, "out.zarr")
    shutil.copy(os.path.join(out, "c", "0", "0", "0"), os.path.join(out, "c", "0", "0", "7"))
    j.verify_names("c/0/0/7 (outside the grid)", d, "c/0/0/7")
    j.finishes("c/0/0/7 (outside the grid), auto", d, action="repaired")
    d = j.copy()
    out = os.path.join(d, "out.zarr")
    shutil.copy(os.path.join(out, "c", "0", "0", "0"), os.path.join(out, "c", "9"))
    j.verify_names("a file c/9 where directories belong", d, "c/9")
    j.finishes("a file c/9 where directories belong, auto", d, action="repaired")
    d = j.copy()
    out = os.path.join(d, "out.zarr")
    os.makedirs(os.path.join(out, "c", "5", "0"))
    shutil.copy(os.path.join(out, "c", "0", "0", "0"), os.path.join(out, "c", "5", "0", "0"))
    j.verify_names("c/5/0/0 (axis 0 outside the grid)", d, "c/5")
    j.finishes("c/5/0/0 (axis 0 outside the grid), resume", d, policy=RESUME)
    o = Job(c, args, work, ome=True)
    d = o.copy()
    out = os.path.join(d, "out.zarr")
    shutil.copytree(os.path.join(out, "2"), os.path.join(out, "3"))
    o.verify_names("a level directory 3/ beyond levels: 3", d, "3")
    o.finishes("a level directory 3/ beyond levels: 3, auto", d, action="repaired")
    d = o.copy()
    out = os.path.join(d, "out.zarr")
    shutil.copytree(os.path.join(out, "0", "c"), os.path.join(out, "c"))
    o.verify_names("c/ at the image's root", d, "c")
    o.finishes("c/ at the image's root, auto", d, action="repaired")
    d = o.copy()
    out = os.path.join(d, "out.zarr")
    shutil.copy(first_shard(out, "1"), os.path.join(out, "1", "c", "0", "0", "6"))
    o.verify_names("1/c/0/0/6 (outside level 1's grid)", d, "1/c/0/0/6")
    o.finishes("1/c/0/0/6 (outside level 1's grid), auto", d, action="repaired")


def case_tree(c, args, work):
    j = Job(c, args, work, ome=False)
    # named like shards: directories where a shard belongs and outside the grid: repaired
    d = j.copy()
    out = os.path.join(d, "out.zarr")
    os.makedirs(os.path.join(out, "c", "0", "0", "9"))
    j.verify_names("an empty directory c/0/0/9 (named like a shard)", d, "c/0/0/9")
    j.finishes("an empty directory c/0/0/9, auto", d, action="repaired")
    d = j.copy()
    out = os.path.join(d, "out.zarr")
    os.makedirs(os.path.join(out, "c", "4", "5", "0"))
    j.verify_names("an empty directory c/4/5/0 (outside the grid)", d, "c/4/5")
    j.finishes("an empty directory c/4/5/0, auto", d, action="repaired")
    d = j.copy()
    out = os.path.join(d, "out.zarr")
    leaf = os.path.join(out, "c", "0", "0", "1")
    os.unlink(leaf)
    os.makedirs(os.path.join(leaf, "0"))
    j.verify_names("a directory where shard c/0/0/1 belongs", d, "c/0/0/1")
    j.finishes("a directory where shard c/0/0/1 belongs, auto", d, action="repaired")
    # names no shardmill output holds: verify fails, auto refuses naming the entry
    for label, make, entry in (
            ("a zero-padded shard c/0/0/01", lambda o: shutil.copy(
                os.path.join(o, "c", "0", "0", "1"), os.path.join(o, "c", "0", "0", "01")),
             "c/0/0/01"),
            ("a zero-padded directory c/00/", lambda o: shutil.copytree(
                os.path.join(o, "c", "0"), os.path.join(o, "c", "00")), "c/00"),
            ("a *.tmp.* directory c/0/0/0.tmp.1.2", lambda o: os.makedirs(
                os.path.join(o, "c", "0", "0", "0.tmp.1.2")), "c/0/0/0.tmp.1.2")):
        d = j.copy()
        make(os.path.join(d, "out.zarr"))
        j.verify_names(label, d, entry)
        j.refused(f"{label}, auto", d, [entry, "not a shardmill output"])
    o = Job(c, args, work, ome=True)
    d = o.copy()
    shutil.copytree(os.path.join(d, "out.zarr", "0"), os.path.join(d, "out.zarr", "00"))
    o.verify_names("a zero-padded level directory 00/", d, "00")
    o.refused("a zero-padded level directory 00/, auto", d, ["'00'", "not a shardmill output"])
    d = o.copy()
    os.makedirs(os.path.join(d, "out.zarr", "1", "c", "0", "1.tmp.9.9"))
    o.verify_names("a *.tmp.* directory in level 1", d, "1/c/0/1.tmp.9.9")
    o.refused("a *.tmp.* directory in level 1, auto", d, ["1.tmp.9.9", "not a shardmill output"])
    d = o.copy()  # a temporary file is an unfinished write: verify flags it, auto sweeps it
    out = os.path.join(d, "out.zarr")
    open(os.path.join(out, "1", "c", "0", "0", "0.tmp.77.1"), "w").write("partial")
    o.verify_names("a temporary file in level 1", d, "1/c/0/0/0.tmp.77.1")
    o.finishes("a temporary file in level 1, auto", d, action="repaired")


def h5py_file(path):
    import h5py
    return h5py.File(path, "w")


def h5_values(path):
    import h5py
    with h5py.File(path, "r") as f:
        return f["/data"][()]


def case_export(c, args, work):
    j = Job(c, args, work, ome=False, extra={"export": {"hdf5": {"path": "out.h5"}}},
            tag="-export")
    h5 = os.path.join(os.path.dirname(j.ref), "out.h5")
    if not os.path.exists(h5):
        print("SKIP: no HDF5 export in this build")
        return SKIP
    want = h5_values(h5)

    def with_export(data):
        d = j.copy()
        open(os.path.join(d, "out.h5"), "wb").write(data)
        return d

    good = open(h5, "rb").read()
    d = with_export(good)
    r = run(args, ["run", j.cfg] + AUTO, d)
    c.check("a valid export: auto says complete", r.returncode == 0 and LINE in r.stdout,
            cc.describe(r))
    for label, data in (("an empty file", b""), ("text", b"not an hdf5 file\n" * 40),
                        ("the signature at offset 100", b"\0" * 100 + good),
                        ("the first 7 signature bytes", good[:7])):
        for policy in ("error", "overwrite"):
            d = with_export(data)
            j.refused(f"export.hdf5.path holding {label}, auto, export.hdf5.exists {policy}", d,
                      ["out.h5", "not an HDF5 file", "never overwrites"],
                      AUTO + ["--set", f"export.hdf5.exists={policy}"])
            c.check(f"... {label}: the file untouched",
                    open(os.path.join(d, "out.h5"), "rb").read() == data)
    os.unlink(os.path.join(d, "out.h5"))  # moved away: the export is written again
    r = run(args, ["run", j.cfg, "--report", "rep.json"] + AUTO, d)
    c.check("the file removed: auto exits 0", r.returncode == 0, cc.describe(r))
    c.check("... the export written again holds the values (h5py)",
            r.returncode == 0 and (h5_values(os.path.join(d, "out.h5")) == want).all())
    diffs = cc.tree_diff(j.ref, os.path.join(d, "out.zarr"))
    c.check("... the Zarr output byte-identical to the clean run's", not diffs, diffs[:6])
    r = run(args, ["run", j.cfg] + AUTO, d)
    c.check("... the next auto says complete", r.returncode == 0 and LINE in r.stdout,
            cc.describe(r))
    # a kill between the export's rename and the marker's: the export there, no marker
    d = with_export(good)
    os.unlink(os.path.join(d, "out.zarr", MARKER))
    owner_only(os.path.join(d, "out.zarr"))
    os.unlink(os.path.join(d, "out.h5"))
    with h5py_file(os.path.join(d, "out.h5")) as f:  # another HDF5 file: replaced
        f["/data"] = want[:1]
    j.finishes("killed between the export and the marker, auto", d, action="resumed")
    c.check("... the export written again holds the values (h5py)",
            (h5_values(os.path.join(d, "out.h5")) == want).all())
    d = with_export(good)  # a damaged shard with the export there
    with open(first_shard(os.path.join(d, "out.zarr"), level=None), "r+b") as f:
        f.seek(20)
        f.write(b"\xff\xfe")
    j.finishes("a damaged shard with the export there, auto", d, action="repaired")
    c.check("... the export holds the values (h5py)",
            (h5_values(os.path.join(d, "out.h5")) == want).all())
    d = cc.fresh_dir(os.path.join(work, "new-with-h5"))  # no output: not this job's file
    open(os.path.join(d, "out.h5"), "wb").write(good)
    r = run(args, ["run", j.cfg] + AUTO, d)
    c.check("no output but an HDF5 file at the export path: exit 2 'export exists'",
            r.returncode == 2 and "export exists" in r.stderr, cc.describe(r))
    import h5py  # an HDF5 file with a 512-byte user block: the signature at 512
    d = j.copy()
    with h5py.File(os.path.join(d, "out.h5"), "w", userblock_size=512) as f:
        f["/data"] = want
    r = run(args, ["run", j.cfg] + AUTO, d)
    c.check("an HDF5 file with a 512-byte user block: auto says complete",
            r.returncode == 0 and LINE in r.stdout, cc.describe(r))
    return None


CASES = {"journal": case_journal, "levels": case_levels, "grid": case_grid, "tree": case_tree,
         "export": case_export}


def main():
    return cc.case_main("recovery", CASES, SKIP)


if __name__ == "__main__":
    cc.main_guard(main)
