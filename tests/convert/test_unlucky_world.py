"""The unlucky-world test (issue 32): the PROPERTY of `output.exists: auto`, not its cases.

For each seed of a fixed list, a small convert job (16x32x32 uint16; a plain array or a 3-level
OME-Zarr image; from a Zarr v2 input written by zarr-python, a raw file, a multi-page TIFF file or
a TIFF stack written by tifffile) is run once, one random mutation of the world is applied, and
the job is run again with `--set output.exists=auto`. The mutations:

  input   rewritten in place (same shape, other values); replaced by a file of the same size with
          its mtime restored (os.utime, in place or by rename); a symbolic link to the input
          flipped to another scan of the same size and mtimes; a metadata edit (a Zarr input's
          .zattrs or fill_value, a TIFF's resolution tags).
  output  (of a complete output, or of an unfinished one: marker gone, .shardmill/journal/
          holding the records of some shards, some shards missing, as a SIGKILL leaves it)
          the marker truncated or deleted; the journal truncated, deleted, or its directory
          deleted; a level document (zarr.json, an OME level's or the group's) truncated or
          deleted; a foreign file (a root entry, a shard copied out of the grid, a zero-padded
          name, a temporary name, a file in .shardmill/); two shards' bytes swapped.
  world   SIGKILL at a random moment of the second run (then auto again); a permission error
          while it runs (the job runs as user nobody, a shard, a shard directory or the output
          root made unwritable: chmod; as a non-root user the same without setpriv); a full disk
          (the output on a small tmpfs this test mounts (root only), filled up to a random
          number of free pages) — each with a damage that makes the second run write.

Allowed outcomes of the `auto` run:
  - exit 0 with an output byte-identical (every file) to a clean `exists: error` run of the same
    configuration on the CURRENT input, into another directory, that `shardmill verify` passes;
  - a refusal: exit 1..5 with exactly one `shardmill: error: ...` line on stderr, leaving the
    output untouched (every file's bytes) or resumable: the next `auto` exits 0 with an output as
    above. After a world fault (the kill, the permission, the full disk: the fault removed
    first) and after damage of an unfinished output's bookkeeping (its journal, a level
    document it never wrote), the next `auto` must finish: a refusal there is a dead end.
Never exit 0 with anything else, never a crash. The runs use output.sync none, fsync or syncfs
(the recoveries differ); as root the worlds live on a tmpfs this test mounts (fsync and syncfs
cost nothing there), unmounted at the end.

Usage: /usr/bin/python3 test_unlucky_world.py --shardmill BIN --work DIR
         [--seeds N [--part K/M] | --seed S [--seed S ...]] [--keep] [--list]
  --seeds N   seeds 1..N (default: $SM_UNLUCKY_SEEDS, else 200: the CI profile; nightly-style
              runs: SM_UNLUCKY_SEEDS=2000)
  --part K/M  the K-th (from 0) of M equal runs of that list (ctest runs two parts side by side)
  --seed S    one seed (repeatable), for debugging: its world stays under WORK/seed-S (--keep
              implied) and every command is printed
  --list      print each seed's scenario and mutation, run nothing
Prints one ok/FAIL line per seed (FAIL naming the seed, scenario, mutation and what was wrong),
the per-mutation tally, and a closing count; exit 1 on any violation.
"""

import argparse
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import time

import numpy as np

from shardmill_test import runner as cc
from shardmill_test.checks import Checks
from shardmill_test.inputs import write_multipage, write_stack
from shardmill_test.ranks import plain_env

import crc32c as _crc32c

SHAPE = (16, 32, 32)
SHARD = [8, 16, 16]
CHUNK = [4, 8, 8]
LEVELS = 3
NOBODY = 65534
TMPFS_BYTES = 4 << 20
WORLDS_BYTES = 256 << 20
PAGE = 4096

SOURCES = ("zarr", "raw", "tiff", "tiffstack")
KINDS = ("array", "ome")
MUTATIONS = ("input_rewrite", "input_same_size_mtime", "input_flip_symlink", "input_metadata",
             "marker_truncated", "marker_deleted", "journal_truncated", "journal_deleted",
             "journal_dir_deleted", "level_doc_truncated", "level_doc_deleted", "foreign_file",
             "swapped_shards", "kill", "permission", "full_disk")
