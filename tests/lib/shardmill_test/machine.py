"""What the machine, the build and the load on the machine are, for every benchmark and scaling
result (SPEC §8): CPU, memory, kernel, the build's CMake cache and the binary's SHA-256, the git
commit, and the CPUs that other work keeps busy on this shared host (/proc/stat), with a wait for
a quiet machine. Shared by bench/ and scaling/ through `shardmill_test.machine`."""

import hashlib
import os
import platform
import subprocess
import time

import numpy as np

from shardmill_test import REPO
from shardmill_test.results import log


def run_text(argv, cwd=None, timeout=60):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (p.stdout or p.stderr).strip() if p.returncode == 0 else None


# ---- what the machine and the build are ----

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")),
                        None)
    except OSError:
        return None


def cmake_cache(shardmill):
    """The build directory of a shardmill binary (BUILD/jobs/shardmill) and its CMakeCache.txt
    entries, {} when there is none."""
    build_dir = os.path.dirname(os.path.dirname(os.path.abspath(shardmill)))
    cache = {}
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if "=" in line and not line.startswith(("#", "//")):
                    k, v = line.rstrip("\n").split("=", 1)
                    cache[k.split(":")[0]] = v
    except OSError:
        pass
    return build_dir, cache


def file_sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def zarrita_version():
    """The pinned zarrita.js of tests/interop/js, None when it is not installed."""
    import json
    try:
        with open(os.path.join(REPO, "tests", "interop", "js", "node_modules", "zarrita",
                               "package.json")) as f:
            return json.load(f)["version"]
    except OSError:
        return None


def machine():
    cpu = cpu_model()
    mem = None
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) * 1024
    osr = {}
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if "=" in line:
                    k, v = line.rstrip("\n").split("=", 1)
                    osr[k] = v.strip('"')
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)), "cpu": cpu,
            "mem_total_bytes": mem, "kernel": platform.release(), "host": platform.node(),
            "os": osr.get("PRETTY_NAME"), "loadavg": os.getloadavg()}


def fs_type(path):
    path = os.path.realpath(path)
    best, kind, dev = "", None, None
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            mnt = parts[1]
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                best, kind, dev = mnt, parts[2], parts[0]
    return {"mount": best, "type": kind, "device": dev}


def git_commit():
    git = ["git", "--no-optional-locks", "-C", REPO]
    return {"head": run_text(git + ["rev-parse", "HEAD"]),
            "branch": run_text(git + ["rev-parse", "--abbrev-ref", "HEAD"]),
            "dirty_tracked": bool(run_text(git + ["status", "--porcelain",
                                                  "--untracked-files=no"]))}


def toolchain(shardmill, mpirun="mpirun"):
    build_dir, cache = cmake_cache(shardmill)
    sha = file_sha256(shardmill)
    mpi = run_text([mpirun, "--version"])
    import zstandard
    return {
        "shardmill": {"path": os.path.abspath(shardmill), "sha256": sha,
                      "version": run_text([shardmill, "--version"]), "build_dir": build_dir,
                      "CMAKE_BUILD_TYPE": cache.get("CMAKE_BUILD_TYPE"),
                      "CMAKE_C_FLAGS": cache.get("CMAKE_C_FLAGS"),
                      "CMAKE_C_FLAGS_RELEASE": cache.get("CMAKE_C_FLAGS_RELEASE"),
                      "CMAKE_C_COMPILER": cache.get("CMAKE_C_COMPILER"),
                      "SM_WITH_OPENMP": cache.get("SM_WITH_OPENMP"),
                      "SM_WITH_MPI": cache.get("SM_WITH_MPI")},
        "commit": git_commit(),
        "cc": (run_text(["cc", "--version"]) or "").split("\n")[0],
        "cmake": (run_text(["cmake", "--version"]) or "").split("\n")[0],
        "mpi": (mpi or "").split("\n")[0],
        "libzstd": run_text(["pkg-config", "--modversion", "libzstd"]),
        "python": platform.python_version(), "numpy": np.__version__,
        "python_zstandard": zstandard.__version__,
        "omp_env": {k: os.environ.get(k) for k in ("OMP_PROC_BIND", "OMP_PLACES",
                                                   "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")},
    }


def check_release(tc):
    bt = tc["shardmill"]["CMAKE_BUILD_TYPE"]
    if bt != "Release":
        log(f"warning: {tc['shardmill']['path']} is a {bt!r} build; benchmarks need Release")
    return bt == "Release"


# ---- machine load (the noise) ----

def cpu_jiffies():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), v[3] + v[4]


def busy_cores(window_s=0.5):
    """Average number of busy CPUs over a short window (other work on this shared machine)."""
    t0, i0 = cpu_jiffies()
    time.sleep(window_s)
    t1, i1 = cpu_jiffies()
    return 0.0 if t1 <= t0 else round((1 - (i1 - i0) / (t1 - t0)) * os.cpu_count(), 2)


def wait_idle(limit_s, threshold=0.5, window_s=0.5):
    """Wait (up to limit_s) until other work uses fewer than `threshold` cores, sampled over
    windows of window_s; the samples (the last one is the load a case started under)."""
    samples = [busy_cores(window_s)]
    t_end = time.monotonic() + limit_s
    while samples[-1] >= threshold and time.monotonic() < t_end:
        samples.append(busy_cores(window_s))
    return samples


HZ = os.sysconf("SC_CLK_TCK")
