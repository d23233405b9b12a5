/* Unit tests for engine/core/core_dtype.c: element sizes, Zarr v3 names both ways, and the
 * float/signed classification (SPEC §2 data types). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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

/* What the dispatch saw of T: its size, whether it is a float, whether it is signed. */
struct seen {
    int runs;
    size_t size;
    bool is_float, is_signed;
};

#define LOOK(T, out)                                                                               \
    do {                                                                                           \
        (out)->runs++;                                                                             \
        (out)->size = sizeof(T);                                                                   \
        (out)->is_float = (T)0.5 != (T)0;                                                          \
        T minus_one_ = (T)-1, zero_ = (T)0;                                                        \
        (out)->is_signed = minus_one_ < zero_;                                                     \
    } while (0)

static void test_dtype_dispatch_gives_every_type_its_c_type(void **state)
{
    (void)state;
    for (int i = 0; i < SM_DT_COUNT; i++) {
        const enum sm_dtype dt = (enum sm_dtype)i;
        struct seen s = {0};
        SM_DTYPE_DISPATCH(dt, T, LOOK(T, &s));
        assert_int_equal(s.runs, 1);
        assert_int_equal(s.size, sm_dtype_size(dt));
        assert_int_equal(s.is_float, sm_dtype_is_float(dt));
        assert_int_equal(s.is_signed, sm_dtype_is_signed(dt) || sm_dtype_is_float(dt));
    }
}

static void test_dtype_dispatch_runs_nothing_for_an_invalid_type(void **state)
{
    (void)state;
    struct seen s = {0};
    SM_DTYPE_DISPATCH(SM_DT_COUNT, T, LOOK(T, &s));
    SM_DTYPE_DISPATCH((enum sm_dtype)99, T, LOOK(T, &s));
    assert_int_equal(s.runs, 0);
}

static void test_dtype_dispatch_nests_and_converts_like_c(void **state)
{
    (void)state;
    const int16_t values[3] = {-2, 0, 300};
    const void *in = values; /* every branch is compiled: the kernels take untyped spans */
    uint8_t out8[3] = {0};
    double outd[3] = {0};
    SM_DTYPE_DISPATCH(SM_DT_INT16, F, SM_DTYPE_DISPATCH(SM_DT_UINT8, O, {
                          const F *p = in;
                          for (int k = 0; k < 3; k++) {
                              out8[k] = (O)p[k];
                          }
                      }));
    SM_DTYPE_DISPATCH(SM_DT_INT16, F, SM_DTYPE_DISPATCH(SM_DT_FLOAT64, O, {
                          const F *p = in;
                          for (int k = 0; k < 3; k++) {
                              outd[k] = (O)p[k];
                          }
                      }));
    assert_int_equal(out8[0], 254);
    assert_int_equal(out8[2], 44);
    assert_true(outd[0] == -2.0 && outd[1] == 0.0 && outd[2] == 300.0);
}

/* A table indexed by value holds every bit pattern of the 8- and 16-bit types, none of a wider
 * or floating one (the histogram's raw counts and the normalization's lookup table). */
static void test_dtype_patterns_of_narrow_integers_only(void **state)
{
    (void)state;
    assert_int_equal(sm_dtype_patterns(SM_DT_BOOL), 256);
    assert_int_equal(sm_dtype_patterns(SM_DT_INT8), 256);
    assert_int_equal(sm_dtype_patterns(SM_DT_UINT8), 256);
    assert_int_equal(sm_dtype_patterns(SM_DT_INT16), 65536);
    assert_int_equal(sm_dtype_patterns(SM_DT_UINT16), 65536);
    const enum sm_dtype wide[] = {SM_DT_INT32,   SM_DT_UINT32,  SM_DT_INT64, SM_DT_UINT64,
                                  SM_DT_FLOAT32, SM_DT_FLOAT64, SM_DT_COUNT};
    for (size_t i = 0; i < sizeof(wide) / sizeof(wide[0]); i++) {
        assert_int_equal(sm_dtype_patterns(wide[i]), 0);
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
        cmocka_unit_test(test_dtype_patterns_of_narrow_integers_only),
        cmocka_unit_test(test_dtype_dispatch_gives_every_type_its_c_type),
        cmocka_unit_test(test_dtype_dispatch_runs_nothing_for_an_invalid_type),
        cmocka_unit_test(test_dtype_dispatch_nests_and_converts_like_c),
    };
    return cmocka_run_group_tests_name("core_dtype", tests, NULL, NULL);
}
