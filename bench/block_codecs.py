#!/usr/bin/python3
"""W4 block-codec benchmark driver and numcodecs peer (SPEC §8 W4; STYLE B14).

Run with Debian's /usr/bin/python3 (numpy 1.24, numcodecs 0.11) against a Release build:

    cmake -S . -B /work/build-codec-rel -DCMAKE_BUILD_TYPE=Release
    cmake --build /work/build-codec-rel --target bench_codecs
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/block_codecs.py --engine /work/build-codec-rel/bench/bench_codecs

Smoke profile for CI (few repetitions, one round, report in --out-dir):

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/block_codecs.py --quick --engine BUILD/bench/bench_codecs \
        --out-dir BUILD/bench-quick

Both sides encode and decode the same 64^3 int32 blocks -- "smooth" (v = x + y + z) and "random"
(splitmix64, seed 42) -- with raw (bytes only), gzip level 6, blosc (lz4, byte shuffle, clevel 5,
one thread) and zstd level 3, decoding into a preallocated buffer. Each side runs in fresh
processes, engine and peer alternately (ABAB) after one warm-up pair; per-block times pooled over
the rounds give min / median / max. Every decoded block is compared with the original (the engine
checks its own, the peer its own, and each decodes the other's encoded blocks, so the two
implementations check each other). Records toolchain, commit, peak RSS of
every process (wait4), and writes bench/results/w4-<UTC timestamp>.json (never overwriting).
A wrong value or a failed process exits 1; timings never change the exit status.

Internal: `block_codecs.py --peer [--reps N --warmup N --check-dir DIR --dump-dir DIR]` is the
numcodecs side.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SIDE = 64
CODECS = ("raw", "gzip", "blosc", "zstd")
CONTENTS = ("smooth", "random")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- the peer (numcodecs) ----------------------------------------------------------------------

def make_block(content):
    """The engine's generators (bench/bench_codecs.c fill_block), in NumPy."""
    import numpy as np
    if content == "smooth":
        z, y, x = np.indices((SIDE, SIDE, SIDE), dtype=np.int32)
        return (x + y + z).astype("<i4")
    n = SIDE ** 3
    golden = np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        t = np.uint64(42) + np.arange(1, n + 1, dtype=np.uint64) * golden
        t = (t ^ (t >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        t = (t ^ (t >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        t = t ^ (t >> np.uint64(31))
    return (t >> np.uint64(32)).astype(np.uint32).view("<i4").reshape(SIDE, SIDE, SIDE)


def peer_codec(name):
    import numcodecs
    from numcodecs import blosc
    blosc.use_threads = False  # blosc_*_ctx with one thread, like the engine (STYLE B9)
    blosc.set_nthreads(1)
    if name == "gzip":
        return numcodecs.GZip(level=6)
    if name == "blosc":
        return numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE, blocksize=0)
    if name == "zstd":
        return numcodecs.Zstd(level=3)
    return None


def stats(samples):
    return {"min": min(samples), "median": statistics.median(samples), "max": max(samples),
            "samples_us": samples}


def run_peer(args):
    import numpy as np
    results = []
    for name in CODECS:
        codec = peer_codec(name)
        for content in CONTENTS:
            block = make_block(content)
            out = np.empty_like(block)
            enc_us, dec_us = [], []
            for i in range(-args.warmup, args.reps):
                t0 = time.perf_counter_ns()
                enc = block.tobytes() if codec is None else codec.encode(block)
                t1 = time.perf_counter_ns()
                if codec is None:
                    np.copyto(out, np.frombuffer(enc, dtype="<i4").reshape(block.shape))
                else:
                    codec.decode(enc, out=out)
                t2 = time.perf_counter_ns()
                if not np.array_equal(out, block):
                    log(f"peer: {name}/{content}: decoded block differs")
                    return 1
                out.fill(0)
                if i >= 0:
                    enc_us.append((t1 - t0) / 1e3)
                    dec_us.append((t2 - t1) / 1e3)
            if args.dump_dir and codec is not None:
                with open(os.path.join(args.dump_dir, f"{name}-{content}.bin"), "wb") as f:
                    f.write(enc)
            cross = None
            if args.check_dir and codec is not None:
                path = os.path.join(args.check_dir, f"{name}-{content}.bin")
                with open(path, "rb") as f:
                    theirs = f.read()
                got = np.frombuffer(codec.decode(theirs), dtype="<i4").reshape(block.shape)
                if not np.array_equal(got, block):
                    log(f"peer: shardmill's {name}/{content} block decodes to other values")
                    return 1
                cross = len(theirs)
            results.append({"codec": name, "content": content, "decoded_bytes": block.nbytes,
                            "encoded_bytes": len(enc), "ratio": block.nbytes / len(enc),
                            "decode_us": stats(dec_us), "encode_us": stats(enc_us),
                            "verified": True, "decoded_shardmill_block_bytes": cross})
    import numcodecs
    doc = {"workload": "W4", "impl": "numcodecs", "numcodecs": numcodecs.__version__,
           "numpy": np.__version__, "block": [SIDE] * 3, "dtype": "int32",
           "reps": args.reps, "warmup": args.warmup, "results": results}
    json.dump(doc, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")
    return 0


# ---- the driver --------------------------------------------------------------------------------

def run_process(argv):
    """Runs argv in a fresh process; returns (parsed JSON stdout, peak RSS bytes, wall seconds)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err)
        out = p.stdout.read()
        p.stdout.close()
        _, status, ru = os.wait4(p.pid, 0)  # reaps it ourselves: the child's own peak RSS
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - t0
        if p.returncode != 0:
            err.seek(0)
            sys.stderr.write(err.read().decode(errors="replace"))
            raise SystemExit(f"w4: {' '.join(argv)} exited with {p.returncode}")
    return json.loads(out), ru.ru_maxrss * 1024, wall


def first_line(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False).stdout \
            .splitlines()[0]
    except (OSError, IndexError):
        return None


def git(*a):
    try:
        return subprocess.run(["git", "-C", REPO, *a], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def pooled(runs):
    """Merges the per-process results of one implementation: pooled samples per case."""
    cases = {}
    for doc in runs:
        for r in doc["results"]:
            c = cases.setdefault((r["codec"], r["content"]), {
                "codec": r["codec"], "content": r["content"], "decoded_bytes": r["decoded_bytes"],
                "encoded_bytes": r["encoded_bytes"], "ratio": r["ratio"], "dec": [], "enc": [],
                "verified": True})
            c["dec"] += r["decode_us"]["samples_us"]
            c["enc"] += r["encode_us"]["samples_us"]
            c["verified"] = c["verified"] and r["verified"]
            if r["encoded_bytes"] != c["encoded_bytes"]:
                raise SystemExit(f"w4: {r['codec']}/{r['content']} is not deterministic")
    out = []
    for c in cases.values():
        dec, enc = c.pop("dec"), c.pop("enc")
        c["decode_us"] = {"min": min(dec), "median": statistics.median(dec), "max": max(dec),
                          "n": len(dec)}
        c["encode_us"] = {"min": min(enc), "median": statistics.median(enc), "max": max(enc),
                          "n": len(enc)}
        out.append(c)
    return out


def table(engine, peer):
    rows = ["| codec | content | shardmill decode µs (min / median) | numcodecs decode µs "
            "(min / median) | shardmill encode µs (median) | numcodecs encode µs (median) | "
            "ratio shardmill | ratio numcodecs |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    pk = {(r["codec"], r["content"]): r for r in peer}
    for e in engine:
        p = pk[(e["codec"], e["content"])]
        rows.append(
            f"| {e['codec']} | {e['content']} | {e['decode_us']['min']:.1f} / "
            f"{e['decode_us']['median']:.1f} | {p['decode_us']['min']:.1f} / "
            f"{p['decode_us']['median']:.1f} | {e['encode_us']['median']:.1f} | "
            f"{p['encode_us']['median']:.1f} | {e['ratio']:.2f} | {p['ratio']:.2f} |")
    return "\n".join(rows)


def open_new(out_dir, stamp):
    """Opens bench/results/w4-<stamp>.json exclusively (a suffix if that name is taken)."""
    os.makedirs(out_dir, exist_ok=True)
    for k in range(100):
        name = f"w4-{stamp}.json" if k == 0 else f"w4-{stamp}-{k}.json"
        path = os.path.join(out_dir, name)
        try:
            return path, open(path, "x", encoding="utf-8")
        except FileExistsError:
            continue
    raise SystemExit("w4: no free result file name")


def run_driver(args):
    engine = os.path.abspath(args.engine)
    if not os.access(engine, os.X_OK):
        raise SystemExit(f"w4: no engine benchmark at {engine} (build target bench_codecs)")
    reps = args.reps or (5 if args.quick else 200)
    warmup = 1 if args.quick else 10
    rounds = args.rounds or (1 if args.quick else 3)
    me = [sys.executable, os.path.abspath(__file__), "--peer"]
    idle = wait_idle(args.wait_idle)
    load_before = list(os.getloadavg())
    tmp = tempfile.mkdtemp(prefix="w4-")
    peer_tmp = tempfile.mkdtemp(prefix="w4-peer-")
    try:
        # Warm-up pair (discarded): page cache, CPU clocks, Python imports. Each side also dumps
        # its encoded blocks, and the engine decodes numcodecs' blocks (the peer decodes the
        # engine's in every round below): both implementations check each other's output.
        run_process(me + ["--reps", "1", "--warmup", "0", "--dump-dir", peer_tmp])
        run_process([engine, "--quick", "--dump", tmp, "--check", peer_tmp])
        eng_runs, peer_runs, procs = [], [], []
        for r in range(rounds):  # ABAB
            for impl, argv in (("shardmill", [engine, "--reps", str(reps), "--warmup",
                                              str(warmup)]),
                               ("numcodecs", me + ["--reps", str(reps), "--warmup", str(warmup),
                                                   "--check-dir", tmp])):
                doc, rss, wall = run_process(argv)
                (eng_runs if impl == "shardmill" else peer_runs).append(doc)
                procs.append({"round": r, "impl": impl, "argv": argv, "peak_rss_bytes": rss,
                              "wall_s": round(wall, 3)})
                log(f"w4: round {r} {impl}: {wall:.1f} s, peak RSS {rss >> 20} MiB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(peer_tmp, ignore_errors=True)
    engine_res, peer_res = pooled(eng_runs), pooled(peer_runs)
    import numcodecs
    import numpy
    now = datetime.datetime.now(datetime.timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    report = {
        "workload": "W4",
        "profile": "quick" if args.quick else "full",
        "command": [sys.executable] + sys.argv,
        "timestamp_utc": now.isoformat(),
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--", "engine", "bench")),
        "toolchain": {"cc": first_line(["cc", "--version"]),
                      "cmake_build_type": args.build_type,
                      "python": platform.python_version(), "numpy": numpy.__version__,
                      "numcodecs": numcodecs.__version__},
        "host": {"machine": platform.machine(), "kernel": platform.release(),
                 "cpus": os.cpu_count(), "cpu": cpu_model(),
                 "loadavg_before": load_before, "loadavg_after": list(os.getloadavg()),
                 "waited_for_idle": idle},
        "block": [SIDE] * 3, "dtype": "int32",
        "codecs": {"raw": "bytes (little)", "gzip": "level 6", "blosc":
                   "lz4, shuffle, clevel 5, typesize 4, blocksize 0, 1 thread", "zstd": "level 3"},
        "rounds": rounds, "reps_per_process": reps, "warmup_per_process": warmup,
        "order": "warm-up pair, then ABAB (shardmill, numcodecs) per round",
        "units": "microseconds per 64^3 int32 block (1 MiB decoded)",
        "results": {"shardmill": engine_res, "numcodecs": peer_res},
        "processes": procs,
        "verified": all(r["verified"] for r in engine_res + peer_res),
    }
    out_dir = args.out_dir or os.path.join(HERE, "results")
    path, f = open_new(out_dir, stamp)
    with f:
        json.dump(report, f, indent=1)
        f.write("\n")
    print(table(engine_res, peer_res))
    log(f"w4: wrote {path}")
    return 0 if report["verified"] else 1


def wait_idle(limit_s):
    """Waits up to limit_s seconds for the 1-minute load average to fall below half the CPUs
    (other benchmarks or builds on the machine skew timings). Returns what happened."""
    if limit_s <= 0:
        return None
    threshold = max(1, os.cpu_count() or 1) * 0.5
    t0 = time.monotonic()
    while os.getloadavg()[0] >= threshold and time.monotonic() - t0 < limit_s:
        time.sleep(2)
    load = os.getloadavg()[0]
    log(f"w4: load average {load:.2f} after {time.monotonic() - t0:.0f} s of waiting")
    return {"threshold": threshold, "reached": load < threshold,
            "waited_s": round(time.monotonic() - t0, 1)}


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", default="/work/build-codec-rel/bench/bench_codecs",
                    help="the bench_codecs executable (a Release build)")
    ap.add_argument("--quick", action="store_true", help="smoke profile: few repetitions")
    ap.add_argument("--reps", type=int, default=0, help="timed repetitions per process")
    ap.add_argument("--rounds", type=int, default=0, help="ABAB rounds")
    ap.add_argument("--out-dir", default=None, help="default: bench/results")
    ap.add_argument("--build-type", default="Release", help="recorded in the report")
    ap.add_argument("--wait-idle", type=float, default=0,
                    help="wait up to this many seconds for an idle machine before measuring")
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, default=10, help=argparse.SUPPRESS)
    ap.add_argument("--check-dir", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--dump-dir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.peer:
        args.reps = args.reps or 200
        return run_peer(args)
    return run_driver(args)


if __name__ == "__main__":
    sys.exit(main())
