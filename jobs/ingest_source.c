/* Raw and NIfTI-1 volume sources for `ingest` (SPEC §2, §4); TIFF stacks are in ingest_tiff.c,
 * HDF5 datasets in the engine's HDF5 module (shardmill/h5source.h, loaded on demand). The
 * NIfTI-1 header is parsed by a pure function (ingest_nifti.c: no Debian C library reads it without
 * pulling a toolkit); here the volume it declares is checked against the file before anything is
 * read or allocated, and scl_slope/scl_inter are applied row by row (float32 values; SPEC §2:
 * applied or refused, never ignored). A .nii.gz is never inflated whole: open reads its header
 * through a zlib stream, and the plan step (called by the engine with the box of this rank's
 * shards) inflates the stream once, keeping only the axis-0 slabs of that box, checked against
 * limits.memory_bytes first. */
#include <shardmill/sm_config.h>

#include "ingest_source.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <shardmill/alloc.h>
#include <shardmill/buf.h>

static sm_status io_error(struct sm_err *err, const char *path, const char *what)
{
    int e = errno;
    sm_err_set(err, SM_E_IO, __FILE__, __LINE__, "%s: %s", what, strerror(e));
    sm_err_cause(err, "errno", e);
    sm_err_where(err, "%s", path);
    return err->status;
}

static sm_status read_exact(int fd, uint64_t off, void *dst, size_t n, const char *path,
                            struct sm_err *err)
{
    uint8_t *p = dst;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            return io_error(err, path, "read");
        }
        if (r == 0) {
            sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                       "file ends at byte %" PRIu64 ", before the volume does", off);
            sm_err_where(err, "%s", path);
            return err->status;
        }
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return SM_OK;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* ---- .nii.gz: one zlib stream, read forward (gzip members one after another) ---- */

/* Deflate's densest coding turns 258 bytes into about 2 bits: no gzip file inflates to more than
 * 1032 times its size (zlib's technical details). A header declaring more is refused as data. */
#define GZ_MAX_RATIO 1032u
#define GZ_IN_BYTES (256u << 10)

struct gz_reader {
    int fd;
    const char *path;
    z_stream zs;
    bool init, end; /* end: the last member's trailer was read and checked */
    uint64_t pos;   /* inflated bytes delivered so far */
    uint8_t *in;
};

static sm_status gz_fail(struct gz_reader *g, struct sm_err *err, const char *what)
{
    sm_err_set(err, SM_E_DATA, __FILE__, __LINE__, "%s (inflated byte %" PRIu64 ")", what, g->pos);
    sm_err_where(err, "%s", g->path);
    return err->status;
}

static void gz_close(struct gz_reader *g)
{
    if (g->init) {
        inflateEnd(&g->zs);
    }
    if (g->fd >= 0) {
        close(g->fd);
    }
    sm_free(g->in);
    memset(g, 0, sizeof(*g));
    g->fd = -1;
}

static sm_status gz_open(struct gz_reader *g, const char *path, struct sm_err *err)
{
    memset(g, 0, sizeof(*g));
    g->path = path;
    g->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (g->fd < 0) {
        return io_error(err, path, "open");
    }
    g->in = sm_malloc(GZ_IN_BYTES);
    if (g->in == NULL) {
        gz_close(g);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a gzip input buffer");
    }
    if (inflateInit2(&g->zs, 16 + MAX_WBITS) != Z_OK) { /* gzip wrapper only */
        gz_close(g);
        SM_FAIL(err, SM_E_NOMEM, "cannot start a zlib stream");
    }
    g->init = true;
    return SM_OK;
}

/* Inflates up to n bytes into dst (NULL: discard them); *got < n only at the end of the stream,
 * which is then checked (CRC-32 and length of every member). */
