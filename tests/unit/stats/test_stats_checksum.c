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

static void test_checksum_box_equals_per_element_reference(void **state)
{
    (void)state;
    /* a 3x4x5 box at [1,2,3] of a 6x7x9 array */
    const uint64_t ashape[3] = {6, 7, 9}, off[3] = {1, 2, 3}, shape[3] = {3, 4, 5};
    const uint64_t stride[3] = {ashape[1] * ashape[2], ashape[2], 1};
    int16_t v[60];
    uint64_t sum = 0, weighted = 0;
    int k = 0;
    for (uint64_t z = 0; z < 3; z++) {
        for (uint64_t y = 0; y < 4; y++) {
            for (uint64_t x = 0; x < 5; x++, k++) {
                v[k] = (int16_t)(k * 37 - 900);
                uint64_t i = (off[0] + z) * stride[0] + (off[1] + y) * stride[1] + off[2] + x;
                sum += (uint64_t)(int64_t)v[k];
                weighted += (uint64_t)(int64_t)v[k] * (i + 1);
            }
        }
    }
    struct sm_checksums c = {0, 0};
    sm_checksums_add_box(&c, SM_DT_INT16, v, 3, stride, off, shape);
    assert_int_equal(c.sum, sum);
    assert_int_equal(c.weighted, weighted);
}

/* The 8- and 16-bit runs (summed in blocks of 2^15 with 32-bit products) against a per-element
 * reference: a run over several blocks, values at the type's extremes (a block of the minimum,
 * one of the maximum, then mixed), and first indexes that wrap 2^64 within the run. */
static void small_run_check(enum sm_dtype dt, size_t elem, uint64_t first)
{
    enum { N = 3 * 32768 + 4321 };
    static uint8_t buf[N * 2];
    uint32_t x = 12345;
    for (size_t i = 0; i < N; i++) {
        x = x * 1664525u + 1013904223u;
        uint16_t bits = (uint16_t)(x >> 16);
        if (i < 32768) {
            bits = elem == 1 ? 0x80 : 0x8000; /* the signed minimum */
        } else if (i < 2 * 32768 + 7) {
            bits = elem == 1 ? 0x7f : 0x7fff; /* the signed maximum */
        } else if (i % 5 == 0) {
            bits = 0xffff; /* the unsigned maximum, -1 signed */
        }
        memcpy(buf + i * elem, &bits, elem); /* little-endian: the low byte for 1-byte types */
    }
    uint64_t sum = 0, weighted = 0;
    for (size_t i = 0; i < N; i++) {
        uint64_t v;
        switch (dt) {
        case SM_DT_INT8:
            v = (uint64_t)(int64_t)((const int8_t *)buf)[i];
            break;
        case SM_DT_INT16:
            v = (uint64_t)(int64_t)((const int16_t *)buf)[i];
            break;
        case SM_DT_UINT16:
            v = ((const uint16_t *)buf)[i];
            break;
        default:
            v = buf[i];
            break;
        }
        sum += v;
        weighted += v * (first + i + 1);
    }
    for (size_t split = 0; split < 2; split++) {
        struct sm_checksums c = {0, 0};
        const size_t a = split ? 32768 + 77 : N;
        sm_checksums_add_run(&c, dt, buf, a, first);
        sm_checksums_add_run(&c, dt, buf + a * elem, N - a, first + a);
        assert_int_equal(c.sum, sum);
        assert_int_equal(c.weighted, weighted);
    }
}

static void test_checksum_small_types_blocks(void **state)
{
    (void)state;
    const uint64_t firsts[] = {0, 1000003, UINT64_MAX - 50000};
    for (size_t f = 0; f < 3; f++) {
        small_run_check(SM_DT_UINT8, 1, firsts[f]);
        small_run_check(SM_DT_INT8, 1, firsts[f]);
        small_run_check(SM_DT_BOOL, 1, firsts[f]);
        small_run_check(SM_DT_UINT16, 2, firsts[f]);
        small_run_check(SM_DT_INT16, 2, firsts[f]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checksum_signed_values_sign_extend),
        cmocka_unit_test(test_checksum_runs_compose),
        cmocka_unit_test(test_checksum_float_uses_bit_pattern),
        cmocka_unit_test(test_checksum_uint64_wraps),
        cmocka_unit_test(test_checksum_box_equals_per_element_reference),
        cmocka_unit_test(test_checksum_small_types_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
