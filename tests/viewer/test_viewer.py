#!/usr/bin/python3
"""The viewer test (issue 35 #4): shardmill's OME-Zarr images opened in neuroglancer (npm 2.41.2)
and in Viv 0.21 (npm, on deck.gl 9.2), both bundled by build.mjs, in Debian's headless chromium,
served by a real nginx with Range (206) and CORS from another origin than the viewer pages.

Images (the main job, configs/convert-ct-ome.yaml, on the real CT):
  auto   OME-Zarr 0.5, output.ome.downsample auto (108x256x256 -> 108x128x128 -> 54x64x64)
  yx     OME-Zarr 0.5, downsample yx              (108x256x256 -> 108x128x128 -> 108x64x64)
  v04    OME-NGFF 0.4 (Zarr v2, blosc), downsample auto
For each image and each level k, two views at a zoom where one level-k voxel is 4 * 2^k screen
pixels in y and x (the level neuroglancer draws is chosen with crossSectionRenderScale):
  xy     the slice z = 82.875 mm (the same voxel under the corner and the centre conventions):
         every voxel's screen pixel (the centre of its block) equals round(255 * clip((v - start)
         / (end - start), 0, 1)) within one grey level, v NumPy's level k (zarr-python 2.13 for
         0.4, tests/lib's spec decoder for 0.5) and [start, end] the window the job means: the
         percentile window in uint16 output values, [0, 65535]. The page takes the window from
         the image's omero metadata, as a viewer does; the rendered extent is 245 mm x 245 mm
         (256 x 0.957 mm, the same box at every level) = 1024 x 1024 pixels, within 2.
  xz     the rendered extent is x 245 mm by z 162 mm (108 x 1.5 mm) = 1024 x 677 pixels, within 2:
         the displayed aspect ratio follows each level's scale.
Viv: the same xy view of every level of each image (viv_page.mjs: Viv's ImageLayer on the
level, vizarr's set-up: the level's y, x scale as the model matrix, the omero window as contrast
limits, white), the same pixel and extent checks.
Every view: ready (all chunks drawn), no console error or page error, every request of the data
answered 200/206 (nginx's log), and the shards read by Range (206).
Mutations, which must FAIL the same checks (the test asserts they do): a copy of the yx image
whose level 1 says z scale 3.0 (as if z had been halved: neuroglancer's xz view), a copy of the
auto image whose omero window ends at 30000 (both viewers, every level) and one whose level 1
says y scale x1.5 (Viv's xy view).
Also: the 0.4 image read by zarr-python 2.13 equals the 0.5 auto image at every level, bit for bit,
and @fideus-labs/ngff-zarr 0.14 (npm, tests/interop/js) reads it (validate: true): version, axes,
shapes, scales, and every level's values equal zarr-python's.
Skips (exit 77) only when chromium is not installed (or data/ct is missing, like every real-data
test); a missing tests/viewer/node_modules is a failure (scripts/install-deps.sh installs it).
Usage: test_viewer.py --shardmill BIN --work DIR [--chromium PATH] [--node PATH] [--keep]
"""

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

from shardmill_test import runner as cc
from shardmill_test import zarr_decode
from shardmill_test.checks import Checks
from shardmill_test.nginx_server import NginxServer

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CT = os.path.join(REPO, "data", "ct", "matrix.dat")
CONFIG = os.path.join(REPO, "configs", "convert-ct-ome.yaml")
SPACING = [1.5, 0.9570312, 0.9570312]  # z, y, x (mm), main.plist's, as the config states
SHAPE0 = [108, 256, 256]
WINDOW = (0.0, 65535.0)  # percentile window -> [0, 65535] uint16: the omero window it must state
Z_MM = 82.875            # the xy slice: level 0/1 voxel 55, auto level 2 voxel 27
Y_MM = 128.25 * SPACING[1]  # the xz slice
PIX_MM = 0.25 * SPACING[2]  # screen pixel: a quarter of a level-0 voxel in y and x
VIEWPORT = (1200, 1200)
TOL_PX = 2


def level_plan(mode):
    """(shape, factors) per level, by SPEC §2's rule (independent of the engine)."""
    if mode == "yx":
        return [([108, 256, 256], [1, 1, 1]), ([108, 128, 128], [1, 2, 2]),
                ([108, 64, 64], [1, 4, 4])]
    return [([108, 256, 256], [1, 1, 1]), ([108, 128, 128], [1, 2, 2]), ([54, 64, 64], [2, 4, 4])]


