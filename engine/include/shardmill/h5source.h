/* An HDF5 dataset as an ingest source (SPEC §2 "Ingest sources", `input.hdf5.dataset`): opened by
 * name, read box by box as hyperslabs (H5Sselect_hyperslab + H5Dread) into the native type of the
 * same class, size and sign (HDF5 converts the byte order and runs every filter it has: gzip,
 * shuffle, …). Lives with the HDF5 export in the module libshardmill_hdf5.so, loaded by the first
 * sm_h5source_open (shardmill/module.h): a run without HDF5 input never maps HDF5.
 * Debian's HDF5 (hdf5-openmpi) is not built thread-safe, so every HDF5 call of the source runs
 * under one mutex: the threads of a rank read one hyperslab at a time (MPI ranks, each with its
 * own handle, give the parallelism). Without SM_WITH_HDF5 sm_h5source_open fails with SM_E_USAGE.
 */
#ifndef SM_EXPORT_H5SOURCE_H
#define SM_EXPORT_H5SOURCE_H

#include <stdint.h>

#include "shardmill/array.h"
#include "shardmill/dtype.h"
#include "shardmill/status.h"

struct sm_h5source;

/* What sm_h5source_open found. */
struct sm_h5source_info {
    unsigned ndim;               /* 1..SM_MAX_DIMS */
    uint64_t shape[SM_MAX_DIMS]; /* C order, as HDF5 stores it */
    enum sm_dtype dtype;         /* of the values read_box delivers (native byte order) */
    char stored[48];             /* the stored type, e.g. "uint16 big-endian" */
    char layout[16];             /* "contiguous" | "chunked" | "compact" */
    char filters[96];            /* the filter names, comma-separated ("" for none) */
};

/* sm_h5source_open flags: follow external links and read external storage and virtual datasets
 * whose data lies in other files (input.hdf5.allow_external). */
#define SM_H5SOURCE_ALLOW_EXTERNAL 1u

/* Opens the dataset `dataset` (an absolute HDF5 path such as /exchange/data) of the HDF5 file
 * `path`. SM_E_DATA with `where` = "<path>: <dataset>" (the file alone when it cannot be opened):
 * a file that is missing, unreadable or not HDF5, a missing object (naming the first missing
 * component) or one that is not a dataset, a type other than 1/2/4/8-byte integers and 4/8-byte
 * IEEE floats (naming the class: compound, string, …), a scalar, empty or null dataspace, more
 * than SM_MAX_DIMS axes, a filter this HDF5 library lacks (naming it). Without
 * SM_H5SOURCE_ALLOW_EXTERNAL in `flags`, also SM_E_DATA for data outside the file, naming it: an
 * external link on the dataset's path (also through a soft link), external storage
 * (H5Pset_external), a virtual dataset with a source file other than "." (the same file; such a
 * source is checked in turn). External storage files are looked up relative to the HDF5 file's
 * directory ("${ORIGIN}"). SM_E_IO when the module libshardmill_hdf5.so cannot be loaded,
 * SM_E_USAGE without SM_WITH_HDF5. */
sm_status sm_h5source_open(const char *path, const char *dataset, unsigned flags,
                           struct sm_h5source_info *info, struct sm_h5source **out,
                           struct sm_err *err);

/* Reads the box [off, off + shape) (info.ndim axes, inside the dataset) as C-order native values
 * of info.dtype into out. Thread-safe (serialised: see above). SM_E_DATA naming the file and
 * dataset when HDF5 cannot read it (a corrupt chunk, a filter that fails). */
sm_status sm_h5source_read_box(struct sm_h5source *s, const uint64_t *off, const uint64_t *shape,
                               void *out, struct sm_err *err);

/* Accepts NULL. */
void sm_h5source_close(struct sm_h5source *s);

#endif
