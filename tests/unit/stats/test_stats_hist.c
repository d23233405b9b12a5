/* Unit tests for engine/stats/stats_hist.c: SPEC §5 binning, defaults, merge, percentiles, and
 * the range of the min/max pass (max in the last bin, min in bin 0, +-inf and NaN apart). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <cmocka.h>
#include <float.h>
#include <string.h>

#include <shardmill/stats.h>

static void test_hist_uint8_default_is_one_bin_per_value(void **state)
{
    (void)state;
    struct sm_err err = {0};
    uint32_t bins;
    double lo, hi;
    assert_true(sm_hist_default(SM_DT_UINT8, &bins, &lo, &hi));
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
    /* +-inf counted apart too (and still in overflow / underflow); min and max are finite, and
     * the zero is +0.0 whichever of -0.0 and 0.0 came first */
    assert_int_equal(h.inf_pos, 1);
    assert_int_equal(h.inf_neg, 1);
    assert_true(h.min == 0.0 && !signbit(h.min));
    assert_true(h.max == 1.0);
    sm_hist_destroy(&h);
}

static void test_hist_wide_types_have_no_exact_default(void **state)
{
    (void)state;
    struct sm_err err = {0};
    uint32_t bins;
    double lo, hi;
    const enum sm_dtype wide[] = {SM_DT_INT32,  SM_DT_UINT32,  SM_DT_INT64,
                                  SM_DT_UINT64, SM_DT_FLOAT32, SM_DT_FLOAT64};
    for (size_t i = 0; i < sizeof(wide) / sizeof(wide[0]); i++) {
        assert_false(sm_hist_default(wide[i], &bins, &lo, &hi));
    }
    assert_true(sm_hist_default(SM_DT_INT16, &bins, &lo, &hi));
    assert_true(bins == 65536 && lo == -32768 && hi == 32768);
    struct sm_hist h;
    assert_int_equal(sm_hist_init(&h, SM_DT_INT32, 4, 1, 1, &err), SM_E_USAGE);
}

/* The min/max pass's range of some float32 values: the SPEC §5 histogram over it. */
static void minmax_hist(const float *v, size_t n, uint32_t bins, struct sm_hist *h)
{
    struct sm_err err = {0};
    struct sm_hist mm;
    assert_int_equal(sm_hist_init(&mm, SM_DT_FLOAT32, 1, 0, 1, &err), SM_OK);
    sm_hist_add_minmax(&mm, v, n);
    double lo, hi;
    assert_int_equal(sm_hist_minmax_range(mm.min, mm.max, &lo, &hi, &err), SM_OK);
    sm_hist_destroy(&mm);
    assert_int_equal(sm_hist_init(h, SM_DT_FLOAT32, bins, lo, hi, &err), SM_OK);
    sm_hist_add(h, v, n);
    sm_hist_finish(h);
}

static void test_minmax_range_min_in_bin_0_max_in_last_bin(void **state)
{
    (void)state;
    const float v[] = {7.9f, -3.7f, NAN, INFINITY, 1.25f, -INFINITY, -3.7f, INFINITY, 7.9f};
    struct sm_hist h;
    minmax_hist(v, 9, 65536, &h);
    assert_true(h.lo == (double)-3.7f);
    assert_true(h.hi == nextafter((double)7.9f, INFINITY)); /* one double above max */
    assert_true(h.min == (double)-3.7f && h.max == (double)7.9f);
    assert_int_equal(h.counts[0], 2);
    assert_int_equal(h.counts[65535], 2);
    /* 1.25: floor((1.25 - lo) * B / (hi - lo)) in double, as NumPy computes it */
    const double b = floor(((double)1.25f - h.lo) * 65536.0 / (h.hi - h.lo));
    assert_int_equal(h.counts[(uint32_t)b], 1);
    assert_int_equal(h.nan, 1);
    assert_int_equal(h.inf_pos, 2);
    assert_int_equal(h.inf_neg, 1);
    assert_int_equal(h.overflow, 2);  /* +inf only */
    assert_int_equal(h.underflow, 1); /* -inf only */
    assert_int_equal(sm_hist_total(&h), 8);
    /* percentiles: 0 and anything in -inf's eighth are lo; the top lands in +inf's overflow */
    assert_true(sm_hist_percentile(&h, 10) == h.lo);
    assert_true(sm_hist_percentile(&h, 30) == h.lo);
    assert_true(sm_hist_percentile(&h, 70) == sm_hist_edge(&h, 65535));
    assert_true(sm_hist_percentile(&h, 99) == h.hi);
    sm_hist_destroy(&h);
}