# Mutations after which the next auto must finish (exit 0, correct): a world fault, removed
# first, or damage to an unfinished output's own bookkeeping.
MUST_FINISH = ("kill", "permission", "full_disk", "journal_truncated", "journal_deleted",
               "journal_dir_deleted")


# ---- the world ----

class World:
    """One seed's job: its directory, input, configuration and where its output goes."""

    def __init__(self, args, seed, root):
        self.args = args
        self.seed = seed
        self.rng = random.Random(seed)
        self.nrng = np.random.default_rng(seed)
        self.root = root
        self.mutation = MUTATIONS[seed % len(MUTATIONS)]
        combo = (seed // len(MUTATIONS)) % (len(SOURCES) * len(KINDS))
        self.source = SOURCES[combo % len(SOURCES)]
        self.kind = KINDS[combo // len(SOURCES)]
        self.normalize = self.rng.choice(["scale", "percentile"])
        # durability: none, fsync per shard or syncfs staging (the recoveries differ: the
        # journal is opened for fsync in the durable modes); cheap on the tmpfs the worlds live on
        self.sync = self.rng.choice(["none", "fsync", "syncfs"])
        self.run_dir = os.path.join(root, "run")  # cwd of the job's runs; out.zarr is there
        self.uid = None  # run the job as this user (the permission mutation, as root)
        self.log = []
        self.verbose = False
        self.t_run = 0.05

    @property
    def out(self):
        return os.path.join(self.run_dir, "out.zarr")

    def describe(self):
        return f"{self.source}->{self.kind} {self.normalize} {self.sync} {self.mutation}"

    # -- input --

    def values(self):
        return self.nrng.integers(0, 4096, SHAPE, dtype=np.uint16)

    def make_input(self):
        """Writes the input (values of this seed); with the flip mutation the configuration
        names a symbolic link to it."""
        self.vol = self.values()
        name = {"zarr": "scan_a.zarr", "raw": "scan_a.raw", "tiff": "scan_a.tif",
                "tiffstack": "scan_a.d"}[self.source]
        self.target = os.path.join(self.root, name)
        self.write_input(self.target, self.vol)
        if self.mutation == "input_flip_symlink":
            self.store = os.path.join(self.root, "latest" + os.path.splitext(name)[1])
            os.symlink(name, self.store)
        else:
            self.store = self.target

    def write_input(self, path, vol, resolution=None):
        if self.source == "zarr":
            import zarr
            z = zarr.open(path, mode="w", shape=SHAPE, chunks=(8, 16, 16), dtype="u2")
            z[:] = vol
        elif self.source == "raw":
            vol.astype("<u2").tofile(path)
        elif self.source == "tiff":
            kw = {"resolution": resolution} if resolution else {}
            write_multipage(path, vol, **kw)
        else:
            kw = {"resolution": resolution} if resolution else {}
            write_stack(path, vol, **kw)

    def input_files(self, base=None):
        """The files whose bytes are values (data files, not metadata)."""
        base = base or self.target
        if self.source in ("raw", "tiff"):
            return [base]
        if self.source == "tiffstack":
            return [os.path.join(base, f"s{z + 1}.tif") for z in range(SHAPE[0])]
        return sorted(os.path.join(d, f) for d, _, fs in os.walk(base) for f in fs
                      if not f.startswith("."))

    def config(self):
        inp = {"store": self.store}
        if self.source == "raw":
            inp.update({"format": "raw", "raw": {"dtype": "uint16", "shape": list(SHAPE)}})
        elif self.source in ("tiff", "tiffstack"):
            inp["format"] = "tiff"
        norm = ({"mode": "scale", "divisor": 4095} if self.normalize == "scale" else
                {"mode": "percentile", "lo": 1, "hi": 99})
        out = {"path": "out.zarr", "shard": SHARD, "chunk": CHUNK}
        out.update({"fsync": False} if self.sync == "none" else {"fsync": True, "sync": self.sync})
        if self.kind == "ome":
            out["ome"] = {"levels": LEVELS}
        cfg = {"job": "convert", "input": inp, "normalize": norm, "output": out,
               "parallel": {"threads": 1}, "progress": False}
        self.cfg = cc.write_config(os.path.join(self.root, "job.yaml"), cfg)

    # -- runs --

    def cmd(self, argv):
        cmd = [self.args.shardmill] + argv
        if self.uid is not None:
            cmd = ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                   "--"] + cmd
        return cmd

    def note(self, text):
        self.log.append(text)
        if self.verbose:
            print("   " + text, flush=True)

    def run(self, extra=(), cwd=None, label="run"):
        argv = ["run", self.cfg] + list(extra)
        t0 = time.monotonic()
        r = subprocess.run(self.cmd(argv), cwd=cwd or self.run_dir, capture_output=True,
                           text=True, timeout=120, env=plain_env())
        dt = time.monotonic() - t0
        self.note(f"{label}: {' '.join(argv)} -> exit {r.returncode} ({dt * 1000:.0f} ms) "
                  f"{r.stderr.strip()[-300:]}")
        return r, dt

    def auto(self, label="auto"):
        return self.run(["--set", "output.exists=auto"], label=label)[0]

    def verify(self, path):
        r = subprocess.run(self.cmd(["verify", path]), capture_output=True, text=True,
                           timeout=120, env=plain_env())
        self.note(f"verify -> exit {r.returncode} {(r.stdout + r.stderr).strip()[-300:]}")
        return r


# ---- the output's files ----

def tree_bytes(root):
    """{relpath: bytes or 'dir' or 'link'} of everything under root (None when absent)."""
    if not os.path.lexists(root):
        return None
    snap = {}
    for d, dirs, files in os.walk(root):
        for n in dirs:
            p = os.path.join(d, n)
            snap[os.path.relpath(p, root)] = "link" if os.path.islink(p) else "dir"
        for n in files:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            try:
                snap[rel] = "link" if os.path.islink(p) else open(p, "rb").read()
            except OSError as e:
                snap[rel] = f"unreadable {e.errno}"
    return snap


def arrays(w):
    """The output's arrays as (relative directory, zarr.json dict): '' for a plain array, the
    levels 0 .. LEVELS-1 of an OME image."""
    if w.kind == "array":
        return [""]
    return [str(k) for k in range(LEVELS)]


def grid(meta):
    shape, shard = meta["shape"], meta["chunk_grid"]["configuration"]["chunk_shape"]
    return [-(-s // c) for s, c in zip(shape, shard)]


def shard_files(w, out=None):
    """[(array dir, key 'c/i/j/k', linear index in its array, path)] of every shard in the
    grid of every array of the output (zarr.json read from the clean layout)."""
    out = out or w.out
    res = []
    for a in arrays(w):
        g = w.grids[a]
        for lin in range(int(np.prod(g))):
            idx = np.unravel_index(lin, g)
            key = "c/" + "/".join(str(int(i)) for i in idx)
            res.append((a, key, lin, os.path.join(out, a, *key.split("/"))))
    return res


def learn_grids(w):
    w.grids = {}
    for a in arrays(w):
        meta = json.load(open(os.path.join(w.out, a, "zarr.json")))
        w.grids[a] = grid(meta)


def make_unfinished(w):
    """A complete output turned into what a SIGKILL leaves: the marker gone, .shardmill/ with
    an owner record and a journal holding the records of some shards, the others (some of them)
    missing. The records are the marker's (the journal format of docs/internals/writing.md)."""
    marker_path = os.path.join(w.out, "shardmill.complete.json")
    marker = json.load(open(marker_path))
    recs = {r["key"]: r for r in marker.get("shards", [])}
    shards = shard_files(w)
    keep = [s for s in shards if w.rng.random() < 0.6]
    os.makedirs(os.path.join(w.out, ".shardmill", "journal"))
    with open(os.path.join(w.out, ".shardmill", "owner"), "w") as f:
        f.write('{"host": "elsewhere", "pid": 1, "started": 0}\n')
    token = w.rng.getrandbits(64) | 1
    jpath = os.path.join(w.out, ".shardmill", "journal", f"{token:016x}.0.jnl")
    data = b""
    linear = 0  # the marker's keys: levels in order, each level's grid in C order
    for a, key, lin, path in shards:
        mkey = (a + "/" if a else "") + key
        r = recs.get(mkey)
        if r is not None and (a, key, lin, path) in keep and w.rng.random() < 0.8:
            body = struct.pack("<QQQI", linear, r["size"], int(r["values"], 16), r["crc32c"])
            data += body + struct.pack("<I", _crc32c.crc32c(body))
        linear += 1
    with open(jpath, "wb") as f:
        f.write(data)
    for s in shards:
        if s not in keep and w.rng.random() < 0.7:
            os.unlink(s[3])
    os.unlink(marker_path)
    w.note(f"unfinished: {len(data) // 32} records, {sum(os.path.exists(s[3]) for s in shards)}"
           f" of {len(shards)} shards")
    return jpath


# ---- mutations ----

def rewrite_values(w, base, vol, same_time, by_rename):
    """Writes vol into the input at base with the same sizes; same_time restores every data
    file's (and the Zarr directories') atime and mtime; by_rename writes a new inode."""
    files = w.input_files(base)
    times = {p: os.stat(p) for p in files}
    dirs = {}
    if os.path.isdir(base):  # a Zarr store's directories, a TIFF stack's directory
        dirs = {d: os.stat(d) for d, _, _ in os.walk(base)}
    if by_rename and w.source != "zarr":
        tmp = base + ".new"
        w.write_input(tmp, vol)
        for p, q in zip(w.input_files(tmp), files):
            if os.path.getsize(p) != os.path.getsize(q):
                raise RuntimeError(f"fixture: {p} and {q} differ in size")
        if w.source == "tiffstack":
            for p, q in zip(w.input_files(tmp), files):
                os.replace(p, q)
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, base)
    elif w.source == "zarr":
        import zarr
        zarr.open(base, mode="r+")[:] = vol
    else:
        tmp = base + ".new"
        w.write_input(tmp, vol)
        for p, q in zip(w.input_files(tmp), files):
            data = open(p, "rb").read()
            if len(data) != os.path.getsize(q):
                raise RuntimeError(f"fixture: {p} and {q} differ in size")
            with open(q, "r+b") as f:
                f.write(data)
        shutil.rmtree(tmp) if os.path.isdir(tmp) else os.unlink(tmp)
    if same_time:
        for p, st in list(times.items()) + list(dirs.items()):
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))


