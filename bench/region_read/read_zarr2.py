"""W3 peer reader: zarr-python 2.13 (Debian python3-zarr) reads a region of a 2-D Zarr v2 array.

    /usr/bin/python3 read_zarr2.py STORE R0,C0 H,W OUT_FILE

Writes the region as raw little-endian values (C order) to OUT_FILE for the driver to check
against the formula, and prints one JSON line: open_ns (zarr.open), read_ns (the slice
`z[r0:r0+h, c0:c0+w]` only, the in-process read alone), import_ns (import zarr).
"""

import json
import sys
import time

t_import = time.perf_counter_ns()
import numpy as np  # noqa: E402
import zarr  # noqa: E402

t_imported = time.perf_counter_ns()


def main(argv):
    store, off, shape, out = argv[1:5]
    r0, c0 = (int(x) for x in off.split(","))
    h, w = (int(x) for x in shape.split(","))
    t0 = time.perf_counter_ns()
    z = zarr.open(store, mode="r")
    t1 = time.perf_counter_ns()
    region = z[r0:r0 + h, c0:c0 + w]
    t2 = time.perf_counter_ns()
    np.ascontiguousarray(region, dtype=region.dtype.newbyteorder("<")).tofile(out)
    print(json.dumps({"peer": "zarr-python", "zarr": zarr.__version__,
                      "import_ns": t_imported - t_import, "open_ns": t1 - t0,
                      "read_ns": t2 - t1, "dtype": str(region.dtype),
                      "shape": list(region.shape)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
