/* Unit tests for engine/codec/codec_n5.c: N5 block headers (mode 0 and varlength mode 1, sizes
 * listed fastest-first), big-endian values, truncated edge blocks padded with the fill value, the
 * compression inside the block, and the named error of every malformed header, with memory
 * bounded by the block's size whatever the payload declares. Blocks are assembled here byte by
 * byte from the N5 specification (https://github.com/saalfeldlab/n5#file-system-specification). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sm_test.h"
/* after sm_test.h */
#include "codec_test.h"

#define RAW "[{\"name\":\"n5_block\",\"configuration\":{\"compressor\":null}}]"
#define GZIP                                                                                       \
    "[{\"name\":\"n5_block\",\"configuration\":{\"compressor\":{\"name\":\"gzip\","                \
    "\"configuration\":{\"level\":5}}}}]"

/* An N5 block being assembled: header words big-endian, then the payload. */
struct blk {
    uint8_t b[4096];
    size_t n;
};

static void put16(struct blk *k, unsigned v)
{
    k->b[k->n++] = (uint8_t)(v >> 8);
    k->b[k->n++] = (uint8_t)v;
}

static void put32(struct blk *k, uint32_t v)
{
    put16(k, v >> 16);
    put16(k, v & 0xffff);
}

/* Header of mode `mode` with sizes listed fastest-first, as N5 writes them. */
static void header(struct blk *k, unsigned mode, unsigned ndim, const uint32_t *n5_sizes)
{
    k->n = 0;
    put16(k, mode);
    put16(k, ndim);
    for (unsigned d = 0; d < ndim; d++) {
        put32(k, n5_sizes[d]);
    }
}

/* The value the tests store at C-order position (y, x) of a block. */
static uint16_t val(unsigned y, unsigned x)
{
    return (uint16_t)(1000u * y + 7u * x + 0x0102u);
}

/* A 2-D uint16 chunk of 3 rows x 4 columns (N5 blockSize [4, 3]). */
static const uint64_t CHUNK[2] = {3, 4};

