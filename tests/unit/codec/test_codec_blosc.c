/* Unit tests for engine/codec/codec_blosc.c: every compressor with noshuffle, shuffle and
 * bitshuffle round trips; numcodecs' integer shuffle and typesize defaults; a header lying about
 * its decoded size, a header whose compressed size disagrees with the input and short input are
 * SM_E_DATA; numcodecs-written buffers decode; unknown compressors are rejected by name. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blosc_round_trips_every_cname_and_shuffle),
        cmocka_unit_test(test_blosc_typesize_defaults_to_the_element_size),
        cmocka_unit_test(test_blosc_decode_rejects_a_header_lying_about_its_size),
        cmocka_unit_test(test_blosc_decode_validates_the_header_against_the_input),
        cmocka_unit_test(test_blosc_decodes_numcodecs_buffers),
        cmocka_unit_test(test_blosc_rejects_bad_configurations),
    };
    return cmocka_run_group_tests_name("codec_blosc", tests, NULL, NULL);
}
