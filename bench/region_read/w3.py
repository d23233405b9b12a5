#!/usr/bin/python3
"""W3 region-read benchmark driver (SPEC §8 W3; STYLE B14). Run with /usr/bin/python3.

Full profile (writes bench/results/w3-<UTC timestamp>.json, never overwrites):

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/region_read/w3.py --build-dir /work/build-bench

Smoke profile for CI (1024×1024 data with the same layouts, 256² only, report in --out):

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/region_read/w3.py --quick --shardmill BUILD/jobs/shardmill \
        --data-dir BUILD/bench-data --out BUILD/bench-quick

For every (array, extent, index cache) case the driver measures
  (a) shardmill in-process `read_ns` from one `shardmill read --repeat R --stats` process
      (the first repetition is discarded; median/min/max of the rest) with its counters;
  (b) process wall time of fresh `shardmill read` processes against fresh peer processes
      (zarr-python 2.13 for v2, zarrita.js 0.7.5 for v3) in ABAB order after one warm-up
      pair, plus each peer's in-process read time alone;
and the peak RSS (wait4 ru_maxrss) of every process. Every output file of every process is
compared value by value with the formula. This is a warm-cache benchmark: the array files are
read once before its timings (unless --drop-caches). Timing targets are printed as pass/fail
but never change the exit status (benchmarks, never timed tests); a wrong value, a failed
process or a data error exits 1.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
import w3data  # noqa: E402

from shardmill_test import report_json
from shardmill_test import machine

REPO = w3data.REPO
OFFSET = (7, 11)
MIB = 1 << 20
RSS_SLACK = 16 * MIB
# SPEC §8 W3 targets (single thread): in-process read_ns median, cache on.
LATENCY_TARGETS_MS = {("v3_raw", 2048): 15.0, ("v2_gzip", 2048): 40.0, ("v3_gzip", 2048): 40.0,
                      ("v3_shard_gzip", 2048): 40.0, ("v3_index_stress", 256): 5.0}
SPEEDUP_TARGET = 10.0
# issue 12: a region read made from one thread decodes its chunks with OpenMP threads
THREAD_SPEEDUP_TARGETS = {("v2_gzip", 2048): 1.7}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_cmd(argv, env=None):
    """Text output of a command, or None if it is not available."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (p.stdout or p.stderr).strip() if p.returncode == 0 else None


SPAWN = None  # path of the compiled w3_spawn launcher (see w3_spawn.c)


def build_spawn(work):
    """Compile bench/region_read/w3_spawn.c with the system C compiler into the scratch directory."""
    global SPAWN
    exe = os.path.join(work, "w3_spawn")
    subprocess.run(["cc", "-O2", "-std=c11", "-o", exe, os.path.join(HERE, "w3_spawn.c")],
                   check=True)
    SPAWN = exe


def timed_process(argv, env, stdout_path):
    """Run argv as a fresh process through w3_spawn; return wall ns, exit code, peak RSS bytes.

    Wall time and rusage come from the launcher (CLOCK_MONOTONIC around posix_spawnp..wait4),
    so neither the driver's own RSS nor Python's Popen overhead is attributed to the process.
    """
    rusage_path = stdout_path + ".rusage"
    with open(stdout_path, "wb") as out, open(stdout_path + ".err", "wb") as err:
        t0 = time.perf_counter_ns()
        p = subprocess.run([SPAWN, rusage_path] + argv, env=env, stdout=out, stderr=err,
                           stdin=subprocess.DEVNULL)
        t1 = time.perf_counter_ns()
    with open(stdout_path + ".err", "rb") as f:
        stderr = f.read().decode(errors="replace")
    with open(stdout_path, "rb") as f:
        stdout = f.read().decode(errors="replace")
    try:
        with open(rusage_path) as f:
            ru = json.load(f)
        os.unlink(rusage_path)
    except (OSError, ValueError) as e:
        raise RuntimeError(f"w3_spawn failed ({p.returncode}): {stderr.strip()[-500:]}") from e
    rc = ru["exit_code"] if ru["exited"] else -ru["signal"]
    return {"wall_ns": ru["wall_ns"], "driver_wall_ns": t1 - t0, "rc": rc,
            "peak_rss_bytes": ru["maxrss_kib"] * 1024,
            "spawner_hwm_bytes": ru["spawner_hwm_kib"] * 1024,
            "user_s": ru["utime_us"] / 1e6, "sys_s": ru["stime_us"] / 1e6,
            "stderr": stderr.strip()[-2000:], "stdout": stdout}



def check_values(path, expect_bytes, h, w):
    """Compare an output file with the expected region; return (ok, detail)."""
    try:
        with open(path, "rb") as f:
            got = f.read()
    except OSError as e:
        return False, f"no output: {e}"
    if got == expect_bytes:
        return True, f"{h * w} values match"
    if len(got) != len(expect_bytes):
        return False, f"output is {len(got)} bytes, expected {len(expect_bytes)}"
    a = np.frombuffer(got, dtype="<u2")
    b = np.frombuffer(expect_bytes, dtype="<u2")
    bad = np.flatnonzero(a != b)
    i = int(bad[0])
    return False, (f"{bad.size} of {h * w} values differ; first at [{i // w},{i % w}] of the "
                   f"region: got {int(a[i])}, expected {int(b[i])}")


