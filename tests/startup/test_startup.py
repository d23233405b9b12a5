#!/usr/bin/python3
"""Start-up tier (label `startup`, issue 12): a plain run maps only what it uses.

MPI, the HDF5 export and the HDF5 source are shared modules the engine loads on demand
(engine/internal/shardmill/module.h): libshardmill_mpi.so when MPI ranks are initialised,
libshardmill_hdf5.so when an export is written, libshardmill_h5source.so when HDF5 input is
read. The dynamic loader says what a process loaded (LD_DEBUG=libs, "calling init: PATH" for
every shared object it initialises).

  python3 test_startup.py --shardmill BUILD/jobs/shardmill --work DIR --case CASE [--with-mpi]

Cases:
  plain    `shardmill --version`, `info` of a small local zstd array and `run` of a scan job load
           none of libmpi, Open MPI's runtime, hwloc, libhdf5, libcurl, a shardmill module,
           libblosc or what it brings (snappy, the C++ runtime); only `run` loads libyaml (a
           configuration to read); a scan of a blosc array does load libblosc (the positive
           control of the blosc part) and both scans match the values written.
  export   a convert job with export.hdf5 loads libshardmill_hdf5.so and libhdf5 (the positive
           control of `plain`: the same detection sees a module when one is loaded) and writes
           the HDF5 file; an ingest of an HDF5 dataset loads libshardmill_h5source.so and not the
           export's module.
  imports  every engine function a module calls (its undefined sm_* symbols) is exported by the
           shardmill binary (its sm_* dynamic list plus the modules' import tables), so loading a
           module can never fail on a symbol the static link dropped.
  missing  the binary copied alone into an empty directory (no modules beside it): (--with-hdf5)
           an export job and an HDF5 ingest, and (--with-mpi) a run under a launcher's environment, fail with exit 4
           and one line
           `shardmill: error: libshardmill_<m>.so: cannot load ...` before any work.
"""

import argparse
import os
import shutil
import subprocess
import sys

FORBIDDEN = ("libmpi.", "libopen-rte.", "libopen-pal.", "libhwloc.", "libhdf5", "libcurl.",
             "libshardmill_mpi.so", "libshardmill_hdf5.so", "libshardmill_h5source.so",
             "libgnutls.", "libkrb5.", "libblosc.", "libsnappy.", "libstdc++.")
ARGS = None


def fail(msg):
    print(f"FAIL {msg}")
    sys.exit(1)


def make_array(path, compressor="zstd"):
    import numpy as np
    import numcodecs
    import zarr

    comp = numcodecs.Zstd(level=1) if compressor == "zstd" else numcodecs.Blosc(cname="lz4")
    z = zarr.open(path, mode="w", shape=(24, 20, 16), chunks=(8, 8, 8), dtype="<u2",
                  compressor=comp)
    z[:] = np.arange(24 * 20 * 16, dtype=np.uint16).reshape(24, 20, 16) % 1000
    return path


def run(argv, cwd, env_extra=None, expect=0):
    env = dict(os.environ)
    for k in ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS",
              "HYDRA_CONTROL_FD", "SLURM_PROCID", "SLURM_NTASKS", "LD_DEBUG", "LD_PRELOAD"):
        env.pop(k, None)
    env.update(env_extra or {})
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env, timeout=60)
    if expect is not None and p.returncode != expect:
        fail(f"{' '.join(argv)}: exit {p.returncode}, expected {expect}\n{p.stderr[-2000:]}")
    return p


def loaded(argv, cwd, expect=0):
    """The shared objects a process initialised, by file name."""
    p = run(argv, cwd, {"LD_DEBUG": "libs"}, expect)
    libs = set()
    for line in p.stderr.splitlines():
        if "calling init:" in line:
            libs.add(os.path.basename(line.split("calling init:")[1].strip()))
    if "libc.so.6" not in libs:
        fail(f"{' '.join(argv)}: LD_DEBUG=libs reported no libc: cannot tell what was loaded")
    return libs, p