static void test_n5_decodes_a_whole_block_big_endian(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain(RAW, SM_DT_UINT16, 2, CHUNK);
    struct sm_scratch *s = ct_scratch();
    struct blk k;
    header(&k, 0, 2, (const uint32_t[]){4, 3});
    for (unsigned y = 0; y < 3; y++) {
        for (unsigned x = 0; x < 4; x++) {
            put16(&k, val(y, x));
        }
    }
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf out = SM_BUF_INIT;
    assert_ok(sm_codec_chain_decode(c, sm_bytes_of(k.b, k.n), &out, s, &err), &err);
    assert_int_equal(out.len, 24);
    for (unsigned y = 0; y < 3; y++) {
        for (unsigned x = 0; x < 4; x++) {
            uint16_t v;
            memcpy(&v, out.ptr + 2 * (4 * y + x), 2);
            assert_int_equal(v, val(y, x));
        }
    }
    sm_buf_free(&out);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

/* Java N5 writes edge blocks truncated to the dataset: here 2 columns (fastest) x 1 row. */
static void test_n5_pads_a_truncated_edge_block(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain(RAW, SM_DT_UINT16, 2, CHUNK);
    struct sm_scratch *s = ct_scratch();
    for (unsigned mode = 0; mode < 2; mode++) {
        struct blk k;
        header(&k, mode, 2, (const uint32_t[]){2, 1});
        if (mode == 1) {
            put32(&k, 2); /* varlength: the element count */
        }
        put16(&k, val(0, 0));
        put16(&k, val(0, 1));
        struct sm_err err;
        sm_err_clear(&err);
        struct sm_buf out = SM_BUF_INIT;
        assert_ok(sm_codec_chain_decode(c, sm_bytes_of(k.b, k.n), &out, s, &err), &err);
        assert_int_equal(out.len, 24);
        for (unsigned i = 0; i < 12; i++) {
            uint16_t v;
            memcpy(&v, out.ptr + 2 * i, 2);
            assert_int_equal(v, i < 2 ? val(0, i) : 0);
        }
        sm_buf_free(&out);
    }
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

/* A 3-D truncated float64 block: every axis shorter, values land at their C-order positions. */
static void test_n5_pads_a_3d_truncated_block(void **state)
{
    (void)state;
    const uint64_t chunk[3] = {3, 4, 5};
    struct sm_codec_chain *c = ct_chain(RAW, SM_DT_FLOAT64, 3, chunk);
    struct sm_scratch *s = ct_scratch();
    struct blk k;
    header(&k, 0, 3, (const uint32_t[]){3, 2, 2}); /* x 3, y 2, z 2 */
    for (unsigned z = 0; z < 2; z++) {
        for (unsigned y = 0; y < 2; y++) {
            for (unsigned x = 0; x < 3; x++) {
                double v = 100.0 * z + 10.0 * y + x + 0.5;
                uint64_t bits;
                memcpy(&bits, &v, 8);
                put32(&k, (uint32_t)(bits >> 32));
                put32(&k, (uint32_t)bits);
            }
        }
    }
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf out = SM_BUF_INIT;
    assert_ok(sm_codec_chain_decode(c, sm_bytes_of(k.b, k.n), &out, s, &err), &err);
    assert_int_equal(out.len, 3 * 4 * 5 * 8);
    for (unsigned z = 0; z < 3; z++) {
        for (unsigned y = 0; y < 4; y++) {
            for (unsigned x = 0; x < 5; x++) {
                double v;
                memcpy(&v, out.ptr + 8 * ((z * 4 + y) * 5 + x), 8);
                const bool in = z < 2 && y < 2 && x < 3;
                assert_true(v == (in ? 100.0 * z + 10.0 * y + x + 0.5 : 0.0));
            }
        }
    }
    sm_buf_free(&out);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

/* Encoding writes a whole mode-0 block (what zarr-python's N5 writer does); it decodes back. */
static void test_n5_encode_writes_a_whole_block(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain(GZIP, SM_DT_UINT16, 2, CHUNK);
    struct sm_scratch *s = ct_scratch();
    uint8_t data[24];
    ct_fill_random(data, sizeof(data), 5);
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    const uint8_t want[12] = {0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 3};
    assert_true(enc.len > 12);
    assert_memory_equal(enc.ptr, want, 12);
    assert_int_equal(enc.ptr[12], 0x1f); /* the gzip member follows the header */
    assert_int_equal(enc.ptr[13], 0x8b);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

/* A gzip-compressed truncated block: the compressor decodes to the truncated size. */
static void test_n5_gzip_truncated_block(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain(GZIP, SM_DT_UINT16, 2, CHUNK);
    const uint64_t two[1] = {2};
    struct sm_codec_chain *gz = ct_chain(
        "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"big\"}},{\"name\":\"gzip\"}]",
        SM_DT_UINT16, 1, two);
    struct sm_scratch *s = ct_scratch();
    const uint16_t vals[2] = {val(0, 0), val(0, 1)};
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf payload = SM_BUF_INIT, out = SM_BUF_INIT;
    assert_ok(sm_codec_chain_encode(gz, sm_bytes_of(vals, 4), &payload, s, &err), &err);
    struct blk k;
    header(&k, 0, 2, (const uint32_t[]){2, 1});
    memcpy(k.b + k.n, payload.ptr, payload.len);
    k.n += payload.len;
    assert_ok(sm_codec_chain_decode(c, sm_bytes_of(k.b, k.n), &out, s, &err), &err);
    uint16_t v[12];
    memcpy(v, out.ptr, sizeof(v));
    assert_int_equal(v[0], vals[0]);
    assert_int_equal(v[1], vals[1]);
    for (unsigned i = 2; i < 12; i++) {
        assert_int_equal(v[i], 0);
    }
    /* The same payload claimed by a 1x1 block decodes to more than the block: an error. */
    header(&k, 0, 2, (const uint32_t[]){1, 1});
    memcpy(k.b + k.n, payload.ptr, payload.len);
    k.n += payload.len;
    ct_decode_fails(c, sm_bytes_of(k.b, k.n), SM_E_DATA, "block", s);
    sm_buf_free(&payload);
    sm_buf_free(&out);
    sm_scratch_free(s);
    sm_codec_chain_free(gz);
    sm_codec_chain_free(c);
}

static void test_n5_rejects_malformed_headers(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain(RAW, SM_DT_UINT16, 2, CHUNK);
    struct sm_scratch *s = ct_scratch();
    struct blk k;
    header(&k, 0, 2, (const uint32_t[]){4, 3});
    ct_decode_fails(c, sm_bytes_of(k.b, 3), SM_E_DATA, "shorter than its 4-byte header", s);
    ct_decode_fails(c, sm_bytes_of(k.b, 9), SM_E_DATA,
                    "header truncated: 9 bytes, the header "
                    "needs 12",
                    s);
    header(&k, 2, 2, (const uint32_t[]){4, 3});
    ct_decode_fails(c, sm_bytes_of(k.b, k.n), SM_E_DATA, "block mode 2 is not supported", s);
    header(&k, 0, 3, (const uint32_t[]){4, 3, 1});
    ct_decode_fails(c, sm_bytes_of(k.b, k.n), SM_E_DATA, "header has 3 dimensions, the dataset 2",
                    s);
    header(&k, 0, 2, (const uint32_t[]){5, 3});
    ct_decode_fails(c, sm_bytes_of(k.b, k.n), SM_E_DATA,
                    "block size 5 in dimension 0 exceeds the blockSize 4", s);
    header(&k, 0, 2, (const uint32_t[]){4, 0xffffffffu});
    ct_decode_fails(c, sm_bytes_of(k.b, k.n), SM_E_DATA, "exceeds the blockSize 3", s);
    header(&k, 1, 2, (const uint32_t[]){4, 3});
    ct_decode_fails(c, sm_bytes_of(k.b, k.n), SM_E_DATA, "header truncated", s);
    put32(&k, 11);
    ct_decode_fails(c, sm_bytes_of(k.b, k.n), SM_E_DATA,
                    "varlength block declares 11 elements, its block size holds 12", s);
    header(&k, 0, 2, (const uint32_t[]){4, 3});
    k.n += 23; /* one byte short of 12 uint16 values */
    ct_decode_fails(c, sm_bytes_of(k.b, k.n), SM_E_DATA, "block data is 23 bytes", s);
    k.n += 2;
    ct_decode_fails(c, sm_bytes_of(k.b, k.n), SM_E_DATA, "block data is 25 bytes", s);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

/* A gzip member of 1 MiB of zeros under a 1-element block header: refused, and the decode never
 * allocates more than the block's few bytes plus the decompressor's own state. */
static void test_n5_bomb_is_bounded_by_the_block_size(void **state)
{
    (void)state;
    const uint64_t big[1] = {1u << 19};
    struct sm_codec_chain *gz = ct_chain(
        "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"big\"}},{\"name\":\"gzip\"}]",
        SM_DT_UINT16, 1, big);
    const uint64_t chunk[2] = {64, 64};
    struct sm_codec_chain *c = ct_chain(GZIP, SM_DT_UINT16, 2, chunk);
    struct sm_scratch *s = ct_scratch();
    uint8_t *zeros = sm_calloc(1, 1u << 20);
    assert_non_null(zeros);
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf payload = SM_BUF_INIT;
    assert_ok(sm_codec_chain_encode(gz, sm_bytes_of(zeros, 1u << 20), &payload, s, &err), &err);
    sm_free(zeros);
    struct sm_buf blk = SM_BUF_INIT;
    assert_ok(sm_buf_reserve(&blk, 12 + payload.len, &err), &err);
    const uint8_t hdr[12] = {0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1};
    memcpy(blk.ptr, hdr, 12);
    memcpy(blk.ptr + 12, payload.ptr, payload.len);
    blk.len = 12 + payload.len;
    ct_decode_bounded(c, sm_buf_bytes(&blk), SM_E_DATA, "more than the 2 bytes", 64u << 10, s);
    sm_buf_free(&blk);
    sm_buf_free(&payload);
    sm_scratch_free(s);
    sm_codec_chain_free(gz);
    sm_codec_chain_free(c);
}

static void test_n5_configuration_errors(void **state)
{
    (void)state;
    struct sm_repr r;
    ct_repr(&r, SM_DT_UINT16, 2, CHUNK);
    struct sm_codec_chain *c = NULL;
    struct sm_err err;
    assert_status(ct_chain_try("[{\"name\":\"n5_block\",\"configuration\":{\"compressor\":"
                               "{\"name\":\"bytes\"}}}]",
                               &r, &c, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "'bytes' is not a bytes->bytes codec");
    assert_status(ct_chain_try("[{\"name\":\"n5_block\",\"configuration\":{\"compressor\":7}}]", &r,
                               &c, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "'compressor' must be null or a codec object");
    assert_status(
        ct_chain_try("[{\"name\":\"n5_block\",\"configuration\":{\"level\":1}}]", &r, &c, &err),
        SM_E_DATA, &err);
    assert_contains(err.what, "unknown configuration key 'level'");
    assert_status(ct_chain_try("[{\"name\":\"n5_block\",\"configuration\":{\"compressor\":"
                               "{\"name\":\"gzip\",\"configuration\":{\"level\":99}}}}]",
                               &r, &c, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "'level' is 99");
    assert_null(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_n5_decodes_a_whole_block_big_endian),
        cmocka_unit_test(test_n5_pads_a_truncated_edge_block),
        cmocka_unit_test(test_n5_pads_a_3d_truncated_block),
        cmocka_unit_test(test_n5_encode_writes_a_whole_block),
        cmocka_unit_test(test_n5_gzip_truncated_block),
        cmocka_unit_test(test_n5_rejects_malformed_headers),
        cmocka_unit_test(test_n5_bomb_is_bounded_by_the_block_size),
        cmocka_unit_test(test_n5_configuration_errors),
    };
    return cmocka_run_group_tests_name("codec_n5", tests, NULL, NULL);
}
