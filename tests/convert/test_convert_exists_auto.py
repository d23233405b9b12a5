"""output.exists: auto end to end (issue 22 item 1; docs/internals/writing.md, "exists policies").

Usage: /usr/bin/python3 test_convert_exists_auto.py --shardmill BIN --work DIR --case CASE
       [--mpiexec MPIEXEC]
Cases (one ctest each: convert.exists_auto.<case>, the mpi_* ones mpi.exists_auto.<case>):
  new           no output, and an empty directory: exit 0, action "written", the tree byte-identical
                to an `exists: error` run's.
  unfinished    a run SIGKILLed mid-write, and one stopped by SIGTERM (exit 143): auto finishes
                each (action "resumed", only the missing shards written), verify passes, and the
                tree is byte-identical to an uninterrupted run's.
  complete      auto over this job's complete output: exit 0, nothing written (every entry's
                bytes, mtime and mode, the root's included, and the marker's inode unchanged),
                the summary line "... is already complete and verified: nothing to do", report
                output.action "complete", skipped true, result null; with --report - the JSON
                alone on stdout and the line on stderr.
  damaged       a complete output with one shard's byte flipped: exit 0, action "repaired"
                naming the shard, exactly that shard rewritten, verify passes, tree == clean.
  different     another normalize.divisor, an input whose metadata changed (rechunked in place),
                an unfinished output of another configuration, and a directory that is no
                shardmill output: exit 2, one error line naming the difference
                (attributes.shardmill.config_sha256 / .input.metadata_sha256), nothing touched.
  ome           output.ome (2 levels, percentile: two passes): new, complete (nothing written),
                a level-1 shard damaged -> repaired, tree == clean every time.
  export        export.hdf5.path: complete with the file there -> nothing to do (the file
                untouched); the file deleted -> resumed (no shard written), the export written
                again with the same values (h5py), verify passes.
  mpi_complete  (mpirun -n 2) auto over a complete output: every rank exits 0, nothing written,
                the line printed once.
  mpi_unfinished (mpirun -n 2) a single-process run SIGKILLed mid-write, finished by auto under
                two ranks: exit 0, resumed, verify passes, tree == an uninterrupted run's.
Prints one ok/FAIL line per check and a closing count; exit 1 on any failure, 77 when skipped.
"""

import argparse
import json
import os
import signal
import subprocess
import time

from shardmill_test import runner as cc
from shardmill_test.checks import Checks
from shardmill_test.ranks import mpi_env, plain_env

import test_convert_safety as ts  # noqa: E402  (input, job YAML, kill helpers)

SKIP = 77
SMALL = (40, 96, 96)
AUTO = ["--set", "output.exists=auto"]
LINE = "is already complete and verified: nothing to do"


def run(args, cmd, cwd, ranks=0, timeout=300):
    """shardmill CMD in cwd: a plain process (ranks 0) or under mpirun -n ranks."""
    if ranks == 0:
        return subprocess.run([args.shardmill] + cmd, cwd=cwd, capture_output=True, text=True,
                              timeout=timeout, env=plain_env())
    return subprocess.run([args.mpiexec, "--oversubscribe", "-np", str(ranks), args.shardmill]
                          + cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=mpi_env())


def report(d, name="rep.json"):
    return json.load(open(os.path.join(d, name)))


def clean_run(c, args, cfg, work, name="clean"):
    """An uninterrupted `exists: error` run of cfg in work/name; its output path."""
    d = cc.fresh_dir(os.path.join(work, name))
    r = run(args, ["run", cfg, "--report", "rep.json"], d)
    c.check(f"{name}: the uninterrupted run (exists: error) exits 0", r.returncode == 0,
            cc.describe(r))
    return os.path.join(d, "out.zarr")


def auto_run(c, args, label, cfg, d, ranks=0, extra=()):
    r = run(args, ["run", cfg, "--report", "rep.json"] + AUTO + list(extra), d, ranks)
    c.check(f"{label}: auto exits 0", r.returncode == 0, cc.describe(r) + r.stdout[-800:])
    if ranks > 0 and r.returncode == 0:
        got = report(d).get("ranks")
        c.check(f"{label}: the report says {ranks} ranks", got == ranks, got)
    return r


