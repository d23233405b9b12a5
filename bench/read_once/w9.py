#!/usr/bin/python3
"""W9 read once (SPEC §8, issue 33 item 7): a 2048³ uint16 CT-like stack converted to a uint16
OME-Zarr pyramid from a cold page cache; what each pass reads from storage against the input's
size on disk, the wall time against its floor, peak RSS, files and sampled values.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/read_once/w9.py [--variants tiff_strip,...]
        [--configs 1x2,2x1] [--layouts default,narrow] [--data-dir DIR] [--shardmill BIN]
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/read_once/w9.py --generate-only --variants tiff_strip
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/read_once/w9.py --quick --out DIR   (CI: bench.w9.quick)
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/read_once/w9.py --replan RESULT.json --rates RATES.json

Inputs (written once under --data-dir, slice by slice as reconstructions arrive, by Debian's
tifffile / h5py / NumPy; never in git; about 16 GiB each at 2048³: check `df -h` first):
  tiff_strip    a directory of tifffile slices s1.tif .. s2048.tif, one strip per slice,
                uncompressed (issue 33's input)
  tiff_tiled    the same slices in 256x256 tiles, deflate level 4 (tifffile's zlib)
  hdf5_slices   h5py /volume, chunks (1, 2048, 2048), gzip 4
  hdf5_cubes    h5py /volume, chunks (64, 64, 64), gzip 4 (written 64 slices at a time)
The volume is ct_slice()'s: a body ellipsoid with a bone shell, four spheres and integer noise,
values 0..4095 (a float32 version of shardmill_test.volumes.phantom, fast enough for 2048
slices); the generator counts its uint16 histogram as it writes (the NumPy oracle of the window)
and writes a manifest (shape, files, size on disk, histogram) next to the input.
Job: configs/convert-tiff-ome.yaml's settings as issue 33 ran them: normalize percentile [1, 99],
output.dtype uint16, output.ome.levels auto, limits.memory_bytes 4GiB (--quick: 256MiB, so that
the 128 MiB input is read twice too), parallel.threads per configuration; layouts `default`
(output.shard auto) and `narrow` (explicit shards narrower than every input's blocks: [64,128,128];
--quick: [64,64,64]). Configurations (ranks x threads): 1x2 (one plain process) and 2x1 (mpirun
-np 2), each rank started through bench/region_read/w3_spawn.c (its wait4 peak RSS).
Before each run: sync and `echo 3 > /proc/sys/vm/drop_caches` (root; --quick and --warm never
drop: the quick profile measures no time, and dropping the cache of a shared CI machine would
slow everyone's builds). Per run it records:
  - wall time (process) and the report's stage times;
  - per pass (the report's io.source.passes, issue 33 item 4): bytes read from storage (summed
    over ranks and the largest rank's), rchar, and their ratio to the input's size on disk; the
    whole process tree's rchar measured here (/proc/self/io around the waited launch); where the
    report has no `passes` yet, the per-pass ratio from io.source.bytes_read (decoded bytes then)
    over the passes made (two unless every rank kept its input) and the decoded size;
  - peak RSS per rank (wait4) against limits.memory_bytes; the output's files and levels;
  - the floor (docs/BENCHMARKS.md "W9"): per pass max(read, decode [+ encode in the write
    pass]), summed over the passes (a percentile finishes its scan before writing; a kept input
    adds the encode alone), read = the input's size on disk / the disk's cold read bandwidth
    (measured here: cache dropped, the input's files read in order with 8 MiB reads, up to
    --bw-bytes, buffered and with O_DIRECT: the better of the two), encode = the output's bytes
    (every level) / (zstd -3's per-core speed x ranks x threads) on the sampled output chunks (python-zstandard, the same libzstd), decode = a
    compressed input's decoded bytes / (zlib's inflate per-core speed x ranks x threads) on the
    sampled box cut in the input's blocks; wall / floor; user+sys CPU of the run and the load
    average before it;
  - `shardmill plan --cache cold --fs-read-bandwidth <measured>`'s estimate (and with the rates'
    own cold bandwidth) and its error against the wall time (target +-25 %);
  - values: the report's window equals NumPy's percentiles of the generator's histogram, and
    --samples level-0 shards (seeded choice) decoded by shardmill_test.zarr_decode equal NumPy's
    rint(float32(window(v)) x 65535) of the input box read back by tifffile / h5py.
Targets (issue 33 "Done when"), printed PASS/FAIL: read ratio <= 1.05 per pass, wall <= 1.3 x
floor, plan within +-25 % of the wall, peak RSS per rank < limits.memory_bytes, values equal. The full profile exits 1 only on a
failed run or wrong values; --quick exits 1 also when a pass reads more than 1.05x, by the
report or by the process tree's rchar (<= 1.05 x passes x the input on disk + 1 MiB), never on
time. --quick: a 64x1024x1024 stack of every variant in OUT/w9-quick-data (deleted), shards
[64,64,64], 1x2 (and 2x1 with --configs). Results: OUT/w9-<commit>[-quick].json (bench/results by
default), never overwritten.
"""

import argparse
import json
import mmap
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

from shardmill_test import launcher as sm_launch
from shardmill_test import machine
from shardmill_test import report_json
from shardmill_test import results
from shardmill_test import spec_oracle
from shardmill_test import zarr_decode

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