def new_values(w):
    v = w.values()
    while np.array_equal(v, w.vol):
        v = w.values()
    return v


def mutate_input(w):
    m = w.mutation
    if m == "input_rewrite":
        rewrite_values(w, w.target, new_values(w), same_time=False, by_rename=False)
    elif m == "input_same_size_mtime":
        by_rename = w.rng.random() < 0.5
        rewrite_values(w, w.target, new_values(w), same_time=True, by_rename=by_rename)
        w.note(f"values replaced {'by rename' if by_rename else 'in place'}, times restored")
    elif m == "input_flip_symlink":
        other = os.path.join(w.root, "scan_b" + os.path.splitext(w.target)[1])
        w.write_input(other, new_values(w))
        pairs = list(zip(w.input_files(other), w.input_files(w.target)))
        if os.path.isdir(other):
            pairs.append((other, w.target))
        for p, q in pairs:
            st = os.stat(q)
            os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
        tmp = w.store + ".tmp"
        os.symlink(os.path.basename(other), tmp)
        os.replace(tmp, w.store)
    elif m == "input_metadata":
        if w.source == "zarr":
            if w.rng.random() < 0.5:
                with open(os.path.join(w.target, ".zattrs"), "w") as f:
                    json.dump({"scanner": "B", "edited": w.seed}, f)
                w.note("zarr .zattrs written")
            else:
                p = os.path.join(w.target, ".zarray")
                meta = json.load(open(p))
                meta["fill_value"] = 4095
                json.dump(meta, open(p, "w"), indent=4)
                w.note("zarr fill_value 4095")
        elif w.source in ("tiff", "tiffstack"):
            res = (w.rng.choice([2.0, 4.0, 10.0]),) * 2
            shutil.rmtree(w.target) if os.path.isdir(w.target) else os.unlink(w.target)
            w.write_input(w.target, w.vol, resolution=res)
            w.note(f"tiff resolution {res}")
        else:  # a raw file has no metadata of its own: its length is its shape
            with open(w.target, "ab") as f:
                f.write(b"\0" * 2 * SHAPE[1] * SHAPE[2])
            w.note("raw: one more slice appended (the shape the configuration names is short)")


