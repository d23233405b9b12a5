"""Output safety of `shardmill run` (job: convert), SPEC §4 exit codes and §6.

Usage: /usr/bin/python3 test_convert_safety.py --shardmill BIN --work DIR --case CASE
Cases (one ctest each, label `convert`):
  sigkill_resume      SIGKILL in the middle of the shard writes (256^3 uint8 input, fsync on,
                      1 thread): no marker, every object under OUT/c with a shard name is a whole
                      shard (index CRC32C valid, every inner chunk decodes, bytes equal a clean
                      run's), temporary names are never shard names, `verify` fails; the rerun
                      with exists: resume exits 0, verifies, rewrites only what is missing, and
                      the tree equals a clean run into another directory, every file compared.
                      Every run of this case carries `--set output.exists=resume` (see
                      sigkill_resume_cli for why).
  sigkill_resume_cli  the documented flow: a default run (exists: error) killed, then rerun
                      with `--set output.exists=resume` -> exit 0 expected.
  input_changed       issue 19: a window convert killed, its input rewritten (values halved),
                      resumed: the output equals a clean run of the new input, every changed
                      shard rewritten; the same for a complete output whose input changed.
  integrity_cli       issue 19 by the CLI: swapped shards, verify's version / byte total / extra
                      file, the lock naming its holder, a killed overwrite finished by the next,
                      a late failure that keeps the finished shards.
  full_disk           a 200 KiB tmpfs (needs root; skipped otherwise): exit 4, one error line
                      naming a path, no marker, no partial shard.
  exists              an existing output is untouched with the default exists: error (exit 2,
                      bytes, modes and mtimes unchanged); overwrite/resume of a directory that is
                      not a shardmill output (or holds foreign entries, or is a file or symlink)
                      exit 2 and leave it untouched; overwrite of a real output works.
  path_escape         output.path with ".." components leaving the working directory: what the
                      engine does, and that nothing outside the output path is created.
  planted_link        a link planted in the output during a run (the job stopped by SIGSTOP
                      once zarr.json exists, OUT/c/31 -> OTHER/c/31 created, SIGCONT; c/31 is
                      the last slab, not yet made): exit 4 with one error line naming c/31, the
                      other dataset unchanged (every file) and verifying, no marker in OUT.
Prints one ok/FAIL line per check and a closing count; exit 1 on any failure, 77 when skipped.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import time

import numpy as np

from shardmill_test import runner as cc
from shardmill_test import zarr_decode
from shardmill_test.checks import Checks

SKIP = 77
BIG = (256, 256, 256)


def make_input(path, shape, seed, chunks=(64, 64, 64)):
    import zarr
    rng = np.random.default_rng(seed)
    vals = rng.integers(0, 256, shape, dtype=np.uint8)
    zarr.open(path, mode="w", shape=shape, chunks=chunks, dtype="u1")[:] = vals
    return vals


def job_config(path, inp, out_rel, extra=None):
    cfg = {"job": "convert", "input": {"store": inp}, "normalize": {"mode": "scale"},
           # many small shards (SPEC §2's auto layout would write one or two here), each renamed
           # into place on its own (sync: fsync) so that a kill lands between two shards; with
           # syncfs every shard is renamed in one burst at the end (tests/signals covers that)
           "output": {"path": out_rel, "fsync": True, "sync": "fsync", "shard": [8, 32, 32],
                      "chunk": [2, 16, 16]},
           "parallel": {"threads": 1},
           "progress": False}
    return cc.write_config(path, cc.merge_config(cfg, extra))


def shard_names(out):
    """Files under OUT/c split into (shard-named relpaths, other relpaths)."""
    shards, other = [], []
    cdir = os.path.join(out, "c")
    for rel in (cc.files_under(cdir) if os.path.isdir(cdir) else []):
        parts = rel.split(os.sep)
        (shards if all(re.fullmatch(r"[0-9]+", p) for p in parts) else other).append(rel)
    return shards, other


def count_shards(out):
    n = 0
    cdir = os.path.join(out, "c")
    for _, _, files in os.walk(cdir):
        n += sum(1 for f in files if f.isdigit())
    return n


def check_no_partial(c, label, out, ref=None):
    """Every shard-named object under OUT/c is a whole shard of the grid."""
    meta = json.load(open(os.path.join(out, "zarr.json")))
    keys = set(k.split("/", 1)[1].replace("/", os.sep) for k in zarr_decode.shard_keys(meta))
    shards, other = shard_names(out)
    c.check(f"{label} every shard-named object is in the grid", set(shards) <= keys,
            sorted(set(shards) - keys)[:5])
    bad = []
    for rel in shards:
        data = open(os.path.join(out, "c", rel), "rb").read()
        try:
            zarr_decode.decode_object(meta, data)
        except Exception as e:  # noqa: BLE001 - any decoding problem is a partial shard
            bad.append(f"c/{rel}: {e}")
            continue
        if ref is not None:
            want = open(os.path.join(ref, "c", rel), "rb").read()
            if data != want:
                bad.append(f"c/{rel}: {len(data)} bytes, differs from the clean run's "
                           f"{len(want)}")
    c.check(f"{label} {len(shards)} shards present, each whole (index crc32c, inner chunks "
            f"decode{', bytes == clean run' if ref else ''})", not bad, "; ".join(bad[:5]))
    tmp_ok = all(".tmp" in os.path.basename(o) for o in other)
    c.check(f"{label} other names under c/ are temporary names ({len(other)}), never shard "
            f"names", tmp_ok, other[:5])
    return len(shards)


def start_and_kill(c, label, shardmill, cfg, cwd, out, total, args_extra=()):
    """Starts the job, SIGKILLs it once some but not all shards exist; returns the count seen."""
    cmd = [shardmill, "run", cfg] + list(args_extra)
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Shards appear in bursts (output.sync: syncfs renames a staged batch at once), so the
    # property checked is the one that matters: killed, some shards there, not all of them.
    lo = max(8, total // 20)
    seen = 0
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and p.poll() is None:
        seen = count_shards(out)
        if seen >= lo:
            break
        time.sleep(0.005)
    if p.poll() is None:
        os.kill(p.pid, signal.SIGKILL)
    rc = p.wait()
    p.stdout.close()
    p.stderr.close()
    after = count_shards(out)
    c.check(f"{label} killed by SIGKILL mid-write ({seen} of {total} shards seen, {after} after)",
            rc == -signal.SIGKILL and 0 < after < total,
            f"exit {rc}, {after} of {total} shards (the job was too fast or too slow to kill)")
    return rc == -signal.SIGKILL and 0 < after < total


def after_kill_checks(c, label, shardmill, out, ref=None):
    c.check(f"{label} no completion marker",
            not os.path.exists(os.path.join(out, "shardmill.complete.json")))
    check_no_partial(c, label, out, ref)
    r = cc.run([shardmill, "verify", out])
    c.check(f"{label} shardmill verify fails (exit 1 or 3)", r.returncode in (1, 3),
            cc.describe(r) + " stdout: " + r.stdout[-500:])


def case_sigkill_resume(c, args, work):
    inp = os.path.join(work, "big.in.zarr")
    make_input(inp, BIG, 71)
    total = (BIG[0] // 8) * (BIG[1] // 32) * (BIG[2] // 32)
    # The same YAML (relative output.path) from two working directories: identical effective
    # configurations, so the trees must be identical byte for byte.
    cfg = job_config(os.path.join(work, "job.yaml"), inp, "out.zarr")
    resume = ["--set", "output.exists=resume"]
    ref_dir = cc.fresh_dir(os.path.join(work, "clean"))
    t0 = time.monotonic()
    r = cc.run([args.shardmill, "run", cfg, "--report", "report.json"] + resume, cwd=ref_dir)
    c.check(f"clean run exits 0 ({time.monotonic() - t0:.1f} s)", r.returncode == 0,
            cc.describe(r))
    ref = os.path.join(ref_dir, "out.zarr")
    kdir = cc.fresh_dir(os.path.join(work, "killed"))
    out = os.path.join(kdir, "out.zarr")
    if not start_and_kill(c, "killed run", args.shardmill, cfg, kdir, out, total, resume):
        return
    after_kill_checks(c, "killed run", args.shardmill, out, ref)
    r = cc.run([args.shardmill, "run", cfg, "--report", "report.json"] + resume, cwd=kdir)
    c.check("resume exits 0", r.returncode == 0, cc.describe(r))
    if r.returncode != 0:
        return
    rep = json.load(open(os.path.join(kdir, "report.json")))
    written = rep.get("output", {}).get("written")
    c.check(f"resume rewrote only missing shards ({written} of {total})",
            isinstance(written, int) and 0 < written < total, rep.get("output"))
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify of the resumed output ok", r.returncode == 0, cc.describe(r) + r.stdout)
    # issue 19: the figures cover the whole output, kept shards included, not this run's only
    clean = json.load(open(os.path.join(ref_dir, "report.json"))).get("result", {})
    sums = ("checksum", "weighted_checksum", "output_checksum", "output_weighted_checksum")
    c.check("resumed report's checksums == the clean run's (the whole output)",
            all(rep["result"].get(k) == clean.get(k) for k in sums),
            {k: (rep["result"].get(k), clean.get(k)) for k in sums})
    cc.check_marker(c, "resumed", out, rep, args.version)
    diffs = cc.tree_diff(ref, out)
    c.check("resumed tree == clean run in another directory (every file, journal included)",
            not diffs, "; ".join(diffs[:8]))


def case_sigkill_resume_cli(c, args, work):
    inp = os.path.join(work, "big.in.zarr")
    make_input(inp, BIG, 72)
    total = (BIG[0] // 8) * (BIG[1] // 32) * (BIG[2] // 32)
    cfg = job_config(os.path.join(work, "job.yaml"), inp, "out.zarr")  # exists: error (default)
    kdir = cc.fresh_dir(os.path.join(work, "killed"))
    out = os.path.join(kdir, "out.zarr")
    if not start_and_kill(c, "killed default run", args.shardmill, cfg, kdir, out, total):
        return
    after_kill_checks(c, "killed default run", args.shardmill, out)
    before = cc.snapshot(out)
    cmd = [args.shardmill, "run", cfg, "--set", "output.exists=resume", "--report", "rep.json"]
    r = cc.run(cmd, cwd=kdir)
    ok = c.check("rerun with --set output.exists=resume exits 0 (SPEC §6 resume)",
                 r.returncode == 0, cc.describe(r))
    if not ok:
        c.check("the refused resume left the directory untouched", cc.snapshot(out) == before,
                "entries changed")
        return
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify of the resumed output ok", r.returncode == 0, cc.describe(r) + r.stdout)
    # A clean run of the same job: the same shards (the configurations differ only in exists).
    ref_dir = cc.fresh_dir(os.path.join(work, "clean"))
    r = cc.run([args.shardmill, "run", cfg], cwd=ref_dir)
    c.check("clean run exits 0", r.returncode == 0, cc.describe(r))
    diffs = [d for d in cc.tree_diff(os.path.join(ref_dir, "out.zarr"), out)]
    c.check("resumed tree == clean run (every file)", not diffs, "; ".join(diffs[:8]))


def case_full_disk(c, args, work):
    if os.geteuid() != 0:
        print("SKIP full_disk: mounting a tmpfs needs root")
        return SKIP
    inp = os.path.join(work, "small.in.zarr")
    make_input(inp, (50, 70, 90), 73, chunks=(16, 16, 16))
    mnt = cc.fresh_dir(os.path.join(work, "full"))
    r = cc.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", mnt])
    if r.returncode != 0:
        print(f"SKIP full_disk: cannot mount a tmpfs: {r.stderr.strip()}")
        return SKIP
    try:
        cfg = job_config(os.path.join(work, "job.yaml"), inp, os.path.join(mnt, "out.zarr"),
                         {"parallel": {"threads": 2}})
        r = cc.run([args.shardmill, "run", cfg, "--report", os.path.join(work, "rep.json")])
        c.check("convert onto a full disk exits 4", r.returncode == 4, cc.describe(r))
        lines = cc.one_error_line(r.stderr)
        c.check("exactly one error line on stderr", len(lines) == 1, lines)
        line = lines[0] if lines else ""
        c.check("the error line is 'shardmill: error: <path under the mount>: ...'",
                re.match(r"^shardmill: error: " + re.escape(mnt) + r"/out\.zarr\S*: ", line)
                is not None and "No space left on device" in line, line)
        out = os.path.join(mnt, "out.zarr")
        c.check("no completion marker", not os.path.exists(
            os.path.join(out, "shardmill.complete.json")))
        c.check("no report written after the error", not os.path.exists(
            os.path.join(work, "rep.json")))
        if os.path.exists(os.path.join(out, "zarr.json")):
            check_no_partial(c, "full disk", out)
        r = cc.run([args.shardmill, "verify", out])
        c.check("verify of the failed output fails (exit 1 or 3)", r.returncode in (1, 3),
                cc.describe(r))
    finally:
        r = cc.run(["umount", mnt])
        if r.returncode != 0:
            print(f"warning: umount {mnt}: {r.stderr.strip()}")
    return None


def refused(c, label, args, cfg, target, cwd, sets=(), expect=r"output exists"):
    """Runs the job expecting exit 2, one error line matching `expect`, target untouched."""
    before = cc.snapshot(target) if os.path.isdir(target) and not os.path.islink(target) else \
        (open(target, "rb").read(), os.lstat(target).st_mtime_ns)
    cmd = [args.shardmill, "run", cfg]
    for s in sets:
        cmd += ["--set", s]
    time.sleep(0.01)  # any rewrite would show in the mtimes
    r = cc.run(cmd, cwd=cwd)
    lines = cc.one_error_line(r.stderr)
    c.check(f"{label}: exit 2 with one error line '{expect}'",
            r.returncode == 2 and len(lines) == 1 and re.search(expect, lines[0]) is not None,
            cc.describe(r))
    after = cc.snapshot(target) if os.path.isdir(target) and not os.path.islink(target) else \
        (open(target, "rb").read(), os.lstat(target).st_mtime_ns)
    c.check(f"{label}: every entry byte-identical, mtimes and modes unchanged", before == after,
            "changed entries: " + str(sorted(k for k in set(before) | set(after)
                                             if before.get(k) != after.get(k))[:8])
            if isinstance(before, dict) else "the file changed")


def case_exists(c, args, work):
    import zarr
    inp = os.path.join(work, "small.in.zarr")
    make_input(inp, (20, 40, 40), 74, chunks=(16, 16, 16))
    d = cc.fresh_dir(os.path.join(work, "run"))
    cfg = job_config(os.path.join(work, "job.yaml"), inp, "out.zarr", {"output": {"fsync": False}})
    out = os.path.join(d, "out.zarr")
    r = cc.run([args.shardmill, "run", cfg], cwd=d)
    c.check("first run exits 0", r.returncode == 0, cc.describe(r))
    refused(c, "existing output, exists: error (default)", args, cfg, out, d)
    # an empty directory is not an output: allowed (write.h)
    empty = os.path.join(d, "empty.zarr")
    os.makedirs(empty)
    r = cc.run([args.shardmill, "run", cfg, "--set", "output.path=empty.zarr"], cwd=d)
    c.check("an empty directory is written into with exists: error", r.returncode == 0 and
            os.path.exists(os.path.join(empty, "shardmill.complete.json")), cc.describe(r))
    # foreign directories
    foreign = os.path.join(d, "foreign.zarr")
    zarr.open(foreign, mode="w", shape=(4, 4), chunks=(2, 2), dtype="u1")[:] = 1
    with open(os.path.join(foreign, "notes.txt"), "w") as f:
        f.write("not shardmill's\n")
    for policy in ("error", "overwrite", "resume"):
        expect = "output exists" if policy == "error" else "not a shardmill output"
        refused(c, f"foreign Zarr directory, exists: {policy}", args, cfg, foreign, d,
                ["output.path=foreign.zarr", f"output.exists={policy}"], expect)
    # a shardmill output holding an entry it cannot contain: refused before deleting anything
    mixed = os.path.join(d, "mixed.zarr")
    shutil.copytree(out, mixed)
    with open(os.path.join(mixed, "precious.txt"), "w") as f:
        f.write("user data\n")
    for policy in ("overwrite", "resume"):
        refused(c, f"shardmill output with a foreign file, exists: {policy}", args, cfg, mixed, d,
                ["output.path=mixed.zarr", f"output.exists={policy}"], "shardmill output|entry|"
                "precious")
    # a regular file and a symbolic link at the output path
    afile = os.path.join(d, "file.zarr")
    with open(afile, "w") as f:
        f.write("a file\n")
    for policy in ("error", "overwrite"):
        refused(c, f"a regular file, exists: {policy}", args, cfg, afile, d,
                ["output.path=file.zarr", f"output.exists={policy}"], "output exists|not a "
                "shardmill output")
    link = os.path.join(d, "link.zarr")
    os.symlink("out.zarr", link)
    before = cc.snapshot(out)
    r = cc.run([args.shardmill, "run", cfg, "--set", "output.path=link.zarr", "--set",
                "output.exists=overwrite"], cwd=d)
    c.check("a symbolic link to an output, exists: overwrite: exit 2", r.returncode == 2,
            cc.describe(r))
    c.check("the link's target is untouched", cc.snapshot(out) == before and
            os.path.islink(link), "changed")
    # overwrite of a real shardmill output works and verifies
    r = cc.run([args.shardmill, "run", cfg, "--set", "output.exists=overwrite", "--set",
                "normalize.divisor=100"], cwd=d)
    c.check("overwrite of a shardmill output exits 0", r.returncode == 0, cc.describe(r))
    meta = json.load(open(os.path.join(out, "zarr.json")))
    c.check("the overwritten output carries the new normalization",
            meta["attributes"]["shardmill"]["normalization"].get("divisor") == 100,
            meta["attributes"]["shardmill"]["normalization"])
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify of the overwritten output ok", r.returncode == 0, cc.describe(r))


def case_path_escape(c, args, work):
    inp = os.path.join(work, "small.in.zarr")
    make_input(inp, (10, 20, 20), 75, chunks=(16, 16, 16))
    root = cc.fresh_dir(os.path.join(work, "esc"))
    base = os.path.join(root, "base")
    os.makedirs(base)
    cfg = job_config(os.path.join(work, "job.yaml"), inp, "a/../../x.zarr",
                     {"output": {"fsync": False}})
    before_base = set(os.listdir(base))
    r = cc.run([args.shardmill, "run", cfg], cwd=base)
    escaped = os.path.join(root, "x.zarr")
    if r.returncode == 2:
        c.check("output.path a/../../x.zarr (outside the working directory) refused, exit 2",
                True)
        c.check("nothing created", not os.path.exists(escaped) and
                set(os.listdir(base)) == before_base, os.listdir(base))
        return
    # The CLI exposes no output root: sm_job_output_opts (jobs/job_input.c) never sets
    # sm_output_opts.base, so ".." components are resolved and followed.
    print(f"note: output.path a/../../x.zarr from {base}: exit {r.returncode}; "
          f"written at {escaped}: {os.path.isdir(escaped)} (no output root in the CLI)")
    c.check("the job either refuses the path or writes exactly the resolved path",
            r.returncode == 0 and os.path.exists(os.path.join(escaped,
                                                              "shardmill.complete.json")),
            cc.describe(r))
    created = sorted(set(os.listdir(base)) - before_base)
    c.check("SPEC §6: nothing outside output.path is created (no directory for the '..'d "
            "component 'a')", not created, f"created in the working directory: {created}")
    # inside the working directory too
    r = cc.run([args.shardmill, "run", cfg, "--set", "output.path=b/../y.zarr"], cwd=base)
    created = sorted(set(os.listdir(base)) - before_base - {"a"})
    c.check("output.path b/../y.zarr: exit 0 and only y.zarr created",
            r.returncode == 0 and created == ["y.zarr"], f"{cc.describe(r)}; created {created}")


def case_input_changed(c, args, work):
    """Issue 19: a resume after the input changed never mixes the two inputs. A window convert
    (one pass: nothing value-dependent in zarr.json before the end) is killed mid-write; the
    input is rewritten with every value halved (same metadata); the resume must give exactly a
    clean run's output of the new input (every shard whose values changed rewritten), and so
    must a resume of that complete output after the input changed again."""
    inp = os.path.join(work, "big.in.zarr")
    vals = make_input(inp, BIG, 75)
    total = (BIG[0] // 8) * (BIG[1] // 32) * (BIG[2] // 32)
    cfg = job_config(os.path.join(work, "job.yaml"), inp, "out.zarr",
                     {"normalize": {"mode": "window", "lo": 10.0, "hi": 200.0}})
    resume = ["--set", "output.exists=resume"]
    kdir = cc.fresh_dir(os.path.join(work, "killed"))
    out = os.path.join(kdir, "out.zarr")
    if not start_and_kill(c, "killed window run", args.shardmill, cfg, kdir, out, total, resume):
        return

    def rewrite_input(new):
        import zarr
        zarr.open(inp, mode="r+")[:] = new

    def clean_of(label):
        d = cc.fresh_dir(os.path.join(work, label))
        r = cc.run([args.shardmill, "run", cfg] + resume, cwd=d)
        c.check(f"clean run on the {label} input exits 0", r.returncode == 0, cc.describe(r))
        return os.path.join(d, "out.zarr")

    def resume_equals(label, ref):
        r = cc.run([args.shardmill, "run", cfg, "--report", "report.json"] + resume, cwd=kdir)
        c.check(f"{label}: resume exits 0 (or 2 naming the change)", r.returncode in (0, 2),
                cc.describe(r))
        if r.returncode == 2:
            c.check(f"{label}: the refusal names the input", "input" in r.stderr, r.stderr)
            return
        rep = json.load(open(os.path.join(kdir, "report.json")))
        written = rep.get("output", {}).get("written")
        c.check(f"{label}: every shard whose input changed rewritten ({written} of {total})",
                written == total, rep.get("output"))
        r = cc.run([args.shardmill, "verify", out])
        c.check(f"{label}: verify ok", r.returncode == 0, cc.describe(r) + r.stdout)
        diffs = cc.tree_diff(ref, out)
        c.check(f"{label}: the output == a clean run of the new input (every file), no shard "
                f"of the old input kept", not diffs, "; ".join(diffs[:8]))

    half = (vals // 2).astype(np.uint8)
    rewrite_input(half)
    resume_equals("killed run, input halved", clean_of("halved"))
    rewrite_input((half + 1).astype(np.uint8))
    resume_equals("complete output, input changed again", clean_of("plus-one"))

    # The input's metadata changed (an attribute): refused, naming the member and the input.
    with open(os.path.join(inp, ".zattrs"), "w") as f:
        json.dump({"note": "edited"}, f)
    before = cc.snapshot(out)
    r = cc.run([args.shardmill, "run", cfg] + resume, cwd=kdir)
    c.check("input metadata changed: resume exits 2 naming input.metadata_sha256",
            r.returncode == 2 and "input.metadata_sha256" in r.stderr, cc.describe(r))
    c.check("the refused resume left the output untouched", cc.snapshot(out) == before, "changed")

    # An ingest source file changed: refused, naming the source file's identity.
    raw = os.path.join(work, "vol.raw")
    np.arange(16 * 20 * 24, dtype="<u2").tofile(raw)
    icfg = cc.write_config(os.path.join(work, "ingest.yaml"), {
        "job": "ingest", "input": {"store": raw, "format": "raw",
                                   "raw": {"dtype": "uint16", "shape": [16, 20, 24]}},
        "output": {"path": "raw.zarr", "exists": "resume"}, "progress": False})
    idir = cc.fresh_dir(os.path.join(work, "ingest"))
    r = cc.run([args.shardmill, "run", icfg], cwd=idir)
    c.check("ingest of the raw file exits 0", r.returncode == 0, cc.describe(r))
    time.sleep(0.01)
    np.arange(1, 16 * 20 * 24 + 1, dtype="<u2").tofile(raw)  # same size, other bytes and mtime
    r = cc.run([args.shardmill, "run", icfg, "--report", "rep.json"], cwd=idir)
    # ingest is convert (issue 20): the source's file identity is the provenance's input_state
    # (issue 32), which a resume accepts changed: every shard is checked against its values
    # digest, and the output is a clean ingest's of the new file
    written = json.load(open(os.path.join(idir, "rep.json")))["output"]["written"] \
        if r.returncode == 0 else None
    c.check("source file changed: resume exits 0 and rewrites the changed shards",
            r.returncode == 0 and written, cc.describe(r) + f" written {written}")
    cdir = cc.fresh_dir(os.path.join(work, "ingest-clean"))
    r = cc.run([args.shardmill, "run", icfg], cwd=cdir)
    diffs = cc.tree_diff(os.path.join(cdir, "raw.zarr"), os.path.join(idir, "raw.zarr"))
    c.check("source file changed: the resumed output == a clean ingest of the new file",
            r.returncode == 0 and not diffs, cc.describe(r) + "; ".join(diffs[:5]))


def case_integrity_cli(c, args, work):
    """Issue 19 through the command line: swapped shards (verify fails; resume rewrites them,
    with or without records), verify's marker version, byte total and extra files, the lock
    that refuses a second run naming the holder, an overwrite killed during its delete finished
    by the next one, and a late failure that keeps the finished shards."""
    inp = os.path.join(work, "big.in.zarr")
    make_input(inp, BIG, 77)
    total = (BIG[0] // 8) * (BIG[1] // 32) * (BIG[2] // 32)
    cfg = job_config(os.path.join(work, "job.yaml"), inp, "out.zarr",
                     {"output": {"exists": "overwrite"}})
    d = cc.fresh_dir(os.path.join(work, "run"))
    out = os.path.join(d, "out.zarr")
    r = cc.run([args.shardmill, "run", cfg], cwd=d)
    c.check("first run exits 0", r.returncode == 0, cc.describe(r))
    ref = os.path.join(work, "ref.zarr")
    shutil.rmtree(ref, ignore_errors=True)
    shutil.copytree(out, ref)
    resume = ["--set", "output.exists=resume", "--report", "rep.json"]

    def swap(a, b):
        pa, pb = os.path.join(out, *a.split("/")), os.path.join(out, *b.split("/"))
        os.rename(pa, pa + ".swap")
        os.rename(pb, pa)
        os.rename(pa + ".swap", pb)

    def resumed(label, want_written):
        r = cc.run([args.shardmill, "run", cfg] + resume, cwd=d)
        rep = json.load(open(os.path.join(d, "rep.json"))) if r.returncode == 0 else {}
        written = rep.get("output", {}).get("written")
        c.check(f"{label}: resume exits 0, rewrites {want_written}", r.returncode == 0 and
                written == want_written, cc.describe(r) + f" written {written}")
        diffs = cc.tree_diff(ref, out)
        c.check(f"{label}: the tree equals the first run's", not diffs, "; ".join(diffs[:5]))

    swap("c/0/0/0", "c/0/0/1")
    r = cc.run([args.shardmill, "verify", out])
    c.check("swapped shards: verify exits 1 naming both", r.returncode == 1 and
            "c/0/0/0" in r.stdout + r.stderr and "c/0/0/1" in r.stdout + r.stderr,
            cc.describe(r) + r.stdout)
    resumed("swapped shards with the marker's records", 2)
    swap("c/0/0/0", "c/0/0/1")
    os.unlink(os.path.join(out, "shardmill.complete.json"))
    os.makedirs(os.path.join(out, ".shardmill", "journal"))
    resumed("swapped shards without records", total)

    marker = os.path.join(out, "shardmill.complete.json")
    good = open(marker).read()
    for label, text, extra, expect in (
            ("unknown marker version", good.replace('"shardmill_complete": 2',
                                                    '"shardmill_complete": 9'), None,
             "unknown marker format version 9"),
            ("byte total", re.sub(r'"bytes": \d+', '"bytes": 12', good), None, "'bytes' is 12"),
            ("extra file c/99/0", good, "c/99/0", "c/99: a directory")):
        open(marker, "w").write(text)
        if extra:
            os.makedirs(os.path.join(out, "c", "99"))
            open(os.path.join(out, *extra.split("/")), "w").write("x")
        r = cc.run([args.shardmill, "verify", out])
        c.check(f"verify: {label} fails (exit 1, naming it)", r.returncode == 1 and
                expect in r.stdout + r.stderr, cc.describe(r) + r.stdout)
        open(marker, "w").write(good)
        if extra:
            shutil.rmtree(os.path.join(out, "c", "99"))
    r = cc.run([args.shardmill, "verify", out])
    c.check("verify ok once restored", r.returncode == 0, cc.describe(r) + r.stdout)

    # The lock: a second overwrite while the first runs is refused, naming the holder.
    p = subprocess.Popen([args.shardmill, "run", cfg], cwd=d, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    owner = os.path.join(out, ".shardmill", "owner")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None and not (
            os.path.exists(owner) and not os.path.exists(marker)):
        time.sleep(0.002)
    r = cc.run([args.shardmill, "run", cfg], cwd=d)
    running = p.poll() is None
    c.check("a second run on a held output: exit 2 naming the holder's pid",
            not running or (r.returncode == 2 and "in use by another shardmill run" in r.stderr
                            and f"pid {p.pid}" in r.stderr), cc.describe(r))
    c.check("the first run was still running when the second was refused", running,
            "the first run ended too soon")
    # Killed during its delete (the marker gone, shards left): the next overwrite finishes it.
    if p.poll() is None:
        p.kill()
    p.wait()
    r = cc.run([args.shardmill, "run", cfg], cwd=d)
    c.check("an overwrite after a killed overwrite exits 0", r.returncode == 0, cc.describe(r))
    diffs = cc.tree_diff(ref, out)
    c.check("... and gives the first run's tree", not diffs, "; ".join(diffs[:5]))

    # A late failure (a corrupt input chunk near the end, default sync: syncfs) keeps the work.
    last = os.path.join(inp, "3.3.3")
    good_chunk = open(last, "rb").read()
    open(last, "wb").write(b"not a blosc chunk")
    late = job_config(os.path.join(work, "late.yaml"), inp, "late.zarr",
                      {"output": {"sync": "syncfs"}})
    r = cc.run([args.shardmill, "run", late], cwd=d)
    kept = count_shards(os.path.join(d, "late.zarr"))
    c.check(f"a late input failure: exit 3, the finished shards stay ({kept} of {total})",
            r.returncode == 3 and kept > total // 2, cc.describe(r))
    open(last, "wb").write(good_chunk)
    r = cc.run([args.shardmill, "run", late, "--set", "output.exists=resume", "--report",
                "late.json"], cwd=d)
    written = json.load(open(os.path.join(d, "late.json")))["output"]["written"] \
        if r.returncode == 0 else None
    c.check(f"the resume after the fix rewrites only what is missing ({written})",
            r.returncode == 0 and written == total - kept, cc.describe(r))


def case_planted_link(c, args, work):
    inp = os.path.join(work, "big.in.zarr")
    make_input(inp, BIG, 74)
    other_in = os.path.join(work, "other.in.zarr")
    make_input(other_in, BIG, 75)  # another input: the same grid, other shard bytes
    vdir = cc.fresh_dir(os.path.join(work, "victim"))
    r = cc.run([args.shardmill, "run", job_config(os.path.join(work, "victim.yaml"), other_in,
                                                  "other.zarr")], cwd=vdir)
    if not c.check("the other dataset is written (exit 0)", r.returncode == 0, cc.describe(r)):
        return
    other = os.path.join(vdir, "other.zarr")
    before = cc.snapshot(other)
    cfg = job_config(os.path.join(work, "job.yaml"), inp, "out.zarr")
    kdir = cc.fresh_dir(os.path.join(work, "planted"))
    out = os.path.join(kdir, "out.zarr")
    last = f"c/{BIG[0] // 8 - 1}"  # one thread writes in grid order: this slab comes last
    p = subprocess.Popen([args.shardmill, "run", cfg], cwd=kdir, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while (time.monotonic() < deadline and p.poll() is None
           and not os.path.exists(os.path.join(out, "zarr.json"))):
        time.sleep(0.002)
    planted = False
    if p.poll() is None:
        os.kill(p.pid, signal.SIGSTOP)  # no timing: the link is there before the slab starts
        try:
            if not os.path.lexists(os.path.join(out, last)):
                os.makedirs(os.path.join(out, "c"), exist_ok=True)
                os.symlink(os.path.join(other, last), os.path.join(out, last))
                planted = True
        finally:
            os.kill(p.pid, signal.SIGCONT)
    _, err = p.communicate(timeout=600)
    if not c.check(f"{last} planted before the run reached it", planted,
                   f"exit {p.returncode}; the run was too fast to stop"):
        return
    c.check("the run exits 4", p.returncode == 4, f"exit {p.returncode}; stderr: {err[-800:]}")
    lines = cc.one_error_line(err)
    c.check("one error line naming the link", len(lines) == 1 and f"'{last}' is a symbolic link"
            in lines[0], lines)
    after = cc.snapshot(other)
    diffs = [k for k in set(before) | set(after) if before.get(k) != after.get(k)]
    c.check("the other dataset is unchanged (bytes, mtimes, modes)", not diffs, diffs[:8])
    r = cc.run([args.shardmill, "verify", other])
    c.check("the other dataset still verifies", r.returncode == 0, cc.describe(r) + r.stdout)
    c.check("no completion marker in the output",
            not os.path.exists(os.path.join(out, "shardmill.complete.json")))


CASES = {"sigkill_resume": case_sigkill_resume, "sigkill_resume_cli": case_sigkill_resume_cli,
         "input_changed": case_input_changed, "integrity_cli": case_integrity_cli,
         "full_disk": case_full_disk, "exists": case_exists, "path_escape": case_path_escape,
         "planted_link": case_planted_link}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    args = ap.parse_args()
    args.shardmill = os.path.abspath(args.shardmill)
    work = cc.fresh_dir(os.path.abspath(os.path.join(args.work, args.case)))
    c = Checks(f"convert.safety.{args.case}")
    args.version = cc.engine_version(args.shardmill)
    status = CASES[args.case](c, args, work)
    if status == SKIP:
        return SKIP
    return c.done()


if __name__ == "__main__":
    cc.main_guard(main)
