// viv_page.mjs: the Viv page of the viewer test (bundled by build.mjs into DIR/viv/): one level of
// an OME-Zarr image drawn by Viv 0.21's ImageLayer (@vivjs/layers, @vivjs/loaders' loadOmeZarr)
// on deck.gl, as vizarr sets it up: the level's `scale` (y, x) from the multiscales metadata as
// the model matrix, the omero window as the contrast limits, white. window.vivShow(args) draws
// one view and resolves when the level's data is loaded and drawn.
import { Deck, OrthographicView } from "@deck.gl/core";
import { ImageLayer } from "@vivjs/layers";
import { loadOmeZarr } from "@vivjs/loaders";

let deck = null;

function frames(n) {
  return new Promise((resolve) => {
    const step = (k) => (k <= 0 ? resolve() : requestAnimationFrame(() => step(k - 1)));
    step(n);
  });
}

// args: {image, level, z (index in the level), pixel (screen pixel size, in the axes' unit),
//        width, height}; returns {window, scale, shape}
window.vivShow = async (args) => {
  const { data, metadata } = await loadOmeZarr(args.image, { type: "multiscales" });
  const ms = metadata.multiscales[0];
  const ct = ms.datasets[args.level].coordinateTransformations;
  const scale = ct.find((t) => t.type === "scale").scale;
  const w = metadata.omero.channels[0].window;
  const src = data[args.level];
  const [ny, nx] = src.shape.slice(-2);
  const sy = scale[scale.length - 2];
  const sx = scale[scale.length - 1];
  let loaded;
  const done = new Promise((resolve) => (loaded = resolve));
  const layer = new ImageLayer({
    id: `level-${args.level}-${Date.now()}`,
    loader: src,
    selections: [{ z: args.z }],
    contrastLimits: [[w.start, w.end]],
    colors: [[255, 255, 255]],
    channelsVisible: [true],
    // vizarr's model matrix: the level's scale on y and x
    modelMatrix: [sx, 0, 0, 0, 0, sy, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1],
    onViewportLoad: () => loaded(),
  });
  const viewState = {
    target: [(nx * sx) / 2, (ny * sy) / 2, 0],
    zoom: Math.log2(1 / args.pixel),
  };
  if (deck === null) {
    deck = new Deck({
      parent: document.getElementById("viv"),
      width: args.width,
      height: args.height,
      useDevicePixels: false,
      views: [new OrthographicView({ id: "ortho", controller: false })],
      viewState,
      layers: [layer],
    });
  } else {
    deck.setProps({ viewState, layers: [layer] });
  }
  await done;
  await frames(6);
  return { window: [w.start, w.end], scale, shape: src.shape };
};
window.vivReady = true;
