// W1 peer (SPEC §8 W1): zarrita.js 0.7.5 doing shardmill's scan over the same HTTP server.
//
//   node peer_zarrita.mjs URL --offset z,y,x --shape d,h,w --tile t [--passes N]
//                         [--bins B --range LO,HI] [--mode tile|roi]
//
// FetchStore (@zarrita/storage 0.2.0) + zarr.open; each pass reads the ROI tile by tile with
// zarr.get (mode tile, the default: the same traversal as shardmill's tiles, zarrita has no
// chunk cache so every tile re-fetches and re-decodes its chunks) or with one zarr.get of the
// whole ROI (mode roi), then computes the SPEC §5 histogram and checksums in JS:
//   bin = floor((v - lo) * B / (hi - lo)), v < lo underflow, v >= hi overflow (raw counts per
//   value, folded into the bins once per pass);
//   checksum = Σ v (int64), weighted = Σ v·(1+i) mod 2^64 with i the C-order index in the
//   whole array. The weighted sum is exact: per tile Σv, Σv·z, Σv·y, Σv·x are accumulated as
//   doubles (exact below 2^53, which holds for 8/16-bit integer inputs of W1's size) and
//   combined with BigInt as Σv + Y·X·Σv·z + X·Σv·y + Σv·x + ...
// Prints one JSON line: result (as shardmill's report), timing_ms {open, get, process, total}
// measured in-process from just before zarr.open (module loading excluded), requests seen by
// the FetchStore (metadata, payload), versions. Every pass must give the same result.
import { loadZarrita } from "../../tests/oracle/zarrita_env.mjs";

function die(msg) {
  console.error(`peer_zarrita: error: ${msg}`);
  process.exit(1);
}

function parseArgs(argv) {
  const o = { passes: 1, mode: "tile", bins: 256, range: [0, 256] };
  o.url = argv[0];
  for (let k = 1; k < argv.length; k += 2) {
    const key = argv[k].replace(/^--/, "");
    const val = argv[k + 1];
    if (["offset", "shape"].includes(key)) o[key] = val.split(",").map(Number);
    else if (key === "tile") o.tile = val.split(",").map(Number);
    else if (key === "range") o.range = val.split(",").map(Number);
    else if (["passes", "bins"].includes(key)) o[key] = Number(val);
    else if (key === "mode") o.mode = val;
    else die(`unknown option --${key}`);
  }
  if (!o.url || !o.offset || !o.shape || !o.tile) die("usage: see the header of peer_zarrita.mjs");
  if (o.tile.length === 1) o.tile = [o.tile[0], o.tile[0], o.tile[0]];
  return o;
}

const M64 = (1n << 64n) - 1n;

