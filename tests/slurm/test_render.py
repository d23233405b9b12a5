"""slurm/render without a cluster (label `slurm`): the CLI other scripts call, its directives, its
pre-checks and its errors.

Usage: PYTHONPATH=$PWD/tests/lib /usr/bin/python3 test_render.py --shardmill BIN \
           --render slurm/render --work DIR

Checks: --help; every job type renders (scan, convert, ingest of a raw, TIFF, NIfTI and HDF5
source, read-bench; the convert/scan aliases and the scaling array) a script that `bash -n`
(and shellcheck, where installed) accepts, with the #SBATCH directives asked for (job-name,
nodes, ntasks, ntasks-per-node, cpus-per-task, mem or mem-per-cpu, time, partition, account,
qos, constraint, exclusive, requeue, signal=B:TERM@grace, open-mode=append, output/error),
the binary, the config and every relative path of the configuration made absolute, and
output.exists=auto for convert and ingest (resume, with a note, while this shardmill has no
auto); -o creates its directory; the pre-checks refuse, with exit 2 and one `render: error:`
line and nothing written: a missing input store, an ROI outside the input (the broken config
that stands in for the issue's "float input without a histogram range", valid since a min/max
pass finds the range), an input.spacing of the wrong length, a source whose header does not
read, an output whose parent is not a directory; and every invalid option. The estimate check
is tested on plan JSON documents fed to render's functions (a plan without `estimate`: a note;
one over the time limit or the memory: a warning, exit 2 with --strict); every scan, convert and
ingest rendered (each source, a Zarr array, and the repository's configs/ingest-ct.yaml and
configs/scan-mri.yaml on the real data when present) carries plan's estimate in its script and
no note (issue 34 item 3), read-bench a note that plan does not plan it. Prints one ok/FAIL
line per check and `N passed, M failed`; exit 1 on any failure.
"""

import argparse
import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from importlib.machinery import SourceFileLoader

from shardmill_test import REPO
from shardmill_test.checks import check, summary


def render(args, env=None):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith(("SLURM_", "SHARDMILL_")):
            del e[k]
    if env:
        e.update(env)
    return subprocess.run([sys.executable, ARGS.render] + args, capture_output=True, text=True,
                          timeout=120, cwd=WORK, env=e)


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


def write(name, text):
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def exists_mode(p):
    """output.exists the script runs with (auto by default for convert and ingest)."""
    return "auto" if "--set output.exists=auto" in p.stdout else None


# ---- fixtures: inputs whose metadata or header is all plan reads ------------------------------

def make_inputs():
    """A Zarr v2 uint8 [40, 70, 90] array (metadata only: every chunk is the fill value), a raw
    int16 file, a TIFF (tifffile), a NIfTI-1 and (with h5py) an HDF5
    file, and files that are none."""
    z = os.path.join(WORK, "in.zarr")
    os.makedirs(z)
    with open(os.path.join(z, ".zarray"), "w") as f:
        json.dump({"zarr_format": 2, "shape": [40, 70, 90], "chunks": [16, 16, 16],
                   "dtype": "|u1", "compressor": None, "fill_value": 0, "order": "C",
                   "filters": None}, f)
    with open(os.path.join(WORK, "vol.raw"), "wb") as f:
        f.write(bytes(4 * 8 * 8 * 2))
    # a real TIFF, so that plan opens it (issue 34 item 3; render's pre-check is plan's open)
    import numpy as np
    import tifffile
    tifffile.imwrite(os.path.join(WORK, "vol.tif"), np.zeros((4, 8, 8), dtype=np.uint8),
                     photometric="minisblack")
    hdr = bytearray(352)
    struct.pack_into("<i", hdr, 0, 348)
    struct.pack_into("<8h", hdr, 40, 3, 8, 8, 4, 1, 1, 1, 1)
    struct.pack_into("<h", hdr, 70, 2)  # uint8
    struct.pack_into("<h", hdr, 72, 8)
    struct.pack_into("<4f", hdr, 76, 1.0, 1.0, 1.0, 1.0)  # pixdim: 1 mm voxels
    struct.pack_into("<f", hdr, 108, 352.0)
    hdr[344:348] = b"n+1\0"
    with open(os.path.join(WORK, "vol.nii"), "wb") as f:
        f.write(bytes(hdr) + bytes(8 * 8 * 4))
    with open(os.path.join(WORK, "fake.tif"), "wb") as f:
        f.write(b"not a tiff at all")
    os.makedirs(os.path.join(WORK, "fakepng"), exist_ok=True)
    with open(os.path.join(WORK, "fakepng", "s1.png"), "wb") as f:
        f.write(b"not a png at all")
    with open(os.path.join(WORK, "fake.h5"), "wb") as f:
        f.write(bytes(2048))
    try:
        import h5py
        import numpy as np
        with h5py.File(os.path.join(WORK, "vol.h5"), "w") as h:
            h.create_dataset("data", data=np.zeros((4, 8, 8), dtype=np.uint16))
        return True
    except ImportError:
        return False


