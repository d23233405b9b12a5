"""Comparing output directory trees in the tests (byte-identity across ranks × threads, runs)."""

import filecmp
import os


def tree_files(root):
    """Relative paths of every file under root, sorted."""
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def same_tree(a, b):
    """(True, summary) when a and b hold the same non-empty list of byte-identical files."""
    fa, fb = tree_files(a), tree_files(b)
    if fa != fb or not fa:
        return False, f"file lists differ ({len(fa)} vs {len(fb)} files)"
    diff = [f for f in fa if not filecmp.cmp(os.path.join(a, f), os.path.join(b, f),
                                             shallow=False)]
    if diff:
        return False, f"{len(diff)} of {len(fa)} files differ, e.g. {diff[0]}"
    return True, f"{len(fa)} files"
