/* Unit tests for engine/codec/codec_gzip.c: round trips at every level, a numcodecs-written
 * member (header with mtime) decodes, corrupt and truncated streams are SM_E_DATA with the
 * libdeflate result as cause, the decoded size must be exact, an unknown size is taken from ISIZE,
 * concatenated members decode when the size is known, and levels outside 0..9 are rejected.
 * Of unknown size (after another bytes->bytes codec), ISIZE is bounded: past the scratch's decode
 * bound it is SM_E_LIMIT before any allocation, past what the member can hold SM_E_DATA, and a
 * bomb whose ISIZE lies small stops at the bound; an empty member decodes into an empty buffer
 * (no NULL + 0 under UBSan). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <libdeflate.h>

#include "sm_test.h"
#include "codec_test.h"

#define LE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"

static const uint64_t shape[2] = {30, 40};

static struct sm_codec_chain *gz(int level)
{
    char text[256];
    snprintf(text, sizeof(text), "[" LE ",{\"name\":\"gzip\",\"configuration\":{\"level\":%d}}]",
             level);
    return ct_chain(text, SM_DT_UINT16, 2, shape);
}

static void test_gzip_round_trips_at_every_level(void **state)
{
    (void)state;
    uint8_t data[2400];
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    for (int level = 0; level <= 9; level++) {
        struct sm_codec_chain *c = gz(level);
        ct_fill_smooth(data, sizeof(data), 2);
        ct_roundtrip(c, data, &enc, s);
        assert_int_equal(enc.ptr[0], 0x1f);
        assert_int_equal(enc.ptr[1], 0x8b);
        if (level > 0) {
            assert_true(enc.len < sizeof(data));
        }
        ct_fill_random(data, sizeof(data), (uint64_t)level);
        ct_roundtrip(c, data, &enc, s);
        sm_codec_chain_free(c);
    }
    sm_buf_free(&enc);
    sm_scratch_free(s);
}

static void test_gzip_decode_rejects_a_corrupt_stream(void **state)
{
    (void)state;
    struct sm_codec_chain *c = gz(6);
    uint8_t data[2400];
    ct_fill_smooth(data, sizeof(data), 2);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    enc.ptr[enc.len / 2] ^= 0xff;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf dec = SM_BUF_INIT;
    assert_status(sm_codec_chain_decode(c, sm_buf_bytes(&enc), &dec, s, &err), SM_E_DATA, &err);
    assert_string_equal(err.cause_lib, "libdeflate");
    assert_true(err.cause == LIBDEFLATE_BAD_DATA || err.cause == LIBDEFLATE_INSUFFICIENT_SPACE);
    enc.ptr[enc.len / 2] ^= 0xff;
    enc.ptr[enc.len - 6] ^= 0x01; /* the CRC-32 trailer */
    ct_decode_fails(c, sm_buf_bytes(&enc), SM_E_DATA, "gzip: corrupt stream at byte 0", s);
    ct_decode_fails(c, sm_bytes_of(enc.ptr, 10), SM_E_DATA, "shorter than a gzip member", s);
    sm_buf_free(&dec);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_gzip_decode_rejects_a_size_mismatch(void **state)
{
    (void)state;
    const uint64_t other[2] = {30, 41};
    struct sm_codec_chain *c = gz(1);
    struct sm_codec_chain *big = ct_chain(
        "[" LE ",{\"name\":\"gzip\",\"configuration\":{\"level\":1}}]", SM_DT_UINT16, 2, other);
    uint8_t data[2460];
    ct_fill_smooth(data, sizeof(data), 2);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(big, data, &enc, s);
    ct_decode_fails(c, sm_buf_bytes(&enc), SM_E_DATA, "decodes to more than the expected size", s);
    ct_roundtrip(c, data, &enc, s);
    ct_decode_fails(big, sm_buf_bytes(&enc), SM_E_DATA, "gzip: decoded size 2400, expected 2460",
                    s);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
    sm_codec_chain_free(big);
}

