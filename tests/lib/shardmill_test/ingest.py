"""The ingest runner and checks shared by tests/convert (test_ingest*.py, test_convert_intout.py)
and tests/hdf5: an ingest job's YAML, one ingest run checked against the NumPy values (report,
provenance, marker, `shardmill read`, zarrita.js, the NumPy decoder, verify), a refused input,
and the byte-identity of shards with the raw CT's ingest."""

import json
import os
import shutil

from shardmill_test import report_json
from shardmill_test import spec_oracle
from shardmill_test import runner as cc
from shardmill_test import zarr_decode


def ingest_config(path, store, out, raw=None, fmt=None, extra=None):
    cfg = {"job": "ingest", "input": {"store": store}, "output": {"path": out, "fsync": False},
           "parallel": {"threads": 2}, "progress": False}
    if fmt is not None:
        cfg["input"]["format"] = fmt
    if raw is not None:
        cfg["input"]["raw"] = raw
    return cc.write_config(path, cc.merge_config(cfg, extra))


def check_ingested(c, args, work, label, out, want, rep, pixdim=None, fmt=None, decode=True,
                   layout=None):
    """zarr.json, marker, report and values of an ingested array against `want` ([z,y,x]);
    layout None: SPEC §2's default layout for the array's shape and type."""
    rep = report_json.with_int_checksums(rep)  # SPEC §7: checksums are decimal strings
    meta = json.load(open(os.path.join(out, "zarr.json")))
    if layout is None:
        layout = cc.auto_layout(want.shape, want.dtype.itemsize)
    shard, inner = [list(x)[-want.ndim:] for x in layout]
    c.check(f"{label} zarr.json data_type = {want.dtype.name}",
            meta.get("data_type") == want.dtype.name, meta.get("data_type"))
    c.check(f"{label} zarr.json shape = {list(want.shape)}", meta.get("shape") == list(want.shape),
            meta.get("shape"))
    grid = meta.get("chunk_grid", {}).get("configuration", {}).get("chunk_shape")
    c.check(f"{label} zarr.json layout (shards {shard}, inner {inner}, zstd)",
            grid == shard and
            meta["codecs"][0]["name"] == "sharding_indexed" and
            meta["codecs"][0]["configuration"]["chunk_shape"] == inner and
            [x["name"] for x in meta["codecs"][0]["configuration"]["codecs"]] ==
            ["bytes", "zstd"], meta.get("codecs"))
    # ingest is convert with normalize none: the convert provenance, whose `input` is the
    # source's description (there is no shardmill.source any more)
    prov = meta.get("attributes", {}).get("shardmill", {})
    src = prov.get("input", {})
    c.check(f"{label} provenance input: the source (format, shape, dtype), no shardmill.source",
            src.get("format") == fmt and src.get("shape") == list(want.shape) and
            src.get("dtype") == want.dtype.name and "source" not in prov, src)
    c.check(f"{label} provenance normalization mode none",
            prov.get("normalization", {}).get("mode") == "none", prov.get("normalization"))
    cc.check_marker(c, label, out, rep, args.version)
    inp = rep.get("input", {})
    c.check(f"{label} report input format/shape/dtype",
            inp.get("format") == fmt and inp.get("shape") == list(want.shape) and
            inp.get("dtype") == want.dtype.name, inp)
    c.check(f"{label} provenance input = the report's input (without the report's own keys)",
            src == {k: v for k, v in inp.items() if k not in cc.REPORT_ONLY_INPUT} and
            os.path.realpath(inp.get("store", "")) == src.get("path"), (src, inp))
    # the report is convert's: job ingest, the ROI (the whole volume), tile, io.source
    c.check(f"{label} report job ingest, roi the whole volume, tile",
            rep.get("job") == "ingest" and
            rep.get("roi") == {"offset": [0] * want.ndim, "shape": list(want.shape)} and
            isinstance(rep.get("tile"), list) and len(rep["tile"]) == want.ndim,
            {k: rep.get(k) for k in ("job", "roi", "tile")})
    io_src = (rep.get("io") or {}).get("source") or {}
    c.check(f"{label} report io.source counts (bytes_read, bytes_read_max_rank, "
            "beyond_share_max_rank, slab_bytes)",
            all(isinstance(io_src.get(k), int) for k in
                ("bytes_read", "bytes_read_max_rank", "beyond_share_max_rank", "slab_bytes")),
            rep.get("io"))
    if pixdim is not None:
        # NIfTI pixdim[1..3] (x, y, z); the axis order is not documented, so [z, y, x] passes too
        got = [float(x) for x in inp.get("pixdim", [])]
        want_px = [float(x) for x in pixdim]
        c.check(f"{label} report input.pixdim = NIfTI pixdim[1..3] {want_px} (or reversed)",
                got in (want_px, want_px[::-1]), f"got {inp.get('pixdim')}")
    s, w = spec_oracle.checksums(want, want.shape, [0] * want.ndim)
    res = rep.get("result", {})
    c.check(f"{label} report voxels/checksum/weighted_checksum (SPEC §5)",
            res.get("voxels") == want.size and res.get("checksum") == s and
            res.get("weighted_checksum") == w,
            f"{res} vs NumPy voxels {want.size} checksum {s} weighted {w}")
    if decode:
        try:
            got = zarr_decode.spec_decode(out)
            c.check(f"{label} NumPy spec decode bit for bit", spec_oracle.same_bits(got, want),
                    spec_oracle.first_diff(got, want))
        except Exception as e:  # noqa: BLE001 - a decoding problem is a failure to report
            c.check(f"{label} NumPy spec decode", False, repr(e))
    cc.shardmill_read(c, args.shardmill, label, out, want, work)
    r = cc.run([args.shardmill, "verify", out])
    c.check(f"{label} shardmill verify ok", r.returncode == 0, cc.describe(r))