static sm_status gz_read(struct gz_reader *g, uint8_t *dst, uint64_t n, uint64_t *got,
                         struct sm_err *err)
{
    uint8_t sink[16384];
    *got = 0;
    while (*got < n && !g->end) {
        if (g->zs.avail_in == 0) {
            ssize_t r = read(g->fd, g->in, GZ_IN_BYTES);
            if (r < 0 && errno == EINTR) {
                continue;
            }
            if (r < 0) {
                return io_error(err, g->path, "read");
            }
            if (r == 0) {
                return gz_fail(g, err, "the gzip stream is truncated");
            }
            g->zs.next_in = g->in;
            g->zs.avail_in = (uInt)r;
        }
        const uint64_t want = n - *got;
        uint8_t *to = dst != NULL ? dst + *got : sink;
        const uInt room = (uInt)(dst != NULL ? (want < (1u << 30) ? want : (1u << 30))
                                             : (want < sizeof(sink) ? want : sizeof(sink)));
        g->zs.next_out = to;
        g->zs.avail_out = room;
        const int rc = inflate(&g->zs, Z_NO_FLUSH);
        const uInt made = room - g->zs.avail_out;
        *got += made;
        g->pos += made;
        if (rc == Z_STREAM_END) { /* another member may follow (gzip allows concatenation) */
            if (g->zs.avail_in == 0) {
                ssize_t r;
                do {
                    r = read(g->fd, g->in, GZ_IN_BYTES);
                } while (r < 0 && errno == EINTR);
                if (r < 0) {
                    return io_error(err, g->path, "read");
                }
                g->zs.next_in = g->in;
                g->zs.avail_in = (uInt)r;
            }
            if (g->zs.avail_in == 0) {
                g->end = true;
            } else if (inflateReset(&g->zs) != Z_OK) {
                return gz_fail(g, err, "cannot restart the zlib stream");
            }
        } else if (rc == Z_DATA_ERROR) {
            return gz_fail(g, err,
                           g->pos == 0 ? "not a gzip file (bad header)" : "corrupt gzip data");
        } else if (rc == Z_MEM_ERROR) {
            SM_FAIL(err, SM_E_NOMEM, "zlib is out of memory");
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            return gz_fail(g, err, "zlib cannot inflate the stream");
        }
    }
    return SM_OK;
}

static sm_status gz_skip(struct gz_reader *g, uint64_t n, struct sm_err *err)
{
    uint64_t got = 0;
    SM_TRY(gz_read(g, NULL, n, &got, err));
    return got == n ? SM_OK : gz_fail(g, err, "the file ends before the volume does");
}

/* The parsed header into the volume: shape, offsets, scaling; the data must lie in the file. */
static sm_status nifti_header(struct sm_volume *v, const uint8_t *h, size_t hlen, uint64_t file_len,
                              const char *path, struct sm_err *err)
{
    struct sm_nifti_hdr *n = &v->nii;
    if (sm_nifti_parse_header(h, hlen, n, err) != SM_OK) {
        char field[sizeof(err->where)];
        snprintf(field, sizeof(field), "%s", err->where);
        err->where[0] = '\0';
        sm_err_where(err, "%s: %s", path, field);
        return err->status;
    }
    v->nifti = true;
    v->stored = n->dtype;
    v->ndim = n->ndim;
    memcpy(v->shape, n->shape, sizeof(n->shape));
    v->data_offset = n->vox_offset;
    if (n->vox_offset > file_len || n->data_bytes > file_len - n->vox_offset) {
        if (ends_with(path, ".gz")) {
            sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                       "the volume needs %" PRIu64 " bytes after byte %" PRIu64
                       ", a gzip file of this size inflates to at most %" PRIu64,
                       n->data_bytes, n->vox_offset, file_len);
        } else {
            sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                       "the volume needs %" PRIu64 " bytes after byte %" PRIu64
                       ", the file has %" PRIu64,
                       n->data_bytes, n->vox_offset, file_len);
        }
        sm_err_where(err, "%s", path);
        return err->status;
    }
    v->swap = n->swap && sm_dtype_size(n->dtype) > 1;
    /* SPEC §2: scl_slope/scl_inter are applied, never ignored: the values become v * slope +
     * inter, computed in double and stored as float32 (float64 files stay float64) */
    v->scaled = n->scaled;
    v->slope = n->scl_slope;
    v->inter = isnan(n->scl_inter) ? 0.0 : n->scl_inter;
    v->dtype = !v->scaled ? n->dtype : n->dtype == SM_DT_FLOAT64 ? SM_DT_FLOAT64 : SM_DT_FLOAT32;
    return SM_OK;
}

