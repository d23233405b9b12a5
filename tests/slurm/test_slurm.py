"""shardmill through the Slurm templates on a real single-node cluster (label `slurm`).

Usage: PYTHONPATH=$PWD/tests/lib /usr/bin/python3 test_slurm.py --shardmill BIN \
           --mpiexec MPIEXEC --render slurm/render --work DIR

A private munged + slurmctld + slurmd (tests/lib/shardmill_test/slurm_cluster.py: own munge key and socket,
generated slurm.conf, free ports on 127.0.0.1, state, spool, pids and logs under DIR/cluster)
runs jobs rendered by slurm/render (in each job's directory, so a relative output.path is that
directory's) on a zarr-python v2 uint8 40x70x90 input made at test time (the same as
tests/mpi):
  convert   2 tasks x 1 cpu: COMPLETED with ExitCode 0:0, its %x-%j.out/.err files, report
            ranks 2, completion marker, `shardmill verify` passes, each rank bound to its own
            core (srun --cpu-bind=verbose,cores through SHARDMILL_CPU_BIND), and every file of
            the output tree byte-identical to an `mpirun -n 2` run of the same configuration.
  scan      2 tasks: COMPLETED 0:0, report ranks 2 with NumPy's histogram and checksums.
  scaling   a 2-task array over ranks 1 and 2: each task COMPLETED 0:0 with its own
            %x-%A_%a.out/.err and report (ranks 1, then 2), its output verified and
            byte-identical to the mpirun run.
  failing   convert of an input removed after render (render refuses a missing one): FAILED
            with ExitCode 3:0 (shardmill's exit status through srun and the script), one
            error line in the .err file, no marker.
  cancelled a 2-task convert of a 256^3 input cancelled with scancel once shards exist
            (SIGTERM to the tasks, SIGKILL after KillWait=5 s): CANCELLED and not requeued,
            rank 0's line "stopped by SIGTERM" in the .err file (the ranks stopped
            cooperatively), no marker, no temporary name; a resume ends byte-identical to a
            clean run.
  requeue   a 2-task convert whose 1-minute time limit is too short for its work (about 75 s,
            calibrated here): SIGTERM 10 s before the limit (--signal=B:TERM@10), the script
            passes it to the tasks, requeues the job, and the next run finishes it:
            COMPLETED 0:0, Restarts >= 1 (scontrol; sacct -c: a PENDING record per requeued
            run), SLURM_RESTART_COUNT of every run in the appended .out, verify passes, every
            file byte-identical to an uninterrupted run.
The daemons must listen on 127.0.0.1 only; afterwards every daemon is stopped by pid (also on
failure) and no process of the cluster may be left. Prints one ok/FAIL line per check and a final
`N passed, M failed` line; exit 1 on any failure.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

from shardmill_test import report_json
from shardmill_test.checks import check, summary
from shardmill_test.file_tree import tree_files, same_tree
from shardmill_test.ranks import mpi_env, plain_env, sanitizer_env
from shardmill_test.slurm_cluster import SlurmCluster

SHAPE = (40, 70, 90)
CHUNKS = (16, 16, 16)
JOB_TIMEOUT = 90  # seconds for one job (they take about 2 s each here)


def make_input(work):
    import zarr  # zarr-python 2.13 (Debian)

    path = os.path.join(work, "in.zarr")
    rng = np.random.default_rng(20261202)
    a = np.clip(rng.normal(100, 40, size=SHAPE), 0, 255).astype(np.uint8)
    if not os.path.exists(os.path.join(path, ".zarray")):
        shutil.rmtree(path, ignore_errors=True)
        z = zarr.open(path, mode="w", shape=SHAPE, chunks=CHUNKS, dtype="u1")
        z[:] = a
    return path, a


def np_stats(a):
    v = a.reshape(-1).astype(np.uint64)
    i = np.arange(1, v.size + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        weighted = int(np.sum(v * i, dtype=np.uint64))
    return int(np.sum(a, dtype=np.int64)), weighted, np.bincount(a.reshape(-1),
                                                                 minlength=256).tolist()


def tail(path, n=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError as e:
        return f"({path}: {e.strerror})"


def render(template, cfg, out_dir, script, extra, time_limit="00:05:00"):
    """slurm/render in the job's directory (that of the script): the configuration's relative
    paths resolve there, as they would for `shardmill run` started there."""
    os.makedirs(os.path.dirname(script), exist_ok=True)
    cmd = [sys.executable, ARGS.render, template, "--config", cfg, "--output-dir", out_dir,
           "--shardmill", ARGS.shardmill, "--time", time_limit, "-o", script] + extra
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=plain_env(),
                       cwd=os.path.dirname(script))
    ok = p.returncode == 0 and os.access(script, os.X_OK)
    check(ok, f"render {template} {' '.join(extra)}: exit 0, executable script"
          + ("" if ok else f" (got {p.returncode}: {p.stderr.strip()})"))
    return p.returncode == 0


def submit(cluster, script, cwd, name, extra_env=None):
    env = sanitizer_env(dict(cluster.env))
    if extra_env:
        env.update(extra_env)
    p = cluster.run(["sbatch", "--parsable", script], cwd=cwd, env=env, timeout=30)
    jid = p.stdout.strip().split(";")[0]
    ok = p.returncode == 0 and jid.isdigit()
    check(ok, f"{name}: sbatch accepted the script"
          + (f" (job {jid})" if ok else f" (exit {p.returncode}: {p.stderr.strip()})"))
    return jid if p.returncode == 0 and jid.isdigit() else None


def job_done(cluster, jid, name, expect):
    recs = cluster.wait_job(jid, timeout=JOB_TIMEOUT, expect=expect)
    states = [r.get("JobState") for r in recs]
    check(len(recs) == expect and all(s == "COMPLETED" for s in states),
          f"{name}: final state COMPLETED ({', '.join(s or '?' for s in states) or 'no record'}"
          f" within {JOB_TIMEOUT} s)")
    check(len(recs) == expect and all(r.get("ExitCode") == "0:0" for r in recs),
          f"{name}: exit code 0:0 ({', '.join(r.get('ExitCode', '?') for r in recs)})")
    if any(s != "COMPLETED" for s in states) or len(recs) != expect:
        for r in recs:
            for k in ("StdOut", "StdErr"):
                print(f"--- {name} {r.get('JobId')} {k} {r.get(k)}:\n{tail(r.get(k, ''))}")
        print("--- slurmd.log:\n" + tail(cluster.log("slurmd.log")))
        print("--- slurmctld.log:\n" + tail(cluster.log("slurmctld.log")))
    return recs


def logs_exist(name, out_dir, stem):
    out, err = os.path.join(out_dir, stem + ".out"), os.path.join(out_dir, stem + ".err")
    check(os.path.isfile(out) and os.path.isfile(err), f"{name}: {stem}.out and {stem}.err exist")
    text = open(out, errors="replace").read() if os.path.isfile(out) else ""
    etext = open(err, errors="replace").read() if os.path.isfile(err) else ""
    check("shardmill-slurm: report " in text and "shardmill: error" not in text + etext,
          f"{name}: the batch script ran to its end without a shardmill error")
    return text, etext


def load_report(path, name):
    ok = check(os.path.isfile(path), f"{name}: report {os.path.basename(path)} written")
    return report_json.load(path) if ok else None


def listen_addresses(pids):
    """Local addresses of the TCP sockets in LISTEN state held by these processes."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                m = re.fullmatch(r"socket:\[(\d+)\]", os.readlink(f"/proc/{pid}/fd/{fd}"))
                if m:
                    inodes.add(m.group(1))
        except OSError:
            continue
    addrs = []
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and f[9] in inodes:
                host, port = f[1].split(":")
                if v6:
                    ip = "::1" if host == "0" * 31 + "1" or host.endswith("0100007F") else host
                else:
                    b = bytes.fromhex(host)[::-1]
                    ip = ".".join(str(x) for x in b)
                addrs.append((ip, int(port, 16)))
    return addrs


