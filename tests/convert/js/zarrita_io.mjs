// zarrita.js 0.7.5 as an independent writer of convert inputs and reader of shardmill outputs
// (tests/convert). zarrita is installed in tests/interop/js/node_modules (npm ci by
// scripts/install-deps.sh); SM_ZARRITA_JS names that directory, so this file imports the packages
// by path instead of by bare name.
// Usage: SM_ZARRITA_JS=DIR node zarrita_io.mjs JOB.json
// JOB: {"write": [{"path", "raw" (little-endian C-order values), "dtype", "shape", "chunks",
//                  "codecs", "fill_value", "delete": [[chunk coords]...]}],
//       "read":  [{"path", "offset", "shape", "out", "slab" (optional)}]}
// A read writes the region's values (little-endian C order) to `out` and prints one JSON line
// {"out", "dtype", "shape"} (dtype and shape of the whole array as zarrita opened it).
import * as fs from "node:fs";
import * as path from "node:path";
import { pathToFileURL } from "node:url";

const JS = process.env.SM_ZARRITA_JS;
const zarr = await import(pathToFileURL(path.join(JS, "node_modules/zarrita/dist/src/index.js")));
const { FileSystemStore } = await import(
  pathToFileURL(path.join(JS, "node_modules/@zarrita/storage/dist/src/index.js")));

const CTORS = {
  int8: Int8Array, uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array,
  int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array,
  float32: Float32Array, float64: Float64Array,
};
const ITEMSIZE = { int8: 1, uint8: 1, int16: 2, uint16: 2, int32: 4, uint32: 4, int64: 8,
  uint64: 8, float32: 4, float64: 8 };

const prod = (a) => a.reduce((x, y) => x * y, 1);

function stridesC(shape) {
  const s = new Array(shape.length).fill(1);
  for (let k = shape.length - 2; k >= 0; k--) s[k] = s[k + 1] * shape[k + 1];
  return s;
}

// Bytes of a zarrita result in C order (gathers any non-C stride).
function chunkBytes(chunk, itemsize) {
  const d = chunk.data;
  const src = new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
  const shape = chunk.shape;
  const n = prod(shape);
  const cstr = stridesC(shape);
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

async function write(w) {
  fs.rmSync(w.path, { recursive: true, force: true });
  fs.mkdirSync(w.path, { recursive: true });
  const raw = fs.readFileSync(w.raw);
  const buf = raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength);
  const data = new CTORS[w.dtype](buf);
  const arr = await zarr.create(zarr.root(new FileSystemStore(w.path)), {
    shape: w.shape, chunkShape: w.chunks, dtype: w.dtype, codecs: w.codecs,
    fillValue: w.fill_value, attributes: { writer: "zarrita.js 0.7.5 (tests/convert)" },
  });
  await zarr.set(arr, null, { data, shape: w.shape, stride: stridesC(w.shape) });
  for (const h of w.delete ?? []) {
    const p = path.join(w.path, "c", ...h.map(String));
    if (!fs.existsSync(p)) throw new Error(`chunk ${p} to delete was not written`);
    fs.unlinkSync(p);
  }
  console.log(JSON.stringify({ wrote: w.path }));
}

// With "slab": N the region is read N planes of axis 0 at a time (zarrita opens every inner
// chunk of a selection at once: a whole large array runs out of file descriptors).
async function read(r) {
  const arr = await zarr.open(new FileSystemStore(r.path), { kind: "array" });
  const step = r.slab ?? r.shape[0];
  const fd = fs.openSync(r.out, "w");
  for (let z = 0; z < r.shape[0]; z += step) {
    const n = Math.min(step, r.shape[0] - z);
    const sel = r.offset.map((o, i) => (i === 0 ? zarr.slice(o + z, o + z + n)
      : zarr.slice(o, o + r.shape[i])));
    const chunk = await zarr.get(arr, sel);
    fs.writeSync(fd, chunkBytes(chunk, ITEMSIZE[arr.dtype]));
  }
  fs.closeSync(fd);
  console.log(JSON.stringify({ out: r.out, dtype: arr.dtype, shape: arr.shape }));
}

const job = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
for (const w of job.write ?? []) await write(w);
for (const r of job.read ?? []) await read(r);
