/* The pyramid's block reduction (SPEC §5.9): a level's values from the level above it, for the
 * OME-Zarr levels of run/ (made from level 0 in memory or read back). Each value is made from the
 * block of the parent it covers (2 voxels on a halved axis, 1 on the others, fewer at the far
 * edges): `mean` visits the members in C order of the block, adds each one's float32 value to a
 * float64 sum from 0, divides by the count and rounds once to the type (float32 by (float),
 * float64 kept, integers by rint: half to even); `nearest` copies the block's first member.
 * Whole blocks of float32, uint8 and uint16 rows go through one row kernel per type, compiled for
 * the 2x2x2 and 1x2x2 blocks with constant sizes; edges and the other types go through the
 * element-wise path, which sums in the same order. */
#include <math.h>
#include <string.h>

#include "shardmill/stats.h"

/* The float32 value of the element at p of type dt, as a double. */
static double load_f32(const uint8_t *p, enum sm_dtype dt)
{
    SM_DTYPE_DISPATCH(dt, T, {
        T v;
        memcpy(&v, p, sizeof(v));
        return (double)(float)v;
    });
    return 0.0;
}

/* The mean m rounded once to dt into p: (float) for float32, kept for float64, rint (half to even
 * in the default mode) for integers. */
static void store_mean(uint8_t *p, enum sm_dtype dt, double m)
{
    const bool fl = sm_dtype_is_float(dt);
    SM_DTYPE_DISPATCH(dt, T, {
        const T v = (T)(fl ? m : rint(m));
        memcpy(p, &v, sizeof(v));
    });
}

/* The SPEC §2 mean of whole bz x by x bx blocks of a float32 or 8/16-bit unsigned row: n output
 * values from the parent rows at a (planes sy apart, rows sx apart), each block summed from 0 in
 * C order. Called with constant block sizes so each form compiles to straight-line sums. */
#define SM_MEAN_ROW(name, T, OUT)                                                                  \
    static inline void name(const T *a, uint64_t sy, uint64_t sx, uint64_t n, T *d, unsigned bz,   \
                            unsigned by, unsigned bx)                                              \
    {                                                                                              \
        const double cnt = (double)(bz * by * bx);                                                 \
        for (uint64_t x = 0; x < n; x++) {                                                         \
            const T *b = a + bx * x;                                                               \
            double t = 0.0;                                                                        \
            for (unsigned i = 0; i < bz; i++) {                                                    \
                for (unsigned j = 0; j < by; j++) {                                                \
                    for (unsigned k = 0; k < bx; k++) {                                            \
                        t += (double)b[i * sy + j * sx + k];                                       \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
            d[x] = OUT(t / cnt);                                                                   \
        }                                                                                          \
    }
#define SM_TO_F32(m) ((float)(m))
#define SM_TO_U8(m) ((uint8_t)rint(m))
#define SM_TO_U16(m) ((uint16_t)rint(m))
SM_MEAN_ROW(mean_row_f32, float, SM_TO_F32)
SM_MEAN_ROW(mean_row_u8, uint8_t, SM_TO_U8)
SM_MEAN_ROW(mean_row_u16, uint16_t, SM_TO_U16)

/* Whole blocks of one output row by the row kernel of the type, with the block sizes the levels
 * use as constants (2x2x2, 1x2x2, 2x1x1 and every other mix through the general call). */
#define SM_MEAN_DISPATCH(fn, T)                                                                    \
    do {                                                                                           \
        const T *src_ = (const T *)(const void *)src;                                              \
        T *dst_ = (T *)(void *)dst;                                                                \
        if (bz == 2 && by == 2 && bx == 2) {                                                       \
            fn(src_, sy, sx, n, dst_, 2, 2, 2);                                                    \
        } else if (bz == 1 && by == 2 && bx == 2) {                                                \
            fn(src_, sy, sx, n, dst_, 1, 2, 2);                                                    \
        } else {                                                                                   \
            fn(src_, sy, sx, n, dst_, bz, by, bx);                                                 \
        }                                                                                          \
    } while (0)

/* n whole blocks of a row, for the types with a row kernel; false for the others. */
static bool mean_row_fast(enum sm_dtype dt, const uint8_t *src, uint64_t sy, uint64_t sx,
                          uint64_t n, uint8_t *dst, unsigned bz, unsigned by, unsigned bx)
{
    switch (dt) {
    case SM_DT_FLOAT32:
        SM_MEAN_DISPATCH(mean_row_f32, float);
        return true;
    case SM_DT_UINT8:
        SM_MEAN_DISPATCH(mean_row_u8, uint8_t);
        return true;
    case SM_DT_UINT16:
        SM_MEAN_DISPATCH(mean_row_u16, uint16_t);
        return true;
    default:
        return false;
    }
}

/* The mean of one clipped block [c0, c1) per axis, through the float32 value of each element. */
static void mean_block(const struct sm_level_reduce *r, const uint8_t *slab, const uint64_t *ps,
                       const uint64_t *c0, const uint64_t *c1, uint8_t *dst)
{
    const size_t e = sm_dtype_size(r->dtype);
    double s = 0.0;
    for (uint64_t a = c0[0]; a < c1[0]; a++) {
        for (uint64_t b = c0[1]; b < c1[1]; b++) {
            for (uint64_t c = c0[2]; c < c1[2]; c++) {
                s += load_f32(slab + ((a * ps[1] + b) * ps[2] + c) * e, r->dtype);
            }
        }
    }
    const double cnt = (double)((c1[0] - c0[0]) * (c1[1] - c0[1]) * (c1[2] - c0[2]));
    store_mean(dst, r->dtype, s / cnt);
}

void sm_level_reduce(const struct sm_level_reduce *r, const void *parent, const uint64_t *ps,
                     const uint64_t *os, uint64_t z0, uint64_t nz, void *out_)
{
    const uint8_t *slab = parent;
    uint8_t *out = out_;
    const size_t e = sm_dtype_size(r->dtype);
    const uint64_t *bk = r->block, sy = ps[1] * ps[2], sx = ps[2];
    for (uint64_t z = 0; z < nz; z++) {
        for (uint64_t y = 0; y < os[1]; y++) {
            uint64_t c0[3] = {bk[0] * z, bk[1] * y, 0}, c1[3];
            for (unsigned d = 0; d < 2; d++) {
                c1[d] = c0[d] + bk[d] <= ps[d] ? c0[d] + bk[d] : ps[d];
            }
            uint8_t *dst = out + (((z0 + z) * os[1] + y) * os[2]) * e;
            const uint8_t *row = slab + (c0[0] * sy + c0[1] * sx) * e;
            if (r->nearest) { /* the first value of each block in C order */
                for (uint64_t x = 0; x < os[2]; x++) {
                    memcpy(dst + x * e, row + bk[2] * x * e, e);
                }
                continue;
            }
            uint64_t x = 0;
            const uint64_t whole = ps[2] / bk[2] < os[2] ? ps[2] / bk[2] : os[2];
            if (c1[0] - c0[0] == bk[0] && c1[1] - c0[1] == bk[1] &&
                mean_row_fast(r->dtype, row, sy, sx, whole, dst, (unsigned)bk[0], (unsigned)bk[1],
                              (unsigned)bk[2])) {
                x = whole;
            }
            for (; x < os[2]; x++) { /* edge blocks, and the types without a row kernel */
                c0[2] = bk[2] * x;
                c1[2] = c0[2] + bk[2] <= ps[2] ? c0[2] + bk[2] : ps[2];
                mean_block(r, slab, ps, c0, c1, dst + x * e);
            }
        }
    }
}
