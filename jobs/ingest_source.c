/* Raw and NIfTI-1 volume sources for `ingest` (SPEC §4, §9). The NIfTI-1 header is parsed by hand
 * (348 bytes, https://nifti.nimh.nih.gov/nifti-1/documentation/nifti1fields): no Debian C library
 * reads it without pulling a toolkit. .nii.gz files are inflated into memory through the engine's
 * gzip codec (libdeflate), sized by the gzip trailer and bounded by limits.memory_bytes. */
#include <shardmill/sm_config.h>

#include "ingest_source.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
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

static uint16_t get16(const uint8_t *p, bool swap)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return swap ? (uint16_t)((v >> 8) | (v << 8)) : v;
}

static uint32_t get32(const uint8_t *p, bool swap)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return swap ? __builtin_bswap32(v) : v;
}

static float getf(const uint8_t *p, bool swap)
{
    uint32_t u = get32(p, swap);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* NIfTI-1 datatype codes. */
static bool nifti_dtype(int code, enum sm_dtype *dt)
{
    static const struct {
        int code;
        enum sm_dtype dt;
    } map[] = {{2, SM_DT_UINT8},    {4, SM_DT_INT16},    {8, SM_DT_INT32},    {16, SM_DT_FLOAT32},
               {64, SM_DT_FLOAT64}, {256, SM_DT_INT8},   {512, SM_DT_UINT16}, {768, SM_DT_UINT32},
               {1024, SM_DT_INT64}, {1280, SM_DT_UINT64}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (map[i].code == code) {
            *dt = map[i].dt;
            return true;
        }
    }
    return false;
}

static sm_status nifti_header(struct sm_volume *v, const uint8_t *h, uint64_t file_len,
                              const char *path, struct sm_err *err)
{
    bool swap = false;
    uint32_t hsize = get32(h, false);
    if (hsize != 348) {
        swap = true;
        hsize = get32(h, true);
    }
    if (hsize != 348 || (memcmp(h + 344, "n+1\0", 4) != 0 && memcmp(h + 344, "ni1\0", 4) != 0)) {
        sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                   "not a NIfTI-1 file (sizeof_hdr %u, magic at byte 344 not \"n+1\")", hsize);
        sm_err_where(err, "%s", path);
        return err->status;
    }
    const int ndim = (int16_t)get16(h + 40, swap);
    if (ndim < 1 || ndim > 7) {
        sm_err_set(err, SM_E_DATA, __FILE__, __LINE__, "dim[0] is %d (expected 1..7)", ndim);
        sm_err_where(err, "%s: dim", path);
        return err->status;
    }
    const int code = (int16_t)get16(h + 70, swap);
    if (!nifti_dtype(code, &v->dtype)) {
        sm_err_set(err, SM_E_DATA, __FILE__, __LINE__, "unsupported NIfTI datatype %d", code);
        sm_err_where(err, "%s: datatype", path);
        return err->status;
    }
    /* dims beyond the 3rd of size 1 are dropped; x is fastest so C order reverses the axes */
    int nd = ndim;
    while (nd > 1 && (int16_t)get16(h + 40 + 2 * nd, swap) == 1) {
        nd--;
    }
    v->ndim = (unsigned)nd;
    uint64_t n = sm_dtype_size(v->dtype);
    for (int i = 0; i < nd; i++) {
        int d = (int16_t)get16(h + 42 + 2 * i, swap);
        if (d < 1) {
            sm_err_set(err, SM_E_DATA, __FILE__, __LINE__, "dim[%d] is %d", i + 1, d);
            sm_err_where(err, "%s: dim", path);
            return err->status;
        }
        v->shape[nd - 1 - i] = (uint64_t)d;
        n *= (uint64_t)d;
    }
    for (int i = 0; i < 3; i++) {
        v->pixdim[i] = getf(h + 80 + 4 * i, swap); /* pixdim[1..3] at bytes 80, 84, 88 */
    }
    const float vox = getf(h + 108, swap);
    if (!(vox >= 348.0f) || vox > (float)file_len) {
        sm_err_set(err, SM_E_DATA, __FILE__, __LINE__, "vox_offset %g is outside the file",
                   (double)vox);
        sm_err_where(err, "%s: vox_offset", path);
        return err->status;
    }
    v->data_offset = (uint64_t)vox;
    if (v->data_offset + n > file_len) {
        sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                   "the volume needs %" PRIu64 " bytes after byte %" PRIu64
                   ", the file has %" PRIu64,
                   n, v->data_offset, file_len);
        sm_err_where(err, "%s", path);
        return err->status;
    }
    v->swap = swap && sm_dtype_size(v->dtype) > 1;
    return SM_OK;
}

