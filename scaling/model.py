#!/usr/bin/python3
"""Time-to-solution model of `shardmill run` (convert), fitted on this machine (scaling/MODEL.md).

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/model.py measure [--ranks 1,2,3,4] [--dir data/scaling/work]
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/model.py check --scaling scaling/results/<UTC>-full \\
        --measure scaling/results/<UTC>-model-measure/measure.json
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/model.py project --fit FIT.json --volume 4096,4096,4096 \\
        --nodes 1,4,16,64 --cores-per-node 32 --ranks-per-node 8 --threads 4

measure  the costs a scaling run's reports cannot separate: (1) MPI_Allreduce of the uint16
         histogram (65536 + 7 uint64, engine/run/run_common.c) and MPI start-up (launch → MPI_Init
         done) for 1..4 ranks (scaling/allreduce_bench.c, built with mpicc); (2) file-system
         metadata and sync on the output disk, in the engine's SYNCFS discipline (per shard: a
         staged create+write, a journal record create+write+rename; then syncfs, a rename per
         shard, syncfs) and in the FSYNC one (create+write+fsync+rename per file); the
         bandwidth of syncfs for 256 MiB of dirty data; a small-file read (the marker step
         reads every journal record). Three repeats, medians. Result:
         scaling/results/<UTC>-model-measure/measure.json (never overwritten).
check    fit the per-unit costs from the 1×1 runs of a scaling study (scaling/run.py) plus a
         measure.json, predict every (ranks, threads) point of that study, strong and weak, and
         print / write predicted vs measured (check.json, check.md, predicted.png next to
         the study's results).
project  time to solution of large volumes on many nodes from a fit (check writes fit.json),
         with the cluster assumptions as options (MODEL.md lists them).
"""

import argparse
import ctypes
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

from shardmill_test import REPO
from shardmill_test import launcher
from shardmill_test import machine
from shardmill_test import results
from shardmill_test.ranks import session_env

HERE = os.path.dirname(os.path.abspath(__file__))


MIB = launcher.MIB
HIST_COUNT = 65536 + 7


# ---- measure ----

def build_allreduce(work, mpicc="mpicc"):
    exe = os.path.join(work, "allreduce_bench")
    subprocess.run([mpicc, "-O2", "-std=c11", "-Wall", "-Wextra", "-o", exe,
                    os.path.join(HERE, "allreduce_bench.c")], check=True)
    return exe


def measure_mpi(work, ranks, mpirun, repeats):
    exe = build_allreduce(work)
    env = session_env(dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))  # a session dir of its own
    out = {}
    for r in ranks:
        rows = []
        for k in range(repeats):
            res = os.path.join(work, f"ar-{r}-{k}.json")
            t0 = time.time()
            subprocess.run([mpirun, "--oversubscribe", "--bind-to", "none", "-np", str(r), exe,
                            str(HIST_COUNT), "200", res], check=True, env=env,
                           stdout=subprocess.DEVNULL)
            wall = time.time() - t0
            with open(res) as f:
                x = json.load(f)
            os.unlink(res)
            x["launch_to_init_s"] = round(x["init_done_unix_us_max"] / 1e6 - t0, 4)
            x["mpirun_wall_s"] = round(wall, 4)
            rows.append(x)
        out[str(r)] = {
            "allreduce_us_median": statistics.median(x["allreduce_us"]["median"] for x in rows),
            "allreduce_us_min": min(x["allreduce_us"]["min"] for x in rows),
            "barrier_us_median": statistics.median(x["barrier_us"]["median"] for x in rows),
            "launch_to_init_s_median": statistics.median(x["launch_to_init_s"] for x in rows),
            "mpi_init_s_median": statistics.median(x["mpi_init_us_max"] / 1e6 for x in rows),
            "mpirun_wall_s_median": statistics.median(x["mpirun_wall_s"] for x in rows),
            "runs": rows}
        results.log(f"mpi {r} ranks: allreduce {out[str(r)]['allreduce_us_median']:.0f} us, launch → "
               f"MPI_Init done {out[str(r)]['launch_to_init_s_median']:.3f} s")
    return out


