"""examples/convert_api.c against `shardmill run` (SPEC §1: the phases are the engine's).

Usage: /usr/bin/python3 test_convert_api.py --shardmill BIN --example BIN --work DIR [--mpiexec M]

A zarr-python v2 uint16 array 40x70x90 (chunks 16^3, blosc) is converted by `shardmill run`
(one process, no launcher) and by the example program, which calls only the public API
(shardmill/pipeline.h) with the same settings and the config hash `shardmill run` stored in its
zarr.json. Without --mpiexec the example runs as one process; with it, under `mpiexec -n 3
convert_api --mpi-split 2`: the program initialises MPI itself and converts on a communicator of
ranks 0-1 it split off (rank 2 only waits), so the engine must use that communicator (its summary
says 2 ranks) and leave MPI to the program. Every file of both output trees (zarr.json, shards,
completion marker, journal) must be equal byte for byte. Prints ok/FAIL lines; exit 1 on failure.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import zarr

from shardmill_test.checks import check, summary
from shardmill_test.ranks import mpi_env, plain_env


def tree(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = fh.read()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--example", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--mpiexec")
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    os.chdir(a.work)
    rng = np.random.default_rng(11)
    data = (rng.gamma(2.0, 900.0, size=(40, 70, 90))).clip(0, 65535).astype(np.uint16)
    z = zarr.open("in.zarr", mode="w", shape=data.shape, chunks=(16, 16, 16), dtype="u2")
    z[:] = data
    with open("job.yaml", "w") as f:
        f.write("job: convert\n"
                "input: {store: in.zarr}\n"
                "normalize: {mode: percentile, lo: 1.5, hi: 99}\n"
                "output: {path: cli.zarr, shard: [16, 32, 32], chunk: [8, 16, 16], "
                "fsync: false}\n")
    p = subprocess.run([a.shardmill, "run", "job.yaml", "-q"], env=plain_env(),
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"shardmill run: exit 0 (got {p.returncode}: {p.stderr.strip()})")
    if p.returncode != 0:
        return 1
    meta = json.load(open("cli.zarr/zarr.json"))
    sha = meta["attributes"]["shardmill"]["config_sha256"]
    if a.mpiexec:
        cmd = [a.mpiexec, "--oversubscribe", "-np", "3", a.example, "--mpi-split", "2",
               "in.zarr", "api.zarr", sha]
        env = mpi_env()
    else:
        cmd = [a.example, "in.zarr", "api.zarr", sha]
        env = plain_env()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"convert_api: exit 0 (got {p.returncode}: {p.stderr.strip()})")
    if p.returncode != 0:
        return 1
    want = "2 ranks" if a.mpiexec else "1 rank:"
    check(want in p.stdout, f"convert_api ran on {want.rstrip(':')} (stdout: {p.stdout.strip()})")
    check(p.stdout.count("convert_api:") == 1, "one summary line (rank 0 of the run)")
    cli, api = tree("cli.zarr"), tree("api.zarr")
    check("shardmill.complete.json" in api, "the example's output has the completion marker")
    check(sorted(cli) == sorted(api),
          f"same files ({len(cli)} vs {len(api)}; only in one: "
          f"{sorted(set(cli) ^ set(api))[:5]})")
    diff = [k for k in cli if k in api and cli[k] != api[k]]
    check(not diff, f"every file equal byte for byte (differ: {diff[:5]})")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
