"""`shardmill run` (job: ingest) under mpirun (SPEC §1, §2 ingest sources, §6). Label `mpi`.

Usage: /usr/bin/python3 test_mpi_ingest.py --shardmill BIN --mpiexec MPIEXEC --work DIR --case C
Cases:
  identity  a raw int16 volume (NumPy, big-endian, with header bytes) ingested plain with 1
            and 2 threads and under mpirun -n 2, a uint8 .nii.gz (nibabel) plain and under
            mpirun -n 3 x 2 threads with the block partition: every file of every output tree equals the plain
            1-thread run's byte for byte, no .shardmill/ is left, the report's `result` section
            is the same JSON on every run and its checksums and histogram equal NumPy's,
            `ranks` is the rank count, `shardmill verify` passes. Then resume: the 2-rank raw
            output with 3 shards deleted and 1 damaged, `exists: resume` under mpirun -n 3
            rewrites exactly those 4 (report output.written; the report's sums and histogram are
            NumPy's over the whole volume and the plain run's: ingest is convert, whose resume
            reads every shard's input) and the tree equals the plain run's.
  budget    a .nii.gz whose volume exceeds limits.memory_bytes: one process refuses it (exit 5,
            one line naming limits.memory_bytes, no output); under mpirun -n 3 (balanced) each
            rank holds only the z slabs of its own shards, so the same budget suffices, and the
            output equals a plain run's with a large budget.
  real      data/mri/ch2better.nii.gz (scripts/fetch-data.sh; the raw CT is covered by
            convert.ingest.real_data, raw volumes by `identity`): plain (2 threads) vs mpirun -n 3:
            byte-identical trees and equal `result` sections, checksums equal nibabel's; exit 77
            (skipped) when the data is absent.
  ome       a raw uint16 volume ingested as an OME-Zarr image of 3 levels: plain and mpirun -n 3
            write byte-identical trees (every level and the marker), verify passes.
  tiff      the real CT written by tifffile as one slice per file and recompressed by tiffcp to
            a multi-page LZW file: plain (2 threads) and mpirun -n 3 ingests of both have
            checksums equal to NumPy's and shards byte-identical to the raw CT's plain ingest;
            exit 77 (skipped) without the CT.
  hdf5      the real CT written by h5py as a chunked gzip+shuffle dataset /exchange/data: plain
            (2 threads) and mpirun -n 3 ingests have checksums equal to NumPy's and shards
            byte-identical to the raw CT's plain ingest; exit 77 (skipped) without the CT.
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

from shardmill_test import report_json
from shardmill_test import ome_ngff_check as ngff
from shardmill_test.checks import check, summary
from shardmill_test.file_tree import tree_files
from shardmill_test.ranks import launch

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TIMEOUT = 120
ARGS = None


def run(args, ranks, cwd):
    """ranks 0: a plain process (no launcher); else mpirun -np ranks."""
    return launch(ARGS.shardmill, ARGS.mpiexec, args, ranks, cwd, TIMEOUT)


def same_tree(a, b):
    fa, fb = tree_files(a), tree_files(b)
    if fa != fb:
        return False, f"file lists differ ({len(fa)} vs {len(fb)})"
    bad = [f for f in fa if not filecmp.cmp(os.path.join(a, f), os.path.join(b, f),
                                            shallow=False)]
    return not bad, f"{len(fa)} files, {len(bad)} differ {bad[:3]}"


def np_result(v):
    """SPEC §5 checksums of C-order values v (integers) and the default histogram counts, summed
    in blocks of 2^20 values (bounded memory for the real MRI)."""
    flat = v.reshape(-1)
    checksum, weighted = 0, 0
    step = 1 << 20
    for s in range(0, flat.size, step):
        blk = flat[s:s + step]
        u = blk.astype(np.int64).astype(np.uint64)
        i = np.arange(s + 1, s + 1 + blk.size, dtype=np.uint64)
        with np.errstate(over="ignore"):
            weighted = (weighted + int(np.sum(u * i, dtype=np.uint64))) % (1 << 64)
        checksum += int(np.sum(blk, dtype=np.int64))
    if v.dtype == np.uint8:
        counts = np.bincount(flat, minlength=256).tolist()
    else:  # int16: one bin per value over [-32768, 32768)
        counts = np.bincount(flat.astype(np.int64) + 32768, minlength=65536).tolist()
    return checksum, weighted, counts


def write_cfg(path, store, fmt, extra=""):
    with open(path, "w") as f:
        f.write("job: ingest\n"
                f"input: {{store: {store}, format: {fmt}{extra}}}\n"
                "output: {path: out.zarr, fsync: false, shard: [8, 32, 32], "
                "chunk: [4, 16, 16]}\n"
                "progress: false\n")


def ingest(d, cfg, ranks, threads, sets=()):
    args = ["run", cfg, "--set", f"parallel.threads={threads}", "--report", "report.json", "-q"]
    for s in sets:
        args += ["--set", s]
    return run(args, ranks, d)


def make_inputs(work):
    import nibabel as nib

    rng = np.random.default_rng(20261203)
    raw = np.clip(rng.normal(0, 900, (37, 50, 60)), -32768, 32767).astype(np.int16)
    raw_path = os.path.join(work, "vol.be.raw")
    with open(raw_path, "wb") as f:
        f.write(b"\xa5" * 32 + raw.astype(">i2").tobytes())
    nii = np.clip(rng.normal(120, 50, (36, 45, 70)), 0, 255).astype(np.uint8)  # [z, y, x]
    nii_path = os.path.join(work, "vol.nii.gz")
    nib.save(nib.Nifti1Image(np.ascontiguousarray(nii.transpose(2, 1, 0)), np.eye(4)), nii_path)
    return [("raw", raw_path, raw,
             ", raw: {dtype: int16, shape: [37, 50, 60], byte_order: big, header_bytes: 32}"),
            ("nifti", nii_path, nii, "")]


def identity_runs(work, label, store, vol, fmt, extra, runs):
    checksum, weighted, counts = np_result(vol)
    ref = None
    for ranks, threads, part in runs:
        name = f"{label} {'plain' if ranks == 0 else f'mpirun -n {ranks}'} x{threads} {part}"
        d = os.path.join(work, f"{label}-{ranks}x{threads}-{part}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        write_cfg(os.path.join(d, "job.yaml"), store, fmt, extra)
        p = ingest(d, "job.yaml", ranks, threads, [f"parallel.partition={part}"])
        if not check(p is not None and p.returncode == 0,
                     f"{name}: exit 0 ({p and (p.returncode, p.stderr.strip()[-300:])})"):
            continue
        rep = report_json.load(os.path.join(d, "report.json"))
        res = rep["result"]
        out = os.path.join(d, "out.zarr")
        check(rep["ranks"] == max(ranks, 1), f"{name}: report ranks {rep['ranks']}")
        check(res["checksum"] == checksum and res["weighted_checksum"] == weighted and
              res["output_checksum"] == checksum and
              res["output_weighted_checksum"] == weighted, f"{name}: checksums == NumPy")
        check(res["histogram"]["counts"] == counts, f"{name}: histogram == NumPy bincount")
        check(res["voxels"] == vol.size, f"{name}: voxels {res['voxels']}")
        check(rep["output"]["complete"] and
              os.path.exists(os.path.join(out, "shardmill.complete.json")) and
              not os.path.exists(os.path.join(out, ".shardmill")),
              f"{name}: marker written, no .shardmill/ left")
        if ref is None:
            ref = (out, res)
            continue
        ok, why = same_tree(out, ref[0])
        check(ok, f"{name}: output tree byte-identical to the plain 1-thread run ({why})")
        check(res == ref[1], f"{name}: report result section equal to the plain run's")
        if ranks > 1:
            v = run(["verify", out], 0, d)
            check(v is not None and v.returncode == 0, f"{name}: shardmill verify passes")
    return ref


def case_identity(work):
    runs = {"raw": [(0, 1, "balanced"), (0, 2, "balanced"), (2, 1, "balanced")],
            "nifti": [(0, 1, "balanced"), (3, 2, "block")]}
    for label, store, vol, extra in make_inputs(work):
        ref = identity_runs(work, label, store, vol, label, extra, runs[label])
        if label == "raw" and ref is not None:
            resume(work, ref[0], ref[1], vol)


def case_budget(work):
    _, (_, store, vol, _) = make_inputs(work)  # the .nii.gz: 36 x 45 x 70 uint8, 113,400 bytes
    # < the volume, >= the z slabs of any of 3 ranks' shards (at most 20 of the 36 planes of
    # 3,150 bytes: 63,000 bytes)
    budget = "64KiB"  # the source's own slab budget, not a ceiling of the process
    d = os.path.join(work, "budget-plain")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    write_cfg(os.path.join(d, "job.yaml"), store, "nifti")
    p = ingest(d, "job.yaml", 0, 2, [f"limits.memory_bytes={budget}",
                                         "limits.memory_ceiling=false"])
    lines = [ln for ln in (p.stderr if p else "").splitlines() if ln.strip()]
    check(p is not None and p.returncode == 5 and len(lines) == 1 and
          "limits.memory_bytes" in lines[0] and "vol.nii.gz" in lines[0],
          f"one process, budget {budget}: exit 5, one line naming the file and "
          f"limits.memory_bytes ({p and (p.returncode, lines)})")
    check(not os.path.exists(os.path.join(d, "out.zarr")), "one process: no output")
    ref = os.path.join(work, "budget-ref")
    shutil.rmtree(ref, ignore_errors=True)
    os.makedirs(ref)
    write_cfg(os.path.join(ref, "job.yaml"), store, "nifti")
    p = ingest(ref, "job.yaml", 0, 1)
    check(p is not None and p.returncode == 0, "plain run with the default budget: exit 0")
    d = os.path.join(work, "budget-mpi")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    write_cfg(os.path.join(d, "job.yaml"), store, "nifti")
    p = ingest(d, "job.yaml", 3, 1, [f"limits.memory_bytes={budget}",
                                         "limits.memory_ceiling=false"])
    if check(p is not None and p.returncode == 0,
             f"mpirun -n 3, budget {budget}: exit 0 ({p and p.stderr.strip()[-300:]})"):
        ok, why = same_tree(os.path.join(d, "out.zarr"), os.path.join(ref, "out.zarr"))
        check(ok, f"mpirun -n 3 within the budget: tree equals the plain run's ({why})")


def resume(work, ref, ref_result, vol):
    """The 2-rank raw output with 3 shards deleted and 1 damaged, resumed under mpirun -n 3."""
    d = os.path.join(work, "raw-2x1-balanced")
    out = os.path.join(d, "out.zarr")
    if not os.path.isdir(out):
        return
    shards = [f for f in tree_files(out) if f.startswith("c" + os.sep)]
    for f in shards[1:4]:
        os.remove(os.path.join(out, f))
    with open(os.path.join(out, shards[7]), "r+b") as f:  # damaged in place
        f.seek(10)
        b = f.read(1)
        f.seek(10)
        f.write(bytes([b[0] ^ 0xFF]))
    p = ingest(d, "job.yaml", 3, 1, ["output.exists=resume"])
    if not check(p is not None and p.returncode == 0,
                 f"resume under mpirun -n 3: exit 0 ({p and p.stderr.strip()[-300:]})"):
        return
    rep = report_json.load(os.path.join(d, "report.json"))
    check(rep["output"]["written"] == 4, f"resume rewrote {rep['output']['written']} shards == 4")
    # ingest is convert (issue 20): a resume reads every shard's input (a shard is kept only when
    # the values computed for it have its record's digest), so the sums cover the whole volume
    checksum, weighted, counts = np_result(vol)
    res = rep["result"]
    check(res["checksum"] == checksum and res["weighted_checksum"] == weighted and
          res["histogram"]["counts"] == counts,
          "resume: result checksums and histogram == NumPy's over the whole volume (every shard "
          "read, kept or not)")
    check(res == ref_result, "resume: result section equal to the plain run's")
    ok, why = same_tree(out, ref)
    check(ok, f"resumed tree byte-identical to the plain run's ({why})")


def case_real(work):
    mri = os.path.join(REPO, "data", "mri", "ch2better.nii.gz")
    if not os.path.exists(mri):
        print("skip: data/mri/ch2better.nii.gz missing (scripts/fetch-data.sh)")
        return 77
    import nibabel as nib

    img = nib.load(mri)
    vol = np.ascontiguousarray(np.asarray(img.dataobj.get_unscaled()).transpose(2, 1, 0))
    checksum, weighted, _ = np_result(vol)
    ref = None
    for ranks, threads in ((0, 2), (3, 1)):
        name = f"mri {'plain' if ranks == 0 else f'mpirun -n {ranks}'} x{threads}"
        d = os.path.join(work, f"mri-{ranks}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        cfg = os.path.join(d, "job.yaml")
        write_cfg(cfg, mri, "nifti")
        text = open(cfg).read().replace("shard: [8, 32, 32], chunk: [4, 16, 16]",
                                        "shard: [64, 256, 128], chunk: [64, 64, 64]")
        open(cfg, "w").write(text)
        p = ingest(d, "job.yaml", ranks, threads)
        if not check(p is not None and p.returncode == 0,
                     f"{name}: exit 0 ({p and p.stderr.strip()[-300:]})"):
            continue
        res = report_json.load(os.path.join(d, "report.json"))["result"]
        check(res["checksum"] == checksum and res["weighted_checksum"] == weighted,
              f"{name}: checksums == nibabel")
        out = os.path.join(d, "out.zarr")
        if ref is None:
            ref = (out, res)
            continue
        ok, why = same_tree(out, ref[0])
        check(ok, f"{name}: tree byte-identical to the plain run ({why})")
        check(res == ref[1], f"{name}: report result section equal to the plain run's")
    return 0


CT_RAW = ("raw", ", raw: {dtype: int16, shape: [108, 256, 256]}")


def real_ct():
    """The real CT as int16 [108, 256, 256], or None (skipped) when it is absent."""
    ct = os.path.join(REPO, "data", "ct", "matrix.dat")
    if not os.path.exists(ct):
        print("skip: data/ct/matrix.dat missing (scripts/fetch-data.sh)")
        return None, None
    return ct, np.fromfile(ct, dtype="<i2").reshape(108, 256, 256)


def ct_identity_runs(work, vol, runs):
    """Each run (label, store, format, extra input keys, ranks, threads) ingests the CT in the
    same layout; its checksums must equal NumPy's and its shards the first run's, byte for byte."""
    checksum, weighted, _ = np_result(vol)
    layout = "shard: [16, 64, 64], chunk: [8, 32, 32]"
    ref = None
    for label, store, fmt, extra, ranks, threads in runs:
        name = f"CT {label} {'plain' if ranks == 0 else f'mpirun -n {ranks}'} x{threads}"
        d = os.path.join(work, f"{label}-{ranks}x{threads}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        cfg = os.path.join(d, "job.yaml")
        write_cfg(cfg, store, fmt, extra)
        text = open(cfg).read().replace("shard: [8, 32, 32], chunk: [4, 16, 16]", layout)
        open(cfg, "w").write(text)
        p = ingest(d, "job.yaml", ranks, threads)
        if not check(p is not None and p.returncode == 0,
                     f"{name}: exit 0 ({p and p.stderr.strip()[-300:]})"):
            continue
        rep = report_json.load(os.path.join(d, "report.json"))
        res = rep["result"]
        check(res["checksum"] == checksum and res["weighted_checksum"] == weighted,
              f"{name}: checksums == NumPy's of the raw CT")
        if ranks:
            check(rep.get("ranks") == ranks, f"{name}: the report says {ranks} ranks")
        shards = os.path.join(d, "out.zarr", "c")
        if ref is None:
            ref = shards
            continue
        ok, why = same_tree(shards, ref)
        check(ok, f"{name}: shards byte-identical to the raw CT's plain ingest ({why})")


def case_tiff(work):
    """The real CT as a tifffile slice stack and a tiffcp LZW multi-page file: plain (2 threads)
    and mpirun -n 3 ingests of each have the shards of the raw CT's plain ingest, byte for byte."""
    ct, vol = real_ct()
    if ct is None:
        return 77
    import tifffile

    stack = os.path.join(work, "ct-slices")
    shutil.rmtree(stack, ignore_errors=True)
    os.makedirs(stack)
    for z in range(vol.shape[0]):
        tifffile.imwrite(os.path.join(stack, f"ct{z}.tif"), vol[z])
    plain_tif = os.path.join(work, "ct-plain.tif")
    with tifffile.TiffWriter(plain_tif) as w:
        for z in range(vol.shape[0]):
            w.write(vol[z], contiguous=False)
    lzw = os.path.join(work, "ct-lzw.tif")
    r = subprocess.run(["tiffcp", "-c", "lzw", plain_tif, lzw], capture_output=True, text=True)
    if not check(r.returncode == 0, f"tiffcp -c lzw ({r.stderr.strip()})"):
        return 0
    runs = [("raw", ct) + CT_RAW + (0, 2)]
    for ranks, threads in ((0, 2), (3, 1)):
        runs.append(("stack", stack, "tiff", "", ranks, threads))
        runs.append(("lzw", lzw, "tiff", "", ranks, threads))
    ct_identity_runs(work, vol, runs)
    return 0


