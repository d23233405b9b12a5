/* Unit tests for engine/codec/codec_bytes.c: big-endian data of every dtype is swapped to native
 * little-endian on decode and back on encode, little-endian data passes unchanged, "endian" is
 * required exactly for multi-byte types, and a wrong input size is an error. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sm_test.h"
#include "codec_test.h"

#define LE "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}]"
#define BE "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"big\"}}]"

static void test_bytes_big_endian_decodes_every_dtype(void **state)
{
    (void)state;
    const uint64_t shape[2] = {3, 7};
    struct sm_scratch *s = ct_scratch();
    for (int dt = 0; dt < SM_DT_COUNT; dt++) {
        const size_t elem = sm_dtype_size((enum sm_dtype)dt);
        struct sm_codec_chain *c = ct_chain(BE, (enum sm_dtype)dt, 2, shape);
        const size_t len = 21 * elem;
        uint8_t native[21 * 8], big[21 * 8];
        ct_fill_random(native, len, (uint64_t)dt);
        for (size_t i = 0; i < 21; i++) {
            for (size_t b = 0; b < elem; b++) {
                big[i * elem + b] = native[i * elem + elem - 1 - b];
            }
        }
        struct sm_err err;
        sm_err_clear(&err);
        struct sm_buf out = SM_BUF_INIT;
        assert_ok(sm_codec_chain_decode(c, sm_bytes_of(big, len), &out, s, &err), &err);
        assert_int_equal(out.len, len);
        assert_memory_equal(out.ptr, native, len);
        assert_ok(sm_codec_chain_encode(c, sm_bytes_of(native, len), &out, s, &err), &err);
        assert_memory_equal(out.ptr, big, len);
        /* 1-byte types are never swapped: the stage is a plain copy */
        assert_int_equal(c->stages[0].identity, elem == 1);
        sm_buf_free(&out);
        sm_codec_chain_free(c);
    }
    sm_scratch_free(s);
}

static void test_bytes_little_endian_is_a_plain_copy(void **state)
{
    (void)state;
    const uint64_t shape[1] = {50};
    struct sm_codec_chain *c = ct_chain(LE, SM_DT_FLOAT64, 1, shape);
    assert_true(c->stages[0].identity);
    uint8_t data[400];
    ct_fill_random(data, sizeof(data), 77);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    assert_memory_equal(enc.ptr, data, sizeof(data));
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_bytes_swaps_known_values(void **state)
{
    (void)state;
    const uint64_t shape[1] = {2};
    struct sm_codec_chain *c = ct_chain(BE, SM_DT_UINT32, 1, shape);
    const uint8_t big[8] = {0x01, 0x02, 0x03, 0x04, 0xde, 0xad, 0xbe, 0xef};
    struct sm_scratch *s = ct_scratch();
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf out = SM_BUF_INIT;
    assert_ok(sm_codec_chain_decode(c, sm_bytes_of(big, 8), &out, s, &err), &err);
    uint32_t v[2];
    memcpy(v, out.ptr, 8);
    assert_int_equal(v[0], 0x01020304u);
    assert_int_equal(v[1], 0xdeadbeefu);
    sm_buf_free(&out);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_bytes_endian_is_optional_only_for_one_byte_types(void **state)
{
    (void)state;
    const uint64_t shape[1] = {8};
    struct sm_codec_chain *c = ct_chain("[\"bytes\"]", SM_DT_UINT8, 1, shape);
    sm_codec_chain_free(c);
    c = ct_chain("[{\"name\":\"bytes\",\"configuration\":{}}]", SM_DT_BOOL, 1, shape);
    sm_codec_chain_free(c);
    struct sm_repr r;
    ct_repr(&r, SM_DT_INT16, 1, shape);
    struct sm_err err;
    assert_status(ct_chain_try("[\"bytes\"]", &r, &c, &err), SM_E_DATA, &err);
    assert_contains(err.what, "codec 'bytes': 'endian' is required for int16");
}

static void test_bytes_rejects_bad_configurations(void **state)
{
    (void)state;
    const uint64_t shape[1] = {8};
    struct sm_repr r;
    ct_repr(&r, SM_DT_UINT16, 1, shape);
    struct sm_err err;
    struct sm_codec_chain *c;
    assert_status(ct_chain_try("[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"native\"}}]",
                               &r, &c, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "got \"native\"");
    assert_status(
        ct_chain_try("[{\"name\":\"bytes\",\"configuration\":{\"endian\":1}}]", &r, &c, &err),
        SM_E_DATA, &err);
    assert_contains(err.what, "'endian' must be a string");
    assert_status(ct_chain_try("[{\"name\":\"bytes\",\"configuration\":{\"endianness\":\"big\"}}]",
                               &r, &c, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "unknown configuration key 'endianness'");
}

static void test_bytes_decode_rejects_a_wrong_size(void **state)
{
    (void)state;
    const uint64_t shape[1] = {8};
    struct sm_codec_chain *c = ct_chain(BE, SM_DT_UINT16, 1, shape);
    uint8_t data[17] = {0};
    struct sm_scratch *s = ct_scratch();
    ct_decode_fails(c, sm_bytes_of(data, 15), SM_E_DATA, "decode input of 15 bytes, expected 16",
                    s);
    ct_decode_fails(c, sm_bytes_of(data, 17), SM_E_DATA, "expected 16", s);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_big_endian_decodes_every_dtype),
        cmocka_unit_test(test_bytes_little_endian_is_a_plain_copy),
        cmocka_unit_test(test_bytes_swaps_known_values),
        cmocka_unit_test(test_bytes_endian_is_optional_only_for_one_byte_types),
        cmocka_unit_test(test_bytes_rejects_bad_configurations),
        cmocka_unit_test(test_bytes_decode_rejects_a_wrong_size),
    };
    return cmocka_run_group_tests_name("codec_bytes", tests, NULL, NULL);
}
