/* Unit tests for engine/codec/codec_zstd.c: round trips, the checksum flag, truncated and corrupt
 * frames, an exact decoded size, sizes taken from frame headers (several frames) when the chain
 * does not know it, frames without a content size, the reused contexts and bad levels. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "sm_test.h"
#include "codec_test.h"

#define LE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"

static const uint64_t shape[3] = {16, 16, 16};

static struct sm_codec_chain *zs(int level, bool checksum)
{
    char text[256];
    snprintf(text, sizeof(text),
             "[" LE ",{\"name\":\"zstd\",\"configuration\":{\"level\":%d,\"checksum\":%s}}]", level,
             checksum ? "true" : "false");
    return ct_chain(text, SM_DT_INT32, 3, shape);
}

static void test_zstd_round_trips(void **state)
{
    (void)state;
    static uint8_t data[16384];
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    const int levels[] = {-5, 1, 3, 9, 19};
    for (size_t i = 0; i < 5; i++) {
        struct sm_codec_chain *c = zs(levels[i], i % 2 == 0);
        ct_fill_smooth(data, sizeof(data), 4);
        ct_roundtrip(c, data, &enc, s);
        assert_true(enc.len < sizeof(data) / 2);
        assert_int_equal(ZSTD_getFrameContentSize(enc.ptr, enc.len), sizeof(data));
        ct_fill_random(data, sizeof(data), i);
        ct_roundtrip(c, data, &enc, s);
        sm_codec_chain_free(c);
    }
    sm_buf_free(&enc);
    sm_scratch_free(s);
}

static void test_zstd_checksum_flag_detects_a_flipped_byte(void **state)
{
    (void)state;
    static uint8_t data[16384];
    ct_fill_random(data, sizeof(data), 3); /* incompressible: stored as raw blocks */
    struct sm_scratch *s = ct_scratch();
    struct sm_buf with = SM_BUF_INIT, without = SM_BUF_INIT;
    struct sm_codec_chain *a = zs(3, true), *b = zs(3, false);
    ct_roundtrip(a, data, &with, s);
    ct_roundtrip(b, data, &without, s);
    assert_int_equal(with.len, without.len + 4); /* the 32-bit content checksum */
    with.ptr[with.len / 2] ^= 0x01;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf dec = SM_BUF_INIT;
    assert_status(sm_codec_chain_decode(a, sm_buf_bytes(&with), &dec, s, &err), SM_E_DATA, &err);
    assert_string_equal(err.cause_lib, "zstd");
    assert_int_equal(err.cause, ZSTD_error_checksum_wrong);
    sm_buf_free(&dec);
    sm_buf_free(&with);
    sm_buf_free(&without);
    sm_scratch_free(s);
    sm_codec_chain_free(a);
    sm_codec_chain_free(b);
}

