"""`shardmill plan` plans every job (issue 34 item 3): scan, convert of every source (raw, TIFF,
NIfTI .nii and .nii.gz, HDF5) and of a Zarr array, to OME-Zarr, with the HDF5 export, and the
ingest alias. No timing is measured: the estimate exists and has its parts (seconds and the
terms_s it sums, the peak RSS bound and rss_parts_bytes it sums, output bytes and files); the
oracles of the runs made here are os.walk / os.stat (files exact, the HDF5 export's bytes within
10 % of the file's, the output's within 25 %) and h5py (the export's shape and type).

Usage: /usr/bin/python3 test_plan_jobs.py --shardmill BIN --work DIR --case jobs|export
  jobs    an 8x64x64 int16 volume as raw, TIFF (tifffile, one page per slice), NIfTI .nii and
          .nii.gz (a 352-byte NIfTI-1 header written here) and HDF5 (h5py, chunks [1,64,64]):
          `plan --json` of an ingest of each (exit 0, an estimate with its parts, the text's
          estimate lines); the raw ingest run: its files equal the estimate's; a scan of that
          output and a convert of it to OME-Zarr planned; plan of a read-bench job is one
          usage error line (exit 2) naming the job.
  export  a float32 convert of the raw volume with export.hdf5 (deflate 0, then 6): the estimate
          has an `export` member (1 file, its chunks, a buffer in the RSS parts, seconds in the
          terms and the total); the run's HDF5 file is within 10 % of the estimate's bytes
          (deflate 0) and holds the output's shape.
Prints one ok/FAIL line per check and a closing count; exit 1 on any failure.
"""

import gzip
import json
import os
import struct
import subprocess

import numpy as np

from shardmill_test import runner as cc

SHAPE = (8, 64, 64)
TERMS = ("start", "range", "scan", "allreduce", "write", "pyramid", "sync", "export", "finish")
PARTS = ("baseline", "caches", "input", "scan", "write", "pyramid", "export")


def volume():
    rng = np.random.default_rng(34)
    return rng.integers(-2000, 3000, SHAPE, dtype=np.int16)


def write_nifti(path, vol):
    """A minimal NIfTI-1 (.nii, or gzip'd when path ends in .gz) of a [z, y, x] int16 volume."""
    hdr = bytearray(352)
    struct.pack_into("<i", hdr, 0, 348)
    nz, ny, nx = vol.shape
    struct.pack_into("<8h", hdr, 40, 3, nx, ny, nz, 1, 1, 1, 1)
    struct.pack_into("<2h", hdr, 70, 4, 16)  # DT_SIGNED_SHORT
    struct.pack_into("<8f", hdr, 76, 1.0, 1.0, 1.0, 1.0, 0, 0, 0, 0)
    struct.pack_into("<3f", hdr, 108, 352.0, 1.0, 0.0)
    hdr[123] = 2
    hdr[344:348] = b"n+1\0"
    blob = bytes(hdr) + vol.astype("<i2").tobytes()
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(blob)


def make_inputs(work):
    import h5py
    import tifffile
    vol = volume()
    ins = {}
    ins["raw"] = os.path.join(work, "vol.raw")
    vol.astype("<i2").tofile(ins["raw"])
    ins["tiff"] = os.path.join(work, "vol.tif")
    tifffile.imwrite(ins["tiff"], vol, photometric="minisblack")
    ins["nii"] = os.path.join(work, "vol.nii")
    write_nifti(ins["nii"], vol)
    ins["nii.gz"] = os.path.join(work, "vol.nii.gz")
    write_nifti(ins["nii.gz"], vol)
    ins["hdf5"] = os.path.join(work, "vol.h5")
    with h5py.File(ins["hdf5"], "w") as f:
        f.create_dataset("/data", data=vol, chunks=(1, 64, 64), compression="gzip")
    return ins


def source_input(kind, path):
    if kind == "raw":
        return {"store": path, "format": "raw",
                "raw": {"dtype": "int16", "shape": list(SHAPE), "byte_order": "little"}}
    if kind == "hdf5":
        return {"store": path, "format": "hdf5", "hdf5": {"dataset": "/data"}}
    return {"store": path}