def damage_for_writing(w):
    """A damage that makes the next auto write (the kill, permission and full-disk mutations):
    the output gone, a shard's byte flipped, some shards deleted, or an unfinished output."""
    what = w.rng.choice(["gone", "flip", "deleted", "unfinished"])
    shards = shard_files(w)
    if what == "gone":
        shutil.rmtree(w.out)
    elif what == "flip":
        p = w.rng.choice(shards)[3]
        b = bytearray(open(p, "rb").read())
        b[w.rng.randrange(len(b))] ^= 1 << w.rng.randrange(8)
        open(p, "wb").write(bytes(b))
    elif what == "deleted":
        for s in w.rng.sample(shards, w.rng.randint(1, 3)):
            os.unlink(s[3])
    else:
        make_unfinished(w)
    w.note(f"damage: {what}")
    return what


def level_docs(w):
    if w.kind == "array":
        return ["zarr.json"]
    return ["zarr.json"] + [f"{a}/zarr.json" for a in arrays(w)]


def mutate_output(w):
    m = w.mutation
    out = w.out
    if m.startswith("journal_"):
        jpath = make_unfinished(w)
        if m == "journal_truncated":
            n = os.path.getsize(jpath)
            with open(jpath, "r+b") as f:
                f.truncate(w.rng.randrange(max(n, 1)))
        elif m == "journal_deleted":
            os.unlink(jpath)
        else:
            shutil.rmtree(os.path.dirname(jpath))
        return
    unfinished = m != "marker_truncated" and m != "marker_deleted" and w.rng.random() < 0.4
    if unfinished:
        make_unfinished(w)
    if m == "marker_truncated":
        p = os.path.join(out, "shardmill.complete.json")
        with open(p, "r+b") as f:
            f.truncate(w.rng.randrange(os.path.getsize(p)))
    elif m == "marker_deleted":
        os.unlink(os.path.join(out, "shardmill.complete.json"))
    elif m in ("level_doc_truncated", "level_doc_deleted"):
        doc = w.rng.choice(level_docs(w))
        p = os.path.join(out, doc)
        if m == "level_doc_deleted":
            os.unlink(p)
            if doc != "zarr.json" and w.rng.random() < 0.5:  # the level never made
                shutil.rmtree(os.path.dirname(p))
                doc = os.path.dirname(doc) + "/ (the whole level)"
        else:
            with open(p, "r+b") as f:
                f.truncate(w.rng.randrange(os.path.getsize(p)))
        w.note(f"level document {doc}")
    elif m == "foreign_file":
        present = [s for s in shard_files(w) if os.path.exists(s[3])]
        a, key, _, src = w.rng.choice(present)
        adir = os.path.join(out, a)
        g = w.grids[a]
        kinds = ["root", "out_of_grid", "padded", "tmp_dir", "c_file"]
        if unfinished:
            kinds.append("in_shardmill")
        kind = w.rng.choice(kinds)
        if kind == "root":
            p = os.path.join(out, "notes.txt")
            open(p, "w").write("not ours\n")
        elif kind == "out_of_grid":
            p = os.path.join(adir, "c", "0", "0", str(g[2] + w.rng.randrange(8)))
            shutil.copyfile(src, p)
        elif kind == "padded":
            p = os.path.join(adir, "c", "0" + key.split("/")[1], *key.split("/")[2:])
            os.makedirs(os.path.dirname(p), exist_ok=True)
            shutil.copyfile(src, p)
        elif kind == "tmp_dir":
            p = os.path.join(adir, "c", "0", "0", "1.tmp.999.1")
            os.makedirs(p)
            p = os.path.join(p, "x")
            open(p, "w").write("x")
        elif kind == "c_file":
            p = os.path.join(adir, "c", "README")
            open(p, "w").write("not ours\n")
        else:
            p = os.path.join(out, ".shardmill", "stray")
            open(p, "w").write("?")
        w.note(f"foreign file {os.path.relpath(p, out)}")
    elif m == "swapped_shards":
        present = [s for s in shard_files(w) if os.path.exists(s[3])]
        same = [s for s in present if s[0] == present[0][0]]
        pool = same if len(same) >= 2 else present
        a, b = w.rng.sample(pool, 2)
        da, db = open(a[3], "rb").read(), open(b[3], "rb").read()
        open(a[3], "wb").write(db)
        open(b[3], "wb").write(da)
        w.note(f"swapped {a[0]}/{a[1]} and {b[0]}/{b[1]}")


