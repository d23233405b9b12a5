"""output.exists: auto never keeps a stale output (issue 32 item 1; SPEC §6.5, docs/internals/
writing.md "Exists policies"): the input's identity covers what a user cannot set back (realpath,
device, inode, st_ctim of every file read) and keys on the resolved input, not on its spelling.

Usage: /usr/bin/python3 test_convert_auto_identity.py --shardmill BIN --work DIR --case CASE
Cases (one ctest each: convert.auto_identity.<case>):
  zarr_rewritten   a Zarr input (zarr-python) whose chunk files are rewritten in place with other
                   values, .zarray untouched and every mtime restored.
  raw_replaced     a raw source replaced by another file of the same size (rename over it), its
                   mtime restored with os.utime (touch -d); then the same file rewritten in place
                   (same inode), mtime restored.
  tiff_replaced    one slice of a TIFF directory replaced by another of the same size, the
                   slice's and the directory's mtime restored.
  symlink_flipped  a symbolic link (latest.raw) flipped from one scan to another of the same size
                   and mtime.
  spelling         a Zarr input named ./rel.zarr, rel.zarr/ and by its absolute path, and a raw
                   source named ./a.raw and absolutely: one job -- auto says complete.
  http             an HTTP Zarr input without a marker: auto resumes (re-reads, nothing written
                   when unchanged; chunks rewritten -> byte-identical to a clean run); a
                   shardmill output served as the input: complete while its marker stands,
                   refused naming the input once it is rewritten.
After each change of the input, auto may only refuse naming the input (exit 2, "differs from this
job's in attributes.shardmill.input...", the output untouched) or write an output byte-identical
to a clean run on the new input that passes verify; never exit 0 with "complete".
Prints one ok/FAIL line per check and a closing count; exit 1 on any failure.
"""

import json
import os
import shutil
import subprocess

import numpy as np

from shardmill_test import runner as cc
from shardmill_test.ranks import plain_env

SHAPE = (16, 64, 64)
AUTO = ["--set", "output.exists=auto"]
LINE = "is already complete and verified: nothing to do"
OUTPUT = {"path": "out.zarr", "fsync": False, "shard": [8, 32, 32], "chunk": [4, 16, 16]}


def run(args, cmd, cwd):
    return subprocess.run([args.shardmill] + cmd, cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=plain_env())


def job(path, inp):
    cfg = {"job": "convert", "input": inp, "normalize": {"mode": "scale"},
           "output": dict(OUTPUT), "parallel": {"threads": 1}, "progress": False}
    return cc.write_config(path, cfg)


def raw_input(store):
    return {"store": store, "format": "raw",
            "raw": {"dtype": "uint8", "shape": list(SHAPE)}}


def values(seed):
    return np.random.default_rng(seed).integers(0, 256, SHAPE, dtype=np.uint8)


def first_run(c, args, label, cfg, d):
    r = run(args, ["run", cfg, "--report", "rep.json"] + AUTO, d)
    c.check(f"{label}: the first auto run exits 0", r.returncode == 0, cc.describe(r))
    return os.path.join(d, "out.zarr")


def after_change(c, args, label, cfg, d, clean_inputs):
    """auto after the input changed: a refusal naming the input (nothing touched) or an output
    byte-identical to a clean run on the new input (clean_inputs() sets one up in a new
    directory and returns its config)."""
    out = os.path.join(d, "out.zarr")
    before = cc.snapshot(out)
    r = run(args, ["run", cfg, "--report", "rep2.json"] + AUTO, d)
    c.check(f"{label}: auto does not say complete", LINE not in r.stdout + r.stderr,
            cc.describe(r) + r.stdout[-400:])
    if r.returncode == 2:
        c.check(f"{label}: the refusal names the input",
                "differs from this job's in attributes.shardmill.input" in r.stderr,
                r.stderr.strip())
        c.check(f"{label}: the refused output is untouched", cc.snapshot(out) == before, "")
        return
    c.check(f"{label}: auto exits 0 or 2", r.returncode == 0, cc.describe(r))
    if r.returncode != 0:
        return
    act = (json.load(open(os.path.join(d, "rep2.json"))).get("output") or {}).get("action")
    c.check(f"{label}: the report's action is not complete", act != "complete", act)
    cd, ccfg = clean_inputs()
    rc = run(args, ["run", ccfg], cd)
    c.check(f"{label}: a clean run on the new input exits 0", rc.returncode == 0, cc.describe(rc))
    diffs = cc.tree_diff(os.path.join(cd, "out.zarr"), out)
    c.check(f"{label}: the output is byte-identical to the clean run's", not diffs,
            "; ".join(diffs[:6]))
    v = run(args, ["verify", out], d)
    c.check(f"{label}: verify passes", v.returncode == 0, cc.describe(v))


