"""A scaling study submitted through Slurm (issue 34 item 1, label `slurm`): scaling/run.py
--launcher sbatch --quick on the real single-node cluster of tests/slurm (slurm_cluster.py).

Usage: PYTHONPATH=$PWD/tests/lib /usr/bin/python3 test_scaling_sbatch.py --shardmill BIN \
           --render slurm/render --work DIR

A private munged + slurmctld + slurmd (the same cluster as slurm.cluster, under DIR/cluster)
runs a strong + weak --quick study over ranks 1 and 2 x 1 thread (4 points, one Slurm job each:
the node has 2 CPUs), driven by scaling/run.py with the cluster's SLURM_CONF. Checks:
  - the driver exits 0 and writes one result directory with results.json, runs.csv,
    summary.csv, table.md, time/speedup/efficiency.png and the model's check.json;
  - every run was a job of its own, rendered by slurm/render's run template with --ntasks R,
    --cpus-per-task 1 and output.exists=auto, COMPLETED with exit code 0:0; its Start and End
    come from sacct, the marker lies within them, and its time (the srun step's start ->
    the marker) within the step;
  - the weak 1x1 job, sent the time limit's SIGTERM (scancel --batch --signal=TERM) once its
    step runs, is requeued by its script, finished by its next run and followed to its end by
    the driver: checked, and without a time;
  - every run passed the driver's checks: the report's input checksums, exact histogram and
    output checksums against the generator's NumPy oracle (scaling/make_volume.py),
    `shardmill verify`, and an independent decode of every output value (NumPy + zstandard);
  - the output checksums agree across the runs of each volume;
  - the daemons are stopped by pid afterwards and nothing of the cluster is left.
Prints one ok/FAIL line per check and `N passed, M failed`; exit 1 on any failure.
"""

import argparse
import csv
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from shardmill_test import REPO
from shardmill_test.checks import check, summary
from shardmill_test.slurm_cluster import SlurmCluster

POINTS = {("strong", 1), ("strong", 2), ("weak", 1), ("weak", 2)}
STUDY_TIMEOUT = 400
# the job name's end of the point stopped as at its time limit: not the strong 1x1 point, on
# which the model is fitted (a requeued point has no time), and one rank (see stop_one_job)
STOPPED = "-weak-1x1-r0"


