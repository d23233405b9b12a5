/* The codec conformance suite (see codec_suite.h): the case table and the three checks. Included by
 * tests/unit/codec/test_codec_registry.c, which runs every row and checks that every registered
 * codec has at least one. Golden encodings: numcodecs 0.11 (gzip, zlib, zstd, blosc, lz4) and
 * hand-assembled bytes following the spec text (bytes, crc32c, sharding_indexed), zarr-python
 * 2.13's N5ChunkWrapper (n5_block). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../unit/codec/codec_test.h"
#include "codec_suite.h"
#include "sm_test.h"

#define GOLDEN_RAW                                                                                 \
    "ceffd1ffd4ffd7ffdaffddffe0ffe3ffe6ffe9ffecffeffff2fff5fff8fffbfffeff0100040007000a000d001000" \
    "13"                                                                                           \
    "00160019001c001f002200250028002b002e003100340037003a003d0040004300460049004c004f005200550058" \
    "00"                                                                                           \
    "5b005e006100640067006a006d0070007300760079007c007f008200850088008b00"

#define SHARD_CFG(loc, inner)                                                                      \
    "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[16],\"codecs\":" inner    \
    ",\"index_codecs\":[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},"           \
    "{\"name\":\"crc32c\"}],\"index_location\":\"" loc "\"}}]"

#define LE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"
#define BE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"big\"}}"

const struct codec_suite_case codec_suite_cases[] = {
    {"bytes", "[" LE "]", SM_DT_INT16, 1, {64}, 0, GOLDEN_RAW},
    {"bytes",
     "[" BE "]",
     SM_DT_INT16,
     1,
     {64},
     0,
     "ffceffd1ffd4ffd7ffdaffddffe0ffe3ffe6ffe9ffecffeffff2fff5fff8fffbfffe000100040007000a000d0010"
     "001300160019001c001f002200250028002b002e003100340037003a003d0040004300460049004c004f00520055"
     "0058005b005e006100640067006a006d0070007300760079007c007f008200850088008b"},
    {"bytes", "[" BE "]", SM_DT_FLOAT64, 3, {3, 4, 5}, 0, NULL},
    {"transpose",
     "[{\"name\":\"transpose\",\"configuration\":{\"order\":[2,0,1]}}," LE "]",
     SM_DT_UINT16,
     3,
     {3, 4, 5},
     0,
     NULL},
    {"transpose",
     "[{\"name\":\"transpose\",\"configuration\":{\"order\":[0]}}," LE "]",
     SM_DT_INT16,
     1,
     {64},
     0,
     GOLDEN_RAW},
    {"gzip",
     "[" LE ",{\"name\":\"gzip\",\"configuration\":{\"level\":1}}]",
     SM_DT_INT16,
     1,
     {64},
     0,
     "1f8b08002d18106b04ff05c18106c2000045d11b3162448c8888881131468c888888881823222246c4881811fd5b"
     "44448c31222222227a9d73d449675d7455a254996ebaeba1a75e7aeba3af7eca91c7a08049911216652a54a951a7"
     "814d93160e2e6d3c3a74e9d167c090116326f8044c993167c19290156b22366c89d9b1e7c01f14a2bc338000000"
     "0"},
    {"zlib",
     "[" LE ",{\"name\":\"zlib\",\"configuration\":{\"level\":1}}]",
     SM_DT_INT16,
     1,
     {64},
     0,
     "780105c18106c2000045d11b3162448c8888881131468c888888881823222246c4881811fd5b44448c3122222222"
     "7a9d73d449675d7455a254996ebaeba1a75e7aeba3af7eca91c7a08049911216652a54a951a7814d93160e2e6d3c"
     "3a74e9d167c090116326f8044c993167c19290156b22366c89d9b1e7c01f9c422d10"},
    {"zstd",
     "[" LE ",{\"name\":\"zstd\",\"configuration\":{\"level\":1,\"checksum\":false}}]",
     SM_DT_INT16,
     1,
     {64},
     0,
     "28b52ffd20807d030002c81a2180bd19b46ddbb66ddb9f8119d8de000000000000000000000000000000008a4d01"
     "ba6cc972a5ca94284f9a2c4972a4c890203f7aecc871a3c68c182f5aac4871a2c488101f3a6cc870a1c284080f1a"
     "2c4870a0c080807ffbeecd7bb7eedcb86fdbae4d7bb6ecd8b05f0100"},
    {"zstd",
     "[" LE ",{\"name\":\"zstd\",\"configuration\":{\"level\":19,\"checksum\":true}}]",
     SM_DT_UINT32,
     2,
     {33, 17},
     0,
     NULL},
    /* numcodecs.lz4: golden block by numcodecs 0.11 LZ4(acceleration=1) (4-byte size, block). */
    {"numcodecs.lz4",
     "[" LE ",{\"name\":\"numcodecs.lz4\",\"configuration\":{\"acceleration\":1}}]",
     SM_DT_INT16,
     1,
     {64},
     0,
     "80000000f071ceffd1ffd4ffd7ffdaffddffe0ffe3ffe6ffe9ffecffeffff2fff5fff8fffbfffeff0100040007000"
     "a"
     "000d0010001300160019001c001f002200250028002b002e003100340037003a003d0040004300460049004c004f"
     "005200550058005b005e006100640067006a006d0070007300760079007c007f008200850088008b00"},
    {"blosc",
     "[" LE ",{\"name\":\"blosc\",\"configuration\":{\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":"
     "\"shuffle\",\"typesize\":2,\"blocksize\":0}}]",
     SM_DT_INT16,
     1,
     {64},
     0,
     "0201310280000000800000006c0000001400000054000000f836ced1d4d7dadde0e3e6e9eceff2f5f8fbfe010407"
     "0a0d101316191c1f2225282b2e3134373a3d404346494c4f5255585b5e6164676a6d707376797c7f8285888bffff"
     "ffffff05001f00010016500000000000"},
    {"blosc",
     "[" LE ",{\"name\":\"blosc\",\"configuration\":{\"cname\":\"zstd\",\"clevel\":5,\"shuffle\":"
     "\"bitshuffle\",\"typesize\":2,\"blocksize\":0}}]",
     SM_DT_INT16,
     1,
     {64},
     0,
     "02019402800000008000000053000000140000003b00000028b52ffd2080950100f0aaaa992d31ce3ef0c10fc0ff"
     "01f03f00fe0fffff0100c0ffff000000f000082030033d3d028e585227e40c94591643c602"},
    {"crc32c",
     "[" LE ",\"crc32c\"]",
     SM_DT_INT16,
     1,
     {64},
     CS_FLIPS_DETECTED,
     GOLDEN_RAW "4cde5f68"},
    {"crc32c",
     "[" LE ",{\"name\":\"zstd\",\"configuration\":{\"level\":3}},{\"name\":\"crc32c\"}]",
     SM_DT_FLOAT32,
     3,
     {5, 6, 7},
     CS_FLIPS_DETECTED,
     NULL},
    /* N5 blocks: golden encodings by zarr-python 2.13's N5ChunkWrapper (numcodecs 0.11). */
    {"n5_block",
     "[{\"name\":\"n5_block\",\"configuration\":{\"compressor\":null}}]",
     SM_DT_INT16,
     1,
     {64},
     0,
     "0000000100000040ffceffd1ffd4ffd7ffdaffddffe0ffe3ffe6ffe9ffecffeffff2fff5fff8fffbfffe000100"
     "040007000a000d0010001300160019001c001f002200250028002b002e003100340037003a003d004000430046"
     "0049004c004f005200550058005b005e006100640067006a006d0070007300760079007c007f00820085008800"
     "8b"},
    {"n5_block",
     "[{\"name\":\"n5_block\",\"configuration\":{\"compressor\":{\"name\":\"gzip\","
     "\"configuration\":{\"level\":1}}}}]",
     SM_DT_INT16,
     1,
     {64},
     0,
     "00000001000000401f8b08001e34116b04ff05c18106c2000045d11b3162448c8888881131468c888888881823"
     "222246c4881811fd5b44448c31222222227a9da3a34e3aeba2ab12a5ca74d35d0f3df5d25b1f7df523471e8302"
     "26454a5894a950a5469d06364d5a38b8b4f1e8d0a5479f0143468c99e0133065c69c054b4256ac89d8b02566c7"
     "9ec31fc7fb4c5480000000"},
    {"n5_block",
     "[{\"name\":\"n5_block\",\"configuration\":{\"compressor\":{\"name\":\"zstd\","
     "\"configuration\":{\"level\":1}}}}]",
     SM_DT_FLOAT32,
     3,
     {5, 6, 7},
     0,
     NULL},
    /* xz and bz2 (liblzma / libbz2, loaded on demand): golden streams by numcodecs 0.11
     * LZMA(preset=1) and BZ2(1). */
    {"xz",
     "[" LE ",{\"name\":\"xz\",\"configuration\":{\"preset\":1}}]",
     SM_DT_INT16,
     1,
     {64},
     CS_FLIPS_DETECTED,
     "fd377a585a000004e6d6b4460200210110000000a8708e86e0007f007e5d00673fd62ff4341330f7cde060e2ec"
     "4ec11cd5e1026c3e7d0c0f02d30defb3c1a0c33d1c46e908321068df331c47daa9b5a284165e800cbaf787a820"
     "6d9222addba75ec8b8630eafafcf493786994720ac226f62f5244ba44d51598e4d0a9046e7906624eb7700994b"
     "1bf4f7c111c546ae78d57dd700c58b41decdaf1a00000000003a793a9ba0bf688200019a0180010000441453ae"
     "b1c467fb020000000004595a"},
    {"xz", "[" BE ",{\"name\":\"xz\"}]", SM_DT_FLOAT64, 3, {3, 4, 5}, 0, NULL},
    {"bz2",
     "[" LE ",{\"name\":\"bz2\",\"configuration\":{\"level\":1}}]",
     SM_DT_INT16,
     1,
     {64},
     0,
     "425a68313141592653593a09b01f00002f7fc7e492492492492492492492492492492492480001249249249249"
     "a000544484c99188c0980462609a6010c26039a626001300130000980009807a0420fd8828c39049459869c7fc"
     "4114935155976196beb6e3af3f04314724b34f453575fbc884201800036aecb6ef9f7f5f86397fcf4d76dc5dc9"
     "14e14240e826c07c"},
    {"bz2", "[" LE ",{\"name\":\"bz2\"}]", SM_DT_UINT32, 2, {33, 17}, 0, NULL},
    /* Inner chunks stored in reverse order: the index, not the position, says where each is. */
    {"sharding_indexed",
     SHARD_CFG("end", "[" LE "]"),
     SM_DT_INT16,
     1,
     {64},
     0,
     "5e006100640067006a006d0070007300760079007c007f008200850088008b002e003100340037003a003d004000"
     "4300460049004c004f005200550058005b00feff0100040007000a000d0010001300160019001c001f0022002500"
     "28002b00ceffd1ffd4ffd7ffdaffddffe0ffe3ffe6ffe9ffecffeffff2fff5fff8fffbff60000000000000002000"
     "000000000000400000000000000020000000000000002000000000000000200000000000000000000000000000"
     "002000000000000000b2d14032"},
    {"sharding_indexed",
     SHARD_CFG("start", "[" LE "]"),
     SM_DT_INT16,
     1,
     {64},
     CS_TRAILING_OK,
     "a40000000000000020000000000000008400000000000000200000000000000064000000000000002000000000000"
     "0"
     "0044000000000000002000000000000000f13ae7345e006100640067006a006d0070007300760079007c007f0082"
     "00850088008b002e003100340037003a003d0040004300460049004c004f005200550058005b00feff0100040007"
     "000a000d0010001300160019001c001f002200250028002b00ceffd1ffd4ffd7ffdaffddffe0ffe3ffe6ffe9ffec"
     "ffeffff2fff5fff8fffbff"},
    {"sharding_indexed",
     "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[4,4],\"codecs\":[" BE
     ",{\"name\":\"zstd\",\"configuration\":{\"level\":1}}],\"index_codecs\":[" LE
     ",\"crc32c\"]}}]",
     SM_DT_UINT16,
     2,
     {8, 12},
     0,
     NULL},
    /* Nested: shards of 8x12 made of 4x6 shards made of 2x3 chunks. */
    {"sharding_indexed",
     "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[4,6],\"codecs\":[{"
     "\"name\":"
     "\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[2,3],\"codecs\":[" LE
     ",{\"name\":\"gzip\",\"configuration\":{\"level\":1}}],\"index_codecs\":[" LE
     ",\"crc32c\"],\"index_location\":\"start\"}}],\"index_codecs\":[" LE ",\"crc32c\"]}}]",
     SM_DT_INT32,
     2,
     {8, 12},
     0,
     NULL},
};

