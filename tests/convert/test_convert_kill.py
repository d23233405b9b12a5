"""Kill injection: an OME-Zarr convert SIGKILLed at chosen system calls, each finished by
`output.exists: auto` (issue 32; docs/internals/writing.md "Exists policies").

Usage: /usr/bin/python3 test_convert_kill.py --shardmill BIN --work DIR [--seeds N]

A 3-level OME-Zarr convert of a small uint16 volume (40x48x48; shards of 8x16x16: 45, 12 and 2
shards per level, 59 in all; one thread, so its system calls come in one order) is traced once by
strace to list its writes, renames, fsyncs, unlinks and mkdirs.
Then the same job is run again under `strace -e inject=SYSCALL:signal=KILL:when=N`, which kills
it with SIGKILL on entry to its N-th call of SYSCALL: the call never happens, exactly as a kill
-9 (or a node lost) at that instant. The kill points are
  - named ones: before each level document's rename (between the level documents: the root
    and 0/zarr.json there, 1/ holding a temporary name), during the marker's write (its
    temporary file created, nothing written), before its fsync and its rename, and in the
    removal of .shardmill/ after it;
  - 24 drawn from a FIXED seed list (random.Random(seed)): a system call among those traced, a
    call number, and output.sync (fsync: every shard renamed on its own; syncfs: staged, renamed
    in a burst at the flush);
  - 4 chains (seeds 101..104): the run killed at one point, the `auto` that follows killed at a
    point of its own trace, then `auto` again;
  - with `export.hdf5.path` (where the build has HDF5): before the export's rename, between it
    and the marker, and 4 points from seeds 201..204; the export finished by `auto` holds the
    clean run's values (h5py).
Each is finished by one `exists: auto` run (2 threads), which must exit 0; the output must pass
`shardmill verify` and be byte-identical, every file of the tree, to a clean run's. Allowed
outcome, nothing else: a finished, identical output. Needs strace (scripts/install-deps.sh);
exit 77 without it or where ptrace is not permitted.
Prints one ok/FAIL line per check and a closing count; exit 1 on any failure.
"""

import argparse
import collections
import json
import os
import random
import re
import shutil
import signal
import subprocess

import numpy as np

from shardmill_test import runner as cc
from shardmill_test.checks import Checks
from shardmill_test.ranks import plain_env

SKIP = 77
SHAPE = (40, 48, 48)
SYSCALLS = ("write", "renameat", "fsync", "unlinkat", "mkdirat")
SEEDS = list(range(1, 25))  # FIXED: the same kill points on every run of the same binary
CHAINS = [101, 102, 103, 104]
AUTO = ["--set", "output.exists=auto"]
EXPORT = ["--set", "export.hdf5.path=out.h5"]
EXPORT_SEEDS = [201, 202, 203, 204]
LINE_RE = re.compile(r"^\d+\s+(\w+)\((.*)\)\s+=\s+(-?\d+)")


def make_input(path):
    import zarr
    rng = np.random.default_rng(32)
    z = zarr.open(path, mode="w", shape=SHAPE, chunks=(16, 16, 16), dtype="uint16")
    z[:] = rng.integers(0, 4096, SHAPE).astype(np.uint16)


def h5_values(path):
    import h5py
    with h5py.File(path, "r") as f:
        return f["/data"][()]


def job(work):
    inp = os.path.join(work, "in.zarr")
    make_input(inp)
    cfg = {"job": "convert", "input": {"store": inp},
           "histogram": {"bins": 64, "range": [0, 4096]},
           "normalize": {"mode": "scale", "divisor": 4095.0},
           "output": {"path": "out.zarr", "shard": [8, 16, 16], "chunk": [8, 8, 8],
                      "ome": {"levels": 3}},
           "parallel": {"threads": 1}, "progress": False}
    return cc.write_config(os.path.join(work, "job.yaml"), cfg)


