"""shardmill under mpirun (SPEC §1, docs/internals/ranks.md). One ctest per case, label `mpi`.

Usage: /usr/bin/python3 test_mpi.py --shardmill BIN --mpiexec MPIEXEC --work DIR --case CASE
Cases:
  convert_identity  a zarr-python v2 uint8 40x70x90 input (chunks 16^3, blosc), `convert` with
                    percentile normalization for ranks x threads in {1,2,3,4} x {1,2} (balanced)
                    and 3 x 1 (block): every file of every output tree (shards, zarr.json,
                    marker, journal) equals the 1x1 run's; with z-slab tiles and shards every
                    rank keeps its decoded input (report memory.kept_input_ranks, no re-read);
                    the report's histogram, checksums and percentile window equal NumPy's on
                    every run; the output checksums equal NumPy's float32 normalization.
  scan_ranks        `scan` for 1, 3 and 4 ranks: result equal to NumPy's, "ranks" and
                    timing_ms.max/mean present, metadata requests the same for 1 and 3 ranks
                    (rank 0 fetches the metadata once and broadcasts it); 4 ranks: uneven blocks.
  scan_http         `scan` over HTTP (tests/lib/shardmill_test/nginx_server.py) for 1 and 4 ranks: the
                    metadata documents are requested from nginx as often with 4 ranks as with 1
                    (counted in nginx's access log), result equal to NumPy's.
  bad_chunk         one chunk read only by rank 2 of 3 is corrupt: every rank exits 3, exactly one
                    error line, no completion marker, no hang (timeout).
  plan              `shardmill plan --json` for 1..5 ranks, both partitions: every tile and shard
                    in one contiguous run, costs equal a Python count of the chunks each box
                    touches, `balanced` runs equal the documented midpoint rule computed here,
                    and the same plan comes out of a copy of the input without its chunks (no
                    payload is read).
  progress          3 ranks, progress_interval 0: rank 0 alone prints, counts never go back and
                    end at every rank's total (aggregated, not rank 0's share); one process too;
                    --quiet prints nothing; on a terminal (script(1)) the line is redrawn live.
  killed_rank       rank 1 of 3 SIGKILLed while shards are being written: mpirun ends every rank
                    (no hang), no completion marker, verify fails; a rerun with resume under 3
                    ranks completes, verifies, and equals a clean single-process run file for file.
  around_run        what jobs/ decides without a collective of its own (issue 20), 3 ranks: a bad
                    configuration exits 2 on every rank with one error line; a --report path rank
                    0 cannot write (scan, convert: the engine's agreed prepare step) exits 2 on
                    every rank with one line naming --report, before anything is read or
                    written; a report rank 0 fails to write after a convert that succeeded
                    (--report - into /dev/full) is rank 0's exit 4 alone, one line, the others
                    exit 0 and the output is complete.
Prints one ok/FAIL line per check; exit 1 on any failure.
"""

import argparse
import filecmp
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

from shardmill_test import report_json
from shardmill_test.checks import check, summary
from shardmill_test.file_tree import tree_files
from shardmill_test.ranks import mpi_env, plain_env, rank_pids

SHAPE = (40, 70, 90)
CHUNKS = (16, 16, 16)
TIMEOUT = 60


def make_input(work):
    import zarr  # zarr-python 2.13 (Debian)

    path = os.path.join(work, "in.zarr")
    rng = np.random.default_rng(20261202)
    # not uniform, so that percentiles are not trivial
    a = np.clip(rng.normal(100, 40, size=SHAPE), 0, 255).astype(np.uint8)
    if not os.path.exists(os.path.join(path, ".zarray")):
        shutil.rmtree(path, ignore_errors=True)
        z = zarr.open(path, mode="w", shape=SHAPE, chunks=CHUNKS, dtype="u1")
        z[:] = a
    return path, a