MIB = 1 << 20
GIB = 1 << 30
FULL = {"shape": [2048, 2048, 2048], "narrow": [64, 128, 128], "memory": 4 * GIB,
        "memory_text": "4GiB", "samples": 2, "tile": 256}
QUICK = {"shape": [64, 1024, 1024], "narrow": [64, 64, 64], "memory": 256 * MIB,
         "memory_text": "256MiB", "samples": 3, "tile": 256}
VARIANTS = ("tiff_strip", "tiff_tiled", "hdf5_slices", "hdf5_cubes")
CONFIGS = {"1x2": (1, 2), "2x1": (2, 1)}
PCT = (1, 99)
RATIO_TARGET = 1.05
FLOOR_TARGET = 1.3
PLAN_TARGET = 0.25
SEED = 20261207
H5_DATASET = "/volume"


# ---- the volume ----

def ct_slice(shape, z, seed=SEED):
    """Slice z of the CT-like volume (uint16, 0..4095): float32 arithmetic, separable terms."""
    nz, ny, nx = shape
    zc = np.float32((z + 0.5) / nz * 2 - 1)
    y = (np.arange(ny, dtype=np.float32) + np.float32(0.5)) / np.float32(ny) * 2 - 1
    x = (np.arange(nx, dtype=np.float32) + np.float32(0.5)) / np.float32(nx) * 2 - 1
    r2 = (zc / np.float32(0.92)) ** 2 + ((y / np.float32(0.80)) ** 2)[:, None] + \
        ((x / np.float32(0.70)) ** 2)[None, :]
    wave = np.float32(90 * np.sin(3.1 * zc + 1.3))
    v = np.where(r2 < 1, np.float32(1040) + wave * np.cos(2.3 * y - 0.4)[:, None] *
                 np.cos(1.7 * x + 0.2)[None, :], np.float32(40)).astype(np.float32)
    shell = (r2 > 0.78) & (r2 < 0.88)
    bone = np.float32(2200) + np.float32(200) * np.cos(4.0 * y)[:, None] * np.cos(5.0 * x)[None, :]
    v[shell] = bone[shell]
    for cz, cy, cx, rad, val in ((0.3, 0.2, -0.25, 0.16, 1800.0), (-0.35, -0.3, 0.2, 0.12, 2900.0),
                                 (0.0, 0.35, 0.3, 0.09, 600.0), (-0.1, -0.05, -0.05, 0.2, 1250.0)):
        dz2 = float(zc - cz) ** 2
        if dz2 >= rad * rad:
            continue
        d2 = ((y - cy) ** 2)[:, None] + ((x - cx) ** 2)[None, :]
        v[d2 < rad * rad - dz2] = val
    rng = np.random.default_rng([seed, z])
    v += rng.integers(-48, 49, size=v.shape, dtype=np.int16)
    return np.clip(np.rint(v), 0, 4095).astype(np.uint16)


_SLICES = {}


def cached_slice(shape, z):
    """ct_slice, kept in memory for a volume of at most 512 MiB (the quick profile writes the
    same slices as every variant)."""
    if int(np.prod(shape)) * 2 > 512 * MIB:
        return ct_slice(shape, z)
    key = (tuple(shape), z)
    if key not in _SLICES:
        _SLICES[key] = ct_slice(shape, z)
    return _SLICES[key]


def manifest_path(root):
    return root + ".manifest.json"


def generate(variant, root, shape, tile):
    """Writes the variant at root (idempotent: a manifest with the same shape means done)."""
    mpath = manifest_path(root)
    try:
        with open(mpath) as f:
            man = json.load(f)
        if man["shape"] == list(shape) and man["variant"] == variant:
            return man
    except (OSError, ValueError, KeyError):
        pass
    t0 = time.monotonic()
    if os.path.isdir(root):
        shutil.rmtree(root)
    elif os.path.exists(root):
        os.unlink(root)
    hist = np.zeros(65536, dtype=np.int64)
    nz = shape[0]
    files = []
    if variant.startswith("tiff"):
        import tifffile
        os.makedirs(root)
        kw = {"rowsperstrip": shape[1]} if variant == "tiff_strip" else \
            {"tile": (tile, tile), "compression": "zlib", "compressionargs": {"level": 4}}
        for z in range(nz):
            s = cached_slice(shape, z)
            hist += np.bincount(s.ravel(), minlength=65536)
            path = os.path.join(root, f"s{z + 1}.tif")
            tifffile.imwrite(path, s, **kw)
            files.append(path)
            if z % 128 == 127:
                results.log(f"w9: {variant}: {z + 1}/{nz} slices, {time.monotonic() - t0:.0f} s")
    else:
        import h5py
        chunks = (1,) + tuple(shape[1:]) if variant == "hdf5_slices" else \
            tuple(min(64, s) for s in shape)
        with h5py.File(root, "w") as f:
            ds = f.create_dataset(H5_DATASET, shape=tuple(shape), dtype=np.uint16, chunks=chunks,
                                  compression="gzip", compression_opts=4)
            step = chunks[0]
            for z0 in range(0, nz, step):
                slab = np.stack([cached_slice(shape, z) for z in range(z0, min(nz, z0 + step))])
                hist += np.bincount(slab.ravel(), minlength=65536)
                ds[z0:z0 + slab.shape[0]] = slab
                if (z0 + step) % 128 == 0:
                    results.log(f"w9: {variant}: {z0 + step}/{nz} slices, "
                                f"{time.monotonic() - t0:.0f} s")
        files.append(root)
    man = {"variant": variant, "path": root, "shape": list(shape), "dtype": "uint16",
           "files": len(files), "input_bytes": sum(os.stat(p).st_size for p in files),
           "decoded_bytes": int(np.prod(shape)) * 2, "histogram": hist.tolist(),
           "generate_s": round(time.monotonic() - t0, 1)}
    if variant.startswith("tiff"):
        man["file_list"] = [os.path.basename(p) for p in files]
    with open(mpath, "w") as f:
        json.dump(man, f)
    results.log(f"w9: {variant}: {shape} written in {man['generate_s']} s, "
                f"{man['input_bytes'] / GIB:.2f} GiB on disk")
    return man


