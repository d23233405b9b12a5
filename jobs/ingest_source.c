/* Raw and NIfTI-1 volume sources for `ingest` (SPEC §2, §4); TIFF stacks are in ingest_tiff.c. The
 * NIfTI-1 header is parsed by a pure function (ingest_nifti.c: no Debian C library reads it without
 * pulling a toolkit); here the volume it declares is checked against the file before anything is
 * read or allocated, and scl_slope/scl_inter are applied row by row (float32 values; SPEC §2:
 * applied or refused, never ignored). .nii.gz files are inflated into memory through the engine's
 * gzip codec (libdeflate), sized by the gzip trailer, which is checked against limits.memory_bytes
 * first. */
#include <shardmill/sm_config.h>

#include "ingest_source.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <shardmill/alloc.h>
#include <shardmill/buf.h>
#include <shardmill/codec.h>

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

/* Inflates a whole .gz file through the engine's gzip codec (a 1-D uint8 "chunk"). */
static sm_status gunzip_file(const char *path, uint64_t limit, uint8_t **out, uint64_t *out_len,
                             struct sm_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return io_error(err, path, "open");
    }
    struct stat st;
    struct sm_buf gz = SM_BUF_INIT, raw = SM_BUF_INIT;
    sm_status s = SM_OK;
    if (fstat(fd, &st) != 0) {
        s = io_error(err, path, "stat");
    } else if (st.st_size < 18) {
        s = sm_err_set(err, SM_E_DATA, __FILE__, __LINE__, "not a gzip file (%lld bytes)",
                       (long long)st.st_size);
    } else if (limit != 0 && (uint64_t)st.st_size > limit) {
        s = sm_err_set(err, SM_E_LIMIT, __FILE__, __LINE__,
                       "compressed file of %lld bytes exceeds limits.memory_bytes",
                       (long long)st.st_size);
    }
    if (s == SM_OK) {
        s = sm_buf_reserve(&gz, (size_t)st.st_size, err);
    }
    if (s == SM_OK) {
        s = read_exact(fd, 0, gz.ptr, (size_t)st.st_size, path, err);
        gz.len = (size_t)st.st_size;
    }
    close(fd);
    uint32_t isize = 0;
    if (s == SM_OK) {
        memcpy(&isize, gz.ptr + gz.len - 4, 4); /* RFC 1952: size mod 2^32, little-endian */
        if (limit != 0 && isize > limit) {
            s = sm_err_set(err, SM_E_LIMIT, __FILE__, __LINE__,
                           "inflated size %u exceeds limits.memory_bytes", isize);
        }
    }
    struct sm_codec_chain *chain = NULL;
    struct sm_scratch *scratch = NULL;
    if (s == SM_OK) {
        struct sm_repr r = {0};
        r.dtype = SM_DT_UINT8;
        r.ndim = 1;
        r.shape[0] = isize;
        r.len = isize;
        json_t *codecs = json_pack("[{s:s},{s:s}]", "name", "bytes", "name", "gzip");
        s = sm_codec_chain_new(codecs, &r, &chain, err);
        json_decref(codecs);
    }
    if (s == SM_OK) {
        s = sm_scratch_new(&scratch, err);
    }
    if (s == SM_OK) {
        s = sm_codec_chain_decode(chain, sm_buf_bytes(&gz), &raw, scratch, err);
    }
    sm_scratch_free(scratch);
    sm_codec_chain_free(chain);
    sm_buf_free(&gz);
    if (s != SM_OK) {
        sm_buf_free(&raw);
        sm_err_where(err, "%s", path);
        return s;
    }
    *out = raw.ptr;
    *out_len = raw.len;
    return SM_OK;
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
        sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                   "the volume needs %" PRIu64 " bytes after byte %" PRIu64
                   ", the file has %" PRIu64,
                   n->data_bytes, n->vox_offset, file_len);
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
    snprintf(v->format, sizeof(v->format), "%s", nifti ? "nifti" : "raw");
    if (nifti && ends_with(path, ".gz")) {
        SM_TRY(gunzip_file(path, c->limits.memory_bytes, &v->mem, &v->mem_len, err));
        sm_status s = nifti_header(v, v->mem, (size_t)v->mem_len, v->mem_len, path, err);
        if (s != SM_OK) {
            sm_volume_close(v);
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
    if (v->fd >= 0) {
        close(v->fd);
    }
    sm_free(v->mem);
    v->fd = -1;
    v->mem = NULL;
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
        if (v->mem != NULL) {
            if (pos > v->mem_len || row > v->mem_len - pos) { /* the header check rules it out */
                st = sm_err_set(err, SM_E_INTERNAL, __FILE__, __LINE__,
                                "row at byte %" PRIu64 " is outside the inflated file", pos);
                break;
            }
            memcpy(raw, v->mem + pos, row);
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
