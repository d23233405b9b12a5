/* TIFF stack sources for `ingest` (SPEC §2) through libtiff, which decodes strips and tiles with
 * every compression Debian's build has (none, LZW, deflate, packbits, ...) and returns samples in
 * native byte order. libtiff is loaded with dlopen on the first TIFF input: its ~10 dependent
 * libraries (jpeg, webp, lzma, jbig, ...) would otherwise be mapped by every run of the binary
 * (start-up, issue 12). Errors of libtiff reach us through TIFFOpenExt's per-handle handler, never
 * stderr. Every slice is opened once at open to check that it matches the first; reads open the
 * files of their box again, so threads never share a handle. */
#include "ingest_tiff.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <tiffio.h>

#include <shardmill/alloc.h>
#include <shardmill/module.h>

/* The libtiff entry points used here, resolved once by dlsym. */
static struct {
    TIFFOpenOptions *(*opts_alloc)(void);
    void (*opts_free)(TIFFOpenOptions *o);
    void (*opts_max_alloc)(TIFFOpenOptions *o, tmsize_t max);
    void (*opts_err)(TIFFOpenOptions *o, TIFFErrorHandlerExtR h, void *user);
    void (*opts_warn)(TIFFOpenOptions *o, TIFFErrorHandlerExtR h, void *user);
    void (*close)(TIFF *t);
    int (*get_field_defaulted)(TIFF *t, uint32_t tag, ...);
    int (*read_directory)(TIFF *t);
    uint64_t (*current_dir_offset)(TIFF *t);
    int (*set_sub_directory)(TIFF *t, uint64_t off);
    int (*is_tiled)(TIFF *t);
    int (*codec_configured)(uint16_t scheme);
    tmsize_t (*strip_size)(TIFF *t);
    tmsize_t (*tile_size)(TIFF *t);
    uint32_t (*compute_tile)(TIFF *t, uint32_t x, uint32_t y, uint32_t z, uint16_t s);
    tmsize_t (*read_strip)(TIFF *t, uint32_t strip, void *buf, tmsize_t size);
    tmsize_t (*read_tile)(TIFF *t, uint32_t tile, void *buf, tmsize_t size);
    TIFF *(*open_ext)(const char *path, const char *mode, TIFFOpenOptions *o);
} tiff;
static char tiff_load_error[200];
static pthread_once_t tiff_once = PTHREAD_ONCE_INIT;

static void tiff_init_once(void)
{
    static const struct sm_library_sym syms[] = {
        {"TIFFOpenOptionsAlloc", (void **)&tiff.opts_alloc},
        {"TIFFOpenOptionsFree", (void **)&tiff.opts_free},
        {"TIFFOpenOptionsSetMaxSingleMemAlloc", (void **)&tiff.opts_max_alloc},
        {"TIFFOpenOptionsSetErrorHandlerExtR", (void **)&tiff.opts_err},
        {"TIFFOpenOptionsSetWarningHandlerExtR", (void **)&tiff.opts_warn},
        {"TIFFClose", (void **)&tiff.close},
        {"TIFFGetFieldDefaulted", (void **)&tiff.get_field_defaulted},
        {"TIFFReadDirectory", (void **)&tiff.read_directory},
        {"TIFFCurrentDirOffset", (void **)&tiff.current_dir_offset},
        {"TIFFSetSubDirectory", (void **)&tiff.set_sub_directory},
        {"TIFFIsTiled", (void **)&tiff.is_tiled},
        {"TIFFIsCODECConfigured", (void **)&tiff.codec_configured},
        {"TIFFStripSize", (void **)&tiff.strip_size},
        {"TIFFTileSize", (void **)&tiff.tile_size},
        {"TIFFComputeTile", (void **)&tiff.compute_tile},
        {"TIFFReadEncodedStrip", (void **)&tiff.read_strip},
        {"TIFFReadEncodedTile", (void **)&tiff.read_tile},
        {"TIFFOpenExt", (void **)&tiff.open_ext}, /* last: non-NULL means all loaded */
    };
    if (!sm_library_load("libtiff.so.6", syms, sizeof(syms) / sizeof(syms[0]), tiff_load_error,
                         sizeof(tiff_load_error))) {
        return;
    }
}

