/* Unit tests for engine/stats/stats_normalize.c: float32 formulas of SPEC §5, clamping, NaN, the
 * integer outputs of SPEC §2 (rint(w * MAX) in float32, half to even, clamped, NaN -> 0), and the
 * lookup table of <= 16-bit inputs against the formula for every input value. */
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

/* Issue 32 item 15: np.clip(x, 0, 1) is max(x, 0) then min(., 1), so every clamped value is the
 * bound +0.0: a -0.0 quotient ((-0.0 - 0) / 1, or a negative one that underflows) included.
 * NumPy 1.24: np.clip(np.float32(-0.0), 0, 1) is +0.0. In scale mode a -0.0 stays -0.0
 * (x / divisor, no clamp), as NumPy's division gives. */
static void test_window_clamp_is_positive_zero(void **state)
{
    (void)state;
    struct sm_norm nm = {SM_NORM_WINDOW, 0, 0, 1};
    float v[] = {-0.0f, 0.0f, -1e-45f, -1.0f, -INFINITY, 0.25f, 1.0f, 2.0f};
    float out[8];
    sm_normalize(&nm, SM_DT_FLOAT32, v, 8, out);
    const uint32_t want[] = {0, 0, 0, 0, 0, 0x3e800000u, 0x3f800000u, 0x3f800000u};
    for (int i = 0; i < 8; i++) {
        uint32_t got;
        memcpy(&got, &out[i], 4);
        assert_int_equal(got, want[i]);
    }
    struct sm_norm tiny = {SM_NORM_WINDOW, 0, 0, 1e30}; /* -1e-20 / 1e30 underflows to -0.0 */
    const float neg = -1e-20f;
    sm_normalize(&tiny, SM_DT_FLOAT32, &neg, 1, out);
    uint32_t got;
    memcpy(&got, &out[0], 4);
    assert_int_equal(got, 0);
    struct sm_norm sc = {SM_NORM_SCALE, 255, 0, 0};
    sm_normalize(&sc, SM_DT_FLOAT32, v, 1, out);
    memcpy(&got, &out[0], 4);
    assert_int_equal(got, 0x80000000u);
}

/* rint half to even, by hand (no libm): the oracle of the integer outputs below */
static double half_even(float y)
{
    const double f = (double)(long long)y; /* y >= 0 here: truncation is floor */
    const double frac = (double)y - f;
    if (frac > 0.5 || (frac == 0.5 && ((long long)f & 1) != 0)) {
        return f + 1.0;
    }
    return f;
}

/* Window [0, 510]: w = v / 510 and w * 255 is exactly v / 2, so every odd v is a tie (SPEC §2:
 * half to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, ...). */
static void test_u8_ties_round_to_even(void **state)
{
    (void)state;
    struct sm_norm nm = {SM_NORM_WINDOW, 0, 0, 510};
    int16_t v[511];
    uint8_t out[511];
    for (int i = 0; i < 511; i++) {
        v[i] = (int16_t)i;
    }
    sm_normalize_to(&nm, SM_DT_INT16, v, 511, SM_DT_UINT8, out);
    int ties = 0;
    for (int i = 0; i < 511; i++) {
        volatile float w = (float)i / 510.0f;
        const float y = w * 255.0f;
        ties += y - (float)(int)y == 0.5f;
        assert_int_equal(out[i], (int)half_even(y));
    }
    assert_int_equal(ties, 255); /* the test saw the ties it is about */
    assert_int_equal(out[1], 0);
    assert_int_equal(out[3], 2);
    assert_int_equal(out[5], 2);
    assert_int_equal(out[255], 128); /* w = 0.5: 127.5 -> 128 */
    assert_int_equal(out[510], 255);
}

