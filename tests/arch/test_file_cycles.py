#!/usr/bin/python3
"""No circle of calls between the engine's source files, nor between jobs/' (issue 24 #2, issue 36
item 5).

    test_file_cycles.py --build-dir BUILD

File A depends on file B when A's object calls a function B's object defines (nm: an undefined
symbol of A that is a text symbol of B). A circle (A -> B -> ... -> A) means neither file can be
read, tested or replaced without the other: array_read.c and shard_read.c, and codec_chain.c,
codec_bytes.c and codec_sharding.c, were two such circles. References to data are not calls: the
codec registry's table of vtables (codec_registry.c) is the one place that names every codec,
and the codecs that build chains of other codecs (sharding, N5) reach them through the
registry's lookup functions, as any caller does.

The check first proves on two objects it compiles itself (a.c calls b.c, b.c calls a.c) that it
finds a circle, then checks every engine object under BUILD/engine/*/CMakeFiles/*.dir/ and every
jobs/ object under BUILD/jobs/CMakeFiles/*.dir/ (jobs/ calls down into the engine, never back, so
the two sets are checked as one graph). report.c calling back into job_input.c and job_source.c,
which call report.c's JSON helpers, was the jobs/ circle. It fails naming each circle's files and
the calls that close it.
"""

import argparse
import collections
import glob
import os
import subprocess
import sys
import tempfile


def symbols(obj):
    """(text symbols defined, symbols used) of one object file."""
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] == "T":
            defined.add(p[2])
        elif len(p) == 2 and p[0] == "U":
            used.add(p[1])
    return defined, used


def circles(objs):
    """Strongly connected components of more than one file, each with its closing calls."""
    defs, uses = {}, {}
    for name, path in objs.items():
        d, u = symbols(path)
        uses[name] = u
        for s in d:
            defs[s] = name
    graph = collections.defaultdict(set)
    calls = collections.defaultdict(list)
    for name, used in uses.items():
        for s in sorted(used):
            other = defs.get(s)
            if other is not None and other != name:
                graph[name].add(other)
                calls[(name, other)].append(s)
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):  # Tarjan, iterative enough for ~150 files
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                members = set(comp)
                edges = [f"{a} -> {b}: {', '.join(calls[(a, b)][:4])}"
                         for a in sorted(members) for b in sorted(graph[a] & members)]
                found.append((sorted(comp), edges))

    sys.setrecursionlimit(10000)
    for v in sorted(uses):
        if v not in index:
            visit(v)
    return found


def self_test():
    """The check finds a circle it is shown."""
    with tempfile.TemporaryDirectory() as d:
        src = {"a.c": "int b(int);\nint a(int x) { return x > 0 ? b(x - 1) : 0; }\n",
               "b.c": "int a(int);\nint b(int x) { return a(x); }\n",
               "c.c": "int a(int);\nint c(void) { return a(3); }\n"}
        objs = {}
        for name, text in src.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
            obj = os.path.join(d, name + ".o")
            subprocess.run(["cc", "-c", "-o", obj, os.path.join(d, name)], check=True)
            objs["self/" + name[:-2]] = obj
        got = circles(objs)
        if [c for c, _ in got] != [["self/a", "self/b"]]:
            sys.exit(f"test_file_cycles: the self-test found {got}, expected the circle a <-> b")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", required=True)
    a = ap.parse_args()
    self_test()
    objs = {}
    for path in glob.glob(os.path.join(a.build_dir, "engine", "*", "CMakeFiles", "*.dir",
                                       "*.c.o")):
        module = os.path.relpath(path, os.path.join(a.build_dir, "engine")).split(os.sep)[0]
        objs[f"{module}/{os.path.basename(path)[:-4]}"] = path
    if len(objs) < 50:
        sys.exit(f"test_file_cycles: only {len(objs)} engine objects under {a.build_dir}: "
                 "build first")
    njobs = 0
    for path in glob.glob(os.path.join(a.build_dir, "jobs", "CMakeFiles", "*.dir", "*.c.o")):
        objs[f"jobs/{os.path.basename(path)[:-4]}"] = path
        njobs += 1
    if njobs < 20:
        sys.exit(f"test_file_cycles: only {njobs} jobs/ objects under {a.build_dir}: build first")
    found = circles(objs)
    for comp, edges in found:
        print("circle: " + " <-> ".join(comp))
        for e in edges:
            print("  " + e)
    if found:
        sys.exit(f"test_file_cycles: {len(found)} circle(s) of calls between engine or jobs/ files")
    print(f"ok: no circle of calls between {len(objs)} engine and jobs/ files")


if __name__ == "__main__":
    main()