def run_mpirun_reference(work, cfg):
    d = os.path.join(work, "mpirun")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    cmd = [ARGS.mpiexec, "--oversubscribe", "-np", "2", ARGS.shardmill, "run", cfg, "--set",
           "parallel.threads=1", "--report", "report.json", "-q"]
    try:
        p = subprocess.run(cmd, cwd=d, env=mpi_env(plain_env()), capture_output=True,
                           text=True, timeout=120)
    except subprocess.TimeoutExpired:
        check(False, "mpirun -n 2 reference convert: finished within 120 s")
        return None
    check(p.returncode == 0, "mpirun -n 2 reference convert: exit 0"
          + ("" if p.returncode == 0 else f" (got {p.returncode}: {p.stderr.strip()[-300:]})"))
    if p.returncode != 0:
        return None
    rep = report_json.load(os.path.join(d, "report.json"))
    check(rep.get("ranks") == 2, f"mpirun reference: report ranks {rep.get('ranks')} == 2")
    return os.path.join(d, "out.zarr"), rep


def verify(out, name):
    p = subprocess.run([ARGS.shardmill, "verify", out], capture_output=True, text=True,
                       timeout=60, env=sanitizer_env(plain_env()))
    check(p.returncode == 0, f"{name}: shardmill verify passes ({p.stdout.strip()}"
          f"{p.stderr.strip()})")


