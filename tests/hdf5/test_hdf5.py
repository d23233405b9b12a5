"""The HDF5 export of `convert` (SPEC §2 "Export", §6, §7; docs/internals/export.md), end to end.
One ctest per case, label `hdf5`. Inputs are written at test time by zarr-python 2.13; the export
is read by h5py (Debian python3-h5py, HDF5 1.10.8) and compared value by value, bit for bit, with
what zarrita.js 0.7.5 reads from the Zarr output of the same run, and with the NumPy oracle of
SPEC §5 (tests/lib/shardmill_test/spec_oracle.py).

Usage: /usr/bin/python3 test_hdf5.py --shardmill BIN --mpiexec MPIEXEC --node NODE --work DIR
                                     --case CASE [--ranks N] [--config configs/convert-ct-hdf5.yaml]
Cases:
  values        uint8 [40,70,90] (chunks 16^3, blosc), ROI [1,2,3]+[37,66,85] (edge shards),
                percentile normalization, deflate 0 and 6, as a plain process (--ranks 0: sec2)
                or under mpirun -np N (MPI-IO): h5py == zarrita.js == NumPy bit for bit; dtype,
                shape, chunks, filter, fill value; /histogram and its attributes == NumPy; the
                normalization and provenance attributes == the report, zarr.json and
                `shardmill --version`; report timing_ms.export and the export object; marker;
                no temporary file; zarr.json identical to a run without the export.
  config        configs/convert-ct-hdf5.yaml on an int16 input (plain, then 3 ranks with both
                exists policies set to overwrite): values, deflate 4, the HDF5 file replaced.
  failures      with --ranks 0 or N: the export directory missing, the path existing, overwrite
                of a file that is not HDF5, a '..' path, a path inside the output, a read-only
                directory (root: a read-only tmpfs; else skipped): the SPEC §4 exit status on
                every rank, exactly one error line naming the path, no marker, nothing at the
                export path (an existing file untouched) and no temporary file.
  full_disk     (root; else exit 77) the export on a 300 KiB tmpfs fails in the middle of its
                writes, plain and under 3 ranks, deflate 0 and 6: exit 4, one error line, no
                marker, no file at the export path, no temporary file, the Zarr shards kept.
Prints one ok/FAIL line per check; exit 1 on any failure.
"""

import argparse
import json
import os
import shutil
import subprocess
import time

import h5py
import numpy as np

from shardmill_test import spec_oracle
from shardmill_test import runner as cc
from shardmill_test.checks import Checks
from shardmill_test.ranks import mpi_env

HERE = os.path.dirname(os.path.abspath(__file__))


SHAPE = (40, 70, 90)
CHUNKS = (16, 16, 16)
ROI_OFF = [1, 2, 3]
ROI_SHAPE = [37, 66, 85]
PCT = (1.5, 99)
TIMEOUT = 120
ARGS = None
C = Checks("hdf5")
check = C.check


# ---- inputs ----

def make_input(work, name, dtype, seed):
    import zarr  # zarr-python 2.13 (Debian)

    path = os.path.join(work, name)
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.uint8:
        a = np.clip(rng.normal(100, 40, size=SHAPE), 0, 255).astype(np.uint8)
    else:  # a CT-like int16 volume: air, tissue, bone
        a = np.clip(rng.normal(40, 300, size=SHAPE), -1024, 3000).astype(np.int16)
    if not os.path.exists(os.path.join(path, ".zarray")):
        shutil.rmtree(path, ignore_errors=True)
        z = zarr.open(path, mode="w", shape=SHAPE, chunks=CHUNKS, dtype=dtype)
        z[:] = a
    return path, a


# ---- running shardmill ----


def run_sm(args, ranks, cwd):
    """ranks 0: a plain process (no launcher: no MPI_Init). Else mpirun -np ranks, each rank's
    exit status in cwd/rc.<rank> (a rank killed by MPI_Abort writes none). Returns (proc or None
    on timeout, {rank: status})."""
    for f in os.listdir(cwd):
        if f.startswith("rc."):
            os.unlink(os.path.join(cwd, f))
    if ranks == 0:
        cmd = [ARGS.shardmill] + args
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_"))}
    else:
        wrap = '"$@"; rc=$?; echo $rc > "rc.${OMPI_COMM_WORLD_RANK:-x}"; exit $rc'
        cmd = [ARGS.mpiexec, "--oversubscribe", "--mca", "orte_abort_on_non_zero_status", "0",
               "-np", str(ranks), "sh", "-c", wrap, "sh", ARGS.shardmill] + args
        env = mpi_env()
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                           timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, {}
    rcs = {}
    for r in range(max(ranks, 1)):
        f = os.path.join(cwd, f"rc.{r}")
        if os.path.exists(f):
            rcs[r] = int(open(f).read().strip())
    if ranks == 0:
        rcs[0] = p.returncode
    return p, rcs


