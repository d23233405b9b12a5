"""Every MPI launch of the test suite has an Open MPI session directory of its own (issue 32
item 20: under ctest -j2, mpi.exists_auto.unfinished failed once because mpiexec could not create
its session directory, "ompi.<host>.0: File exists", while another mpiexec was starting).

Usage: /usr/bin/python3 test_mpi_session.py --mpiexec MPIEXEC --build-dir BUILD
Checks:
  - mpi_env() gives each call a new, empty, private directory as TMPDIR, short enough for the
    Unix socket paths Open MPI puts there, removed when the test process exits;
  - mpiexec -np 2 under mpi_env(): each rank's session directory (OMPI_MCA_orte_top_session_dir,
    or the PMIx server's) lies inside that call's own directory, not in a shared /tmp;
  - six mpiexec started at once, each under its own mpi_env(): all exit 0;
  - `python3 -m shardmill_test.ranks CMD` runs CMD with such a directory and returns its status;
  - every ctest of BUILD (ctest --show-only=json-v1) whose command starts mpiexec or an MPI test
    program itself (not through a Python driver) goes through `-m shardmill_test.ranks`, and every
    Python file under tests/, bench/ and scaling/ that makes its own mpirun environment
    (OMPI_ALLOW_RUN_AS_ROOT) gives it a session directory (session_env()); the others take
    mpi_env() or launch().
Prints one ok/FAIL line per check and a closing count; exit 1 on any failure.
"""

import argparse
import json
import os
import subprocess
import sys

from shardmill_test import REPO
from shardmill_test.checks import check, summary
from shardmill_test.ranks import mpi_env

PROBE = ("echo RANK=$OMPI_COMM_WORLD_RANK TMPDIR=$TMPDIR "
         "TOP=${OMPI_MCA_orte_top_session_dir:-$PMIX_SERVER_TMPDIR}")


def probe(mpiexec, np_):
    env = mpi_env()
    cmd = [mpiexec, "--oversubscribe", "-np", str(np_), "sh", "-c", PROBE]
    return env.get("TMPDIR", "/tmp"), subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                           stderr=subprocess.PIPE, text=True)


def parse(out):
    rows = []
    for ln in out.splitlines():
        if ln.startswith("RANK="):
            rows.append(dict(kv.split("=", 1) for kv in ln.split()))
    return rows


def check_env():
    a, b = mpi_env().get("TMPDIR"), mpi_env().get("TMPDIR")
    if not check(a and b and a != b and os.path.isdir(a) and os.path.isdir(b) and
                 not os.listdir(a), "mpi_env(): a new, empty directory as TMPDIR per call",
                 (a, b)):
        return
    check(len(a) < 40 and os.stat(a).st_mode & 0o777 == 0o700,
          "mpi_env(): the directory is short (socket paths) and private (0700)", a)
    r = subprocess.run([sys.executable, "-c",
                        "from shardmill_test.ranks import mpi_env; print(mpi_env().get('TMPDIR'))"],
                       capture_output=True, text=True)
    d = r.stdout.strip()
    check(r.returncode == 0 and d and not os.path.exists(d),
          "mpi_env(): the directory is removed when the process exits", (d, r.stderr[-300:]))


def check_launches(mpiexec):
    tmp, p = probe(mpiexec, 2)
    out, err = p.communicate(timeout=120)
    rows = parse(out)
    check(p.returncode == 0 and len(rows) == 2, "mpiexec -np 2 under mpi_env() runs",
          f"exit {p.returncode}: {err[-500:]}")
    check(rows and all(r.get("TMPDIR") == tmp and r.get("TOP", "").startswith(tmp + "/")
                       for r in rows),
          "each rank's session directory lies in the launch's own directory", (tmp, rows))
    runs = [probe(mpiexec, 1) for _ in range(6)]
    res = []
    for tmp, p in runs:
        out, err = p.communicate(timeout=180)
        res.append((p.returncode, tmp, parse(out), err[-300:]))
    check(all(rc == 0 and rows and rows[0].get("TOP", "").startswith(tmp + "/")
              for rc, tmp, rows, _ in res),
          "six mpiexec started at once, each in its own session directory, all exit 0",
          [x for x in res if x[0] != 0][:2])
    r = subprocess.run([sys.executable, "-m", "shardmill_test.ranks", "sh", "-c",
                        'case "$TMPDIR" in /tmp/sm-ompi.*) test -d "$TMPDIR" && exit 7;; esac; '
                        'exit 1'], capture_output=True, text=True)
    check(r.returncode == 7, "python3 -m shardmill_test.ranks: a private TMPDIR, the "
          "command's exit status", f"exit {r.returncode}: {r.stderr[-300:]}")


def is_mpi_program(arg):
    base = os.path.basename(arg)
    return base in ("mpiexec", "mpirun", "orterun") or base.startswith(
        ("sm_test_par_comm", "sm_test_source_api"))


def check_ctests(build):
    r = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True,
                       text=True)
    if not check(r.returncode == 0, "ctest --show-only=json-v1", r.stderr[-300:]):
        return
    bad, wrapped = [], 0
    for t in json.loads(r.stdout).get("tests", []):
        cmd = t.get("command") or []
        if not cmd:
            continue
        direct = is_mpi_program(cmd[0])
        via = len(cmd) > 3 and cmd[1:3] == ["-m", "shardmill_test.ranks"]
        if via:
            wrapped += 1
        if direct:
            bad.append(t["name"])
    check(not bad and wrapped >= 1,
          f"every ctest that starts mpiexec or an MPI program itself goes through "
          f"shardmill_test.ranks ({wrapped} do)", bad)
    own = []
    for top in ("tests", "bench", "scaling"):
        for d, dirs, files in os.walk(os.path.join(REPO, top)):
            dirs[:] = [x for x in dirs if x not in ("node_modules", "__pycache__")]
            for f in files:
                p = os.path.join(d, f)
                if not f.endswith(".py") or p.endswith(("shardmill_test/ranks.py",
                                                        "test_mpi_session.py")):
                    continue
                text = open(p, encoding="utf-8").read()
                if "OMPI_ALLOW_RUN_AS_ROOT" in text and "session_env(" not in text:
                    own.append(os.path.relpath(p, REPO))
    check(not own, "every mpirun environment of tests/, bench/ and scaling/ has a session "
          "directory of its own (mpi_env() or session_env())", own)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--build-dir", required=True)
    a = ap.parse_args()
    check_env()
    check_launches(a.mpiexec)
    check_ctests(a.build_dir)
    return summary(name="mpi.session_dir")


if __name__ == "__main__":
    sys.exit(main())
