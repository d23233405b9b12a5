/* A TIFF stack as a source (SPEC §2): a directory of 2-D single-channel slices in natural name
 * order (slice2.tif before slice10.tif), or one multi-page file, read through libtiff
 * (source_tiff_lib.c), which decodes strips and tiles with every compression Debian's build has
 * (none, LZW, deflate, packbits, ...) and returns samples in native byte order, as the volume
 * [pages, height, width], with the voxel size the first slice states (source_tiff_meta.c: ImageJ,
 * OME-XML, resolution tags). Every slice is opened once at open to check that it matches the first;
 * reads open the files of their box again, so threads never share a handle. Uncompressed strips
 * and tiles are read in part by pread (a box fetches its own bytes: SM_SOURCE_RANDOM); compressed
 * ones decode whole, and a read counts their stored bytes (issue 33). */
#include "source_int.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "shardmill/alloc.h"
#include "shardmill/box.h"
#include "source_tiff_int.h"
#include "source_tiff_meta_int.h"

struct tiff_stack {
    const struct sm_tiff_lib *lib;
    char *dir;     /* directory mode: the directory; multi-page: the file */
    char **names;  /* directory mode: slice file names in natural order */
    uint64_t *ifd; /* multi-page mode: the offset of every page's directory */
    uint64_t n;    /* slices */
    struct sm_tiff_page pg;
    uint64_t max_alloc;
    uint64_t direct_min;      /* sm_source_params.direct, resolved (sm_src_direct_min) */
    struct sm_tiff_geom geom; /* what the first slice states */
    /* the read block over every page (source.h slab: the smallest rows x columns that hold
     * whole blocks of every page) and whether every page is read directly (uncompressed) */
    uint64_t blk_h, blk_w;
    bool direct;
    uint64_t file_bytes; /* the slices' files (multi-page: the file), sum of st_size */
};

/* lcm(a, b), at most cap: blocks of a and of b both end at its multiples (or at the image's edge).
 */
static uint64_t lcm_cap(uint64_t a, uint64_t b, uint64_t cap)
{
    const uint64_t m = a / sm_gcd_u64(a, b);
    return m > cap / b ? cap : m * b > cap ? cap : m * b;
}

/* Page i's block into the stack's read block and access. */
static sm_status merge_block(struct tiff_stack *t, struct sm_tfile *f, uint64_t i,
                             struct sm_err *err)
{
    struct sm_tiff_block b;
    SM_TRY(sm_tiff_read_block(f, &t->pg, &b, err));
    const uint64_t h = b.bh, w = b.tiled ? b.bw : t->pg.width;
    t->blk_h = i == 0 ? (h < t->pg.height ? h : t->pg.height) : lcm_cap(t->blk_h, h, t->pg.height);
    t->blk_w = i == 0 ? (w < t->pg.width ? w : t->pg.width) : lcm_cap(t->blk_w, w, t->pg.width);
    t->direct = (i == 0 || t->direct) && b.direct;
    return SM_OK;
}

/* SM_E_DATA when slice `i` differs from the first; where names the file (and page). */
static sm_status same_page(const struct tiff_stack *t, const struct sm_tiff_page *p, uint64_t i,
                           struct sm_err *err)
{
    if (p->width == t->pg.width && p->height == t->pg.height && p->dtype == t->pg.dtype) {
        return SM_OK;
    }
    SM_FAIL(err, SM_E_DATA,
            "slice %" PRIu64 " is %" PRIu32 " x %" PRIu32 " %s, the first slice %" PRIu32
            " x %" PRIu32 " %s: every slice must have the same size and sample type",
            i, p->width, p->height, sm_dtype_name(p->dtype), t->pg.width, t->pg.height,
            sm_dtype_name(t->pg.dtype));
}

/* Directory mode: the slice names in natural order. */
static sm_status list_slices(struct tiff_stack *t, struct sm_err *err)
{
    return sm_src_list_slices(t->dir, SM_SRC_TIFF_EXTENSIONS, &t->names, &t->n, err);
}