def summarize(values):
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def ms(ns):
    return None if ns is None else ns / 1e6


def fmt_ms(ns, digits=2):
    return "-" if ns is None else f"{ns / 1e6:.{digits}f}"


class Runner:
    def __init__(self, args, work, env):
        self.args = args
        self.work = work
        self.env = env
        self.seq = 0
        self.errors = []

    def drop_caches(self):
        if self.args.drop_caches:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")

    def _paths(self, tag):
        self.seq += 1
        base = os.path.join(self.work, f"{self.seq:05d}-{tag}")
        return base + ".out", base + ".stats.json", base + ".stdout"

    def engine(self, store, h, w, cache, repeat, expect, env=None):
        out, stats, stdout = self._paths("engine")
        argv = [self.args.shardmill, "read", store, "--offset", f"{OFFSET[0]},{OFFSET[1]}",
                "--shape", f"{h},{w}", "-o", out, "--repeat", str(repeat), "--stats", stats]
        if cache == "off":
            argv += ["--index-cache-bytes", "0"]
        self.drop_caches()
        res = timed_process(argv, self.env if env is None else env, stdout)
        res["argv"] = argv
        res["ok"], res["values"] = check_values(out, expect, h, w) if res["rc"] == 0 else (
            False, f"exit {res['rc']}: {res['stderr'].splitlines()[-1] if res['stderr'] else ''}")
        try:
            with open(stats) as f:
                res["stats"] = json.load(f)
        except (OSError, ValueError) as e:
            res["stats"] = None
            if res["rc"] == 0:
                res["ok"] = False
                res["values"] += f"; --stats unreadable: {e}"
        for p in (out, stats, stdout, stdout + ".err"):
            if os.path.exists(p):
                os.unlink(p)
        del res["stdout"]
        return res

    def engine_bench(self, store, n, h, w, cache, repeat, expect):
        """(a) through `shardmill run` of the read-bench job (--inprocess read-bench): one
        warm-up read then repeat - 1 timed reads of the region, with the same caches as
        `shardmill read` (no encoded-object cache; the shard-index cache on or off). The values
        are checked through the SPEC §5 checksums of the report against the formula; the stats
        have the --stats shape (read_ns of every read, the warm-up first)."""
        _out, report, stdout = self._paths("engine-bench")
        cfg = report[:-len(".stats.json")] + ".yaml"
        with open(cfg, "w") as f:
            f.write(f"job: read-bench\ninput:\n  store: {json.dumps(store)}\n"
                    f"  cache: {{enabled: false}}\n"
                    f"  index_cache: {{max_entries: {0 if cache == 'off' else 64}}}\n"
                    f"roi: {{offset: [{OFFSET[0]}, {OFFSET[1]}], shape: [{h}, {w}]}}\n"
                    f"read_bench: {{repeats: {repeat - 1}, warmup: 1}}\nprogress: false\n")
        argv = [self.args.shardmill, "run", cfg, "--report", report]
        self.drop_caches()
        res = timed_process(argv, self.env, stdout)
        res["argv"] = argv
        res["stats"], res["ok"] = None, False
        res["values"] = f"exit {res['rc']}: {res['stderr'][-300:]}"
        if res["rc"] == 0:
            try:
                with open(report) as f:
                    rep = report_json.with_int_checksums(json.load(f))
                cs = rep["read_bench"]["cases"][0]
                io = cs["io"]
                # the warm-up read's time is not in the report: a placeholder keeps --stats' shape
                res["stats"] = {"read_ns": [None] + cs["read_ns"]["samples"],
                                "requests": io["requests"], "bytes": io["bytes"],
                                "index_cache": io["index_cache"], "chunks": cs["chunks"],
                                "peak_rss_bytes": rep["memory"]["peak_rss_bytes"]}
                v = np.frombuffer(expect, dtype="<u2").astype(np.uint64).reshape(h, w)
                idx = ((np.arange(h, dtype=np.uint64)[:, None] + np.uint64(OFFSET[0]))
                       * np.uint64(n) + np.arange(w, dtype=np.uint64)[None, :]
                       + np.uint64(OFFSET[1]))
                with np.errstate(over="ignore"):
                    want = (int(v.sum()), int((v * (idx + np.uint64(1))).sum(dtype=np.uint64)))
                got = (cs["checksum"], cs["weighted_checksum"])
                res["ok"] = got == want
                res["values"] = (f"{h * w} values: checksums match" if res["ok"] else
                                 f"checksums {got} differ from the formula's {want}")
            except (OSError, ValueError, KeyError, IndexError) as e:
                res["values"] = f"report unreadable: {e}"
        for p in (report, cfg, stdout, stdout + ".err"):
            if os.path.exists(p):
                os.unlink(p)
        del res["stdout"]
        return res

    def peer(self, peer, store, h, w, expect):
        out, _stats, stdout = self._paths("peer")
        off, shp = f"{OFFSET[0]},{OFFSET[1]}", f"{h},{w}"
        if peer == "zarr-python":
            argv = ["/usr/bin/python3", os.path.join(HERE, "read_zarr2.py"), store, off, shp, out]
        else:
            argv = [self.args.node, os.path.join(HERE, "read_zarrita.mjs"), store, off, shp, out]
        self.drop_caches()
        res = timed_process(argv, self.env, stdout)
        res["argv"] = argv
        res["ok"], res["values"] = check_values(out, expect, h, w) if res["rc"] == 0 else (
            False, f"exit {res['rc']}: {res['stderr'][-300:]}")
        try:
            info = json.loads(res["stdout"].strip().splitlines()[-1])
        except (ValueError, IndexError):
            info = {}
        res["inproc_read_ns"] = info.get("read_ns")
        res["inproc_open_ns"] = info.get("open_ns")
        res["import_ns"] = info.get("import_ns")
        for p in (out, stdout, stdout + ".err"):
            if os.path.exists(p):
                os.unlink(p)
        del res["stdout"]
        return res


