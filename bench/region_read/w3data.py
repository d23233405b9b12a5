"""W3 data sets (SPEC §8 W3): generation, manifest, checksum verification, expectations.

Five arrays of uint16 values `(row*17 + col*31) % 65521 + 1`, each written by an independent
writer (never by shardmill):

| name              | shape | layout                                          | writer                  |
| ----------------- | ----- | ----------------------------------------------- | ----------------------- |
| v2_gzip           | N×N   | Zarr v2, chunks 64×64, numcodecs GZip level 5   | zarr-python 2.13        |
| v3_raw            | N×N   | Zarr v3, chunks 64×64, [bytes]                  | zarrita.js 0.7.5        |
| v3_gzip           | N×N   | Zarr v3, chunks 64×64, [bytes, gzip 5]          | zarrita.js 0.7.5        |
| v3_shard_gzip     | N×N   | v3 shards 512×512, inner 64×64 [bytes, gzip 5], | tests/interop/          |
|                   |       | index [bytes, crc32c] at end                    |   shard_writer.py       |
| v3_index_stress   | 1024² | one shard, inner 8×8 raw, 262,148-byte index    | shard_writer.py         |

N is 4096 in the full profile and 1024 in --quick (same layouts). Each array is generated into
DATA_DIR/n<N>/<name> only if missing or if its checksum does not match the manifest; after
writing, an independent reader (zarr-python for v2, zarrita.js for v3) reads the whole array
back and every value is compared to the formula before the manifest entry is recorded.
"""

import hashlib
import json
import os
import shutil
import subprocess
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MANIFEST_VERSION = 1
GZIP_LEVEL = 5
STRESS_N = 1024


def formula(r0, c0, h, w):
    """The W3 values of rows r0..r0+h-1, columns c0..c0+w-1 as a C-order uint16 array."""
    r = np.arange(r0, r0 + h, dtype=np.int64)[:, None]
    c = np.arange(c0, c0 + w, dtype=np.int64)[None, :]
    return ((r * 17 + c * 31) % 65521 + 1).astype(np.uint16)


def array_specs(n):
    """The arrays of one profile: name -> description used by generation and expectations."""
    return {
        "v2_gzip": {"zarr_format": 2, "n": n, "chunk": 64, "codec": "gzip", "sharded": False,
                    "writer": "zarr-python", "peer": "zarr-python"},
        "v3_raw": {"zarr_format": 3, "n": n, "chunk": 64, "codec": "raw", "sharded": False,
                   "writer": "zarrita.js", "peer": "zarrita.js"},
        "v3_gzip": {"zarr_format": 3, "n": n, "chunk": 64, "codec": "gzip", "sharded": False,
                    "writer": "zarrita.js", "peer": "zarrita.js"},
        "v3_shard_gzip": {"zarr_format": 3, "n": n, "chunk": 64, "shard": 512, "codec": "gzip",
                          "sharded": True, "writer": "shard_writer.py", "peer": "zarrita.js"},
        "v3_index_stress": {"zarr_format": 3, "n": STRESS_N, "chunk": 8, "shard": STRESS_N,
                            "codec": "raw", "sharded": True, "writer": "shard_writer.py",
                            "peer": "zarrita.js"},
    }


