#!/usr/bin/python3
"""Helpers of scripts/main-job.sh for the real head CT (SPEC §9), independent of shardmill.

  ct_tools.py write-zarr RAW OUT          RAW int16 LE [108,256,256] -> Zarr v2 store OUT
                                          (zarr-python 2.13: '<i2', chunks [16,64,64],
                                          zstd level 3, fill 0), written to OUT.tmp then renamed
  ct_tools.py check-info                  stdin: `shardmill info` JSON; prints it, checks
                                          shape/dtype/chunks/shards/zarr_format against the CT
                                          as configs/ingest-ct.yaml writes it (v3, sharded)
  ct_tools.py pictures SHARDMILL OUT REPORT RAW
                                          OUT: the convert output; writes OUT-middle-slice.png
                                          (z = 54, gray = the float32 output) and
                                          OUT-histogram.png (the report's histogram, the window
                                          marked) next to OUT, and checks the slice bit for bit
                                          against NumPy's float32 formula on RAW
  ct_tools.py ome-pictures SHARDMILL OUT REPORT PLIST [RAW]
                                          OUT: the OME-Zarr image of convert-ct-ome.yaml; checks
                                          level 0's scale against PLIST's spacing (main.plist,
                                          x y z -> z y x), the OME-NGFF 0.5 rules
                                          (tests/lib/shardmill_test/ome_ngff_check.py), level 0 against
                                          NumPy's window of RAW in the output's type, and every
                                          level against NumPy's SPEC §2 mean of the blocks of the
                                          level above, bit for bit; writes
                                          OUT-levels.png (the middle slice of every level, axes in
                                          mm, a colour bar) and OUT-histogram.png (the report's
                                          histogram with labelled axes and the window)
  ct_tools.py patch RAW z,y,x d,h,w       stdin: `shardmill read ... -o -` bytes; prints the patch
                                          as a table of HU values and compares it with NumPy
                                          reading RAW directly ("matches NumPy: yes")
Exit status 0 when every check passes, 1 otherwise. Needs Debian's python3 (numpy, zarr 2.13)
and tests/lib on PYTHONPATH (scripts/main-job.sh sets it):
`PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scripts/ct_tools.py ...`.
"""
import json
import os
import shutil
import sys

import numpy as np

from shardmill_test import ome_ngff_check
from shardmill_test.inputs import spacing_zyx
from shardmill_test.spec_oracle import block_mean as block_down  # SPEC §2's mean

SHAPE = (108, 256, 256)
CHUNKS = (16, 64, 64)      # the zarr-python v2 copy (write-zarr)
INNER = (2, 16, 16)        # data/ct-v3.zarr as ingest writes it: inner chunks ...
SHARDS = (8, 32, 32)       # ... of these shards
DTYPE = np.dtype("<i2")


def load_raw(path):
    size = os.path.getsize(path)
    want = int(np.prod(SHAPE)) * DTYPE.itemsize
    if size != want:
        sys.exit("ct_tools: %s has %d bytes, expected %d" % (path, size, want))
    return np.memmap(path, dtype=DTYPE, mode="r", shape=SHAPE)


def write_zarr(raw, out):
    import numcodecs
    import zarr

    data = np.asarray(load_raw(raw))
    tmp = out.rstrip("/") + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    z = zarr.open_array(zarr.DirectoryStore(tmp), mode="w", shape=SHAPE, chunks=CHUNKS,
                        dtype=DTYPE, compressor=numcodecs.Zstd(level=3), fill_value=0,
                        order="C", zarr_version=2)
    z[...] = data
    z.attrs.update({"source": "invesalius-examples examples/Cranium.inv3 matrix.dat",
                    "units": "HU", "writer": "zarr-python %s" % zarr.__version__})
    back = zarr.open_array(zarr.DirectoryStore(tmp), mode="r")
    if not np.array_equal(back[...], data):
        sys.exit("ct_tools: zarr-python read-back differs from matrix.dat")
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    nchunks = len([n for n in os.listdir(out) if not n.startswith(".")])
    print("ct.zarr: Zarr v2 by zarr-python %s, int16 %s, chunks %s, zstd level 3, %d chunk "
          "objects, read back equal" % (zarr.__version__, list(SHAPE), list(CHUNKS), nchunks))
    return 0