def counters_of(stats):
    if not stats:
        return None
    return {"requests": stats.get("requests"), "bytes": stats.get("bytes"),
            "index_cache": stats.get("index_cache"), "chunks": stats.get("chunks"),
            "peak_rss_bytes": stats.get("peak_rss_bytes")}


def counter_checks(spec, exp, cache, stats, repeat=1):
    """Compare a process's counters with what the layout implies.

    Exact: payload bytes (only the touched chunks, each once per read). Payload requests lie
    between the byte-adjacent runs (an engine merging neighbours) and the chunks touched.
    Index (sharded only): with the cache on, each touched shard's index is read once per
    process; with it off, at least once per shard per read and at most once per inner chunk.
    For a --repeat R process the per-read numbers scale by R, except cached index reads.
    """
    if not stats:
        return {"evaluated": False}
    req = stats.get("requests") or {}
    byt = stats.get("bytes") or {}
    c = {"evaluated": True, "repeat": repeat,
         "payload_bytes": byt.get("payload"),
         "expected_payload_bytes": repeat * exp["payload_bytes"],
         "payload_requests": req.get("payload"),
         "expected_payload_requests": [repeat * exp["adjacent_runs"],
                                       repeat * exp["chunks_touched"]],
         "metadata_requests": req.get("metadata"), "metadata_bytes": byt.get("metadata"),
         "chunks": stats.get("chunks")}
    c["payload_bytes_ok"] = c["payload_bytes"] == c["expected_payload_bytes"]
    lo, hi = c["expected_payload_requests"]
    pr = c["payload_requests"]
    c["payload_requests_ok"] = pr is not None and lo <= pr <= hi
    if spec["sharded"]:
        ir = req.get("index")
        c["index_requests"], c["index_bytes"] = ir, byt.get("index")
        if cache == "on":
            c["expected_index_requests"] = [exp["shards_touched"], exp["shards_touched"]]
        else:
            c["expected_index_requests"] = [repeat * exp["shards_touched"],
                                            repeat * exp["chunks_touched"]]
        lo, hi = c["expected_index_requests"]
        c["index_requests_ok"] = ir is not None and lo <= ir <= hi
        c["expected_index_bytes"] = None if ir is None else ir * exp["index_len"]
        c["index_bytes_ok"] = ir is not None and byt.get("index") == c["expected_index_bytes"]
        ic = stats.get("index_cache") or {}
        c["index_cache"] = ic
        if cache == "off":
            c["index_cache_unused"] = {"hits": ic.get("hits"), "peak_bytes": ic.get("peak_bytes")}
            c["expected_index_cache_unused"] = {"hits": 0, "peak_bytes": 0}
            c["index_cache_unused_ok"] = not ic.get("hits") and not ic.get("peak_bytes")
    ok_keys = [k for k in c if k.endswith("_ok")]
    c["all_ok"] = all(c[k] for k in ok_keys)
    c["failed"] = [k for k in ok_keys if not c[k]]
    return c


