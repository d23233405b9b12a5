"""`shardmill run` (job: ingest) of HDF5 datasets (SPEC §2, `input.hdf5.dataset`) written by an
independent writer, h5py (Debian python3-h5py).

Usage: /usr/bin/python3 test_ingest_hdf5.py --shardmill BIN --node NODE --work DIR --group GROUP
Groups (one ctest each, label `convert`):
  types    uint8, int16, uint16, int32, float32 (NaN, +-Inf, -0.0) and float64 datasets in odd
           shapes, contiguous, chunked, chunked with gzip+shuffle, big-endian stored types, in a
           nested group (/a/b/c/data), 1-D, 2-D and 3-D; the format inferred from .h5 / .hdf5 /
           .nxs or given - every output vs the NumPy array bit for bit (report checksums,
           shardmill read, zarrita.js, the NumPy sharding decoder)
  ct       the real head CT (data/ct/matrix.dat) as a chunked gzip dataset /exchange/data: the
           ingest's shards are byte-identical to the raw CT's plain ingest; exit 77 (skipped)
           when the CT is absent
  bad      a missing file, a file that is not HDF5, a missing dataset, a missing group on the
           way, a group instead of a dataset, a compound and a string dataset, float16, a filter
           this HDF5 lacks (h5py's LZF): exit 3, one error line naming the file and the dataset,
           no output; a relative dataset path and a missing input.hdf5.dataset: exit 2
"""

import json
import os
import shutil

import numpy as np

from shardmill_test import ingest as ti
from shardmill_test import inputs
from shardmill_test import runner as cc

SKIP = 77
SHAPE = (11, 37, 45)
LAYOUT = ((4, 32, 32), (2, 16, 16))  # small shards: several per axis, partial edges


def h5py():
    import h5py as h
    return h


def volume(rng, dtype, shape=SHAPE):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        v = (rng.standard_normal(shape) * 1000).astype(dt)
        v.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
        return v
    info = np.iinfo(dt)
    v = rng.integers(info.min, info.max, shape, endpoint=True, dtype=dt)
    v.flat[:2] = [info.min, info.max]
    return v


def write_h5(path, name, vol, stored=None, **kw):
    """vol stored as `stored` (a NumPy dtype with its byte order; default vol's) at `name`."""
    with h5py().File(path, "w") as f:
        f.create_dataset(name, data=vol.astype(stored or vol.dtype), **kw)
        f.create_dataset("/other", data=np.zeros(3, np.int8))  # another dataset, ignored


def do_h5(c, args, work, label, store, dataset, want, fmt="hdf5", layout=LAYOUT,
          decode=True, stored=None, filters=None):
    out = os.path.join(work, label + ".zarr")
    shutil.rmtree(out, ignore_errors=True)
    extra = {"input": {"hdf5": {"dataset": dataset}}}
    if layout is not None:
        extra["output"] = {"shard": list(layout[0]), "chunk": list(layout[1])}
    cfg = ti.ingest_config(os.path.join(work, label + ".yaml"), store, out, fmt=fmt, extra=extra)
    rep_path = os.path.join(work, label + ".report.json")
    r = cc.run([args.shardmill, "run", cfg, "--report", rep_path], cwd=work, timeout=600)
    if not c.check(f"{label} ingest exits 0", r.returncode == 0, cc.describe(r)):
        return None
    rep = json.load(open(rep_path))
    ti.check_ingested(c, args, work, label, out, want, rep, fmt="hdf5", decode=decode,
                      layout=layout)
    inp = rep.get("input", {})
    c.check(f"{label} report input.dataset = {dataset}", inp.get("dataset") == dataset, inp)
    if stored is not None:
        c.check(f"{label} report input.stored_dtype = {stored}", inp.get("stored_dtype") == stored,
                inp)
    if filters is not None:
        c.check(f"{label} report input.filters = {filters}", inp.get("filters") == filters, inp)
    regions = [([1] * want.ndim, [max(1, s - 2) for s in want.shape])]
    return (label, out, want, regions)


