"""unit.arch.module_deps: the engine obeys the module table of docs/ARCHITECTURE.md, and the check
that enforces it (scripts/check_module_deps.py, also run by the build) catches a violation: copies of
the tree in which tile/ includes codec.h, with a public header the table does not place, with a
public header that includes an internal one (engine/internal/shardmill/), with jobs/ including an
internal header, and with an internal header moved back into the public folder must each fail with
a line naming the file and the header."""

import os
import shutil
import subprocess
import sys
import tempfile

from shardmill_test.checks import check, summary

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "check_module_deps.py")


def run(root):
    return subprocess.run([sys.executable, SCRIPT, "--root", root], capture_output=True, text=True)


def copy_tree(dst):
    shutil.copytree(os.path.join(ROOT, "engine"), os.path.join(dst, "engine"),
                    ignore=shutil.ignore_patterns("CMakeLists.txt"))
    os.makedirs(os.path.join(dst, "jobs"))
    os.makedirs(os.path.join(dst, "docs"))
    shutil.copy(os.path.join(ROOT, "docs", "ARCHITECTURE.md"), os.path.join(dst, "docs"))


r = run(ROOT)
check(r.returncode == 0, f"the engine obeys the module table ({r.stderr.strip()[-500:]})")

with tempfile.TemporaryDirectory() as tmp:
    copy_tree(tmp)
    victim = os.path.join(tmp, "engine", "tile", "tile_grid.c")
    with open(victim) as f:
        text = f.read()
    with open(victim, "w") as f:
        f.write('#include "shardmill/codec.h"\n' + text)
    r = run(tmp)
    check(r.returncode == 1 and "tile_grid.c:1: tile/ may not include shardmill/codec.h "
          "(module codec)" in r.stderr, f"tile/ including codec.h is refused ({r.stderr.strip()})")

with tempfile.TemporaryDirectory() as tmp:
    copy_tree(tmp)
    with open(os.path.join(tmp, "engine", "include", "shardmill", "orphan.h"), "w") as f:
        f.write("/* a header no module owns */\n")
    r = run(tmp)
    check(r.returncode == 1 and "header orphan.h is not in the table 'Public headers and their "
          "module'" in r.stderr,
          f"a public header the table does not place is refused ({r.stderr.strip()})")


def prepend(path, line):
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(line + text)


with tempfile.TemporaryDirectory() as tmp:
    copy_tree(tmp)
    prepend(os.path.join(tmp, "engine", "include", "shardmill", "buf.h"),
            '#include "shardmill/work.h"\n')
    r = run(tmp)
    check(r.returncode == 1 and "buf.h:1: public header buf.h includes the internal header "
          "shardmill/work.h" in r.stderr,
          f"a public header including an internal one is refused ({r.stderr.strip()})")

with tempfile.TemporaryDirectory() as tmp:
    copy_tree(tmp)
    with open(os.path.join(tmp, "jobs", "cmd_x.c"), "w") as f:
        f.write("#include <shardmill/status.h>\n#include <shardmill/fs.h>\n")
    r = run(tmp)
    check(r.returncode == 1 and "cmd_x.c:2: jobs/ may not include the engine's internal header "
          "shardmill/fs.h" in r.stderr and "cmd_x.c:1" not in r.stderr,
          f"jobs/ including an internal header is refused ({r.stderr.strip()})")

with tempfile.TemporaryDirectory() as tmp:
    copy_tree(tmp)
    shutil.move(os.path.join(tmp, "engine", "internal", "shardmill", "work.h"),
                os.path.join(tmp, "engine", "include", "shardmill", "work.h"))
    r = run(tmp)
    check(r.returncode == 1 and "header work.h sits in engine/include/shardmill/ but the table"
          in r.stderr, f"an internal header in the public folder is refused ({r.stderr.strip()})")

sys.exit(summary())
