// Reads a whole Zarr array with zarrita.js 0.7.5 and writes its values as raw little-endian
// C-order bytes (tests/oracle: the oracle's v3 reader, independent of shardmill).
//   node dump_zarrita.mjs STORE OUT.raw [ARRAY_PATH]
// STORE is a directory or an http(s):// URL. Prints {"shape", "dtype", "zarr_format"} as JSON.
import * as fs from "node:fs";

import { loadZarrita, stridesC } from "./zarrita_env.mjs";

const [store, out, arrayPath] = process.argv.slice(2);
if (!store || !out) {
  console.error("usage: dump_zarrita.mjs STORE OUT.raw [ARRAY_PATH]");
  process.exit(2);
}
const { zarr, FileSystemStore, FetchStore } = await loadZarrita();
const s = /^https?:\/\//.test(store) ? new FetchStore(store) : new FileSystemStore(store);
let loc = zarr.root(s);
if (arrayPath) loc = loc.resolve(arrayPath);
const arr = await zarr.open(loc, { kind: "array" });
const chunk = await zarr.get(arr, null);
const shape = chunk.shape;
const n = shape.reduce((a, b) => a * b, 1);
let bytes;
if (arr.dtype === "bool") {
  bytes = new Uint8Array(n);
} else {
  const Ctor = chunk.data.constructor;
  bytes = new Uint8Array(n * Ctor.BYTES_PER_ELEMENT);
}
const item = arr.dtype === "bool" ? 1 : chunk.data.constructor.BYTES_PER_ELEMENT;
const cstr = stridesC(shape);
const contiguous = JSON.stringify(cstr) === JSON.stringify(chunk.stride);
if (arr.dtype === "bool") {
  const idx = new Array(shape.length).fill(0);
  for (let lin = 0; lin < n; lin++) {
    let o = 0;
    for (let k = 0; k < shape.length; k++) o += idx[k] * chunk.stride[k];
    bytes[lin] = chunk.data.get(o) ? 1 : 0;
    for (let k = shape.length - 1; k >= 0; k--) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
} else {
  const d = chunk.data;
  const src = new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
  if (contiguous) {
    bytes.set(src.subarray(0, n * item));
  } else {
    const idx = new Array(shape.length).fill(0);
    for (let lin = 0; lin < n; lin++) {
      let o = 0;
      for (let k = 0; k < shape.length; k++) o += idx[k] * chunk.stride[k];
      bytes.set(src.subarray(o * item, (o + 1) * item), lin * item);
      for (let k = shape.length - 1; k >= 0; k--) {
        if (++idx[k] < shape[k]) break;
        idx[k] = 0;
      }
    }
  }
}
fs.writeFileSync(out, bytes);
console.log(JSON.stringify({ shape, dtype: arr.dtype, zarr_format: 3 }));