def group_types(c, args, work):
    rng = np.random.default_rng(141)
    reads = []
    for dtype in ("uint8", "int16", "uint16", "int32", "float32", "float64"):
        vol = volume(rng, dtype)
        dt = np.dtype(dtype)
        # contiguous, native (little-endian) order, input.format inferred from .h5
        p = os.path.join(work, f"contig_{dtype}.h5")
        write_h5(p, "/data", vol)
        res = do_h5(c, args, work, f"contig_{dtype}", p, "/data", vol, fmt=None,
                    filters="")
        reads += [res] if res else []
        # chunked (chunks cutting across the shards), gzip + shuffle, big-endian, nested group
        p = os.path.join(work, f"gzip_{dtype}.hdf5")
        big = dt.newbyteorder(">")
        write_h5(p, "/a/b/c/data", vol, stored=big, chunks=(3, 10, 7), compression="gzip",
                 shuffle=True)
        res = do_h5(c, args, work, f"gzip_shuffle_be_{dtype}", p, "/a/b/c/data", vol,
                    stored=dtype + (" big-endian" if dt.itemsize > 1 else ""),
                    filters="shuffle,deflate")
        reads += [res] if res else []
        # the same stored native (little-endian): the raw-chunk path, each chunk inflated and
        # unshuffled by shardmill outside HDF5's lock (engine/source/source_hdf5_raw.c)
        p = os.path.join(work, f"gzip_le_{dtype}.h5")
        write_h5(p, "/data", vol, chunks=(3, 10, 7), compression="gzip", shuffle=True)
        res = do_h5(c, args, work, f"gzip_shuffle_le_{dtype}", p, "/data", vol, stored=None,
                    filters="shuffle,deflate")
        reads += [res] if res else []
    # chunks never written read as the fill value (the raw path hands such a box to H5Dread)
    vol = volume(rng, "int16", (9, 20, 14))
    p = os.path.join(work, "gzip_sparse.h5")
    with h5py().File(p, "w") as f:
        d = f.create_dataset("/data", shape=vol.shape, dtype="<i2", chunks=(3, 10, 7),
                             compression="gzip", fillvalue=-7)
        d[0:3] = vol[0:3]  # chunk planes 1 and 2 are never written
    vol[3:] = -7
    res = do_h5(c, args, work, "gzip_sparse_fill", p, "/data", vol, filters="deflate")
    reads += [res] if res else []
    # chunked without a filter, .nxs suffix, explicit format; 1-D and 2-D odd shapes
    vol = volume(rng, "uint16", (5, 3, 301))
    p = os.path.join(work, "chunked_u16.nxs")
    write_h5(p, "/entry/data/data", vol, chunks=(1, 3, 64))
    res = do_h5(c, args, work, "chunked_u16_nxs", p, "/entry/data/data", vol, fmt=None,
                layout=((2, 2, 128), (1, 1, 64)))
    reads += [res] if res else []
    vol = volume(rng, "int16", (23, 61))
    p = os.path.join(work, "two_d.h5")
    write_h5(p, "/img", vol, chunks=(7, 9), compression="gzip")
    res = do_h5(c, args, work, "two_d_int16", p, "/img", vol, layout=((16, 32), (8, 16)))
    reads += [res] if res else []
    vol = volume(rng, "float32", (1001,))
    p = os.path.join(work, "one_d.h5")
    write_h5(p, "/line", vol, stored=np.dtype(">f4"), chunks=(100,), compression="gzip",
             shuffle=True)
    res = do_h5(c, args, work, "one_d_float32_be", p, "/line", vol, layout=((512,), (128,)))
    reads += [res] if res else []
    cc.zarrita_read_all(c, args.node, work, reads)


