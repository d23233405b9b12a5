/* Internal to source/: an HDF5 dataset as a source (SPEC §2 "Ingest sources",
 * `input.hdf5.dataset`), opened by name and read box by box as hyperslabs (H5Sselect_hyperslab +
 * H5Dread) into the native type of the same class, size and sign (HDF5 converts the byte order and
 * runs every filter it has: gzip, shuffle, ...). The reader (source_hdf5.c) is the module
 * libshardmill_h5source.so, linked to HDF5 and reached through its one table,
 * sm_hdf5_source_module, which source_hdf5_load.c loads on the first HDF5 input
 * (shardmill/module.h): a run without HDF5 input never maps HDF5. (A module of its own, not a
 * second table of the export's: a program reading HDF5 input without the export could not load
 * the export's module, whose engine imports it does not link.) Debian's HDF5 (hdf5-openmpi) is
 * not built thread-safe, so every HDF5 call of the reader runs under one mutex: the threads of a
 * rank read one hyperslab at a time (MPI ranks, each with its own handle, give the parallelism),
 * except gzip datasets in their native byte order, whose chunks source_hdf5_raw.c fetches under
 * the mutex and inflates outside it.
 * Without SM_WITH_HDF5, source_hdf5_none.c refuses HDF5 input (SM_E_USAGE). */
#ifndef SM_SOURCE_SOURCE_HDF5_INT_H
#define SM_SOURCE_SOURCE_HDF5_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "shardmill/dtype.h"
#include "shardmill/module.h"
#include "shardmill/source.h"
#include "shardmill/status.h"

#define SM_HDF5_SOURCE_MODULE "libshardmill_h5source.so"
#define SM_HDF5_SOURCE_SYMBOL "sm_hdf5_source_module"

struct sm_h5source;

/* What the open found. */
struct sm_h5source_info {
    unsigned ndim;               /* 1..SM_MAX_DIMS */
    uint64_t shape[SM_MAX_DIMS]; /* C order, as HDF5 stores it */
    enum sm_dtype dtype;         /* of the values read_box delivers (native byte order) */
    char stored[48];             /* the stored type, e.g. "uint16 big-endian" */
    char layout[16];             /* "contiguous" | "chunked" | "compact" | "virtual" */
    char filters[96];            /* the filter names, comma-separated ("" for none) */
    uint64_t chunk[SM_MAX_DIMS]; /* the chunk shape when chunked, else all 0 */
    /* The geometry the dataset's attributes state, as shardmill's HDF5 export writes it (SPEC
     * §2.8): "spacing" (one positive finite number per axis), "origin" (one finite number per
     * axis), "unit" (a string); an attribute that is absent or not of that form is not used. */
    bool spacing_set, origin_set;
    double spacing[SM_MAX_DIMS];
    double origin[SM_MAX_DIMS];
    char unit[32]; /* "" for none */
};

/* open flags: follow external links and read external storage and virtual datasets whose data
 * lies in other files (input.hdf5.allow_external). */
#define SM_H5SOURCE_ALLOW_EXTERNAL 1u

/* The module's table. open: the dataset `dataset` (an absolute HDF5 path such as /exchange/data)
 * of the HDF5 file `path`. SM_E_DATA with `where` = "<path>: <dataset>": a file that is missing,
 * unreadable or not HDF5, a missing object (naming the first missing component) or one that is not
 * a dataset, a type other than 1/2/4/8-byte integers and 4/8-byte IEEE floats (naming the class:
 * compound, string, ...), a scalar, empty or null dataspace, more than SM_MAX_DIMS axes, a filter
 * this HDF5 library lacks (naming it). Without SM_H5SOURCE_ALLOW_EXTERNAL in `flags`, also
 * SM_E_DATA for data outside the file, naming it: an external link on the dataset's path (also
 * through a soft link), external storage (H5Pset_external), a virtual dataset with a source file
 * other than "." (the same file; such a source is checked in turn). External storage files are
 * looked up relative to the HDF5 file's directory ("${ORIGIN}"). read_box: the box [off, off +
 * shape) as C-order native values of info.dtype, *read += the encoded bytes it fetched from the
 * file (a filtered chunk's stored bytes, whole, for every chunk the box touches; of unfiltered
 * chunks and contiguous data the box's own bytes: HDF5's chunk cache and sieve buffer are off, so
 * it reads no more); SM_E_DATA naming the file and dataset when HDF5 cannot read it (a corrupt
 * chunk, a filter that fails). close accepts NULL. */
struct sm_hdf5_source_ops {
    struct sm_module_head head;
    sm_status (*open)(const char *path, const char *dataset, unsigned flags,
                      struct sm_h5source_info *info, struct sm_h5source **out, struct sm_err *err);
    sm_status (*read_box)(struct sm_h5source *s, const uint64_t *off, const uint64_t *shape,
                          void *out, uint64_t *read, struct sm_err *err);
    void (*close)(struct sm_h5source *s);
};

#endif
