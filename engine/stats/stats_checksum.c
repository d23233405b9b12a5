/* SPEC §5 checksums: sum = Σ v (signed 64-bit, wrapping) and weighted = Σ v * (1 + i) mod 2^64 with
 * i the linear C-order index in the whole array. Integers are sign- or zero-extended to 64 bits;
 * floats contribute their IEEE bit pattern as an unsigned integer. Unsigned arithmetic gives the
 * wrapping the spec asks for without signed-overflow UB. */
#include "shardmill/stats.h"

#include <string.h>

#define SM_CHECKSUM_MAX_DIMS 32 /* SM_MAX_DIMS of codec.h; stats/ does not include codec/ */

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

static uint64_t sign_extended(int64_t v)
{
    return (uint64_t)v;
}

static uint64_t zero_extended(uint64_t v)
{
    return v;
}

/* A value's 64-bit contribution: signed integers sign-extended, unsigned ones zero-extended,
 * floats their bit pattern. */
#define TO_U64(x)                                                                                  \
    _Generic((x),                                                                                  \
        int8_t: sign_extended,                                                                     \
        int16_t: sign_extended,                                                                    \
        int32_t: sign_extended,                                                                    \
        int64_t: sign_extended,                                                                    \
        float: f32_bits,                                                                           \
        double: f64_bits,                                                                          \
        default: zero_extended)(x)

#define SUM_LOOP(T)                                                                                \
    do {                                                                                           \
        const T *p = values;                                                                       \
        uint64_t w = first_index + 1;                                                              \
        for (size_t k = 0; k < n; k++, w++) {                                                      \
            uint64_t v = TO_U64(p[k]);                                                             \
            s += v;                                                                                \
            ws += v * w;                                                                           \
        }                                                                                          \
    } while (0)

/* 8- and 16-bit values (the same sums): weighted = sum of v * (w0 + k) = w0 * sum(v) + sum(k * v)
 * over blocks of 2^15 values, where k < 2^15 and |v| < 2^16, so the block's sum and every k * v
 * are exact in 32 bits (ACC: int32_t signed, uint32_t unsigned) and the loop vectorizes as 16 x 16
 * -> 32-bit multiplies; the block's terms are then added mod 2^64 like SUM_LOOP's. */
#define SMALL_BLOCK 32768u
#define SMALL_LOOP(T, ACC, WIDE)                                                                   \
    do {                                                                                           \
        const T *p = values;                                                                       \
        for (size_t b = 0; b < n; b += SMALL_BLOCK) {                                              \
            const size_t m = n - b < SMALL_BLOCK ? n - b : SMALL_BLOCK;                            \
            ACC bs = 0;                                                                            \
            WIDE bk = 0;                                                                           \
            uint16_t k = 0;                                                                        \
            for (size_t i = 0; i < m; i++, k++) {                                                  \
                bs += p[b + i];                                                                    \
                bk += (ACC)k * (ACC)p[b + i];                                                      \
            }                                                                                      \
            const uint64_t v = (uint64_t)(WIDE)bs; /* sign- or zero-extended */                    \
            s += v;                                                                                \
            ws += (first_index + 1 + b) * v + (uint64_t)bk;                                        \
        }                                                                                          \
    } while (0)

void sm_checksums_add_run(struct sm_checksums *c, enum sm_dtype dt, const void *values, size_t n,
                          uint64_t first_index)
{
    uint64_t s = 0, ws = 0;
    switch (dt) {
    case SM_DT_BOOL:
    case SM_DT_UINT8:
        SMALL_LOOP(uint8_t, uint32_t, uint64_t);
        break;
    case SM_DT_INT8:
        SMALL_LOOP(int8_t, int32_t, int64_t);
        break;
    case SM_DT_UINT16:
        SMALL_LOOP(uint16_t, uint32_t, uint64_t);
        break;
    case SM_DT_INT16:
        SMALL_LOOP(int16_t, int32_t, int64_t);
        break;
    default:
        SM_DTYPE_DISPATCH(dt, T, SUM_LOOP(T));
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
