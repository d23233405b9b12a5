#!/usr/bin/python3
"""Does what runs between two conversions change the time of the next one? (W5 diagnostic)

The speedup driver (bigconvert.py) runs `shardmill verify` and an independent NumPy decode of
every output between its timed conversions. This driver times the same 512³ conversion
(configs/scaling-convert.yaml, one plain process, T threads) after each kind of interlude, the
kinds alternating round by round, and prints the median time to the completion marker and CPU
seconds per kind:

    none     nothing
    check    the independent decode of the previous output (launcher.check_output_values)
    verify   `shardmill verify` of the previous output
    sleep    2 s idle
    burn     2 s of two busy processes
    alloc    a child that allocates, touches and frees 2 GiB (NumPy)
    mpi21    a 2-rank conversion under mpirun (output deleted)
    one11    a 1-thread conversion (output deleted)

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/interlude.py --kinds none,check,sleep,burn,alloc --rounds 3

Every conversion's report is checked against the generator's oracle (launcher.run_convert).
"""

import argparse
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import time

from shardmill_test import launcher
from shardmill_test import volumes

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

SHARD = [64, 256, 256]  # the default layout of 512³ float32 (bigconvert.SHARD)
KINDS = ("none", "check", "verify", "sleep", "burn", "alloc", "mpi21", "one11")


def burn(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def alloc():
    import numpy as np
    a = np.ones(1 << 29, dtype=np.float32)
    del a


def forked(target, args, n):
    ps = [multiprocessing.get_context("fork").Process(target=target, args=args) for _ in range(n)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()


def interlude(kind, a, env, prev, tag):
    if kind == "check" and prev:
        bad, _ = launcher.check_output_values(prev, env["man"])
        if bad:
            raise SystemExit(f"check of {prev}: {bad}")
    elif kind == "verify" and prev:
        subprocess.run([a.shardmill, "verify", prev], capture_output=True, check=True)
    elif kind == "sleep":
        time.sleep(2.0)
    elif kind == "burn":
        forked(burn, (2.0,), 2)
    elif kind == "alloc":
        forked(alloc, (), 1)
    elif kind in ("mpi21", "one11"):
        ranks = 2 if kind == "mpi21" else 1
        rec = launcher.run_convert(env["mpirun"] if ranks == 2 else env["plain"], a.shardmill, a.config,
                             env["man"], ranks, 1, env["work"], "i-" + tag, SHARD, [],
                             check_values=False)
        if not rec["ok"]:
            raise SystemExit(f"interlude {kind}: {rec['problems']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shardmill", default=os.path.join(REPO, "build", "release", "jobs",
                                                         "shardmill"))
    ap.add_argument("--config", default=os.path.join(REPO, "configs", "scaling-convert.yaml"))
    ap.add_argument("--data-dir", default=os.path.join(REPO, "data", "scaling"))
    ap.add_argument("--kinds", default="none,check,verify,sleep,burn,alloc")
    ap.add_argument("--rounds", type=int, default=3, help="measured rounds (a warm-up first)")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    kinds = [k for k in a.kinds.split(",") if k]
    if not kinds or any(k not in KINDS for k in kinds):
        ap.error(f"--kinds: a comma list of {', '.join(KINDS)}")
    work = os.path.join(a.data_dir, "work")
    os.makedirs(work, exist_ok=True)
    man = volumes.ensure_volume(os.path.join(a.data_dir, "vol-512-512-512.zarr"),
                                    [512] * 3, [64] * 3, jobs=2)
    spawn = launcher.build_spawn(work)
    env = {"man": man, "work": work, "plain": launcher.Launcher("plain", spawn),
           "mpirun": launcher.Launcher("mpirun", spawn)}
    got = {k: [] for k in kinds}
    prev = None
    for rnd in range(a.rounds + 1):
        for kind in kinds:
            t0 = time.monotonic()
            interlude(kind, a, env, prev, f"{kind}-{rnd}")
            took = time.monotonic() - t0
            if prev:
                shutil.rmtree(prev, ignore_errors=True)
            tag = f"after-{kind}-{rnd}"
            rec = launcher.run_convert(env["plain"], a.shardmill, a.config, man, 1, a.threads, work,
                                 tag, SHARD, [], check_values=False, keep_output=True)
            prev = os.path.join(work, tag + ".zarr")
            if not rec["ok"]:
                raise SystemExit(f"{tag}: {rec['problems']}")
            print(f"round {rnd} after {kind:6s} ({took:5.2f} s): marker {rec['marker_s']:.3f} s, "
                  f"CPU {rec['cpu_s']:.2f} s" + (" (warm-up)" if rnd == 0 else ""), flush=True)
            if rnd > 0:
                got[kind].append((rec["marker_s"], rec["cpu_s"]))
    shutil.rmtree(prev, ignore_errors=True)
    for kind in kinds:
        print(f"after {kind:6s}: marker median {statistics.median(x[0] for x in got[kind]):.3f} s,"
              f" CPU median {statistics.median(x[1] for x in got[kind]):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