# ---- the world's faults ----

class Tmpfs:
    """A tmpfs this test mounts (root only): the small one of the full-disk mutation, and the one
    the other seeds' worlds live on (fsync and syncfs cost nothing there, and flush nothing of
    the machine's other work); unmounted at exit."""

    def __init__(self, path, size=TMPFS_BYTES):
        self.path = path
        self.size = size
        self.mounted = False
        self.why = None

    def mount(self):
        if self.mounted or self.why:
            return self.mounted
        if os.geteuid() != 0:
            self.why = "not root: cannot mount a tmpfs"
            return False
        os.makedirs(self.path, exist_ok=True)
        if os.path.ismount(self.path):  # left by a killed run of this test
            subprocess.run(["umount", self.path])
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size},mode=0755",
                            "tmpfs", self.path], capture_output=True, text=True)
        if r.returncode != 0:
            self.why = f"mount -t tmpfs failed: {r.stderr.strip()}"
            return False
        self.mounted = True
        return True

    def clear(self):
        for n in os.listdir(self.path):
            p = os.path.join(self.path, n)
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.unlink(p)

    def unmount(self):
        if self.mounted:
            subprocess.run(["umount", self.path])
            self.mounted = False


def fill_disk(w, free_pages):
    """Fills the tmpfs up, then frees free_pages pages of the filler."""
    filler = os.path.join(w.run_dir, "filler")
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for chunk in (64 << 10, PAGE):  # big writes, then page by page to the last one
            try:
                while True:
                    os.write(fd, b"\xa5" * chunk)
            except OSError:
                pass
    finally:
        os.close(fd)
    size = os.path.getsize(filler)
    os.truncate(filler, max(0, size - free_pages * PAGE))
    w.note(f"disk full but {free_pages} pages")
    return filler


