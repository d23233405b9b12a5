// W3 data generation: write a 2-D uint16 Zarr v3 array (chunks CxC) with zarrita.js.
//
//   node write_v3_zarrita.mjs OUT_DIR N CHUNK raw|gzip [LEVEL]
//
// Values: (row*17 + col*31) % 65521 + 1 (SPEC §8 W3). Codecs: [bytes little] or
// [bytes little, gzip LEVEL]. zarrita 0.7.5 decodes gzip but its GzipCodec.encode is
// unimplemented, so for writing we register a gzip codec whose encode is node:zlib gzipSync;
// zarrita still builds the metadata, chunk grid, chunk keys and chunk bytes. Peers reading
// the data (read_zarrita.mjs) use zarrita's own built-in gzip decoder.
import * as fs from "node:fs";
import zlib from "node:zlib";

import { loadZarrita } from "./zarrita_common.mjs";

const [out, nText, chunkText, codec, levelText] = process.argv.slice(2);
if (!out || !nText || !chunkText || !["raw", "gzip"].includes(codec)) {
    console.error("usage: write_v3_zarrita.mjs OUT_DIR N CHUNK raw|gzip [LEVEL]");
    process.exit(2);
}
const n = Number(nText);
const chunk = Number(chunkText);
const level = levelText === undefined ? 5 : Number(levelText);
if (fs.existsSync(out)) {
    console.error(`write_v3_zarrita: ${out} exists`);
    process.exit(2);
}

const { zarr, FileSystemStore } = await loadZarrita();

class GzipWithEncode {
    kind = "bytes_to_bytes";
    static fromConfig(config) {
        return new GzipWithEncode(config?.level ?? 5);
    }
    constructor(lvl) {
        this.level = lvl;
    }
    encode(bytes) {
        return new Uint8Array(zlib.gzipSync(bytes, { level: this.level }));
    }
    decode(bytes) {
        return new Uint8Array(zlib.gunzipSync(bytes));
    }
}
zarr.registry.set("gzip", () => GzipWithEncode);

const codecs = [{ name: "bytes", configuration: { endian: "little" } }];
if (codec === "gzip") {
    codecs.push({ name: "gzip", configuration: { level } });
}
fs.mkdirSync(out, { recursive: true });
const store = new FileSystemStore(out);
const arr = await zarr.create(zarr.root(store), {
    shape: [n, n],
    chunkShape: [chunk, chunk],
    dtype: "uint16",
    codecs,
    fillValue: 0,
});
const data = new Uint16Array(n * n);
for (let r = 0; r < n; r++) {
    for (let c = 0; c < n; c++) {
        data[r * n + c] = ((r * 17 + c * 31) % 65521) + 1;
    }
}
await zarr.set(arr, null, { data, shape: [n, n], stride: [n, 1] });
console.log(JSON.stringify({ written: out, n, chunk, codec, level }));
