#!/usr/bin/python3
"""HDF5 export benchmark driver (bench/hdf5; docs/BENCHMARKS.md "HDF5 export"). Run with
/usr/bin/python3 in a Release build.

Full profile (results in bench/results/hdf5-<UTC>.json, never overwritten):

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/hdf5/hdf5.py --shardmill build/release/jobs/shardmill --wait-idle 60

Smoke profile for CI (ctest bench.hdf5.quick, label bench-quick; a small input, one warm-up and
one measured round, every value checked; report in --out):

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/hdf5/hdf5.py --quick --shardmill BUILD/jobs/shardmill --out DIR

The same `convert` (a synthetic uint8 head-like volume, zarr-python v2 input, chunks 64^3; scale
normalization; the sharded output [8,32,32] / [2,16,16] zstd 3 (set explicitly: the `auto`
default makes this volume one shard); durable: output.fsync
with the default syncfs) runs in fresh processes as

  zarr     the Zarr v3 sharded output only
  hdf5-d0  the same plus export.hdf5 (deflate 0), chunks = the shards
  hdf5-d4  the same plus export.hdf5 (deflate 4)

as one plain process (threads auto) and under `mpirun -np 2` (1 thread per rank; parallel HDF5
over MPI-IO). Each write is followed by the read-back of what it wrote, in fresh processes: the
whole array by zarrita.js 0.7.5 (the Zarr output, bench/hdf5/read_zarrita.mjs) or by h5py
(the HDF5 file, bench/hdf5/read_h5py.py); warm page cache (the files were just written; the
caches are not dropped on this shared machine). A warm-up round of every kind comes first
(checked, not timed), then --rounds rounds, each running every kind once in the same order
(ABAB...). sync(2) runs before every timed process, outside its interval. Outputs are kept until
the end of the run.

Recorded per write: process wall (bench/region_read/w3_spawn.c: wall and wait4 rusage), the report's
timing_ms (total, write, export) and peak RSS, bytes of the Zarr output (shards + zarr.json;
marker and journal separately) and of the HDF5 file (st_size and allocated blocks). Per read:
the reader's in-process read time and process wall. Every value read back, by every reader,
after every write, is compared bit for bit with NumPy's np.float32(v) / np.float32(255); every
Zarr output of an export run is compared file by file with the same round's `zarr` output (the
export does not change the Zarr bytes). A wrong value or a failed process exits 1; timings never
change the exit status.
"""

import argparse
import datetime
import filecmp
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

from shardmill_test import launcher
from shardmill_test import machine
from shardmill_test.ranks import session_env

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

MIB = 1 << 20
FULL_SHAPE = (128, 256, 256)
QUICK_SHAPE = (48, 64, 64)
INPUT_CHUNKS = (64, 64, 64)
WRITE_KINDS = [("zarr", None), ("hdf5-d0", 0), ("hdf5-d4", 4)]

failures = []


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def fail(msg):
    failures.append(msg)
    log("FAIL " + msg)


# ---- processes ----

SPAWN = None


def build_spawn(work):
    global SPAWN
    SPAWN = os.path.join(work, "w3_spawn")
    subprocess.run(["cc", "-O2", "-std=c11", "-o", SPAWN,
                    os.path.join(REPO, "bench", "region_read", "w3_spawn.c")], check=True)


def spawn(argv, base, env=None, cwd=None):
    """argv as a fresh process through w3_spawn: wall_ms, rc, peak RSS, stdout, stderr."""
    res = base + ".spawn.json"
    with open(base + ".out", "wb") as out, open(base + ".err", "wb") as err:
        subprocess.run([SPAWN, res] + argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                       env=env, cwd=cwd)
    with open(base + ".out", errors="replace") as f:
        stdout = f.read()
    with open(base + ".err", errors="replace") as f:
        stderr = f.read()
    with open(res) as f:
        r = json.load(f)
    for p in (res, base + ".out", base + ".err"):
        os.unlink(p)
    return {"wall_ms": r["wall_ns"] / 1e6, "rc": r["exit_code"] if r["exited"] else -r["signal"],
            "peak_rss_bytes": r["maxrss_kib"] * 1024, "user_ms": r["utime_us"] / 1e3,
            "sys_ms": r["stime_us"] / 1e3, "stdout": stdout, "stderr": stderr.strip()[-1500:]}



