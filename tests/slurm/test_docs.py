"""The slurm/render lines of README.md and docs/SLURM.md work as printed (label `slurm`, `docs`).

Usage: PYTHONPATH=$PWD/tests/lib /usr/bin/python3 test_docs.py --shardmill BIN \
           --root SOURCE_DIR --work DIR

Takes every command line (backslash continuations joined) of the ```sh blocks of README.md and
docs/SLURM.md that runs slurm/render, and runs it unchanged with `bash -c` in a fresh copy of
the repository's paths: slurm/ and configs/ copied, data/ct linked to the real CT of
scripts/fetch-data.sh, build/release/jobs/shardmill linked to the binary under test (where
render finds it in a fresh clone after scripts/main-job.sh). data/ct-v3.zarr is made as
main-job.sh makes it (`shardmill run configs/ingest-ct.yaml`). The one substitution: `sbatch`
is a stand-in on PATH (no cluster here) that takes the script from its file argument or from
standard input, checks it with `bash -n`, keeps it and prints `Submitted batch job N`. Checks:
each line exits 0, each script it wrote or piped is a shardmill batch script with its
#SBATCH --requeue and --signal lines, and each file named by -o exists and is executable.
Exit 77 (skipped) when the real CT is missing (scripts/fetch-data.sh not run).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

from shardmill_test.checks import check, summary

SBATCH = """#!/bin/bash
# stand-in for sbatch (test_docs.py): keeps the script, checks its syntax
set -eu
dir="$(dirname "$0")/../submitted"
mkdir -p "$dir"
n=$(($(ls "$dir" | wc -l) + 1))
if [[ $# -gt 0 ]]; then cp -- "${@: -1}" "$dir/$n.sbatch"; else cat >"$dir/$n.sbatch"; fi
bash -n "$dir/$n.sbatch"
echo "Submitted batch job $n"
"""


def render_lines(path):
    """Every command line, in order, of the file's ```sh blocks that run slurm/render (the
    `sbatch` lines after a render included)."""
    lines, block = [], None
    with open(path) as f:
        text = f.read()
    for raw in text.splitlines():
        if block is None:
            if re.match(r"^```(sh|bash|console)\s*$", raw):
                block = []
            continue
        if raw.startswith("```"):
            joined = "\n".join(block).replace("\\\n", " ")
            cmds = [re.sub(r"\s+", " ", re.sub(r"\s+#\s.*$", "", c)).strip()
                    for c in joined.splitlines()]  # without a trailing comment
            cmds = [c for c in cmds if c and not c.startswith("#")]
            if any(re.search(r"(^|\s)slurm/render\s", c) for c in cmds):
                lines += cmds
            block = None
            continue
        block.append(raw)
    return lines


def fresh_copy(root, work, shardmill):
    repo = os.path.join(work, "repo")
    for sub in ("slurm", "configs"):
        shutil.copytree(os.path.join(root, sub), os.path.join(repo, sub))
    os.makedirs(os.path.join(repo, "data"))
    os.symlink(os.path.join(root, "data", "ct"), os.path.join(repo, "data", "ct"))
    os.makedirs(os.path.join(repo, "build", "release", "jobs"))
    os.symlink(shardmill, os.path.join(repo, "build", "release", "jobs", "shardmill"))
    bindir = os.path.join(work, "bin")
    os.makedirs(bindir)
    with open(os.path.join(bindir, "sbatch"), "w") as f:
        f.write(SBATCH)
    os.chmod(os.path.join(bindir, "sbatch"), 0o755)
    return repo, bindir


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    root, work = os.path.abspath(a.root), os.path.abspath(a.work)
    if not os.path.isfile(os.path.join(root, "data", "ct", "matrix.dat")):
        print("skipped: data/ct/matrix.dat is missing (scripts/fetch-data.sh)")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    repo, bindir = fresh_copy(root, work, os.path.abspath(a.shardmill))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SHARDMILL_"))}
    # no other shardmill nor sbatch than these: render must find the checkout's binary
    env["PATH"] = bindir + ":" + ":".join(
        d for d in env.get("PATH", "/usr/bin:/bin").split(":")
        if d and not os.path.exists(os.path.join(d, "shardmill")))

    p = subprocess.run([os.path.join(repo, "build/release/jobs/shardmill"), "run",
                        "configs/ingest-ct.yaml", "-q"], cwd=repo, env=env, capture_output=True,
                       text=True, timeout=300)
    if not check(p.returncode == 0, "main-job.sh's ingest: data/ct-v3.zarr made "
                 f"({p.stderr.strip()[-200:]})"):
        return 1

    for doc, least in (("README.md", 3), (os.path.join("docs", "SLURM.md"), 3)):
        cmds = render_lines(os.path.join(root, doc))
        n = sum(1 for c in cmds if "slurm/render " in c)
        check(n >= least, f"{doc}: {n} slurm/render lines in ```sh blocks (at least {least})")
        for cmd in cmds:
            submitted = os.path.join(work, "submitted")
            before = len(os.listdir(submitted)) if os.path.isdir(submitted) else 0
            p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", cmd], cwd=repo, env=env,
                               capture_output=True, text=True, timeout=300)
            check(p.returncode == 0, f"{doc}: `{cmd}` exits 0"
                  + ("" if p.returncode == 0 else f" ({p.returncode}: {p.stderr.strip()})"))
            scripts = []
            m = re.search(r"\s-o\s+(\S+)", cmd)
            if m:
                dst = os.path.join(repo, m.group(1))
                check(os.path.isfile(dst) and os.access(dst, os.X_OK),
                      f"{doc}: -o {m.group(1)} written, executable")
                if os.path.isfile(dst):
                    scripts.append(dst)
            if re.search(r"(^|[|&;]\s*)sbatch(\s|$)", cmd):
                after = sorted(os.listdir(submitted), key=lambda n: int(n.split(".")[0])) \
                    if os.path.isdir(submitted) else []
                check(len(after) == before + 1, f"{doc}: the stand-in sbatch got one script")
                scripts += [os.path.join(submitted, n) for n in after[before:]]
            for s in scripts:
                text = open(s).read()
                check(text.startswith("#!/bin/bash\n") and "#SBATCH --requeue\n" in text
                      and "#SBATCH --signal=B:TERM@" in text and "shardmill-slurm:" in text,
                      f"{doc}: {os.path.relpath(s, work)} is a shardmill batch script with "
                      "--requeue and --signal")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
