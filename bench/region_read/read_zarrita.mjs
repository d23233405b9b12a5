// W3 peer reader: zarrita.js 0.7.5 reads a region of a 2-D Zarr v3 array (plain or sharded).
//
//   node read_zarrita.mjs STORE R0,C0 H,W OUT_FILE
//
// Writes the region as raw little-endian values (C order) to OUT_FILE for the driver to check
// against the formula, and prints one JSON line: open_ns (zarr.open), read_ns (zarr.get only,
// the in-process read alone), dtype, shape, stride.
import * as fs from "node:fs";

import { loadZarrita } from "./zarrita_common.mjs";

const [storePath, offText, shapeText, outFile] = process.argv.slice(2);
if (!storePath || !offText || !shapeText || !outFile) {
    console.error("usage: read_zarrita.mjs STORE R0,C0 H,W OUT_FILE");
    process.exit(2);
}
const [r0, c0] = offText.split(",").map(Number);
const [h, w] = shapeText.split(",").map(Number);

const { zarr, FileSystemStore } = await loadZarrita();
const t0 = process.hrtime.bigint();
const arr = await zarr.open.v3(new FileSystemStore(storePath), { kind: "array" });
const t1 = process.hrtime.bigint();
const region = await zarr.get(arr, [zarr.slice(r0, r0 + h), zarr.slice(c0, c0 + w)]);
const t2 = process.hrtime.bigint();
const d = region.data;
if (region.shape[0] !== h || region.shape[1] !== w || region.stride[0] !== w ||
    region.stride[1] !== 1) {
    console.error(`read_zarrita: unexpected layout shape=${region.shape} stride=${region.stride}`);
    process.exit(1);
}
fs.writeFileSync(outFile, new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
console.log(JSON.stringify({
    peer: "zarrita.js", open_ns: Number(t1 - t0), read_ns: Number(t2 - t1),
    dtype: arr.dtype, shape: region.shape, stride: region.stride,
}));