def run_case(runner, args, spec, name, path, h, w, cache):
    expect = w3data.formula(OFFSET[0], OFFSET[1], h, w).astype("<u2").tobytes()
    exp = w3data.expectations(spec, path, OFFSET[0], OFFSET[1], h, w)
    region_bytes = h * w * 2
    case = {"array": name, "extent": [h, w], "offset": list(OFFSET), "index_cache": cache,
            "region_bytes": region_bytes, "peer": spec["peer"], "expected": exp,
            "errors": []}
    if args.wait_idle > 0:
        samples = machine.wait_idle(args.wait_idle, 0.6)
    else:
        samples = [machine.busy_cores(0.2)]
    case["machine_busy_cpus_before"] = samples[-1]
    case["idle_wait_samples"] = len(samples)
    case["loadavg_before"] = os.getloadavg()
    log(f"w3: case {name} {h}x{w} index-cache={cache} (other load: {samples[-1]} busy CPUs)")
    rss_all = []

    def note_engine(res, what):
        if res["rc"] != 0 or not res["ok"]:
            case["errors"].append(f"{what}: {res['values']}")
        else:
            rss_all.append(res["peak_rss_bytes"])

    def note_peer(res, what):
        if res["rc"] != 0 or not res["ok"]:
            case["errors"].append(f"{what} ({spec['peer']}): {res['values']}")

    engine_on = not args.peers_only
    peer_on = not args.engine_only
    # Warm-up pair (discarded from the statistics, values still checked).
    warm = {}
    if engine_on:
        warm["engine"] = runner.engine(path, h, w, cache, 1, expect)
        note_engine(warm["engine"], "warm-up engine")
    if peer_on:
        warm["peer"] = runner.peer(spec["peer"], path, h, w, expect)
        note_peer(warm["peer"], "warm-up peer")
    case["warmup"] = warm
    engine_works = engine_on and warm["engine"]["rc"] == 0

    # (a) in-process read_ns from one --repeat process.
    if engine_works:
        if args.inprocess == "read-bench":
            rep = runner.engine_bench(path, spec["n"], h, w, cache, args.reps + 1, expect)
        else:
            rep = runner.engine(path, h, w, cache, args.reps + 1, expect)
        note_engine(rep, "repeat engine")
        st = rep.get("stats") or {}
        read_ns = st.get("read_ns") or []
        kept = read_ns[1:]
        if len(read_ns) != args.reps + 1:
            case["errors"].append(f"--stats read_ns has {len(read_ns)} entries, "
                                  f"expected {args.reps + 1}")
        case["inprocess_counter_checks"] = counter_checks(spec, exp, cache, rep.get("stats"),
                                                          repeat=args.reps + 1)
        case["inprocess"] = {"repeat": args.reps + 1, "read_ns_all": read_ns,
                             "read_ns_kept": summarize(kept), "counters": counters_of(st),
                             "process_wall_ns": rep["wall_ns"],
                             "peak_rss_bytes": rep["peak_rss_bytes"], "argv": rep["argv"]}

    # (a') threads A/B: read_ns of --repeat processes with OMP_NUM_THREADS = each of
    # --thread-compare, alternated (1,2,1,2,...) for --thread-rounds rounds; kept reads pooled.
    if engine_works and args.thread_compare:
        tc = {"threads": args.thread_compare, "rounds": args.thread_rounds, "order": [],
              "read_ns_kept": {}, "summary": {}}
        for _ in range(args.thread_rounds):
            for t in args.thread_compare:
                env = dict(runner.env)
                env["OMP_NUM_THREADS"] = str(t)
                r = runner.engine(path, h, w, cache, args.reps + 1, expect, env=env)
                note_engine(r, f"threads {t} engine")
                tc["order"].append(t)
                kept = ((r.get("stats") or {}).get("read_ns") or [])[1:]
                tc["read_ns_kept"].setdefault(str(t), []).extend(kept)
        for t, v in tc["read_ns_kept"].items():
            tc["summary"][t] = summarize(v)
        base = tc["summary"].get(str(args.thread_compare[0]))
        tc["speedup_median"] = {t: (base["median"] / v["median"]) if base and v else None
                                for t, v in tc["summary"].items()}
        case["threads_ab"] = tc

    # (b) ABAB process wall.
    order, eng, peer = [], [], []
    if engine_works or peer_on:
        for i in range(args.pairs):
            if engine_works:
                r = runner.engine(path, h, w, cache, 1, expect)
                note_engine(r, f"pair {i} engine")
                eng.append(r)
                order.append("A")
            if peer_on:
                r = runner.peer(spec["peer"], path, h, w, expect)
                note_peer(r, f"pair {i} peer")
                peer.append(r)
                order.append("B")
    good_e = [r for r in eng if r["ok"]]
    good_p = [r for r in peer if r["ok"]]
    proc = {"order": "".join(order), "pairs": args.pairs,
            "engine": {"wall_ns": [r["wall_ns"] for r in eng],
                       "peak_rss_bytes": [r["peak_rss_bytes"] for r in eng],
                       "read_ns": [(r.get("stats") or {}).get("read_ns", [None])[0] for r in eng],
                       "stats_peak_rss_bytes": [(r.get("stats") or {}).get("peak_rss_bytes")
                                                for r in eng],
                       "user_s": [r["user_s"] for r in eng], "sys_s": [r["sys_s"] for r in eng],
                       "wall": summarize([r["wall_ns"] for r in good_e])},
            "peer": {"name": spec["peer"], "argv": peer[0]["argv"] if peer else None,
                     "wall_ns": [r["wall_ns"] for r in peer],
                     "peak_rss_bytes": [r["peak_rss_bytes"] for r in peer],
                     "inproc_read_ns": [r["inproc_read_ns"] for r in peer],
                     "inproc_open_ns": [r["inproc_open_ns"] for r in peer],
                     "import_ns": [r["import_ns"] for r in peer],
                     "wall": summarize([r["wall_ns"] for r in good_p]),
                     "inproc_read": summarize([r["inproc_read_ns"] for r in good_p
                                               if r["inproc_read_ns"] is not None])}}
    if eng:
        proc["engine"]["argv"] = eng[0]["argv"]
    ew, pw = proc["engine"]["wall"], proc["peer"]["wall"]
    proc["speedup_wall_median"] = (pw["median"] / ew["median"]) if ew and pw else None
    pr = proc["peer"]["inproc_read"]
    ip = (case.get("inprocess") or {}).get("read_ns_kept")
    proc["speedup_inproc_read_median"] = (pr["median"] / ip["median"]) if ip and pr else None
    case["process"] = proc
    fresh = [r for r in eng if r.get("stats")]
    case["counters_fresh"] = counters_of(fresh[0]["stats"]) if fresh else None
    case["counter_checks"] = counter_checks(spec, exp, cache, fresh[0]["stats"] if fresh else None)
    case["engine_peak_rss_max_bytes"] = max(rss_all) if rss_all else None
    case["rss_limit_bytes"] = region_bytes + RSS_SLACK
    case["values_ok"] = not case["errors"]
    return case


