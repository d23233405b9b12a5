"""The memory ceiling (issue 34 item 4, SPEC §1): limits.memory_bytes bounds each rank's peak RSS
as a whole process. `plan --json` gives the bound (estimate.peak_rss_bytes, and memory_ceiling:
the bound as adapted to the limit); each configuration runs with limits.memory_bytes just above
its adapted bound, and the peak RSS measured outside the engine (VmHWM of /proc/PID/status,
sampled while the process runs; under mpirun the report's memory.peak_rss_bytes, the maximum of
every rank's VmHWM at its end) stays under the ceiling. A ceiling below what any adaptation reaches
is exit 5, one line naming limits.memory_bytes and the bound's parts, and no output directory.

Usage: /usr/bin/python3 test_memory_ceiling.py --shardmill BIN --work DIR --case NAME
  zarr     a 128x256x256 uint16 Zarr v2 array (zarr-python), percentile to float32 in shards of
           [32,128,128] on 2 threads: the input kept (its bound); under a ceiling just above the
           1-thread bound the run re-reads its input instead, as plan says; one pass (a fixed
           window) under a ceiling between the 1-thread and 2-thread bounds: 1 thread, as plan
           says (report memory.ceiling, report threads); each under its ceiling
  tiff_ome the same volume as a TIFF stack (tifffile) to a 2-level OME-Zarr image
  hdf5     the same volume as an HDF5 dataset (h5py, gzip chunks [32,64,64])
  mpi      the Zarr array over 2 ranks (mpirun), 1 thread each: every rank under the ceiling
  walk     the Zarr array over 2 ranks, each under strace: the check's walk of the input's files
           (the cache term's stored ratio) is rank 0's alone, broadcast; rank 1 stats no chunk file
  meta     the Zarr array over HTTP (http.server with a request log), 2 ranks: each metadata
           document is fetched once per run (the check's fetch on rank 0, reused by the run)
  refuse   a ceiling of 12 MiB (below the binary's own baseline with any adaptation): exit 5, one
           error line naming limits.memory_bytes and the bound's parts, nothing written
Prints one ok/FAIL line per check and a closing count; exit 1 on any failure (77: no mpirun).
"""

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

from shardmill_test import runner as cc
from shardmill_test.ranks import mpi_env

SHAPE = (128, 256, 256)
MIB = 1 << 20


def volume():
    rng = np.random.default_rng(344)
    return rng.normal(1000, 200, SHAPE).clip(0, 65535).astype(np.uint16)


