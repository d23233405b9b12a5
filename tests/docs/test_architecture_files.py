#!/usr/bin/python3
"""docs/ARCHITECTURE.md's "Files" section against the tree (issue 24 #7).

Every source file of engine/ (engine/<module>/*.c|h, engine/include/shardmill/*.h,
engine/internal/shardmill/*.h) must be named, in backquotes, in the section "## Files", under
the bullet of its folder (`core/`, `engine/include/shardmill/`, ...; jobs/ has its own table,
checked by test_jobs_files.py);
and every file name the section names must exist in that folder. The check first proves on a
made-up tree that it reports a missing file and a stale name.

Usage: /usr/bin/python3 test_architecture_files.py [--root REPO]
"""

import argparse
import os
import re
import sys
import tempfile

BULLET = re.compile(r"^- `([a-z_/]+)/`")
NAME = re.compile(r"`([A-Za-z0-9_]+\.[ch])`")


def listed(arch_md):
    """folder (as the doc writes it, e.g. core or engine/include/shardmill) -> names."""
    out, folder, inside = {}, None, False
    with open(arch_md, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                inside = line.strip() == "## Files"
                folder = None
                continue
            if not inside:
                continue
            m = BULLET.match(line)
            if m:
                folder = m.group(1)
                out.setdefault(folder, set())
            if folder is not None:
                out[folder].update(NAME.findall(line))
    return out


def on_disk(root):
    """folder -> source files, with the doc's folder names."""
    out = {}
    engine = os.path.join(root, "engine")
    for d in sorted(os.listdir(engine)):
        path = os.path.join(engine, d)
        if not os.path.isdir(path):
            continue
        if d in ("include", "internal"):
            key, path = f"engine/{d}/shardmill", os.path.join(path, "shardmill")
        else:
            key = d
        out[key] = {n for n in os.listdir(path) if n.endswith((".c", ".h"))}
    return out


def problems(root):
    doc = listed(os.path.join(root, "docs", "ARCHITECTURE.md"))
    tree = on_disk(root)
    found = []
    if not doc:
        return ["docs/ARCHITECTURE.md has no '## Files' section with folder bullets"]
    for folder in sorted(tree):
        for name in sorted(tree[folder] - doc.get(folder, set())):
            found.append(f"{folder}/{name}: not named in docs/ARCHITECTURE.md '## Files'")
    for folder in sorted(doc):
        for name in sorted(doc[folder] - tree.get(folder, set())):
            found.append(f"docs/ARCHITECTURE.md '## Files' names {folder}/{name}, which does "
                         "not exist")
    return found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        for d in ("engine/core", "engine/include/shardmill", "engine/internal/shardmill", "docs"):
            os.makedirs(os.path.join(root, d))
        for f in ("engine/core/core_a.c", "engine/core/core_new.c",
                  "engine/include/shardmill/a.h", "engine/internal/shardmill/b.h"):
            open(os.path.join(root, f), "w").close()
        with open(os.path.join(root, "docs", "ARCHITECTURE.md"), "w") as f:
            f.write("# A\n\n## Files\n\n- `engine/include/shardmill/`: `a.h`.\n"
                    "- `engine/internal/shardmill/`: `b.h`.\n- `core/`: `core_a.c`,\n"
                    "  `core_old.c`.\n\n## Next\n\n`core_new.c`\n")
        got = problems(root)
        want = ["core/core_new.c: not named in docs/ARCHITECTURE.md '## Files'",
                "docs/ARCHITECTURE.md '## Files' names core/core_old.c, which does not exist"]
        if got != want:
            sys.exit(f"test_architecture_files: the self-test found {got}, expected {want}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "..", ".."))
    a = ap.parse_args()
    self_test()
    found = problems(os.path.abspath(a.root))
    for p in found:
        print(p)
    if found:
        sys.exit(f"test_architecture_files: {len(found)} difference(s) between the tree and "
                 "docs/ARCHITECTURE.md '## Files'")
    print("ok: docs/ARCHITECTURE.md '## Files' names every engine/ source file")


if __name__ == "__main__":
    main()
