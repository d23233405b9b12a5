/* Histograms and percentiles (SPEC §5): bin = floor((v - lo) * B / (hi - lo)), evaluated in double
 * in exactly that order so a NumPy oracle can repeat it; v < lo is underflow, v >= hi overflow,
 * NaN separate (and +-inf counted apart as well). 8/16-bit types (and bool) count each possible
 * value in `raw` and fold once at the end: the hot loop is one increment per voxel and the result
 * is the same formula. */
#include "shardmill/stats.h"

#include <math.h>
#include <string.h>

#include "shardmill/alloc.h"

bool sm_hist_default(enum sm_dtype dt, uint32_t *bins, double *lo, double *hi)
{
    switch (dt) {
    case SM_DT_BOOL:
        *bins = 2, *lo = 0, *hi = 2;
        return true;
    case SM_DT_UINT8:
        *bins = 256, *lo = 0, *hi = 256;
        return true;
    case SM_DT_INT8:
        *bins = 256, *lo = -128, *hi = 128;
        return true;
    case SM_DT_INT16:
        *bins = 65536, *lo = -32768, *hi = 32768;
        return true;
    case SM_DT_UINT16:
        *bins = 65536, *lo = 0, *hi = 65536;
        return true;
    default:
        return false;
    }
}

sm_status sm_hist_minmax_range(double min, double max, double *lo, double *hi, struct sm_err *err)
{
    if (!(min <= max)) { /* no finite value: any valid range; every count is NaN or +-inf */
        *lo = 0.0, *hi = 1.0;
        return SM_OK;
    }
    /* hi one double above max: max is inside [lo, hi), in the last bin at the latest */
    const double h = nextafter(max, INFINITY);
    if (!isfinite(h) || !isfinite(h - min)) {
        SM_FAIL_AT(err, SM_E_DATA, "histogram.range",
                   "the finite values span [%g, %g], too wide for a histogram range in double "
                   "precision; set histogram.range",
                   min, max);
    }
    *lo = min, *hi = h;
    return SM_OK;
}

sm_status sm_hist_init(struct sm_hist *h, enum sm_dtype dt, uint32_t bins, double lo, double hi,
                       struct sm_err *err)
{
    memset(h, 0, sizeof(*h));
    if (bins == 0 || !isfinite(lo) || !isfinite(hi) || !(lo < hi)) {
        SM_FAIL(err, SM_E_USAGE, "histogram needs bins >= 1 and a finite range lo < hi");
    }
    h->dtype = dt;
    h->bins = bins;
    h->lo = lo;
    h->hi = hi;
    h->min = INFINITY;
    h->max = -INFINITY;
    h->nraw = sm_dtype_patterns(dt);
    h->counts = sm_calloc(bins, sizeof(uint64_t));
    if (h->nraw != 0) {
        h->raw = sm_calloc(h->nraw, sizeof(uint64_t));
    }
    if (h->counts == NULL || (h->nraw != 0 && h->raw == NULL)) {
        sm_hist_destroy(h);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a %u-bin histogram", bins);
    }
    return SM_OK;
}

void sm_hist_destroy(struct sm_hist *h)
{
    sm_free(h->counts);
    sm_free(h->raw);
    h->counts = h->raw = NULL;
}

/* SPEC §5 binning of one non-NaN value. */
static void bin_value(struct sm_hist *h, double v, uint64_t k)
{
    if (v < h->lo) {
        h->underflow += k;
    } else if (v >= h->hi) {
        h->overflow += k;
    } else {
        double b = floor((v - h->lo) * (double)h->bins / (h->hi - h->lo));
        uint32_t i = b >= (double)h->bins ? h->bins - 1 : (uint32_t)b; /* rounding at hi */
        h->counts[i] += k;
    }
}

/* The value that raw[0] counts: -128 for int8, -32768 for int16, else 0. */
static int raw_first(enum sm_dtype dt)
{
    return dt == SM_DT_INT8 ? -128 : dt == SM_DT_INT16 ? -32768 : 0;
}

#define RAW_LOOP(T)                                                                                \
    do {                                                                                           \
        const T *p = values;                                                                       \
        uint64_t *raw = h->raw;                                                                    \
        const int offset = -raw_first(h->dtype);                                                   \
        for (size_t i = 0; i < n; i++) {                                                           \
            raw[(size_t)((int)p[i] + offset)]++;                                                   \
        }                                                                                          \
    } while (0)

/* min and max of the finite values; a zero is stored as +0.0 (-0.0 + 0.0 = +0.0), so which of
 * -0.0 and 0.0 came first (thread order) does not show */
