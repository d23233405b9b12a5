// W2 --quick input writer: a uint8 Zarr v3 array with the W1 input's layout (codecs
// [bytes little, zstd 3], chunks [64,64,64], default "/" keys), written by zarrita.js 0.7.5 —
// not by shardmill — from raw C-order bytes the driver generated with NumPy.
//
//   node write_quick_v3.mjs RAW D,H,W OUT_DIR
import * as fs from "node:fs";

import { loadZarrita } from "../region_read/zarrita_common.mjs";

const [raw, shapeText, out] = process.argv.slice(2);
if (!raw || !shapeText || !out) {
    console.error("usage: write_quick_v3.mjs RAW D,H,W OUT_DIR");
    process.exit(2);
}
const shape = shapeText.split(",").map(Number);
const data = new Uint8Array(fs.readFileSync(raw));
if (data.length !== shape.reduce((a, b) => a * b, 1)) {
    console.error(`write_quick_v3: ${raw} has ${data.length} bytes, shape ${shape}`);
    process.exit(1);
}
if (fs.existsSync(out)) {
    console.error(`write_quick_v3: ${out} exists`);
    process.exit(2);
}
const { zarr, FileSystemStore } = await loadZarrita();
fs.mkdirSync(out, { recursive: true });
const arr = await zarr.create(zarr.root(new FileSystemStore(out)), {
    shape, chunkShape: [64, 64, 64], dtype: "uint8", fillValue: 0,
    codecs: [{ name: "bytes", configuration: { endian: "little" } },
        { name: "zstd", configuration: { level: 3, checksum: false } }],
    attributes: { writer: "zarrita.js (bench/convert_ct/write_quick_v3.mjs)" },
});
const stride = [shape[1] * shape[2], shape[2], 1];
await zarr.set(arr, null, { data, shape, stride });
console.log(JSON.stringify({ written: out, shape }));