static void test_u16_tie_and_ends(void **state)
{
    (void)state;
    struct sm_norm nm = {SM_NORM_WINDOW, 0, -100, 100};
    int16_t v[] = {-1000, -100, 0, 100, 1000};
    uint16_t out[5];
    sm_normalize_to(&nm, SM_DT_INT16, v, 5, SM_DT_UINT16, out);
    assert_int_equal(out[0], 0);     /* below the window */
    assert_int_equal(out[1], 0);     /* w = 0 */
    assert_int_equal(out[2], 32768); /* w = 0.5: 32767.5 -> 32768 (even) */
    assert_int_equal(out[3], 65535); /* w = 1 */
    assert_int_equal(out[4], 65535); /* beyond the window */
}

/* w = v / MAX maps back to v for every v (NumPy agrees: checked in float32 for all 65536). */
static void test_u16_identity_scale(void **state)
{
    (void)state;
    struct sm_norm nm = {SM_NORM_SCALE, 65535, 0, 0};
    static uint16_t v[65536], out[65536];
    for (int i = 0; i < 65536; i++) {
        v[i] = (uint16_t)i;
    }
    sm_normalize_to(&nm, SM_DT_UINT16, v, 65536, SM_DT_UINT16, out);
    assert_memory_equal(v, out, sizeof(v));
}

/* scale's w may exceed 1 or be negative: the product is clamped to [0, MAX]. */
static void test_scale_beyond_one_clamps(void **state)
{
    (void)state;
    struct sm_norm nm = {SM_NORM_SCALE, 255, 0, 0};
    int16_t v[] = {-300, -1, 0, 1, 254, 255, 256, 3000};
    uint8_t u8[8];
    uint16_t u16[8];
    sm_normalize_to(&nm, SM_DT_INT16, v, 8, SM_DT_UINT8, u8);
    sm_normalize_to(&nm, SM_DT_INT16, v, 8, SM_DT_UINT16, u16);
    const uint8_t want8[] = {0, 0, 0, 1, 254, 255, 255, 255};
    assert_memory_equal(u8, want8, sizeof(want8));
    for (int i = 0; i < 8; i++) {
        volatile float w = (float)v[i] / 255.0f;
        const float y = w * 65535.0f;
        const double want = y <= 0.0f ? 0.0 : (y >= 65535.0f ? 65535.0 : half_even(y));
        assert_int_equal(u16[i], (int)want);
    }
    assert_int_equal(u16[5], 65535);
    assert_int_equal(u16[6], 65535);
}

/* NaN (a NaN input, in either mode) is 0; +inf in scale is MAX, -inf 0. */
static void test_nan_and_inf(void **state)
{
    (void)state;
    struct sm_norm sc = {SM_NORM_SCALE, 2, 0, 0};
    struct sm_norm wn = {SM_NORM_WINDOW, 0, 0, 1};
    float v[] = {NAN, -NAN, INFINITY, -INFINITY, 0.5f, -0.0f};
    uint8_t a[6], b[6];
    uint16_t c[6];
    sm_normalize_to(&sc, SM_DT_FLOAT32, v, 6, SM_DT_UINT8, a);
    sm_normalize_to(&wn, SM_DT_FLOAT32, v, 6, SM_DT_UINT8, b);
    sm_normalize_to(&wn, SM_DT_FLOAT32, v, 6, SM_DT_UINT16, c);
    const uint8_t wa[] = {0, 0, 255, 0, 64, 0}; /* 0.25 * 255 = 63.75 -> 64 */
    const uint8_t wb[] = {0, 0, 255, 0, 128, 0};
    const uint16_t wc[] = {0, 0, 65535, 0, 32768, 0};
    assert_memory_equal(a, wa, sizeof(wa));
    assert_memory_equal(b, wb, sizeof(wb));
    assert_memory_equal(c, wc, sizeof(wc));
}

/* The float32 output of sm_normalize_to is sm_normalize's, bit for bit; only float32, uint8 and
 * uint16 are outputs of a normalization. */