static void test_minmax_range_rounding_reaches_b_is_the_last_bin(void **state)
{
    (void)state;
    /* max - lo and hi - lo round to the same double (1e17): the quotient is B exactly, and max
     * is in the last bin (the clamp), not in the overflow */
    struct sm_err err = {0};
    const double v[] = {-1e17, 1.0};
    struct sm_hist h;
    double lo, hi;
    assert_int_equal(sm_hist_minmax_range(-1e17, 1.0, &lo, &hi, &err), SM_OK);
    assert_true((1.0 - lo) == (hi - lo));
    assert_int_equal(sm_hist_init(&h, SM_DT_FLOAT64, 65536, lo, hi, &err), SM_OK);
    sm_hist_add(&h, v, 2);
    assert_int_equal(h.counts[0], 1);
    assert_int_equal(h.counts[65535], 1);
    assert_int_equal(h.overflow, 0);
    sm_hist_destroy(&h);
}

static void test_minmax_range_degenerate_cases(void **state)
{
    (void)state;
    struct sm_err err = {0};
    /* min == max: [min, nextafter(min)), every finite value in bin 0; the window is empty */
    const float same[] = {5.5f, 5.5f, NAN, 5.5f};
    struct sm_hist h;
    minmax_hist(same, 4, 65536, &h);
    assert_true(h.lo == 5.5 && h.hi == nextafter(5.5, INFINITY));
    assert_int_equal(h.counts[0], 3);
    assert_true(sm_hist_percentile(&h, 1) == 5.5 && sm_hist_percentile(&h, 99) == 5.5);
    sm_hist_destroy(&h);
    /* no finite value: [0, 1); +-inf in overflow / underflow, min and max say none */
    const float none[] = {NAN, INFINITY, -INFINITY, NAN};
    minmax_hist(none, 4, 16, &h);
    assert_true(h.lo == 0.0 && h.hi == 1.0);
    assert_true(h.min > h.max);
    assert_int_equal(h.nan, 2);
    assert_int_equal(h.overflow, 1);
    assert_int_equal(h.underflow, 1);
    assert_true(sm_hist_percentile(&h, 1) == 0.0 && sm_hist_percentile(&h, 99) == 1.0);
    sm_hist_destroy(&h);
    /* float64 spans a double range cannot hold: refused naming histogram.range */
    double lo, hi;
    assert_int_equal(sm_hist_minmax_range(0.0, DBL_MAX, &lo, &hi, &err), SM_E_DATA);
    assert_string_equal(err.where, "histogram.range");
    sm_err_clear(&err);
    assert_int_equal(sm_hist_minmax_range(-DBL_MAX, DBL_MAX / 2, &lo, &hi, &err), SM_E_DATA);
}

static void test_minmax_of_integers_and_zeros(void **state)
{
    (void)state;
    struct sm_err err = {0};
    struct sm_hist a, b;
    /* 8/16-bit types: min and max come from the raw counters when they are folded */
    assert_int_equal(sm_hist_init(&a, SM_DT_INT16, 65536, -32768, 32768, &err), SM_OK);
    const int16_t v16[] = {7, -5, 300, 7};
    sm_hist_add(&a, v16, 4);
    sm_hist_finish(&a);
    assert_true(a.min == -5.0 && a.max == 300.0);
    sm_hist_destroy(&a);
    /* int64 values bin as doubles: 2^53 + 1 is 2^53 */
    const int64_t v64[] = {(INT64_C(1) << 53) + 1, -3};
    assert_int_equal(sm_hist_init(&a, SM_DT_INT64, 1, 0, 1, &err), SM_OK);
    sm_hist_add_minmax(&a, v64, 2);
    assert_true(a.min == -3.0 && a.max == 9007199254740992.0);
    sm_hist_destroy(&a);
    /* -0.0 and 0.0 in either order, and merged either way: +0.0 */
    const float z1[] = {-0.0f, 0.0f}, z2[] = {0.0f, -0.0f};
    assert_int_equal(sm_hist_init(&a, SM_DT_FLOAT32, 1, 0, 1, &err), SM_OK);
    assert_int_equal(sm_hist_init(&b, SM_DT_FLOAT32, 1, 0, 1, &err), SM_OK);
    sm_hist_add_minmax(&a, z1, 2);
    sm_hist_add_minmax(&b, z2 + 1, 1);
    sm_hist_merge(&b, &a);
    assert_true(!signbit(a.min) && !signbit(a.max) && !signbit(b.min) && !signbit(b.max));
    sm_hist_destroy(&a);
    sm_hist_destroy(&b);
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
        cmocka_unit_test(test_hist_wide_types_have_no_exact_default),
        cmocka_unit_test(test_minmax_range_min_in_bin_0_max_in_last_bin),
        cmocka_unit_test(test_minmax_range_rounding_reaches_b_is_the_last_bin),
        cmocka_unit_test(test_minmax_range_degenerate_cases),
        cmocka_unit_test(test_minmax_of_integers_and_zeros),
        cmocka_unit_test(test_hist_merge_equals_single_pass),
        cmocka_unit_test(test_percentile_follows_spec_definition),
        cmocka_unit_test(test_percentile_in_underflow_is_lo_and_overflow_is_hi),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
