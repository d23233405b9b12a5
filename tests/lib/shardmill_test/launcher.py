"""Launching and checking one conversion of the benchmarks (issue 5) and scaling studies (SPEC §8
W5), shared by scaling/ and bench/ through `shardmill_test.launcher`.

- Launcher: one `shardmill run` as a fresh process, either plain (one rank, no MPI_Init: SPEC §1)
  or under `mpirun -np R --oversubscribe --bind-to none`. Every rank is started through
  bench/region_read/w3_spawn.c, so each rank's exit status, wall time and wait4 peak RSS are
  recorded per rank, independently of the report (which has the maximum VmHWM over ranks).
- run_convert(): launches one conversion, measures process wall time, the time from launch to
  the completion marker's mtime (the figure the speedup targets use), the CPU time other work
  took on the machine meanwhile (noise), optionally samples every rank's VmRSS (phase of the
  memory peak); then checks the report against the generator's NumPy oracle, runs
  `shardmill verify`, optionally decodes the whole output independently (check_output_values)
  and deletes it.

What the machine and the build are: shardmill_test.machine; result files and summaries:
shardmill_test.results.
"""

import datetime
import hashlib
import json
import multiprocessing
import os
import resource
import shlex
import shutil
import subprocess
import threading
import time

import numpy as np

from shardmill_test import report_json
from shardmill_test.machine import HZ, REPO, busy_cores, cpu_jiffies
from shardmill_test.ranks import session_env

MIB = 1 << 20
MARKER = "shardmill.complete.json"
U64 = np.uint64


# ---- launching ----

def rdma_devices():
    """The RDMA and PSM devices of this host (InfiniBand, RoCE, Omni-Path, TrueScale)."""
    found = []
    try:
        found += sorted(os.listdir("/sys/class/infiniband"))
    except OSError:
        pass
    for dev in ("/dev/hfi1_0", "/dev/ipath", "/dev/ipath0"):
        if os.path.exists(dev):
            found.append(dev)
    return found


def default_mpirun_args():
    """`--mca pml ob1` on a host without RDMA or PSM devices, else nothing.

    Open MPI 4.1 (Debian's build has cm with the ofi, psm and psm2 MTLs) probes every PML in
    MPI_Init and on such a host ends up with ob1 anyway (`--mca pml_base_verbose 10`); the probe
    of cm and its MTLs costs ~210 ms of each rank's MPI_Init here (265 ms against 52 ms with ob1
    named), the same on every run, work that neither scales nor changes what is measured.
    """
    return [] if rdma_devices() else ["--mca", "pml", "ob1"]


def add_mpirun_args(ap):
    """The drivers' --mpirun-args option (read with mpirun_args())."""
    ap.add_argument("--mpirun-args", default="auto",
                    help="extra mpirun words; auto (default): --mca pml ob1 on a host without "
                         "RDMA/PSM devices (skips Open MPI's ~0.2 s probe of the cm PML), else none")


def mpirun_args(text):
    """The --mpirun-args option of the drivers: "auto" (default_mpirun_args) or mpirun words."""
    return default_mpirun_args() if text == "auto" else shlex.split(text)