/* One open file: the handle and the first error libtiff reported on it. */
struct tfile {
    TIFF *t;
    TIFFOpenOptions *opts;
    char msg[256];
};

static int on_error(TIFF *t, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)t;
    (void)module;
    struct tfile *f = user;
    if (f->msg[0] == '\0') {
        /* libtiff's own format string: trusted as its printf-style handler contract says */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
#pragma GCC diagnostic pop
    }
    return 1; /* handled: nothing goes to stderr */
}

static int on_warning(TIFF *t, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)t;
    (void)user;
    (void)module;
    (void)fmt;
    (void)ap;
    return 1; /* unknown tags and the like: not our concern */
}

static sm_status tfile_open(struct tfile *f, const char *path, uint64_t max_alloc,
                            struct sm_err *err)
{
    memset(f, 0, sizeof(*f));
    f->opts = tiff.opts_alloc();
    if (f->opts == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate libtiff options");
    }
    tiff.opts_err(f->opts, on_error, f);
    tiff.opts_warn(f->opts, on_warning, f);
    if (max_alloc != 0) {
        tiff.opts_max_alloc(f->opts, (tmsize_t)(max_alloc > INT64_MAX ? INT64_MAX : max_alloc));
    }
    f->t = tiff.open_ext(path, "r", f->opts);
    if (f->t == NULL) {
        const int e = errno;
        struct stat st;
        if (stat(path, &st) != 0) {
            sm_err_set(err, SM_E_IO, __FILE__, __LINE__, "open: %s", strerror(e));
            sm_err_cause(err, "errno", e);
        } else {
            sm_err_set(err, SM_E_DATA, __FILE__, __LINE__, "not a readable TIFF file: %s",
                       f->msg[0] != '\0' ? f->msg : "libtiff refused it");
        }
        sm_err_where(err, "%s", path);
        tiff.opts_free(f->opts);
        f->opts = NULL;
        return err->status;
    }
    return SM_OK;
}

static void tfile_close(struct tfile *f)
{
    if (f->t != NULL) {
        tiff.close(f->t);
    }
    if (f->opts != NULL) {
        tiff.opts_free(f->opts);
    }
    f->t = NULL;
    f->opts = NULL;
}

/* What every slice must share with the first. */
struct page {
    uint32_t width, height;
    enum sm_dtype dtype;
};

struct sm_tiff_stack {
    char *dir;     /* directory mode: the directory; multi-page: the file */
    char **names;  /* directory mode: slice file names in natural order */
    uint64_t *ifd; /* multi-page mode: the offset of every page's directory */
    uint64_t n;    /* slices */
    struct page pg;
    uint64_t max_alloc;
};

static const char *dtype_label(enum sm_dtype d)
{
    return sm_dtype_name(d);
}