def make_images(c, args, work):
    """The three images, from the main job's configuration."""
    base = ["--set", "output.exists=overwrite", "-q"]
    jobs = {"auto": [], "yx": ["--set", "output.ome.downsample=yx"],
            "v04": ["--set", 'output.ome.version="0.4"', "--set", "output.codec.name=blosc"]}
    ok = True
    for name, extra in jobs.items():
        out = os.path.join(work, "data", f"{name}.zarr")
        r = cc.run([args.shardmill, "run", CONFIG, "--set", f"output.path={out}", "--set",
                    f"report={work}/{name}-report.json"] + base + extra, cwd=REPO)
        ok &= c.check(f"{name}: the main job writes the image", r.returncode == 0, cc.describe(r))
    return ok


def read_levels(path, version):
    if version == "0.4":
        import zarr  # zarr-python 2.13
        g = zarr.open_group(path, mode="r")
        return [g[str(k)][:] for k in range(3)]
    return [zarr_decode.spec_decode(os.path.join(path, str(k))) for k in range(3)]


def mutate(c, work, src, dst, fn):
    """A copy of image src whose metadata fn changes; the levels are symlinks to src's."""
    s = os.path.join(work, "data", src)
    d = os.path.join(work, "data", dst)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for k in range(3):
        os.symlink(os.path.join(s, str(k)), os.path.join(d, str(k)))
    doc = json.load(open(os.path.join(s, "zarr.json")))
    fn(doc["attributes"]["ome"])
    with open(os.path.join(d, "zarr.json"), "w") as f:
        json.dump(doc, f)


def state(img_url, version, layout, k, factors):
    """The neuroglancer state of one view of level k (the shader is the page's, from omero)."""
    scheme = "zarr2" if version == "0.4" else "zarr3"
    pos = [Z_MM / SPACING[0], Y_MM / SPACING[1], SHAPE0[2] / 2]
    if layout == "xz":
        pos = [SHAPE0[0] / 2, Y_MM / SPACING[1], SHAPE0[2] / 2]
    return {
        "dimensions": {n: [s * 1e-3, "m"] for n, s in zip("zyx", SPACING)},
        "displayDimensions": ["x", "y", "z"],
        "position": pos,
        "crossSectionScale": 0.25,
        "layout": layout,
        "showAxisLines": False, "showScaleBar": False, "showDefaultAnnotations": False,
        "crossSectionBackgroundColor": "#ff0000",
        "layers": [{"type": "image", "name": "image", "source": f"{scheme}://{img_url}/",
                    "crossSectionRenderScale": 4 * factors[2] * 0.99}],
    }


def grey_box(rgb):
    """The rendered data's box in a screenshot: rows and columns holding more than 200 grey
    (r == g == b) pixels; the background is red, the panel's corner buttons are small, its
    1-pixel grey frame is left out."""
    grey = (rgb[..., 0] == rgb[..., 1]) & (rgb[..., 1] == rgb[..., 2])
    grey[:3, :] = grey[-3:, :] = grey[:, :3] = grey[:, -3:] = False  # the panel's frame
    rows = np.nonzero(grey.sum(axis=1) > 200)[0]
    cols = np.nonzero(grey.sum(axis=0) > 200)[0]
    if rows.size == 0 or cols.size == 0:
        return None
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


NOT_FOUND = "error: Failed to load resource: the server responded with a status of 404 (Not Found)"
OPTIONAL_DOCS = (".zarray", ".zattrs", ".zgroup", "zarr.json")


def probe_404(failed):
    """drive.mjs's 'URL HTTP 404' of a metadata document the image does not have."""
    url, _, what = failed.partition(" ")
    return what == "HTTP 404" and url.rsplit("/", 1)[-1] in OPTIONAL_DOCS


def png(path):
    from PIL import Image
    return np.asarray(Image.open(path).convert("RGB")).astype(np.int32)


def expected_grey(v):
    lo, hi = WINDOW
    g = np.clip((v.astype(np.float64) - lo) / (hi - lo), 0.0, 1.0) * 255.0
    return np.rint(g).astype(np.int32)