def block(w):
    """The permission fault: a shard read-only and unreadable, a shard directory or the output
    root unwritable (chmod; effective because the job runs as nobody). Returns the undo."""
    choices = []
    if os.path.isdir(w.out):
        choices.append(("root", w.out, 0o555))
        for s in shard_files(w):
            if os.path.exists(s[3]):
                choices.append(("shard", s[3], 0o000))
                choices.append(("dir", os.path.dirname(s[3]), 0o555))
    if not choices:
        return lambda: None
    what, p, mode = w.rng.choice(choices)
    old = os.stat(p).st_mode & 0o7777
    os.chmod(p, mode)
    w.note(f"permission: chmod {mode:o} {os.path.relpath(p, w.run_dir)} ({what})")
    return lambda: os.chmod(p, old) if os.path.lexists(p) else None


# ---- one seed ----

def error_line_ok(r):
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    errs = [ln for ln in lines if ln.startswith("shardmill: error: ")]
    return len(errs) == 1 and len(errs[0]) > len("shardmill: error: ") + 8, lines


def outcome_ok(w, r, clean):
    """(ok, why) of an exit-0 run: the tree equals the clean run's and verify passes."""
    diffs = cc.tree_diff(clean, w.out) if os.path.isdir(w.out) else ["no output"]
    if diffs:
        return False, "exit 0 but the output differs from a clean run on the current input: " + \
            "; ".join(diffs[:6])
    v = w.verify(w.out)
    if v.returncode != 0:
        return False, f"exit 0, tree == clean, but verify exits {v.returncode}: " + \
            (v.stdout + v.stderr).strip()[-300:]
    return True, ""