/* The current directory's geometry and sample type, or SM_E_DATA naming what is unsupported. */
static sm_status read_page(struct tfile *f, struct page *p, struct sm_err *err)
{
    uint32_t w = 0, h = 0;
    uint16_t bits = 0, fmt = SAMPLEFORMAT_UINT, spp = 1, comp = COMPRESSION_NONE;
    uint16_t photo = PHOTOMETRIC_MINISBLACK;
    tiff.get_field_defaulted(f->t, TIFFTAG_IMAGEWIDTH, &w);
    tiff.get_field_defaulted(f->t, TIFFTAG_IMAGELENGTH, &h);
    tiff.get_field_defaulted(f->t, TIFFTAG_BITSPERSAMPLE, &bits);
    tiff.get_field_defaulted(f->t, TIFFTAG_SAMPLEFORMAT, &fmt);
    tiff.get_field_defaulted(f->t, TIFFTAG_SAMPLESPERPIXEL, &spp);
    tiff.get_field_defaulted(f->t, TIFFTAG_COMPRESSION, &comp);
    tiff.get_field_defaulted(f->t, TIFFTAG_PHOTOMETRIC, &photo);
    if (w == 0 || h == 0) {
        SM_FAIL(err, SM_E_DATA, "the image is %" PRIu32 " x %" PRIu32 " pixels", w, h);
    }
    if (spp != 1 || photo == PHOTOMETRIC_PALETTE) {
        SM_FAIL(err, SM_E_DATA,
                "%u samples per pixel (photometric %u): only single-channel grey slices are read",
                (unsigned)spp, (unsigned)photo);
    }
    if (!tiff.codec_configured(comp)) {
        SM_FAIL(err, SM_E_DATA, "compression %u is not decoded by this libtiff", (unsigned)comp);
    }
    static const struct {
        uint16_t fmt, bits;
        enum sm_dtype dt;
    } types[] = {
        {SAMPLEFORMAT_UINT, 8, SM_DT_UINT8},      {SAMPLEFORMAT_UINT, 16, SM_DT_UINT16},
        {SAMPLEFORMAT_UINT, 32, SM_DT_UINT32},    {SAMPLEFORMAT_INT, 8, SM_DT_INT8},
        {SAMPLEFORMAT_INT, 16, SM_DT_INT16},      {SAMPLEFORMAT_INT, 32, SM_DT_INT32},
        {SAMPLEFORMAT_IEEEFP, 32, SM_DT_FLOAT32}, {SAMPLEFORMAT_IEEEFP, 64, SM_DT_FLOAT64},
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (types[i].fmt == fmt && types[i].bits == bits) {
            p->width = w;
            p->height = h;
            p->dtype = types[i].dt;
            return SM_OK;
        }
    }
    SM_FAIL(err, SM_E_DATA,
            "%u-bit samples of format %u: 8/16/32-bit integers and 32/64-bit floats are read",
            (unsigned)bits, (unsigned)fmt);
}

/* SM_E_DATA when slice `i` differs from the first; where names the file (and page). */
static sm_status same_page(const struct sm_tiff_stack *t, const struct page *p, uint64_t i,
                           struct sm_err *err)
{
    if (p->width == t->pg.width && p->height == t->pg.height && p->dtype == t->pg.dtype) {
        return SM_OK;
    }
    SM_FAIL(err, SM_E_DATA,
            "slice %" PRIu64 " is %" PRIu32 " x %" PRIu32 " %s, the first slice %" PRIu32
            " x %" PRIu32 " %s: every slice must have the same size and sample type",
            i, p->width, p->height, dtype_label(p->dtype), t->pg.width, t->pg.height,
            dtype_label(t->pg.dtype));
}

static bool is_tiff_name(const char *s)
{
    const char *dot = strrchr(s, '.');
    return s[0] != '.' && dot != NULL &&
           (strcasecmp(dot, ".tif") == 0 || strcasecmp(dot, ".tiff") == 0);
}

int sm_tiff_natural_cmp(const char *a, const char *b)
{
    const char *p = a, *q = b;
    while (*p != '\0' && *q != '\0') {
        if (*p >= '0' && *p <= '9' && *q >= '0' && *q <= '9') {
            while (*p == '0') {
                p++;
            }
            while (*q == '0') {
                q++;
            }
            size_t np = 0, nq = 0;
            while (p[np] >= '0' && p[np] <= '9') {
                np++;
            }
            while (q[nq] >= '0' && q[nq] <= '9') {
                nq++;
            }
            if (np != nq) {
                return np < nq ? -1 : 1;
            }
            const int c = strncmp(p, q, np);
            if (c != 0) {
                return c;
            }
            p += np;
            q += nq;
        } else if (*p != *q) {
            return (unsigned char)*p < (unsigned char)*q ? -1 : 1;
        } else {
            p++;
            q++;
        }
    }
    if (*p != *q) {
        return *p == '\0' ? -1 : 1;
    }
    return strcmp(a, b); /* "a01" and "a1": still a total order */
}

static int natural_qsort(const void *x, const void *y)
{
    return sm_tiff_natural_cmp(*(char *const *)x, *(char *const *)y);
}

static char *join(const char *dir, const char *name)
{
    const size_t n = strlen(dir) + strlen(name) + 2;
    char *s = sm_malloc(n);
    if (s != NULL) {
        snprintf(s, n, "%s/%s", dir, name);
    }
    return s;
}

