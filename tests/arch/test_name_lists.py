#!/usr/bin/python3
"""No list of sources, output codecs or normalization modes written out in jobs/ or in an error
string of the engine (issue 36): the registries own them (shardmill/source.h sm_source_formats,
the codec writer slots of shardmill/codec.h, shardmill/stats.h sm_norm_modes) and jobs/ builds
its choices, help, docs/CONFIG.md and messages from them (jobs/config_tables.c).

A list is two different names of one family close together (at most 4 words apart) with a list
separator between them (",", "|", "/", "or", "and"): "zstd, gzip or blosc", "raw|nifti",
"`window` and `percentile`", "a raw file, a NIfTI-1 file". Looked at: every string literal of
jobs/*.c and jobs/*.h, and the string literals of every engine statement that sets an error
(SM_FAIL*, SM_ERR*, sm_err_set*). Comments are not. The detector runs on made-up strings first,
and the scan must see enough literals, so that the test cannot pass by seeing nothing.

Usage: /usr/bin/python3 test_name_lists.py [--root REPO]
"""

import argparse
import os
import re
import sys

FAMILIES = {
    "source": ["raw", "nifti", "tiff", "hdf5", "png"],
    "codec": ["zstd", "gzip", "blosc", "lz4", "zlib", "bz2", "xz"],
    "mode": ["scale", "window", "percentile"],
}
SEPARATORS = re.compile(r"[,|/]|\bor\b|\band\b")
WORD = re.compile(r"[a-z0-9_]+")
ERROR_CALL = re.compile(r"\b(SM_FAIL\w*|SM_ERR\w*|sm_err_set\w*|FAIL_KEY|FAIL_AT)\s*\(")
LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def name_of(word):
    """(family, name) when the word is a name ("nifti" of "nifti-1" too), else None."""
    for fam, names in FAMILIES.items():
        for n in names:
            if word == n:
                return fam, n
    return None


def find_list(text):
    """The first list of names in text (a string), or None."""
    low = text.lower()
    words = [(m.start(), m.end(), m.group(0)) for m in WORD.finditer(low)]
    hits = [(i, w) for i, w in enumerate(words) if name_of(w[2]) is not None]
    for a in range(len(hits)):
        for b in range(a + 1, len(hits)):
            (i, wa), (j, wb) = hits[a], hits[b]
            if j - i > 5:
                break
            fa, na = name_of(wa[2])
            fb, nb = name_of(wb[2])
            if fa == fb and na != nb and SEPARATORS.search(low[wa[1]:wb[0]]):
                return low[wa[0]:wb[1]]
    return None


def strip_comments(src):
    """C source without its comments (string literals kept)."""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src[i] == '"' or src[i] == "'":
            q, j = src[i], i + 1
            while j < n and src[j] != q:
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        else:
            out.append(src[i])
            i += 1
    return "".join(out)


def statements(src):
    """Rough C statements: the text between semicolons and braces outside literals."""
    parts, cur, i, n = [], [], 0, len(src)
    while i < n:
        c = src[i]
        if c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            cur.append(src[i:j + 1])
            i = j + 1
            continue
        if c in ";{}":
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def joined_literals(stmt):
    """The statement's string literals, adjacent ones concatenated as the compiler does."""
    return "".join(m.group(1) for m in LITERAL.finditer(stmt))


def scan(root):
    """(problems, literals seen in jobs/, error statements seen in the engine)."""
    problems, njobs, nerr = [], 0, 0
    for d in ("jobs",):
        for name in sorted(os.listdir(os.path.join(root, d))):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, d, name)
            with open(path, encoding="utf-8") as f:
                src = strip_comments(f.read())
            for stmt in statements(src):
                text = joined_literals(stmt)
                if text:
                    njobs += 1
                    hit = find_list(text)
                    if hit:
                        problems.append(f"{d}/{name}: a list of names in a string: '{hit}'")
    for dirpath, _, files in os.walk(os.path.join(root, "engine")):
        for name in sorted(files):
            if not name.endswith(".c"):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8") as f:
                src = strip_comments(f.read())
            for stmt in statements(src):
                if not ERROR_CALL.search(stmt):
                    continue
                nerr += 1
                hit = find_list(joined_literals(stmt))
                if hit:
                    rel = os.path.relpath(path, root)
                    problems.append(f"{rel}: a list of names in an error string: '{hit}'")
    return problems, njobs, nerr


def self_check():
    positive = ["unknown codec '%s' (zstd, gzip, blosc or none)", "zarr|n5|raw|nifti|tiff|hdf5",
                "`window` and `percentile` need both", "a raw file, a NIfTI-1 file, a TIFF stack",
                "gzip and blosc levels are 0..9", "scale: v / divisor; window: clamp"]
    negative = ["window: the value mapped to 0; percentile: a percentile in 0..100",
                "output.codec defaults to blosc lz4 level 5", "the raw file",
                "input.format %.*s only", "zstd level %d is outside %d..%d"]
    for s in positive:
        assert find_list(s) is not None, f"the detector misses a list: {s!r}"
    for s in negative:
        assert find_list(s) is None, f"the detector sees a list in: {s!r}"


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(here)))
    args = ap.parse_args()
    self_check()
    problems, njobs, nerr = scan(args.root)
    if njobs < 300 or nerr < 300:
        print(f"test_name_lists: saw only {njobs} jobs/ literals and {nerr} engine error "
              "statements: the scan is broken", file=sys.stderr)
        return 1
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"test_name_lists: {len(problems)} lists of names: build them from the registries "
              "(jobs/config_tables.c)", file=sys.stderr)
        return 1
    print(f"test_name_lists: ok ({njobs} jobs/ literals, {nerr} engine error statements)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
