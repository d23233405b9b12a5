/* SPEC §5 normalization in float32, exactly as written (no FMA: -ffp-contract=off):
 *   scale:  w = float32(v) / float32(divisor)
 *   window: w = clamp((float32(v) - float32(lo)) / (float32(hi) - float32(lo)), 0, 1)
 * NaN stays NaN through the clamp, as np.clip leaves it, and a clamped value is the bound +0.0
 * (a -0.0 quotient too, as np.clip gives: clip01). A float32 output is w, bit for bit NumPy's.
 * An integer output (SPEC §2 `output.dtype: uint8 | uint16`, MAX = 255 or 65535) is
 *   out = min(max(rint(float32(w) * float32(MAX)), 0), MAX)
 * with the product in float32 and rint in the default rounding mode (half to even), which is
 * NumPy's np.rint(w * np.float32(MAX)).clip(0, MAX). The product is clamped only for scale
 * (w may exceed 1 or be negative; a window's w is in [0, 1] already); since MAX is an integer
 * and rint is monotone, clamping before or after rint gives the same integer. NaN (a NaN input,
 * or inf/inf) is 0: NumPy's cast of NaN to an integer is undefined, so the oracle says 0 too. */
#include "shardmill/stats.h"

#include <math.h>
#include <string.h>

#include "shardmill/alloc.h"

/* np.clip(x, 0, 1) on float32 as NumPy computes it: min(max(x, 0), 1) with max(a, b) = a > b ? a
 * : b and min(a, b) = a < b ? a : b, a NaN a passing through both. So every x <= 0 that is no NaN
 * -- -0.0 and a negative that underflowed included -- gives the bound +0.0, never -0.0 (which
 * `x < 0 ? 0 : x` would keep), and x >= 1 gives 1. */
static inline float clip01(float x)
{
    return x > 0.0f ? (x < 1.0f ? x : 1.0f) : (isnan(x) ? x : 0.0f);
}

static inline float as_float(float w)
{
    return w;
}

/* !(y > 0) is true for NaN, -0 and negatives: 0. y >= MAX covers +inf. */
static inline uint8_t to_u8(float w)
{
    const float y = w * 255.0f;
    return !(y > 0.0f) ? 0 : (y >= 255.0f ? 255 : (uint8_t)rintf(y));
}

static inline uint16_t to_u16(float w)
{
    const float y = w * 65535.0f;
    return !(y > 0.0f) ? 0 : (y >= 65535.0f ? 65535 : (uint16_t)rintf(y));
}

