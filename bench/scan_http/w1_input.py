#!/usr/bin/python3
"""W1 input: the MRI volume from nibabel, and an independent check of the zarrita.js-written stores.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/scan_http/w1_input.py verify DATA_DIR [--nii F] [--js-info JSON] [--manifest OUT]

`verify` reads data/mri/ch2better.nii.gz with nibabel (`dataobj` as uint8 and `get_fdata()`,
transposed from [x, y, z] to [z, y, x]), decodes every chunk of DATA_DIR/mri.zarr and
DATA_DIR/mri-crop.zarr itself (zarr.json + `zstandard`, no Zarr library, not shardmill) and
compares the arrays value by value; with --js-info it also checks the volume parsed by the
JS writer (its SHA-256 of the C-order bytes). Exit 0 only if everything matches.
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np

from shardmill_test import scan_oracle

NII_REL = os.path.join("mri", "ch2better.nii.gz")
CROP = 256


def nifti_volume_zyx(nii_path):
    """The MRI as uint8 [z, y, x] from nibabel (dataobj, checked against get_fdata())."""
    vol = scan_oracle.load_nifti_zyx(nii_path)
    if vol.dtype != np.uint8 or vol.shape != (316, 370, 301):
        raise SystemExit(f"w1_input: nibabel gives {vol.dtype} {vol.shape}, expected uint8 "
                         "[z, y, x] = (316, 370, 301)")
    return vol


def read_v3_bytes_zstd(store):
    """Decodes a Zarr v3 array with codecs [bytes, zstd] (any chunk grid) without a Zarr library."""
    import zstandard

    with open(os.path.join(store, "zarr.json")) as f:
        meta = json.load(f)
    if meta.get("zarr_format") != 3 or meta.get("node_type") != "array":
        raise ValueError(f"{store}: not a Zarr v3 array")
    names = [c["name"] for c in meta["codecs"]]
    if names not in (["bytes"], ["bytes", "zstd"]):
        raise ValueError(f"{store}: codecs {names} (expected bytes [+ zstd])")
    dtype = np.dtype(meta["data_type"])
    endian = meta["codecs"][0].get("configuration", {}).get("endian", "little")
    dtype = dtype.newbyteorder("<" if endian == "little" else ">")
    shape = tuple(meta["shape"])
    chunks = tuple(meta["chunk_grid"]["configuration"]["chunk_shape"])
    enc = meta.get("chunk_key_encoding", {"name": "default"})
    sep = enc.get("configuration", {}).get("separator", "/" if enc["name"] == "default" else ".")
    out = np.full(shape, meta["fill_value"] or 0, dtype=dtype.newbyteorder("="))
    grid = [-(-s // c) for s, c in zip(shape, chunks)]
    dctx = zstandard.ZstdDecompressor()
    n_read = 0
    for idx in np.ndindex(*grid):
        key = sep.join([str(i) for i in idx])
        key = ("c" + sep + key) if enc["name"] == "default" else key
        p = os.path.join(store, *key.split("/"))
        if not os.path.exists(p):
            continue
        with open(p, "rb") as f:
            data = f.read()
        if names[-1] == "zstd":
            data = dctx.decompress(data, max_output_size=int(np.prod(chunks)) * dtype.itemsize)
        block = np.frombuffer(data, dtype=dtype).reshape(chunks)
        sl = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunks, shape))
        out[sl] = block[tuple(slice(0, x.stop - x.start) for x in sl)]
        n_read += 1
    return out, meta, n_read


def sha256(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def verify(data_dir, js_info=None, nii=None):
    vol = nifti_volume_zyx(nii or os.path.join(data_dir, NII_REL))
    want = {"mri.zarr": vol, "mri-crop.zarr": vol[:CROP, :CROP, :CROP]}
    result = {"nifti_sha256_zyx": sha256(vol), "arrays": {}}
    ok = True
    for name, ref in want.items():
        store = os.path.join(data_dir, name)
        got, meta, n_read = read_v3_bytes_zstd(store)
        grid = int(np.prod([-(-s // c) for s, c in zip(got.shape, (64, 64, 64))]))
        checks = {
            "shape": list(got.shape) == list(ref.shape),
            "dtype uint8": meta["data_type"] == "uint8",
            "chunks 64^3": meta["chunk_grid"]["configuration"]["chunk_shape"] == [64, 64, 64],
            "codecs bytes+zstd 3": [c["name"] for c in meta["codecs"]] == ["bytes", "zstd"]
            and meta["codecs"][1]["configuration"]["level"] == 3,
            "every chunk present": n_read == grid,
            "values": got.shape == ref.shape and bool(np.array_equal(got, ref)),
        }
        if js_info is not None:
            checks["zarrita.js parse == nibabel"] = (
                js_info["arrays"][name]["sha256"] == sha256(ref))
        bad = [k for k, v in checks.items() if not v]
        ok = ok and not bad
        result["arrays"][name] = {"shape": list(got.shape), "chunks_read": n_read,
                                  "sha256": sha256(got), "checksum": int(ref.sum(dtype=np.int64)),
                                  "checks": checks}
        print(f"w1_input: {name} {list(got.shape)}: {n_read} chunks decoded, "
              + ("all values match nibabel" if not bad else f"FAILED: {', '.join(bad)}"))
    return ok, result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cmd", choices=["verify"])
    ap.add_argument("data_dir")
    ap.add_argument("--js-info", help="the JSON line printed by write_w1.mjs")
    ap.add_argument("--nii", help="the NIfTI file (default DATA_DIR/mri/ch2better.nii.gz)")
    ap.add_argument("--manifest", help="write the verification result here (atomically)")
    a = ap.parse_args(argv)
    js = None
    if a.js_info:
        with open(a.js_info) as f:
            js = json.loads(f.read().strip().splitlines()[-1])
    ok, result = verify(a.data_dir, js, a.nii)
    if js is not None:
        result["writer"] = js["writer"]
        result["source_sha256"] = js["source_sha256"]
        result["nifti_header"] = js["nifti"]
    result["verified"] = ok
    if a.manifest and ok:
        tmp = a.manifest + f".tmp.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        os.replace(tmp, a.manifest)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