def case_convert(cluster, work, cfg, ref):
    name = "convert job (2 tasks x 1 cpu)"
    d = os.path.join(work, "convert")
    logs = os.path.join(d, "logs")
    script = os.path.join(d, "convert.sbatch")
    if not render("convert", cfg, logs, script, ["--nodes", "1", "--ntasks", "2",
                                                 "--cpus-per-task", "1", "--job-name",
                                                 "sm-convert"]):
        return None
    # the binding is srun's, made visible: SHARDMILL_CPU_BIND overrides it at submission
    jid = submit(cluster, script, d, name, {"SHARDMILL_CPU_BIND": "verbose,cores"})
    return (name, d, logs, jid, ref)


def finish_convert(cluster, state):
    name, d, logs, jid, ref = state
    if jid is None:
        return
    job_done(cluster, jid, name, 1)
    out_text, err_text = logs_exist(name, logs, f"sm-convert-{jid}")
    masks = re.findall(r"cpu-bind=MASK - \S+, task +(\d+) +\d+ \[\d+\]: mask (0x[0-9a-f]+) set",
                       err_text)
    bits = {t: int(m, 16) for t, m in masks}
    check(sorted(bits) == ["0", "1"] and all(bin(v).count("1") == 1 for v in bits.values())
          and len(set(bits.values())) == 2,
          f"{name}: srun bound each rank to its own core ({masks or 'no cpu-bind lines'})")
    check("2 ranks x 1 threads" in out_text and "OMP_PLACES=cores OMP_PROC_BIND=close" in out_text,
          f"{name}: OMP_NUM_THREADS from SLURM_CPUS_PER_TASK, OMP_PLACES/OMP_PROC_BIND set")
    rep = load_report(os.path.join(logs, f"sm-convert-{jid}.report.json"), name)
    if rep is not None:
        check(rep.get("ranks") == 2 and rep.get("threads") == 1 and rep.get("job") == "convert",
              f"{name}: report says convert, ranks {rep.get('ranks')} == 2, threads "
              f"{rep.get('threads')} == 1")
        check(rep.get("output", {}).get("complete") is True, f"{name}: report output complete")
    out = os.path.join(d, "out.zarr")  # output.path is relative: sbatch ran in d
    check(os.path.isfile(os.path.join(out, "shardmill.complete.json")),
          f"{name}: completion marker exists")
    verify(out, name)
    if ref is not None:
        ok, why = same_tree(out, ref[0])
        check(ok, f"{name}: every file byte-identical to the mpirun -n 2 run ({why})")
        if rep is not None:
            check(rep["result"] == ref[1]["result"],
                  f"{name}: report result equal to the mpirun run's")


def case_failing(cluster, work, cfg):
    """An input that existed at render time (render checks it) and is gone when the job runs."""
    name = "failing convert job (input removed after render)"
    d = os.path.join(work, "failing")
    logs = os.path.join(d, "logs")
    script = os.path.join(d, "failing.sbatch")
    missing = os.path.join(work, "missing.zarr")
    shutil.rmtree(missing, ignore_errors=True)
    shutil.copytree(os.path.join(work, "in.zarr"), missing)
    ok = render("convert", cfg, logs, script, ["--ntasks", "2", "--job-name", "sm-failing",
                                               "--set", f"input.store={missing}"])
    shutil.rmtree(missing)
    if not ok:
        return None
    return (name, d, logs, submit(cluster, script, d, name))


