/* Unit tests for engine/format/format_fill.c: JSON fill values to little-endian bytes (range
 * checks, float spellings, hex bit patterns, null) and back to the JSON Zarr v3 writes. */
#include "shardmill/sm_config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "format_int.h"
#include "sm_test.h"

/* Parses `json` (through the lenient loader, so bare NaN and big integers work) as the fill
 * value of dt. */
static sm_status fill_of(const char *json, enum sm_dtype dt, uint8_t fill[8], bool *is_null,
                         struct sm_err *err)
{
    char doc[256];
    json_t *root;
    snprintf(doc, sizeof(doc), "{\"v\": %s}", json);
    sm_err_clear(err);
    assert_ok(sm_fmt_json_load(doc, strlen(doc), "", &root, err), err);
    sm_status st = sm_fmt_fill_parse(json_object_get(root, "v"), dt, fill, is_null, err);
    json_decref(root);
    return st;
}

static uint64_t le(const uint8_t fill[8])
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v |= (uint64_t)fill[i] << (8 * i);
    }
    return v;
}

static uint64_t ok_bits(const char *json, enum sm_dtype dt)
{
    struct sm_err err;
    uint8_t fill[8];
    bool is_null = true;
    assert_ok(fill_of(json, dt, fill, &is_null, &err), &err);
    assert_false(is_null);
    return le(fill);
}

static void expect_error(const char *json, enum sm_dtype dt, const char *what)
{
    struct sm_err err;
    uint8_t fill[8];
    bool is_null;
    assert_status(fill_of(json, dt, fill, &is_null, &err), SM_E_DATA, &err);
    assert_contains(err.what, what);
}

static uint32_t f32(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static uint64_t f64(double d)
{
    uint64_t b;
    memcpy(&b, &d, 8);
    return b;
}

static void test_fill_integers_are_range_checked_per_type(void **state)
{
    (void)state;
    assert_int_equal(ok_bits("255", SM_DT_UINT8), 0xff);
    expect_error("256", SM_DT_UINT8, "fill_value 256 is out of range for uint8");
    expect_error("-1", SM_DT_UINT8, "fill_value -1 is out of range for uint8");
    assert_int_equal(ok_bits("-128", SM_DT_INT8), 0x80);
    expect_error("-129", SM_DT_INT8, "out of range for int8");
    expect_error("128", SM_DT_INT8, "out of range for int8");
    assert_int_equal(ok_bits("-2", SM_DT_INT16), 0xfffe);
    assert_int_equal(ok_bits("65535", SM_DT_UINT16), 0xffff);
    expect_error("65536", SM_DT_UINT16, "out of range for uint16");
    assert_int_equal(ok_bits("-2147483648", SM_DT_INT32), 0x80000000u);
    expect_error("4294967296", SM_DT_UINT32, "out of range for uint32");
    assert_int_equal(ok_bits("-9223372036854775808", SM_DT_INT64), UINT64_C(0x8000000000000000));
    assert_int_equal(ok_bits("9223372036854775807", SM_DT_INT64), INT64_MAX);
    expect_error("9223372036854775808", SM_DT_INT64, "out of range for int64");
    expect_error("-9223372036854775809", SM_DT_INT64, "out of range for int64");
}

static void test_fill_uint64_accepts_values_beyond_int64(void **state)
{
    (void)state;
    assert_int_equal(ok_bits("18446744073709551615", SM_DT_UINT64), UINT64_MAX);
    assert_int_equal(ok_bits("9223372036854775808", SM_DT_UINT64), UINT64_C(1) << 63);
    expect_error("18446744073709551616", SM_DT_UINT64, "out of range for uint64");
    expect_error("-1", SM_DT_UINT64, "out of range for uint64");
}

static void test_fill_integral_reals_are_accepted_for_integers(void **state)
{
    (void)state;
    assert_int_equal(ok_bits("2.0", SM_DT_INT16), 2);
    assert_int_equal(ok_bits("-3.0", SM_DT_INT32), 0xfffffffdu);
    expect_error("2.5", SM_DT_INT16, "is not an integer");
    expect_error("1e20", SM_DT_INT64, "out of range for int64");
    expect_error("300.0", SM_DT_UINT8, "out of range for uint8");
}

static void test_fill_floats_may_be_written_as_integers(void **state)
{
    (void)state;
    assert_int_equal(ok_bits("3", SM_DT_FLOAT32), f32(3.0f));
    assert_int_equal(ok_bits("-7", SM_DT_FLOAT64), f64(-7.0));
    assert_int_equal(ok_bits("0.1", SM_DT_FLOAT32), f32(0.1f));
    assert_int_equal(ok_bits("0.1", SM_DT_FLOAT64), f64(0.1));
    assert_int_equal(ok_bits("-0.0", SM_DT_FLOAT64), UINT64_C(0x8000000000000000));
    assert_int_equal(ok_bits("18446744073709551615", SM_DT_FLOAT64), f64(18446744073709551615.0));
}

static void test_fill_nan_and_infinities_as_strings_and_bare_tokens(void **state)
{
    (void)state;
    const char *spellings[] = {"\"NaN\"", "NaN"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ok_bits(spellings[i], SM_DT_FLOAT32), 0x7fc00000u);
        assert_int_equal(ok_bits(spellings[i], SM_DT_FLOAT64), UINT64_C(0x7ff8000000000000));
    }
    assert_int_equal(ok_bits("\"Infinity\"", SM_DT_FLOAT32), 0x7f800000u);
    assert_int_equal(ok_bits("Infinity", SM_DT_FLOAT32), 0x7f800000u);
    assert_int_equal(ok_bits("\"-Infinity\"", SM_DT_FLOAT32), 0xff800000u);
    assert_int_equal(ok_bits("-Infinity", SM_DT_FLOAT64), UINT64_C(0xfff0000000000000));
    assert_int_equal(ok_bits("Infinity", SM_DT_FLOAT64), UINT64_C(0x7ff0000000000000));
}

