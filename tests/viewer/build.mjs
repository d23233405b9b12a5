// build.mjs: bundles neuroglancer (npm, tests/viewer/package-lock.json) with esbuild into DIR, a
// page the viewer test serves: DIR/ng/index.html, DIR/ng/main.bundle.{js,css},
// DIR/ng/chunk_worker.bundle.js and DIR/async_computation.bundle.js (neuroglancer creates its
// workers at new URL("./chunk_worker.bundle.js") and new URL("../async_computation.bundle.js")
// relative to the module, so the layout keeps both paths valid once bundled).
// And Viv 0.21 (viv_page.mjs) into DIR/viv/index.html + viv.bundle.js.
// Usage: node build.mjs DIR   (about 10 s; test_viewer.py runs it when DIR is missing or stale)
import * as esbuild from "esbuild";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.resolve(process.argv[2] || path.join(here, "dist"));
const lib = path.join(here, "node_modules", "neuroglancer", "lib");

// neuroglancer imports its icons as "ikonate/icons/NAME.svg?raw". The npm release of ikonate
// (1.1.1; neuroglancer pins a git commit npm cannot fetch here) lacks three of them: a blank icon.
const rawSvg = {
  name: "raw-svg",
  setup(build) {
    build.onResolve({ filter: /\.svg\?raw$/ }, (args) => {
      const spec = args.path.replace(/\?raw$/, "");
      let file = null;
      try {
        file = fileURLToPath(import.meta.resolve(spec, "file://" + args.resolveDir + "/"));
      } catch (e) {
        file = path.join(here, "node_modules", spec);
      }
      return { path: file, namespace: "raw-svg" };
    });
    build.onLoad({ filter: /.*/, namespace: "raw-svg" }, (args) => ({
      contents: fs.existsSync(args.path)
        ? fs.readFileSync(args.path, "utf8")
        : '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24"></svg>',
      loader: "text",
    }));
  },
};

const common = {
  bundle: true,
  format: "esm",
  target: "chrome120",
  minify: true,
  logLevel: "warning",
  plugins: [rawSvg],
  loader: { ".wasm": "file", ".html": "file", ".png": "file" },
  define: { "process.env.NODE_ENV": '"production"' },
  // neuroglancer's package "imports" choose the enabled data sources by condition; the default
  // condition enables all of them, as its own build does.
};

fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(path.join(out, "ng"), { recursive: true });
await esbuild.build({
  ...common,
  entryPoints: {
    "ng/main.bundle": path.join(lib, "main.bundle.js"),
    "ng/chunk_worker.bundle": path.join(lib, "chunk_worker.bundle.js"),
    "async_computation.bundle": path.join(lib, "async_computation.bundle.js"),
  },
  outdir: out,
  splitting: false,
});
fs.writeFileSync(
  path.join(out, "ng", "index.html"),
  `<!doctype html>
<html><head><meta charset="utf-8"><title>neuroglancer (shardmill viewer test)</title>
<link rel="icon" href="data:,"><link rel="stylesheet" href="main.bundle.css">
<style>html, body { margin: 0; height: 100%; overflow: hidden; } #neuroglancer-container { height: 100%; }</style>
</head><body><div id="neuroglancer-container"></div>
<script type="module" src="main.bundle.js"></script></body></html>
`,
);
// Viv 0.21 on deck.gl 9.2 (viv_page.mjs): DIR/viv/index.html
fs.mkdirSync(path.join(out, "viv"), { recursive: true });
await esbuild.build({
  bundle: true,
  format: "esm",
  target: "chrome120",
  minify: true,
  logLevel: "warning",
  entryPoints: { "viv/viv.bundle": path.join(here, "viv_page.mjs") },
  outdir: out,
  define: { "process.env.NODE_ENV": '"production"' },
});
fs.writeFileSync(
  path.join(out, "viv", "index.html"),
  `<!doctype html>
<html><head><meta charset="utf-8"><title>Viv (shardmill viewer test)</title>
<link rel="icon" href="data:,">
<style>html, body { margin: 0; height: 100%; overflow: hidden; background: #ff0000; }
#viv { position: relative; width: 100%; height: 100%; }</style>
</head><body><div id="viv"></div>
<script type="module" src="viv.bundle.js"></script></body></html>
`,
);
const stamp = JSON.parse(fs.readFileSync(path.join(lib, "..", "package.json"), "utf8")).version;
fs.writeFileSync(path.join(out, "STAMP"), `neuroglancer ${stamp}\n`);
console.log(`build.mjs: neuroglancer ${stamp} bundled into ${out}`);
