#!/usr/bin/env bash
# make-w1-input.sh: the W1 benchmark input (SPEC §8 W1) written by an independent writer.
#   data/mri.zarr       Zarr v3 uint8 [316,370,301] ([z,y,x] of the NIfTI's x,y,z = 301x370x316),
#                       codecs [bytes, zstd 3], chunks [64,64,64], written by zarrita.js 0.7.5
#   data/mri-crop.zarr  the same, [256,256,256]: the first 256 along each axis
#   data/w1-input.json  what was checked (header, SHA-256 of source and arrays)
# Steps: scripts/fetch-data.sh if data/mri/ch2better.nii.gz is missing; `npm ci --prefix
# tests/interop/js` if the pinned zarrita is missing; bench/scan_http/write_w1.mjs (parses the NIfTI-1
# header itself, writes with zarrita); bench/scan_http/w1_input.py verify (nibabel vs every decoded
# chunk, value by value). Idempotent: stores that already verify against the same source file
# are kept (verified again, not rewritten). --force rewrites them.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
data="${SM_DATA_DIR:-$root/data}"
py=/usr/bin/python3
# w1_input.py imports the shared helpers (tests/lib/shardmill_test), as every Python tool does
export PYTHONPATH="$root/tests/lib${PYTHONPATH:+:$PYTHONPATH}"
nii="$data/mri/ch2better.nii.gz"
manifest="$data/w1-input.json"
force=0
[[ "${1:-}" == "--force" ]] && force=1

say() { printf 'make-w1-input: %s\n' "$*"; }
die() { printf 'make-w1-input: error: %s\n' "$*" >&2; exit 1; }

if [[ ! -f "$nii" ]]; then
    say "data/mri/ch2better.nii.gz missing: running scripts/fetch-data.sh"
    [[ -x "$root/scripts/fetch-data.sh" || -f "$root/scripts/fetch-data.sh" ]] ||
        die "scripts/fetch-data.sh not found"
    bash "$root/scripts/fetch-data.sh"
fi
[[ -f "$nii" ]] || die "$nii still missing after fetch-data.sh"
command -v node >/dev/null || die "node not found (scripts/install-deps.sh installs it)"
if [[ ! -f "$root/tests/interop/js/node_modules/zarrita/package.json" ]]; then
    say "npm ci --prefix tests/interop/js (pinned zarrita.js missing)"
    npm ci --prefix "$root/tests/interop/js" --no-audit --no-fund
fi

src_sha="$(sha256sum "$nii" | cut -d' ' -f1)"
if ((!force)) && [[ -f "$manifest" && -f "$data/mri.zarr/zarr.json" && -f "$data/mri-crop.zarr/zarr.json" ]] &&
    "$py" -c 'import json,sys; m=json.load(open(sys.argv[1])); sys.exit(0 if m.get("verified") and m.get("source_sha256")==sys.argv[2] else 1)' \
        "$manifest" "$src_sha"; then
    if "$py" "$root/bench/scan_http/w1_input.py" verify "$data" --nii "$nii"; then
        say "data/mri.zarr and data/mri-crop.zarr present and verified, kept"
        exit 0
    fi
    say "the existing stores do not verify: rewriting them"
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/shardmill-w1.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
say "writing data/mri.zarr and data/mri-crop.zarr with zarrita.js"
node "$root/bench/scan_http/write_w1.mjs" "$nii" "$tmp/out" >"$tmp/info.json"
"$py" "$root/bench/scan_http/w1_input.py" verify "$tmp/out" --nii "$nii" --js-info "$tmp/info.json" \
    --manifest "$tmp/out/w1-input.json" || die "the written stores do not match nibabel"
mkdir -p "$data"
rm -f "$manifest"
for a in mri.zarr mri-crop.zarr; do
    rm -rf "$data/$a.old"
    [[ -e "$data/$a" ]] && mv "$data/$a" "$data/$a.old"
    mv "$tmp/out/$a" "$data/$a"
    rm -rf "$data/$a.old"
done
mv "$tmp/out/w1-input.json" "$manifest"
say "done: data/mri.zarr [316,370,301], data/mri-crop.zarr [256,256,256] (uint8, zstd 3, chunks 64^3)"