def keep_mtime(path):
    st = os.stat(path)
    return lambda: os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def case_zarr_rewritten(c, args, work):
    import zarr
    d = cc.fresh_dir(os.path.join(work, "zarr"))
    inp = os.path.join(d, "in.zarr")
    other = os.path.join(d, "other.zarr")
    zarr.open(inp, mode="w", shape=SHAPE, chunks=(8, 32, 32), dtype="u1")[:] = values(1)
    zarr.open(other, mode="w", shape=SHAPE, chunks=(8, 32, 32), dtype="u1")[:] = values(2)
    cfg = job(os.path.join(d, "job.yaml"), {"store": inp})
    first_run(c, args, "zarr", cfg, d)
    meta = open(os.path.join(inp, ".zarray"), "rb").read()
    n = 0
    for name in sorted(os.listdir(inp)):
        if name.startswith("."):
            continue
        restore = keep_mtime(os.path.join(inp, name))
        with open(os.path.join(inp, name), "wb") as f:  # in place: the same inode
            f.write(open(os.path.join(other, name), "rb").read())
        restore()
        n += 1
    c.check(f"zarr: {n} chunk files rewritten in place, .zarray unchanged",
            n == 8 and open(os.path.join(inp, ".zarray"), "rb").read() == meta, n)

    def clean():
        cd = cc.fresh_dir(os.path.join(work, "zarr-clean"))
        return cd, job(os.path.join(cd, "job.yaml"), {"store": inp})
    after_change(c, args, "zarr chunks rewritten", cfg, d, clean)


def case_raw_replaced(c, args, work):
    d = cc.fresh_dir(os.path.join(work, "raw"))
    inp = os.path.join(d, "scan.raw")
    values(3).tofile(inp)
    cfg = job(os.path.join(d, "job.yaml"), raw_input(inp))

    def clean():
        cd = cc.fresh_dir(os.path.join(work, "raw-clean"))
        return cd, job(os.path.join(cd, "job.yaml"), raw_input(inp))
    first_run(c, args, "raw", cfg, d)
    restore = keep_mtime(inp)
    values(4).tofile(inp + ".new")
    os.replace(inp + ".new", inp)  # another file of the same size under the same name
    restore()
    after_change(c, args, "raw replaced (mtime restored)", cfg, d, clean)

    shutil.rmtree(os.path.join(d, "out.zarr"))
    first_run(c, args, "raw again", cfg, d)
    restore = keep_mtime(inp)
    with open(inp, "r+b") as f:  # in place: the same inode, the same size
        f.write(values(5).tobytes())
    restore()
    after_change(c, args, "raw rewritten in place (mtime restored)", cfg, d, clean)


def case_tiff_replaced(c, args, work):
    import tifffile
    d = cc.fresh_dir(os.path.join(work, "tiff"))
    stack = os.path.join(d, "stack")
    os.makedirs(stack)
    a, b = values(6), values(7)
    for z in range(SHAPE[0]):
        tifffile.imwrite(os.path.join(stack, f"s{z:03d}.tif"), a[z])
    cfg = job(os.path.join(d, "job.yaml"), {"store": stack, "format": "tiff"})
    first_run(c, args, "tiff", cfg, d)
    slice3 = os.path.join(stack, "s003.tif")
    size = os.path.getsize(slice3)
    restore, restore_dir = keep_mtime(slice3), keep_mtime(stack)
    tifffile.imwrite(slice3 + ".new", b[3])
    os.replace(slice3 + ".new", slice3)
    restore()
    restore_dir()  # the directory's mtime too: every mtime as it was
    c.check("tiff: the new slice has the old one's size", os.path.getsize(slice3) == size)

    def clean():
        cd = cc.fresh_dir(os.path.join(work, "tiff-clean"))
        return cd, job(os.path.join(cd, "job.yaml"), {"store": stack, "format": "tiff"})
    after_change(c, args, "tiff slice replaced", cfg, d, clean)