def traced_env():
    """plain_env() for a process under strace: LeakSanitizer cannot run under ptrace (it stops
    with a fatal error in the ASan build), so leak checking is off there; the untraced runs of
    the same job (the clean run, every `auto` after a kill) keep it."""
    env = plain_env()
    if env.get("ASAN_OPTIONS"):
        env["ASAN_OPTIONS"] += ":detect_leaks=0"
    else:
        env["ASAN_OPTIONS"] = "detect_leaks=0"
    return env


class Strace:
    def __init__(self):
        self.exe = shutil.which("strace")
        self.base = []
        if self.exe:  # no --seccomp-bpf: strace 6.1 then loses count of the injected calls
            self.base = [self.exe, "-f", "-qq"]

    def usable(self):
        if not self.exe:
            return "strace not found (scripts/install-deps.sh installs it)"
        r = subprocess.run(self.base + ["-o", "/dev/null", "-e", "trace=write", "true"],
                           capture_output=True, text=True)
        return None if r.returncode == 0 else f"strace cannot trace here: {r.stderr.strip()}"

    def profile(self, cmd, cwd, log):
        """Runs cmd under strace; its calls of SYSCALLS as [(syscall, label)] in order."""
        r = subprocess.run(self.base + ["-o", log, "-e", "trace=" + ",".join(SYSCALLS)] + cmd,
                           cwd=cwd, capture_output=True, text=True, env=traced_env(), timeout=120)
        calls = []
        for ln in open(log, errors="replace"):
            m = LINE_RE.match(ln)
            if m and m.group(1) in SYSCALLS:
                calls.append((m.group(1), label(m.group(1), m.group(2))))
        return r, calls

    def kill_at(self, cmd, cwd, syscall, n):
        """Runs cmd, killed by SIGKILL on entry to its n-th call of syscall."""
        inject = f"inject={syscall}:signal=KILL:when={n}"
        return subprocess.run(self.base + ["-o", "/dev/null", "-e", f"trace={syscall}", "-e",
                                           inject] + cmd, cwd=cwd, capture_output=True,
                              text=True, env=traced_env(), timeout=120)


def label(syscall, args):
    """A short name for a call, from its arguments as strace prints them."""
    if syscall == "write":
        if '"shardmill_complete"' in args or "shardmill_complete" in args[:80]:
            return "the marker's bytes"
        if "zarr_format" in args[:120]:
            return "a zarr.json"
        if args.startswith("1,") or args.startswith("2,"):
            return "stdout/stderr"
        return "a shard or a journal record"
    names = re.findall(r'"([^"]*)"', args)
    return f"{syscall} {' -> '.join(names)}" if names else syscall


def nth(calls, syscall, pred):
    """(syscall, n) of the first call satisfying pred (n counts calls of that syscall), or
    None."""
    k = 0
    for s, lab in calls:
        if s == syscall:
            k += 1
            if pred(lab):
                return k
    return None


def named_points(calls):
    """The kill points the issue names, from a profile of a fresh run."""
    pts = []
    docs = [i for i, (s, lab) in enumerate(calls) if s == "renameat" and
            lab.endswith("-> zarr.json")]
    # the first four zarr.json renames are the root's and levels 0, 1, 2
    for k, what in zip(range(1, 4), ("0/zarr.json", "1/zarr.json", "2/zarr.json")):
        if len(docs) > k:
            n = sum(1 for s, _ in calls[:docs[k] + 1] if s == "renameat")
            pts.append((f"before {what}'s rename (between the level documents)", "renameat", n))
    mw = nth(calls, "write", lambda lab: lab == "the marker's bytes")
    if mw:
        pts.append(("during the marker's write (its temporary file empty)", "write", mw))
        idx = [i for i, (s, lab) in enumerate(calls) if s == "write" and
               lab == "the marker's bytes"][0]
        after = [s for s, _ in calls[idx + 1:]]
        if "fsync" in after[:2]:
            n = sum(1 for s, _ in calls[:idx] if s == "fsync") + 1
            pts.append(("before the marker's fsync", "fsync", n))
    mr = nth(calls, "renameat", lambda lab: lab.endswith("-> shardmill.complete.json"))
    if mr:
        pts.append(("before the marker's rename", "renameat", mr))
    un = [i for i, (s, lab) in enumerate(calls) if s == "unlinkat"]
    if len(un) >= 2:
        pts.append(("removing .shardmill/ after the marker (a journal gone)", "unlinkat",
                    len(un) - 1))
    return pts


