// Writes Zarr v3 fixtures with zarrita.js 0.7.5 for shardmill's interop tests (tests/interop).
// Usage: node gen_zarrita.mjs OUTDIR   → OUTDIR/<name>/zarr.json + chunks, OUTDIR/<name>.raw
// (expected values, little-endian C order, computed here from value()), OUTDIR/manifest.json.
// zarrita 0.7.5 encodes bytes, transpose, zstd and blosc itself but has no gzip or crc32c
// encoder (decode only), so this file registers encoders for those two: gzip from node:zlib,
// crc32c (Castagnoli) implemented below. Chunk-grid, key encoding, transpose, endianness and
// the chunk bytes of the other codecs are zarrita's own. fill_value null is zarrita's default
// (no edit of zarr.json needed).
import * as fs from "node:fs";
import * as path from "node:path";
import * as nodeZlib from "node:zlib";
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";

/* ---- encoders zarrita lacks ---- */
const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32c(bytes) {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

class Crc32cCodec {
  kind = "bytes_to_bytes";
  static fromConfig() {
    return new Crc32cCodec();
  }
  encode(bytes) {
    const out = new Uint8Array(bytes.length + 4);
    out.set(bytes);
    new DataView(out.buffer).setUint32(bytes.length, crc32c(bytes), true);
    return out;
  }
  decode(bytes) {
    const body = bytes.subarray(0, bytes.length - 4);
    const want = new DataView(bytes.buffer, bytes.byteOffset).getUint32(bytes.length - 4, true);
    if (crc32c(body) !== want) throw new Error("crc32c mismatch");
    return body;
  }
  computeEncodedSize(n) {
    return n + 4;
  }
}

class GzipCodec {
  kind = "bytes_to_bytes";
  constructor(level) {
    this.level = level ?? 6;
  }
  static fromConfig(cfg) {
    return new GzipCodec(cfg?.level);
  }
  encode(bytes) {
    return new Uint8Array(nodeZlib.gzipSync(bytes, { level: this.level }));
  }
  decode(bytes) {
    return new Uint8Array(nodeZlib.gunzipSync(bytes));
  }
}

zarr.registry.set("crc32c", () => Crc32cCodec);
zarr.registry.set("gzip", () => GzipCodec);

/* ---- deterministic values ---- */
const CTORS = {
  int8: Int8Array, uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array,
  int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array,
  float32: Float32Array, float64: Float64Array,
};

// Value of linear index i for dtype: spans the type's range, with NaN/±Inf/-0 for floats.
function value(dtype, i) {
  const h = (i * 2654435761) % 4294967296; /* Knuth multiplicative hash, exact in doubles */
  switch (dtype) {
    case "bool": return (h >>> 7) % 3 === 0;
    case "int8": return (h % 256) - 128;
    case "uint8": return h % 256;
    case "int16": return (h % 65536) - 32768;
    case "uint16": return h % 65536;
    case "int32": return h - 2147483648;
    case "uint32": return h;
    case "int64": return (BigInt(h) << 31n) - (1n << 62n) + BigInt(i);
    case "uint64": return (BigInt(h) << 32n) | BigInt(i);
    default: {
      if (i % 41 === 5) return NaN;
      if (i % 53 === 7) return Infinity;
      if (i % 59 === 9) return -Infinity;
      if (i % 61 === 11) return -0;
      return (h % 200003) / 64 - 1000.25;
    }
  }
}

function makeData(dtype, n, fillFor) {
  if (dtype === "bool") {
    const d = new zarr.BoolArray(n);
    for (let i = 0; i < n; i++) d.set(i, fillFor(i) ?? value(dtype, i));
    return d;
  }
  const d = new CTORS[dtype](n);
  for (let i = 0; i < n; i++) d[i] = fillFor(i) ?? value(dtype, i);
  return d;
}

function cOrderIndex(idx, shape) {
  let lin = 0;
  for (let k = 0; k < shape.length; k++) lin = lin * shape[k] + idx[k];
  return lin;
}

function unravel(i, shape) {
  const idx = new Array(shape.length);
  for (let k = shape.length - 1; k >= 0; k--) {
    idx[k] = i % shape[k];
    i = Math.floor(i / shape[k]);
  }
  return idx;
}

function stridesC(shape) {
  const s = new Array(shape.length).fill(1);
  for (let k = shape.length - 2; k >= 0; k--) s[k] = s[k + 1] * shape[k + 1];
  return s;
}

/* ---- fixtures ---- */
const BYTES = (endian) => ({ name: "bytes", configuration: { endian } });
const ZSTD = { name: "zstd", configuration: { level: 3, checksum: false } };
const GZIP = { name: "gzip", configuration: { level: 6 } };
const CRC = { name: "crc32c" };
const T = (order) => ({ name: "transpose", configuration: { order } });

// holes: chunk coordinates whose chunk is filled with the fill value and whose file is deleted.
const FIXTURES = [
  { name: "v3_u16_le_gzip", dtype: "uint16", shape: [37, 45], chunks: [16, 16],
    codecs: [BYTES("little"), GZIP], fill: 7, holes: [[0, 0], [2, 1]] },
  { name: "v3_i32_be_zstd_3d", dtype: "int32", shape: [9, 20, 18], chunks: [4, 8, 8],
    codecs: [BYTES("big"), ZSTD], fill: -5, holes: [[1, 1, 1]] },
  { name: "v3_f32_transpose_gzip_3d", dtype: "float32", shape: [13, 17, 11], chunks: [5, 8, 4],
    codecs: [T([2, 0, 1]), BYTES("little"), GZIP], fill: NaN, holes: [[0, 1, 2]] },
  { name: "v3_f64_be_crc32c", dtype: "float64", shape: [50, 33], chunks: [16, 16],
    codecs: [BYTES("big"), CRC], fill: -Infinity, holes: [[3, 2]] },
  { name: "v3_f32_fill_inf_zstd", dtype: "float32", shape: [40], chunks: [16],
    codecs: [BYTES("little"), ZSTD], fill: Infinity, holes: [[1]] },
  { name: "v3_u8_fillnull_zstd_crc32c", dtype: "uint8", shape: [1000], chunks: [128],
    codecs: [BYTES("little"), ZSTD, CRC], fill: null, holes: [[3]] },
  { name: "v3_i64_transpose_be_zstd", dtype: "int64", shape: [21, 34], chunks: [8, 16],
    codecs: [T([1, 0]), BYTES("big"), ZSTD], fill: 0, holes: [[1, 1]] },
  { name: "v3_u64_be_gzip_crc32c", dtype: "uint64", shape: [100], chunks: [32],
    codecs: [BYTES("big"), GZIP, CRC], fill: 3, holes: [] },
  { name: "v3_bool_gzip", dtype: "bool", shape: [30, 40], chunks: [8, 16],
    codecs: [BYTES("little"), GZIP], fill: false, holes: [[1, 1]] },
  { name: "v3_i8_raw", dtype: "int8", shape: [17, 19], chunks: [5, 5],
    codecs: [BYTES("little")], fill: -1, holes: [[0, 3]] },
  { name: "v3_i16_be_transpose_3d", dtype: "int16", shape: [6, 7, 9], chunks: [4, 4, 4],
    codecs: [T([1, 2, 0]), BYTES("big"), CRC], fill: 100, holes: [] },
  { name: "v3_u32_dotsep_zstd", dtype: "uint32", shape: [33, 65], chunks: [16, 32],
    codecs: [BYTES("little"), ZSTD], fill: 0, holes: [[2, 0]], separator: "." },
  { name: "v3_f64_fillnull_le", dtype: "float64", shape: [12, 12], chunks: [5, 5],
    codecs: [BYTES("little")], fill: null, holes: [] },
  { name: "v3_group/sub/arr_u16", dtype: "uint16", shape: [20, 20], chunks: [8, 8],
    codecs: [BYTES("little"), ZSTD], fill: 1, holes: [[0, 1]], group: "v3_group" },
];

function holeIndexSet(f) {
  const nd = f.shape.length;
  return (i) => {
    const idx = unravel(i, f.shape);
    for (const h of f.holes) {
      let inside = true;
      for (let k = 0; k < nd; k++) {
        const lo = h[k] * f.chunks[k];
        if (idx[k] < lo || idx[k] >= lo + f.chunks[k]) inside = false;
      }
      if (inside) return true;
    }
    return false;
  };
}

function rawBytes(dtype, data) {
  if (dtype === "bool") {
    const out = new Uint8Array(data.length);
    for (let i = 0; i < data.length; i++) out[i] = data.get(i) ? 1 : 0;
    return out;
  }
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

async function writeFixture(outDir, f) {
  const dir = path.join(outDir, f.name);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  if (f.group) {
    const gdir = path.join(outDir, f.group);
    const groot = zarr.root(new FileSystemStore(gdir));
    await zarr.create(groot, { attributes: { note: "zarrita group" } });
    const rel = path.relative(gdir, dir).split(path.sep);
    for (let k = 1; k < rel.length; k++) {
      await zarr.create(groot.resolve(rel.slice(0, k).join("/")), { attributes: {} });
    }
  }
  const store = new FileSystemStore(dir);
  const n = f.shape.reduce((a, b) => a * b, 1);
  const inHole = holeIndexSet(f);
  const isBig = f.dtype === "int64" || f.dtype === "uint64";
  const fillScalar = f.fill === null ? 0 : f.fill; /* null: missing chunks read as zero */
  const toT = (x) => (isBig && typeof x === "number" ? BigInt(x) : x);
  const data = makeData(f.dtype, n, (i) => (inHole(i) ? toT(fillScalar) : undefined));
  const opts = { shape: f.shape, chunkShape: f.chunks, dtype: f.dtype, codecs: f.codecs,
    attributes: { writer: "zarrita.js 0.7.5", fixture: f.name } };
  if (f.fill !== null) opts.fillValue = f.fill; /* JSON number; zarrita makes it a BigInt */
  if (f.separator) opts.chunkSeparator = f.separator;
  const arr = await zarr.create(zarr.root(store), opts);
  await zarr.set(arr, null, { data, shape: f.shape, stride: stridesC(f.shape) });
  const sep = f.separator ?? "/";
  const deleted = [];
  for (const h of f.holes) {
    const key = ["c", ...h].join(sep);
    const p = path.join(dir, ...key.split("/"));
    if (fs.existsSync(p)) fs.unlinkSync(p);
    deleted.push(key);
  }
  const raw = path.join(outDir, `${f.name.replaceAll("/", "__")}.raw`);
  fs.writeFileSync(raw, rawBytes(f.dtype, data));
  const fillJson = f.fill === null ? null : (Number.isNaN(f.fill) ? "NaN"
    : f.fill === Infinity ? "Infinity" : f.fill === -Infinity ? "-Infinity"
    : typeof f.fill === "boolean" ? f.fill : f.fill);
  return {
    name: f.name, family: "zarrita_v3", path: f.group ? f.group : f.name,
    array: f.group
      ? path.relative(path.join(outDir, f.group), dir).split(path.sep).join("/")
      : null,
    dtype: f.dtype, shape: f.shape, chunks: f.chunks, shards: null, zarr_format: 3,
    fill_value: fillJson, codecs: f.codecs.map((c) => c.name), deleted_chunks: deleted,
    expected: path.basename(raw),
  };
}

async function main() {
  const outDir = path.resolve(process.argv[2] ?? "zarrita_out");
  fs.mkdirSync(outDir, { recursive: true });
  const arrays = [];
  for (const f of FIXTURES) arrays.push(await writeFixture(outDir, f));
  fs.writeFileSync(path.join(outDir, "manifest.json"), JSON.stringify({ arrays }, null, 1));
  console.log(`gen_zarrita: wrote ${arrays.length} arrays to ${outDir}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}