def io_pressure():
    """/proc/pressure/io 'some' avg10: the disk load of other work, which busy_cores misses."""
    try:
        with open("/proc/pressure/io") as f:
            return float(f.readline().split()[1].split("=")[1])
    except (OSError, IndexError, ValueError):
        return None


def mpi_env(threads):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_COMM_", "PMIX_", "PMI_", "SLURM_"))}
    env["OMP_NUM_THREADS"] = str(threads)
    if os.geteuid() == 0:
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    session_env(env)  # an Open MPI session directory of this launch's own (issue 32 item 20)
    if env.get("LSAN_OPTIONS"):
        # ASan smoke runs: Open MPI has no frame pointers, so LeakSanitizer needs the slow
        # unwinder for tests/sanitizers/lsan.supp to match (as tests/mpi/test_mpi.py does)
        env["LSAN_OPTIONS"] += ":fast_unwind_on_malloc=0"
    return env


# ---- input and oracle ----

def make_input(work, shape):
    """A head-like uint8 volume: smooth tissue inside an ellipsoid, zero air outside, noise."""
    import zarr  # zarr-python 2.13

    path = os.path.join(work, "input.zarr")
    z, y, x = np.meshgrid(*[np.linspace(-1, 1, n, dtype=np.float32) for n in shape],
                          indexing="ij")
    rng = np.random.default_rng(20261202)
    inside = (z / 0.95) ** 2 + (y / 0.85) ** 2 + (x / 0.8) ** 2 < 1
    v = 110 + 50 * np.sin(7 * x) * np.cos(5 * y) + 30 * np.cos(9 * z)
    v = v + rng.normal(0, 6, size=shape)
    a = np.where(inside, np.clip(v, 0, 255), 0).astype(np.uint8)
    zz = zarr.open(path, mode="w", shape=shape, chunks=INPUT_CHUNKS, dtype="u1")
    zz[:] = a
    return path, a


def oracle_bits(a):
    return (a.astype(np.float32) / np.float32(255)).astype("<f4").view("<u4")


# ---- one write and its read-back ----

def tree_bytes(root):
    data = meta = alloc = 0
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            alloc += st.st_blocks * 512
            if rel == "zarr.json" or rel.startswith("c" + os.sep):
                data += st.st_size
            else:
                meta += st.st_size
    return data, meta, alloc


def write_config(path, inp, deflate):
    text = ("job: convert\n"
            f"input: {{store: {inp}}}\n"
            "normalize: {mode: scale, divisor: 255}\n"
            # the layout the benchmark was built on (SPEC's earlier default; `auto` would make
            # [128,256,256] one shard, so one HDF5 chunk and one rank with all the work)
            "output: {path: out.zarr, fsync: true, shard: [8, 32, 32], chunk: [2, 16, 16]}\n")
    if deflate is not None:
        text += f"export: {{hdf5: {{path: out.h5, deflate: {deflate}}}}}\n"
    with open(path, "w") as f:
        f.write(text)


