"""A benchmark driver's module loaded from its file (bench/ingest/w7.py, bench/read_once/w9.py) by
another driver in another folder, without patching sys.path (unit.arch.no_syspath)."""

import importlib.util
import os
import sys

from shardmill_test import REPO


def load(relpath):
    """The module of REPO/relpath (e.g. "bench/ingest/w7.py"), loaded once per process."""
    name = os.path.splitext(os.path.basename(relpath))[0]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, relpath))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