static void test_fill_hex_bit_patterns_keep_every_bit(void **state)
{
    (void)state;
    assert_int_equal(ok_bits("\"0x7fc00001\"", SM_DT_FLOAT32), 0x7fc00001u);
    assert_int_equal(ok_bits("\"0x3F800000\"", SM_DT_FLOAT32), f32(1.0f));
    assert_int_equal(ok_bits("\"0x7ff8000000000001\"", SM_DT_FLOAT64),
                     UINT64_C(0x7ff8000000000001));
    expect_error("\"0x7fc0\"", SM_DT_FLOAT32, "\"0x\" and 8 hex digits");
    expect_error("\"0x7fc00000\"", SM_DT_FLOAT64, "\"0x\" and 16 hex digits");
    expect_error("\"0x7fc0000g\"", SM_DT_FLOAT32, "not valid for float32");
    expect_error("\"nan\"", SM_DT_FLOAT32, "fill_value \"nan\" is not valid for float32");
}

static void test_fill_float32_rejects_values_beyond_its_range(void **state)
{
    (void)state;
    expect_error("1e300", SM_DT_FLOAT32, "out of range for float32");
    assert_int_equal(ok_bits("3.4028234663852886e38", SM_DT_FLOAT32), f32(3.4028234663852886e38f));
    assert_int_equal(ok_bits("1e300", SM_DT_FLOAT64), f64(1e300));
}

static void test_fill_bool_takes_booleans_and_zero_or_one(void **state)
{
    (void)state;
    assert_int_equal(ok_bits("true", SM_DT_BOOL), 1);
    assert_int_equal(ok_bits("false", SM_DT_BOOL), 0);
    assert_int_equal(ok_bits("1", SM_DT_BOOL), 1);
    expect_error("2", SM_DT_BOOL, "fill_value for bool must be true or false");
    expect_error("\"true\"", SM_DT_BOOL, "must be true or false");
    expect_error("true", SM_DT_INT8, "fill_value true is not valid for int8");
}

static void test_fill_strings_are_rejected_for_integers(void **state)
{
    (void)state;
    expect_error("\"NaN\"", SM_DT_INT16, "fill_value \"NaN\" is not valid for int16");
    expect_error("NaN", SM_DT_UINT8, "fill_value \"NaN\" is not valid for uint8");
    expect_error("[0]", SM_DT_UINT8, "fill_value for uint8 must be an integer");
    expect_error("{}", SM_DT_FLOAT32, "fill_value for float32 must be a number or a string");
}

static void test_fill_null_reads_as_zero_and_is_flagged(void **state)
{
    (void)state;
    for (int dt = 0; dt < SM_DT_COUNT; dt++) {
        struct sm_err err;
        uint8_t fill[8];
        bool is_null = false;
        memset(fill, 0xAA, sizeof(fill));
        assert_ok(fill_of("null", (enum sm_dtype)dt, fill, &is_null, &err), &err);
        assert_true(is_null);
        assert_int_equal(le(fill), 0);
    }
}

static void test_fill_bytes_past_the_type_size_stay_zero(void **state)
{
    (void)state;
    assert_int_equal(ok_bits("-1", SM_DT_INT8), 0xff);
    assert_int_equal(ok_bits("-1", SM_DT_INT32), 0xffffffffu);
    assert_int_equal(ok_bits("-Infinity", SM_DT_FLOAT32), 0xff800000u);
}

