// W1 input writer (SPEC §8 W1): the MRI of SPEC §9 (NIfTI-1 uint8, x,y,z = 301×370×316) written
// by zarrita.js 0.7.5 — an independent writer, not shardmill — as Zarr v3 uint8 arrays with
// codecs [bytes, zstd level 3] and chunks [64,64,64], axes [z, y, x]:
//
//   node write_w1.mjs NII_GZ OUT_DIR [--crop 256]
//     → OUT_DIR/mri.zarr       [316, 370, 301]  (the whole volume)
//       OUT_DIR/mri-crop.zarr  [256, 256, 256]  (the first 256 along each axis)
//     and prints one JSON line: the parsed header, shapes, SHA-256 of each array's C-order bytes.
//
// The NIfTI-1 header is parsed here (348 bytes, either byte order, vox_offset, dim[], datatype
// 2 = uint8, scl_slope/scl_inter must be identity); gunzip is node:zlib. NIfTI stores x fastest,
// so the voxel bytes are already the C-order [z][y][x] array. Each array is written into a
// temporary sibling directory and renamed into place, so a reader never sees a partial store.
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import * as zlib from "node:zlib";

import { loadZarrita, stridesC } from "../../tests/oracle/zarrita_env.mjs";

function die(msg) {
  console.error(`write_w1: error: ${msg}`);
  process.exit(1);
}

export function parseNifti1(buf) {
  if (buf.length < 348) die(`short NIfTI file (${buf.length} bytes)`);
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let le = true;
  if (dv.getInt32(0, true) !== 348) {
    if (dv.getInt32(0, false) !== 348) die("sizeof_hdr is not 348: not a NIfTI-1 header");
    le = false;
  }
  const magic = buf.subarray(344, 348).toString("latin1");
  if (magic !== "n+1\0") die(`magic ${JSON.stringify(magic)}: not a single-file NIfTI-1`);
  const dim = [];
  for (let k = 0; k < 8; k++) dim.push(dv.getInt16(40 + 2 * k, le));
  const datatype = dv.getInt16(70, le);
  const bitpix = dv.getInt16(72, le);
  const voxOffset = dv.getFloat32(108, le);
  const sclSlope = dv.getFloat32(112, le);
  const sclInter = dv.getFloat32(116, le);
  if (datatype !== 2 || bitpix !== 8) die(`datatype ${datatype} bitpix ${bitpix}: not uint8`);
  const nd = dim[0];
  if (nd < 3 || nd > 7) die(`dim[0] = ${nd}`);
  for (let k = 4; k <= nd; k++) if (dim[k] !== 1) die(`dim[${k}] = ${dim[k]}: not a 3-D volume`);
  const identity = (Number.isNaN(sclSlope) || sclSlope === 0 || sclSlope === 1) &&
    (Number.isNaN(sclInter) || sclInter === 0);
  if (!identity) die(`scl_slope ${sclSlope} scl_inter ${sclInter}: scaled data not supported`);
  const off = Math.round(voxOffset);
  if (off !== voxOffset || off < 352) die(`vox_offset ${voxOffset}`);
  const [nx, ny, nz] = [dim[1], dim[2], dim[3]];
  const n = nx * ny * nz;
  if (buf.length < off + n) die(`file has ${buf.length} bytes, needs ${off + n}`);
  return { littleEndian: le, dim, datatype, bitpix, voxOffset, sclSlope, sclInter,
    xyz: [nx, ny, nz], zyx: [nz, ny, nx], data: new Uint8Array(buf.buffer, buf.byteOffset + off, n) };
}

function crop(data, shape, out) {
  const [nz, ny, nx] = shape;
  const [cz, cy, cx] = out;
  const res = new Uint8Array(cz * cy * cx);
  for (let z = 0; z < cz; z++) {
    for (let y = 0; y < cy; y++) {
      const src = (z * ny + y) * nx;
      res.set(data.subarray(src, src + cx), (z * cy + y) * cx);
    }
  }
  return res;
}

const sha256 = (u8) => crypto.createHash("sha256").update(u8).digest("hex");

async function writeArray(zarr, FileSystemStore, target, data, shape, attrs) {
  const tmp = `${target}.tmp-${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.mkdirSync(tmp, { recursive: true });
  const arr = await zarr.create(zarr.root(new FileSystemStore(tmp)), {
    shape, chunkShape: [64, 64, 64], dtype: "uint8", fillValue: 0,
    codecs: [{ name: "bytes", configuration: { endian: "little" } },
      { name: "zstd", configuration: { level: 3, checksum: false } }],
    attributes: attrs,
  });
  await zarr.set(arr, null, { data, shape, stride: stridesC(shape) });
  fs.rmSync(target, { recursive: true, force: true });
  fs.renameSync(tmp, target);
}

async function main() {
  const args = process.argv.slice(2);
  if (args.length < 2) die("usage: write_w1.mjs NII_GZ OUT_DIR [--crop N]");
  const [nii, outDir] = args;
  const ci = args.indexOf("--crop");
  const side = ci >= 0 ? Number(args[ci + 1]) : 256;
  const gz = fs.readFileSync(nii);
  const raw = gz[0] === 0x1f && gz[1] === 0x8b ? zlib.gunzipSync(gz) : gz;
  const h = parseNifti1(raw);
  const { zarr, FileSystemStore, version } = await loadZarrita();
  if (version !== "0.7.5") die(`zarrita ${version} found, 0.7.5 pinned`);
  fs.mkdirSync(outDir, { recursive: true });
  const cropShape = [side, side, side];
  for (let k = 0; k < 3; k++) if (side > h.zyx[k]) die(`crop ${side} exceeds axis ${k}`);
  const cropData = crop(h.data, h.zyx, cropShape);
  const src = { file: path.basename(nii), sha256: sha256(gz), axes: ["z", "y", "x"] };
  const writer = `zarrita.js ${version}`;
  await writeArray(zarr, FileSystemStore, path.join(outDir, "mri.zarr"), h.data, h.zyx,
    { writer, source: src });
  await writeArray(zarr, FileSystemStore, path.join(outDir, "mri-crop.zarr"), cropData, cropShape,
    { writer, source: src, crop: { offset: [0, 0, 0], shape: cropShape } });
  const info = {
    writer, nifti: { little_endian: h.littleEndian, dim: h.dim, datatype: h.datatype,
      bitpix: h.bitpix, vox_offset: h.voxOffset, xyz: h.xyz }, source_sha256: src.sha256,
    arrays: {
      "mri.zarr": { shape: h.zyx, sha256: sha256(h.data) },
      "mri-crop.zarr": { shape: cropShape, sha256: sha256(cropData) },
    },
  };
  console.log(JSON.stringify(info));
}

main().catch((e) => die(e?.stack ?? String(e)));