def make_input(work, kind):
    vol = volume()
    if kind == "zarr":
        import zarr
        path = os.path.join(work, "in.zarr")
        z = zarr.open(path, mode="w", shape=SHAPE, chunks=(64, 64, 64), dtype="uint16")
        z[:] = vol
        return {"store": path}
    if kind == "tiff":
        import tifffile
        path = os.path.join(work, "slices")
        os.makedirs(path)
        for i in range(SHAPE[0]):
            tifffile.imwrite(os.path.join(path, f"s{i:04d}.tif"), vol[i])
        return {"store": path, "format": "tiff"}
    import h5py
    path = os.path.join(work, "in.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("/d", data=vol, chunks=(32, 64, 64), compression="gzip")
    return {"store": path, "format": "hdf5", "hdf5": {"dataset": "/d"}}


def config(work, name, inp, threads, memory, extra=None):
    cfg = {"job": "convert", "input": inp,
           "normalize": {"mode": "percentile", "lo": 1, "hi": 99},
           "output": {"path": os.path.join(work, f"{name}.zarr"), "exists": "overwrite"},
           "parallel": {"threads": threads}, "limits": {"memory_bytes": memory},
           "progress": False, "report": os.path.join(work, f"{name}.json")}
    cc.merge_config(cfg, extra)
    return cc.write_config(os.path.join(work, f"{name}.yaml"), cfg)


def plan(c, args, cfg, ranks):
    r = cc.run([args.shardmill, "plan", cfg, "--ranks", str(ranks), "--json"])
    if not c.check(f"plan {os.path.basename(cfg)}: exit 0", r.returncode == 0, cc.describe(r)):
        return None
    return json.loads(r.stdout)["estimate"]


def run_sampled(cmd):
    """Runs cmd; returns (CompletedProcess-like, the highest VmHWM read while it ran, bytes)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]) * 1024)
        except (FileNotFoundError, ProcessLookupError, ValueError):
            pass
        time.sleep(0.002)
    out, err = p.communicate()
    return subprocess.CompletedProcess(cmd, p.returncode, out, err), peak


def just_above(c, args, work, name, inp, threads, ranks=1, extra=None):
    """The bound as configured (at the default 2 GiB), then the ceiling 2 % above the bound
    `plan` gives under it: the run there, its peak against the ceiling."""
    est = plan(c, args, config(work, name, inp, threads, "2GiB", extra), ranks)
    if est is None:
        return None
    ceiling = int(est["memory_ceiling"]["bound_bytes"] * 1.02)
    cfg = config(work, name, inp, threads, ceiling, extra)
    est = plan(c, args, cfg, ranks)
    if est is None:
        return None
    fit = est["memory_ceiling"]
    c.check(f"{name}: plan's bound {fit['bound_bytes']} within the ceiling {ceiling}",
            fit["fits"] and fit["bound_bytes"] <= ceiling, fit)
    return ceiling, cfg, est


def check_run(c, name, ceiling, r, sampled, report_path):
    if not c.check(f"{name}: run exit 0", r.returncode == 0, cc.describe(r)):
        return None
    rep = json.load(open(report_path))
    mem = rep["memory"]
    c.check(f"{name}: the report's peak RSS {mem['peak_rss_bytes'] / MIB:.1f} MiB (every rank's "
            f"VmHWM) under the ceiling {ceiling / MIB:.1f} MiB", mem["peak_rss_bytes"] <= ceiling,
            mem)
    if sampled is not None:
        c.check(f"{name}: VmHWM sampled from outside, {sampled / MIB:.1f} MiB, under the ceiling",
                0 < sampled <= ceiling, sampled)
    c.check(f"{name}: the report states the ceiling's check",
            mem.get("ceiling", {}).get("limit_bytes") == ceiling and mem["ceiling"]["fits"], mem)
    return rep


def single(c, args, work, name, kind, threads, extra=None):
    inp = make_input(work, kind)
    got = just_above(c, args, work, name, inp, threads, extra=extra)
    if got is None:
        return None
    ceiling, cfg, est = got
    r, sampled = run_sampled([args.shardmill, "run", cfg])
    return check_run(c, name, ceiling, r, sampled, os.path.join(work, f"{name}.json")), est


def case_zarr(c, args, work):
    shard = {"output": {"shard": [32, 128, 128], "chunk": [32, 64, 64]}}
    got = single(c, args, work, "zarr", "zarr", 2, shard)
    if got is None or got[0] is None:
        return
    rep, _ = got
    c.check("zarr: the input kept between the passes", rep["memory"]["kept_input"], rep["memory"])
    inp = {"store": os.path.join(work, "in.zarr")}
    # a ceiling just above the 1-thread bound: the run adapts (the input re-read, then fewer
    # threads) as plan says, and stays under it
    one = plan(c, args, config(work, "one", inp, 1, "2GiB", shard), 1)
    if one is None:
        return
    adapt(c, args, work, "reread", inp, int(one["peak_rss_bytes_per_rank"] * 1.02), shard,
          lambda f: f["reread"])
    # one pass (a fixed window: nothing to keep): only fewer threads can fit a ceiling between
    # the 1-thread and the 2-thread bounds
    win = dict(shard, normalize={"mode": "window", "lo": 500, "hi": 1500})
    b = [plan(c, args, config(work, f"w{t}", inp, t, "2GiB", win), 1) for t in (1, 2)]
    if None in b:
        return
    b1, b2 = (e["peak_rss_bytes_per_rank"] for e in b)
    if not c.check(f"zarr: one pass, 1 thread's bound {b1} below 2 threads' {b2}", b1 < b2):
        return
    ceiling = int(b1 * 1.02) if int(b1 * 1.02) < b2 else (b1 + b2) // 2
    adapt(c, args, work, "threads", inp, ceiling, win,
          lambda f: f["threads"] == 1 and f["threads_asked"] == 2)


def adapt(c, args, work, name, inp, ceiling, extra, want):
    """Runs 2 threads under `ceiling`: plan's adaptation (want(fit) true, stated in its text), the
    run's (the report's memory.ceiling, the threads it ran), its peak under the ceiling."""
    cfg = config(work, name, inp, 2, ceiling, extra)
    est = plan(c, args, cfg, 1)
    if est is None:
        return
    fit = est["memory_ceiling"]
    c.check(f"{name}: plan adapts ({fit['adapted']})",
            fit["fits"] and fit["adapted"] != "none" and want(fit), fit)
    txt = cc.run([args.shardmill, "plan", cfg, "--ranks", "1"])
    c.check(f"{name}: plan's text says the run adapts",
            txt.returncode == 0 and f"run adapts ({fit['adapted']})" in txt.stdout, txt.stdout)
    r, sampled = run_sampled([args.shardmill, "run", cfg])
    rep = check_run(c, name, ceiling, r, sampled, os.path.join(work, f"{name}.json"))
    if rep is not None:
        got = rep["memory"]["ceiling"]
        c.check(f"{name}: the run adapted as plan said ({got['adapted']}), {rep['threads']} "
                "thread(s)",
                got == fit and rep["threads"] == fit["threads"], (got, fit))
        if fit["reread"]:
            c.check(f"{name}: the input re-read, not kept", not rep["memory"]["kept_input"],
                    rep["memory"])


def case_tiff_ome(c, args, work):
    single(c, args, work, "tiff_ome", "tiff", 2,
           {"output": {"ome": {"levels": 2, "method": "mean"}}})


def case_hdf5(c, args, work):
    single(c, args, work, "hdf5", "hdf5", 2)


def case_mpi(c, args, work):
    mpirun = shutil.which("mpirun") or shutil.which("mpiexec")
    if mpirun is None:
        print("skip: no mpirun")
        return 77
    inp = make_input(work, "zarr")
    got = just_above(c, args, work, "mpi", inp, 1, ranks=2,
                     extra={"output": {"shard": [32, 128, 128], "chunk": [32, 64, 64]}})
    if got is None:
        return None
    ceiling, cfg, _ = got
    env = mpi_env()  # a session directory of its own (mpi.session_dir)
    r = cc.run([mpirun, "-n", "2", "--oversubscribe", args.shardmill, "run", cfg], env=env)
    rep = check_run(c, "mpi", ceiling, r, None, os.path.join(work, "mpi.json"))
    if rep is not None:
        c.check("mpi: 2 ranks ran", rep["ranks"] == 2, rep["ranks"])
    return None


def case_walk(c, args, work):
    """The ceiling's check walks a local input's files on rank 0 only (the cache term's stored
    ratio, broadcast): under strace, rank 1 stats none of the input's chunk files."""
    mpirun = shutil.which("mpirun") or shutil.which("mpiexec")
    strace = shutil.which("strace")
    if mpirun is None or strace is None:
        print("skip: no mpirun or strace")
        return 77
    inp = make_input(work, "zarr")
    inp["cache"] = {"enabled": True, "max_bytes": "64MiB"}
    cfg = config(work, "walk", inp, 1, "1GiB")
    trace = os.path.join(work, "walk.trace")
    r = cc.run([mpirun, "-n", "2", "--oversubscribe", "sh", "-c",
                f'exec {strace} -f -qq -e trace=newfstatat,lstat,stat,statx -o {trace}.$OMPI_COMM_WORLD_RANK '
                f'"$0" run "$1"', args.shardmill, cfg], env=mpi_env())
    if not c.check("walk: 2 ranks under strace, exit 0", r.returncode == 0, cc.describe(r)):
        return None
    chunks = os.path.join(inp["store"], "")

    def stats(rank):  # stat calls on the input's chunk files (not its .zarray/.zattrs)
        n = 0
        with open(f"{trace}.{rank}") as f:
            for line in f:
                q = line.split('"')
                if len(q) > 1 and q[1].startswith(chunks) and \
                        not os.path.basename(q[1]).startswith("."):
                    n += 1
        return n

    files = sum(1 for f in os.listdir(inp["store"]) if not f.startswith("."))
    s0, s1 = stats(0), stats(1)
    c.check(f"walk: rank 0 stats the input's {files} chunk files ({s0} calls)", s0 >= files, s0)
    c.check(f"walk: rank 1 stats none of them ({s1} calls)", s1 == 0, s1)
    return None