class Launcher:
    """Builds the argv and environment of one run with R ranks × T threads.

    kind "plain": one process, no launcher environment (SPEC §1: no MPI_Init), only for R = 1.
    kind "mpirun": `mpirun --oversubscribe --bind-to none [EXTRA] -np R`. Binding is off: Open
    MPI binds to cores by default for np <= 2, which would put all threads of a rank on one core.
    EXTRA (extra_mpirun) defaults to default_mpirun_args().
    Every rank runs as `w3_spawn RESBASE.<rank> shardmill ...` (per-rank wait4 RSS and status).
    """

    def __init__(self, kind, spawn, mpirun="mpirun", extra_mpirun=None, omp_wait_policy=None):
        self.kind = kind
        self.spawn = spawn
        self.mpirun = mpirun
        self.extra = default_mpirun_args() if extra_mpirun is None else list(extra_mpirun)
        self.wait_policy = omp_wait_policy

    def describe(self):
        return {"kind": self.kind, "mpirun": self.mpirun if self.kind == "mpirun" else None,
                "mpirun_args": ["--oversubscribe", "--bind-to", "none"] + self.extra,
                "per_rank_spawner": "bench/region_read/w3_spawn.c", "OMP_WAIT_POLICY": self.wait_policy}

    def command(self, ranks, threads, shardmill_argv, resbase):
        env = dict(os.environ)
        env["OMP_NUM_THREADS"] = str(threads)
        if self.wait_policy:
            env["OMP_WAIT_POLICY"] = self.wait_policy
        if self.kind == "plain" and ranks == 1:
            for k in list(env):
                if k.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_")):
                    del env[k]
            return [self.spawn, resbase + ".0"] + shardmill_argv, env
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
        session_env(env)  # a session directory of this launch's own (issue 32 item 20)
        if env.get("LSAN_OPTIONS"):  # ASan smoke runs: as tests/mpi/test_mpi.py mpi_env()
            env["LSAN_OPTIONS"] += ":fast_unwind_on_malloc=0"
        xs = ["-x", "OMP_NUM_THREADS"] + (["-x", "OMP_WAIT_POLICY"] if self.wait_policy else [])
        wrap = 'sp=$1; rb=$2; shift 2; exec "$sp" "$rb.${OMPI_COMM_WORLD_RANK:-0}" "$@"'
        argv = [self.mpirun, "--oversubscribe", "--bind-to", "none"] + self.extra + xs + \
               ["-np", str(ranks), "sh", "-c", wrap, "sh", self.spawn, resbase] + shardmill_argv
        return argv, env


def build_spawn(work):
    exe = os.path.join(work, "w3_spawn")
    subprocess.run(["cc", "-O2", "-std=c11", "-o", exe,
                    os.path.join(REPO, "bench", "region_read", "w3_spawn.c")], check=True)
    return exe