def do_ingest(c, args, work, label, store, want, raw=None, fmt=None, pixdim=None,
              expect_fmt=None, decode=True, layout=None):
    out = os.path.join(work, label + ".zarr")
    shutil.rmtree(out, ignore_errors=True)
    extra = None if layout is None else {"output": {"shard": list(layout[0]),
                                                    "chunk": list(layout[1])}}
    cfg = ingest_config(os.path.join(work, label + ".yaml"), store, out, raw, fmt, extra)
    rep_path = os.path.join(work, label + ".report.json")
    r = cc.run([args.shardmill, "run", cfg, "--report", rep_path], cwd=work, timeout=600)
    if not c.check(f"{label} ingest exits 0", r.returncode == 0, cc.describe(r)):
        return None
    rep = report_json.load(rep_path)
    check_ingested(c, args, work, label, out, want, rep, pixdim, expect_fmt or fmt, decode, layout)
    return (label, out, want, [([1] * want.ndim, [max(1, s - 2) for s in want.shape])])


def ingest_raw_ct(c, args, work, ct, want):
    return do_ingest(c, args, work, "ct_raw", ct, want,
                     {"dtype": "int16", "shape": [108, 256, 256], "byte_order": "little"},
                     "raw", decode=False, layout=CT_LAYOUT)


def shard_bytes(out):
    """Every shard object of an output (zarr.json and the marker differ: provenance)."""
    files = {}
    for rel in cc.files_under(out):
        if rel.startswith("c/") or rel.startswith("c" + os.sep):
            files[rel] = open(os.path.join(out, rel), "rb").read()
    return files


def same_shards_as_raw(c, raw, runs):
    """Each ingest result of `runs` has the shards of the raw CT ingest `raw`, byte for byte."""
    if not raw:
        return
    ref = shard_bytes(raw[1])
    for r in runs:
        if r:
            got = shard_bytes(r[1])
            c.check(f"{r[0]}: shards byte-identical to the raw CT ingest ({len(ref)} shards)",
                    got == ref and len(ref) > 0,
                    f"{len(got)} vs {len(ref)} shards; differ: "
                    f"{sorted(k for k in ref if got.get(k) != ref[k])[:3]}")


def expect_bad(c, args, work, label, store, raw=None, fmt=None, code=3, extra=None, names=()):
    out = os.path.join(work, label + ".zarr")
    shutil.rmtree(out, ignore_errors=True)
    cfg = ingest_config(os.path.join(work, label + ".yaml"), store, out, raw, fmt, extra)
    r = cc.run([args.shardmill, "run", cfg], cwd=work)
    lines = cc.one_error_line(r.stderr)
    c.check(f"{label}: exit {code}", r.returncode == code, cc.describe(r))
    want = [os.path.basename(store)] + list(names)
    c.check(f"{label}: one error line 'shardmill: error: <file>...' naming {want}",
            len(lines) == 1 and lines[0].startswith("shardmill: error: ") and
            all(w in lines[0] for w in want), lines)
    c.check(f"{label}: no output written", not os.path.exists(out),
            os.listdir(out) if os.path.isdir(out) else "")


# the raw CT's layout (test_ingest_tiff.py, test_ingest_hdf5.py: the reference of other sources)
CT_LAYOUT = ((16, 64, 64), (8, 32, 32))