def clean_run(w):
    """A fresh `exists: error` run of the same configuration on the current input."""
    d = os.path.join(w.root, "clean")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    uid, w.uid = w.uid, None  # as the test's own user (the permission mutation runs as nobody)
    try:
        r, _ = w.run([], cwd=d, label="clean")
    finally:
        w.uid = uid
    if r.returncode != 0:
        return None, f"the clean run on the current input exits {r.returncode}: " + \
            r.stderr.strip()[-300:]
    return os.path.join(d, "out.zarr"), None


def judge(w, r, before, must_finish, undo=None):
    """Applies the property to the auto run r; returns (ok, detail)."""
    if r.returncode < 0 or r.returncode > 5:
        return False, f"auto ended by signal or an unknown status {r.returncode}: " + \
            r.stderr.strip()[-300:]
    clean, why = None, None
    if r.returncode == 0:
        clean, why = clean_run(w)
        if clean is None:
            return False, "auto exit 0 but " + why
        ok, why = outcome_ok(w, r, clean)
        return ok, why
    ok, lines = error_line_ok(r)
    if not ok:
        return False, f"refusal (exit {r.returncode}) without exactly one error line: {lines[-4:]}"
    refusal = lines[-1]
    untouched = tree_bytes(w.out) == before
    if undo is not None:
        undo()
    if untouched and not must_finish:
        return True, f"refused, untouched: {refusal}"
    r2 = w.auto(label="auto after the refusal")
    if r2.returncode != 0:
        state = "untouched" if untouched else "changed"
        return False, (f"dead end: refused ({refusal}), output {state}; the next auto exits "
                       f"{r2.returncode}: {r2.stderr.strip()[-300:]}")
    clean, why = clean_run(w)
    if clean is None:
        return False, why
    ok, why = outcome_ok(w, r2, clean)
    return ok, (f"refused ({refusal}), then auto: " + why) if not ok else ""


_REACH = {}


def nobody_reaches(path):
    """Whether user nobody can enter path (every parent searchable), asked once per path."""
    if path not in _REACH:
        r = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                            "--clear-groups", "--", "test", "-x", path], capture_output=True)
        _REACH[path] = r.returncode == 0
    return _REACH[path]


def chown_tree(root):
    for d, dirs, files in os.walk(root):
        for n in [d] + [os.path.join(d, x) for x in dirs + files]:
            os.lchown(n, NOBODY, NOBODY)


def run_seed(args, seed, work, tmpfs, verbose=False):
    """(status, detail): status 'ok', 'fail' or 'skip'."""
    root = os.path.join(work, f"seed-{seed}")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    w = World(args, seed, root)
    w.verbose = verbose
    m = w.mutation
    if m == "full_disk":
        if not tmpfs.mount():
            return "skip", tmpfs.why
        tmpfs.clear()
        w.run_dir = os.path.join(tmpfs.path, f"seed-{seed}")
    if m == "permission" and os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            return "skip", "root without setpriv: chmod cannot stop root"
        if not nobody_reaches(root):
            return "skip", f"user nobody cannot reach {root} (a parent directory is private)"
        w.uid = NOBODY
    os.makedirs(w.run_dir)
    w.make_input()
    w.config()
    if w.uid is not None:
        chown_tree(root)
    r, w.t_run = w.run([], label="first")
    if r.returncode != 0:
        return "fail", f"the first run exits {r.returncode}: {r.stderr.strip()[-400:]}"
    learn_grids(w)
    undo = None
    must_finish = m in MUST_FINISH
    if m.startswith("input_"):
        mutate_input(w)
    elif m in ("kill", "permission", "full_disk"):
        damage_for_writing(w)
        if w.uid is not None:  # what the damage made is the job user's, as a run leaves it
            chown_tree(w.run_dir)
    else:
        mutate_output(w)
        if m == "level_doc_deleted" and not os.path.exists(
                os.path.join(w.out, "shardmill.complete.json")):
            must_finish = True  # an unfinished output's level document never written (item 5)
    if m == "kill":
        delay = w.rng.uniform(0, w.t_run)  # within the first run's time
        p = subprocess.Popen(w.cmd(["run", w.cfg, "--set", "output.exists=auto"]),
                             cwd=w.run_dir, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=plain_env())
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        rc = p.wait()
        w.note(f"killed after {delay * 1000:.0f} ms (exit {rc})")
        before = tree_bytes(w.out)
        r = w.auto(label="auto after the kill")
        ok, detail = judge(w, r, before, True)
    elif m == "full_disk":
        free = w.rng.randrange(0, 12)
        filler = fill_disk(w, free)
        before = tree_bytes(w.out)
        r = w.auto()
        ok, detail = judge(w, r, before, True,
                           undo=lambda: os.path.exists(filler) and os.unlink(filler))
        if os.path.exists(filler):
            os.unlink(filler)
    else:
        if m == "permission":
            undo = block(w)
        before = tree_bytes(w.out)
        try:
            r = w.auto()
            ok, detail = judge(w, r, before, must_finish, undo=undo)
        finally:
            if undo is not None:  # the blocked path writable again, whatever happened
                undo()
    if m == "full_disk" and not verbose:
        shutil.rmtree(w.run_dir, ignore_errors=True)
    return ("ok" if ok else "fail"), (detail + (" | " + " | ".join(w.log) if not ok else ""))


