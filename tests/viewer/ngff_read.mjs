// ngff_read.mjs: an npm OME-Zarr reader (@fideus-labs/ngff-zarr 0.14 on zarrita.js, pinned in
// tests/interop/js/package-lock.json) opens an image (0.4 with Zarr v2 levels, or 0.5) and writes
// every level's values, C order, little-endian, to OUTDIR/LEVEL.raw; prints the version, axes
// and per level path, shape, dtype, scale and translation as one JSON line.
// Usage: SM_ZARRITA_JS=tests/interop/js node ngff_read.mjs IMAGE_DIR OUTDIR
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const JS = process.env.SM_ZARRITA_JS;
const mod = (p) => import(pathToFileURL(path.join(JS, "node_modules", p)));
const ngff = await mod("@fideus-labs/ngff-zarr/esm/mod.js");
// the zarrita that ngff-zarr itself uses (its own copy when npm nested one), for zarr.get
const nested = path.join(JS, "node_modules/@fideus-labs/ngff-zarr/node_modules/zarrita");
const zarr = await mod(
  (fs.existsSync(nested) ? "@fideus-labs/ngff-zarr/node_modules/" : "") + "zarrita/dist/src/index.js");
const [image, outdir] = process.argv.slice(2);
const ms = await ngff.fromNgffZarr(path.resolve(image), { validate: true });
const md = ms.metadata;
fs.mkdirSync(outdir, { recursive: true });
const levels = [];
for (const [k, im] of ms.images.entries()) {
  const got = await zarr.get(im.data);
  const d = got.data;
  fs.writeFileSync(path.join(outdir, `${k}.raw`), new Uint8Array(d.buffer, d.byteOffset, d.byteLength));
  levels.push({
    path: md.datasets[k].path,
    shape: Array.from(got.shape),
    stride: Array.from(got.stride),
    dtype: im.data.dtype,
    scale: im.dims.map((n) => im.scale[n]),
    translation: im.dims.map((n) => im.translation[n]),
  });
}
console.log(JSON.stringify({
  version: md.version ?? null,
  axes: md.axes.map((a) => [a.name, a.type, a.unit ?? null]),
  levels,
}));