def run(args, ranks, bin_, cwd, extra=None, stdout="-"):
    """ranks 0: no launcher (plain process); else mpirun -np ranks. Each rank's exit status goes
    to cwd/rc.<rank> through a small shell wrapper; orte_abort_on_non_zero_status=0 keeps mpirun
    from killing the other ranks when the first exits non-zero (so every rank's status is seen,
    and mpirun itself then exits 0)."""
    if ranks == 0:
        cmd = [bin_] + args
        env = plain_env()
    else:
        # stdout: "-" as mpirun's, else a file every rank's standard output goes to
        out = "" if stdout == "-" else f" >{stdout}"
        wrap = ('"$@"' + out + '; rc=$?; echo $rc > "rc.${OMPI_COMM_WORLD_RANK:-x}"; exit $rc')
        cmd = [ARGS.mpiexec, "--oversubscribe", "--mca", "orte_abort_on_non_zero_status", "0",
               "-np", str(ranks), "sh", "-c", wrap, "sh",
               bin_] + args
        env = mpi_env()
    if extra:
        env.update(extra)
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                           timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None
    return p


def write_cfg(d, text):
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "job.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def np_stats(a):
    v = a.reshape(-1).astype(np.uint64)
    i = np.arange(1, v.size + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        weighted = int(np.sum(v * i, dtype=np.uint64))
    checksum = int(np.sum(a, dtype=np.int64))
    counts = np.bincount(a.reshape(-1), minlength=256).tolist()
    return checksum, weighted, counts


def np_percentile(counts, p):
    n = sum(counts)
    need = int(np.ceil(p / 100.0 * n))
    cum = 0
    for b, c in enumerate(counts):
        cum += c
        if cum >= need and need > 0:
            return float(b)
        if need == 0:
            return 0.0
    return 256.0


def check_result(res, a, name):
    checksum, weighted, counts = np_stats(a)
    check(res["voxels"] == a.size, f"{name}: voxels {res['voxels']} == {a.size}")
    check(res["checksum"] == checksum, f"{name}: checksum == NumPy")
    check(res["weighted_checksum"] == weighted, f"{name}: weighted_checksum == NumPy")
    h = res["histogram"]
    check(h["counts"] == counts, f"{name}: histogram counts == NumPy bincount")
    check(h.get("underflow", 0) == 0 and h.get("overflow", 0) == 0 and h.get("nan", 0) == 0,
          f"{name}: no underflow/overflow/nan")


def out_checksums(a, lo, hi):
    f = a.astype(np.float32)
    out = np.clip((f - np.float32(lo)) / (np.float32(hi) - np.float32(lo)), np.float32(0),
                  np.float32(1)).astype(np.float32)
    bits = out.reshape(-1).view(np.uint32).astype(np.uint64)
    i = np.arange(1, bits.size + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        weighted = int(np.sum(bits * i, dtype=np.uint64))
    return int(np.sum(bits.astype(np.int64), dtype=np.int64)), weighted


def same_bytes(tree, ref):
    """Files of tree that are byte-identical to the file of the same path under ref."""
    return [f for f in tree_files(tree) if os.path.isfile(os.path.join(ref, f)) and
            filecmp.cmp(os.path.join(tree, f), os.path.join(ref, f), shallow=False)]


def case_convert_identity(work, inp, a):
    cfg = ("job: convert\n"
           f"input: {{store: {inp}}}\n"
           "tile: [8, 24, 40]\n"  # not chunk-aligned: `balanced` and `block` plans differ
           "normalize: {mode: percentile, lo: 1.5, hi: 99}\n"
           "output: {path: out.zarr, fsync: false}\n")
    ref = None
    checksum, weighted, counts = np_stats(a)
    lo, hi = np_percentile(counts, 1.5), np_percentile(counts, 99)
    ocs, ocw = out_checksums(a, lo, hi)
    runs = [(r, t, "balanced") for r in (1, 2, 3, 4) for t in (1, 2)] + [(3, 1, "block")]
    for ranks, threads, part in runs:
        name = f"convert {ranks}x{threads}" + (f" ({part})" if part != "balanced" else "")
        d = os.path.join(work, f"conv-{ranks}x{threads}-{part}")
        shutil.rmtree(d, ignore_errors=True)
        write_cfg(d, cfg)
        p = run(["run", "job.yaml", "--set", f"parallel.threads={threads}", "--set",
                 f"parallel.partition={part}", "--report", "report.json", "-q"],
                ranks if ranks > 1 else 0, ARGS.shardmill, d)
        if p is None:
            check(False, f"{name}: finished within {TIMEOUT} s")
            continue
        check(p.returncode == 0, f"{name}: exit 0 (got {p.returncode}: {p.stderr.strip()})")
        if p.returncode != 0:
            continue
        rep = report_json.load(os.path.join(d, "report.json"))
        check(rep["ranks"] == ranks, f"{name}: report ranks == {ranks}")
        res = rep["result"]
        check_result(res, a, name)
        nm = res["normalization"]
        check(nm["lo"] == lo and nm["hi"] == hi,
              f"{name}: percentile window [{nm['lo']}, {nm['hi']}] == NumPy [{lo}, {hi}]")
        check(res["output_checksum"] == ocs and res["output_weighted_checksum"] == ocw,
              f"{name}: output checksums == NumPy float32 window")
        tm = rep["timing_ms"]
        check("max" in tm and "mean" in tm and tm["total"] == tm["max"]["total"],
              f"{name}: timing_ms flat fields are the max, with max/mean objects")
        out = os.path.join(d, "out.zarr")
        check(os.path.exists(os.path.join(out, "shardmill.complete.json")),
              f"{name}: completion marker written")
        files = tree_files(out)
        if ref is None:
            ref = (out, files)
            # zarr.json, the shards and the marker: no journal survives a completed run
            check(len(files) >= 3 and not any(".shardmill" in f for f in files),
                  f"{name}: reference tree has {len(files)} files, no .shardmill/")
            continue
        check(files == ref[1], f"{name}: same file list as 1x1 ({len(files)} files)")
        same = set(same_bytes(out, ref[0])) >= set(files) & set(ref[1])
        check(same, f"{name}: every file byte-identical to the 1x1 run")

    # Slabs: tiles and shards are whole z planes ([8,70,90]), so every rank's tiles fill a box
    # that holds its shards' input and every rank keeps its decoded input (no re-read).
    slab = cfg.replace("tile: [8, 24, 40]", "tile: [8, 70, 90]").replace(
        "output: {path: out.zarr, fsync: false}",
        "output: {path: out.zarr, fsync: false, shard: [8, 70, 90], chunk: [8, 35, 45]}")
    ref = None
    for ranks, threads in ((1, 1), (2, 1), (3, 2), (4, 1)):
        name = f"convert slabs {ranks}x{threads}"
        d = os.path.join(work, f"slab-{ranks}x{threads}")
        shutil.rmtree(d, ignore_errors=True)
        write_cfg(d, slab)
        p = run(["run", "job.yaml", "--set", f"parallel.threads={threads}", "--report",
                 "report.json", "-q"], ranks if ranks > 1 else 0, ARGS.shardmill, d)
        if p is None or p.returncode != 0:
            check(False, f"{name}: exit 0 ({p and p.stderr.strip()})")
            continue
        rep = report_json.load(os.path.join(d, "report.json"))
        mem = rep["memory"]
        # 5 shard planes of z 8 over chunk layers of z 16 share layers: the ranks take whole
        # groups of them (planes 0-1, 2-3, 4: docs/internals/reading.md), so at most 3 ranks
        # hold shards, and each of those keeps its decoded input
        holders = min(ranks, 3)
        check(mem["kept_input"] == (holders == ranks) and mem["kept_input_ranks"] == holders and
              mem["kept_input_bytes"] == a.size,
              f"{name}: every rank with shards ({holders}) kept its decoded input, {a.size} "
              f"bytes in all ({mem})")
        # the scan's reads only, and no layer read by two ranks: 3 layers of 30 chunks, once
        check(rep["io"]["requests"]["payload"] == 90,
              f"{name}: 90 chunk reads, each chunk once, all in the scan, none re-read "
              f"({rep['io']['requests']})")
        check(rep["result"]["output_checksum"] == ocs, f"{name}: output checksum == NumPy")
        out = os.path.join(d, "out.zarr")
        files = tree_files(out)
        if ref is None:
            ref = (out, files)
            continue
        same = files == ref[1] and len(same_bytes(out, ref[0])) == len(files)
        check(same, f"{name}: every file byte-identical to the 1x1 run")


def case_scan_ranks(work, inp, a):
    cfg = f"job: scan\ninput: {{store: {inp}}}\ntile: [16, 16, 16]\n"
    meta = {}
    for ranks in (1, 3, 4):
        name = f"scan {ranks} ranks"
        d = os.path.join(work, f"scan-{ranks}")
        shutil.rmtree(d, ignore_errors=True)
        write_cfg(d, cfg)
        p = run(["run", "job.yaml", "--report", "report.json", "-q"], ranks if ranks > 1 else 0,
                ARGS.shardmill, d)
        if p is None:
            check(False, f"{name}: finished within {TIMEOUT} s")
            continue
        check(p.returncode == 0, f"{name}: exit 0 (got {p.returncode}: {p.stderr.strip()})")
        if p.returncode != 0:
            continue
        rep = report_json.load(os.path.join(d, "report.json"))
        check(rep["ranks"] == ranks, f"{name}: report ranks == {ranks}")
        check_result(rep["result"], a, name)
        check(rep["result"]["tiles"] == 3 * 5 * 6, f"{name}: tiles summed over ranks")
        check(rep["io"]["requests"]["payload"] == 90,
              f"{name}: payload requests summed over ranks == chunks ({rep['io']['requests']})")
        meta[ranks] = rep["io"]["requests"]["metadata"]
    if len(meta) == 3:
        check(meta[1] == meta[3] == meta[4],
              f"metadata requests with 3 and 4 ranks ({meta[3]}, {meta[4]}) == with 1 rank "
              f"({meta[1]})")


def case_scan_http(work, inp, a):
    from shardmill_test.nginx_server import NginxServer

    meta_names = ("zarr.json", ".zarray", ".zattrs", ".zgroup")
    served = {}
    with NginxServer(work) as srv:
        cfg = f"job: scan\ninput: {{store: {srv.url}/in.zarr}}\ntile: [16, 16, 16]\n"
        for ranks in (1, 4):
            name = f"scan over HTTP, {ranks} ranks"
            d = os.path.join(work, f"http-{ranks}")
            shutil.rmtree(d, ignore_errors=True)
            write_cfg(d, cfg)
            mark = srv.mark()
            p = run(["run", "job.yaml", "--report", "report.json", "-q"],
                    ranks if ranks > 1 else 0, ARGS.shardmill, d)
            if p is None:
                check(False, f"{name}: finished within {TIMEOUT} s")
                continue
            check(p.returncode == 0, f"{name}: exit 0 (got {p.returncode}: {p.stderr.strip()})")
            if p.returncode != 0:
                continue
            rep = report_json.load(os.path.join(d, "report.json"))
            # nginx logs a request after its response: wait for the lines the report counts
            reqs = srv.requests(since=mark, expect=sum(rep["io"]["requests"].values()),
                                timeout=10)
            meta = [r for r in reqs if r["uri"].rsplit("/", 1)[-1] in meta_names]
            served[ranks] = (len(meta), len(reqs) - len(meta))
            check_result(rep["result"], a, name)
            check(rep["io"]["requests"]["metadata"] == len(meta),
                  f"{name}: report metadata requests {rep['io']['requests']['metadata']} == "
                  f"nginx's {len(meta)}")
    if len(served) == 2:
        check(served[1][0] == served[4][0] and served[1][0] > 0,
              f"nginx served the metadata {served[4][0]} times with 4 ranks, {served[1][0]} with 1")
        check(served[1][1] == served[4][1],
              f"nginx served {served[4][1]} payload requests with 4 ranks, {served[1][1]} with 1")


def case_bad_chunk(work, inp, a):
    # 3 ranks over 90 tiles of 16^3 in C order: rank 2 scans tiles 60..89 = tile layer z = 2
    bad = os.path.join(work, "bad.zarr")
    shutil.rmtree(bad, ignore_errors=True)
    shutil.copytree(inp, bad)
    with open(os.path.join(bad, "2.2.3"), "wb") as f:
        f.write(b"\x02\x01\x21\x01" + b"this is not a blosc chunk" * 8)
    for job in ("scan", "convert"):
        name = f"bad chunk ({job}, 3 ranks)"
        d = os.path.join(work, f"bad-{job}")
        shutil.rmtree(d, ignore_errors=True)
        cfg = (f"job: {job}\ninput: {{store: {bad}}}\ntile: [16, 16, 16]\n"
               + ("output: {path: out.zarr, fsync: false}\n" if job == "convert" else ""))
        write_cfg(d, cfg)
        p = run(["run", "job.yaml", "--report", "report.json", "-q"], 3, ARGS.shardmill, d)
        check(p is not None, f"{name}: no hang (finished within {TIMEOUT} s)")
        if p is None:
            continue
        rcs = {}
        for r in range(3):
            f = os.path.join(d, f"rc.{r}")
            rcs[r] = open(f).read().strip() if os.path.exists(f) else None
        check(all(v == "3" for v in rcs.values()), f"{name}: every rank exits 3 ({rcs})")
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("shardmill: error:")]
        check(len(lines) == 1, f"{name}: exactly one error line ({lines})")
        check(len(lines) == 1 and "2.2.3" in lines[0], f"{name}: the error names the chunk")
        if job == "convert":
            check(not os.path.exists(os.path.join(d, "out.zarr", "shardmill.complete.json")),
                  f"{name}: no completion marker")
        check(not os.path.exists(os.path.join(d, "report.json")), f"{name}: no report")


def rank_codes(d, ranks):
    out = {}
    for r in range(ranks):
        f = os.path.join(d, f"rc.{r}")
        out[r] = open(f).read().strip() if os.path.exists(f) else None
    return out


def case_around_run(work, inp, a):
    jobs = {"scan": f"job: scan\ninput: {{store: {inp}}}\ntile: [16, 16, 16]\n",
            "convert": (f"job: convert\ninput: {{store: {inp}}}\n"
                        "output: {path: out.zarr, fsync: false}\n")}
    # a configuration every rank refuses: one line, exit 2 everywhere, MPI never started
    d = os.path.join(work, "bad-config")
    shutil.rmtree(d, ignore_errors=True)
    write_cfg(d, jobs["scan"] + "tiel: [16, 16, 16]\n")
    p = run(["run", "job.yaml", "-q"], 3, ARGS.shardmill, d)
    check(p is not None, f"bad config: no hang (finished within {TIMEOUT} s)")
    if p is not None:
        rcs = rank_codes(d, 3)
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("shardmill: error:")]
        check(all(v == "2" for v in rcs.values()), f"bad config: every rank exits 2 ({rcs})")
        check(len(lines) == 1 and "tiel" in lines[0],
              f"bad config: one error line naming the key ({lines})")
    for job, cfg in jobs.items():
        # --report where rank 0 cannot write: the prepare step, agreed before any work
        name = f"--report not writable ({job})"
        d = os.path.join(work, f"bad-report-{job}")
        shutil.rmtree(d, ignore_errors=True)
        write_cfg(d, cfg)
        p = run(["run", "job.yaml", "-q", "--report", "job.yaml/r.json"], 3, ARGS.shardmill, d)
        check(p is not None, f"{name}: no hang")
        if p is None:
            continue
        rcs = rank_codes(d, 3)
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("shardmill: error:")]
        check(all(v == "2" for v in rcs.values()), f"{name}: every rank exits 2 ({rcs})")
        check(len(lines) == 1 and "--report" in lines[0] and "job.yaml/r.json" in lines[0],
              f"{name}: one error line naming --report and the path ({lines})")
        check(not os.path.exists(os.path.join(d, "out.zarr")), f"{name}: no output created")
    # the report rank 0 cannot write once the run succeeded: rank 0's failure alone
    name = "report into /dev/full (convert)"
    d = os.path.join(work, "full-report")
    shutil.rmtree(d, ignore_errors=True)
    write_cfg(d, jobs["convert"])
    p = run(["run", "job.yaml", "-q", "--report", "-"], 3, ARGS.shardmill, d,
            stdout="/dev/full")
    check(p is not None, f"{name}: no hang")
    if p is not None:
        rcs = rank_codes(d, 3)
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("shardmill: error:")]
        check(rcs == {0: "4", 1: "0", 2: "0"}, f"{name}: rank 0 exits 4, the others 0 ({rcs})")
        check(len(lines) == 1 and "standard output" in lines[0],
              f"{name}: one error line naming standard output ({lines})")
        check(os.path.exists(os.path.join(d, "out.zarr", "shardmill.complete.json")),
              f"{name}: the output is complete (marker)")


