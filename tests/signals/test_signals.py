"""Cooperative stops (SPEC §1, docs/internals/ranks.md "Stopping"; label `signals`).

Usage: /usr/bin/python3 test_signals.py --shardmill BIN [--mpiexec MPIEXEC] --work DIR --case C

A uint8 256^3 zarr-python v2 input (512x256x256 for mpi, 128x256x256 for mpi_one_rank) is made
at test time; the convert writes 4096 (8192, 2048) small shards (gzip 9, one thread per rank;
`output.sync: fsync` so each shard is fsynced and renamed on its own, which makes the write
phase take a few seconds and lets shards appear one by one). Cases:
  sigterm   a plain process gets SIGTERM once some shards exist: exit 143, exactly one error
            line naming the output and SIGTERM, no completion marker, no report, no temporary
            name (`.tmp.`) anywhere in the tree; `exists: resume` then rewrites only the missing
            shards and the tree is byte-identical, file for file, to a clean run's.
  sigint    the same with SIGINT (exit 130) and the default `output.sync: syncfs`, where shards
            are staged under temporary names until the flush: the stop flushes the finished ones
            into place and leaves no temporary name.
  scan      a scan (1000 passes, about a minute) gets SIGTERM 1 s after its handler is installed:
            exit 143 within 10 s, one line "job.yaml: stopped by SIGTERM", no report.
  sigpipe   `shardmill read ... -o -` into a pipe whose reader has gone: the process is not
            killed by SIGPIPE (the child starts with SIGPIPE at its default action, as from a
            shell) but ends with exit 4 and one line naming standard output (EPIPE).
  mpi       `mpirun -n 3`: SIGTERM to mpirun mid-write: every rank stops (no process of the run
            left), mpirun exits non-zero, the error line names SIGTERM, no marker, no temporary
            name; resume under 3 ranks completes the output byte-identical to the clean run.
            Open MPI 4.1's mpirun passes the signal on late: SIGCONT, then SIGTERM after
            odls_base_sigkill_timeout (1 s), then SIGKILL 1 s later. So the signal goes to
            mpirun early (1% of the shards) in an 8192-shard write, which leaves the ranks
            seconds of work when their SIGTERM arrives (a release build has been seen to write
            3000 shards in that second).
  mpi_one_rank  SIGTERM to rank 1 of 3 only: the others learn the stop at the write phase's
            agreement; no hang, mpirun exits non-zero, rank 0 (no signal of its own) prints the
            agreed stop, no marker; resume byte-identical.
Prints one ok/FAIL line per check; exit 1 on any failure.
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

from shardmill_test.checks import check, summary
from shardmill_test.file_tree import tree_files, same_tree
from shardmill_test.ranks import mpi_env, plain_env, rank_pids, sanitizer_env

SHAPE = (256, 256, 256)  # the mpi cases set their own in main
SHARD = (8, 16, 32)


def total_shards():
    return (SHAPE[0] // SHARD[0]) * (SHAPE[1] // SHARD[1]) * (SHAPE[2] // SHARD[2])
TIMEOUT = 300
MARKER = "shardmill.complete.json"

ARGS = None


def make_input(work):
    import zarr  # zarr-python 2.13 (Debian)

    path = os.path.join(work, "in.zarr")
    if not os.path.exists(os.path.join(path, ".zarray")):
        shutil.rmtree(path, ignore_errors=True)
        rng = np.random.default_rng(20261203)
        z = zarr.open(path, mode="w", shape=SHAPE, chunks=(32, 64, 64), dtype="u1")
        z[:] = rng.integers(0, 256, size=SHAPE, dtype=np.uint8)
    elif tuple(json.load(open(os.path.join(path, ".zarray")))["shape"]) != SHAPE:
        shutil.rmtree(path)
        return make_input(work)
    return path


def config(inp, sync="fsync", extra=""):
    return (f"job: convert\ninput: {{store: {inp}}}\ntile: [32, 64, 64]\n"
            "parallel: {threads: 1}\nprogress: false\n"
            f"output: {{path: out.zarr, shard: [{SHARD[0]}, {SHARD[1]}, {SHARD[2]}], "
            "chunk: [8, 16, 16], "
            f"codec: {{name: gzip, level: 9}}, sync: {sync}{extra}}}\n")


def write_cfg(d, text):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "job.yaml"), "w") as f:
        f.write(text)


def tmp_names(root):
    return [f for f in tree_files(root) if ".tmp." in os.path.basename(f)]


def shard_files(root):
    c = os.path.join(root, "c")
    return sum(len(fs) for _, _, fs in os.walk(c)) if os.path.isdir(c) else 0


def env_plain():
    return sanitizer_env(plain_env())


def clean_run(work, inp, sync):
    """The reference: the same configuration run to its end in one go."""
    d = os.path.join(work, f"clean-{sync}")
    write_cfg(d, config(inp, sync))
    p = subprocess.run([ARGS.shardmill, "run", "job.yaml", "-q", "--report", "report.json"],
                       cwd=d, env=env_plain(), capture_output=True, text=True, timeout=TIMEOUT)
    check(p.returncode == 0, f"clean run ({sync}) exits 0 ({p.stderr.strip()[-300:]})")
    return os.path.join(d, "out.zarr")


def wait_for_shards(proc, out, at_least, count=shard_files):
    """Polls until the output holds at_least shard files (or the process ended)."""
    deadline = time.monotonic() + TIMEOUT
    n = 0
    while time.monotonic() < deadline and proc.poll() is None:
        n = count(out)
        if n >= at_least:
            return n
        time.sleep(0.005)
    return n


def wait_for_handler(proc, sig):
    """Polls until proc has a handler for sig (SigCgt in /proc/PID/status) or ended: a signal sent
    before would meet the default action of a process still starting (a slow sanitized build)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                cgt = next(int(ln.split()[1], 16) for ln in f if ln.startswith("SigCgt:"))
        except (OSError, StopIteration):
            cgt = 0
        if cgt & (1 << (sig - 1)):
            return True
        time.sleep(0.005)
    return False