static char *dup_str(const char *s)
{
    const size_t n = strlen(s) + 1;
    char *d = sm_malloc(n);
    if (d != NULL) {
        memcpy(d, s, n);
    }
    return d;
}

/* Directory mode: the slice names in natural order. */
static sm_status list_slices(struct sm_tiff_stack *t, struct sm_err *err)
{
    DIR *d = opendir(t->dir);
    if (d == NULL) {
        const int e = errno;
        sm_err_set(err, SM_E_IO, __FILE__, __LINE__, "open directory: %s", strerror(e));
        sm_err_cause(err, "errno", e);
        sm_err_where(err, "%s", t->dir);
        return err->status;
    }
    uint64_t cap = 0;
    sm_status s = SM_OK;
    for (struct dirent *de; s == SM_OK && (de = readdir(d)) != NULL;) {
        if (!is_tiff_name(de->d_name)) {
            continue;
        }
        if (t->n == cap) {
            cap = cap == 0 ? 64 : cap * 2;
            char **grown = sm_realloc(t->names, cap * sizeof(*grown));
            if (grown == NULL) {
                s = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot list the slices");
                break;
            }
            t->names = grown;
        }
        t->names[t->n] = dup_str(de->d_name);
        if (t->names[t->n] == NULL) {
            s = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot list the slices");
            break;
        }
        t->n++;
    }
    closedir(d);
    if (s == SM_OK && t->n == 0) {
        s = sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                       "no .tif or .tiff slices in the directory");
        sm_err_where(err, "%s", t->dir);
    }
    if (s == SM_OK) {
        qsort(t->names, (size_t)t->n, sizeof(*t->names), natural_qsort);
    }
    return s;
}

/* Directory mode: every slice opened once, single page, the same as the first. */
static sm_status check_slices(struct sm_tiff_stack *t, struct sm_err *err)
{
    for (uint64_t i = 0; i < t->n; i++) {
        char *path = join(t->dir, t->names[i]);
        if (path == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate a path");
        }
        struct tfile f;
        sm_status s = tfile_open(&f, path, t->max_alloc, err);
        if (s == SM_OK) {
            struct page p;
            s = read_page(&f, &p, err);
            if (s == SM_OK && i == 0) {
                t->pg = p;
            } else if (s == SM_OK) {
                s = same_page(t, &p, i, err);
            }
            if (s == SM_OK && tiff.read_directory(f.t)) {
                s = sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                               "has more than one page: a stack directory holds one slice per "
                               "file (give a multi-page file as input.store instead)");
            }
            if (s != SM_OK && err->where[0] == '\0') {
                sm_err_where(err, "%s", path);
            }
            tfile_close(&f);
        }
        sm_free(path);
        if (s != SM_OK) {
            return s;
        }
    }
    return SM_OK;
}

/* Multi-page mode: the directory offset of every page, each the same as the first. */
static sm_status scan_pages(struct sm_tiff_stack *t, struct sm_err *err)
{
    struct tfile f;
    SM_TRY(tfile_open(&f, t->dir, t->max_alloc, err));
    uint64_t cap = 0;
    sm_status s = SM_OK;
    do {
        if (t->n == cap) {
            cap = cap == 0 ? 64 : cap * 2;
            uint64_t *grown = sm_realloc(t->ifd, cap * sizeof(*grown));
            if (grown == NULL) {
                s = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot list the pages");
                break;
            }
            t->ifd = grown;
        }
        struct page p;
        s = read_page(&f, &p, err);
        if (s == SM_OK && t->n == 0) {
            t->pg = p;
        } else if (s == SM_OK) {
            s = same_page(t, &p, t->n, err);
        }
        if (s != SM_OK) {
            sm_err_where(err, "%s: page %" PRIu64, t->dir, t->n);
            break;
        }
        t->ifd[t->n++] = tiff.current_dir_offset(f.t);
    } while (tiff.read_directory(f.t));
    if (s == SM_OK && f.msg[0] != '\0') { /* a directory chain that breaks off */
        s = sm_err_set(err, SM_E_DATA, __FILE__, __LINE__, "after page %" PRIu64 ": %s", t->n - 1,
                       f.msg);
        sm_err_where(err, "%s", t->dir);
    }
    tfile_close(&f);
    return s;
}