def input_files(man):
    if man["variant"].startswith("tiff"):
        return [os.path.join(man["path"], n) for n in man["file_list"]]
    return [man["path"]]


def window(man):
    """NumPy's SPEC §5 percentiles of the generator's histogram (the default uint16 bins)."""
    counts = np.asarray(man["histogram"], dtype=np.int64)
    bins, lo, hi = spec_oracle.default_hist(np.uint16)
    assert bins == counts.size
    return (spec_oracle.percentile(counts, 0, 0, lo, hi, PCT[0]),
            spec_oracle.percentile(counts, 0, 0, lo, hi, PCT[1]))


def read_box(man, off, shape):
    """The input box read back by tifffile / h5py (independent of shardmill)."""
    sl = tuple(slice(o, o + n) for o, n in zip(off, shape))
    if man["variant"].startswith("tiff"):
        import tifffile

        def one(name):
            path = os.path.join(man["path"], name)
            try:  # an uncompressed slice: only the box's rows are read
                return np.array(tifffile.memmap(path, mode="r")[sl[1], sl[2]])
            except ValueError:
                return tifffile.imread(path)[sl[1], sl[2]]
        return np.stack([one(n) for n in man["file_list"][sl[0]]])
    import h5py
    with h5py.File(man["path"], "r") as f:
        return f[H5_DATASET][sl]


# ---- the machine ----

def drop_caches(a):
    """sync, then drop the page cache (root); False when it could not."""
    os.sync()
    if a.warm:
        return False
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError as e:
        results.log(f"w9: cannot drop the page cache ({e}): this run starts warm")
        return False


def read_files(a, man, direct):
    """Bytes and seconds of reading the input's files in order with 8 MiB reads (up to
    a.bw_bytes): buffered (read(2), the kernel's read-ahead), or with O_DIRECT into an aligned
    buffer, as the engine reads large uncompressed runs (input.direct_io)."""
    total, t0 = 0, time.monotonic()
    buf = mmap.mmap(-1, 8 * MIB)  # page-aligned, as O_DIRECT needs
    view = memoryview(buf)
    for p in input_files(man):
        fd = os.open(p, os.O_RDONLY | (os.O_DIRECT if direct else 0))
        try:
            off = 0
            while total < a.bw_bytes:
                n = os.preadv(fd, [view], off)
                if not n:
                    break
                total += n
                off += n
        finally:
            os.close(fd)
        if total >= a.bw_bytes:
            break
    view.release()
    buf.close()
    return total, time.monotonic() - t0


def disk_bandwidth(a, man):
    """The disk's cold read bandwidth, bytes/s: the better of buffered and O_DIRECT reads of the
    input's files (each after a cache drop), so that the floor is what the disk allows, however
    it is read; and whether the cache was dropped."""
    out = {}
    for kind in ("buffered", "direct"):
        cold = drop_caches(a)
        try:
            total, dt = read_files(a, man, kind == "direct")
        except OSError as e:  # a file system without O_DIRECT: the buffered figure alone
            out[kind] = {"error": str(e)}
            continue
        out[kind] = {"bytes": total, "seconds": round(dt, 3),
                     "bytes_per_s": total / dt if dt else None}
    rates = [v["bytes_per_s"] for v in out.values() if v.get("bytes_per_s")]
    out["bytes_per_s"] = max(rates) if rates else None
    out["cold"] = cold
    return out


def rchar():
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return None


# ---- one run ----

def job_config(a, man, out, layout, threads):
    inp = {"store": man["path"], "format": "tiff" if man["variant"].startswith("tiff") else "hdf5"}
    if inp["format"] == "hdf5":
        inp["hdf5"] = {"dataset": H5_DATASET}
    output = {"path": out, "dtype": "uint16", "exists": "error", "ome": {"levels": "auto"}}
    if layout == "narrow":
        output["shard"] = a.prof["narrow"]
    return {"job": "convert", "input": inp,
            "normalize": {"mode": "percentile", "lo": PCT[0], "hi": PCT[1]},
            # the budget shapes the reads (--quick: the input read twice); W9 checks the peak
            # against it itself, so plan's ceiling check (SPEC §1) is off
            "output": output, "limits": {"memory_bytes": a.prof["memory_text"],
                                         "memory_ceiling": False},
            "parallel": {"threads": threads}, "progress": False}


