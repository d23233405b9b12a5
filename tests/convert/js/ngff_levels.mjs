// An independent OME-Zarr reader (@fideus-labs/ngff-zarr, pinned in tests/interop/js/package.json)
// opens a shardmill OME-Zarr image and prints what it understood: the version, the axes and, per
// level, the path, shape, scale and translation (tests/convert/test_convert_ome.py compares them).
// Usage: SM_ZARRITA_JS=DIR node ngff_levels.mjs IMAGE_DIR
import * as path from "node:path";
import { pathToFileURL } from "node:url";

const JS = process.env.SM_ZARRITA_JS;
const ngff = await import(
  pathToFileURL(path.join(JS, "node_modules/@fideus-labs/ngff-zarr/esm/mod.js")));
const ms = await ngff.fromNgffZarr(path.resolve(process.argv[2]), { validate: true });
const md = ms.metadata;
const levels = ms.images.map((im, k) => ({
  path: md.datasets[k].path,
  shape: Array.from(im.data.shape),
  dims: im.dims,
  scale: im.dims.map((d) => im.scale[d]),
  translation: im.dims.map((d) => im.translation[d]),
}));
console.log(JSON.stringify({
  version: md.version ?? null,
  axes: md.axes.map((a) => [a.name, a.type, a.unit ?? null]),
  levels,
}));
