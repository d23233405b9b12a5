#!/usr/bin/python3
"""W2 conversion benchmark driver (SPEC §8 W2). Run with /usr/bin/python3.

Full profile (input data/mri-crop.zarr from scripts/make-w1-input.sh; results in
bench/results/w2-<UTC>.json, never overwritten):

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/convert_ct/w2.py --build-dir /work/build-w2 --wait-idle 30

Smoke profile for CI (a synthetic [160,150,140] uint8 v3 array written by zarrita.js, both ROIs,
one warm-up and one measured pair, every value checked; ≲40 s; report in --out or a temp dir):

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/convert_ct/w2.py --quick --shardmill BUILD/jobs/shardmill --out DIR

Per ROI (aligned [0,0,0]+[128,128,128], nonaligned [1,2,3]+[125,124,123]) the driver runs fresh
processes, each through the bench/region_read/w3_spawn.c launcher (wall time, wait4 rusage):

  A  `shardmill run configs/w2-convert.yaml --set input.store=... --set output.path=NEW
     --set roi.offset=... --set roi.shape=... --report R.json` (job convert, tiles [8,32,32],
     256-bin histogram, scale/255, default layout: 256 shards, provenance, marker, durable
     (output.fsync: true with the default output.sync, syncfs since 4767968), cache on,
     threads auto)
  B  the peer, bench/convert_ct/peer_zarr2.py: zarr-python 2.13 + NumPy reading the Zarr v2 copy of
     the same input (zarr-python 2.13 cannot read v3; the copy is written once with
     zarr-python, outside timing), the same histogram and normalization, a Zarr v2 float32
     Zstd(3) array with chunks [8,32,32], provenance, os.fsync of every file and directory,
     completion marker
  and, interleaved in the same rounds, the write-cost references:
  Af shardmill with --set output.sync=fsync (FSYNC; only for binaries that have the key)
  A0 shardmill with --set output.fsync=false (NONE)
  Wf/Wb/Wsb/Wn/We  bench/convert_ct/w2_write_baseline.c: encode the same float32 values into the same
     256 shard files (byte-identical to shardmill's, checked) and write them atomically with
     fsync per file + directory fsync (Wf: the FSYNC discipline), the same fsyncs deferred
     until every shard is written (Wb: same guarantee), stage all + syncfs + rename all +
     syncfs (Wsb: the SYNCFS discipline of 4767968, same guarantee), no sync (Wn), or encode
     only (We)
  B0 the peer without fsync (full profile only)

A warm-up round of every kind comes first (values checked, timings discarded), then `--pairs`
rounds, each A then B (ABAB...) followed by the references. sync(2) runs before every timed
process, outside its interval, so no process pays for an earlier one's dirty pages. Outputs
are kept until the end of the run and deleted then: deleting ~500 files per process between
measurements makes ext4's inode allocator (find_inode_bit / recently_deleted) the bottleneck
of the next process's file creations.

Every output of every process is checked: shardmill's with zarrita.js 0.7.5 (read_outputs.mjs)
and `shardmill verify`, the peer's with zarr-python, both bit for bit against NumPy's
np.float32(v) / np.float32(255); shardmill's report (histogram, checksums, output checksums,
normalization, shard count) against NumPy; the request counters against nginx's access log.
Targets are printed as PASS/FAIL and recorded but never change the exit status (benchmarks,
never timed tests); a wrong value, a failed process or a data error exits 1.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from shardmill_test import report_json
from shardmill_test import machine
from shardmill_test import results

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

MIB = 1 << 20
ROIS = {"aligned": ([0, 0, 0], [128, 128, 128]), "nonaligned": ([1, 2, 3], [125, 124, 123])}
TILE = [8, 32, 32]
SHARD = [8, 32, 32]
CHUNK = [2, 16, 16]
INPUT_CHUNKS = [64, 64, 64]
QUICK_SHAPE = (160, 150, 140)
# shardmill.complete.json: a convert's input identity asks for the input's marker (SPEC §6.5)
META_NAMES = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata", "shardmill.complete.json")
# SPEC §8 W2 targets (the brief's numbers)
SPEEDUP_TARGET = 10.0
ALIGNED_WALL_TARGET_MS = 200.0
WRITE_VS_BASELINE_TARGET = 2.0
RSS_TARGET = 64 * MIB

KINDS_FULL = ["A", "B", "Af", "A0", "Wf", "Wb", "Wsb", "Wn", "We", "B0"]
KINDS_QUICK = ["A", "B", "Af", "A0", "Wf", "Wsb", "Wn", "We"]
KIND_NAMES = {"A": "shardmill (durable, as configured)", "B": "zarr-python peer (fsync)",
              "Af": "shardmill (output.sync=fsync)",
              "A0": "shardmill (output.fsync=false)", "B0": "zarr-python peer (no fsync)",
              "Wf": "write baseline: fsync per file + dirs",
              "Wb": "write baseline: fsync-batch (all written, then fsync + rename each)",
              "Wsb": "write baseline: syncfs-batch (stage all, syncfs, rename all, syncfs)",
              "Ws": "write baseline: rename, then one syncfs (weaker)",
              "Wn": "write baseline: no sync", "We": "write baseline: encode only"}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- launcher, machine load ----

SPAWN = None


def build_tools(work):
    """Compile the launcher (bench/region_read/w3_spawn.c, shared with W3) and the write baseline."""
    global SPAWN
    SPAWN = os.path.join(work, "w3_spawn")
    subprocess.run(["cc", "-O2", "-std=c11", "-o", SPAWN,
                    os.path.join(REPO, "bench", "region_read", "w3_spawn.c")], check=True)
    base = os.path.join(work, "w2_write_baseline")
    subprocess.run(["cc", "-O2", "-std=c11", "-Wall", "-o", base,
                    os.path.join(HERE, "w2_write_baseline.c"), "-lzstd", "-lpthread"], check=True)
    return base


def spawn(argv, base, env=None):
    """argv as a fresh process through w3_spawn: dict with wall_ms, rc, peak RSS, user/sys,
    stdout and stderr text. The launcher's wait4 ru_maxrss is the child's own (see w3_spawn.c)."""
    res = base + ".spawn.json"
    with open(base + ".out", "wb") as out, open(base + ".err", "wb") as err:
        subprocess.run([SPAWN, res] + argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                       env=env)
    with open(base + ".out", errors="replace") as f:
        stdout = f.read()
    with open(base + ".err", errors="replace") as f:
        stderr = f.read()
    try:
        with open(res) as f:
            r = json.load(f)
    except (OSError, ValueError) as e:
        raise RuntimeError(f"w3_spawn failed: {stderr.strip()[-400:]}") from e
    for p in (res, base + ".out", base + ".err"):
        os.unlink(p)
    return {"wall_ms": r["wall_ns"] / 1e6, "rc": r["exit_code"] if r["exited"] else -r["signal"],
            "peak_rss_bytes": r["maxrss_kib"] * 1024,
            "spawner_hwm_bytes": r["spawner_hwm_kib"] * 1024,
            "user_ms": r["utime_us"] / 1e3, "sys_ms": r["stime_us"] / 1e3,
            "stdout": stdout, "stderr": stderr.strip()[-1500:]}



def io_pressure():
    """/proc/pressure/io 'some' avg10 (% of time some task waited on I/O), or None: the disk
    load of other work, which busy_cores (CPU) does not see."""
    try:
        with open("/proc/pressure/io") as f:
            return float(f.readline().split()[1].split("=")[1])
    except (OSError, IndexError, ValueError):
        return None





def summarize(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def med(s):
    return None if not s else s["median"]


# ---- the oracle (NumPy, SPEC §5) ----

def sums(values, offset, full_shape):
    """SPEC §5 checksum (int64, wrapping) and weighted_checksum (mod 2^64) of `values` (uint8
    or float32 bit patterns), i the linear C-order index in an array of full_shape."""
    if values.dtype == np.float32:
        u = values.view(np.uint32).astype(np.uint64)
    else:
        u = values.astype(np.uint64)
    nd = values.ndim
    strides = [int(np.prod(full_shape[k + 1:])) for k in range(nd)]
    rest = np.zeros(values.shape[1:], dtype=np.uint64)
    for k in range(1, nd):
        ix = np.arange(offset[k], offset[k] + values.shape[k], dtype=np.uint64) * \
            np.uint64(strides[k])
        rest = rest + ix.reshape([-1 if j == k - 1 else 1 for j in range(nd - 1)])
    total = np.uint64(0)
    weighted = np.uint64(0)
    with np.errstate(over="ignore"):
        for z in range(values.shape[0]):
            base = np.uint64((offset[0] + z) * strides[0] + 1)
            total = total + np.sum(u[z], dtype=np.uint64)
            weighted = weighted + np.sum(u[z] * (rest + base), dtype=np.uint64)
    return int(np.array(total).view(np.int64)), int(weighted)


def oracle(vol, name):
    off, shp = ROIS[name]
    sl = tuple(slice(o, o + s) for o, s in zip(off, shp))
    roi = np.ascontiguousarray(vol[sl])
    out = roi.astype(np.float32) / np.float32(255)  # SPEC §5 scale, NumPy float32
    cs, wcs = sums(roi, off, vol.shape)
    ocs, owcs = sums(out, [0, 0, 0], shp)
    tiles = 1
    for s, t in zip(shp, TILE):
        tiles *= -(-s // t)
    shards = 1
    for s, t in zip(shp, SHARD):
        shards *= -(-s // t)
    touched = 1
    for o, s, c in zip(off, shp, INPUT_CHUNKS):
        touched *= (o + s - 1) // c - o // c + 1
    return {"offset": off, "shape": shp, "voxels": int(roi.size), "tiles": tiles,
            "shards": shards, "chunks_touched": touched, "checksum": cs, "weighted_checksum": wcs,
            "histogram": [int(c) for c in np.bincount(roi.reshape(-1), minlength=256)],
            "output_checksum": ocs, "output_weighted_checksum": owcs,
            "out_bytes": out.astype("<f4").tobytes(),
            "out_sha256": hashlib.sha256(out.astype("<f4").tobytes()).hexdigest()}


# ---- input data ----

def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def read_v3_with_zarrita(a, store, work):
    """The whole uint8 v3 array read by zarrita.js (independent of shardmill)."""
    raw = os.path.join(work, "input-readback.raw")
    p = subprocess.run([a.node, os.path.join(HERE, "read_outputs.mjs"), store, raw],
                       capture_output=True, text=True, env=node_env())
    if p.returncode != 0:
        raise SystemExit(f"w2: zarrita.js cannot read {store}: {p.stderr.strip()[-400:]}")
    meta = json.loads(p.stdout.strip().splitlines()[-1])
    if meta["dtype"] != "uint8":
        raise SystemExit(f"w2: {store} is {meta['dtype']}, expected uint8")
    v = np.fromfile(raw, dtype=np.uint8).reshape(meta["shape"])
    os.unlink(raw)
    return v


def node_env():
    env = dict(os.environ)
    env.setdefault("SM_W3_NODE_MODULES",
                   os.path.join(REPO, "tests", "interop", "js", "node_modules"))
    return env


def ensure_node_modules():
    nm = os.path.join(REPO, "tests", "interop", "js", "node_modules", "zarrita", "package.json")
    if not os.path.exists(nm):
        log("w2: npm ci --prefix tests/interop/js (pinned zarrita.js missing)")
        subprocess.run(["npm", "ci", "--prefix", os.path.join(REPO, "tests", "interop", "js"),
                        "--no-audit", "--no-fund"], check=True)


def quick_volume():
    """The W1 --quick synthetic volume (same formula): [160,150,140] uint8."""
    z, y, x = np.indices(QUICK_SHAPE)
    rng = np.random.default_rng(1)
    return ((z * 3 + y * 5 + x * 7) % 200 + rng.integers(0, 56, QUICK_SHAPE)).astype(np.uint8)


def write_v2_copy(vol, path, source_sha):
    """The zarr-python 2.13 copy the peer reads: Zarr v2 uint8, chunks 64³, Zstd(3), '/' keys.
    Written into a temporary sibling and renamed; a manifest records the values' SHA-256."""
    import numcodecs
    import zarr

    man_path = path + ".json"
    if os.path.exists(man_path) and os.path.isdir(path):
        try:
            with open(man_path) as f:
                man = json.load(f)
            if man.get("values_sha256") == source_sha:
                back = zarr.open_array(path, mode="r")[...]
                if back.dtype == np.uint8 and back.shape == vol.shape and \
                        np.array_equal(back, vol):
                    return man
        except (OSError, ValueError):
            pass
        log(f"w2: {path} does not match its source: rewriting it")
    tmp = f"{path}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.monotonic()
    z = zarr.open_array(tmp, mode="w", shape=vol.shape, chunks=tuple(INPUT_CHUNKS), dtype="u1",
                        compressor=numcodecs.Zstd(level=3), fill_value=0,
                        dimension_separator="/")
    z.attrs["writer"] = f"zarr-python {zarr.__version__} (bench/convert_ct/w2.py)"
    z.attrs["values_sha256"] = source_sha
    z[...] = vol
    back = zarr.open_array(tmp, mode="r")[...]
    if not np.array_equal(back, vol):
        raise SystemExit(f"w2: the zarr-python v2 copy {tmp} reads back differently")
    shutil.rmtree(path, ignore_errors=True)
    os.rename(tmp, path)
    man = {"path": path, "writer": f"zarr-python {zarr.__version__}",
           "numcodecs": numcodecs.__version__, "layout": "Zarr v2 |u1, chunks [64,64,64], "
           "numcodecs Zstd(level=3), dimension_separator '/'", "shape": list(vol.shape),
           "values_sha256": source_sha, "write_s": round(time.monotonic() - t0, 2),
           "written_utc": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    with open(man_path, "w") as f:
        json.dump(man, f, indent=1)
    return man


def prepare_data(a, work):
    """(v3 store path, v2 copy path, volume, source description)."""
    ensure_node_modules()
    os.makedirs(a.data_dir, exist_ok=True)
    if a.quick:
        vol = quick_volume()
        v3 = os.path.join(a.data_dir, "quick-v3.zarr")
        sha = sha256_bytes(vol.tobytes())
        marker = v3 + ".sha256"
        ok = os.path.isdir(v3) and os.path.exists(marker) and open(marker).read().strip() == sha
        if not ok:
            shutil.rmtree(v3, ignore_errors=True)
            raw = os.path.join(work, "quick.raw")
            vol.tofile(raw)
            subprocess.run([a.node, os.path.join(HERE, "write_quick_v3.mjs"), raw,
                            ",".join(map(str, QUICK_SHAPE)), v3], check=True,
                           stdout=subprocess.DEVNULL, env=node_env())
            os.unlink(raw)
            with open(marker, "w") as f:
                f.write(sha + "\n")
        source = {"kind": "synthetic (W1 --quick formula)", "shape": list(QUICK_SHAPE),
                  "writer": "zarrita.js via bench/convert_ct/write_quick_v3.mjs", "values_sha256": sha}
    else:
        v3 = os.path.join(a.input_root, "mri-crop.zarr")
        nii = os.path.join(a.input_root, "mri", "ch2better.nii.gz")
        if not os.path.exists(os.path.join(v3, "zarr.json")):
            raise SystemExit(f"w2: {v3} missing: run scripts/fetch-data.sh and "
                             "scripts/make-w1-input.sh")
        import nibabel

        img = nibabel.load(nii)
        raw = np.asarray(img.dataobj)
        if raw.dtype != np.uint8:
            raise SystemExit(f"w2: {nii} is {raw.dtype}, expected uint8")
        vol = np.ascontiguousarray(raw.transpose(tuple(range(raw.ndim))[::-1])[:256, :256, :256])
        sha = sha256_bytes(vol.tobytes())
        source = {"kind": "MRI ch2better.nii.gz (mricron-data), crop [0:256]^3, axes z,y,x",
                  "nifti": nii, "values_sha256": sha, "v3_writer": "zarrita.js 0.7.5 "
                  "(scripts/make-w1-input.sh)"}
        man = os.path.join(a.input_root, "w1-input.json")
        if os.path.exists(man):
            with open(man) as f:
                m = json.load(f)
            want = ((m.get("arrays") or {}).get("mri-crop.zarr") or {}).get("sha256")
            source["w1_input_manifest_sha256"] = want
            if want and want != sha:
                raise SystemExit(f"w2: nibabel's crop has SHA-256 {sha}, {man} says {want}")
    back = read_v3_with_zarrita(a, v3, work)
    if back.shape != vol.shape or not np.array_equal(back, vol):
        raise SystemExit(f"w2: zarrita.js reads {v3} differently from the source values")
    source["v3_store"] = v3
    source["v3_readback"] = "zarrita.js read of the whole array equals the source values"
    v2 = os.path.join(a.data_dir, ("quick" if a.quick else "mri-crop") + "-v2.zarr")
    source["v2_copy"] = write_v2_copy(vol, v2, sha)
    return v3, v2, vol, source


# ---- the runs ----

class Bench:
    def __init__(self, a, work, baseline_exe, srv, v3, v2, vol):
        self.a = a
        self.work = work
        self.baseline = baseline_exe
        self.srv = srv
        self.vol = vol
        if srv is not None:
            self.v3_in = f"{srv.url}/in-v3.zarr"
            self.v2_in = f"{srv.url}/in-v2.zarr"
        else:
            self.v3_in, self.v2_in = v3, v2
        self.seq = 0
        self.errors = []
        self.warnings = []
        self.env = dict(os.environ)
        if a.threads != "auto":
            self.env["OMP_NUM_THREADS"] = str(a.threads)

    def _base(self, tag):
        self.seq += 1
        return os.path.join(self.work, f"{self.seq:04d}-{tag}")

    def _pre(self):
        os.sync()  # outside the timed interval: nobody pays for an earlier process's pages

    def _nginx(self, mark):
        if self.srv is None:
            return None
        reqs = self.srv.requests(since=mark)
        meta = [r for r in reqs if r["uri"].rsplit("/", 1)[-1] in META_NAMES]
        pay = [r for r in reqs if r not in meta]
        return {"metadata": len(meta), "payload": len(pay),
                "payload_404": sum(1 for r in pay if r["status"] == 404),
                "bytes": sum(r["bytes"] for r in reqs), "connections": len({r["conn"]
                                                                            for r in reqs}),
                "distinct_payload": len({r["uri"] for r in pay})}

    def shardmill_argv(self, name, out, report, fsync=True, sync=None):
        off, shp = ROIS[name]
        argv = [self.a.shardmill, "run", self.a.config,
                "--set", f"input.store={self.v3_in}",
                "--set", f"output.path={out}", "--set", "output.exists=error",
                "--set", f"roi.offset=[{', '.join(map(str, off))}]",
                "--set", f"roi.shape=[{', '.join(map(str, shp))}]",
                "--set", "progress=false"]
        if not fsync:
            argv += ["--set", "output.fsync=false"]
        if sync is not None:
            argv += ["--set", f"output.sync={sync}"]
        if self.a.threads != "auto":
            argv += ["--set", f"parallel.threads={self.a.threads}"]
        return argv + ["--report", report]

    def run_shardmill(self, name, want, fsync, tag, sync=None):
        base = self._base(tag)
        out, rep = base + ".zarr", base + ".report.json"
        argv = self.shardmill_argv(name, out, rep, fsync, sync)
        self._pre()
        mark = self.srv.mark() if self.srv else 0
        r = spawn(argv, base, self.env)
        r["argv"] = argv
        r["nginx"] = self._nginx(mark)
        r["out"] = r["_dir"] = out
        del r["stdout"]
        label = f"{name} {tag}"
        if r["rc"] != 0:
            self.errors.append(f"{label}: shardmill exit {r['rc']}: {r['stderr'][-300:]}")
            r["ok"] = False
            return r
        try:
            with open(rep) as f:
                report = report_json.with_int_checksums(json.load(f))
            os.unlink(rep)
        except (OSError, ValueError) as e:
            self.errors.append(f"{label}: report {rep}: {e}")
            r["ok"] = False
            return r
        bad = check_report(report, want, self.vol.shape)
        if self.srv is not None:
            n, rq = r["nginx"], (report.get("io") or {}).get("requests") or {}
            if rq.get("metadata") != n["metadata"] or \
                    rq.get("payload", 0) + rq.get("index", 0) != n["payload"]:
                bad.append(f"report requests {rq} != nginx {n}")
            if n["payload"] != want["chunks_touched"]:
                bad.append(f"payload GETs {n['payload']} != distinct chunks touched "
                           f"{want['chunks_touched']} (cache on)")
        v = subprocess.run([self.a.shardmill, "verify", out], capture_output=True, text=True)
        r["verify_rc"] = v.returncode
        if v.returncode != 0:
            bad.append(f"shardmill verify exit {v.returncode}: {(v.stderr or v.stdout)[-300:]}")
        r["provenance_ok"], pbad = check_provenance(out, want)
        bad += pbad
        self.errors += [f"{label}: {b}" for b in bad]
        r["report_ok"] = not bad
        r["ok"] = not bad  # values are checked in the round's batch (zarrita.js)
        r["report"] = {k: report.get(k) for k in ("timing_ms", "memory", "output", "threads",
                                                  "io")}
        return r

    def run_peer(self, name, want, fsync, tag):
        base = self._base(tag)
        out = base + ".zarr"
        off, shp = ROIS[name]
        argv = ["/usr/bin/python3", os.path.join(HERE, "peer_zarr2.py"), self.v2_in, out,
                "--offset", ",".join(map(str, off)), "--shape", ",".join(map(str, shp)),
                "--tile", ",".join(map(str, TILE)), "--mode", self.a.peer_mode]
        if not fsync:
            argv.append("--no-fsync")
        self._pre()
        mark = self.srv.mark() if self.srv else 0
        r = spawn(argv, base, self.env)
        r["argv"] = argv
        r["nginx"] = self._nginx(mark)
        r["_dir"] = out
        stdout = r.pop("stdout")
        label = f"{name} {tag}"
        r["ok"] = False
        if r["rc"] != 0:
            self.errors.append(f"{label}: peer exit {r['rc']}: {r['stderr'][-400:]}")
            shutil.rmtree(out, ignore_errors=True)
            return r
        try:
            info = json.loads(stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            self.errors.append(f"{label}: peer printed no JSON: {stdout[-200:]}")
            shutil.rmtree(out, ignore_errors=True)
            return r
        bad = []
        if info["histogram"] != want["histogram"]:
            bad.append("peer histogram differs from NumPy's")
        bad += check_peer_output(out, want)
        self.errors += [f"{label}: {b}" for b in bad]
        r["ok"] = not bad
        r["timing_ms"] = info["timing_ms"]
        r["peer"] = {k: info.get(k) for k in ("peer", "numpy", "numcodecs", "python", "mode",
                                              "files", "chunk_files", "fsyncs", "bytes",
                                              "http")}
        return r

    def values_file(self, name, want):
        path = os.path.join(self.work, f"{name}.f32")
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.write(want["out_bytes"])
        return path

    def run_baseline(self, name, want, mode, tag, threads, ref_out):
        base = self._base(tag)
        out, res = base + ".zarr", base + ".result.json"
        argv = [self.baseline, "--values", self.values_file(name, want),
                "--shape", ",".join(map(str, want["shape"])), "--out", out, "--result", res,
                "--threads", str(threads), "--shard", ",".join(map(str, SHARD)),
                "--chunk", ",".join(map(str, CHUNK)), "--level", "3"]
        argv += ["--encode-only"] if mode == "encode" else ["--sync", mode]
        self._pre()
        r = spawn(argv, base, self.env)
        r["argv"] = argv
        r["_dir"] = out
        del r["stdout"]
        label = f"{name} {tag}"
        r["ok"] = False
        if r["rc"] != 0:
            self.errors.append(f"{label}: baseline exit {r['rc']}: {r['stderr'][-300:]}")
            shutil.rmtree(out, ignore_errors=True)
            return r
        with open(res) as f:
            r["result"] = json.load(f)
        os.unlink(res)
        r["ok"] = True
        if mode != "encode":
            if r["result"]["files"] != want["shards"]:
                self.errors.append(f"{label}: baseline wrote {r['result']['files']} files, "
                                   f"expected {want['shards']}")
                r["ok"] = False
            if ref_out is not None:
                r["identical_to_shardmill"] = same_shards(out, ref_out)
                if not r["identical_to_shardmill"]:
                    self.warnings.append(f"{label}: baseline shard bytes differ from "
                                         "shardmill's (a different zstd build?)")
        return r

    def verify_outputs(self, runs, want):
        """zarrita.js reads every shardmill output of a round; bit-for-bit comparison."""
        todo = [r for r in runs if r.get("out") and os.path.isdir(r["out"]) and r["rc"] == 0]
        if not todo:
            return
        args = []
        for r in todo:
            args += [r["out"], r["out"] + ".raw"]
        p = subprocess.run([self.a.node, os.path.join(HERE, "read_outputs.mjs")] + args,
                           capture_output=True, text=True, env=node_env())
        if p.returncode != 0:
            self.errors.append(f"zarrita.js could not read shardmill outputs: "
                               f"{p.stderr.strip()[-400:]}")
            for r in todo:
                r["ok"] = r["values_ok"] = False
            return
        metas = [json.loads(x) for x in p.stdout.strip().splitlines()]
        for r, m in zip(todo, metas):
            with open(r["out"] + ".raw", "rb") as f:
                got = f.read()
            os.unlink(r["out"] + ".raw")
            ok = got == want["out_bytes"] and m["dtype"] == "float32" and \
                m["shape"] == want["shape"]
            if not ok:
                self.errors.append(f"{r['out']}: {describe_diff(got, want)}")
            r["values_ok"] = ok
            r["ok"] = r["ok"] and ok
            r["zarrita"] = {"shape": m["shape"], "dtype": m["dtype"],
                            "inner_chunks": m["chunks"], "attributes": m["attributes_keys"]}


def describe_diff(got, want):
    if len(got) != len(want["out_bytes"]):
        return f"zarrita.js read {len(got)} bytes, expected {len(want['out_bytes'])}"
    a = np.frombuffer(got, dtype="<u4")
    b = np.frombuffer(want["out_bytes"], dtype="<u4")
    bad = np.flatnonzero(a != b)
    if bad.size == 0:
        return "metadata differs"
    i = int(bad[0])
    idx = np.unravel_index(i, want["shape"])
    return (f"{bad.size} values differ from np.float32(v)/np.float32(255); first at "
            f"{list(map(int, idx))}: got {a.view('<f4')[i]!r}, expected {b.view('<f4')[i]!r}")


def check_report(rep, want, vol_shape):
    bad = []

    def get(path):
        d = rep
        for k in path.split("."):
            if not isinstance(d, dict) or k not in d:
                return KeyError
            d = d[k]
        return d

    def eq(path, expect):
        got = get(path)
        if got != expect:
            bad.append(f"report {path} = {got!r}, expected {expect!r}")

    eq("job", "convert")
    eq("input.shape", list(vol_shape))
    eq("input.dtype", "uint8")
    eq("roi.offset", want["offset"])
    eq("roi.shape", want["shape"])
    eq("tile", TILE)
    eq("result.voxels", want["voxels"])
    eq("result.tiles", want["tiles"])
    eq("result.checksum", want["checksum"])
    eq("result.weighted_checksum", want["weighted_checksum"])
    eq("result.histogram.bins", 256)
    eq("result.histogram.counts", want["histogram"])
    eq("result.histogram.underflow", 0)
    eq("result.histogram.overflow", 0)
    eq("result.histogram.nan", 0)
    eq("result.normalization.mode", "scale")
    eq("result.normalization.divisor", 255.0)
    eq("result.output_checksum", want["output_checksum"])
    eq("result.output_weighted_checksum", want["output_weighted_checksum"])
    eq("output.shards", want["shards"])
    eq("output.complete", True)
    for k in ("total", "open", "hydrate", "decode", "process", "write"):
        if not isinstance(get(f"timing_ms.{k}"), (int, float)):
            bad.append(f"report timing_ms.{k} missing")
    return bad


def check_provenance(out, want):
    bad = []
    try:
        with open(os.path.join(out, "zarr.json")) as f:
            meta = json.load(f)
        p = (meta.get("attributes") or {}).get("shardmill") or {}
        if p.get("roi") != {"offset": want["offset"], "shape": want["shape"]}:
            bad.append(f"zarr.json provenance roi = {p.get('roi')!r}")
        if (p.get("normalization") or {}).get("mode") != "scale":
            bad.append(f"zarr.json provenance normalization = {p.get('normalization')!r}")
        if not (p.get("engine") or {}).get("version") or not p.get("config_sha256"):
            bad.append("zarr.json provenance lacks engine version or config_sha256")
        if meta.get("shape") != want["shape"] or meta.get("data_type") != "float32":
            bad.append(f"zarr.json shape {meta.get('shape')} dtype {meta.get('data_type')}")
        with open(os.path.join(out, "shardmill.complete.json")) as f:
            json.load(f)
    except (OSError, ValueError) as e:
        bad.append(f"provenance / marker: {e}")
    return not bad, bad


def check_peer_output(out, want):
    import zarr

    bad = []
    try:
        z = zarr.open_array(out, mode="r")
        got = z[...]
        if got.dtype != np.float32 or list(got.shape) != want["shape"]:
            return [f"peer output {got.dtype} {got.shape}"]
        if got.astype("<f4").tobytes() != want["out_bytes"]:
            bad.append(f"peer output: {describe_diff(got.astype('<f4').tobytes(), want)}")
        if "peer" not in z.attrs.asdict():
            bad.append("peer output has no provenance in .zattrs")
        with open(os.path.join(out, "complete.json")) as f:
            m = json.load(f)
        nchunks = sum(1 for e in m["files"] if not e["key"].startswith("."))
        if nchunks != want["shards"]:
            bad.append(f"peer marker lists {nchunks} chunk files, expected {want['shards']}")
    except (OSError, ValueError, KeyError) as e:
        bad.append(f"peer output unreadable: {e}")
    return bad


def same_shards(a, b):
    """Every c/ file of a equals the one in b, and the key sets agree."""
    def files(root):
        out = {}
        for dp, _dn, fn in os.walk(os.path.join(root, "c")):
            for f in fn:
                out[os.path.relpath(os.path.join(dp, f), root)] = os.path.join(dp, f)
        return out
    fa, fb = files(a), files(b)
    if set(fa) != set(fb):
        return False
    for k, p in fa.items():
        with open(p, "rb") as x, open(fb[k], "rb") as y:
            if x.read() != y.read():
                return False
    return True


# ---- one ROI ----

def run_case(b, a, name, want, kinds):
    case = {"roi": name, "offset": want["offset"], "shape": want["shape"],
            "expected": {k: want[k] for k in ("voxels", "tiles", "shards", "chunks_touched",
                                              "checksum", "weighted_checksum",
                                              "output_checksum", "output_weighted_checksum",
                                              "out_sha256")},
            "runs": {k: [] for k in kinds}, "warmup": {}, "order": []}
    samples = (machine.wait_idle(a.wait_idle, 0.6) if a.wait_idle > 0
               else [machine.busy_cores(0.2)])
    case["machine_busy_cpus_before"] = samples[-1]
    case["loadavg_before"] = os.getloadavg()
    log(f"w2: ROI {name} {want['offset']}+{want['shape']} (other load: {samples[-1]} busy CPUs)")
    threads = None

    def one(kind, tag, ref_out):
        nonlocal threads
        if kind == "A":
            r = b.run_shardmill(name, want, True, tag)
            threads = threads or ((r.get("report") or {}).get("threads"))
        elif kind == "Af":
            r = b.run_shardmill(name, want, True, tag, sync="fsync")
        elif kind == "A0":
            r = b.run_shardmill(name, want, False, tag)
        elif kind == "B":
            r = b.run_peer(name, want, True, tag)
        elif kind == "B0":
            r = b.run_peer(name, want, False, tag)
        else:
            mode = {"Wf": "fsync", "Wb": "fsync-batch", "Wsb": "syncfs-batch", "Ws": "syncfs",
                    "Wn": "none", "We": "encode"}[kind]
            r = b.run_baseline(name, want, mode, tag, threads or os.cpu_count(), ref_out)
        r["busy_cpus_after"] = None
        return r

    case["round_busy_cpus"] = []
    case["round_io_pressure_some_avg10"] = []
    case["io_pressure_before"] = io_pressure()
    for rnd in range(-1, a.pairs):
        warm = rnd < 0
        if not warm:
            rs = (machine.wait_idle(a.wait_idle_round, 0.6) if a.wait_idle_round > 0
                  else [machine.busy_cores(0.2)])
            case["round_busy_cpus"].append(rs[-1])
            case["round_io_pressure_some_avg10"].append(io_pressure())
        rk = [k for k in kinds if not (warm and a.quick and k not in ("A", "B"))]
        runs = []
        ref = None
        for kind in rk:
            tag = f"{'warm' if warm else f'r{rnd}'}-{kind}"
            r = one(kind, tag, ref)
            if kind == "A" and r.get("ok"):
                ref = r["out"]
            runs.append((kind, r))
        b.verify_outputs([r for _k, r in runs], want)
        for kind, r in runs:
            # Full profile: outputs stay until the end of the run (see the module docstring);
            # --quick deletes them after each round (shorter run, timings are not its point).
            d = r.pop("_dir", None)
            if a.quick and d:
                shutil.rmtree(d, ignore_errors=True)
            if r.get("out"):
                r["out"] = os.path.basename(r["out"])
            if warm:
                case["warmup"][kind] = r
            else:
                case["runs"][kind].append(r)
                case["order"].append(kind)
        log(f"w2:   {'warm-up' if warm else f'round {rnd + 1}/{a.pairs}'}: " + ", ".join(
            f"{k} {r['wall_ms']:.0f} ms" for k, r in runs))
    case["threads"] = threads
    case["summary"] = case_summary(case)
    return case


def stage(runs, key, sub="timing_ms"):
    vals = []
    for r in runs:
        t = (r.get("report") or {}).get(sub) if sub == "timing_ms" else None
        if t is None:
            t = r.get("timing_ms")
        if t is None:
            continue
        v = t.get(key)
        if isinstance(v, dict):
            v = v.get("max")
        vals.append(v)
    return summarize(vals)


def case_summary(c):
    s = {}
    for kind, runs in c["runs"].items():
        good = [r for r in runs if r.get("ok")]
        k = {"name": KIND_NAMES[kind], "n": len(runs), "ok": len(good),
             "wall_ms": summarize([r["wall_ms"] for r in good]),
             "peak_rss_bytes_max": max((r["peak_rss_bytes"] for r in runs), default=None),
             "user_ms": summarize([r["user_ms"] for r in good]),
             "sys_ms": summarize([r["sys_ms"] for r in good])}
        if kind in ("A", "Af", "A0"):
            for st in ("total", "open", "hydrate", "decode", "process", "write", "scan_wall"):
                k[f"{st}_ms"] = stage(good, st)
            k["write_phase_wall_ms"] = summarize(
                [r["report"]["timing_ms"]["total"] - r["report"]["timing_ms"]["scan_wall"]
                 for r in good])
            k["report_peak_rss_bytes_max"] = max(
                (((r.get("report") or {}).get("memory") or {}).get("peak_rss_bytes") or 0
                 for r in runs), default=None)
            k["output_bytes"] = ((good[-1]["report"].get("output") or {}).get("bytes")
                                 if good else None)
            if good and good[-1].get("nginx"):
                k["nginx"] = good[-1]["nginx"]
        elif kind in ("B", "B0"):
            for st in ("import", "open", "read", "process", "write", "fsync", "marker",
                       "in_process", "total"):
                k[f"{st}_ms"] = summarize([r["timing_ms"].get(st) for r in good])
            if good and good[-1].get("nginx"):
                k["nginx"] = good[-1]["nginx"]
        else:
            for st in ("wall", "encode", "io", "sync"):
                k[f"inproc_{st}_ms"] = summarize([r["result"][f"{st}_ns"] / 1e6 for r in good])
            k["identical_to_shardmill"] = sorted({str(r.get("identical_to_shardmill"))
                                                  for r in good})
            if good:
                k["fsyncs"] = good[-1]["result"]["fsyncs"]
                k["bytes"] = good[-1]["result"]["bytes"]
        s[kind] = k
    a, bb = med(s.get("A", {}).get("wall_ms")), med(s.get("B", {}).get("wall_ms"))
    s["speedup_wall"] = (bb / a) if a and bb else None
    a0, b0 = med(s.get("A0", {}).get("wall_ms")), med(s.get("B0", {}).get("wall_ms"))
    s["speedup_wall_no_fsync"] = (b0 / a0) if a0 and b0 else None
    bt = med(s.get("B", {}).get("in_process_ms"))
    at = med(s.get("A", {}).get("total_ms"))
    s["speedup_in_process"] = (bt / at) if at and bt else None
    w = med(s.get("A", {}).get("write_ms"))
    wf = med(s.get("Wf", {}).get("inproc_wall_ms"))
    s["write_vs_baseline"] = (w / wf) if w and wf else None
    # like for like: each durable discipline against the baseline doing the same syscalls
    waf = med(s.get("Af", {}).get("write_ms"))
    s["write_fsync_vs_Wf"] = (waf / wf) if waf and wf else None
    wsb = med(s.get("Wsb", {}).get("inproc_wall_ms"))
    s["write_vs_Wsb"] = (w / wsb) if w and wsb else None
    return s


# ---- targets, report ----

def evaluate_targets(cases):
    out = []

    def add(name, value, limit, ok, **extra):
        t = {"name": name, "value": value, "limit": limit,
             "status": "not measured" if value is None else ("PASS" if ok else "FAIL")}
        t.update(extra)
        out.append(t)

    for c in cases:
        s = c["summary"]
        r = s["speedup_wall"]
        add(f"{c['roi']}: zarr-python / shardmill process wall (medians, ABAB, both durable)",
            None if r is None else round(r, 2), f">= {SPEEDUP_TARGET:g}",
            r is not None and r >= SPEEDUP_TARGET)
    c = next((c for c in cases if c["roi"] == "aligned"), None)
    if c:
        w = c["summary"]["A"]["wall_ms"]
        add("aligned: shardmill process wall, durable (median ms)",
            None if not w else round(w["median"], 1), f"<= {ALIGNED_WALL_TARGET_MS:g}",
            bool(w) and w["median"] <= ALIGNED_WALL_TARGET_MS,
            min=None if not w else round(w["min"], 1))
    for c in cases:
        s = c["summary"]
        r = s["write_vs_baseline"]
        add(f"{c['roi']}: shardmill write stage / encode+fsync of the same 256 files (C "
            "baseline, same threads; medians)", None if r is None else round(r, 2),
            f"<= {WRITE_VS_BASELINE_TARGET:g}", r is not None and r <= WRITE_VS_BASELINE_TARGET,
            write_ms=med(s["A"].get("write_ms")),
            baseline_ms=med((s.get("Wf") or {}).get("inproc_wall_ms")))
    rss = [r["peak_rss_bytes"] for c in cases for k in ("A", "Af", "A0")
           for r in c["runs"].get(k, []) + [c["warmup"].get(k)] if r]
    rep = [((r.get("report") or {}).get("memory") or {}).get("peak_rss_bytes") or 0
           for c in cases for k in ("A", "Af", "A0") for r in c["runs"].get(k, []) if r]
    m = max(rss + rep) if rss else None
    add("shardmill peak RSS, every run (MiB; wait4 ru_maxrss and the report's VmHWM)",
        None if m is None else round(m / MIB, 2), f"<= {RSS_TARGET // MIB}",
        m is not None and m <= RSS_TARGET)
    return out


def toolchain(a):
    build_dir, cache = machine.cmake_cache(a.shardmill)
    import numcodecs
    import zarr

    nginx = subprocess.run([os.environ.get("SM_NGINX", "/usr/sbin/nginx"), "-v"],
                           capture_output=True, text=True) if shutil.which(
        os.environ.get("SM_NGINX", "/usr/sbin/nginx")) else None
    sha = machine.file_sha256(a.shardmill)
    git = ["git", "--no-optional-locks", "-C", REPO]
    zv = machine.zarrita_version()
    return {
        "shardmill": {"path": a.shardmill, "sha256": sha,
                      "version": machine.run_text([a.shardmill, "--version"]),
                      "build_dir": build_dir, "CMAKE_BUILD_TYPE": cache.get("CMAKE_BUILD_TYPE"),
                      "CMAKE_C_FLAGS": cache.get("CMAKE_C_FLAGS"),
                      "CMAKE_C_FLAGS_RELEASE": cache.get("CMAKE_C_FLAGS_RELEASE"),
                      "CMAKE_C_COMPILER": cache.get("CMAKE_C_COMPILER"),
                      "SM_WITH_OPENMP": cache.get("SM_WITH_OPENMP"),
                      "SM_WITH_MPI": cache.get("SM_WITH_MPI")},
        "commit": {"head": machine.run_text(git + ["rev-parse", "HEAD"]),
                   "dirty_tracked": bool(machine.run_text(git + ["status", "--porcelain",
                                                         "--untracked-files=no"]))},
        "cc": (machine.run_text(["cc", "--version"]) or "").split("\n")[0],
        "cmake": (machine.run_text(["cmake", "--version"]) or "").split("\n")[0],
        "libzstd": machine.run_text(["pkg-config", "--modversion", "libzstd"]),
        "node": machine.run_text([a.node, "--version"]), "zarrita": zv,
        "nginx": (nginx.stderr or nginx.stdout).strip() if nginx else None,
        "python": platform.python_version(), "python_executable": sys.executable,
        "numpy": np.__version__, "zarr": zarr.__version__, "numcodecs": numcodecs.__version__,
        "perf": machine.run_text(["perf", "--version"]),
        "machine": dict(machine.machine(), loadavg_start=os.getloadavg()),
    }


def harness_digest():
    out = {}
    for f in sorted(os.listdir(HERE)):
        if f.endswith((".py", ".mjs", ".c", ".md")):
            with open(os.path.join(HERE, f), "rb") as fh:
                out[f"bench/convert_ct/{f}"] = hashlib.sha256(fh.read()).hexdigest()
    for f in ("bench/region_read/w3_spawn.c", "bench/region_read/zarrita_common.mjs"):
        with open(os.path.join(REPO, f), "rb") as fh:
            out[f] = hashlib.sha256(fh.read()).hexdigest()
    return out


def f1(s, k="median"):
    return "-" if not s else f"{s[k]:.1f}"


def print_tables(doc):
    cases = doc["cases"]
    print("| ROI | process | wall ms med (min–max) | total | open | hydrate | decode | process "
          "| write | peak RSS MiB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in cases:
        s = c["summary"]
        for kind in ("A", "Af", "A0"):
            k = s.get(kind)
            if not k:
                continue
            print(f"| {c['roi']} | {k['name']} | {f1(k['wall_ms'])} ({f1(k['wall_ms'], 'min')}–"
                  f"{f1(k['wall_ms'], 'max')}) | {f1(k['total_ms'])} | {f1(k['open_ms'])} | "
                  f"{f1(k['hydrate_ms'])} | {f1(k['decode_ms'])} | {f1(k['process_ms'])} | "
                  f"{f1(k['write_ms'])} | {k['peak_rss_bytes_max'] / MIB:.1f} |")
        for kind in ("B", "B0"):
            k = s.get(kind)
            if not k:
                continue
            print(f"| {c['roi']} | {k['name']} | {f1(k['wall_ms'])} ({f1(k['wall_ms'], 'min')}–"
                  f"{f1(k['wall_ms'], 'max')}) | {f1(k['total_ms'])} | {f1(k['open_ms'])} | "
                  f"read {f1(k['read_ms'])} | (in read) | {f1(k['process_ms'])} | "
                  f"{f1(k['write_ms'])} + fsync {f1(k['fsync_ms'])} + marker "
                  f"{f1(k['marker_ms'])} | {k['peak_rss_bytes_max'] / MIB:.1f} |")
    print()
    print("| ROI | write reference | in-process ms med (min–max) | encode Σthreads | "
          "write+fsync Σthreads | dir fsync / syncfs | process wall ms | same bytes |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for c in cases:
        s = c["summary"]
        for kind in ("Wf", "Wb", "Wsb", "Ws", "Wn", "We"):
            k = s.get(kind)
            if not k:
                continue
            w = k["inproc_wall_ms"]
            print(f"| {c['roi']} | {k['name']} | {f1(w)} ({f1(w, 'min')}–{f1(w, 'max')}) | "
                  f"{f1(k['inproc_encode_ms'])} | {f1(k['inproc_io_ms'])} | "
                  f"{f1(k['inproc_sync_ms'])} | {f1(k['wall_ms'])} | "
                  f"{'/'.join(k['identical_to_shardmill'])} |")
        print(f"| {c['roi']} | shardmill write stage: as configured / sync=fsync / no fsync | "
              f"{f1((s.get('A') or {}).get('write_ms'))} / "
              f"{f1((s.get('Af') or {}).get('write_ms'))} / "
              f"{f1((s.get('A0') or {}).get('write_ms'))} | | | | | |")
    print()
    for c in cases:
        s = c["summary"]
        def x(v, unit="×"):
            return "-" if v is None else f"{v:.2f}{unit}"
        print(f"{c['roi']}: zarr-python / shardmill process wall {x(s['speedup_wall'])} "
              f"(durable), {x(s['speedup_wall_no_fsync'])} (neither syncs); in-process (peer "
              f"open..marker / report total) {x(s['speedup_in_process'])}; write stage / Wf "
              f"{x(s['write_vs_baseline'], '')}; like for like: sync=fsync / Wf "
              f"{x(s.get('write_fsync_vs_Wf'), '')}, as configured / Wsb "
              f"{x(s.get('write_vs_Wsb'), '')}")
    print()
    for t in doc["targets"]:
        print(f"[{t['status']}] {t['name']}: {t['value']} (target {t['limit']})")


def perf_profile(a, b, out_dir, stamp):
    """perf record -g of one aligned, durable shardmill run of --perf-shardmill."""
    perf = shutil.which("perf")
    if not perf:
        return {"error": "perf not found"}
    os.makedirs(out_dir, exist_ok=True)
    res = {}
    for name in ROIS:
        base = os.path.join(out_dir, f"w2-{stamp}-perf-{name}")
        out = base + ".zarr"
        argv = b.shardmill_argv(name, out, base + ".report.json")
        argv[0] = a.perf_shardmill
        os.sync()
        # dwarf unwinding: Debian's libzstd has no frame pointers
        p = subprocess.run([perf, "record", "--call-graph", "dwarf,16384", "-F", "2999", "-o",
                            base + ".data", "--"] + argv, capture_output=True, text=True)
        shutil.rmtree(out, ignore_errors=True)
        if p.returncode != 0:
            res[name] = {"error": p.stderr.strip()[-400:]}
            continue
        rep = subprocess.run([perf, "report", "--stdio", "--children", "-i", base + ".data",
                              "--sort", "symbol", "--percent-limit", "2", "-g", "none"],
                             capture_output=True, text=True)
        with open(base + ".txt", "w") as f:
            f.write(rep.stdout)
        flat = [ln for ln in rep.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
        res[name] = {"data": base + ".data", "report": base + ".txt", "top": flat[:25]}
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description="SPEC §8 W2 conversion benchmark",
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__)
    ap.add_argument("--build-dir", default=os.environ.get("SHARDMILL_BUILD_DIR",
                                                          os.path.join(REPO, "build")))
    ap.add_argument("--shardmill", help="binary (default BUILD_DIR/jobs/shardmill)")
    ap.add_argument("--config", default=os.path.join(REPO, "configs", "w2-convert.yaml"))
    ap.add_argument("--input-root", default=os.path.join(REPO, "data"),
                    help="where mri-crop.zarr, mri/ch2better.nii.gz, w1-input.json are")
    ap.add_argument("--data-dir", help="where the zarr-python v2 copy goes (default "
                    "BUILD_DIR/bench-data/w2; --quick: OUT/data)")
    ap.add_argument("--input", choices=["http", "file"], default="http",
                    help="inputs over nginx on loopback (default, as W1) or as local paths")
    ap.add_argument("--out", help="results directory (default bench/results; --quick: temp)")
    ap.add_argument("--work-dir", help="where every process writes its output (default: a "
                    "new directory under $TMPDIR; must be a real disk for fsync to mean anything)")
    ap.add_argument("--quick", action="store_true", help="CI smoke profile")
    ap.add_argument("--pairs", type=int, help="measured rounds per ROI (default 5; quick 1)")
    ap.add_argument("--rois", default="aligned,nonaligned")
    ap.add_argument("--peer-mode", choices=["roi", "tile"], default="roi")
    ap.add_argument("--threads", default="auto", help="shardmill parallel.threads (and the "
                    "baseline's threads); default auto")
    ap.add_argument("--wait-idle", type=float, default=0, metavar="S",
                    help="before each ROI wait up to S s for < 0.6 busy CPUs")
    ap.add_argument("--wait-idle-round", type=float, default=0, metavar="S",
                    help="also before each measured round, wait up to S s")
    ap.add_argument("--node", default=shutil.which("node") or "node")
    ap.add_argument("--perf-shardmill", help="also perf record -g one durable run per ROI of "
                    "this binary (a -fno-omit-frame-pointer build)")
    ap.add_argument("--perf-dir", help="where perf.data and perf report text go (default: a "
                    "new directory under $TMPDIR, kept; never inside the repository)")
    ap.add_argument("--keep-work", action="store_true")
    ap.add_argument("--note", help="free text recorded in the report (e.g. how the binary was "
                    "built)")
    ap.add_argument("--table", metavar="REPORT", help="print the tables of a results file")
    a = ap.parse_args(argv)
    if a.table:
        with open(a.table) as f:
            print_tables(json.load(f))
        return 0
    a.shardmill = os.path.abspath(a.shardmill or os.path.join(a.build_dir, "jobs", "shardmill"))
    if not os.access(a.shardmill, os.X_OK):
        log(f"w2: error: {a.shardmill} is not executable (build the shardmill target)")
        return 1
    a.pairs = a.pairs if a.pairs is not None else (1 if a.quick else 5)
    if a.pairs < 1:
        ap.error("--pairs must be >= 1")
    rois = a.rois.split(",")
    for r in rois:
        if r not in ROIS:
            ap.error(f"unknown ROI {r}")
    if a.out is None:
        a.out = tempfile.mkdtemp(prefix="sm-w2-quick-") if a.quick else os.path.join(
            REPO, "bench", "results")
    if a.data_dir is None:
        a.data_dir = os.path.join(a.out, "data") if a.quick else os.path.join(
            os.path.dirname(os.path.dirname(a.shardmill)), "bench-data", "w2")
    a.data_dir = os.path.abspath(a.data_dir)
    kinds = KINDS_QUICK if a.quick else KINDS_FULL
    # Which durability modes the binary's configuration reaches (output.sync appeared in
    # 4767968; before it output.fsync: true meant FSYNC and SYNCFS was unreachable).
    sync_key = subprocess.run([a.shardmill, "validate", a.config, "--set", "output.sync=fsync"],
                              capture_output=True, text=True).returncode == 0
    eff = machine.run_text([a.shardmill, "validate", a.config]) or ""
    default_sync = "fsync (no output.sync key: SYNCFS unreachable from the configuration)"
    if sync_key:
        sec = eff.split("\noutput:", 1)[-1]
        line = next((ln for ln in sec.splitlines() if ln.strip().startswith("sync:")), "")
        default_sync = line.split(":", 1)[-1].strip() or "?"
    if not sync_key:
        kinds = [k for k in kinds if k != "Af"]
    t_start = time.monotonic()
    work = tempfile.mkdtemp(prefix="sm-w2-work-", dir=a.work_dir)
    errors = []
    try:
        baseline = build_tools(work)
        v3, v2, vol, source = prepare_data(a, work)
        t_data = time.monotonic() - t_start
        tc = toolchain(a)
        if tc["shardmill"]["CMAKE_BUILD_TYPE"] not in ("Release", None):
            log(f"w2: warning: {a.shardmill} is a {tc['shardmill']['CMAKE_BUILD_TYPE']} build "
                "(SPEC §8: Release)")
        wfs = machine.fs_type(work)
        if wfs["type"] in ("tmpfs", "ramfs"):
            log(f"w2: warning: {work} is on {wfs['type']}: fsync costs nothing there")
        log(f"w2: {'quick' if a.quick else 'full'} profile, {a.pairs} round(s) per ROI, input "
            f"{a.input}, outputs in {work} ({wfs['type']}), {tc['shardmill']['version']}, "
            f"A = output.fsync true, sync {default_sync}")
        srv = None
        serve = None
        if a.input == "http":
            from shardmill_test.nginx_server import NginxServer

            serve = os.path.join(work, "serve")
            os.makedirs(serve)
            os.symlink(os.path.abspath(v3), os.path.join(serve, "in-v3.zarr"))
            os.symlink(os.path.abspath(v2), os.path.join(serve, "in-v2.zarr"))
            srv = NginxServer(serve).start()
        try:
            b = Bench(a, work, baseline, srv, v3, v2, vol)
            cases = []
            for name in rois:
                want = oracle(vol, name)
                cases.append(run_case(b, a, name, want, kinds))
            perf = {}
            if a.perf_shardmill:
                stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
                perf = perf_profile(a, b, a.perf_dir or tempfile.mkdtemp(prefix="sm-w2-perf-"),
                                    stamp)
        finally:
            if srv is not None:
                srv.stop()
        errors = b.errors
        targets = evaluate_targets(cases)
        tc["machine"]["loadavg_end"] = os.getloadavg()
        doc = {
            "schema": "shardmill-bench-w2/1", "workload": "W2 CT conversion (SPEC §8)",
            "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "profile": "quick" if a.quick else "full",
            "command": shlex.join([sys.executable] + (argv or sys.argv)),
            "cwd": os.getcwd(), "toolchain": tc, "harness_sha256": harness_digest(),
            "params": {"rois": {r: ROIS[r] for r in rois}, "tile": TILE, "shard": SHARD,
                       "chunk": CHUNK, "histogram": {"bins": 256, "range": [0, 256]},
                       "normalization": "scale, float32(v) / float32(255)",
                       "pairs": a.pairs, "kinds": {k: KIND_NAMES[k] for k in kinds},
                       "peer_mode": a.peer_mode, "threads": a.threads, "input": a.input,
                       "wait_idle_s": a.wait_idle, "wait_idle_round_s": a.wait_idle_round,
                       "config": a.config,
                       "output_sync_key": sync_key, "durable_mode_of_A": default_sync,
                       "note": a.note,
                       "shardmill_command_example": shlex.join(
                           b.shardmill_argv("aligned", "OUT.zarr", "REPORT.json"))},
            "input": source,
            "work_dir": {"path": work, **wfs,
                         "note": "every process writes its output here; sync(2) before each "
                                 "timed process, outside its interval"},
            "cases": cases, "targets": targets, "errors": errors, "warnings": b.warnings,
            "perf": perf, "ok": not errors, "data_setup_s": round(t_data, 2),
            "elapsed_s": round(time.monotonic() - t_start, 2),
        }
        for c in cases:  # strip bulky argv repeats: keep one per kind
            for runs in c["runs"].values():
                for r in runs[1:]:
                    r.pop("argv", None)
        path = results.write_report(a.out, "w2", doc)
        print_tables(doc)
        print(f"\nresults: {path}")
        if b.warnings:
            print(f"w2: {len(b.warnings)} warning(s):")
            for w in b.warnings[:10]:
                print(f"  {w}")
        if errors:
            print(f"w2: {len(errors)} error(s):")
            for e in errors[:20]:
                print(f"  {e}")
            return 1
        print(f"w2: every value matched NumPy (shardmill and zarr-python) in "
              f"{doc['elapsed_s']} s")
        return 0
    finally:
        if a.keep_work:
            log(f"w2: work files kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
