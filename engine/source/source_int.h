/* Internal to source/: the source object behind the vtable, and what the engine's file sources
 * share. Each format opens into its own state and hands it to sm_source_new with its ops:
 * source_raw.c, source_nifti.c (+ the header parser source_nifti_hdr.c, the gzip stream
 * source_gz.c), source_tiff.c (+ libtiff, source_tiff_lib.c), source_hdf5_load.c (the HDF5 module's
 * table); source_open.c picks one by sm_source_params.format. */
#ifndef SM_SOURCE_SOURCE_INT_H
#define SM_SOURCE_SOURCE_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/source.h"

struct sm_source {
    const struct sm_source_ops *ops;
    void *user;
    struct sm_source_info info;
    atomic_uint_least64_t bytes_read;
    uint64_t input_bytes; /* the files read, sum of st_size (0: describe's file.bytes) */
};

/* Adds n to what s read, for a read outside read_box (the .nii.gz plan's inflate). */
void sm_source_count(struct sm_source *s, uint64_t n);
/* The size of the files the source reads, when it is not its describe's file.bytes (a TIFF
 * directory: its slices only, not the other files beside them). */
void sm_source_set_input_bytes(struct sm_source *s, uint64_t n);

/* ---- the formats (source_open.c dispatches on p->format; p->path is set) ---- */
/* The file name endings of a stack's slices: its registry row's extensions, which the source
 * lists a directory by (sm_src_list_slices) without calling back into source_open.c. */
#define SM_SRC_TIFF_EXTENSIONS ".tif|.tiff"
#define SM_SRC_PNG_EXTENSIONS ".png"
sm_status sm_src_open_raw(const struct sm_source_params *p, struct sm_source **out,
                          struct sm_err *err);
sm_status sm_src_open_nifti(const struct sm_source_params *p, struct sm_source **out,
                            struct sm_err *err);
sm_status sm_src_open_tiff(const struct sm_source_params *p, struct sm_source **out,
                           struct sm_err *err);
sm_status sm_src_open_png(const struct sm_source_params *p, struct sm_source **out,
                          struct sm_err *err);
/* SM_E_USAGE naming input.format in a build without HDF5 (source_hdf5_none.c). */
sm_status sm_src_open_hdf5(const struct sm_source_params *p, struct sm_source **out,
                           struct sm_err *err);

/* ---- source_file.c: what every file source needs ---- */
/* Exactly n bytes at off (SM_E_DATA naming path when the file ends first). */
sm_status sm_src_pread(int fd, uint64_t off, void *dst, size_t n, const char *path,
                       struct sm_err *err);
/* ---- source_direct.c: large reads that bypass the page cache (O_DIRECT) ---- */
/* The bounce buffer: an O_DIRECT read moves at most this many bytes at once. */
#define SM_SRC_DIRECT_CHUNK ((uint64_t)4 << 20)
/* One reader's state (one per box read, not shared between threads). */
struct sm_src_direct {
    uint64_t min; /* reads of fewer bytes stay buffered */
    bool off;     /* buffered only: min was UINT64_MAX, or the file system refused */
    int fd;       /* the O_DIRECT descriptor of file (dev, ino), or -1 */
    uint64_t dev, ino;
    uint8_t *mem; /* the bounce buffer's allocation, or NULL */
};
/* The `min` of a source whose files hold `file_bytes`: SM_SOURCE_DIRECT_MIN, or UINT64_MAX (no
 * direct reads) for NEVER, and for AUTO when the files hold less than half of the machine's
 * memory (sm_fs_beyond_cache). */
uint64_t sm_src_direct_min(enum sm_source_direct how, uint64_t file_bytes);
/* min: UINT64_MAX turns direct reads off. */
void sm_src_direct_init(struct sm_src_direct *d, uint64_t min);
/* Exactly n bytes at off of the file open on fd (as sm_src_pread), read with O_DIRECT when n >=
 * d->min and the file system allows it, else buffered; *fetched += the bytes read from the file
 * (a direct read: the 4 KiB-aligned range around them). */
sm_status sm_src_pread_direct(struct sm_src_direct *d, int fd, uint64_t off, void *dst, size_t n,
                              uint64_t *fetched, const char *path, struct sm_err *err);
/* Closes the O_DIRECT descriptor and frees the buffer; d can be used again. */
void sm_src_direct_end(struct sm_src_direct *d);