sm_status sm_volume_open(const struct sm_job_config *c, struct sm_volume *v, struct sm_err *err)
{
    memset(v, 0, sizeof(*v));
    v->fd = -1;
    const char *path = c->input.store;
    const bool nifti = c->input.format != NULL && strcmp(c->input.format, "nifti") == 0;
    if (c->input.format != NULL && strcmp(c->input.format, "tiff") == 0) {
        snprintf(v->format, sizeof(v->format), "tiff");
        /* a strip or tile larger than the rank's memory budget is refused by libtiff */
        SM_TRY(sm_tiff_open(path, c->limits.memory_bytes, &v->tiff, err));
        v->ndim = 3;
        sm_tiff_shape(v->tiff, v->shape, &v->dtype);
        v->stored = v->dtype;
        return SM_OK;
    }
    if (c->input.format != NULL && strcmp(c->input.format, "hdf5") == 0) {
        snprintf(v->format, sizeof(v->format), "hdf5");
        v->path = path;
        const unsigned flags = c->input.hdf5_allow_external ? SM_H5SOURCE_ALLOW_EXTERNAL : 0;
        SM_TRY(sm_h5source_open(path, c->input.hdf5_dataset, flags, &v->h5info, &v->h5, err));
        v->ndim = v->h5info.ndim;
        memcpy(v->shape, v->h5info.shape, v->ndim * sizeof(uint64_t));
        v->dtype = v->stored = v->h5info.dtype;
        return SM_OK;
    }
    snprintf(v->format, sizeof(v->format), "%s", nifti ? "nifti" : "raw");
    v->path = path;
    if (nifti && ends_with(path, ".gz")) {
        v->gz = true;
        struct gz_reader g;
        SM_TRY(gz_open(&g, path, err));
        uint8_t h[SM_NIFTI_HEADER_BYTES];
        uint64_t got = 0;
        struct stat sb = {0};
        sm_status s = fstat(g.fd, &sb) != 0 ? io_error(err, path, "stat") : SM_OK;
        if (s == SM_OK) {
            s = gz_read(&g, h, sizeof(h), &got, err);
        }
        gz_close(&g);
        /* the most the file can inflate to: a header declaring more is refused before any
         * payload is read (the stream itself is checked as it is read) */
        const uint64_t most = (uint64_t)sb.st_size * GZ_MAX_RATIO;
        if (s == SM_OK) {
            s = nifti_header(v, h, (size_t)got, most, path, err);
        }
        return s;
    }
    v->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (v->fd < 0) {
        return io_error(err, path, "open");
    }
    struct stat st;
    if (fstat(v->fd, &st) != 0) {
        sm_status s = io_error(err, path, "stat");
        sm_volume_close(v);
        return s;
    }
    const uint64_t file_len = (uint64_t)st.st_size;
    sm_status s = SM_OK;
    if (nifti) {
        uint8_t h[SM_NIFTI_HEADER_BYTES];
        if (file_len < sizeof(h)) {
            s = sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                           "the file has %" PRIu64 " bytes, a NIfTI-1 header needs 348", file_len);
            sm_err_where(err, "%s", path);
        } else {
            s = read_exact(v->fd, 0, h, sizeof(h), path, err);
        }
        if (s == SM_OK) {
            s = nifti_header(v, h, sizeof(h), file_len, path, err);
        }
    } else {
        if (c->input.raw_dtype == NULL || !sm_dtype_from_name(c->input.raw_dtype, &v->dtype)) {
            s = sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "unknown data type '%s'",
                           c->input.raw_dtype != NULL ? c->input.raw_dtype : "");
            sm_err_where(err, "input.raw.dtype");
        } else if (!c->input.raw_shape.set || c->input.raw_shape.n == 0) {
            s = sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "required for raw input");
            sm_err_where(err, "input.raw.shape");
        } else {
            v->stored = v->dtype;
            v->ndim = c->input.raw_shape.n;
            uint64_t n = sm_dtype_size(v->dtype);
            bool wraps = false;
            for (unsigned d = 0; d < v->ndim; d++) {
                v->shape[d] = c->input.raw_shape.v[d];
                wraps |= __builtin_mul_overflow(n, v->shape[d], &n);
            }
            v->data_offset = c->input.raw_header_bytes;
            v->swap = c->input.raw_byte_order != NULL &&
                      strcmp(c->input.raw_byte_order, "big") == 0 && sm_dtype_size(v->dtype) > 1;
            if (wraps) {
                s = sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                               "the volume's size overflows 64 bits");
                sm_err_where(err, "input.raw.shape");
            } else if (v->data_offset > file_len || n != file_len - v->data_offset) {
                s = sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                               "file is %" PRIu64 " bytes; %" PRIu64 " header bytes + %" PRIu64
                               " bytes of volume expected",
                               file_len, v->data_offset, n);
                sm_err_where(err, "%s", path);
            }
        }
    }
    if (s != SM_OK) {
        sm_volume_close(v);
    }
    return s;
}