def case_symlink_flipped(c, args, work):
    d = cc.fresh_dir(os.path.join(work, "link"))
    scan_a, scan_b = os.path.join(d, "scanA.raw"), os.path.join(d, "scanB.raw")
    values(8).tofile(scan_a)
    values(9).tofile(scan_b)
    t = os.stat(scan_a).st_mtime_ns
    os.utime(scan_b, ns=(t, t))
    os.utime(scan_a, ns=(t, t))
    latest = os.path.join(d, "latest.raw")
    os.symlink("scanA.raw", latest)
    cfg = job(os.path.join(d, "job.yaml"), raw_input(latest))
    first_run(c, args, "link", cfg, d)
    os.symlink("scanB.raw", latest + ".new")
    os.replace(latest + ".new", latest)

    def clean():
        cd = cc.fresh_dir(os.path.join(work, "link-clean"))
        return cd, job(os.path.join(cd, "job.yaml"), raw_input(latest))
    after_change(c, args, "symlink flipped", cfg, d, clean)


def case_spelling(c, args, work):
    import zarr
    d = cc.fresh_dir(os.path.join(work, "spelling"))
    zarr.open(os.path.join(d, "rel.zarr"), mode="w", shape=SHAPE, chunks=(8, 32, 32),
              dtype="u1")[:] = values(10)
    values(11).tofile(os.path.join(d, "a.raw"))
    for kind, names in (("zarr", ["./rel.zarr", "rel.zarr/", os.path.join(d, "rel.zarr")]),
                        ("raw", ["./a.raw", os.path.join(d, "a.raw")])):
        out = os.path.join(d, "out.zarr")
        shutil.rmtree(out, ignore_errors=True)
        for i, name in enumerate(names):
            inp = {"store": name} if kind == "zarr" else raw_input(name)
            cfg = job(os.path.join(d, f"{kind}{i}.yaml"), inp)
            r = run(args, ["run", cfg, "--report", "rep.json"] + AUTO, d)
            act = None
            if r.returncode == 0:
                act = (json.load(open(os.path.join(d, "rep.json"))).get("output") or {}).get(
                    "action")
            want = "written" if i == 0 else "complete"
            c.check(f"{kind} input named {name!r}: auto exits 0, action {want}",
                    r.returncode == 0 and act == want, f"action {act}; " + cc.describe(r))


