// Reads Zarr arrays with zarrita.js and compares them with expected raw values (tests/interop).
// Usage: node read_arrays.mjs MANIFEST.json
// MANIFEST: {"arrays": [{"name", "path", "array" (node inside path, optional), "dtype", "shape",
// "raw" or "expected" (raw little-endian C-order values file), "regions": [{"offset": [...],
// "shape": [...]}], "zarrita": true|false, "why"}]}.
// Validates tests/lib/shardmill_test/shard_writer.py (and any other writer) against an independent reader.
// Prints one line per case and a closing "N passed, N failed" line; exits 1 on any failure.
import * as fs from "node:fs";
import * as path from "node:path";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";

const ITEMSIZE = {
  bool: 1, int8: 1, uint8: 1, int16: 2, uint16: 2, int32: 4, uint32: 4,
  int64: 8, uint64: 8, float32: 4, float64: 8,
};

function prod(a) {
  return a.reduce((x, y) => x * y, 1);
}

// Bytes of a zarrita chunk in C order, little-endian (the host is little-endian). zarrita
// returns arrays with a transpose codec in their native (permuted) strides: gather them.
function chunkBytes(chunk, itemsize) {
  const d = chunk.data;
  const src = new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
  const shape = chunk.shape;
  const n = prod(shape);
  const cstr = new Array(shape.length).fill(1);
  for (let i = shape.length - 2; i >= 0; i--) cstr[i] = cstr[i + 1] * shape[i + 1];
  if (JSON.stringify(cstr) === JSON.stringify(chunk.stride)) return src.subarray(0, n * itemsize);
  const out = new Uint8Array(n * itemsize);
  const idx = new Array(shape.length).fill(0);
  for (let lin = 0; lin < n; lin++) {
    let s = 0;
    for (let k = 0; k < shape.length; k++) s += idx[k] * chunk.stride[k];
    out.set(src.subarray(s * itemsize, (s + 1) * itemsize), lin * itemsize);
    for (let k = shape.length - 1; k >= 0; k--) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

// Expected bytes of region [offset, offset+shape) cut out of the whole C-order raw array.
function cutRegion(raw, ashape, itemsize, offset, shape) {
  const out = new Uint8Array(prod(shape) * itemsize);
  const nd = ashape.length;
  const astr = new Array(nd).fill(1);
  for (let i = nd - 2; i >= 0; i--) astr[i] = astr[i + 1] * ashape[i + 1];
  const rowLen = shape[nd - 1] * itemsize;
  const rows = prod(shape.slice(0, nd - 1));
  const idx = new Array(nd - 1).fill(0);
  for (let r = 0; r < rows; r++) {
    let lin = offset[nd - 1];
    for (let i = 0; i < nd - 1; i++) lin += (offset[i] + idx[i]) * astr[i];
    out.set(raw.subarray(lin * itemsize, lin * itemsize + rowLen), r * rowLen);
    for (let i = nd - 2; i >= 0; i--) {
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

// Number of differing elements (NaN equals NaN for floats, else bit patterns must agree).
function countMismatch(got, want, dtype) {
  const isz = ITEMSIZE[dtype];
  if (got.length !== want.length) return -1;
  let bad = 0;
  let firstBad = -1;
  const fget = dtype === "float32"
    ? (b, i) => new DataView(b.buffer, b.byteOffset).getFloat32(i * 4, true)
    : (b, i) => new DataView(b.buffer, b.byteOffset).getFloat64(i * 8, true);
  for (let i = 0; i < got.length / isz; i++) {
    let same = true;
    for (let k = 0; k < isz; k++) {
      if (got[i * isz + k] !== want[i * isz + k]) {
        same = false;
        break;
      }
    }
    const bothNaN = dtype.startsWith("float") && Number.isNaN(fget(got, i)) &&
      Number.isNaN(fget(want, i));
    if (!same && bothNaN) {
      same = true;
    }
    if (!same) {
      if (firstBad < 0) firstBad = i;
      bad++;
    }
  }
  return bad === 0 ? 0 : `${bad} elements differ, first at linear index ${firstBad}`;
}

async function checkArray(a, baseDir) {
  const results = [];
  const store = new FileSystemStore(path.resolve(baseDir, a.path, a.array ?? ""));
  let arr;
  try {
    arr = await zarr.open(store, { kind: "array" });
  } catch (e) {
    return [[`${a.name} open`, `zarrita cannot open: ${e.message}`]];
  }
  const raw = new Uint8Array(fs.readFileSync(path.resolve(baseDir, a.raw ?? a.expected)));
  const isz = ITEMSIZE[a.dtype];
  if (arr.dtype !== a.dtype) results.push([`${a.name} dtype`, `got ${arr.dtype} want ${a.dtype}`]);
  if (JSON.stringify(arr.shape) !== JSON.stringify(a.shape)) {
    const got = JSON.stringify(arr.shape);
    results.push([`${a.name} shape`, `got ${got} want ${JSON.stringify(a.shape)}`]);
  }
  const regions = [{ offset: a.shape.map(() => 0), shape: a.shape }, ...(a.regions || [])];
  for (const r of regions) {
    const label = `${a.name} [${r.offset}]+[${r.shape}]`;
    try {
      const sel = r.offset.map((o, i) => zarr.slice(o, o + r.shape[i]));
      const chunk = await zarr.get(arr, sel);
      const want = cutRegion(raw, a.shape, isz, r.offset, r.shape);
      const m = countMismatch(chunkBytes(chunk, isz), want, a.dtype);
      results.push([label, m === 0 ? null : (m === -1 ? "wrong byte length" : m)]);
    } catch (e) {
      results.push([label, `zarrita error: ${e.message}${e.cause ? " / " + e.cause.message : ""}`]);
    }
  }
  return results;
}

async function main() {
  const manifestPath = process.argv[2];
  const manifest = JSON.parse(fs.readFileSync(manifestPath, "utf8"));
  const baseDir = path.dirname(path.resolve(manifestPath));
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  for (const a of manifest.arrays) {
    if (a.zarrita === false) {
      console.log(`SKIP ${a.name}: ${a.why}`);
      skipped++;
      continue;
    }
    for (const [label, err] of await checkArray(a, baseDir)) {
      if (err === null) {
        passed++;
        console.log(`ok   ${label}`);
      } else {
        failed++;
        console.log(`FAIL ${label}: ${err}`);
      }
    }
  }
  console.log(`zarrita: ${passed} passed, ${failed} failed, ${skipped} skipped`);
  process.exit(failed === 0 && passed > 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