void sm_volume_close(struct sm_volume *v)
{
    sm_tiff_close(v->tiff);
    v->tiff = NULL;
    sm_h5source_close(v->h5);
    v->h5 = NULL;
    if (v->fd >= 0) {
        close(v->fd);
    }
    sm_free(v->mem);
    v->fd = -1;
    v->mem = NULL;
    v->mem_len = 0;
}

sm_status sm_volume_plan(struct sm_volume *v, const uint64_t *off, const uint64_t *shape,
                         uint64_t memory_bytes, struct sm_err *err)
{
    if (!v->gz || v->ndim == 0 || shape[0] == 0) {
        return SM_OK; /* pread sources read any box; a rank without shards reads nothing */
    }
    uint64_t slab = sm_dtype_size(v->stored); /* bytes of one index of axis 0 */
    for (unsigned d = 1; d < v->ndim; d++) {
        slab *= v->shape[d];
    }
    const uint64_t first = v->data_offset + off[0] * slab, len = shape[0] * slab;
    if (len > memory_bytes) {
        sm_err_set(err, SM_E_LIMIT, __FILE__, __LINE__,
                   "the %" PRIu64 " slabs of axis 0 this process reads inflate to %" PRIu64
                   " bytes, more than limits.memory_bytes (%" PRIu64
                   "); raise it, run more MPI ranks, or gunzip the file first",
                   shape[0], len, memory_bytes);
        sm_err_where(err, "%s", v->path);
        return err->status;
    }
    sm_free(v->mem);
    v->mem_len = 0;
    v->mem = sm_malloc(len > 0 ? (size_t)len : 1);
    if (v->mem == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate %" PRIu64 " bytes for the inflated volume", len);
    }
    struct gz_reader g;
    SM_TRY(gz_open(&g, v->path, err));
    uint64_t got = 0;
    sm_status st = gz_skip(&g, first, err);
    if (st == SM_OK) {
        st = gz_read(&g, v->mem, len, &got, err);
    }
    if (st == SM_OK && got != len) {
        st = gz_fail(&g, err, "the file ends before the volume does");
    }
    if (st == SM_OK && off[0] + shape[0] == v->shape[0]) {
        /* the rank that reads the volume's end checks the rest of the stream: every member's
         * CRC-32 and length (bytes after the volume are allowed, as in a .nii) */
        while (st == SM_OK && !g.end) {
            st = gz_read(&g, NULL, UINT64_MAX, &got, err);
        }
    }
    gz_close(&g);
    if (st != SM_OK) {
        sm_free(v->mem);
        v->mem = NULL;
        return st;
    }
    v->mem_base = first;
    v->mem_len = len;
    return SM_OK;
}

