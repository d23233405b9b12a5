/* Tests shared by the unit tests of the stream codecs loaded on demand (test_codec_xz.c,
 * test_codec_bz2.c): round trip, trailing bytes, truncation, a stream longer than the known size,
 * and, of unknown size, a bomb refused at the scratch's decode bound with bounded allocations.
 * Include after codec_test.h with STREAM_CODEC (the v3 name), STREAM_WORD (how its messages
 * start) and STREAM_CFG (a configuration object giving the smallest decoder state) defined. */
#ifndef SM_TESTS_UNIT_CODEC_STREAM_CODEC_TEST_H
#define SM_TESTS_UNIT_CODEC_STREAM_CODEC_TEST_H

#define SC_LE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"
#define SC_ONE "{\"name\":\"" STREAM_CODEC "\",\"configuration\":" STREAM_CFG "}"

static const uint64_t sc_shape[3] = {16, 16, 16};

static void sc_encode(const struct sm_codec_chain *c, const uint8_t *data, struct sm_buf *enc,
                      struct sm_scratch *s)
{
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(
        sm_codec_chain_encode(c, sm_bytes_of(data, sm_codec_chain_repr(c)->len), enc, s, &err),
        &err);
}

static void test_stream_round_trips_and_rejects_damage(void **state)
{
    (void)state;
    static uint8_t data[16384];
    ct_fill_smooth(data, sizeof(data), 4);
    struct sm_codec_chain *c = ct_chain("[" SC_LE "," SC_ONE "]", SM_DT_INT32, 3, sc_shape);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    assert_true(enc.len < sizeof(data) / 4); /* smooth data compresses */
    /* one byte more: trailing garbage after the stream */
    struct sm_buf more = SM_BUF_INIT;
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_buf_reserve(&more, enc.len + 1, &err), &err);
    memcpy(more.ptr, enc.ptr, enc.len);
    more.ptr[enc.len] = 0;
    more.len = enc.len + 1;
    ct_decode_fails(c, sm_buf_bytes(&more), SM_E_DATA, STREAM_WORD ":", s);
    /* cut short: truncated */
    ct_decode_fails(c, sm_bytes_of(enc.ptr, enc.len - 10), SM_E_DATA, STREAM_WORD ":", s);
    /* a stream of 16384 bytes where the chunk holds 8192 */
    const uint64_t half[3] = {8, 16, 16};
    struct sm_codec_chain *small = ct_chain("[" SC_LE "," SC_ONE "]", SM_DT_INT32, 3, half);
    ct_decode_fails(small, sm_buf_bytes(&enc), SM_E_DATA, "more than the expected 8192 bytes", s);
    sm_buf_free(&more);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(small);
    sm_codec_chain_free(c);
}

/* Of unknown size ([bytes, zstd, X]: X's output is a zstd frame of unknown length), 8 MiB of zeros
 * stop at a 1 MiB decode bound with SM_E_LIMIT, allocating about the bound, not 8 MiB. */
static void test_stream_unknown_size_stops_at_the_decode_bound(void **state)
{
    (void)state;
    const uint64_t big[1] = {8u << 20};
    struct sm_codec_chain *enc_chain = ct_chain("[" SC_LE "," SC_ONE "]", SM_DT_UINT8, 1, big);
    struct sm_codec_chain *c =
        ct_chain("[" SC_LE ",\"zstd\"," SC_ONE "]", SM_DT_INT32, 3, sc_shape);
    struct sm_scratch *s = ct_scratch();
    uint8_t *zeros = sm_calloc(1, 8u << 20);
    assert_non_null(zeros);
    struct sm_buf bomb = SM_BUF_INIT;
    sc_encode(enc_chain, zeros, &bomb, s);
    sm_free(zeros);
    sm_scratch_set_max_decoded(s, (size_t)1 << 20);
    ct_decode_bounded(c, sm_buf_bytes(&bomb), SM_E_LIMIT, "decode limit of 1048576 bytes",
                      (uint64_t)6 << 20, s);
    sm_buf_free(&bomb);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
    sm_codec_chain_free(enc_chain);
}

#endif