sm_status sm_tiff_open(const char *path, uint64_t max_alloc, struct sm_tiff_stack **out,
                       struct sm_err *err)
{
    *out = NULL;
    pthread_once(&tiff_once, tiff_init_once);
    if (tiff.open_ext == NULL) {
        sm_err_set(err, SM_E_IO, __FILE__, __LINE__,
                   "TIFF input needs libtiff (libtiff.so.6, Debian package libtiff6): %s",
                   tiff_load_error);
        sm_err_where(err, "%s", path);
        return err->status;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        const int e = errno;
        sm_err_set(err, SM_E_IO, __FILE__, __LINE__, "open: %s", strerror(e));
        sm_err_cause(err, "errno", e);
        sm_err_where(err, "%s", path);
        return err->status;
    }
    struct sm_tiff_stack *t = sm_calloc(1, sizeof(*t));
    if (t == NULL || (t->dir = dup_str(path)) == NULL) {
        sm_free(t);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a TIFF stack");
    }
    t->max_alloc = max_alloc;
    sm_status s = S_ISDIR(st.st_mode) ? list_slices(t, err) : scan_pages(t, err);
    if (s == SM_OK && S_ISDIR(st.st_mode)) {
        s = check_slices(t, err);
    }
    if (s != SM_OK) {
        sm_tiff_close(t);
        return s;
    }
    *out = t;
    return SM_OK;
}

void sm_tiff_close(struct sm_tiff_stack *t)
{
    if (t == NULL) {
        return;
    }
    for (uint64_t i = 0; t->names != NULL && i < t->n; i++) {
        sm_free(t->names[i]);
    }
    sm_free(t->names);
    sm_free(t->ifd);
    sm_free(t->dir);
    sm_free(t);
}

void sm_tiff_shape(const struct sm_tiff_stack *t, uint64_t shape[3], enum sm_dtype *dtype)
{
    shape[0] = t->n;
    shape[1] = t->pg.height;
    shape[2] = t->pg.width;
    *dtype = t->pg.dtype;
}

const char *sm_tiff_kind(const struct sm_tiff_stack *t)
{
    return t->names != NULL ? "directory" : "multi-page";
}

