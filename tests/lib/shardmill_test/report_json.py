"""shardmill's JSON number policy on the reading side (SPEC §7, engine/include/shardmill/meta.h):
checksums (checksum, weighted_checksum, output_checksum, output_weighted_checksum, wherever they
appear: a report's result and read-bench cases, zarr.json's provenance histogram) are decimal
strings, so that every JSON reader keeps them exact; counts are JSON integers.

load(path) / loads(text) parse a document and turn every checksum into the Python int it is
(a legacy bare integer is kept as it was); with_int_checksums(doc) does it to a parsed document.
"""

import json

CHECKSUM_KEYS = ("checksum", "weighted_checksum", "output_checksum", "output_weighted_checksum")


def checksum_int(v):
    """A checksum as written (a decimal string, or a legacy integer) as an int; None stays None."""
    if isinstance(v, str):
        if not (v.isdigit() or (v[:1] == "-" and v[1:].isdigit())):
            raise ValueError(f"a checksum is not a decimal string: {v!r}")
        return int(v)
    return v


def with_int_checksums(doc):
    """doc with every checksum member (at any depth) an int; returns doc (changed in place)."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k in CHECKSUM_KEYS and (isinstance(v, str) or isinstance(v, int)):
                doc[k] = checksum_int(v)
            else:
                with_int_checksums(v)
    elif isinstance(doc, list):
        for v in doc:
            with_int_checksums(v)
    return doc


def loads(text):
    return with_int_checksums(json.loads(text))


def load(path):
    with open(path) as f:
        return with_int_checksums(json.load(f))
