/* A raw binary file as a source (input.raw.*: data type, shape, byte order, header bytes): the
 * file must hold exactly the header and the volume; read by pread (source_flat.c). */
#include "shardmill/sm_config.h"

#include "source_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardmill/alloc.h"

struct raw {
    struct sm_flat flat;
    char *path;
};

static void raw_close(void *user)
{
    struct raw *r = user;
    if (r->flat.fd >= 0) {
        close(r->flat.fd);
    }
    sm_free(r->path);
    sm_free(r);
}

static sm_status raw_read_box(void *user, int thread, const uint64_t *off, const uint64_t *shape,
                              void *out, uint64_t *read, struct sm_err *err)
{
    (void)thread;
    const struct raw *r = user;
    return sm_flat_read_box(&r->flat, off, shape, out, read, err);
}

static json_t *raw_describe(void *user)
{
    const struct raw *r = user;
    struct sm_source_info info = {.ndim = r->flat.ndim, .dtype = r->flat.dtype, .format = "raw"};
    memcpy(info.shape, r->flat.shape, sizeof(info.shape));
    return sm_src_describe_file(r->path, &info);
}

static const struct sm_source_ops raw_ops = {
    .read_box = raw_read_box,
    .describe = raw_describe,
    .close = raw_close,
};

static sm_status usage(struct sm_err *err, const char *key, const char *what)
{
    SM_FAIL_AT(err, SM_E_USAGE, key, "%s", what);
}

/* The parameters as the flat reader's; the file is opened after. */
static sm_status raw_shape(const struct sm_source_params *p, struct sm_flat *f, uint64_t *bytes,
                           struct sm_err *err)
{
    if (sm_dtype_size(p->raw_dtype) == 0) {
        return usage(err, "input.raw.dtype", "required for raw input: a data type");
    }
    if (p->raw_ndim == 0 || p->raw_ndim > SM_MAX_DIMS) {
        return usage(err, "input.raw.shape", "required for raw input: 1 to 32 axes");
    }
    f->dtype = f->stored = p->raw_dtype;
    f->ndim = p->raw_ndim;
    uint64_t n = sm_dtype_size(p->raw_dtype);
    bool wraps = false;
    for (unsigned d = 0; d < f->ndim; d++) {
        f->shape[d] = p->raw_shape[d];
        wraps |= __builtin_mul_overflow(n, f->shape[d], &n);
    }
    if (wraps) {
        return usage(err, "input.raw.shape", "the volume's size overflows 64 bits");
    }
    f->data_offset = p->raw_header_bytes;
    f->swap = p->raw_big_endian && sm_dtype_size(p->raw_dtype) > 1;
    *bytes = n;
    return SM_OK;
}

static sm_status raw_open_file(struct raw *r, uint64_t bytes, struct sm_err *err)
{
    struct sm_flat *f = &r->flat;
    SM_TRY(sm_src_open_file(r->path, false, &f->fd, err));
    struct stat st;
    if (fstat(f->fd, &st) != 0) {
        return SM_ERRNO(err, errno, r->path, "stat");
    }
    const uint64_t len = (uint64_t)st.st_size;
    if (f->data_offset > len || bytes != len - f->data_offset) {
        SM_ERR_AT(err, SM_E_DATA, r->path,
                  "file is %" PRIu64 " bytes; %" PRIu64 " header bytes + %" PRIu64
                  " bytes of volume expected",
                  len, f->data_offset, bytes);
        return err->status;
    }
    return SM_OK;
}

sm_status sm_src_open_raw(const struct sm_source_params *p, struct sm_source **out,
                          struct sm_err *err)
{
    *out = NULL;
    struct raw *r = sm_calloc(1, sizeof(*r));
    if (r == NULL || (r->path = sm_src_strdup(p->path)) == NULL) {
        sm_free(r);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a raw source");
    }
    r->flat.fd = -1;
    r->flat.path = r->path;
    uint64_t bytes = 0;
    sm_status st = raw_shape(p, &r->flat, &bytes, err);
    if (st == SM_OK) {
        st = raw_open_file(r, bytes, err);
    }
    struct sm_source_info info = {.ndim = r->flat.ndim, .dtype = r->flat.dtype, .format = "raw"};
    memcpy(info.shape, r->flat.shape, sizeof(info.shape));
    for (unsigned d = 0; d < info.ndim; d++) { /* a plane [1, y, x]: one run of the file */
        info.slab[d] = d == 0 && info.ndim > 1 ? 1 : info.shape[d];
    }
    info.access = SM_SOURCE_RANDOM; /* pread: a box reads its own rows */
    if (st == SM_OK) {
        st = sm_source_new(&raw_ops, r, &info, out, err);
    }
    if (st != SM_OK) {
        raw_close(r);
    }
    return st;
}
