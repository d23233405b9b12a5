"""The JSON report's path is checked before any work (issue 19): `shardmill run --report PATH` and
the config's `report` (also through `--set`, and in `shardmill validate`) whose directory does not
exist, is not writable (root: a read-only tmpfs; otherwise a mode-555 directory) or that is a
directory fail with exit 2 and one error line naming the key and the path, and the run neither
reads its input nor creates its output (it used to run the whole ingest, then fail with exit 4).
A writable path succeeds and holds the report, also in a directory the run creates (an ancestor
of output.path, as written). The output rule (issue 32 item 3): a report that is the input, or
lies inside the output (its zarr.json, marker, a shard, a new file), directly or through a
symlink, is refused with exit 2 naming `report` or `--report`, by validate and run, and nothing
is written; so is a scan's or read-bench's report over its input's zarr.json (main rewrote it).

Usage: /usr/bin/python3 report_paths.py --shardmill BIN --work DIR
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from shardmill_test.checks import Checks

C = Checks("bad_input.report_paths")
check = C.check


def run(cmd, cwd):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    return r, [x for x in r.stderr.splitlines() if x.strip()]


def read_only_dir(work):
    """A directory no file can be created in, and how to undo it (None: cannot make one)."""
    ro = os.path.join(work, "ro")
    os.makedirs(ro, exist_ok=True)
    if os.geteuid() == 0:  # root writes through mode bits: a read-only file system instead
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", ro],
                           capture_output=True)
        if r.returncode != 0:
            return ro, None

        def undo():
            for _ in range(50):
                if not os.path.ismount(ro) or subprocess.run(
                        ["umount", ro], capture_output=True).returncode == 0:
                    return
                time.sleep(0.1)
            subprocess.run(["umount", "-l", ro], capture_output=True)
        return ro, undo
    os.chmod(ro, 0o555)
    return ro, lambda: os.chmod(ro, 0o755)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    sm = os.path.abspath(args.shardmill)
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "a_dir"))
    with open(os.path.join(work, "v.raw"), "wb") as f:
        f.write(bytes(range(24)))
    cfg = os.path.join(work, "ingest.yaml")
    with open(cfg, "w") as f:
        f.write("job: ingest\n"
                "input: {store: v.raw, format: raw, raw: {dtype: uint8, shape: [2, 3, 4]}}\n"
                "output: {path: out.zarr}\n")
    ro, undo = read_only_dir(work)
    try:
        bad = [("a directory", "a_dir", "it is a directory"),
               ("a file as directory", "v.raw/r.json", "not a directory")]
        if undo is not None:
            bad.append(("read-only directory", "ro/r.json", "not writable"))
        else:
            print("skip read-only directory: cannot mount a tmpfs", flush=True)
        for label, path, why in bad:
            for how, cmd, key in (
                    ("run --report", [sm, "run", cfg, "--report", path], "--report"),
                    ("run --set report", [sm, "run", cfg, "--set", f"report={path}"], "report"),
                    ("validate --set report", [sm, "validate", "-q", cfg, "--set",
                                               f"report={path}"], "report")):
                shutil.rmtree(os.path.join(work, "out.zarr"), ignore_errors=True)
                r, lines = run(cmd, work)
                tag = f"{how} {path} ({label})"
                check(f"{tag}: exit 2", r.returncode == 2, f"exit {r.returncode}: {r.stderr}")
                check(f"{tag}: one error line naming {key}, the path and '{why}'",
                      len(lines) == 1 and lines[0].startswith("shardmill: error: ") and
                      key + ":" in lines[0] and f"'{path}'" in lines[0] and why in lines[0],
                      lines)
                check(f"{tag}: no output created (nothing ran)",
                      not os.path.exists(os.path.join(work, "out.zarr")))
                check(f"{tag}: no report or temporary file",
                      sorted(os.listdir(os.path.join(work, "a_dir"))) == [] and
                      (undo is None or os.listdir(ro) == []))
    finally:
        if undo is not None:
            undo()
    shutil.rmtree(os.path.join(work, "out.zarr"), ignore_errors=True)
    r, _ = run([sm, "run", cfg, "--report", "a_dir/r.json"], work)
    ok = check("run --report a_dir/r.json: exit 0", r.returncode == 0, r.stderr)
    if ok:
        rep = json.load(open(os.path.join(work, "a_dir", "r.json")))
        check("  the report was written", rep.get("job") == "ingest", list(rep)[:8])
    # missing directories are made by the report writer (as the output's are)
    r, _ = run([sm, "run", cfg, "--set", "output.exists=overwrite", "--report",
                "no/such/r.json"], work)
    check("run --report no/such/r.json: exit 0, the directories made and the report written",
          r.returncode == 0 and os.path.isfile(os.path.join(work, "no", "such", "r.json")),
          r.stderr)
    r, _ = run([sm, "run", cfg, "--set", "output.exists=overwrite", "--report",
                "v.raw/deeper/r.json"], work)
    check("run --report v.raw/deeper/r.json (an ancestor is a file): exit 2",
          r.returncode == 2 and ("not a directory" in r.stderr or "cannot reach" in r.stderr),
          r.stderr)
    overwrite_cases(sm, work, cfg)
    return C.done()


def snapshot(root):
    """{relative path: bytes} of every file under root."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = fh.read()
    return out


