"""shardmill across three hosts simulated with Linux network namespaces (SPEC §8, issue 11).

Usage: /usr/bin/python3 test_cluster.py --shardmill BIN --mpiexec MPIEXEC --work DIR --case CASE
Cases (one ctest each, label `cluster`):
  identity     `convert` (percentile window) on 3 hosts x 2 ranks, daemons started in each host by
               the rsh agent, TCP between hosts: every rank reports its own host's name, and every
               file of the output tree equals a plain single-process run's byte for byte.
  killed_host  every process of host 3 (its Open MPI daemon and both ranks) SIGKILLed while
               shards are being written: mpirun ends non-zero within seconds, no completion
               marker, no process left in any host; one surviving shard is then damaged, and
               `exists: resume` under `mpirun -n 2` on one host, and in a plain process, each
               complete the output byte-identical to a clean run, rewriting only the shards that
               were missing or damaged, plus at most one per killed rank whose journal record died
               with it (every other intact shard keeps its inode).
Exit 77 (ctest: skipped) with a message when network namespaces cannot be made here.
Prints one ok/FAIL line per check; exit 1 on any failure.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np


from shardmill_test.checks import check, summary
from shardmill_test.ranks import mpi_env, plain_env

from cluster import Cluster, Unavailable  # noqa: E402

TIMEOUT = 120
SKIP = 77


def make_input(path, shape, chunks, seed):
    import zarr  # zarr-python 2.13 (Debian): an independent writer of the input

    if not os.path.exists(os.path.join(path, ".zarray")):
        rng = np.random.default_rng(seed)
        a = np.clip(rng.normal(110, 45, size=shape), 0, 255).astype(np.uint8)
        z = zarr.open(path, mode="w", shape=shape, chunks=chunks, dtype="u1")
        z[:] = a
    return path


def write_cfg(d, text):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "job.yaml"), "w") as f:
        f.write(text)


def tree(root):
    """relative path -> (inode, size) of every file below root (a file renamed or removed while
    the tree is walked, such as a writer's temporary name, is left out)."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            try:
                st = os.stat(p)
            except FileNotFoundError:
                continue
            out[os.path.relpath(p, root)] = (st.st_ino, st.st_size)
    return out


def shard_files(out_dir):
    """The shards under their final names (temporary names have a '.tmp.' part)."""
    c = os.path.join(out_dir, "c")
    return [k for k in tree(c) if ".tmp." not in k] if os.path.isdir(c) else []


def identical(a, b):
    """(files of b missing or different in a, number of files compared)."""
    ta, tb = tree(a), tree(b)
    bad = sorted(set(ta) ^ set(tb))
    for rel in sorted(set(ta) & set(tb)):
        with open(os.path.join(a, rel), "rb") as fa, open(os.path.join(b, rel), "rb") as fb:
            if fa.read() != fb.read():
                bad.append(rel)
    return bad, len(tb)


def plain_run(d, args):
    return subprocess.run([ARGS.shardmill] + args, cwd=d, env=plain_env(), capture_output=True,
                          text=True, timeout=TIMEOUT)


def case_identity(cl, work):
    inp = make_input(os.path.join(work, "id-in.zarr"), (40, 70, 90), (16, 16, 16), 11)
    cfg = (f"job: convert\ninput: {{store: {inp}}}\ntile: [8, 32, 32]\n"
           "normalize: {mode: percentile, lo: 1, hi: 99}\nparallel: {threads: 1}\n"
           "output: {path: out.zarr, exists: overwrite}\n")
    env = cl.env(mpi_env())
    p = subprocess.run(cl.mpirun_args(ARGS.mpiexec, 6) + ["sh", "-c", "hostname"],
                       env=env, capture_output=True, text=True, timeout=TIMEOUT)
    names = sorted(p.stdout.split())
    check(p.returncode == 0 and names == ["h1", "h1", "h2", "h2", "h3", "h3"],
          f"6 ranks run 2 per host on h1, h2, h3 ({names}; {p.stderr.strip()[-300:]})")
    ref = os.path.join(work, "id-plain")
    shutil.rmtree(ref, ignore_errors=True)
    write_cfg(ref, cfg)
    r = plain_run(ref, ["run", "job.yaml", "-q"])
    check(r.returncode == 0, f"plain run exits 0 ({r.stderr.strip()[-300:]})")
    d = os.path.join(work, "id-cluster")
    shutil.rmtree(d, ignore_errors=True)
    write_cfg(d, cfg)
    t0 = time.monotonic()
    p = subprocess.run(cl.mpirun_args(ARGS.mpiexec, 6) +
                       [ARGS.shardmill, "run", os.path.join(d, "job.yaml"), "-q",
                        "--report", os.path.join(d, "report.json")],
                       cwd=d, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    check(p.returncode == 0, f"3 hosts x 2 ranks convert exits 0 in {time.monotonic() - t0:.1f} s "
                             f"({p.stderr.strip()[-400:]})")
    if p.returncode != 0:
        return
    rep = json.load(open(os.path.join(d, "report.json")))
    check(rep.get("ranks") == 6, f"report says 6 ranks ({rep.get('ranks')})")
    bad, n = identical(os.path.join(d, "out.zarr"), os.path.join(ref, "out.zarr"))
    check(not bad, f"all {n} output files byte-identical to the plain run ({bad[:4]})")
    left = cl.pids_left()
    check(not left, f"no process left in any host ({left})")


def case_killed_host(cl, work):
    inp = make_input(os.path.join(work, "kill-in.zarr"), (64, 256, 256), (16, 64, 64), 7)
    total = (64 // 8) * (256 // 32) * (256 // 32)
    cfg = (f"job: convert\ninput: {{store: {inp}}}\ntile: [16, 64, 64]\n"
           "normalize: {mode: percentile, lo: 2, hi: 98}\nparallel: {threads: 1}\n"
           # per-file fsync + rename: the shards put before the kill stay, and resume keeps them
           "output: {path: out.zarr, shard: [8, 32, 32], chunk: [4, 16, 16], exists: resume, "
           "sync: fsync}\n")
    clean = os.path.join(work, "kill-clean")
    shutil.rmtree(clean, ignore_errors=True)
    write_cfg(clean, cfg)
    r = plain_run(clean, ["run", "job.yaml", "-q"])
    check(r.returncode == 0, f"clean plain run exits 0 ({r.stderr.strip()[-300:]})")
    d = os.path.join(work, "kill-cluster")
    shutil.rmtree(d, ignore_errors=True)
    write_cfg(d, cfg)
    out_dir = os.path.join(d, "out.zarr")
    env = cl.env(mpi_env())
    proc = subprocess.Popen(cl.mpirun_args(ARGS.mpiexec, 6) +
                            [ARGS.shardmill, "run", os.path.join(d, "job.yaml"), "-q"],
                            cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    killed_at, seen = None, 0
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and proc.poll() is None:
        seen = len(shard_files(out_dir))
        if seen >= total // 10:
            if cl.kill_host(cl.hosts[2]):
                killed_at = time.monotonic()
            break
        time.sleep(0.002)
    try:
        _, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        check(False, "mpirun ended after host 3 died (no hang)")
        return
    ended = time.monotonic()
    check(killed_at is not None, f"every process of h3 SIGKILLed mid-write ({seen} of {total} "
                                 f"shards written; mpirun exit {proc.returncode}: "
                                 f"{err.strip()[-600:]})")
    if killed_at is None:
        return
    check(proc.returncode != 0, f"mpirun exits non-zero after the host died ({proc.returncode})")
    check(ended - killed_at < 15.0, f"the job ended {ended - killed_at:.1f} s after the host died "
                                    "(< 15 s)")
    left = cl.pids_left()
    check(not left, f"no process left in any host ({left})")
    check(not os.path.exists(os.path.join(out_dir, "shardmill.complete.json")),
          "no completion marker after the host died")
    present = sorted(shard_files(out_dir))
    check(0 < len(present) < total, f"{len(present)} of {total} shards present after the kill")
    if not present:
        return
    # damage one surviving shard: resume must find it through its CRC32C index and rewrite it
    damaged = present[len(present) // 2]
    with open(os.path.join(out_dir, "c", damaged), "r+b") as f:
        f.seek(0)
        f.write(b"\xff" * 16)
    for mode in ("mpirun-2", "plain"):
        rd = os.path.join(work, f"kill-resume-{mode}")
        shutil.rmtree(rd, ignore_errors=True)
        shutil.copytree(d, rd, symlinks=True)
        rout = os.path.join(rd, "out.zarr")
        before = {k: v for k, v in tree(os.path.join(rout, "c")).items() if ".tmp." not in k}
        if mode == "plain":
            p = plain_run(rd, ["run", "job.yaml", "-q", "--report", "report.json"])
        else:
            p = subprocess.run([ARGS.mpiexec, "--oversubscribe", "-np", "2", ARGS.shardmill,
                                "run", "job.yaml", "-q", "--report", "report.json"], cwd=rd,
                               env=mpi_env(), capture_output=True, text=True, timeout=TIMEOUT)
        check(p.returncode == 0, f"resume ({mode}) exits 0 ({p.stderr.strip()[-300:]})")
        if p.returncode != 0:
            continue
        rep = json.load(open(os.path.join(rd, "report.json")))
        written = rep["output"].get("written")
        need = total - len(present) + 1
        # a shard renamed into place whose journal record died with its rank is rewritten too
        # (write_output.c: a lost record only costs a rewrite): at most one per rank of h3
        check(written is not None and need <= written <= need + 2,
              f"resume ({mode}) rewrote {written} shards: the {total - len(present)} missing, the "
              f"damaged one, and at most the 2 whose records died with h3's ranks")
        after = tree(os.path.join(rout, "c"))
        kept = [k for k in before if k != damaged and after.get(k, (None,))[0] == before[k][0]]
        check(len(kept) == len(before) - 1 - (written - need),
              f"resume ({mode}) left {len(kept)} of {len(before) - 1} intact shards untouched "
              f"(same inode); it rewrote only what it counted")
        check(after[damaged][0] != before[damaged][0], f"resume ({mode}) rewrote the damaged shard")
        bad, n = identical(rout, os.path.join(clean, "out.zarr"))
        check(not bad, f"resume ({mode}): all {n} files byte-identical to the clean run ({bad[:4]})")
        v = subprocess.run([ARGS.shardmill, "verify", rout], capture_output=True, text=True)
        check(v.returncode == 0, f"verify after resume ({mode}) ok ({v.stderr.strip()})")


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", required=True, choices=["identity", "killed_host"])
    ARGS = ap.parse_args()
    work = os.path.join(os.path.abspath(ARGS.work), ARGS.case)
    os.makedirs(work, exist_ok=True)
    cl = Cluster(os.path.join(work, "cluster"))
    try:
        cl.up()
    except Unavailable as e:
        print(f"skipped: the multi-host tests need Linux network namespaces: {e}", flush=True)
        return SKIP
    try:
        {"identity": case_identity, "killed_host": case_killed_host}[ARGS.case](cl, work)
    finally:
        cl.down()
    left = subprocess.run(["ip", "link", "show", cl.bridge], capture_output=True)
    check(left.returncode != 0, "the test hosts and their bridge are gone after the test")
    return summary(name=ARGS.case)


if __name__ == "__main__":
    sys.exit(main())
