"""shardmill's Python test and benchmark helpers, one package for tests/, bench/ and scaling/.

Put tests/lib on PYTHONPATH (CTest does it for every Python test; by hand, from the repository
root: `PYTHONPATH=$PWD/tests/lib /usr/bin/python3 bench/...`); no script edits its module search
path (ctest unit.arch.no_syspath).

checks         ok/FAIL lines and the closing `N passed, M failed` (Checks, check, summary)
runner         the convert tier's runner: run shardmill, job YAML, marker check, zarrita reads
spec_oracle    the NumPy oracle of SPEC §5 (histogram, percentiles, normalizations, checksums)
zarr_decode    an independent NumPy decoder of the Zarr v3 (sharded) output
scan_oracle    the NumPy oracle of a scan (SPEC §5) and its fixture readers
inputs         input makers: TIFF stacks, HDF5 and NIfTI files, the head CT of data/ and its jobs
ingest         the ingest runner and checks shared by tests/convert and tests/hdf5
shard_writer   an independent Zarr v3 (sharded) writer
volumes        synthetic CT-like Zarr v3 volumes of the scaling and memory benchmarks
ranks          plain and mpirun environments, launching R ranks, the ranks' pids
file_tree      file lists and byte-identity of output trees
ome_ngff_check the OME-NGFF 0.5 rules of an image
nginx_server, fault_server, plain_server, slurm_cluster   servers and the test Slurm cluster
http_reads     the HTTP tier's fixture manifest, `shardmill read` and error-line checks
machine        what the machine, the build and the load on it are (bench/, scaling/)
results        result files, stamps and min/median/max summaries (bench/, scaling/)
launcher       one conversion launched plain or under mpirun, measured and checked
"""

import os

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
