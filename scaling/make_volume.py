#!/usr/bin/python3
"""The command line of shardmill_test.volumes (tests/lib/shardmill_test/volumes.py): synthetic
CT-like Zarr v3 uint16 volumes for the scaling and memory benchmarks (SPEC §8 W5). From the
repository root:

    PYTHONPATH=$PWD/tests/lib /usr/bin/python3 scaling/make_volume.py OUT --shape 512,512,512
"""

import sys

from shardmill_test import volumes


if __name__ == "__main__":
    sys.exit(volumes.main())