def check_info():
    text = sys.stdin.read()
    try:
        info = json.loads(text)
    except ValueError as e:
        print(text)
        print("ct_tools: shardmill info did not print JSON: %s" % e)
        return 1
    print(json.dumps(info, indent=2))
    # `info` may describe the array at the top level or under "array" / "node".
    node = info
    for k in ("array", "node"):
        if isinstance(node, dict) and "shape" not in node and isinstance(node.get(k), dict):
            node = node[k]
    problems = []
    if list(node.get("shape", [])) != list(SHAPE):
        problems.append("shape %s != %s" % (node.get("shape"), list(SHAPE)))
    if str(node.get("dtype")) not in ("int16", "<i2"):
        problems.append("dtype %s != int16" % node.get("dtype"))
    if list(node.get("chunks", [])) != list(INNER):
        problems.append("chunks %s != %s" % (node.get("chunks"), list(INNER)))
    if list(node.get("shards") or []) != list(SHARDS):
        problems.append("shards %s != %s" % (node.get("shards"), list(SHARDS)))
    if node.get("zarr_format") != 3:
        problems.append("zarr_format %s != 3" % node.get("zarr_format"))
    if problems:
        print("info matches the CT: no (%s)" % "; ".join(problems))
        return 1
    print("info matches the CT: yes (int16 %s, shards %s of chunks %s)"
          % (list(SHAPE), list(SHARDS), list(INNER)))
    return 0


def write_png(path, gray):
    """An 8-bit grayscale PNG from a 2-D uint8 array (zlib + struct: no imaging library)."""
    import struct
    import zlib

    h, w = gray.shape
    raw = b"".join(b"\x00" + gray[y].tobytes() for y in range(h))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xffffffff)

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(png)
    os.rename(tmp, path)


def histogram_image(hist, lo, hi, width=512, height=200):
    """Bars of the populated part of the histogram (log scale), the window [lo, hi] marked."""
    counts = np.asarray(hist["counts"], dtype=np.float64)
    r0, r1 = float(hist["range"][0]), float(hist["range"][1])
    nz = np.nonzero(counts)[0]
    first, last = (int(nz[0]), int(nz[-1]) + 1) if len(nz) else (0, len(counts))
    edges = np.linspace(first, last, width + 1).astype(int)
    cols = np.array([counts[a:max(b, a + 1)].sum() for a, b in zip(edges[:-1], edges[1:])])
    bars = np.log1p(cols)
    bars = (bars / bars.max() * (height - 10)).astype(int) if bars.max() > 0 else bars.astype(int)
    img = np.full((height, width), 255, np.uint8)
    for x, b in enumerate(bars):
        img[height - b:, x] = 60
    step = (r1 - r0) / len(counts)
    for v in (lo, hi):  # window edges as mid-gray lines
        x = int(((v - r0) / step - first) / max(last - first, 1) * width)
        if 0 <= x < width:
            img[:, x] = 160
    return img, r0 + first * step, r0 + last * step


def pictures(shardmill, out, report, raw):
    import subprocess

    rep = json.load(open(report))
    norm = rep["result"]["normalization"]
    z = SHAPE[0] // 2
    got = subprocess.run([shardmill, "read", out, "--offset", "%d,0,0" % z, "--shape",
                          "1,%d,%d" % SHAPE[1:], "-o", "-"], check=True,
                         stdout=subprocess.PIPE).stdout
    sl = np.frombuffer(got, dtype="<f4").reshape(SHAPE[1:])
    lo, hi = np.float32(norm["lo"]), np.float32(norm["hi"])
    v = np.asarray(load_raw(raw)[z]).astype(np.float32)
    want = np.clip((v - lo) / (hi - lo), np.float32(0), np.float32(1)).astype(np.float32)
    same = np.array_equal(sl.view(np.uint32), want.view(np.uint32))
    base = out.rstrip("/")
    if base.endswith(".zarr"):
        base = base[:-5]
    slice_png, hist_png = base + "-middle-slice.png", base + "-histogram.png"
    write_png(slice_png, np.round(np.nan_to_num(sl) * 255).astype(np.uint8))
    img, a, b = histogram_image(rep["result"]["histogram"], float(norm["lo"]), float(norm["hi"]))
    write_png(hist_png, img)
    print("pictures: %s (z = %d, window [%g, %g] -> 0..255)" % (slice_png, z, lo, hi))
    print("          %s (log counts over [%g, %g), window edges marked)" % (hist_png, a, b))
    print("middle slice matches NumPy's float32 formula bit for bit: %s" % ("yes" if same else "no"))
    return 0 if same else 1


