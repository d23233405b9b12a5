"""Peak memory of hostile inputs (issue 10: "decoders never trust a size the input declares").

Usage: /usr/bin/python3 rss_bounds.py --shardmill BIN --dir OUTDIR [--max-rss-mib N] [--case NAME]

Builds stores whose one bad chunk declares (or decodes to) far more than the limits allow, runs
`shardmill read` on each, and checks the exit code (SPEC §4: 3 for a header that cannot be true,
5 for a limit), the one `shardmill: error:` line with its substrings, and the child's peak resident
set (os.wait4's ru_maxrss) below --max-rss-mib. The bombs are real: a gzip member and zstd frames
that decode to 1 GiB of zeros (about 1 MiB and 32 KiB on disk, generated here, never committed),
so a decoder that trusts them, or sizes a buffer from them, shows up as a gigabyte of RSS.
A control read of a valid chunk of each store under the same flags must succeed.
Prints one line per case; the last line is "rss_bounds: N passed, N failed".
"""

import argparse
import functools
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys

import bad_cases as bc

GIB = 1 << 30
LIMIT = ["--max-chunk-bytes", "16MiB"]


@functools.lru_cache(maxsize=None)
def gzip_gib():
    """One gzip member of 1 GiB of zeros (about 1 MiB; deflating it takes seconds: built once)."""
    return bc.gzip_zeros(GIB)


def _read(store, out, offset, shape, extra=()):
    return ["read", store, "--offset", offset, "--shape", shape, "-o", out, *extra]


def _chunk(b2b, blob, dtype="<u2"):
    return lambda d: bc.chunk_store(d, b2b, blob(), dtype=dtype)


def n5_bomb_store(d, sizes):
    """An N5 dataset (uint16, dimensions [10, 10], blockSize [5, 5], gzip) whose block 0/0 has a
    header of `sizes` (fastest first) and the 1 GiB gzip bomb as its payload; block 1/1 is
    valid."""
    store = os.path.join(d, "a.n5")
    os.makedirs(os.path.join(store, "0"))
    os.makedirs(os.path.join(store, "1"))
    with open(os.path.join(store, "attributes.json"), "w") as f:
        json.dump({"dimensions": [10, 10], "blockSize": [5, 5], "dataType": "uint16",
                   "compression": {"type": "gzip", "level": 1}}, f)
    with open(os.path.join(store, "0", "0"), "wb") as f:
        f.write(struct.pack(">HHII", 0, 2, *sizes) + gzip_gib())
    with open(os.path.join(store, "1", "1"), "wb") as f:
        f.write(struct.pack(">HHII", 0, 2, 5, 5)
                + gzip.compress(bytes(range(50)), mtime=0))
    return store


# name, builder(dir) -> store, extra flags, expected exit, substrings of the error line, control
# (offset, shape) of a valid region or None.
CASES = [
    ("gzip_bomb_1gib", _chunk(["zstd", "gzip"], gzip_gib), LIMIT, 5,
     ["c/0/0", "gzip", "1073741824", "limits.max_chunk_bytes"], ("5,5", "5,5")),
    ("gzip_bomb_1gib_isize_lie", _chunk(["zstd", "gzip"],
                                        lambda: bc.set_isize(gzip_gib(), 1000)),
     LIMIT, 5, ["c/0/0", "gzip", "16777216", "limits.max_chunk_bytes"], ("5,5", "5,5")),
    ("sharded_inner_gzip_bomb_1gib", lambda d: bc.sharded_bomb_store(d, gzip_gib()), LIMIT, 5,
     ["c/0/0", "inner chunk", "gzip", "1073741824", "limits.max_chunk_bytes"], ("4,4", "4,4")),
    ("zstd_frame_claims_4gib", _chunk(["gzip", "zstd"], lambda: bc.zstd_content_size_lie(4 * GIB)),
     [], 3, ["c/0/0", "zstd", "4294967296"], ("5,5", "5,5")),
    ("zstd_bomb_1gib", _chunk(["gzip", "zstd"], lambda: bc.zstd_rle_zeros(GIB)), LIMIT, 5,
     ["c/0/0", "zstd", "1073741824", "limits.max_chunk_bytes"], ("5,5", "5,5")),
    ("zstd_streamed_bomb_1gib", _chunk(["gzip", "zstd"],
                                       lambda: bc.zstd_rle_zeros(GIB, content_size=False)),
     LIMIT, 5, ["c/0/0", "zstd", "16777216", "limits.max_chunk_bytes"], ("5,5", "5,5")),
    ("blosc_header_claims_2gib", _chunk(["zstd", "blosc"],
                                        lambda: bc.blosc_one_block_lie(0x7FFFFF00), "u1"),
     [], 3, ["c/0/0", "blosc", "2147483392", "more than any codec blosc uses can expand"],
     ("5,5", "5,5")),
    ("blosc_header_blocks_lie", _chunk(["zstd", "blosc"],
                                       lambda: bc.blosc_many_blocks_lie(0x7FFFFF00), "u1"),
     [], 3, ["c/0/0", "blosc", "blocks"], ("5,5", "5,5")),
    # N5: a whole block's payload must decode to exactly the block; a truncated block's payload
    # decodes under a bound of its own size (2 bytes here), whatever the gzip trailer says.
    ("n5_whole_block_gzip_bomb_1gib", lambda d: n5_bomb_store(d, (5, 5)), [], 3,
     ["0/0", "gzip", "more than the expected size"], ("5,5", "5,5")),
    ("n5_truncated_block_gzip_bomb_1gib", lambda d: n5_bomb_store(d, (1, 1)), [], 3,
     ["0/0", "N5 block data decodes to more than the 2 bytes"], ("5,5", "5,5")),
    ("shard_index_2_62_entries", lambda d: bc.huge_index_store(d, [2**31, 2**31], [1, 1]), [],
     3, ["zarr.json", "too many inner chunks"], None),
    ("shard_index_2_59_entries", lambda d: bc.huge_index_store(d, [2**59], [1]), [], 5,
     ["c/0", "limits.max_object_bytes"], None),
    ("shard_index_2_31_entries_no_object_limit", lambda d: bc.huge_index_store(d, [2**31], [1]),
     ["--max-object-bytes", "1024TiB"], 3, ["c/0", "shorter than"], None),
]


