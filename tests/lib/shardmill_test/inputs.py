"""Input makers of the tests and benchmarks: TIFF stacks and multi-page files (tifffile), the
head CT of data/ (scripts/fetch-data.sh) as raw, TIFF and HDF5 sources with its voxel spacing
from main.plist, and the CT's OME pyramid job (tests/convert/test_convert_sources.py,
tests/mpi/test_mpi_sources.py)."""

import os
import shutil

import numpy as np

from shardmill_test import REPO
from shardmill_test import runner as cc


def tifffile():
    import tifffile as tf
    return tf


def write_stack(dirpath, vol, **kw):
    """One tifffile slice per file, s1.tif ... sN.tif (no zero padding: natural order)."""
    shutil.rmtree(dirpath, ignore_errors=True)
    os.makedirs(dirpath)
    for z in range(vol.shape[0]):
        tifffile().imwrite(os.path.join(dirpath, f"s{z + 1}.tif"), vol[z], **kw)
    # files that are not slices are left alone
    open(os.path.join(dirpath, "notes.txt"), "w").write("scanner notes\n")


def write_multipage(path, vol, **kw):
    tf = tifffile()
    with tf.TiffWriter(path) as w:
        for z in range(vol.shape[0]):
            w.write(vol[z], contiguous=False, **kw)


# ---- the head CT of data/ ----

CT_PLIST = os.path.join(REPO, "data", "ct", "main.plist")
# Shards of whole slices ([12, 256, 256]: 9 along z): a TIFF slice (the source's slab) is never
# cut by a shard, so no rank decodes a slice another rank's shard holds (tests/mpi too).
CT_SOURCE_LAYOUT = {"shard": [12, 256, 256], "chunk": [6, 128, 128]}
CT_H5_DATASET = "/exchange/data"
PCT = (1, 99)


def real_ct():
    """(path, int16 [108, 256, 256]) of data/ct/matrix.dat, or (None, None) when it is absent."""
    ct = os.path.join(REPO, "data", "ct", "matrix.dat")
    if not os.path.isfile(ct):
        print(f"SKIP ct: {ct} absent (run scripts/fetch-data.sh)")
        return None, None
    return ct, np.fromfile(ct, dtype="<i2").reshape(108, 256, 256).astype(np.int16)


def spacing_zyx(plist):
    """The CT's voxel spacing [z, y, x] in millimetres from main.plist (stored x, y, z)."""
    import plistlib
    with open(plist, "rb") as f:
        return [float(v) for v in plistlib.load(f)["spacing"]][::-1]


def write_ct_tiff(dirpath, vol):
    """The CT as a tifffile slice per file (s1.tif .. s108.tif), deflate (tifffile's zlib:
    Adobe deflate, TIFF tag 8; Debian's tifffile writes it without imagecodecs)."""
    write_stack(dirpath, vol, compression="zlib")
    return dirpath


def write_ct_hdf5(path, vol):
    import h5py
    with h5py.File(path, "w") as f:
        f.create_dataset(CT_H5_DATASET, data=vol, chunks=(8, 64, 64), compression="gzip",
                         compression_opts=4, shuffle=True)
    return path


def ct_input(fmt, store, spacing):
    inp = {"store": store, "format": fmt, "spacing": list(spacing), "unit": "millimeter"}
    if fmt == "hdf5":
        inp["hdf5"] = {"dataset": CT_H5_DATASET}
    return inp


def pyramid_job(path, inp, out, layout, threads=2, levels=2):
    """The job of the tiff, hdf5 and nifti groups: percentile [1, 99], an OME-Zarr image."""
    return cc.write_config(path, {
        "job": "convert", "input": inp,
        "normalize": {"mode": "percentile", "lo": PCT[0], "hi": PCT[1]},
        "output": {"path": out, "fsync": False, "shard": layout["shard"],
                   "chunk": layout["chunk"], "ome": {"levels": levels}},
        "parallel": {"threads": threads}, "progress": False})


def ct_or_skip():
    ct, vol = real_ct()
    if ct is None or not os.path.isfile(CT_PLIST):
        print("SKIP: data/ct absent (scripts/fetch-data.sh)")
        return None, None
    return vol, spacing_zyx(CT_PLIST)
