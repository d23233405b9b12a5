#!/usr/bin/python3
"""W5 scaling studies of `shardmill run` (convert): strong and weak scaling over ranks × threads.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/run.py                       strong + weak, ranks 1,2,4 × threads 1,2
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/run.py --study strong --ranks 1,2 --threads 1,2 --repeats 5
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/run.py --quick --out DIR     tiny study (< 30 s), the CI smoke test
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/run.py --table scaling/results/<UTC>-full   print the Markdown tables
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/run.py --launcher sbatch --render slurm/render --partition P \\
        --ntasks-per-node 32 --ranks 1,2,4,8,16,32,64 --threads 1,4 \\
        --data-dir /scratch/$USER/shardmill                       on a Slurm cluster

Strong scaling converts one volume (`--strong-shape`, default 512³ uint16 = 256 MiB) for every
(ranks, threads) point. Weak scaling grows the z extent with the ranks (`--weak-unit ranks`,
default: [base_z·R, y, x], so each rank keeps base_z·y·x voxels; `--weak-unit workers` grows it
with R·T instead). Volumes come from scaling/make_volume.py (uint16 Zarr v3, chunks 64³, zstd 3,
CT-like content; idempotent, under --data-dir). Job: configs/scaling-convert.yaml (scale
normalization, output shards [64,256,256] of inner chunks 64³, durable writes).

Every point runs `--repeats` times in fresh processes. One warm-up run per volume comes first
(discarded); then the points are run in ABAB order (every repeat runs every point once, in the
same order). Launchers: `mpirun` (local: `mpirun --oversubscribe --bind-to none -np R`, each
rank through bench/region_read/w3_spawn.c; one rank runs as a plain process unless --mpirun-single) or
`sbatch` (one Slurm job per run, submitted one after another: `slurm/render run --config CFG
--nodes ceil(R/P) --ntasks R --ntasks-per-node min(R, P) --cpus-per-task T --time TIME
--output-dir WORK --set input.store=... --set output.path=WORK/<tag>.zarr ...`, then `sbatch
--parsable`; the driver polls `scontrol show job` until the job ends, through any requeue at
its time limit (render's output.exists: auto finishes the output), and reads the job's Start and
End from sacct (`sacct -c`, the job completion log, where there is no accounting database);
the report is render's WORK/shardmill-<tag>-<job id>.report.json).

The time of a run is launch → the completion marker's mtime (ext4 mtime has the kernel's coarse
clock, about 4 ms; under sbatch: the start of the job's srun step, which its .out gives in ns, →
the marker's mtime; job_marker_s: sacct's Start, whole seconds, → the marker; step_s: the srun
step, ms); wall (launch → exit; sbatch: submission → the end seen) and the report's stage
times (timing_ms, max and mean over ranks) are recorded too. A run requeued under sbatch is
checked but has no time. Checks of every run: the report against the generator's NumPy oracle
(input checksums, the exact 65536-bin histogram, output checksums of float32(v)/float32(4095),
shard count), `shardmill verify`, an independent decode of every output value (NumPy +
zstandard; `--check-values none` to skip it on big runs), and the output checksum equal across
every run of the same volume.

Results: `--out` (default scaling/results)/<UTC>-<profile>/ with results.json (every run, the
commit, machine, toolchain, launcher, timestamp), runs.csv, summary.csv (median / min / max,
speedup, efficiency), table.md, and PNG plots (matplotlib Agg): time.png, speedup.png,
efficiency.png; then `scaling/model.py check` of the study (--model-check, default the newest
scaling/results/*-model-measure/measure.json) adds check.json, check.md, fit.json and
predicted.png. A result directory is never overwritten.
Speedup (strong) S = T(1×1) / T(R×T); efficiency E = S / (R·T). Weak: E = T(1×T) / T(R×T)
(unit ranks) or T(1×1) / T(R×T) (unit workers).
Exit status 1 if any run failed a check; timings never fail a run.
"""

import argparse
import csv
import datetime
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

from shardmill_test import report_json
from shardmill_test import REPO
from shardmill_test import launcher as sm_launch
from shardmill_test import machine
from shardmill_test import results
from shardmill_test import volumes

HERE = os.path.dirname(os.path.abspath(__file__))


MIB = sm_launch.MIB
STAGES = ("total", "open", "hydrate", "decode", "process", "allreduce", "write", "scan_wall")
QUICK = {"ranks": [1, 2], "threads": [1, 2], "repeats": 1, "strong_shape": [64, 128, 96],
         "weak_base": [32, 128, 96], "chunk": [32, 32, 32], "shard": [32, 64, 64]}


