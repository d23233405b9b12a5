#!/usr/bin/env python3
"""check_module_deps.py: the module table of docs/ARCHITECTURE.md, enforced.

Reads two tables from docs/ARCHITECTURE.md:
  "Modules and what each may use"  | `module/` | owns | may use |   (the modules a module may use)
  "Public headers and their module" | `header.h` | module |          (who owns each public header)
and checks every `#include "shardmill/X.h"` (or <shardmill/X.h>) in engine/<module>/ and in the
public headers: a file may include only the headers of its own module, of core, and of the modules
its row allows. A public header obeys the rules of the module that owns it. A header that the table
does not list is an error too, so a new header has to be placed in a module.

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


def read_tables(arch_md):
    uses, owner = {}, {}
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
            elif section == "Public headers and their module":
                m = HEADER_ROW.match(line.rstrip("\n"))
                if m:
                    owner[m.group(1)] = m.group(2)
    return uses, owner


def allowed(module, header_owner, uses):
    if header_owner in (module, "core"):
        return True
    if header_owner == "jobs":  # the umbrella header is for programs, never for the engine
        return False
    return header_owner in uses.get(module, set())


def check(root):
    arch_md = os.path.join(root, "docs", "ARCHITECTURE.md")
    uses, owner = read_tables(arch_md)
    if not uses or not owner:
        print(f"check_module_deps: cannot read the module and header tables of {arch_md}",
              file=sys.stderr)
        return None
    problems = []
    engine = os.path.join(root, "engine")
    inc = os.path.join(engine, "include", "shardmill")
    files = []  # (path, module)
    for module in sorted(uses):
        d = os.path.join(engine, module)
        if not os.path.isdir(d):
            problems.append(f"{d}: module {module} of the table has no directory")
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith((".c", ".h")):
                files.append((os.path.join(d, name), module))
    for name in sorted(os.listdir(inc)):
        if not name.endswith(".h"):
            continue
        h = name[:-2]
        if h not in owner:
            problems.append(f"{os.path.join(inc, name)}:1: public header {name} is not in the "
                            "table 'Public headers and their module' of docs/ARCHITECTURE.md")
            continue
        if owner[h] in uses:
            files.append((os.path.join(inc, name), owner[h]))
    for path, module in files:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                h = m.group(1)
                if h not in owner:
                    problems.append(f"{path}:{n}: shardmill/{h}.h is not in the header table of "
                                    "docs/ARCHITECTURE.md")
                elif not allowed(module, owner[h], uses):
                    may = ", ".join(sorted(uses[module])) or "core only"
                    problems.append(f"{path}:{n}: {module}/ may not include shardmill/{h}.h "
                                    f"(module {owner[h]}); {module}/ may use: {may}")
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