const size_t codec_suite_ncases = sizeof(codec_suite_cases) / sizeof(codec_suite_cases[0]);

static struct sm_codec_chain *suite_chain(const struct codec_suite_case *c)
{
    return ct_chain(c->codecs, c->dtype, c->ndim, c->shape);
}

void codec_suite_spec_roundtrip(const struct codec_suite_case *c)
{
    struct sm_codec_chain *chain = suite_chain(c);
    struct sm_scratch *s = ct_scratch();
    struct sm_err err;
    sm_err_clear(&err);
    if (c->golden != NULL) {
        uint8_t raw[128], enc[1024];
        assert_int_equal(sm_codec_chain_repr(chain)->len, sizeof(raw));
        ct_hex(GOLDEN_RAW, raw, sizeof(raw));
        const size_t n = ct_hex(c->golden, enc, sizeof(enc));
        struct sm_buf dec = SM_BUF_INIT;
        assert_ok(sm_codec_chain_decode(chain, sm_bytes_of(enc, n), &dec, s, &err), &err);
        assert_int_equal(dec.len, sizeof(raw));
        assert_memory_equal(dec.ptr, raw, sizeof(raw));
        sm_buf_free(&dec);
    }
    /* Deterministic: two encodes of the same chunk give the same bytes. */
    const size_t len = sm_codec_chain_repr(chain)->len;
    uint8_t *data = sm_malloc(len);
    ct_fill_smooth(data, len, sm_dtype_size(c->dtype));
    struct sm_buf a = SM_BUF_INIT, b = SM_BUF_INIT;
    ct_roundtrip(chain, data, &a, s);
    assert_ok(sm_codec_chain_encode(chain, sm_bytes_of(data, len), &b, s, &err), &err);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.ptr, b.ptr, a.len);
    sm_buf_free(&a);
    sm_buf_free(&b);
    sm_free(data);
    sm_scratch_free(s);
    sm_codec_chain_free(chain);
}