def verify_ok(c, args, label, out):
    r = run(args, ["verify", out], os.path.dirname(out))
    c.check(f"{label}: shardmill verify passes", r.returncode == 0, cc.describe(r) + r.stdout)


def same_tree(c, label, ref, out):
    diffs = cc.tree_diff(ref, out)
    c.check(f"{label}: tree byte-identical to the uninterrupted run's (every file)", not diffs,
            "; ".join(diffs[:8]))


def action_is(c, label, d, want, written=None):
    out = report(d).get("output") or {}
    c.check(f"{label}: report output.action is {want!r}", out.get("action") == want, out)
    if written is not None:
        c.check(f"{label}: {written(out.get('written'))[1]}", written(out.get("written"))[0],
                out)
    return out


def small_job(work, extra=None):
    inp = os.path.join(work, "small.in.zarr")
    if not os.path.exists(inp):
        ts.make_input(inp, SMALL, 81, chunks=(16, 32, 32))
    return ts.job_config(os.path.join(work, "job.yaml"), inp, "out.zarr", extra)


def case_new(c, args, work):
    cfg = small_job(work)
    ref = clean_run(c, args, cfg, work)
    d = cc.fresh_dir(os.path.join(work, "auto-new"))
    auto_run(c, args, "no output", cfg, d)
    out = action_is(c, "no output", d, "written")
    c.check("no output: output.skipped false, found_problem null",
            out.get("skipped") is False and out.get("found_problem") is None, out)
    same_tree(c, "no output", ref, os.path.join(d, "out.zarr"))
    d = cc.fresh_dir(os.path.join(work, "auto-empty"))
    os.makedirs(os.path.join(d, "out.zarr"))
    auto_run(c, args, "an empty directory", cfg, d)
    action_is(c, "an empty directory", d, "written")
    same_tree(c, "an empty directory", ref, os.path.join(d, "out.zarr"))


