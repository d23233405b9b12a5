/* TIFF stack sources of the ingest job (SPEC §2): a directory of 2-D single-channel slices in
 * natural name order (slice2.tif before slice10.tif), or one multi-page file, read through
 * libtiff as the volume [pages, height, width] in C order, native byte order. */
#ifndef SM_JOBS_INGEST_TIFF_H
#define SM_JOBS_INGEST_TIFF_H

#include <stdbool.h>
#include <stdint.h>

#include <shardmill/dtype.h>
#include <shardmill/status.h>

struct sm_tiff_stack;

/* Opens `path` (a directory of .tif/.tiff slices or a TIFF file) and checks every slice for the
 * size and sample type of the first: SM_E_DATA naming the file (and page) that differs, is not a
 * TIFF, has more than one sample per pixel or a compression libtiff cannot decode; SM_E_IO when
 * libtiff (libtiff.so.6) cannot be loaded or a file cannot be read. `max_alloc` bounds any single
 * allocation of libtiff (a strip or tile buffer; 0: libtiff's default). */
sm_status sm_tiff_open(const char *path, uint64_t max_alloc, struct sm_tiff_stack **out,
                       struct sm_err *err);
void sm_tiff_close(struct sm_tiff_stack *t);

/* The volume: 3 axes [slices, height, width] and the sample type. */
void sm_tiff_shape(const struct sm_tiff_stack *t, uint64_t shape[3], enum sm_dtype *dtype);
/* "directory" or "multi-page" */
const char *sm_tiff_kind(const struct sm_tiff_stack *t);

/* Reads the box [off, off + shape) (3 axes) as C-order native values into out. Thread-safe: every
 * call opens the files it needs (a libtiff handle is not shared between threads). SM_E_DATA
 * naming the file (and page) for a strip or tile that does not decode to its size, SM_E_LIMIT
 * for one larger than `max_alloc`. */
sm_status sm_tiff_read_box(const struct sm_tiff_stack *t, const uint64_t *off,
                           const uint64_t *shape, void *out, struct sm_err *err);

/* Natural order of names: runs of digits compare as numbers ("a2" < "a10"), then bytewise. */
int sm_tiff_natural_cmp(const char *a, const char *b);

#endif