/* Rows [y0, y0 + ny) x columns [x0, x0 + nx) of the current page into dst (row pitch nx). */
static sm_status read_rows(const struct sm_tiff_stack *t, struct tfile *f, uint64_t y0, uint64_t ny,
                           uint64_t x0, uint64_t nx, uint8_t *dst, struct sm_err *err)
{
    const size_t es = sm_dtype_size(t->pg.dtype);
    const uint64_t width = t->pg.width;
    const bool tiled = tiff.is_tiled(f->t) != 0;
    uint32_t bw = t->pg.width, bh = 0;
    if (tiled) {
        tiff.get_field_defaulted(f->t, TIFFTAG_TILEWIDTH, &bw);
        tiff.get_field_defaulted(f->t, TIFFTAG_TILELENGTH, &bh);
    } else {
        tiff.get_field_defaulted(f->t, TIFFTAG_ROWSPERSTRIP, &bh);
        if (bh > t->pg.height) {
            bh = t->pg.height;
        }
    }
    if (bw == 0 || bh == 0) {
        SM_FAIL(err, SM_E_DATA, "a %s of %" PRIu32 " x %" PRIu32 " pixels",
                tiled ? "tile" : "strip", bw, bh);
    }
    const tmsize_t bsize = tiled ? tiff.tile_size(f->t) : tiff.strip_size(f->t);
    const uint64_t need = (uint64_t)bw * bh * es; /* a full block of samples */
    if (bsize <= 0 || (uint64_t)bsize < need) {
        SM_FAIL(err, SM_E_DATA, "%s size %lld is below %" PRIu64 " bytes of samples",
                tiled ? "tile" : "strip", (long long)bsize, need);
    }
    if (t->max_alloc != 0 && (uint64_t)bsize > t->max_alloc) { /* sizes declared by the file */
        SM_FAIL(err, SM_E_LIMIT, "a %s of %lld bytes exceeds limits.memory_bytes (%" PRIu64 ")",
                tiled ? "tile" : "strip", (long long)bsize, t->max_alloc);
    }
    uint8_t *blk = sm_malloc((size_t)bsize);
    if (blk == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a %lld-byte %s", (long long)bsize,
                tiled ? "tile" : "strip");
    }
    sm_status s = SM_OK;
    for (uint64_t by = y0 / bh * bh; s == SM_OK && by < y0 + ny; by += bh) {
        for (uint64_t bx = tiled ? x0 / bw * bw : 0; s == SM_OK && bx < x0 + nx; bx += bw) {
            const uint32_t idx = tiled ? tiff.compute_tile(f->t, (uint32_t)bx, (uint32_t)by, 0, 0)
                                       : (uint32_t)(by / bh);
            /* the last strip may hold fewer rows: ask for what the image has */
            const uint64_t rows = by + bh <= t->pg.height ? bh : t->pg.height - by;
            const uint64_t want = tiled ? need : rows * width * es;
            const tmsize_t got = tiled ? tiff.read_tile(f->t, idx, blk, (tmsize_t)want)
                                       : tiff.read_strip(f->t, idx, blk, (tmsize_t)want);
            if (got < 0 || (uint64_t)got < want) {
                s = sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                               "%s %" PRIu32 " decodes to %lld of %" PRIu64 " bytes%s%s",
                               tiled ? "tile" : "strip", idx, (long long)got, want,
                               f->msg[0] != '\0' ? ": " : "", f->msg);
                break;
            }
            const uint64_t ylo = by > y0 ? by : y0;
            const uint64_t yhi = by + rows < y0 + ny ? by + rows : y0 + ny;
            const uint64_t xlo = bx > x0 ? bx : x0;
            const uint64_t bxe = bx + bw < width ? bx + bw : width;
            const uint64_t xhi = bxe < x0 + nx ? bxe : x0 + nx;
            for (uint64_t y = ylo; y < yhi; y++) {
                memcpy(dst + ((y - y0) * nx + (xlo - x0)) * es,
                       blk + ((y - by) * bw + (xlo - bx)) * es, (size_t)((xhi - xlo) * es));
            }
        }
    }
    sm_free(blk);
    return s;
}

sm_status sm_tiff_read_box(const struct sm_tiff_stack *t, const uint64_t *off,
                           const uint64_t *shape, void *out, struct sm_err *err)
{
    const size_t es = sm_dtype_size(t->pg.dtype);
    const uint64_t plane = shape[1] * shape[2] * es;
    uint8_t *dst = out;
    struct tfile f = {0};
    sm_status s = SM_OK;
    if (t->names == NULL) {
        s = tfile_open(&f, t->dir, t->max_alloc, err);
    }
    for (uint64_t z = off[0]; s == SM_OK && z < off[0] + shape[0]; z++, dst += plane) {
        char *path = NULL;
        if (t->names != NULL) {
            path = join(t->dir, t->names[z]);
            if (path == NULL) {
                s = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot allocate a path");
                break;
            }
            s = tfile_open(&f, path, t->max_alloc, err);
        } else if (!tiff.set_sub_directory(f.t, t->ifd[z])) {
            s = sm_err_set(err, SM_E_DATA, __FILE__, __LINE__, "cannot read the page: %s", f.msg);
        }
        if (s == SM_OK) {
            s = read_rows(t, &f, off[1], shape[1], off[2], shape[2], dst, err);
        }
        if (s != SM_OK && err->where[0] == '\0') {
            if (path != NULL) {
                sm_err_where(err, "%s", path);
            } else {
                sm_err_where(err, "%s: page %" PRIu64, t->dir, z);
            }
        }
        if (t->names != NULL) {
            tfile_close(&f);
        }
        sm_free(path);
    }
    tfile_close(&f);
    return s;
}
