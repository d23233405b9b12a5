#!/usr/bin/python3
"""docs/SLURM.md "Worked sizing": 2048³ and 4096³ uint16 -> OME-Zarr on 4, 16 and 64 nodes,
planned by `shardmill plan` from metadata alone (issue 34 item 7). Rerun it after recalibrating.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/sizing_tables.py \\
        --shardmill build/release/jobs/shardmill [--rates FILE] [--fs-bandwidth 20GiB] \\
        [--error bench/results/plan-vs-run-<stamp>.json] [--work DIR]

Inputs are metadata only (a zarr.json without any chunk: plan reads no payload), chunks 64³,
zstd 3; the codec's ratio is given (`--ratio`: 0.514 for uint8 with a percentile window, 0.332
for float32 scaled by 1/4095, as plan sampled them on the 512³ CT-like volume of W5). Nodes of
`--cores-per-node` 32 cores, 8 ranks × 4 threads per node, limits.memory_bytes 16GiB, 4 OME
levels, the automatic layout. The parallel file system's aggregate bandwidth is an input
(`plan --fs-bandwidth`): the nodes' reads and output flushes together go at most that fast.
--error: a plan_vs_run.py result JSON, whose measured errors are printed under each table.
Prints the markdown; the numbers come from `plan --json` only.
"""

import argparse
import json
import os
import subprocess
import sys

VOLUMES = [2048, 4096]
NODES = [4, 16, 64]
OUTPUTS = {  # name: (normalize, extra output keys, --ratio)
    "uint8": ("{mode: percentile, lo: 0.5, hi: 99.5}", "dtype: uint8, ", "0.514"),
    "float32": ("{mode: scale, divisor: 4095}", "", "0.332"),
}


def meta_only(work, n):
    path = os.path.join(work, f"vol-{n}.zarr")
    os.makedirs(path, exist_ok=True)
    doc = {"zarr_format": 3, "node_type": "array", "shape": [n, n, n], "data_type": "uint16",
           "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [64, 64, 64]}},
           "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
           "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                       {"name": "zstd", "configuration": {"level": 3,
                                                                          "checksum": False}}]}
    with open(os.path.join(path, "zarr.json"), "w") as f:
        json.dump(doc, f)
    return path


def config(work, name, vol):
    norm, extra, _ = OUTPUTS[name]
    path = os.path.join(work, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(f"job: convert\ninput: {{store: {vol}}}\nnormalize: {norm}\n"
                f"output: {{path: {work}/out/ct-{name}.zarr, {extra}ome: {{levels: 4, "
                f"method: mean}}}}\nlimits: {{memory_bytes: 16GiB}}\n")
    return path


def plan(a, cfg, ranks, nodes, ratio):
    argv = [a.shardmill, "plan", cfg, "--ranks", str(ranks), "--threads", str(a.threads),
            "--nodes", str(nodes), "--cores-per-node", str(a.cores_per_node), "--ratio", ratio,
            "--fs-bandwidth", a.fs_bandwidth, "--json"] + (["--rates", a.rates] if a.rates else [])
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"sizing_tables: plan failed: {' '.join(argv)}: {p.stderr.strip()}")
    return json.loads(p.stdout)["estimate"]


def error_line(path):
    if not path:
        return ("Model error: run `scaling/plan_vs_run.py` on this machine and pass its JSON with "
                "`--error` to print it here.")
    with open(path) as f:
        doc = json.load(f)
    s, rows = doc["summary"], doc["rows"]
    load = rows[0]["loadavg_before"][0] if rows else "?"
    return (f"Model error measured on this machine ({doc['profile']} plan_vs_run, "
            f"{s['configurations']} configurations, {doc['utc']}, load average {load}): seconds "
            f"median |error| {s['median_abs_seconds_error_pct']}% (max "
            f"{s['max_abs_seconds_error_pct']}%), output bytes median |error| "
            f"{s['median_abs_bytes_error_pct']}%, RSS bound {s['rss_bound_over_peak'][0]}–"
            f"{s['rss_bound_over_peak'][1]}× the measured peak, files "
            f"{'exact' if not s['failed'].get('files_exact') else 'NOT exact'}" +
            (f". A loaded machine (load average {load} on 2 cores): its seconds are not the "
             "model's error on a quiet one." if isinstance(load, (int, float)) and load >= 1.5
             else "."))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--rates", default=None)
    ap.add_argument("--fs-bandwidth", default="20GiB")
    ap.add_argument("--cores-per-node", type=int, default=32)
    ap.add_argument("--ranks-per-node", type=int, default=8)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--error", default=None)
    ap.add_argument("--work", default="/tmp/shardmill-sizing")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    err = error_line(a.error)
    out = []
    rates_from = None
    for n in VOLUMES:
        vol = meta_only(a.work, n)
        out += [f"**{n}³ uint16 → OME-Zarr**, `--fs-bandwidth {a.fs_bandwidth}`:", "",
                "| output | nodes | ranks | memory per rank GiB (bound) | expected s | files "
                "| output GB | input | main terms s |",
                "|---|---:|---:|---:|---:|---:|---:|---|---|"]
        for name in OUTPUTS:
            cfg = config(a.work, name, vol)
            for nodes in NODES:
                ranks = nodes * a.ranks_per_node
                e = plan(a, cfg, ranks, nodes, OUTPUTS[name][2])
                rates_from = e["assumes"]["rates"] + ", calibrated " + e["assumes"]["calibrated"]
                t = e["terms_s"]
                main_terms = ", ".join(f"{k} {v:.1f}" for k, v in t.items() if v >= 0.05)
                reads = e["assumes"]
                inp = ("input kept" if reads["kept_input"] else
                       "read twice" if reads["two_pass"] else "read once")
                out.append(f"| {name} | {nodes} | {ranks} | "
                           f"{e['peak_rss_bytes_per_rank'] / 2**30:.2f} | {e['seconds']:.0f} | "
                           f"{e['files']:,} | {e['output_bytes'] / 1e9:.1f} | {inp} | "
                           f"{main_terms} |")
        out += ["", err, ""]
    out.insert(0, f"Rates: {rates_from}; {a.ranks_per_node} ranks × {a.threads} threads per node "
                  f"of {a.cores_per_node} cores; limits.memory_bytes 16GiB; 4 levels; "
                  f"generated by `scaling/sizing_tables.py`.\n")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
