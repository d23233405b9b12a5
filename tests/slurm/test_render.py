"""slurm/render without a cluster (label `slurm`): the CLI other scripts call, its directives and
its errors.

Usage: /usr/bin/python3 test_render.py --shardmill BIN --render slurm/render --work DIR

Checks: --help; each template renders a script that `bash -n` accepts, with the #SBATCH
directives asked for (job-name, nodes, ntasks, ntasks-per-node, cpus-per-task, time, partition,
output/error %x-%j or %x-%A_%a, array), absolute paths, OMP_NUM_THREADS from
SLURM_CPUS_PER_TASK, --cpu-bind=cores, the srun MPI plugin; the defaults; -o writes an
executable file; and every invalid input is exit 2 with one `render: error:` line and nothing
written. Prints one ok/FAIL line per check and `N passed, M failed`; exit 1 on any failure.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

passed = 0
failed = 0


def check(ok, what):
    global passed, failed
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if ok:
        passed += 1
    else:
        failed += 1
    return ok


def render(args, env=None):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith(("SLURM_", "SHARDMILL_")):
            del e[k]
    if env:
        e.update(env)
    return subprocess.run([sys.executable, ARGS.render] + args, capture_output=True, text=True,
                          timeout=60, cwd=WORK, env=e)


def directives(text):
    return [ln[len("#SBATCH "):] for ln in text.splitlines() if ln.startswith("#SBATCH ")]


def shown(args):
    """The arguments without `--shardmill PATH`, for the check lines."""
    out, skip = [], False
    for a in args:
        if skip or a == "--shardmill":
            skip = not skip
            continue
        out.append(a)
    return " ".join(out)


def bash_ok(text, name):
    p = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    check(p.returncode == 0, f"{name}: bash -n accepts the script"
          + ("" if p.returncode == 0 else f" ({p.stderr.strip()})"))
    if shutil.which("shellcheck"):
        p = subprocess.run(["shellcheck", "-s", "bash", "-"], input=text, capture_output=True,
                           text=True)
        check(p.returncode == 0, f"{name}: shellcheck finds nothing"
              + ("" if p.returncode == 0 else f":\n{p.stdout.strip()}"))


def main():
    global ARGS, WORK
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--render", required=True)
    ap.add_argument("--work", required=True)
    ARGS = ap.parse_args()
    WORK = os.path.abspath(ARGS.work)
    ARGS.render = os.path.abspath(ARGS.render)
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    sm = os.path.abspath(ARGS.shardmill)
    conv = os.path.join(WORK, "convert.yaml")
    with open(conv, "w") as f:
        f.write("job: convert\ninput: {store: in.zarr}\noutput: {path: out.zarr}\n")
    scan = os.path.join(WORK, "scan.yaml")
    with open(scan, "w") as f:
        f.write("job: scan\ninput: {store: in.zarr}\n")

    p = render(["--help"])
    check(p.returncode == 0 and "TEMPLATE" in p.stdout and "--array" in p.stdout
          and "--ntasks-per-node" in p.stdout, "--help: exit 0, names TEMPLATE and the options")

    # convert, every option given
    p = render(["convert", "--config", "convert.yaml", "--nodes", "2", "--ntasks", "8",
                "--ntasks-per-node", "4", "--cpus-per-task", "3", "--time", "01:02:03",
                "--partition", "batch", "--job-name", "ct-conv", "--output-dir", "logs",
                "--shardmill", sm, "--set", "tile=[8, 32, 32]", "--set", "output.fsync=false"])
    check(p.returncode == 0, "convert with every option: exit 0"
          + ("" if p.returncode == 0 else f" ({p.stderr.strip()})"))
    d = directives(p.stdout)
    logs = os.path.join(WORK, "logs")
    want = ["--job-name=ct-conv", "--nodes=2", "--ntasks=8", "--ntasks-per-node=4",
            "--cpus-per-task=3", "--time=01:02:03", "--partition=batch",
            f"--output={logs}/%x-%j.out", f"--error={logs}/%x-%j.err"]
    check(d == want, f"convert: #SBATCH directives {d} == {want}")
    s = p.stdout
    check(f"config={conv}" in s and f"shardmill={sm}" in s,
          "convert: config and binary as absolute paths")
    check("--set 'tile=[8, 32, 32]' --set output.fsync=false" in s,
          "convert: --set overrides passed on, shell-quoted")
    check('export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"' in s
          and 'OMP_PLACES="${OMP_PLACES:-cores}"' in s
          and 'OMP_PROC_BIND="${OMP_PROC_BIND:-close}"' in s,
          "convert: OMP_NUM_THREADS from SLURM_CPUS_PER_TASK, OMP_PLACES, OMP_PROC_BIND")
    check(re.search(r'^srun --mpi="\$srun_mpi" --ntasks="\$SLURM_NTASKS" '
                    r'--cpus-per-task="\$OMP_NUM_THREADS" \\$', s, re.M) is not None
          and 'cpu_bind="${SHARDMILL_CPU_BIND:-cores}"' in s
          and 'srun_mpi="${SHARDMILL_SRUN_MPI:-pmix}"' in s,
          "convert: srun with --mpi=pmix, --cpus-per-task, --cpu-bind=cores (overridable)")
    check(f"output_path={WORK}/out.zarr" in s or "output_path=out.zarr" in s,
          "convert: output path of the effective configuration, for shardmill verify")
    check(os.path.isdir(logs), "convert: the output directory was created")
    bash_ok(s, "convert")

    # defaults
    p = render(["convert", "--config", "convert.yaml", "--shardmill", sm])
    d = directives(p.stdout)
    out = os.path.join(WORK, "slurm-out")
    want = ["--job-name=shardmill-convert", "--nodes=1", "--ntasks=1", "--cpus-per-task=1",
            "--time=00:30:00", f"--output={out}/%x-%j.out", f"--error={out}/%x-%j.err"]
    check(p.returncode == 0 and d == want, f"convert defaults: {d} == {want}")
    p = render(["convert", "--config", "convert.yaml", "--shardmill", sm, "--nodes", "3",
                "--ntasks-per-node", "2"])
    check(p.returncode == 0 and "--ntasks=6" in directives(p.stdout),
          "convert: --nodes 3 --ntasks-per-node 2 gives --ntasks=6")
    p = render(["convert", "--config", "convert.yaml", "--shardmill", sm],
               env={"SHARDMILL_SRUN_MPI": "pmi2"})
    check(p.returncode == 0 and 'srun_mpi="${SHARDMILL_SRUN_MPI:-pmi2}"' in p.stdout,
          "SHARDMILL_SRUN_MPI at render time changes the default plugin")

    # scan
    p = render(["scan", "--config", "scan.yaml", "--shardmill", sm, "--ntasks", "4"])
    check(p.returncode == 0 and "--ntasks=4" in directives(p.stdout)
          and "verify" not in p.stdout.split("set -euo pipefail", 1)[-1],
          "scan: renders, no verify step")
    bash_ok(p.stdout, "scan")

    # scaling
    p = render(["scaling", "--config", "convert.yaml", "--shardmill", sm, "--array", "1,2,4,8%2",
                "--ntasks-per-node", "4", "--cpus-per-task", "2", "--output-dir", "w5"])
    d = directives(p.stdout)
    w5 = os.path.join(WORK, "w5")
    want = ["--job-name=shardmill-scaling", "--nodes=2", "--ntasks=8", "--ntasks-per-node=4",
            "--cpus-per-task=2", "--time=00:30:00", "--array=0-3%2",
            f"--output={w5}/%x-%A_%a.out", f"--error={w5}/%x-%A_%a.err"]
    check(p.returncode == 0 and d == want, f"scaling: #SBATCH directives {d} == {want}")
    s = p.stdout
    check('"${SHARDMILL_RANKS:-1 2 4 8}"' in s and "ntasks_per_node=4" in s
          and 'output.path=$base.zarr' in s and 'report="$base.report.json"' in s,
          "scaling: rank list, per-task report and output path")
    bash_ok(s, "scaling")
    p = render(["scaling", "--config", "scan.yaml", "--shardmill", sm, "--array", "3,1"])
    check(p.returncode == 0 and "--ntasks=3" in directives(p.stdout) and "job=scan" in p.stdout,
          "scaling of a scan job: --ntasks defaults to the largest rank count")

    # -o
    dst = os.path.join(WORK, "job.sbatch")
    p = render(["scan", "--config", "scan.yaml", "--shardmill", sm, "-o", dst])
    check(p.returncode == 0 and p.stdout == "" and os.access(dst, os.X_OK)
          and open(dst).read().startswith("#!/bin/bash\n"), "-o FILE: an executable script")

    # errors: exit 2, one line, nothing written
    bad = [
        (["nope", "--config", "convert.yaml"], "invalid choice"),
        (["convert"], "--config"),
        (["convert", "--config", "missing.yaml", "--shardmill", sm], "no such file"),
        (["convert", "--config", "convert.yaml", "--shardmill", "/nonexistent/shardmill"],
         "no such file"),
        (["convert", "--config", "convert.yaml", "--shardmill", sm, "--ntasks", "0"],
         "positive integer"),
        (["convert", "--config", "convert.yaml", "--shardmill", sm, "--cpus-per-task", "x"],
         "positive integer"),
        (["convert", "--config", "convert.yaml", "--shardmill", sm, "--time", "1:60:00"],
         "HH:MM:SS"),
        (["convert", "--config", "convert.yaml", "--shardmill", sm, "--time", "90"], "HH:MM:SS"),
        (["convert", "--config", "convert.yaml", "--shardmill", sm, "--job-name", "a b"],
         "--job-name"),
        (["convert", "--config", "convert.yaml", "--shardmill", sm, "--partition", "a;b"],
         "partition"),
        (["convert", "--config", "convert.yaml", "--shardmill", sm, "--output-dir", "a b"],
         "white space"),
        (["convert", "--config", "convert.yaml", "--shardmill", sm, "--set", "novalue"],
         "key.path=value"),
        (["convert", "--config", "convert.yaml", "--shardmill", sm, "--set", "nokey=1"],
         "unknown key"),
        (["convert", "--config", "convert.yaml", "--shardmill", sm, "--set", "tile=[0,0]"],
         "does not validate"),
        (["convert", "--config", "scan.yaml", "--shardmill", sm], "`scan` job"),
        (["scan", "--config", "convert.yaml", "--shardmill", sm], "`convert` job"),
        (["convert", "--config", "convert.yaml", "--shardmill", sm, "--array", "1,2"],
         "scaling template only"),
        (["scaling", "--config", "convert.yaml", "--shardmill", sm], "needs --array"),
        (["scaling", "--config", "convert.yaml", "--shardmill", sm, "--array", "1,0"],
         "at least 1"),
        (["scaling", "--config", "convert.yaml", "--shardmill", sm, "--array", "1-4"],
         "RANKS[,RANKS...]"),
        (["scaling", "--config", "convert.yaml", "--shardmill", sm, "--array", "1,8",
          "--ntasks", "4"], "largest rank count"),
        (["convert", "--config", "convert.yaml", "--shardmill", sm, "--nodes", "4",
          "--ntasks", "2"], "every node needs"),
        (["convert", "--config", "convert.yaml", "--shardmill", sm, "--nodes", "1",
          "--ntasks-per-node", "2", "--ntasks", "3"], "does not fit"),
        (["convert", "--config", "convert.yaml", "--shardmill", sm, "-o", "nodir/x.sbatch"],
         "does not exist"),
        (["convert", "--config", "convert.yaml", "--shardmill", sm, "--output-dir", "e2",
          "-o", "nodir/x.sbatch"], "does not exist"),
    ]
    for args, needle in bad:
        before = set(os.listdir(WORK))
        p = render(args)
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("render: error:")]
        after = set(os.listdir(WORK))
        check(p.returncode == 2 and len(lines) == 1 and needle in lines[0] and p.stdout == ""
              and after == before,
              f"render {shown(args)}: exit 2, "
              f"'{needle}' ({p.returncode}: {lines[0] if lines else p.stderr.strip()})")
    p = render(["scaling", "--config", "convert.yaml", "--shardmill", sm, "--array", "1"],
               env={"SHARDMILL_SRUN_MPI": "pm ix"})
    check(p.returncode == 2 and "SHARDMILL_SRUN_MPI" in p.stderr,
          "SHARDMILL_SRUN_MPI with a bad plugin name: exit 2")

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


ARGS = None
WORK = None
if __name__ == "__main__":
    sys.exit(main())
