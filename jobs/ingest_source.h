/* Volume sources of the ingest job: a raw binary file (dtype, shape, byte order, header bytes),
 * a NIfTI-1 file (.nii read by pread; .nii.gz streamed through zlib), a TIFF stack
 * (ingest_tiff.h) or an HDF5 dataset (shardmill/h5source.h, hyperslab per box), read box by box as
 * C-order native little-endian values, and handed to the engine as a struct sm_ingest_source
 * (shardmill/pipeline.h). NIfTI stores x fastest, so [z, y, x] in C order is the file order. */
#ifndef SM_JOBS_INGEST_SOURCE_H
#define SM_JOBS_INGEST_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include <shardmill/dtype.h>
#include <shardmill/h5source.h>
#include <shardmill/status.h>

#include "config.h"
#include "ingest_nifti.h"
#include "ingest_tiff.h"

struct sm_volume {
    enum sm_dtype dtype;  /* of the values read_box delivers (NIfTI scaled: float32, or
                             float64 for float64 files) */
    enum sm_dtype stored; /* of the values in the file */
    unsigned ndim;
    uint64_t shape[SM_CFG_MAX_DIMS]; /* C order: [z, y, x] for 3-D */
    bool swap;                       /* stored big-endian */
    int fd;                          /* raw or .nii: read by pread; -1 for .nii.gz */
    bool gz;                         /* .nii.gz: streamed (sm_volume_plan) */
    const char *path;                /* input.store (borrowed from the config) */
    uint8_t *mem;                    /* .nii.gz: the inflated bytes this rank reads (owned) */
    uint64_t mem_base, mem_len;      /* their place in the inflated file */
    uint64_t data_offset;            /* first voxel byte in the file (or in mem) */
    char format[8];                  /* "raw" | "nifti" | "tiff" | "hdf5" */
    bool nifti;                      /* nii holds the parsed header */
    struct sm_nifti_hdr nii;
    bool scaled; /* NIfTI scl_slope/scl_inter applied: v * slope + inter (in double) */
    double slope, inter;
    struct sm_tiff_stack *tiff; /* a TIFF stack (ingest_tiff.h), or NULL */
    struct sm_h5source *h5;     /* an HDF5 dataset (shardmill/h5source.h), or NULL */
    struct sm_h5source_info h5info;
};

/* Opens the configured input (input.format raw, nifti, tiff or hdf5): reads and checks the header
 * (a .nii.gz is inflated only as far as its header). SM_E_USAGE for a bad config, SM_E_DATA for a
 * malformed or unsupported header (naming the field), a volume larger than the file holds (a
 * .nii.gz: more than its compressed size can inflate to, or than its gzip trailer says), SM_E_IO.
 */
sm_status sm_volume_open(const struct sm_job_config *c, struct sm_volume *v, struct sm_err *err);
void sm_volume_close(struct sm_volume *v);

/* The source's plan step (struct sm_ingest_source.plan): for a .nii.gz, inflates the stream once,
 * keeping only the axis-0 slabs that cover the box [off, off + shape) this rank reads (the whole
 * volume for one rank); SM_E_LIMIT naming limits.memory_bytes when they exceed memory_bytes,
 * SM_E_DATA for a stream that is corrupt or ends before the volume (checked to the gzip trailer
 * when the box reaches the volume's end). Nothing for raw and .nii (read by pread). */
sm_status sm_volume_plan(struct sm_volume *v, const uint64_t *off, const uint64_t *shape,
                         uint64_t memory_bytes, struct sm_err *err);

/* Reads the box [off, off + shape) as C-order little-endian values of v->dtype into out (NIfTI
 * scaling applied). Thread-safe. */
sm_status sm_volume_read_box(const struct sm_volume *v, const uint64_t *off, const uint64_t *shape,
                             void *out, struct sm_err *err);

#endif