class Server:
    """Python's file server on 127.0.0.1 (a thread of this process) over root."""

    def __init__(self, root):
        import functools
        import http.server
        import threading

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, fmt, *a):
                pass
        self.srv = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(Quiet, directory=root))
        self.srv.daemon_threads = True
        self.thread = threading.Thread(target=self.srv.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def url(self, path):
        return f"http://127.0.0.1:{self.srv.server_address[1]}/{path}"

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def auto_action(c, args, label, cfg, d):
    r = run(args, ["run", cfg, "--report", "rep.json"] + AUTO, d)
    c.check(f"{label}: auto exits 0", r.returncode == 0, cc.describe(r))
    if r.returncode != 0:
        return {}, r
    return json.load(open(os.path.join(d, "rep.json"))).get("output") or {}, r


def case_http(c, args, work):
    """An HTTP Zarr input: without a marker nothing cheap binds its values, so auto never says
    complete: it resumes, re-reading every shard against its values digest -- nothing written
    when the input is the same, an output byte-identical to a clean run's when its chunks were
    rewritten. A shardmill output as the input: its marker's SHA-256 is the identity (complete
    while it stands, refused naming the input once the served output is rewritten)."""
    import zarr
    d = cc.fresh_dir(os.path.join(work, "http"))
    serve = cc.fresh_dir(os.path.join(d, "serve"))
    inp = os.path.join(serve, "in.zarr")
    zarr.open(inp, mode="w", shape=SHAPE, chunks=(8, 32, 32), dtype="u1")[:] = values(12)
    srv = Server(serve)
    try:
        cfg = job(os.path.join(d, "job.yaml"), {"store": srv.url("in.zarr")})
        first_run(c, args, "http", cfg, d)
        out = os.path.join(d, "out.zarr")
        before = {k: v[0] for k, v in cc.snapshot(out).items()}
        got, _ = auto_action(c, args, "http, the same input", cfg, d)
        c.check("http, the same input: resumed (no marker binds the values), nothing written",
                got.get("action") == "resumed" and got.get("written") == 0 and
                "values digest" in str(got.get("found_problem")), got)
        c.check("http, the same input: every file's bytes unchanged",
                {k: v[0] for k, v in cc.snapshot(out).items()} == before)
        other = zarr.open(inp, mode="r+")
        other[:] = values(13)  # the chunks rewritten, .zarray the same
        got, _ = auto_action(c, args, "http, chunks rewritten", cfg, d)
        c.check("http, chunks rewritten: resumed, every shard rewritten",
                got.get("action") == "resumed" and got.get("written") == 8, got)
        cd = cc.fresh_dir(os.path.join(d, "clean"))
        rc = run(args, ["run", cfg], cd)
        c.check("http: a clean run on the new input exits 0", rc.returncode == 0,
                cc.describe(rc))
        diffs = cc.tree_diff(os.path.join(cd, "out.zarr"), out)
        c.check("http, chunks rewritten: byte-identical to the clean run's", not diffs,
                "; ".join(diffs[:6]))
        v = run(args, ["verify", out], d)
        c.check("http, chunks rewritten: verify passes", v.returncode == 0, cc.describe(v))

        # a shardmill output served as the input: bound by its marker
        src_cfg = job(os.path.join(d, "src.yaml"), {"store": inp})
        r = run(args, ["run", src_cfg, "--set", f"output.path={serve}/made.zarr"], d)
        c.check("http: a shardmill output to serve exits 0", r.returncode == 0, cc.describe(r))
        md = cc.fresh_dir(os.path.join(d, "marked"))
        mcfg = job(os.path.join(md, "job.yaml"), {"store": srv.url("made.zarr")})
        first_run(c, args, "http marked", mcfg, md)
        zj = json.load(open(os.path.join(md, "out.zarr", "zarr.json")))
        c.check("http marked: the provenance binds the input by its marker's SHA-256",
                len(str(zj["attributes"]["shardmill"]["input_state"].get("marker_sha256", "")))
                == 64, zj["attributes"]["shardmill"].get("input_state"))
        got, _ = auto_action(c, args, "http marked, unchanged", mcfg, md)
        c.check("http marked, unchanged: complete", got.get("action") == "complete", got)
        other[:] = values(14)
        r = run(args, ["run", src_cfg, "--set", f"output.path={serve}/made.zarr", "--set",
                       "output.exists=overwrite"], d)
        c.check("http: the served output rewritten from a new input", r.returncode == 0,
                cc.describe(r))
        r = run(args, ["run", mcfg] + AUTO, md)
        # (its zarr.json's statistics changed too: metadata_sha256 is the first member named)
        c.check("http marked, its input rewritten: refused naming the input",
                r.returncode == 2 and "differs from this job's in attributes.shardmill.input."
                in r.stderr, cc.describe(r))
    finally:
        srv.close()


CASES = {"zarr_rewritten": case_zarr_rewritten, "raw_replaced": case_raw_replaced,
         "tiff_replaced": case_tiff_replaced, "symlink_flipped": case_symlink_flipped,
         "spelling": case_spelling, "http": case_http}


def main():
    return cc.case_main("auto_identity", CASES)


if __name__ == "__main__":
    cc.main_guard(main)
