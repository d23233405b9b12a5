// Read-back peer of bench/hdf5: zarrita.js 0.7.5 reads a whole Zarr v3 sharded array.
//   node read_zarrita.mjs ARRAY_DIR OUT.raw SLAB
// The array is read SLAB planes of axis 0 at a time (zarrita opens every inner chunk of one
// selection at once; a whole large array runs out of file descriptors), all slabs into one
// buffer. Prints one JSON line {"read_ms", "open_ms", "shape", "dtype"}: read_ms covers the
// zarr.get calls only; the values are written to OUT.raw (little-endian, C order) afterwards.
import * as fs from "node:fs";
import { loadZarrita } from "../region_read/zarrita_common.mjs";

const [dir, out, slabArg] = process.argv.slice(2);
const slab = Number(slabArg || 8);
const { zarr, FileSystemStore } = await loadZarrita();
const t0 = process.hrtime.bigint();
const arr = await zarr.open(new FileSystemStore(dir), { kind: "array" });
const t1 = process.hrtime.bigint();
const shape = arr.shape;
const plane = shape.slice(1).reduce((a, b) => a * b, 1);
const all = new Float32Array(shape[0] * plane);
for (let z = 0; z < shape[0]; z += slab) {
  const n = Math.min(slab, shape[0] - z);
  const sel = [zarr.slice(z, z + n), ...shape.slice(1).map(() => null)];
  const chunk = await zarr.get(arr, sel);
  const c = chunk.stride;
  // a C-contiguous result is copied as it is; anything else is a bug worth failing on
  if (c[c.length - 1] !== 1) throw new Error(`non-C stride ${c}`);
  all.set(chunk.data.subarray(0, n * plane), z * plane);
}
const t2 = process.hrtime.bigint();
fs.writeFileSync(out, new Uint8Array(all.buffer));
console.log(JSON.stringify({ read_ms: Number(t2 - t1) / 1e6, open_ms: Number(t1 - t0) / 1e6,
  shape, dtype: arr.dtype }));