static void test_zstd_decode_rejects_truncated_frame(void **state)
{
    (void)state;
    static uint8_t data[16384];
    ct_fill_smooth(data, sizeof(data), 4);
    struct sm_codec_chain *c = zs(3, false);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf dec = SM_BUF_INIT;
    assert_status(sm_codec_chain_decode(c, sm_bytes_of(enc.ptr, enc.len - 1), &dec, s, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "zstd: frame of");
    assert_string_equal(err.cause_lib, "zstd");
    ct_decode_fails(c, sm_bytes_of(enc.ptr, 3), SM_E_DATA, "zstd: frame of 3 bytes", s);
    ct_decode_fails(c, sm_bytes_of(enc.ptr, 0), SM_E_DATA, "zstd: frame of 0 bytes", s);
    sm_buf_free(&dec);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_zstd_decode_rejects_size_mismatch(void **state)
{
    (void)state;
    static uint8_t data[16384];
    ct_fill_smooth(data, sizeof(data), 4);
    /* A frame of 16383 bytes, and one of 16384 + 4, for a chunk of 16384. */
    uint8_t frame[20000];
    size_t n = ZSTD_compress(frame, sizeof(frame), data, sizeof(data) - 1, 3);
    assert_false(ZSTD_isError(n));
    struct sm_codec_chain *c = zs(3, false);
    struct sm_scratch *s = ct_scratch();
    ct_decode_fails(c, sm_bytes_of(frame, n), SM_E_DATA, "zstd: decoded size 16383, expected 16384",
                    s);
    static uint8_t bigger[16388];
    memcpy(bigger, data, sizeof(data));
    n = ZSTD_compress(frame, sizeof(frame), bigger, sizeof(bigger), 3);
    ct_decode_fails(c, sm_bytes_of(frame, n), SM_E_DATA, "more than the expected 16384 bytes", s);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_zstd_unknown_size_comes_from_frame_headers(void **state)
{
    (void)state;
    /* [bytes, zstd, zstd]: the last zstd's decoded size is unknown; give it two frames. */
    struct sm_codec_chain *c = ct_chain("[" LE ",\"zstd\",\"zstd\"]", SM_DT_INT32, 3, shape);
    assert_int_equal(c->stages[2].dec.len, SM_LEN_VARIABLE);
    static uint8_t data[16384];
    ct_fill_smooth(data, sizeof(data), 4);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    uint8_t inner[20000], outer[20000];
    size_t ni = ZSTD_compress(inner, sizeof(inner), data, sizeof(data), 1);
    size_t a = ZSTD_compress(outer, sizeof(outer), inner, 100, 1);
    size_t b = ZSTD_compress(outer + a, sizeof(outer) - a, inner + 100, ni - 100, 1);
    assert_false(ZSTD_isError(a) || ZSTD_isError(b));
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf dec = SM_BUF_INIT;
    assert_ok(sm_codec_chain_decode(c, sm_bytes_of(outer, a + b), &dec, s, &err), &err);
    assert_memory_equal(dec.ptr, data, sizeof(data));
    ct_decode_fails(c, sm_bytes_of(data, 64), SM_E_DATA, "are not a sequence of zstd frames", s);
    sm_buf_free(&dec);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_zstd_refuses_a_frame_without_content_size_of_unknown_size(void **state)
{
    (void)state;
    static uint8_t data[4096];
    ct_fill_smooth(data, sizeof(data), 4);
    /* A streamed frame has no content size field. */
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    uint8_t frame[8192];
    ZSTD_outBuffer ob = {frame, sizeof(frame), 0};
    ZSTD_inBuffer ib = {data, sizeof(data), 0};
    size_t r = ZSTD_compressStream2(cc, &ob, &ib, ZSTD_e_continue);
    assert_false(ZSTD_isError(r));
    r = ZSTD_compressStream2(cc, &ob, &ib, ZSTD_e_end);
    assert_int_equal(r, 0);
    ZSTD_freeCCtx(cc);
    assert_int_equal(ZSTD_getFrameContentSize(frame, ob.pos), ZSTD_CONTENTSIZE_UNKNOWN);
    const uint64_t sh[1] = {1024};
    struct sm_codec_chain *known = ct_chain("[" LE ",\"zstd\"]", SM_DT_INT32, 1, sh);
    struct sm_codec_chain *unknown = ct_chain("[" LE ",\"zstd\",\"zstd\"]", SM_DT_INT32, 1, sh);
    struct sm_scratch *s = ct_scratch();
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf dec = SM_BUF_INIT;
    /* With the size known from the chain, a streamed frame is fine. */
    assert_ok(sm_codec_chain_decode(known, sm_bytes_of(frame, ob.pos), &dec, s, &err), &err);
    assert_memory_equal(dec.ptr, data, sizeof(data));
    ct_decode_fails(unknown, sm_bytes_of(frame, ob.pos), SM_E_DATA, "frame without a content size",
                    s);
    sm_buf_free(&dec);
    sm_scratch_free(s);
    sm_codec_chain_free(known);
    sm_codec_chain_free(unknown);
}

static void test_zstd_reuses_the_thread_contexts(void **state)
{
    (void)state;
    static uint8_t data[16384];
    ct_fill_smooth(data, sizeof(data), 4);
    struct sm_codec_chain *a = zs(1, false), *b = zs(19, true);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT, ref = SM_BUF_INIT;
    ct_roundtrip(a, data, &enc, s);
    struct ZSTD_DCtx_s *d = s->zstd_d;
    struct ZSTD_CCtx_s *cc = s->zstd_c;
    assert_non_null(d);
    assert_non_null(cc);
    ct_roundtrip(b, data, &ref, s);
    ct_roundtrip(a, data, &enc, s);
    assert_ptr_equal(s->zstd_d, d);
    assert_ptr_equal(s->zstd_c, cc);
    /* Parameters do not leak from one encode into the next: level 1 output is reproduced. */
    struct sm_scratch *fresh = ct_scratch();
    struct sm_buf again = SM_BUF_INIT;
    ct_roundtrip(a, data, &again, fresh);
    assert_int_equal(again.len, enc.len);
    assert_memory_equal(again.ptr, enc.ptr, enc.len);
    sm_buf_free(&again);
    sm_scratch_free(fresh);
    sm_buf_free(&enc);
    sm_buf_free(&ref);
    sm_scratch_free(s);
    sm_codec_chain_free(a);
    sm_codec_chain_free(b);
}

static void test_zstd_rejects_bad_configurations(void **state)
{
    (void)state;
    struct sm_repr r;
    ct_repr(&r, SM_DT_INT32, 3, shape);
    struct sm_err err;
    struct sm_codec_chain *c;
    assert_status(
        ct_chain_try("[" LE ",{\"name\":\"zstd\",\"configuration\":{\"level\":23}}]", &r, &c, &err),
        SM_E_DATA, &err);
    assert_contains(err.what, "codec 'zstd': 'level' is 23, outside");
    assert_status(ct_chain_try("[" LE ",{\"name\":\"zstd\",\"configuration\":{\"checksum\":1}}]",
                               &r, &c, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "'checksum' must be true or false");
    assert_status(ct_chain_try("[" LE ",{\"name\":\"zstd\",\"configuration\":[]}]", &r, &c, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "configuration must be a JSON object");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zstd_round_trips),
        cmocka_unit_test(test_zstd_checksum_flag_detects_a_flipped_byte),
        cmocka_unit_test(test_zstd_decode_rejects_truncated_frame),
        cmocka_unit_test(test_zstd_decode_rejects_size_mismatch),
        cmocka_unit_test(test_zstd_unknown_size_comes_from_frame_headers),
        cmocka_unit_test(test_zstd_refuses_a_frame_without_content_size_of_unknown_size),
        cmocka_unit_test(test_zstd_reuses_the_thread_contexts),
        cmocka_unit_test(test_zstd_rejects_bad_configurations),
    };
    return cmocka_run_group_tests_name("codec_zstd", tests, NULL, NULL);
}
