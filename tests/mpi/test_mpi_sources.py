"""`convert` from a source under mpirun (issue 20; SPEC §1, §2 "Sources"). Label `mpi`.

Usage: /usr/bin/python3 test_mpi_sources.py --shardmill BIN --mpiexec MPIEXEC --work DIR --case C
Cases (the job of tests/convert/test_convert_sources.py: the head CT, percentile [1, 99],
input.spacing, output.ome.levels 2, shards of whole slices [12, 256, 256]):
  tiff   the CT as 108 tifffile deflate slices: mpirun -n 2 writes a tree byte-identical to a
         plain run's (every file: both levels, zarr.json, the marker); under 2 ranks each rank
         reads at most its share plus one slab (report io.source.beyond_share_max_rank <=
         io.source.slab_bytes = one decoded strip, tifffile's rows per strip), the ranks
         together fetch every stored byte (bytes_read, encoded bytes, >= the strips' stored
         bytes tifffile states) and the most one rank read is no more than the sum.
  hdf5   the CT as an h5py dataset chunked (8, 64, 64), gzip: the same checks (the slab is one
         chunk; a chunk layer straddles the two ranks' shards; the stored bytes are h5py's
         chunk storage sizes).
Both exit 77 (skipped) without data/ct (scripts/fetch-data.sh).
Prints one ok/FAIL line per check; exit 1 on any failure.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

from shardmill_test import inputs
from shardmill_test import ome_ngff_check as ngff
from shardmill_test.checks import check, summary
from shardmill_test.file_tree import same_tree
from shardmill_test.ranks import launch, plain_env

TIMEOUT = 120


def run(args, ranks, cwd):
    """ranks 0: a plain process (no launcher); else mpirun -np ranks."""
    return launch(ARGS.shardmill, ARGS.mpiexec, args, ranks, cwd, TIMEOUT)


def case(work, fmt):
    vol, spacing = inputs.ct_or_skip()
    if vol is None:
        return 77
    if fmt == "tiff":
        import tifffile
        store = inputs.write_ct_tiff(os.path.join(work, "ct_slices"), vol)
        stored = 0
        for z in range(vol.shape[0]):
            with tifffile.TiffFile(os.path.join(store, f"s{z + 1}.tif")) as t:
                stored += sum(t.pages[0].databytecounts)
                rows = t.pages[0].rowsperstrip
        slab = min(rows, vol.shape[1]) * vol.shape[2] * vol.dtype.itemsize  # one strip
    else:
        import h5py
        store = inputs.write_ct_hdf5(os.path.join(work, "ct.h5"), vol)
        slab = 8 * 64 * 64 * vol.dtype.itemsize  # one chunk
        with h5py.File(store, "r") as f:
            dsid = f[inputs.CT_H5_DATASET].id
            stored = sum(dsid.get_chunk_info(i).size for i in range(dsid.get_num_chunks()))
    trees = {}
    for ranks, threads in ((0, 2), (2, 1)):
        name = f"{fmt} {'plain' if ranks == 0 else f'mpirun -n {ranks}'} x{threads}"
        d = os.path.join(work, f"run-{ranks}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        # the same job file in each directory (output.path relative): the same provenance
        inputs.pyramid_job(os.path.join(d, "job.yaml"), inputs.ct_input(fmt, store, spacing),
                        "out.zarr", inputs.CT_SOURCE_LAYOUT, threads=threads)
        p = run(["run", "job.yaml", "--report", "report.json", "-q"], ranks, d)
        if not check(p is not None and p.returncode == 0,
                     f"{name}: exit 0 ({p and (p.returncode, p.stderr.strip()[-300:])})"):
            continue
        rep = json.load(open(os.path.join(d, "report.json")))
        check(rep.get("ranks") == max(ranks, 1), f"{name}: report ranks {rep.get('ranks')}")
        src = rep.get("io", {}).get("source", {})
        check(src.get("slab_bytes") == slab,
              f"{name}: io.source.slab_bytes = one {'slice' if fmt == 'tiff' else 'chunk'} "
              f"({src.get('slab_bytes')} == {slab})")
        check(isinstance(src.get("beyond_share_max_rank"), int) and
              src["beyond_share_max_rank"] <= slab,
              f"{name}: each rank read at most its share plus one slab "
              f"(beyond_share_max_rank {src.get('beyond_share_max_rank')} <= {slab})")
        check(isinstance(src.get("bytes_read"), int) and src["bytes_read"] >= stored,
              f"{name}: the ranks fetched every stored byte (bytes_read {src.get('bytes_read')} "
              f">= {stored})")
        check(isinstance(src.get("bytes_read_max_rank"), int) and
              src["bytes_read_max_rank"] <= src.get("bytes_read", -1),
              f"{name}: bytes_read_max_rank {src.get('bytes_read_max_rank')} <= bytes_read")
        trees[ranks] = os.path.join(d, "out.zarr")
    if len(trees) == 2:
        ok, why = same_tree(trees[2], trees[0])
        check(ok, f"{fmt}: mpirun -n 2 tree byte-identical to the plain run's, every file "
                  f"({why})")
        bad = ngff.check_image(trees[2])
        check(not bad, f"{fmt}: OME-NGFF 0.5 rules of the 2-rank image ({bad[:3]})")
        v = subprocess.run([ARGS.shardmill, "verify", trees[2]], capture_output=True, text=True,
                           env=plain_env(), timeout=TIMEOUT)
        check(v.returncode == 0, f"{fmt}: verify of the 2-rank image passes "
                                 f"({v.stderr.strip()[-200:]})")
    return 0


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", required=True, choices=["tiff", "hdf5"])
    ARGS = ap.parse_args()
    ARGS.shardmill = os.path.abspath(ARGS.shardmill)
    work = os.path.join(os.path.abspath(ARGS.work), "sources-" + ARGS.case)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if case(work, ARGS.case) == 77:
        return 77
    return summary()


ARGS = None
if __name__ == "__main__":
    sys.exit(main())
