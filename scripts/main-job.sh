#!/usr/bin/env bash
# main-job.sh: README command 1. On a fresh Debian 12 machine: installs what is missing, builds
# shardmill (Release), fetches the real head CT (SPEC §9), writes it as a Zarr array with an
# independent writer, and reads it back with shardmill:
#   shardmill info data/ct.zarr
#   shardmill read data/ct.zarr --offset 54,120,120 --shape 1,8,8 -o -   -> an 8x8 table of HU,
#   checked value for value against NumPy reading the raw matrix.dat.
# For now the array is Zarr v2 written by zarr-python 2.13 (it cannot write v3); the `convert`
# job (a later issue) replaces the middle of this script with the real sharded v3 pipeline.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

say() { printf 'main-job: %s\n' "$*"; }
die() { printf 'main-job: error: %s\n' "$*" >&2; exit 1; }

offset="54,120,120"
shape="1,8,8"
py=/usr/bin/python3 # Debian's python: numpy and zarr 2.13 come from apt (no PyPI here)
build_jobs="$(nproc 2>/dev/null || echo 2)"

say "1/5 dependencies"
bash scripts/install-deps.sh

say "2/5 build Release in build/release"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release || die "cmake configure failed"
cmake --build build/release -j "$build_jobs" --target shardmill ||
    die "build failed (see the compiler output above)"
shardmill="$root/build/release/jobs/shardmill"
[[ -x "$shardmill" ]] || die "$shardmill was not built"
say "built: $("$shardmill" --version)"

say "3/5 real data"
bash scripts/fetch-data.sh

say "4/5 write data/ct.zarr (zarr-python, independent of shardmill)"
"$py" scripts/ct_tools.py write-zarr data/ct/matrix.dat data/ct.zarr

say "5/5 read it with shardmill"
say "\$ shardmill info data/ct.zarr"
"$shardmill" info data/ct.zarr | "$py" scripts/ct_tools.py check-info ||
    die "shardmill info failed or does not describe the CT"
say "\$ shardmill read data/ct.zarr --offset $offset --shape $shape -o -"
"$shardmill" read data/ct.zarr --offset "$offset" --shape "$shape" -o - |
    "$py" scripts/ct_tools.py patch data/ct/matrix.dat "$offset" "$shape" ||
    die "shardmill read failed or differs from NumPy"
say "done"
