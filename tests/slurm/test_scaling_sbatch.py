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
    come from sacct and its time (Start -> completion marker) is within the job's Start..End;
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
STUDY_TIMEOUT = 600


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
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=STUDY_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        check(False, f"scaling/run.py --launcher sbatch finished within {STUDY_TIMEOUT} s")
        print((e.stdout or b"")[-3000:], (e.stderr or b"")[-3000:])
        return None
    print(p.stdout[-4000:])
    ok = check(p.returncode == 0, f"scaling/run.py --launcher sbatch --quick exits 0 after "
               f"{time.monotonic() - t:.0f} s (got {p.returncode})")
    if not ok:
        print(p.stderr[-4000:])
        print("--- slurmctld.log:\n" + "".join(open(cluster.log("slurmctld.log"),
                                                    errors="replace").readlines()[-30:]))
    dirs = sorted(glob.glob(os.path.join(out, "*-quick")))
    if not check(len(dirs) == 1, f"one result directory ({dirs})"):
        return None
    return dirs[0]


def check_results(d, work):
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
        el, ms = r.get("elapsed_s"), r.get("marker_s")
        # whole seconds: the marker is written between Start and End (+1 s of rounding)
        check(el is not None and ms is not None and 0 <= ms <= el + 1,
              f"{name}: time Start -> marker {ms} s within the job's {el} s")
        check(r.get("verify_rc") == 0 and r.get("values_checked") is True,
              f"{name}: shardmill verify and the independent value check passed")
        rep = r.get("report") or {}
        check(rep.get("ranks") == r["ranks"] and rep.get("threads") == 1,
              f"{name}: report ranks {rep.get('ranks')}, threads {rep.get('threads')}")
    for vol, c in res["checksums"].items():
        oracle = [str(x) for x in c["oracle"]]
        mine = {(str(r.get("output_checksum")), str(r.get("output_weighted_checksum")))
                for r in runs if "x".join(map(str, r["shape"])) == vol}
        check(c["agree"] and mine == {tuple(oracle)},
              f"volume {vol}: output checksums agree across runs and equal the oracle's "
              f"({sorted(mine)} vs {oracle})")
    with open(os.path.join(d, "summary.csv")) as f:
        rows = list(csv.DictReader(f))
    check(len(rows) == 4 and all(row["ok_runs"] == "1" and row["marker_s_median"] not in ("", None)
                                 for row in rows),
          f"summary.csv: 4 points, each with its time ({[(r['study'], r['ranks']) for r in rows]})")
    with open(os.path.join(d, "check.json")) as f:
        chk = json.load(f)
    check(len(chk.get("rows", [])) == 4 and all(x["measured_s"] is not None
                                                for x in chk["rows"]),
          "check.json: the model's prediction beside each of the 4 measured points")
    left = [p for p in glob.glob(os.path.join(work, "jobs", "*.zarr"))]
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
    d = None
    try:
        try:
            cluster.start()
        except Exception as e:  # a daemon that did not come up: its log is in the message
            check(False, f"cluster up: {e}")
            return 1
        daemon_pids = [p.pid for p in cluster.procs.values()]
        check(cluster.node_state() == "idle", "cluster up: munged, slurmctld, slurmd; node idle")
        d = run_study(cluster, args, work)
    finally:
        cluster.stop()
    alive = [pid for pid in daemon_pids if os.path.exists(f"/proc/{pid}")
             and open(f"/proc/{pid}/stat").read().split()[2] != "Z"]
    left = cluster.leftover_pids()
    check(not alive and not left and not cluster.killed_leftovers,
          f"every daemon stopped by pid, nothing of the cluster left running (daemons alive "
          f"{alive}, others {left}, killed after the daemons {cluster.killed_leftovers})")
    if d:
        check_results(d, work)
    return summary(f" ({time.monotonic() - t0:.1f} s)")


if __name__ == "__main__":
    sys.exit(main())
