// Writes the oracle's Zarr v3 fixtures with zarrita.js 0.7.5 (tests/oracle).
//   node gen_fixtures_v3.mjs SPEC.json
// SPEC: {"arrays": [{"dir", "raw" (little-endian C-order values), "dtype", "shape", "chunks",
// "codecs" (v3 codec list), "fill" (number, "NaN", ...), "delete" ([chunk coords...])}]}
// The values come from gen_fixtures.py; metadata, chunk grid, keys and chunk bytes are zarrita's.
import * as fs from "node:fs";
import * as path from "node:path";

import { loadZarrita, stridesC } from "./zarrita_env.mjs";

const CTORS = { uint8: Uint8Array, int8: Int8Array, int16: Int16Array, uint16: Uint16Array,
  int32: Int32Array, uint32: Uint32Array, float32: Float32Array, float64: Float64Array };
const FILL = { NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity };

const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const { zarr, FileSystemStore, version } = await loadZarrita();
for (const a of spec.arrays) {
  fs.rmSync(a.dir, { recursive: true, force: true });
  fs.mkdirSync(a.dir, { recursive: true });
  const buf = fs.readFileSync(a.raw);
  const Ctor = CTORS[a.dtype];
  const data = new Ctor(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
  const arr = await zarr.create(zarr.root(new FileSystemStore(a.dir)), {
    shape: a.shape, chunkShape: a.chunks, dtype: a.dtype, codecs: a.codecs,
    fillValue: typeof a.fill === "string" ? FILL[a.fill] : a.fill,
    attributes: { writer: `zarrita.js ${version}` },
  });
  await zarr.set(arr, null, { data, shape: a.shape, stride: stridesC(a.shape) });
  for (const c of a.delete ?? []) {
    const p = path.join(a.dir, "c", ...c.map(String));
    if (fs.existsSync(p)) fs.unlinkSync(p);
  }
}
console.log(`gen_fixtures_v3: wrote ${spec.arrays.length} arrays with zarrita.js ${version}`);