def drawn(rng, calls):
    counts = collections.Counter(s for s, _ in calls)
    syscall = rng.choice([s for s in SYSCALLS if counts[s] > 0])
    n = rng.randint(1, counts[syscall])
    lab = [lab for s, lab in calls if s == syscall][n - 1]
    return syscall, n, lab


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--seeds", type=int, default=len(SEEDS), help="the first N seeds only")
    args = ap.parse_args()
    sm = os.path.abspath(args.shardmill)
    st = Strace()
    why = st.usable()
    if why:
        print(f"SKIP: {why}")
        return SKIP
    work = cc.fresh_dir(os.path.abspath(args.work))
    c = Checks("kill_injection")
    cfg = job(work)
    ref_dir = cc.fresh_dir(os.path.join(work, "clean"))
    r = cc.run([sm, "run", cfg], cwd=ref_dir, env=plain_env())
    if not c.check("the clean run exits 0", r.returncode == 0, cc.describe(r)):
        return c.done()
    ref = os.path.join(ref_dir, "out.zarr")
    profiles = {}
    for sync in ("fsync", "syncfs"):
        d = cc.fresh_dir(os.path.join(work, f"profile-{sync}"))
        r, calls = st.profile([sm, "run", cfg, "--set", f"output.sync={sync}"] + AUTO, d,
                              os.path.join(d, "strace.txt"))
        c.check(f"the traced run (output.sync {sync}) exits 0 and lists its calls",
                r.returncode == 0 and len(calls) > 50, cc.describe(r))
        profiles[sync] = calls
        print(f"     profile {sync}: " + ", ".join(
            f"{k} {v}" for k, v in sorted(collections.Counter(s for s, _ in calls).items())))
    points = [(f"named: {what}", "fsync", syscall, n, [])
              for what, syscall, n in named_points(profiles["fsync"])]
    c.check("the named kill points found (3 level documents, the marker's write, fsync and "
            "rename, the removal after it)", len(points) >= 7, points)
    for seed in SEEDS[:args.seeds]:
        rng = random.Random(seed)
        sync = rng.choice(("fsync", "syncfs"))
        syscall, n, lab = drawn(rng, profiles[sync])
        points.append((f"seed {seed}: {lab}", sync, syscall, n, []))
    # with the HDF5 export (renamed into place before the marker): where the build has it
    xd = cc.fresh_dir(os.path.join(work, "clean-export"))
    r = cc.run([sm, "run", cfg] + EXPORT, cwd=xd, env=plain_env())
    ref_h5 = h5_values(os.path.join(xd, "out.h5")) if r.returncode == 0 else None
    if ref_h5 is None:
        print(f"     no HDF5 export in this build: its kill points skipped ({r.stderr.strip()})")
    else:
        d = cc.fresh_dir(os.path.join(work, "profile-export"))
        _, calls = st.profile([sm, "run", cfg, "--set", "output.sync=fsync"] + EXPORT + AUTO, d,
                              os.path.join(d, "strace.txt"))
        xr = nth(calls, "renameat", lambda lab: lab.endswith("-> out.h5"))
        mw = nth(calls, "write", lambda lab: lab == "the marker's bytes")
        c.check("the export's rename and the marker's write found", xr and mw, (xr, mw))
        if xr and mw:
            points.append(("named: before the export's rename", "fsync", "renameat", xr, EXPORT))
            points.append(("named: between the export's rename and the marker",
                           "fsync", "write", mw, EXPORT))
        for seed in EXPORT_SEEDS:
            syscall, n, lab = drawn(random.Random(seed), calls)
            points.append((f"seed {seed}, with the export: {lab}", "fsync", syscall, n,
                           EXPORT))
    actions = collections.Counter()
    kills = 0

    def finish(label, d, extra=()):
        out = os.path.join(d, "out.zarr")
        r = cc.run([sm, "run", cfg, "--set", "parallel.threads=2", "--report", "rep.json"]
                   + list(extra) + AUTO, cwd=d, env=plain_env())
        if not c.check(f"{label}: auto exits 0", r.returncode == 0, cc.describe(r)):
            return
        try:
            actions[json.load(open(os.path.join(d, "rep.json")))["output"]["action"]] += 1
        except (OSError, ValueError, KeyError, TypeError):
            pass
        r = cc.run([sm, "verify", out], cwd=d)
        c.check(f"{label}: verify passes", r.returncode == 0, cc.describe(r) + r.stdout[-400:])
        diffs = cc.tree_diff(ref, out)
        c.check(f"{label}: tree byte-identical to the clean run's", not diffs,
                "; ".join(diffs[:6]))
        if extra:
            h5 = os.path.join(d, "out.h5")
            c.check(f"{label}: the export holds the clean run's values (h5py)",
                    os.path.exists(h5) and (h5_values(h5) == ref_h5).all())

    for i, (what, sync, syscall, n, extra) in enumerate(points):
        d = cc.fresh_dir(os.path.join(work, f"p{i:02d}"))
        label = f"{what} ({syscall} #{n}, sync {sync})"
        r = st.kill_at([sm, "run", cfg, "--set", f"output.sync={sync}"] + extra + AUTO, d,
                       syscall, n)
        if c.check(f"{label}: killed by SIGKILL", r.returncode in (-signal.SIGKILL, 137),
                   cc.describe(r)):
            kills += 1
        finish(label, d, extra)
    for seed in CHAINS:
        rng = random.Random(seed)
        d = cc.fresh_dir(os.path.join(work, f"chain{seed}"))
        sync = rng.choice(("fsync", "syncfs"))
        syscall, n, lab = drawn(rng, profiles[sync])
        label = f"chain {seed}: first kill at {lab} ({syscall} #{n}, sync {sync})"
        r = st.kill_at([sm, "run", cfg, "--set", f"output.sync={sync}"] + AUTO, d, syscall, n)
        if c.check(f"{label}: killed by SIGKILL", r.returncode in (-signal.SIGKILL, 137),
                   cc.describe(r)):
            kills += 1
        # the auto run that follows, traced on a copy of this state, then killed in its own
        p = os.path.join(work, f"chain{seed}-profile")
        shutil.rmtree(p, ignore_errors=True)
        shutil.copytree(d, p)
        _, calls = st.profile([sm, "run", cfg] + AUTO, p, os.path.join(p, "strace.txt"))
        if not calls:
            c.check(f"chain {seed}: the auto run's trace lists calls", False)
            continue
        syscall, n, lab = drawn(rng, calls)
        label2 = f"chain {seed}: the auto run killed at {lab} ({syscall} #{n})"
        r = st.kill_at([sm, "run", cfg] + AUTO, d, syscall, n)
        if c.check(f"{label2}: killed by SIGKILL", r.returncode in (-signal.SIGKILL, 137),
                   cc.describe(r)):
            kills += 1
        finish(f"chain {seed}", d)
    c.check(f"at least 20 kills landed ({kills})", kills >= 20)
    return c.done(f" ({kills} kills; auto actions: {dict(actions)})")


if __name__ == "__main__":
    cc.main_guard(main)