/* Directory mode: every slice opened once, single page, the same as the first. */
static sm_status check_slices(struct tiff_stack *t, struct sm_err *err)
{
    for (uint64_t i = 0; i < t->n; i++) {
        char *path = sm_src_join(t->dir, t->names[i]);
        if (path == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate a path");
        }
        struct sm_tfile f;
        sm_status s = sm_tfile_open(t->lib, &f, path, t->max_alloc, err);
        struct stat sb;
        if (s == SM_OK && fstat(f.fd, &sb) == 0) {
            t->file_bytes += (uint64_t)sb.st_size;
        }
        if (s == SM_OK) {
            struct sm_tiff_page p;
            s = sm_tiff_read_page(&f, &p, err);
            if (s == SM_OK && i == 0) { /* a directory stack: the first slice's metadata */
                t->pg = p;
                sm_tiff_read_geometry(&f, &t->geom);
            } else if (s == SM_OK) {
                s = same_page(t, &p, i, err);
            }
            if (s == SM_OK) {
                s = merge_block(t, &f, i, err);
            }
            if (s == SM_OK && t->lib->read_directory(f.t)) {
                s = SM_ERR(err, SM_E_DATA,
                           "has more than one page: a stack directory holds one slice per "
                           "file (give a multi-page file as input.store instead)");
            }
            if (s != SM_OK && err->where[0] == '\0') {
                sm_err_where(err, "%s", path);
            }
            sm_tfile_close(&f);
        }
        sm_free(path);
        if (s != SM_OK) {
            return s;
        }
    }
    return SM_OK;
}

/* Multi-page mode: the directory offset of every page, each the same as the first. */
static sm_status scan_pages(struct tiff_stack *t, struct sm_err *err)
{
    struct sm_tfile f;
    SM_TRY(sm_tfile_open(t->lib, &f, t->dir, t->max_alloc, err));
    uint64_t cap = 0;
    sm_status s = SM_OK;
    do {
        if (t->n == cap) {
            cap = cap == 0 ? 64 : cap * 2;
            uint64_t *grown = sm_realloc(t->ifd, cap * sizeof(*grown));
            if (grown == NULL) {
                s = SM_ERR(err, SM_E_NOMEM, "cannot list the pages");
                break;
            }
            t->ifd = grown;
        }
        struct sm_tiff_page p;
        s = sm_tiff_read_page(&f, &p, err);
        if (s == SM_OK && t->n == 0) {
            t->pg = p;
            sm_tiff_read_geometry(&f, &t->geom);
        } else if (s == SM_OK) {
            s = same_page(t, &p, t->n, err);
        }
        if (s == SM_OK) {
            s = merge_block(t, &f, t->n, err);
        }
        if (s != SM_OK) {
            sm_err_where(err, "%s: page %" PRIu64, t->dir, t->n);
            break;
        }
        t->ifd[t->n++] = t->lib->current_dir_offset(f.t);
    } while (t->lib->read_directory(f.t));
    if (s == SM_OK && f.msg[0] != '\0') { /* a directory chain that breaks off */
        s = SM_ERR_AT(err, SM_E_DATA, t->dir, "after page %" PRIu64 ": %s", t->n - 1, f.msg);
    }
    sm_tfile_close(&f);
    return s;
}

static void stack_close(struct tiff_stack *t)
{
    sm_src_free_names(t->names, t->n);
    sm_free(t->ifd);
    sm_free(t->dir);
    sm_free(t);
}

/* `path`: a directory of .tif/.tiff slices or a TIFF file; every slice checked for the size and
 * sample type of the first: SM_E_DATA naming the file (and page) that differs, is not a TIFF, has
 * more than one sample per pixel or a compression libtiff cannot decode; SM_E_IO when libtiff
 * cannot be loaded or a file cannot be read. */
static sm_status stack_open(const char *path, uint64_t max_alloc, struct tiff_stack **out,
                            struct sm_err *err)
{
    *out = NULL;
    const struct sm_tiff_lib *lib = sm_tiff_load(path, err);
    if (lib == NULL) {
        return err->status;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        return SM_ERRNO(err, errno, path, "open");
    }
    struct tiff_stack *t = sm_calloc(1, sizeof(*t));
    if (t == NULL || (t->dir = sm_src_strdup(path)) == NULL) {
        sm_free(t);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a TIFF stack");
    }
    t->lib = lib;
    t->max_alloc = max_alloc;
    t->file_bytes = S_ISDIR(st.st_mode) ? 0 : (uint64_t)st.st_size;
    sm_status s = S_ISDIR(st.st_mode) ? list_slices(t, err) : scan_pages(t, err);
    if (s == SM_OK && S_ISDIR(st.st_mode)) {
        s = check_slices(t, err);
    }
    if (s != SM_OK) {
        stack_close(t);
        return s;
    }
    *out = t;
    return SM_OK;
}

