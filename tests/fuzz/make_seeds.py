#!/usr/bin/python3
"""Writes the seed corpora of tests/fuzz/corpus/<target>/ (docs/internals/fuzzing.md).

Run with Debian's python (numpy, zarr 2.13, numcodecs): PYTHONPATH=$PWD/tests/lib /usr/bin/python3 tests/fuzz/make_seeds.py
The output is committed; rerun after changing a target's input format. Seeds come from writers
independent of shardmill: tests/lib/shardmill_test/shard_writer.py (Zarr v3, plain and sharded), zarr-python
2.13 (v2 arrays and groups) and numcodecs (compressed chunks), plus the repository's configs/ and
tests/bad_input/configs/ for the YAML loader. Every seed is a few KiB at most; each file is named
for what it holds. Files of other origin in a corpus directory (crash reproducers, inputs the
fuzzer found) are kept: only the files this script writes (prefix "seed-") are replaced.
"""
import glob
import os
import shutil
import struct
import sys
import tempfile

import numcodecs
import numpy as np
import zarr

from shardmill_test import shard_writer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CORPUS = os.path.join(HERE, "corpus")
MAX_SEED = 8192
# enum sm_dtype order (engine/include/shardmill/dtype.h)
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64"]
written = {}


def seed(target, name, blob):
    if len(blob) > MAX_SEED:
        return
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(blob)
    written.setdefault(target, 0)
    written[target] += 1


def sample(dtype, shape, seed_=0):
    rng = np.random.default_rng(seed_)
    n = int(np.prod(shape))
    if dtype == "bool":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    if dtype.startswith("float"):
        a = (rng.standard_normal(n) * 100).astype(dtype)
        a[::7] = 0
        return a.reshape(shape)
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -1000), min(info.max, 1000)
    a = rng.integers(lo, hi, n, dtype=np.int64 if info.min < 0 else np.uint64).astype(dtype)
    a[::5] = 0
    return a.reshape(shape)


def read(path):
    with open(path, "rb") as f:
        return f.read()


# ---- codecs: fuzz_codec.h header + encoded chunk ----
def codec_header(dtype, shape, big=False, unknown=False, variant=0, extra=0):
    b1 = (len(shape) - 1) | (4 if big else 0) | (8 if unknown else 0) | (variant << 4)
    ext = [(s - 1) for s in shape] + [0] * (3 - len(shape))
    return bytes([DTYPES.index(dtype), b1] + ext + [extra])


def raw_of(a, big):
    return a.astype(a.dtype.newbyteorder(">" if big else "<")).tobytes()


def codec_seeds():
    cases = [("uint16", (4, 5)), ("float32", (3, 2, 4)), ("uint8", (16,)), ("int64", (2, 3)),
             ("float64", (5,)), ("bool", (4, 4))]
    for dtype, shape in cases:
        a = sample(dtype, shape)
        for big in (False, True):
            raw = raw_of(a, big)
            tag = f"{dtype}-{'x'.join(map(str, shape))}-{'be' if big else 'le'}"
            seed("codec_bytes", tag, codec_header(dtype, shape, big) + raw)
            seed("codec_crc32c", tag,
                 codec_header(dtype, shape, big) + raw + struct.pack("<I", crc32c(raw)))
            for level in (1, 9):
                seed("codec_gzip", f"{tag}-l{level}", codec_header(dtype, shape, big, variant=level)
                     + numcodecs.GZip(level).encode(raw))
                seed("codec_zlib", f"{tag}-l{level}", codec_header(dtype, shape, big, variant=level)
                     + numcodecs.Zlib(level).encode(raw))
            for level, checksum in ((3, False), (1, True)):
                v = (level + 1) | (8 if checksum else 0)
                z = numcodecs.Zstd(level=level, checksum=checksum) if "checksum" in \
                    numcodecs.Zstd.__init__.__code__.co_varnames else numcodecs.Zstd(level=level)
                seed("codec_zstd", f"{tag}-l{level}{'-ck' if checksum else ''}",
                     codec_header(dtype, shape, big, variant=v) + z.encode(raw))
            for cname, v in (("lz4", 0), ("blosclz", 2), ("zstd", 3), ("zlib", 4)):
                for shuf, sv in ((numcodecs.Blosc.NOSHUFFLE, 0), (numcodecs.Blosc.SHUFFLE, 1),
                                 (numcodecs.Blosc.BITSHUFFLE, 2)):
                    item = a.dtype.itemsize
                    enc = numcodecs.Blosc(cname=cname, clevel=5, shuffle=shuf).encode(
                        np.frombuffer(raw, dtype=a.dtype.newbyteorder(">" if big else "<")))
                    extra = sv | ((min(item, 8) - 1) << 2)
                    seed("codec_blosc", f"{tag}-{cname}-s{sv}",
                         codec_header(dtype, shape, big, variant=v + 5 * 0, extra=extra) + enc)
            # transpose: every permutation of the shape (Lehmer code in byte 5)
            for k in range(6 if len(shape) == 3 else (2 if len(shape) == 2 else 1)):
                seed("codec_transpose", f"{tag}-p{k}",
                     codec_header(dtype, shape, big, extra=k) + raw)
        # unknown-size mode: [bytes, zlib, X] (zlib -> [bytes, gzip, zlib])
        raw = raw_of(a, False)
        tag = f"{dtype}-{'x'.join(map(str, shape))}-nested"
        z = numcodecs.Zlib(5).encode(raw)
        seed("codec_gzip", tag, codec_header(dtype, shape, unknown=True, variant=5)
             + numcodecs.GZip(5).encode(z))
        seed("codec_zstd", tag, codec_header(dtype, shape, unknown=True, variant=4)
             + numcodecs.Zstd(level=3).encode(z))
        seed("codec_blosc", tag, codec_header(dtype, shape, unknown=True, variant=0, extra=1)
             + numcodecs.Blosc(cname="lz4", shuffle=numcodecs.Blosc.NOSHUFFLE).encode(z))
        seed("codec_zlib", tag, codec_header(dtype, shape, unknown=True, variant=5)
             + numcodecs.Zlib(5).encode(numcodecs.GZip(5).encode(raw)))