def one_thread_read_ns(c, args):
    """The 1-thread in-process read_ns summary of a case: step (a) when it ran with one thread,
    else the 1-thread side of the threads A/B (--thread-compare)."""
    if args.threads == 1:
        return (c.get("inprocess") or {}).get("read_ns_kept")
    return ((c.get("threads_ab") or {}).get("summary") or {}).get("1")


def evaluate_targets(cases, args):
    out = []
    for (name, ext), limit in THREAD_SPEEDUP_TARGETS.items():
        c = next((c for c in cases if c["array"] == name and c["extent"][0] == ext
                  and c["index_cache"] == "on"), None)
        t = {"target": f"{name} {ext}² in-process read_ns with 2 threads ≥ {limit:g}× faster "
                       f"than with 1 (medians, alternated processes)", "limit_ratio": limit}
        sp = ((c or {}).get("threads_ab") or {}).get("speedup_median") or {}
        if c is None or args.peers_only:
            t.update(status="not run")
        elif sp.get("2") is None or "1" not in (c["threads_ab"]["summary"] or {}):
            t.update(status="not evaluated (needs --thread-compare 1,2)")
        else:
            t.update(measured_ratio=round(sp["2"], 2),
                     status="PASS" if sp["2"] >= limit else "FAIL")
        out.append(t)
    for (name, ext), limit in LATENCY_TARGETS_MS.items():
        c = next((c for c in cases if c["array"] == name and c["extent"][0] == ext
                  and c["index_cache"] == "on"), None)
        t = {"target": f"{name} {ext}² in-process read_ns median ≤ {limit:g} ms (1 thread, "
                       f"index cache on)", "limit_ms": limit}
        one = one_thread_read_ns(c, args) if c is not None else None
        if c is None or args.peers_only:
            t.update(status="not run")
        elif one is None and args.threads != 1:
            t.update(status="not evaluated (threads != 1 and no 1-thread A/B)")
        elif not one:
            t.update(status="FAIL (no measurement)")
        else:
            m = ms(one["median"])
            t.update(measured_ms=round(m, 3), status="PASS" if m <= limit else "FAIL")
        out.append(t)
    for c in cases:
        label = f"{c['array']} {c['extent'][0]}² cache {c['index_cache']}"
        s = c["process"]["speedup_wall_median"]
        t = {"target": f"{label}: process wall ≥ {SPEEDUP_TARGET:g}× faster than "
                       f"{c['peer']} (median, ABAB)"}
        if s is None:
            t.update(status="FAIL (no measurement)" if not args.peers_only else "not run")
        else:
            t.update(measured_ratio=round(s, 2), status="PASS" if s >= SPEEDUP_TARGET else "FAIL")
        out.append(t)
    for c in cases:
        label = f"{c['array']} {c['extent'][0]}² cache {c['index_cache']}"
        rss = c["engine_peak_rss_max_bytes"]
        t = {"target": f"{label}: engine peak RSS ≤ region + 16 MiB "
                       f"({c['rss_limit_bytes'] / MIB:.1f} MiB)",
             "limit_bytes": c["rss_limit_bytes"]}
        if rss is None:
            t.update(status="FAIL (no measurement)" if not args.peers_only else "not run")
        else:
            t.update(measured_bytes=rss, status="PASS" if rss <= c["rss_limit_bytes"] else "FAIL")
        out.append(t)
    return out


