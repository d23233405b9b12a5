#!/usr/bin/env bash
# fetch-data.sh: the two real scans of SPEC §9, from Debian packages, into data/ (git-ignored).
#   data/ct/matrix.dat, data/ct/main.plist   head CT, raw little-endian int16 [108,256,256]
#                                            (invesalius-examples: examples/Cranium.inv3)
#   data/mri/ch2better.nii.gz                MRI, NIfTI-1 uint8, x,y,z = 301x370x316
#                                            (mricron-data: templates/ch2better.nii.gz)
# Uses only `apt-get download` (no other network) and dpkg-deb. Idempotent: a file that is
# present and checks out (size, plist shape/dtype, NIfTI header) is not fetched again.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
data="$root/data"

say() { printf 'fetch-data: %s\n' "$*"; }
die() { printf 'fetch-data: error: %s\n' "$*" >&2; exit 1; }

ct_shape="108,256,256"
ct_bytes=$((108 * 256 * 256 * 2))
mri_dims="301,370,316"

py=/usr/bin/python3
[[ -x "$py" ]] || py="$(command -v python3 || true)"
[[ -n "$py" ]] || die "python3 is needed to check the files (run scripts/install-deps.sh)"

# check_ct DIR: matrix.dat has the right size and main.plist says int16 [108,256,256].
check_ct() {
    local dir="$1"
    [[ -f "$dir/matrix.dat" && -f "$dir/main.plist" ]] || return 1
    [[ "$(stat -c %s "$dir/matrix.dat")" == "$ct_bytes" ]] || return 1
    "$py" - "$dir/main.plist" "$ct_shape" <<'EOF'
import plistlib, sys
with open(sys.argv[1], "rb") as f:
    m = plistlib.load(f).get("matrix", {})
shape = ",".join(str(int(v)) for v in m.get("shape", []))
if m.get("dtype") != "int16" or shape != sys.argv[2]:
    sys.exit("main.plist describes %s %s, expected int16 [%s]" % (m.get("dtype"), shape, sys.argv[2]))
EOF
}

# check_mri FILE: a gzip'd NIfTI-1 header with datatype uint8 and the expected dims.
check_mri() {
    [[ -f "$1" ]] || return 1
    "$py" - "$1" "$mri_dims" <<'EOF'
import gzip, struct, sys
with gzip.open(sys.argv[1], "rb") as f:
    h = f.read(348)
if len(h) != 348:
    sys.exit("short NIfTI header")
for bo in "<>":
    if struct.unpack(bo + "i", h[0:4])[0] == 348:
        break
else:
    sys.exit("not a NIfTI-1 header")
dim = struct.unpack(bo + "8h", h[40:56])
datatype = struct.unpack(bo + "h", h[70:72])[0]
dims = ",".join(str(d) for d in dim[1:1 + dim[0]])
if h[344:348] not in (b"n+1\0", b"ni1\0") or datatype != 2 or dims != sys.argv[2]:
    sys.exit("NIfTI header: magic %r datatype %d dims %s, expected uint8 %s"
             % (h[344:348], datatype, dims, sys.argv[2]))
EOF
}

ct_ok=0
mri_ok=0
if check_ct "$data/ct" 2>/dev/null; then
    ct_ok=1
    say "data/ct/matrix.dat present ($ct_bytes bytes, int16 [$ct_shape]), skipped"
fi
if check_mri "$data/mri/ch2better.nii.gz" 2>/dev/null; then
    mri_ok=1
    say "data/mri/ch2better.nii.gz present (uint8 $mri_dims), skipped"
fi
if ((ct_ok && mri_ok)); then
    say "done (nothing to fetch)"
    exit 0
fi

wanted=()
((ct_ok)) || wanted+=(invesalius-examples)
((mri_ok)) || wanted+=(mricron-data)

tmp="$(mktemp -d "${TMPDIR:-/tmp}/shardmill-fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
# apt downloads as user _apt when it can write the target directory; otherwise it warns.
if ((EUID == 0)) && id _apt >/dev/null 2>&1; then
    chown _apt "$tmp" 2>/dev/null || true
