/* Unit tests for engine/codec/codec_blosc.c: every compressor with noshuffle, shuffle and
 * bitshuffle round trips; numcodecs' integer shuffle and typesize defaults; a header lying about
 * its decoded size, a header whose compressed size disagrees with the input and short input are
 * SM_E_DATA; numcodecs-written buffers decode; unknown compressors are rejected by name. Of unknown
 * size, the header's decoded size is bounded by the scratch's decode bound (SM_E_LIMIT before any
 * allocation), and headers whose block layout cannot fit the buffer are SM_E_DATA. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <blosc.h>
#include <cmocka.h>

#include "sm_test.h"
#include "codec_test.h"

#define LE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"

static const uint64_t shape[2] = {40, 50};

static struct sm_codec_chain *bl(const char *cfg, enum sm_dtype dt)
{
    char text[512];
    snprintf(text, sizeof(text), "[" LE ",{\"name\":\"blosc\",\"configuration\":%s}]", cfg);
    return ct_chain(text, dt, 2, shape);
}

static void test_blosc_round_trips_every_cname_and_shuffle(void **state)
{
    (void)state;
    const char *cnames[] = {"lz4", "lz4hc", "blosclz", "zstd", "zlib"};
    const char *shuffles[] = {"noshuffle", "shuffle", "bitshuffle"};
    static uint8_t data[40 * 50 * 4];
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    for (size_t i = 0; i < 5; i++) {
        for (size_t k = 0; k < 3; k++) {
            char cfg[256];
            snprintf(cfg, sizeof(cfg),
                     "{\"cname\":\"%s\",\"clevel\":5,\"shuffle\":\"%s\",\"typesize\":4,"
                     "\"blocksize\":0}",
                     cnames[i], shuffles[k]);
            struct sm_codec_chain *c = bl(cfg, SM_DT_INT32);
            ct_fill_smooth(data, sizeof(data), 4);
            ct_roundtrip(c, data, &enc, s);
            assert_true(enc.len < sizeof(data));
            size_t ts;
            int flags;
            blosc_cbuffer_metainfo(enc.ptr, &ts, &flags);
            assert_int_equal(ts, 4);
            assert_int_equal((flags & BLOSC_DOSHUFFLE) != 0, k == 1);
            assert_int_equal((flags & BLOSC_DOBITSHUFFLE) != 0, k == 2);
            assert_string_equal(blosc_cbuffer_complib(enc.ptr),
                                strcmp(cnames[i], "lz4hc") == 0     ? "LZ4"
                                : strcmp(cnames[i], "lz4") == 0     ? "LZ4"
                                : strcmp(cnames[i], "blosclz") == 0 ? "BloscLZ"
                                : strcmp(cnames[i], "zstd") == 0    ? "Zstd"
                                                                    : "Zlib");
            ct_fill_random(data, sizeof(data), i * 3 + k);
            ct_roundtrip(c, data, &enc, s);
            sm_codec_chain_free(c);
        }
    }
    sm_buf_free(&enc);
    sm_scratch_free(s);
}

static void test_blosc_typesize_defaults_to_the_element_size(void **state)
{
    (void)state;
    static uint8_t data[40 * 50 * 8];
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    struct sm_codec_chain *c = bl("{\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":1}", SM_DT_FLOAT64);
    ct_fill_smooth(data, sizeof(data), 8);
    ct_roundtrip(c, data, &enc, s);
    size_t ts;
    int flags;
    blosc_cbuffer_metainfo(enc.ptr, &ts, &flags);
    assert_int_equal(ts, 8);
    assert_true(flags & BLOSC_DOSHUFFLE);
    sm_codec_chain_free(c);
    /* numcodecs AUTOSHUFFLE (-1): bit-shuffle for 1-byte types */
    c = bl("{\"id\":\"blosc\",\"cname\":\"zstd\",\"clevel\":3,\"shuffle\":-1,\"blocksize\":0}",
           SM_DT_UINT8);
    ct_roundtrip(c, data, &enc, s);
    blosc_cbuffer_metainfo(enc.ptr, &ts, &flags);
    assert_int_equal(ts, 1);
    assert_true(flags & BLOSC_DOBITSHUFFLE);
    sm_codec_chain_free(c);
    sm_buf_free(&enc);
    sm_scratch_free(s);
}

