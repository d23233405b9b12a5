#!/usr/bin/python3
"""`shardmill info` applies limits.max_object_bytes to the metadata it reads (issue 19): a
zarr.json response declaring a Content-Length of 2^62 (tests/lib/shardmill_test/fault_server.py, fault
"length", on 127.0.0.1) is exit 5 naming the limit, before anything is allocated (it was exit 1
"cannot allocate"); the default is 512MiB as for scan and read, `--max-object-bytes` sets it
(a real zarr.json of some 300 bytes over a 100-byte limit is exit 5, from HTTP and from files; 0 is a
usage error), and the same store without the fault is described (exit 0).

Usage: /usr/bin/python3 test_info_limits.py --shardmill BIN
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from shardmill_test.checks import Checks
from shardmill_test.fault_server import FaultServer

C = Checks("http.info_limits")
check = C.check


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    return r, lines


def expect(label, cmd, code, names):
    r, lines = run(cmd)
    check(f"{label}: exit {code}", r.returncode == code, f"exit {r.returncode}: {r.stderr}")
    check(f"{label}: one error line naming {names}",
          len(lines) == 1 and lines[0].startswith("shardmill: error: ") and
          all(n in lines[0] for n in names), lines)
    check(f"{label}: nothing on stdout", r.stdout == "", r.stdout[:200])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    args = ap.parse_args()
    sm = os.path.abspath(args.shardmill)
    with tempfile.TemporaryDirectory(prefix="sm-info-limits-") as root:
        os.makedirs(os.path.join(root, "a.zarr"))
        meta = {"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "uint8",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}},
                "chunk_key_encoding": {"name": "default"}, "fill_value": 0,
                "codecs": [{"name": "bytes"}]}
        doc = os.path.join(root, "a.zarr", "zarr.json")
        with open(doc, "w") as f:
            json.dump(meta, f, indent=2)
        size = os.path.getsize(doc)
        with FaultServer(root) as fs:
            url = fs.url + "/a.zarr"
            huge = [{"path": "a.zarr/zarr.json", "fault": "length", "length": 2**62,
                     "times": 100}]
            fs.set_faults(huge)
            expect("Content-Length 2^62, default limit", [sm, "info", url], 5,
                   ["zarr.json", "limits.max_object_bytes", str(512 << 20), str(2**62)])
            expect("Content-Length 2^62, --max-object-bytes 1GiB",
                   [sm, "info", url, "--max-object-bytes", "1GiB"], 5,
                   ["zarr.json", "limits.max_object_bytes", str(1 << 30)])
            fs.set_faults([])
            r, _ = run([sm, "info", "--compact", url])
            ok = r.returncode == 0
            check("the same store without the fault: exit 0", ok, r.stderr)
            if ok:
                got = json.loads(r.stdout)
                check("  and its shape", got.get("shape") == [4], got)
            expect(f"a {size}-byte zarr.json over --max-object-bytes 100 (HTTP)",
                   [sm, "info", url, "--max-object-bytes", "100"], 5,
                   ["limits.max_object_bytes", "(100)", str(size)])
        expect(f"a {size}-byte zarr.json over --max-object-bytes 100 (file)",
               [sm, "info", os.path.join(root, "a.zarr"), "--max-object-bytes=100"], 5,
               ["limits.max_object_bytes", "(100)"])
        expect("--max-object-bytes 0", [sm, "info", os.path.join(root, "a.zarr"),
                                        "--max-object-bytes", "0"], 2, ["--max-object-bytes"])
    return C.done()


if __name__ == "__main__":
    sys.exit(main())