# Linux carries a process's peak RSS across exec (and a vfork child's is its parent's), so a child
# started from this interpreter, with NumPy and zarr loaded, would report this interpreter's RSS.
# A bare interpreter (-S -I, no imports beyond os) starts the command and reports its wait4 peak
# (and the exit status) through the pipe whose descriptor it is given.
LAUNCHER = """
import os, sys
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ,
                     file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
_, status, ru = os.wait4(pid, 0)
os.write(int(sys.argv[1]), b"%d %d" % (os.waitstatus_to_exitcode(status), ru.ru_maxrss))
"""


def run_measured(cmd):
    """Runs cmd; returns (exit code, stderr text, peak RSS in KiB of that child)."""
    r, w = os.pipe()
    p = subprocess.Popen([sys.executable, "-S", "-I", "-c", LAUNCHER, str(w), *cmd],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(w,))
    os.close(w)
    err = p.stderr.read()
    p.wait()
    with os.fdopen(r, "rb") as f:
        res = f.read().split()
    if p.returncode != 0 or len(res) != 2:
        return -1, f"launcher failed ({p.returncode}): " + err.decode(errors="replace"), 0
    return int(res[0]), err.decode(errors="replace"), int(res[1])


def check(sm, outdir, case, max_rss_kib):
    name, build, extra, code, must, control = case
    d = os.path.join(outdir, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    store = build(d)
    out = os.path.join(d, "region.bin")
    ndim = 1 if "2_59" in name or "2_31" in name else 2
    offset, shape = ",".join(["0"] * ndim), ",".join(["1"] * ndim)
    rc, err, rss = run_measured([sm] + _read(store, out, offset, shape, extra))
    problems = []
    if rc != code:
        problems.append(f"exit {rc}, expected {code}")
    lines = err.split("\n")
    if not (len(lines) == 2 and lines[1] == "" and lines[0].startswith("shardmill: error: ")):
        problems.append(f"stderr is not one 'shardmill: error: ' line: {err!r}")
    for s in must:
        if s.lower() not in err.lower():
            problems.append(f"message lacks {s!r}: {err.strip()!r}")
    if rss > max_rss_kib:
        problems.append(f"peak RSS {rss // 1024} MiB, at most {max_rss_kib // 1024} MiB allowed")
    if os.path.exists(out):
        problems.append("a failed read left its output file")
    if control is not None:
        c = subprocess.run([sm] + _read(store, out, *control, extra), capture_output=True)
        if c.returncode != 0:
            problems.append(f"control read failed: {c.stderr.decode(errors='replace').strip()!r}")
    return problems, rss


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--max-rss-mib", type=int, default=128)
    ap.add_argument("--case", action="append")
    a = ap.parse_args(argv[1:])
    os.makedirs(a.dir, exist_ok=True)
    passed = failed = 0
    for case in CASES:
        if a.case and case[0] not in a.case:
            continue
        problems, rss = check(os.path.abspath(a.shardmill), a.dir, case, a.max_rss_mib * 1024)
        if problems:
            failed += 1
            for p in problems:
                print(f"FAIL {case[0]}: {p}")
        else:
            passed += 1
            print(f"ok   {case[0]} (peak RSS {rss / 1024:.1f} MiB)")
        shutil.rmtree(os.path.join(a.dir, case[0]), ignore_errors=True)
    print(f"rss_bounds: {passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