/* The current page's strip or tile offsets (counts false) or byte counts (libtiff's array, valid
 * while the directory is current; one entry per block); NULL when the file states none. */
static const uint64_t *block_array(const struct tiff_stack *t, struct sm_tfile *f, bool tiled,
                                   bool counts)
{
    const uint32_t tag = tiled ? (counts ? TIFFTAG_TILEBYTECOUNTS : TIFFTAG_TILEOFFSETS)
                               : (counts ? TIFFTAG_STRIPBYTECOUNTS : TIFFTAG_STRIPOFFSETS);
    uint64_t *a = NULL;
    return t->lib->get_field(f->t, tag, &a) == 1 ? a : NULL;
}

/* Part of one block of an uncompressed page (SM_SOURCE_RANDOM): block `idx` at (bx, by), rows of
 * bw samples stored one after another from offs[idx]; its rows [ylo, yhi) x columns [xlo, xhi)
 * read by pread into dst (row pitch `pitch` bytes), whole rows of a strip in one call. *read gets
 * the bytes read. SM_E_DATA when the block's byte count is short of its samples or the file ends
 * first. */
struct block_part {
    bool tiled;
    uint32_t idx;
    uint64_t bx, by, bw, ylo, yhi, xlo, xhi;
};
static sm_status read_direct(const struct tiff_stack *t, struct sm_tfile *f,
                             struct sm_src_direct *dio, const uint64_t *offs,
                             const uint64_t *counts, const struct block_part *bp, uint8_t *dst,
                             uint64_t pitch, uint64_t *read, struct sm_err *err)
{
    const size_t es = sm_dtype_size(t->pg.dtype);
    const uint64_t row = bp->bw * es, run = (bp->xhi - bp->xlo) * es;
    const uint64_t first = (bp->ylo - bp->by) * row + (bp->xlo - bp->bx) * es;
    const uint64_t end = (bp->yhi - 1 - bp->by) * row + (bp->xhi - bp->bx) * es;
    const char *kind = bp->tiled ? "tile" : "strip";
    struct stat sb;
    if (fstat(f->fd, &sb) != 0) {
        return SM_ERRNO(err, errno, "", "stat");
    }
    if (counts[bp->idx] < end) {
        SM_FAIL(err, SM_E_DATA,
                "%s %" PRIu32 " holds %" PRIu64 " bytes, short of its samples (%" PRIu64 ")", kind,
                bp->idx, counts[bp->idx], end);
    }
    if (offs[bp->idx] > (uint64_t)sb.st_size || end > (uint64_t)sb.st_size - offs[bp->idx]) {
        SM_FAIL(err, SM_E_DATA,
                "%s %" PRIu32 " ends at byte %" PRIu64 ", after the end of the file (%" PRIu64
                " bytes)",
                kind, bp->idx, offs[bp->idx] + end, (uint64_t)sb.st_size);
    }
    const uint64_t rows = bp->yhi - bp->ylo;
    if (run == row && pitch == row) { /* whole rows, one after another in both */
        SM_TRY(sm_src_pread_direct(dio, f->fd, offs[bp->idx] + first, dst, (size_t)(rows * row),
                                   read, "", err));
    } else {
        for (uint64_t y = 0; y < rows; y++) {
            SM_TRY(sm_src_pread(f->fd, offs[bp->idx] + first + y * row, dst + y * pitch,
                                (size_t)run, "", err));
        }
        *read += rows * run;
    }
    if (t->lib->is_byte_swapped(f->t) && es > 1) {
        for (uint64_t y = 0; y < rows; y++) {
            sm_src_swap_values(dst + y * pitch, (size_t)(run / es), es);
        }
    }
    return SM_OK;
}

/* Rows [y0, y0 + ny) x columns [x0, x0 + nx) of the current page into dst (row pitch nx); *read
 * gets the encoded bytes fetched from the file: of an uncompressed page only the samples of the
 * box (pread), of a compressed one the stored bytes of every strip or tile decoded (its byte
 * count: a block decodes whole). */