static void test_float32_output_and_types(void **state)
{
    (void)state;
    struct sm_norm nm = {SM_NORM_WINDOW, 0, -3.5, 1000.25};
    double v[64];
    float a[64], b[64];
    for (int i = 0; i < 64; i++) {
        v[i] = -50.0 + 17.3 * i;
    }
    sm_normalize(&nm, SM_DT_FLOAT64, v, 64, a);
    sm_normalize_to(&nm, SM_DT_FLOAT64, v, 64, SM_DT_FLOAT32, b);
    assert_memory_equal(a, b, sizeof(a));
    assert_true(sm_normalize_output_ok(SM_DT_FLOAT32));
    assert_true(sm_normalize_output_ok(SM_DT_UINT8));
    assert_true(sm_normalize_output_ok(SM_DT_UINT16));
    assert_false(sm_normalize_output_ok(SM_DT_INT16));
    assert_false(sm_normalize_output_ok(SM_DT_FLOAT64));
    assert_false(sm_normalize_output_ok(SM_DT_UINT32));
}

static void test_mode_names_follow_the_key_choices(void **state)
{
    (void)state;
    /* normalize.mode's choices "scale|window|percentile|none", in the enum's order */
    assert_string_equal(sm_norm_mode_name(SM_NORM_SCALE), "scale");
    assert_string_equal(sm_norm_mode_name(SM_NORM_WINDOW), "window");
    assert_string_equal(sm_norm_mode_name(SM_NORM_PERCENTILE), "percentile");
    assert_string_equal(sm_norm_mode_name(SM_NORM_NONE), "none");
    assert_int_equal(SM_NORM_SCALE, 0);
    assert_int_equal(SM_NORM_NONE, 3);
}

/* The table path (sm_norm_lut_apply) against the formula path (sm_normalize_to, one value at a
 * time) for every value of every input type of at most 16 bits (all 65,536 uint16 and int16, all
 * 256 uint8 and int8, bool's bytes), each mode, each output type, and windows at the edges: the
 * type's whole range, a window of one step, one outside the values on either side, fractional
 * bounds, a window wider than the type, divisors below 1, of 1 and above the range. Bit for bit:
 * a float32 output is compared as its bits. The values are passed in a scrambled order. */
static const struct sm_norm lut_norms[] = {
    {SM_NORM_SCALE, 255, 0, 0},         {SM_NORM_SCALE, 65535, 0, 0},
    {SM_NORM_SCALE, 1, 0, 0},           {SM_NORM_SCALE, 0.5, 0, 0},
    {SM_NORM_SCALE, 3028, 0, 0},        {SM_NORM_SCALE, 1e9, 0, 0},
    {SM_NORM_WINDOW, 0, 0, 65535},      {SM_NORM_WINDOW, 0, 0, 255},
    {SM_NORM_WINDOW, 0, -32768, 32767}, {SM_NORM_WINDOW, 0, -128, 127},
    {SM_NORM_WINDOW, 0, 1000, 1001},    {SM_NORM_WINDOW, 0, 0, 510},
    {SM_NORM_WINDOW, 0, 17, 3028},      {SM_NORM_WINDOW, 0, -3.5, 1000.25},
    {SM_NORM_WINDOW, 0, 70000, 80000},  {SM_NORM_WINDOW, 0, -80000, -70000},
    {SM_NORM_WINDOW, 0, -1e6, 1e6},     {SM_NORM_WINDOW, 0, 100, 100.0001},
};