fi
cd "$tmp"

# apt-get download needs the package lists; a fresh machine may not have them yet.
if ! apt-cache show "${wanted[@]}" >/dev/null 2>&1; then
    ((EUID == 0)) || die "package lists lack ${wanted[*]}; run 'apt-get update' as root"
    say "apt-get update (package lists lack ${wanted[*]})"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
fi
say "apt-get download ${wanted[*]}"
apt-get download -qq "${wanted[@]}" || die "apt-get download ${wanted[*]} failed"
mkdir -p "$data"

if ((!ct_ok)); then
    deb="$(ls "$tmp"/invesalius-examples_*.deb)"
    ver="$(dpkg-deb -f "$deb" Version)"
    dpkg-deb -x "$deb" "$tmp/inv"
    inv3="$(find "$tmp/inv" -name Cranium.inv3 -type f | head -n 1)"
    [[ -n "$inv3" ]] || die "Cranium.inv3 not found in $(basename "$deb")"
    mkdir -p "$tmp/inv3"
    tar -xzf "$inv3" -C "$tmp/inv3" --no-same-owner --no-same-permissions --wildcards '*matrix.dat' '*main.plist' ||
        die "cannot extract matrix.dat and main.plist from Cranium.inv3"
    m="$(find "$tmp/inv3" -name matrix.dat -type f | head -n 1)"
    p="$(find "$tmp/inv3" -name main.plist -type f | head -n 1)"
    [[ -n "$m" && -n "$p" ]] || die "Cranium.inv3 lacks matrix.dat or main.plist"
    mkdir -p "$tmp/ct"
    mv "$m" "$tmp/ct/matrix.dat"
    mv "$p" "$tmp/ct/main.plist"
    size="$(stat -c %s "$tmp/ct/matrix.dat")"
    [[ "$size" == "$ct_bytes" ]] || die "matrix.dat has $size bytes, expected $ct_bytes (108*256*256*2)"
    check_ct "$tmp/ct" || die "main.plist does not describe int16 [$ct_shape]"
    range="$("$py" - "$tmp/ct/matrix.dat" <<'EOF'
import array, sys
a = array.array("h")
with open(sys.argv[1], "rb") as f:
    a.frombytes(f.read())
if sys.byteorder == "big":
    a.byteswap()
print("%d..%d" % (min(a), max(a)))
EOF
)"
    printf 'invesalius-examples %s: examples/Cranium.inv3 -> matrix.dat, main.plist\n' "$ver" \
        >"$tmp/ct/SOURCE"
    rm -rf "$data/ct"
    mv "$tmp/ct" "$data/ct"
    say "data/ct/matrix.dat: int16 [$ct_shape], $ct_bytes bytes, values $range (invesalius-examples $ver)"
    say "data/ct/main.plist: written"
fi

if ((!mri_ok)); then
    deb="$(ls "$tmp"/mricron-data_*.deb)"
    ver="$(dpkg-deb -f "$deb" Version)"
    dpkg-deb -x "$deb" "$tmp/mricron"
    nii="$(find "$tmp/mricron" -name ch2better.nii.gz -type f | head -n 1)"
    [[ -n "$nii" ]] || die "ch2better.nii.gz not found in $(basename "$deb")"
    check_mri "$nii" || die "ch2better.nii.gz is not uint8 NIfTI-1 with dims $mri_dims"
    mkdir -p "$data/mri"
    cp "$nii" "$data/mri/ch2better.nii.gz.tmp"
    mv "$data/mri/ch2better.nii.gz.tmp" "$data/mri/ch2better.nii.gz"
    printf 'mricron-data %s: templates/ch2better.nii.gz\n' "$ver" >"$data/mri/SOURCE"
    say "data/mri/ch2better.nii.gz: NIfTI-1 uint8 $mri_dims, $(stat -c %s "$data/mri/ch2better.nii.gz") bytes (mricron-data $ver)"
fi
say "done"
