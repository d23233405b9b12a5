#!/usr/bin/python3
"""Print a W3 report (bench/results/w3-*.json) as Markdown tables for docs/BENCHMARKS.md.

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/region_read/w3_table.py bench/results/w3-<UTC>.json
"""

import json
import statistics
import sys

MIB = 1 << 20


def ms(ns, d=2):
    return "-" if ns is None else f"{ns / 1e6:.{d}f}"


def thr_cols(c):
    """The threads A/B of a case (--thread-compare 1,2): both medians, and 1-thread / 2-thread."""
    tc = c.get("threads_ab") or {}
    sm = tc.get("summary") or {}
    one, two = sm.get("1"), sm.get("2")
    if not one or not two:
        return "– | –"
    return f"{ms(one['median'], 3)} / {ms(two['median'], 3)} | {one['median'] / two['median']:.2f}×"


def main(argv):
    with open(argv[1]) as f:
        r = json.load(f)
    p = r["params"]
    print(f"Report `{argv[1]}`: {r['created_utc']}, commit {str(r['commit'].get('head'))[:12]}"
          f"{' (dirty tree)' if r['commit'].get('dirty') else ''}, "
          f"{r['shardmill'].get('version')}, {r['shardmill'].get('CMAKE_BUILD_TYPE')}, "
          f"OMP_NUM_THREADS={p['threads']}, {p['reps_kept']} kept repetitions, "
          f"{p['pairs']} ABAB pairs, {r['machine']['nproc']} × {r['machine']['cpu_model']}, "
          f"{r['toolchain']['cc'][0] if r['toolchain']['cc'] else ''}, node "
          f"{r['toolchain']['node']}, zarr {r['toolchain']['zarr']}, "
          f"zarrita {r['toolchain']['zarrita']}.")
    print()
    print("| array | extent | index cache | read_ns median (min–max) ms | read_ns 1 / 2 threads ms "
          "| 2-thread speedup | engine wall ms | "
          "peer | peer wall ms | peer read ms | wall ratio | engine RSS MiB | peer RSS MiB | "
          "requests m/p/i | index hits/misses | busy CPUs |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: "
          "| --- | --- | ---: |")
    for c in r["cases"]:
        ip = (c.get("inprocess") or {}).get("read_ns_kept")
        pe, pp = c["process"]["engine"], c["process"]["peer"]
        cnt = c.get("counters_fresh") or {}
        req = cnt.get("requests") or {}
        ic = cnt.get("index_cache") or {}
        sharded = c["array"].startswith("v3_shard") or c["array"] == "v3_index_stress"
        ratio = c["process"]["speedup_wall_median"]
        print(f"| {c['array']} | {c['extent'][0]}² | {c['index_cache'] if sharded else '–'} | "
              + (f"{ms(ip['median'], 3)} ({ms(ip['min'], 3)}–{ms(ip['max'], 3)})" if ip else "-")
              + f" | {thr_cols(c)} | {ms(pe['wall']['median']) if pe['wall'] else '-'} | {pp['name']} | "
              f"{ms(pp['wall']['median'], 1) if pp['wall'] else '-'} | "
              f"{ms(pp['inproc_read']['median'], 1) if pp['inproc_read'] else '-'} | "
              f"{f'{ratio:.1f}×' if ratio else '-'} | "
              f"{c['engine_peak_rss_max_bytes'] / MIB:.1f} | "
              f"{max(pp['peak_rss_bytes']) / MIB:.1f} | "
              f"{req.get('metadata', '-')}/{req.get('payload', '-')}/{req.get('index', '-')} | "
              f"{ic.get('hits', '-')}/{ic.get('misses', '-')} | "
              f"{c.get('machine_busy_cpus_before', '-')} |")
    print()
    print("| target | measured | status |")
    print("| --- | ---: | --- |")
    for t in r["targets"]:
        m = t.get("measured_ms")
        m = f"{m:.2f} ms" if m is not None else (
            f"{t['measured_ratio']:.1f}×" if "measured_ratio" in t else (
                f"{t['measured_bytes'] / MIB:.1f} MiB" if "measured_bytes" in t else "-"))
        print(f"| {t['target']} | {m} | {t['status']} |")
    fresh = [(c["array"], c["extent"][0], c["index_cache"],
              statistics.median([x for x in c["process"]["engine"]["read_ns"] if x]))
             for c in r["cases"] if c["process"]["engine"]["read_ns"]]
    if fresh:
        print()
        print("First read of a fresh process (read_ns of the ABAB engine processes, median): "
              + ", ".join(f"{a} {e}² {k}: {v / 1e6:.1f} ms" for a, e, k, v in fresh) + ".")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