void codec_suite_data_roundtrip(const struct codec_suite_case *c)
{
    struct sm_codec_chain *chain = suite_chain(c);
    struct sm_scratch *s = ct_scratch();
    const size_t len = sm_codec_chain_repr(chain)->len;
    uint8_t *data = sm_malloc(len);
    struct sm_buf enc = SM_BUF_INIT;
    ct_fill_smooth(data, len, sm_dtype_size(c->dtype));
    ct_roundtrip(chain, data, &enc, s);
    ct_fill_random(data, len, 42);
    ct_roundtrip(chain, data, &enc, s);
    memset(data, 0, len); /* the fill value: sharding leaves every inner chunk out */
    ct_roundtrip(chain, data, &enc, s);
    memset(data, 0xa5, len);
    ct_roundtrip(chain, data, &enc, s);
    sm_buf_free(&enc);
    sm_free(data);
    sm_scratch_free(s);
    sm_codec_chain_free(chain);
}

/* Decodes a damaged encoding: an error (SM_E_DATA) or, if the damage is invisible to the codec, a
 * result of exactly the chunk's size. */
static sm_status decode_damaged(const struct sm_codec_chain *chain, const uint8_t *p, size_t n,
                                struct sm_scratch *s)
{
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf dec = SM_BUF_INIT;
    sm_status st = sm_codec_chain_decode(chain, sm_bytes_of(p, n), &dec, s, &err);
    if (st == SM_OK) {
        assert_int_equal(dec.len, sm_codec_chain_repr(chain)->len);
    } else if (st != SM_E_DATA) {
        fail_msg("damaged input: status %s (%s)", sm_status_name(st), err.what);
    } else {
        assert_true(err.what[0] != '\0');
        assert_string_equal(err.where, "");
    }
    sm_buf_free(&dec);
    return st;
}