def forbidden(libs):
    bad = FORBIDDEN
    if any(x.startswith(("libasan.", "libubsan.", "libtsan.")) for x in libs):
        # a sanitizer runtime brings the C++ runtime itself
        bad = tuple(x for x in FORBIDDEN if x != "libstdc++.")
    return sorted(x for x in libs if x.startswith(bad))


def scan_job(d, arr, name="scan"):
    path = os.path.join(d, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(f"job: scan\ninput: {{store: {arr}}}\ntile: [8, 8, 8]\n"
                f"histogram: {{bins: 16, range: [0, 1024]}}\nreport: {name}-report.json\n")
    return path


def export_job(d, arr, name):
    path = os.path.join(d, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(f"job: convert\ninput: {{store: {arr}}}\ntile: [8, 8, 8]\n"
                "normalize: {mode: scale}\n"
                f"output: {{path: {name}.zarr, fsync: false, shard: [8, 8, 8], chunk: [4, 8, 8]}}\n"
                f"export:\n  hdf5: {{path: {name}.h5}}\n")
    return path


def h5_ingest_job(d, name):
    import h5py
    import numpy as np
    src = os.path.join(d, f"{name}-in.h5")
    with h5py.File(src, "w") as h:
        h["/v"] = (np.arange(8 * 8 * 8) % 1000).astype("<u2").reshape(8, 8, 8)
    path = os.path.join(d, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(f"job: ingest\ninput: {{store: {src}, hdf5: {{dataset: /v}}}}\n"
                f"output: {{path: {name}.zarr, fsync: false}}\nreport: {name}-report.json\n")
    return path


def case_plain(work, arr):
    sm = ARGS.shardmill
    for argv in ([sm, "--version"], [sm, "info", arr], [sm, "run", scan_job(work, arr), "-q"]):
        libs, _ = loaded(argv, work)
        bad = forbidden(libs)
        # libyaml only for a configuration: `run` loads it (the positive control), the others not
        yaml = any(x.startswith("libyaml") for x in libs)
        if yaml != (argv[1] == "run"):
            bad.append(f"libyaml {'loaded' if yaml else 'not loaded'}")
        if bad:
            fail(f"{' '.join(argv[1:2])}: a plain process loaded {', '.join(bad)}")
        print(f"ok {' '.join(argv[1:2])}: {len(libs)} shared objects, none of "
              "MPI/HDF5/curl/blosc")
    barr = make_array(os.path.join(work, "blosc.zarr"), "blosc")
    libs, _ = loaded([sm, "run", scan_job(work, barr, "bscan"), "-q"], work)
    if "libblosc.so.1" not in libs:
        fail(f"a scan of a blosc array did not load libblosc: {sorted(libs)}")
    import json
    import numpy as np
    res = [json.load(open(os.path.join(work, f"{n}-report.json")))["result"]
           for n in ("scan", "bscan")]
    want = int((np.arange(24 * 20 * 16) % 1000).sum())  # the values make_array wrote
    for r in res:
        if int(r["checksum"]) != want or sum(r["histogram"]["counts"]) != 24 * 20 * 16:
            fail(f"a scan gave checksum {r['checksum']} over {sum(r['histogram']['counts'])} "
                 f"values, expected {want} over {24 * 20 * 16}")
    if res[0]["histogram"] != res[1]["histogram"]:
        fail("the zstd and blosc scans disagree")
    print("ok a scan of a blosc array loads libblosc; both scans match the values written")


def case_export(work, arr):
    libs, _ = loaded([ARGS.shardmill, "run", export_job(work, arr, "exp"), "-q"], work)
    for need in ("libshardmill_hdf5.so", ):
        if need not in libs:
            fail(f"an export run did not load {need}: {sorted(libs)}")
    if not any(x.startswith("libhdf5") for x in libs):
        fail(f"an export run loaded no libhdf5: {sorted(libs)}")
    if not os.path.isfile(os.path.join(work, "exp.h5")):
        fail("the export run wrote no exp.h5")
    import h5py
    with h5py.File(os.path.join(work, "exp.h5"), "r") as h:
        data, hist = h["/data"], h["/histogram"][...]
        if data.shape != (24, 20, 16) or data.dtype != "float32":
            fail(f"exp.h5 /data is {data.shape} {data.dtype}, expected (24, 20, 16) float32")
        if int(hist.sum()) != 24 * 20 * 16:
            fail(f"exp.h5 /histogram counts {int(hist.sum())} values, expected {24 * 20 * 16}")
    print(f"ok export: libshardmill_hdf5.so and {[x for x in libs if x.startswith('libhdf5')]} "
          "loaded, exp.h5 written")
    # HDF5 input is source/'s own module: an ingest loads it, and not the export's
    libs, _ = loaded([ARGS.shardmill, "run", h5_ingest_job(work, "h5in"), "-q"], work)
    if "libshardmill_h5source.so" not in libs or "libshardmill_hdf5.so" in libs:
        fail(f"an HDF5 ingest loaded {sorted(x for x in libs if x.startswith('libshardmill'))}, "
             "expected libshardmill_h5source.so alone")
    print("ok HDF5 ingest: libshardmill_h5source.so loaded, the export's module not")


def dyn_symbols(path, undefined):
    p = subprocess.run(["nm", "-D", "--undefined-only" if undefined else "--defined-only", path],
                       capture_output=True, text=True, check=True)
    return {ln.split()[-1].split("@")[0] for ln in p.stdout.splitlines() if ln.strip()}


def case_imports(work, arr):
    del work, arr
    d = os.path.dirname(os.path.abspath(ARGS.shardmill))
    mods = sorted(f for f in os.listdir(d) if f.startswith("libshardmill_") and f.endswith(".so"))
    if not mods:
        fail(f"no libshardmill_*.so beside {ARGS.shardmill}")
    exported = dyn_symbols(ARGS.shardmill, False)
    for m in mods:
        need = {s for s in dyn_symbols(os.path.join(d, m), True) if s.startswith("sm_")}
        if not need:
            fail(f"{m} calls no engine function: the check would prove nothing")
        missing = sorted(need - exported)
        if missing:
            fail(f"{m} calls {', '.join(missing)}, which shardmill does not export (add them to "
                 "the module's import table)")
        print(f"ok {m}: its {len(need)} engine imports are exported by shardmill")


def case_missing(work, arr):
    lone = os.path.join(work, "lone")
    os.makedirs(lone, exist_ok=True)
    sm = os.path.join(lone, "shardmill")
    shutil.copy2(ARGS.shardmill, sm)
    checks = []
    if ARGS.with_hdf5:
        checks.append(("libshardmill_hdf5.so", [sm, "run", export_job(work, arr, "miss"), "-q"], {}))
        checks.append(("libshardmill_h5source.so", [sm, "run", h5_ingest_job(work, "h5miss"),
                                                     "-q"], {}))
    if ARGS.with_mpi:
        checks.append(("libshardmill_mpi.so", [sm, "run", scan_job(work, arr), "-q"],
                       {"OMPI_COMM_WORLD_SIZE": "2"}))
    for mod, argv, env in checks:
        p = run(argv, work, env, expect=4)
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("shardmill: error:")]
        if len(lines) != 1 or not lines[0].startswith(f"shardmill: error: {mod}: cannot load"):
            fail(f"without {mod}: expected one line 'shardmill: error: {mod}: cannot load ...', "
                 f"got {p.stderr!r}")
        print(f"ok missing {mod}: {lines[0][:110]}...")
    if os.path.exists(os.path.join(work, "miss.h5")):
        fail("an export without its module left miss.h5")


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--case", required=True, choices=["plain", "export", "imports", "missing"])
    ap.add_argument("--with-mpi", action="store_true")
    ap.add_argument("--with-hdf5", action="store_true")
    ARGS = ap.parse_args()
    ARGS.shardmill = os.path.abspath(ARGS.shardmill)
    work = os.path.abspath(ARGS.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    arr = make_array(os.path.join(work, "in.zarr"))
    globals()[f"case_{ARGS.case}"](work, arr)
    print("PASS")


if __name__ == "__main__":
    main()