def slice_index(factors):
    """The level's voxel at z = Z_MM (its centre at (factor - 1) / 2 voxels of level 0)."""
    return int((Z_MM - (factors[0] - 1) / 2 * SPACING[0]) // (SPACING[0] * factors[0]))


def check_view(c, label, view, kind, level, plan_k, quiet=False):
    """The checks of one rendered view; returns the list of what failed (also printed as
    checks unless quiet: the mutations only collect them)."""
    fails = []

    def chk(what, ok, detail=""):
        if not ok:
            fails.append(what)
        if not quiet:
            c.check(f"{label}: {what}", ok, detail)
        return ok

    chk("ready: every chunk loaded and drawn", view["ready"], view["console"])
    # a 404 of an optional metadata document (neuroglancer asks a 0.4 group for .zarray and each
    # level for .zattrs) is the viewer probing, not the data; its console line says no URL
    probes = [f for f in view["failed"] if probe_404(f)]
    bad_req = [f for f in view["failed"] if not probe_404(f) and not f.endswith("net::ERR_ABORTED")]
    errors = [m for m in view["console"] if not m.startswith("warning: ")]
    for _ in probes:
        if NOT_FOUND in errors:
            errors.remove(NOT_FOUND)
    chk("no console or page error, no failed request of the data", not errors and not bad_req,
        errors + bad_req)
    rgb = png(view["png"])
    box = grey_box(rgb)
    if not chk("the data is drawn", box is not None):
        return fails
    r0, r1, c0, c1 = box
    shape, factors = plan_k
    if kind == "xy":
        want = (SHAPE0[1] * SPACING[1] / PIX_MM, SHAPE0[2] * SPACING[2] / PIX_MM)
        got = (r1 - r0, c1 - c0)
        chk(f"extent y x {got} px == {want[0]:.1f} x {want[1]:.1f} (scale)",
            all(abs(g - w) <= TOL_PX for g, w in zip(got, want)))
        # the centre pixel of each level-k voxel of the slice
        p = 4 * factors[2]
        zi = slice_index(factors)
        sl = level[zi]
        ys = r0 + p * np.arange(shape[1]) + p // 2
        xs = c0 + p * np.arange(shape[2]) + p // 2
        if not chk("the slice fits the panel", ys[-1] < rgb.shape[0] and xs[-1] < rgb.shape[1],
                   (box, rgb.shape)):
            return fails
        shot = rgb[np.ix_(ys, xs)][..., 0]
        want_g = expected_grey(sl)
        diff = np.abs(shot - want_g)
        chk(f"slice z={zi}: {diff.size} voxels == the omero window [0, 65535] on NumPy's "
            f"level within 1 grey level (max diff {int(diff.max())}, "
            f"{int((diff > 1).sum())} off)", int(diff.max()) <= 1)
    else:
        want = (SHAPE0[0] * SPACING[0] / PIX_MM, SHAPE0[2] * SPACING[2] / PIX_MM)
        got = (r1 - r0, c1 - c0)
        chk(f"xz extent z x {got} px == {want[0]:.1f} x {want[1]:.1f} (aspect follows scale)",
            all(abs(g - w) <= TOL_PX for g, w in zip(got, want)))
    return fails


def ensure_bundle(c, args, work):
    nm = os.path.join(HERE, "node_modules", "neuroglancer", "package.json")
    if not c.check("tests/viewer/node_modules installed (scripts/install-deps.sh: npm ci)",
                   os.path.exists(nm), nm):
        return None
    dist = os.path.join(work, "dist")
    stamp = os.path.join(dist, "STAMP")
    fresh = os.path.exists(stamp) and all(
        os.path.getmtime(stamp) >= os.path.getmtime(os.path.join(HERE, f))
        for f in ("package-lock.json", "build.mjs", "viv_page.mjs"))
    if not fresh:
        r = cc.run([args.node, os.path.join(HERE, "build.mjs"), dist], cwd=HERE, timeout=300)
        if not c.check("neuroglancer bundled by esbuild (build.mjs)", r.returncode == 0,
                       cc.describe(r)):
            return None
    return dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--chromium", default=os.environ.get("SM_CHROMIUM", "/usr/bin/chromium"))
    ap.add_argument("--node", default=shutil.which("node") or "/usr/bin/node")
    ap.add_argument("--keep", action="store_true", help="keep the work directory's images")
    ap.add_argument("--only", help="debugging: only these images' views (comma-separated: auto, "
                    "yx, v04, mut_scale, mut_window); the checks of the others fail")
    args = ap.parse_args()
    if not os.access(args.chromium, os.X_OK):
        print(f"SKIP: chromium not installed ({args.chromium}; scripts/install-deps.sh installs "
              f"Debian's chromium): the viewer test needs a browser")
        return 77
    if not os.path.exists(CT):
        print("SKIP: data/ct/matrix.dat missing (scripts/fetch-data.sh)")
        return 77
    c = Checks("viewer")
    t0 = time.monotonic()
    work = os.path.abspath(args.work)
    os.makedirs(os.path.join(work, "data"), exist_ok=True)
    os.makedirs(os.path.join(work, "shots"), exist_ok=True)
    dist = ensure_bundle(c, args, work)
    if dist is None or not make_images(c, args, work):
        return c.done()
    data = os.path.join(work, "data")
    images = {"auto": ("0.5", "auto"), "yx": ("0.5", "yx"), "v04": ("0.4", "auto")}
    levels = {n: read_levels(os.path.join(data, f"{n}.zarr"), v) for n, (v, _m) in images.items()}
    for n, (_v, mode) in images.items():
        c.check(f"{n}: level shapes {[p[0] for p in level_plan(mode)]}",
                [list(a.shape) for a in levels[n]] == [p[0] for p in level_plan(mode)],
                [a.shape for a in levels[n]])

    # the 0.4 image: zarr-python 2.13 == the 0.5 image; an npm OME-Zarr reader reads it
    for k in range(3):
        a, b = levels["v04"][k], levels["auto"][k]
        c.check(f"v04 level {k}: zarr-python 2.13 == the 0.5 image, bit for bit",
                a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes())
    env = dict(os.environ, SM_ZARRITA_JS=cc.JS_DIR)
    npm_out = os.path.join(work, "npm04")
    r = cc.run([args.node, os.path.join(HERE, "ngff_read.mjs"), os.path.join(data, "v04.zarr"),
                npm_out], env=env)
    if c.check("v04: @fideus-labs/ngff-zarr 0.14 opens it (validate: true)", r.returncode == 0,
               cc.describe(r)):
        d = json.loads(r.stdout.strip().splitlines()[-1])
        plan = level_plan("auto")
        c.check("v04 by ngff-zarr: version 0.4, axes z y x in millimeter",
                d["version"] == "0.4" and d["axes"] == [[n, "space", "millimeter"]
                                                        for n in "zyx"], d)
        for k, lv in enumerate(d["levels"]):
            want_scale = [s * f for s, f in zip(SPACING, plan[k][1])]
            raw = np.fromfile(os.path.join(npm_out, f"{k}.raw"), "<u2")
            c.check(f"v04 level {k} by ngff-zarr: shape, scale, values == zarr-python's",
                    lv["shape"] == plan[k][0] and lv["dtype"] == "uint16" and
                    np.allclose(lv["scale"], want_scale, rtol=1e-6) and
                    raw.tobytes() == levels["v04"][k].tobytes(), lv)

    # the mutants (metadata copies): a wrong scale, a wrong omero window
    def bad_scale(ome):
        ome["multiscales"][0]["datasets"][1]["coordinateTransformations"][0]["scale"][0] = 3.0

    def bad_window(ome):
        ome["omero"]["channels"][0]["window"]["end"] = 30000.0

    def bad_yscale(ome):
        ome["multiscales"][0]["datasets"][1]["coordinateTransformations"][0]["scale"][1] *= 1.5

    mutate(c, work, "yx.zarr", "mut_scale.zarr", bad_scale)
    mutate(c, work, "auto.zarr", "mut_window.zarr", bad_window)
    mutate(c, work, "auto.zarr", "mut_yscale.zarr", bad_yscale)

    with NginxServer(dist) as page, NginxServer(data, cors=True) as srv:
        views = []
        todo = [(n, v, m, None) for n, (v, m) in images.items()]
        todo += [("mut_scale", "0.5", "yx", 1), ("mut_window", "0.5", "auto", None)]
        if args.only:
            todo = [t for t in todo if t[0] in args.only.split(",")]
        for n, v, m, only in todo:
            for k, pk in enumerate(level_plan(m)):
                if only is not None and k != only:
                    continue
                for lay in ("xy", "xz"):
                    views.append({"name": f"{n} level {k} {lay}", "image": f"{srv.url}/{n}.zarr",
                                  "version": v, "layout": lay, "img": n, "k": k,
                                  "png": os.path.join(work, "shots", f"{n}-{k}-{lay}.png"),
                                  "state": state(f"{srv.url}/{n}.zarr", v, lay, k, pk[1])})
        # Viv: the xy slice of every level (Viv draws y-x planes), and the two mutants it reads
        vtodo = [(n, m, None) for n, (v, m) in images.items()]
        vtodo += [("mut_window", "auto", None), ("mut_yscale", "auto", 1)]
        if args.only:
            vtodo = [t for t in vtodo if t[0] in args.only.split(",")]
        for n, m, only in vtodo:
            for k, pk in enumerate(level_plan(m)):
                if only is not None and k != only:
                    continue
                views.append({"name": f"viv {n} level {k} xy", "viewer": "viv", "img": n,
                              "k": k, "layout": "xy",
                              "png": os.path.join(work, "shots", f"viv-{n}-{k}-xy.png"),
                              "viv": {"image": f"{srv.url}/{n}.zarr", "level": k,
                                      "z": slice_index(pk[1]), "pixel": PIX_MM,
                                      "width": VIEWPORT[0], "height": VIEWPORT[1]}})
        plan_path = os.path.join(work, "plan.json")
        with open(plan_path, "w") as f:
            json.dump({"chromium": args.chromium, "page": f"{page.url}/ng/index.html",
                       "viv_page": f"{page.url}/viv/index.html",
                       "viewport": list(VIEWPORT), "views": views}, f, indent=1)
        mark = srv.mark()
        tb = time.monotonic()
        r = cc.run([args.node, os.path.join(HERE, "drive.mjs"), plan_path], cwd=HERE,
                   timeout=600)
        if not c.check(f"chromium drives neuroglancer through {len(views)} views "
                       f"({time.monotonic() - tb:.0f} s)", r.returncode == 0, cc.describe(r)):
            return c.done()
        res = json.loads(r.stdout)
        with open(os.path.join(work, "result.json"), "w") as f:
            f.write(r.stdout)
        print(f"chromium {res['browser']}, launched in {res['launch_ms']} ms")
        reqs = srv.requests(since=mark)
    bad = [q for q in reqs if q["status"] not in (200, 204, 206, 304) and not (
        q["status"] == 404 and q["uri"].rsplit("/", 1)[-1] in OPTIONAL_DOCS)]
    c.check(f"nginx answered every one of {len(reqs)} data requests 200/206 (CORS preflight "
            f"204, cached 304, 404 only for optional metadata documents)", not bad, bad[:5])
    ranged = [q for q in reqs if "/c/" in q["uri"] and q["method"] == "GET"]
    c.check(f"the 0.5 shards are read by Range, answered 206 ({len(ranged)} requests)",
            ranged and all(q["status"] == 206 and q["range"] for q in ranged),
            [q for q in ranged if q["status"] != 206][:3])

    by_name = {v["name"]: v for v in res["views"]}
    if args.only:
        for v in views:
            check_view(c, v["name"], by_name[v["name"]], v["layout"], levels[v["img"]][v["k"]]
                       if v["img"] in levels else levels["yx" if v["img"] == "mut_scale" else
                                                         "auto"][v["k"]],
                       level_plan(images.get(v["img"], ("", "yx" if v["img"] == "mut_scale"
                                                         else "auto"))[1])[v["k"]])
        return c.done()
    for v in views:
        got = by_name[v["name"]]
        n, k, lay = v["img"], v["k"], v["layout"]
        if n.startswith("mut_"):
            continue
        m = images[n][1]
        check_view(c, v["name"], got, lay, levels[n][k], level_plan(m)[k])
    # mutations: the same checks must fail
    f_scale = check_view(c, "", by_name["mut_scale level 1 xz"], "xz", levels["yx"][1],
                         level_plan("yx")[1], quiet=True)
    c.check("mutation: level 1's z scale 3.0 instead of 1.5 fails the aspect check of its xz "
            "view", any("extent" in f for f in f_scale), f_scale)
    f_win = []
    for k in range(3):
        f_win += check_view(c, "", by_name[f"mut_window level {k} xy"], "xy", levels["auto"][k],
                            level_plan("auto")[k], quiet=True)
    c.check("mutation: an omero window ending at 30000 fails the pixel checks of every level",
            sum("grey level" in f for f in f_win) == 3, f_win)
    f_win = []
    for k in range(3):
        f_win += check_view(c, "", by_name[f"viv mut_window level {k} xy"], "xy",
                            levels["auto"][k], level_plan("auto")[k], quiet=True)
    c.check("mutation, Viv: an omero window ending at 30000 fails the pixel checks of every "
            "level", sum("grey level" in f for f in f_win) == 3, f_win)
    f_y = check_view(c, "", by_name["viv mut_yscale level 1 xy"], "xy", levels["auto"][1],
                     level_plan("auto")[1], quiet=True)
    c.check("mutation, Viv: level 1's y scale x1.5 fails the extent check of its xy view",
            any("extent" in f for f in f_y), f_y)
    print(f"viewer test: {time.monotonic() - t0:.0f} s")
    if not args.keep and c.failed == 0:
        shutil.rmtree(os.path.join(work, "data"), ignore_errors=True)
    return c.done()


if __name__ == "__main__":
    sys.exit(main())