def error_lines(text):
    return [ln for ln in text.splitlines() if ln.startswith("shardmill: error:")]


def check_stopped_output(name, out, stderr, signame):
    lines = error_lines(stderr)
    check(len(lines) == 1 and f"stopped by {signame}" in lines[0] and "out.zarr" in lines[0]
          and "resume" in lines[0],
          f"{name}: one error line naming the output and {signame} ({lines})")
    check(not os.path.exists(os.path.join(out, MARKER)), f"{name}: no completion marker")
    tmps = tmp_names(out)
    check(not tmps, f"{name}: no temporary name left in the output ({tmps[:3]})")


def resume_and_compare(name, d, out, ref, ranks=0):
    cmd = [ARGS.shardmill, "run", "job.yaml", "-q", "--set", "output.exists=resume", "--report",
           "report.json"]
    env = env_plain()
    if ranks:
        cmd = [ARGS.mpiexec, "--oversubscribe", "-np", str(ranks)] + cmd
        env = mpi_env(env)
    # shards under their final names before the resume (a stop that landed after the last shard
    # leaves all of them, and then resume writes none: only the marker was missing)
    present = sum(1 for _, _, files in os.walk(os.path.join(out, "c")) for f in files
                  if f.isdigit())
    p = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    if not check(p.returncode == 0, f"{name}: resume exits 0 ({p.stderr.strip()[-300:]})"):
        return
    rep = json.load(open(os.path.join(d, "report.json")))
    written = rep["output"]["written"]
    check(written == total_shards() - present,
          f"{name}: resume wrote {written} of {total_shards()} shards: exactly the "
          f"{total_shards() - present} missing ones (kept the {present} present)")
    ok, why = same_tree(out, ref)
    check(ok, f"{name}: resumed tree byte-identical to the clean run's ({why})")
    v = subprocess.run([ARGS.shardmill, "verify", out], capture_output=True, text=True,
                       env=env_plain(), timeout=TIMEOUT)
    check(v.returncode == 0, f"{name}: verify of the resumed output passes")


