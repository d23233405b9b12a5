/* Unit tests for engine/codec/codec_zstd.c: round trips, the checksum flag, truncated and corrupt
 * frames, an exact decoded size, sizes taken from frame headers (several frames) when the chain
 * does not know it, frames without a content size, the reused contexts and bad levels. Of unknown
 * size, declared sizes are bounded: past the scratch's decode bound SM_E_LIMIT before any
 * allocation, past what the frames can hold SM_E_DATA; frames without a content size decode into a
 * buffer that grows only up to the bound. */
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

/* A streamed frame (no content size field) of `in`; returns its length. */
static size_t streamed_frame(const void *in, size_t n, uint8_t *frame, size_t cap)
{
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_outBuffer ob = {frame, cap, 0};
    ZSTD_inBuffer ib = {in, n, 0};
    size_t r = ZSTD_compressStream2(cc, &ob, &ib, ZSTD_e_continue);
    assert_false(ZSTD_isError(r));
    r = ZSTD_compressStream2(cc, &ob, &ib, ZSTD_e_end);
    assert_int_equal(r, 0);
    ZSTD_freeCCtx(cc);
    assert_int_equal(ZSTD_getFrameContentSize(frame, ob.pos), ZSTD_CONTENTSIZE_UNKNOWN);
    return ob.pos;
}

static void test_zstd_frame_without_content_size_of_unknown_size_grows_to_the_bound(void **state)
{
    (void)state;
    static uint8_t data[4096];
    ct_fill_smooth(data, sizeof(data), 4);
    const uint64_t sh[1] = {1024};
    struct sm_codec_chain *known = ct_chain("[" LE ",\"zstd\"]", SM_DT_INT32, 1, sh);
    struct sm_codec_chain *unknown = ct_chain("[" LE ",\"zstd\",\"zstd\"]", SM_DT_INT32, 1, sh);
    struct sm_scratch *s = ct_scratch();
    uint8_t frame[8192], inner[8192], outer[8192];
    const size_t n = streamed_frame(data, sizeof(data), frame, sizeof(frame));
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf dec = SM_BUF_INIT;
    /* With the size known from the chain, a streamed frame is fine. */
    assert_ok(sm_codec_chain_decode(known, sm_bytes_of(frame, n), &dec, s, &err), &err);
    assert_memory_equal(dec.ptr, data, sizeof(data));
    /* Of unknown size too: [bytes, zstd, zstd] with a streamed outer frame. */
    const size_t ni = ZSTD_compress(inner, sizeof(inner), data, sizeof(data), 3);
    assert_false(ZSTD_isError(ni));
    const size_t no = streamed_frame(inner, ni, outer, sizeof(outer));
    assert_ok(sm_codec_chain_decode(unknown, sm_bytes_of(outer, no), &dec, s, &err), &err);
    assert_memory_equal(dec.ptr, data, sizeof(data));
    /* A streamed bomb: 8 MiB of zeros in one frame; the buffer stops at the bound. */
    const size_t big = (size_t)8 << 20;
    uint8_t *zeros = test_calloc(1, big);
    uint8_t *bomb = test_malloc(1 << 16);
    const size_t nb = streamed_frame(zeros, big, bomb, 1 << 16);
    test_free(zeros);
    sm_scratch_set_max_decoded(s, (size_t)1 << 20);
    ct_decode_bounded(unknown, sm_bytes_of(bomb, nb), SM_E_LIMIT,
                      "zstd: frames without a content size decode to more than the decode limit of "
                      "1048576 bytes (limits.max_chunk_bytes)",
                      ((size_t)1 << 20) + (64 << 10), s);
    /* A larger bound lets it through to the next stage (zeros are not a zstd frame). */
    sm_scratch_set_max_decoded(s, (size_t)16 << 20);
    ct_decode_bounded(unknown, sm_bytes_of(bomb, nb), SM_E_DATA, "zstd", (size_t)17 << 20, s);
    test_free(bomb);
    sm_buf_free(&dec);
    sm_scratch_free(s);
    sm_codec_chain_free(known);
    sm_codec_chain_free(unknown);
}

/* Frames without a content size can decode to no more than their bytes hold (a 4-byte RLE block
 * per 128 KiB): a 114-byte input (fuzz_codec_zstd's out-of-memory find, a [bytes, zlib, zstd]
 * chain's last stage, 108 bytes after the harness's 6) once grew its buffer to 512 MiB under the
 * 1 GiB default bound; it is data after at most what its bytes can hold. */