def run_write(a, work, inp, kind, deflate, ranks, rnd):
    d = os.path.join(work, "runs", f"r{rnd}-{kind}-np{ranks}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    write_config(os.path.join(d, "job.yaml"), inp, deflate)
    argv = [a.shardmill, "run", "job.yaml", "--report", "report.json", "-q"]
    if ranks > 1:
        argv = [a.mpiexec, "--oversubscribe"] + a.mpirun_extra + ["-np", str(ranks)] + argv
        env = mpi_env(1)
    else:
        env = mpi_env(2)
        for k in [k for k in env if k.startswith("OMPI_")]:
            del env[k]
        env.pop("OMP_NUM_THREADS")  # threads auto: both cores
    os.sync()
    busy, iop = machine.busy_cores(0.2), io_pressure()
    r = spawn(argv, os.path.join(d, "spawn"), env=env, cwd=d)
    rec = {"kind": kind, "deflate": deflate, "ranks": ranks, "round": rnd, "dir": d,
           "wall_ms": r["wall_ms"], "rc": r["rc"], "peak_rss_bytes": r["peak_rss_bytes"],
           "user_ms": r["user_ms"], "sys_ms": r["sys_ms"], "busy_cores_before": busy,
           "io_pressure_avg10_before": iop}
    if r["rc"] != 0:
        fail(f"{kind} np{ranks} round {rnd}: exit {r['rc']}: {r['stderr']}")
        return rec
    rep = json.load(open(os.path.join(d, "report.json")))
    tm = rep["timing_ms"]
    rec["timing_ms"] = {k: tm.get(k) for k in ("total", "open", "decode", "process", "write",
                                               "export", "export_read", "export_write",
                                               "export_finish")}
    rec["report_peak_rss_bytes"] = rep["memory"]["peak_rss_bytes"]
    rec["zarr_bytes"], rec["zarr_meta_bytes"], rec["zarr_alloc_bytes"] = \
        tree_bytes(os.path.join(d, "out.zarr"))
    if deflate is not None:
        st = os.stat(os.path.join(d, "out.h5"))
        rec["hdf5_bytes"], rec["hdf5_alloc_bytes"] = st.st_size, st.st_blocks * 512
        rec["export"] = rep["export"]
        if rep["export"]["bytes"] != st.st_size:
            fail(f"{kind} np{ranks} round {rnd}: report export bytes {rep['export']['bytes']} "
                 f"!= {st.st_size}")
    return rec


def same_tree(x, y):
    fx, fy = [], []
    for root, out in ((x, fx), (y, fy)):
        for d, _, files in os.walk(root):
            out.extend(os.path.relpath(os.path.join(d, f), root) for f in files)
    if sorted(fx) != sorted(fy):
        return False
    return all(filecmp.cmp(os.path.join(x, f), os.path.join(y, f), shallow=False) for f in fx)


def run_read(a, want_bits, rec, reader):
    d = rec["dir"]
    out = os.path.join(d, f"read-{reader}.raw")
    if reader == "h5py":
        argv = [sys.executable, os.path.join(HERE, "read_h5py.py"), os.path.join(d, "out.h5"),
                "/data", out]
    else:
        argv = [a.node, os.path.join(HERE, "read_zarrita.mjs"), os.path.join(d, "out.zarr"), out,
                "8"]
    env = dict(os.environ, SM_W3_NODE_MODULES=os.path.join(REPO, "tests", "interop", "js",
                                                            "node_modules"))
    os.sync()
    r = spawn(argv, os.path.join(d, f"spawn-{reader}"), env=env)
    res = {"reader": reader, "of": rec["kind"], "ranks": rec["ranks"], "round": rec["round"],
           "wall_ms": r["wall_ms"], "rc": r["rc"], "peak_rss_bytes": r["peak_rss_bytes"]}
    if r["rc"] != 0:
        fail(f"{reader} read of {rec['kind']} np{rec['ranks']}: exit {r['rc']}: {r['stderr']}")
        return res
    info = json.loads(r["stdout"].strip().splitlines()[-1])
    res.update({"read_ms": info["read_ms"], "open_ms": info["open_ms"]})
    got = np.fromfile(out, dtype="<u4")
    os.unlink(out)
    if got.size != want_bits.size or not np.array_equal(got, want_bits.reshape(-1)):
        bad = int(np.count_nonzero(got != want_bits.reshape(-1))) if got.size == want_bits.size \
            else "size"
        fail(f"{reader} read of {rec['kind']} np{rec['ranks']} round {rec['round']}: values "
             f"differ from NumPy ({bad})")
    res["values_checked"] = int(got.size)
    return res


# ---- summary ----

def stats(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def summarize(writes, reads):
    out = []
    for ranks in sorted({w["ranks"] for w in writes}):
        for kind, deflate in WRITE_KINDS:
            ws = [w for w in writes if w["kind"] == kind and w["ranks"] == ranks and
                  w["round"] > 0 and w["rc"] == 0]
            if not ws:
                continue
            reader = "zarrita" if deflate is None else "h5py"
            rs = [r for r in reads if r["of"] == kind and r["ranks"] == ranks and
                  r["round"] > 0 and r["rc"] == 0]
            out.append({
                "kind": kind, "ranks": ranks, "reader": reader,
                "write_wall_ms": stats([w["wall_ms"] for w in ws]),
                "total_ms": stats([w["timing_ms"]["total"] for w in ws]),
                "zarr_write_ms": stats([w["timing_ms"]["write"] for w in ws]),
                "export_ms": stats([w["timing_ms"].get("export") for w in ws]),
                "export_parts_ms": {k: stats([w["timing_ms"].get("export_" + k) for w in ws])
                                    for k in ("read", "write", "finish")},
                "zarr_bytes": ws[-1]["zarr_bytes"], "zarr_alloc_bytes": ws[-1]["zarr_alloc_bytes"],
                "hdf5_bytes": ws[-1].get("hdf5_bytes"),
                "hdf5_alloc_bytes": ws[-1].get("hdf5_alloc_bytes"),
                "peak_rss_bytes": max(w["report_peak_rss_bytes"] for w in ws),
                "read_ms": stats([r.get("read_ms") for r in rs]),
                "read_wall_ms": stats([r["wall_ms"] for r in rs]),
                "reader_peak_rss_bytes": max((r["peak_rss_bytes"] for r in rs), default=None)})
    return out


def fmt(s, nd=0):
    if s is None:
        return "–"
    f = f"{{:.{nd}f}}"
    return f"{f.format(s['median'])} ({f.format(s['min'])}–{f.format(s['max'])})"


def table(doc):
    lines = ["| ranks | output | write process wall ms | convert total ms | Zarr write ms | "
             "export ms | export read / write / finish ms | Zarr bytes | HDF5 bytes | read-back | "
             "read ms | reader wall ms |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for s in doc["summary"]:
        parts = s.get("export_parts_ms") or {}
        pt = " / ".join("–" if parts.get(k) is None else f"{parts[k]['median']:.0f}"
                        for k in ("read", "write", "finish")) if s["export_ms"] else "–"
        lines.append(
            f"| {s['ranks']} | {s['kind']} | {fmt(s['write_wall_ms'])} | {fmt(s['total_ms'])} | "
            f"{fmt(s['zarr_write_ms'])} | {fmt(s['export_ms'])} | {pt} | {s['zarr_bytes']:,} | "
            f"{'–' if s['hdf5_bytes'] is None else format(s['hdf5_bytes'], ',')} | "
            f"{'zarrita.js (Zarr)' if s['reader'] == 'zarrita' else 'h5py (HDF5)'} | "
            f"{fmt(s['read_ms'], 1)} | {fmt(s['read_wall_ms'])} |")
    return "\n".join(lines)


def toolchain(a):
    import h5py
    import zarr

    cpu = machine.cpu_model()
    git = ["git", "--no-optional-locks", "-C", REPO]
    zv = machine.zarrita_version()
    sha = machine.file_sha256(a.shardmill)
    return {"shardmill": {"path": a.shardmill, "sha256": sha,
                          "version": machine.run_text([a.shardmill, "--version"])},
            "commit": {"head": machine.run_text(git + ["rev-parse", "HEAD"]),
                       "dirty_tracked": bool(machine.run_text(git + ["status", "--porcelain",
                                                             "--untracked-files=no"]))},
            "cc": (machine.run_text(["cc", "--version"]) or "").split("\n")[0],
            "hdf5_parallel": machine.run_text(["pkg-config", "--modversion", "hdf5-openmpi"]),
            "mpirun": (machine.run_text([a.mpiexec, "--version"]) or "").split("\n")[0],
            "mpirun_args": ["--oversubscribe"] + a.mpirun_extra,
            "h5py": h5py.version.version, "h5py_hdf5": h5py.version.hdf5_version,
            "node": machine.run_text([a.node, "--version"]), "zarrita": zv,
            "python": platform.python_version(), "numpy": np.__version__,
            "zarr": zarr.__version__,
            "env": {k: os.environ.get(k) for k in ("OMP_PROC_BIND", "OMP_PLACES",
                                                   "OMPI_MCA_io")},
            "machine": {"nproc": os.cpu_count(), "cpu": cpu, "kernel": platform.release(),
                        "loadavg_start": os.getloadavg()}}


def fs_type(path):
    path = os.path.realpath(path)
    best, kind = "", None
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            if (path == parts[1] or path.startswith(parts[1].rstrip("/") + "/")) and \
                    len(parts[1]) > len(best):
                best, kind = parts[1], parts[2]
    return {"mount": best, "type": kind}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shardmill", default=os.path.join(REPO, "build", "release", "jobs",
                                                        "shardmill"))
    ap.add_argument("--node", default=shutil.which("node") or "node")
    ap.add_argument("--mpiexec", default=shutil.which("mpirun") or "mpirun")
    launcher.add_mpirun_args(ap)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--ranks", default="1,2", help="comma list; 1 = a plain process")
    ap.add_argument("--out", default=None, help="report directory (default bench/results)")
    ap.add_argument("--work", default=None, help="scratch directory (default a temp dir)")
    ap.add_argument("--wait-idle", type=float, default=0.0,
                    help="wait up to this many seconds for an idle machine before starting")
    ap.add_argument("--table", default=None, help="print the table of an earlier report")
    a = ap.parse_args()
    a.mpirun_extra = launcher.mpirun_args(a.mpirun_args)
    if a.table:
        print(table(json.load(open(a.table))))
        return 0
    a.shardmill = os.path.abspath(a.shardmill)
    rounds = a.rounds if a.rounds is not None else (1 if a.quick else 5)
    shape = QUICK_SHAPE if a.quick else FULL_SHAPE
    ranks_list = [int(x) for x in a.ranks.split(",") if x]
    out_dir = a.out or (tempfile.mkdtemp(prefix="hdf5-quick-") if a.quick else
                        os.path.join(REPO, "bench", "results"))
    os.makedirs(out_dir, exist_ok=True)
    work = a.work or tempfile.mkdtemp(prefix="sm-bench-hdf5-")
    os.makedirs(work, exist_ok=True)
    build_spawn(work)
    idle = (machine.wait_idle(a.wait_idle, 0.6, 0.3) if a.wait_idle > 0
            else [machine.busy_cores(0.3)])
    started = datetime.datetime.now(datetime.timezone.utc)
    log(f"hdf5 bench: shape {shape}, rounds {rounds} (+1 warm-up), ranks {ranks_list}, "
        f"work {work}")
    inp, vol = make_input(work, shape)
    want = oracle_bits(vol)
    writes, reads = [], []
    for rnd in range(rounds + 1):  # round 0 is the warm-up
        zref = {}
        for ranks in ranks_list:
            for kind, deflate in WRITE_KINDS:
                rec = run_write(a, work, inp, kind, deflate, ranks, rnd)
                writes.append(rec)
                if rec["rc"] != 0:
                    continue
                reads.append(run_read(a, want, rec, "zarrita" if deflate is None else "h5py"))
                zdir = os.path.join(rec["dir"], "out.zarr")
                if kind == "zarr":
                    zref[ranks] = zdir
                elif ranks in zref and not same_tree(zdir, zref[ranks]):
                    fail(f"{kind} np{ranks} round {rnd}: the Zarr output differs from the "
                         "run without export")
                log(f"round {rnd} {kind:8} np{ranks}: wall {rec['wall_ms']:.0f} ms, "
                    f"export {rec['timing_ms'].get('export')}, read "
                    f"{reads[-1].get('read_ms')} ms")
    doc = {"workload": "hdf5-export", "started": started.isoformat(),
           "command": " ".join([sys.executable] + sys.argv),
           "profile": "quick" if a.quick else "full", "shape": list(shape),
           "input": {"writer": "zarr-python 2.13", "dtype": "uint8",
                     "chunks": list(INPUT_CHUNKS)},
           "rounds": rounds, "ranks": ranks_list, "work_fs": fs_type(work),
           "busy_cores_at_start": idle, "toolchain": toolchain(a),
           "writes": writes, "reads": reads, "summary": summarize(writes, reads),
           "failures": failures}
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(out_dir, f"hdf5-{stamp}.json")
    n = 1
    while os.path.exists(path):  # never overwrite an earlier report
        path = os.path.join(out_dir, f"hdf5-{stamp}-{n}.json")
        n += 1
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print(table(doc))
    print(f"report: {path}")
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    checked = sum(r.get("values_checked", 0) for r in reads)
    print(f"every value checked: {checked:,} values in {len(reads)} read-backs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