sm_status sm_volume_open(const struct sm_job_config *c, struct sm_volume *v, struct sm_err *err)
{
    memset(v, 0, sizeof(*v));
    v->fd = -1;
    const char *path = c->input.store;
    const bool nifti = c->input.format != NULL && strcmp(c->input.format, "nifti") == 0;
    snprintf(v->format, sizeof(v->format), "%s", nifti ? "nifti" : "raw");
    if (nifti && ends_with(path, ".gz")) {
        SM_TRY(gunzip_file(path, c->limits.memory_bytes, &v->mem, &v->mem_len, err));
        if (v->mem_len < 352) {
            sm_err_set(err, SM_E_DATA, __FILE__, __LINE__, "too short for a NIfTI-1 header");
            sm_err_where(err, "%s", path);
            sm_volume_close(v);
            return err->status;
        }
        sm_status s = nifti_header(v, v->mem, v->mem_len, path, err);
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
        uint8_t h[348];
        s = read_exact(v->fd, 0, h, sizeof(h), path, err);
        if (s == SM_OK) {
            s = nifti_header(v, h, file_len, path, err);
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
            v->ndim = c->input.raw_shape.n;
            uint64_t n = sm_dtype_size(v->dtype);
            for (unsigned d = 0; d < v->ndim; d++) {
                v->shape[d] = c->input.raw_shape.v[d];
                n *= v->shape[d];
            }
            v->data_offset = c->input.raw_header_bytes;
            v->swap = c->input.raw_byte_order != NULL &&
                      strcmp(c->input.raw_byte_order, "big") == 0 && sm_dtype_size(v->dtype) > 1;
            if (v->data_offset + n != file_len) {
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

sm_status sm_volume_read_box(const struct sm_volume *v, const uint64_t *off, const uint64_t *shape,
                             void *out, struct sm_err *err)
{
    const size_t elem = sm_dtype_size(v->dtype);
    const unsigned nd = v->ndim;
    uint64_t stride[SM_CFG_MAX_DIMS];
    for (unsigned d = nd; d-- > 0;) {
        stride[d] = d + 1 < nd ? stride[d + 1] * v->shape[d + 1] : elem;
    }
    const size_t row = (size_t)shape[nd - 1] * elem;
    uint64_t idx[SM_CFG_MAX_DIMS] = {0};
    uint8_t *dst = out;
    for (;;) {
        uint64_t pos = v->data_offset;
        for (unsigned d = 0; d < nd; d++) {
            pos += (off[d] + idx[d]) * stride[d];
        }
        if (v->mem != NULL) {
            memcpy(dst, v->mem + pos, row);
        } else {
            SM_TRY(read_exact(v->fd, pos, dst, row, "input", err));
        }
        if (v->swap) {
            swap_values(dst, (size_t)shape[nd - 1], elem);
        }
        dst += row;
        unsigned d = nd - 1;
        while (d-- > 0) {
            if (++idx[d] < shape[d]) {
                break;
            }
            idx[d] = 0;
        }
        if (d == (unsigned)-1) {
            return SM_OK;
        }
    }
}
