"""Shared helpers of the convert tier (tests/convert): running shardmill, writing job YAML, the
NumPy oracle of SPEC §5 (histogram, percentiles, float32 normalization, checksums), an independent
NumPy decoder of the Zarr v3 sharded output (zarr.json only, CRC32C of every index verified with
the `crc32c` module), the completion-marker check of SPEC §6, and zarrita.js reads through
js/zarrita_io.mjs (node_modules of tests/interop/js).

Always run with /usr/bin/python3 (Debian numpy, zarr 2.13, nibabel, zstandard, crc32c).
"""

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import zlib
from fractions import Fraction

import crc32c as _crc32c
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "helpers"))
from file_tree import tree_files as files_under  # noqa: E402  (relative paths under a root)
JS_DIR = os.path.join(REPO, "tests", "interop", "js")  # zarrita.js 0.7.5 is installed there
EMPTY = 2**64 - 1
U64 = 2**64

DTYPES = {"bool": "?", "int8": "<i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
          "uint8": "<u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
          "float32": "<f4", "float64": "<f8"}


# The report's input members the provenance's input does not have: the path as the config named
# it, an array's layout, and the geometry of a convert (docs/internals/report.md).
REPORT_ONLY_INPUT = ("store", "chunks", "shards", "geometry", "geometry_from")


# ---- reporting ----

class Checks:
    """ok/FAIL lines and a closing count; exit status 1 on any failure."""

    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0

    def check(self, label, ok, detail=""):
        if ok:
            self.passed += 1
            print(f"ok   {label}", flush=True)
        else:
            self.failed += 1
            detail = str(detail).strip().replace("\n", " | ")
            print(f"FAIL {label}: {detail[:3000]}", flush=True)
        return bool(ok)

    def done(self):
        print(f"{self.name}: {self.passed} passed, {self.failed} failed", flush=True)
        return 0 if self.failed == 0 and self.passed > 0 else 1


# ---- shardmill ----

def auto_layout(shape, itemsize):
    """SPEC §2's default layout, from its text: inner chunks of 64 voxels per axis clipped to the
    array; shards the inner chunk times powers of two (an axis doubled at a time, z, y, x in
    turn, only while the shard is shorter than the array on that axis) until a full shard holds
    at least 32 MiB of values or covers the array. Returns (shard, chunk) as lists."""
    chunk = [min(64, int(s)) for s in shape]
    shard = list(chunk)
    nbytes = itemsize * math.prod(shard)
    d = idle = 0
    while nbytes < 32 << 20 and idle < len(shape):
        if shard[d] >= shape[d]:
            idle += 1
        else:
            idle = 0
            shard[d] *= 2
            nbytes *= 2
        d = (d + 1) % len(shape)
    return shard, chunk


def run(cmd, cwd=None, timeout=300, env=None):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def describe(r):
    cmd = " ".join(r.args) if isinstance(r.args, list) else str(r.args)
    return f"`{cmd}` exit {r.returncode}; stderr: {r.stderr.strip()[-1500:]}"


def yaml_scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(yaml_scalar(x) for x in v) + "]"
    return json.dumps(str(v))  # a double-quoted YAML string


def yaml_text(cfg, indent=0):
    """Block YAML of nested dicts; lists and scalars in flow style."""
    lines = []
    for k, v in cfg.items():
        if isinstance(v, dict):
            lines.append(" " * indent + f"{k}:")
            lines.append(yaml_text(v, indent + 2))
        else:
            lines.append(" " * indent + f"{k}: {yaml_scalar(v)}")
    return "\n".join(lines)


def write_config(path, cfg):
    with open(path, "w") as f:
        f.write(yaml_text(cfg) + "\n")
    return path


def engine_version(shardmill):
    """(version, commit) from `shardmill --version`: "shardmill 0.1.0 (commit abc)"."""
    r = run([shardmill, "--version"])
    m = re.match(r"shardmill (\S+) \(commit (\S+)\)", r.stdout.strip())
    return (m.group(1), m.group(2)) if m else (None, None)


def one_error_line(stderr):
    """The stderr lines that are not progress output; SPEC §4 wants exactly one error line."""
    return [ln for ln in stderr.splitlines() if ln.strip()]