/* The JSON the describe/provenance path writes for a fill value, compact. */
static char *to_json(enum sm_dtype dt, uint64_t bits, bool is_null)
{
    uint8_t fill[8];
    for (int i = 0; i < 8; i++) {
        fill[i] = (uint8_t)(bits >> (8 * i));
    }
    json_t *v = sm_fmt_fill_to_json(dt, fill, is_null);
    assert_non_null(v);
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    json_decref(v);
    return s;
}

static void expect_json(enum sm_dtype dt, uint64_t bits, bool is_null, const char *expected)
{
    char *s = to_json(dt, bits, is_null);
    assert_string_equal(s, expected);
    free(s);
}

static void test_fill_json_writes_zarr_v3_spellings(void **state)
{
    (void)state;
    expect_json(SM_DT_FLOAT32, 0x7fc00000u, false, "\"NaN\"");
    expect_json(SM_DT_FLOAT32, 0x7fc00001u, false, "\"0x7fc00001\"");
    expect_json(SM_DT_FLOAT64, UINT64_C(0x7ff8000000000000), false, "\"NaN\"");
    expect_json(SM_DT_FLOAT64, UINT64_C(0xfff8000000000000), false, "\"0xfff8000000000000\"");
    expect_json(SM_DT_FLOAT32, 0x7f800000u, false, "\"Infinity\"");
    expect_json(SM_DT_FLOAT64, UINT64_C(0xfff0000000000000), false, "\"-Infinity\"");
    expect_json(SM_DT_FLOAT32, f32(1.5f), false, "1.5");
    expect_json(SM_DT_FLOAT64, f64(0.0), false, "0.0");
    expect_json(SM_DT_BOOL, 1, false, "true");
    expect_json(SM_DT_BOOL, 0, false, "false");
    expect_json(SM_DT_INT8, 0xff, false, "-1");
    expect_json(SM_DT_INT16, 0x8000, false, "-32768");
    expect_json(SM_DT_INT64, UINT64_C(0x8000000000000000), false, "-9223372036854775808");
    expect_json(SM_DT_UINT32, 0xffffffffu, false, "4294967295");
    expect_json(SM_DT_UINT16, 0, true, "null");
}

static void test_fill_json_round_trips_through_parse(void **state)
{
    (void)state;
    static const struct {
        enum sm_dtype dt;
        uint64_t bits;
    } cases[] = {
        {SM_DT_FLOAT32, 0x7fc00000u},
        {SM_DT_FLOAT32, 0x3dcccccdu},
        {SM_DT_FLOAT32, 0xff800000u},
        {SM_DT_FLOAT64, UINT64_C(0x3fb999999999999a)},
        {SM_DT_INT16, 0xfff0},
        {SM_DT_UINT64, UINT64_C(0x7fffffffffffffff)},
        {SM_DT_BOOL, 1},
        {SM_DT_FLOAT64, UINT64_C(0x7ff4000000000000)},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *s = to_json(cases[i].dt, cases[i].bits, false);
        assert_int_equal(ok_bits(s, cases[i].dt), cases[i].bits);
        free(s);
    }
}

static void test_fill_json_of_meta_uses_its_dtype(void **state)
{
    (void)state;
    struct sm_array_meta m;
    memset(&m, 0, sizeof(m));
    m.dtype = SM_DT_UINT8;
    m.fill[0] = 200;
    json_t *v = sm_meta_fill_json(&m);
    assert_int_equal(json_integer_value(v), 200);
    json_decref(v);
    m.fill_is_null = true;
    v = sm_meta_fill_json(&m);
    assert_true(json_is_null(v));
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fill_integers_are_range_checked_per_type),
        cmocka_unit_test(test_fill_uint64_accepts_values_beyond_int64),
        cmocka_unit_test(test_fill_integral_reals_are_accepted_for_integers),
        cmocka_unit_test(test_fill_floats_may_be_written_as_integers),
        cmocka_unit_test(test_fill_nan_and_infinities_as_strings_and_bare_tokens),
        cmocka_unit_test(test_fill_hex_bit_patterns_keep_every_bit),
        cmocka_unit_test(test_fill_float32_rejects_values_beyond_its_range),
        cmocka_unit_test(test_fill_bool_takes_booleans_and_zero_or_one),
        cmocka_unit_test(test_fill_strings_are_rejected_for_integers),
        cmocka_unit_test(test_fill_null_reads_as_zero_and_is_flagged),
        cmocka_unit_test(test_fill_bytes_past_the_type_size_stay_zero),
        cmocka_unit_test(test_fill_json_writes_zarr_v3_spellings),
        cmocka_unit_test(test_fill_json_round_trips_through_parse),
        cmocka_unit_test(test_fill_json_of_meta_uses_its_dtype),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