def group_ct(c, args, work):
    ct, want = inputs.real_ct()
    if ct is None:
        return SKIP
    raw = ti.ingest_raw_ct(c, args, work, ct, want)
    h5 = os.path.join(work, "ct.h5")
    write_h5(h5, "/exchange/data", want, chunks=(8, 64, 64), compression="gzip",
             compression_opts=4, shuffle=True)
    run = do_h5(c, args, work, "ct_hdf5", h5, "/exchange/data", want, layout=ti.CT_LAYOUT,
                decode=False, filters="shuffle,deflate")
    ti.same_shards_as_raw(c, raw, [run])
    return None  # values: shardmill read in check_ingested; zarrita.js reads `types`


def expect_bad(c, args, work, label, store, dataset, code=3, names=()):
    out = os.path.join(work, label + ".zarr")
    shutil.rmtree(out, ignore_errors=True)
    extra = {"input": {"hdf5": {"dataset": dataset}}} if dataset is not None else None
    cfg = ti.ingest_config(os.path.join(work, label + ".yaml"), store, out, fmt="hdf5",
                           extra=extra)
    r = cc.run([args.shardmill, "run", cfg], cwd=work)
    lines = cc.one_error_line(r.stderr)
    c.check(f"{label}: exit {code}", r.returncode == code, cc.describe(r))
    want = [os.path.basename(store), dataset] if code == 3 else []
    want += list(names)
    c.check(f"{label}: one error line 'shardmill: error: ...' naming {want}",
            len(lines) == 1 and lines[0].startswith("shardmill: error: ") and
            all(w in lines[0] for w in want), lines)
    c.check(f"{label}: no output written", not os.path.exists(out),
            os.listdir(out) if os.path.isdir(out) else "")


def group_bad(c, args, work):
    h = h5py()
    vol = np.arange(4 * 5 * 6, dtype=np.uint16).reshape(4, 5, 6)
    p = os.path.join(work, "good.h5")
    write_h5(p, "/exchange/data", vol)
    with h.File(p, "a") as f:
        f.create_dataset("/exchange/compound",
                         data=np.zeros((2, 3, 4), dtype=[("a", "<i4"), ("b", "<f4")]))
        f.create_dataset("/exchange/names", data=np.array([b"ab", b"cd"], dtype="S2"))
        f.create_dataset("/exchange/half", data=np.zeros((2, 3, 4), np.float16))
        f.create_dataset("/exchange/lzf", data=vol, chunks=(2, 5, 6), compression="lzf")
    expect_bad(c, args, work, "missing_file", os.path.join(work, "absent.h5"), "/exchange/data")
    junk = os.path.join(work, "junk.h5")
    open(junk, "wb").write(np.random.default_rng(5).integers(0, 256, 4096, np.uint8).tobytes())
    expect_bad(c, args, work, "not_hdf5", junk, "/exchange/data", names=["not an HDF5 file"])
    expect_bad(c, args, work, "missing_dataset", p, "/exchange/nope", names=["no dataset"])
    expect_bad(c, args, work, "missing_group", p, "/scan/data", names=["/scan does not exist"])
    expect_bad(c, args, work, "group_not_dataset", p, "/exchange", names=["not a dataset"])
    expect_bad(c, args, work, "compound", p, "/exchange/compound", names=["compound"])
    expect_bad(c, args, work, "string", p, "/exchange/names", names=["string"])
    expect_bad(c, args, work, "float16", p, "/exchange/half", names=["float of 2 bytes"])
    expect_bad(c, args, work, "filter_lzf", p, "/exchange/lzf", names=["lzf"])
    expect_bad(c, args, work, "relative_dataset", p, "exchange/data", code=2,
               names=["input.hdf5.dataset"])
    expect_bad(c, args, work, "no_dataset_key", p, None, code=2, names=["input.hdf5.dataset"])


GROUPS = {"types": group_types, "ct": group_ct, "bad": group_bad}


def main():
    return cc.group_main("convert.ingest_hdf5", GROUPS, SKIP, no_node=("bad",))


if __name__ == "__main__":
    cc.main_guard(main)