def plan(args, cfg, *extra):
    return subprocess.run([args.shardmill, "plan", cfg] + list(extra), capture_output=True,
                          text=True, timeout=120)


def estimate(c, label, args, cfg, writes, *extra):
    """plan --json's estimate, checked for its parts; the text's estimate lines."""
    r = plan(args, cfg, "--json", *extra)
    if not c.check(f"{label}: plan --json exit 0", r.returncode == 0, cc.describe(r)):
        return None
    doc = json.loads(r.stdout)
    est = doc.get("estimate")
    if not c.check(f"{label}: an estimate", isinstance(est, dict), doc):
        return None
    t = est.get("terms_s", {})
    c.check(f"{label}: seconds > 0, the sum of its terms {TERMS}",
            set(t) == set(TERMS) and est["seconds"] > 0 and
            abs(sum(t[k] for k in TERMS) - est["seconds"]) <= 1e-6 * max(1, est["seconds"]), t)
    p = est.get("rss_parts_bytes", {})
    # the phases' buffers are freed in turn: the largest of scan, write and pyramid counts
    # (issue 34 item 4)
    c.check(f"{label}: peak RSS bound > 0, the sum of its parts {PARTS} (of scan, write and "
            "pyramid the largest)",
            set(p) == set(PARTS) and est["peak_rss_bytes_per_rank"] > 0 and
            p["baseline"] + p["caches"] + p["input"] + max(p["scan"], p["write"], p["pyramid"]) +
            p["export"] == est["peak_rss_bytes_per_rank"], p)
    if writes:
        c.check(f"{label}: output bytes and files", est["output_bytes"] > 0 and est["files"] > 2,
                {k: est[k] for k in ("output_bytes", "files")})
        c.check(f"{label}: shards in the plan", "shards" in doc, sorted(doc))
    txt = plan(args, cfg, *extra)
    want = ["estimate (", "seconds", "memory", "reads"] + (["output"] if writes else [])
    c.check(f"{label}: the text has the estimate's lines",
            txt.returncode == 0 and all(w in txt.stdout for w in want), cc.describe(txt))
    return est


def tree_files(path):
    return sum(len(files) for _, _, files in os.walk(path))


def tree_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path)
               for f in files)


def run(args, cfg):
    return subprocess.run([args.shardmill, "run", cfg, "--quiet"], capture_output=True,
                          text=True, timeout=300)


def case_jobs(c, args, work):
    ins = make_inputs(work)
    out = {}
    for kind, path in ins.items():
        out[kind] = os.path.join(work, f"ingest-{kind.replace('.', '-')}.zarr")
        cfg = cc.write_config(os.path.join(work, f"ingest-{kind.replace('.', '-')}.yaml"), {
            "job": "ingest", "input": source_input(kind, path), "progress": False,
            "output": {"path": out[kind], "shard": [4, 32, 32], "chunk": [2, 16, 16],
                       "codec": {"name": "zstd", "level": 3}},
            "parallel": {"threads": 2}})
        est = estimate(c, f"ingest of {kind}", args, cfg, True)
        if est is not None:
            c.check(f"ingest of {kind}: no export", est.get("export", 0) is None, est)
        est2 = estimate(c, f"ingest of {kind}, 2 ranks", args, cfg, True, "--ranks", "2")
        if kind != "raw" or est is None or est2 is None:
            continue
        r = run(args, cfg)
        if c.check("ingest of raw: run exit 0", r.returncode == 0, cc.describe(r)):
            got = tree_files(out["raw"])
            c.check(f"ingest of raw: the estimate's {est['files']} files = the output's {got}",
                    got == est["files"])
            b = tree_bytes(out["raw"])
            c.check(f"ingest of raw: the estimate's {est['output_bytes']} bytes within 25 % of "
                    f"the output's {b}", abs(est["output_bytes"] - b) <= 0.25 * b)
    if not os.path.isdir(out["raw"]):
        return
    scan = cc.write_config(os.path.join(work, "scan.yaml"), {
        "job": "scan", "input": {"store": out["raw"]}, "progress": False, "passes": 2,
        "parallel": {"threads": 2}})
    est = estimate(c, "scan of the ingested array", args, scan, False)
    if est is not None:
        c.check("scan: no output (bytes, files, write term 0)",
                est["output_bytes"] == 0 and est["files"] == 0 and est["terms_s"]["write"] == 0,
                est)
    ome = cc.write_config(os.path.join(work, "ome.yaml"), {
        "job": "convert", "input": {"store": out["raw"]}, "progress": False,
        "normalize": {"mode": "window", "lo": -2000, "hi": 3000},
        "output": {"path": os.path.join(work, "ome.zarr"), "dtype": "uint8",
                   "ome": {"levels": 2, "method": "mean"}},
        "parallel": {"threads": 2}})
    est = estimate(c, "convert of the array to OME-Zarr", args, ome, True)
    if est is not None:
        c.check("OME: two levels", est["levels"] == 2, est["levels"])
    rb = cc.write_config(os.path.join(work, "rb.yaml"), {
        "job": "read-bench", "input": {"store": out["raw"]}, "progress": False})
    r = plan(args, rb)
    c.check("read-bench: not planned, one usage error line naming the job",
            r.returncode == 2 and r.stdout == "" and
            len(cc.one_error_line(r.stderr)) == 1 and "read-bench" in r.stderr, cc.describe(r))