def dims(text):
    v = [int(x) for x in text.split(",")]
    if len(v) != 3 or min(v) <= 0:
        raise argparse.ArgumentTypeError(f"expected z,y,x: {text}")
    return v


def ints(text):
    return [int(x) for x in text.split(",") if x]


# ---- sbatch launcher: one Slurm job per run (docs/SCALING.md, "On a cluster") ----

FINAL_STATES = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY",
                "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
SACCT_FIELDS = ("Submit", "Start", "End", "Elapsed", "State", "ExitCode", "NodeList")


def sacct_time(text):
    """A sacct timestamp (the cluster's local time, whole seconds) as a Unix time, or None."""
    if not text or text in ("Unknown", "None"):
        return None
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def sacct_record(jobid):
    """The job's last accounting record {Submit, Start, End, ..., "source"}: `sacct -X` (the
    accounting database), else `sacct -c` (the job completion log, where a cluster has no
    database, as the test cluster of tests/slurm: one line per run of a requeued job, the last
    one is the run that finished); None when neither knows the job."""
    fmt = ",".join(SACCT_FIELDS)
    for argv, source in ((["sacct", "-j", jobid, "-X", "-n", "-P", "-o", fmt], "sacct"),
                         (["sacct", "-c", "-j", jobid, "-n", "-P", "-o", fmt], "sacct -c")):
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        lines = [ln for ln in p.stdout.splitlines() if ln.count("|") == len(SACCT_FIELDS) - 1]
        if p.returncode == 0 and lines:
            rec = dict(zip(SACCT_FIELDS, lines[-1].split("|")))
            rec["source"] = source
            return rec
    return None