static void test_zstd_decode_rejects_unsized_frames_past_their_input(void **state)
{
    (void)state;
    static const char fuzz_oom[] =
        "28b52ffd00450300000028b52ffd201085000001010100000000000001010169a2a2a22fa2a2a2a2a2a2"
        "a2a2a2a2a2a2a2a2efefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefef"
        "efefefefefefefefefefa2a2efefefefefefa2a2a27aec62";
    uint8_t in[128];
    const size_t n = ct_hex(fuzz_oom, in, sizeof(in));
    const uint64_t sh[1] = {1024};
    struct sm_codec_chain *unknown = ct_chain("[" LE ",\"zstd\",\"zstd\"]", SM_DT_INT32, 1, sh);
    struct sm_scratch *s = ct_scratch(); /* the default bound: 1 GiB */
    ct_decode_bounded(unknown, sm_bytes_of(in, n), SM_E_DATA,
                      "zstd: frames without a content size decode to more than", (size_t)8 << 20,
                      s);
    sm_scratch_free(s);
    sm_codec_chain_free(unknown);
}

static void test_zstd_content_size_past_the_decode_bound_is_a_limit_before_allocating(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain("[" LE ",\"zstd\",\"zstd\"]", SM_DT_INT32, 3, shape);
    const size_t big = (size_t)8 << 20;
    uint8_t *zeros = test_calloc(1, big);
    uint8_t *bomb = test_malloc(1 << 16);
    const size_t nb = ZSTD_compress(bomb, 1 << 16, zeros, big, 3); /* declares 8 MiB */
    assert_false(ZSTD_isError(nb));
    test_free(zeros);
    struct sm_scratch *s = ct_scratch();
    sm_scratch_set_max_decoded(s, (size_t)1 << 20);
    ct_decode_bounded(c, sm_bytes_of(bomb, nb), SM_E_LIMIT,
                      "zstd: frame headers declare 8388608 decoded bytes, more than the decode "
                      "limit of 1048576 bytes (limits.max_chunk_bytes)",
                      4096, s);
    test_free(bomb);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_zstd_content_size_larger_than_the_frames_can_hold_is_data(void **state)
{
    (void)state;
    /* A hand-made frame: magic, a descriptor with single segment and an 8-byte content size of
     * 4 GiB, then one raw block of 5 bytes (RFC 8878 §3.1.1). Decoded it is 5 bytes. */
    uint8_t f[32];
    size_t n = 0;
    const uint8_t magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
    memcpy(f, magic, 4);
    n = 4;
    f[n++] = 0xe0; /* FCS_Field_Size 8, Single_Segment */
    const uint64_t fcs = (uint64_t)4 << 30;
    for (int i = 0; i < 8; i++) {
        f[n++] = (uint8_t)(fcs >> (8 * i));
    }
    const uint32_t bh = 1u | (0u << 1) | (5u << 3); /* last block, raw, 5 bytes */
    f[n++] = (uint8_t)bh;
    f[n++] = (uint8_t)(bh >> 8);
    f[n++] = (uint8_t)(bh >> 16);
    memcpy(f + n, "hello", 5);
    n += 5;
    assert_int_equal(ZSTD_getFrameContentSize(f, n), fcs);
    struct sm_codec_chain *c = ct_chain("[" LE ",\"zstd\",\"zstd\"]", SM_DT_INT32, 3, shape);
    struct sm_scratch *s = ct_scratch();
    sm_scratch_set_max_decoded(s, 0); /* even without any bound */
    char want[160];
    snprintf(want, sizeof(want),
             "zstd: frame headers declare 4294967296 decoded bytes, more than %zu bytes of frames "
             "can hold",
             n);
    ct_decode_bounded(c, sm_bytes_of(f, n), SM_E_DATA, want, 4096, s);
    /* Within what 23 bytes could hold (786,432 bytes) and without a bound, zstd finds the lie. */
    const uint64_t small = 100000;
    for (int i = 0; i < 8; i++) {
        f[5 + i] = (uint8_t)(small >> (8 * i));
    }
    ct_decode_bounded(c, sm_bytes_of(f, n), SM_E_DATA, "zstd", 200000, s);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
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
        cmocka_unit_test(test_zstd_frame_without_content_size_of_unknown_size_grows_to_the_bound),
        cmocka_unit_test(test_zstd_decode_rejects_unsized_frames_past_their_input),
        cmocka_unit_test(test_zstd_content_size_past_the_decode_bound_is_a_limit_before_allocating),
        cmocka_unit_test(test_zstd_content_size_larger_than_the_frames_can_hold_is_data),
        cmocka_unit_test(test_zstd_reuses_the_thread_contexts),
        cmocka_unit_test(test_zstd_rejects_bad_configurations),
    };
    return cmocka_run_group_tests_name("codec_zstd", tests, NULL, NULL);
}
