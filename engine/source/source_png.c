/* A PNG stack as a source (SPEC §2): a directory of 2-D grayscale PNG slices in natural name
 * order (s2.png before s10.png, as CT software exports them), or one PNG file as one slice, read
 * through libpng, loaded on first use like libtiff (shardmill/library.h), as the volume
 * [slices, height, width] of uint8 (bit depth 1, 2, 4 or 8: the values as stored) or uint16 (16,
 * big-endian in the file). Every slice is opened once at open to check that it matches the first;
 * reads open the files of their box again, so threads never share a handle. A slice is one zlib
 * stream: a box decodes its slices' rows from the first to its last (the read block is the slice,
 * SM_SOURCE_BLOCKS), and a read counts the file bytes libpng consumed (issue 33). */
#include "source_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <png.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardmill/alloc.h"
#include "shardmill/library.h"

/* ---- libpng, loaded on the first PNG input ---- */

static struct {
    png_structp (*create)(png_const_charp, png_voidp, png_error_ptr, png_error_ptr);
    png_infop (*create_info)(png_const_structrp);
    void (*destroy)(png_structpp, png_infopp, png_infopp);
    void (*set_read_fn)(png_structrp, png_voidp, png_rw_ptr);
    png_voidp (*get_io_ptr)(png_const_structrp);
    png_voidp (*get_error_ptr)(png_const_structrp);
    void (*read_info)(png_structrp, png_inforp);
    png_uint_32 (*get_ihdr)(png_const_structrp, png_const_inforp, png_uint_32 *, png_uint_32 *,
                            int *, int *, int *, int *, int *);
    void (*set_swap)(png_structrp);
    void (*set_packing)(png_structrp);
    int (*set_interlace)(png_structrp);
    void (*update_info)(png_structrp, png_inforp);
    void (*read_row)(png_structrp, png_bytep, png_bytep);
} png;
static char png_load_error[200];
static pthread_once_t png_once = PTHREAD_ONCE_INIT;

static void png_init_once(void)
{
    static const struct sm_library_sym syms[] = {
        {"png_create_info_struct", (void **)&png.create_info},
        {"png_destroy_read_struct", (void **)&png.destroy},
        {"png_set_read_fn", (void **)&png.set_read_fn},
        {"png_get_io_ptr", (void **)&png.get_io_ptr},
        {"png_get_error_ptr", (void **)&png.get_error_ptr},
        {"png_read_info", (void **)&png.read_info},
        {"png_get_IHDR", (void **)&png.get_ihdr},
        {"png_set_swap", (void **)&png.set_swap},
        {"png_set_packing", (void **)&png.set_packing},
        {"png_set_interlace_handling", (void **)&png.set_interlace},
        {"png_read_update_info", (void **)&png.update_info},
        {"png_read_row", (void **)&png.read_row},
        {"png_create_read_struct", (void **)&png.create}, /* last: non-NULL means all loaded */
    };
    (void)sm_library_load("libpng16.so.16", syms, sizeof(syms) / sizeof(syms[0]), png_load_error,
                          sizeof(png_load_error));
}

/* ---- one slice file decoded ---- */

/* A slice's geometry as its header states it. */
struct png_page {
    uint32_t width, height;
    int depth, color, interlace;
};

struct png_file {
    const char *path;
    uint64_t max_alloc; /* sm_source_params.max_alloc: the largest buffer a slice may take */
    int fd;
    uint64_t bytes; /* consumed from the file */
    png_structp p;
    png_infop info;
    char msg[160]; /* libpng's error, or ours */
    jmp_buf jb;
    uint8_t *row; /* the decoded rows held (one, or every row of an interlaced slice) */
};

/* libpng's error handler: never returns (the libpng contract for a handler of one's own). */
static void on_error(png_structp p, png_const_charp what)
{
    struct png_file *f = png.get_error_ptr(p);
    snprintf(f->msg, sizeof(f->msg), "%s", what);
    longjmp(f->jb, 1);
}

static void on_warning(png_structp p, png_const_charp what)
{
    (void)p;
    (void)what; /* a bad CRC of an ancillary chunk and the like: not our concern */
}

static void on_read(png_structp p, png_bytep data, size_t n)
{
    struct png_file *f = png.get_io_ptr(p);
    for (size_t got = 0; got < n;) {
        const ssize_t r = read(f->fd, data + got, n - got);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) {
                continue;
            }
            snprintf(f->msg, sizeof(f->msg), "%s",
                     r == 0 ? "the file ends early" : strerror(errno));
            longjmp(f->jb, 1);
        }
        got += (size_t)r;
        f->bytes += (uint64_t)r;
    }
}

