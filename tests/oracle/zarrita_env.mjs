// Loads the pinned zarrita.js 0.7.5 (+ @zarrita/storage 0.2.0) from tests/interop/js/node_modules
// for scripts that live outside that npm project (tests/oracle, bench/scan_http). Override the
// node_modules directory with SM_ZARRITA_NODE_MODULES.
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

export function nodeModulesDir() {
  return process.env.SM_ZARRITA_NODE_MODULES ||
    path.resolve(here, "..", "interop", "js", "node_modules");
}

export async function loadZarrita() {
  const nm = nodeModulesDir();
  const pkg = path.join(nm, "zarrita", "package.json");
  if (!fs.existsSync(pkg)) {
    throw new Error(`${pkg} missing: run \`npm ci --prefix tests/interop/js\``);
  }
  const version = JSON.parse(fs.readFileSync(pkg, "utf8")).version;
  const imp = (p) => import(pathToFileURL(path.join(nm, ...p.split("/"))).href);
  const zarr = await imp("zarrita/dist/src/index.js");
  const fsmod = await imp("@zarrita/storage/dist/src/fs.js");
  const fetchmod = await imp("@zarrita/storage/dist/src/fetch.js");
  return { zarr, FileSystemStore: fsmod.default, FetchStore: fetchmod.default, version };
}

export function stridesC(shape) {
  const s = new Array(shape.length).fill(1);
  for (let k = shape.length - 2; k >= 0; k--) s[k] = s[k + 1] * shape[k + 1];
  return s;
}