def finish_failing(cluster, state):
    name, d, logs, jid = state
    if jid is None:
        return
    recs = cluster.wait_job(jid, timeout=JOB_TIMEOUT)
    st = recs[0].get("JobState") if recs else None
    code = recs[0].get("ExitCode") if recs else None
    # SPEC §4: a missing metadata document exits 3 on every rank; srun and the script pass it on
    check(st == "FAILED" and code == "3:0",
          f"{name}: shardmill's exit 3 reaches Slurm: FAILED with ExitCode 3:0 ({st}, {code})")
    err = os.path.join(logs, f"sm-failing-{jid}.err")
    text = open(err, errors="replace").read() if os.path.isfile(err) else ""
    lines = [ln for ln in text.splitlines() if ln.startswith("shardmill: error:")]
    check(len(lines) == 1 and "missing.zarr" in lines[0],
          f"{name}: one error line naming the input in the .err file ({lines})")
    check(not os.path.exists(os.path.join(d, "out.zarr", "shardmill.complete.json"))
          and not os.path.exists(os.path.join(logs, f"sm-failing-{jid}.report.json")),
          f"{name}: no completion marker, no report")


def case_scan(cluster, work, cfg):
    name = "scan job (2 tasks)"
    d = os.path.join(work, "scan")
    logs = os.path.join(d, "logs")
    script = os.path.join(d, "scan.sbatch")
    if not render("scan", cfg, logs, script, ["--ntasks", "2", "--job-name", "sm-scan"]):
        return None
    return (name, d, logs, submit(cluster, script, d, name))


def finish_scan(cluster, state, a):
    name, d, logs, jid = state
    if jid is None:
        return
    job_done(cluster, jid, name, 1)
    logs_exist(name, logs, f"sm-scan-{jid}")
    rep = load_report(os.path.join(logs, f"sm-scan-{jid}.report.json"), name)
    if rep is None:
        return
    check(rep.get("ranks") == 2 and rep.get("job") == "scan",
          f"{name}: report says scan, ranks {rep.get('ranks')} == 2")
    checksum, weighted, counts = np_stats(a)
    res = rep["result"]
    check(res["voxels"] == a.size and res["checksum"] == checksum
          and res["weighted_checksum"] == weighted and res["histogram"]["counts"] == counts,
          f"{name}: voxels, checksums and histogram equal NumPy's")


def case_scaling(cluster, work, cfg, ref):
    name = "scaling array (ranks 1, 2)"
    d = os.path.join(work, "scaling")
    logs = os.path.join(d, "logs")
    script = os.path.join(d, "scaling.sbatch")
    if not render("scaling", cfg, logs, script, ["--array", "1,2", "--job-name", "sm-scaling"]):
        return None
    return (name, d, logs, submit(cluster, script, d, name), ref)


def finish_scaling(cluster, state):
    name, d, logs, jid, ref = state
    if jid is None:
        return
    recs = job_done(cluster, jid, name, 2)
    tasks = sorted(r.get("ArrayTaskId", "?") for r in recs)
    check(tasks == ["0", "1"], f"{name}: array tasks {tasks} == ['0', '1']")
    for task, ranks in (("0", 1), ("1", 2)):
        tn = f"{name} task {task}"
        stem = f"sm-scaling-{jid}_{task}"
        logs_exist(tn, logs, stem)
        rep = load_report(os.path.join(logs, stem + ".report.json"), tn)
        if rep is not None:
            check(rep.get("ranks") == ranks and rep.get("job") == "convert",
                  f"{tn}: report ranks {rep.get('ranks')} == {ranks}")
            if ref is not None:
                check(rep["result"] == ref[1]["result"],
                      f"{tn}: report result equal to the mpirun run's")
        out = os.path.join(logs, stem + ".zarr")
        verify(out, tn)
        if ref is not None:
            ok, why = same_tree(out, ref[0])
            check(ok, f"{tn}: output byte-identical to the mpirun -n 2 run ({why})")


def make_big_input(work):
    """A uint8 256^3 input for the cancelled job: its write phase takes a few seconds."""
    import zarr  # zarr-python 2.13 (Debian)

    path = os.path.join(work, "big.zarr")
    if not os.path.exists(os.path.join(path, ".zarray")):
        shutil.rmtree(path, ignore_errors=True)
        rng = np.random.default_rng(20261203)
        z = zarr.open(path, mode="w", shape=(256, 256, 256), chunks=(32, 64, 64), dtype="u1")
        z[:] = rng.integers(0, 256, size=(256, 256, 256), dtype=np.uint8)
    return path