def yaml_text(obj, indent=0):
    """A tiny YAML writer (flow style for lists): enough for job_config()'s mappings."""
    pad = "  " * indent
    lines = []
    for k, v in obj.items():
        if isinstance(v, dict):
            lines.append(f"{pad}{k}:")
            lines.append(yaml_text(v, indent + 1))
        else:
            lines.append(f"{pad}{k}: {json.dumps(v)}")
    return "\n".join(lines)


def count_files(root):
    files = 0
    for _, _, fn in os.walk(root):
        files += len(fn)
    return files


def levels_of(out):
    g = json.load(open(os.path.join(out, "zarr.json")))
    paths = [d["path"] for d in g["attributes"]["ome"]["multiscales"][0]["datasets"]]
    metas = [json.load(open(os.path.join(out, p, "zarr.json"))) for p in paths]
    return paths, metas


def pass_figures(rep, man, ranks):
    """[(pass name, bytes_read, ratio to the size on disk, rchar, rchar_max_rank)], and how they
    were measured."""
    src = ((rep.get("io") or {}).get("source")) or {}
    passes = src.get("passes")
    if isinstance(passes, list) and passes:
        return [{"pass": p.get("pass"), "bytes_read": p.get("bytes_read"),
                 "bytes_read_max_rank": p.get("bytes_read_max_rank"),
                 "rchar": p.get("rchar"), "rchar_max_rank": p.get("rchar_max_rank"),
                 "report_ratio": p.get("ratio"),
                 "ratio": (p["bytes_read"] / man["input_bytes"]
                           if isinstance(p.get("bytes_read"), int) else None)}
                for p in passes], "io.source.passes"
    mem = rep.get("memory") or {}
    n = 1 if (mem.get("kept_input_ranks") or 0) >= ranks else 2
    br = src.get("bytes_read")
    per = br / (n * man["decoded_bytes"]) if isinstance(br, int) else None
    return [{"pass": f"pass {i + 1} of {n} (even share of io.source.bytes_read)",
             "bytes_read": br // n if isinstance(br, int) else None, "ratio": per}
            for i in range(n)], "io.source.bytes_read (decoded bytes, no passes in the report)"


def check_values(a, rec, man, out, lo_hi):
    """Sampled level-0 shards against NumPy; a list of problems; the encode speed sample (output
    bytes per second per core) and, for a compressed input, its decode speed (decoded bytes/s)."""
    problems = []
    paths, metas = levels_of(out)
    meta = metas[0]
    shard = meta["chunk_grid"]["configuration"]["chunk_shape"]
    grid = [-(-s // c) for s, c in zip(meta["shape"], shard)]
    picks = random.Random(f"{SEED}-{rec['tag']}").sample(
        [idx for idx in np.ndindex(*grid)], min(a.samples, int(np.prod(grid))))
    lo, hi = lo_hi
    import zlib
    import zstandard
    enc = zstandard.ZstdCompressor(level=3)
    enc_bytes, enc_s = 0, 0.0
    dec_bytes, dec_s = 0, 0.0
    compressed = man["variant"] in ("tiff_tiled", "hdf5_slices", "hdf5_cubes")
    rec["sampled_shards"] = []
    for idx in picks:
        off = [i * c for i, c in zip(idx, shard)]
        shp = [min(c, s - o) for c, s, o in zip(shard, meta["shape"], off)]
        data = open(os.path.join(out, paths[0], "c", *[str(i) for i in idx]), "rb").read()
        got = zarr_decode.decode_object(meta, data)[tuple(slice(0, n) for n in shp)]
        vals = read_box(man, off, shp)
        w = spec_oracle.normalize(vals, "window", lo=lo, hi=hi)
        want = np.rint(w.astype(np.float32) * np.float32(65535)).clip(0, 65535).astype(np.uint16)
        same = got.dtype == want.dtype and np.array_equal(got, want)
        rec["sampled_shards"].append({"index": list(idx), "shape": shp, "equal": bool(same)})
        if not same:
            problems.append(f"level-0 shard {list(idx)} != NumPy: "
                            f"{spec_oracle.first_diff(got, want)}")
        # the codec's speed on this output: its inner chunks compressed one at a time
        inner = meta["codecs"][0]["configuration"]["chunk_shape"] \
            if meta["codecs"][0]["name"] == "sharding_indexed" else shard
        blocks = [want[tuple(slice(j * c, (j + 1) * c) for j, c in zip(jdx, inner))]
                  for jdx in np.ndindex(*[-(-n // c) for n, c in zip(shp, inner)])]
        blobs = [np.ascontiguousarray(b).tobytes() for b in blocks]
        t0 = time.perf_counter()
        for b in blobs:
            enc.compress(b)
        enc_s += time.perf_counter() - t0
        enc_bytes += sum(len(b) for b in blobs)
        if compressed:  # the input's own blocks deflated (level 4, as written), inflated by zlib
            dec_bytes, dec_s = input_decode(man, vals, dec_bytes, dec_s, zlib)
    return problems, (enc_bytes / enc_s if enc_s else None), (dec_bytes / dec_s if dec_s else None)


def input_decode(man, vals, nbytes, secs, zlib):
    """Adds the time zlib takes to inflate the sampled box cut in the input's own blocks (tiles
    of a tiled TIFF, the HDF5 chunk's part in the box), deflated at level 4 as generated."""
    if man["variant"] == "tiff_tiled":
        block = (1, 256, 256)
    elif man["variant"] == "hdf5_slices":
        block = (1,) + vals.shape[1:]
    else:
        block = (64, 64, 64)
    blobs = []
    for jdx in np.ndindex(*[-(-n // c) for n, c in zip(vals.shape, block)]):
        b = vals[tuple(slice(j * c, (j + 1) * c) for j, c in zip(jdx, block))]
        blobs.append(zlib.compress(np.ascontiguousarray(b).tobytes(), 4))
    t0 = time.perf_counter()
    for b in blobs:
        nbytes += len(zlib.decompress(b))
    return nbytes, secs + time.perf_counter() - t0


def plan_of(a, yaml_path, ranks, threads, bw):
    """`shardmill plan --cache cold` of the job: its estimate in seconds, with the disk's read
    bandwidth measured here (--fs-read-bandwidth) and with the rates' own cold bandwidth."""
    rec = {}
    for key, extra in (("measured_bw", ["--fs-read-bandwidth", str(int(bw))] if bw else None),
                       ("rates_bw", [])):
        if extra is None:
            continue
        argv = [a.shardmill, "plan", yaml_path, "--ranks", str(ranks), "--threads", str(threads),
                "--cache", "cold", "--json"] + extra
        r = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            rec[key] = {"error": r.stderr.strip()[-300:]}
            continue
        est = json.loads(r.stdout)["estimate"]
        rec[key] = {"seconds": est["seconds"], "terms_s": est.get("terms_s"),
                    "fs_read_bytes_per_s": (est.get("read") or {}).get("fs_read_bytes_per_s"),
                    "peak_rss_bytes_per_rank": est.get("peak_rss_bytes_per_rank")}
    return rec


def one_run(a, env, man, variant, layout, cfg):
    ranks, threads = CONFIGS[cfg]
    tag = f"w9-{variant}-{layout}-{cfg}"
    base = os.path.join(env["work"], tag)
    out, rep_path = base + ".zarr", base + ".report.json"
    shutil.rmtree(out, ignore_errors=True)
    with open(base + ".yaml", "w") as f:
        f.write(yaml_text(job_config(a, man, out, layout, threads)) + "\n")
    argv_sm = [a.shardmill, "run", base + ".yaml", "--report", rep_path]
    launcher = env["plain"] if ranks == 1 else env["mpirun"]
    argv, penv = launcher.command(ranks, threads, argv_sm, base + ".spawn")
    plan = {} if a.quick else plan_of(a, base + ".yaml", ranks, threads,  # quick: no time
                                      env["bandwidth"][variant]["bytes_per_s"])
    cold = drop_caches(a)
    busy = machine.busy_cores(0.3)
    load = os.getloadavg()
    r0 = rchar()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with open(base + ".stdout", "wb") as so, open(base + ".stderr", "wb") as se:
        rc = subprocess.run(argv, env=penv, stdout=so, stderr=se,
                            stdin=subprocess.DEVNULL).returncode
    wall = time.monotonic() - t0
    tree_rchar = rchar() - r0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = {"user": round(ru.ru_utime - ru0.ru_utime, 2), "sys": round(ru.ru_stime - ru0.ru_stime, 2)}
    rec = {"tag": tag, "variant": variant, "layout": layout, "config": cfg, "ranks": ranks,
           "threads": threads, "cold": cold, "wall_s": round(wall, 3), "launcher_rc": rc,
           "busy_cores_before": busy, "loadavg_before": [round(x, 2) for x in load],
           "loadavg_after": [round(x, 2) for x in os.getloadavg()],
           "cpu_s": cpu_s, "plan": plan, "tree_rchar": tree_rchar, "input_bytes": man["input_bytes"],
           "tree_rchar_ratio": round(tree_rchar / man["input_bytes"], 4),
           "per_rank": sm_launch.spawn_results(base + ".spawn", ranks), "problems": []}
    with open(base + ".stderr", errors="replace") as f:
        err = f.read().strip()
    if rc != 0 or any(x.get("rc") != 0 for x in rec["per_rank"]):
        rec["problems"].append(f"exit {rc}, ranks {[x.get('rc') for x in rec['per_rank']]}: "
                               f"{err[-400:]}")
        rec["ok"] = False
        shutil.rmtree(out, ignore_errors=True)
        return rec
    rep = report_json.load(rep_path)
    os.unlink(rep_path)
    src = ((rep.get("io") or {}).get("source")) or {}
    rec["report"] = {"io_source": src, "memory": rep.get("memory"), "output": rep.get("output"),
                     "timing_ms": rep.get("timing_ms"),
                     "normalization": (rep.get("result") or {}).get("normalization")}
    rec["passes"], rec["passes_from"] = pass_figures(rep, man, ranks)
    rec["read_ratio"] = max((p["ratio"] or 0) for p in rec["passes"])
    rec["peak_rss_per_rank_bytes"] = [x.get("maxrss_bytes") for x in rec["per_rank"]]
    paths, metas = levels_of(out)
    rec["levels"] = [{"path": p, "shape": m["shape"],
                      "shard": m["chunk_grid"]["configuration"]["chunk_shape"]}
                     for p, m in zip(paths, metas)]
    rec["files"] = count_files(out)
    # the pyramid phase reads back the levels it makes the next from (not made with level 0):
    # at most every level but the last once, bounded by the output's bytes on disk
    rec["output_disk_bytes"] = sum(os.path.getsize(os.path.join(d, f))
                                   for d, _, fn in os.walk(out) for f in fn)
    out_bytes = sum(int(np.prod(m["shape"])) * 2 for m in metas)
    lo_hi = window(man)
    n = rec["report"]["normalization"] or {}
    if [n.get("lo"), n.get("hi")] != [float(lo_hi[0]), float(lo_hi[1])]:
        rec["problems"].append(f"window {[n.get('lo'), n.get('hi')]} != NumPy's {lo_hi}")
    probs, enc_speed, dec_speed = check_values(a, rec, man, out, lo_hi)
    rec["problems"] += probs
    shutil.rmtree(out, ignore_errors=True)
    # the floor (docs/BENCHMARKS.md "W9"): a percentile job finishes its scan pass before it
    # writes anything, so the passes add up; within a pass the reads overlap the codec work spread
    # over every core: scan = max(read, decode), write = max(read, decode + encode) (a kept input:
    # no write read, no decode); decode only for a compressed input
    bw = env["bandwidth"][variant]["bytes_per_s"]
    cores = ranks * threads
    read_s = man["input_bytes"] / bw if bw else 0.0
    dec_s = man["decoded_bytes"] / (dec_speed * cores) if dec_speed else 0.0
    enc_s = out_bytes / (enc_speed * cores) if enc_speed else 0.0
    names = [p.get("pass") for p in rec["passes"]]
    floor_s, terms = 0.0, []
    for name in names:
        if name == "write":
            t = max(read_s, dec_s + enc_s)
        else:  # scan, range, or a pass of the older report's even split
            t = max(read_s, dec_s)
        terms.append({"pass": name, "seconds": round(t, 3)})
        floor_s += t
    if "write" not in names:  # the scan kept the input: the write only encodes
        terms.append({"pass": "write (kept input: encode only)", "seconds": round(enc_s, 3)})
        floor_s += enc_s
    rec["floor"] = {"passes": len(names), "read_s": round(read_s, 3), "disk_bytes_per_s": bw,
                    "encode_bytes_per_s_per_core": enc_speed,
                    "decode_bytes_per_s_per_core": dec_speed,
                    "output_decoded_bytes": out_bytes, "encode_s": round(enc_s, 3),
                    "decode_s": round(dec_s, 3), "per_pass": terms,
                    "floor_s": round(floor_s, 3)}
    rec["wall_over_floor"] = round(wall / rec["floor"]["floor_s"], 3) \
        if rec["floor"]["floor_s"] else None
    pm = (plan.get("measured_bw") or {}).get("seconds")
    rec["plan_s"] = pm and round(pm, 1)
    rec["plan_error"] = round((pm - wall) / wall, 3) if pm else None
    rec["ok"] = not rec["problems"]
    results.log(f"w9 {variant} {layout} {cfg}: {wall:.1f} s ({'cold' if cold else 'warm'}), "
                f"read ratio {rec['read_ratio']:.3f} per pass ({rec['passes_from']}), tree rchar "
                f"{rec['tree_rchar_ratio']}x, RSS/rank "
                f"{[round((x or 0) / MIB) for x in rec['peak_rss_per_rank_bytes']]} MiB, files "
                f"{rec['files']}, floor {rec['floor']['floor_s']} s, plan {rec['plan_s']} s, "
                f"cpu {cpu_s}, load {rec['loadavg_before'][0]}"
                + ("" if rec["ok"] else f" PROBLEMS {rec['problems']}"))
    return rec


def targets(a, runs):
    out = []
    for r in runs:
        if not r.get("passes"):
            continue
        name = f"{r['variant']} {r['layout']} {r['config']}"
        out.append({"what": f"{name}: read ratio per pass", "value": round(r["read_ratio"], 4),
                    "target": f"<= {RATIO_TARGET}", "pass": r["read_ratio"] <= RATIO_TARGET})
        for p in r["passes"]:
            if isinstance(p.get("rchar"), int):
                out.append({"what": f"{name}: pass {p['pass']}: the report's rchar / input on disk",
                            "value": round(p["rchar"] / r["input_bytes"], 4),
                            "target": f"<= {RATIO_TARGET} (+ 1 MiB)",
                            "pass": p["rchar"] <= RATIO_TARGET * r["input_bytes"] + MIB})
        npasses = len(r["passes"])
        back = r.get("output_disk_bytes", 0)
        out.append({"what": f"{name}: rchar of the process tree / input on disk",
                    "value": r["tree_rchar_ratio"],
                    "target": f"<= {RATIO_TARGET} x {npasses} pass(es) + the output read back "
                              f"by the pyramid ({back} B) + 1 MiB",
                    "pass": r["tree_rchar"] <= RATIO_TARGET * npasses * r["input_bytes"] + back
                    + MIB})
        if not a.quick:
            out.append({"what": f"{name}: wall / floor{'' if r['cold'] else ' (warm cache)'}",
                        "value": r["wall_over_floor"], "target": f"<= {FLOOR_TARGET}",
                        "pass": r["wall_over_floor"] is not None and
                        r["wall_over_floor"] <= FLOOR_TARGET})
            out.append({"what": f"{name}: plan --cache cold (measured bandwidth) vs wall",
                        "value": r.get("plan_error"), "target": f"within +-{PLAN_TARGET:.0%}",
                        "pass": r.get("plan_error") is not None and
                        abs(r["plan_error"]) <= PLAN_TARGET})
        rss = max(x or 0 for x in r["peak_rss_per_rank_bytes"])
        out.append({"what": f"{name}: peak RSS per rank", "value": rss,
                    "target": f"< {a.prof['memory']}", "pass": rss < a.prof["memory"]})
        out.append({"what": f"{name}: sampled values = NumPy", "value": len(r["sampled_shards"]),
                    "target": "all equal", "pass": r["ok"]})
    return out


def replan(a):
    """--replan: the estimate of each run of a result file from rates calibrated later (on the
    machine the runs measured: `shardmill plan` is a prediction from the job and the rates, which
    never sees the run), against the wall times measured then; the targets recomputed."""
    with open(a.replan) as f:
        res = json.load(f)
    work = os.path.abspath(a.work or os.path.join(a.data_dir, "work"))
    a.shardmill = os.path.abspath(a.shardmill)
    a.quick = res.get("quick", False)
    a.prof = dict(QUICK if a.quick else FULL)
    saved = os.environ.get("SHARDMILL_RATES")
    if a.rates:
        os.environ["SHARDMILL_RATES"] = os.path.abspath(a.rates)
    try:
        for r in res["runs"]:
            bw = res["disk_bandwidth"][r["variant"]]["bytes_per_s"]
            r["plan_before_replan"] = {"plan_s": r.get("plan_s"), "plan_error": r.get("plan_error")}
            r["plan"] = plan_of(a, os.path.join(work, r["tag"] + ".yaml"), r["ranks"],
                                r["threads"], bw)
            pm = (r["plan"].get("measured_bw") or {}).get("seconds")
            r["plan_s"] = pm and round(pm, 1)
            r["plan_error"] = round((pm - r["wall_s"]) / r["wall_s"], 3) if pm else None
    finally:
        if saved is None:
            os.environ.pop("SHARDMILL_RATES", None)
        else:
            os.environ["SHARDMILL_RATES"] = saved
    res["replan"] = {"rates": os.path.abspath(a.rates) if a.rates else "built in",
                     "shardmill": a.shardmill, "utc": results.utc_stamp()}
    res["targets"] = targets(a, res["runs"])
    stem = os.path.splitext(a.replan)[0]
    tag = os.path.splitext(os.path.basename(a.rates))[0] if a.rates else "built-in"
    path = results.unique_path(os.path.dirname(stem) or ".",
                               os.path.basename(stem) + "-replan-" + tag, ".json")
    results.write_json(path, res)
    print(table(res))
    for t in res["targets"]:
        if "plan" in t["what"]:
            print(f"{'PASS' if t['pass'] else 'FAIL'} {t['what']}: {t['value']} ({t['target']})")
    print(f"w9: replanned {len(res['runs'])} runs; result {path}")
    return 0


def table(res):
    lines = ["| input | layout | ranks×threads | wall s | user+sys s | load | floor s | wall/floor | "
             "plan s | plan error | read ratio per pass | tree rchar / input | peak RSS/rank MiB | "
             "files | values |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"]
    for r in res["runs"]:
        if not r.get("passes"):
            lines.append(f"| {r['variant']} | {r['layout']} | {r['config']} | failed: "
                         f"{r['problems']} |")
            continue
        ratios = ", ".join(f"{p['ratio']:.3f}" for p in r["passes"])
        cpu = r.get("cpu_s") or {}
        cpu_t = f"{cpu['user'] + cpu['sys']:.1f}" if cpu else "-"
        load = f"{r['loadavg_before'][0]:.1f}" if r.get("loadavg_before") else "-"
        plan = f"{r['plan_s']:.1f}" if r.get("plan_s") else "-"
        perr = f"{r['plan_error'] * 100:+.0f} %" if r.get("plan_error") is not None else "-"
        lines.append(f"| {r['variant']} | {r['layout']} | {r['config']} | {r['wall_s']:.1f} | "
                     f"{cpu_t} | {load} | {r['floor']['floor_s']:.1f} | {r['wall_over_floor']} | "
                     f"{plan} | {perr} | {ratios} | "
                     f"{r['tree_rchar_ratio']:.2f} | "
                     f"{max(x or 0 for x in r['peak_rss_per_rank_bytes']) / MIB:.0f} | "
                     f"{r['files']} | {'equal' if r['ok'] else 'DIFFER'} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--shardmill", default=os.path.join(REPO, "build", "release", "jobs",
                                                        "shardmill"))
    ap.add_argument("--mpirun", default="mpirun")
    sm_launch.add_mpirun_args(ap)
    ap.add_argument("--data-dir", default=os.path.join(REPO, "build", "bench-data", "w9"))
    ap.add_argument("--work", default=None, help="outputs while measured (default data-dir/work)")
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    ap.add_argument("--quick", action="store_true", help="CI profile: 64x1024x1024, no timing")
    ap.add_argument("--shape", default=None, help="Z,Y,X instead of the profile's")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--configs", default="1x2,2x1")
    ap.add_argument("--layouts", default="default,narrow")
    ap.add_argument("--samples", type=int, default=None, help="level-0 shards checked per run")
    ap.add_argument("--bw-bytes", type=int, default=2 * GIB,
                    help="bytes read to measure the disk's bandwidth (default 2 GiB)")
    ap.add_argument("--warm", action="store_true", help="never drop the page cache")
    ap.add_argument("--generate-only", action="store_true")
    ap.add_argument("--keep-data", action="store_true", help="--quick: keep the inputs")
    ap.add_argument("--table", metavar="JSON", help="print the table of a result file")
    ap.add_argument("--replan", metavar="JSON",
                    help="plan a result file's runs again (their job files under --work or "
                         "DATA-DIR/work, the bandwidth measured then) with --rates, and write "
                         "JSON-replan-<rates>.json; the runs are not repeated")
    ap.add_argument("--rates", help="--replan: a rates file of scaling/calibrate")
    a = ap.parse_args()
    if a.table:
        with open(a.table) as f:
            print(table(json.load(f)))
        return 0
    if a.replan:
        return replan(a)
    a.prof = dict(QUICK if a.quick else FULL)
    if a.shape:
        a.prof["shape"] = [int(v) for v in a.shape.split(",")]
    a.samples = a.prof["samples"] if a.samples is None else a.samples
    a.warm = a.warm or a.quick
    variants = [v for v in a.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"--variants: {v} is not one of {', '.join(VARIANTS)}")
    cfgs = [c for c in a.configs.split(",") if c]
    layouts = [x for x in a.layouts.split(",") if x]
    tmp = None
    if a.quick and a.data_dir == ap.get_default("data_dir"):
        # next to the results, emptied first: a quick run killed by a timeout (SIGKILL: no
        # `finally`) leaves one copy there, which the next run replaces, never one per run
        tmp = a.data_dir = os.path.join(os.path.abspath(a.out), "w9-quick-data")
        shutil.rmtree(tmp, ignore_errors=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # SIGTERM runs the cleanup
    data = os.path.abspath(a.data_dir)
    os.makedirs(data, exist_ok=True)
    shape = a.prof["shape"]
    mans = {}
    try:
        for v in variants:
            suffix = "" if v.startswith("tiff") else ".h5"
            root = os.path.join(data, f"{v}-{'x'.join(map(str, shape))}{suffix}")
            mans[v] = generate(v, root, shape, a.prof["tile"])
        if a.generate_only:
            return 0
        a.shardmill = os.path.abspath(a.shardmill)
        work = os.path.abspath(a.work or os.path.join(data, "work"))
        os.makedirs(work, exist_ok=True)
        tc = machine.toolchain(a.shardmill, a.mpirun)
        machine.check_release(tc)
        spawn = sm_launch.build_spawn(work)
        extra = sm_launch.mpirun_args(a.mpirun_args)
        env = {"work": work, "plain": sm_launch.Launcher("plain", spawn, a.mpirun, extra),
               "mpirun": sm_launch.Launcher("mpirun", spawn, a.mpirun, extra), "bandwidth": {}}
        for v in variants:
            env["bandwidth"][v] = disk_bandwidth(a, mans[v])
            results.log(f"w9: {v}: disk read {env['bandwidth'][v]}")
        commit = (tc.get("commit") or {}).get("head") or "unknown"
        path = results.unique_path(a.out, f"w9-{str(commit)[:7]}" + ("-quick" if a.quick else ""),
                                   ".json")
        runs, t0, stamp = [], time.monotonic(), results.utc_stamp()
        res = None
        for v in variants:
            for lay in layouts:
                for cfg in cfgs:
                    runs.append(one_run(a, env, mans[v], v, lay, cfg))
                    res = {"benchmark": "W9 read once (issue 33)", "driver": "bench/read_once/w9.py",
                           "argv": sys.argv, "quick": a.quick, "started_utc": stamp,
                           "commit": commit, "machine": machine.machine(), "toolchain": tc,
                           "profile": {k: a.prof[k] for k in ("shape", "narrow", "memory")},
                           "inputs": {k: {x: m[x] for x in ("path", "shape", "files",
                                                             "input_bytes", "decoded_bytes",
                                                             "generate_s")}
                                      for k, m in mans.items()},
                           "disk_bandwidth": env["bandwidth"], "runs": runs,
                           "targets": targets(a, runs),
                           "elapsed_s": round(time.monotonic() - t0, 1),
                           "noise_note": "shared 2-core VM; busy_cores_before per run"}
                    results.write_json(path, res)  # after every run
        print(table(res))
        for t in res["targets"]:
            print(f"{'PASS' if t['pass'] else 'FAIL'} {t['what']}: {t['value']} ({t['target']})")
        failed = [r for r in runs if not r["ok"]]
        print(f"w9: {len(runs)} runs, {len(failed)} failed; result {path}")
        if failed:
            return 1
        if a.quick and any(not t["pass"] for t in res["targets"]
                           if "read ratio" in t["what"] or "rchar" in t["what"]):
            return 1
        return 0
    finally:
        if tmp and not a.keep_data:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
