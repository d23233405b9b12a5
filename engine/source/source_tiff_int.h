/* Internal to source/: libtiff as the TIFF source uses it (source_tiff_lib.c). libtiff is loaded
 * with dlopen on the first TIFF input: its ~10 dependent libraries (jpeg, webp, lzma, jbig, ...)
 * would otherwise be mapped by every run of the binary (start-up, issue 12). Errors of libtiff
 * reach us through TIFFFdOpenExt's per-handle handler, never stderr. */
#ifndef SM_SOURCE_SOURCE_TIFF_INT_H
#define SM_SOURCE_SOURCE_TIFF_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <tiffio.h>

#include "shardmill/dtype.h"
#include "shardmill/status.h"

/* The libtiff entry points used, resolved once by dlsym. */
struct sm_tiff_lib {
    TIFFOpenOptions *(*opts_alloc)(void);
    void (*opts_free)(TIFFOpenOptions *o);
    void (*opts_max_alloc)(TIFFOpenOptions *o, tmsize_t max);
    void (*opts_err)(TIFFOpenOptions *o, TIFFErrorHandlerExtR h, void *user);
    void (*opts_warn)(TIFFOpenOptions *o, TIFFErrorHandlerExtR h, void *user);
    void (*close)(TIFF *t);
    int (*get_field)(TIFF *t, uint32_t tag, ...);
    int (*get_field_defaulted)(TIFF *t, uint32_t tag, ...);
    int (*read_directory)(TIFF *t);
    uint64_t (*current_dir_offset)(TIFF *t);
    int (*set_sub_directory)(TIFF *t, uint64_t off);
    int (*is_tiled)(TIFF *t);
    int (*is_byte_swapped)(TIFF *t);
    int (*codec_configured)(uint16_t scheme);
    tmsize_t (*strip_size)(TIFF *t);
    tmsize_t (*tile_size)(TIFF *t);
    uint32_t (*compute_tile)(TIFF *t, uint32_t x, uint32_t y, uint32_t z, uint16_t s);
    tmsize_t (*read_strip)(TIFF *t, uint32_t strip, void *buf, tmsize_t size);
    tmsize_t (*read_tile)(TIFF *t, uint32_t tile, void *buf, tmsize_t size);
    TIFF *(*fdopen_ext)(int fd, const char *name, const char *mode, TIFFOpenOptions *o);
};

/* libtiff (libtiff.so.6), loaded once; NULL with SM_E_IO naming `path` when it cannot be. */
const struct sm_tiff_lib *sm_tiff_load(const char *path, struct sm_err *err);

/* One open file: the handle and the first error libtiff reported on it. */
struct sm_tfile {
    const struct sm_tiff_lib *lib;
    TIFF *t;
    int fd; /* the file libtiff reads (its own: closed by TIFFClose); pread by uncompressed reads */
    TIFFOpenOptions *opts;
    char msg[256];
};

/* Opens path for reading; `max_alloc` bounds any single allocation of libtiff (0: its default).
 * SM_E_IO when the file cannot be opened, SM_E_DATA (naming path) when it is no regular file (a
 * FIFO: sm_src_open_file) or libtiff refuses it. */
sm_status sm_tfile_open(const struct sm_tiff_lib *lib, struct sm_tfile *f, const char *path,
                        uint64_t max_alloc, struct sm_err *err);
/* Accepts a file never opened or already closed. */
void sm_tfile_close(struct sm_tfile *f);

/* What every slice must share with the first. */
struct sm_tiff_page {
    uint32_t width, height;
    enum sm_dtype dtype;
};

/* The current directory's geometry and sample type, or SM_E_DATA naming what is unsupported. */
sm_status sm_tiff_read_page(struct sm_tfile *f, struct sm_tiff_page *p, struct sm_err *err);

/* How the current directory stores its samples: strips of bh rows of the whole width (bw = the
 * width), or tiles of bh x bw; `direct` when they are stored as they are read (no compression,
 * the default fill order), so that any part of a block can be read by pread at its offset. */
struct sm_tiff_block {
    bool tiled, direct;
    uint32_t bw, bh;
};
/* SM_E_DATA for a block of 0 pixels. */
sm_status sm_tiff_read_block(struct sm_tfile *f, const struct sm_tiff_page *p,
                             struct sm_tiff_block *b, struct sm_err *err);

struct sm_tiff_geom;
/* The voxel size the current directory states (ImageDescription, resolution tags; the rules of
 * source_tiff_meta.c). */
void sm_tiff_read_geometry(struct sm_tfile *f, struct sm_tiff_geom *g);

#endif
