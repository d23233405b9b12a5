#!/usr/bin/python3
"""Read-back peer of bench/hdf5: h5py (Debian python3-h5py, HDF5 1.10.8) reads a whole dataset.

    /usr/bin/python3 read_h5py.py FILE.h5 DATASET OUT.raw

Prints one JSON line {"read_ms", "open_ms", "shape", "dtype", "chunks", "compression"}: read_ms
times `ds[...]` only (the whole array into one NumPy array), open_ms the file and dataset open.
The values are then written to OUT.raw (little-endian, C order) for the driver to check, outside
the timed interval."""
import json
import sys
import time

import h5py
import numpy as np

path, name, out = sys.argv[1:4]
t0 = time.perf_counter_ns()
f = h5py.File(path, "r")
ds = f[name]
t1 = time.perf_counter_ns()
a = ds[...]
t2 = time.perf_counter_ns()
info = {"read_ms": (t2 - t1) / 1e6, "open_ms": (t1 - t0) / 1e6, "shape": list(a.shape),
        "dtype": a.dtype.str, "chunks": list(ds.chunks or []), "compression": ds.compression}
f.close()
np.ascontiguousarray(a, dtype="<f4").tofile(out)
print(json.dumps(info))