// One tile (its own function so V8 optimises it): raw value counts and the exact partial sums
// Σv, Σv·z, Σv·y, Σv·x over global coordinates.
function tileSums(d, raw, nz, ny, nx, sz, sy, sx, z0, y0, x0, tmin, acc) {
  let s0 = 0, sZ = 0, sY = 0, sX = 0;
  for (let iz = 0; iz < nz; iz++) {
    let rz = 0;
    for (let iy = 0; iy < ny; iy++) {
      let ry = 0, rx = 0;
      const base = iz * sz + iy * sy;
      if (sx === 1) {
        for (let ix = 0; ix < nx; ix++) {
          const v = d[base + ix];
          raw[v - tmin]++;
          ry += v;
          rx += v * ix;
        }
      } else {
        for (let ix = 0; ix < nx; ix++) {
          const v = d[base + ix * sx];
          raw[v - tmin]++;
          ry += v;
          rx += v * ix;
        }
      }
      rz += ry;
      sY += ry * (y0 + iy);
      sX += rx + ry * x0;
    }
    s0 += rz;
    sZ += rz * (z0 + iz);
  }
  acc[0] = s0;
  acc[1] = sZ;
  acc[2] = sY;
  acc[3] = sX;
  return acc;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const { zarr, FetchStore, version } = await loadZarrita();
  const req = { metadata: 0, payload: 0 };
  const store = new FetchStore(o.url, {
    fetch: (request) => {
      const u = new URL(request.url).pathname;
      if (/(zarr\.json|\.zarray|\.zattrs|\.zgroup)$/.test(u)) req.metadata++;
      else req.payload++;
      return fetch(request);
    },
  });
  const t0 = performance.now();
  const arr = await zarr.open(zarr.root(store), { kind: "array" });
  const tOpen = performance.now();
  if (!["uint8", "int8", "uint16", "int16"].includes(arr.dtype)) {
    die(`dtype ${arr.dtype}: this peer's exact weighted sum covers 8/16-bit integers`);
  }
  const shapeA = arr.shape;
  const [Y, X] = [shapeA[1], shapeA[2]];
  const { offset, shape, tile, bins: B } = o;
  const [lo, hi] = o.range;
  const tiles = [];
  const step = o.mode === "roi" ? shape : tile;
  for (let z = offset[0]; z < offset[0] + shape[0]; z += step[0]) {
    for (let y = offset[1]; y < offset[1] + shape[1]; y += step[1]) {
      for (let x = offset[2]; x < offset[2] + shape[2]; x += step[2]) {
        tiles.push([z, y, x].map((s, k) => [s, Math.min(s + step[k], offset[k] + shape[k])]));
      }
    }
  }
  // Integer inputs: count raw values per pass (one slot per value of the type), then fold the
  // raw counts into the B bins with the SPEC §5 formula (exactly as per-voxel binning would).
  const TYPE_MIN = { uint8: 0, int8: -128, uint16: 0, int16: -32768 }[arr.dtype];
  const TYPE_N = { uint8: 256, int8: 256, uint16: 65536, int16: 65536 }[arr.dtype];
  let getMs = 0;
  let procMs = 0;
  let first = null;
  for (let p = 0; p < o.passes; p++) {
    const raw = new Float64Array(TYPE_N);
    const acc = new Float64Array(4);
    let checksum = 0n, weighted = 0n;
    for (const t of tiles) {
      const g0 = performance.now();
      const c = await zarr.get(arr, t.map(([a, b]) => zarr.slice(a, b)));
      const g1 = performance.now();
      getMs += g1 - g0;
      const d = c.data;
      const [sz, sy, sx] = c.stride;
      const [nz, ny, nx] = c.shape;
      const [s0, sZ, sY, sX] = tileSums(d, raw, nz, ny, nx, sz, sy, sx, t[0][0], t[1][0],
        t[2][0], TYPE_MIN, acc);
      checksum += BigInt(s0);
      weighted = (weighted + BigInt(s0) + BigInt(Y) * BigInt(X) * BigInt(sZ) +
        BigInt(X) * BigInt(sY) + BigInt(sX)) & M64;
      procMs += performance.now() - g1;
    }
    const f0 = performance.now();
    const counts = new Array(B).fill(0);
    let under = 0, over = 0;
    for (let u = 0; u < TYPE_N; u++) {
      const n = raw[u];
      if (n === 0) continue;
      const v = u + TYPE_MIN;
      if (v < lo) under += n;
      else if (v >= hi) over += n;
      else counts[Math.min(Math.floor((v - lo) * B / (hi - lo)), B - 1)] += n;
    }
    procMs += performance.now() - f0;
    const r = {
      voxels: shape[0] * shape[1] * shape[2], tiles: tiles.length,
      checksum: BigInt.asIntN(64, checksum).toString(), weighted_checksum: weighted.toString(),
      histogram: { bins: B, range: [lo, hi], counts, underflow: under, overflow: over, nan: 0 },
    };
    const key = JSON.stringify(r);
    if (first === null) first = key;
    else if (key !== first) die(`pass ${p} differs from pass 0`);
  }
  const tEnd = performance.now();
  const result = JSON.parse(first);
  result.voxels_processed = result.voxels * o.passes;
  const out = {
    peer: `zarrita.js ${version}`, node: process.version, mode: o.mode, url: o.url,
    dtype: arr.dtype, shape: shapeA, chunks: arr.chunks, roi: { offset, shape }, tile,
    passes: o.passes, result, requests: req,
    timing_ms: { open: tOpen - t0, get: getMs, process: procMs, total: tEnd - t0 },
    memory: { rss_at_end_bytes: process.memoryUsage().rss },
  };
  // big integers as JSON numbers (Python's json keeps them exact)
  console.log(JSON.stringify(out).replace(/"(checksum|weighted_checksum)":"(-?\d+)"/g, '"$1":$2'));
}

main().catch((e) => die(e?.stack ?? String(e)));
