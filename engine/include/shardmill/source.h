/* Volume sources (SPEC §2 "Sources"): a volume that is not a Zarr or N5 array — a raw file, a
 * NIfTI-1 file (.nii, .nii.gz), a TIFF stack, an HDF5 dataset — or any volume a program describes
 * by its own callbacks, read box by box as C-order native (little-endian) values. One vtable
 * (struct sm_source_ops) serves them all; a convert (pipeline.h, `sm_convert_run.source`) reads
 * through it exactly as it reads a Zarr array: each rank only the boxes of its tiles and shards.
 * Module source/ (engine/source/). The engine's file sources read with pread (raw, .nii), zlib
 * (.nii.gz, streamed once by sm_source_plan), libtiff (loaded on first use) and HDF5 (the module
 * libshardmill_hdf5.so, loaded on first use; hyperslab reads, one HDF5 call at a time). */
#ifndef SM_SOURCE_SOURCE_H
#define SM_SOURCE_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include "shardmill/dtype.h"
#include "shardmill/status.h"

struct json_t;

#ifndef SM_MAX_DIMS
#define SM_MAX_DIMS 32
#endif

/* What reading part of a source's read block costs (docs/internals/reading.md): the engine groups
 * the output's shards by the blocks they share and reads each block once per pass only where a
 * block decodes whole. */
enum sm_source_access {
    /* Any box reads just its own bytes (raw, .nii, an uncompressed TIFF strip or tile, HDF5
     * contiguous or unfiltered chunks). The default of a caller's own ops that say nothing. */
    SM_SOURCE_RANDOM = 0,
    /* A block decodes whole (a compressed TIFF strip or tile, an HDF5 chunk with filters): a box
     * that covers part of a block costs the whole block. */
    SM_SOURCE_BLOCKS,
    /* Read forward only (.nii.gz): sm_source_plan loads the rank's bounding box once. */
    SM_SOURCE_STREAM
};

/* What a source knows of its volume. */
struct sm_source_info {
    unsigned ndim;               /* 1..SM_MAX_DIMS */
    uint64_t shape[SM_MAX_DIMS]; /* C order: [z, y, x] for 3-D */
    enum sm_dtype dtype;         /* of the values read_box delivers */
    /* The source's read block: the unit its storage is read and decoded in (a TIFF strip
     * [1, rows_per_strip, w] or tile [1, th, tw], an HDF5 chunk, a NIfTI or raw plane); a box
     * aligned to it reads no byte twice. Every entry >= 1. */
    uint64_t slab[SM_MAX_DIMS];
    /* What reading part of a block costs (above). */
    enum sm_source_access access;
    /* Geometry the file states (NIfTI pixdim, qform/sform; a TIFF's ImageJ or OME-XML
     * description or resolution tags), in the axis order above. NIfTI spacing is checked
     * positive and finite unless sm_source_params.spacing_given; its origin (the world position
     * of voxel 0, [z, y, x]) falls on the last three axes. */
    bool spacing_set, origin_set;
    double spacing[SM_MAX_DIMS];
    double origin[SM_MAX_DIMS];
    const char *unit; /* a UDUNITS-2 name ("millimeter"), or NULL when the file states none */
    char format[8];   /* a row's name of sm_source_formats, or a caller's own */
    /* Where the geometry came from, as the report names it (`input.geometry_from`): a TIFF's
     * "imagej" | "ome-xml" | "tiff-resolution"; empty: `format` ("nifti"). */
    char geometry_from[16];
};

/* The vtable of a source. read_box is required, the rest may be NULL. */
struct sm_source_ops {
    /* Called once on every rank, before any read_box, with the bounding box of every box this
     * rank will read (shape all zero when it reads none) and its budget (limits.memory_bytes). A
     * source that cannot read boxes in any order cheaply (a gzip stream) loads that box here; one
     * that would need more than the budget fails with SM_E_LIMIT naming limits.memory_bytes. */
    sm_status (*plan)(void *user, const uint64_t *off, const uint64_t *shape, uint64_t memory_bytes,
                      struct sm_err *err);
    /* The box [off, off + shape) into out (product(shape) * element bytes). Thread-safe: called
     * concurrently by a rank's threads (thread 0 .. threads - 1), boxes in any order. *read gets
     * the encoded bytes this call fetched from the source's files, as the kernel counts them, not
     * the box's bytes: a compressed TIFF strip's or a filtered HDF5 chunk's stored bytes for
     * every block decoded, the box's own bytes of what is read in part (pread of raw, .nii, an
     * uncompressed TIFF, HDF5 contiguous or unfiltered chunks).
     * SM_E_DATA for a file that ends early or is malformed (`where` names it), SM_E_IO. */
    sm_status (*read_box)(void *user, int thread, const uint64_t *off, const uint64_t *shape,
                          void *out, uint64_t *read, struct sm_err *err);
    /* The provenance of the source (a new JSON object: format, path, the file's identity — size,
     * count and latest mtime — and what the format adds), or NULL. */
    struct json_t *(*describe)(void *user);
    void (*close)(void *user);
};

struct sm_source;

/* A source over a caller's own callbacks (info copied; ops and user borrowed until
 * sm_source_close, which calls ops->close). */
sm_status sm_source_new(const struct sm_source_ops *ops, void *user,
                        const struct sm_source_info *info, struct sm_source **out,
                        struct sm_err *err);