/* Opens path for reading as a source's file: with O_NONBLOCK, so that a FIFO never blocks the
 * open (nor a SIGTERM that should stop the run), then fstat. A FIFO, device or socket (a
 * directory unless dir_ok) is SM_E_DATA naming path; *fd (blocking again) is the caller's to
 * close. SM_E_IO (errno) when it cannot be opened. */
sm_status sm_src_open_file(const char *path, bool dir_ok, int *fd, struct sm_err *err);
/* Natural order of names: runs of digits compare as numbers ("a2" < "a10"), then bytewise. */
int sm_src_natural_cmp(const char *a, const char *b);
/* A directory of 2-D slices (a TIFF or PNG stack): the names of dir's files that end in one of
 * the "|"-separated extensions (any case; no hidden file), in natural order, the order of axis 0.
 * SM_E_DATA naming dir when there is none ("no .tif or .tiff slices in the directory"), SM_E_IO
 * (errno) when dir cannot be listed, SM_E_NOMEM. *names (*n of them) is freed by
 * sm_src_free_names. */
sm_status sm_src_list_slices(const char *dir, const char *extensions, char ***names, uint64_t *n,
                             struct sm_err *err);
void sm_src_free_names(char **names, uint64_t n);
/* "dir/name" (NULL when out of memory). */
char *sm_src_join(const char *dir, const char *name);
/* Reverses the bytes of each of n values of es bytes at p (big-endian stored values). */
void sm_src_swap_values(uint8_t *p, size_t n, size_t es);
/* NULL when out of memory. */
char *sm_src_strdup(const char *s);
bool sm_src_ends_with(const char *s, const char *suffix);
/* The provenance every file source starts from: {"path", "format", "shape", "dtype", "file"}, where
 * "file" is the file's identity {bytes, files, mtime_ns} (a directory: the sum of its files' sizes,
 * their count and the latest mtime), so a resume whose source changed is refused; null when the
 * path cannot be stat'ed. NULL when out of memory. */
struct json_t *sm_src_describe_file(const char *path, const struct sm_source_info *info);

/* ---- source_flat.c: C-order values of one file (raw, .nii) or of memory (.nii.gz) ---- */
struct sm_flat {
    const char *path;     /* named by errors */
    enum sm_dtype dtype;  /* delivered (NIfTI scaled: float32, or float64 for float64 files) */
    enum sm_dtype stored; /* in the file */
    unsigned ndim;
    uint64_t shape[SM_MAX_DIMS];
    bool swap;   /* stored big-endian */
    bool scaled; /* v * slope + inter, in double */
    double slope, inter;
    int fd;               /* read by pread; -1: from mem */
    uint64_t data_offset; /* the first value's byte in the file */
    const uint8_t *mem;   /* the inflated bytes [mem_base, mem_base + mem_len) of the file */
    uint64_t mem_base, mem_len;
};

/* The box [off, off + shape) into out, row by row (swapped, scaled). *read: the bytes pread from
 * the file (0 from mem). Thread-safe. */
sm_status sm_flat_read_box(const struct sm_flat *f, const uint64_t *off, const uint64_t *shape,
                           void *out, uint64_t *read, struct sm_err *err);

/* ---- source_gz.c: one gzip stream read forward (gzip members one after another) ---- */
/* Deflate's densest coding turns 258 bytes into about 2 bits: no gzip file inflates to more than
 * 1032 times its size (zlib's technical details). A header declaring more is refused as data. */
#define SM_GZ_MAX_RATIO 1032u

struct sm_gz;
sm_status sm_gz_open(const char *path, struct sm_gz **out, struct sm_err *err);
/* Inflates up to n bytes into dst (NULL: discard them); *got < n only at the end of the stream,
 * which is then checked (CRC-32 and length of every member). */
sm_status sm_gz_read(struct sm_gz *g, uint8_t *dst, uint64_t n, uint64_t *got, struct sm_err *err);
/* Exactly n bytes discarded (SM_E_DATA when the stream ends first). */
sm_status sm_gz_skip(struct sm_gz *g, uint64_t n, struct sm_err *err);
/* Reads and checks the rest of the stream. */
sm_status sm_gz_finish(struct sm_gz *g, struct sm_err *err);
/* SM_E_DATA naming the file: `what` at the inflated position. */
sm_status sm_gz_fail(struct sm_gz *g, struct sm_err *err, const char *what);
uint64_t sm_gz_file_size(const struct sm_gz *g);
/* The compressed bytes read from the file so far. */
uint64_t sm_gz_bytes_in(const struct sm_gz *g);
/* Accepts NULL. */
void sm_gz_close(struct sm_gz *g);

#endif
