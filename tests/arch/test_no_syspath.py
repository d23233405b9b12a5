#!/usr/bin/python3
"""No Python file patches sys.path, and every Python test finds the helper package (issue 24 #6).

    test_no_syspath.py [--build-dir BUILD]

The Python tests, benchmarks and scaling drivers share one package, tests/lib/shardmill_test, on
PYTHONPATH (CTest sets it through cmake/sm_python.cmake; by hand `PYTHONPATH=$PWD/tests/lib`).
This check parses every Python file under tests/, bench/, scaling/ and scripts/ (*.py and files
with a python shebang) and fails on each change of the module search path: sys.path.insert /
append / extend / remove / pop / clear, an assignment to sys.path or a slice of it, the same
through `from sys import path`, and site.addsitedir. Text that only mentions sys.path (a docstring, a
comment) is fine. It first proves on planted sources that it finds each form.

With --build-dir it also reads `ctest --show-only=json-v1` there: every test that runs a .py file
must carry PYTHONPATH=<source>/tests/lib in its ENVIRONMENT (sm_python_tests() in its directory).
"""

import argparse
import ast
import json
import os
import subprocess
import sys

from shardmill_test.checks import check, summary

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TREES = ("tests", "bench", "scaling", "scripts")
SKIP_DIRS = {"node_modules", "__pycache__", ".git"}
MUTATORS = {"insert", "append", "extend", "remove", "pop", "clear", "__setitem__", "__iadd__"}


def is_python(path):
    if path.endswith(".py"):
        return True
    if os.path.splitext(path)[1] or not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def python_files(root):
    for top in TREES:
        for d, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")]
            for f in files:
                p = os.path.join(d, f)
                if is_python(p):
                    yield p


def patches(source, name="<string>"):
    """(line, what) of every change of the module search path in source."""
    tree = ast.parse(source, name)
    path_names = set()  # local names bound to sys.path (`from sys import path as p`)
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module == "sys":
            path_names |= {a.asname or a.name for a in n.names if a.name == "path"}

    def is_sys_path(e):
        if isinstance(e, ast.Attribute) and e.attr == "path" and isinstance(e.value, ast.Name):
            return e.value.id == "sys"
        return isinstance(e, ast.Name) and e.id in path_names

    def target_is_path(t):
        while isinstance(t, ast.Subscript):
            t = t.value
        return is_sys_path(t)

    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            f = n.func
            if f.attr in MUTATORS and is_sys_path(f.value):
                found.append((n.lineno, f"sys.path.{f.attr}()"))
            elif f.attr == "addsitedir" and isinstance(f.value, ast.Name) and f.value.id == "site":
                found.append((n.lineno, "site.addsitedir()"))
        elif isinstance(n, ast.ImportFrom) and n.module == "site":
            if any(a.name == "addsitedir" for a in n.names):
                found.append((n.lineno, "from site import addsitedir"))
        elif isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
                if any(target_is_path(x) for x in elts):
                    found.append((n.lineno, "an assignment to sys.path"))
    return found


PLANTED = [
    ("import sys\nsys.path.insert(0, 'x')\n", 1),
    ("import sys, os\nsys.path.append(os.getcwd())\n", 1),
    ("import sys\nsys.path.extend(['a', 'b'])\n", 1),
    ("import sys\nsys.path = ['a'] + sys.path\n", 1),
    ("import sys\nsys.path[:0] = ['a']\n", 1),
    ("import sys\nsys.path += ['a']\n", 1),
    ("from sys import path as p\np.insert(0, 'a')\n", 1),
    ("import site\nsite.addsitedir('a')\n", 1),
    ("from site import addsitedir\n", 1),
    ("def f():\n    import sys\n    if 'a' not in sys.path:\n        sys.path.insert(0, 'a')\n", 1),
    ('"""Import it with tests/lib on sys.path, never sys.path.insert()."""\n'
     "import sys\nprint(sys.path[0])  # reading is fine\n", 0),
]


def self_test():
    for src, want in PLANTED:
        got = patches(src)
        label = src.strip().splitlines()[-1]
        check(len(got) == want, f"planted source `{label}`: {want} patch(es) found", got)


def check_tree(root):
    n = 0
    bad = []
    for p in sorted(python_files(root)):
        n += 1
        rel = os.path.relpath(p, root)
        try:
            with open(p, encoding="utf-8") as f:
                found = patches(f.read(), rel)
        except (SyntaxError, UnicodeDecodeError) as e:
            bad.append(f"{rel}: does not parse: {e}")
            continue
        bad += [f"{rel}:{line}: {what}" for line, what in found]
    check(n > 50 and not bad,
          f"no sys.path patch in {n} Python files under {', '.join(t + '/' for t in TREES)}",
          "; ".join(bad[:20]) + (f" (+{len(bad) - 20} more)" if len(bad) > 20 else ""))


def runs_python(test):
    return any(str(a).endswith(".py") or os.path.basename(str(a)).startswith("python")
               for a in test.get("command") or [])


def check_ctest(build, root):
    r = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True,
                       text=True, timeout=120)
    if not check(r.returncode == 0, "ctest --show-only=json-v1 lists the tests", r.stderr):
        return
    want = "PYTHONPATH=" + os.path.join(root, "tests", "lib")
    tests = [t for t in json.loads(r.stdout)["tests"] if runs_python(t)]
    missing = []
    for t in tests:
        env = next((p["value"] for p in t.get("properties", []) if p["name"] == "ENVIRONMENT"),
                   [])
        if want not in env:
            missing.append(t["name"])
    check(len(tests) > 20 and not missing,
          f"every one of the {len(tests)} Python ctests has {want} (cmake/sm_python.cmake)",
          f"missing: {missing[:20]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir")
    ap.add_argument("--root", default=ROOT, help="the tree to check (default: this checkout)")
    a = ap.parse_args()
    self_test()
    check_tree(os.path.abspath(a.root))
    if a.build_dir:
        check_ctest(os.path.abspath(a.build_dir), ROOT)
    return summary(name="arch.no_syspath")


if __name__ == "__main__":
    sys.exit(main())