CANCEL_SHARDS = 32 * 16 * 8  # shards of [8, 16, 32] over 256^3


def shard_count(out):
    c = os.path.join(out, "c")
    return sum(len(fs) for _, _, fs in os.walk(c)) if os.path.isdir(c) else 0


def case_cancelled(cluster, work):
    """SPEC §1: scancel (SIGTERM to every task, SIGKILL after KillWait=5 s) stops the ranks at
    their next shard: CANCELLED, the stop's error line, no marker, no temporary name, and a
    resume completes the output byte-identical to a clean run of the same configuration."""
    name = "cancelled convert job (scancel mid-write)"
    big = make_big_input(work)
    d = os.path.join(work, "cancel")
    logs = os.path.join(d, "logs")
    cfg = os.path.join(work, "cancel.yaml")
    with open(cfg, "w") as f:
        f.write("job: convert\n"
                f"input: {{store: {big}}}\n"
                "tile: [32, 64, 64]\nprogress: false\n"
                "output: {path: out.zarr, shard: [8, 16, 32], chunk: [8, 16, 16], "
                "codec: {name: gzip, level: 9}, sync: fsync}\n")
    ref = os.path.join(work, "cancel-clean")
    shutil.rmtree(ref, ignore_errors=True)
    os.makedirs(ref)
    p = subprocess.run([ARGS.shardmill, "run", cfg, "-q", "--set", "parallel.threads=1"],
                       cwd=ref, env=sanitizer_env(plain_env()), capture_output=True, text=True,
                       timeout=120)
    if not check(p.returncode == 0, f"{name}: clean reference run exits 0"
                 f" ({p.stderr.strip()[-200:]})"):
        return
    script = os.path.join(d, "cancel.sbatch")
    if not render("convert", cfg, logs, script, ["--ntasks", "2", "--job-name", "sm-cancel"]):
        return
    jid = submit(cluster, script, d, name)
    if jid is None:
        return
    out = os.path.join(d, "out.zarr")
    deadline = time.monotonic() + JOB_TIMEOUT
    seen = 0
    while time.monotonic() < deadline:
        seen = shard_count(out)
        state = (cluster.job_info(jid) or [{}])[0].get("JobState")
        if seen >= CANCEL_SHARDS // 10 or state not in ("PENDING", "RUNNING", "CONFIGURING"):
            break
        time.sleep(0.02)
    t0 = time.monotonic()
    c = cluster.run(["scancel", jid], timeout=30)
    recs = cluster.wait_job(jid, timeout=JOB_TIMEOUT)
    took = time.monotonic() - t0
    st = recs[0].get("JobState") if recs else None
    check(c.returncode == 0 and 0 < seen < CANCEL_SHARDS,
          f"{name}: scancel sent mid-write ({seen} of {CANCEL_SHARDS} shards)")
    check(st == "CANCELLED", f"{name}: final state CANCELLED ({st}, {took:.1f} s after scancel)")
    err = os.path.join(logs, f"sm-cancel-{jid}.err")
    text = open(err, errors="replace").read() if os.path.isfile(err) else ""
    lines = [ln for ln in text.splitlines() if ln.startswith("shardmill: error:")]
    # the line comes from rank 0 after every rank agreed on the stop: no SIGKILL was needed
    check(len(lines) == 1 and "stopped by SIGTERM" in lines[0],
          f"{name}: the ranks stopped within KillWait: one error line naming SIGTERM ({lines})")
    # the batch shell got SIGTERM too, but the job was CANCELLED: the script does not requeue it
    restarts = recs[0].get("Restarts") if recs else None
    check("not requeued" in text and restarts == "0",
          f"{name}: not requeued (Restarts={restarts}, the script's line in .err)")
    check(not os.path.exists(os.path.join(out, "shardmill.complete.json")),
          f"{name}: no completion marker")
    tmps = [f for f in tree_files(out) if ".tmp." in os.path.basename(f)]
    check(not tmps, f"{name}: no temporary name left in the output ({tmps[:3]})")
    p = subprocess.run([ARGS.shardmill, "run", cfg, "-q", "--set", "parallel.threads=1",
                        "--set", "output.exists=resume"], cwd=d,
                       env=sanitizer_env(plain_env()), capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0, f"{name}: resume exits 0 ({p.stderr.strip()[-200:]})")
    ok, why = same_tree(out, os.path.join(ref, "out.zarr"))
    check(ok, f"{name}: resumed output byte-identical to the clean run ({why})")


