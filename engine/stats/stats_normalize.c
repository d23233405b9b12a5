/* SPEC §5 normalization in float32, exactly as written (no FMA: -ffp-contract=off):
 *   scale:  out = float32(v) / float32(divisor)
 *   window: out = clamp((float32(v) - float32(lo)) / (float32(hi) - float32(lo)), 0, 1)
 * NaN stays NaN through the clamp, as np.clip leaves it. */
#include "shardmill/stats.h"

#define NORM_LOOP(T)                                                                               \
    do {                                                                                           \
        const T *p = values;                                                                       \
        if (nm->mode == SM_NORM_SCALE) {                                                           \
            const float d = (float)nm->divisor;                                                    \
            for (size_t i = 0; i < n; i++) {                                                       \
                out[i] = (float)p[i] / d;                                                          \
            }                                                                                      \
        } else {                                                                                   \
            const float lo = (float)nm->lo, span = (float)nm->hi - (float)nm->lo;                  \
            for (size_t i = 0; i < n; i++) {                                                       \
                float x = ((float)p[i] - lo) / span;                                               \
                out[i] = x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x);                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

void sm_normalize(const struct sm_norm *nm, enum sm_dtype dt, const void *values, size_t n,
                  float *out)
{
    switch (dt) {
    case SM_DT_BOOL:
    case SM_DT_UINT8:
        NORM_LOOP(uint8_t);
        break;
    case SM_DT_INT8:
        NORM_LOOP(int8_t);
        break;
    case SM_DT_UINT16:
        NORM_LOOP(uint16_t);
        break;
    case SM_DT_INT16:
        NORM_LOOP(int16_t);
        break;
    case SM_DT_UINT32:
        NORM_LOOP(uint32_t);
        break;
    case SM_DT_INT32:
        NORM_LOOP(int32_t);
        break;
    case SM_DT_UINT64:
        NORM_LOOP(uint64_t);
        break;
    case SM_DT_INT64:
        NORM_LOOP(int64_t);
        break;
    case SM_DT_FLOAT32:
        NORM_LOOP(float);
        break;
    case SM_DT_FLOAT64:
        NORM_LOOP(double);
        break;
    case SM_DT_COUNT:
        break;
    }
}