static sm_status read_rows(const struct tiff_stack *t, struct sm_tfile *f,
                           struct sm_src_direct *dio, uint64_t y0, uint64_t ny, uint64_t x0,
                           uint64_t nx, uint8_t *dst, uint64_t *read, struct sm_err *err)
{
    const size_t es = sm_dtype_size(t->pg.dtype);
    const uint64_t width = t->pg.width;
    struct sm_tiff_block blkinfo;
    SM_TRY(sm_tiff_read_block(f, &t->pg, &blkinfo, err));
    const bool tiled = blkinfo.tiled;
    const uint32_t bw = blkinfo.bw, bh = blkinfo.bh;
    const uint64_t *offs = block_array(t, f, tiled, false);
    const uint64_t *counts = block_array(t, f, tiled, true);
    const bool direct = blkinfo.direct && offs != NULL && counts != NULL && f->fd >= 0;
    const tmsize_t bsize = tiled ? t->lib->tile_size(f->t) : t->lib->strip_size(f->t);
    const uint64_t need = (uint64_t)bw * bh * es; /* a full block of samples */
    if (bsize <= 0 || (uint64_t)bsize < need) {
        SM_FAIL(err, SM_E_DATA, "%s size %lld is below %" PRIu64 " bytes of samples",
                tiled ? "tile" : "strip", (long long)bsize, need);
    }
    if (!direct && t->max_alloc != 0 && (uint64_t)bsize > t->max_alloc) { /* declared sizes */
        SM_FAIL(err, SM_E_LIMIT,
                "a %s of %lld bytes exceeds the bound on one allocation (%" PRIu64 " bytes)",
                tiled ? "tile" : "strip", (long long)bsize, t->max_alloc);
    }
    uint8_t *blk = direct ? NULL : sm_malloc((size_t)bsize);
    if (!direct && blk == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a %lld-byte %s", (long long)bsize,
                tiled ? "tile" : "strip");
    }
    sm_status s = SM_OK;
    for (uint64_t by = y0 / bh * bh; s == SM_OK && by < y0 + ny; by += bh) {
        for (uint64_t bx = tiled ? x0 / bw * bw : 0; s == SM_OK && bx < x0 + nx; bx += bw) {
            const uint32_t idx = tiled
                                     ? t->lib->compute_tile(f->t, (uint32_t)bx, (uint32_t)by, 0, 0)
                                     : (uint32_t)(by / bh);
            /* the last strip may hold fewer rows: ask for what the image has */
            const uint64_t rows = by + bh <= t->pg.height ? bh : t->pg.height - by;
            const uint64_t ylo = by > y0 ? by : y0;
            const uint64_t yhi = by + rows < y0 + ny ? by + rows : y0 + ny;
            const uint64_t xlo = bx > x0 ? bx : x0;
            const uint64_t bxe = bx + bw < width ? bx + bw : width;
            const uint64_t xhi = bxe < x0 + nx ? bxe : x0 + nx;
            if (direct) {
                const struct block_part bp = {tiled, idx, bx, by, bw, ylo, yhi, xlo, xhi};
                s = read_direct(t, f, dio, offs, counts, &bp,
                                dst + ((ylo - y0) * nx + (xlo - x0)) * es, nx * es, read, err);
                continue;
            }
            const uint64_t want = tiled ? need : rows * width * es;
            const tmsize_t got = tiled ? t->lib->read_tile(f->t, idx, blk, (tmsize_t)want)
                                       : t->lib->read_strip(f->t, idx, blk, (tmsize_t)want);
            if (got < 0 || (uint64_t)got < want) {
                s = SM_ERR(err, SM_E_DATA,
                           "%s %" PRIu32 " decodes to %lld of %" PRIu64 " bytes%s%s",
                           tiled ? "tile" : "strip", idx, (long long)got, want,
                           f->msg[0] != '\0' ? ": " : "", f->msg);
                break;
            }
            *read += counts != NULL ? counts[idx] : want; /* the stored bytes libtiff read */
            for (uint64_t y = ylo; y < yhi; y++) {
                memcpy(dst + ((y - y0) * nx + (xlo - x0)) * es,
                       blk + ((y - by) * bw + (xlo - bx)) * es, (size_t)((xhi - xlo) * es));
            }
        }
    }
    sm_free(blk);
    return s;
}

