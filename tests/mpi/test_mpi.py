"""shardmill under mpirun (SPEC §1, docs/internals/ranks.md). One ctest per case, label `mpi`.

Usage: /usr/bin/python3 test_mpi.py --shardmill BIN --mpiexec MPIEXEC --work DIR --case CASE
Cases:
  convert_identity  a zarr-python v2 uint8 40x70x90 input (chunks 16^3, blosc), `convert` with
                    percentile normalization for ranks x threads in {1,2,3} x {1,2}: every file of
                    every output tree (shards, zarr.json, marker, journal) equals the 1x1 run's;
                    the report's histogram, checksums and percentile window equal NumPy's on
                    every run; the output checksums equal NumPy's float32 normalization.
  scan_ranks        `scan` for 1, 3 and 4 ranks: result equal to NumPy's, "ranks" and
                    timing_ms.max/mean present, metadata requests the same for 1 and 3 ranks
                    (rank 0 fetches the metadata once and broadcasts it); 4 ranks: uneven blocks.
  scan_http         `scan` over HTTP (tests/helpers/nginx_server.py) for 1 and 3 ranks: the
                    metadata documents are requested from nginx as often with 3 ranks as with 1
                    (counted in nginx's access log), result equal to NumPy's.
  bad_chunk         one chunk read only by rank 2 of 3 is corrupt: every rank exits 3, exactly one
                    error line, no completion marker, no hang (timeout).
Prints one ok/FAIL line per check; exit 1 on any failure.
"""

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys

import numpy as np

SHAPE = (40, 70, 90)
CHUNKS = (16, 16, 16)
TIMEOUT = 60

failures = 0


def check(ok, what):
    global failures
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures += 1


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


def mpi_env():
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMP_NUM_THREADS": "1"})
    if env.get("LSAN_OPTIONS"):
        # ASan builds: Open MPI has no frame pointers, so LeakSanitizer's fast unwinder cuts its
        # allocation stacks before the libmpi/libopen-pal frames that tests/sanitizers/lsan.supp
        # names; the slow unwinder keeps them (and the suppressions then apply).
        env["LSAN_OPTIONS"] += ":fast_unwind_on_malloc=0"
    return env


def run(args, ranks, bin_, cwd, extra=None):
    """ranks 0: no launcher (plain process); else mpirun -np ranks. Each rank's exit status goes
    to cwd/rc.<rank> through a small shell wrapper; orte_abort_on_non_zero_status=0 keeps mpirun
    from killing the other ranks when the first exits non-zero (so every rank's status is seen,
    and mpirun itself then exits 0)."""
    if ranks == 0:
        cmd = [bin_] + args
        env = dict(os.environ)
        for k in list(env):
            if k.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_")):
                del env[k]
    else:
        wrap = ('"$@"; rc=$?; echo $rc > "rc.${OMPI_COMM_WORLD_RANK:-x}"; exit $rc')
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


def tree_files(root):
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def case_convert_identity(work, inp, a):
    cfg = ("job: convert\n"
           f"input: {{store: {inp}}}\n"
           "tile: [16, 16, 16]\n"
           "normalize: {mode: percentile, lo: 1.5, hi: 99}\n"
           "output: {path: out.zarr, fsync: false}\n")
    ref = None
    checksum, weighted, counts = np_stats(a)
    lo, hi = np_percentile(counts, 1.5), np_percentile(counts, 99)
    ocs, ocw = out_checksums(a, lo, hi)
    for ranks in (1, 2, 3):
        for threads in (1, 2):
            name = f"convert {ranks}x{threads}"
            d = os.path.join(work, f"conv-{ranks}x{threads}")
            shutil.rmtree(d, ignore_errors=True)
            write_cfg(d, cfg)
            p = run(["run", "job.yaml", "--set", f"parallel.threads={threads}", "--report",
                     "report.json", "-q"], ranks if ranks > 1 else 0, ARGS.shardmill, d)
            if p is None:
                check(False, f"{name}: finished within {TIMEOUT} s")
                continue
            check(p.returncode == 0, f"{name}: exit 0 (got {p.returncode}: {p.stderr.strip()})")
            if p.returncode != 0:
                continue
            rep = json.load(open(os.path.join(d, "report.json")))
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
                check(len(files) > 3, f"{name}: reference tree has {len(files)} files")
                continue
            check(files == ref[1], f"{name}: same file list as 1x1 ({len(files)} files)")
            same = all(filecmp.cmp(os.path.join(out, f), os.path.join(ref[0], f), shallow=False)
                       for f in files if f in ref[1])
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
        rep = json.load(open(os.path.join(d, "report.json")))
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
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
    from nginx_server import NginxServer  # noqa: E402

    meta_names = ("zarr.json", ".zarray", ".zattrs", ".zgroup")
    served = {}
    with NginxServer(work) as srv:
        cfg = f"job: scan\ninput: {{store: {srv.url}/in.zarr}}\ntile: [16, 16, 16]\n"
        for ranks in (1, 3):
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
            reqs = srv.requests(since=mark)
            meta = [r for r in reqs if r["uri"].rsplit("/", 1)[-1] in meta_names]
            served[ranks] = (len(meta), len(reqs) - len(meta))
            rep = json.load(open(os.path.join(d, "report.json")))
            check_result(rep["result"], a, name)
            check(rep["io"]["requests"]["metadata"] == len(meta),
                  f"{name}: report metadata requests {rep['io']['requests']['metadata']} == "
                  f"nginx's {len(meta)}")
    if len(served) == 2:
        check(served[1][0] == served[3][0] and served[1][0] > 0,
              f"nginx served the metadata {served[3][0]} times with 3 ranks, {served[1][0]} with 1")
        check(served[1][1] == served[3][1],
              f"nginx served {served[3][1]} payload requests with 3 ranks, {served[1][1]} with 1")


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


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", required=True,
                    choices=["convert_identity", "scan_ranks", "scan_http", "bad_chunk"])
    ARGS = ap.parse_args()
    work = os.path.join(os.path.abspath(ARGS.work), ARGS.case)
    os.makedirs(work, exist_ok=True)
    inp, a = make_input(work)
    {"convert_identity": case_convert_identity, "scan_ranks": case_scan_ranks,
     "scan_http": case_scan_http, "bad_chunk": case_bad_chunk}[ARGS.case](work, inp, a)
    print(f"{failures} failure(s)")
    return 1 if failures else 0


ARGS = None
if __name__ == "__main__":
    sys.exit(main())
