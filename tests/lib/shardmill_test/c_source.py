"""C source text for the Python checks of tests/arch: scripts/checksrc's stripper, the one
implementation of "comments and string and character literals are not code". Imported through
PYTHONPATH (tests/lib, cmake/sm_python.cmake), never through a sys.path patch."""

import importlib.machinery
import importlib.util
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


def _load_checksrc():
    path = os.path.join(ROOT, "scripts", "checksrc")
    loader = importlib.machinery.SourceFileLoader("checksrc", path)
    spec = importlib.util.spec_from_loader("checksrc", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


# scripts/checksrc as a module: its rules for the tests that enforce one of them (unit.arch.err_at).
CHECKSRC = _load_checksrc()

# strip_c(text) -> (code, code_with_strings): comments blanked in both, literal contents also in
# `code`; every offset and newline kept.
strip_c = CHECKSRC.strip_c


def line_of(code, pos):
    """The 1-based line of offset pos."""
    return code.count("\n", 0, pos) + 1


def call_args(code, start):
    """The text between the parentheses of the call whose '(' ends code[:start]."""
    depth, i = 1, start
    while i < len(code) and depth > 0:
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        i += 1
    return code[start:i - 1]