static sm_status tiff_read_box(void *user, int thread, const uint64_t *off, const uint64_t *shape,
                               void *out, uint64_t *read, struct sm_err *err)
{
    (void)thread;
    const struct tiff_stack *t = user;
    const size_t es = sm_dtype_size(t->pg.dtype);
    const uint64_t plane = shape[1] * shape[2] * es;
    uint8_t *dst = out;
    struct sm_tfile f = {0};
    struct sm_src_direct dio;
    sm_src_direct_init(&dio, t->direct_min);
    sm_status s = SM_OK;
    if (t->names == NULL) {
        s = sm_tfile_open(t->lib, &f, t->dir, t->max_alloc, err);
    }
    for (uint64_t z = off[0]; s == SM_OK && z < off[0] + shape[0]; z++, dst += plane) {
        char *path = NULL;
        if (t->names != NULL) {
            path = sm_src_join(t->dir, t->names[z]);
            if (path == NULL) {
                s = SM_ERR(err, SM_E_NOMEM, "cannot allocate a path");
                break;
            }
            s = sm_tfile_open(t->lib, &f, path, t->max_alloc, err);
        } else if (!t->lib->set_sub_directory(f.t, t->ifd[z])) {
            s = SM_ERR(err, SM_E_DATA, "cannot read the page: %s", f.msg);
        }
        if (s == SM_OK) {
            s = read_rows(t, &f, &dio, off[1], shape[1], off[2], shape[2], dst, read, err);
        }
        if (s != SM_OK && err->where[0] == '\0') {
            if (path != NULL) {
                sm_err_where(err, "%s", path);
            } else {
                sm_err_where(err, "%s: page %" PRIu64, t->dir, z);
            }
        }
        if (t->names != NULL) {
            sm_tfile_close(&f);
        }
        sm_free(path);
    }
    sm_tfile_close(&f);
    sm_src_direct_end(&dio);
    return s;
}

static json_t *tiff_describe(void *user)
{
    const struct tiff_stack *t = user;
    struct sm_source_info info = {.ndim = 3, .dtype = t->pg.dtype, .format = "tiff"};
    info.shape[0] = t->n;
    info.shape[1] = t->pg.height;
    info.shape[2] = t->pg.width;
    return sm_src_describe_file(t->dir, &info);
}

static void tiff_close(void *user)
{
    stack_close(user);
}

static const struct sm_source_ops tiff_ops = {
    .read_box = tiff_read_box,
    .describe = tiff_describe,
    .close = tiff_close,
};

sm_status sm_src_open_tiff(const struct sm_source_params *p, struct sm_source **out,
                           struct sm_err *err)
{
    *out = NULL;
    struct tiff_stack *t;
    SM_TRY(stack_open(p->path, p->max_alloc, &t, err));
    t->direct_min = sm_src_direct_min(p->direct, t->file_bytes);
    struct sm_source_info info = {.ndim = 3, .dtype = t->pg.dtype, .format = "tiff"};
    /* the read block: a strip [1, rows_per_strip, width] or a tile [1, th, tw] of one page (over
     * pages that differ, the smallest box holding whole blocks of each); uncompressed blocks are
     * read in part (pread), compressed ones decode whole */
    info.slab[0] = 1;
    info.shape[0] = t->n;
    info.shape[1] = t->pg.height;
    info.shape[2] = t->pg.width;
    info.slab[1] = t->blk_h;
    info.slab[2] = t->blk_w;
    info.access = t->direct ? SM_SOURCE_RANDOM : SM_SOURCE_BLOCKS;
    if (t->geom.refused[0] != '\0' && !p->spacing_given) { /* input.spacing would replace it */
        SM_ERR_AT(err, SM_E_DATA, p->path, "%s (give input.spacing instead)", t->geom.refused);
        stack_close(t);
        return err->status;
    }
    if (t->geom.set) {
        info.spacing_set = true;
        memcpy(info.spacing, t->geom.spacing, sizeof(t->geom.spacing));
        info.unit = t->geom.unit;
        snprintf(info.geometry_from, sizeof(info.geometry_from), "%s", t->geom.from);
    }
    const uint64_t file_bytes = t->file_bytes;
    const sm_status st = sm_source_new(&tiff_ops, t, &info, out, err);
    if (st != SM_OK) {
        stack_close(t);
        return st;
    }
    sm_source_set_input_bytes(*out, file_bytes);
    return SM_OK;
}
