/* Unit tests for engine/stats/stats_cast.c (SPEC §2 `normalize.mode: none`): sm_cast_lossless
 * against an independent oracle (does every extreme or tricky value of the source type survive
 * in the target type, judged in long double), and sm_cast_values of every int16 and uint8 value
 * into each wider type it allows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include <shardmill/stats.h>

/* The values that decide whether a type fits another: its extremes and those a float target
 * rounds (2^24 + 1, 2^53 + 1), a fraction and a subnormal for floats. */
static size_t probes(enum sm_dtype dt, long double *v)
{
    size_t n = 0;
    switch (dt) {
    case SM_DT_BOOL:
        v[n++] = 0;
        v[n++] = 1;
        break;
    case SM_DT_INT8:
        v[n++] = INT8_MIN;
        v[n++] = INT8_MAX;
        break;
    case SM_DT_UINT8:
        v[n++] = UINT8_MAX;
        break;
    case SM_DT_INT16:
        v[n++] = INT16_MIN;
        v[n++] = INT16_MAX;
        break;
    case SM_DT_UINT16:
        v[n++] = UINT16_MAX;
        break;
    case SM_DT_INT32:
        v[n++] = INT32_MIN;
        v[n++] = INT32_MAX;
        v[n++] = 16777217.0L;
        break;
    case SM_DT_UINT32:
        v[n++] = UINT32_MAX;
        v[n++] = 16777217.0L;
        break;
    case SM_DT_INT64:
        v[n++] = INT64_MIN;
        v[n++] = INT64_MAX;
        v[n++] = 9007199254740993.0L;
        break;
    case SM_DT_UINT64:
        v[n++] = UINT64_MAX;
        v[n++] = 9007199254740993.0L;
        break;
    case SM_DT_FLOAT32:
        v[n++] = 0.5L;
        v[n++] = FLT_MAX;
        v[n++] = -FLT_MAX;
        v[n++] = FLT_TRUE_MIN;
        break;
    case SM_DT_FLOAT64:
        v[n++] = 0.5L;
        v[n++] = DBL_MAX;
        v[n++] = DBL_TRUE_MIN;
        break;
    case SM_DT_COUNT:
        break;
    }
    v[n++] = 0;
    return n;
}

static bool fits(enum sm_dtype to, long double x)
{
    static const long double lo[] = {0, INT8_MIN, INT16_MIN, INT32_MIN, INT64_MIN, 0,
                                     0, 0,        0,         -FLT_MAX,  -DBL_MAX};
    static const long double hi[] = {1,          INT8_MAX,  INT16_MAX,  INT32_MAX,
                                     INT64_MAX,  UINT8_MAX, UINT16_MAX, UINT32_MAX,
                                     UINT64_MAX, FLT_MAX,   DBL_MAX};
    if (x < lo[to] || x > hi[to]) {
        return false;
    }
    if (to == SM_DT_FLOAT32) {
        return (long double)(float)x == x;
    }
    if (to == SM_DT_FLOAT64) {
        return (long double)(double)x == x;
    }
    return truncl(x) == x;
}

static void test_lossless_matches_the_oracle(void **state)
{
    (void)state;
    for (int f = 0; f < SM_DT_COUNT; f++) {
        for (int t = 0; t < SM_DT_COUNT; t++) {
            long double v[8];
            const size_t n = probes((enum sm_dtype)f, v);
            bool all = true;
            for (size_t i = 0; i < n; i++) {
                all = all && fits((enum sm_dtype)t, v[i]);
            }
            if (t == SM_DT_BOOL && f != SM_DT_BOOL) {
                all = false; /* bool holds 0 and 1 only: no probe set shows it */
            }
            if (sm_cast_lossless((enum sm_dtype)f, (enum sm_dtype)t) != all) {
                fail_msg("%s -> %s: lossless %d, oracle %d", sm_dtype_name((enum sm_dtype)f),
                         sm_dtype_name((enum sm_dtype)t), !all, all);
            }
        }
    }
}

static void test_cast_values_keeps_every_int16(void **state)
{
    (void)state;
    static int16_t in[65536];
    static int32_t i32[65536];
    static float f32[65536];
    static double f64[65536];
    for (int i = 0; i < 65536; i++) {
        in[i] = (int16_t)(i - 32768);
    }
    sm_cast_values(SM_DT_INT16, in, 65536, SM_DT_INT32, i32);
    sm_cast_values(SM_DT_INT16, in, 65536, SM_DT_FLOAT32, f32);
    sm_cast_values(SM_DT_INT16, in, 65536, SM_DT_FLOAT64, f64);
    for (int i = 0; i < 65536; i++) {
        assert_int_equal(i32[i], i - 32768);
        assert_true(f32[i] == (float)(i - 32768));
        assert_true(f64[i] == (double)(i - 32768));
    }
    int16_t same[4] = {-1, 2, -3, 4}, back[4];
    sm_cast_values(SM_DT_INT16, same, 4, SM_DT_INT16, back);
    assert_memory_equal(same, back, sizeof(same));
}

static void test_cast_values_keeps_every_uint8(void **state)
{
    (void)state;
    uint8_t in[256];
    uint16_t u16[256];
    int16_t i16[256];
    uint64_t u64[256];
    for (int i = 0; i < 256; i++) {
        in[i] = (uint8_t)i;
    }
    sm_cast_values(SM_DT_UINT8, in, 256, SM_DT_UINT16, u16);
    sm_cast_values(SM_DT_UINT8, in, 256, SM_DT_INT16, i16);
    sm_cast_values(SM_DT_UINT8, in, 256, SM_DT_UINT64, u64);
    for (int i = 0; i < 256; i++) {
        assert_int_equal(u16[i], i);
        assert_int_equal(i16[i], i);
        assert_int_equal(u64[i], i);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lossless_matches_the_oracle),
        cmocka_unit_test(test_cast_values_keeps_every_int16),
        cmocka_unit_test(test_cast_values_keeps_every_uint8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