def load_render_module():
    loader = SourceFileLoader("shardmill_render", ARGS.render)
    spec = importlib.util.spec_from_loader("shardmill_render", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def estimate_checks():
    """render's estimate check on plan JSON documents of the shape `shardmill plan --json`
    gains with issue 22: {"estimate": {seconds, peak_rss_bytes_per_rank, output_bytes, files}}."""
    r = load_render_module()
    gib = 1 << 30
    plan = {"job": "convert", "ranks": 4,
            "estimate": {"seconds": 600, "peak_rss_bytes_per_rank": 3 * gib,
                         "output_bytes": 5 * gib, "files": 1024}}
    summary, warns, note = r.estimate_problems({"job": "convert"}, 4, 3600, 4 * gib)
    check(summary is None and warns == [] and "no estimate" in (note or ""),
          f"estimate: a plan without `estimate` is a note, no check ({note})")
    summary, warns, note = r.estimate_problems(plan, 4, 3600, 4 * gib)
    check(warns == [] and note is None and "600 s" in summary and "1024 files" in summary,
          f"estimate: 600 s and 3 GiB per rank fit 1 h and 4 GiB ({summary})")
    summary, warns, note = r.estimate_problems(plan, 4, 300, 4 * gib)
    check(len(warns) == 1 and "time limit" in warns[0],
          f"estimate: 600 s over a 300 s limit is one warning ({warns})")
    summary, warns, note = r.estimate_problems(plan, 4, 3600, 2 * gib)
    check(len(warns) == 1 and "peak RSS" in warns[0],
          f"estimate: 3 GiB over 2 GiB per rank is one warning ({warns})")
    summary, warns, note = r.estimate_problems(plan, 4, 3600, None)
    check(warns == [], "estimate: no --mem, no memory check")
    bad = {"estimate": {"seconds": "soon"}}
    summary, warns, note = r.estimate_problems(bad, 4, 3600, None)
    check(summary is None and warns == [] and "not as expected" in (note or ""),
          f"estimate: a malformed estimate is a note ({note})")

    ap = r.build_parser()
    a = ap.parse_args(["run", "--config", "x.yaml", "--mem", "8G", "--ntasks-per-node", "4"])
    check(r.mem_per_rank(a, 8, 2) == 2 * gib, "memory per rank: --mem 8G / 4 tasks per node")
    a = ap.parse_args(["run", "--config", "x.yaml", "--mem", "8G"])
    check(r.mem_per_rank(a, 8, 2) == 2 * gib, "memory per rank: --mem 8G, 8 tasks on 2 nodes")
    a = ap.parse_args(["run", "--config", "x.yaml", "--mem-per-cpu", "1500M", "--cpus-per-task",
                       "3"])
    check(r.mem_per_rank(a, 8, 2) == 4500 << 20, "memory per rank: --mem-per-cpu 1500M x 3 CPUs")
    a = ap.parse_args(["run", "--config", "x.yaml", "--mem", "0"])
    check(r.mem_per_rank(a, 8, 2) is None, "memory per rank: --mem 0 (all of it) is not checked")

    a = ap.parse_args(["run", "--config", "x.yaml", "--mem", "4G", "--ntasks", "4",
                       "--time", "00:05:00"])
    lines = r.check_estimates(a, [(4, plan, None)], "convert", 4, 1, 300)
    check(len(lines) == 1 and lines[0].startswith("plan estimate, 4 ranks"),
          "estimate: a warning only without --strict, the estimate goes into the script")
    a.strict = True
    try:
        r.check_estimates(a, [(4, plan, None)], "convert", 4, 1, 300)
        ok, msg = False, "no error"
    except r.UsageError as e:
        ok, msg = "--strict" in str(e) and "time limit" in str(e), str(e)
    check(ok, f"estimate: --strict makes the warning an error ({msg})")
    lines = r.check_estimates(a, [(4, {"job": "convert"}, None)], "convert", 4, 1, 300)
    check(lines == [], "estimate: --strict with a plan without estimate: no error (a note)")


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
    have_h5 = make_inputs()
    conv = write("convert.yaml", "job: convert\ninput: {store: in.zarr}\noutput: {path: out.zarr}\n"
                 "report: rep/convert.json\n")
    write("scan.yaml", "job: scan\ninput: {store: in.zarr}\n")

    p = render(["--help"])
    check(p.returncode == 0 and "TEMPLATE" in p.stdout and "--array" in p.stdout
          and "--ntasks-per-node" in p.stdout and "--mem-per-cpu" in p.stdout
          and "--grace" in p.stdout and "requeue" in p.stdout,
          "--help: exit 0, names TEMPLATE, the options and the requeue")

    # convert, every option given
    p = render(["convert", "--config", "convert.yaml", "--nodes", "2", "--ntasks", "8",
                "--ntasks-per-node", "4", "--cpus-per-task", "3", "--mem", "8g", "--time",
                "01:02:03", "--partition", "batch", "--account", "proj-1", "--qos", "high",
                "--constraint", "skylake&ib", "--exclusive", "--grace", "300", "--job-name",
                "ct-conv", "--output-dir", "logs", "--shardmill", sm, "--set",
                "tile=[8, 32, 32]", "--set", "output.fsync=false"])
    check(p.returncode == 0, "convert with every option: exit 0"
          + ("" if p.returncode == 0 else f" ({p.stderr.strip()})"))
    d = directives(p.stdout)
    logs = os.path.join(WORK, "logs")
    want = ["--job-name=ct-conv", "--nodes=2", "--ntasks=8", "--ntasks-per-node=4",
            "--cpus-per-task=3", "--mem=8G", "--time=01:02:03", "--partition=batch",
            "--account=proj-1", "--qos=high", "--constraint=skylake&ib", "--exclusive",
            "--requeue", "--signal=B:TERM@300", "--open-mode=append",
            f"--output={logs}/%x-%j.out", f"--error={logs}/%x-%j.err"]
    check(d == want, f"convert: #SBATCH directives {d} == {want}")
    s = p.stdout
    check(f"config={conv}" in s and f"shardmill={sm}" in s,
          "convert: config and binary as absolute paths")
    mode = exists_mode(p)
    check(mode == "auto", f"convert: output.exists=auto rendered ({mode})")
    check(f"--set 'tile=[8, 32, 32]' --set output.fsync=false --set "
          f"'input.store=\"{WORK}/in.zarr\"' --set 'output.path=\"{WORK}/out.zarr\"' --set "
          f"'report=\"{WORK}/rep/convert.json\"'" in s,
          "convert: --set overrides passed on, then input.store, output.path and report "
          "made absolute")
    check(f"output_path={WORK}/out.zarr" in s, "convert: output path for shardmill verify")
    check('export OMP_NUM_THREADS="${SLURM_CPUS_PER_TASK:-1}"' in s
          and 'OMP_PLACES="${OMP_PLACES:-cores}"' in s
          and 'OMP_PROC_BIND="${OMP_PROC_BIND:-close}"' in s,
          "convert: OMP_NUM_THREADS from SLURM_CPUS_PER_TASK, OMP_PLACES, OMP_PROC_BIND")
    check(re.search(r'^run_step srun --mpi="\$srun_mpi" --ntasks="\$SLURM_NTASKS" '
                    r'--cpus-per-task="\$OMP_NUM_THREADS" \\$', s, re.M) is not None
          and 'cpu_bind="${SHARDMILL_CPU_BIND:-cores}"' in s
          and 'srun_mpi="${SHARDMILL_SRUN_MPI:-pmix}"' in s,
          "convert: srun with --mpi=pmix, --cpus-per-task, --cpu-bind=cores (overridable)")
    check("trap on_term TERM" in s and 'scontrol requeue "$SLURM_JOB_ID"' in s
          and 'scancel --quiet --signal=TERM "$SLURM_JOB_ID"' in s
          and "SLURM_RESTART_COUNT" in s and "max_restarts=10" in s,
          "convert: SIGTERM trapped and forwarded, scontrol requeue, SLURM_RESTART_COUNT logged")
    check(os.path.isdir(logs), "convert: the output directory was created")
    bash_ok(s, "convert")

    # defaults
    p = render(["convert", "--config", "convert.yaml", "--shardmill", sm])
    d = directives(p.stdout)
    out = os.path.join(WORK, "slurm-out")
    want = ["--job-name=shardmill-convert", "--nodes=1", "--ntasks=1", "--cpus-per-task=1",
            "--time=00:30:00", "--requeue", "--signal=B:TERM@120", "--open-mode=append",
            f"--output={out}/%x-%j.out", f"--error={out}/%x-%j.err"]
    check(p.returncode == 0 and d == want, f"convert defaults: {d} == {want}")
    p = render(["convert", "--config", "convert.yaml", "--shardmill", sm, "--nodes", "3",
                "--ntasks-per-node", "2", "--mem-per-cpu", "1500", "--max-restarts", "0"])
    check(p.returncode == 0 and "--ntasks=6" in directives(p.stdout)
          and "--mem-per-cpu=1500" in directives(p.stdout) and "max_restarts=0" in p.stdout,
          "convert: --nodes 3 --ntasks-per-node 2 gives --ntasks=6; --mem-per-cpu; "
          "--max-restarts 0")
    p = render(["convert", "--config", "convert.yaml", "--shardmill", sm],
               env={"SHARDMILL_SRUN_MPI": "pmi2"})
    check(p.returncode == 0 and 'srun_mpi="${SHARDMILL_SRUN_MPI:-pmi2}"' in p.stdout,
          "SHARDMILL_SRUN_MPI at render time changes the default plugin")
    p = render(["convert", "--config", "convert.yaml", "--shardmill", sm, "--set",
                "output.exists=error"])
    check(p.returncode == 0 and "--set output.exists=error" in p.stdout
          and "output.exists=auto" not in p.stdout and "output.exists=resume" not in p.stdout,
          "convert: a --set output.exists of the user wins over auto")

    # every job type through the generic run template (and the aliases)
    cases = [
        ("scan", "run", "job: scan\ninput: {store: in.zarr}\n", None),
        ("convert", "run", "job: convert\ninput: {store: in.zarr}\noutput: {path: o/c.zarr}\n",
         "o/c.zarr"),
        ("ingest raw", "run", "job: ingest\ninput: {store: vol.raw, format: raw, raw: {dtype: "
         "int16, shape: [4, 8, 8]}}\noutput: {path: o/raw.zarr}\n", "o/raw.zarr"),
        ("ingest tiff", "run", "job: ingest\ninput: {store: vol.tif}\noutput: {path: o/t.zarr}\n",
         "o/t.zarr"),
        ("ingest nifti", "run", "job: ingest\ninput: {store: vol.nii}\noutput: {path: "
         "o/n.zarr}\n", "o/n.zarr"),
        ("convert of a tiff", "run", "job: convert\ninput: {store: vol.tif}\nnormalize: {mode: "
         "scale, divisor: 255}\noutput: {path: o/ct.zarr}\n", "o/ct.zarr"),
        ("ingest of a zarr", "run", "job: ingest\ninput: {store: in.zarr, format: zarr}\n"
         "output: {path: "
         "o/z.zarr}\n", "o/z.zarr"),
        ("read-bench", "run", "job: read-bench\ninput: {store: in.zarr}\n", None),
        ("scan (alias)", "scan", "job: scan\ninput: {store: in.zarr}\n", None),
    ]
    if have_h5:
        cases.append(("ingest hdf5", "run", "job: ingest\ninput: {store: vol.h5, hdf5: "
                      "{dataset: /data}}\noutput: {path: o/h.zarr}\n", "o/h.zarr"))
    else:
        print("note: h5py is not installed: the HDF5 ingest is rendered without its dataset check")
    for i, (name, tmpl, text, outp) in enumerate(cases):
        cfg = write(f"job{i}.yaml", text)
        p = render([tmpl, "--config", cfg, "--shardmill", sm, "--ntasks", "2", "--job-name",
                    f"j{i}"])
        if not check(p.returncode == 0, f"render {tmpl} of a {name} job: exit 0"
                     + ("" if p.returncode == 0 else f" ({p.stderr.strip()})")):
            continue
        s = p.stdout
        store = re.search(r"job: [\w-]+\ninput: \{store: ([^,}]+)", text).group(1)
        job = text.split()[1]
        check(f"job={job}" in s and f"'input.store=\"{WORK}/{store}\"'" in s
              and "--ntasks=2" in directives(s),
              f"{name}: job {job}, input.store absolute")
        if outp:
            check(f"output_path={WORK}/{outp}" in s and f"'output.path=\"{WORK}/{outp}\"'" in s
                  and exists_mode(p) is not None,
                  f"{name}: output.path absolute, verified after the run, output.exists auto")
        else:
            check("output_path=''" in s and "--set output.exists" not in s,
                  f"{name}: no output, no verify, no output.exists")
        if job == "read-bench":
            check('if [[ "$job" != read-bench ]]' in s, f"{name}: no parallel.threads")
        bash_ok(s, name)
        if job in ("scan", "convert", "ingest"):  # plan plans every job (issue 34 item 3)
            check("# plan estimate, 2 ranks: " in s and "not checked" not in p.stderr,
                  f"{name}: plan's estimate checked against time and memory, in the script"
                  + ("" if "not checked" not in p.stderr else f" ({p.stderr.strip()})"))
        else:
            check("# plan estimate" not in s and
                  f"shardmill plan does not plan {job} jobs" in p.stderr,
                  f"{name}: a note says why the estimate was not checked")

    # the repository's own ingest and scan configurations (issue 34 item 3: "plan on an ingest
    # config and on a scan config prints an estimate; render checks both"), on the real data
    for cfg, store, extra in (("ingest-ct.yaml", "data/ct/matrix.dat",
                               ["--set", f"output.path={WORK}/real/ct-v3.zarr"]),
                              ("scan-mri.yaml", "data/mri.zarr", [])):
        if not os.path.exists(os.path.join(REPO, store)):
            print(f"note: {store} is absent (scripts/fetch-data.sh): configs/{cfg} not rendered")
            continue
        p = render(["run", "--config", os.path.join(REPO, "configs", cfg), "--shardmill", sm,
                    "--ntasks", "2", "--time", "00:10:00", "--mem", "2G", "--set",
                    f"input.store={os.path.join(REPO, store)}", "--set",
                    f"report={WORK}/real/report.json"] + extra)
        check(p.returncode == 0 and "# plan estimate, 2 ranks: " in p.stdout
              and "not checked" not in p.stderr,
              f"configs/{cfg}: plan's estimate checked against --time and --mem, in the script"
              + ("" if p.returncode == 0 and "not checked" not in p.stderr
                 else f" ({p.stderr.strip()})"))

    # scaling
    p = render(["scaling", "--config", "convert.yaml", "--shardmill", sm, "--array", "1,2,4,8%2",
                "--ntasks-per-node", "4", "--cpus-per-task", "2", "--output-dir", "w5",
                "--mem", "4G", "--grace", "60"])
    d = directives(p.stdout)
    w5 = os.path.join(WORK, "w5")
    want = ["--job-name=shardmill-scaling", "--nodes=2", "--ntasks=8", "--ntasks-per-node=4",
            "--cpus-per-task=2", "--mem=4G", "--time=00:30:00", "--array=0-3%2", "--requeue",
            "--signal=B:TERM@60", "--open-mode=append",
            f"--output={w5}/%x-%A_%a.out", f"--error={w5}/%x-%A_%a.err"]
    check(p.returncode == 0 and d == want, f"scaling: #SBATCH directives {d} == {want}"
          + ("" if p.returncode == 0 else f" ({p.stderr.strip()})"))
    s = p.stdout
    check('"${SHARDMILL_RANKS:-1 2 4 8}"' in s and "ntasks_per_node=4" in s
          and 'output.path=$base.zarr' in s and 'report="$base.report.json"' in s
          and "trap on_term TERM" in s,
          "scaling: rank list, per-task report and output path, the requeue trap")
    bash_ok(s, "scaling")
    p = render(["scaling", "--config", "scan.yaml", "--shardmill", sm, "--array", "3,1"])
    check(p.returncode == 0 and "--ntasks=3" in directives(p.stdout) and "job=scan" in p.stdout,
          "scaling of a scan job: --ntasks defaults to the largest rank count")

    # -o: an executable script; its directory (and the output directory) created
    dst = os.path.join(WORK, "job.sbatch")
    p = render(["scan", "--config", "scan.yaml", "--shardmill", sm, "-o", dst])
    check(p.returncode == 0 and p.stdout == "" and os.access(dst, os.X_OK)
          and open(dst).read().startswith("#!/bin/bash\n"), "-o FILE: an executable script")
    p = render(["convert", "--config", "convert.yaml", "--shardmill", sm, "--output-dir",
                "runs/logs", "-o", "runs/deep/convert.sbatch"])
    check(p.returncode == 0 and os.access(os.path.join(WORK, "runs/deep/convert.sbatch"), os.X_OK)
          and os.path.isdir(os.path.join(WORK, "runs/logs")),
          "-o in a directory that does not exist: created, as is --output-dir"
          + ("" if p.returncode == 0 else f" ({p.stderr.strip()})"))

    # pre-checks: broken configurations that validate but cannot run
    write("missing.yaml", "job: convert\ninput: {store: missing.zarr}\noutput: {path: m.zarr}\n")
    write("roi.yaml", "job: convert\ninput: {store: in.zarr}\nroi: {offset: [0, 0, 0], shape: "
          "[64, 70, 90]}\noutput: {path: r.zarr}\n")
    write("spacing.yaml", "job: convert\ninput: {store: in.zarr, spacing: [1.0, 0.5]}\n"
          "output: {path: s.zarr}\n")
    write("origin.yaml", "job: ingest\ninput: {store: in.zarr, format: zarr, origin: [0, 0, 0, "
          "0]}\n"
          "output: {path: s.zarr}\n")
    write("rawmissing.yaml", "job: ingest\ninput: {store: nope.raw, format: raw, raw: {dtype: "
          "uint8, shape: [4, 8, 8]}}\noutput: {path: x.zarr}\n")
    write("rawshort.yaml", "job: ingest\ninput: {store: vol.raw, format: raw, raw: {dtype: "
          "int16, shape: [5, 8, 8]}}\noutput: {path: x.zarr}\n")
    write("faketiff.yaml", "job: ingest\ninput: {store: fake.tif}\noutput: {path: x.zarr}\n")
    write("fakepng.yaml", "job: ingest\ninput: {store: fakepng, format: png}\n"
          "output: {path: x.zarr}\n")
    write("fakeh5.yaml", "job: ingest\ninput: {store: fake.h5, hdf5: {dataset: /d}}\n"
          "output: {path: x.zarr}\n")
    write("rbmissing.yaml", "job: read-bench\ninput: {store: gone.zarr}\n")
    write("parentfile.yaml", f"job: convert\ninput: {{store: in.zarr}}\noutput: {{path: "
          f"{WORK}/vol.raw/out.zarr}}\n")
    pre = [
        (["convert", "--config", "missing.yaml"], "the input does not open"),
        (["convert", "--config", "roi.yaml"], "leaves the array extent"),
        (["convert", "--config", "spacing.yaml"], "input.spacing has 2 values, the input has 3"),
        (["run", "--config", "origin.yaml"], "input.origin has 4 values, the input has 3"),
        (["run", "--config", "rawmissing.yaml"], "No such file or directory"),
        (["run", "--config", "rawshort.yaml"], "640 bytes of volume expected"),
        (["run", "--config", "faketiff.yaml"], "not a readable TIFF file"),
        (["run", "--config", "fakepng.yaml"], "not a readable PNG"),
        (["run", "--config", "fakeh5.yaml"], "not an HDF5 file"),
        (["run", "--config", "rbmissing.yaml"], "the input does not open"),
        (["convert", "--config", "parentfile.yaml"], "is not a directory"),
    ]

    os.symlink("in.zarr", os.path.join(WORK, "inlink"))
    shutil.copy(os.path.join(WORK, "scan.yaml"), os.path.join(WORK, "new\nline.yaml"))

    # errors: exit 2, one line, nothing written
    CV = ["convert", "--config", "convert.yaml", "--shardmill", sm]
    bad = [
        (["nope", "--config", "convert.yaml"], "invalid choice"),
        (["convert"], "--config"),
        (["convert", "--config", "absent.yaml", "--shardmill", sm], "no such file"),
        (["convert", "--config", "convert.yaml", "--shardmill", "/nonexistent/shardmill"],
         "no such file"),
        (CV + ["--ntasks", "0"], "positive integer"),
        (CV + ["--cpus-per-task", "x"], "positive integer"),
        (CV + ["--time", "1:60:00"], "HH:MM:SS"),
        (CV + ["--time", "90"], "HH:MM:SS"),
        (CV + ["--mem", "8GB"], "Slurm's syntax"),
        (CV + ["--mem", "8G", "--mem-per-cpu", "1G"], "not allowed with"),
        (CV + ["--account", "a b"], "--account"),
        (CV + ["--constraint", "a b"], "--constraint"),
        (CV + ["--grace", "-1"], "whole number"),
        (CV + ["--time", "00:02:00", "--grace", "120"], "not less than the time limit"),
        (CV + ["--job-name", "a b"], "--job-name"),
        (CV + ["--partition", "a;b"], "partition"),
        (CV + ["--output-dir", "a b"], "white space"),
        (CV + ["--set", "novalue"], "key.path=value"),
        (CV + ["--set", "nokey=1"], "unknown key"),
        (CV + ["--set", "tile=[0,0]"], "does not validate"),
        (["convert", "--config", "scan.yaml", "--shardmill", sm], "`scan` job"),
        (["scan", "--config", "convert.yaml", "--shardmill", sm], "`convert` job"),
        (CV + ["--array", "1,2"], "scaling template only"),
        (["scaling", "--config", "convert.yaml", "--shardmill", sm], "needs --array"),
        (["scaling", "--config", "convert.yaml", "--shardmill", sm, "--array", "1,0"],
         "at least 1"),
        (["scaling", "--config", "convert.yaml", "--shardmill", sm, "--array", "1-4"],
         "RANKS[,RANKS...]"),
        (["scaling", "--config", "convert.yaml", "--shardmill", sm, "--array", "1,8",
          "--ntasks", "4"], "largest rank count"),
        (CV + ["--nodes", "4", "--ntasks", "2"], "every node needs"),
        (CV + ["--nodes", "1", "--ntasks-per-node", "2", "--ntasks", "3"], "does not fit"),
        (CV + ["-o", "logs"], "is a directory"),
        # issue 32 item 7: logs inside (or as) the output or the input, the script over the
        # output: the output rule, up front (nothing created)
        (CV + ["--output-dir", "out.zarr/logs"],
         f"--output-dir {WORK}/out.zarr/logs lies inside the output {WORK}/out.zarr"),
        (CV + ["--output-dir", "out.zarr"], f"--output-dir {WORK}/out.zarr is the output"),
        (CV + ["--output-dir", "in.zarr/logs"], "lies inside the input"),
        (CV + ["--output-dir", "inlink/logs"], "lies inside the input"),
        (CV + ["-o", "out.zarr/x.sbatch"], f"-o {WORK}/out.zarr/x.sbatch lies inside the output"),
        (CV + ["-o", "convert.yaml"], "is the configuration (--config)"),
        # issue 32 item 16: a newline in --config, named as such
        (["run", "--config", "new\nline.yaml", "--shardmill", sm], "contains a newline"),
    ] + [(a + ["--shardmill", sm, "--output-dir", "pre", "-o", "pre/x.sbatch"], n)
         for a, n in pre]
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

    # --output-dir holding the output and the input (a scaling run makes its outputs there)
    p = render(["convert", "--config", "convert.yaml", "--shardmill", sm, "--output-dir", "."])
    check(p.returncode == 0, "--output-dir . (it holds the input and the output): exit 0"
          + ("" if p.returncode == 0 else f" ({p.stderr.strip()})"))
    userinfo_checks(sm)
    estimate_checks()
    return summary()


def userinfo_checks(sm):
    """Issue 32 item 16: the pre-check opens a userinfo URL with the configuration's own user
    and password (it used `<redacted>`, the effective configuration's text: HTTP 401)."""
    import base64
    import functools
    import http.server
    import threading
    seen = []
    want = "Basic " + base64.b64encode(b"alice:s3cret").decode()

    class Auth(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            if self.headers.get("Authorization") != want:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="ct"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            super().do_GET()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                          functools.partial(Auth, directory=WORK))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        url = f"http://alice:s3cret@127.0.0.1:{srv.server_address[1]}/in.zarr"
        write("userinfo.yaml", f"job: read-bench\ninput: {{store: {json.dumps(url)}}}\n")
        p = render(["run", "--config", "userinfo.yaml", "--shardmill", sm])
        check(p.returncode == 0 and seen and all(a == want for a in seen),
              "a userinfo URL: the pre-check opens it with the configuration's user and "
              f"password, exit 0 ({p.returncode}: {p.stderr.strip()[:200]}; auth {seen[:2]})")
    finally:
        srv.shutdown()
        srv.server_close()


ARGS = None
WORK = None
if __name__ == "__main__":
    sys.exit(main())