/* One loop per span: the float32 value and its output conversion (CONV) in one step. */
#define NORM_LOOP(T, OT, CONV)                                                                     \
    do {                                                                                           \
        const T *p = values;                                                                       \
        OT *q = out;                                                                               \
        if (nm->mode == SM_NORM_SCALE) {                                                           \
            const float d = (float)nm->divisor;                                                    \
            for (size_t i = 0; i < n; i++) {                                                       \
                q[i] = CONV((float)p[i] / d);                                                      \
            }                                                                                      \
        } else {                                                                                   \
            const float lo = (float)nm->lo, span = (float)nm->hi - (float)nm->lo;                  \
            for (size_t i = 0; i < n; i++) {                                                       \
                q[i] = CONV(clip01(((float)p[i] - lo) / span));                                    \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#define NORM_FROM(OT, CONV) SM_DTYPE_DISPATCH(dt, T, NORM_LOOP(T, OT, CONV))

const struct sm_norm_desc sm_norm_modes[SM_NORM_NMODES] = {
    [SM_NORM_SCALE] = {"scale", false, "normalize.divisor", SM_NORM_WIN_DIVISOR,
                       SM_NORM_OMERO_WINDOW, "v / divisor"},
    [SM_NORM_WINDOW] = {"window", false, "normalize.lo|normalize.hi", SM_NORM_WIN_VALUES,
                        SM_NORM_OMERO_WINDOW, "clamp((v - lo) / (hi - lo), 0, 1)"},
    [SM_NORM_PERCENTILE] = {"percentile", true, "normalize.lo|normalize.hi", SM_NORM_WIN_PERCENTILE,
                            SM_NORM_OMERO_WINDOW,
                            "window between the lo-th and hi-th percentiles of the global "
                            "histogram (SPEC §5)"},
    [SM_NORM_NONE] = {"none", false, "", SM_NORM_WIN_NONE, SM_NORM_OMERO_INPUT,
                      "the input's values and type kept (rechunk / re-encode, SPEC §2; "
                      "output.dtype may widen them losslessly)"},
};

const struct sm_norm_desc *sm_norm_desc(enum sm_norm_mode m)
{
    return (unsigned)m < SM_NORM_NMODES ? &sm_norm_modes[m] : &sm_norm_modes[SM_NORM_WINDOW];
}

const char *sm_norm_mode_name(enum sm_norm_mode m)
{
    /* out of range: as before, the percentile's name */
    return (unsigned)m < SM_NORM_NMODES ? sm_norm_modes[m].name
                                        : sm_norm_modes[SM_NORM_PERCENTILE].name;
}

bool sm_normalize_output_ok(enum sm_dtype out_dt)
{
    return out_dt == SM_DT_FLOAT32 || out_dt == SM_DT_UINT8 || out_dt == SM_DT_UINT16;
}

void sm_normalize_to(const struct sm_norm *nm, enum sm_dtype dt, const void *values, size_t n,
                     enum sm_dtype out_dt, void *out)
{
    switch (out_dt) {
    case SM_DT_UINT8:
        NORM_FROM(uint8_t, to_u8);
        break;
    case SM_DT_UINT16:
        NORM_FROM(uint16_t, to_u16);
        break;
    case SM_DT_FLOAT32:
        NORM_FROM(float, as_float);
        break;
    default: /* not an output of a normalization (sm_normalize_output_ok) */
        break;
    }
}

void sm_normalize(const struct sm_norm *nm, enum sm_dtype dt, const void *values, size_t n,
                  float *out)
{
    sm_normalize_to(nm, dt, values, n, SM_DT_FLOAT32, out);
}

bool sm_norm_lut_fits(enum sm_dtype in_dt, enum sm_dtype out_dt)
{
    return sm_dtype_patterns(in_dt) != 0 && sm_normalize_output_ok(out_dt);
}

sm_status sm_norm_lut_init(struct sm_norm_lut *lut, const struct sm_norm *nm, enum sm_dtype in_dt,
                           enum sm_dtype out_dt, struct sm_err *err)
{
    memset(lut, 0, sizeof(*lut));
    lut->norm = *nm;
    lut->in_dt = in_dt;
    lut->out_dt = out_dt;
    if (!sm_norm_lut_fits(in_dt, out_dt)) {
        return SM_OK; /* the formula */
    }
    const size_t entries = sm_dtype_patterns(in_dt), in_size = sm_dtype_size(in_dt);
    const size_t out_size = sm_dtype_size(out_dt);
    uint8_t *table = sm_malloc(entries * out_size);
    if (table == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a %zu-entry normalization table", entries);
    }
    /* every bit pattern in blocks, each block's values as in_dt (a signed type reads the same
     * bits: entry b is the output of the value whose bits are b) through the formula itself */
    enum { BLOCK = 4096 };
    uint16_t bits[BLOCK];
    uint8_t bytes[BLOCK];
    for (size_t b0 = 0; b0 < entries; b0 += BLOCK) {
        const size_t k = entries - b0 < BLOCK ? entries - b0 : BLOCK;
        for (size_t i = 0; i < k; i++) {
            bits[i] = (uint16_t)(b0 + i);
            bytes[i] = (uint8_t)(b0 + i);
        }
        sm_normalize_to(nm, in_dt, in_size == 1 ? (const void *)bytes : (const void *)bits, k,
                        out_dt, table + b0 * out_size);
    }
    lut->entries = entries;
    lut->table = table;
    return SM_OK;
}

void sm_norm_lut_destroy(struct sm_norm_lut *lut)
{
    sm_free(lut->table);
    lut->table = NULL;
    lut->entries = 0;
}

/* One load per value: the input's bits (IT, unsigned) index the table of outputs (OT, a float32
 * copied as its 32 bits). */
#define LUT_LOOP(IT, OT)                                                                           \
    do {                                                                                           \
        const IT *p = values;                                                                      \
        const OT *t = lut->table;                                                                  \
        OT *q = out;                                                                               \
        for (size_t i = 0; i < n; i++) {                                                           \
            q[i] = t[p[i]];                                                                        \
        }                                                                                          \
    } while (0)

#define LUT_OUT(IT)                                                                                \
    do {                                                                                           \
        switch (sm_dtype_size(lut->out_dt)) {                                                      \
        case 1:                                                                                    \
            LUT_LOOP(IT, uint8_t);                                                                 \
            break;                                                                                 \
        case 2:                                                                                    \
            LUT_LOOP(IT, uint16_t);                                                                \
            break;                                                                                 \
        default:                                                                                   \
            LUT_LOOP(IT, uint32_t);                                                                \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

void sm_norm_lut_apply(const struct sm_norm_lut *lut, const void *values, size_t n, void *out)
{
    if (lut->entries == 0) {
        sm_normalize_to(&lut->norm, lut->in_dt, values, n, lut->out_dt, out);
    } else if (lut->entries == 256) {
        LUT_OUT(uint8_t);
    } else {
        LUT_OUT(uint16_t);
    }
}