def scontrol_job(jobid):
    """`scontrol show job -o ID` as a dict, or None (unknown job, or scontrol failed)."""
    try:
        p = subprocess.run(["scontrol", "show", "job", "-o", jobid], capture_output=True,
                           text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0 or not p.stdout.strip():
        return None
    rec = {}
    for tok in p.stdout.splitlines()[0].split():
        k, sep, v = tok.partition("=")
        if sep:
            rec.setdefault(k, v)
    return rec


class SbatchRunner:
    """One run = one Slurm job: `slurm/render run` (the run template: one srun step of NTASKS
    ranks, then `shardmill verify`) with --ntasks R --cpus-per-task T, submitted with
    `sbatch --parsable`, followed with `scontrol show job` until it ends (through any requeue
    at its time limit), its start and end taken from sacct. Every run gets its own output and
    report at the driver's paths and output.exists=auto (render's default for convert), so a
    run stopped near its time limit is requeued and finished by its next start."""

    def __init__(self, a):
        self.a = a

    def describe(self):
        a = self.a
        return {"kind": "sbatch", "template": "run", "render": a.render,
                "partition": a.partition, "time": a.time,
                "ntasks_per_node": a.ntasks_per_node, "exists": "auto",
                "timing": "marker_s: the srun step's start (the job's .out, ns) -> the "
                          "completion marker's mtime; job_marker_s: sacct Start (whole "
                          "seconds) -> the marker; step_s: the srun step (ms, the .out)"}

    def render_argv(self, man, ranks, threads, work, tag, out, script):
        a = self.a
        nodes = max(1, math.ceil(ranks / a.ntasks_per_node))
        argv = [sys.executable, a.render, "run", "--config", a.config, "--nodes", str(nodes),
                "--ntasks", str(ranks), "--ntasks-per-node", str(min(ranks, a.ntasks_per_node)),
                "--cpus-per-task", str(threads), "--time", a.time, "--job-name",
                f"shardmill-{tag}", "--output-dir", work, "--shardmill", a.shardmill,
                "--set", f"input.store={man['path']}", "--set", f"output.path={out}",
                "--set", "progress=false", "-o", script]
        if a.partition:
            argv += ["--partition", a.partition]
        return nodes, argv

    def wait(self, jobid):
        """Poll until the job is in a final state; (last scontrol record, timed out)."""
        a = self.a
        deadline = time.monotonic() + a.sbatch_timeout if a.sbatch_timeout else None
        delay, last, gone = 0.25, None, 0
        self.states = []
        while deadline is None or time.monotonic() < deadline:
            rec = scontrol_job(jobid)
            if rec is None:
                gone += 1  # purged after MinJobAge, or slurmctld busy: sacct decides
                if gone >= 3:
                    return last, False
            else:
                gone, last = 0, rec
                st = (rec.get("JobState"), rec.get("Restarts"))
                if not self.states or self.states[-1] != list(st):
                    self.states.append(list(st))
                if st[0] in FINAL_STATES:
                    return rec, False
            time.sleep(delay)
            delay = min(delay * 1.5, a.poll_max)
        return last, True

    def run(self, man, ranks, threads, work, tag, shard, sets):
        a = self.a
        work = os.path.abspath(work)
        base = os.path.join(work, tag)
        out, script = base + ".zarr", base + ".sbatch"
        shutil.rmtree(out, ignore_errors=True)
        nodes, argv = self.render_argv(man, ranks, threads, work, tag, out, script)
        for s in sets:
            argv += ["--set", s]
        rec = {"tag": tag, "ranks": ranks, "threads": threads, "nodes": nodes, "argv": argv,
               "script": script, "ok": False, "per_rank": [], "other_busy_cores": None,
               "busy_cores_before": None}
        p = subprocess.run(argv, capture_output=True, text=True)
        rec["render_stderr"] = p.stderr.strip()[-1000:]
        if p.returncode != 0:
            rec["problems"] = [f"slurm/render exit {p.returncode}: {p.stderr.strip()[-400:]}"]
            return rec
        t0 = time.time()
        sub = subprocess.run(["sbatch", "--parsable", script], capture_output=True, text=True,
                             cwd=work)
        jobid = (sub.stdout.strip().split(";")[0] or "").strip()
        rec["jobid"] = jobid
        if sub.returncode != 0 or not jobid.isdigit():
            rec["problems"] = [f"sbatch exit {sub.returncode}: {sub.stderr.strip()[-400:]}"]
            return rec
        job, timed_out = self.wait(jobid)
        rec["wall_s"] = round(time.time() - t0, 3)  # submission -> the end seen (queue included)
        rec["states"] = self.states  # [JobState, Restarts] as polled, in order
        bad = []
        if timed_out:
            subprocess.run(["scancel", jobid], capture_output=True, text=True)
            bad.append(f"job {jobid} not finished after {a.sbatch_timeout} s: cancelled")
        acct = sacct_record(jobid)
        rec["sacct"] = acct
        rec["restarts"] = int((job or {}).get("Restarts") or 0)
        state = (acct or {}).get("State") or (job or {}).get("JobState")
        code = (acct or {}).get("ExitCode") or (job or {}).get("ExitCode")
        rec["state"], rec["exit_code"] = state, code
        if not timed_out and (state != "COMPLETED" or code != "0:0"):
            bad.append(f"job {jobid}: {state} with exit code {code} (see "
                       f"{work}/shardmill-{tag}-{jobid}.err)")
        start = sacct_time((acct or {}).get("Start"))
        end = sacct_time((acct or {}).get("End"))
        if acct is None or start is None or end is None:
            bad.append(f"job {jobid}: no start and end from sacct ({acct})")
        else:
            rec["launched_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start))
            rec["elapsed_s"] = round(end - start, 3)
            sub_t = sacct_time(acct.get("Submit"))
            rec["queue_s"] = round(start - sub_t, 3) if sub_t is not None else None
        # the last run of the job (a requeued job appends to its .out): its srun step's start
        # (ns) and duration (ms), as the template prints them
        step_t0, rec["step_s"] = None, None
        try:
            with open(os.path.join(work, f"shardmill-{tag}-{jobid}.out"), errors="replace") as f:
                for ln in f:
                    w = ln.split()
                    if ln.startswith("shardmill-slurm: srun step starts at ") and len(w) > 5:
                        step_t0 = int(w[5]) / 1e9
                    elif ln.startswith("shardmill-slurm: srun step took ") and len(w) > 4:
                        rec["step_s"] = int(w[4]) / 1000
        except (OSError, ValueError):
            pass
        try:
            mt = os.stat(os.path.join(out, sm_launch.MARKER)).st_mtime
            # launch -> marker as for mpirun: from the srun step's start, else from sacct's
            # Start (whole seconds, and the batch script's start-up with it)
            t_launch = step_t0 if step_t0 is not None else start
            rec["marker_s"] = round(mt - t_launch, 3) if t_launch is not None else None
            rec["marker_from"] = "srun step start" if step_t0 is not None else "sacct Start"
            rec["job_marker_s"] = round(mt - start, 3) if start is not None else None
        except OSError:
            rec["marker_s"] = None
            bad.append("no completion marker")
        if rec["restarts"]:
            # finished, and checked below, but by more than one run: no time of one run
            rec["untimed"] = (f"requeued {rec['restarts']} time(s) (time limit {a.time}): the "
                              "point's output is checked, its time is not one run's")
            rec["marker_s"] = None
        rep_path = os.path.join(work, f"shardmill-{tag}-{jobid}.report.json")
        try:
            with open(rep_path) as f:
                rep = report_json.with_int_checksums(json.load(f))
            rec["report"] = {k: rep.get(k) for k in ("engine", "ranks", "threads", "timing_ms",
                                                     "memory", "output", "figure_of_merit",
                                                     "io")}
            done = (rep.get("output") or {}).get("action") == "complete"
            if rec["restarts"] and done and rep.get("result") is None:
                # the run before the requeue completed the output (stopped in its verify
                # step): the last run found it complete, and its report has no result; the
                # output is verified and its values checked below
                rec["report_note"] = "the last run found the output complete: no result"
            else:
                bad += sm_launch.report_problems(rep, man, ranks, threads, shard)
                rec["output_checksum"] = rep["result"]["output_checksum"]
                rec["output_weighted_checksum"] = rep["result"]["output_weighted_checksum"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            bad.append(f"report: {e}")
        if not bad:
            v = subprocess.run([a.shardmill, "verify", out], capture_output=True, text=True)
            rec["verify_rc"] = v.returncode
            if v.returncode != 0:
                bad.append(f"shardmill verify exit {v.returncode}: "
                           f"{(v.stderr or v.stdout)[-300:]}")
        if not bad and a.check_values == "all":
            vbad, secs = sm_launch.check_output_values(out, man)
            rec["values_checked"] = not vbad
            rec["values_check_s"] = secs
            bad += vbad
        rec["problems"] = bad
        rec["ok"] = not bad
        shutil.rmtree(out, ignore_errors=True)
        return rec


class LocalRunner:
    def __init__(self, a, work):
        self.a = a
        spawn = sm_launch.build_spawn(work)
        extra = sm_launch.mpirun_args(a.mpirun_args)
        self.plain = sm_launch.Launcher("plain", spawn, a.mpirun, extra,
                                 omp_wait_policy=a.omp_wait_policy)
        self.mpi = sm_launch.Launcher("mpirun", spawn, a.mpirun, extra, omp_wait_policy=a.omp_wait_policy)

    def describe(self):
        d = self.mpi.describe()
        d["single_rank"] = "mpirun -np 1" if self.a.mpirun_single else "plain process (no MPI)"
        return d

    def run(self, man, ranks, threads, work, tag, shard, sets):
        launcher = self.plain if ranks == 1 and not self.a.mpirun_single else self.mpi
        return sm_launch.run_convert(launcher, self.a.shardmill, self.a.config, man, ranks, threads,
                              work, tag, shard, sets,
                              check_values=self.a.check_values == "all")


# ---- the study ----

def plan(a):
    """(study, ranks, threads, shape) points and the volumes they need."""
    points = []
    for study in a.studies:
        for r in a.ranks:
            for t in a.threads:
                if study == "strong":
                    shape = list(a.strong_shape)
                else:
                    k = r if a.weak_unit == "ranks" else r * t
                    shape = [a.weak_base[0] * k] + list(a.weak_base[1:])
                points.append({"study": study, "ranks": r, "threads": t, "workers": r * t,
                               "shape": shape})
    return points


def volume_path(a, shape):
    return os.path.join(a.data_dir, "vol-%d-%d-%d.zarr" % tuple(shape))


def run_study(a, runner, work):
    points = plan(a)
    mans = {}
    for p in points:
        key = tuple(p["shape"])
        if key not in mans:
            mans[key] = volumes.ensure_volume(volume_path(a, p["shape"]), p["shape"],
                                                  a.chunk, jobs=a.gen_jobs, quiet=a.quick)
    layout = [f"output.shard=[{', '.join(map(str, a.shard))}]",
              f"output.chunk=[{', '.join(map(str, a.out_chunk))}]"]
    sets = layout + list(a.set)
    runs = []
    seq = 0
    if a.warmup:
        for key, man in mans.items():
            p = max((q for q in points if tuple(q["shape"]) == key), key=lambda q: q["workers"])
            seq += 1
            rec = runner.run(man, p["ranks"], p["threads"], work, f"{seq:04d}-warmup", a.shard,
                             sets)
            rec.update({"study": "warmup", "repeat": -1, "shape": list(key),
                        "workers": p["workers"]})
            runs.append(rec)
            results.log(f"warm-up {key} {p['ranks']}x{p['threads']}: ok={rec['ok']} "
                   f"marker {rec.get('marker_s')} s")
    for rep in range(a.repeats):
        for p in points:
            if a.wait_idle:
                machine.wait_idle(a.wait_idle)
            seq += 1
            man = mans[tuple(p["shape"])]
            tag = f"{seq:04d}-{p['study']}-{p['ranks']}x{p['threads']}-r{rep}"
            rec = runner.run(man, p["ranks"], p["threads"], work, tag, a.shard, sets)
            rec.update({"study": p["study"], "repeat": rep, "shape": p["shape"],
                        "workers": p["workers"]})
            runs.append(rec)
            results.log(f"{p['study']:6s} {p['ranks']}x{p['threads']} {p['shape']} rep {rep}: "
                   f"ok={rec['ok']} marker {rec.get('marker_s')} s, engine total "
                   f"{results.timing(rec, 'total')} ms, other load {rec.get('other_busy_cores')}"
                   + ("" if rec["ok"] else f" PROBLEMS {rec.get('problems')}"))
    return points, mans, runs


def summarize(a, points, mans, runs):
    rows = []
    for p in points:
        rs = [r for r in runs if r["study"] == p["study"] and r["ranks"] == p["ranks"] and
              r["threads"] == p["threads"]]
        ok = [r for r in rs if r["ok"]]
        m = results.summarize([r.get("marker_s") for r in ok])
        row = {**p, "runs": len(rs), "ok_runs": len(ok),
               "marker_s_median": m and m["median"], "marker_s_min": m and m["min"],
               "marker_s_max": m and m["max"],
               "wall_s_median": results.med([r.get("wall_s") for r in ok]),
               "peak_rss_mib": round(max([((r.get("report") or {}).get("memory") or {}).get(
                   "peak_rss_bytes", 0) for r in ok] or [0]) / MIB, 1),
               "other_busy_cores_median": results.med([r.get("other_busy_cores") for r in ok])}
        for k in STAGES:
            row[f"{k}_ms"] = results.med([results.timing(r, k) for r in ok])
        row["output_checksums"] = sorted({str(r.get("output_checksum")) for r in rs})
        rows.append(row)
    for row in rows:
        if row["study"] == "strong":
            base = next((x for x in rows if x["study"] == "strong" and x["ranks"] == 1 and
                         x["threads"] == 1), None)
        elif a.weak_unit == "ranks":
            base = next((x for x in rows if x["study"] == "weak" and x["ranks"] == 1 and
                         x["threads"] == row["threads"]), None)
        else:
            base = next((x for x in rows if x["study"] == "weak" and x["ranks"] == 1 and
                         x["threads"] == 1), None)
        t0 = base and base["marker_s_median"]
        t = row["marker_s_median"]
        if row["study"] == "strong":
            row["speedup"] = round(t0 / t, 3) if t0 and t else None
            row["efficiency"] = round(row["speedup"] / row["workers"], 3) if row["speedup"] else None
        else:
            row["speedup"] = None
            row["efficiency"] = round(t0 / t, 3) if t0 and t else None
    # output checksums agree across every run of a volume (and equal the oracle: checked per run)
    agree = {}
    for key, man in mans.items():
        cs = {(r.get("output_checksum"), r.get("output_weighted_checksum")) for r in runs
              if tuple(r.get("shape") or ()) == key and not r.get("report_note")}
        # (a requeued sbatch run whose last report found the output complete has none: its
        # values were checked against the oracle directly)
        agree["x".join(map(str, key))] = {
            "checksums": sorted(str(c) for c in cs), "agree": len(cs) <= 1,
            "oracle": [man["oracle"]["output_checksum"],
                       man["oracle"]["output_weighted_checksum"]]}
    return rows, agree


CSV_RUN_COLS = ["study", "ranks", "threads", "workers", "shape", "repeat", "ok", "marker_s",
                "wall_s"] + [f"{k}_ms" for k in STAGES] + [
    "peak_rss_mib", "output_checksum", "output_weighted_checksum", "other_busy_cores",
    "busy_cores_before", "launched_utc"]
CSV_SUM_COLS = ["study", "ranks", "threads", "workers", "shape", "runs", "ok_runs",
                "marker_s_median", "marker_s_min", "marker_s_max", "speedup", "efficiency",
                "wall_s_median"] + [f"{k}_ms" for k in STAGES] + [
    "peak_rss_mib", "other_busy_cores_median"]


def write_csvs(d, runs, rows):
    with open(os.path.join(d, "runs.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_RUN_COLS)
        for r in runs:
            rep = r.get("report") or {}
            w.writerow([r["study"], r["ranks"], r["threads"], r["workers"],
                        "x".join(map(str, r["shape"])), r["repeat"], int(r["ok"]),
                        r.get("marker_s"), r.get("wall_s")] +
                       [results.timing(r, k) for k in STAGES] +
                       [round((rep.get("memory") or {}).get("peak_rss_bytes", 0) / MIB, 1),
                        r.get("output_checksum"), r.get("output_weighted_checksum"),
                        r.get("other_busy_cores"), r.get("busy_cores_before"),
                        r.get("launched_utc")])
    with open(os.path.join(d, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_SUM_COLS)
        for row in rows:
            w.writerow([("x".join(map(str, row[c])) if c == "shape" else
                         (round(row[c], 3) if isinstance(row[c], float) else row[c]))
                        for c in CSV_SUM_COLS])


def plots(d, rows, cores, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    made = []
    threads = sorted({r["threads"] for r in rows})
    studies = [s for s in ("strong", "weak") if any(r["study"] == s for r in rows)]
    styles = {"strong": "-", "weak": "--"}
    marks = ["o", "s", "^", "d", "v"]

    def series(study, t, key):
        pts = sorted((r["ranks"], r[key]) for r in rows
                     if r["study"] == study and r["threads"] == t and r[key] is not None)
        return [p[0] for p in pts], [p[1] for p in pts]

    specs = [("time.png", "marker_s_median", "time to completion marker (s, median)", studies),
             ("speedup.png", "speedup", "strong-scaling speedup vs 1×1", ["strong"]),
             ("efficiency.png", "efficiency", "parallel efficiency", studies)]
    for fname, key, ylabel, sts in specs:
        fig, ax = plt.subplots(figsize=(5.2, 3.4), dpi=72)
        for s in sts:
            for i, t in enumerate(threads):
                x, y = series(s, t, key)
                if x:
                    ax.plot(x, y, styles[s], marker=marks[i % len(marks)], lw=1.2, ms=4,
                            label=f"{s}, {t} thread{'s' if t > 1 else ''}/rank")
        ranks = sorted({r["ranks"] for r in rows})
        if key == "speedup":
            for i, t in enumerate(threads):
                ax.plot(ranks, [min(r * t, cores) for r in ranks], ":", color="grey", lw=0.8)
            ax.text(ranks[-1], min(ranks[-1] * threads[-1], cores), f" {cores} cores",
                    fontsize=7, va="bottom", ha="right", color="grey")
        if key == "efficiency":
            ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ranks)
        ax.set_xticklabels([str(r) for r in ranks])
        ax.set_xlabel("MPI ranks")
        ax.set_ylabel(ylabel, fontsize=8)
        ax.set_title(title, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
        fig.tight_layout()
        path = os.path.join(d, fname)
        fig.savefig(path, dpi=72)
        plt.close(fig)
        made.append(path)
    return made


def md_tables(res):
    rows = res["summary"]
    out = []
    for study in ("strong", "weak"):
        rs = [r for r in rows if r["study"] == study]
        if not rs:
            continue
        shape = "varies" if study == "weak" else "x".join(map(str, rs[0]["shape"]))
        out.append(f"**{study} scaling** ({'volume ' + shape if study == 'strong' else 'z grows with ' + res['params']['weak_unit']}; "
                   f"time = launch → completion marker, median of {res['params']['repeats']}; "
                   "stage times are the report's max over ranks, ms)\n")
        out.append("| ranks × threads | volume | time s (min–max) | speedup | efficiency | "
                   "decode | process | write | allreduce | peak RSS MiB | other load |")
        out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rs:
            def f(v, fmt="{:.0f}"):
                return "" if v is None else fmt.format(v)
            out.append(f"| {r['ranks']}×{r['threads']} | {'x'.join(map(str, r['shape']))} | "
                       f"{f(r['marker_s_median'], '{:.2f}')} ({f(r['marker_s_min'], '{:.2f}')}–"
                       f"{f(r['marker_s_max'], '{:.2f}')}) | {f(r['speedup'], '{:.2f}×')} | "
                       f"{f(r['efficiency'], '{:.2f}')} | {f(r['decode_ms'])} | "
                       f"{f(r['process_ms'])} | {f(r['write_ms'])} | {f(r['allreduce_ms'], '{:.1f}')} | "
                       f"{r['peak_rss_mib']:.0f} | {f(r['other_busy_cores_median'], '{:.2f}')} |")
        out.append("")
    return "\n".join(out)


def model_measure(opt):
    """The measure.json of --model-check: a path, the newest one in scaling/results (auto), or
    None (none, or auto without one)."""
    if opt == "none":
        return None
    if opt != "auto":
        return os.path.abspath(opt)
    found = sorted(glob.glob(os.path.join(HERE, "results", "*-model-measure", "measure.json")))
    return found[-1] if found else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--study", choices=["strong", "weak", "both"], default="both")
    ap.add_argument("--ranks", type=ints, default=None, help="default 1,2,4 (--quick: 1,2)")
    ap.add_argument("--threads", type=ints, default=None, help="default 1,2 (--quick: 1,2)")
    ap.add_argument("--repeats", type=int, default=None, help="default 3 (--quick: 1)")
    ap.add_argument("--strong-shape", type=dims, default=[512, 512, 512])
    ap.add_argument("--weak-base", type=dims, default=[128, 512, 512],
                    help="weak scaling: the volume of one unit (z is multiplied)")
    ap.add_argument("--weak-unit", choices=["ranks", "workers"], default="ranks")
    ap.add_argument("--chunk", type=dims, default=[64, 64, 64], help="input chunks")
    ap.add_argument("--shard", type=dims, default=[64, 256, 256], help="output shards")
    ap.add_argument("--out-chunk", type=dims, default=[64, 64, 64], help="output inner chunks")
    ap.add_argument("--set", action="append", default=[], help="extra --set for every run")
    ap.add_argument("--launcher", choices=["mpirun", "sbatch"], default="mpirun")
    ap.add_argument("--mpirun", default="mpirun")
    sm_launch.add_mpirun_args(ap)
    ap.add_argument("--mpirun-single", action="store_true",
                    help="run 1-rank points under mpirun -np 1 too (default: plain process)")
    ap.add_argument("--omp-wait-policy", default=None, help="OMP_WAIT_POLICY for every rank")
    ap.add_argument("--render", default=os.path.join(REPO, "slurm", "render"))
    ap.add_argument("--partition", default=None)
    ap.add_argument("--time", default="00:30:00", help="sbatch: the time limit of each job")
    ap.add_argument("--sbatch-timeout", type=float, default=0,
                    help="sbatch: cancel a job not finished after S seconds from its "
                         "submission, queue wait included (default 0: wait)")
    ap.add_argument("--poll-max", type=float, default=10.0,
                    help="sbatch: longest pause between two `scontrol show job` of a running "
                         "job (s; it starts at 0.25 s and grows by half each time)")
    ap.add_argument("--ntasks-per-node", type=int, default=os.cpu_count())
    ap.add_argument("--shardmill", default=os.path.join(REPO, "build", "release", "jobs",
                                                         "shardmill"))
    ap.add_argument("--config", default=os.path.join(REPO, "configs", "scaling-convert.yaml"))
    ap.add_argument("--data-dir", default=os.path.join(REPO, "data", "scaling"))
    ap.add_argument("--work", default=None, help="outputs while checked (default data-dir/work)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--name", default=None, help="result directory suffix (default: profile)")
    ap.add_argument("--check-values", choices=["all", "none"], default="all")
    ap.add_argument("--no-warmup", dest="warmup", action="store_false")
    ap.add_argument("--no-plots", dest="plots", action="store_false")
    ap.add_argument("--wait-idle", type=float, default=0)
    ap.add_argument("--gen-jobs", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--model-check", default="auto", metavar="MEASURE_JSON",
                    help="after the study, `scaling/model.py check` of its results with this "
                         "measure.json: check.json, check.md, fit.json, predicted.png in the "
                         "result directory (auto: the newest scaling/results/*-model-measure/"
                         "measure.json; none: skip)")
    ap.add_argument("--table", default=None, metavar="RESULT_DIR",
                    help="print the Markdown tables of a result directory and exit")
    a = ap.parse_args()
    if a.table:
        with open(os.path.join(a.table, "results.json")) as f:
            print(md_tables(json.load(f)))
        return 0
    given = {"ranks": a.ranks, "threads": a.threads, "repeats": a.repeats}
    a.ranks, a.threads, a.repeats = [1, 2, 4], [1, 2], 3
    if a.quick:
        a.ranks, a.threads, a.repeats = QUICK["ranks"], QUICK["threads"], QUICK["repeats"]
        a.strong_shape, a.weak_base = QUICK["strong_shape"], QUICK["weak_base"]
        a.chunk, a.shard, a.out_chunk = QUICK["chunk"], QUICK["shard"], QUICK["chunk"]
        a.warmup = False
    for k, v in given.items():  # --ranks, --threads, --repeats given win over the profile's
        if v is not None:
            setattr(a, k, v)
    a.studies = ["strong", "weak"] if a.study == "both" else [a.study]
    a.shardmill = os.path.abspath(a.shardmill)
    a.config = os.path.abspath(a.config)
    a.data_dir = os.path.abspath(a.data_dir)
    if any(s % c for s, c in zip(a.shard, a.out_chunk)):
        ap.error("--shard must be a multiple of --out-chunk")
    stamp = results.utc_stamp()
    d = results.unique_path(a.out, f"{stamp}-{a.name or ('quick' if a.quick else 'full')}", "")
    os.makedirs(d)
    tmp = None
    if a.work is None and a.quick:
        tmp = work = tempfile.mkdtemp(prefix="scaling-quick-")
    else:
        work = a.work or os.path.join(a.data_dir, "work")
    os.makedirs(work, exist_ok=True)
    tc = machine.toolchain(a.shardmill, a.mpirun)
    machine.check_release(tc)
    runner = LocalRunner(a, work) if a.launcher == "mpirun" else SbatchRunner(a)
    t0 = time.monotonic()
    mach0 = machine.machine()
    points, mans, runs = run_study(a, runner, work)
    rows, agree = summarize(a, points, mans, runs)
    params = {k: getattr(a, k) for k in ("studies", "ranks", "threads", "repeats", "strong_shape",
                                         "weak_base", "weak_unit", "chunk", "shard", "out_chunk",
                                         "set", "launcher", "check_values", "warmup", "quick")}
    res = {"workload": "W5 scaling (SPEC §8)", "driver": "scaling/run.py", "argv": sys.argv,
           "started_utc": stamp, "elapsed_s": round(time.monotonic() - t0, 1),
           "commit": tc["commit"], "machine": mach0, "machine_end": machine.machine(),
           "toolchain": tc, "launcher": runner.describe(), "params": params,
           "config": os.path.relpath(a.config, REPO), "work_fs": machine.fs_type(work),
           "volumes": {"x".join(map(str, k)): {x: m[x] for x in ("path", "params", "voxels",
                                                                 "stored_bytes",
                                                                 "compression_ratio", "oracle")}
                       for k, m in mans.items()},
           "checksums": agree, "summary": rows, "runs": runs,
           "noise_note": "shared machine: other_busy_cores is the CPU time other processes "
                         "used during a run divided by its wall time"}
    results.write_json(os.path.join(d, "results.json"), res)
    write_csvs(d, runs, rows)
    made = []
    if a.plots:
        made = plots(d, rows, os.cpu_count(), f"shardmill convert, {mach0['nproc']} cores "
                     f"({mach0['cpu']}), {tc['commit']['head'][:10]}")
    with open(os.path.join(d, "table.md"), "w") as f:
        f.write(md_tables(res) + "\n")
    print(md_tables(res))
    problems = []
    measure = model_measure(a.model_check)
    if measure and any(r["study"] == "strong" and r["ranks"] == 1 and r["threads"] == 1
                       and r["ok_runs"] for r in rows):
        # the model's check of this study: predicted against measured (scaling/MODEL.md)
        m = subprocess.run([sys.executable, os.path.join(HERE, "model.py"), "check",
                            "--scaling", d, "--measure", measure], capture_output=True,
                           text=True)
        print(m.stdout, end="")
        if m.returncode != 0 or not os.path.isfile(os.path.join(d, "check.json")):
            problems.append(f"scaling/model.py check exit {m.returncode}: "
                            f"{m.stderr.strip()[-400:]}")
    elif measure:
        results.log("note: no successful strong 1x1 run: no model check (check.json)")
    failed = [r for r in runs if not r["ok"]]
    problems += [f"{r['tag']}: {r.get('problems')}" for r in failed]
    problems += [f"output checksums differ for volume {k}: {v['checksums']}"
                 for k, v in agree.items() if not v["agree"]]
    for name in ("runs.csv", "summary.csv"):
        p = os.path.join(d, name)
        if not os.path.getsize(p):
            problems.append(f"{name} is empty")
    for p in made:
        if not os.path.exists(p) or os.path.getsize(p) < 1000:
            problems.append(f"plot {p} missing or empty")
        elif os.path.getsize(p) > 100 * 1024:
            results.log(f"warning: {p} is {os.path.getsize(p) // 1024} KiB")
    print(f"scaling: {len(runs)} runs, {len(failed)} failed; results in {d}")
    for p in problems:
        print(f"FAIL {p}")
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