static void swap_values(uint8_t *p, size_t n, size_t elem)
{
    for (size_t i = 0; i < n; i++, p += elem) {
        for (size_t a = 0, b = elem - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
    }
}

/* One stored value (native byte order by now) as a double. */
static double value_at(const uint8_t *p, enum sm_dtype dt)
{
    switch (dt) {
#define AS(type)                                                                                   \
    do {                                                                                           \
        type x;                                                                                    \
        memcpy(&x, p, sizeof(x));                                                                  \
        return (double)x;                                                                          \
    } while (0)
    case SM_DT_INT8:
        AS(int8_t);
    case SM_DT_INT16:
        AS(int16_t);
    case SM_DT_INT32:
        AS(int32_t);
    case SM_DT_INT64:
        AS(int64_t);
    case SM_DT_UINT8:
        AS(uint8_t);
    case SM_DT_UINT16:
        AS(uint16_t);
    case SM_DT_UINT32:
        AS(uint32_t);
    case SM_DT_UINT64:
        AS(uint64_t);
    case SM_DT_FLOAT32:
        AS(float);
    case SM_DT_FLOAT64:
        AS(double);
#undef AS
    default:
        return 0.0;
    }
}

/* v * slope + inter over one row, in double, stored as v->dtype (float32 or float64). */
static void scale_row(const struct sm_volume *v, const uint8_t *src, size_t n, uint8_t *dst)
{
    const size_t in = sm_dtype_size(v->stored);
    for (size_t i = 0; i < n; i++) {
        const double x = value_at(src + i * in, v->stored) * v->slope + v->inter;
        if (v->dtype == SM_DT_FLOAT64) {
            memcpy(dst + i * 8, &x, 8);
        } else {
            const float f = (float)x;
            memcpy(dst + i * 4, &f, 4);
        }
    }
}

sm_status sm_volume_read_box(const struct sm_volume *v, const uint64_t *off, const uint64_t *shape,
                             void *out, struct sm_err *err)
{
    if (v->tiff != NULL) {
        return sm_tiff_read_box(v->tiff, off, shape, out, err);
    }
    if (v->h5 != NULL) {
        return sm_h5source_read_box(v->h5, off, shape, out, err);
    }
    const size_t elem = sm_dtype_size(v->stored);
    const size_t out_elem = sm_dtype_size(v->dtype);
    const unsigned nd = v->ndim;
    uint64_t stride[SM_CFG_MAX_DIMS];
    for (unsigned d = nd; d-- > 0;) {
        stride[d] = d + 1 < nd ? stride[d + 1] * v->shape[d + 1] : elem;
    }
    const size_t n = (size_t)shape[nd - 1];
    const size_t row = n * elem;
    uint8_t *tmp = NULL;
    if (v->scaled) { /* the stored row, before scaling */
        tmp = sm_malloc(row > 0 ? row : 1);
        if (tmp == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate a row of %zu bytes", row);
        }
    }
    uint64_t idx[SM_CFG_MAX_DIMS] = {0};
    uint8_t *dst = out;
    sm_status st = SM_OK;
    for (;;) {
        uint64_t pos = v->data_offset;
        for (unsigned d = 0; d < nd; d++) {
            pos += (off[d] + idx[d]) * stride[d];
        }
        uint8_t *raw = tmp != NULL ? tmp : dst;
        if (v->gz) {
            if (pos < v->mem_base || pos - v->mem_base > v->mem_len ||
                row > v->mem_len - (pos - v->mem_base)) { /* the plan covers every box read */
                st = sm_err_set(err, SM_E_INTERNAL, __FILE__, __LINE__,
                                "row at byte %" PRIu64 " is outside the inflated slabs", pos);
                break;
            }
            memcpy(raw, v->mem + (pos - v->mem_base), row);
        } else {
            st = read_exact(v->fd, pos, raw, row, "input", err);
            if (st != SM_OK) {
                break;
            }
        }
        if (v->swap) {
            swap_values(raw, n, elem);
        }
        if (tmp != NULL) {
            scale_row(v, tmp, n, dst);
        }
        dst += n * out_elem;
        unsigned d = nd - 1;
        while (d-- > 0) {
            if (++idx[d] < shape[d]) {
                break;
            }
            idx[d] = 0;
        }
        if (d == (unsigned)-1) {
            break;
        }
    }
    sm_free(tmp);
    return st;
}
