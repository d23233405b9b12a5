#!/usr/bin/env bash
# main-job.sh: README command 1. On a fresh Debian 12 machine: installs what is missing, builds
# shardmill (Release), fetches the real head CT (SPEC §9), and runs the main pipeline on it:
#   shardmill run configs/ingest-ct.yaml   raw int16 matrix.dat -> data/ct-v3.zarr (Zarr v3, sharded)
#   shardmill run configs/convert-ct.yaml  percentile window [p1, p99] -> out/ct.zarr (float32,
#                                          sharded, completion marker) + out/ct-report.json
#   shardmill verify out/ct.zarr
#   shardmill run configs/convert-ct-ome.yaml  in one job from the raw CT (no intermediate copy):
#                                          the same window as an OME-Zarr 0.5 image out/ct-ome.zarr,
#                                          a 3-level mean pyramid, axes in mm, the CT's spacing
# and prints a summary (window, text histogram, voxels, output, timings), with two PNGs next to
# the output: out/ct-middle-slice.png and out/ct-histogram.png. Checks against NumPy along the
# way: an 8x8 patch of the ingested array and the whole middle slice of the output, bit for bit.
# Rerunnable: outputs are replaced (output.exists=overwrite).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

say() { printf 'main-job: %s\n' "$*"; }
die() { printf 'main-job: error: %s\n' "$*" >&2; exit 1; }

py=/usr/bin/python3 # Debian's python: numpy and zarr 2.13 come from apt (no PyPI here)
# ct_tools.py imports the shared helpers (tests/lib/shardmill_test), as every Python tool does
export PYTHONPATH="$root/tests/lib${PYTHONPATH:+:$PYTHONPATH}"
build_jobs="$(nproc 2>/dev/null || echo 2)"

say "1/6 dependencies"
bash scripts/install-deps.sh

say "2/6 build Release in build/release"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release || die "cmake configure failed"
cmake --build build/release -j "$build_jobs" --target shardmill ||
    die "build failed (see the compiler output above)"
shardmill="$root/build/release/jobs/shardmill"
[[ -x "$shardmill" ]] || die "$shardmill was not built"
say "built: $("$shardmill" --version)"

say "3/6 real data"
bash scripts/fetch-data.sh
mkdir -p out

say "4/6 ingest: \$ shardmill run configs/ingest-ct.yaml"
"$shardmill" run configs/ingest-ct.yaml --set output.exists=overwrite ||
    die "ingest failed"
"$shardmill" info data/ct-v3.zarr --compact | "$py" scripts/ct_tools.py check-info >/dev/null ||
    die "data/ct-v3.zarr does not describe the CT"
"$shardmill" read data/ct-v3.zarr --offset 54,120,120 --shape 1,8,8 -o - |
    "$py" scripts/ct_tools.py patch data/ct/matrix.dat 54,120,120 1,8,8 ||
    die "shardmill read of the ingested CT differs from NumPy"

say "5/6 convert: \$ shardmill run configs/convert-ct.yaml"
"$shardmill" run configs/convert-ct.yaml --set output.exists=overwrite || die "convert failed"
"$shardmill" verify out/ct.zarr || die "verify failed"

say "6/6 pictures"
"$py" scripts/ct_tools.py pictures "$shardmill" out/ct.zarr out/ct-report.json \
    data/ct/matrix.dat || die "the output differs from NumPy's formula"

say "OME-Zarr from the raw CT in one job: \$ shardmill run configs/convert-ct-ome.yaml"
"$shardmill" run configs/convert-ct-ome.yaml --set output.exists=overwrite ||
    die "the OME-Zarr convert failed"
"$shardmill" verify out/ct-ome.zarr || die "verify of out/ct-ome.zarr failed"
"$py" scripts/ct_tools.py ome-pictures "$shardmill" out/ct-ome.zarr out/ct-ome-report.json \
    data/ct/main.plist data/ct/matrix.dat ||
    die "the OME-Zarr image differs from main.plist, the OME-NGFF rules or NumPy"
say "done: out/ct.zarr, out/ct-report.json, out/ct-middle-slice.png, out/ct-histogram.png,"
say "      out/ct-ome.zarr (OME-Zarr, 3 levels, mm), out/ct-ome-levels.png, out/ct-ome-histogram.png"