def error_lines(p):
    return [ln for ln in p.stderr.splitlines() if ln.startswith("shardmill: error:")]


def write_cfg(d, inp, export, extra=""):
    os.makedirs(d, exist_ok=True)
    exp = ""
    if export is not None:
        exp = "export:\n  hdf5:\n" + "".join(f"    {k}: {v}\n" for k, v in export.items())
    text = ("job: convert\n"
            f"input: {{store: {inp}}}\n"
            f"roi: {{offset: {ROI_OFF}, shape: {ROI_SHAPE}}}\n"
            "tile: [16, 16, 16]\n"
            f"normalize: {{mode: percentile, lo: {PCT[0]}, hi: {PCT[1]}}}\n"
            # shards small enough that every rank of 3 writes several (SPEC §2 auto: one)
            "output: {path: out.zarr, fsync: false, shard: [8, 32, 32], chunk: [2, 16, 16]}\n"
            + exp + extra)
    with open(os.path.join(d, "job.yaml"), "w") as f:
        f.write(text)


def tmp_files(d):
    return [f for f in os.listdir(d) if f.endswith(".shardmill-tmp")]


# ---- the oracle and the readers ----

def oracle(a, off, shape):
    roi = a[tuple(slice(o, o + s) for o, s in zip(off, shape))]
    bins, lo, hi = spec_oracle.default_hist(a.dtype)
    counts, under, over, nan = spec_oracle.histogram(roi, bins, lo, hi)
    plo = spec_oracle.percentile(counts, under, over, lo, hi, PCT[0])
    phi = spec_oracle.percentile(counts, under, over, lo, hi, PCT[1])
    return {"roi": roi, "bins": bins, "range": (lo, hi), "counts": counts, "under": under,
            "over": over, "nan": nan, "lo": float(plo), "hi": float(phi),
            "values": spec_oracle.normalize(roi, "window", lo=plo, hi=phi)}


def zarrita_values(label, zarr_path, shape, work):
    """The whole output as zarrita.js 0.7.5 reads it (float32, C order)."""
    out = os.path.join(work, "zarrita.bin")
    job = {"read": [{"path": os.path.abspath(zarr_path), "offset": [0] * len(shape),
                     "shape": list(shape), "out": out}]}
    ok, text = cc.zarrita(ARGS.node, job, work)
    if not check(f"{label}: zarrita.js read the Zarr output", ok, text[-1500:]):
        return None
    return np.fromfile(out, dtype="<f4").reshape(shape)