def box_cost(off, shape, chunks, elem=1):
    units = 1
    for o, n, c in zip(off, shape, chunks):
        units *= (o + n - 1) // c - o // c + 1
    return units * elem * int(np.prod(chunks))


def boxes(roi_off, roi_shape, tile):
    grid = [-(-n // t) for n, t in zip(roi_shape, tile)]
    for idx in np.ndindex(*grid):
        off = [o + i * t for o, i, t in zip(roi_off, idx, tile)]
        shp = [min(t, o0 + n - o) for t, o, o0, n in zip(tile, off, roi_off, roi_shape)]
        yield off, shp


def group_shape(shard, chunks, roi_shape):
    """docs/internals/reading.md: shards that share an input chunk go to one rank as a group of
    lcm(shard, chunk) / shard shards per axis (all of the axis when it has fewer)."""
    out = []
    for s, c, n in zip(shard, chunks, roi_shape):
        r = 1 if s % c == 0 else math.lcm(s, c) // s
        out.append(s * min(r, -(-n // s)))
    return out


def expected_balanced(costs, n):
    """The documented rule: tile i goes to rank floor((prefix_i + cost_i / 2) * n / total)."""
    total, prefix, owner = sum(costs), 0, []
    for c in costs:
        owner.append(min(n - 1, (2 * prefix + c) * n // (2 * total)))
        prefix += c
    return [owner.count(r) for r in range(n)]


def case_plan(work, inp, a):
    bare = os.path.join(work, "bare.zarr")  # metadata only: a plan must not need any chunk
    shutil.rmtree(bare, ignore_errors=True)
    os.makedirs(bare)
    shutil.copy(os.path.join(inp, ".zarray"), bare)
    roi_off, roi_shape, tile, shard = [1, 2, 3], [37, 61, 83], [8, 24, 40], [8, 32, 32]
    for store in (inp, bare):
        d = os.path.join(work, "plan-" + os.path.basename(store))
        cfg = write_cfg(d, f"job: convert\ninput: {{store: {store}}}\n"
                           f"roi: {{offset: {roi_off}, shape: {roi_shape}}}\ntile: {tile}\n"
                           f"output: {{path: out.zarr, shard: {shard}, chunk: [2, 16, 16]}}\n")
        for part in ("balanced", "block"):
            for n in (1, 2, 3, 5):
                name = f"plan {os.path.basename(store)} {part} {n} ranks"
                p = subprocess.run([ARGS.shardmill, "plan", cfg, "--ranks", str(n), "--json",
                                    "--set", f"parallel.partition={part}"],
                                   capture_output=True, text=True, timeout=TIMEOUT)
                check(p.returncode == 0, f"{name}: exit 0 ({p.stderr.strip()})")
                if p.returncode != 0:
                    continue
                plan = json.loads(p.stdout)
                # [8,32,32] shards over 16^3 chunks share chunk layers: both phases of the
                # convert go group by group, [16,32,32] groups, and the runs count groups
                gshape = group_shape(shard, CHUNKS, roi_shape)
                for key, shape in (("tiles", tile), ("shards", shard)):
                    ph = plan[key]
                    grouped = ph.get("groups")
                    check(grouped is not None and grouped["shape"] == gshape,
                          f"{name}: {key} split as groups of {gshape} ({grouped})")
                    shape = gshape if grouped is not None else shape
                    costs = [box_cost(o, s_, CHUNKS) for o, s_ in boxes(roi_off, roi_shape, shape)]
                    items = grouped["items"] if grouped is not None else ph["items"]
                    ranks = ph["ranks"]
                    nxt, ok_cover, ok_cost = 0, True, True
                    for r in ranks:
                        if r["count"]:
                            ok_cover &= r["first"] == nxt
                            nxt = r["first"] + r["count"]
                        ok_cost &= r["cost_bytes"] == sum(costs[r["first"]:r["first"] + r["count"]])
                    check(ok_cover and nxt == len(costs) == items,
                          f"{name}: {key} covered once by contiguous runs ({len(costs)})")
                    check(ok_cost, f"{name}: {key} costs == the chunks each box touches")
                    counts = [r["count"] for r in ranks]
                    want = (expected_balanced(costs, n) if part == "balanced" else
                            [len(costs) // n + (1 if r < len(costs) % n else 0) for r in range(n)])
                    check(counts == want, f"{name}: {key} counts {counts} == {want}")
                if store == inp and part == "balanced" and n == 3:
                    ref = p.stdout
                if store == bare and part == "balanced" and n == 3:
                    same = json.loads(ref)["shards"] == plan["shards"]
                    check(same, f"{name}: same plan without any chunk on disk (no payload read)")
    p = subprocess.run([ARGS.shardmill, "plan", cfg, "--ranks", "0"], capture_output=True,
                       text=True, timeout=TIMEOUT)
    check(p.returncode == 2 and "--ranks" in p.stderr, f"plan --ranks 0: exit 2 ({p.stderr!r})")


def progress_lines(text, phase):
    return [ln for ln in text.replace("\r", "\n").splitlines()
            if ln.startswith(f"shardmill: convert {phase}:")]


def case_progress(work, inp, a):
    cfg = (f"job: convert\ninput: {{store: {inp}}}\ntile: [16, 16, 16]\nprogress_interval: 0\n"
           "output: {path: out.zarr, fsync: false, shard: [8, 32, 32], chunk: [2, 16, 16]}\n")
    total = 5 * 3 * 3  # shards [8,32,32] over 40x70x90
    for ranks in (3, 0):
        name = f"progress, {ranks or 1} rank(s)"
        d = os.path.join(work, f"progress-{ranks}")
        shutil.rmtree(d, ignore_errors=True)
        write_cfg(d, cfg)
        p = run(["run", "job.yaml", "--report", "report.json"], ranks, ARGS.shardmill, d)
        if p is None or p.returncode != 0:
            check(False, f"{name}: exit 0 ({p and p.stderr.strip()})")
            continue
        lines = progress_lines(p.stderr, "write")
        nums = [int(ln.split(": ")[2].split("/")[0]) for ln in lines]
        check(len(lines) >= 2, f"{name}: {len(lines)} write progress lines")
        check(nums == sorted(nums), f"{name}: shards done never go back ({nums})")
        check(bool(lines) and lines[-1].split(": ")[2].startswith(f"{total}/{total} shards (100%)")
              and " MB/s, " in lines[-1] and lines[-1].endswith(" s"),
              f"{name}: the last line is every rank's total ({lines[-1:] })")
        check(all(ln.count(f"/{total} shards") == 1 for ln in lines),
              f"{name}: every line shows done/{total}")
        scan = progress_lines(p.stderr, "scan")
        # scale: one pass (the write phase scans the input of each shard), no scan phase
        check(not scan, f"{name}: one pass, no separate scan phase ({scan[-1:]})")
        if ranks:
            others = [ln for ln in p.stderr.splitlines() if ln.startswith("shardmill:")]
            check(len(others) == len(lines) + len(scan), f"{name}: only rank 0 prints")
        shutil.rmtree(os.path.join(d, "out.zarr"))
        p = run(["run", "job.yaml", "--quiet"], ranks, ARGS.shardmill, d)
        check(p is not None and p.returncode == 0 and "shardmill:" not in p.stderr,
              f"{name}: --quiet prints no progress ({p and p.stderr[:200]!r})")
    d = os.path.join(work, "progress-tty")
    shutil.rmtree(d, ignore_errors=True)
    write_cfg(d, cfg)
    cmd = f"{ARGS.shardmill} run job.yaml --report report.json 2>&1 >/dev/null"
    p = subprocess.run(["script", "-qec", cmd, "/dev/null"], cwd=d, capture_output=True,
                       timeout=TIMEOUT, env=plain_env())
    out = p.stdout.decode(errors="replace")
    check(p.returncode == 0 and "\rshardmill: convert write:" in out and "\x1b[K" in out,
          f"progress on a terminal: a live line redrawn with CR and erase ({out[:120]!r})")


def case_killed_rank(work, inp, a):
    import zarr  # zarr-python 2.13 (Debian)

    big = os.path.join(work, "big.zarr")
    shape = (64, 256, 256)
    if not os.path.exists(os.path.join(big, ".zarray")):
        rng = np.random.default_rng(7)
        z = zarr.open(big, mode="w", shape=shape, chunks=(16, 64, 64), dtype="u1")
        z[:] = rng.integers(0, 256, size=shape, dtype=np.uint8)
    total = (64 // 8) * (256 // 32) * (256 // 32)
    cfg = (f"job: convert\ninput: {{store: {big}}}\ntile: [16, 64, 64]\n"
           "normalize: {mode: percentile, lo: 2, hi: 98}\nparallel: {threads: 1}\n"
           # per-file fsync + rename, so the shards put before the kill stay and resume keeps
           # them (with syncfs the staged shards of an unfinished run are never renamed)
           "output: {path: out.zarr, exists: resume, sync: fsync, shard: [8, 32, 32], "
           "chunk: [2, 16, 16]}\n")
    clean = os.path.join(work, "killed-clean")
    shutil.rmtree(clean, ignore_errors=True)
    write_cfg(clean, cfg)
    p = run(["run", "job.yaml", "-q"], 0, ARGS.shardmill, clean)
    check(p is not None and p.returncode == 0, "clean single-process run exits 0")
    d = os.path.join(work, "killed")
    shutil.rmtree(d, ignore_errors=True)
    write_cfg(d, cfg)
    shards_dir = os.path.join(d, "out.zarr", "c")
    cmd = [ARGS.mpiexec, "--oversubscribe", "-np", "3", ARGS.shardmill, "run", "job.yaml", "-q"]
    proc = subprocess.Popen(cmd, cwd=d, env=mpi_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    killed, seen = None, 0
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and proc.poll() is None:
        # one journal file per rank now: count the shards renamed into place instead
        seen = sum(len(fs) for _, _, fs in os.walk(shards_dir)) if os.path.isdir(shards_dir) else 0
        if seen >= total // 10:
            pid = rank_pids(proc.pid).get(1)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed = pid
                break
        time.sleep(0.002)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        check(False, "mpirun ended every rank after one was killed (no hang)")
        return
    check(killed is not None, f"rank 1 (pid {killed}) SIGKILLed mid-write ({seen} of {total} "
                              "shards written)")
    check(proc.returncode != 0, f"mpirun exits non-zero after the kill ({proc.returncode})")
    out_dir = os.path.join(d, "out.zarr")
    check(not os.path.exists(os.path.join(out_dir, "shardmill.complete.json")),
          "no completion marker after the kill")
    r = subprocess.run([ARGS.shardmill, "verify", out_dir], capture_output=True, text=True)
    check(r.returncode != 0, f"verify of the killed output fails ({r.returncode})")
    p = run(["run", "job.yaml", "-q", "--report", "report.json"], 3, ARGS.shardmill, d)
    check(p is not None and p.returncode == 0,
          f"rerun with resume under 3 ranks exits 0 ({p and p.stderr.strip()[-300:]})")
    if p is None or p.returncode != 0:
        return
    rep = report_json.load(os.path.join(d, "report.json"))
    written = rep["output"]["written"]
    check(0 < written < total, f"resume rewrote {written} of {total} shards, not all")
    r = subprocess.run([ARGS.shardmill, "verify", out_dir], capture_output=True, text=True)
    check(r.returncode == 0, f"verify of the resumed output ok ({r.stderr.strip()})")
    ref = os.path.join(clean, "out.zarr")
    files, want = tree_files(out_dir), tree_files(ref)
    check(files == want, f"resumed tree has the clean run's {len(want)} files ({len(files)})")
    same = same_bytes(out_dir, ref)
    check(len(same) == len(want), f"{len(same)} of {len(want)} files byte-identical to the clean "
                                  f"run ({sorted(set(want) - set(same))[:4]})")


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", required=True,
                    choices=["convert_identity", "scan_ranks", "scan_http", "bad_chunk", "plan",
                             "progress", "killed_rank", "around_run"])
    ARGS = ap.parse_args()
    work = os.path.join(os.path.abspath(ARGS.work), ARGS.case)
    os.makedirs(work, exist_ok=True)
    inp, a = make_input(work)
    {"convert_identity": case_convert_identity, "scan_ranks": case_scan_ranks,
     "scan_http": case_scan_http, "bad_chunk": case_bad_chunk, "plan": case_plan,
     "progress": case_progress, "killed_rank": case_killed_rank,
     "around_run": case_around_run}[ARGS.case](work, inp, a)
    return summary()


ARGS = None
if __name__ == "__main__":
    sys.exit(main())
