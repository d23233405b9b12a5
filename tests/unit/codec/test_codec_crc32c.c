/* Unit tests for engine/codec/codec_crc32c.c: the appended checksum is the CRC-32C of the data,
 * little-endian (the check value of "123456789" is 0xE3069283); a mismatch is SM_E_DATA naming both
 * values; input shorter than the checksum and configuration keys are rejected. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sm_test.h"
#include "codec_test.h"
#include "shardmill/crc32c.h"

static const uint64_t nine[1] = {9};

static void test_crc32c_appends_the_checksum_little_endian(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain("[\"bytes\",\"crc32c\"]", SM_DT_UINT8, 1, nine);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, (const uint8_t *)"123456789", &enc, s);
    const uint8_t want[13] = {'1', '2', '3', '4', '5', '6', '7', '8', '9', 0x83, 0x92, 0x06, 0xe3};
    assert_int_equal(enc.len, 13);
    assert_memory_equal(enc.ptr, want, 13);
    assert_int_equal(c->stages[1].enc.len, 13);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_crc32c_decode_rejects_a_mismatch(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain("[\"bytes\",\"crc32c\"]", SM_DT_UINT8, 1, nine);
    struct sm_scratch *s = ct_scratch();
    uint8_t bad[13] = {'1', '2', '3', '4', '5', '6', '7', '8', '8', 0x83, 0x92, 0x06, 0xe3};
    char want[96];
    snprintf(want, sizeof(want), "crc32c mismatch: stored e3069283, computed %08x",
             sm_crc32c(0, "123456788", 9));
    ct_decode_fails(c, sm_bytes_of(bad, 13), SM_E_DATA, want, s);
    bad[8] = '9';
    bad[12] = 0xe4;
    ct_decode_fails(c, sm_bytes_of(bad, 13), SM_E_DATA,
                    "crc32c mismatch: stored e4069283, computed e3069283", s);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_crc32c_decode_rejects_short_input(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain("[\"bytes\",\"crc32c\"]", SM_DT_UINT8, 1, nine);
    struct sm_scratch *s = ct_scratch();
    ct_decode_fails(c, sm_bytes_of("abc", 3), SM_E_DATA, "shorter than the 4-byte checksum", s);
    ct_decode_fails(c, sm_bytes_of("abcdefghijkl", 12), SM_E_DATA,
                    "crc32c: decoded size 8, expected 9", s);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_crc32c_of_variable_length_input(void **state)
{
    (void)state;
    const uint64_t sh[1] = {1000};
    struct sm_codec_chain *c = ct_chain(
        "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"big\"}},\"zstd\",\"crc32c\"]",
        SM_DT_UINT32, 1, sh);
    assert_int_equal(c->stages[2].dec.len, SM_LEN_VARIABLE);
    assert_int_equal(c->stages[2].enc.len, SM_LEN_VARIABLE);
    uint8_t data[4000];
    ct_fill_smooth(data, sizeof(data), 4);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    const uint32_t crc = sm_crc32c(0, enc.ptr, enc.len - 4);
    uint32_t stored;
    memcpy(&stored, enc.ptr + enc.len - 4, 4);
    assert_int_equal(stored, crc);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_crc32c_takes_no_configuration(void **state)
{
    (void)state;
    struct sm_repr r;
    ct_repr(&r, SM_DT_UINT8, 1, nine);
    struct sm_err err;
    struct sm_codec_chain *c;
    assert_ok(ct_chain_try("[\"bytes\",{\"name\":\"crc32c\",\"configuration\":{}}]", &r, &c, &err),
              &err);
    sm_codec_chain_free(c);
    assert_status(
        ct_chain_try("[\"bytes\",{\"name\":\"crc32c\",\"configuration\":{\"location\":\"end\"}}]",
                     &r, &c, &err),
        SM_E_DATA, &err);
    assert_contains(err.what, "codec 'crc32c': unknown configuration key 'location'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_appends_the_checksum_little_endian),
        cmocka_unit_test(test_crc32c_decode_rejects_a_mismatch),
        cmocka_unit_test(test_crc32c_decode_rejects_short_input),
        cmocka_unit_test(test_crc32c_of_variable_length_input),
        cmocka_unit_test(test_crc32c_takes_no_configuration),
    };
    return cmocka_run_group_tests_name("codec_crc32c", tests, NULL, NULL);
}
