#!/usr/bin/python3
"""W6's OME output against its inner chunk and zstd level (issue 36, the W6 line): the bytes and
the user+sys CPU seconds of W6's OME convert (bench/pyramid/w6.py's job: the CT-like uint16
volume to a float32 OME-Zarr 0.5 image, `levels: auto`, 1 rank x 2 threads) for each candidate,
with the viewers' read amplification of that output (bench/viewer/viewer.py's plane and 3-D
views, computed from the files, the worst level), so a chunk or codec choice is judged on both.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/pyramid/w6_chunks.py \
        --shardmill build/release/jobs/shardmill [--shape 256,512,512] [--repeats 3] \
        [--candidates auto,64x64x64,8x128x128,...] [--out bench/results]
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/pyramid/w6_chunks.py --quick \
        --shardmill build/release/jobs/shardmill --work DIR
        (ctest bench.w6_chunks.quick: a 64x128x128 volume, auto and 64x64x64 once; exit 1 when
        the automatic chunks break the viewers' bounds, plane <= 8x and 3-D <= 2x)
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/pyramid/w6_chunks.py --zstd \
        64x64x64@3,4x128x128@3,4x128x128@p18,16,18,1,4,0,2 [--shape ...] [--repeats 2]
        (zstd alone, python-zstandard, on level 0's values (the volume / 4095 as float32), each
        chunk one frame: bytes and CPU seconds (min of the repeats); @L a level, @pW,C,H,S,M,T,ST
        explicit window, chain, hash, search logs, min match, target length, strategy)

A candidate is `auto` (the engine's automatic OME chunks), an explicit chunk `ZxYxX`
(output.chunk, every level), either with `@L` for zstd level L (default 3). Runs alternate over
the candidates (a, b, c, a, b, c, ...) so the machine's load hits all alike; CPU is the
process's user+sys (os.wait4), the minimum and the median of the repeats. Bytes are the output's
files (deterministic). Results: OUT/w6-chunks-<UTC>.json and a Markdown table on stdout.
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
import zstandard

from shardmill_test import script_module
from shardmill_test.zarr_decode import spec_decode
from shardmill_test.ranks import plain_env

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT = "auto,64x64x64,8x128x128,16x64x64,4x256x256,2x256x256,1x256x256,auto@4,auto@5"


def cpu_run(cmd):
    """user+sys CPU seconds of cmd (it and its children)."""
    p = subprocess.Popen(cmd, env=plain_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"w6_chunks: `{' '.join(cmd)}` failed: {err[-1500:]}")
    return ru.ru_utime + ru.ru_stime


def tree_bytes(path):
    n = 0
    for d, _s, files in os.walk(path):
        n += sum(os.path.getsize(os.path.join(d, f)) for f in files)
    return n


def split_specs(text):
    """"64x64x64@3,4x128x128@p18,16,18,1,4,0,2" -> the two specs (a p list keeps its commas)."""
    out = []
    for part in text.split(","):
        if out and "x" not in part:
            out[-1] += "," + part
        else:
            out.append(part)
    return out


def parse(cand):
    chunk, _, level = cand.partition("@")
    dims = None if chunk == "auto" else [int(x) for x in chunk.split("x")]
    return dims, int(level) if level else 3


def config(vol, out, dims, level):
    chunk = f"  chunk: {dims}\n" if dims else ""
    return (f"job: convert\ninput: {{store: {vol}}}\nnormalize: {{mode: scale, divisor: 4095}}\n"
            f"output:\n  path: {out}\n  exists: overwrite\n  ome: {{levels: auto, method: mean}}\n"
            f"{chunk}  codec: {{name: zstd, level: {level}}}\n"
            "parallel: {threads: 2}\nlimits: {memory_bytes: 2GiB}\nprogress: false\n")


def views(out):
    """Per level: shape, shard, chunk, bytes and the plane / 3-D amplification from the files."""
    viewer = script_module.load("bench/viewer/viewer.py")
    rows = []
    for name in viewer.level_names(out):
        lv = viewer.Level(out, name)
        z = lv.shape[0] // 2
        plane, _ = viewer.computed_bytes(lv, out, viewer.plane_reads(lv, z))
        vol, _ = viewer.computed_bytes(lv, out, viewer.volume_reads(lv))
        rows.append({"level": name, "shape": lv.shape, "shard": lv.shard, "chunk": lv.chunk,
                     "bytes": tree_bytes(os.path.join(out, name)),
                     "plane": plane / (lv.shape[1] * lv.shape[2] * lv.itemsize),
                     "volume": vol / (lv.shape[0] * lv.shape[1] * lv.shape[2] * lv.itemsize)})
    return rows


def zstd_only(vol, specs, repeats):
    values = spec_decode(vol).astype(np.float32) / np.float32(4095)
    print("| chunks @ zstd | bytes | CPU s |\n|---|---:|---:|")
    for spec in specs:
        chunk, _, z = spec.partition("@")
        cz, cy, cx = (int(x) for x in chunk.split("x"))
        if z.startswith("p"):
            w, c, h, s, m, t, st = (int(x) for x in z[1:].split(","))
            cctx = zstandard.ZstdCompressor(compression_params=zstandard.ZstdCompressionParameters(
                window_log=w, chain_log=c, hash_log=h, search_log=s, min_match=m,
                target_length=t, strategy=st))
        else:
            cctx = zstandard.ZstdCompressor(level=int(z or 3))
        frames = [np.ascontiguousarray(values[a:a + cz, b:b + cy, c:c + cx]).tobytes()
                  for a in range(0, values.shape[0], cz) for b in range(0, values.shape[1], cy)
                  for c in range(0, values.shape[2], cx)]
        best = None
        for _ in range(repeats):
            t0 = time.process_time()
            n = sum(len(cctx.compress(f)) for f in frames)
            dt = time.process_time() - t0
            best = dt if best is None else min(best, dt)
        print(f"| {spec} | {n / 1e6:.1f} MB | {best:.2f} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--shape", default="256,512,512")
    ap.add_argument("--noise", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--candidates", default=DEFAULT)
    ap.add_argument("--work", default=os.path.join(REPO, "build", "bench-data", "w6"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--zstd", default=None, help="CHUNK@L,...: zstd alone on level 0's values")
    args = ap.parse_args()
    if args.quick:
        args.shape, args.repeats, args.candidates = "64,128,128", 1, "auto,64x64x64"
    shardmill = os.path.abspath(args.shardmill)
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    tag = args.shape.replace(",", "x") + ("" if args.noise == 20.0 else f"-n{args.noise:g}")
    vol = os.path.join(work, f"vol-{tag}.zarr")  # the one w6.py makes
    if not os.path.exists(vol + ".manifest.json"):
        subprocess.run(["/usr/bin/python3", os.path.join(REPO, "scaling", "make_volume.py"), vol,
                        "--shape", args.shape, "--noise", str(args.noise), "--jobs", "2"],
                       check=True, stdout=subprocess.DEVNULL)
    if args.zstd:
        zstd_only(vol, split_specs(args.zstd), args.repeats)
        return
    cands = args.candidates.split(",")
    res = {c: {"cpu_s": []} for c in cands}
    for rep in range(args.repeats):
        for c in cands:
            dims, level = parse(c)
            out = os.path.join(work, "out-chunks.zarr")
            cfg = os.path.join(work, "chunks.yaml")
            with open(cfg, "w") as f:
                f.write(config(vol, out, dims, level))
            res[c]["cpu_s"].append(cpu_run([shardmill, "run", cfg]))
            if rep == 0:
                res[c]["bytes"] = tree_bytes(out)
                res[c]["levels"] = views(out)
            shutil.rmtree(out, ignore_errors=True)
            print(f"w6_chunks {c} run {rep + 1}: {res[c]['cpu_s'][-1]:.2f} CPU s", flush=True)
    base = res[cands[0]]
    print(f"\n| candidate | inner chunks per level | bytes | vs {cands[0]} | CPU s min (median) "
          "| plane worst | 3-D worst |\n|---|---|---:|---:|---:|---:|---:|")
    for c in cands:
        r = res[c]
        r["cpu_min_s"], r["cpu_median_s"] = min(r["cpu_s"]), statistics.median(r["cpu_s"])
        r["plane_worst"] = max(x["plane"] for x in r["levels"])
        r["volume_worst"] = max(x["volume"] for x in r["levels"])
        chunks = " ".join("x".join(map(str, x["chunk"])) for x in r["levels"])
        print(f"| {c} | {chunks} | {r['bytes'] / 1e6:.1f} MB | "
              f"{r['bytes'] / base['bytes'] - 1:+.1%} | {r['cpu_min_s']:.2f} "
              f"({r['cpu_median_s']:.2f}) | {r['plane_worst']:.2f}x | {r['volume_worst']:.2f}x |")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        utc = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        binary = subprocess.run([shardmill, "--version"], capture_output=True,
                                text=True).stdout.strip()
        path = os.path.join(args.out, f"w6-chunks-{utc}.json")
        with open(path, "w") as f:
            json.dump({"workload": "W6 chunks", "shape": args.shape, "noise": args.noise,
                       "repeats": args.repeats, "binary": binary, "utc": utc,
                       "load_avg": os.getloadavg(), "results": res}, f, indent=1)
        print(f"w6_chunks: wrote {path}")
    viewer = script_module.load("bench/viewer/viewer.py")
    bad = [c for c in cands if c.startswith("auto") and
           (res[c]["plane_worst"] > viewer.PLANE_BOUND
            or res[c]["volume_worst"] > viewer.VOLUME_BOUND)]
    if bad:
        sys.exit(f"w6_chunks: the automatic chunks of {bad} break the viewers' bounds")


if __name__ == "__main__":
    main()