def big_job(work):
    inp = os.path.join(work, "big.in.zarr")
    if not os.path.exists(inp):
        ts.make_input(inp, ts.BIG, 82)
    total = (ts.BIG[0] // 8) * (ts.BIG[1] // 32) * (ts.BIG[2] // 32)
    return ts.job_config(os.path.join(work, "big.yaml"), inp, "out.zarr"), total


def stop_with_sigterm(c, args, cfg, d, out, total):
    """Starts an auto run, sends SIGTERM once some shards exist: exit 143, no marker."""
    p = subprocess.Popen([args.shardmill, "run", cfg] + AUTO, cwd=d, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=plain_env())
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and p.poll() is None and ts.count_shards(out) < 8:
        time.sleep(0.005)
    if p.poll() is None:
        os.kill(p.pid, signal.SIGTERM)
    _, err = p.communicate(timeout=300)
    n = ts.count_shards(out)
    ok = p.returncode == 143 and 0 < n < total
    c.check(f"stopped run: SIGTERM mid-write exits 143 ({n} of {total} shards)", ok,
            f"exit {p.returncode}; {err[-600:]}")
    c.check("stopped run: the line says auto finishes it", "output.exists: resume or auto" in err,
            err[-600:])
    return ok


def case_unfinished(c, args, work):
    cfg, total = big_job(work)
    ref = clean_run(c, args, cfg, work)
    d = cc.fresh_dir(os.path.join(work, "killed"))
    out = os.path.join(d, "out.zarr")
    if ts.start_and_kill(c, "killed auto run", args.shardmill, cfg, d, out, total, AUTO):
        c.check("killed auto run: no completion marker",
                not os.path.exists(os.path.join(out, "shardmill.complete.json")))
        auto_run(c, args, "after SIGKILL", cfg, d)
        action_is(c, "after SIGKILL", d, "resumed",
                  lambda w: (isinstance(w, int) and 0 < w < total,
                             f"only the missing shards written ({w} of {total})"))
        verify_ok(c, args, "after SIGKILL", out)
        same_tree(c, "after SIGKILL", ref, out)
    d = cc.fresh_dir(os.path.join(work, "stopped"))
    out = os.path.join(d, "out.zarr")
    if stop_with_sigterm(c, args, cfg, d, out, total):
        auto_run(c, args, "after SIGTERM", cfg, d)
        action_is(c, "after SIGTERM", d, "resumed")
        verify_ok(c, args, "after SIGTERM", out)
        same_tree(c, "after SIGTERM", ref, out)


def check_untouched(c, label, out, before, marker_ino):
    after = cc.snapshot(out)
    diffs = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    c.check(f"{label}: nothing written (bytes, mtimes, modes of every entry and the root)",
            not diffs, diffs[:8])
    m = os.path.join(out, "shardmill.complete.json")
    c.check(f"{label}: the marker's inode unchanged",
            os.path.exists(m) and os.stat(m).st_ino == marker_ino)


def complete_checks(c, args, label, cfg, d, ranks=0):
    out = os.path.join(d, "out.zarr")
    before = cc.snapshot(out)
    ino = os.stat(os.path.join(out, "shardmill.complete.json")).st_ino
    time.sleep(0.05)  # an mtime written now would differ
    r = auto_run(c, args, label, cfg, d, ranks)
    lines = [ln for ln in r.stdout.splitlines() if LINE in ln]
    c.check(f"{label}: one summary line says nothing to do",
            len(lines) == 1 and "out.zarr" in lines[0], r.stdout[-800:])
    check_untouched(c, label, out, before, ino)
    o = action_is(c, label, d, "complete", lambda w: (w == 0, "written 0"))
    rep = report(d)
    c.check(f"{label}: output.skipped true, result null, shards and bytes the marker's",
            o.get("skipped") is True and rep.get("result") is None and o.get("shards", 0) > 0
            and o.get("bytes") == json.load(open(os.path.join(
                out, "shardmill.complete.json"))).get("bytes"), o)
    return out


def case_complete(c, args, work):
    cfg = small_job(work)
    d = cc.fresh_dir(os.path.join(work, "done"))
    auto_run(c, args, "first run", cfg, d)
    action_is(c, "first run", d, "written")
    out = complete_checks(c, args, "complete output", cfg, d)
    before = cc.snapshot(out)
    r = run(args, ["run", cfg, "--report", "-"] + AUTO, d)
    c.check("--report -: exit 0", r.returncode == 0, cc.describe(r))
    try:
        rep = json.loads(r.stdout)
        c.check("--report -: stdout is the JSON alone, action complete",
                rep["output"]["action"] == "complete", rep.get("output"))
    except (ValueError, KeyError, TypeError) as e:
        c.check("--report -: stdout is the JSON alone", False, f"{e}: {r.stdout[:300]}")
    c.check("--report -: the line on stderr", LINE in r.stderr, r.stderr[-500:])
    c.check("--report -: nothing written", cc.snapshot(out) == before)


def flip_a_byte(path):
    b = bytearray(open(path, "rb").read())
    b[len(b) // 2] ^= 0x40
    open(path, "wb").write(bytes(b))


def case_damaged(c, args, work):
    cfg = small_job(work)
    ref = clean_run(c, args, cfg, work)
    d = cc.fresh_dir(os.path.join(work, "hurt"))
    auto_run(c, args, "first run", cfg, d)
    out = os.path.join(d, "out.zarr")
    shards, _ = ts.shard_names(out)
    victim = sorted(shards)[len(shards) // 2]
    flip_a_byte(os.path.join(out, "c", victim))
    r = run(args, ["verify", out], d)
    c.check("the damaged output fails verify", r.returncode != 0, cc.describe(r))
    auto_run(c, args, "damaged", cfg, d)
    o = action_is(c, "damaged", d, "repaired", lambda w: (w == 1, "exactly one shard written"))
    key = "c/" + victim.replace(os.sep, "/")
    c.check("damaged: found_problem names the shard",
            str(o.get("found_problem", "")).startswith(key + ": crc32c"), o)
    verify_ok(c, args, "damaged", out)
    same_tree(c, "damaged", ref, out)


def refused(c, args, label, cfg, d, member, extra=()):
    out = os.path.join(d, "out.zarr")
    before = cc.snapshot(out)
    r = run(args, ["run", cfg] + AUTO + list(extra), d)
    c.check(f"{label}: exit 2", r.returncode == 2, cc.describe(r))
    lines = cc.one_error_line(r.stderr)
    c.check(f"{label}: one error line naming {member}", len(lines) == 1 and member in lines[0]
            and lines[0].startswith("shardmill: error: "), lines)
    after = cc.snapshot(out)
    c.check(f"{label}: nothing touched", after == before,
            sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))[:8])


def case_different(c, args, work):
    cfg = small_job(work)
    d = cc.fresh_dir(os.path.join(work, "other"))
    auto_run(c, args, "first run", cfg, d)
    refused(c, args, "another normalize.divisor", cfg, d,
            "differs from this job's in attributes.shardmill.config_sha256",
            ["--set", "normalize.divisor=100"])
    # the same configuration, the input's metadata changed (rechunked in place, same values)
    import zarr
    inp = os.path.join(work, "small.in.zarr")
    vals = zarr.open(inp, mode="r")[:]
    zarr.open(inp, mode="w", shape=vals.shape, chunks=(20, 48, 48), dtype="u1")[:] = vals
    refused(c, args, "the input rechunked", cfg, d,
            "differs from this job's in attributes.shardmill.input.metadata_sha256")
    # an unfinished output of another configuration (a killed run of another divisor)
    cfg2, total = big_job(work)
    k = cc.fresh_dir(os.path.join(work, "killed-other"))
    out = os.path.join(k, "out.zarr")
    if ts.start_and_kill(c, "killed run of divisor 100", args.shardmill, cfg2, k, out, total,
                         AUTO + ["--set", "normalize.divisor=100"]):
        refused(c, args, "an unfinished output of another divisor", cfg2, k,
                "attributes.shardmill.config_sha256")
    # no shardmill output at all
    f = cc.fresh_dir(os.path.join(work, "foreign"))
    os.makedirs(os.path.join(f, "out.zarr"))
    open(os.path.join(f, "out.zarr", "notes.txt"), "w").write("mine\n")
    refused(c, args, "a directory that is no shardmill output", cfg, f, "not a shardmill output")


def case_ome(c, args, work):
    cfg = small_job(work, {"normalize": {"mode": "percentile", "lo": 1, "hi": 99},
                           "output": {"ome": {"levels": 2}, "shard": [8, 32, 32],
                                      "chunk": [4, 16, 16]}})
    ref = clean_run(c, args, cfg, work)
    d = cc.fresh_dir(os.path.join(work, "ome"))
    auto_run(c, args, "OME new", cfg, d)
    action_is(c, "OME new", d, "written")
    same_tree(c, "OME new", ref, os.path.join(d, "out.zarr"))
    out = complete_checks(c, args, "OME complete", cfg, d)
    level1 = os.path.join(out, "1")
    shards = sorted(os.path.relpath(os.path.join(p, f), level1)
                    for p, _, fs in os.walk(os.path.join(level1, "c")) for f in fs)
    flip_a_byte(os.path.join(level1, shards[0]))
    auto_run(c, args, "OME level 1 damaged", cfg, d)
    o = action_is(c, "OME level 1 damaged", d, "repaired",
                  lambda w: (w == 1, "exactly one shard written"))
    c.check("OME level 1 damaged: found_problem names the level-1 shard",
            str(o.get("found_problem", "")).startswith("1/" + shards[0].replace(os.sep, "/")), o)
    verify_ok(c, args, "OME repaired", out)
    same_tree(c, "OME repaired", ref, out)


def h5_data(path):
    import h5py
    with h5py.File(path, "r") as f:
        return f["/data"][()]


def case_export(c, args, work):
    """export.hdf5.path with a complete output: the file there -> nothing to do; missing -> the
    output is resumed (every shard kept) and the export written again, equal to the first."""
    cfg = small_job(work, {"export": {"hdf5": {"path": "out.h5"}}})
    d = cc.fresh_dir(os.path.join(work, "export"))
    r = auto_run(c, args, "export, first run", cfg, d)
    if r.returncode != 0 and "libshardmill_hdf5" in r.stderr:
        print("SKIP: no HDF5 export module in this build")
        return SKIP
    action_is(c, "export, first run", d, "written")
    h5 = os.path.join(d, "out.h5")
    first = h5_data(h5)
    h5_before = os.stat(h5)
    complete_checks(c, args, "export there", cfg, d)
    h5_after = os.stat(h5)
    c.check("export there: the HDF5 file untouched (inode, mtime)",
            (h5_before.st_ino, h5_before.st_mtime_ns) == (h5_after.st_ino, h5_after.st_mtime_ns))
    os.unlink(h5)
    auto_run(c, args, "export missing", cfg, d)
    o = action_is(c, "export missing", d, "resumed", lambda w: (w == 0, "no shard written"))
    c.check("export missing: found_problem says so",
            o.get("found_problem") == "out.h5: the export is missing", o)
    c.check("export missing: the report's export is complete",
            (report(d).get("export") or {}).get("complete") is True, report(d).get("export"))
    c.check("export missing: the new export holds the first one's values",
            os.path.exists(h5) and (h5_data(h5) == first).all())
    verify_ok(c, args, "export missing", os.path.join(d, "out.zarr"))
    return None


def need_mpi(args):
    if not args.mpiexec or not os.path.exists(args.mpiexec):
        print("SKIP: no mpiexec (--mpiexec)")
        return False
    return True


def case_mpi_complete(c, args, work):
    if not need_mpi(args):
        return SKIP
    cfg = small_job(work)
    d = cc.fresh_dir(os.path.join(work, "done"))
    auto_run(c, args, "2 ranks, first run", cfg, d, ranks=2)
    action_is(c, "2 ranks, first run", d, "written")
    complete_checks(c, args, "2 ranks, complete output", cfg, d, ranks=2)


def case_mpi_unfinished(c, args, work):
    if not need_mpi(args):
        return SKIP
    cfg, total = big_job(work)
    ref = clean_run(c, args, cfg, work)
    d = cc.fresh_dir(os.path.join(work, "killed"))
    out = os.path.join(d, "out.zarr")
    if not ts.start_and_kill(c, "killed auto run", args.shardmill, cfg, d, out, total, AUTO):
        return None
    auto_run(c, args, "2 ranks after SIGKILL", cfg, d, ranks=2)
    action_is(c, "2 ranks after SIGKILL", d, "resumed",
              lambda w: (isinstance(w, int) and 0 < w < total,
                         f"only the missing shards written ({w} of {total})"))
    verify_ok(c, args, "2 ranks after SIGKILL", out)
    same_tree(c, "2 ranks after SIGKILL", ref, out)
    complete_checks(c, args, "2 ranks, then complete", cfg, d, ranks=2)
    return None


CASES = {"new": case_new, "unfinished": case_unfinished, "complete": case_complete,
         "damaged": case_damaged, "different": case_different, "ome": case_ome,
         "export": case_export,
         "mpi_complete": case_mpi_complete, "mpi_unfinished": case_mpi_unfinished}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--mpiexec", default="")
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    args = ap.parse_args()
    args.shardmill = os.path.abspath(args.shardmill)
    work = cc.fresh_dir(os.path.abspath(os.path.join(args.work, args.case)))
    c = Checks(f"exists_auto.{args.case}")
    args.version = cc.engine_version(args.shardmill)
    if CASES[args.case](c, args, work) == SKIP:
        return SKIP
    return c.done()


if __name__ == "__main__":
    cc.main_guard(main)