def run_study(cluster, args, work):
    env = dict(cluster.env)
    env["PYTHONPATH"] = os.path.join(REPO, "tests", "lib") + (
        ":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    out = os.path.join(work, "results")
    cmd = [sys.executable, os.path.join(REPO, "scaling", "run.py"), "--launcher", "sbatch",
           "--quick", "--ranks", "1,2", "--threads", "1", "--render", args.render,
           "--shardmill", args.shardmill, "--data-dir", os.path.join(work, "data"),
           "--work", os.path.join(work, "jobs"), "--out", out, "--time", "00:05:00",
           "--ntasks-per-node", "2", "--sbatch-timeout", "120", "--poll-max", "1"]
    t = time.monotonic()
    log = os.path.join(work, "run.py.log")
    with open(log, "w") as lf:
        p = subprocess.Popen(cmd, env=env, stdout=lf, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        try:
            stopped = stop_one_job(cluster, work, p, t + STUDY_TIMEOUT)
            rc = p.wait(timeout=max(1, t + STUDY_TIMEOUT - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
            check(False, f"scaling/run.py --launcher sbatch finished within {STUDY_TIMEOUT} s")
    text = open(log, errors="replace").read()
    print(text[-5000:])
    ok = check(rc == 0, f"scaling/run.py --launcher sbatch --quick exits 0 after "
               f"{time.monotonic() - t:.0f} s (got {rc})")
    if not ok:
        print("--- slurmctld.log:\n" + "".join(open(cluster.log("slurmctld.log"),
                                                     errors="replace").readlines()[-30:]))
    check(stopped is not None, f"the weak 1x1 job got the time limit's SIGTERM while it ran "
          f"(job {stopped})")
    dirs = sorted(glob.glob(os.path.join(out, "*-quick")))
    if not check(len(dirs) == 1, f"one result directory ({dirs})"):
        return None, stopped
    return dirs[0], stopped


def stop_one_job(cluster, work, proc, deadline):
    """The time limit, made to come at once: once the weak 1x1 job's srun step has started (its
    line is in the job's .out), `scancel --batch --signal=TERM` sends the batch script what
    `#SBATCH --signal=B:TERM@GRACE` sends near the limit, while shardmill runs. The script stops the step and
    requeues the job; the driver must follow it to its requeued run, which finishes the output
    through output.exists: auto. A one-rank job: a two-rank job signalled this early (the
    script's forward to the step races the step's launch) hung once here until scancel, in one
    of four tries (docs/SCALING.md). Returns the job id signalled, or None."""
    while proc.poll() is None and time.monotonic() < deadline:
        q = cluster.run(["squeue", "-h", "-o", "%i|%T|%j"], timeout=10)
        for line in q.stdout.split():
            jid, state, name = (line.split("|") + ["", ""])[:3]
            if not name.endswith(STOPPED) or state != "RUNNING":
                continue
            out = os.path.join(work, "jobs", f"{name}-{jid}.out")
            try:
                started = "shardmill-slurm: srun step starts at " in open(
                    out, errors="replace").read()
            except OSError:
                started = False
            if started:
                c = cluster.run(["scancel", "--batch", "--signal=TERM", jid], timeout=10)
                return jid if c.returncode == 0 else None
        time.sleep(0.05)
    return None


def check_results(d, work, stopped):
    for name in ("results.json", "runs.csv", "summary.csv", "table.md", "time.png",
                 "speedup.png", "efficiency.png", "check.json", "check.md"):
        path = os.path.join(d, name)
        check(os.path.isfile(path) and os.path.getsize(path) > 0, f"{name} written")
    with open(os.path.join(d, "results.json")) as f:
        res = json.load(f)
    check(res["launcher"]["kind"] == "sbatch" and res["launcher"]["template"] == "run"
          and res["params"]["launcher"] == "sbatch",
          f"results.json: launcher sbatch, run template ({res['launcher']})")
    runs = res["runs"]
    got = {(r["study"], r["ranks"]) for r in runs}
    check(len(runs) == 4 and got == POINTS and all(r["threads"] == 1 for r in runs),
          f"4 runs, one per point ({sorted(got)})")
    jobids = [r.get("jobid") for r in runs]
    check(all(j and j.isdigit() for j in jobids) and len(set(jobids)) == len(runs),
          f"one Slurm job per run ({jobids})")
    for r in runs:
        name = f"{r['study']} {r['ranks']}x{r['threads']} (job {r.get('jobid')})"
        check(r["ok"] and not r.get("problems"), f"{name}: every check passed "
              f"({r.get('problems')})")
        check(r.get("state") == "COMPLETED" and r.get("exit_code") == "0:0",
              f"{name}: COMPLETED 0:0 ({r.get('state')} {r.get('exit_code')})")
        script = r.get("script") or ""
        text = open(script).read() if os.path.isfile(script) else ""
        check(f"#SBATCH --ntasks={r['ranks']}\n" in text and "#SBATCH --cpus-per-task=1\n" in text
              and "slurm/render run " in text and "output.exists=auto" in text,
              f"{name}: rendered by slurm/render run with --ntasks {r['ranks']}, 1 cpu per "
              "task and output.exists=auto")
        acct = r.get("sacct") or {}
        check(acct.get("State") == "COMPLETED" and acct.get("Start") and acct.get("End"),
              f"{name}: Start and End from {acct.get('source')} ({acct})")
        el, jm, ms = r.get("elapsed_s"), r.get("job_marker_s"), r.get("marker_s")
        if r.get("jobid") == stopped:
            # finished by its requeued run: checked, but no time of one run
            check(ms is None and "requeued 1 time" in (r.get("untimed") or ""),
                  f"{name}: no time for a requeued point ({ms}, {r.get('untimed')})")
        else:
            # sacct has whole seconds: the marker comes between Start and End (+1 s rounding)
            check(el is not None and jm is not None and 0 <= jm <= el + 1,
                  f"{name}: sacct Start -> marker {jm} s within the job's {el} s")
            check(r.get("marker_from") == "srun step start" and ms is not None
                  and 0 < ms <= jm + 1 and r.get("step_s") is not None
                  and ms <= r["step_s"] + 0.05,
                  f"{name}: time = srun step start -> marker {ms} s ({r.get('marker_from')}; "
                  f"the step took {r.get('step_s')} s)")
        check(r.get("verify_rc") == 0 and r.get("values_checked") is True,
              f"{name}: shardmill verify and the independent value check passed")
        if r.get("jobid") == stopped:
            out = os.path.join(work, "jobs", f"shardmill-{r['tag']}-{stopped}.out")
            text = open(out, errors="replace").read() if os.path.isfile(out) else ""
            check(r.get("restarts", 0) >= 1 and f"scontrol requeue {stopped}" in text
                  and "SLURM_RESTART_COUNT=1" in text,
                  f"{name}: stopped by SIGTERM, requeued by its script (Restarts="
                  f"{r.get('restarts')}), finished by its next run (output.exists: auto)")
        else:
            check(r.get("restarts") == 0, f"{name}: not requeued ({r.get('restarts')})")
        rep = r.get("report") or {}
        check(rep.get("ranks") == r["ranks"] and rep.get("threads") == 1,
              f"{name}: report ranks {rep.get('ranks')}, threads {rep.get('threads')}")
    for vol, c in res["checksums"].items():
        oracle = [str(x) for x in c["oracle"]]
        of_vol = [r for r in runs if "x".join(map(str, r["shape"])) == vol]
        mine = {(str(r.get("output_checksum")), str(r.get("output_weighted_checksum")))
                for r in of_vol if not r.get("report_note")}
        # a requeued run whose last run found the output complete has a report without a
        # result: its values were checked against the oracle by the independent decode
        noted = [r for r in of_vol if r.get("report_note")]
        check(c["agree"] and (mine == {tuple(oracle)} or not mine)
              and all(r.get("values_checked") for r in noted) and (mine or noted),
              f"volume {vol}: output checksums agree across runs and equal the oracle's "
              f"({sorted(mine)} vs {oracle}; {len(noted)} run(s) checked by their values only)")
    with open(os.path.join(d, "summary.csv")) as f:
        rows = list(csv.DictReader(f))
    timed = [(r["study"], int(r["ranks"])) for r in rows if r["marker_s_median"] not in ("", None)]
    check(len(rows) == 4 and all(row["ok_runs"] == "1" for row in rows)
          and sorted(timed) == sorted(POINTS - {("weak", 1)}),
          f"summary.csv: 4 points, each with a checked run and a time but the requeued one "
          f"({timed})")
    with open(os.path.join(d, "check.json")) as f:
        chk = json.load(f)
    check(len(chk.get("rows", [])) == 4 and all(x["measured_s"] is not None for x in chk["rows"]
                                                if (x["study"], x["ranks"]) != ("weak", 1)),
          "check.json: the model's prediction beside each of the 4 measured points")
    left = glob.glob(os.path.join(work, "jobs", "*.zarr"))
    check(not left, f"the outputs were deleted after their checks ({left})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--render", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    args.shardmill = os.path.abspath(args.shardmill)
    args.render = os.path.abspath(args.render)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t0 = time.monotonic()
    work = os.path.abspath(args.work)
    for sub in ("results", "jobs"):
        shutil.rmtree(os.path.join(work, sub), ignore_errors=True)
    os.makedirs(work, exist_ok=True)
    cluster = SlurmCluster(os.path.join(work, "cluster"))
    if not check(cluster.cpus >= 2, f"the node has {cluster.cpus} CPUs (2 needed)"):
        return 1
    daemon_pids = []
    d = stopped = None
    try:
        try:
            cluster.start()
        except Exception as e:  # a daemon that did not come up: its log is in the message
            check(False, f"cluster up: {e}")
            return 1
        daemon_pids = [p.pid for p in cluster.procs.values()]
        check(cluster.node_state() == "idle", "cluster up: munged, slurmctld, slurmd; node idle")
        d, stopped = run_study(cluster, args, work)
    finally:
        cluster.stop()
    alive = [pid for pid in daemon_pids if os.path.exists(f"/proc/{pid}")
             and open(f"/proc/{pid}/stat").read().split()[2] != "Z"]
    left = cluster.leftover_pids()
    check(not alive and not left and not cluster.killed_leftovers,
          f"every daemon stopped by pid, nothing of the cluster left running (daemons alive "
          f"{alive}, others {left}, killed after the daemons {cluster.killed_leftovers})")
    if d:
        check_results(d, work, stopped)
    return summary(f" ({time.monotonic() - t0:.1f} s)")


if __name__ == "__main__":
    sys.exit(main())