def make_slow_input(work, depth):
    """A uint8 [depth, 256, 256] input of smooth, compressible values: zstd level 19 on its
    float32 output keeps both CPUs busy for about a second per 6 slices here."""
    import zarr  # zarr-python 2.13 (Debian)

    path = os.path.join(work, f"slow-{depth}.zarr")
    if not os.path.exists(os.path.join(path, ".zarray")):
        shutil.rmtree(path, ignore_errors=True)
        rng = np.random.default_rng(20261204)
        z = zarr.open(path, mode="w", shape=(depth, 256, 256), chunks=(16, 64, 64), dtype="u1")
        yy, xx = np.mgrid[0:256, 0:256]
        for z0 in range(0, depth, 16):
            n = min(16, depth - z0)
            zz = np.arange(z0, z0 + n)[:, None, None]
            base = (yy // 8 + xx // 8 + zz) % 64 * 3
            z[z0:z0 + n] = (base + rng.integers(0, 4, size=(n, 256, 256))).astype(np.uint8)
    return path


def slow_config(work, name, store):
    cfg = os.path.join(work, name)
    with open(cfg, "w") as f:
        f.write("job: convert\n"
                f"input: {{store: {store}}}\n"
                "progress: false\n"
                "normalize: {mode: scale, divisor: 255}\n"
                "output: {path: out.zarr, shard: [16, 64, 64], chunk: [16, 32, 32], "
                "codec: {name: zstd, level: 19}}\n")
    return cfg


def timed_run(cfg, cwd, threads=2):
    shutil.rmtree(cwd, ignore_errors=True)
    os.makedirs(cwd)
    t = time.monotonic()
    p = subprocess.run([ARGS.shardmill, "run", cfg, "-q", "--set", f"parallel.threads={threads}"],
                       cwd=cwd, env=sanitizer_env(plain_env()), capture_output=True, text=True,
                       timeout=600)
    return p, time.monotonic() - t


REQUEUE_GRACE = 10  # --grace: the first signal comes 20 to 50 s after the start
REQUEUE_WORK_S = 90  # seconds of work for the requeue job (at least REQUEUE_MIN_S)
REQUEUE_MIN_S = 55  # more than the latest first signal: the first run is always stopped
REQUEUE_TIMEOUT = 300


def case_requeue(cluster, work):
    """Issue 22: a job whose time limit (1 minute) is too short for its work gets SIGTERM 10 s
    before the limit (#SBATCH --signal=B:TERM@10; slurmctld sends it at its first 30-second
    check after 60 - 10 - 30 s, so 20 to 50 s after the start), the batch script passes it to
    the tasks, the ranks stop (exit 143), the script requeues the job, and the next run
    finishes the output through output.exists auto: Restarts >= 1,
    COMPLETED, verify passes, and every file is byte-identical to an uninterrupted run."""
    name = f"requeued convert job (--time 1 min, --grace {REQUEUE_GRACE})"
    # calibrate: the depth whose uninterrupted run takes about REQUEUE_WORK_S here, measured
    # on 64 slices, then on the reference run itself while that is too short (up to 3 times:
    # a run's speed is not linear in its depth, and other tests share the machine)
    cal_cfg = slow_config(work, "requeue-cal.yaml", make_slow_input(work, 64))
    p, secs = timed_run(cal_cfg, os.path.join(work, "requeue-cal"))
    if not check(p.returncode == 0, f"{name}: calibration run exits 0 ({p.stderr.strip()[-200:]})"):
        return
    depth, done = 64, 64
    ref = os.path.join(work, "requeue-clean")
    for _ in range(3):
        depth = int(min(4096, max(64, depth * REQUEUE_WORK_S / max(secs, 0.1))) // 16 * 16)
        cfg = slow_config(work, "requeue.yaml", make_slow_input(work, depth))
        p, secs = timed_run(cfg, ref)
        done = depth
        if p.returncode != 0 or secs >= REQUEUE_MIN_S:
            break
    if not check(p.returncode == 0 and secs >= REQUEUE_MIN_S,
                 f"{name}: the uninterrupted run of [{done}, 256, 256] exits 0 after "
                 f"{secs:.0f} s (>= {REQUEUE_MIN_S} s: the first signal comes by 50 s) "
                 f"({p.stderr.strip()[-200:]})"):
        return
    d = os.path.join(work, "requeue")
    logs = os.path.join(d, "logs")
    script = os.path.join(d, "requeue.sbatch")
    if not render("run", cfg, logs, script, ["--ntasks", "2", "--job-name", "sm-requeue",
                                             "--grace", str(REQUEUE_GRACE)],
                  time_limit="00:01:00"):
        return
    text = open(script).read()
    check("#SBATCH --requeue\n" in text
          and f"#SBATCH --signal=B:TERM@{REQUEUE_GRACE}\n" in text,
          f"{name}: the script asks for --requeue and --signal=B:TERM@{REQUEUE_GRACE}")
    t0 = time.monotonic()
    jid = submit(cluster, script, d, name)
    if jid is None:
        return
    seen, rec = [], {}
    deadline = time.monotonic() + REQUEUE_TIMEOUT
    while time.monotonic() < deadline:
        rec = (cluster.job_info(jid) or [{}])[0]
        st = (rec.get("JobState"), rec.get("Restarts"))
        if not seen or seen[-1] != st:
            seen.append(st)
            print(f"     {time.monotonic() - t0:6.1f} s: JobState={st[0]} Restarts={st[1]} "
                  f"Reason={rec.get('Reason')}", flush=True)
        if st[0] in ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL",
                     "OUT_OF_MEMORY"):
            break
        time.sleep(0.5)
    took = time.monotonic() - t0
    restarts = int(rec.get("Restarts") or 0)
    check(rec.get("JobState") == "COMPLETED" and rec.get("ExitCode") == "0:0",
          f"{name}: COMPLETED 0:0 after {took:.0f} s ({rec.get('JobState')} "
          f"{rec.get('ExitCode')}; states {seen})")
    check(restarts >= 1, f"{name}: scontrol show job: Restarts={restarts} >= 1")
    out_text = tail(os.path.join(logs, f"sm-requeue-{jid}.out"), 10000)
    err_text = tail(os.path.join(logs, f"sm-requeue-{jid}.err"), 10000)
    stops = re.findall(r"^shardmill-slurm: stopped by SIGTERM: scontrol requeue " + jid,
                       out_text, re.M)
    counts = re.findall(r"SLURM_RESTART_COUNT=(\d+)", out_text)
    check(len(stops) == restarts and counts == [str(i) for i in range(restarts + 1)],
          f"{name}: the appended .out shows {len(stops)} requeues and every run's "
          f"SLURM_RESTART_COUNT ({counts})")
    # a run stopped while shardmill ran prints rank 0's line; a signal that lands after the run
    # step ended (before `verify`) skips the verify step and requeues without one: the next run
    # finds the output complete (output.exists: auto) and verifies it
    lines = [ln for ln in err_text.splitlines() if ln.startswith("shardmill: error:")]
    check(1 <= len(lines) <= restarts and all("stopped by SIGTERM" in ln for ln in lines),
          f"{name}: the stopped runs: rank 0's line 'stopped by SIGTERM', at least one, at most "
          f"one per requeue (the ranks stopped cooperatively: {len(lines)} lines, {restarts} "
          "requeues)")
    acct = requeue_record(cluster, jid)
    if acct is not None:
        # jobcomp/filetxt logs a requeued run with the state the job has then: PENDING
        states = [r.split("|")[1] for r in acct.split()]
        check(len(states) == restarts + 1 and states[-1] == "COMPLETED"
              and all(st in ("PENDING", "REQUEUED") for st in states[:-1]),
              f"{name}: sacct -c shows {restarts} requeued run(s), then COMPLETED ({acct})")
    out = os.path.join(d, "out.zarr")
    verify(out, name)
    ok, why = same_tree(out, os.path.join(ref, "out.zarr"))
    check(ok, f"{name}: every file byte-identical to the uninterrupted run ({why})")
    if rec.get("JobState") != "COMPLETED":
        print("--- .out:\n" + tail(os.path.join(logs, f"sm-requeue-{jid}.out")))
        print("--- .err:\n" + tail(os.path.join(logs, f"sm-requeue-{jid}.err")))
        print("--- slurmctld.log:\n" + tail(cluster.log("slurmctld.log"), 40))


def requeue_record(cluster, jid):
    """The job's states from `sacct -c` (the job completion log; the test cluster has no
    accounting database), or None where sacct cannot read it."""
    p = cluster.run(["sacct", "-c", "-j", jid, "-n", "-P", "-o", "JobID,State"], timeout=30)
    if p.returncode != 0 or not p.stdout.strip():
        print(f"note: sacct -c -j {jid}: {(p.stderr or p.stdout).strip()[:200] or 'nothing'}; "
              "the requeue is checked with scontrol's Restarts alone")
        return None
    return " ".join(p.stdout.split())


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--render", required=True)
    ap.add_argument("--work", required=True)
    ARGS = ap.parse_args()
    ARGS.shardmill = os.path.abspath(ARGS.shardmill)
    # SIGTERM (ctest --timeout, Ctrl-C in a pipeline): unwind through `finally`, which stops the
    # cluster; the daemons also get SIGTERM if this process dies (PR_SET_PDEATHSIG)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t0 = time.monotonic()
    work = os.path.abspath(ARGS.work)
    for sub in ("convert", "scan", "scaling", "failing", "mpirun", "cancel", "requeue"):
        shutil.rmtree(os.path.join(work, sub), ignore_errors=True)
    os.makedirs(work, exist_ok=True)
    inp, a = make_input(work)

    cfg_convert = os.path.join(work, "convert.yaml")
    with open(cfg_convert, "w") as f:
        f.write("job: convert\n"
                f"input: {{store: {inp}}}\n"
                "tile: [16, 16, 16]\n"
                "normalize: {mode: percentile, lo: 1.5, hi: 99}\n"
                "output: {path: out.zarr, fsync: false}\n")
    cfg_scan = os.path.join(work, "scan.yaml")
    with open(cfg_scan, "w") as f:
        f.write(f"job: scan\ninput: {{store: {inp}}}\ntile: [16, 16, 16]\n")

    ref = run_mpirun_reference(work, cfg_convert)

    cluster = SlurmCluster(os.path.join(work, "cluster"))
    if not check(cluster.cpus >= 2, f"the node has {cluster.cpus} CPUs (2 needed)"):
        return 1
    daemon_pids = []
    try:
        t = time.monotonic()
        try:
            cluster.start()
        except Exception as e:  # a daemon that did not come up: its log is in the message
            check(False, f"cluster up: {e}")
            return 1
        daemon_pids = [p.pid for p in cluster.procs.values()]
        check(cluster.node_state() == "idle",
              f"cluster up: munged, slurmctld, slurmd; node idle after "
              f"{time.monotonic() - t:.1f} s")
        addrs = listen_addresses(daemon_pids)
        check(len(addrs) >= 2 and all(ip in ("127.0.0.1", "::1") for ip, _ in addrs),
              f"the daemons listen on 127.0.0.1 only ({sorted(addrs)})")
        # the jobs are queued at once; the node's 2 CPUs run them one after another
        conv = case_convert(cluster, work, cfg_convert, ref)
        scan = case_scan(cluster, work, cfg_scan)
        scaling = case_scaling(cluster, work, cfg_convert, ref)
        failing = case_failing(cluster, work, cfg_convert)
        if conv:
            finish_convert(cluster, conv)
        if scan:
            finish_scan(cluster, scan, a)
        if scaling:
            finish_scaling(cluster, scaling)
        if failing:
            finish_failing(cluster, failing)
        case_cancelled(cluster, work)  # alone on the node: it needs both CPUs while it runs
        case_requeue(cluster, work)  # alone too: its timing is the time limit's
    finally:
        cluster.stop()
    alive = [pid for pid in daemon_pids if os.path.exists(f"/proc/{pid}")
             and open(f"/proc/{pid}/stat").read().split()[2] != "Z"]
    left = cluster.leftover_pids()
    check(not alive and not left and not cluster.killed_leftovers,
          f"every daemon stopped by pid, nothing of the cluster left running (daemons alive "
          f"{alive}, others {left}, killed after the daemons {cluster.killed_leftovers})")
    return summary(f" ({time.monotonic() - t0:.1f} s)")


ARGS = None
if __name__ == "__main__":
    sys.exit(main())