def provenance(args):
    git = ["git", "-C", REPO, "--no-optional-locks"]
    head = run_cmd(git + ["rev-parse", "HEAD"])
    status = run_cmd(git + ["status", "--porcelain", "--untracked-files=no"])
    status_all = run_cmd(git + ["status", "--porcelain"])
    commit = {"head": head, "dirty": bool(status) if status is not None else None,
              "untracked": bool(status_all) if status_all is not None else None}
    if head is None:
        commit["note"] = "git rev-parse HEAD failed (no commit yet?)"
    shm = os.path.abspath(args.shardmill)
    binary = {"path": shm, "exists": os.path.exists(shm)}
    if binary["exists"]:
        with open(shm, "rb") as f:
            binary["sha256"] = hashlib.sha256(f.read()).hexdigest()
        binary["version"] = run_cmd([shm, "--version"])
        binary["mtime_utc"] = datetime.datetime.fromtimestamp(
            os.path.getmtime(shm), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    d = os.path.dirname(shm)
    while d and d != "/":
        cache = os.path.join(d, "CMakeCache.txt")
        if os.path.exists(cache):
            binary["build_dir"] = d
            with open(cache) as f:
                for line in f:
                    for key in ("CMAKE_BUILD_TYPE", "CMAKE_C_FLAGS", "CMAKE_C_FLAGS_RELEASE",
                                "CMAKE_C_COMPILER", "SM_WITH_OPENMP", "SM_WITH_MPI", "SM_WERROR",
                                "SM_SANITIZE"):
                        if line.startswith(key + ":"):
                            binary[key] = line.split("=", 1)[1].strip()
            break
        d = os.path.dirname(d)
    cpu = None
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = None
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) * 1024
    import numcodecs
    import zarr
    try:
        with open(os.path.join(w3data._node_modules(), "zarrita", "package.json")) as f:
            zarrita_v = json.load(f)["version"]
    except OSError:
        zarrita_v = None
    toolchain = {"cc": (run_cmd(["cc", "--version"]) or "").splitlines()[:1],
                 "cmake": (run_cmd(["cmake", "--version"]) or "").splitlines()[:1],
                 "node": run_cmd([args.node, "--version"]), "python": sys.version.split()[0],
                 "python_executable": sys.executable, "numpy": np.__version__,
                 "zarr": zarr.__version__, "numcodecs": numcodecs.__version__,
                 "zarrita": zarrita_v, "perf": run_cmd(["perf", "--version"])}
    host = {"nproc": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
               "cpu_model": cpu, "mem_total_bytes": mem, "kernel": platform.release(),
               "loadavg_start": os.getloadavg()}
    return commit, binary, toolchain, host





