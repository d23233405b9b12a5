"""Running shardmill as one plain process or as ranks under mpirun, and finding the ranks' pids
(tests/mpi, tests/signals, tests/hdf5, tests/slurm, the benchmarks). One place for the launcher
variables a plain run must not inherit (SPEC §1: a plain process must not start MPI) and for what
Open MPI needs here (root, oversubscription, and LeakSanitizer's slow unwinder in ASan builds)."""

import os
import subprocess

LAUNCHER_PREFIXES = ("OMPI_", "PMIX_", "PMI_", "SLURM_")


def plain_env(base=None):
    """A copy of base (default os.environ) without any launcher variable."""
    return {k: v for k, v in (os.environ if base is None else base).items()
            if not k.startswith(LAUNCHER_PREFIXES)}


def sanitizer_env(env):
    """ASan builds: Open MPI has no frame pointers, so LeakSanitizer's fast unwinder cuts its
    allocation stacks before the libmpi/libopen-pal/libpmix frames that
    tests/sanitizers/lsan.supp names; the slow unwinder keeps them. Idempotent."""
    if env.get("LSAN_OPTIONS") and "fast_unwind_on_malloc" not in env["LSAN_OPTIONS"]:
        env["LSAN_OPTIONS"] += ":fast_unwind_on_malloc=0"
    return env


def mpi_env(base=None):
    """base (default os.environ) plus what mpirun needs here: root allowed, oversubscription,
    one OpenMP thread per rank unless a test sets parallel.threads."""
    env = dict(os.environ if base is None else base)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMP_NUM_THREADS": "1"})
    return sanitizer_env(env)


def launch(shardmill, mpiexec, args, ranks, cwd, timeout=120):
    """shardmill ARGS in cwd: ranks 0 a plain process (no launcher variable), else mpiexec -np
    ranks. The CompletedProcess (text output captured), or None when it outlived timeout."""
    if ranks == 0:
        cmd, env = [shardmill] + args, plain_env()
    else:
        cmd = [mpiexec, "--oversubscribe", "-np", str(ranks), shardmill] + args
        env = mpi_env()
    try:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def rank_pids(mpirun_pid):
    """pid of every rank mpirun started, by OMPI_COMM_WORLD_RANK in its environment."""
    pids = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if ppid != mpirun_pid:
            continue
        for kv in env:
            if kv.startswith(b"OMPI_COMM_WORLD_RANK="):
                pids[int(kv.split(b"=", 1)[1])] = int(pid)
    return pids