def seed_list(args):
    if args.seed:
        return args.seed
    n = args.seeds or int(os.environ.get("SM_UNLUCKY_SEEDS", "200"))
    k, parts = (int(x) for x in args.part.split("/"))
    return list(range(1 + n * k // parts, 1 + n * (k + 1) // parts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seeds", type=int, default=0)
    ap.add_argument("--seed", type=int, action="append", default=[])
    ap.add_argument("--part", default="0/1", help="K/N: the K-th of N equal runs of the seed "
                    "list (ctest runs the list in parts, side by side)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    args.shardmill = os.path.abspath(args.shardmill)
    seeds = seed_list(args)
    if args.list:
        for s in seeds:
            print(s, World(args, s, "").describe())
        return 0
    work = os.path.abspath(args.work)
    for m in ("tmpfs", "worlds"):  # mount points a killed run of this test left
        if os.path.ismount(os.path.join(work, m)):
            subprocess.run(["umount", os.path.join(work, m)])
    cc.fresh_dir(work)
    os.chmod(work, 0o755)
    tmpfs = Tmpfs(os.path.join(work, "tmpfs"))
    worlds = Tmpfs(os.path.join(work, "worlds"), WORLDS_BYTES)
    # the worlds on a tmpfs, except when one seed is replayed (its world is kept for reading)
    base = worlds.path if not args.seed and worlds.mount() else work
    c = Checks("convert.unlucky_world")
    tally = {}
    failed = []
    t0 = time.monotonic()
    try:
        for s in seeds:
            desc = World(args, s, "").describe()
            try:
                status, detail = run_seed(args, s, base, tmpfs, verbose=bool(args.seed))
            except Exception as e:  # noqa: BLE001 - a fixture failure is reported per seed
                status, detail = "fail", f"the test itself failed: {type(e).__name__}: {e}"
            t = tally.setdefault(desc.split()[-1], [0, 0, 0])
            if status == "skip":
                t[2] += 1
                print(f"skip seed {s} ({desc}): {detail}", flush=True)
                continue
            t[0 if status == "ok" else 1] += 1
            if status == "fail":
                failed.append(s)
            c.check(f"seed {s} ({desc})" + (f": {detail}" if status == "ok" and detail else ""),
                    status == "ok", detail)
            if not args.keep and not args.seed:
                shutil.rmtree(os.path.join(base, f"seed-{s}"), ignore_errors=True)
    finally:
        tmpfs.unmount()
        if args.keep and worlds.mounted:
            shutil.copytree(worlds.path, os.path.join(work, "kept"), symlinks=True)
        worlds.unmount()
    print("per mutation (ok, violations, skipped):")
    for k in MUTATIONS:
        if k in tally:
            print(f"  {k:24s} {tally[k][0]:4d} {tally[k][1]:4d} {tally[k][2]:4d}")
    print(f"{len(failed)} of {len(seeds)} seeds violate the property "
          f"({time.monotonic() - t0:.0f} s); rerun one with --seed S: "
          f"{' '.join(map(str, failed))}")
    return c.done()


if __name__ == "__main__":
    cc.main_guard(main)