/* The engine's file sources (input.format and input.raw.* / input.hdf5.* of docs/CONFIG.md). */
/* Reads past the page cache (sm_source_params.direct; input.direct_io's choices, in order). */
enum sm_source_direct { SM_SOURCE_DIRECT_AUTO, SM_SOURCE_DIRECT_ALWAYS, SM_SOURCE_DIRECT_NEVER };
/* The shortest run of contiguous bytes read with O_DIRECT: a narrow group's rows of a 2048-wide
 * uint16 slice (128 rows: 512 KiB) go direct too, a 256² head CT slice (128 KiB) does as well. */
#define SM_SOURCE_DIRECT_MIN ((uint64_t)128 << 10)

struct sm_source_params {
    const char *format; /* the name of a row of sm_source_formats */
    const char *path;   /* the file (a TIFF stack: its directory or one multi-page file) */
    /* raw */
    enum sm_dtype raw_dtype;
    unsigned raw_ndim;
    uint64_t raw_shape[SM_MAX_DIMS];
    bool raw_big_endian;
    uint64_t raw_header_bytes;
    /* hdf5 */
    const char *hdf5_dataset; /* an absolute HDF5 path such as /exchange/data */
    bool hdf5_allow_external; /* follow data outside the file (SPEC §2.3) */
    /* The largest single allocation a decoder may make (a TIFF strip or tile; 0: libtiff's own
     * bound); jobs/ passes limits.memory_bytes. It is also the budget of an HDF5 source's chunk
     * buffers: a chunk whose buffers exceed it is SM_E_LIMIT at open, and the reads of a rank's
     * threads hold at most half of it at once. */
    uint64_t max_alloc;
    /* The largest decoded chunk (limits.max_chunk_bytes; 0: unchecked): an HDF5 dataset whose
     * chunk is larger is SM_E_LIMIT at open, before any of it is allocated. */
    uint64_t max_chunk_bytes;
    /* The caller brings its own voxel spacing (input.spacing): a NIfTI file whose pixdim is not a
     * positive finite number is then read, not refused (its info.spacing is the file's, as is). */
    bool spacing_given;
    /* input.direct_io: whether an uncompressed TIFF's runs of SM_SOURCE_DIRECT_MIN contiguous
     * bytes or more are read past the page cache (O_DIRECT, source_direct.c; buffered where the
     * file system refuses it). AUTO: when the input's files hold at least half of the machine's
     * memory, so the page cache could not keep them between passes anyway. */
    enum sm_source_direct direct;
};

/* The registry of the engine's file sources (CONTRIBUTING.md "A new source"): one row per
 * input.format, read by sm_source_open and by jobs/ (the key's choices, the inference from the
 * file's name, the source's keys and axes, the help and docs/CONFIG.md), so that no list of
 * formats is written anywhere else. A source's own keys are input.<name>.* (their rows in
 * jobs/config_schema.c); a key of another source is refused. */
struct sm_source_format {
    const char *name; /* input.format */
    /* "|"-separated endings of a file name (compared ignoring case) that infer the format when
     * input.format is not given; "" for none */
    const char *extensions;
    sm_status (*open)(const struct sm_source_params *p, struct sm_source **out, struct sm_err *err);
    /* The axes rule: the volume's fixed number of axes (a TIFF stack: 3), or 0: the file's own
     * (checked when opened), or the count of `shape_key` when it has one. */
    unsigned ndim;
    const char *shape_key; /* the key stating the volume's shape (input.raw.shape), or NULL */
    const char *required;  /* "|"-separated keys it needs ("" for none) */
    const char *noun;      /* the input in messages ("a TIFF input") */
    const char *doc;       /* one line: what input.store names for it */
};
/* The rows, in the order input.format lists them; the last has name NULL. */
extern const struct sm_source_format sm_source_formats[];
/* The row of input.format `name`, or NULL. */
const struct sm_source_format *sm_source_format_find(const char *name);
/* The row whose extensions end `path` (ignoring case), or NULL. */
const struct sm_source_format *sm_source_format_infer(const char *path);

/* Opens the source p names and reads its header: SM_E_USAGE for bad parameters (naming the
 * input.* key), SM_E_DATA for a malformed or unsupported file (naming the file and the field),
 * SM_E_IO. Every rank opens its own. */
sm_status sm_source_open(const struct sm_source_params *p, struct sm_source **out,
                         struct sm_err *err);

const struct sm_source_info *sm_source_info(const struct sm_source *s);
sm_status sm_source_plan(struct sm_source *s, const uint64_t *off, const uint64_t *shape,
                         uint64_t memory_bytes, struct sm_err *err);
/* read_box, counted: sm_source_bytes_read sums what every call read (and, for a .nii.gz, the
 * compressed bytes sm_source_plan inflated: its boxes are then served from memory, counting 0). */
sm_status sm_source_read_box(struct sm_source *s, int thread, const uint64_t *off,
                             const uint64_t *shape, void *out, struct sm_err *err);
uint64_t sm_source_bytes_read(const struct sm_source *s);
/* The size of the source's files on disk (the provenance's file.bytes: a file's st_size, a TIFF
 * directory's files summed), the denominator of a pass's read ratio; 0 when the source states
 * none (a caller's own source without describe). */
uint64_t sm_source_input_bytes(const struct sm_source *s);
/* A new JSON object (ops->describe, or {"format": info.format}); NULL when out of memory. */
struct json_t *sm_source_describe(const struct sm_source *s);
/* Accepts NULL. */
void sm_source_close(struct sm_source *s);

#endif