def case_hdf5(work):
    """The real CT written by h5py as a chunked gzip+shuffle dataset in a nested group: plain
    (2 threads) and mpirun -n 3 ingests have the shards of the raw CT's plain ingest, byte for
    byte (each rank reads only its shards' hyperslabs)."""
    ct, vol = real_ct()
    if ct is None:
        return 77
    import h5py

    h5 = os.path.join(work, "ct.h5")
    with h5py.File(h5, "w") as f:
        f.create_dataset("/exchange/data", data=vol, chunks=(8, 64, 64), compression="gzip",
                         compression_opts=4, shuffle=True)
    dataset = ", hdf5: {dataset: /exchange/data}"
    ct_identity_runs(work, vol, [("raw", ct) + CT_RAW + (0, 2),
                                 ("hdf5", h5, "hdf5", dataset, 0, 2),
                                 ("hdf5", h5, "hdf5", dataset, 3, 1)])
    return 0


def case_ome(work):
    """A raw uint16 volume ingested as an OME-Zarr image with 3 levels (output.ome): plain
    (2 threads) and mpirun -n 3 write byte-identical trees (every level, the marker); verify."""
    vol = np.random.default_rng(7).integers(0, 4000, (40, 70, 90), dtype=np.uint16)
    src = os.path.join(work, "v.raw")
    vol.tofile(src)
    ref = None
    for ranks, threads in ((0, 2), (3, 1)):
        name = f"ome {'plain' if ranks == 0 else f'mpirun -n {ranks}'} x{threads}"
        d = os.path.join(work, f"ome-{ranks}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        cfg = os.path.join(d, "job.yaml")
        write_cfg(cfg, src, "raw", ", raw: {dtype: uint16, shape: [40, 70, 90]}, "
                  "spacing: [2.0, 0.5, 0.5], unit: millimeter")
        text = open(cfg).read().replace("chunk: [4, 16, 16]}", "chunk: [4, 16, 16], "
                                        "ome: {levels: 3}}")
        open(cfg, "w").write(text)
        p = ingest(d, "job.yaml", ranks, threads)
        if not check(p is not None and p.returncode == 0,
                     f"{name}: exit 0 ({p and p.stderr.strip()[-300:]})"):
            continue
        out = os.path.join(d, "out.zarr")
        rep = report_json.load(os.path.join(d, "report.json"))
        check(rep["output"].get("levels") == 3, f"{name}: the report says 3 levels")
        check(sorted(os.listdir(out)) == ["0", "1", "2", "shardmill.complete.json", "zarr.json"],
              f"{name}: arrays 0, 1, 2, zarr.json and the marker ({sorted(os.listdir(out))})")
        v = subprocess.run([ARGS.shardmill, "verify", out], capture_output=True, text=True)
        check(v.returncode == 0, f"{name}: verify passes ({v.stderr.strip()[-200:]})")
        bad = ngff.check_image(out)
        check(not bad, f"{name}: OME-NGFF 0.5 rules (tests/lib/shardmill_test/ome_ngff_check.py: {bad[:3]})")
        if ref is None:
            ref = out
            continue
        ok, why = same_tree(out, ref)
        check(ok, f"{name}: tree byte-identical to the plain run's ({why})")
    return 0


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", required=True, choices=["identity", "budget", "real", "tiff", "hdf5", "ome"])
    ARGS = ap.parse_args()
    work = os.path.join(os.path.abspath(ARGS.work), "ingest-" + ARGS.case)
    os.makedirs(work, exist_ok=True)
    rc = {"identity": case_identity, "budget": case_budget, "real": case_real,
          "tiff": case_tiff, "hdf5": case_hdf5, "ome": case_ome}[ARGS.case](work)
    if rc == 77:
        return 77
    return summary()


if __name__ == "__main__":
    sys.exit(main())