def default_work_base():
    """tmpfs when available: the outputs of engine and peers alike go there, so the write of
    the region (12-19 ms per 8 MiB on this VM's ext4) does not swamp the reads."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        st = os.statvfs(shm)
        if st.f_bavail * st.f_frsize > 256 * MIB:
            return shm
    return tempfile.gettempdir()


def harness_digest():
    """SHA-256 of each bench/region_read source, so a report names the harness that produced it."""
    out = {}
    for f in sorted(os.listdir(HERE)):
        if f.endswith((".py", ".mjs", ".c")):
            with open(os.path.join(HERE, f), "rb") as fh:
                out[f] = hashlib.sha256(fh.read()).hexdigest()
    return out


def write_report(report, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for k in range(1000):
        name = f"w3-{stamp}.json" if k == 0 else f"w3-{stamp}-{k}.json"
        path = os.path.join(out_dir, name)
        try:
            with open(path, "x") as f:
                json.dump(report, f, indent=1)
                f.write("\n")
            return path
        except FileExistsError:
            continue
    raise RuntimeError("could not find a fresh report name")


def counters_flag(c):
    checks = [c.get("counter_checks") or {}, c.get("inprocess_counter_checks") or {}]
    if not any(k.get("evaluated") for k in checks):
        return "-"
    failed = [f for k in checks for f in k.get("failed", [])]
    return "ok" if not failed else "WARN"


def counter_warnings(cases):
    out = []
    for c in cases:
        for what in ("counter_checks", "inprocess_counter_checks"):
            k = c.get(what) or {}
            for f in k.get("failed", []):
                key = f[:-3]
                out.append(f"{c['array']} {c['extent'][0]}² cache {c['index_cache']} "
                           f"({'fresh' if what == 'counter_checks' else 'repeat'} process): "
                           f"{key} = {k.get(key)}, expected {k.get('expected_' + key, '-')}")
    return out


def print_table(cases, targets):
    hdr = ("array", "extent", "cache", "read_ns med/min/max ms", "wall A ms", "wall B ms",
           "B read ms", "ratio", "A RSS MiB", "B RSS MiB", "req m/p/i", "idx hit/miss", "counters",
           "values", "busy")
    rows = []
    for c in cases:
        ip = (c.get("inprocess") or {}).get("read_ns_kept")
        pe, pp = c["process"]["engine"], c["process"]["peer"]
        cnt = c.get("counters_fresh") or {}
        req = cnt.get("requests") or {}
        ic = cnt.get("index_cache") or {}
        rows.append((c["array"], f"{c['extent'][0]}²", c["index_cache"],
                     f"{fmt_ms(ip['median'], 3)}/{fmt_ms(ip['min'], 3)}/{fmt_ms(ip['max'], 3)}"
                     if ip else "-",
                     fmt_ms(pe["wall"]["median"]) if pe["wall"] else "-",
                     fmt_ms(pp["wall"]["median"]) if pp["wall"] else "-",
                     fmt_ms(pp["inproc_read"]["median"]) if pp["inproc_read"] else "-",
                     f"{c['process']['speedup_wall_median']:.1f}×"
                     if c["process"]["speedup_wall_median"] else "-",
                     f"{c['engine_peak_rss_max_bytes'] / MIB:.1f}"
                     if c["engine_peak_rss_max_bytes"] else "-",
                     f"{max(pp['peak_rss_bytes']) / MIB:.1f}" if pp["peak_rss_bytes"] else "-",
                     f"{req.get('metadata', '-')}/{req.get('payload', '-')}/{req.get('index', '-')}"
                     if req else "-",
                     f"{ic.get('hits', '-')}/{ic.get('misses', '-')}" if ic else "-",
                     counters_flag(c), "ok" if c["values_ok"] else "ERR",
                     f"{c.get('machine_busy_cpus_before', '-')}"))
    widths = [max(len(str(r[i])) for r in rows + [hdr]) for i in range(len(hdr))]
    print("  ".join(h.ljust(wd) for h, wd in zip(hdr, widths)))
    for r in rows:
        print("  ".join(str(v).ljust(wd) for v, wd in zip(r, widths)))
    print("A = fresh `shardmill read` process, B = fresh peer process (ABAB medians); "
          "ratio = B/A wall; busy = CPUs used by other work just before the case")
    for c in cases:
        sm = (c.get("threads_ab") or {}).get("summary") or {}
        if sm:
            print(f"threads A/B {c['array']} {c['extent'][0]}² cache {c['index_cache']}: "
                  + ", ".join(f"{t} thr {fmt_ms(v['median'], 3)} ms" for t, v in sm.items()
                              if v))
    print()
    for t in targets:
        m = t.get("measured_ms", t.get("measured_ratio"))
        if "measured_bytes" in t:
            m = f"{t['measured_bytes'] / MIB:.2f} MiB"
        print(f"[{t['status']}] {t['target']}" + (f" — measured {m}" if m is not None else ""))


def main(argv=None):
    p = argparse.ArgumentParser(description="SPEC §8 W3 region-read benchmark",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__)
    p.add_argument("--build-dir", default=os.environ.get("SHARDMILL_BUILD_DIR",
                                                         os.path.join(REPO, "build")),
                   help="CMake build tree (default $SHARDMILL_BUILD_DIR or REPO/build)")
    p.add_argument("--shardmill", help="binary (default BUILD_DIR/jobs/shardmill)")
    p.add_argument("--data-dir", help="data root outside git (default BUILD_DIR/bench-data/w3)")
    p.add_argument("--out",
                   help="report directory (default bench/results; --quick: a new temp dir)")
    p.add_argument("--quick", action="store_true",
                   help="CI smoke profile: 1024² arrays, 256² reads, 2 repetitions, 1 pair")
    p.add_argument("--reps", type=int, help="kept in-process repetitions after the discarded "
                                            "first (default 10; quick 2)")
    p.add_argument("--pairs", type=int, help="ABAB pairs after the warm-up (default 7; quick 1)")
    p.add_argument("--threads", type=int, default=0,
                   help="OMP_NUM_THREADS of every engine process (default 0: unset, the "
                        "engine's default thread count, all cores)")
    p.add_argument("--thread-compare", default=None,
                   help="comma list of thread counts, e.g. 1,2: per case, alternated "
                        "`read --repeat` processes with each OMP_NUM_THREADS (default 1,2; "
                        "quick: none; 'none' to skip)")
    p.add_argument("--thread-rounds", type=int, default=3,
                   help="rounds of the thread A/B (default 3)")
    p.add_argument("--arrays", help="comma list of arrays (default all)")
    p.add_argument("--extents", help="comma list of extents (default 256,1024,2048; quick 256)")
    p.add_argument("--cache", choices=["both", "on", "off"], default="both",
                   help="index-cache modes for sharded arrays (default both)")
    p.add_argument("--inprocess", choices=["read", "read-bench"], default="read",
                   help="how (a) measures in-process read_ns: one `shardmill read --repeat` "
                        "process (default), or `shardmill run` of the read-bench job (values "
                        "checked by their SPEC §5 checksums)")
    p.add_argument("--engine-only", action="store_true", help="skip the peers")
    p.add_argument("--peers-only", action="store_true", help="skip shardmill (validate peers)")
    p.add_argument("--drop-caches", action="store_true",
                   help="cold cache: sync + drop_caches=3 before every timed process (root)")
    p.add_argument("--wait-idle", type=float, default=0, metavar="S",
                   help="before each case wait up to S seconds for the machine to be idle "
                        "(< 0.6 busy CPUs over 0.5 s); the load is recorded either way")
    p.add_argument("--node", default=shutil.which("node") or "node")
    p.add_argument("--work-dir", help="where outputs of engine and peers are written "
                                      "(default /dev/shm if writable, else $TMPDIR)")
    p.add_argument("--keep-work", action="store_true", help="keep the scratch directory")
    args = p.parse_args(argv)

    args.shardmill = args.shardmill or os.path.join(args.build_dir, "jobs", "shardmill")
    data_root = args.data_dir or os.path.join(args.build_dir, "bench-data", "w3")
    n = 1024 if args.quick else 4096
    args.reps = args.reps if args.reps is not None else (2 if args.quick else 10)
    args.pairs = args.pairs if args.pairs is not None else (1 if args.quick else 7)
    if args.reps < 1 or args.pairs < 1:
        p.error("--reps and --pairs must be ≥ 1")
    extents = ([int(x) for x in args.extents.split(",")] if args.extents
               else ([256] if args.quick else [256, 1024, 2048]))
    specs = w3data.array_specs(n)
    names = args.arrays.split(",") if args.arrays else list(specs)
    for nm in names:
        if nm not in specs:
            p.error(f"unknown array {nm}; known: {', '.join(specs)}")
    if args.quick:
        out_dir = args.out or tempfile.mkdtemp(prefix="w3-quick-")
    else:
        out_dir = args.out or os.path.join(REPO, "bench", "results")
    if not args.peers_only and not os.path.exists(args.shardmill):
        log(f"w3: error: {args.shardmill}: no such binary (build the `shardmill` target)")
        return 1

    t_start = time.monotonic()
    w3data.ensure_node_modules(log)
    data = w3data.ensure_data(data_root, n, names, log)
    t_data = time.monotonic() - t_start

    tcmp = args.thread_compare or ("none" if args.quick else "1,2")
    args.thread_compare = [] if tcmp == "none" else [int(t) for t in tcmp.split(",")]
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    if args.threads > 0:
        env["OMP_NUM_THREADS"] = str(args.threads)
    env["SM_W3_NODE_MODULES"] = w3data._node_modules()
    work = tempfile.mkdtemp(prefix="w3-work-", dir=args.work_dir or default_work_base())
    build_spawn(work)
    runner = Runner(args, work, env)
    commit, binary, toolchain, host = provenance(args)

    cases = []
    for nm in names:
        spec = specs[nm]
        path = data[nm]["path"]
        warmed = None if args.drop_caches else w3data.warm_page_cache(path)
        for ext in extents:
            if nm == "v3_index_stress" and ext != 256:
                continue
            if OFFSET[0] + ext > spec["n"] or OFFSET[1] + ext > spec["n"]:
                continue
            modes = (["on", "off"] if args.cache == "both" else [args.cache]) \
                if spec["sharded"] else ["on"]
            for cache in modes:
                c = run_case(runner, args, spec, nm, path, ext, ext, cache)
                c["page_cache_warmed_bytes"] = warmed
                cases.append(c)
    if not args.keep_work:
        shutil.rmtree(work, ignore_errors=True)
    targets = evaluate_targets(cases, args)
    host["loadavg_end"] = os.getloadavg()
    errors = [f"{c['array']} {c['extent'][0]}² cache {c['index_cache']}: {e}"
              for c in cases for e in c["errors"]]
    warnings = counter_warnings(cases)
    report = {
        "schema": "shardmill-bench-w3/1",
        "workload": "W3 region reads (SPEC §8)",
        "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": shlex.join([sys.executable] + sys.argv),
        "cwd": os.getcwd(),
        "profile": "quick" if args.quick else "full",
        "cache_state": ("cold: sync + drop_caches=3 before every timed process"
                        if args.drop_caches else
                        "warm: every array file read once before its timings, plus a "
                        "discarded warm-up pair per case"),
        "params": {"n": n, "offset": list(OFFSET), "extents": extents, "arrays": names,
                   "reps_kept": args.reps, "repeat": args.reps + 1, "pairs": args.pairs,
                   "wait_idle_s": args.wait_idle,
                   "threads": args.threads or "default (OMP_NUM_THREADS unset)",
                   "thread_compare": args.thread_compare, "thread_rounds": args.thread_rounds,
                   "cache_modes": args.cache,
                   "engine": not args.peers_only, "peers": not args.engine_only},
        "commit": commit, "harness_sha256": harness_digest(), "shardmill": binary, "toolchain": toolchain, "machine": host,
        "scratch": {"dir": work, "fs_type": machine.fs_type(work)["type"],
                    "note": "every engine and peer process writes its region output here"},
        "env": {k: env.get(k) for k in ("OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES",
                                        "OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
                                        "UV_THREADPOOL_SIZE")},
        "data": {"root": os.path.abspath(data_root), "generation_or_check_s": round(t_data, 2),
                 "arrays": data},
        "cases": cases,
        "targets": targets,
        "errors": errors,
        "counter_warnings": warnings,
        "ok": not errors,
        "elapsed_s": round(time.monotonic() - t_start, 2),
    }
    path = write_report(report, out_dir)
    print_table(cases, targets)
    print()
    print(f"report: {path}")
    if errors:
        print(f"w3: {len(errors)} error(s):")
        for e in errors[:20]:
            print(f"  {e}")
    if warnings:
        print(f"w3: {len(warnings)} counter warning(s) (reported, not fatal):")
        for wmsg in warnings[:20]:
            print(f"  {wmsg}")
    print(f"w3: {'ok' if not errors else 'FAILED'} in {report['elapsed_s']} s")
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
