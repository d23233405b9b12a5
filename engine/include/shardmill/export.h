/* HDF5 export (SPEC §2 "Export", §6): one chunked dataset (float32, uint8 or uint16: the types a
 * normalized convert writes) holding exactly the values of a Zarr array (read back through
 * array/, so the export equals the Zarr output bit for bit), plus
 * 1-D uint64 auxiliary datasets (the histogram) and typed attributes (normalization, provenance),
 * for tools that read HDF5. Every rank writes its own hyperslabs of one file with parallel HDF5
 * (MPI-IO, collective transfers; par_hdf5.h decides how ranks share the file), a single rank
 * uses the sec2 driver. The file is written under a temporary name next to the target and renamed
 * into place by rank 0 after every rank closed it: the target path never holds a partial file.
 * Without SM_WITH_HDF5 every call fails with SM_E_USAGE ("this build has no HDF5 export").
 * See docs/internals/export.md. */
#ifndef SM_EXPORT_EXPORT_H
#define SM_EXPORT_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/array.h"
#include "shardmill/progress.h"
#include "shardmill/status.h"

/* True if this build can write HDF5 (SM_WITH_HDF5). */
bool sm_export_hdf5_available(void);

/* *is_hdf5 when the file at `path` is a regular file holding the HDF5 signature (\x89HDF\r\n\x1a\n)
 * at offset 0, 512, 1024, 2048, ... (a user block before the superblock): what `output.exists:
 * auto` checks before it trusts an existing export. Reads at most a few bytes per power of two,
 * opens nothing through HDF5. SM_E_IO when the file cannot be opened or read. */
sm_status sm_export_hdf5_signature(const char *path, bool *is_hdf5, struct sm_err *err);

/* export.hdf5.exists */
enum sm_export_exists {
    SM_EXPORT_EXISTS_ERROR,     /* refuse an existing path */
    SM_EXPORT_EXISTS_OVERWRITE, /* replace an existing HDF5 file (atomically, by rename) */
};

struct sm_export_opts {
    enum sm_export_exists exists;
    bool fsync; /* fsync the file before the rename and its directory after it (SPEC §6) */
    /* If non-NULL, the path is resolved against this directory and must stay inside it. */
    const char *base;
    /* If non-NULL, a path the caller creates with its parent directories before the write (the
     * Zarr output): sm_export_hdf5_check accepts a missing export directory that is one of them.
     * The export itself never creates directories. */
    const char *created_by_caller;
};
#define SM_EXPORT_OPTS_DEFAULTS                                                                    \
    {                                                                                              \
        .exists = SM_EXPORT_EXISTS_ERROR, .fsync = true                                            \
    }

/* A typed attribute (borrowed). Scalars unless `array`: then a 1-D attribute of n values. Strings
 * are variable-length UTF-8 scalars (h5py reads them as str). */
enum sm_export_attr_kind { SM_EXPORT_ATTR_STRING, SM_EXPORT_ATTR_F64, SM_EXPORT_ATTR_U64 };
struct sm_export_attr {
    const char *name;
    enum sm_export_attr_kind kind;
    bool array;
    size_t n;            /* array only: number of values (>= 1) */
    const char *str;     /* STRING */
    const double *f64;   /* F64: 1 or n values */
    const uint64_t *u64; /* U64: 1 or n values */
};

/* A 1-D uint64 dataset beside the data (the histogram counts), with attributes (borrowed). */
struct sm_export_aux {
    const char *name; /* absolute HDF5 path, e.g. "/histogram" */
    const uint64_t *values;
    size_t n; /* >= 1 */
    const struct sm_export_attr *attrs;
    size_t nattrs;
};

/* What to write. `dataset` is an absolute HDF5 path ("/data", "/ct/volume"; missing groups are
 * created); an auxiliary dataset may not have the same path, nor lie inside it. */
struct sm_export_spec {
    const char *dataset;
    uint64_t chunk[SM_MAX_DIMS]; /* HDF5 chunk shape (each >= 1; clipped to the array shape) */
    int deflate;                 /* 0 = no filter, 1..9 = deflate (gzip) level */
    uint64_t buffer_bytes;       /* cap of one rank's value buffer (one unit is always allowed) */
    const struct sm_export_attr *attrs; /* on the dataset */
    size_t nattrs;
    const struct sm_export_aux *aux;
    size_t naux;
    /* How long a rank waits at an agreement point right after a collective HDF5 call for the
     * others (sm_par_agree_within): parallel HDF5 can leave ranks blocked in MPI-IO when a call
     * failed on another rank; after this the job must be aborted. */
    uint64_t timeout_ms;
};
#define SM_EXPORT_SPEC_DEFAULTS                                                                    \
    {                                                                                              \
        .dataset = "/data", .buffer_bytes = 64ull << 20, .timeout_ms = 60000                       \
    }