static void lut_check(enum sm_dtype in_dt, size_t count)
{
    static uint16_t values[65536];
    static uint8_t table_out[65536 * 4 + 1], formula_out[65536 * 4];
    const size_t in_size = count == 256 ? 1 : 2;
    uint8_t *bytes = (uint8_t *)values;
    for (size_t i = 0; i < count; i++) { /* 40503 is odd: i -> i * 40503 is a permutation */
        const size_t b = (i * 40503u) % count;
        if (in_size == 1) {
            bytes[i] = (uint8_t)b;
        } else {
            values[i] = (uint16_t)b;
        }
    }
    const enum sm_dtype outs[] = {SM_DT_FLOAT32, SM_DT_UINT8, SM_DT_UINT16};
    for (size_t k = 0; k < sizeof(lut_norms) / sizeof(lut_norms[0]); k++) {
        for (size_t o = 0; o < 3; o++) {
            struct sm_norm_lut lut;
            struct sm_err err = {0};
            assert_int_equal(sm_norm_lut_init(&lut, &lut_norms[k], in_dt, outs[o], &err), SM_OK);
            assert_int_equal(lut.entries, count); /* the table path, not the formula */
            const size_t osz = outs[o] == SM_DT_FLOAT32 ? 4 : outs[o] == SM_DT_UINT16 ? 2 : 1;
            memset(table_out, 0xa5, sizeof(table_out));
            sm_norm_lut_apply(&lut, values, count, table_out);
            for (size_t i = 0; i < count; i++) {
                sm_normalize_to(&lut_norms[k], in_dt, bytes + i * in_size, 1, outs[o],
                                formula_out + i * osz);
            }
            if (memcmp(table_out, formula_out, count * osz) != 0) {
                fail_msg("table != formula: input type %d, norm %zu, output %d", (int)in_dt, k,
                         (int)outs[o]);
            }
            assert_int_equal(table_out[count * osz], 0xa5); /* nothing past n */
            sm_norm_lut_destroy(&lut);
        }
    }
}

static void test_lut_equals_formula_16_bit(void **state)
{
    (void)state;
    lut_check(SM_DT_UINT16, 65536);
    lut_check(SM_DT_INT16, 65536);
}

static void test_lut_equals_formula_8_bit(void **state)
{
    (void)state;
    lut_check(SM_DT_UINT8, 256);
    lut_check(SM_DT_INT8, 256);
    lut_check(SM_DT_BOOL, 256);
}

/* Wider inputs keep no table: apply is the formula. */
static void test_lut_wider_types_use_the_formula(void **state)
{
    (void)state;
    assert_true(sm_norm_lut_fits(SM_DT_UINT16, SM_DT_UINT8));
    assert_false(sm_norm_lut_fits(SM_DT_UINT32, SM_DT_UINT8));
    assert_false(sm_norm_lut_fits(SM_DT_FLOAT32, SM_DT_FLOAT32));
    assert_false(sm_norm_lut_fits(SM_DT_UINT16, SM_DT_INT16));
    const struct sm_norm nm = {SM_NORM_WINDOW, 0, -3.5, 1000.25};
    float v[64];
    uint16_t a[64], b[64];
    for (int i = 0; i < 64; i++) {
        v[i] = -50.0f + 17.3f * (float)i;
    }
    v[3] = NAN;
    struct sm_norm_lut lut;
    struct sm_err err = {0};
    assert_int_equal(sm_norm_lut_init(&lut, &nm, SM_DT_FLOAT32, SM_DT_UINT16, &err), SM_OK);
    assert_int_equal(lut.entries, 0);
    sm_norm_lut_apply(&lut, v, 64, a);
    sm_normalize_to(&nm, SM_DT_FLOAT32, v, 64, SM_DT_UINT16, b);
    assert_memory_equal(a, b, sizeof(a));
    sm_norm_lut_destroy(&lut);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale_is_float32_division),
        cmocka_unit_test(test_window_clamps_to_unit_interval),
        cmocka_unit_test(test_window_keeps_nan),
        cmocka_unit_test(test_window_clamp_is_positive_zero),
        cmocka_unit_test(test_u8_ties_round_to_even),
        cmocka_unit_test(test_u16_tie_and_ends),
        cmocka_unit_test(test_u16_identity_scale),
        cmocka_unit_test(test_scale_beyond_one_clamps),
        cmocka_unit_test(test_nan_and_inf),
        cmocka_unit_test(test_float32_output_and_types),
        cmocka_unit_test(test_mode_names_follow_the_key_choices),
        cmocka_unit_test(test_lut_equals_formula_16_bit),
        cmocka_unit_test(test_lut_equals_formula_8_bit),
        cmocka_unit_test(test_lut_wider_types_use_the_formula),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