def read_level(shardmill, path, shape, dtype="<f4"):
    import subprocess
    got = subprocess.run([shardmill, "read", path, "--offset", "0,0,0", "--shape",
                          ",".join(str(n) for n in shape), "-o", "-"], check=True,
                         stdout=subprocess.PIPE).stdout
    return np.frombuffer(got, dtype=dtype).reshape(shape)


ZARR_DTYPES = {"float32": "<f4", "uint16": "<u2", "uint8": "u1"}


def window_level0(raw, lo, hi, dtype):
    """SPEC §2/§5 by NumPy: the float32 window, then rint(w x MAX) in float32 for an integer
    output."""
    v = load_raw(raw).astype(np.float32)
    w = np.clip((v - np.float32(lo)) / (np.float32(hi) - np.float32(lo)), 0, 1).astype(np.float32)
    if np.dtype(dtype).kind == "f":
        return w
    top = np.float32(np.iinfo(np.dtype(dtype)).max)
    return np.rint(w * top).astype(dtype)


def ome_pictures(shardmill, out, report, plist, raw=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = json.load(open(os.path.join(out, "zarr.json")))
    ms = g["attributes"]["ome"]["multiscales"][0]
    unit = ms["axes"][2].get("unit", "")
    want_scale = spacing_zyx(plist)
    scale0 = ms["datasets"][0]["coordinateTransformations"][0]["scale"]
    ok = scale0 == want_scale and unit == "millimeter"
    print("OME-Zarr image %s: %d levels, unit %s, level-0 scale %s (main.plist z, y, x: %s): %s"
          % (out, len(ms["datasets"]), unit, scale0, want_scale, "yes" if ok else "NO"))
    bad = ome_ngff_check.check_image(out)
    print("OME-NGFF 0.5 rules (tests/lib/shardmill_test/ome_ngff_check.py): %s"
          % ("yes" if not bad else "NO: " + "; ".join(bad[:4])))
    ok = ok and not bad
    win = g["attributes"]["ome"].get("omero", {}).get("channels", [{}])[0].get("window", {})
    rep = json.load(open(report))
    norm = rep["result"]["normalization"]
    levels = []
    prev = None
    for d in ms["datasets"]:
        meta = json.load(open(os.path.join(out, d["path"], "zarr.json")))
        dt = ZARR_DTYPES[meta["data_type"]]
        a = read_level(shardmill, os.path.join(out, d["path"]), meta["shape"], dt)
        scale = d["coordinateTransformations"][0]["scale"]
        if prev is None:
            same = True
            if raw is not None:
                want = window_level0(raw, norm["lo"], norm["hi"], dt)
                same = np.array_equal(a, want)
            note = (", equals NumPy's window [%g, %g] -> %s: %s"
                    % (norm["lo"], norm["hi"], meta["data_type"], "yes" if same else "NO")
                    if raw is not None else "")
        else:
            block = [int(round(s / p)) for s, p in zip(scale, prev[1])]
            same = np.array_equal(a, block_down(prev[0], block))
            note = ", blocks %s, equals NumPy's mean of the level above: %s" % (
                "x".join(map(str, block)), "yes" if same else "NO")
        ok = ok and same
        print("  level %s: %s %s, scale %s mm%s" % (
            d["path"], meta["data_type"], meta["shape"], [round(x, 4) for x in scale], note))
        levels.append((d, a))
        prev = (a, scale)
    print("  omero window: %s" % win)
    base = out.rstrip("/")
    if base.endswith(".zarr"):
        base = base[:-5]
    fig, axs = plt.subplots(1, len(levels), figsize=(4.2 * len(levels), 4.4), squeeze=False)
    im = None
    for ax, (d, a) in zip(axs[0], levels):
        ct = d["coordinateTransformations"]
        sz, sy, sx = ct[0]["scale"]
        tz = ct[1]["translation"][0] if len(ct) > 1 else 0.0
        z = a.shape[0] // 2
        im = ax.imshow(a[z], cmap="gray", vmin=win.get("start", 0.0), vmax=win.get("end", 1.0),
                       interpolation="nearest", extent=(0, a.shape[2] * sx, a.shape[1] * sy, 0))
        ax.set_title("level %s: %dx%dx%d, z = %.2f mm" % (d["path"], *a.shape, tz + z * sz),
                     fontsize=9)
        ax.set_xlabel("x (mm)")
        ax.set_ylabel("y (mm)")
    fig.colorbar(im, ax=axs[0].tolist(), shrink=0.8,
                 label="%s value (window [p1, p99], omero window)" % levels[0][1].dtype.name)
    fig.savefig(base + "-levels.png", dpi=90)
    plt.close(fig)
    h = rep["result"]["histogram"]
    counts = np.asarray(h["counts"], dtype=np.float64)
    lo, hi = h["range"]
    edges = np.linspace(lo, hi, len(counts) + 1)
    keep = counts > 0
    fig, ax = plt.subplots(figsize=(8, 3.6))
    first, last = np.argmax(keep), len(keep) - 1 - np.argmax(keep[::-1])
    ax.stairs(counts[first:last + 1], edges[first:last + 2], fill=True)
    ax.set_yscale("log")
    ax.axvline(norm["lo"], color="tab:red", label="window lo = p1 = %g HU" % norm["lo"])
    ax.axvline(norm["hi"], color="tab:green", label="window hi = p99 = %g HU" % norm["hi"])
    ax.set_xlabel("CT value (HU)")
    ax.set_ylabel("voxels per bin (log)")
    ax.set_title("head CT histogram, %d bins over [%g, %g)" % (len(counts), lo, hi))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(base + "-histogram.png", dpi=90)
    plt.close(fig)
    print("pictures: %s-levels.png (middle slice of each level, mm axes, colour bar), "
          "%s-histogram.png (labelled axes)" % (base, base))
    return 0 if ok else 1


def patch(raw, offset, size):
    off = [int(v) for v in offset.split(",")]
    ext = [int(v) for v in size.split(",")]
    if len(off) != 3 or len(ext) != 3:
        sys.exit("ct_tools: offset and shape need three values")
    got_bytes = sys.stdin.buffer.read()
    want_n = int(np.prod(ext))
    if len(got_bytes) != want_n * DTYPE.itemsize:
        print("ct_tools: shardmill read wrote %d bytes, expected %d (%s int16)"
              % (len(got_bytes), want_n * DTYPE.itemsize, "x".join(map(str, ext))))
        print("matches NumPy: no")
        return 1
    got = np.frombuffer(got_bytes, dtype=DTYPE).reshape(ext)
    vol = load_raw(raw)
    want = np.asarray(vol[off[0]:off[0] + ext[0], off[1]:off[1] + ext[1],
                          off[2]:off[2] + ext[2]])
    for z in range(ext[0]):
        print("CT patch z=%d, y=%d..%d (rows), x=%d..%d (columns), HU:"
              % (off[0] + z, off[1], off[1] + ext[1] - 1, off[2], off[2] + ext[2] - 1))
        print("   y\\x " + " ".join("%6d" % (off[2] + x) for x in range(ext[2])))
        for y in range(ext[1]):
            print("  %4d " % (off[1] + y) + " ".join("%6d" % v for v in got[z, y]))
    same = np.array_equal(got, want)
    if not same:
        bad = np.argwhere(got != want)
        print("first difference at %s: shardmill %d, NumPy %d (%d of %d values differ)"
              % (tuple(int(v) for v in bad[0]), int(got[tuple(bad[0])]),
                 int(want[tuple(bad[0])]), len(bad), want_n))
    print("matches NumPy: %s" % ("yes" if same else "no"))
    return 0 if same else 1


def main(argv):
    if len(argv) >= 2 and argv[1] == "write-zarr" and len(argv) == 4:
        return write_zarr(argv[2], argv[3])
    if len(argv) == 2 and argv[1] == "check-info":
        return check_info()
    if len(argv) == 5 and argv[1] == "patch":
        return patch(argv[2], argv[3], argv[4])
    if len(argv) in (6, 7) and argv[1] == "ome-pictures":
        return ome_pictures(*argv[2:])
    if len(argv) == 6 and argv[1] == "pictures":
        return pictures(argv[2], argv[3], argv[4], argv[5])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
