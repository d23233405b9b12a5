#!/usr/bin/python3
"""A failure records its file and line only through the error macros (issue 36): __FILE__ and
__LINE__ appear in no C file of engine/, jobs/, tests/, bench/ or scaling/ outside a #define.

The call sites write SM_ERR / SM_FAIL / SM_ERR_AT / SM_FAIL_AT / SM_ERRNO (shardmill/status.h),
or a file's own macro around a helper that takes the file and line (SM_CFG_ERR, KEY_ERR,
SRC_FAIL, H5_FAIL, PAR_MPI_ERR); a line may opt out with `checksrc: allow err-at` (the unit test
of the macros compares err.file and err.line with them). The rule is scripts/checksrc's err-at,
loaded through shardmill_test.c_source: first proved on planted sources, then run on the tree,
which must show the macros' own definitions, so that the test cannot pass by seeing nothing.

Usage: /usr/bin/python3 test_err_at.py
"""

import os
import sys

from shardmill_test.c_source import CHECKSRC, ROOT, strip_c
from shardmill_test.checks import Checks

PLANTED_BAD = {
    "one line": 'sm_status f(struct sm_err *err)\n{\n'
                '    return sm_err_set(err, SM_E_IO, __FILE__, __LINE__, "x");\n}\n',
    "the pair split over lines": 'void g(struct sm_err *e)\n{\n'
                                 '    st = sm_err_set(e, SM_E_DATA, __FILE__,\n'
                                 '                    __LINE__, "y %d", 1);\n}\n',
    "a helper's line only": "    st = mpi_fail(err, __LINE__, \"MPI_Comm_dup\", rc);\n",
    "after a finished #define": "#define A(x) (x)\nint line = __LINE__;\n",
    "after a continued #define": "#define B(x) \\\n    (x)\nconst char *f = __FILE__;\n",
}
PLANTED_GOOD = {
    "a #define": "#define SM_ERR(err, st, ...) sm_err_set((err), (st), __FILE__, __LINE__, "
                 "__VA_ARGS__)\n",
    "a continued #define": "#define FAIL_AT(cx, node, ...) \\\n"
                           "    return sm_cfg_fail_at((cx), (node), SM_E_USAGE, __FILE__, \\\n"
                           "                          __LINE__, __VA_ARGS__)\n",
    "an indented directive": "  #  define H(e) h((e), __FILE__, __LINE__)\n",
    "a comment and a string": '/* __FILE__ and __LINE__ */\nconst char *s = "__LINE__";\n'
                              "// __FILE__\n",
    "a longer name": "int __LINE___x = MY__FILE__;\n",
}


def planted(c):
    for what, src in PLANTED_BAD.items():
        found = CHECKSRC.find_err_at(strip_c(src)[0])
        c.check(f"planted: finds {what}", len(found) >= 1, f"found {found}")
    for what, src in PLANTED_GOOD.items():
        found = CHECKSRC.find_err_at(strip_c(src)[0])
        c.check(f"planted: leaves {what} alone", not found, f"found {found}")


def tree(c):
    chk = CHECKSRC.Checker()
    nfiles = 0
    defines = 0
    for path in CHECKSRC.iter_files([]):
        nfiles += 1
        chk.check_file(path)
        rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
        if rel == "engine/include/shardmill/status.h":
            with open(path, encoding="utf-8") as f:
                text = f.read()
            defines = text.count("__FILE__, __LINE__")
    c.check(f"the scan saw the tree ({nfiles} C files)", nfiles >= 300, f"{nfiles} files")
    c.check("the scan saw the macros of shardmill/status.h (SM_ERR, SM_ERR_AT, SM_ERRNO)",
            defines >= 3, f"{defines} definitions")
    found = [f for f in chk.findings if f[3] == "err-at"]
    c.check("no __FILE__ / __LINE__ outside a macro definition", not found,
            "\n".join("%s:%d:%d: %s" % f[:4] + ": " + f[4].split(":")[0] for f in found[:40]))


def main():
    c = Checks("unit.arch.err_at")
    planted(c)
    tree(c)
    return c.done()


if __name__ == "__main__":
    sys.exit(main())