class RssSampler(threading.Thread):
    """Samples VmRSS of every process named shardmill whose command line holds `tag`."""

    def __init__(self, tag, period_s=0.1):
        super().__init__(daemon=True)
        self.tag = tag.encode()
        self.period = period_s
        self.stop_ev = threading.Event()
        self.samples = []   # (t_s since start, {pid: rss_bytes})
        self.t0 = time.monotonic()

    def run(self):
        known = {}
        while not self.stop_ev.is_set():
            now = time.monotonic() - self.t0
            snap = {}
            for d in os.listdir("/proc"):
                if not d.isdigit():
                    continue
                pid = int(d)
                try:
                    if pid not in known:
                        with open(f"/proc/{d}/comm", "rb") as f:
                            if f.read().strip() != b"shardmill":
                                continue
                        with open(f"/proc/{d}/cmdline", "rb") as f:
                            known[pid] = self.tag in f.read()
                    if not known[pid]:
                        continue
                    with open(f"/proc/{d}/status", "rb") as f:
                        for line in f:
                            if line.startswith(b"VmRSS:"):
                                snap[pid] = int(line.split()[1]) * 1024
                                break
                except OSError:
                    continue
            if snap:
                self.samples.append((round(now, 3), snap))
            self.stop_ev.wait(self.period)

    def stop(self):
        self.stop_ev.set()
        self.join()

    def summary(self):
        if not self.samples:
            return None
        pids = sorted({p for _, s in self.samples for p in s})
        peak = {p: max(s.get(p, 0) for _, s in self.samples) for p in pids}
        t_first = self.samples[0][0]
        series = [[round(t - t_first, 3)] + [s.get(p, 0) // 1024 for p in pids]
                  for t, s in self.samples]
        return {"period_s": self.period, "pids": pids, "peak_rss_bytes": peak,
                "series_kib": series, "series_columns": ["t_s"] + [f"pid{p}" for p in pids]}


# ---- oracle checks ----

def grid(shape, obj):
    return [-(-s // c) for s, c in zip(shape, obj)]


def report_problems(rep, man, ranks, threads, shard):
    """Report vs the generator's NumPy oracle (whole-array ROI, scale normalization)."""
    o = man["oracle"]
    rep = report_json.with_int_checksums(rep)  # SPEC §7: checksums are decimal strings
    bad = []
    res = rep.get("result") or {}
    if rep.get("ranks") != ranks:
        bad.append(f"report ranks {rep.get('ranks')} != {ranks}")
    if rep.get("threads") != threads:
        bad.append(f"report threads {rep.get('threads')} != {threads}")
    for k in ("checksum", "weighted_checksum", "output_checksum", "output_weighted_checksum"):
        if res.get(k) != o[k]:
            bad.append(f"{k} {res.get(k)} != NumPy oracle {o[k]}")
    if res.get("voxels") != man["voxels"]:
        bad.append(f"voxels {res.get('voxels')} != {man['voxels']}")
    h = res.get("histogram") or {}
    counts = h.get("counts")
    if counts is None or len(counts) != 65536:
        bad.append("histogram counts missing or not 65536 bins")
    else:
        sha = hashlib.sha256(np.array(counts, dtype="<u8").tobytes()).hexdigest()
        if sha != o["histogram"]["counts_sha256"]:
            bad.append("histogram counts differ from NumPy's bincount")
    if any(h.get(k, 0) for k in ("underflow", "overflow", "nan")):
        bad.append("histogram underflow/overflow/nan non-zero")
    out = rep.get("output") or {}
    want = int(np.prod(grid(man["params"]["shape"], shard)))
    if out.get("shards") != want or out.get("written") != want:
        bad.append(f"output shards {out.get('shards')} / written {out.get('written')} != {want}")
    if out.get("complete") is not True:
        bad.append("output not complete")
    return bad


def _sums_of_shard(task):
    """SPEC §5 output sums over one shard (decoded independently: NumPy + zstandard + crc32c)."""
    import crc32c
    import zstandard
    root, meta, idx = task
    shape = meta["shape"]
    codecs = meta["codecs"]
    obj = meta["chunk_grid"]["configuration"]["chunk_shape"]
    fill = np.float32(meta["fill_value"])
    dctx = zstandard.ZstdDecompressor()
    Z, Y, X = shape
    path = os.path.join(root, "c", *map(str, idx))
    with open(path, "rb") as f:
        blob = f.read()
    if codecs[0]["name"] == "sharding_indexed":
        conf = codecs[0]["configuration"]
        inner = conf["chunk_shape"]
        inner_codecs = [c["name"] for c in conf["codecs"]]
        n = int(np.prod([o // i for o, i in zip(obj, inner)]))
        crc = any(c["name"] == "crc32c" for c in conf["index_codecs"])
        ilen = 16 * n + (4 if crc else 0)
        ib = blob[-ilen:] if conf.get("index_location", "end") == "end" else blob[:ilen]
        if crc and crc32c.crc32c(ib[:16 * n]) != int.from_bytes(ib[16 * n:], "little"):
            raise ValueError(f"{path}: shard index CRC32C mismatch")
        index = np.frombuffer(ib[:16 * n], dtype="<u8").reshape(-1, 2)
        sub = [o // i for o, i in zip(obj, inner)]
        pieces = []
        for k, (off, nb) in enumerate(index):
            j = np.unravel_index(k, sub)
            pieces.append(([a * o + b * i for a, o, b, i in zip(idx, obj, j, inner)],
                           None if off == 2**64 - 1 else blob[int(off):int(off + nb)]))
    else:
        inner, inner_codecs = obj, [c["name"] for c in codecs]
        pieces = [([a * o for a, o in zip(idx, obj)], blob)]
    tot = U64(0)
    wtot = U64(0)
    count = 0
    for start, enc in pieces:
        ext = [min(i, s - o) for i, s, o in zip(inner, shape, start)]
        if min(ext) <= 0:
            continue
        if enc is None:
            vals = np.full(ext, fill, dtype=np.float32)
        else:
            raw = enc
            for name in reversed(inner_codecs):
                if name == "zstd":
                    raw = dctx.decompress(raw, max_output_size=int(np.prod(inner)) * 4)
                elif name == "crc32c":
                    raw = raw[:-4]
                elif name != "bytes":
                    raise ValueError(f"codec {name} not handled by the checker")
            a = np.frombuffer(raw, dtype="<f4").reshape(inner)
            vals = a[:ext[0], :ext[1], :ext[2]]
        bits = vals.view(np.uint32).astype(U64)
        zi = (np.arange(start[0], start[0] + ext[0], dtype=U64) * U64(Y * X))[:, None, None]
        yi = (np.arange(start[1], start[1] + ext[1], dtype=U64) * U64(X))[None, :, None]
        xi = np.arange(start[2], start[2] + ext[2], dtype=U64)[None, None, :] + U64(1)
        with np.errstate(over="ignore"):
            tot = tot + np.sum(bits, dtype=U64)
            wtot = wtot + np.sum(bits * (zi + yi + xi), dtype=U64)
        count += int(np.prod(ext))
    return int(tot), int(wtot), count


def check_output_values(out, man, jobs=2):
    """Decode every shard of `out` (no shardmill code) and compare the SPEC §5 output sums with
    the generator's NumPy oracle (float32(v)/float32(divisor)). Problems as a list."""
    with open(os.path.join(out, "zarr.json")) as f:
        meta = json.load(f)
    bad = []
    if meta.get("data_type") != "float32" or meta.get("shape") != man["params"]["shape"]:
        return [f"output zarr.json: data_type {meta.get('data_type')}, shape {meta.get('shape')}"], 0.0
    obj = meta["chunk_grid"]["configuration"]["chunk_shape"]
    tasks = [(out, meta, idx) for idx in np.ndindex(*grid(meta["shape"], obj))]
    t0 = time.monotonic()
    try:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            parts = pool.map(_sums_of_shard, tasks, chunksize=max(1, len(tasks) // (8 * jobs)))
    except (OSError, ValueError, Exception) as e:  # a missing shard, a bad index, bad zstd
        return [f"independent decode of {out} failed: {type(e).__name__}: {e}"], \
            round(time.monotonic() - t0, 2)
    m = (1 << 64) - 1
    tot = sum(p[0] for p in parts) & m
    wtot = sum(p[1] for p in parts) & m
    n = sum(p[2] for p in parts)
    signed = tot - (1 << 64) if tot >= (1 << 63) else tot
    o = man["oracle"]
    if n != man["voxels"]:
        bad.append(f"decoded {n} values, expected {man['voxels']}")
    if signed != o["output_checksum"]:
        bad.append(f"decoded output checksum {signed} != NumPy oracle {o['output_checksum']}")
    if wtot != o["output_weighted_checksum"]:
        bad.append(f"decoded output weighted checksum {wtot} != NumPy oracle "
                   f"{o['output_weighted_checksum']}")
    return bad, round(time.monotonic() - t0, 2)


# ---- one conversion ----

def shardmill_argv(shardmill, config, store, out, report, ranks_threads, extra_sets=()):
    _, threads = ranks_threads
    argv = [shardmill, "run", config, "--set", f"input.store={store}",
            "--set", f"output.path={out}", "--set", "output.exists=error",
            "--set", f"parallel.threads={threads}", "--set", "progress=false"]
    for s in extra_sets:
        argv += ["--set", s]
    return argv + ["--report", report]


def spawn_results(prefix, ranks):
    """Each rank's record that bench/region_read/w3_spawn.c wrote to PREFIX.<rank> (removed once
    read): exit status (-signal), wall, peak RSS, user and system time; {"rank", "rc": None} for
    a rank without one."""
    per_rank = []
    for r in range(ranks):
        try:
            with open(f"{prefix}.{r}") as f:
                x = json.load(f)
            os.unlink(f"{prefix}.{r}")
            per_rank.append({"rank": r, "rc": x["exit_code"] if x["exited"] else -x["signal"],
                             "wall_s": x["wall_ns"] / 1e9, "maxrss_bytes": x["maxrss_kib"] * 1024,
                             "user_s": x["utime_us"] / 1e6, "sys_s": x["stime_us"] / 1e6})
        except (OSError, ValueError, KeyError):
            per_rank.append({"rank": r, "rc": None})
    return per_rank


def run_convert(launcher, shardmill, config, man, ranks, threads, work, tag, shard,
                extra_sets=(), sample_rss=False, check_values=True, keep_output=False,
                timeout=3600):
    """One fresh conversion of the whole array `man` describes; a record (dict) with 'ok'."""
    base = os.path.join(os.path.abspath(work), tag)
    out, rep_path = base + ".zarr", base + ".report.json"
    shutil.rmtree(out, ignore_errors=True)
    argv_sm = shardmill_argv(shardmill, config, man["path"], out, rep_path, (ranks, threads),
                             extra_sets)
    argv, env = launcher.command(ranks, threads, argv_sm, base + ".spawn")
    os.sync()  # outside the timed interval: no run pays for an earlier one's dirty pages
    busy_before = busy_cores(0.3)
    sampler = RssSampler(out) if sample_rss else None
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    rs0 = resource.getrusage(resource.RUSAGE_SELF)
    j0, i0 = cpu_jiffies()
    t_launch_ns = time.time_ns()
    m0 = time.monotonic_ns()
    if sampler:
        sampler.start()
    with open(base + ".stdout", "wb") as so, open(base + ".stderr", "wb") as se:
        try:
            p = subprocess.run(argv, env=env, stdout=so, stderr=se, stdin=subprocess.DEVNULL,
                               timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    wall_s = (time.monotonic_ns() - m0) / 1e9
    if sampler:
        sampler.stop()
    j1, i1 = cpu_jiffies()
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    rs1 = resource.getrusage(resource.RUSAGE_SELF)
    ours = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    mine = (rs1.ru_utime - rs0.ru_utime) + (rs1.ru_stime - rs0.ru_stime)  # driver + sampler
    machine_busy = ((j1 - j0) - (i1 - i0)) / HZ
    rec = {"tag": tag, "ranks": ranks, "threads": threads, "argv": argv, "launcher_rc": rc,
           "wall_s": round(wall_s, 4), "cpu_s": round(ours, 3),
           "busy_cores_before": busy_before,
           "other_busy_cores": round(max(0.0, machine_busy - ours - mine) / wall_s, 2),
           "launched_utc": datetime.datetime.fromtimestamp(
               t_launch_ns / 1e9, datetime.timezone.utc).isoformat(), "ok": False}
    with open(base + ".stderr", errors="replace") as f:
        rec["stderr"] = f.read().strip()[-1500:]
    ranks_res = spawn_results(base + ".spawn", ranks)
    rec["per_rank"] = ranks_res
    rec["rss_samples"] = sampler.summary() if sampler else None
    bad = []
    if rc != 0 or any(x.get("rc") != 0 for x in ranks_res):
        bad.append(f"exit: launcher {rc}, ranks {[x.get('rc') for x in ranks_res]}: "
                   f"{rec['stderr'][-400:]}")
    try:
        st = os.stat(os.path.join(out, MARKER))
        rec["marker_s"] = round((st.st_mtime_ns - t_launch_ns) / 1e9, 4)
    except OSError:
        rec["marker_s"] = None
        bad.append("no completion marker")
    rep = None
    try:
        with open(rep_path) as f:
            rep = report_json.with_int_checksums(json.load(f))
        os.unlink(rep_path)
    except (OSError, ValueError) as e:
        bad.append(f"report: {e}")
    if rep is not None:
        bad += report_problems(rep, man, ranks, threads, shard)
        rec["report"] = {k: rep.get(k) for k in ("engine", "ranks", "threads", "timing_ms",
                                                 "memory", "output", "figure_of_merit")}
        rec["report"]["io"] = rep.get("io")
        rec["output_checksum"] = (rep.get("result") or {}).get("output_checksum")
        rec["output_weighted_checksum"] = (rep.get("result") or {}).get(
            "output_weighted_checksum")
    if not bad:
        v = subprocess.run([shardmill, "verify", out], capture_output=True, text=True)
        rec["verify_rc"] = v.returncode
        if v.returncode != 0:
            bad.append(f"shardmill verify exit {v.returncode}: {(v.stderr or v.stdout)[-300:]}")
    if not bad and check_values:
        vbad, secs = check_output_values(out, man)
        rec["values_checked"] = not vbad
        rec["values_check_s"] = secs
        bad += vbad
    rec["problems"] = bad
    rec["ok"] = not bad
    if not keep_output:
        shutil.rmtree(out, ignore_errors=True)
    for sfx in (".stdout", ".stderr"):
        try:
            os.unlink(base + sfx)
        except OSError:
            pass
    return rec