def case_meta(c, args, work):
    """The input's metadata is read once per run: the ceiling's check fetches it on rank 0 and the
    run opens the input from those documents (sm_run_input.docs), over HTTP with 2 ranks."""
    mpirun = shutil.which("mpirun") or shutil.which("mpiexec")
    if mpirun is None:
        print("skip: no mpirun")
        return 77
    root = os.path.join(work, "root")
    os.makedirs(root)
    inp = make_input(root, "zarr")
    log, port_file = os.path.join(work, "requests.jsonl"), os.path.join(work, "port")
    srv = subprocess.Popen([sys.executable, "-m", "shardmill_test.plain_server", "--root", root,
                            "--port-file", port_file, "--log", log, "--max-lifetime", "300"],
                           stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if srv.poll() is not None or time.monotonic() > deadline:
                c.check("meta: the HTTP server starts", False)
                return None
            time.sleep(0.02)
        url = f"http://127.0.0.1:{int(open(port_file).read())}/in.zarr"
        cfg = config(work, "meta", {"store": url}, 1, "1GiB")
        r = cc.run([mpirun, "-n", "2", "--oversubscribe", args.shardmill, "run", cfg],
                   env=mpi_env())
        if not c.check("meta: 2 ranks over HTTP, exit 0", r.returncode == 0, cc.describe(r)):
            return None
        time.sleep(0.2)  # the handler logs after the client has its last byte
        docs = [json.loads(x)["path"] for x in open(log) if x.strip()]
        docs = [d for d in docs if os.path.basename(d) in
                ("zarr.json", ".zarray", ".zattrs", ".zgroup")]
        c.check(f"meta: each metadata document fetched once ({docs})",
                len(docs) == len(set(docs)) and "in.zarr/.zarray" in docs, docs)
        with open(os.path.join(work, "meta.json")) as f:
            rep = json.load(f)
        c.check("meta: the report's ceiling was checked", rep["memory"].get("ceiling") is not None,
                rep["memory"])
    finally:
        srv.terminate()
        srv.wait()
    return None


def case_refuse(c, args, work):
    inp = make_input(work, "zarr")
    cfg = config(work, "refuse", inp, 2, "12MiB")
    txt = cc.run([args.shardmill, "plan", cfg, "--ranks", "1"])
    c.check("refuse: plan says the run stops with exit 5",
            txt.returncode == 0 and "run stops with exit 5" in txt.stdout, txt.stdout)
    r = cc.run([args.shardmill, "run", cfg])
    lines = cc.one_error_line(r.stderr)
    c.check("refuse: exit 5, one line `shardmill: error: limits.memory_bytes: ...` naming the "
            "bound's parts",
            r.returncode == 5 and len(lines) == 1 and
            lines[0].startswith("shardmill: error: limits.memory_bytes: ") and
            all(w in lines[0] for w in ("baseline", "caches", "write", "12.0 MiB")),
            cc.describe(r))
    c.check("refuse: no output directory, no report",
            not os.path.exists(os.path.join(work, "refuse.zarr")) and
            not os.path.exists(os.path.join(work, "refuse.json")))
    r = cc.run([args.shardmill, "run", cfg, "--set", "limits.memory_ceiling=false"])
    c.check("refuse: limits.memory_ceiling false runs within the budget's shares as before",
            r.returncode == 0, cc.describe(r))


if __name__ == "__main__":
    cc.main_guard(lambda: cc.case_main("convert.memory_ceiling", {
        "zarr": case_zarr, "tiff_ome": case_tiff_ome, "hdf5": case_hdf5, "mpi": case_mpi,
        "refuse": case_refuse, "walk": case_walk, "meta": case_meta}))