def case_stop(work, inp, sig, sync):
    signame = signal.Signals(sig).name
    name = f"{signame} ({sync})"
    ref = clean_run(work, inp, sync)
    d = os.path.join(work, signame.lower())
    write_cfg(d, config(inp, sync))
    out = os.path.join(d, "out.zarr")
    proc = subprocess.Popen([ARGS.shardmill, "run", "job.yaml", "-q", "--report", "report.json"],
                            cwd=d, env=env_plain(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    # fsync: shards appear under their names; syncfs: staged under temporary names
    count = shard_files if sync == "fsync" else (lambda o: len(tmp_names(o)))
    seen = wait_for_shards(proc, out, total_shards() // 10, count)
    running = proc.poll() is None
    t0 = time.monotonic()
    if running:
        proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        check(False, f"{name}: the run ended after the signal")
        return
    took = time.monotonic() - t0
    check(running, f"{name}: signal sent mid-write ({seen} of {total_shards()} shards "
                   f"{'written' if sync == 'fsync' else 'staged'})")
    code = 128 + sig
    check(proc.returncode == code,
          f"{name}: exit {proc.returncode} == 128 + {sig} = {code} ({took:.2f} s after the "
          f"signal)")
    check(took < 10, f"{name}: stopped within 10 s of the signal ({took:.2f} s)")
    check_stopped_output(name, out, err, signame)
    check(not os.path.exists(os.path.join(d, "report.json")), f"{name}: no report written")
    left = shard_files(out)
    check(0 < left < total_shards(), f"{name}: the finished shards stay for resume ({left} of {total_shards()})")
    resume_and_compare(name, d, out, ref)


def case_scan(work, inp):
    d = os.path.join(work, "scan")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "job.yaml"), "w") as f:
        f.write(f"job: scan\ninput: {{store: {inp}}}\ntile: [8, 32, 32]\npasses: 1000\n"
                "parallel: {threads: 1}\nprogress: false\n")
    proc = subprocess.Popen([ARGS.shardmill, "run", "job.yaml", "-q", "--report", "report.json"],
                            cwd=d, env=env_plain(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for_handler(proc, signal.SIGTERM)
    time.sleep(1.0)
    running = proc.poll() is None
    t0 = time.monotonic()
    if running:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        check(False, "scan: the run ended after SIGTERM")
        return
    took = time.monotonic() - t0
    check(running, "scan: SIGTERM sent while it ran")
    check(proc.returncode == 143, f"scan: exit {proc.returncode} == 143")
    # the driver stops at its next tile: not after the pass, not after all 1000 passes
    check(took < 10, f"scan: stopped {took:.2f} s after the signal (< 10 s)")
    lines = error_lines(err)
    check(len(lines) == 1 and lines[0] == "shardmill: error: job.yaml: stopped by SIGTERM",
          f"scan: one error line naming the configuration and SIGTERM ({lines})")
    check(not os.path.exists(os.path.join(d, "report.json")), "scan: no report written")


HUGE_META = ('{"zarr_format": 3, "node_type": "array", "shape": [1048576, 1048576, 1048576],\n'
             ' "data_type": "uint8", "chunk_grid": {"name": "regular", "configuration":\n'
             ' {"chunk_shape": [1, 1, 1]}}, "chunk_key_encoding": {"name": "default"},\n'
             ' "fill_value": 0, "codecs": [{"name": "bytes"}]}\n')


def case_huge(work):
    """Issue 19 item 11: a 4-line zarr.json of [2^20]^3 in [1,1,1] chunks (2^60 tiles). `plan`
    walked every tile (killed after 866 s) and a scan ignored SIGTERM while it planned. Now plan
    is closed-form (exact totals in seconds) and the scan stops within 5 s of SIGTERM."""
    d = os.path.join(work, "huge")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "big.zarr"))
    with open(os.path.join(d, "big.zarr", "zarr.json"), "w") as f:
        f.write(HUGE_META)
    with open(os.path.join(d, "job.yaml"), "w") as f:
        # a missing chunk is one request: the default limits.max_requests (10^6) was reached
        # within the second before SIGTERM on a fast machine (exit 5)
        f.write("job: scan\ninput: {store: big.zarr}\nparallel: {threads: 2}\nprogress: false\n"
                "limits: {max_requests: 1099511627776}\n")
    for part in ("balanced", "block"):
        proc = subprocess.Popen([ARGS.shardmill, "plan", "job.yaml", "--ranks", "4", "--json",
                                 "--set", f"parallel.partition={part}"], cwd=d, env=env_plain(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            check(False, f"huge: plan ({part}) of 2^60 tiles ends within 30 s")
            continue
        ok = proc.returncode == 0
        ranks = json.loads(out)["tiles"]["ranks"] if ok else []
        q = 2**58
        check(ok and json.loads(out)["tiles"]["items"] == 2**60 and
              [(r["first"], r["count"], r["cost_bytes"]) for r in ranks] ==
              [(i * q, q, q) for i in range(4)],
              f"huge: plan ({part}) gives 4 x 2^58 tiles of 2^58 bytes ({err.strip()[-200:]})")
    proc = subprocess.Popen([ARGS.shardmill, "run", "job.yaml", "-q"], cwd=d, env=env_plain(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_handler(proc, signal.SIGTERM)
    time.sleep(1.0)
    running = proc.poll() is None
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        check(False, "huge: the scan ended within 30 s of SIGTERM")
        return
    took = time.monotonic() - t0
    check(running, "huge: SIGTERM sent while the scan ran")
    check(proc.returncode == 143 and took < 5,
          f"huge: exit {proc.returncode} == 143, {took:.2f} s after SIGTERM (< 5 s)")
    lines = error_lines(err)
    check(lines == ["shardmill: error: job.yaml: stopped by SIGTERM"],
          f"huge: one error line naming SIGTERM ({lines})")


def case_sigpipe(work, inp):
    # SIGPIPE at its default action in the child (subprocess restores it): only shardmill's own
    # SIG_IGN keeps it alive. The reader takes 10 bytes of 16 MiB, then closes its end.
    cmd = [ARGS.shardmill, "read", inp, "--offset", "0,0,0", "--shape", "256,256,256", "-o", "-"]
    proc = subprocess.Popen(cmd, env=env_plain(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode(errors="replace")
    rc = proc.wait(timeout=TIMEOUT)
    check(len(head) == 10, "sigpipe: the reader got its 10 bytes")
    check(rc == 4, f"sigpipe: exit {rc} == 4 (an I/O error), not killed by SIGPIPE (-13)")
    lines = error_lines(err)
    check(len(lines) == 1 and "standard output" in lines[0] and "roken pipe" in lines[0],
          f"sigpipe: one error line naming standard output and the broken pipe ({lines})")


def run_pids(d):
    """Processes whose working directory is d (the ranks and mpirun of this case)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{pid}/cwd") == d:
                stat = open(f"/proc/{pid}/stat").read()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":
                    pids.append(int(pid))
        except OSError:
            continue
    return pids


def pids_left(d, within=10.0):
    """run_pids(d) once they had `within` seconds to exit (a sanitized rank that has stopped
    still spends a moment in its exit handlers); [] as soon as none is left."""
    deadline = time.monotonic() + within
    while True:
        left = run_pids(d)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def case_mpi(work, inp):
    if not ARGS.mpiexec:
        check(False, "mpi: --mpiexec given")
        return
    name = "mpirun -n 3 SIGTERM"
    ref = clean_run(work, inp, "fsync")
    d = os.path.join(work, "mpi")
    write_cfg(d, config(inp, "fsync"))
    out = os.path.join(d, "out.zarr")
    cmd = [ARGS.mpiexec, "--oversubscribe", "-np", "3", ARGS.shardmill, "run", "job.yaml", "-q",
           "--report", "report.json"]
    proc = subprocess.Popen(cmd, cwd=d, env=mpi_env(env_plain()), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen = wait_for_shards(proc, out, total_shards() // 100)
    running = proc.poll() is None
    t0 = time.monotonic()
    if running:
        proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        check(False, f"{name}: mpirun ended after SIGTERM (no hang)")
        return
    took = time.monotonic() - t0
    check(running, f"{name}: SIGTERM sent to mpirun mid-write ({seen} of {total_shards()} shards)")
    check(proc.returncode != 0, f"{name}: mpirun exits non-zero ({proc.returncode}, "
                                f"{took:.2f} s after the signal)")
    left = pids_left(d)
    check(not left, f"{name}: no process of the run left ({left})")
    lines = error_lines(err)
    check(len(lines) == 1 and "stopped by SIGTERM" in lines[0] and "out.zarr" in lines[0],
          f"{name}: one error line (rank 0's) naming the output and SIGTERM ({lines})")
    check(not os.path.exists(os.path.join(out, MARKER)), f"{name}: no completion marker")
    tmps = tmp_names(out)
    check(not tmps, f"{name}: no temporary name left in the output ({tmps[:3]})")
    check(not os.path.exists(os.path.join(d, "report.json")), f"{name}: no report written")
    resume_and_compare(name, d, out, ref, ranks=3)


def case_mpi_one_rank(work, inp):
    """SIGTERM to rank 1 only (a stray kill, not a launcher): ranks 0 and 2 never see a signal,
    finish their share of the write phase and learn the stop at the phase's agreement, so every
    rank ends alike, without a marker and without a hang."""
    if not ARGS.mpiexec:
        check(False, "mpi_one_rank: --mpiexec given")
        return
    name = "mpirun -n 3, SIGTERM to rank 1 only"
    ref = clean_run(work, inp, "fsync")
    d = os.path.join(work, "mpi1")
    write_cfg(d, config(inp, "fsync"))
    out = os.path.join(d, "out.zarr")
    cmd = [ARGS.mpiexec, "--oversubscribe", "-np", "3", ARGS.shardmill, "run", "job.yaml", "-q",
           "--report", "report.json"]
    proc = subprocess.Popen(cmd, cwd=d, env=mpi_env(env_plain()), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen = wait_for_shards(proc, out, total_shards() // 10)
    pid = rank_pids(proc.pid).get(1) if proc.poll() is None else None
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        check(False, f"{name}: every rank ended (no rank left waiting in a collective)")
        return
    check(pid is not None, f"{name}: SIGTERM sent to rank 1 (pid {pid}) mid-write ({seen} of "
                           f"{total_shards()} shards)")
    check(proc.returncode != 0, f"{name}: mpirun exits non-zero ({proc.returncode})")
    left = pids_left(d)
    check(not left, f"{name}: no process of the run left ({left})")
    lines = error_lines(err)
    check(len(lines) == 1 and "stopped by SIGTERM" in lines[0],
          f"{name}: rank 0, which got no signal, prints the agreed stop ({lines})")
    check(not os.path.exists(os.path.join(out, MARKER)), f"{name}: no completion marker")
    tmps = tmp_names(out)
    check(not tmps, f"{name}: no temporary name left in the output ({tmps[:3]})")
    resume_and_compare(name, d, out, ref, ranks=3)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--mpiexec", default="")
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", required=True,
                    choices=["sigterm", "sigint", "scan", "sigpipe", "mpi", "mpi_one_rank", "huge"])
    ARGS = ap.parse_args()
    ARGS.shardmill = os.path.abspath(ARGS.shardmill)
    global SHAPE
    if ARGS.case == "mpi":
        SHAPE = (512, 256, 256)  # 8192 shards: mpirun passes the signal on a second late
    elif ARGS.case == "mpi_one_rank":
        SHAPE = (128, 256, 256)  # 2048 shards: the signal goes straight to a rank, no delay
    work = os.path.abspath(ARGS.work)
    os.makedirs(work, exist_ok=True)
    if ARGS.case == "huge":
        case_huge(work)
        return summary()
    inp = make_input(work)
    if ARGS.case == "sigterm":
        case_stop(work, inp, signal.SIGTERM, "fsync")
    elif ARGS.case == "sigint":
        case_stop(work, inp, signal.SIGINT, "syncfs")
    elif ARGS.case == "scan":
        case_scan(work, inp)
    elif ARGS.case == "sigpipe":
        case_sigpipe(work, inp)
    elif ARGS.case == "mpi":
        case_mpi(work, inp)
    else:
        case_mpi_one_rank(work, inp)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
