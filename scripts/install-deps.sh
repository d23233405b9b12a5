#!/usr/bin/env bash
# install-deps.sh: installs what shardmill needs on Debian 12 (bookworm), and only what is missing.
# Idempotent: a second run checks with dpkg-query, installs nothing, and takes about a second.
# Runs `apt-get update` only when something is missing. Needs root (or sudo) only to install.
# Then installs the zarrita.js peer and s3rver for the tests, and neuroglancer, Viv, esbuild and
# playwright-core for the viewer test (`npm ci`) when a node_modules is missing or does not match
# its package-lock.json (tests/interop/js, tests/viewer). chromium (Debian's) is the viewer test's
# browser, headless.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

say() { printf 'install-deps: %s\n' "$*"; }
die() { printf 'install-deps: error: %s\n' "$*" >&2; exit 1; }

packages=(
    build-essential cmake pkg-config git
    libzstd-dev liblz4-dev libdeflate-dev zlib1g-dev libblosc-dev libcurl4-openssl-dev libyaml-dev
    libjansson-dev nettle-dev libopenmpi-dev openmpi-bin libhdf5-openmpi-dev libcmocka-dev
    nginx-light liblzma-dev libbz2-dev
    python3 python3-numpy python3-zarr python3-numcodecs python3-lz4 python3-zstandard python3-crc32c
    python3-h5py python3-nibabel python3-botocore
    slurm-wlm munge python3-matplotlib
    clang-format-16 hyperfine strace
    clang libclang-rt-14-dev
    libtiff-dev libtiff-tools python3-tifffile libpng-dev python3-png
    chromium python3-pil
)

# Node.js and npm: a machine may carry them outside Debian's packages (e.g. node 20 + npm 11 in
# /usr/bin or /usr/local/bin); only when a command does not work do we fall back to Debian's.
node_ver="$(node --version 2>/dev/null || true)"
npm_ver="$(npm --version 2>/dev/null || true)"
[[ -n "$node_ver" ]] || packages+=(nodejs)
[[ -n "$npm_ver" ]] || packages+=(npm)
node_note="node ${node_ver:-missing}, npm ${npm_ver:-missing}"

command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: this script targets Debian 12"

missing=()
for p in "${packages[@]}"; do
    status="$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)"
    [[ "$status" == ii* ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
    say "apt: all ${#packages[@]} packages present, nothing to install"
else
    say "apt: missing ${#missing[@]}: ${missing[*]}"
    sudo=()
    if ((EUID != 0)); then
        command -v sudo >/dev/null 2>&1 || die "not root and no sudo: install as root: apt-get install ${missing[*]}"
        sudo=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive
    say "apt: apt-get update"
    "${sudo[@]}" apt-get update -qq
    say "apt: apt-get install ${missing[*]}"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        -o Dpkg::Use-Pty=0 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        "${missing[@]}"
    still=()
    for p in "${missing[@]}"; do
        status="$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)"
        [[ "$status" == ii* ]] || still+=("$p")
    done
    ((${#still[@]} == 0)) || die "still missing after apt-get install: ${still[*]}"
    say "apt: installed ${#missing[@]} package(s)"
    node_note="node $(node --version 2>/dev/null || echo missing), npm $(npm --version 2>/dev/null || echo missing)"
fi
say "node: $node_note"

# npm_ci DIR WHAT: `npm ci` in DIR when its node_modules does not match DIR/package-lock.json.
npm_ci() {
    local dir="$1" what="$2" rel="${1#"$root"/}"
    if [[ ! -f "$dir/package-lock.json" ]]; then
        say "npm: no $rel/package-lock.json, skipped"
        return 0
    fi
    node --version >/dev/null 2>&1 || die "node does not run; cannot install $dir"
    # Up to date = every package of the lock file is in node_modules at the locked version
    # (npm's own record, node_modules/.package-lock.json, plus each package.json).
    if node -e '
        const fs = require("fs"), path = require("path");
        const dir = process.argv[1];
        const lock = JSON.parse(fs.readFileSync(path.join(dir, "package-lock.json"), "utf8"));
        for (const [key, want] of Object.entries(lock.packages || {})) {
            if (key === "" || want.optional || want.dev) continue;
            let got;
            try { got = JSON.parse(fs.readFileSync(path.join(dir, key, "package.json"), "utf8")); }
            catch (e) { process.exit(1); }
            if (want.version && got.version !== want.version) process.exit(1);
        }
        if (!fs.existsSync(path.join(dir, "node_modules", ".package-lock.json"))) process.exit(1);
    ' "$dir" 2>/dev/null; then
        say "npm: $rel/node_modules matches package-lock.json"
    else
        say "npm: npm ci --prefix $rel ($what)"
        npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
        say "npm: installed $rel/node_modules"
    fi
}
# zarrita.js for tests/interop (SPEC §8 peers), s3rver for tests/s3. npm ci installs exactly the lock file.
npm_ci "$root/tests/interop/js" "zarrita.js, ngff-zarr, s3rver"
# neuroglancer, Viv (deck.gl), esbuild and playwright-core for the viewer test (tests/viewer,
# Debian's chromium).
npm_ci "$root/tests/viewer" "neuroglancer, Viv and deck.gl, esbuild, playwright-core"
say "done"
