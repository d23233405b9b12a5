/* Unit tests for engine/codec/codec_sharding.c: the layout of the inner grid, whole-shard round
 * trips with the index at the end and at the start, inner chunks in C order, empty inner chunks
 * (2^64-1 markers) read as the fill value, index checksum mismatches, entries past the end or
 * overflowing (naming the inner chunk), nested sharding both whole and through the ranged-read
 * API, configurations the spec rejects (non-dividing chunk_shape, variable-size index), and a large
 * shard encoded into a buffer taken once. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sm_test.h"
#include "codec_test.h"
#include "shardmill/alloc.h"
#include "shardmill/crc32c.h"

#define LE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"
#define ZS "{\"name\":\"zstd\",\"configuration\":{\"level\":1}}"

static const uint64_t shard[3] = {4, 5, 6};

static void shard_json(char *buf, size_t cap, const char *chunk, const char *codecs,
                       const char *index, const char *loc)
{
    snprintf(buf, cap,
             "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":%s,\"codecs\":%s,"
             "\"index_codecs\":%s,\"index_location\":\"%s\"}}]",
             chunk, codecs, index, loc);
}

static struct sm_codec_chain *sharded(const char *loc)
{
    char text[1024];
    shard_json(text, sizeof(text), "[2,5,3]", "[" LE "," ZS "]", "[" LE ",\"crc32c\"]", loc);
    return ct_chain(text, SM_DT_UINT16, 3, shard);
}

static void test_sharding_layout_describes_the_inner_grid(void **state)
{
    (void)state;
    struct sm_codec_chain *c = sharded("end");
    const struct sm_shard_codec *sc = sm_codec_chain_shard(c);
    assert_non_null(sc);
    const struct sm_shard_layout *L = sm_shard_layout(sc);
    assert_int_equal(L->ndim, 3);
    assert_int_equal(L->inner_shape[0], 2);
    assert_int_equal(L->inner_shape[1], 5);
    assert_int_equal(L->inner_shape[2], 3);
    assert_int_equal(L->chunks_per_shard[0], 2);
    assert_int_equal(L->chunks_per_shard[1], 1);
    assert_int_equal(L->chunks_per_shard[2], 2);
    assert_int_equal(L->n_inner, 4);
    assert_int_equal(L->index_len, 4 * 16 + 4);
    assert_int_equal(L->location, SM_SHARD_INDEX_END);
    const struct sm_repr *ir = sm_codec_chain_repr(sm_shard_inner(sc));
    assert_int_equal(ir->len, 2 * 5 * 3 * 2);
    assert_int_equal(ir->ndim, 3);
    assert_null(sm_codec_chain_shard(sm_shard_inner(sc)));
    sm_codec_chain_free(c);
}

/* Decodes the index of an encoded shard through the public API. */
static void read_index(const struct sm_shard_codec *sc, const struct sm_buf *enc, uint64_t *pairs,
                       struct sm_scratch *s)
{
    const struct sm_shard_layout *L = sm_shard_layout(sc);
    const uint8_t *p =
        L->location == SM_SHARD_INDEX_END ? enc->ptr + enc->len - L->index_len : enc->ptr;
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_shard_index_decode(sc, sm_bytes_of(p, L->index_len), enc->len, pairs, s, &err),
              &err);
}

