"""`shardmill run` (job: convert) against the NumPy oracle of SPEC §5, read back by zarrita.js.

Usage: /usr/bin/python3 test_convert_zarrita.py --shardmill BIN --node NODE --work DIR
           --family FAMILY
Families (one ctest each, label `convert`):
  v2_uint8, v2_int16, v2_uint16   inputs written by zarr-python 2.13 (Zarr v2)
  v3_uint8                        input written by zarrita.js 0.7.5 (Zarr v3, a deleted chunk)
  threads                         parallel.threads 1 and 2 and the re-read path (no kept input)
                                  give byte-identical trees
  spec_report_scale               SPEC §7: result.normalization has lo and hi in every mode
  spec_percentile_zero            SPEC §5: percentile 0 lands in the underflow -> lo of the range
  spec_percentile_rank            SPEC §5: the rank is exactly ceil(p/100 * N)
  spec_provenance                 zarr.json does not depend on keys that do not change the output
                                  bytes (output.path, output.exists, output.fsync, threads...)
For every case: scale, window or percentile over aligned, nonaligned and edge-shard ROIs; the
report's histogram, checksums, normalization and output checksums vs NumPy; zarr.json field by
field; the completion marker field by field (sizes, crc32c via the `crc32c` module, sha256 of
zarr.json via hashlib); every output value bit for bit through zarrita.js, `shardmill read` and
an independent NumPy decoder of the sharding spec; `shardmill verify`.
Prints one ok/FAIL line per check and a closing count; exit 1 on any failure.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import struct

import numpy as np

from shardmill_test import report_json
from shardmill_test import spec_oracle
from shardmill_test import runner as cc
from shardmill_test import zarr_decode
from shardmill_test.checks import Checks

SHAPE = (50, 70, 90)
CHUNKS = (16, 16, 16)
FULL = ([0, 0, 0], list(SHAPE))                  # edge shards on every axis (50 % 8, 70 % 32...)
ALIGNED = ([16, 32, 16], [32, 32, 64])           # on input chunks and output shards
NONALIGNED = ([1, 2, 3], [45, 61, 83])           # edge shards, chunk-straddling tiles
CORNER = ([49, 69, 89], [1, 1, 1])               # one voxel, one edge shard
THIN = ([3, 0, 5], [9, 70, 1])                   # one column of shards, x extent 1


def metadata_sha256(store):
    """SHA-256 of the input's metadata documents as shardmill names them: u64 LE length of the
    document, u64 LE length of the attributes (0 without), the document, the attributes -- the
    document is zarr.json (v3), else .zarray with .zattrs if present (v2)."""
    v3 = os.path.join(store, "zarr.json")
    if os.path.exists(v3):
        doc, attrs = open(v3, "rb").read(), b""
    else:
        doc = open(os.path.join(store, ".zarray"), "rb").read()
        za = os.path.join(store, ".zattrs")
        attrs = open(za, "rb").read() if os.path.exists(za) else b""
    return hashlib.sha256(struct.pack("<QQ", len(doc), len(attrs)) + doc + attrs).hexdigest()


def values_for(dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "uint8":
        v = np.clip(rng.normal(120, 45, SHAPE), 0, 255).astype(np.uint8)
        v.flat[[0, 7, 99]] = [0, 255, 255]
    elif dtype == "int16":
        v = np.clip(rng.normal(200, 700, SHAPE), -4000, 4000).astype(np.int16)
        v.flat[[5, 6, 1000]] = [-32768, 32767, -1]
    elif dtype == "uint16":
        v = np.clip(rng.gamma(2.0, 9000.0, SHAPE), 0, 65535).astype(np.uint16)
        v.flat[[3, 4]] = [0, 65535]
    else:
        raise ValueError(dtype)
    return v


def make_v2(work, name, dtype, seed, compressor):
    import numcodecs
    import zarr
    vals = values_for(dtype, seed)
    path = os.path.join(work, name + ".in.zarr")
    comp = {"default": "default", "zstd": numcodecs.Zstd(level=1),
            "zlib": numcodecs.Zlib(level=5)}[compressor]
    kw = {} if comp == "default" else {"compressor": comp}
    z = zarr.open(path, mode="w", shape=SHAPE, chunks=CHUNKS, dtype=vals.dtype, **kw)
    z[:] = vals
    back = zarr.open(path, mode="r")[:]
    assert np.array_equal(back, vals)
    return path, vals


def make_v3_zarrita(c, node, work, name, seed):
    vals = values_for("uint8", seed)
    fill = 7
    hole = (1, 1, 1)
    sl = tuple(slice(h * k, (h + 1) * k) for h, k in zip(hole, CHUNKS))
    vals[sl] = fill  # what a reader must see for the deleted chunk (SPEC §2: fill value)
    raw = os.path.join(work, name + ".in.raw")
    vals.tofile(raw)
    path = os.path.join(work, name + ".in.zarr")
    job = {"write": [{"path": path, "raw": raw, "dtype": "uint8", "shape": list(SHAPE),
                      "chunks": list(CHUNKS), "fill_value": fill, "delete": [list(hole)],
                      "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                 {"name": "zstd", "configuration": {"level": 3,
                                                                    "checksum": False}}]}]}
    ok, text = cc.zarrita(node, job, work)
    if not c.check(f"{name} zarrita.js writes the v3 input", ok, text):
        return None, None
    return path, vals


# ---- one convert case ----

def config_for(inp, out_rel, roi, norm, hist=None, fsync=False, threads=2, extra=None):
    cfg = {"job": "convert", "input": {"store": inp}, "normalize": dict(norm),
           "output": {"path": out_rel, "fsync": fsync}, "parallel": {"threads": threads},
           "progress": False}
    if roi is not None:
        cfg["roi"] = {"offset": roi[0], "shape": roi[1]}
    if hist is not None:
        cfg["histogram"] = dict(hist)
    return cc.merge_config(cfg, extra)


def oracle(vals, roi, norm, hist):
    off, shp = roi
    sel = tuple(slice(o, o + s) for o, s in zip(off, shp))
    v = vals[sel]
    if hist is not None:
        bins, (lo, hi) = hist["bins"], hist["range"]
    else:
        bins, lo, hi = spec_oracle.default_hist(vals.dtype)
    counts, under, over, nan = spec_oracle.histogram(v, bins, lo, hi)
    mode = norm.get("mode", "scale")
    if mode == "scale":
        nlo = nhi = None
        out = spec_oracle.normalize(v, "scale", divisor=norm.get("divisor", 255))
    elif mode == "window":
        nlo, nhi = norm["lo"], norm["hi"]
        out = spec_oracle.normalize(v, "window", lo=nlo, hi=nhi)
    else:
        nlo = spec_oracle.percentile(counts, under, over, lo, hi, norm["lo"])
        nhi = spec_oracle.percentile(counts, under, over, lo, hi, norm["hi"])
        out = spec_oracle.normalize(v, "window", lo=nlo, hi=nhi)
    s, w = spec_oracle.checksums(v, vals.shape, off)
    os_, ow = spec_oracle.checksums(out, out.shape, [0] * out.ndim)
    return {"in": v, "out": out, "bins": bins, "range": [lo, hi], "counts": counts,
            "under": under, "over": over, "nan": nan, "mode": mode, "lo": nlo, "hi": nhi,
            "checksum": s, "weighted": w, "out_checksum": os_, "out_weighted": ow}


def near(a, b):
    return a is not None and b is not None and float(a) == float(b)


def check_report(c, label, rep, want, vals, roi, inp, out_abs):
    res = rep.get("result", {})
    h = res.get("histogram", {})
    c.check(f"{label} report job/input", rep.get("job") == "convert" and
            rep.get("input", {}).get("dtype") == vals.dtype.name and
            rep.get("input", {}).get("shape") == list(vals.shape), rep.get("input"))
    c.check(f"{label} report roi", rep.get("roi") == {"offset": roi[0], "shape": roi[1]},
            rep.get("roi"))
    c.check(f"{label} report voxels", res.get("voxels") == int(np.prod(roi[1])),
            res.get("voxels"))
    c.check(f"{label} report checksum", res.get("checksum") == want["checksum"],
            f"{res.get('checksum')} vs NumPy {want['checksum']}")
    c.check(f"{label} report weighted_checksum", res.get("weighted_checksum") == want["weighted"],
            f"{res.get('weighted_checksum')} vs NumPy {want['weighted']}")
    c.check(f"{label} report histogram bins/range",
            h.get("bins") == want["bins"] and [float(x) for x in h.get("range", [])] ==
            [float(want["range"][0]), float(want["range"][1])],
            f"{h.get('bins')} {h.get('range')}")
    counts = np.asarray(h.get("counts", []), dtype=np.int64)
    same_shape = counts.shape == want["counts"].shape
    c.check(f"{label} report histogram counts", same_shape and
            np.array_equal(counts, want["counts"]),
            f"{int(np.sum(counts != want['counts']))} bins differ" if same_shape else
            f"{counts.size} bins, want {want['counts'].size}")
    c.check(f"{label} report histogram underflow/overflow/nan",
            (h.get("underflow"), h.get("overflow"), h.get("nan")) ==
            (want["under"], want["over"], want["nan"]),
            f"{(h.get('underflow'), h.get('overflow'), h.get('nan'))} vs "
            f"{(want['under'], want['over'], want['nan'])}")
    n = res.get("normalization", {})
    c.check(f"{label} report normalization mode", n.get("mode") == want["mode"], n)
    if want["mode"] != "scale":
        c.check(f"{label} report normalization lo/hi = NumPy "
                f"[{float(want['lo'])}, {float(want['hi'])}]",
                near(n.get("lo"), want["lo"]) and near(n.get("hi"), want["hi"]), n)
    c.check(f"{label} report output_checksum", res.get("output_checksum") == want["out_checksum"],
            f"{res.get('output_checksum')} vs NumPy {want['out_checksum']}")
    c.check(f"{label} report output_weighted_checksum",
            res.get("output_weighted_checksum") == want["out_weighted"],
            f"{res.get('output_weighted_checksum')} vs NumPy {want['out_weighted']}")
    o = rep.get("output", {})
    c.check(f"{label} report output.path", o.get("path") is not None and
            os.path.realpath(os.path.join(os.path.dirname(out_abs), os.path.basename(o["path"])))
            == os.path.realpath(out_abs), o.get("path"))


def expected_codecs(inner):
    b = {"name": "bytes", "configuration": {"endian": "little"}}
    return [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": inner,
        "codecs": [b, {"name": "zstd", "configuration": {"level": 3, "checksum": False}}],
        "index_codecs": [b, {"name": "crc32c"}], "index_location": "end"}}]


def check_zarr_json(c, label, out, want, roi, inp, norm, version):
    meta = report_json.load(os.path.join(out, "zarr.json"))
    c.check(f"{label} zarr.json zarr_format/node_type",
            meta.get("zarr_format") == 3 and meta.get("node_type") == "array",
            (meta.get("zarr_format"), meta.get("node_type")))
    c.check(f"{label} zarr.json shape = ROI shape", meta.get("shape") == roi[1], meta.get("shape"))
    c.check(f"{label} zarr.json data_type float32", meta.get("data_type") == "float32",
            meta.get("data_type"))
    shard, inner = cc.auto_layout(roi[1], 4)  # the default layout of SPEC §2, float32 values
    c.check(f"{label} zarr.json chunk_grid regular {shard} (SPEC §2 auto)", meta.get("chunk_grid")
            == {"name": "regular", "configuration": {"chunk_shape": shard}},
            meta.get("chunk_grid"))
    kenc = meta.get("chunk_key_encoding", {})
    c.check(f"{label} zarr.json chunk_key_encoding default '/'", kenc.get("name") == "default" and
            kenc.get("configuration", {}).get("separator", "/") == "/", kenc)
    c.check(f"{label} zarr.json fill_value 0", meta.get("fill_value") == 0 and
            not isinstance(meta.get("fill_value"), bool), meta.get("fill_value"))
    c.check(f"{label} zarr.json codecs (sharding {inner}, bytes+zstd 3, index bytes+crc32c "
            f"at end)", meta.get("codecs") == expected_codecs(inner), meta.get("codecs"))
    p = meta.get("attributes", {}).get("shardmill", {})
    c.check(f"{label} provenance engine version/commit",
            p.get("engine") == {"version": version[0], "commit": version[1]}, p.get("engine"))
    c.check(f"{label} provenance config_sha256 (64 hex)",
            re.fullmatch(r"[0-9a-f]{64}", str(p.get("config_sha256", ""))) is not None,
            p.get("config_sha256"))
    c.check(f"{label} provenance input store (resolved)/array/metadata_sha256 (issue 19: the "
            f"input by content)", p.get("input") == {"store": os.path.realpath(inp), "array": "",
                                                     "metadata_sha256": metadata_sha256(inp)},
            p.get("input"))
    objects = (p.get("input_state") or {}).get("objects")
    nfiles = sum(len(f) for _, _, f in os.walk(inp))
    c.check(f"{label} provenance input_state.objects: the file count and a records_sha256 "
            f"(issue 32)",
            isinstance(objects, dict) and objects.get("files") == str(nfiles) and
            re.fullmatch(r"[0-9a-f]{64}", str(objects.get("records_sha256"))) is not None,
            (objects, nfiles))
    c.check(f"{label} provenance roi", p.get("roi") == {"offset": roi[0], "shape": roi[1]},
            p.get("roi"))
    pn = p.get("normalization", {})
    ok = pn.get("mode") == want["mode"]
    if want["mode"] == "scale":
        ok = ok and near(pn.get("divisor"), norm.get("divisor", 255))
    else:
        ok = ok and near(pn.get("lo"), want["lo"]) and near(pn.get("hi"), want["hi"])
    if want["mode"] == "percentile":
        ok = ok and [float(x) for x in pn.get("percentiles", [])] == \
            [float(norm["lo"]), float(norm["hi"])]
    c.check(f"{label} provenance normalization", ok, pn)
    ph = p.get("histogram", {})
    c.check(f"{label} provenance histogram summary",
            ph.get("bins") == want["bins"] and
            [float(x) for x in ph.get("range", [])] == [float(x) for x in want["range"]] and
            ph.get("voxels") == int(np.prod(roi[1])) and ph.get("underflow") == want["under"]
            and ph.get("overflow") == want["over"] and ph.get("nan") == want["nan"] and
            ph.get("checksum") == want["checksum"] and
            ph.get("weighted_checksum") == want["weighted"], ph)


def run_case(c, args, work, name, inp, vals, roi, norm, hist=None, fsync=False, threads=2):
    """Runs one convert and checks everything but the zarrita read (returned for batching)."""
    label = name
    out_rel = name + ".zarr"
    out = os.path.join(work, out_rel)
    shutil.rmtree(out, ignore_errors=True)
    cfg = cc.write_config(os.path.join(work, name + ".yaml"),
                          config_for(inp, out_rel, roi, norm, hist, fsync, threads))
    rep_path = os.path.join(work, name + ".report.json")
    r = cc.run([args.shardmill, "run", cfg, "--report", rep_path], cwd=work)
    if not c.check(f"{label} convert exits 0", r.returncode == 0, cc.describe(r)):
        return None
    rep = report_json.load(rep_path)
    want = oracle(vals, roi, norm, hist)
    check_report(c, label, rep, want, vals, roi, inp, out)
    check_zarr_json(c, label, out, want, roi, inp, norm, args.version)
    cc.check_marker(c, label, out, rep, args.version)
    try:
        got = zarr_decode.spec_decode(out)
        c.check(f"{label} NumPy spec decode == float32 formula (bit for bit)",
                spec_oracle.same_bits(got, want["out"]), spec_oracle.first_diff(got, want["out"]))
    except Exception as e:  # noqa: BLE001 - a decoding problem is a failure to report
        c.check(f"{label} NumPy spec decode", False, repr(e))
    cc.shardmill_read(c, args.shardmill, label, out, want["out"], work)
    r = cc.run([args.shardmill, "verify", out])
    c.check(f"{label} shardmill verify ok", r.returncode == 0, r.stdout + r.stderr)
    shp = want["out"].shape
    regions = [([s // 3 for s in shp], [max(1, s - s // 3 - 1) for s in shp])]
    return (label, out, want["out"], regions), rep, want


# ---- families ----

CASES = {
    "v2_uint8": [
        ("full_scale_fsync", FULL, {"mode": "scale"}, None, True),
        ("aligned_window", ALIGNED, {"mode": "window", "lo": 10, "hi": 200}, None, False),
        ("nonaligned_percentile", NONALIGNED, {"mode": "percentile", "lo": 2, "hi": 98}, None,
         False),
        ("nonaligned_scale_div100", NONALIGNED, {"mode": "scale", "divisor": 100}, None, False),
        ("corner_scale", CORNER, {"mode": "scale"}, None, False),
        ("thin_window", THIN, {"mode": "window", "lo": 50.5, "hi": 180.25}, None, False),
    ],
    "v2_int16": [
        ("full_percentile_fsync", FULL, {"mode": "percentile", "lo": 1, "hi": 99}, None, True),
        ("aligned_scale_div1000", ALIGNED, {"mode": "scale", "divisor": 1000}, None, False),
        ("nonaligned_window", NONALIGNED, {"mode": "window", "lo": -500, "hi": 1500}, None,
         False),
        ("nonaligned_percentile_bins256", NONALIGNED, {"mode": "percentile", "lo": 5, "hi": 95},
         {"bins": 256, "range": [-4096, 4096]}, False),
    ],
    "v2_uint16": [
        ("full_window_fsync", FULL, {"mode": "window", "lo": 1000, "hi": 50000}, None, True),
        # a narrow histogram range: the lo percentile lands in the underflow (-> 2000, ~2% of the
        # voxels are below), the hi one in the overflow (-> 40000, not the last bin's 39620;
        # ~6% are above) (SPEC §5)
        ("aligned_percentile_under_over", ALIGNED, {"mode": "percentile", "lo": 1, "hi": 95},
         {"bins": 100, "range": [2000, 40000]}, False),
        ("nonaligned_scale_65535", NONALIGNED, {"mode": "scale", "divisor": 65535}, None, False),
        # lo and hi not representable in float32: float32(lo) and float32(hi) must be used
        ("thin_window_inexact", THIN, {"mode": "window", "lo": 100.1, "hi": 40000.3}, None,
         False),
        ("nonaligned_percentile", NONALIGNED, {"mode": "percentile", "lo": 0.5, "hi": 99.5},
         None, False),
    ],
    "v3_uint8": [
        ("full_percentile_fsync", FULL, {"mode": "percentile", "lo": 5, "hi": 95}, None, True),
        ("nonaligned_scale", NONALIGNED, {"mode": "scale"}, None, False),
        ("aligned_window", ALIGNED, {"mode": "window", "lo": 0, "hi": 128}, None, False),
        ("corner_window_inexact", CORNER, {"mode": "window", "lo": 0.1, "hi": 200.3}, None,
         False),
    ],
}


def family_inputs(c, args, work, fam):
    if fam == "v2_uint8":
        return make_v2(work, fam, "uint8", 11, "default")
    if fam == "v2_int16":
        return make_v2(work, fam, "int16", 12, "zstd")
    if fam == "v2_uint16":
        return make_v2(work, fam, "uint16", 13, "zlib")
    if fam == "v3_uint8":
        return make_v3_zarrita(c, args.node, work, fam, 14)
    raise ValueError(fam)


def family_cases(c, args, work, fam):
    inp, vals = family_inputs(c, args, work, fam)
    if inp is None:
        return
    reads = []
    for name, roi, norm, hist, fsync in CASES[fam]:
        res = run_case(c, args, work, f"{fam}_{name}", inp, vals, roi, norm, hist, fsync)
        if res is not None:
            reads.append(res[0])
    cc.zarrita_read_all(c, args.node, work, reads)


def family_threads(c, args, work):
    """Thread count, kept-or-reread input and the report path leave no trace in the bytes."""
    inp, vals = make_v2(work, "threads", "uint8", 21, "default")
    norm = {"mode": "percentile", "lo": 2, "hi": 98}
    runs = [("t1", 1, {}), ("t2", 2, {}), ("t2_reread", 2, {"limits": {"memory_bytes": "64KiB", "memory_ceiling": False}})]
    trees = []
    for tag, threads, extra in runs:
        d = cc.fresh_dir(os.path.join(work, tag))  # same relative output.path, another directory
        cfg = cc.write_config(os.path.join(d, "job.yaml"),
                              config_for(inp, "out.zarr", NONALIGNED, norm, None, True, threads,
                                         extra))
        rep = os.path.join(d, f"report-{tag}.json")
        r = cc.run([args.shardmill, "run", cfg, "--report", rep], cwd=d)
        if not c.check(f"threads {tag} convert exits 0", r.returncode == 0, cc.describe(r)):
            return
        kept = json.load(open(rep)).get("memory", {}).get("kept_input")
        if tag == "t2_reread":
            c.check("threads t2_reread re-read the input (memory.kept_input false)",
                    kept is False, kept)
        trees.append((tag, os.path.join(d, "out.zarr")))
    base_tag, base = trees[0]
    for tag, t in trees[1:]:
        diffs = cc.tree_diff(base, t)
        c.check(f"threads {base_tag} vs {tag}: byte-identical trees (every file)", not diffs,
                "; ".join(diffs[:8]))
    want = oracle(vals, NONALIGNED, norm, None)
    got = zarr_decode.spec_decode(base)
    c.check("threads output == NumPy float32 formula", spec_oracle.same_bits(got, want["out"]),
            spec_oracle.first_diff(got, want["out"]))


def family_spec_report_scale(c, args, work):
    inp, vals = make_v2(work, "rscale", "uint8", 31, "default")
    cfg = cc.write_config(os.path.join(work, "rscale.yaml"),
                          config_for(inp, "rscale.zarr", NONALIGNED, {"mode": "scale"}))
    rep = os.path.join(work, "rscale.report.json")
    r = cc.run([args.shardmill, "run", cfg, "--report", rep], cwd=work)
    if not c.check("scale convert exits 0", r.returncode == 0, cc.describe(r)):
        return
    n = json.load(open(rep))["result"].get("normalization", {})
    c.check("SPEC §7 result.normalization has mode, lo and hi in scale mode",
            {"mode", "lo", "hi"} <= set(n), f"scale mode reports {n}")


def family_spec_percentile_zero(c, args, work):
    """int16 values >= -4000 with the default histogram over [-32768, 32768): ceil(0/100*N) = 0
    is reached at the underflow, so SPEC §5 gives lo of the range (-32768)."""
    inp, vals = make_v2(work, "pzero", "int16", 41, "zstd")
    vals = np.clip(vals, -4000, 4000)
    import zarr
    zarr.open(inp, mode="r+")[:] = vals
    norm = {"mode": "percentile", "lo": 0, "hi": 100}
    res = run_case(c, args, work, "pzero", inp, vals, FULL, norm)
    if res is not None:
        _, rep, want = res
        n = rep["result"]["normalization"]
        c.check(f"percentile 0 -> {float(want['lo'])} and 100 -> {float(want['hi'])} (SPEC §5)",
                near(n.get("lo"), want["lo"]) and near(n.get("hi"), want["hi"]), n)


def family_spec_percentile_rank(c, args, work):
    """315000 voxels, p = 7: ceil(7/100 * 315000) = 22050 exactly (7/100.0 * 315000 is
    22050.000000000004 in doubles). The first 22050 voxels are 10, the rest 100..255, so the
    7th percentile is 10 and a rank of 22051 would give 100 or more."""
    import zarr
    rng = np.random.default_rng(51)
    vals = rng.integers(100, 256, SHAPE, dtype=np.uint8)
    vals.flat[:22050] = 10
    inp = os.path.join(work, "prank.in.zarr")
    zarr.open(inp, mode="w", shape=SHAPE, chunks=CHUNKS, dtype="u1")[:] = vals
    norm = {"mode": "percentile", "lo": 7, "hi": 99}
    res = run_case(c, args, work, "prank", inp, vals, FULL, norm)
    if res is not None:
        _, rep, want = res
        n = rep["result"]["normalization"]
        c.check(f"percentile 7 of 315000 voxels is bin {float(want['lo'])} (rank 22050)",
                near(n.get("lo"), want["lo"]), n)


def family_spec_provenance(c, args, work):
    """The comment of job_convert.c config_hash: the hash covers what determines the output
    bytes. Keys that cannot change a byte of the array must not change zarr.json."""
    inp, vals = make_v2(work, "prov", "uint8", 61, "default")
    norm = {"mode": "scale"}
    variants = [
        ("base", "out.zarr", {}),
        ("threads1", "out.zarr", {"parallel": {"threads": 1}}),
        ("limits", "out.zarr", {"limits": {"memory_bytes": "64KiB", "memory_ceiling": False}}),
        ("report", "out.zarr", {"report": "elsewhere.json"}),
        ("path", "renamed.zarr", {}),
        ("exists_overwrite", "out.zarr", {"output": {"exists": "overwrite"}}),
        ("exists_resume", "out.zarr", {"output": {"exists": "resume"}}),
        ("fsync_on", "out.zarr", {"output": {"fsync": True}}),
    ]
    docs = {}
    for tag, out_rel, extra in variants:
        d = cc.fresh_dir(os.path.join(work, "prov_" + tag))
        cfg = config_for(inp, out_rel, NONALIGNED, norm, None, False, 2, extra)
        path = cc.write_config(os.path.join(d, "job.yaml"), cfg)
        r = cc.run([args.shardmill, "run", path], cwd=d)
        if not c.check(f"provenance {tag} convert exits 0", r.returncode == 0, cc.describe(r)):
            continue
        out = os.path.join(d, out_rel)
        docs[tag] = (open(os.path.join(out, "zarr.json"), "rb").read(), out)
    if "base" not in docs:
        return
    base, base_out = docs["base"]
    sha = lambda b: json.loads(b)["attributes"]["shardmill"]["config_sha256"]  # noqa: E731
    for tag, (doc, out) in docs.items():
        if tag == "base":
            continue
        shard_diffs = [x for x in cc.tree_diff(base_out, out) if x.split(": ", 1)[1]
                       .startswith("c" + os.sep)]
        c.check(f"provenance {tag}: shards byte-identical to base", not shard_diffs,
                shard_diffs[:5])
        c.check(f"provenance {tag}: zarr.json identical to base (config_sha256 {sha(doc)[:12]} vs "
                f"{sha(base)[:12]})", doc == base, "zarr.json differs")


FAMILIES = {
    "threads": family_threads,
    "spec_report_scale": family_spec_report_scale,
    "spec_percentile_zero": family_spec_percentile_zero,
    "spec_percentile_rank": family_spec_percentile_rank,
    "spec_provenance": family_spec_provenance,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--node", default="")
    ap.add_argument("--work", required=True)
    ap.add_argument("--family", required=True, choices=sorted(list(CASES) + list(FAMILIES)))
    args = ap.parse_args()
    args.shardmill = os.path.abspath(args.shardmill)
    work = cc.fresh_dir(os.path.abspath(os.path.join(args.work, args.family)))
    c = Checks(f"convert.zarrita.{args.family}")
    args.version = cc.engine_version(args.shardmill)
    c.check("shardmill --version", args.version[0] is not None, args.version)
    if args.family in CASES:
        why = cc.node_ok(args.node)
        if not c.check("zarrita.js available", why is None, why):
            return c.done()
        family_cases(c, args, work, args.family)
    else:
        FAMILIES[args.family](c, args, work)
    return c.done()


if __name__ == "__main__":
    cc.main_guard(main)
