/* C-order values of one file (raw, .nii: read by pread) or of this rank's inflated part of one
 * (.nii.gz, from memory), read row by row into a box: byte-swapped when stored big-endian, and
 * NIfTI's scl_slope/scl_inter applied per row in double (SPEC §2: applied or refused, never
 * ignored). NIfTI stores x fastest, so [z, y, x] in C order is the file order. */
#include "shardmill/sm_config.h"

#include "source_int.h"

#include <inttypes.h>
#include <string.h>

#include "shardmill/alloc.h"

/* One stored value (native byte order by now) as a double. */
static double value_at(const uint8_t *p, enum sm_dtype dt)
{
    double v = 0.0;
    if (dt != SM_DT_BOOL) { /* not a stored type of a scaled source */
        SM_DTYPE_DISPATCH(dt, T, T x; memcpy(&x, p, sizeof(x)); v = (double)x);
    }
    return v;
}

/* v * slope + inter over one row, in double, stored as f->dtype (float32 or float64). */
static void scale_row(const struct sm_flat *f, const uint8_t *src, size_t n, uint8_t *dst)
{
    const size_t in = sm_dtype_size(f->stored);
    for (size_t i = 0; i < n; i++) {
        const double x = value_at(src + i * in, f->stored) * f->slope + f->inter;
        if (f->dtype == SM_DT_FLOAT64) {
            memcpy(dst + i * 8, &x, 8);
        } else {
            const float v = (float)x;
            memcpy(dst + i * 4, &v, 4);
        }
    }
}

/* One stored row of `len` bytes at file byte pos into raw. */
static sm_status read_row(const struct sm_flat *f, uint64_t pos, uint8_t *raw, size_t len,
                          uint64_t *read, struct sm_err *err)
{
    if (f->fd >= 0) {
        SM_TRY(sm_src_pread(f->fd, pos, raw, len, f->path, err));
        *read += len;
        return SM_OK;
    }
    if (pos < f->mem_base || pos - f->mem_base > f->mem_len ||
        len > f->mem_len - (pos - f->mem_base)) { /* the plan covers every box read */
        SM_FAIL(err, SM_E_INTERNAL, "row at byte %" PRIu64 " is outside the inflated slabs", pos);
    }
    memcpy(raw, f->mem + (pos - f->mem_base), len);
    return SM_OK;
}

sm_status sm_flat_read_box(const struct sm_flat *f, const uint64_t *off, const uint64_t *shape,
                           void *out, uint64_t *read, struct sm_err *err)
{
    const size_t elem = sm_dtype_size(f->stored);
    const size_t out_elem = sm_dtype_size(f->dtype);
    const unsigned nd = f->ndim;
    uint64_t stride[SM_MAX_DIMS];
    for (unsigned d = nd; d-- > 0;) {
        stride[d] = d + 1 < nd ? stride[d + 1] * f->shape[d + 1] : elem;
    }
    for (unsigned d = 0; d < nd; d++) {
        if (shape[d] == 0) {
            return SM_OK;
        }
    }
    const size_t n = (size_t)shape[nd - 1];
    const size_t row = n * elem;
    uint8_t *tmp = NULL;
    if (f->scaled) { /* the stored row, before scaling */
        tmp = sm_malloc(row);
        if (tmp == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate a row of %zu bytes", row);
        }
    }
    uint64_t idx[SM_MAX_DIMS] = {0};
    uint8_t *dst = out;
    sm_status st = SM_OK;
    for (;;) {
        uint64_t pos = f->data_offset;
        for (unsigned d = 0; d < nd; d++) {
            pos += (off[d] + idx[d]) * stride[d];
        }
        uint8_t *raw = tmp != NULL ? tmp : dst;
        st = read_row(f, pos, raw, row, read, err);
        if (st != SM_OK) {
            break;
        }
        if (f->swap) {
            sm_src_swap_values(raw, n, elem);
        }
        if (tmp != NULL) {
            scale_row(f, tmp, n, dst);
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