static void file_close(struct png_file *f)
{
    if (f->p != NULL) {
        png.destroy(&f->p, f->info != NULL ? &f->info : NULL, NULL);
    }
    if (f->fd >= 0) {
        close(f->fd);
    }
    sm_free(f->row);
    f->p = NULL;
    f->info = NULL;
    f->fd = -1;
    f->row = NULL;
}

/* What a box needs of one slice: rows [y0, y1), columns [x0, x0 + w) into out (NULL: the header
 * alone). */
struct png_rows {
    uint64_t y0, y1, x0, w;
    size_t elem;
    uint8_t *out;
};

/* Reads the header of f->path into pg and, with r, its rows; libpng's errors come back through
 * on_error's longjmp to here, so nothing that lives across it is a local. */
static sm_status file_decode(struct png_file *f, struct png_page *pg, const struct png_rows *r,
                             struct sm_err *err)
{
    f->p = png.create(PNG_LIBPNG_VER_STRING, f, on_error, on_warning);
    if (f->p == NULL || (f->info = png.create_info(f->p)) == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a PNG reader");
    }
    if (setjmp(f->jb) != 0) {
        SM_FAIL_AT(err, SM_E_DATA, f->path, "not a readable PNG: %s", f->msg);
    }
    png.set_read_fn(f->p, f, on_read);
    png.read_info(f->p, f->info);
    png_uint_32 w = 0, h = 0;
    int comp = 0, filter = 0;
    png.get_ihdr(f->p, f->info, &w, &h, &pg->depth, &pg->color, &pg->interlace, &comp, &filter);
    pg->width = w;
    pg->height = h;
    if (pg->color != PNG_COLOR_TYPE_GRAY) {
        SM_FAIL_AT(err, SM_E_DATA, f->path,
                   "a PNG of color type %d: a slice must be grayscale without alpha (type 0)",
                   pg->color);
    }
    if (r == NULL) {
        return SM_OK;
    }
    if (pg->depth == 16) {
        png.set_swap(f->p); /* big-endian in the file: native little-endian values */
    } else if (pg->depth < 8) {
        png.set_packing(f->p); /* a byte per value, the value as stored (not scaled to 8 bits) */
    }
    /* Adam7 interlacing: every pass adds pixels to every row, so the rows are held whole */
    const int passes = png.set_interlace(f->p);
    png.update_info(f->p, f->info);
    const size_t row = (size_t)w * r->elem;
    const uint64_t held = passes > 1 ? h : 1, last = passes > 1 ? h : r->y1;
    if (f->max_alloc != 0 && row * held > f->max_alloc) {
        SM_FAIL_AT(err, SM_E_LIMIT, f->path,
                   "an interlaced slice of %" PRIu64 " bytes exceeds the bound on one allocation "
                   "(%" PRIu64 " bytes)",
                   (uint64_t)(row * held), f->max_alloc);
    }
    f->row = sm_malloc(row * held == 0 ? 1 : row * held);
    if (f->row == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate %" PRIu64 " PNG row(s) of %zu bytes", held, row);
    }
    const size_t take = (size_t)r->w * r->elem;
    for (int pass = 0; pass < passes; pass++) {
        for (uint64_t y = 0; y < last; y++) {
            uint8_t *at = f->row + (passes > 1 ? y * row : 0);
            png.read_row(f->p, at, NULL);
            if (pass == passes - 1 && y >= r->y0 && y < r->y1) {
                memcpy(r->out + (y - r->y0) * take, at + r->x0 * r->elem, take);
            }
        }
    }
    return SM_OK;
}

static sm_status slice_read(const char *path, uint64_t max_alloc, struct png_page *pg,
                            const struct png_rows *r, uint64_t *bytes, struct sm_err *err)
{
    struct png_file f;
    memset(&f, 0, sizeof(f));
    f.path = path;
    f.max_alloc = max_alloc;
    f.fd = -1;
    sm_status st = sm_src_open_file(path, false, &f.fd, err);
    if (st == SM_OK) {
        st = file_decode(&f, pg, r, err);
    }
    *bytes += f.bytes;
    file_close(&f);
    return st;
}

/* ---- the stack ---- */

struct png_stack {
    char *path;   /* the directory, or the one file */
    char **names; /* directory: the slices in natural order; NULL: one file */
    uint64_t n;
    struct png_page pg;         /* the first slice's */
    struct sm_source_info info; /* the volume, from the first slice and the count */
    uint64_t file_bytes, max_alloc;
};

/* A slice of the first one's size and bit depth. */
static bool same_page(const struct png_page *a, const struct png_page *b)
{
    return a->width == b->width && a->height == b->height && a->depth == b->depth;
}

static void stack_close(void *user)
{
    struct png_stack *t = user;
    sm_src_free_names(t->names, t->n);
    sm_free(t->path);
    sm_free(t);
}

