#!/usr/bin/python3
"""Read amplification of an OME-Zarr output as viewers read it (issue 35 item 3): the bytes a
plane view and a 3-D view fetch over HTTP against the bytes they display, at every level.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/viewer/viewer.py [--shardmill BIN]
        [--work DIR] [--volumes ct,1024] [--write-pairs N] [--out DIR]
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/viewer/viewer.py --check OUT.zarr [OUT.zarr ...]
        (every level of each output through nginx; exit 1 above the bounds)
    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/viewer/viewer.py --quick --work DIR
        (ctest bench.viewer.quick: a 48x320x320 uint16 CT-like volume, 0.5 and 0.4, downsample
        auto and yx, default chunks: every level within the bounds, nginx's bytes == the files';
        and the 64^3 inner chunks of before issue 35 above the plane bound, so the check can
        fail; bytes only, never time)

The two views (docs/VIEWING.md "Read amplification"):
  plane view  one whole xy plane (the middle z) of a level, tiled as vizarr/Viv tile it: square
              tiles of the largest power of two <= the chunk's y and x; every tile fetches every
              chunk it crosses (no chunk cache across tiles), a shard's index once per shard
              (Range `bytes=-N`, cached, as zarrita does).
  3-D view    the whole level: every chunk once, every shard's index once.
  fetched     the bytes of the responses' bodies for chunks and shard indexes (not the
              zarr.json / .zarray / .zattrs metadata, reported apart).
  displayed   the view's voxels times the level's value size.
  amplification = fetched / displayed; bounds: plane <= 8, 3-D <= 2, at every level.

Outputs: the main job (configs/convert-ct-ome.yaml: the head CT, data/ct/matrix.dat) and a
1024^3 uint16 CT-like volume (bench/read_once/w9.py's ct_slice(), a raw file written once under
--work, 2 GiB; normalize none, levels auto), each as OME-Zarr 0.5 (sharded, the default chunks),
0.5 with `output.chunk: [64, 64, 64]` (the inner chunks before issue 35) and 0.4 (one file per
chunk, the default chunks). Each is served by a real nginx on 127.0.0.1 (tests/lib
shardmill_test.nginx_server; its access log's body bytes are the measured figure), read by:
  0.5  a small client of the Zarr v3 sharding spec (urllib, Range requests: the shard index, then
       each inner chunk's byte range), decoding the plane (python-zstandard) to check the values;
  0.4  zarr-python 2.13 over HTTP (a read-only store that GETs each key), one read per tile.
Cross-check: the same figure computed from the files on disk (each shard's index read from the
file: the inner chunks' lengths; a 0.4 chunk's file size), which must equal nginx's; the 0.5
plane decoded by the client equals the 0.4 plane read by zarr-python (the two are bit-identical
by issue 35 item 1).
Write cost (--write-pairs N): each volume's convert with the default chunks and with
`output.chunk: [64, 64, 64]`, N pairs back to back (alternating order): the report's total and
write times.
Results: OUT/viewer-<commit>.json (bench/results by default) and a Markdown table on stdout.
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np

from shardmill_test import script_module

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

PLANE_BOUND, VOLUME_BOUND = 8.0, 2.0
META = (".zarray", ".zattrs", ".zgroup", "zarr.json", "shardmill.complete.json")
DTYPES = {"uint8": "<u1", "uint16": "<u2", "int16": "<i2", "float32": "<f4"}


# ---- what a level looks like ----

class Level:
    """One level's layout from its metadata (zarr.json for 0.5, .zarray for 0.4)."""

    def __init__(self, root, name):
        self.name = name
        p = os.path.join(root, name)
        if os.path.exists(os.path.join(p, "zarr.json")):
            with open(os.path.join(p, "zarr.json")) as f:
                m = json.load(f)
            self.v2 = False
            self.shape = m["shape"]
            self.dtype_name = m["data_type"]
            self.dtype = DTYPES[m["data_type"]]
            outer = m["chunk_grid"]["configuration"]["chunk_shape"]
            sh = [c for c in m["codecs"] if c["name"] == "sharding_indexed"]
            if sh:
                cfg = sh[0]["configuration"]
                self.shard, self.chunk = outer, cfg["chunk_shape"]
                self.inner_codecs = cfg["codecs"]
                idx_codecs = cfg.get("index_codecs", [])
                self.index_crc = any(c["name"] == "crc32c" for c in idx_codecs)
                self.index_at_end = cfg.get("index_location", "end") == "end"
            else:
                self.shard, self.chunk, self.inner_codecs = None, outer, m["codecs"]
        else:
            with open(os.path.join(p, ".zarray")) as f:
                m = json.load(f)
            self.v2 = True
            self.shape, self.chunk, self.shard = m["shape"], m["chunks"], None
            self.dtype = m["dtype"]
        self.itemsize = np.dtype(self.dtype).itemsize

    def tile(self):
        """vizarr's tile size: the largest power of two <= min(chunk y, chunk x)."""
        s = min(self.chunk[-2], self.chunk[-1])
        return 1 << (s.bit_length() - 1)

    def per_shard(self):
        return [s // c for s, c in zip(self.shard, self.chunk)]

    def index_bytes(self):
        n = int(np.prod(self.per_shard()))
        return 16 * n + (4 if self.index_crc else 0)

    def chunk_key(self, ci):
        if self.v2:
            return f"{self.name}/" + "/".join(map(str, ci))
        si = [c // p for c, p in zip(ci, self.per_shard())]
        return f"{self.name}/c/" + "/".join(map(str, si))


def level_names(root):
    if os.path.exists(os.path.join(root, "zarr.json")):
        with open(os.path.join(root, "zarr.json")) as f:
            attrs = json.load(f)["attributes"]["ome"]
    else:
        with open(os.path.join(root, ".zattrs")) as f:
            attrs = json.load(f)
    return [d["path"] for d in attrs["multiscales"][0]["datasets"]]


# ---- the views: which chunks each tile fetches ----

def plane_reads(lv, z):
    """The chunk fetches of a plane view of level lv at z, in tile order (repeats kept)."""
    t = lv.tile()
    ny, nx = lv.shape[-2], lv.shape[-1]
    cz = z // lv.chunk[0]
    out = []
    for y0 in range(0, ny, t):
        for x0 in range(0, nx, t):
            y1, x1 = min(y0 + t, ny), min(x0 + t, nx)
            for cy in range(y0 // lv.chunk[1], (y1 - 1) // lv.chunk[1] + 1):
                for cx in range(x0 // lv.chunk[2], (x1 - 1) // lv.chunk[2] + 1):
                    out.append((cz, cy, cx))
    return out


def volume_reads(lv):
    g = [-(-n // c) for n, c in zip(lv.shape, lv.chunk)]
    return [(a, b, c) for a in range(g[0]) for b in range(g[1]) for c in range(g[2])]


# ---- the figure computed from the files ----

def _index_of(lv, root, key, cache):
    if key not in cache:
        path = os.path.join(root, key)
        n = int(np.prod(lv.per_shard()))
        if not os.path.exists(path):
            cache[key] = None
        else:
            with open(path, "rb") as f:
                if lv.index_at_end:
                    f.seek(-lv.index_bytes(), os.SEEK_END)
                raw = f.read(lv.index_bytes())
            cache[key] = np.frombuffer(raw[:16 * n], "<u8").reshape(n, 2)
    return cache[key]


def _inner(lv, ci):
    """An inner chunk's position in its shard's index (C order)."""
    ps = lv.per_shard()
    li = [c % p for c, p in zip(ci, ps)]
    return (li[0] * ps[1] + li[1]) * ps[2] + li[2]


def computed_bytes(lv, root, reads):
    """Bytes fetched by `reads` from the files: chunk bodies, and one index per shard touched."""
    total, n, cache, shards = 0, 0, {}, set()
    for ci in reads:
        key = lv.chunk_key(ci)
        if lv.v2:
            p = os.path.join(root, key)
            if os.path.exists(p):
                total += os.path.getsize(p)
                n += 1
            continue
        idx = _index_of(lv, root, key, cache)
        if idx is None:
            continue
        if key not in shards:
            shards.add(key)
            total += lv.index_bytes()
            n += 1
        off, ln = idx[_inner(lv, ci)]
        if off != 2**64 - 1:
            total += int(ln)
            n += 1
    return total, n


# ---- the readers over HTTP ----

def _get(url, rng=None):
    req = urllib.request.Request(url)
    if rng is not None:
        req.add_header("Range", rng)
    try:
        with urllib.request.urlopen(req) as r:
            body = r.read()
            if rng is not None and r.status != 206:
                raise RuntimeError(f"{url}: {r.status} to a Range request (need 206)")
            return body
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


def read_v3(lv, base, reads, want_plane=None):
    """Fetches what `reads` need from a sharded (or unsharded) Zarr v3 level over HTTP; returns
    the plane decoded when want_plane=(z, ny, nx)."""
    from shardmill_test.zarr_decode import decode_chunk
    _get(f"{base}/{lv.name}/zarr.json")
    idx_cache = {}
    plane = None
    if want_plane is not None:
        z, ny, nx = want_plane
        plane = np.zeros((ny, nx), lv.dtype)
    for ci in reads:
        key = lv.chunk_key(ci)
        if lv.shard is None:
            data = _get(f"{base}/{key}")
        else:
            if key not in idx_cache:
                raw = _get(f"{base}/{key}", f"bytes=-{lv.index_bytes()}")
                n = int(np.prod(lv.per_shard()))
                idx_cache[key] = None if raw is None else \
                    np.frombuffer(raw[:16 * n], "<u8").reshape(n, 2)
            idx = idx_cache[key]
            if idx is None:
                continue
            off, ln = (int(v) for v in idx[_inner(lv, ci)])
            if off == 2**64 - 1:
                continue
            data = _get(f"{base}/{key}", f"bytes={off}-{off + ln - 1}")
        if plane is not None and data is not None:
            c = decode_chunk(lv.inner_codecs, data, lv.dtype_name, lv.chunk)
            zz = want_plane[0] - ci[0] * lv.chunk[0]
            y0, x0 = ci[1] * lv.chunk[1], ci[2] * lv.chunk[2]
            y1, x1 = min(y0 + lv.chunk[1], plane.shape[0]), min(x0 + lv.chunk[2], plane.shape[1])
            plane[y0:y1, x0:x1] = c[zz, :y1 - y0, :x1 - x0]
    return plane


# zarr-python 2's read-only HTTP store: the W2 peer's (a GET per key, KeyError on 404)
HTTPStore = script_module.load("bench/convert_ct/peer_zarr2.py").HTTPStore


def read_v2_plane(lv, base, z):
    """A plane view by zarr-python 2.13: one read per vizarr tile."""
    import zarr
    from zarr.storage import KVStore
    a = zarr.open_array(store=KVStore(HTTPStore(f"{base}/{lv.name}")), mode="r")
    t = lv.tile()
    ny, nx = lv.shape[-2], lv.shape[-1]
    plane = np.zeros((ny, nx), lv.dtype)
    for y0 in range(0, ny, t):
        for x0 in range(0, nx, t):
            plane[y0:y0 + t, x0:x0 + t] = a[z, y0:y0 + t, x0:x0 + t]
    return plane


def read_v2_volume(lv, base):
    import zarr
    from zarr.storage import KVStore
    a = zarr.open_array(store=KVStore(HTTPStore(f"{base}/{lv.name}")), mode="r")
    return a[...]


# ---- measuring one output ----

def served_bytes(srv, mark):
    reqs = srv.requests(since=mark)
    data = [r for r in reqs if not r["uri"].endswith(META)]
    bad = [r for r in data if r["status"] not in (200, 206)]
    return (sum(r["bytes"] for r in data), len(data),
            sum(r["bytes"] for r in reqs) - sum(r["bytes"] for r in data), bad)


def measure(root, srv, rel, planes_out):
    """Both views of every level of the output at root (served as srv.url/rel)."""
    base = f"{srv.url}/{rel}"
    rows = []
    for name in level_names(root):
        lv = Level(root, name)
        z = lv.shape[0] // 2
        row = {"level": name, "shape": lv.shape, "chunk": lv.chunk, "shard": lv.shard,
               "tile": lv.tile(), "version": "0.4" if lv.v2 else "0.5"}
        for view, reads, shown in (("plane", plane_reads(lv, z), lv.shape[1] * lv.shape[2]),
                                   ("volume", volume_reads(lv), int(np.prod(lv.shape)))):
            displayed = shown * lv.itemsize
            mark = srv.mark()
            if lv.v2:
                got = read_v2_plane(lv, base, z) if view == "plane" else read_v2_volume(lv, base)
            else:
                got = read_v3(lv, base, reads, (z, lv.shape[1], lv.shape[2])
                              if view == "plane" else None)
            body, nreq, meta, bad = served_bytes(srv, mark)
            calc, ncalc = computed_bytes(lv, root, reads)
            if view == "plane":
                planes_out[name] = got
            row[view] = {"displayed": displayed, "fetched": body, "requests": nreq,
                         "metadata_bytes": meta, "computed": calc, "computed_requests": ncalc,
                         "amplification": body / displayed, "bad_status": len(bad),
                         "agree": body == calc and nreq == ncalc}
        rows.append(row)
    return rows


# ---- the outputs ----

def run(shardmill, config, sets, log):
    cmd = [shardmill, "run", config]
    for s in sets:
        cmd += ["--set", s]
    t0 = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    dt = time.monotonic() - t0
    with open(log, "a") as f:
        f.write(" ".join(cmd) + "\n" + r.stdout + "\n")
    if r.returncode != 0:
        raise SystemExit(f"viewer: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}")
    return dt


def make_1024(work, n):
    """The CT-like volume as a raw uint16 file (written once)."""
    ct_slice = script_module.load("bench/read_once/w9.py").ct_slice
    path = os.path.join(work, f"ct-like-{n}.u16")
    if os.path.exists(path) and os.path.getsize(path) == 2 * n ** 3:
        return path
    with open(path + ".part", "wb") as f:
        for z in range(n):
            f.write(ct_slice((n, n, n), z).tobytes())
    os.replace(path + ".part", path)
    return path


def config_1024(work, raw, n):
    path = os.path.join(work, f"convert-{n}.yaml")
    with open(path, "w") as f:
        f.write(f"""job: convert
input:
  store: {raw}
  format: raw
  raw: {{dtype: uint16, shape: [{n}, {n}, {n}], byte_order: little}}
  spacing: [1.0, 1.0, 1.0]
  unit: millimeter
normalize: {{mode: none}}
output:
  path: {work}/unused.zarr
  dtype: uint16
  codec: {{name: zstd, level: 3}}
  exists: overwrite
  ome: {{levels: auto, method: mean, downsample: auto}}
parallel: {{threads: auto}}
limits: {{memory_bytes: 4GiB}}
""")
    return path


VARIANTS = (("0.5", []), ("0.5-64cube", ["output.chunk=[64, 64, 64]"]),
            ("0.4", ["output.ome.version=\"0.4\"", "output.codec={name: blosc}"]))


def outputs(args, work, log, configs):
    out = []
    ct_cfg = os.path.join(ROOT, "configs", "convert-ct-ome.yaml")
    vols = args.volumes.split(",")
    for vol in vols:
        if vol == "ct":
            cfg = ct_cfg
        else:
            n = int(vol)
            cfg = config_1024(work, make_1024(work, n), n)
        configs[vol] = cfg
        for variant, sets in VARIANTS:
            rel = f"{vol}-{variant}.zarr"
            if args.reuse and os.path.exists(os.path.join(work, rel, "shardmill.complete.json")):
                out.append((vol, variant, rel, float("nan")))
                continue
            dt = run(args.shardmill, cfg, sets + [f"output.path={work}/{rel}",
                                                   "output.exists=overwrite",
                                                   f"report={work}/{rel}.report.json"], log)
            out.append((vol, variant, rel, dt))
    return out


def write_pairs(args, work, log, n, configs):
    """Each volume's convert with the default chunks and with 64^3, n pairs back to back
    (alternating which goes first): the report's total and write times (ms)."""
    out = {}
    for vol, cfg in configs.items():
        times = {"default": [], "64cube": []}
        for i in range(n):
            order = ("default", "64cube") if i % 2 == 0 else ("64cube", "default")
            for which in order:
                sets = [f"output.path={work}/pair.zarr", "output.exists=overwrite",
                        f"report={work}/pair.report.json"]
                if which == "64cube":
                    sets.append("output.chunk=[64, 64, 64]")
                run(args.shardmill, cfg, sets, log)
                with open(f"{work}/pair.report.json") as f:
                    t = json.load(f).get("timing_ms", {})
                times[which].append({"total": t.get("total"), "write": t.get("write")})
        out[vol] = times
    return out


def table(results):
    lines = ["| volume | output | level | shape | chunk | plane: fetched / shown | plane x | "
             "3-D: fetched / shown | 3-D x | requests (plane, 3-D) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for row in r["levels"]:
            p, v = row["plane"], row["volume"]
            lines.append(
                f"| {r['volume']} | {r['variant']} | {row['level']} | {row['shape']} | "
                f"{row['chunk']} | {p['fetched']:,} / {p['displayed']:,} | "
                f"{p['amplification']:.2f} | {v['fetched']:,} / {v['displayed']:,} | "
                f"{v['amplification']:.2f} | {p['requests']}, {v['requests']} |")
    return "\n".join(lines)


def check_outputs(paths):
    """ctest: every level of each output within the bounds, nginx == computed."""
    from shardmill_test.nginx_server import NginxServer
    failed = False
    for path in paths:
        root = os.path.dirname(os.path.abspath(path))
        with NginxServer(root) as srv:
            rows = measure(os.path.abspath(path), srv, os.path.basename(path), {})
        for row in rows:
            p, v = row["plane"], row["volume"]
            ok = (p["amplification"] <= PLANE_BOUND and v["amplification"] <= VOLUME_BOUND
                  and p["agree"] and v["agree"] and not p["bad_status"] and not v["bad_status"])
            failed |= not ok
            print(f"{'ok  ' if ok else 'FAIL'} {os.path.basename(path)} level {row['level']} "
                  f"shape {row['shape']} chunk {row['chunk']} tile {row['tile']}: plane "
                  f"{p['fetched']}/{p['displayed']} = {p['amplification']:.2f}x (<= {PLANE_BOUND}),"
                  f" 3-D {v['fetched']}/{v['displayed']} = {v['amplification']:.2f}x "
                  f"(<= {VOLUME_BOUND}); nginx == files: {p['agree'] and v['agree']}")
    return 1 if failed else 0


def quick(args):
    """bench.viewer.quick: the default chunks of a small output meet the bounds."""
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    n = (48, 320, 320)
    ct_slice = script_module.load("bench/read_once/w9.py").ct_slice
    raw = os.path.join(work, "quick.u16")
    with open(raw, "wb") as f:
        for z in range(n[0]):
            f.write(ct_slice(n, z).tobytes())
    cfg = os.path.join(work, "quick.yaml")
    with open(cfg, "w") as f:
        f.write(f"""job: convert
input:
  store: {raw}
  format: raw
  raw: {{dtype: uint16, shape: {list(n)}, byte_order: little}}
  spacing: [1.0, 1.0, 1.0]
normalize: {{mode: none}}
output:
  path: {work}/unused.zarr
  dtype: uint16
  fsync: false
  exists: overwrite
  ome: {{levels: 3}}
parallel: {{threads: 2}}
progress: false
""")
    log = os.path.join(work, "runs.log")
    made = []
    for name, sets in (("auto-05", []), ("yx-05", ["output.ome.downsample=yx"]),
                       ("auto-04", ["output.ome.version=\"0.4\""]),
                       ("yx-04", ["output.ome.version=\"0.4\"", "output.ome.downsample=yx"]),
                       ("cube64-05", ["output.chunk=[64, 64, 64]"])):
        run(args.shardmill, cfg, sets + [f"output.path={work}/{name}.zarr"], log)
        made.append(os.path.join(work, f"{name}.zarr"))
    rc = check_outputs(made[:4])
    if check_outputs(made[4:]) == 0:
        print("FAIL the 64^3 inner chunks passed the plane bound: the check cannot fail")
        rc = 1
    else:
        print("ok   the 64^3 inner chunks (before issue 35) exceed the plane bound, as they should")
    return rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shardmill", default=os.path.join(ROOT, "build", "release", "shardmill"))
    ap.add_argument("--work", default=os.path.join(ROOT, "out", "viewer-bench"))
    ap.add_argument("--volumes", default="ct,1024")
    ap.add_argument("--write-pairs", type=int, default=0)
    ap.add_argument("--pairs-volumes", default="ct,1024", help="the volumes --write-pairs runs")
    ap.add_argument("--reuse", action="store_true",
                    help="keep an output of an earlier run that has its marker")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--check", nargs="+", metavar="OUT.zarr")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        return quick(args)
    if args.check:
        return check_outputs(args.check)
    from shardmill_test.nginx_server import NginxServer
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, "runs.log")
    configs = {}
    made = outputs(args, work, log, configs)
    results = []
    with NginxServer(work) as srv:
        for vol, variant, rel, dt in made:
            planes = {}
            rows = measure(os.path.join(work, rel), srv, rel, planes)
            results.append({"volume": vol, "variant": variant, "write_s": dt, "levels": rows,
                            "_planes": planes})
    # the 0.5 plane (our client) equals the 0.4 plane (zarr-python 2.13), level by level
    for vol in {r["volume"] for r in results}:
        a = next(r for r in results if r["volume"] == vol and r["variant"] == "0.5")
        b = next(r for r in results if r["volume"] == vol and r["variant"] == "0.4")
        same = all(np.array_equal(a["_planes"][k], b["_planes"][k]) for k in a["_planes"])
        a["planes_equal_0.4"] = b["planes_equal_0.4"] = same
    for r in results:
        del r["_planes"]
    pair_cfgs = {v: c for v, c in configs.items() if v in args.pairs_volumes.split(",")}
    pairs = write_pairs(args, work, log, args.write_pairs, pair_cfgs) if args.write_pairs else None
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            stdout=subprocess.PIPE, text=True).stdout.strip()
    doc = {"commit": commit, "bounds": {"plane": PLANE_BOUND, "volume": VOLUME_BOUND},
           "results": results, "write_pairs_ms": pairs}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"viewer-{commit}.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print(table(results))
    for r in results:
        worst_p = max(x["plane"]["amplification"] for x in r["levels"])
        worst_v = max(x["volume"]["amplification"] for x in r["levels"])
        agree = all(x["plane"]["agree"] and x["volume"]["agree"] for x in r["levels"])
        print(f"{r['volume']} {r['variant']}: worst plane {worst_p:.2f}x, worst 3-D {worst_v:.2f}x,"
              f" nginx == files: {agree}, 0.5 plane == 0.4 plane: {r.get('planes_equal_0.4')},"
              f" write {r['write_s']:.1f} s")
    if pairs:
        print("write pairs (report total ms):", json.dumps(pairs))
    print("results:", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