static void test_blosc_decode_rejects_a_header_lying_about_its_size(void **state)
{
    (void)state;
    static uint8_t data[40 * 50 * 2];
    ct_fill_smooth(data, sizeof(data), 2);
    struct sm_codec_chain *c =
        bl("{\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":\"shuffle\"}", SM_DT_UINT16);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    /* bytes 4..7: nbytes (decoded size), little-endian */
    const uint32_t lie = 4000 + 1000;
    memcpy(enc.ptr + 4, &lie, 4);
    ct_decode_fails(c, sm_buf_bytes(&enc), SM_E_DATA,
                    "blosc: header says 5000 decoded bytes, expected 4000", s);
    const uint32_t smaller = 3998;
    memcpy(enc.ptr + 4, &smaller, 4);
    ct_decode_fails(c, sm_buf_bytes(&enc), SM_E_DATA, "header says 3998 decoded bytes", s);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_blosc_decode_validates_the_header_against_the_input(void **state)
{
    (void)state;
    static uint8_t data[40 * 50 * 2];
    ct_fill_smooth(data, sizeof(data), 2);
    struct sm_codec_chain *c =
        bl("{\"cname\":\"blosclz\",\"clevel\":9,\"shuffle\":\"bitshuffle\"}", SM_DT_UINT16);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    ct_decode_fails(c, sm_bytes_of(enc.ptr, enc.len - 1), SM_E_DATA, "blosc: invalid header", s);
    ct_decode_fails(c, sm_bytes_of(enc.ptr, 15), SM_E_DATA, "shorter than the 16-byte header", s);
    /* cbytes (bytes 12..15) claiming more than there is */
    uint32_t cb;
    memcpy(&cb, enc.ptr + 12, 4);
    cb += 100;
    memcpy(enc.ptr + 12, &cb, 4);
    ct_decode_fails(c, sm_buf_bytes(&enc), SM_E_DATA, "claims", s);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_blosc_decodes_numcodecs_buffers(void **state)
{
    (void)state;
    const char *lz4 = "0201310280000000800000006c0000001400000054000000f836ced1d4d7dadde0e3e6e9ecef"
                      "f2f5f8fbfe010407"
                      "0a0d101316191c1f2225282b2e3134373a3d404346494c4f5255585b5e6164676a6d70737679"
                      "7c7f8285888bffff"
                      "ffffff05001f00010016500000000000";
    const char *zstd_bit =
        "02019402800000008000000053000000140000003b00000028b52ffd2080950100f0aaaa992d31ce3ef0c10fc0"
        "ff"
        "01f03f00fe0fffff0100c0ffff000000f000082030033d3d028e585227e40c94591643c602";
    const char *hex[2] = {lz4, zstd_bit};
    const uint64_t sh[1] = {64};
    /* The configuration does not matter for decoding: the header says everything. */
    struct sm_codec_chain *c = ct_chain("[" LE ",\"blosc\"]", SM_DT_INT16, 1, sh);
    struct sm_scratch *s = ct_scratch();
    for (int k = 0; k < 2; k++) {
        uint8_t enc[256];
        const size_t n = ct_hex(hex[k], enc, sizeof(enc));
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
    }
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_blosc_rejects_bad_configurations(void **state)
{
    (void)state;
    struct sm_repr r;
    ct_repr(&r, SM_DT_INT32, 2, shape);
    struct sm_err err;
    struct sm_codec_chain *c;
    assert_status(ct_chain_try("[" LE ",{\"name\":\"blosc\",\"configuration\":{\"cname\":"
                               "\"lzma\"}}]",
                               &r, &c, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "compressor 'lzma' is not available");
    assert_status(ct_chain_try("[" LE ",{\"name\":\"blosc\",\"configuration\":{\"shuffle\":"
                               "\"byteshuffle\"}}]",
                               &r, &c, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "got \"byteshuffle\"");
    assert_status(ct_chain_try("[" LE ",{\"name\":\"blosc\",\"configuration\":{\"shuffle\":3}}]",
                               &r, &c, &err),
                  SM_E_DATA, &err);
    assert_status(ct_chain_try("[" LE ",{\"name\":\"blosc\",\"configuration\":{\"clevel\":10}}]",
                               &r, &c, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "'clevel' is 10, outside 0..9");
    assert_status(ct_chain_try("[" LE ",{\"name\":\"blosc\",\"configuration\":{\"typesize\":0}}]",
                               &r, &c, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "'typesize' is 0");
}

/* [bytes, zstd, blosc]: the blosc stage's decoded size is unknown. */
static struct sm_codec_chain *bl_unknown(void)
{
    struct sm_codec_chain *c =
        ct_chain("[" LE ",\"zstd\",{\"name\":\"blosc\",\"configuration\":{\"cname\":\"lz4\"}}]",
                 SM_DT_UINT16, 2, shape);
    assert_int_equal(c->stages[2].dec.len, SM_LEN_VARIABLE);
    return c;
}

/* blosc of n zero bytes (lz4, byte shuffle, typesize 2). */
static uint8_t *zero_blosc(size_t n, size_t *len)
{
    uint8_t *zeros = test_calloc(1, n);
    uint8_t *b = test_malloc(n + BLOSC_MAX_OVERHEAD);
    const int r =
        blosc_compress_ctx(5, BLOSC_SHUFFLE, 2, n, zeros, b, n + BLOSC_MAX_OVERHEAD, "lz4", 0, 1);
    test_free(zeros);
    assert_true(r > 0 && (size_t)r < n / 100);
    *len = (size_t)r;
    return b;
}

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4); /* blosc headers are little-endian, as the host */
}

static void test_blosc_nbytes_past_the_decode_bound_is_a_limit_before_allocating(void **state)
{
    (void)state;
    struct sm_codec_chain *c = bl_unknown();
    struct sm_scratch *s = ct_scratch();
    size_t len;
    uint8_t *b = zero_blosc((size_t)8 << 20, &len);
    sm_scratch_set_max_decoded(s, (size_t)1 << 20);
    ct_decode_bounded(c, sm_bytes_of(b, len), SM_E_LIMIT,
                      "blosc: header declares 8388608 decoded bytes, more than the decode limit of "
                      "1048576 bytes (limits.max_chunk_bytes)",
                      4096, s);
    /* within the bound it decodes (and the zeros then fail the zstd stage) */
    sm_scratch_set_max_decoded(s, (size_t)16 << 20);
    ct_decode_bounded(c, sm_bytes_of(b, len), SM_E_DATA, "zstd", (size_t)9 << 20, s);
    test_free(b);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_blosc_header_whose_blocks_cannot_fit_is_data(void **state)
{
    (void)state;
    struct sm_codec_chain *c = bl_unknown();
    struct sm_scratch *s = ct_scratch();
    sm_scratch_set_max_decoded(s, 0); /* no bound: the header's own consistency decides */
    size_t len;
    uint8_t *b = zero_blosc((size_t)1 << 20, &len);
    uint32_t blocksize;
    memcpy(&blocksize, b + 8, 4);
    assert_true(blocksize > 0 && blocksize <= (1u << 20));
    /* nbytes near the format's 2 GiB maximum with the same block size: thousands of blocks, each
     * needing a 4-byte start offset the buffer does not have */
    put32(b + 4, 0x7fffff00u);
    ct_decode_bounded(c, sm_bytes_of(b, len), SM_E_DATA, "more than", 4096, s);
    put32(b + 4, 1u << 20);
    put32(b + 8, 0); /* no block size */
    ct_decode_bounded(c, sm_bytes_of(b, len), SM_E_DATA, "blocks of 0 bytes", 4096, s);
    put32(b + 8, (1u << 20) + 2); /* blocks larger than the buffer */
    ct_decode_bounded(c, sm_bytes_of(b, len), SM_E_DATA, "blocks of 1048578 bytes", 4096, s);
    test_free(b);
    /* A copied (memcpyed) buffer holds exactly nbytes after its header. */
    uint8_t small[64] = {0};
    uint8_t cb[64 + BLOSC_MAX_OVERHEAD];
    const int r = blosc_compress_ctx(5, BLOSC_NOSHUFFLE, 1, sizeof(small), small, cb, sizeof(cb),
                                     "lz4", 0, 1);
    assert_int_equal(r, (int)sizeof(cb));
    assert_true((cb[2] & BLOSC_MEMCPYED) != 0);
    put32(cb + 4, 1u << 30);
    ct_decode_bounded(
        c, sm_bytes_of(cb, sizeof(cb)), SM_E_DATA,
        "header of a copied buffer claims 1073741824 decoded bytes, the buffer holds 64", 4096, s);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

/* fuzz_codec_blosc (campaign of 2026-12-03): 48 bytes whose header claims 855,637,760 decoded
 * bytes in two blocks: consistent enough for the block checks, within a 1 GiB bound, and still
 * impossible (no codec blosc uses expands 48 bytes that far). Refused before the allocation. */
static void test_blosc_header_claiming_more_than_any_codec_expands_is_data(void **state)
{
    (void)state;
    static const uint8_t lie[48] = {0x02, 0x01, 0x01, 0x01, 0x00, 0xff, 0xff, 0x32,
                                    0x00, 0x00, 0x01, 0x31, 0x30, 0x00, 0x00, 0x00};
    struct sm_codec_chain *c = bl_unknown();
    struct sm_scratch *s = ct_scratch(); /* the default bound, 1 GiB, would allow the claim */
    ct_decode_bounded(c, sm_bytes_of(lie, sizeof(lie)), SM_E_DATA,
                      "header claims 855637760 decoded bytes from 48 bytes, more than any codec "
                      "blosc uses can expand",
                      4096, s);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blosc_round_trips_every_cname_and_shuffle),
        cmocka_unit_test(test_blosc_typesize_defaults_to_the_element_size),
        cmocka_unit_test(test_blosc_decode_rejects_a_header_lying_about_its_size),
        cmocka_unit_test(test_blosc_decode_validates_the_header_against_the_input),
        cmocka_unit_test(test_blosc_decodes_numcodecs_buffers),
        cmocka_unit_test(test_blosc_rejects_bad_configurations),
        cmocka_unit_test(test_blosc_nbytes_past_the_decode_bound_is_a_limit_before_allocating),
        cmocka_unit_test(test_blosc_header_claiming_more_than_any_codec_expands_is_data),
        cmocka_unit_test(test_blosc_header_whose_blocks_cannot_fit_is_data),
    };
    return cmocka_run_group_tests_name("codec_blosc", tests, NULL, NULL);
}