/* This rank's share of the work: the array is cut into a C-order grid of `unit` boxes (the Zarr
 * output's shards; edge units clipped), and this rank writes units [first, first + count). Ranks'
 * shares must not overlap and must together cover the grid. */
struct sm_export_work {
    const uint64_t *unit; /* ndim extents, each >= 1 */
    uint64_t first, count;
    /* If non-NULL, called after each write round with this rank's values written so far and
     * their bytes (of the source's type). */
    sm_progress_fn progress;
    void *progress_user;
    /* If non-NULL, the cooperative stop flag (status.h): checked by every rank before each write
     * round and agreed on, so all ranks stop at the same round; the export then fails with
     * SM_E_STOPPED like any failure (temporary file removed). */
    const atomic_int *stop;
};

struct sm_export_result {
    const char *driver; /* "mpio" or "sec2" */
    unsigned ndim;
    uint64_t chunk[SM_MAX_DIMS]; /* the chunk shape written (after clipping) */
    uint64_t bytes;              /* size of the renamed file (the same on every rank) */
    uint64_t rounds;             /* collective write rounds (every rank takes part in each) */
    uint64_t boxes, values;      /* hyperslabs and values this rank wrote */
    uint64_t read_ns, write_ns, finish_ns; /* source reads; H5Dwrite; close + fsync + rename */
};

/* Resolves `path` (core path rules: no "..", inside base, a name of its own) and checks it
 * against the policy without writing anything, so a job can call it before its expensive phases;
 * with a non-NULL spec also its dataset names and deflate level. Local (no collective).
 * *resolved is sm_malloc'd (sm_free it). SM_E_USAGE (`where` = the path or the key): "export
 * exists (set export.hdf5.exists: overwrite)"; with OVERWRITE, an existing entry that is not a
 * regular HDF5 file (signature at byte 0); a directory, symbolic link or other non-file at the
 * path or at its temporary name; a dataset name that is not an absolute HDF5 path or collides
 * with an auxiliary dataset; a level outside 0..9. SM_E_IO: the directory of the path does not
 * exist (unless opts->created_by_caller lies inside it), is not a directory or is not writable
 * (errno text). SM_E_NOMEM. */
sm_status sm_export_hdf5_check(const char *path, const struct sm_export_opts *opts,
                               const struct sm_export_spec *spec, char **resolved,
                               struct sm_err *err);

/* Collective (every rank calls it with the same path, opts and spec): writes `src` (a float32,
 * uint8 or uint16 array, read with `scratch`; the dataset has its type) to the file at `path`.
 * Ranks agree on errors before every HDF5 call sequence that communicates (file creation, dataset
 * creation, each write round, close), so a failing rank never leaves another waiting inside HDF5;
 * on any failure every rank returns the lowest failing rank's error, the file is closed and rank 0
 * removes the temporary file: nothing is left at `path` or beside it. If parallel HDF5 itself left
 * a rank blocked after a failure on another (agreement timeout, spec->timeout_ms), the rank that
 * saw it removes the temporary file and returns with sm_par_stuck() true: the caller must abort the
 * job (no collective works any more). With `fsync`, rank 0 fsyncs the file before renaming it and
 * the directory after. HDF5's own error printing is turned off; its innermost message becomes
 * `what`. SM_E_USAGE: a bad dataset name, chunk, deflate level or a source of another type, and the
 * policy checks of sm_export_hdf5_check repeated before the rename; SM_E_IO: file creation,
 * writes, close, fsync or rename; SM_E_DATA etc. from reading src; SM_E_NOMEM. */
sm_status sm_export_hdf5_write(const char *path, const struct sm_export_opts *opts,
                               const struct sm_export_spec *spec, struct sm_array *src,
                               const struct sm_export_work *work, struct sm_scratch *scratch,
                               struct sm_export_result *res, struct sm_err *err);

#endif
