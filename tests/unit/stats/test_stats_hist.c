/* Unit tests for engine/stats/stats_hist.c: SPEC §5 binning, defaults, merge, percentiles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <cmocka.h>
#include <string.h>

#include <shardmill/stats.h>

static void test_hist_uint8_default_is_one_bin_per_value(void **state)
{
    (void)state;
    struct sm_err err = {0};
    uint32_t bins;
    double lo, hi;
    assert_int_equal(sm_hist_default(SM_DT_UINT8, &bins, &lo, &hi, &err), SM_OK);
    struct sm_hist h;
    assert_int_equal(sm_hist_init(&h, SM_DT_UINT8, bins, lo, hi, &err), SM_OK);
    uint8_t v[512];
    for (int i = 0; i < 512; i++) {
        v[i] = (uint8_t)(i * 7);
    }
    sm_hist_add(&h, v, 512);
    sm_hist_finish(&h);
    uint64_t expect[256] = {0};
    for (int i = 0; i < 512; i++) {
        expect[v[i]]++;
    }
    for (int b = 0; b < 256; b++) {
        assert_int_equal(h.counts[b], expect[b]);
    }
    assert_int_equal(sm_hist_total(&h), 512);
    sm_hist_destroy(&h);
}

static void test_hist_int16_range_under_and_overflow(void **state)
{
    (void)state;
    struct sm_err err = {0};
    struct sm_hist h;
    /* 10 bins over [-100, 100): bin = floor((v + 100) * 10 / 200) */
    assert_int_equal(sm_hist_init(&h, SM_DT_INT16, 10, -100, 100, &err), SM_OK);
    int16_t v[] = {-1024, -101, -100, -81, -80, 0, 19, 20, 99, 100, 2986};
    sm_hist_add(&h, v, sizeof(v) / sizeof(v[0]));
    sm_hist_finish(&h);
    assert_int_equal(h.underflow, 2);
    assert_int_equal(h.overflow, 2);
    assert_int_equal(h.counts[0], 2); /* -100, -81 */
    assert_int_equal(h.counts[1], 1); /* -80 */
    assert_int_equal(h.counts[5], 2); /* 0, 19 */
    assert_int_equal(h.counts[6], 1); /* 20 */
    assert_int_equal(h.counts[9], 1); /* 99 */
    sm_hist_destroy(&h);
}

static void test_hist_float_counts_nan_separately(void **state)
{
    (void)state;
    struct sm_err err = {0};
    struct sm_hist h;
    assert_int_equal(sm_hist_init(&h, SM_DT_FLOAT32, 4, 0, 1, &err), SM_OK);
    float v[] = {NAN, 0.0f, 0.2499f, 0.25f, 0.9999f, 1.0f, -0.0f, INFINITY, -INFINITY};
    sm_hist_add(&h, v, 9);
    sm_hist_finish(&h);
    assert_int_equal(h.nan, 1);
    assert_int_equal(h.counts[0], 3);
    assert_int_equal(h.counts[1], 1);
    assert_int_equal(h.counts[3], 1);
    assert_int_equal(h.overflow, 2);
    assert_int_equal(h.underflow, 1);
    assert_int_equal(sm_hist_total(&h), 8);
    sm_hist_destroy(&h);
}

static void test_hist_wide_types_need_a_range(void **state)
{
    (void)state;
    struct sm_err err = {0};
    uint32_t bins;
    double lo, hi;
    assert_int_equal(sm_hist_default(SM_DT_FLOAT32, &bins, &lo, &hi, &err), SM_E_USAGE);
    assert_non_null(strstr(err.what, "histogram.range"));
    struct sm_hist h;
    sm_err_clear(&err);
    assert_int_equal(sm_hist_init(&h, SM_DT_INT32, 4, 1, 1, &err), SM_E_USAGE);
}

static void test_hist_merge_equals_single_pass(void **state)
{
    (void)state;
    struct sm_err err = {0};
    struct sm_hist a, b, all;
    assert_int_equal(sm_hist_init(&a, SM_DT_UINT16, 16, 0, 65536, &err), SM_OK);
    assert_int_equal(sm_hist_init(&b, SM_DT_UINT16, 16, 0, 65536, &err), SM_OK);
    assert_int_equal(sm_hist_init(&all, SM_DT_UINT16, 16, 0, 65536, &err), SM_OK);
    uint16_t v[1000];
    for (int i = 0; i < 1000; i++) {
        v[i] = (uint16_t)(i * 977u);
    }
    sm_hist_add(&a, v, 400);
    sm_hist_add(&b, v + 400, 600);
    sm_hist_add(&all, v, 1000);
    sm_hist_merge(&a, &b);
    sm_hist_finish(&a);
    sm_hist_finish(&all);
    for (int i = 0; i < 16; i++) {
        assert_int_equal(a.counts[i], all.counts[i]);
    }
    sm_hist_destroy(&a);
    sm_hist_destroy(&b);
    sm_hist_destroy(&all);
}

static void test_percentile_follows_spec_definition(void **state)
{
    (void)state;
    struct sm_err err = {0};
    struct sm_hist h;
    assert_int_equal(sm_hist_init(&h, SM_DT_UINT8, 256, 0, 256, &err), SM_OK);
    uint8_t v[100];
    for (int i = 0; i < 100; i++) {
        v[i] = (uint8_t)i; /* 0..99, one each */
    }
    sm_hist_add(&h, v, 100);
    sm_hist_finish(&h);
    /* ceil(p/100 * 100) = p-th value; the lower edge of that bin is value p-1 */
    assert_true(sm_hist_percentile(&h, 1) == 0.0);
    assert_true(sm_hist_percentile(&h, 50) == 49.0);
    assert_true(sm_hist_percentile(&h, 99) == 98.0);
    assert_true(sm_hist_percentile(&h, 100) == 99.0);
    assert_true(sm_hist_percentile(&h, 0) == 0.0);
    sm_hist_destroy(&h);
}

static void test_percentile_in_underflow_is_lo_and_overflow_is_hi(void **state)
{
    (void)state;
    struct sm_err err = {0};
    struct sm_hist h;
    assert_int_equal(sm_hist_init(&h, SM_DT_INT16, 10, 0, 10, &err), SM_OK);
    int16_t v[] = {-5, -4, -3, 5, 50, 60, 70, 80};
    sm_hist_add(&h, v, 8);
    sm_hist_finish(&h);
    assert_true(sm_hist_percentile(&h, 10) == 0.0);
    assert_true(sm_hist_percentile(&h, 95) == 10.0);
    assert_true(sm_hist_percentile(&h, 50) == 5.0);
    sm_hist_destroy(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hist_uint8_default_is_one_bin_per_value),
        cmocka_unit_test(test_hist_int16_range_under_and_overflow),
        cmocka_unit_test(test_hist_float_counts_nan_separately),
        cmocka_unit_test(test_hist_wide_types_need_a_range),
        cmocka_unit_test(test_hist_merge_equals_single_pass),
        cmocka_unit_test(test_percentile_follows_spec_definition),
        cmocka_unit_test(test_percentile_in_underflow_is_lo_and_overflow_is_hi),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