_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def syncfs(fd):
    if _libc.syncfs(fd) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def fs_once(d, n_small, n_big, big_bytes):
    """One round of the file-system microbenchmarks in directory d (created and removed)."""
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "j"))
    os.makedirs(os.path.join(d, "s"))
    os.makedirs(os.path.join(d, "f"))
    dfd = os.open(d, os.O_RDONLY)
    syncfs(dfd)
    rec = b'{"key": "c/0/0/0", "size": 123456, "crc32c": 305419896}\n'
    payload = os.urandom(64 * 1024)
    res = {}
    # SYNCFS discipline, per shard: staged object (create + write), journal record (create +
    # write + rename); then syncfs, rename every staged object, syncfs.
    t = time.perf_counter()
    for i in range(n_small):
        fd = os.open(os.path.join(d, "s", f"{i}.tmp"), os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                     0o644)
        os.write(fd, payload)
        os.close(fd)
    res["stage_create_write64k_us"] = (time.perf_counter() - t) / n_small * 1e6
    t = time.perf_counter()
    for i in range(n_small):
        p = os.path.join(d, "j", f"{i}")
        fd = os.open(p + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, rec)
        os.close(fd)
        os.rename(p + ".tmp", p)
    res["journal_create_write_rename_us"] = (time.perf_counter() - t) / n_small * 1e6
    t = time.perf_counter()
    syncfs(dfd)
    res["syncfs_small_batch_ms"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    for i in range(n_small):
        os.rename(os.path.join(d, "s", f"{i}.tmp"), os.path.join(d, "s", f"{i}"))
    res["rename_us"] = (time.perf_counter() - t) / n_small * 1e6
    t = time.perf_counter()
    syncfs(dfd)
    res["syncfs_after_renames_ms"] = (time.perf_counter() - t) * 1e3
    # small-file read (sm_output_finish reads every journal record)
    t = time.perf_counter()
    for i in range(n_small):
        with open(os.path.join(d, "j", f"{i}"), "rb") as f:
            f.read()
    res["small_read_us"] = (time.perf_counter() - t) / n_small * 1e6
    # FSYNC discipline: create + write + fsync + rename per file, directory fsync at the end
    n_f = max(20, n_small // 4)
    t = time.perf_counter()
    for i in range(n_f):
        p = os.path.join(d, "f", f"{i}")
        fd = os.open(p + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, rec)
        os.fsync(fd)
        os.close(fd)
        os.rename(p + ".tmp", p)
    ffd = os.open(os.path.join(d, "f"), os.O_RDONLY)
    os.fsync(ffd)
    os.close(ffd)
    res["create_write_fsync_rename_us"] = (time.perf_counter() - t) / n_f * 1e6
    # syncfs bandwidth: n_big files of big_bytes, dirty, then one syncfs
    blob = os.urandom(big_bytes)
    t = time.perf_counter()
    for i in range(n_big):
        with open(os.path.join(d, f"big{i}"), "wb") as f:
            f.write(blob)
    tw = time.perf_counter() - t
    res["buffered_write_MBps"] = n_big * big_bytes / tw / 1e6
    t = time.perf_counter()
    syncfs(dfd)
    dt = time.perf_counter() - t
    res["durable_write_MBps"] = n_big * big_bytes / (tw + dt) / 1e6
    res["syncfs_big_s"] = dt
    res["syncfs_MBps"] = n_big * big_bytes / dt / 1e6
    os.close(dfd)
    shutil.rmtree(d, ignore_errors=True)
    return res


def measure_fs(work, repeats, n_small=400, n_big=16, big_bytes=16 * MIB):
    rows = []
    for k in range(repeats):
        rows.append(fs_once(os.path.join(work, f"fsbench-{os.getpid()}"), n_small, n_big,
                            big_bytes))
        results.log("fs round %d: %s" % (k, {a: round(b, 1) for a, b in rows[-1].items()}))
    med = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
    return {"n_small": n_small, "n_big": n_big, "big_bytes": big_bytes, "median": med,
            "rounds": rows, "fs": machine.fs_type(work), "note": "Python os calls (about 1-3 us of "
            "interpreter overhead per call are included); the disk is shared with other work"}


def cmd_measure(a):
    work = os.path.abspath(a.dir)
    os.makedirs(work, exist_ok=True)
    stamp = results.utc_stamp()
    d = results.unique_path(a.out, f"{stamp}-model-measure", "")
    os.makedirs(d)
    res = {"what": "scaling/model.py measure", "argv": sys.argv, "started_utc": stamp,
           "machine": machine.machine(), "commit": machine.git_commit(),
           "mpi_version": (machine.run_text([a.mpirun, "--version"]) or "").split("\n")[0],
           "cc": (machine.run_text(["mpicc", "--version"]) or "").split("\n")[0],
           "mpi": measure_mpi(work, a.ranks, a.mpirun, a.repeats),
           "fs": measure_fs(work, a.repeats), "machine_end": machine.machine()}
    results.write_json(os.path.join(d, "measure.json"), res)
    print(os.path.join(d, "measure.json"))
    return 0


# ---- the model ----

def n_objects(shape, obj):
    return math.prod(-(-s // c) for s, c in zip(shape, obj))


def fit(study, meas):
    """Per-unit costs from the 1×1 runs of the strong study (medians of the report stages)."""
    rows = [r for r in study["summary"] if r["study"] == "strong" and r["ranks"] == 1 and
            r["threads"] == 1]
    if not rows:
        raise SystemExit("model: the study has no strong 1x1 point")
    b = rows[0]
    p = study["params"]
    shape = b["shape"]
    vol = study["volumes"]["x".join(map(str, shape))]
    runs = [r for r in study["runs"] if r["study"] == "strong" and r["ranks"] == 1 and
            r["threads"] == 1 and r["ok"]]
    kept = all(((r.get("report") or {}).get("memory") or {}).get("kept_input") for r in runs)
    out_bytes = statistics.median(r["report"]["output"]["bytes"] for r in runs)
    chunks = n_objects(shape, p["chunk"])
    shards = n_objects(shape, p["shard"])
    voxels = math.prod(shape)
    fs = meas["fs"]["median"]
    syncfs_Bps = fs["syncfs_MBps"] * 1e6
    # SYNCFS flush: the dirty output bytes at the disk's syncfs bandwidth, a rename per shard,
    # the second syncfs (metadata only)
    sync_s = out_bytes / syncfs_Bps + shards * fs["rename_us"] / 1e6 + \
        fs["syncfs_after_renames_ms"] / 1e3
    finish_s = shards * fs["small_read_us"] / 1e6       # rank 0 reads every journal record
    write_wall = (b["total_ms"] - b["scan_wall_ms"]) / 1e3
    passes = 1 if kept else 2
    return {
        "basis": {"study": study.get("started_utc"), "shape": shape, "chunks": chunks,
                  "shards": shards, "voxels": voxels, "out_bytes": out_bytes,
                  "in_stored_bytes": vol["stored_bytes"], "kept_input_1x1": kept,
                  "runs": len(runs), "marker_s": b["marker_s_median"]},
        # scan phase (fetch, decode, histogram, checksums) per input chunk, one thread
        "scan_s_per_chunk": (b["scan_wall_ms"] - b["open_ms"]) / 1e3 / chunks,
        "open_s": b["open_ms"] / 1e3,
        # a second decode when the input is not kept (every multi-rank run: jobs/job_convert.c)
        "decode_s_per_chunk": b["decode_ms"] / 1e3 / (chunks * passes),
        # write phase per shard, one thread, input kept: copy + normalize + encode + put (stage
        # create + journal record); the sync and the finish estimated from the fs benchmark
        "shard_s": max(0.0, write_wall - sync_s - finish_s) / shards,
        "sync_s_1x1_est": sync_s, "finish_s_1x1_est": finish_s,
        "out_bytes_per_voxel": out_bytes / voxels,
        "in_bytes_per_voxel": vol["stored_bytes"] / voxels,
        "start_plain_s": max(0.0, b["marker_s_median"] - b["total_ms"] / 1e3),
        "syncfs_Bps": syncfs_Bps,
        "syncfs_fixed_s": fs["syncfs_after_renames_ms"] / 1e3,
        "rename_s": fs["rename_us"] / 1e6,
        "small_read_s": fs["small_read_us"] / 1e6,
        "mpi": {r: {"allreduce_s": v["allreduce_us_median"] / 1e6,
                    "start_s": v["launch_to_init_s_median"]} for r, v in meas["mpi"].items()},
        "cores": study["machine"]["nproc"],
        "memory_bytes_default": 2 << 30,
    }


def predict_local(c, shape, chunk, shard, ranks, threads, single_plain=True, other_load=0.0):
    """Launch → marker on one node of c['cores'] cores, `other_load` of them busy with other
    work (MODEL.md explains each term)."""
    cores = max(1.0, c["cores"] - other_load)
    chunks = n_objects(shape, chunk)
    shards = n_objects(shape, shard)
    voxels = math.prod(shape)
    kept = ranks == 1 and voxels * 2 <= c["memory_bytes_default"] / 2
    k = max(1.0, ranks * threads / cores)                  # oversubscription stretch
    ch_thread = math.ceil(math.ceil(chunks / ranks) / threads)
    sh_thread = math.ceil(math.ceil(shards / ranks) / threads)
    t_scan = c["open_s"] + ch_thread * c["scan_s_per_chunk"] * k
    per_shard = c["shard_s"] + (0.0 if kept else c["decode_s_per_chunk"] * chunks / shards)
    t_write = sh_thread * per_shard * k
    out_bytes = c["out_bytes_per_voxel"] * voxels
    t_sync = out_bytes / c["syncfs_Bps"] + c["syncfs_fixed_s"] + shards * c["rename_s"] / ranks
    t_finish = shards * c["small_read_s"]
    mpi = c["mpi"].get(str(ranks)) or c["mpi"][max(c["mpi"], key=int)]
    t_start = c["start_plain_s"] if ranks == 1 and single_plain else mpi["start_s"]
    t_ar = mpi["allreduce_s"] if ranks > 1 else 0.0
    terms = {"start": t_start, "scan": t_scan, "allreduce": t_ar, "write": t_write,
             "sync": t_sync, "finish": t_finish}
    return sum(terms.values()), terms


def cmd_check(a):
    with open(os.path.join(a.scaling, "results.json")) as f:
        study = json.load(f)
    with open(a.measure) as f:
        meas = json.load(f)
    c = fit(study, meas)
    p = study["params"]
    base_load = next((r["other_busy_cores_median"] or 0.0) for r in study["summary"]
                     if r["study"] == "strong" and r["ranks"] == 1 and r["threads"] == 1)
    if base_load > 0.5:
        results.log(f"model: warning: other work used {base_load} cores during the 1x1 runs the "
               "costs are fitted on")
    rows = []
    for r in study["summary"]:
        load = r["other_busy_cores_median"] or 0.0
        pred, terms = predict_local(c, r["shape"], p["chunk"], p["shard"], r["ranks"],
                                    r["threads"], other_load=load)
        quiet, _ = predict_local(c, r["shape"], p["chunk"], p["shard"], r["ranks"], r["threads"])
        m = r["marker_s_median"]
        rows.append({"study": r["study"], "ranks": r["ranks"], "threads": r["threads"],
                     "shape": r["shape"], "measured_s": m, "predicted_s": round(pred, 3),
                     "predicted_quiet_s": round(quiet, 3), "other_load": load,
                     "error_pct": round((pred - m) / m * 100, 1) if m else None,
                     "terms_s": {k: round(v, 3) for k, v in terms.items()}})
    out = {"what": "scaling/model.py check", "scaling": os.path.relpath(a.scaling, REPO),
           "measure": os.path.relpath(a.measure, REPO), "fit": c, "rows": rows,
           "median_abs_error_pct": statistics.median(abs(x["error_pct"]) for x in rows
                                                     if x["error_pct"] is not None)}
    results.write_json(os.path.join(a.scaling, "fit.json"), c)
    results.write_json(os.path.join(a.scaling, "check.json"), out)
    md = ["| study | ranks × threads | volume | other load | measured s | predicted s | error | "
          "quiet-machine prediction s | start | scan | allreduce | write | sync | finish |",
          "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for x in rows:
        t = x["terms_s"]
        md.append(f"| {x['study']} | {x['ranks']}×{x['threads']} | {'x'.join(map(str, x['shape']))}"
                  f" | {x['other_load']:.2f} | "
                  + ("" if x["measured_s"] is None else f"{x['measured_s']:.2f}")
                  + f" | {x['predicted_s']:.2f} | "
                  + ("" if x["error_pct"] is None else f"{x['error_pct']:+.0f}%")
                  + f" | {x['predicted_quiet_s']:.2f} | "
                  + " | ".join(f"{t[k]:.2f}" for k in ("start", "scan", "allreduce", "write",
                                                       "sync", "finish")) + " |")
    md.append(f"\nmedian |error| {out['median_abs_error_pct']:.0f}%")
    with open(os.path.join(a.scaling, "check.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(4.2, 3.4), dpi=72)
        for s, mk in (("strong", "o"), ("weak", "s")):
            # a point without a measured time (scaling/run.py: a requeued sbatch run) is left out
            xs = [x["measured_s"] for x in rows if x["study"] == s and x["measured_s"] is not None]
            ys = [x["predicted_s"] for x in rows if x["study"] == s and x["measured_s"] is not None]
            ax.scatter(xs, ys, marker=mk, s=16, label=s)
        hi = max(max(x["measured_s"] or 0, x["predicted_s"]) for x in rows) * 1.1
        ax.plot([0, hi], [0, hi], ":", color="grey", lw=0.8)
        ax.set_xlabel("measured s", fontsize=8)
        ax.set_ylabel("predicted s", fontsize=8)
        ax.set_title("model vs measured (launch → marker)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(a.scaling, "predicted.png"), dpi=72)
        plt.close(fig)
    except ImportError:
        pass
    return 0


def project(c, a, shape, nodes):
    """Cluster projection (assumptions: MODEL.md and the options)."""
    rpn, t = a.ranks_per_node, a.threads
    R = nodes * rpn
    chunks = n_objects(shape, a.chunk)
    shards = n_objects(shape, a.shard)
    voxels = math.prod(shape)
    speed = a.core_speed
    k = max(1.0, rpn * t / a.cores_per_node)
    ch_thread = math.ceil(math.ceil(chunks / R) / t)
    sh_thread = math.ceil(math.ceil(shards / R) / t)
    in_bytes = c["in_bytes_per_voxel"] * voxels
    out_bytes = c["out_bytes_per_voxel"] * voxels
    # scan: per thread, its chunks one after the other (fetch latency + CPU), bounded below by
    # the aggregate read bandwidth (all nodes' share of the file system)
    bw_read = min(a.fs_read_GBps * 1e9, nodes * a.node_GBps * 1e9)
    t_scan = max(ch_thread * (c["scan_s_per_chunk"] / speed * k + a.fs_latency_ms / 1e3),
                 in_bytes / bw_read)
    # allreduce of the histogram: latency per step + Rabenseifner's bandwidth term
    hb = HIST_COUNT * 8
    t_ar = 0.0 if R == 1 else (a.net_latency_us / 1e6 * math.ceil(math.log2(R)) +
                               2 * (R - 1) / R * hb / (a.net_GBps * 1e9))
    # write: a rank keeps its decoded input from the scan when its share fits half of
    # limits.memory_bytes (engine/run/run_convert.c keep_plan; slab partitions: its tiles cover
    # its shards); otherwise it reads it again (a second decode; its fetch hits the cache only
    # while the rank's share of the encoded input fits it). The per-shard CPU of the fit (one
    # shard of --fit-shard voxels) scales with the shard's voxels; every shard file adds
    # --shard-fixed-ms (stage, commit rename, index, record: measured by W8, bench/many_shards/w8.py).
    kept = voxels * 2 / R <= a.memory_bytes / 2
    vox_ratio = math.prod(a.shard) / math.prod(a.fit_shard)
    per_shard = (c["shard_s"] * vox_ratio + a.shard_fixed_ms / 1e3 +
                 (0.0 if kept else c["decode_s_per_chunk"] * chunks / shards)) / speed * k
    refetch = 0.0 if kept or in_bytes / R <= a.cache_bytes else in_bytes
    bw_write = min(a.fs_write_GBps * 1e9, nodes * a.node_GBps * 1e9)
    t_write = max(sh_thread * per_shard, (out_bytes + refetch) / bw_write)
    # metadata: per shard a staged create and the commit rename (the journal is one file per
    # rank, appended in batches) through the metadata servers shared by the whole job
    t_meta = a.meta_ops_per_shard * shards / a.mds_ops_per_s
    # finish: the records (24 bytes per shard) gathered to rank 0 over the network, then rank 0
    # builds and writes the marker from them (--finish-us-per-shard, measured by W8); no file
    # is read per shard any more
    t_finish = (a.net_latency_us / 1e6 * math.ceil(math.log2(max(R, 2))) +
                24 * shards / (a.net_GBps * 1e9) + shards * a.finish_us_per_shard / 1e6)
    t_start = a.launch_s + a.launch_s_per_node * nodes
    terms = {"start": t_start, "scan": t_scan, "allreduce": t_ar, "write": t_write,
             "metadata": t_meta, "finish": t_finish}
    return sum(terms.values()), terms, {"ranks": R, "chunks": chunks, "shards": shards,
                                        "in_GB": in_bytes / 1e9, "out_GB": out_bytes / 1e9}


def cmd_project(a):
    with open(a.fit) as f:
        c = json.load(f)
    print(f"assumptions: {a.cores_per_node} cores/node, {a.ranks_per_node} ranks/node × "
          f"{a.threads} threads, core speed ×{a.core_speed}, FS read {a.fs_read_GBps} GB/s / write"
          f" {a.fs_write_GBps} GB/s aggregate, {a.node_GBps} GB/s per node, {a.mds_ops_per_s:.0f}"
          f" metadata ops/s ({a.meta_ops_per_shard} per shard), finish "
          f"{a.finish_us_per_shard} us per shard, {a.shard_fixed_ms} ms per shard file, shard "
          f"{a.shard} (fit on {a.fit_shard}), network {a.net_GBps} GB/s, "
          f"{a.net_latency_us} us latency, launch {a.launch_s} s + {a.launch_s_per_node} s/node")
    print("| volume | nodes | ranks | shards | in GB | out GB | predicted s | start | scan | "
          "allreduce | write | metadata | finish |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for vol in a.volume:
        for n in a.nodes:
            tot, terms, info = project(c, a, vol, n)
            print(f"| {'x'.join(map(str, vol))} | {n} | {info['ranks']} | {info['shards']} | "
                  f"{info['in_GB']:.1f} | {info['out_GB']:.1f} | {tot:.1f} | " +
                  " | ".join(f"{terms[k]:.2f}" for k in ("start", "scan", "allreduce", "write",
                                                         "metadata", "finish")) + " |")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="allreduce, MPI start-up and file-system costs")
    m.add_argument("--ranks", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 3, 4])
    m.add_argument("--repeats", type=int, default=3)
    m.add_argument("--mpirun", default="mpirun")
    m.add_argument("--dir", default=os.path.join(REPO, "data", "scaling", "work"),
                   help="a directory on the output disk")
    m.add_argument("--out", default=os.path.join(HERE, "results"))
    c = sub.add_parser("check", help="fit on 1x1, predict the study, compare")
    c.add_argument("--scaling", required=True, help="a scaling/run.py result directory")
    c.add_argument("--measure", required=True, help="a measure.json")
    p = sub.add_parser("project", help="project large volumes on many nodes")
    p.add_argument("--fit", required=True, help="fit.json written by check")
    dims = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    p.add_argument("--volume", type=dims, action="append", default=None)
    p.add_argument("--nodes", type=dims, default=[1, 4, 16, 64])
    p.add_argument("--chunk", type=dims, default=[64, 64, 64])
    p.add_argument("--shard", type=dims, default=[64, 256, 256])
    p.add_argument("--cores-per-node", type=int, default=32)
    p.add_argument("--ranks-per-node", type=int, default=8)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--core-speed", type=float, default=1.0,
                   help="a cluster core's speed relative to this machine's (default 1)")
    p.add_argument("--fs-read-GBps", type=float, default=20.0)
    p.add_argument("--fs-write-GBps", type=float, default=10.0)
    p.add_argument("--node-GBps", type=float, default=2.0, help="per-node FS bandwidth")
    p.add_argument("--fs-latency-ms", type=float, default=0.5, help="per object read latency")
    p.add_argument("--mds-ops-per-s", type=float, default=20000.0)
    p.add_argument("--fit-shard", type=dims, default=[64, 256, 256],
                   help="the shard shape of the fitted study (its shard_s is per such shard)")
    p.add_argument("--shard-fixed-ms", type=float, default=0.0,
                   help="fixed cost per shard file on top of the voxel-scaled CPU (W8)")
    p.add_argument("--meta-ops-per-shard", type=float, default=2.0,
                   help="metadata operations per shard (stage create, commit rename)")
    p.add_argument("--finish-us-per-shard", type=float, default=1.0,
                   help="rank 0's marker build and write per shard record (W8)")
    p.add_argument("--net-GBps", type=float, default=10.0)
    p.add_argument("--net-latency-us", type=float, default=2.0)
    p.add_argument("--launch-s", type=float, default=1.0)
    p.add_argument("--launch-s-per-node", type=float, default=0.02)
    p.add_argument("--cache-bytes", type=float, default=256 * MIB)
    p.add_argument("--memory-bytes", type=float, default=2 << 30, help="limits.memory_bytes")
    a = ap.parse_args()
    if a.cmd == "measure":
        return cmd_measure(a)
    if a.cmd == "check":
        return cmd_check(a)
    if a.volume is None:
        a.volume = [[1024, 1024, 1024], [2048, 2048, 2048], [4096, 4096, 4096]]
    return cmd_project(a)


if __name__ == "__main__":
    sys.exit(main())