def tree_digest(path):
    """SHA-256 over the sorted (relative path, file SHA-256) list; plus file count and bytes."""
    entries = []
    total = 0
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for f in sorted(files):
            fp = os.path.join(root, f)
            h = hashlib.sha256()
            with open(fp, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            total += os.path.getsize(fp)
            entries.append(f"{os.path.relpath(fp, path)}\0{h.hexdigest()}\n")
    entries.sort()
    digest = hashlib.sha256("".join(entries).encode()).hexdigest()
    return {"sha256": digest, "files": len(entries), "bytes": total}


def warm_page_cache(path):
    """Read every file of an array once so the timed reads find it in the page cache."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                while True:
                    b = fh.read(1 << 20)
                    if not b:
                        break
                    total += len(b)
    return total


def _node_modules():
    return os.environ.get("SM_W3_NODE_MODULES",
                          os.path.join(REPO, "tests", "interop", "js", "node_modules"))


def ensure_node_modules(log):
    """Run `npm ci` in tests/interop/js if its node_modules (zarrita 0.7.5) is missing."""
    nm = _node_modules()
    if os.path.isdir(os.path.join(nm, "zarrita")):
        return nm
    js = os.path.join(REPO, "tests", "interop", "js")
    if not os.path.isfile(os.path.join(js, "package.json")):
        raise RuntimeError(f"{js}/package.json missing: zarrita.js peer unavailable")
    log(f"w3: npm ci --prefix {js}")
    subprocess.run(["npm", "ci", "--prefix", js], check=True)
    return nm


def _node_env():
    env = dict(os.environ)
    env["SM_W3_NODE_MODULES"] = _node_modules()
    return env


def _write_v2(path, n):
    import numcodecs
    import zarr
    z = zarr.open(path, mode="w-", shape=(n, n), chunks=(64, 64), dtype="<u2",
                  compressor=numcodecs.GZip(level=GZIP_LEVEL), fill_value=0, order="C")
    z[:, :] = formula(0, 0, n, n)


def _write_v3_zarrita(path, n, codec):
    subprocess.run(["node", os.path.join(HERE, "write_v3_zarrita.mjs"), path, str(n), "64", codec,
                    str(GZIP_LEVEL)], check=True, env=_node_env(), stdout=subprocess.DEVNULL)


def _shard_writer():
    from shardmill_test import shard_writer  # the independent v3 sharded writer
    return shard_writer


def _write_sharded(path, spec):
    sw = _shard_writer()
    n = spec["n"]
    sw.write_sharded_array(path, formula(0, 0, n, n), (spec["shard"],) * 2, (spec["chunk"],) * 2,
                           inner_codec=spec["codec"], index_location="end", index_crc32c=True,
                           level=GZIP_LEVEL if spec["codec"] == "gzip" else None)


def _verify_full(name, spec, path, tmp_dir):
    """Read the whole array back with the independent peer and compare every value."""
    n = spec["n"]
    expect = formula(0, 0, n, n)
    if spec["zarr_format"] == 2:
        import zarr
        got = zarr.open(path, mode="r")[:, :]
    else:
        out = os.path.join(tmp_dir, f"verify-{name}.u16")
        subprocess.run(["node", os.path.join(HERE, "read_zarrita.mjs"), path, "0,0", f"{n},{n}",
                        out], check=True, env=_node_env(), stdout=subprocess.DEVNULL)
        got = np.fromfile(out, dtype="<u2").reshape(n, n)
        os.unlink(out)
    if got.shape != expect.shape or not np.array_equal(got, expect):
        raise RuntimeError(f"generated array {name} does not read back as the formula")
    if name == "v3_index_stress":
        shard = os.path.join(path, "c", "0", "0")
        want = n * n * 2 + (n // spec["chunk"]) ** 2 * 16 + 4
        if os.path.getsize(shard) != want:
            raise RuntimeError(f"{shard}: {os.path.getsize(shard)} bytes, expected {want}")


def _generate(name, spec, path, tmp_dir):
    if spec["writer"] == "zarr-python":
        _write_v2(path, spec["n"])
    elif spec["writer"] == "zarrita.js":
        _write_v3_zarrita(path, spec["n"], spec["codec"])
    else:
        _write_sharded(path, spec)
    _verify_full(name, spec, path, tmp_dir)


def writer_versions():
    import numcodecs
    import zarr
    out = {"numpy": np.__version__, "zarr": zarr.__version__, "numcodecs": numcodecs.__version__}
    try:
        with open(os.path.join(_node_modules(), "zarrita", "package.json")) as f:
            out["zarrita"] = json.load(f)["version"]
    except OSError:
        out["zarrita"] = None
    out["shard_writer"] = os.path.join("tests", "lib", "shardmill_test", "shard_writer.py")
    return out


def ensure_data(data_root, n, names, log):
    """Make DATA_ROOT/n<N>/<name> for each name; return the manifest entries (dict)."""
    base = os.path.join(data_root, f"n{n}")
    os.makedirs(base, exist_ok=True)
    manifest_path = os.path.join(base, "manifest.json")
    manifest = {"version": MANIFEST_VERSION, "n": n, "arrays": {}}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            old = json.load(f)
        if old.get("version") == MANIFEST_VERSION and old.get("n") == n:
            manifest = old
    specs = array_specs(n)
    tmp_dir = os.path.join(base, "tmp")
    os.makedirs(tmp_dir, exist_ok=True)
    result = {}
    for name in names:
        spec = specs[name]
        path = os.path.join(base, name)
        entry = manifest["arrays"].get(name)
        if entry and os.path.isdir(path):
            t0 = time.monotonic()
            digest = tree_digest(path)
            if digest["sha256"] == entry["sha256"]:
                log(f"w3: data {name}: checksum ok ({digest['files']} files, "
                    f"{digest['bytes']} bytes, {time.monotonic() - t0:.1f} s)")
                entry["verified"] = "checksum matched manifest"
                result[name] = dict(entry, path=path)
                continue
            log(f"w3: data {name}: checksum MISMATCH, regenerating")
        t0 = time.monotonic()
        staging = os.path.join(base, f".{name}.tmp-{os.getpid()}")
        if os.path.exists(staging):
            shutil.rmtree(staging)
        _generate(name, spec, staging, tmp_dir)
        if os.path.exists(path):
            shutil.rmtree(path)
        os.rename(staging, path)
        digest = tree_digest(path)
        entry = dict(spec, **digest, generated_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                   time.gmtime()),
                     generation_s=round(time.monotonic() - t0, 2), writer_versions=writer_versions())
        manifest["arrays"][name] = entry
        with open(manifest_path + ".tmp", "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
        os.replace(manifest_path + ".tmp", manifest_path)
        log(f"w3: data {name}: generated and verified in {entry['generation_s']} s "
            f"({digest['files']} files, {digest['bytes']} bytes)")
        entry = dict(entry, verified="generated; full read-back by independent reader matched")
        result[name] = dict(entry, path=path)
    return result


# A range-reading engine may merge byte-adjacent inner chunks into one request; the fewest
# requests it can need is the number of byte-adjacent runs (capped like shardmill's 8 MiB).
MERGE_MAX_BYTES = 8 << 20


def _span(start, length, chunk):
    return range(start // chunk, (start + length - 1) // chunk + 1)


def expectations(spec, path, r0, c0, h, w):
    """Chunks touched by a region and the exact encoded bytes a range-reading engine needs."""
    ch = spec["chunk"]
    rows, cols = _span(r0, h, ch), _span(c0, w, ch)
    out = {"chunks_touched": len(rows) * len(cols)}
    if not spec["sharded"]:
        total = 0
        for i in rows:
            for j in cols:
                key = f"{i}.{j}" if spec["zarr_format"] == 2 else os.path.join("c", str(i), str(j))
                total += os.path.getsize(os.path.join(path, key))
        out["payload_bytes"] = total
        out["adjacent_runs"] = out["chunks_touched"]
        return out
    sh = spec["shard"]
    g = sh // ch
    index_len = g * g * 16 + 4
    shards = {}
    for i in rows:
        for j in cols:
            shards.setdefault((i // g, j // g), []).append((i % g, j % g))
    total = 0
    runs = 0
    for (si, sj), inner in shards.items():
        fp = os.path.join(path, "c", str(si), str(sj))
        with open(fp, "rb") as f:
            f.seek(os.path.getsize(fp) - index_len)
            idx = np.frombuffer(f.read(index_len - 4), dtype="<u8").reshape(g, g, 2)
        prev_end, run_start = None, None
        for a, b in sorted(inner):  # C order of the inner grid, as an engine visits them
            off, nb = int(idx[a, b, 0]), int(idx[a, b, 1])
            total += nb
            if prev_end == off and off + nb - run_start <= MERGE_MAX_BYTES:
                prev_end = off + nb
                continue
            runs += 1
            run_start, prev_end = off, off + nb
    out.update({"shards_touched": len(shards), "index_len": index_len, "payload_bytes": total,
                "adjacent_runs": runs, "index_bytes_cached": len(shards) * index_len,
                "index_bytes_per_chunk": out["chunks_touched"] * index_len})
    return out
