/* SPEC §5 checksums: sum = Σ v (signed 64-bit, wrapping) and weighted = Σ v * (1 + i) mod 2^64 with
 * i the linear C-order index in the whole array. Integers are sign- or zero-extended to 64 bits;
 * floats contribute their IEEE bit pattern as an unsigned integer. Unsigned arithmetic gives the
 * wrapping the spec asks for without signed-overflow UB. */
#include "shardmill/stats.h"

#include <string.h>

#define SM_CHECKSUM_MAX_DIMS 32 /* SM_MAX_DIMS of codec.h; stats/ does not include codec/ */

#define SUM_LOOP(T, TO_U64)                                                                        \
    do {                                                                                           \
        const T *p = values;                                                                       \
        uint64_t w = first_index + 1;                                                              \
        for (size_t k = 0; k < n; k++, w++) {                                                      \
            uint64_t v = TO_U64(p[k]);                                                             \
            s += v;                                                                                \
            ws += v * w;                                                                           \
        }                                                                                          \
    } while (0)

#define SIGNED(x) ((uint64_t)(int64_t)(x))
#define UNSIGNED(x) ((uint64_t)(x))

static uint64_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static uint64_t f64_bits(double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    return u;
}

void sm_checksums_add_run(struct sm_checksums *c, enum sm_dtype dt, const void *values, size_t n,
                          uint64_t first_index)
{
    uint64_t s = 0, ws = 0;
    switch (dt) {
    case SM_DT_BOOL:
    case SM_DT_UINT8:
        SUM_LOOP(uint8_t, UNSIGNED);
        break;
    case SM_DT_INT8:
        SUM_LOOP(int8_t, SIGNED);
        break;
    case SM_DT_UINT16:
        SUM_LOOP(uint16_t, UNSIGNED);
        break;
    case SM_DT_INT16:
        SUM_LOOP(int16_t, SIGNED);
        break;
    case SM_DT_UINT32:
        SUM_LOOP(uint32_t, UNSIGNED);
        break;
    case SM_DT_INT32:
        SUM_LOOP(int32_t, SIGNED);
        break;
    case SM_DT_UINT64:
        SUM_LOOP(uint64_t, UNSIGNED);
        break;
    case SM_DT_INT64:
        SUM_LOOP(int64_t, SIGNED);
        break;
    case SM_DT_FLOAT32:
        SUM_LOOP(float, f32_bits);
        break;
    case SM_DT_FLOAT64:
        SUM_LOOP(double, f64_bits);
        break;
    case SM_DT_COUNT:
        break;
    }
    c->sum += s;
    c->weighted += ws;
}

void sm_checksums_add_box(struct sm_checksums *c, enum sm_dtype dt, const void *values,
                          unsigned ndim, const uint64_t *stride, const uint64_t *off,
                          const uint64_t *shape)
{
    if (ndim == 0) {
        sm_checksums_add_run(c, dt, values, 1, 0);
        return;
    }
    const size_t elem = sm_dtype_size(dt), row = (size_t)shape[ndim - 1];
    for (unsigned d = 0; d < ndim; d++) {
        if (shape[d] == 0) {
            return;
        }
    }
    uint64_t idx[SM_CHECKSUM_MAX_DIMS] = {0}, base = 0;
    for (unsigned d = 0; d < ndim; d++) {
        base += off[d] * stride[d];
    }
    const uint8_t *p = values;
    for (;;) { /* odometer over the outer axes; each step is one row */
        sm_checksums_add_run(c, dt, p, row, base);
        p += row * elem;
        unsigned d = ndim - 1;
        while (d-- > 0) {
            base += stride[d];
            if (++idx[d] < shape[d]) {
                break;
            }
            base -= stride[d] * shape[d];
            idx[d] = 0;
        }
        if (d == (unsigned)-1) {
            return;
        }
    }
}
