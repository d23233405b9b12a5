#!/usr/bin/python3
"""W8 many shards (SPEC §8, issue 11): a 1024³ uint16 `convert` with the default (auto) output
layout against explicit `[8,32,32]` shards of `[2,16,16]` inner chunks (131,072 shards).

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/many_shards/w8.py [--shardmill BIN] [--repeats 2] [--wait-idle 60]
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/many_shards/w8.py --quick --out DIR           (CI smoke, a few seconds)
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/many_shards/w8.py --table bench/results/w8-<commit>.json

Input: scaling/make_volume.py's CT-like uint16 volume (chunks 64³, zstd 3), generated once under
--data-dir (idempotent, never in git). Job: configs/scaling-convert.yaml (scale normalization
float32(v)/float32(4095), zstd 3, durable: output.fsync with the default output.sync=syncfs) with
`output.shard`/`output.chunk` set to `auto` (layout "auto") or to [8,32,32]/[2,16,16] (layout
"small"). Configurations: 1×2 (one plain process, 2 threads) and 2×1 (mpirun -np 2, one thread
per rank). Repeats alternate the order (ABCD DCBA ...); medians are reported.

Per run (fresh processes, per rank through bench/region_read/w3_spawn.c: wait4 peak RSS and status):
  - time from launch to the completion marker's mtime and the run's wall time;
  - the report's stage times (timing_ms.max, including `finish`: gather of the records, marker,
    journals removed) and its VmHWM;
  - the files and directories in the finished output (the target: files = shards + zarr.json +
    marker, nothing else);
  - `shardmill verify` wall time;
  - resume: 100 shards (fewer in --quick) chosen by a seeded RNG are deleted, the same job runs
    again with `output.exists: resume` under the same ranks × threads; its wall time, the report's
    `output.written` (must be exactly the deleted count), the deleted shards' bytes after the
    resume (must equal the bytes before), and `verify` after it.
Every output stays until the last run (then all are deleted) when the disk has room (2.5 bytes
per input voxel per run): a run right after a 131,072-file deletion measures the file system's
inode reuse, not the engine (keep_outputs()).
The report is checked against the generator's NumPy oracle (input checksums, the exact
histogram, the output checksums of the float32 formula, shard count) by tests/lib/shardmill_test/launcher.py;
--check-values also decodes every output value independently (NumPy + zstandard; slow at 1024³).
Results: bench/results/w8-<commit>.json (--out for the quick profile; an existing file is never
overwritten: a suffix is added). Targets print PASS/FAIL and never change the exit status; a
wrong value or a failed run exits 1.
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

from shardmill_test import launcher as sm_launch
from shardmill_test import machine
from shardmill_test import results
from shardmill_test import volumes

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))


MIB = sm_launch.MIB
MARKER = sm_launch.MARKER
FULL = {"shape": [1024, 1024, 1024], "chunk": [64, 64, 64], "delete": 100}
QUICK = {"shape": [64, 128, 128], "chunk": [32, 32, 32], "delete": 10}
LAYOUTS = {"auto": ["output.shard=auto", "output.chunk=auto"],
           "small": ["output.shard=[8, 32, 32]", "output.chunk=[2, 16, 16]"]}
CONFIGS = {"1x2": (1, 2), "2x1": (2, 1)}
FINISH_TARGET_MS = 1000.0
RATIO_TARGET = 2.0


def plan_shard_shape(a, man, layout):
    """The shard shape `shardmill plan` gives for this layout (auto resolves to a shape)."""
    argv = [a.shardmill, "plan", a.config, "--json", "--set", f"input.store={man['path']}"]
    for s in LAYOUTS[layout] + a.sets:
        argv += ["--set", s]
    p = subprocess.run(argv, capture_output=True, text=True, check=True)
    plan = json.loads(p.stdout)
    return plan["shards"]["shape"], plan["shards"]["items"]


def count_entries(root):
    files = dirs = 0
    other = []
    for dp, dn, fn in os.walk(root):
        dirs += len(dn)
        files += len(fn)
        rel = os.path.relpath(dp, root)
        if rel == ".":
            other += [f for f in fn if f not in ("zarr.json", MARKER)]
            other += [d for d in dn if d != "c"]
    return files, dirs, other


def shard_files(root):
    out = []
    for dp, _, fn in os.walk(os.path.join(root, "c")):
        out += [os.path.join(dp, f) for f in fn]
    return sorted(out)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def timed(argv, env=None):
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    return round(time.monotonic() - t0, 4), p


def run_resume(a, env, man, out, ranks, threads, sets, tag):
    """The same job again with output.exists=resume; wall time, per-rank RSS, the report."""
    base = os.path.join(env["work"], tag)
    rep_path = base + ".report.json"
    argv_sm = sm_launch.shardmill_argv(a.shardmill, a.config, man["path"], out, rep_path,
                                (ranks, threads), list(sets) + ["output.exists=resume"])
    launcher = env["plain"] if ranks == 1 else env["mpirun"]
    argv, penv = launcher.command(ranks, threads, argv_sm, base + ".spawn")
    os.sync()
    wall, p = timed(argv, penv)
    rec = {"wall_s": wall, "rc": p.returncode, "stderr": (p.stderr or "")[-600:]}
    rec["per_rank"] = sm_launch.spawn_results(base + ".spawn", ranks)
    try:
        with open(rep_path) as f:
            rep = json.load(f)
        os.unlink(rep_path)
        rec["output"] = rep.get("output")
        rec["timing_ms_max"] = (rep.get("timing_ms") or {}).get("max")
    except (OSError, ValueError):
        rec["output"] = None
    return rec


def keep_outputs(a, work, man, nruns):
    """Whether every run's output stays until the last run is done (deleted then), which needs
    about 2.5 bytes of disk per input voxel per run (float32 output at ~2:1 under zstd, with
    room). A run right after the deletion of a 131,072-file output would measure the file
    system, not the engine: ext4 without a journal (this VM's disk) skips inodes freed in the
    last 60 s (300 s while their inode-table block is dirty) on every create, so the next run's
    creates scan the freed ones (`recently_deleted` in fs/ext4/ialloc.c: 63% of the samples and
    5-12x the system time of a run after a quiet period, docs/BENCHMARKS.md W8), and on any file
    system the deletion's writeback and discards overlap the next timed run. Without the room,
    outputs are deleted run by run, with a warning in the log and `outputs_kept: false` in the
    result."""
    need = int(2.5 * man["voxels"]) * nruns
    st = os.statvfs(work)
    free = st.f_bavail * st.f_frsize
    if free >= need + (2 << 30):
        return True
    results.log(f"w8: {free >> 30} GiB free in {work}, {need >> 30} GiB needed to keep every output "
           "until the end: deleting outputs run by run (the next run may pay for the deletion)")
    return False


def one_run(a, env, man, layout, cfg, rnd):
    ranks, threads = CONFIGS[cfg]
    shard = a.shard_shape[layout]
    tag = f"w8-{layout}-{cfg}-{rnd}"
    if a.wait_idle:
        machine.wait_idle(a.wait_idle)
    launcher = env["plain"] if ranks == 1 else env["mpirun"]
    sets = LAYOUTS[layout] + a.sets
    rec = sm_launch.run_convert(launcher, a.shardmill, a.config, man, ranks, threads, env["work"], tag,
                         shard, sets, check_values=a.check_values, keep_output=True)
    rec.update({"layout": layout, "config": cfg, "round": rnd, "shard_shape": shard})
    out = os.path.join(os.path.abspath(env["work"]), tag + ".zarr")
    problems = rec["problems"]
    try:
        if rec["ok"]:
            nshards = (rec["report"]["output"] or {}).get("shards")
            files, dirs, other = count_entries(out)
            rec["files"] = files
            rec["dirs"] = dirs
            rec["files_expected"] = nshards + 2
            if files != nshards + 2 or other:
                problems.append(f"output holds {files} files (expected {nshards} shards + "
                                "zarr.json + marker)" + (f", extra {other}" if other else ""))
            # verify, timed (warm page cache, like the run)
            vt, vp = timed([a.shardmill, "verify", out])
            rec["verify_s"] = vt
            if vp.returncode != 0:
                problems.append(f"verify exit {vp.returncode}")
            # resume after deleting shards
            shards = shard_files(out)
            k = min(a.delete, len(shards))
            victims = random.Random(f"{tag}").sample(shards, k)
            before = {v: sha(v) for v in victims}
            for v in victims:
                os.unlink(v)
            rr = run_resume(a, env, man, out, ranks, threads, sets, tag + "-resume")
            rr["deleted"] = k
            written = (rr.get("output") or {}).get("written")
            if rr["rc"] != 0 or any(x.get("rc") != 0 for x in rr["per_rank"]):
                problems.append(f"resume exit {rr['rc']}, ranks "
                                f"{[x.get('rc') for x in rr['per_rank']]}: {rr['stderr'][-300:]}")
            elif written != k:
                problems.append(f"resume rewrote {written} shards, {k} were deleted")
            else:
                same = all(os.path.exists(v) and sha(v) == h for v, h in before.items())
                rr["rewritten_identical"] = same
                if not same:
                    problems.append("a rewritten shard differs from the deleted one")
                vt2, vp2 = timed([a.shardmill, "verify", out])
                rr["verify_after_s"] = vt2
                if vp2.returncode != 0:
                    problems.append(f"verify after resume exit {vp2.returncode}")
                f2, _, other2 = count_entries(out)
                if f2 != nshards + 2 or other2:
                    problems.append(f"after resume the output holds {f2} files")
            rec["resume"] = rr
    finally:
        if a.keep_outputs:
            a.kept.append(out)  # deleted after the last run (main)
        else:
            shutil.rmtree(out, ignore_errors=True)
    rec["ok"] = not problems
    per = [round((x.get("maxrss_bytes") or 0) / MIB, 1) for x in rec["per_rank"]]
    t = (rec.get("report") or {}).get("timing_ms", {}).get("max", {}) if rec.get("report") else {}
    results.log(f"w8 {layout:5s} {cfg} round {rnd}: ok={rec['ok']} marker {rec.get('marker_s')} s, "
           f"finish {t.get('finish', 0):.1f} ms, files {rec.get('files')}, RSS/rank {per} MiB, "
           f"verify {rec.get('verify_s')} s, resume {(rec.get('resume') or {}).get('wall_s')} s "
           f"(wrote {((rec.get('resume') or {}).get('output') or {}).get('written')}), other "
           f"load {rec['other_busy_cores']}" + ("" if rec["ok"] else f" PROBLEMS {problems}"))
    return rec


STAGES = ("total", "open", "hydrate", "decode", "process", "allreduce", "write", "scan_wall",
          "finish")


def summarize(runs, layouts, cfgs):
    summary = {}
    for lay in layouts:
        for cfg in cfgs:
            rs = [x for x in runs if x["layout"] == lay and x["config"] == cfg]
            if not rs:
                continue
            rep = [x.get("report") or {} for x in rs]
            summary[f"{lay}/{cfg}"] = {
                "layout": lay, "config": cfg, "runs": len(rs), "all_ok": all(x["ok"] for x in rs),
                "shard_shape": rs[0]["shard_shape"],
                "shards": (rep[0].get("output") or {}).get("shards"),
                "marker_s": results.summarize([x.get("marker_s") for x in rs]),
                "wall_s": results.summarize([x["wall_s"] for x in rs]),
                "timing_ms_max": {k: results.med([results.timing(x, k) for x in rs]) for k in STAGES},
                "files": results.med([x.get("files") for x in rs]),
                "dirs": results.med([x.get("dirs") for x in rs]),
                "peak_rss_per_rank_bytes": max([max((y.get("maxrss_bytes") or 0)
                                                    for y in x["per_rank"]) for x in rs] or [0]),
                "kept_input_bytes": results.med([(r.get("memory") or {}).get("kept_input_bytes")
                                            for r in rep]),
                "verify_s": results.summarize([x.get("verify_s") for x in rs]),
                "resume_s": results.summarize([(x.get("resume") or {}).get("wall_s") for x in rs]),
                "resume_written": sorted({((x.get("resume") or {}).get("output") or {}).get(
                    "written") for x in rs}, key=str),
                "resume_finish_ms": results.med([((x.get("resume") or {}).get("timing_ms_max") or {})
                                            .get("finish") for x in rs]),
                "other_busy_cores": results.summarize([x["other_busy_cores"] for x in rs])}
    targets = []
    for cfg in cfgs:
        s, b = summary.get(f"small/{cfg}"), summary.get(f"auto/{cfg}")
        if s is None:
            continue
        fin = s["timing_ms_max"]["finish"]
        targets.append({"what": f"small {cfg}: finish step (timing_ms.max.finish, median)",
                        "value": fin, "target": f"< {FINISH_TARGET_MS:.0f} ms",
                        "pass": fin is not None and fin < FINISH_TARGET_MS})
        if b is not None:
            ms, mb = (s["marker_s"] or {}).get("median"), (b["marker_s"] or {}).get("median")
            r = round(ms / mb, 3) if ms and mb else None
            s["time_vs_auto"] = r
            targets.append({"what": f"small {cfg}: time to marker / auto's (medians)",
                            "value": r, "target": f"<= {RATIO_TARGET}",
                            "pass": r is not None and r <= RATIO_TARGET})
        targets.append({"what": f"small {cfg}: files = shards + zarr.json + marker",
                        "value": s["files"], "target": (s["shards"] or 0) + 2,
                        "pass": s["files"] == (s["shards"] or 0) + 2})
    return summary, targets


def table(res):
    lines = ["| layout / ranks×threads | shards | time to marker s | finish ms | open | scan wall "
             "| decode | write | files | dirs | peak RSS/rank MiB | kept input MiB (all ranks) | "
             "verify s | resume s (rewrote) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, s in res["summary"].items():
        m, t = s["marker_s"] or {}, s["timing_ms_max"]

        def ms(k):
            return f"{(t.get(k) or 0):.0f}" if k != "finish" else f"{(t.get(k) or 0):.1f}"
        v, r = s["verify_s"] or {}, s["resume_s"] or {}
        lines.append(
            f"| {s['layout']} {s['shard_shape']} / {s['config']} | {s['shards']} | "
            f"{m.get('median', 0):.2f} ({m.get('min', 0):.2f}–{m.get('max', 0):.2f}) | "
            f"{ms('finish')} | {ms('open')} | {ms('scan_wall')} | {ms('decode')} | {ms('write')} | "
            f"{int(s['files'] or 0)} | "
            f"{int(s['dirs'] or 0)} | {s['peak_rss_per_rank_bytes'] / MIB:.0f} | "
            f"{(s['kept_input_bytes'] or 0) / MIB:.0f} | {v.get('median', 0):.2f} | "
            f"{r.get('median', 0):.2f} ({', '.join(map(str, s['resume_written']))}) |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--shardmill", default=os.path.join(REPO, "build", "release", "jobs",
                                                         "shardmill"))
    ap.add_argument("--config", default=os.path.join(REPO, "configs", "scaling-convert.yaml"))
    ap.add_argument("--mpirun", default="mpirun")
    sm_launch.add_mpirun_args(ap)
    ap.add_argument("--data-dir", default=os.path.join(REPO, "build", "bench-data", "w8"),
                    help="where the input volume is generated (default build/bench-data/w8)")
    ap.add_argument("--work", default=None, help="outputs while measured (default data-dir/work)")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results"),
                    help="result directory (default bench/results)")
    ap.add_argument("--quick", action="store_true", help="CI smoke profile (64x128x128)")
    ap.add_argument("--repeats", type=int, default=2, help="rounds (default 2, order alternates)")
    ap.add_argument("--layouts", default="auto,small")
    ap.add_argument("--configs", default="1x2,2x1")
    ap.add_argument("--delete", type=int, default=None, help="shards deleted before the resume")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra configuration override for every run (repeatable), e.g. "
                         "limits.memory_bytes=1GiB")
    ap.add_argument("--check-values", action="store_true",
                    help="decode every output value independently (slow at 1024³)")
    ap.add_argument("--wait-idle", type=float, default=0,
                    help="before each run wait up to this many s for other load < 0.5 cores")
    ap.add_argument("--gen-jobs", type=int, default=2)
    ap.add_argument("--table", metavar="JSON", help="print the table of a result file")
    a = ap.parse_args()
    if a.table:
        with open(a.table) as f:
            print(table(json.load(f)))
        return 0
    prof = QUICK if a.quick else FULL
    a.delete = prof["delete"] if a.delete is None else a.delete
    if a.quick:
        a.repeats = 1
        a.check_values = True
    layouts = [x for x in a.layouts.split(",") if x]
    cfgs = [x for x in a.configs.split(",") if x]
    a.shardmill = os.path.abspath(a.shardmill)
    a.config = os.path.abspath(a.config)
    tmp = None
    if a.quick and a.work is None:
        tmp = a.work = tempfile.mkdtemp(prefix="w8-quick-")
        a.data_dir = a.work
    work = os.path.abspath(a.work or os.path.join(a.data_dir, "work"))
    os.makedirs(work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    tc = machine.toolchain(a.shardmill, a.mpirun)
    machine.check_release(tc)
    spawn = sm_launch.build_spawn(work)
    extra = sm_launch.mpirun_args(a.mpirun_args)
    env = {"work": work, "plain": sm_launch.Launcher("plain", spawn, a.mpirun, extra),
           "mpirun": sm_launch.Launcher("mpirun", spawn, a.mpirun, extra)}
    shape = prof["shape"]
    vol = os.path.abspath(os.path.join(a.data_dir, "vol-%d-%d-%d.zarr" % tuple(shape)))
    man = volumes.ensure_volume(vol, shape, prof["chunk"], jobs=a.gen_jobs, quiet=a.quick)
    man["path"] = vol  # the manifest keeps the path it was written at
    a.shard_shape = {}
    a.plan_shards = {}
    for lay in layouts:
        a.shard_shape[lay], a.plan_shards[lay] = plan_shard_shape(a, man, lay)
        results.log(f"w8 layout {lay}: shard {a.shard_shape[lay]}, {a.plan_shards[lay]} shards")
    stamp = results.utc_stamp()
    t0 = time.monotonic()
    order = [(lay, cfg) for lay in layouts for cfg in cfgs]
    commit = (tc.get("commit") or {}).get("head") or "unknown"
    path = results.unique_path(a.out, f"w8-{str(commit)[:7]}" + ("-quick" if a.quick else ""), ".json")
    runs = []
    a.kept = []
    a.keep_outputs = keep_outputs(a, work, man, len(order) * a.repeats)
    try:
        for rnd in range(a.repeats):
            for lay, cfg in (order if rnd % 2 == 0 else order[::-1]):
                runs.append(one_run(a, env, man, lay, cfg, rnd))
                res = result(a, tc, env, man, stamp, t0, commit, runs, layouts, cfgs)
                results.write_json(path, res)  # after every run: a stopped benchmark keeps what it has
    finally:
        for out in a.kept:
            shutil.rmtree(out, ignore_errors=True)
    res = result(a, tc, env, man, stamp, t0, commit, runs, layouts, cfgs)
    results.write_json(path, res)
    failed = [r for r in runs if not r["ok"]]
    print(table(res))
    for t in res["targets"]:
        print(f"{'PASS' if t['pass'] else 'FAIL'} {t['what']}: {t['value']} ({t['target']})")
    print(f"w8: {len(runs)} runs, {len(failed)} failed; result {path}")
    for r in failed:
        print(f"FAILED {r['tag']}: {r['problems']}")
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


def result(a, tc, env, man, stamp, t0, commit, runs, layouts, cfgs):
    summary, targets = summarize(runs, layouts, cfgs)
    res = {"benchmark": "W8 many shards (issue 11)", "driver": "bench/many_shards/w8.py",
           "argv": sys.argv, "quick": a.quick, "started_utc": stamp, "commit": commit,
           "machine": machine.machine(), "toolchain": tc,
           "launchers": {k: env[k].describe() for k in ("plain", "mpirun")},
           "config": os.path.relpath(a.config, REPO), "layouts": LAYOUTS, "sets": a.sets,
           "work_fs": machine.fs_type(env["work"]),
           "volume": {k: man[k] for k in ("path", "params", "voxels", "stored_bytes",
                                          "compression_ratio", "oracle")},
           "deleted_for_resume": a.delete, "outputs_kept": a.keep_outputs,
           "summary": summary, "targets": targets,
           "runs": runs, "elapsed_s": round(time.monotonic() - t0, 1),
           "noise_note": "shared 2-core VM: other developers' builds and tests ran at the same "
                         "time; every run records other_busy_cores"}
    res["failed_runs"] = len([r for r in runs if not r["ok"]])
    return res


if __name__ == "__main__":
    sys.exit(main())