def overwrite_cases(sm, work, cfg):
    """Issue 32 item 3: a report path that is the output's zarr.json, its marker, a shard, a new
    file inside the output, or the raw input itself (also through a symlink) is refused with
    exit 2 naming the key, by validate and by run, before anything is written: every file of
    the input and of the verified output stays byte for byte (it used to be replaced by the
    report's JSON, with exit 0)."""
    shutil.rmtree(os.path.join(work, "out.zarr"), ignore_errors=True)
    r, _ = run([sm, "run", cfg, "-q"], work)
    if not check("a verified output to protect: exit 0", r.returncode == 0, r.stderr):
        return
    shard = sorted(os.path.relpath(os.path.join(d, f), work)
                   for d, _, fs in os.walk(os.path.join(work, "out.zarr", "c")) for f in fs)[0]
    if not os.path.lexists(os.path.join(work, "link")):
        os.symlink("out.zarr", os.path.join(work, "link"))
    targets = [("out.zarr/zarr.json", "output"), ("out.zarr/shardmill.complete.json", "output"),
               (shard, "output"), ("out.zarr/report.json", "output"), ("v.raw", "input"),
               ("link/zarr.json", "output"), ("./out.zarr/../out.zarr/zarr.json", "output")]
    for path, noun in targets:
        if ".." in path:
            noun = None  # refused as a path the report writer resolves: a '..' component
        yaml = os.path.join(work, "rep.yaml")
        with open(yaml, "w") as f:
            f.write(open(cfg).read().replace("output: {path: out.zarr}",
                                             "output: {path: out.zarr, exists: auto}")
                    + f"report: {json.dumps(path)}\n")
        for how, cmd, key in (
                ("validate, report in the file", [sm, "validate", "-q", yaml], "report"),
                ("run, report in the file", [sm, "run", "-q", yaml], "report"),
                ("run --set report", [sm, "run", "-q", cfg, "--set", "output.exists=auto",
                                      "--set", f"report={path}"], "report"),
                ("run --report", [sm, "run", "-q", cfg, "--set", "output.exists=auto",
                                  "--report", path], "--report"),
                ("validate --report", [sm, "validate", "-q", cfg, "--report", path],
                 "--report")):
            before = snapshot(work)
            r, lines = run(cmd, work)
            tag = f"{how} {path}"
            why = f"the {noun}" if noun else ""
            check(f"{tag}: exit 2, one line naming {key} and {why or 'the path'}",
                  r.returncode == 2 and len(lines) == 1 and
                  lines[0].startswith(f"shardmill: error: {key}: ") and why in lines[0],
                  lines or r.stdout)
            after = snapshot(work)
            changed = sorted(k for k in set(before) | set(after)
                             if before.get(k) != after.get(k) and k != "rep.yaml")
            check(f"{tag}: nothing written, the input and the output byte for byte",
                  not changed, changed[:6])
    # the jobs that only read: a report over their input's zarr.json
    for job in ("scan", "read-bench"):
        yaml = os.path.join(work, "reader.yaml")
        with open(yaml, "w") as f:
            f.write(f"job: {job}\ninput: {{store: out.zarr}}\nprogress: false\n")
        for cmd, key in (([sm, "run", "-q", yaml, "--report", "out.zarr/zarr.json"], "--report"),
                         ([sm, "run", "-q", yaml, "--set", "report=link/zarr.json"], "report"),
                         ([sm, "validate", "-q", yaml, "--set", "report=out.zarr/zarr.json"],
                          "report")):
            before = snapshot(work)
            r, lines = run(cmd, work)
            after = snapshot(work)
            check(f"{job}: {' '.join(cmd[2:])}: exit 2 naming {key} and the input, nothing "
                  "written",
                  r.returncode == 2 and len(lines) == 1 and
                  lines[0].startswith(f"shardmill: error: {key}: ") and
                  "the input" in lines[0] and before == after, lines or r.stdout)
    r, _ = run([sm, "verify", "out.zarr"], work)
    check("the output still verifies", r.returncode == 0, r.stderr)
    # a report beside the output still works, and one in a directory holding the output
    r, _ = run([sm, "run", "-q", cfg, "--set", "output.exists=auto", "--report", "r2.json"], work)
    check("a report beside the output: exit 0", r.returncode == 0, r.stderr)


if __name__ == "__main__":
    sys.exit(main())