def check_export(label, d, a, deflate, ranks, chunk=(8, 32, 32), dataset="/data",
                 h5name="ct.h5", off=ROI_OFF, shape=ROI_SHAPE, report="report.json",
                 zarr_name="out.zarr"):
    want = oracle(a, off, shape)
    h5path = os.path.join(d, h5name)
    check(f"{label}: completion marker written",
          os.path.exists(os.path.join(d, zarr_name, "shardmill.complete.json")))
    check(f"{label}: no temporary file left", tmp_files(os.path.dirname(h5path)) == [],
          tmp_files(os.path.dirname(h5path)))
    if not check(f"{label}: export file exists", os.path.isfile(h5path)):
        return
    zr = zarrita_values(label, os.path.join(d, zarr_name), shape, d)
    with h5py.File(h5path, "r") as f:
        ds = f[dataset]
        check(f"{label}: dataset float32 little-endian {tuple(shape)}",
              ds.dtype == np.dtype("<f4") and ds.shape == tuple(shape), (ds.dtype, ds.shape))
        want_chunk = tuple(min(c, s) for c, s in zip(chunk, shape))
        check(f"{label}: chunks {want_chunk}", ds.chunks == want_chunk, ds.chunks)
        if deflate:
            check(f"{label}: gzip filter level {deflate}",
                  ds.compression == "gzip" and ds.compression_opts == deflate,
                  (ds.compression, ds.compression_opts))
        else:
            check(f"{label}: no filter", ds.compression is None and not ds.shuffle,
                  ds.compression)
        check(f"{label}: fill value 0", ds.fillvalue == 0, ds.fillvalue)
        hv = ds[...]
        if zr is not None:
            check(f"{label}: h5py == zarrita.js, bit for bit ({hv.size} values)",
                  spec_oracle.same_bits(hv, zr), spec_oracle.first_diff(hv, zr))
        check(f"{label}: h5py == NumPy float32 window, bit for bit",
              spec_oracle.same_bits(hv, want["values"]), spec_oracle.first_diff(hv, want["values"]))
        at = ds.attrs
        check(f"{label}: normalization attributes == NumPy percentiles",
              at["normalization_mode"] == "percentile" and at["normalization_lo"] == want["lo"]
              and at["normalization_hi"] == want["hi"]
              and list(at["normalization_percentiles"]) == [PCT[0], PCT[1]],
              dict(at))
        version, commit = cc.engine_version(ARGS.shardmill)
        check(f"{label}: engine version and commit == shardmill --version",
              at["shardmill_version"] == version and at["shardmill_commit"] == commit,
              (at["shardmill_version"], at["shardmill_commit"], version, commit))
        zj = json.load(open(os.path.join(d, zarr_name, "zarr.json")))["attributes"]["shardmill"]
        check(f"{label}: config_sha256 == zarr.json's",
              at["config_sha256"] == zj["config_sha256"], (at["config_sha256"], zj))
        check(f"{label}: provenance == zarr.json's shardmill attributes",
              json.loads(at["provenance"]) == zj, at["provenance"][:300])
        check(f"{label}: input and ROI attributes",
              at["input_store"] == zj["input"]["store"]
              and list(at["roi_offset"]) == list(off) and list(at["roi_shape"]) == list(shape)
              and at["roi_offset"].dtype == np.uint64, dict(at))
        check(f"{label}: zarr_output attribute", at["zarr_output"] == zarr_name, at["zarr_output"])
        h = f["/histogram"]
        check(f"{label}: /histogram uint64 counts == NumPy bincount",
              h.dtype == np.dtype("<u8") and np.array_equal(h[...], want["counts"]),
              (h.dtype, h.shape))
        ha = h.attrs
        check(f"{label}: /histogram bins == {want['bins']}", ha["bins"] == want["bins"],
              ha["bins"])
        check(f"{label}: /histogram range == {want['range']}",
              list(ha["range"]) == [float(want["range"][0]), float(want["range"][1])],
              ha["range"])
        check(f"{label}: /histogram underflow/overflow/nan == NumPy",
              (ha["underflow"], ha["overflow"], ha["nan"]) ==
              (want["under"], want["over"], want["nan"]), dict(ha))
        check(f"{label}: /histogram voxels == ROI size",
              ha["voxels"] == int(np.prod(shape)), ha["voxels"])
    rep = json.load(open(os.path.join(d, report)))
    ex = rep.get("export", {})
    check(f"{label}: report export object",
          ex.get("path") == h5name and ex.get("bytes") == os.path.getsize(h5path)
          and ex.get("dataset") == dataset and ex.get("chunk") == list(want_chunk)
          and ex.get("deflate") == deflate
          and ex.get("driver") == ("mpio" if ranks > 1 else "sec2"), ex)
    tm = rep["timing_ms"]
    check(f"{label}: timing_ms.export > 0 with max and mean",
          tm.get("export", 0) > 0 and tm["max"]["export"] == tm["export"]
          and tm["mean"]["export"] > 0, tm)
    check(f"{label}: report normalization == the export's",
          rep["result"]["normalization"]["lo"] == want["lo"]
          and rep["result"]["normalization"]["hi"] == want["hi"], rep["result"]["normalization"])


# ---- cases ----

def case_values(work):
    ranks = ARGS.ranks
    inp, a = make_input(work, "in.zarr", "u1", 20261202)
    ref = os.path.join(work, "noexport")
    shutil.rmtree(ref, ignore_errors=True)
    write_cfg(ref, inp, None)
    p, rcs = run_sm(["run", "job.yaml", "--report", "report.json", "-q"], ranks, ref)
    check("convert without export: exit 0", p is not None and rcs.get(0) == 0,
          p.stderr if p else "timeout")
    for deflate in (0, 6):
        label = f"{'plain' if ranks == 0 else f'{ranks} ranks'}, deflate {deflate}"
        d = os.path.join(work, f"deflate{deflate}")
        shutil.rmtree(d, ignore_errors=True)
        write_cfg(d, inp, {"path": "ct.h5", "deflate": deflate})
        p, rcs = run_sm(["run", "job.yaml", "--report", "report.json", "-q"], ranks, d)
        if not check(f"{label}: finished within {TIMEOUT} s", p is not None):
            continue
        if not check(f"{label}: exit 0 on every rank", set(rcs.values()) == {0}
                     and len(rcs) == max(ranks, 1), (rcs, p.stderr.strip()[-1500:])):
            continue
        check_export(label, d, a, deflate, ranks)
        same = open(os.path.join(d, "out.zarr", "zarr.json"), "rb").read() == \
            open(os.path.join(ref, "out.zarr", "zarr.json"), "rb").read()
        check(f"{label}: zarr.json identical to the run without export (export.* is not "
              "in the output's provenance hash)", same)


