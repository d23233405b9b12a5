// W2 verification reader: zarrita.js 0.7.5 (pinned in tests/interop/js) reads whole Zarr v3
// arrays — shardmill's sharded float32 outputs — and writes their values as raw little-endian
// C-order bytes, for the driver (bench/convert_ct/w2.py) to compare bit for bit with NumPy's formula.
//
//   node read_outputs.mjs STORE OUT.raw [STORE OUT.raw ...]
//
// One process reads many outputs (node start-up is paid once per batch). Prints one JSON line
// per store: {store, shape, dtype, chunks (the shard shape), codecs, attributes_keys}.
import * as fs from "node:fs";

import { loadZarrita } from "../region_read/zarrita_common.mjs";

const args = process.argv.slice(2);
if (args.length === 0 || args.length % 2 !== 0) {
    console.error("usage: read_outputs.mjs STORE OUT.raw [STORE OUT.raw ...]");
    process.exit(2);
}
const { zarr, FileSystemStore } = await loadZarrita();
for (let i = 0; i < args.length; i += 2) {
    const [store, out] = [args[i], args[i + 1]];
    const arr = await zarr.open.v3(new FileSystemStore(store), { kind: "array" });
    const got = await zarr.get(arr, null);
    const shape = got.shape;
    const cstride = new Array(shape.length).fill(1);
    for (let k = shape.length - 2; k >= 0; k--) cstride[k] = cstride[k + 1] * shape[k + 1];
    if (JSON.stringify(cstride) !== JSON.stringify(got.stride)) {
        console.error(`read_outputs: ${store}: non-C-order result stride ${got.stride}`);
        process.exit(1);
    }
    const d = got.data;
    fs.writeFileSync(out, new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
    const meta = JSON.parse(fs.readFileSync(`${store}/zarr.json`, "utf8"));
    console.log(JSON.stringify({
        store, shape, dtype: arr.dtype, chunks: arr.chunks, codecs: meta.codecs,
        attributes_keys: Object.keys(meta.attributes || {}),
    }));
}
