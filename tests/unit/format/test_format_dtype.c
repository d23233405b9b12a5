/* Unit tests for engine/format/format_dtype.c: v2 NumPy typestrs (every supported type in every
 * byte order) and v3 data type names, and the named errors for everything unsupported. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "format_int.h"
#include "sm_test.h"

static sm_status v2(const char *typestr, enum sm_dtype *dt, bool *big, struct sm_err *err)
{
    json_t *v = json_string(typestr);
    sm_err_clear(err);
    sm_status st = sm_fmt_dtype_v2(v, dt, big, err);
    json_decref(v);
    return st;
}

static void test_dtype_v2_accepts_every_supported_type_and_byte_order(void **state)
{
    (void)state;
    static const struct {
        const char *typestr;
        enum sm_dtype dt;
        bool big;
    } cases[] = {
        {"|b1", SM_DT_BOOL, false},    {"<b1", SM_DT_BOOL, false},    {"|i1", SM_DT_INT8, false},
        {"<i1", SM_DT_INT8, false},    {">i1", SM_DT_INT8, false},    {"|u1", SM_DT_UINT8, false},
        {">u1", SM_DT_UINT8, false},   {"<i2", SM_DT_INT16, false},   {">i2", SM_DT_INT16, true},
        {"<i4", SM_DT_INT32, false},   {">i4", SM_DT_INT32, true},    {"<i8", SM_DT_INT64, false},
        {">i8", SM_DT_INT64, true},    {"<u2", SM_DT_UINT16, false},  {">u2", SM_DT_UINT16, true},
        {"<u4", SM_DT_UINT32, false},  {">u4", SM_DT_UINT32, true},   {"<u8", SM_DT_UINT64, false},
        {">u8", SM_DT_UINT64, true},   {"<f4", SM_DT_FLOAT32, false}, {">f4", SM_DT_FLOAT32, true},
        {"<f8", SM_DT_FLOAT64, false}, {">f8", SM_DT_FLOAT64, true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sm_err err;
        enum sm_dtype dt = SM_DT_COUNT;
        bool big = !cases[i].big;
        assert_ok(v2(cases[i].typestr, &dt, &big, &err), &err);
        assert_int_equal(dt, cases[i].dt);
        assert_int_equal(big, cases[i].big);
    }
}

static void test_dtype_v2_rejects_pipe_on_multibyte_types(void **state)
{
    (void)state;
    struct sm_err err;
    enum sm_dtype dt;
    bool big;
    assert_status(v2("|i2", &dt, &big, &err), SM_E_DATA, &err);
    assert_contains(err.what, "'|i2'");
    assert_contains(err.what, "1-byte");
}

static void test_dtype_v2_names_unsupported_types(void **state)
{
    (void)state;
    static const struct {
        const char *typestr, *what;
    } cases[] = {
        {"<f2", "no 2-byte float"},   {"<c8", "complex"},         {"<U10", "unicode string"},
        {"|S4", "byte string"},       {"|O", "expected a byte"},  {"<M8", "datetime"},
        {"<i3", "no 3-byte integer"}, {"=i4", "'=i4'"},           {"i4", "'i4'"},
        {"<x4", "unknown kind 'x'"},  {"<i4x", "malformed size"}, {"|b2", "no 2-byte bool"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sm_err err;
        enum sm_dtype dt;
        bool big;
        assert_status(v2(cases[i].typestr, &dt, &big, &err), SM_E_DATA, &err);
        assert_contains(err.what, cases[i].what);
        assert_contains(err.what, "unsupported v2 dtype");
    }
}

static void test_dtype_v2_rejects_structured_and_mistyped(void **state)
{
    (void)state;
    struct sm_err err;
    enum sm_dtype dt;
    bool big;
    json_t *structured = json_loads("[[\"x\", \"<i4\"], [\"y\", \"<f8\"]]", 0, NULL);
    sm_err_clear(&err);
    assert_status(sm_fmt_dtype_v2(structured, &dt, &big, &err), SM_E_DATA, &err);
    assert_contains(err.what, "structured");
    json_decref(structured);
    json_t *num = json_integer(4);
    sm_err_clear(&err);
    assert_status(sm_fmt_dtype_v2(num, &dt, &big, &err), SM_E_DATA, &err);
    assert_contains(err.what, "'dtype' must be a string");
    json_decref(num);
}

static void test_dtype_v3_accepts_every_core_name(void **state)
{
    (void)state;
    for (int i = 0; i < SM_DT_COUNT; i++) {
        struct sm_err err;
        enum sm_dtype dt = SM_DT_COUNT;
        json_t *v = json_string(sm_dtype_name((enum sm_dtype)i));
        sm_err_clear(&err);
        assert_ok(sm_fmt_dtype_v3(v, &dt, &err), &err);
        assert_int_equal(dt, i);
        json_decref(v);
    }
}

static void test_dtype_v3_names_unknown_types(void **state)
{
    (void)state;
    struct sm_err err;
    enum sm_dtype dt;
    json_t *v = json_string("complex64");
    sm_err_clear(&err);
    assert_status(sm_fmt_dtype_v3(v, &dt, &err), SM_E_DATA, &err);
    assert_string_equal(err.what, "unsupported data type 'complex64'");
    json_decref(v);
    v = json_loads("{\"name\": \"numpy.datetime64\", \"configuration\": {}}", 0, NULL);
    sm_err_clear(&err);
    assert_status(sm_fmt_dtype_v3(v, &dt, &err), SM_E_DATA, &err);
    assert_string_equal(err.what, "unsupported data type 'numpy.datetime64'");
    json_decref(v);
    v = json_integer(3);
    sm_err_clear(&err);
    assert_status(sm_fmt_dtype_v3(v, &dt, &err), SM_E_DATA, &err);
    assert_contains(err.what, "'data_type' must be a string");
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_v2_accepts_every_supported_type_and_byte_order),
        cmocka_unit_test(test_dtype_v2_rejects_pipe_on_multibyte_types),
        cmocka_unit_test(test_dtype_v2_names_unsupported_types),
        cmocka_unit_test(test_dtype_v2_rejects_structured_and_mistyped),
        cmocka_unit_test(test_dtype_v3_accepts_every_core_name),
        cmocka_unit_test(test_dtype_v3_names_unknown_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
