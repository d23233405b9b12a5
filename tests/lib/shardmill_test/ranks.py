"""Running shardmill as one plain process or as ranks under mpirun, and finding the ranks' pids
(tests/mpi, tests/signals, tests/hdf5, tests/slurm, the benchmarks). One place for the launcher
variables a plain run must not inherit (SPEC §1: a plain process must not start MPI) and for what
Open MPI needs here (root, oversubscription, LeakSanitizer's slow unwinder in ASan builds, and a
session directory of each launch's own).

Run as a program it is the launcher of the ctests that start mpiexec (or an MPI program) directly:
`python3 -m shardmill_test.ranks CMD ARGS...` runs CMD with a session directory of its own."""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile

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


_SESSION_DIRS = []


def _remove_session_dirs():
    for d in _SESSION_DIRS:
        shutil.rmtree(d, ignore_errors=True)


def session_tmpdir():
    """A new, empty directory of this process's own for Open MPI's session directory
    (ompi.<host>.<uid>/ and the PMIx rendezvous files under it), removed when the process exits.
    Two mpiexec starting at once under one TMPDIR race to create the shared
    `ompi.<host>.<uid>` (issue 32 item 20: "File exists" under ctest -j2); with a directory per
    launch no parallel test or other MPI job on the machine can collide. Short (under /tmp), for
    the 108-byte limit of the Unix socket paths Open MPI and PMIx put there."""
    base = "/tmp" if os.path.isdir("/tmp") else None
    d = tempfile.mkdtemp(prefix="sm-ompi.", dir=base)
    if not _SESSION_DIRS:
        atexit.register(_remove_session_dirs)
    _SESSION_DIRS.append(d)
    return d


def session_env(env, tmpdir=None):
    """env with TMPDIR at tmpdir (default: a new session_tmpdir()): Open MPI puts its session
    directory there (orte_tmpdir_base, PMIx's server and system tmpdir follow TMPDIR unless set
    themselves), so a caller can still move it (tests/cluster sets TMPDIR per simulated host)."""
    env["TMPDIR"] = tmpdir or session_tmpdir()
    return env


def mpi_env(base=None):
    """base (default os.environ) plus what mpirun needs here: root allowed, oversubscription,
    one OpenMP thread per rank unless a test sets parallel.threads, and a session directory of
    this call's own (session_env: call mpi_env once per mpiexec)."""
    env = dict(os.environ if base is None else base)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMP_NUM_THREADS": "1"})
    return sanitizer_env(session_env(env))


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


def main(argv):
    """CMD ARGS... with a session directory of its own (session_env; the rest of the environment
    as given: the ctests that start mpiexec or an MPI program directly, tests/mpi/CMakeLists.txt,
    set Open MPI's root variables themselves); the command's exit status, 128 + N when signal N
    ended it."""
    if not argv:
        print("usage: python3 -m shardmill_test.ranks CMD [ARGS...]", file=sys.stderr)
        return 2
    rc = subprocess.call(argv, env=session_env(dict(os.environ)))
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