def case_export(c, args, work):
    import h5py
    ins = make_inputs(work)
    plain = 0
    for deflate in (0, 6):
        h5 = os.path.join(work, f"export-{deflate}.h5")
        o = os.path.join(work, f"export-{deflate}.zarr")
        cfg = cc.write_config(os.path.join(work, f"export-{deflate}.yaml"), {
            "job": "convert", "input": source_input("raw", ins["raw"]), "progress": False,
            "normalize": {"mode": "scale", "divisor": 3000},
            "output": {"path": o, "dtype": "float32", "shard": [4, 32, 32],
                       "chunk": [2, 16, 16], "codec": {"name": "zstd", "level": 3}},
            "export": {"hdf5": {"path": h5, "deflate": deflate}},
            "parallel": {"threads": 2}})
        label = f"convert with export.hdf5 (deflate {deflate})"
        est = estimate(c, label, args, cfg, True)
        if est is None:
            continue
        x = est.get("export")
        if not c.check(f"{label}: an export member", isinstance(x, dict), est):
            continue
        values = int(np.prod(SHAPE)) * 4
        c.check(f"{label}: 1 file of {SHAPE} float32 in [2,16,16] chunks",
                x["files"] == 1 and x["chunks"] == 4 * 4 * 4 and x["path"] == h5 and
                x["deflate"] == deflate, x)
        c.check(f"{label}: its seconds in the terms, its buffer in the RSS parts",
                x["seconds"] > 0 and est["terms_s"]["export"] == x["seconds"] and
                est["rss_parts_bytes"]["export"] >= x["buffer_bytes_per_rank"] >=
                4 * 32 * 32 * 4, x)
        if deflate == 0:
            plain = x["bytes"]
            c.check(f"{label}: at least the values' {values} bytes", x["bytes"] >= values, x)
        else:
            c.check(f"{label}: fewer bytes than without deflate ({plain})", x["bytes"] < plain, x)
        r = run(args, cfg)
        if not c.check(f"{label}: run exit 0", r.returncode == 0, cc.describe(r)):
            continue
        with h5py.File(h5, "r") as f:
            c.check(f"{label}: the file holds the output's shape and type",
                    f["/data"].shape == SHAPE and f["/data"].dtype == np.float32)
        size = os.path.getsize(h5)
        c.check(f"{label}: the output's files {tree_files(o)} = the estimate's {est['files']} "
                "(the export apart)", tree_files(o) == est["files"])
        if deflate == 0:
            c.check(f"{label}: the estimate's {x['bytes']} bytes within 10 % of the file's "
                    f"{size}", abs(x["bytes"] - size) <= 0.10 * size)


if __name__ == "__main__":
    cc.main_guard(lambda: cc.case_main("convert.plan_jobs",
                                       {"jobs": case_jobs, "export": case_export}))
