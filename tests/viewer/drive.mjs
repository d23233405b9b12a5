// drive.mjs: opens views of OME-Zarr images in neuroglancer in Debian's headless chromium
// (playwright-core, executablePath) and saves a screenshot of each view's data panel.
// Usage: node drive.mjs PLAN.json > RESULT.json
// PLAN: {chromium, page, viv_page, viewport: [w, h],
//        views: [{name, image, version, layout, state, png} (neuroglancer),
//                {name, viewer: "viv", viv: {image, level, z, pixel, width, height}, png}]}
//   page: URL of the bundled neuroglancer (build.mjs) on one origin; image: the image's URL on
//   another (CORS). state: a neuroglancer state without the layer's shader: the page reads the
//   image's omero window from its metadata (0.5: zarr.json attributes.ome.omero, 0.4: .zattrs
//   omero), as a viewer does, and shows the values through it as grey (window -> [0, 1]).
// RESULT: {views: [{name, png, window, ready, console: [...], failed: [...]}], launch_ms}
import fs from "node:fs";
import { chromium } from "playwright-core";

const plan = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const t0 = Date.now();
const browser = await chromium.launch({
  executablePath: plan.chromium,
  headless: true,
  args: [
    "--use-angle=swiftshader",
    "--enable-unsafe-swiftshader",
    "--ignore-gpu-blocklist",
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--force-color-profile=srgb",
  ],
});
const out = { views: [], launch_ms: Date.now() - t0, browser: browser.version() };
try {
  const context = await browser.newContext({
    viewport: { width: plan.viewport[0], height: plan.viewport[1] },
    deviceScaleFactor: 1,
  });
  let log = [];
  let failed = [];
  const open = async (url, ready) => {
    const page = await context.newPage();
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warning") log.push(`${m.type()}: ${m.text()}`);
    });
    page.on("pageerror", (e) => log.push(`pageerror: ${e.message}`));
    page.on("requestfailed", (r) => failed.push(`${r.url()} ${r.failure()?.errorText}`));
    page.on("response", (r) => {
      if (r.status() >= 400) failed.push(`${r.url()} HTTP ${r.status()}`);
    });
    await page.goto(url, { waitUntil: "load" });
    await page.waitForFunction(ready, null, { timeout: 60000 });
    return page;
  };
  let page = null;
  let vivPage = null;
  for (const v of plan.views) {
    log = [];
    failed = [];
    const t = Date.now();
    if (v.viewer === "viv") {
      // Viv: the page draws one level (viv_page.mjs), scale and omero window from the metadata
      if (vivPage === null) vivPage = await open(plan.viv_page, () => window.vivReady === true);
      let info = null;
      try {
        info = await vivPage.evaluate(
          (a) =>
            Promise.race([
              window.vivShow(a),
              new Promise((_, no) => setTimeout(() => no(new Error("not drawn in 30 s")), 30000)),
            ]),
          v.viv,
        );
      } catch (e) {
        log.push(`pageerror: vivShow: ${e.message.split("\n")[0]}`);
      }
      const el = vivPage.locator("#viv");
      await el.screenshot({ path: v.png, animations: "disabled" });
      out.views.push({
        name: v.name,
        png: v.png,
        window: info?.window,
        ready: info !== null,
        ms: Date.now() - t,
        console: log,
        failed,
      });
      continue;
    }
    if (page === null) page = await open(plan.page, () => window.viewer !== undefined);
    const window = await page.evaluate(async ({ image, version }) => {
      const doc = version === "0.4" ? ".zattrs" : "zarr.json";
      const r = await fetch(`${image}/${doc}`);
      if (!r.ok) throw new Error(`${image}/${doc}: HTTP ${r.status}`);
      const j = await r.json();
      const omero = version === "0.4" ? j.omero : j.attributes.ome.omero;
      const w = omero.channels[0].window;
      return [w.start, w.end];
    }, v);
    const f = (x) => (Number.isInteger(x) ? x.toFixed(1) : String(x));
    const shader =
      "void main() {\n" +
      "  float v = float(toRaw(getDataValue()));\n" +
      `  emitGrayscale(clamp((v - ${f(window[0])}) / (${f(window[1])} - ${f(window[0])}), 0.0, 1.0));\n` +
      "}\n";
    const state = JSON.parse(JSON.stringify(v.state));
    state.layers[0].shader = shader;
    await page.evaluate((s) => {
      window.viewer.state.reset();
      window.viewer.state.restoreState(s);
    }, state);
    let ready = false;
    try {
      // ready: every visible chunk of every layer loaded and drawn; twice, a frame apart
      await page.waitForFunction(() => window.viewer.isReady(), null, {
        timeout: 60000,
        polling: 100,
      });
      await page.waitForTimeout(200);
      await page.waitForFunction(() => window.viewer.isReady(), null, { timeout: 30000 });
      ready = true;
    } catch (e) {
      log.push(`not ready: ${e.message.split("\n")[0]}`);
    }
    const panel = page.locator(".neuroglancer-rendered-data-panel").first();
    await panel.screenshot({ path: v.png, animations: "disabled" });
    const box = await panel.boundingBox();
    out.views.push({
      name: v.name,
      png: v.png,
      window,
      ready,
      panel: box,
      ms: Date.now() - t,
      console: log,
      failed,
    });
  }
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
