#!/usr/bin/env python3
"""check_module_deps.py: the module table of docs/ARCHITECTURE.md, enforced.

Reads three tables from docs/ARCHITECTURE.md:
  "Modules and what each may use"    | `module/` | owns | may use | (the modules a module may use)
  "Public headers and their module"   | `header.h` | module |        (engine/include/shardmill/)
  "Internal headers and their module" | `header.h` | module |        (engine/internal/shardmill/)
and checks every `#include "shardmill/X.h"` (or <shardmill/X.h>) in engine/<module>/ and in the
engine's headers: a file may include only the headers of its own module, of core, and of the
modules its row allows. A header obeys the rules of the module that owns it. A header that the
tables do not list, or that sits in the other folder than its table says, is an error too, so a
new header has to be placed in a module and declared public or internal.
The internal headers are the engine's alone: a public header that includes one is refused (a
program could not compile it: engine/include is its only include path), and so is any file of
jobs/, examples/ or bench/ that does (the build fails on it too: engine/internal is on the
private include path of the engine's targets and unit tests only).

Usage: check_module_deps.py [--root DIR] [--stamp FILE]
Exit 0 when the tree obeys the table (and touches --stamp), 1 with one line per violation
(`file:line: module may not include shardmill/X.h (module Y); ...`), 2 when the tables cannot be
read. The build runs it before compiling any engine module (engine/CMakeLists.txt), and ctest runs
it as unit.arch.module_deps together with a copy of the tree that breaks the rule on purpose.
"""

import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]shardmill/([A-Za-z0-9_]+)\.h[>"]')
MODULE_ROW = re.compile(r"^\|\s*`([a-z]+)/`\s*\|[^|]*\|([^|]*)\|\s*$")
HEADER_ROW = re.compile(r"^\|\s*`([A-Za-z0-9_]+)\.h`\s*\|\s*`?([a-z]+|OpenMP|jobs)`?\s*\|")


HEADER_SECTIONS = {"Public headers and their module": "include",
                   "Internal headers and their module": "internal"}
PROGRAMS = ("jobs", "examples", "bench")  # outside the engine: public headers only


def read_tables(arch_md):
    """uses: module -> modules it may use; owner: header -> module; place: header -> its folder
    (include or internal)."""
    uses, owner, place = {}, {}, {}
    section = None
    with open(arch_md, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                section = line[3:].strip()
                continue
            if section == "Modules and what each may use":
                m = MODULE_ROW.match(line.rstrip("\n"))
                if m:
                    uses[m.group(1)] = {t.strip().rstrip("/").strip("`")
                                        for t in m.group(2).split(",")}
            elif section in HEADER_SECTIONS:
                m = HEADER_ROW.match(line.rstrip("\n"))
                if m:
                    owner[m.group(1)] = m.group(2)
                    place[m.group(1)] = HEADER_SECTIONS[section]
    return uses, owner, place


def allowed(module, header_owner, uses):
    if header_owner in (module, "core"):
        return True
    if header_owner == "jobs":  # the umbrella header is for programs, never for the engine
        return False
    return header_owner in uses.get(module, set())


def includes(path):
    """(line number, header name) of every shardmill/X.h a file includes."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield n, m.group(1)


def check(root):
    arch_md = os.path.join(root, "docs", "ARCHITECTURE.md")
    uses, owner, place = read_tables(arch_md)
    if not uses or not owner or "internal" not in place.values():
        print(f"check_module_deps: cannot read the module and header tables of {arch_md}",
              file=sys.stderr)
        return None
    problems = []
    engine = os.path.join(root, "engine")
    files = []  # (path, module)
    for module in sorted(uses):
        d = os.path.join(engine, module)
        if not os.path.isdir(d):
            problems.append(f"{d}: module {module} of the table has no directory")
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith((".c", ".h")):
                files.append((os.path.join(d, name), module))
    for folder, table in (("include", "Public headers and their module"),
                          ("internal", "Internal headers and their module")):
        inc = os.path.join(engine, folder, "shardmill")
        for name in sorted(os.listdir(inc)) if os.path.isdir(inc) else []:
            if not name.endswith(".h"):
                continue
            h = name[:-2]
            if h not in owner:
                problems.append(f"{os.path.join(inc, name)}:1: header {name} is not in the "
                                f"table '{table}' of docs/ARCHITECTURE.md")
                continue
            if place[h] != folder:
                problems.append(f"{os.path.join(inc, name)}:1: header {name} sits in "
                                f"engine/{folder}/shardmill/ but the table of docs/ARCHITECTURE.md "
                                f"places it in engine/{place[h]}/shardmill/")
                continue
            if owner[h] in uses:
                files.append((os.path.join(inc, name), owner[h]))
    for path, module in files:
        is_public = os.path.dirname(path) == os.path.join(engine, "include", "shardmill")
        for n, h in includes(path):
            if h not in owner:
                problems.append(f"{path}:{n}: shardmill/{h}.h is not in the header tables of "
                                "docs/ARCHITECTURE.md")
            elif is_public and place[h] == "internal":
                problems.append(f"{path}:{n}: public header {os.path.basename(path)} includes "
                                f"the internal header shardmill/{h}.h (engine/internal/)")
            elif not allowed(module, owner[h], uses):
                may = ", ".join(sorted(uses[module])) or "core only"
                problems.append(f"{path}:{n}: {module}/ may not include shardmill/{h}.h "
                                f"(module {owner[h]}); {module}/ may use: {may}")
    for top in PROGRAMS:
        for dirpath, _, names in sorted(os.walk(os.path.join(root, top))):
            for name in sorted(names):
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                for n, h in includes(path):
                    if place.get(h) == "internal":
                        problems.append(f"{path}:{n}: {top}/ may not include the engine's "
                                        f"internal header shardmill/{h}.h (public headers only)")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   ".."))
    ap.add_argument("--stamp")
    args = ap.parse_args()
    problems = check(os.path.abspath(args.root))
    if problems is None:
        return 2
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check_module_deps: {len(problems)} include(s) break the module table of "
              "docs/ARCHITECTURE.md", file=sys.stderr)
        return 1
    if args.stamp:
        with open(args.stamp, "w") as f:
            f.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