static void test_gzip_unknown_size_comes_from_isize(void **state)
{
    (void)state;
    /* The outer gzip's decoded side is itself a gzip stream: its size is not known upfront. */
    struct sm_codec_chain *c =
        ct_chain("[" LE ",{\"name\":\"gzip\",\"configuration\":{\"level\":1}},{\"name\":\"gzip\","
                 "\"configuration\":{\"level\":9}}]",
                 SM_DT_UINT16, 2, shape);
    assert_int_equal(c->stages[2].dec.len, SM_LEN_VARIABLE);
    uint8_t data[2400];
    ct_fill_random(data, sizeof(data), 8);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    /* A lying ISIZE is caught: the stream does not fit the buffer it sized. */
    enc.ptr[enc.len - 4] ^= 0x01;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf dec = SM_BUF_INIT;
    assert_status(sm_codec_chain_decode(c, sm_buf_bytes(&enc), &dec, s, &err), SM_E_DATA, &err);
    sm_buf_free(&dec);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_gzip_decodes_concatenated_members(void **state)
{
    (void)state;
    struct sm_codec_chain *c = gz(5);
    uint8_t data[2400];
    ct_fill_smooth(data, sizeof(data), 2);
    struct libdeflate_compressor *lc = libdeflate_alloc_compressor(5);
    uint8_t two[8192];
    size_t a = libdeflate_gzip_compress(lc, data, 1000, two, sizeof(two));
    size_t b = libdeflate_gzip_compress(lc, data + 1000, 1400, two + a, sizeof(two) - a);
    libdeflate_free_compressor(lc);
    assert_true(a > 0 && b > 0);
    struct sm_scratch *s = ct_scratch();
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf dec = SM_BUF_INIT;
    assert_ok(sm_codec_chain_decode(c, sm_bytes_of(two, a + b), &dec, s, &err), &err);
    assert_memory_equal(dec.ptr, data, sizeof(data));
    two[a + b] = 0;
    ct_decode_fails(c, sm_bytes_of(two, a + b + 1), SM_E_DATA, "gzip: corrupt stream at byte", s);
    sm_buf_free(&dec);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_gzip_decodes_a_numcodecs_member(void **state)
{
    (void)state;
    /* numcodecs.GZip(level=1).encode(np.arange(64, dtype="<i2") * 3 - 50): mtime is set. */
    const char *hex = "1f8b08002d18106b04ff05c18106c2000045d11b3162448c8888881131468c88888888182322"
                      "2246c4881811fd5b"
                      "44448c31222222227a9d73d449675d7455a254996ebaeba1a75e7aeba3af7eca91c7a0804991"
                      "1216652a54a951a7"
                      "814d93160e2e6d3c3a74e9d167c090116326f8044c993167c19290156b22366c89d9b1e7c01f"
                      "14a2bc3380000000";
    uint8_t enc[256];
    const size_t n = ct_hex(hex, enc, sizeof(enc));
    const uint64_t sh[1] = {64};
    struct sm_codec_chain *c = ct_chain(
        "[" LE ",{\"name\":\"gzip\",\"configuration\":{\"level\":1}}]", SM_DT_INT16, 1, sh);
    struct sm_scratch *s = ct_scratch();
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf dec = SM_BUF_INIT;
    assert_ok(sm_codec_chain_decode(c, sm_bytes_of(enc, n), &dec, s, &err), &err);
    for (int i = 0; i < 64; i++) {
        int16_t v;
        memcpy(&v, dec.ptr + 2 * i, 2);
        assert_int_equal(v, i * 3 - 50);
    }
    sm_buf_free(&dec);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_gzip_rejects_bad_levels(void **state)
{
    (void)state;
    struct sm_repr r;
    ct_repr(&r, SM_DT_UINT16, 2, shape);
    struct sm_err err;
    struct sm_codec_chain *c;
    assert_status(
        ct_chain_try("[" LE ",{\"name\":\"gzip\",\"configuration\":{\"level\":10}}]", &r, &c, &err),
        SM_E_DATA, &err);
    assert_contains(err.what, "codec 'gzip': 'level' is 10, outside 0..9");
    assert_status(ct_chain_try("[" LE ",{\"name\":\"gzip\",\"configuration\":{\"level\":\"1\"}}]",
                               &r, &c, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "'level' must be an integer");
    /* numcodecs configurations carry their id */
    assert_ok(ct_chain_try("[" LE ",{\"name\":\"gzip\",\"configuration\":{\"id\":\"gzip\","
                           "\"level\":1}}]",
                           &r, &c, &err),
              &err);
    sm_codec_chain_free(c);
}

/* [bytes, gzip, gzip]: the last gzip's decoded size is unknown. */
static struct sm_codec_chain *gz_unknown(void)
{
    struct sm_codec_chain *c =
        ct_chain("[" LE ",{\"name\":\"gzip\",\"configuration\":{\"level\":1}},{\"name\":\"gzip\","
                 "\"configuration\":{\"level\":1}}]",
                 SM_DT_UINT16, 2, shape);
    assert_int_equal(c->stages[2].dec.len, SM_LEN_VARIABLE);
    return c;
}

/* A gzip member of n zero bytes (a bomb: 8 MiB compress to about 8 KiB); *len its size. */
static uint8_t *zero_member(size_t n, size_t *len)
{
    uint8_t *zeros = test_calloc(1, n);
    struct libdeflate_compressor *lc = libdeflate_alloc_compressor(9);
    const size_t cap = libdeflate_gzip_compress_bound(lc, n);
    uint8_t *m = test_malloc(cap);
    *len = libdeflate_gzip_compress(lc, zeros, n, m, cap);
    libdeflate_free_compressor(lc);
    test_free(zeros);
    assert_true(*len > 0 && *len < n / 500);
    return m;
}

static void set_isize(uint8_t *m, size_t len, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        m[len - 4 + (size_t)i] = (uint8_t)(v >> (8 * i));
    }
}

/* Decodes expecting `status` and `needle`; the engine's allocations during the decode stay below
 * `most` bytes above what was allocated before. */
static void test_gzip_isize_past_the_decode_bound_is_a_limit_before_allocating(void **state)
{
    (void)state;
    struct sm_codec_chain *c = gz_unknown();
    struct sm_scratch *s = ct_scratch();
    size_t len;
    uint8_t *m = zero_member((size_t)8 << 20, &len);
    sm_scratch_set_max_decoded(s, (size_t)1 << 20);
    ct_decode_bounded(c, sm_bytes_of(m, len), SM_E_LIMIT,
                      "gzip: trailer declares 8388608 decoded bytes, more than the decode limit of "
                      "1048576 bytes (limits.max_chunk_bytes)",
                      64 << 10, s);
    /* The default bound (1 GiB) lets the same member through to the next stage. */
    sm_scratch_set_max_decoded(s, SM_SCRATCH_MAX_DECODED_DEFAULT);
    ct_decode_bounded(c, sm_bytes_of(m, len), SM_E_DATA, "gzip", (size_t)9 << 20, s);
    test_free(m);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_gzip_bomb_with_a_small_isize_stops_at_the_decode_bound(void **state)
{
    (void)state;
    struct sm_codec_chain *c = gz_unknown();
    struct sm_scratch *s = ct_scratch();
    size_t len;
    uint8_t *m = zero_member((size_t)8 << 20, &len);
    set_isize(m, len, 100);
    sm_scratch_set_max_decoded(s, (size_t)1 << 20);
    /* the buffer grows 100 -> 64 KiB -> ... -> 1 MiB and the member still does not fit */
    ct_decode_bounded(c, sm_bytes_of(m, len), SM_E_LIMIT,
                      "gzip: member decodes to more than the decode limit of 1048576 bytes",
                      ((size_t)1 << 20) + (64 << 10), s);
    /* Within the bound, the lie is caught by libdeflate's ISIZE check. */
    sm_scratch_set_max_decoded(s, (size_t)16 << 20);
    ct_decode_bounded(c, sm_bytes_of(m, len), SM_E_DATA, "gzip: corrupt stream at byte 0",
                      (size_t)17 << 20, s);
    test_free(m);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_gzip_isize_larger_than_the_member_can_hold_is_data(void **state)
{
    (void)state;
    struct sm_codec_chain *c = gz_unknown();
    struct sm_scratch *s = ct_scratch();
    size_t len;
    uint8_t *m = zero_member((size_t)1 << 20, &len);
    set_isize(m, len, 0xfffffff0u);   /* ~4 GiB from about 1 KiB: more than deflate can expand */
    sm_scratch_set_max_decoded(s, 0); /* even without any bound */
    char want[160];
    snprintf(want, sizeof(want),
             "gzip: trailer declares 4294967280 decoded bytes, more than a %zu-byte member can "
             "hold",
             len);
    ct_decode_bounded(c, sm_bytes_of(m, len), SM_E_DATA, want, 4096, s);
    test_free(m);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_gzip_empty_member_decodes_into_an_empty_buffer(void **state)
{
    (void)state;
    /* Run under the ASan/UBSan build: a fresh output buffer has ptr NULL, and the decoder must not
     * form NULL + 0 for a member that decodes to nothing. */
    struct libdeflate_compressor *lc = libdeflate_alloc_compressor(6);
    uint8_t m[64];
    const uint8_t none = 0;
    const size_t len = libdeflate_gzip_compress(lc, &none, 0, m, sizeof(m));
    libdeflate_free_compressor(lc);
    assert_true(len >= 18);
    struct sm_scratch *s = ct_scratch();
    struct sm_err err;
    sm_err_clear(&err);
    /* known size 0: a chunk with an empty axis */
    const uint64_t empty[2] = {0, 40};
    struct sm_codec_chain *known = ct_chain(
        "[" LE ",{\"name\":\"gzip\",\"configuration\":{\"level\":1}}]", SM_DT_UINT16, 2, empty);
    struct sm_buf dec = SM_BUF_INIT;
    assert_ok(sm_codec_chain_decode(known, sm_bytes_of(m, len), &dec, s, &err), &err);
    assert_int_equal(dec.len, 0);
    /* GCC's UBSan does not flag NULL + 0 (clang's does): the destination handed to libdeflate
     * was a real buffer, so this fails wherever the old NULL + 0 was formed */
    assert_non_null(dec.ptr);
    sm_buf_free(&dec);
    /* unknown size: the last stage of [bytes, gzip, gzip] straight through its decode slot */
    struct sm_codec_chain *c = gz_unknown();
    const struct sm_codec_stage *st = &c->stages[2];
    struct sm_buf out = SM_BUF_INIT;
    assert_ok(st->ops->decode(st->prep, sm_bytes_of(m, len), &out, s, &err), &err);
    assert_int_equal(out.len, 0);
    assert_non_null(out.ptr);
    sm_buf_free(&out);
    /* and empty input (ptr NULL) is refused before anything is read */
    ct_decode_fails(c, sm_bytes_of(NULL, 0), SM_E_DATA,
                    "gzip: stream of 0 bytes is shorter than a gzip member", s);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
    sm_codec_chain_free(known);
}

static void test_gzip_scratch_decodes_again_after_hitting_the_bound(void **state)
{
    (void)state;
    struct sm_codec_chain *c = gz_unknown();
    struct sm_scratch *s = ct_scratch();
    size_t len;
    uint8_t *m = zero_member((size_t)8 << 20, &len);
    sm_scratch_set_max_decoded(s, (size_t)1 << 20);
    ct_decode_bounded(c, sm_bytes_of(m, len), SM_E_LIMIT, "decode limit", 64 << 10, s);
    uint8_t data[2400];
    ct_fill_random(data, sizeof(data), 3);
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s); /* well inside the bound */
    sm_buf_free(&enc);
    test_free(m);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gzip_round_trips_at_every_level),
        cmocka_unit_test(test_gzip_decode_rejects_a_corrupt_stream),
        cmocka_unit_test(test_gzip_decode_rejects_a_size_mismatch),
        cmocka_unit_test(test_gzip_unknown_size_comes_from_isize),
        cmocka_unit_test(test_gzip_decodes_concatenated_members),
        cmocka_unit_test(test_gzip_decodes_a_numcodecs_member),
        cmocka_unit_test(test_gzip_rejects_bad_levels),
        cmocka_unit_test(test_gzip_isize_past_the_decode_bound_is_a_limit_before_allocating),
        cmocka_unit_test(test_gzip_bomb_with_a_small_isize_stops_at_the_decode_bound),
        cmocka_unit_test(test_gzip_isize_larger_than_the_member_can_hold_is_data),
        cmocka_unit_test(test_gzip_empty_member_decodes_into_an_empty_buffer),
        cmocka_unit_test(test_gzip_scratch_decodes_again_after_hitting_the_bound),
    };
    return cmocka_run_group_tests_name("codec_gzip", tests, NULL, NULL);
}
