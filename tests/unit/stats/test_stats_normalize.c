/* Unit tests for engine/stats/stats_normalize.c: float32 formulas of SPEC §5, clamping, NaN. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include <shardmill/stats.h>

static void test_scale_is_float32_division(void **state)
{
    (void)state;
    struct sm_norm nm = {SM_NORM_SCALE, 255, 0, 0};
    uint8_t v[256];
    float out[256];
    for (int i = 0; i < 256; i++) {
        v[i] = (uint8_t)i;
    }
    sm_normalize(&nm, SM_DT_UINT8, v, 256, out);
    for (int i = 0; i < 256; i++) {
        volatile float a = (float)i, b = 255.0f;
        float expect = a / b;
        assert_memory_equal(&out[i], &expect, 4);
    }
}

static void test_window_clamps_to_unit_interval(void **state)
{
    (void)state;
    struct sm_norm nm = {SM_NORM_WINDOW, 0, -100, 300};
    int16_t v[] = {-1024, -100, 0, 100, 300, 2986};
    float out[6];
    sm_normalize(&nm, SM_DT_INT16, v, 6, out);
    assert_true(out[0] == 0.0f);
    assert_true(out[1] == 0.0f);
    assert_true(out[2] == 0.25f);
    assert_true(out[3] == 0.5f);
    assert_true(out[4] == 1.0f);
    assert_true(out[5] == 1.0f);
}

static void test_window_keeps_nan(void **state)
{
    (void)state;
    struct sm_norm nm = {SM_NORM_WINDOW, 0, 0, 1};
    float v[] = {NAN, 0.5f};
    float out[2];
    sm_normalize(&nm, SM_DT_FLOAT32, v, 2, out);
    assert_true(isnan(out[0]));
    assert_true(out[1] == 0.5f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale_is_float32_division),
        cmocka_unit_test(test_window_clamps_to_unit_interval),
        cmocka_unit_test(test_window_keeps_nan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