static void check_layout(const char *loc)
{
    struct sm_codec_chain *c = sharded(loc);
    const struct sm_shard_codec *sc = sm_codec_chain_shard(c);
    const struct sm_shard_layout *L = sm_shard_layout(sc);
    uint8_t data[240];
    ct_fill_random(data, sizeof(data), 11);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT, piece = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    uint64_t pairs[8];
    read_index(sc, &enc, pairs, s);
    /* Inner chunks follow each other in C order of the inner grid, after a start index. */
    uint64_t at = L->location == SM_SHARD_INDEX_START ? L->index_len : 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pairs[2 * i], at);
        at += pairs[2 * i + 1];
    }
    assert_int_equal(at + (L->location == SM_SHARD_INDEX_END ? L->index_len : 0), enc.len);
    /* Inner chunk 1 is the box [0:2, 0:5, 3:6] of the shard. */
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_codec_chain_decode(sm_shard_inner(sc), sm_bytes_of(enc.ptr + pairs[2], pairs[3]),
                                    &piece, s, &err),
              &err);
    for (int z = 0; z < 2; z++) {
        for (int y = 0; y < 5; y++) {
            assert_memory_equal(piece.ptr + (z * 15 + y * 3) * 2, data + (z * 30 + y * 6 + 3) * 2,
                                6);
        }
    }
    sm_buf_free(&piece);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_sharding_round_trips_with_the_index_at_the_end(void **state)
{
    (void)state;
    check_layout("end");
}

static void test_sharding_round_trips_with_the_index_at_the_start(void **state)
{
    (void)state;
    check_layout("start");
}