def crc32c(b):
    import crc32c as c
    return c.crc32c(b)


# ---- v3 arrays (shard_writer) -> meta_v3, shard, array_read ----
def objects_in_order(path, meta):
    """The chunk objects of a v3 array with default keys, in C order of the grid ("" if absent)."""
    shape, chunks = meta["shape"], meta["chunk_grid"]["configuration"]["chunk_shape"]
    grid = [-(-s // c) for s, c in zip(shape, chunks)]
    out = []
    sep = meta["chunk_key_encoding"].get("configuration", {}).get("separator", "/")
    v2keys = meta["chunk_key_encoding"]["name"] == "v2"
    for idx in np.ndindex(*grid):
        key = sep.join(map(str, idx)) if v2keys else "/".join(["c"] + list(map(str, idx)))
        p = os.path.join(path, key)
        out.append(read(p) if os.path.exists(p) else b"")
    return out


def array_read_seed(name, path, meta, meta_doc):
    objs = objects_in_order(path, meta)
    seed("array_read", name, meta_doc + b"".join(b"|CHUNK|" + o for o in objs))


def v3_seeds(tmp):
    n = 0

    def fresh():
        nonlocal n
        n += 1
        return os.path.join(tmp, f"a{n}")

    # sharded: (name, dtype, shard shape == array shape, inner, codec, start, crc, nested, variant)
    sharded = [
        ("raw-end", "uint16", (8, 6), (4, 3), "raw", "end", True, None, 0),
        ("raw-start", "float32", (4, 4), (2, 2), "raw", "start", True, None, 0),
        ("raw-nocrc", "int32", (6,), (2,), "raw", "end", False, None, 0),
        ("crc32c", "uint8", (4, 4, 4), (2, 2, 2), ["crc32c"], "end", True, None, 1),
        ("zstd", "float64", (4, 8), (2, 4), "zstd", "end", True, None, 2),
        ("gzip", "int16", (8,), (4,), "gzip", "start", True, None, 3),
        ("blosc", "uint32", (4, 4), (2, 4), "blosc:lz4:shuffle", "end", True, None, 4),
        ("nested", "uint16", (8, 8), (4, 4), "raw", "end", True, (2, 2), 5),
        ("nested-gzip", "int8", (4, 8), (2, 4), "gzip", "end", True, (1, 2), 6),
    ]
    for name, dtype, shape, inner, codec, loc, crc, nested, variant in sharded:
        p = fresh()
        data = sample(dtype, shape, len(name))
        data.flat[: data.size // 3] = 0  # some all-fill inner chunks: empty index entries
        kw = {}
        if nested is not None:
            kw["nested_inner_shape"] = nested
            kw["nested_index_location"] = "start" if variant == 6 else "end"
        meta = shard_writer.write_sharded_array(p, data, shape, inner, inner_codec=codec,
                                                index_location=loc, index_crc32c=crc, **kw)
        doc = read(os.path.join(p, "zarr.json"))
        seed("meta_v3", "sharded-" + name, doc)
        objs = objects_in_order(p, meta)
        flags = (1 if loc == "start" else 0) | (0 if crc else 2) | (variant << 3)
        per = [s // i for s, i in zip(shape, inner)]
        head = bytes([flags, DTYPES.index(dtype), len(shape) - 1]
                     + [(i - 1) for i in inner] + [0] * (3 - len(shape))
                     + [(c - 1) for c in per] + [0] * (3 - len(shape)))
        if objs[0]:
            seed("shard", name, head + objs[0])
        array_read_seed("sharded-" + name, p, meta, doc)
    # several shards, partial edge shard
    p = fresh()
    data = sample("uint16", (10, 7), 3)
    meta = shard_writer.write_sharded_array(p, data, (4, 4), (2, 2), inner_codec="zstd")
    array_read_seed("sharded-grid", p, meta, read(os.path.join(p, "zarr.json")))
    # plain
    plain = [
        ("raw", "int16", (6, 5), (3, 2), "raw", {}),
        ("gzip-be", "float32", (8,), (3,), "gzip", {"endian": "big"}),
        ("zstd-t", "uint8", (4, 3, 2), (2, 3, 2), "zstd", {"transpose": (2, 0, 1)}),
        ("blosc", "float64", (5, 5), (5, 2), "blosc:zstd:bitshuffle", {}),
        ("crc", "uint64", (4,), (2,), ["gzip", "crc32c"], {}),
        ("v2keys", "int32", (4, 4), (2, 2), "raw", {"chunk_key_encoding": "v2",
                                                     "separator": "."}),
        ("nan-fill", "float32", (3, 3), (2, 2), "raw", {"fill_value": float("nan")}),
        ("bool", "bool", (5,), (2,), "raw", {"fill_value": False}),
    ]
    for name, dtype, shape, chunks, codec, kw in plain:
        p = fresh()
        meta = shard_writer.write_plain_v3(p, sample(dtype, shape, len(name)), chunks,
                                           codec=codec, **kw)
        doc = read(os.path.join(p, "zarr.json"))
        seed("meta_v3", "plain-" + name, doc)
        array_read_seed("plain-" + name, p, meta, doc)
    p = fresh()
    shard_writer.write_group_v3(p, {"multiscales": [{"datasets": [{"path": "0"}]}]})
    seed("meta_v3", "group", read(os.path.join(p, "zarr.json")))
    seed("meta_v3", "scalar", b'{"zarr_format": 3, "node_type": "array", "shape": [], '
         b'"data_type": "float64", "chunk_grid": {"name": "regular", "configuration": '
         b'{"chunk_shape": []}}, "chunk_key_encoding": {"name": "default"}, "fill_value": '
         b'"Infinity", "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}], '
         b'"attributes": {}, "dimension_names": []}')


# ---- v2 (zarr-python 2.13) -> meta_v2, v2_group, array_read ----
def v2_seeds(tmp):
    compressors = [("none", None), ("gzip", numcodecs.GZip(5)), ("zlib", numcodecs.Zlib(3)),
                   ("zstd", numcodecs.Zstd(3)),
                   ("blosc", numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE))]
    for i, (cname, comp) in enumerate(compressors):
        for order, dtype in (("C", "<u2"), ("F", ">f4"), ("C", "|i1")):
            p = os.path.join(tmp, f"v2-{cname}-{order}-{dtype[1:]}")
            shape = (5, 6)
            a = zarr.open(p, mode="w", shape=shape, chunks=(3, 4), dtype=dtype, order=order,
                          compressor=comp, fill_value=7 if dtype != ">f4" else float("nan"),
                          dimension_separator="/" if i % 2 else ".")
            a[:] = sample(np.dtype(dtype).newbyteorder("=").name, shape, i)
            a[0:3, 0:4] = a.fill_value  # an all-fill chunk (written anyway by zarr 2)
            a.attrs["note"] = f"{cname} {order}"
            zarray, zattrs = read(os.path.join(p, ".zarray")), read(os.path.join(p, ".zattrs"))
            tag = f"{cname}-{order}-{dtype[1:]}"
            seed("meta_v2", tag, zarray + b"\0" + zattrs)
            sep = "/" if i % 2 else "."
            objs = []
            for idx in np.ndindex(2, 2):
                k = os.path.join(p, sep.join(map(str, idx)))
                objs.append(read(k) if os.path.exists(k) else b"")
            seed("array_read", "v2-" + tag, zarray + b"".join(b"|CHUNK|" + o for o in objs))
    seed("meta_v2", "scalar", b'{"zarr_format": 2, "shape": [], "chunks": [], "dtype": "<i8", '
         b'"compressor": null, "fill_value": 0, "filters": null, "order": "C"}')
    # groups: .zgroup \0 .zattrs \0 0/.zarray \0 0/.zattrs
    p = os.path.join(tmp, "group")
    g = zarr.open_group(p, mode="w")
    g.attrs["multiscales"] = [{"version": "0.4", "axes": [{"name": "z", "type": "space"},
                                                         {"name": "y", "type": "space"}],
                               "datasets": [{"path": "0", "coordinateTransformations":
                                             [{"type": "scale", "scale": [1.0, 0.5]}]}]}]
    lvl = g.create_dataset("0", shape=(4, 4), chunks=(2, 2), dtype="<u2")
    lvl.attrs["level"] = 0
    parts = [read(os.path.join(p, ".zgroup")), read(os.path.join(p, ".zattrs")),
             read(os.path.join(p, "0", ".zarray")), read(os.path.join(p, "0", ".zattrs"))]
    seed("v2_group", "ome", b"\0".join(parts))
    seed("v2_group", "plain", parts[0])
    seed("v2_group", "attrs-only", parts[0] + b"\0" + b'{"a": [1, 2.5, null, true], "b": {}}')
    seed("v2_group", "nan", parts[0] + b"\0" + b'{"x": NaN, "y": -Infinity, "z": 1e400}')


def n5_seeds(tmp):
    """fuzz_n5: attributes.json, a NUL byte, then one block file, as zarr-python 2.13's N5Store
    writes them (every compression it writes that shardmill reads), plus hand-made truncated edge
    and varlength blocks following the N5 specification."""
    import warnings
    warnings.simplefilter("ignore")
    comps = [("raw", None), ("gzip", numcodecs.GZip(5)), ("zlib", numcodecs.Zlib(1)),
             ("zstd", numcodecs.Zstd(3)), ("blosc", numcodecs.Blosc("lz4", 5, 1)),
             ("xz", numcodecs.LZMA()), ("bzip2", numcodecs.BZ2(1))]
    for dt in ("uint8", "int16", "float32", "float64"):
        for name, comp in comps:
            path = os.path.join(tmp, f"n5-{dt}-{name}")
            z = zarr.create(store=zarr.n5.N5Store(path), shape=(5, 6, 7), chunks=(3, 4, 4),
                            dtype=dt, compressor=comp)
            z[:] = sample(dt, (5, 6, 7))
            attrs = read(os.path.join(path, "attributes.json"))
            seed("n5", f"{dt}-{name}", attrs + b"\0" + read(os.path.join(path, "1", "1", "1")))
    attrs = (b'{"dimensions":[7,6,5],"blockSize":[4,4,3],"dataType":"uint16",'
             b'"compression":{"type":"raw"}}')
    edge = np.arange(3 * 2 * 2, dtype=">u2").reshape(2, 2, 3)  # C order of the reversed axes
    hdr = struct.pack(">HH3I", 0, 3, 3, 2, 2)
    seed("n5", "truncated-edge", attrs + b"\0" + hdr + edge.tobytes())
    hdr = struct.pack(">HH4I", 1, 3, 3, 2, 2, 12)
    seed("n5", "varlength", attrs + b"\0" + hdr + edge.tobytes())
    seed("n5", "group", b'{"n5":"2.0.0","note":"a group"}')
    seed("n5", "legacy", b'{"dimensions":[9],"blockSize":[4],"dataType":"int8",'
         b'"compressionType":"gzip"}\0' + struct.pack(">HHI", 0, 1, 1) + b"\x1f\x8b")


def yaml_seeds():
    for path in sorted(glob.glob(os.path.join(ROOT, "configs", "*.yaml"))
                       + glob.glob(os.path.join(ROOT, "tests", "bad_input", "configs", "*.yaml"))):
        blob = read(path)
        kind = "bad-" if "bad_input" in path else ""
        seed("config_yaml", kind + os.path.basename(path), blob)
    base = read(os.path.join(ROOT, "configs", "scan-mri.yaml"))
    seed("config_yaml", "with-sets", base + b"\0limits.memory_bytes=64MiB\0threads=2")


# ---- TIFF files (fuzz_tiff.c): tifffile writes strips and tiles, libtiff-tools' tiffcp recompresses
# to LZW and PackBits (Debian's tifffile writes neither without imagecodecs) ----
def tiff_seeds(tmp):
    import subprocess
    import tifffile
    cases = [("u16-strips-4pages", "uint16", (4, 9, 13), {"rowsperstrip": 3}),
             ("u8-one-page", "uint8", (1, 16, 16), {}),
             ("i16-tiled-deflate", "int16", (2, 20, 24), {"tile": (16, 16), "compression": "zlib"}),
             ("f32-deflate", "float32", (2, 8, 8), {"compression": "zlib"}),
             ("i32-strips", "int32", (2, 5, 7), {"rowsperstrip": 2}),
             ("i8-strips", "int8", (3, 6, 6), {})]
    for name, dtype, shape, kw in cases:
        path = os.path.join(tmp, name + ".tif")
        with tifffile.TiffWriter(path) as w:
            for z, plane in enumerate(sample(dtype, shape)):
                w.write(plane, contiguous=False, **kw)
        seed("tiff", name + ".tif", read(path))
        if name == "u16-strips-4pages":
            for comp in ("lzw", "packbits"):
                dst = os.path.join(tmp, f"{name}-{comp}.tif")
                subprocess.run(["tiffcp", "-c", comp, path, dst], check=True)
                seed("tiff", f"u16-{comp}.tif", read(dst))
    path = os.path.join(tmp, "bigtiff.tif")
    tifffile.imwrite(path, sample("uint16", (2, 8, 8)), bigtiff=True)
    seed("tiff", "u16-bigtiff.tif", read(path))


# ---- TIFF geometry (fuzz_tiff_meta.c): flags, XResolution and YResolution as float32, then the
# first page's ImageDescription as tifffile writes it for ImageJ and OME-TIFF ----
def tiff_meta_seeds(tmp):
    import tifffile
    vol = sample("uint16", (4, 8, 8))

    def blob(path, has_res=True, resunit=1):
        with tifffile.TiffFile(path) as t:
            p = t.pages[0]
            desc = p.tags["ImageDescription"].value.encode("utf-8") \
                if "ImageDescription" in p.tags else b""
            xr = p.tags["XResolution"].value if "XResolution" in p.tags else (1, 1)
            yr = p.tags["YResolution"].value if "YResolution" in p.tags else (1, 1)
        head = bytes([(1 if has_res else 0) | (resunit << 1)])
        return head + struct.pack("<ff", xr[0] / xr[1], yr[0] / yr[1]) + desc

    path = os.path.join(tmp, "ij.tif")
    tifffile.imwrite(path, vol, imagej=True, resolution=(2.0, 2.0),
                     metadata={"spacing": 2.0, "unit": "um", "axes": "ZYX"})
    seed("tiff_meta", "imagej-um", blob(path))
    tifffile.imwrite(path, vol, imagej=True, resolution=(4.0, 4.0),
                     metadata={"spacing": 0.5, "unit": "micron", "axes": "ZYX"})
    seed("tiff_meta", "imagej-micron", blob(path))
    seed("tiff_meta", "imagej-escaped-mu",
         bytes([1 | 2 << 1]) + struct.pack("<ff", 3.0, 3.0) +
         b"ImageJ=1.53t\nimages=4\nslices=4\nunit=\\u00B5m\nspacing=1.5\nloop=false\n")
    for name, md in (("ome-um", {"PhysicalSizeX": 0.5, "PhysicalSizeXUnit": "\u00b5m",
                                 "PhysicalSizeY": 0.5, "PhysicalSizeYUnit": "\u00b5m",
                                 "PhysicalSizeZ": 2.0, "PhysicalSizeZUnit": "\u00b5m"}),
                     ("ome-nm-um", {"PhysicalSizeX": 500, "PhysicalSizeXUnit": "nm",
                                    "PhysicalSizeY": 500, "PhysicalSizeYUnit": "nm",
                                    "PhysicalSizeZ": 2.0, "PhysicalSizeZUnit": "\u00b5m"}),
                     ("ome-no-units", {"PhysicalSizeX": 0.25, "PhysicalSizeY": 0.25})):
        md = dict(md, axes="ZYX")
        tifffile.imwrite(path, vol, ome=True, metadata=md)
        seed("tiff_meta", name, blob(path))
    ome_xml_seeds()
    tifffile.imwrite(path, vol[0], resolution=(300, 300), resolutionunit="INCH")
    seed("tiff_meta", "resolution-inch", blob(path, resunit=2))
    tifffile.imwrite(path, vol[0], resolution=(10000, 10000), resolutionunit="CENTIMETER")
    seed("tiff_meta", "resolution-cm", blob(path, resunit=3))


def ome_xml_seeds():
    """OME-XML the scan must read as XML (issue 32 item 12): a <Pixels> in a comment, a CDATA
    section, a processing instruction or a DOCTYPE's internal subset is no element; sizes in hex
    or spelled "inf" are no xsd:float; a size whose unit conversion overflows (item 11)."""
    head = bytes([1 | 3 << 1]) + struct.pack("<ff", 4.0, 4.0)
    real = (b'<Pixels ID="Pixels:0" PhysicalSizeX="0.5" PhysicalSizeY="0.5" PhysicalSizeZ="2" '
            b'PhysicalSizeZUnit="&#181;m"></Pixels>')
    fake = b'<Pixels PhysicalSizeX="9" PhysicalSizeY="9">'

    def ome(body):
        return head + (b'<?xml version="1.0" encoding="UTF-8"?><OME xmlns="http://www.openmicro'
                       b'scopy.org/Schemas/OME/2016-06"><Image ID="Image:0">' + body +
                       b'</Image></OME>')

    seed("tiff_meta", "ome-comment", ome(b"<!-- " + fake + b" -->" + real))
    seed("tiff_meta", "ome-comment-unterminated", ome(b"<!-- " + fake + real))
    seed("tiff_meta", "ome-cdata", ome(b"<Description><![CDATA[" + fake + b"]]></Description>" +
                                       real))
    seed("tiff_meta", "ome-pi", ome(b"<?pi " + fake + b" ?>" + real))
    seed("tiff_meta", "ome-doctype", head + b"<!DOCTYPE OME [ <!ENTITY e '" + fake +
         b"'> <!-- " + fake + b" --> ]><OME>" + real + b"</OME>")
    seed("tiff_meta", "ome-hex", ome(b'<Pixels PhysicalSizeX="0x10" PhysicalSizeY="0X1p4" '
                                     b'PhysicalSizeZ="inf"/>'))
    seed("tiff_meta", "ome-xsd-forms", ome(b'<Pixels PhysicalSizeX="+.5" PhysicalSizeY=" 5E-1 " '
                                           b'PhysicalSizeZ="2."/>'))
    seed("tiff_meta", "ome-unit-overflow", ome(b'<Pixels PhysicalSizeX="1" PhysicalSizeY="1" '
                                               b'PhysicalSizeZ="1.7e308" '
                                               b'PhysicalSizeZUnit="m"/>'))
    seed("tiff_meta", "ome-only-commented", ome(b"<!--" + fake + b"-->"))


def main():
    only = sys.argv[1] if sys.argv[1:] in (["n5"], ["tiff_meta"]) else None
    for d in glob.glob(os.path.join(CORPUS, only if only else "*")):
        for f in glob.glob(os.path.join(d, "seed-*")):
            os.remove(f)
    tmp = tempfile.mkdtemp(prefix="sm-seeds-")
    if only:  # only these seeds (the others unchanged)
        try:
            {"n5": n5_seeds, "tiff_meta": tiff_meta_seeds}[only](tmp)
        finally:
            shutil.rmtree(tmp)
        print(f"{only}: {written.get(only, 0)} seeds")
        return
    try:
        n5_seeds(tmp)
        codec_seeds()
        v3_seeds(tmp)
        v2_seeds(tmp)
        yaml_seeds()
        tiff_seeds(tmp)
        tiff_meta_seeds(tmp)
    finally:
        shutil.rmtree(tmp)
    for t in sorted(written):
        print(f"{t}: {written[t]} seeds")


if __name__ == "__main__":
    main()