# ---- NumPy oracle of SPEC §5 ----

def default_hist(dtype):
    """(bins, lo, hi) of SPEC §5's defaults."""
    dt = np.dtype(dtype)
    if dt == np.uint8:
        return 256, 0, 256
    if dt in (np.int8, np.int16, np.uint16):
        info = np.iinfo(dt)
        return int(info.max) - int(info.min) + 1, int(info.min), int(info.max) + 1
    raise ValueError(f"no default histogram for {dt}")


def histogram(values, bins, lo, hi):
    """counts, underflow, overflow, nan of SPEC §5 (exact integer bin arithmetic for integer
    inputs and integer ranges: bin = floor((v - lo) * B / (hi - lo)))."""
    v = np.asarray(values).ravel()
    assert v.dtype.kind in "iu", "the convert tier uses integer inputs"
    v = v.astype(np.int64)
    lo_f, hi_f = Fraction(lo), Fraction(hi)
    if lo_f.denominator == 1 and hi_f.denominator == 1 and -2**62 <= lo_f < hi_f <= 2**62:
        # integer bounds: NumPy int64 comparisons (a Fraction operand makes NumPy compare
        # element by element in Python: ~10 s for the 7 M voxels of the head CT)
        lo_i, hi_i = int(lo_f), int(hi_f)
        under = int(np.count_nonzero(v < lo_i))
        over = int(np.count_nonzero(v >= hi_i))
        inside = v if under == 0 and over == 0 else v[(v >= lo_i) & (v < hi_i)]
        # one bin per value (the int16/uint16 defaults): floor((v - lo) * B / B) = v - lo
        b = inside - lo_i if bins == hi_i - lo_i else ((inside - lo_i) * bins) // (hi_i - lo_i)
    else:  # exact rationals (slow path, small arrays only)
        under = int(np.count_nonzero(v < lo_f))
        over = int(np.count_nonzero(v >= hi_f))
        inside = v[(v >= lo_f) & (v < hi_f)]
        b = np.array([int((Fraction(int(x)) - lo_f) * bins // (hi_f - lo_f)) for x in inside],
                     dtype=np.int64)
    counts = np.bincount(b, minlength=bins).astype(np.int64)
    assert counts.size == bins
    return counts, under, over, 0


def bin_edge(lo, hi, bins, i):
    return Fraction(lo) + Fraction(i) * (Fraction(hi) - Fraction(lo)) / bins


def percentile(counts, under, over, lo, hi, p):
    """SPEC §5: counting from the underflow through the bins to the overflow, the lower edge of
    the first bin at which the cumulative count reaches ceil(p/100 * N) (exact arithmetic on the
    decimal p); landing in the underflow gives lo of the range, in the overflow hi."""
    n = int(under + int(np.sum(counts)) + over)
    target = math.ceil(Fraction(str(p)) * n / 100)
    if under >= target:
        return Fraction(lo)
    cum = np.cumsum(counts) + under
    hit = np.nonzero(cum >= target)[0]
    if hit.size == 0:
        return Fraction(hi)
    return bin_edge(lo, hi, len(counts), int(hit[0]))


def normalize(values, mode, divisor=None, lo=None, hi=None):
    """SPEC §5 in float32, exactly as written (NumPy float32 arithmetic)."""
    x = np.asarray(values).astype(np.float32)
    if mode == "scale":
        return (x / np.float32(divisor)).astype(np.float32)
    lo32, hi32 = np.float32(float(lo)), np.float32(float(hi))
    with np.errstate(all="ignore"):
        y = (x - lo32) / (hi32 - lo32)
    return np.clip(y, np.float32(0), np.float32(1)).astype(np.float32)


def block_mean(a, block):
    """SPEC §2's mean of one pyramid level: per block of the level above (block[d] voxels on axis
    d: 2 where the level halves it, 1 elsewhere; fewer at the edges) the float32 values summed in
    float64 from 0 in the block's C order, divided by their count, rounded once to a's type
    (float32; rint, half to even, for integers)."""
    shp = tuple(-(-n // b) for n, b in zip(a.shape, block))
    s = np.zeros(shp, np.float64)
    cnt = np.zeros(shp, np.float64)
    for off in np.ndindex(*block):  # C order of the block
        sub = a[tuple(slice(o, None, b) for o, b in zip(off, block))]
        sub = sub.astype(np.float32).astype(np.float64)
        s[tuple(slice(0, n) for n in sub.shape)] += sub
        cnt[tuple(slice(0, n) for n in sub.shape)] += 1
    m = s / cnt
    return m.astype(a.dtype) if a.dtype.kind == "f" else np.rint(m).astype(a.dtype)


def as_u64_bits(values):
    """v of SPEC §5 as uint64: integers sign-extended to 64 bits, floats by their bit pattern."""
    v = np.asarray(values)
    if v.dtype.kind == "f":
        bits = v.view(np.uint32 if v.dtype.itemsize == 4 else np.uint64)
        return bits.astype(np.uint64)
    if v.dtype.kind == "b":
        return v.astype(np.uint64)
    return v.astype(np.int64).view(np.uint64)


def linear_index(full_shape, offset, shape):
    """C-order linear index in an array of full_shape of every voxel of [offset, offset+shape)."""
    idx = np.zeros(tuple(shape), dtype=np.uint64)
    stride = 1
    for d in reversed(range(len(full_shape))):
        ax = (np.arange(shape[d], dtype=np.uint64) + np.uint64(offset[d])) * np.uint64(stride)
        idx += ax.reshape([-1 if k == d else 1 for k in range(len(full_shape))])
        stride *= full_shape[d]
    return idx


def checksums(values, full_shape, offset):
    """(checksum as signed int64, weighted_checksum as uint64) of SPEC §5."""
    values = np.asarray(values)
    s = w = 0
    step = max(1, (1 << 22) // max(1, int(np.prod(values.shape[1:]))))  # bounded memory
    for z in range(0, values.shape[0], step):
        part = values[z:z + step]
        v = as_u64_bits(part)
        off = [offset[0] + z] + list(offset[1:])
        idx = linear_index(full_shape, off, part.shape)
        with np.errstate(over="ignore"):
            s += int(np.sum(v, dtype=np.uint64))
            w += int(np.sum(v * (idx + np.uint64(1)), dtype=np.uint64))
    s %= U64
    w %= U64
    return (s - U64 if s >= 2**63 else s), w


def same_bits(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype.itemsize == b.dtype.itemsize and \
        a.tobytes() == b.tobytes()


def first_diff(got, want):
    g = np.ascontiguousarray(got).view(np.uint8).reshape(-1, got.dtype.itemsize)
    w = np.ascontiguousarray(want).view(np.uint8).reshape(-1, want.dtype.itemsize)
    if g.shape != w.shape:
        return f"shape {got.shape} vs {want.shape}"
    bad = np.nonzero(np.any(g != w, axis=1))[0]
    if bad.size == 0:
        return "identical"
    i = int(bad[0])
    at = np.unravel_index(i, got.shape)
    return (f"{bad.size} of {got.size} values differ; first at {tuple(int(x) for x in at)}: "
            f"got {got.ravel()[i]!r} want {want.ravel()[i]!r}")


# ---- an independent decoder of the output (Zarr v3 spec, NumPy) ----

def decode_chunk(codecs, data, dtype, shape):
    """Runs a [bytes, (zstd|gzip|blosc)?] chain backwards."""
    for c in reversed(codecs[1:]):
        name = c["name"]
        if name == "zstd":
            import zstandard
            data = zstandard.ZstdDecompressor().decompress(data)
        elif name == "gzip":
            data = zlib.decompress(data, 31)
        elif name == "blosc":
            from numcodecs import Blosc
            data = Blosc().decode(data)
        else:
            raise ValueError(f"unexpected codec {name}")
    assert codecs[0]["name"] == "bytes", codecs
    dt = np.dtype(DTYPES[dtype])
    if codecs[0].get("configuration", {}).get("endian") == "big":
        dt = dt.newbyteorder(">")
    n = int(np.prod(shape))
    if len(data) != n * dt.itemsize:
        raise ValueError(f"inner chunk decodes to {len(data)} bytes, want {n * dt.itemsize}")
    return np.frombuffer(bytes(data), dtype=dt).reshape(shape).astype(dt.newbyteorder("="))


def fill_of(meta):
    fv = meta["fill_value"]
    return {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}.get(fv, fv)


def decode_shard(cfg, data, dtype, shard_shape, fill):
    """Decodes one shard object; raises ValueError on a bad index (CRC32C, bounds)."""
    inner = cfg["chunk_shape"]
    cps = [s // c for s, c in zip(shard_shape, inner)]
    n = int(np.prod(cps))
    has_crc = any(c["name"] == "crc32c" for c in cfg["index_codecs"])
    index_len = 16 * n + (4 if has_crc else 0)
    if len(data) < index_len:
        raise ValueError(f"shard of {len(data)} bytes is shorter than its index ({index_len})")
    raw = data[-index_len:] if cfg["index_location"] == "end" else data[:index_len]
    if has_crc:
        want = int.from_bytes(raw[-4:], "little")
        got = _crc32c.crc32c(raw[:-4])
        if want != got:
            raise ValueError(f"index crc32c {got:08x} != stored {want:08x}")
        raw = raw[:-4]
    pairs = np.frombuffer(raw, dtype="<u8").reshape(n, 2)
    body_lo = 0 if cfg["index_location"] == "end" else index_len
    body_hi = len(data) - index_len if cfg["index_location"] == "end" else len(data)
    out = np.full(shard_shape, fill, dtype=np.dtype(DTYPES[dtype]).newbyteorder("="))
    for i, (off, nb) in enumerate(pairs):
        off, nb = int(off), int(nb)
        if off == EMPTY and nb == EMPTY:
            continue
        if off < body_lo or off + nb > body_hi:
            raise ValueError(f"inner chunk {i}: [{off}, {off + nb}) outside the shard body")
        idx = np.unravel_index(i, cps)
        sl = tuple(slice(k * c, (k + 1) * c) for k, c in zip(idx, inner))
        out[sl] = decode_chunk(cfg["codecs"], data[off:off + nb], dtype, inner)
    return out


def shard_grid(meta):
    grid_shape = meta["chunk_grid"]["configuration"]["chunk_shape"]
    return grid_shape, [-(-s // c) for s, c in zip(meta["shape"], grid_shape)]


def decode_object(meta, data):
    """The decoded block of one stored object (a shard or a plain chunk)."""
    grid_shape, _ = shard_grid(meta)
    codecs = meta["codecs"]
    fill = fill_of(meta)
    if codecs[0]["name"] == "sharding_indexed":
        return decode_shard(codecs[0]["configuration"], data, meta["data_type"], grid_shape, fill)
    return decode_chunk(codecs, data, meta["data_type"], grid_shape)


def spec_decode(path):
    """The whole output array decoded from its files by zarr.json alone (every shard is written:
    SPEC §2, so a missing shard is an error here)."""
    meta = json.load(open(os.path.join(path, "zarr.json")))
    shape = meta["shape"]
    grid_shape, grid = shard_grid(meta)
    full = np.full(shape, fill_of(meta), dtype=np.dtype(DTYPES[meta["data_type"]])
                   .newbyteorder("="))
    for idx in np.ndindex(*grid):
        data = open(os.path.join(path, "c", *[str(i) for i in idx]), "rb").read()
        block = decode_object(meta, data)
        sl = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, grid_shape, shape))
        full[sl] = block[tuple(slice(0, x.stop - x.start) for x in sl)]
    return full


# ---- the completion marker (SPEC §6) ----

def shard_keys(meta):
    _, grid = shard_grid(meta)
    return ["c/" + "/".join(str(i) for i in idx) for idx in np.ndindex(*grid)]


def check_marker(c, label, out, report=None, version=None):
    """Field-by-field check of OUT/shardmill.complete.json against the files on disk."""
    mpath = os.path.join(out, "shardmill.complete.json")
    if not c.check(f"{label} marker exists", os.path.isfile(mpath), mpath):
        return
    marker = json.load(open(mpath))
    zbytes = open(os.path.join(out, "zarr.json"), "rb").read()
    meta = json.loads(zbytes)
    keys = shard_keys(meta)
    c.check(f"{label} marker shardmill_complete (format version 2)",
            marker.get("shardmill_complete") == 2, marker.get("shardmill_complete"))
    c.check(f"{label} every record carries the 16-hex-digit digest of its values",
            all(re.fullmatch(r"[0-9a-f]{16}", str(r.get("values", "")))
                for r in marker.get("shards", [])), marker.get("shards", [])[:2])
    if version is not None:
        c.check(f"{label} marker engine", marker.get("engine") ==
                {"version": version[0], "commit": version[1]}, marker.get("engine"))
    c.check(f"{label} marker zarr_json_sha256 = sha256(zarr.json)",
            marker.get("zarr_json_sha256") == hashlib.sha256(zbytes).hexdigest(),
            marker.get("zarr_json_sha256"))
    c.check(f"{label} marker shard_count = prod(ceil(shape/shard)) = {len(keys)}",
            marker.get("shard_count") == len(keys), marker.get("shard_count"))
    recs = marker.get("shards", [])
    c.check(f"{label} marker lists every shard in grid order",
            [r.get("key") for r in recs] == keys,
            f"{len(recs)} records; first keys {[r.get('key') for r in recs[:4]]}")
    bad = []
    total = 0
    for r in recs:
        p = os.path.join(out, *r["key"].split("/"))
        if not os.path.isfile(p):
            bad.append(f"{r['key']} missing")
            continue
        data = open(p, "rb").read()
        total += len(data)
        if len(data) != r.get("size"):
            bad.append(f"{r['key']} size {len(data)} != {r.get('size')}")
        if _crc32c.crc32c(data) != r.get("crc32c"):
            bad.append(f"{r['key']} crc32c {_crc32c.crc32c(data)} != {r.get('crc32c')}")
    c.check(f"{label} marker sizes and crc32c match the files", not bad, "; ".join(bad[:5]))
    c.check(f"{label} marker bytes = sum of shard sizes", marker.get("bytes") == total,
            f"{marker.get('bytes')} vs {total}")
    stored = [f for f in files_under(out) if f.startswith("c" + os.sep)]
    c.check(f"{label} no object under c/ but the grid's shards",
            sorted(stored) == sorted(k.replace("/", os.sep) for k in keys),
            f"extra {sorted(set(stored) - set(keys))[:5]}")
    if report is not None:
        o = report.get("output", {})
        c.check(f"{label} report output.shards/bytes/complete",
                o.get("shards") == len(keys) and o.get("bytes") == total and
                o.get("complete") is True, o)


# ---- trees ----

def tree_diff(a, b):
    """Differences between two directory trees, byte for byte, every file."""
    fa, fb = files_under(a), files_under(b)
    diffs = [f"only in first: {x}" for x in sorted(set(fa) - set(fb))]
    diffs += [f"only in second: {x}" for x in sorted(set(fb) - set(fa))]
    for x in sorted(set(fa) & set(fb)):
        if open(os.path.join(a, x), "rb").read() != open(os.path.join(b, x), "rb").read():
            diffs.append(f"differs: {x}")
    return diffs


def snapshot(root):
    """{relpath: (bytes, mtime_ns, mode)} of every entry under root, root included."""
    snap = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files + ([] if d != root else ["."]):
            p = os.path.normpath(os.path.join(d, name))
            st = os.lstat(p)
            data = open(p, "rb").read() if os.path.isfile(p) and not os.path.islink(p) else None
            snap[os.path.relpath(p, root)] = (data, st.st_mtime_ns, st.st_mode)
    return snap


def fresh_dir(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


# ---- zarrita.js ----

def node_ok(node):
    if not node or node.endswith("NOTFOUND") or not os.path.exists(node):
        return "node not found (configure with SM_NODE=/path/to/node; scripts/install-deps.sh)"
    if not os.path.exists(os.path.join(JS_DIR, "node_modules", "zarrita", "package.json")):
        return f"{JS_DIR}/node_modules missing: run scripts/install-deps.sh (npm ci)"
    return None


def zarrita(node, job, workdir):
    """Runs js/zarrita_io.mjs on a job {"write": [...], "read": [...]}; returns (ok, text)."""
    jpath = os.path.join(workdir, "zarrita_job.json")
    with open(jpath, "w") as f:
        json.dump(job, f, indent=1)
    env = dict(os.environ, SM_ZARRITA_JS=JS_DIR)
    r = run([node, os.path.join(HERE, "js", "zarrita_io.mjs"), jpath], env=env, timeout=600)
    return r.returncode == 0, (r.stdout + r.stderr).strip()


def zarrita_read_all(c, node, workdir, arrays):
    """arrays: [(label, path, want ndarray, [(offset, shape), ...])]: zarrita.js reads the whole
    array and each region; each is compared bit for bit with `want`."""
    reads = []
    for k, (label, path, want, regions) in enumerate(arrays):
        for j, (off, shp) in enumerate([([0] * want.ndim, list(want.shape))] + list(regions)):
            rd = {"path": os.path.abspath(path), "offset": list(off), "shape": list(shp),
                  "out": os.path.join(workdir, f"zr_{k}_{j}.bin"), "label": label, "k": k,
                  "j": j}
            if int(np.prod(shp)) > 4 * 1024 * 1024:  # see zarrita_io.mjs: file descriptors
                rd["slab"] = 8
            reads.append(rd)
    ok, text = zarrita(node, {"read": reads}, workdir)
    if not c.check("zarrita.js ran", ok, text[-2000:]):
        return
    info = {}
    for line in text.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            info[d["out"]] = d
    for rd in reads:
        label, path, want, _ = arrays[rd["k"]]
        d = info.get(rd["out"], {})
        region = tuple(slice(o, o + s) for o, s in zip(rd["offset"], rd["shape"]))
        w = np.ascontiguousarray(want[region])
        tag = f"{label} zarrita [{','.join(map(str, rd['offset']))}]+" \
              f"[{','.join(map(str, rd['shape']))}]"
        if d.get("dtype") != np.dtype(w.dtype).name or d.get("shape") != list(want.shape):
            c.check(tag + " dtype/shape", False, f"zarrita says {d}")
            continue
        got = np.fromfile(rd["out"], dtype=w.dtype.newbyteorder("<")).reshape(w.shape)
        c.check(tag + " bit for bit", same_bits(got.astype(w.dtype), w), first_diff(got, w))


def shardmill_read(c, shardmill, label, path, want, workdir):
    """`shardmill read` of the whole array equals `want` bit for bit."""
    out = os.path.join(workdir, "smread.bin")
    r = run([shardmill, "read", path, "--offset", ",".join("0" * want.ndim), "--shape",
             ",".join(str(s) for s in want.shape), "-o", out])
    if not c.check(f"{label} shardmill read", r.returncode == 0, describe(r)):
        return
    got = np.fromfile(out, dtype=want.dtype.newbyteorder("<")).reshape(want.shape)
    c.check(f"{label} shardmill read bit for bit", same_bits(got.astype(want.dtype), want),
            first_diff(got, want))


def group_main(test, groups, skip=None, no_node=(), precheck=None, flag="group"):
    """main() of a test script whose ctest cases are groups (--FLAG NAME runs groups[NAME](c,
    args, work)): the common flags, a fresh work directory, the checks named TEST.NAME, the
    engine version in args.version; zarrita.js must be available unless the group is in no_node;
    precheck(c, args), if given, may fail the run first (False). A group returning `skip` (not
    None) skips."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--node", default="")
    ap.add_argument("--work", required=True)
    ap.add_argument(f"--{flag}", dest="group", required=True, choices=sorted(groups))
    args = ap.parse_args()
    args.shardmill = os.path.abspath(args.shardmill)
    work = fresh_dir(os.path.abspath(os.path.join(args.work, args.group)))
    c = Checks(f"{test}.{args.group}")
    args.version = engine_version(args.shardmill)
    if precheck is not None and not precheck(c, args):
        return c.done()
    if args.group not in no_node:
        why = node_ok(args.node)
        if not c.check("zarrita.js available", why is None, why):
            return c.done()
    if groups[args.group](c, args, work) == skip and skip is not None:
        return skip
    return c.done()


def main_guard(fn):
    try:
        sys.exit(fn())
    except KeyboardInterrupt:
        sys.exit(130)
