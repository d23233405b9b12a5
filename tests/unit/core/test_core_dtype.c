/* Unit tests for engine/core/core_dtype.c: element sizes, Zarr v3 names both ways, and the
 * float/signed classification (SPEC §2 data types). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/dtype.h"
#include "sm_test.h"

static const struct {
    enum sm_dtype dt;
    const char *name;
    size_t size;
    bool is_float, is_signed;
} expected[] = {
    {SM_DT_BOOL, "bool", 1, false, false},     {SM_DT_INT8, "int8", 1, false, true},
    {SM_DT_INT16, "int16", 2, false, true},    {SM_DT_INT32, "int32", 4, false, true},
    {SM_DT_INT64, "int64", 8, false, true},    {SM_DT_UINT8, "uint8", 1, false, false},
    {SM_DT_UINT16, "uint16", 2, false, false}, {SM_DT_UINT32, "uint32", 4, false, false},
    {SM_DT_UINT64, "uint64", 8, false, false}, {SM_DT_FLOAT32, "float32", 4, true, true},
    {SM_DT_FLOAT64, "float64", 8, true, true},
};
#define NEXPECTED (sizeof(expected) / sizeof(expected[0]))

static void test_dtype_table_covers_every_type(void **state)
{
    (void)state;
    assert_int_equal(NEXPECTED, SM_DT_COUNT);
}

static void test_dtype_sizes_and_names(void **state)
{
    (void)state;
    for (size_t i = 0; i < NEXPECTED; i++) {
        assert_int_equal(sm_dtype_size(expected[i].dt), expected[i].size);
        assert_string_equal(sm_dtype_name(expected[i].dt), expected[i].name);
    }
}

static void test_dtype_name_round_trips(void **state)
{
    (void)state;
    for (int i = 0; i < SM_DT_COUNT; i++) {
        enum sm_dtype dt = SM_DT_COUNT;
        assert_true(sm_dtype_from_name(sm_dtype_name((enum sm_dtype)i), &dt));
        assert_int_equal(dt, i);
    }
}

static void test_dtype_unknown_name_is_rejected_and_output_untouched(void **state)
{
    (void)state;
    static const char *bad[] = {"",          "float",  "UINT8",   "uint8 ", "<u2",
                                "complex64", "int128", "float16", "bool8",  "invalid"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        enum sm_dtype dt = SM_DT_UINT16;
        assert_false(sm_dtype_from_name(bad[i], &dt));
        assert_int_equal(dt, SM_DT_UINT16);
    }
}

static void test_dtype_out_of_range_value_has_no_size(void **state)
{
    (void)state;
    assert_int_equal(sm_dtype_size(SM_DT_COUNT), 0);
    assert_int_equal(sm_dtype_size((enum sm_dtype) - 1), 0);
    assert_string_equal(sm_dtype_name(SM_DT_COUNT), "invalid");
    assert_string_equal(sm_dtype_name((enum sm_dtype)1000), "invalid");
}

static void test_dtype_float_and_signed_classification(void **state)
{
    (void)state;
    for (size_t i = 0; i < NEXPECTED; i++) {
        assert_int_equal(sm_dtype_is_float(expected[i].dt), expected[i].is_float);
        assert_int_equal(sm_dtype_is_signed(expected[i].dt), expected[i].is_signed);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_table_covers_every_type),
        cmocka_unit_test(test_dtype_sizes_and_names),
        cmocka_unit_test(test_dtype_name_round_trips),
        cmocka_unit_test(test_dtype_unknown_name_is_rejected_and_output_untouched),
        cmocka_unit_test(test_dtype_out_of_range_value_has_no_size),
        cmocka_unit_test(test_dtype_float_and_signed_classification),
    };
    return cmocka_run_group_tests_name("core_dtype", tests, NULL, NULL);
}
