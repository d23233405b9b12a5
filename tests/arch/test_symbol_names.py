#!/usr/bin/python3
"""Every global symbol of the engine and of the shardmill binary follows the naming rule of
CONTRIBUTING.md "Naming and structure" (issue 24 #5).

    test_symbol_names.py --build-dir BUILD

The rule: a function or variable with external linkage is `sm_<object>_<verb>`, all lowercase,
whether a program may call it (declared in engine/include/shardmill/) or only the engine (declared
in engine/internal/shardmill/ or a module's *_int.h): `sm_store_get`, `sm_run_convert`,
`sm_run_agree`, `sm_cv_flush`. The engine is a static library linked into other programs, and its
shared modules resolve the engine's `sm_*` names from the program (engine/par/sm_exports.list),
so a global name without the prefix could clash with a program's own, or be missed by the export
list. jobs/ follows the same rule (its `main` aside).

The check reads the object files with `nm` (as unit.arch.file_cycles does): every defined global
symbol (text, data, bss, read-only, common, weak) of BUILD/engine/*/CMakeFiles/*.dir/*.c.o (the
static libraries and the shared modules' objects) and BUILD/jobs/CMakeFiles/*.dir/*.c.o.
Compiler-generated names (a leading `__`, such as ASan's `__odr_asan_gen_*`) are not the code's.
It first proves on an object it compiles itself that it finds a planted outlier (`run_agree`, the
kind of name run/ had) and passes a conforming one and a static one, then checks the build, and
fails naming each outlier and its file.
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

RULE = re.compile(r"^sm_[a-z0-9]+(_[a-z0-9]+)*$")
EXEMPT = {"main"}


def globals_of(obj):
    """The defined global symbols of one object file."""
    out = subprocess.run(["nm", "-g", "--defined-only", obj], capture_output=True, text=True,
                         check=True).stdout
    names = []
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3:
            names.append(p[2])
    return names


def outliers(objs):
    """(file, symbol) of every global symbol that breaks the rule."""
    bad = []
    for name, path in sorted(objs.items()):
        for sym in globals_of(path):
            if sym in EXEMPT or sym.startswith("__"):
                continue
            if not RULE.match(sym):
                bad.append((name, sym))
    return bad


def self_test():
    """The check finds an outlier it is shown, and only that one."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "planted.c")
        with open(src, "w") as f:
            f.write("int sm_run_ok(int x);\nint run_agree(int x);\n"
                    "static int helper(int x) { return x + 1; }\n"
                    "int sm_run_ok(int x) { return helper(x); }\n"
                    "int run_agree(int x) { return sm_run_ok(x); }\n"
                    "int sm_table_of_things[4];\n")
        obj = os.path.join(d, "planted.o")
        subprocess.run(["cc", "-c", "-o", obj, src], check=True)
        got = outliers({"self/planted.c": obj})
        if got != [("self/planted.c", "run_agree")]:
            sys.exit(f"test_symbol_names: the self-test found {got}, expected run_agree alone")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", required=True)
    a = ap.parse_args()
    self_test()
    objs = {}
    for top in ("engine", "jobs"):
        pattern = os.path.join(a.build_dir, top, "*", "CMakeFiles", "*.dir", "*.c.o") \
            if top == "engine" else os.path.join(a.build_dir, top, "CMakeFiles", "*.dir", "*.c.o")
        for path in glob.glob(pattern):
            objs[os.path.relpath(path, a.build_dir)] = path
    nengine = sum(1 for k in objs if k.startswith("engine" + os.sep))
    if nengine < 50:
        sys.exit(f"test_symbol_names: only {nengine} engine objects under {a.build_dir}: "
                 "build first")
    bad = outliers(objs)
    for name, sym in bad:
        print(f"{name}: {sym}: a global symbol is sm_<object>_<verb> (CONTRIBUTING.md "
              "\"Naming and structure\"): make it static or name it sm_...")
    if bad:
        sys.exit(f"test_symbol_names: {len(bad)} global symbol(s) break the naming rule")
    print(f"ok: every global symbol of {len(objs)} engine and jobs objects is sm_<object>_<verb>")


if __name__ == "__main__":
    main()
