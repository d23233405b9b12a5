// Shared loader for the W3 zarrita.js peer scripts (bench/region_read). The scripts live outside the
// npm project, so zarrita is imported by absolute path from the pinned install in
// tests/interop/js/node_modules (zarrita 0.7.5, @zarrita/storage 0.2.0); pass that directory as
// SM_W3_NODE_MODULES or let it default to ../../tests/interop/js/node_modules.
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

export function nodeModulesDir() {
    return process.env.SM_W3_NODE_MODULES ||
        path.resolve(here, "..", "..", "tests", "interop", "js", "node_modules");
}

export async function loadZarrita() {
    const nm = nodeModulesDir();
    const zarr = await import(pathToFileURL(path.join(nm, "zarrita", "dist", "src", "index.js")).href);
    const fsmod = await import(
        pathToFileURL(path.join(nm, "@zarrita", "storage", "dist", "src", "fs.js")).href);
    return { zarr, FileSystemStore: fsmod.default };
}