#define VALUE_LOOP(T)                                                                              \
    do {                                                                                           \
        const T *p = values;                                                                       \
        double mn = h->min, mx = h->max;                                                           \
        for (size_t i = 0; i < n; i++) {                                                           \
            double v = (double)p[i];                                                               \
            if (v != v) {                                                                          \
                h->nan++;                                                                          \
                continue;                                                                          \
            }                                                                                      \
            if (v == INFINITY) {                                                                   \
                h->inf_pos++;                                                                      \
            } else if (v == -INFINITY) {                                                           \
                h->inf_neg++;                                                                      \
            } else {                                                                               \
                mn = v < mn ? v : mn;                                                              \
                mx = v > mx ? v : mx;                                                              \
            }                                                                                      \
            bin_value(h, v, 1);                                                                    \
        }                                                                                          \
        h->min = mn + 0.0;                                                                         \
        h->max = mx + 0.0;                                                                         \
    } while (0)

void sm_hist_add(struct sm_hist *h, const void *values, size_t n)
{
    /* the 8- and 16-bit types (and bool): counted by value */
    if (sm_dtype_patterns(h->dtype) != 0) {
        SM_DTYPE_DISPATCH(h->dtype, T, RAW_LOOP(T));
    } else {
        SM_DTYPE_DISPATCH(h->dtype, T, VALUE_LOOP(T));
    }
}

#define MINMAX_LOOP(T)                                                                             \
    do {                                                                                           \
        const T *p = values;                                                                       \
        double mn = h->min, mx = h->max;                                                           \
        for (size_t i = 0; i < n; i++) {                                                           \
            const double v = (double)p[i];                                                         \
            if (isfinite(v)) {                                                                     \
                mn = v < mn ? v : mn;                                                              \
                mx = v > mx ? v : mx;                                                              \
            }                                                                                      \
        }                                                                                          \
        h->min = mn + 0.0;                                                                         \
        h->max = mx + 0.0;                                                                         \
    } while (0)

void sm_hist_add_minmax(struct sm_hist *h, const void *values, size_t n)
{
    SM_DTYPE_DISPATCH(h->dtype, T, MINMAX_LOOP(T));
}

void sm_hist_merge(struct sm_hist *dst, const struct sm_hist *src)
{
    for (uint32_t i = 0; i < dst->bins; i++) {
        dst->counts[i] += src->counts[i];
    }
    for (size_t i = 0; i < dst->nraw; i++) {
        dst->raw[i] += src->raw[i];
    }
    dst->underflow += src->underflow;
    dst->overflow += src->overflow;
    dst->nan += src->nan;
    dst->inf_pos += src->inf_pos;
    dst->inf_neg += src->inf_neg;
    dst->min = src->min < dst->min ? src->min : dst->min;
    dst->max = src->max > dst->max ? src->max : dst->max;
}

void sm_hist_finish(struct sm_hist *h)
{
    if (h->nraw == 0) {
        return;
    }
    const int offset = raw_first(h->dtype);
    for (size_t i = 0; i < h->nraw; i++) {
        if (h->raw[i] != 0) {
            const double v = (double)((int)i + offset);
            bin_value(h, v, h->raw[i]);
            h->raw[i] = 0;
            h->min = v < h->min ? v : h->min;
            h->max = v > h->max ? v : h->max;
        }
    }
}

uint64_t sm_hist_total(const struct sm_hist *h)
{
    uint64_t n = h->underflow + h->overflow;
    for (uint32_t i = 0; i < h->bins; i++) {
        n += h->counts[i];
    }
    return n;
}

double sm_hist_edge(const struct sm_hist *h, uint32_t i)
{
    return h->lo + (double)i * (h->hi - h->lo) / (double)h->bins;
}

double sm_hist_percentile(const struct sm_hist *h, double p)
{
    const uint64_t n = sm_hist_total(h);
    if (n == 0) {
        return h->lo;
    }
    /* ceil(p/100 * N) as p*N/100: p*N is exact for the p and N in use, and the one rounding of
     * the division cannot lift an exact integer above itself (p/100 first would: 0.07 * 315000
     * = 22050.000000000004). A target of 0 (p = 0) is reached in the underflow, i.e. at lo. */
    const double t = ceil(p * (double)n / 100.0);
    const uint64_t target = t <= 0 ? 0 : (t > (double)n ? n : (uint64_t)t);
    uint64_t cum = h->underflow;
    if (cum >= target) {
        return h->lo;
    }
    for (uint32_t i = 0; i < h->bins; i++) {
        cum += h->counts[i];
        if (cum >= target) {
            return sm_hist_edge(h, i);
        }
    }
    return h->hi;
}