def case_config(work):
    inp, a = make_input(work, "ct16.zarr", "i2", 7)
    d = os.path.join(work, "cfg")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    base = ["run", os.path.abspath(ARGS.config), "--set", f"input.store={inp}", "-q"]
    for ranks, extra in ((0, []), (3, ["--set", "output.exists=overwrite", "--set",
                                        "export.hdf5.exists=overwrite"])):
        label = f"configs/convert-ct-hdf5.yaml, {'plain' if ranks == 0 else f'{ranks} ranks'}"
        before = os.stat(os.path.join(d, "out", "ct.h5")).st_ino if ranks else None
        p, rcs = run_sm(base + extra, ranks, d)
        if not check(f"{label}: exit 0", p is not None and set(rcs.values()) == {0},
                     (rcs, p.stderr[-1500:] if p else "timeout")):
            continue
        global PCT
        saved, PCT = PCT, (1, 99)
        try:
            check_export(label, d, a, 4, ranks, h5name="out/ct.h5", off=[0, 0, 0],
                         shape=list(SHAPE), report="out/ct-hdf5-report.json",
                         zarr_name="out/ct.zarr")
        finally:
            PCT = saved
        if ranks:
            check(f"{label}: the earlier HDF5 file was replaced (overwrite)",
                  os.stat(os.path.join(d, "out", "ct.h5")).st_ino != before)


def expect_failure(label, d, ranks, args, code, names, export_path, keep=None,
                   zarr_made=False):
    """Runs and checks: every rank exits `code`, one error line containing `names`, no marker,
    nothing new at export_path (or `keep` bytes untouched), no temporary file."""
    p, rcs = run_sm(args, ranks, d)
    if not check(f"{label}: finished within {TIMEOUT} s (no hang)", p is not None):
        return
    want_ranks = max(ranks, 1)
    aborted = len(rcs) < want_ranks
    ok = (all(v == code for v in rcs.values()) and
          (not aborted or p.returncode == code))
    check(f"{label}: exit {code} on every rank", ok and rcs != {},
          (rcs, p.returncode, p.stderr[-800:]))
    lines = error_lines(p)
    check(f"{label}: exactly one error line", len(lines) == 1, lines)
    if lines:
        check(f"{label}: the error names {names}", all(n in lines[0] for n in names), lines[0])
    check(f"{label}: no completion marker",
          not os.path.exists(os.path.join(d, "out.zarr", "shardmill.complete.json")))
    if not zarr_made:
        check(f"{label}: refused before the Zarr output was written",
              not os.path.exists(os.path.join(d, "out.zarr", "zarr.json")))
    full = os.path.join(d, export_path)
    if keep is None:
        check(f"{label}: nothing at the export path", not os.path.lexists(full))
    else:
        st = os.lstat(full)
        check(f"{label}: the existing file is untouched",
              open(full, "rb").read() == keep[0] and st.st_mtime_ns == keep[1])
    parent = os.path.dirname(full)
    if os.path.isdir(parent):
        check(f"{label}: no temporary file", tmp_files(parent) == [], tmp_files(parent))


def unmount(path):
    """Unmounts a test tmpfs. Ranks that MPI_Abort ended may still be closing their files for a
    moment ("target is busy"), so retry for up to 5 s, then detach it lazily: a test never leaves
    a mount behind."""
    for _ in range(50):
        if not os.path.ismount(path):
            return
        if subprocess.run(["umount", path], capture_output=True).returncode == 0:
            return
        time.sleep(0.1)
    subprocess.run(["umount", "-l", path], capture_output=True)


