/* Unit tests for engine/stats/stats_checksum.c: SPEC §5 sums, wrapping, float bit patterns. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include <shardmill/stats.h>

static void test_checksum_signed_values_sign_extend(void **state)
{
    (void)state;
    struct sm_checksums c = {0, 0};
    int16_t v[] = {-1024, 5, -1};
    sm_checksums_add_run(&c, SM_DT_INT16, v, 3, 10);
    assert_int_equal((int64_t)c.sum, -1020);
    /* weighted: -1024*11 + 5*12 + -1*13 mod 2^64 */
    assert_int_equal((int64_t)c.weighted, -1024 * 11 + 5 * 12 - 13);
}

static void test_checksum_runs_compose(void **state)
{
    (void)state;
    struct sm_checksums one = {0, 0}, two = {0, 0};
    uint8_t v[100];
    for (int i = 0; i < 100; i++) {
        v[i] = (uint8_t)(i * 3);
    }
    sm_checksums_add_run(&one, SM_DT_UINT8, v, 100, 1000);
    sm_checksums_add_run(&two, SM_DT_UINT8, v, 37, 1000);
    sm_checksums_add_run(&two, SM_DT_UINT8, v + 37, 63, 1037);
    assert_int_equal(one.sum, two.sum);
    assert_int_equal(one.weighted, two.weighted);
}

static void test_checksum_float_uses_bit_pattern(void **state)
{
    (void)state;
    struct sm_checksums c = {0, 0};
    float v[] = {1.0f, -0.0f};
    sm_checksums_add_run(&c, SM_DT_FLOAT32, v, 2, 0);
    assert_int_equal(c.sum, 0x3f800000ull + 0x80000000ull);
    assert_int_equal(c.weighted, 0x3f800000ull * 1 + 0x80000000ull * 2);
}

static void test_checksum_uint64_wraps(void **state)
{
    (void)state;
    struct sm_checksums c = {0, 0};
    uint64_t v[] = {UINT64_MAX, 2};
    sm_checksums_add_run(&c, SM_DT_UINT64, v, 2, 0);
    assert_int_equal(c.sum, 1);
    assert_int_equal(c.weighted, UINT64_MAX * 1ull + 4ull);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checksum_signed_values_sign_extend),
        cmocka_unit_test(test_checksum_runs_compose),
        cmocka_unit_test(test_checksum_float_uses_bit_pattern),
        cmocka_unit_test(test_checksum_uint64_wraps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
