/* Unit tests for engine/core/core_crc32c.c: published CRC-32C vectors (RFC 3720 B.4 and the Zarr
 * crc32c codec check value), incremental == one-shot, and agreement of the SSE4.2 path and the
 * slicing-by-8 table path with a bit-by-bit reference. The table path cannot be forced through the
 * public API on a CPU with SSE4.2, so the source is also compiled into this test (curl's UNITTEST
 * fallback for static helpers) with its entry point renamed, and crc_soft/crc_hw are called
 * directly. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/crc32c.h"
#include "sm_test.h"

/* The file under test, with its public symbol renamed so the library's sm_crc32c stays linked. */
#define sm_crc32c unit_crc32c_copy
uint32_t unit_crc32c_copy(uint32_t crc, const void *data, size_t n);
#include "core_crc32c.c"
#undef sm_crc32c

/* Bit-at-a-time reference: reflected Castagnoli polynomial 0x82F63B78. */
static uint32_t crc_bitwise(uint32_t crc, const uint8_t *p, size_t n)
{
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) {
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        }
    }
    return ~c;
}

/* The table path with the same pre/post conditioning as sm_crc32c. */
static uint32_t crc_table_path(uint32_t crc, const uint8_t *p, size_t n)
{
    pthread_once(&table_once, build_table);
    return ~crc_soft(~crc, p, n);
}

static uint32_t crc_hw_path(uint32_t crc, const uint8_t *p, size_t n)
{
    return ~crc_hw(~crc, p, n);
}

static void test_crc32c_check_value_123456789(void **state)
{
    (void)state;
    assert_int_equal(sm_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(crc_bitwise(0, (const uint8_t *)"123456789", 9), 0xE3069283u);
    assert_int_equal(crc_table_path(0, (const uint8_t *)"123456789", 9), 0xE3069283u);
}

static void test_crc32c_empty_input_is_zero(void **state)
{
    (void)state;
    assert_int_equal(sm_crc32c(0, "", 0), 0);
    assert_int_equal(sm_crc32c(0, NULL, 0), 0);
    assert_int_equal(sm_crc32c(0xE3069283u, NULL, 0), 0xE3069283u);
}

static void test_crc32c_rfc3720_vectors(void **state)
{
    (void)state;
    uint8_t buf[32];
    memset(buf, 0, sizeof(buf));
    assert_int_equal(sm_crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, sizeof(buf));
    assert_int_equal(sm_crc32c(0, buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++) {
        buf[i] = (uint8_t)i;
    }
    assert_int_equal(sm_crc32c(0, buf, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++) {
        buf[i] = (uint8_t)(31 - i);
    }
    assert_int_equal(sm_crc32c(0, buf, 32), 0x113FDB5Cu);
}

static void test_crc32c_text_vectors(void **state)
{
    (void)state;
    assert_int_equal(sm_crc32c(0, "a", 1), 0xC1D04330u);
    const char *fox = "The quick brown fox jumps over the lazy dog";
    assert_int_equal(sm_crc32c(0, fox, strlen(fox)), 0x22620404u);
}

static void test_crc32c_incremental_equals_one_shot(void **state)
{
    (void)state;
    struct sm_test_rng rng = {20240601};
    uint8_t data[777];
    sm_test_rng_bytes(&rng, data, sizeof(data));
    const uint32_t whole = sm_crc32c(0, data, sizeof(data));
    for (size_t cut = 0; cut <= sizeof(data); cut++) {
        uint32_t c = sm_crc32c(0, data, cut);
        c = sm_crc32c(c, data + cut, sizeof(data) - cut);
        assert_int_equal(c, whole);
    }
    /* Many small pieces of random size. */
    uint32_t c = 0;
    for (size_t pos = 0; pos < sizeof(data);) {
        size_t n = (size_t)sm_test_rng_below(&rng, 20);
        if (n > sizeof(data) - pos) {
            n = sizeof(data) - pos;
        }
        c = sm_crc32c(c, data + pos, n);
        pos += n;
    }
    assert_int_equal(c, whole);
}

static void test_crc32c_paths_agree_with_bitwise_reference(void **state)
{
    (void)state;
    struct sm_test_rng rng = {7};
    uint8_t data[1100];
    sm_test_rng_bytes(&rng, data, sizeof(data));
    /* Every length 0..300 at every misalignment 0..7, then some long ones; seeded non-zero crc. */
    for (size_t off = 0; off < 8; off++) {
        for (size_t n = 0; n <= 300; n++) {
            const uint32_t seed = (uint32_t)sm_test_rng_next(&rng);
            const uint32_t want = crc_bitwise(seed, data + off, n);
            assert_int_equal(sm_crc32c(seed, data + off, n), want);
            assert_int_equal(crc_table_path(seed, data + off, n), want);
            if (have_hw()) {
                assert_int_equal(crc_hw_path(seed, data + off, n), want);
            }
            assert_int_equal(unit_crc32c_copy(seed, data + off, n), want);
        }
    }
    for (size_t n = 1000; n < 1092; n += 13) {
        const uint32_t want = crc_bitwise(0, data, n);
        assert_int_equal(sm_crc32c(0, data, n), want);
        assert_int_equal(crc_table_path(0, data, n), want);
    }
}

/* Inputs long enough for the three interleaved streams (3 x 4096 bytes a block) and the joins by
 * the shift tables: one, two and three blocks with tails, misaligned, seeded, against the bitwise
 * reference and the table path. */
static void test_crc32c_long_inputs_three_streams(void **state)
{
    (void)state;
    struct sm_test_rng rng = {33};
    static uint8_t data[3 * 3 * 4096 + 40];
    sm_test_rng_bytes(&rng, data, sizeof(data));
    const size_t lens[] = {3 * 4096 - 1, 3 * 4096, 3 * 4096 + 7, 2 * 3 * 4096 + 13, 3 * 3 * 4096};
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        for (size_t off = 0; off < 3; off++) {
            const uint32_t seed = (uint32_t)sm_test_rng_next(&rng);
            const uint32_t want = crc_bitwise(seed, data + off, lens[k]);
            assert_int_equal(sm_crc32c(seed, data + off, lens[k]), want);
            assert_int_equal(crc_table_path(seed, data + off, lens[k]), want);
            if (have_hw()) {
                assert_int_equal(crc_hw_path(seed, data + off, lens[k]), want);
            }
        }
    }
}

static void test_crc32c_detects_single_bit_flips(void **state)
{
    (void)state;
    uint8_t data[64];
    for (int i = 0; i < 64; i++) {
        data[i] = (uint8_t)(i * 31 + 5);
    }
    const uint32_t ref = sm_crc32c(0, data, sizeof(data));
    for (int bit = 0; bit < 64 * 8; bit++) {
        data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        assert_int_not_equal(sm_crc32c(0, data, sizeof(data)), ref);
        data[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
}

int main(void)
{
    print_message("crc32c: hardware path %s\n", have_hw() ? "available" : "not available");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_check_value_123456789),
        cmocka_unit_test(test_crc32c_empty_input_is_zero),
        cmocka_unit_test(test_crc32c_rfc3720_vectors),
        cmocka_unit_test(test_crc32c_text_vectors),
        cmocka_unit_test(test_crc32c_incremental_equals_one_shot),
        cmocka_unit_test(test_crc32c_paths_agree_with_bitwise_reference),
        cmocka_unit_test(test_crc32c_long_inputs_three_streams),
        cmocka_unit_test(test_crc32c_detects_single_bit_flips),
    };
    return cmocka_run_group_tests_name("core_crc32c", tests, NULL, NULL);
}