def case_failures(work):
    ranks = ARGS.ranks
    inp, _ = make_input(work, "in.zarr", "u1", 20261202)
    tag = "plain" if ranks == 0 else f"{ranks} ranks"
    args = ["run", "job.yaml", "--report", "report.json", "-q"]

    def fresh(name, export):
        d = os.path.join(work, name)
        shutil.rmtree(d, ignore_errors=True)
        write_cfg(d, inp, export)
        return d

    d = fresh("missing", {"path": "nowhere/ct.h5"})
    expect_failure(f"{tag}, export directory missing", d, ranks, args, 4,
                   ["nowhere", "missing"], "nowhere/ct.h5")
    d = fresh("exists", {"path": "ct.h5"})
    with open(os.path.join(d, "ct.h5"), "wb") as f:
        f.write(b"\x89HDF\r\n\x1a\n and more")
    st = os.stat(os.path.join(d, "ct.h5"))
    expect_failure(f"{tag}, export path exists", d, ranks, args, 2,
                   ["ct.h5", "export exists"], "ct.h5",
                   keep=(open(os.path.join(d, "ct.h5"), "rb").read(), st.st_mtime_ns))
    d = fresh("nothdf5", {"path": "ct.h5", "exists": "overwrite"})
    with open(os.path.join(d, "ct.h5"), "wb") as f:
        f.write(b"my notes\n")
    st = os.stat(os.path.join(d, "ct.h5"))
    expect_failure(f"{tag}, overwrite of a file that is not HDF5", d, ranks, args, 2,
                   ["ct.h5", "not an HDF5 file"], "ct.h5", keep=(b"my notes\n", st.st_mtime_ns))
    d = fresh("dotdot", {"path": "sub/../ct.h5"})
    os.makedirs(os.path.join(d, "sub"))
    expect_failure(f"{tag}, a '..' export path", d, ranks, args, 2, ["sub/../ct.h5", "'..'"],
                   "ct.h5")
    d = fresh("inside", {"path": "out.zarr/ct.h5"})
    os.makedirs(os.path.join(d, "out.zarr"))
    expect_failure(f"{tag}, an export path inside the output", d, ranks, args, 2,
                   ["out.zarr/ct.h5", "inside the output"], "out.zarr/ct.h5")
    # a read-only directory: root ignores permission bits, so a read-only tmpfs
    d = fresh("readonly", {"path": "ro/ct.h5"})
    ro = os.path.join(d, "ro")
    os.makedirs(ro)
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", ro],
        capture_output=True).returncode == 0
    if not mounted and os.geteuid() != 0:
        os.chmod(ro, 0o555)
        mounted = True
    if mounted:
        try:
            expect_failure(f"{tag}, a read-only export directory", d, ranks, args, 4,
                           ["ro", "cannot create files"], "ro/ct.h5")
        finally:
            if os.geteuid() == 0:
                unmount(ro)
    else:
        print("skip read-only export directory: cannot mount a tmpfs", flush=True)


def case_full_disk(work):
    if os.geteuid() != 0:
        print("skipped: the full-disk case mounts a tmpfs (root only)")
        return 77
    inp, _ = make_input(work, "in.zarr", "u1", 20261202)
    args = ["run", "job.yaml", "--report", "report.json", "-q"]
    for ranks in (0, 3):
        for deflate in (0, 6):
            tag = f"full disk, {'plain' if ranks == 0 else f'{ranks} ranks'}, deflate {deflate}"
            d = os.path.join(work, f"full-{ranks}-{deflate}")
            small = os.path.join(d, "small")
            if os.path.isdir(small):
                unmount(small)
            shutil.rmtree(d, ignore_errors=True)
            # 37*66*85 float32 = 830 KB: deflate 6 compresses it to about 440 KB
            write_cfg(d, inp, {"path": "small/ct.h5", "deflate": deflate,
                               "collective_timeout_s": 5})
            os.makedirs(small)
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", small],
                               capture_output=True, text=True)
            if not check(f"{tag}: tmpfs mounted", r.returncode == 0, r.stderr):
                continue
            try:
                expect_failure(tag, d, ranks, args, 4, ["small/.ct.h5.shardmill-tmp"],
                               "small/ct.h5", zarr_made=True)
                shards = os.path.join(d, "out.zarr", "c")
                check(f"{tag}: the Zarr shards are kept (resume)", os.path.isdir(shards))
            finally:
                unmount(small)
    return None


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--config", default=os.path.join(HERE, "..", "..", "configs",
                                                     "convert-ct-hdf5.yaml"))
    ap.add_argument("--case", required=True, choices=["values", "config", "failures",
                                                      "full_disk"])
    ap.add_argument("--ranks", type=int, default=0)
    ARGS = ap.parse_args()
    why = cc.node_ok(ARGS.node)
    if why:
        print(f"FAIL {why}")
        return 1
    work = os.path.join(os.path.abspath(ARGS.work), f"{ARGS.case}-{ARGS.ranks}")
    os.makedirs(work, exist_ok=True)
    rc = {"values": case_values, "config": case_config, "failures": case_failures,
          "full_disk": case_full_disk}[ARGS.case](work)
    if rc == 77:
        return 77
    return C.done()


if __name__ == "__main__":
    cc.main_guard(main)