/* The path of slice z (freed by the caller; NULL when out of memory). */
static char *slice_path(const struct png_stack *t, uint64_t z)
{
    return t->names != NULL ? sm_src_join(t->path, t->names[z]) : sm_src_strdup(t->path);
}

static sm_status png_read_box(void *user, int thread, const uint64_t *off, const uint64_t *shape,
                              void *out, uint64_t *read, struct sm_err *err)
{
    (void)thread;
    const struct png_stack *t = user;
    const size_t elem = sm_dtype_size(t->info.dtype);
    const size_t plane = (size_t)shape[1] * shape[2] * elem;
    sm_status st = SM_OK;
    for (uint64_t z = 0; st == SM_OK && z < shape[0]; z++) {
        char *path = slice_path(t, off[0] + z);
        if (path == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate a path");
        }
        const struct png_rows r = {off[1], off[1] + shape[1],         off[2], shape[2],
                                   elem,   (uint8_t *)out + z * plane};
        struct png_page pg;
        st = slice_read(path, t->max_alloc, &pg, &r, read, err);
        if (st == SM_OK && !same_page(&pg, &t->pg)) {
            st = SM_ERR_AT(err, SM_E_DATA, path, "the slice changed since the input was opened");
        }
        sm_free(path);
    }
    return st;
}

static json_t *png_describe(void *user)
{
    const struct png_stack *t = user;
    return sm_src_describe_file(t->path, &t->info);
}

static const struct sm_source_ops png_ops = {
    .read_box = png_read_box,
    .describe = png_describe,
    .close = stack_close,
};

/* Every slice's header, the same as the first's; the files' sizes summed. */
static sm_status check_slices(struct png_stack *t, struct sm_err *err)
{
    for (uint64_t z = 0; z < t->n; z++) {
        char *path = slice_path(t, z);
        if (path == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate a path");
        }
        struct png_page pg;
        uint64_t ignored = 0;
        sm_status st = slice_read(path, t->max_alloc, &pg, NULL, &ignored, err);
        struct stat sb;
        if (st == SM_OK && stat(path, &sb) == 0) {
            t->file_bytes += (uint64_t)sb.st_size;
        }
        if (st == SM_OK && z == 0) {
            t->pg = pg;
        } else if (st == SM_OK && !same_page(&pg, &t->pg)) {
            st =
                SM_ERR_AT(err, SM_E_DATA, path,
                          "slice %" PRIu64 " is %" PRIu32 " x %" PRIu32 " of %d bits, the first "
                          "%" PRIu32 " x %" PRIu32 " of %d: every slice must be the same",
                          z, pg.width, pg.height, pg.depth, t->pg.width, t->pg.height, t->pg.depth);
        }
        sm_free(path);
        if (st != SM_OK) {
            return st;
        }
    }
    struct sm_source_info *in = &t->info;
    *in = (struct sm_source_info){.ndim = 3, .format = "png"};
    in->dtype = t->pg.depth == 16 ? SM_DT_UINT16 : SM_DT_UINT8;
    in->shape[0] = t->n;
    in->shape[1] = in->slab[1] = t->pg.height;
    in->shape[2] = in->slab[2] = t->pg.width;
    in->slab[0] = 1;               /* the read block: a slice, */
    in->access = SM_SOURCE_BLOCKS; /* one zlib stream */
    return SM_OK;
}

sm_status sm_src_open_png(const struct sm_source_params *p, struct sm_source **out,
                          struct sm_err *err)
{
    *out = NULL;
    pthread_once(&png_once, png_init_once);
    if (png.create == NULL) {
        SM_FAIL_AT(err, SM_E_IO, p->path,
                   "PNG input needs libpng (libpng16.so.16, Debian package libpng16-16): %s",
                   png_load_error);
    }
    struct stat st;
    if (stat(p->path, &st) != 0) {
        return SM_ERRNO(err, errno, p->path, "open");
    }
    struct png_stack *t = sm_calloc(1, sizeof(*t));
    if (t == NULL || (t->path = sm_src_strdup(p->path)) == NULL) {
        sm_free(t);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a PNG stack");
    }
    t->n = 1;
    t->max_alloc = p->max_alloc;
    sm_status s = S_ISDIR(st.st_mode)
                      ? sm_src_list_slices(t->path, SM_SRC_PNG_EXTENSIONS, &t->names, &t->n, err)
                      : SM_OK;
    if (s == SM_OK) {
        s = check_slices(t, err);
    }
    if (s == SM_OK) {
        s = sm_source_new(&png_ops, t, &t->info, out, err);
    }
    if (s != SM_OK) {
        stack_close(t);
        return s;
    }
    sm_source_set_input_bytes(*out, t->file_bytes);
    return SM_OK;
}
