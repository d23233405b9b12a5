/* SPEC §2 `normalize.mode: none`: the input's values kept, in the input's type or in a wider one
 * that holds every value of it exactly (`output.dtype`). Lossless casts only:
 *   the same type; bool -> any integer;
 *   signed -> a wider signed integer; unsigned -> a wider unsigned or a strictly wider signed one;
 *   8- and 16-bit integers -> float32 (24-bit significand); up to 32-bit integers -> float64;
 *   float32 -> float64.
 * Everything else (int32 -> float32, float -> integer, int16 -> uint16, ...) narrows. */
#include "shardmill/stats.h"

#include <string.h>

static unsigned bits(enum sm_dtype dt)
{
    return (unsigned)sm_dtype_size(dt) * 8u;
}

bool sm_cast_lossless(enum sm_dtype from, enum sm_dtype to)
{
    if (from == to) {
        return true;
    }
    if (from == SM_DT_BOOL) {
        return to != SM_DT_BOOL;
    }
    if (to == SM_DT_BOOL) {
        return false;
    }
    if (sm_dtype_is_float(from)) {
        return from == SM_DT_FLOAT32 && to == SM_DT_FLOAT64;
    }
    if (sm_dtype_is_float(to)) {
        return bits(from) <= (to == SM_DT_FLOAT32 ? 16u : 32u);
    }
    const bool fs = sm_dtype_is_signed(from), ts = sm_dtype_is_signed(to);
    if (fs) {
        return ts && bits(to) > bits(from);
    }
    return bits(to) > bits(from); /* unsigned -> wider unsigned, or strictly wider signed */
}

/* out[i] = (TO)in[i] for one pair of types. */
#define CAST_LOOP(FROM, TO)                                                                        \
    do {                                                                                           \
        const FROM *p = in;                                                                        \
        TO *q = out;                                                                               \
        for (size_t i = 0; i < n; i++) {                                                           \
            q[i] = (TO)p[i];                                                                       \
        }                                                                                          \
    } while (0)

void sm_cast_values(enum sm_dtype from, const void *in, size_t n, enum sm_dtype to, void *out)
{
    if (from == to) {
        memcpy(out, in, n * sm_dtype_size(from));
        return;
    }
    SM_DTYPE_DISPATCH(from, F, SM_DTYPE_DISPATCH(to, O, CAST_LOOP(F, O)));
}
