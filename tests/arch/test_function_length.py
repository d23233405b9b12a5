#!/usr/bin/python3
"""unit.arch.function_length: no function in engine/ or jobs/ is longer than 150 lines (issue 24
#4) and no file longer than 1,000 (issue 36; CONTRIBUTING.md "Naming and structure").

    PYTHONPATH=tests/lib test_function_length.py [--max N] [--max-file-lines N] [PATH ...]
                                                     (default: engine/ jobs/, limits 150, 1000)

A function's length is the lines of its body, from the line of its opening `{` to the line of its
closing `}`, both counted (the signature above the `{` is not). Functions are found by matching
braces in the code with comments, string and character literals and preprocessor lines blanked
(scripts/checksrc's stripper, through tests/lib/shardmill_test/c_source.py): a `{` at file scope whose
preceding code closes a parameter list `name(...)` opens a function; one after `=`, `struct`,
`enum` or `union` (a table, a type) does not. Each offender is named as `file:line: name is N
lines (limit 150)`, the line being the one of its name.

The check first shows on made-up sources that it measures a body exactly, finds a function one
line over the limit and is not fooled by braces in comments, strings, character literals, macros
or initializers.
"""

import argparse
import os
import re
import sys

from shardmill_test.c_source import strip_c as STRIP_C

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LIMIT = 150
FILE_LIMIT = 1000  # lines of a source file, comments included
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
NOT_A_NAME = {"__attribute__", "__declspec", "sizeof", "_Alignas", "alignas", "if", "for",
              "while", "switch", "return"}


def blank_preprocessor(code):
    """Blanks every preprocessor line (with its backslash continuations), keeping every offset:
    a macro's braces are not a function's."""
    out, cont = [], False
    for line in code.split("\n"):
        if cont or line.lstrip().startswith("#"):
            cont = line.rstrip().endswith("\\")
            out.append(" " * len(line))
        else:
            out.append(line)
    return "\n".join(out)


def function_name(code, brace):
    """The name of the function whose body opens at code[brace], or None when that `{` opens
    something else (an initializer, a struct, enum or union)."""
    i = brace - 1
    while True:
        while i >= 0 and code[i].isspace():
            i -= 1
        if i < 0 or code[i] != ")":
            return None
        depth = 0
        while i >= 0:  # back to the matching "("
            if code[i] == ")":
                depth += 1
            elif code[i] == "(":
                depth -= 1
                if depth == 0:
                    break
            i -= 1
        if i < 0:
            return None
        j = i - 1
        while j >= 0 and code[j].isspace():
            j -= 1
        m = IDENT.search(code[max(0, j - 200):j + 1])
        if m is None:
            return None  # "= (struct x){...}": a compound literal
        name = m.group(0)
        if name == "__attribute__":  # f(void) __attribute__((x)) {: the list before it
            i = j - len(name)
            continue
        if name in NOT_A_NAME:
            return None
        start = j + 1 - len(name)
        before = code[:start].rstrip()
        if before.endswith("="):
            return None
        return name, start


def functions(text):
    """(name, line of the name, body lines) of every function defined in a C source."""
    code = blank_preprocessor(STRIP_C(text)[0])
    out, depth, opened = [], 0, None
    for i, c in enumerate(code):
        if c == "{":
            if depth == 0:
                found = function_name(code, i)
                opened = (found, i) if found is not None else None
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced '}}' on line {code.count(chr(10), 0, i) + 1}")
            if depth == 0 and opened is not None:
                (name, start), brace = opened
                first = code.count("\n", 0, brace) + 1
                last = code.count("\n", 0, i) + 1
                out.append((name, code.count("\n", 0, start) + 1, last - first + 1))
                opened = None
    if depth != 0:
        raise ValueError(f"{depth} '{{' never closed")
    return out


def self_test():
    """The check measures what it is shown and finds an over-long function."""
    body = "".join(f"    x += {i};\n" for i in range(LIMIT - 2))
    made_up = (
        "#define SWAP(a, b) do { int t_ = (a); (a) = (b); (b) = t_; } while (0)\n"
        "#define OPEN {\n"
        "static const struct pair { int a, b; } table[] = {{1, 2}, {3, 4}};\n"
        "struct s {\n    int x;\n};\n"
        "enum e { E_A, E_B };\n"
        "static int fits(int x)\n{\n" + body + "}\n"
        "static int over(int x) __attribute__((unused));\n"
        "static int over(int x)\n{\n" + body + "    x++;\n}\n"
        "int sm_tricky(const char *s, int (*cb)(int))\n{\n"
        "    /* } } { */\n    char c = '}';\n    const char *t = \"{ \\\" }\";\n"
        "    // }\n    return c + cb((int)(t - s));\n}\n"
        "static const struct s defaults = (struct s){0};\n")
    got = functions(made_up)
    want = [("fits", 8, LIMIT), ("over", LIMIT + 10, LIMIT + 1), ("sm_tricky", 2 * LIMIT + 12, 7)]
    if got != want:
        sys.exit(f"test_function_length: the self-test measured {got}, expected {want}")
    print(f"ok   the self-test: a {LIMIT}-line body passes, {LIMIT + 1} lines fail, braces in "
          "comments, strings, character literals, macros and initializers are not bodies")


def sources(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for dirpath, dirnames, filenames in os.walk(p):
            dirnames[:] = sorted(d for d in dirnames if d not in (".git", "__pycache__"))
            for f in sorted(filenames):
                if f.endswith((".c", ".h")):
                    yield os.path.join(dirpath, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max", type=int, default=LIMIT, help="the limit (default %(default)s)")
    ap.add_argument("--max-file-lines", type=int, default=FILE_LIMIT,
                    help="a file's limit (default %(default)s)")
    ap.add_argument("paths", nargs="*", help="files or directories (default: engine/ jobs/)")
    a = ap.parse_args()
    self_test()
    paths = a.paths or [os.path.join(ROOT, "engine"), os.path.join(ROOT, "jobs")]
    nfiles = nfuncs = 0
    offenders, long_files = [], []
    for path in sources(paths):
        rel = os.path.relpath(path, ROOT)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        try:
            found = functions(text)
        except ValueError as e:
            sys.exit(f"test_function_length: {rel}: cannot match braces: {e}")
        nfiles += 1
        nfuncs += len(found)
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > a.max_file_lines:
            long_files.append((rel, lines))
        offenders += [(rel, line, name, n) for name, line, n in found if n > a.max]
    if nfuncs < 100 and not a.paths:
        sys.exit(f"test_function_length: only {nfuncs} functions found under engine/ and jobs/")
    for rel, line, name, n in offenders:
        print(f"{rel}:{line}: {name} is {n} lines (limit {a.max})")
    for rel, n in long_files:
        print(f"{rel}: {n} lines (limit {a.max_file_lines})")
    if offenders or long_files:
        sys.exit(f"test_function_length: {len(offenders)} function(s) over {a.max} lines, "
                 f"{len(long_files)} file(s) over {a.max_file_lines} "
                 "(split them: CONTRIBUTING.md \"Naming and structure\")")
    print(f"ok   no function over {a.max} lines ({nfuncs} functions in {nfiles} files), no file "
          f"over {a.max_file_lines} lines")


if __name__ == "__main__":
    main()