void codec_suite_corrupt_input(const struct codec_suite_case *c)
{
    struct sm_codec_chain *chain = suite_chain(c);
    struct sm_scratch *s = ct_scratch();
    const size_t len = sm_codec_chain_repr(chain)->len;
    uint8_t *data = sm_malloc(len);
    ct_fill_smooth(data, len, sm_dtype_size(c->dtype));
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(chain, data, &enc, s);
    const size_t n = enc.len;
    uint8_t *bad = sm_malloc(n + 1);

    /* Truncation is always detected: every codec knows its exact or framed length. */
    const size_t cuts[] = {0, 1, n / 2, n - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        memcpy(bad, enc.ptr, cuts[i]);
        if (decode_damaged(chain, bad, cuts[i], s) != SM_E_DATA) {
            fail_msg("%s: truncation to %zu of %zu bytes went unnoticed", c->codecs, cuts[i], n);
        }
    }
    memcpy(bad, enc.ptr, n);
    bad[n] = 0x5a;
    if (decode_damaged(chain, bad, n + 1, s) != SM_E_DATA && !(c->caps & CS_TRAILING_OK)) {
        fail_msg("%s: a trailing byte went unnoticed", c->codecs);
    }
    /* Byte flips at every position (or a spread of them for long encodings). */
    const size_t step = n <= 512 ? 1 : n / 512;
    for (size_t pos = 0; pos < n; pos += step) {
        memcpy(bad, enc.ptr, n);
        bad[pos] ^= (uint8_t)(1u << (pos % 8));
        if (decode_damaged(chain, bad, n, s) != SM_E_DATA && (c->caps & CS_FLIPS_DETECTED)) {
            fail_msg("%s: a flip at byte %zu of %zu went unnoticed", c->codecs, pos, n);
        }
    }
    sm_free(bad);
    sm_buf_free(&enc);
    sm_free(data);
    sm_scratch_free(s);
    sm_codec_chain_free(chain);
}
