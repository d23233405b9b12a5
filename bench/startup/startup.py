#!/usr/bin/python3
"""Start-up benchmark (issue 12): how long a fresh `shardmill` process takes to start and exit,
against a bare C program measured in the same run. Run with /usr/bin/python3.

Full profile (data/mri.zarr, 400 rounds; writes bench/results/startup-<commit>.json):

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/startup/startup.py --build-dir build/release

With --compare OTHER_SHARDMILL, a second binary (a build of an earlier commit) runs the same two
commands in the same rounds (cases version_compare, info_compare).

Smoke profile for CI (a small generated v2 array, 40 rounds, results into --out; a few seconds):

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/startup/startup.py --quick --build-dir BUILD --out DIR

Cases, each a fresh process started by bench/startup/startup_timer.c (posix_spawn + waitpid,
CLOCK_MONOTONIC; round-robin over the cases with a rotating first case, so machine noise spreads
over all of them): `shardmill --version`, `shardmill info ARRAY` and bench/startup/bare.c (prints
one line), and the reference case `libcurl`: bench/startup/curl_load.c, the bare program plus the
dlopen of libcurl.so.4 and curl_global_init that every http(s)/s3 run pays once (no target; left
out when libcurl is not installed). Recorded: median, p10 and p90 wall per case, each case's median
minus the bare program's, the median of the per-round differences, the median CPU time (user +
system, wait4: less disturbed by a busy machine than the wall), the load average, and the shared
libraries each case loads (LD_DEBUG=libs "calling init" lines). Target: --version and info within 2
ms of the bare program (median difference). Targets are printed and recorded, never change the exit
status; a failed process exits 1.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
TARGET_MS = 2.0


def run_text(argv):
    try:
        return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def make_array(path):
    """A small uint16 v2 array (zarr-python 2.13): 64^3 in 32^3 zstd chunks."""
    import numpy as np
    import zarr
    from numcodecs import Zstd

    z = zarr.open(path, mode="w", shape=(64, 64, 64), chunks=(32, 32, 32), dtype="<u2",
                  compressor=Zstd(level=1))
    z[:] = np.arange(64 ** 3, dtype=np.uint16).reshape(64, 64, 64)
    return path


def libraries(argv):
    """The shared objects the dynamic loader initialised for a process (LD_DEBUG=libs)."""
    env = dict(os.environ, LD_DEBUG="libs")
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"startup: {' '.join(argv)} failed (exit {p.returncode}): {p.stderr[-500:]}")
    libs = []
    for line in p.stderr.splitlines():
        if "calling init:" in line:
            libs.append(os.path.basename(line.split("calling init:")[1].strip()))
    return sorted(set(libs))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build", "release"))
    ap.add_argument("--shardmill", help="default BUILD/jobs/shardmill")
    ap.add_argument("--bare", help="default BUILD/bench/startup/startup_bare")
    ap.add_argument("--timer", help="default BUILD/bench/startup/startup_timer")
    ap.add_argument("--array", help="a local Zarr array for `info` (default data/mri.zarr; "
                    "--quick: a generated one)")
    ap.add_argument("--curl-load", help="default BUILD/bench/startup/startup_curl_load")
    ap.add_argument("--rounds", type=int, help="rounds of all cases (default 400, --quick 40)")
    ap.add_argument("--quick", action="store_true", help="the CI smoke profile")
    ap.add_argument("--compare", help="another shardmill binary (e.g. a build of an earlier "
                    "commit) measured in the same rounds: cases version_compare, info_compare")
    ap.add_argument("--compare-label", help="what --compare is (recorded), e.g. 'commit 973fbb4'")
    ap.add_argument("--out", help="results directory (default bench/results)")
    a = ap.parse_args(argv)
    load_before = round(os.getloadavg()[0], 2)
    b = a.build_dir
    shardmill = os.path.abspath(a.shardmill or os.path.join(b, "jobs", "shardmill"))
    bare = os.path.abspath(a.bare or os.path.join(b, "bench", "startup", "startup_bare"))
    curl_load = os.path.abspath(a.curl_load or os.path.join(b, "bench", "startup",
                                                            "startup_curl_load"))
    timer = os.path.abspath(a.timer or os.path.join(b, "bench", "startup", "startup_timer"))
    rounds = a.rounds or (40 if a.quick else 400)
    out_dir = a.out or os.path.join(REPO, "bench", "results")
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="startup-", dir=out_dir if a.quick else None) as tmp:
        array, generated = a.array, False
        if array is None:
            default = os.path.join(REPO, "data", "mri.zarr")
            generated = a.quick or not os.path.isdir(default)
            array = make_array(os.path.join(tmp, "small.zarr")) if generated else default
        array = os.path.abspath(array)
        cases = [
            ("bare", [bare]),
            ("version", [shardmill, "--version"]),
            ("info", [shardmill, "info", array]),
        ]
        if os.path.exists(curl_load) and \
                subprocess.run([curl_load], capture_output=True).returncode == 0:
            cases.append(("libcurl", [curl_load]))
        if a.compare:
            other = os.path.abspath(a.compare)
            cases += [("version_compare", [other, "--version"]),
                      ("info_compare", [other, "info", array])]
        libs = {name: libraries(cmd) for name, cmd in cases}
        # a warm-up round (page cache, the loader's caches), then the measured rounds
        timer_argv = [timer, "0", os.path.join(tmp, "child.out")]
        for _, cmd in cases:
            timer_argv += ["--"] + cmd
        for n in (5, rounds):
            timer_argv[1] = str(n)
            p = subprocess.run(timer_argv, capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit(f"startup: the timer failed: {p.stderr.strip()}")
        got = json.loads(p.stdout)
    ms = {name: [w / 1e6 for w in got["wall_ns"][i]] for i, (name, _) in enumerate(cases)}
    cpu = {name: [w / 1e6 for w in got["cpu_ns"][i]] for i, (name, _) in enumerate(cases)}
    cpu_base = statistics.median(cpu["bare"])
    base = statistics.median(ms["bare"])
    results = {}
    targets = {}
    for name, _ in cases:
        xs = ms[name]
        med = statistics.median(xs)
        row = {"median_ms": round(med, 4), "p10_ms": round(pct(xs, 0.1), 4),
               "p90_ms": round(pct(xs, 0.9), 4),
               "cpu_median_ms": round(statistics.median(cpu[name]), 4),
               "libraries": libs[name],
               "n_libraries": len(libs[name])}
        if name != "bare":
            row["minus_bare_ms"] = round(med - base, 4)
            row["paired_diff_median_ms"] = round(
                statistics.median(x - y for x, y in zip(xs, ms["bare"])), 4)
            row["ratio_to_bare"] = round(med / base, 3)
            row["cpu_minus_bare_ms"] = round(statistics.median(cpu[name]) - cpu_base, 4)
            if name in ("version", "info"):
                targets[f"{name}_within_{TARGET_MS:g}ms_of_bare"] = \
                    row["paired_diff_median_ms"] <= TARGET_MS
        results[name] = row
    commit = run_text(["git", "-C", REPO, "rev-parse", "HEAD"]) or "unknown"
    dirty = bool(run_text(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"]))
    doc = {
        "benchmark": "startup",
        "profile": "quick" if a.quick else "full",
        "commit": commit,
        "dirty": dirty,
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "rounds": rounds,
        "loadavg_1min_before_after": [load_before, round(os.getloadavg()[0], 2)],
        "array": "generated: 64^3 uint16 v2, 32^3 zstd chunks" if generated else
                 os.path.relpath(array, REPO) if array.startswith(REPO + os.sep) else array,
        "command": " ".join(["/usr/bin/python3", "bench/startup/startup.py"] + (argv or sys.argv[1:])),
        "compare": {"shardmill": a.compare, "label": a.compare_label,
                    "version": run_text([os.path.abspath(a.compare), "--version"])}
        if a.compare else None,
        "cases": results,
        "targets": targets,
    }
    name = f"startup-{commit[:12]}{'-quick' if a.quick else ''}.json"
    path = os.path.join(out_dir, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    for n, row in results.items():
        extra = "" if n == "bare" else \
            f"  bare+{row['paired_diff_median_ms']:.2f} ms (x{row['ratio_to_bare']})"
        print(f"{n:15s} median {row['median_ms']:7.3f} ms  p10 {row['p10_ms']:7.3f}  "
              f"p90 {row['p90_ms']:7.3f}  cpu {row['cpu_median_ms']:6.3f} ms  "
              f"{row['n_libraries']:2d} libraries{extra}")
    for t, ok in targets.items():
        print(f"target {t}: {'pass' if ok else 'FAIL'}")
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
