/* Unit tests for engine/codec/codec_zlib.c: round trips, a numcodecs-written stream decodes, a
 * stream whose decoded size the chain does not know is refused, corrupt and trailing bytes are
 * SM_E_DATA, and the decoded size must be exact. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sm_test.h"
#include "codec_test.h"

#define LE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"
#define ZLIB "{\"name\":\"zlib\",\"configuration\":{\"level\":1}}"

static const uint64_t shape[1] = {1000};

static void test_zlib_round_trips(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain("[" LE "," ZLIB "]", SM_DT_INT32, 1, shape);
    uint8_t data[4000];
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_fill_smooth(data, sizeof(data), 4);
    ct_roundtrip(c, data, &enc, s);
    assert_int_equal(enc.ptr[0], 0x78);
    ct_fill_random(data, sizeof(data), 2);
    ct_roundtrip(c, data, &enc, s);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_zlib_decodes_a_numcodecs_stream(void **state)
{
    (void)state;
    const char *hex = "780105c18106c2000045d11b3162448c8888881131468c888888881823222246c4881811fd5b"
                      "44448c3122222222"
                      "7a9d73d449675d7455a254996ebaeba1a75e7aeba3af7eca91c7a08049911216652a54a951a7"
                      "814d93160e2e6d3c"
                      "3a74e9d167c090116326f8044c993167c19290156b22366c89d9b1e7c01f9c422d10";
    uint8_t enc[256];
    const size_t n = ct_hex(hex, enc, sizeof(enc));
    const uint64_t sh[1] = {64};
    struct sm_codec_chain *c = ct_chain("[" LE "," ZLIB "]", SM_DT_INT16, 1, sh);
    struct sm_scratch *s = ct_scratch();
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf dec = SM_BUF_INIT;
    assert_ok(sm_codec_chain_decode(c, sm_bytes_of(enc, n), &dec, s, &err), &err);
    int16_t v;
    memcpy(&v, dec.ptr + 2 * 63, 2);
    assert_int_equal(v, 63 * 3 - 50);
    sm_buf_free(&dec);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_zlib_refuses_an_unknown_decoded_size(void **state)
{
    (void)state;
    struct sm_codec_chain *c =
        ct_chain("[" LE ",{\"name\":\"gzip\",\"configuration\":{\"level\":1}}," ZLIB "]",
                 SM_DT_INT32, 1, shape);
    uint8_t data[4000];
    ct_fill_smooth(data, sizeof(data), 4);
    struct sm_scratch *s = ct_scratch();
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf enc = SM_BUF_INIT;
    assert_ok(sm_codec_chain_encode(c, sm_bytes_of(data, sizeof(data)), &enc, s, &err), &err);
    ct_decode_fails(c, sm_buf_bytes(&enc), SM_E_DATA, "zlib stream with unknown decoded size", s);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_zlib_decode_rejects_corrupt_and_trailing_bytes(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain("[" LE "," ZLIB "]", SM_DT_INT32, 1, shape);
    uint8_t data[4000];
    ct_fill_smooth(data, sizeof(data), 4);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    uint8_t bad[8192];
    memcpy(bad, enc.ptr, enc.len);
    bad[enc.len] = 0;
    ct_decode_fails(c, sm_bytes_of(bad, enc.len + 1), SM_E_DATA, "1 bytes follow the end", s);
    bad[enc.len - 1] ^= 0x10; /* Adler-32 */
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf dec = SM_BUF_INIT;
    assert_status(sm_codec_chain_decode(c, sm_bytes_of(bad, enc.len), &dec, s, &err), SM_E_DATA,
                  &err);
    assert_contains(err.what, "zlib: corrupt stream");
    assert_string_equal(err.cause_lib, "libdeflate");
    sm_buf_free(&dec);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_zlib_decode_rejects_a_size_mismatch(void **state)
{
    (void)state;
    const uint64_t small[1] = {999};
    struct sm_codec_chain *c = ct_chain("[" LE "," ZLIB "]", SM_DT_INT32, 1, shape);
    struct sm_codec_chain *d = ct_chain("[" LE "," ZLIB "]", SM_DT_INT32, 1, small);
    uint8_t data[4000];
    ct_fill_smooth(data, sizeof(data), 4);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(d, data, &enc, s);
    ct_decode_fails(c, sm_buf_bytes(&enc), SM_E_DATA, "zlib: decoded size 3996, expected 4000", s);
    ct_roundtrip(c, data, &enc, s);
    ct_decode_fails(d, sm_buf_bytes(&enc), SM_E_DATA, "more than the expected 3996 bytes", s);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
    sm_codec_chain_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zlib_round_trips),
        cmocka_unit_test(test_zlib_decodes_a_numcodecs_stream),
        cmocka_unit_test(test_zlib_refuses_an_unknown_decoded_size),
        cmocka_unit_test(test_zlib_decode_rejects_corrupt_and_trailing_bytes),
        cmocka_unit_test(test_zlib_decode_rejects_a_size_mismatch),
    };
    return cmocka_run_group_tests_name("codec_zlib", tests, NULL, NULL);
}