static void test_sharding_index_decode_rejects_a_crc_mismatch(void **state)
{
    (void)state;
    struct sm_codec_chain *c = sharded("end");
    uint8_t data[240];
    ct_fill_random(data, sizeof(data), 12);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    enc.ptr[enc.len - 68 + 9] ^= 0x01; /* the high bytes of entry 0's offset */
    ct_decode_fails(c, sm_buf_bytes(&enc), SM_E_DATA, "crc32c mismatch: stored", s);
    uint64_t pairs[8];
    struct sm_err err;
    sm_err_clear(&err);
    assert_status(sm_shard_index_decode(sm_codec_chain_shard(c),
                                        sm_bytes_of(enc.ptr + enc.len - 68, 68), enc.len, pairs, s,
                                        &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "crc32c mismatch");
    sm_err_clear(&err);
    assert_status(sm_shard_index_decode(sm_codec_chain_shard(c), sm_bytes_of(enc.ptr, 67), enc.len,
                                        pairs, s, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "shard index of 67 bytes, expected 68");
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void expect_bad_entry(uint64_t off, uint64_t len, uint64_t shard_len, const char *needle)
{
    struct sm_codec_chain *c = sharded("end");
    const struct sm_shard_codec *sc = sm_codec_chain_shard(c);
    uint64_t pairs[8] = {0, 10, 10, 10, off, len, SM_SHARD_EMPTY, SM_SHARD_EMPTY};
    struct sm_scratch *s = ct_scratch();
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf idx = SM_BUF_INIT;
    assert_ok(sm_shard_index_encode(sc, pairs, &idx, s, &err), &err);
    assert_int_equal(idx.len, 68);
    uint64_t back[8];
    assert_status(sm_shard_index_decode(sc, sm_buf_bytes(&idx), shard_len, back, s, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, needle);
    sm_buf_free(&idx);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_sharding_index_decode_rejects_an_entry_past_the_end(void **state)
{
    (void)state;
    expect_bad_entry(20, 31, 50,
                     "shard index entry of inner chunk 2 (offset 20, nbytes 31) ends past the "
                     "shard's 50 bytes");
    expect_bad_entry(51, 0, 50, "inner chunk 2 (offset 51, nbytes 0)");
    expect_bad_entry(UINT64_MAX - 1, 2, UINT64_MAX - 1, "inner chunk 2"); /* would overflow */
    expect_bad_entry(SM_SHARD_EMPTY, 5, 50, "inner chunk 2"); /* only one field marks empty */
    expect_bad_entry(10, SM_SHARD_EMPTY, 50, "inner chunk 2");
}

static void test_sharding_index_round_trips_through_the_public_api(void **state)
{
    (void)state;
    struct sm_codec_chain *c = sharded("start");
    const struct sm_shard_codec *sc = sm_codec_chain_shard(c);
    const uint64_t pairs[8] = {68, 10, SM_SHARD_EMPTY, SM_SHARD_EMPTY, 78, 0, 78, 22};
    struct sm_scratch *s = ct_scratch();
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf idx = SM_BUF_INIT;
    assert_ok(sm_shard_index_encode(sc, pairs, &idx, s, &err), &err);
    uint64_t back[8];
    assert_ok(sm_shard_index_decode(sc, sm_buf_bytes(&idx), 100, back, s, &err), &err);
    assert_memory_equal(back, pairs, sizeof(pairs));
    /* The encoded index is the little-endian uint64 array [n, 2] plus its CRC-32C. */
    uint64_t first;
    memcpy(&first, idx.ptr, 8);
    assert_int_equal(first, 68);
    assert_int_equal(sm_crc32c(0, idx.ptr, 64), (uint32_t)idx.ptr[64] | (uint32_t)idx.ptr[65] << 8 |
                                                    (uint32_t)idx.ptr[66] << 16 |
                                                    (uint32_t)idx.ptr[67] << 24);
    sm_buf_free(&idx);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_sharding_empty_inner_chunks_read_as_the_fill_value(void **state)
{
    (void)state;
    char text[1024];
    shard_json(text, sizeof(text), "[2,5,3]", "[" LE "]", "[" LE ",\"crc32c\"]", "end");
    struct sm_repr r;
    ct_repr(&r, SM_DT_UINT16, 3, shard);
    r.fill[0] = 7; /* fill value 7 */
    struct sm_err err;
    struct sm_codec_chain *c;
    assert_ok(ct_chain_try(text, &r, &c, &err), &err);
    const struct sm_shard_codec *sc = sm_codec_chain_shard(c);
    /* Inner chunks 0 and 3 hold only the fill value; 1 and 2 hold data. */
    uint16_t data[120];
    for (int i = 0; i < 120; i++) {
        const int z = i / 30, x = i % 6;
        const int chunk = (z / 2) * 2 + x / 3;
        data[i] = (uint16_t)(chunk == 0 || chunk == 3 ? 7 : 1000 + i);
    }
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, (const uint8_t *)data, &enc, s);
    uint64_t pairs[8];
    read_index(sc, &enc, pairs, s);
    assert_true(pairs[0] == SM_SHARD_EMPTY && pairs[1] == SM_SHARD_EMPTY);
    assert_true(pairs[6] == SM_SHARD_EMPTY && pairs[7] == SM_SHARD_EMPTY);
    assert_int_equal(pairs[2], 0);
    assert_int_equal(pairs[3], 60);
    assert_int_equal(enc.len, 120 + 68);
    /* A shard that is nothing but an index of empty entries decodes to all fill. */
    const uint64_t empty[8] = {SM_SHARD_EMPTY, SM_SHARD_EMPTY, SM_SHARD_EMPTY, SM_SHARD_EMPTY,
                               SM_SHARD_EMPTY, SM_SHARD_EMPTY, SM_SHARD_EMPTY, SM_SHARD_EMPTY};
    sm_err_clear(&err);
    struct sm_buf idx = SM_BUF_INIT, dec = SM_BUF_INIT;
    assert_ok(sm_shard_index_encode(sc, empty, &idx, s, &err), &err);
    assert_ok(sm_codec_chain_decode(c, sm_buf_bytes(&idx), &dec, s, &err), &err);
    assert_int_equal(dec.len, 240);
    for (int i = 0; i < 120; i++) {
        uint16_t v;
        memcpy(&v, dec.ptr + 2 * i, 2);
        assert_int_equal(v, 7);
    }
    sm_buf_free(&idx);
    sm_buf_free(&dec);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static const char *nested =
    "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[2,5,6],\"codecs\":[{"
    "\"name\":"
    "\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[1,5,2],\"codecs\":[" LE "," ZS
    "],\"index_codecs\":[" LE ",\"crc32c\"],\"index_location\":\"start\"}}],\"index_codecs\":[" LE
    ",\"crc32c\"]}}]";

static void test_sharding_nested_round_trip(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain(nested, SM_DT_INT32, 3, shard);
    assert_int_equal(c->height, 3);
    const struct sm_shard_codec *outer = sm_codec_chain_shard(c);
    const struct sm_shard_codec *inner = sm_codec_chain_shard(sm_shard_inner(outer));
    assert_non_null(inner);
    assert_int_equal(sm_shard_layout(outer)->n_inner, 2);
    assert_int_equal(sm_shard_layout(inner)->n_inner, 6);
    assert_int_equal(sm_shard_layout(inner)->location, SM_SHARD_INDEX_START);
    int32_t data[120];
    for (int i = 0; i < 120; i++) {
        data[i] = i * 1001 - 5000;
    }
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, (const uint8_t *)data, &enc, s);

    /* Walk it the way array/shard_read.c does: outer index, then a nested index by range, then
     * one innermost chunk. Innermost chunk (1, 0, 2) of nested shard 1 is data[3][0:5][4:6]. */
    uint64_t op[4], ip[12];
    read_index(outer, &enc, op, s);
    const uint8_t *nest = enc.ptr + op[2];
    struct sm_err err;
    sm_err_clear(&err);
    const size_t il = sm_shard_layout(inner)->index_len;
    assert_ok(sm_shard_index_decode(inner, sm_bytes_of(nest, il), op[3], ip, s, &err), &err);
    const uint64_t k = 1 * 3 + 2; /* C order over the [2,1,3] inner grid */
    struct sm_buf piece = SM_BUF_INIT;
    assert_ok(sm_codec_chain_decode(sm_shard_inner(inner),
                                    sm_bytes_of(nest + ip[2 * k], ip[2 * k + 1]), &piece, s, &err),
              &err);
    assert_int_equal(piece.len, 5 * 2 * 4);
    for (int y = 0; y < 5; y++) {
        assert_memory_equal(piece.ptr + y * 8, &data[3 * 30 + y * 6 + 4], 8);
    }
    sm_buf_free(&piece);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_sharding_encode_is_deterministic(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain(nested, SM_DT_INT32, 3, shard);
    uint8_t data[480];
    ct_fill_smooth(data, sizeof(data), 4);
    struct sm_scratch *a = ct_scratch(), *b = ct_scratch();
    struct sm_buf x = SM_BUF_INIT, y = SM_BUF_INIT;
    ct_roundtrip(c, data, &x, a);
    ct_roundtrip(c, data, &y, b);
    assert_int_equal(x.len, y.len);
    assert_memory_equal(x.ptr, y.ptr, x.len);
    sm_buf_free(&x);
    sm_buf_free(&y);
    sm_scratch_free(a);
    sm_scratch_free(b);
    sm_codec_chain_free(c);
}

/* The inner chunks encoded by 2, 3 and 8 threads (sm_scratch_set_threads) give the serial
 * encode's bytes, with the index at the end and at the start, fill-only inner chunks left out
 * (fill 7), nested sharding, and more threads than inner chunks. */
static void test_sharding_parallel_encode_gives_the_serial_bytes(void **state)
{
    (void)state;
    static const uint64_t big[3] = {8, 10, 12};
    for (int k = 0; k < 3; k++) {
        char text[1024];
        struct sm_repr r;
        struct sm_codec_chain *c;
        if (k < 2) {
            shard_json(text, sizeof(text), "[2,5,3]", "[" LE "," ZS "]", "[" LE ",\"crc32c\"]",
                       k == 0 ? "end" : "start");
            ct_repr(&r, SM_DT_UINT16, 3, big);
            r.fill[0] = 7;
        } else {
            snprintf(text, sizeof(text), "%s", nested);
            ct_repr(&r, SM_DT_INT32, 3, shard);
        }
        struct sm_err err;
        assert_ok(ct_chain_try(text, &r, &c, &err), &err);
        const size_t len = sm_codec_chain_repr(c)->len;
        uint8_t *data = test_malloc(len);
        ct_fill_smooth(data, len, 5);
        for (size_t i = 0; k < 2 && i < len / 2; i += 7 * 30) { /* some fill-only inner chunks */
            const size_t n = i + 60 < len / 2 ? 60 : len / 2 - i;
            for (size_t j = 0; j < n; j++) {
                data[2 * (i + j)] = 7;
                data[2 * (i + j) + 1] = 0;
            }
        }
        struct sm_scratch *serial = ct_scratch();
        struct sm_buf want = SM_BUF_INIT;
        ct_roundtrip(c, data, &want, serial);
        const unsigned counts[] = {2, 3, 8};
        for (size_t t = 0; t < sizeof(counts) / sizeof(counts[0]); t++) {
            struct sm_scratch *par = ct_scratch();
            sm_scratch_set_threads(par, counts[t]);
            struct sm_buf got = SM_BUF_INIT;
            ct_roundtrip(c, data, &got, par);
            assert_int_equal(got.len, want.len);
            assert_memory_equal(got.ptr, want.ptr, want.len);
            ct_roundtrip(c, data, &got, par); /* again on the kept worker scratches */
            assert_memory_equal(got.ptr, want.ptr, want.len);
            sm_buf_free(&got);
            sm_scratch_free(par);
        }
        sm_buf_free(&want);
        sm_scratch_free(serial);
        test_free(data);
        sm_codec_chain_free(c);
    }
}

/* A large shard is encoded into a buffer taken once, not grown inner chunk by inner chunk: 8 MiB
 * of values that do not compress (zstd stores them) make one large block (alloc.h), where growing
 * by doubling made one for every doubling past 2 MiB, each a copy into fresh pages. */
static void test_sharding_encode_reserves_the_shard_once(void **state)
{
    (void)state;
    static const uint64_t big[3] = {64, 256, 256};
    char text[1024];
    shard_json(text, sizeof(text), "[16,64,64]", "[" LE "," ZS "]", "[" LE ",\"crc32c\"]", "end");
    struct sm_codec_chain *c = ct_chain(text, SM_DT_UINT16, 3, big);
    const size_t len = sm_codec_chain_repr(c)->len;
    uint8_t *data = test_malloc(len);
    uint64_t x = 88172645463325252u;
    for (size_t i = 0; i < len; i++) { /* xorshift64: no match for zstd to find */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data[i] = (uint8_t)(x >> 56);
    }
    struct sm_scratch *sc = ct_scratch();
    struct sm_buf out = SM_BUF_INIT;
    struct sm_err err;
    sm_err_clear(&err);
    const uint64_t before = sm_alloc_large_count();
    assert_ok(sm_codec_chain_encode(c, sm_bytes_of(data, len), &out, sc, &err), &err);
    assert_int_equal(sm_alloc_large_count() - before, 1);
    assert_true(out.len > len); /* stored: more than the values */
    struct sm_buf back = SM_BUF_INIT;
    assert_ok(sm_codec_chain_decode(c, sm_buf_bytes(&out), &back, sc, &err), &err);
    assert_int_equal(back.len, len);
    assert_memory_equal(back.ptr, data, len);
    sm_buf_free(&back);
    sm_buf_free(&out);
    sm_scratch_free(sc);
    test_free(data);
    sm_codec_chain_free(c);
}

/* An edge shard encoded from its clipped values (sm_shard_encode_clipped) has the bytes of the
 * chain's encode of the shard padded with the fill value, serial and on 3 threads, for clips that
 * cut inner chunks, leave whole inner chunks out, and keep the whole shard; a clip past the shard
 * or an input of the wrong size is an internal error. */
static void test_sharding_clipped_encode_gives_the_padded_bytes(void **state)
{
    (void)state;
    static const uint64_t big[3] = {8, 10, 12};
    char text[1024];
    shard_json(text, sizeof(text), "[2,5,3]", "[" LE "," ZS "]", "[" LE ",\"crc32c\"]", "end");
    struct sm_repr r;
    ct_repr(&r, SM_DT_UINT16, 3, big);
    r.fill[0] = 7;
    struct sm_err err;
    struct sm_codec_chain *c;
    assert_ok(ct_chain_try(text, &r, &c, &err), &err);
    const struct sm_shard_codec *sc = sm_codec_chain_shard(c);
    static const uint64_t clips[][3] = {
        {5, 10, 12}, {8, 7, 12}, {3, 4, 11}, {8, 10, 12}, {1, 1, 1}};
    for (size_t k = 0; k < sizeof(clips) / sizeof(clips[0]); k++) {
        const uint64_t *clip = clips[k];
        const size_t n = (size_t)(clip[0] * clip[1] * clip[2]);
        uint16_t *vals = test_malloc(n * 2), *pad = test_malloc(8 * 10 * 12 * 2);
        for (size_t i = 0; i < 8 * 10 * 12; i++) {
            pad[i] = 7;
        }
        for (uint64_t z = 0; z < clip[0]; z++) {
            for (uint64_t y = 0; y < clip[1]; y++) {
                for (uint64_t x = 0; x < clip[2]; x++) {
                    const uint16_t v = (uint16_t)(z * 131 + y * 17 + x * 3 + 100);
                    vals[(z * clip[1] + y) * clip[2] + x] = v;
                    pad[(z * 10 + y) * 12 + x] = v;
                }
            }
        }
        struct sm_scratch *s = ct_scratch();
        struct sm_buf want = SM_BUF_INIT, got = SM_BUF_INIT;
        ct_roundtrip(c, (const uint8_t *)pad, &want, s);
        for (unsigned t = 1; t <= 3; t += 2) {
            sm_scratch_set_threads(s, t);
            sm_err_clear(&err);
            assert_ok(sm_shard_encode_clipped(sc, sm_bytes_of(vals, n * 2), clip, &got, s, &err),
                      &err);
            assert_int_equal(got.len, want.len);
            assert_memory_equal(got.ptr, want.ptr, want.len);
        }
        sm_buf_free(&want);
        sm_buf_free(&got);
        sm_scratch_free(s);
        test_free(vals);
        test_free(pad);
    }
    struct sm_scratch *s = ct_scratch();
    struct sm_buf got = SM_BUF_INIT;
    uint16_t v[4] = {0};
    const uint64_t past[3] = {9, 1, 1}, two[3] = {1, 1, 2};
    sm_err_clear(&err);
    assert_int_equal(sm_shard_encode_clipped(sc, sm_bytes_of(v, 8), past, &got, s, &err),
                     SM_E_INTERNAL);
    sm_err_clear(&err);
    assert_int_equal(sm_shard_encode_clipped(sc, sm_bytes_of(v, 8), two, &got, s, &err),
                     SM_E_INTERNAL);
    sm_buf_free(&got);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_sharding_full_decode_rejects_a_shard_shorter_than_its_index(void **state)
{
    (void)state;
    struct sm_codec_chain *c = sharded("end");
    uint8_t junk[67] = {0};
    struct sm_scratch *s = ct_scratch();
    ct_decode_fails(c, sm_bytes_of(junk, 67), SM_E_DATA,
                    "shard of 67 bytes is shorter than its 68-byte index", s);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void expect_config_error(const char *chunk, const char *codecs, const char *index,
                                const char *loc, const char *needle)
{
    char text[1024];
    shard_json(text, sizeof(text), chunk, codecs, index, loc);
    struct sm_repr r;
    ct_repr(&r, SM_DT_UINT16, 3, shard);
    struct sm_err err;
    struct sm_codec_chain *c;
    assert_status(ct_chain_try(text, &r, &c, &err), SM_E_DATA, &err);
    assert_contains(err.what, needle);
}

static void test_sharding_rejects_a_chunk_shape_that_does_not_divide_the_shard(void **state)
{
    (void)state;
    expect_config_error("[2,2,3]", "[" LE "]", "[" LE "]", "end",
                        "shard extent 5 on axis 1 is not a multiple of the inner chunk extent 2");
    expect_config_error("[2,5]", "[" LE "]", "[" LE "]", "end",
                        "'chunk_shape' has 2 dimensions, the shard has 3");
    expect_config_error("[2,0,3]", "[" LE "]", "[" LE "]", "end",
                        "'chunk_shape'[1] must be a positive integer");
}

static void test_sharding_rejects_an_index_of_variable_size(void **state)
{
    (void)state;
    expect_config_error("[2,5,3]", "[" LE "]", "[" LE "," ZS "]", "end",
                        "'index_codecs' must have a fixed encoded size");
}

static void test_sharding_rejects_bad_configurations(void **state)
{
    (void)state;
    expect_config_error("[2,5,3]", "[" LE "]", "[" LE "]", "middle",
                        "'index_location' must be \"end\" or \"start\", got \"middle\"");
    expect_config_error("[2,5,3]", "[\"crc32c\"]", "[" LE "]", "end",
                        "codec 'crc32c' (bytes->bytes) before any array->bytes codec");
    expect_config_error("[2,5,3]", "{}", "[" LE "]", "end", "'codecs' must be an array");
    struct sm_repr r;
    ct_repr(&r, SM_DT_UINT16, 3, shard);
    struct sm_err err;
    struct sm_codec_chain *c;
    assert_status(ct_chain_try("[\"sharding_indexed\"]", &r, &c, &err), SM_E_DATA, &err);
    assert_contains(err.what, "missing configuration");
}

static void test_sharding_index_codecs_default_to_bytes_and_crc32c(void **state)
{
    (void)state;
    struct sm_codec_chain *c =
        ct_chain("[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[2,5,3],"
                 "\"codecs\":[" LE "]}}]",
                 SM_DT_UINT16, 3, shard);
    const struct sm_shard_layout *L = sm_shard_layout(sm_codec_chain_shard(c));
    assert_int_equal(L->index_len, 68);
    assert_int_equal(L->location, SM_SHARD_INDEX_END);
    sm_codec_chain_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sharding_layout_describes_the_inner_grid),
        cmocka_unit_test(test_sharding_parallel_encode_gives_the_serial_bytes),
        cmocka_unit_test(test_sharding_encode_reserves_the_shard_once),
        cmocka_unit_test(test_sharding_clipped_encode_gives_the_padded_bytes),
        cmocka_unit_test(test_sharding_round_trips_with_the_index_at_the_end),
        cmocka_unit_test(test_sharding_round_trips_with_the_index_at_the_start),
        cmocka_unit_test(test_sharding_index_decode_rejects_a_crc_mismatch),
        cmocka_unit_test(test_sharding_index_decode_rejects_an_entry_past_the_end),
        cmocka_unit_test(test_sharding_index_round_trips_through_the_public_api),
        cmocka_unit_test(test_sharding_empty_inner_chunks_read_as_the_fill_value),
        cmocka_unit_test(test_sharding_nested_round_trip),
        cmocka_unit_test(test_sharding_encode_is_deterministic),
        cmocka_unit_test(test_sharding_full_decode_rejects_a_shard_shorter_than_its_index),
        cmocka_unit_test(test_sharding_rejects_a_chunk_shape_that_does_not_divide_the_shard),
        cmocka_unit_test(test_sharding_rejects_an_index_of_variable_size),
        cmocka_unit_test(test_sharding_rejects_bad_configurations),
        cmocka_unit_test(test_sharding_index_codecs_default_to_bytes_and_crc32c),
    };
    return cmocka_run_group_tests_name("codec_sharding", tests, NULL, NULL);
}
