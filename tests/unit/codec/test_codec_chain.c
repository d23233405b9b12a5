/* Unit tests for engine/codec/codec_chain.c: parsing the v3 codec list (names, bare strings,
 * unknown codecs named), the order A2A* A2B B2B*, per-stage representations, the length check after
 * every stage, identity stages skipped, no allocation in steady state, nesting limits, and clean
 * SM_E_NOMEM at every allocation of a chain decode (run under ASan for leaks). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "sm_test.h"
#include "codec_test.h"

#define LE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"
#define BE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"big\"}}"

static const uint64_t shape3[3] = {4, 5, 6};

static void expect_chain_error(const char *codecs, sm_status st, const char *needle)
{
    struct sm_repr r;
    ct_repr(&r, SM_DT_UINT16, 3, shape3);
    struct sm_err err;
    struct sm_codec_chain *c = (struct sm_codec_chain *)1;
    assert_status(ct_chain_try(codecs, &r, &c, &err), st, &err);
    assert_null(c);
    assert_contains(err.what, needle);
}

static void test_chain_names_an_unknown_codec(void **state)
{
    (void)state;
    expect_chain_error("[" LE ",{\"name\":\"foo\"}]", SM_E_DATA, "unknown codec 'foo'");
    expect_chain_error("[" LE ",\"lz77\"]", SM_E_DATA, "unknown codec 'lz77' (codecs[1])");
}

static void test_chain_rejects_array_to_array_after_bytes(void **state)
{
    (void)state;
    expect_chain_error("[" LE ",{\"name\":\"transpose\",\"configuration\":{\"order\":[0,1,2]}}]",
                       SM_E_DATA, "codec 'transpose' (array->array) after codec 'bytes'");
    expect_chain_error(
        "[" LE ",\"crc32c\",{\"name\":\"transpose\",\"configuration\":{\"order\":[0,1,2]}}]",
        SM_E_DATA, "codec 'transpose' (array->array) after codec 'crc32c' (bytes->bytes)");
}

static void test_chain_rejects_two_array_to_bytes_codecs(void **state)
{
    (void)state;
    expect_chain_error("[" LE "," BE "]", SM_E_DATA,
                       "codec 'bytes' (array->bytes) after codec 'bytes' (array->bytes)");
    expect_chain_error("[" LE ",\"crc32c\"," LE "]", SM_E_DATA,
                       "codec 'bytes' (array->bytes) after codec 'crc32c' (bytes->bytes)");
}

static void test_chain_rejects_bytes_to_bytes_before_array_to_bytes(void **state)
{
    (void)state;
    expect_chain_error("[\"crc32c\"," LE "]", SM_E_DATA,
                       "codec 'crc32c' (bytes->bytes) before any array->bytes codec");
}

static void test_chain_requires_an_array_to_bytes_codec(void **state)
{
    (void)state;
    expect_chain_error("[{\"name\":\"transpose\",\"configuration\":{\"order\":[2,1,0]}}]",
                       SM_E_DATA, "no array->bytes codec");
    expect_chain_error("[]", SM_E_DATA, "the list is empty");
}

static void test_chain_rejects_malformed_lists(void **state)
{
    (void)state;
    expect_chain_error("{\"name\":\"bytes\"}", SM_E_DATA, "codecs must be a JSON array");
    expect_chain_error("[42]", SM_E_DATA, "codecs[0] must be a codec name");
    expect_chain_error("[{\"configuration\":{}}]", SM_E_DATA, "codecs[0] has no string \"name\"");
    expect_chain_error("[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"middle\"}}]",
                       SM_E_DATA, "'endian' must be \"little\" or \"big\"");
}

static void test_chain_accepts_bare_names_and_numcodecs_prefix(void **state)
{
    (void)state;
    const uint64_t shape[1] = {100};
    struct sm_codec_chain *c = ct_chain("[\"bytes\",\"crc32c\"]", SM_DT_UINT8, 1, shape);
    assert_int_equal(c->n, 2);
    sm_codec_chain_free(c);
    c = ct_chain("[" LE ",{\"name\":\"numcodecs.zlib\",\"configuration\":{\"level\":1}}]",
                 SM_DT_INT32, 1, shape);
    assert_ptr_equal(c->stages[1].ops, &sm_codec_zlib_ops);
    sm_codec_chain_free(c);
}

static void test_chain_keeps_the_chunk_repr_and_stage_reprs(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain(
        "[{\"name\":\"transpose\",\"configuration\":{\"order\":[2,0,1]}}," BE ",\"crc32c\"]",
        SM_DT_UINT16, 3, shape3);
    const struct sm_repr *r = sm_codec_chain_repr(c);
    assert_int_equal(r->dtype, SM_DT_UINT16);
    assert_int_equal(r->ndim, 3);
    assert_int_equal(r->len, 4 * 5 * 6 * 2);
    assert_int_equal(c->n, 3);
    /* transpose: decoded [4,5,6] -> encoded [6,4,5] */
    assert_int_equal(c->stages[0].enc.shape[0], 6);
    assert_int_equal(c->stages[0].enc.shape[1], 4);
    assert_int_equal(c->stages[0].enc.shape[2], 5);
    assert_int_equal(c->stages[1].dec.shape[0], 6);
    assert_int_equal(c->stages[1].enc.len, 240);
    assert_int_equal(c->stages[2].dec.len, 240);
    assert_int_equal(c->stages[2].enc.len, 244);
    assert_false(c->stages[0].identity);
    assert_false(c->stages[1].identity);
    assert_int_equal(c->height, 1);
    sm_codec_chain_free(c);
}

static void test_chain_skips_identity_stages(void **state)
{
    (void)state;
    struct sm_codec_chain *c =
        ct_chain("[{\"name\":\"transpose\",\"configuration\":{\"order\":[0,1,2]}}," LE "]",
                 SM_DT_UINT16, 3, shape3);
    assert_true(c->stages[0].identity);
    assert_true(c->stages[1].identity);
    uint8_t data[240];
    ct_fill_random(data, sizeof(data), 1);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    assert_memory_equal(enc.ptr, data, sizeof(data)); /* raw little-endian is the array itself */
    ct_decode_fails(c, sm_bytes_of(data, 239), SM_E_DATA, "decoded size 239, expected 240", s);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

/* A B2B codec that drops the last byte on decode, to exercise the chain's own length check. */
static sm_status short_decode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                              struct sm_scratch *s, struct sm_err *err)
{
    (void)prep;
    (void)s;
    return sm_buf_set(out, sm_bytes_of(in.ptr, in.len - 1), err);
}

static void test_chain_checks_the_size_after_every_stage(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain("[" BE ",\"crc32c\"]", SM_DT_UINT16, 3, shape3);
    struct sm_codec_ops liar = *c->stages[1].ops;
    liar.name = "liar";
    liar.decode = short_decode;
    const struct sm_codec_ops *saved = c->stages[1].ops;
    c->stages[1].ops = &liar;
    uint8_t data[244] = {0};
    struct sm_scratch *s = ct_scratch();
    ct_decode_fails(c, sm_bytes_of(data, sizeof(data)), SM_E_DATA,
                    "codec 'liar': decoded size 243, expected 240", s);
    c->stages[1].ops = saved;
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_chain_decode_rejects_a_zstd_frame_of_another_size(void **state)
{
    (void)state;
    const uint64_t small[1] = {100}, big[1] = {101};
    struct sm_codec_chain *a = ct_chain("[" LE ",\"zstd\"]", SM_DT_UINT8, 1, small);
    struct sm_codec_chain *b = ct_chain("[" LE ",\"zstd\"]", SM_DT_UINT8, 1, big);
    uint8_t data[101];
    ct_fill_random(data, sizeof(data), 3);
    struct sm_scratch *s = ct_scratch();
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf enc = SM_BUF_INIT;
    assert_ok(sm_codec_chain_encode(b, sm_bytes_of(data, 101), &enc, s, &err), &err);
    ct_decode_fails(a, sm_buf_bytes(&enc), SM_E_DATA, "expected 100", s);
    assert_ok(sm_codec_chain_encode(a, sm_bytes_of(data, 100), &enc, s, &err), &err);
    ct_decode_fails(b, sm_buf_bytes(&enc), SM_E_DATA, "decoded size 100, expected 101", s);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(a);
    sm_codec_chain_free(b);
}

static void test_chain_encode_rejects_a_wrong_input_size(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain("[" LE "]", SM_DT_UINT16, 3, shape3);
    struct sm_scratch *s = ct_scratch();
    struct sm_err err;
    sm_err_clear(&err);
    uint8_t data[10] = {0};
    struct sm_buf enc = SM_BUF_INIT;
    assert_status(sm_codec_chain_encode(c, sm_bytes_of(data, 10), &enc, s, &err), SM_E_INTERNAL,
                  &err);
    assert_contains(err.what, "encode input of 10 bytes, the chunk is 240 bytes");
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static const char *sharded =
    "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[2,5,3],\"codecs\":[" BE
    ",{\"name\":\"zstd\",\"configuration\":{\"level\":1}}],\"index_codecs\":[" LE ",\"crc32c\"]}}]";

static void test_chain_exposes_the_sharding_stage_only_when_alone(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain(sharded, SM_DT_UINT16, 3, shape3);
    assert_non_null(sm_codec_chain_shard(c));
    assert_int_equal(c->height, 2);
    sm_codec_chain_free(c);
    char text[1024];
    snprintf(text, sizeof(text),
             "[{\"name\":\"transpose\",\"configuration\":{\"order\":[0,1,2]}},%s", sharded + 1);
    c = ct_chain(text, SM_DT_UINT16, 3, shape3);
    assert_non_null(sm_codec_chain_shard(c)); /* an identity transpose changes nothing */
    sm_codec_chain_free(c);
    c = ct_chain("[" LE ",\"crc32c\"]", SM_DT_UINT16, 3, shape3);
    assert_null(sm_codec_chain_shard(c));
    sm_codec_chain_free(c);
}

static void test_chain_decodes_a_transposed_shard_whole(void **state)
{
    (void)state;
    char text[1024];
    snprintf(text, sizeof(text),
             "[{\"name\":\"transpose\",\"configuration\":{\"order\":[1,0,2]}},%s", sharded + 1);
    const uint64_t shape[3] = {5, 4, 6}; /* transposed to [4,5,6] before sharding */
    struct sm_codec_chain *c = ct_chain(text, SM_DT_UINT16, 3, shape);
    assert_null(sm_codec_chain_shard(c));
    uint8_t data[240];
    ct_fill_random(data, sizeof(data), 9);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

/* After one warm-up decode, a decode allocates nothing: even a forced failure of the very next
 * allocation does not disturb it. */
static void decode_without_allocating(const char *codecs, enum sm_dtype dt)
{
    struct sm_codec_chain *c = ct_chain(codecs, dt, 3, shape3);
    const size_t len = sm_codec_chain_repr(c)->len;
    uint8_t *data = sm_malloc(len);
    ct_fill_smooth(data, len, sm_dtype_size(dt));
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT, dec = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_codec_chain_decode(c, sm_buf_bytes(&enc), &dec, s, &err), &err);
    sm_alloc_fail_at(1);
    sm_status st = sm_codec_chain_decode(c, sm_buf_bytes(&enc), &dec, s, &err);
    sm_alloc_fail_at(0);
    assert_ok(st, &err);
    assert_memory_equal(dec.ptr, data, len);
    sm_buf_free(&enc);
    sm_buf_free(&dec);
    sm_free(data);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_chain_decode_does_not_allocate_in_steady_state(void **state)
{
    (void)state;
    decode_without_allocating("[" BE ",{\"name\":\"zstd\",\"configuration\":{\"level\":3}},"
                              "\"crc32c\"]",
                              SM_DT_INT32);
    decode_without_allocating("[{\"name\":\"transpose\",\"configuration\":{\"order\":[2,1,0]}}," BE
                              ",{\"name\":\"gzip\",\"configuration\":{\"level\":1}}]",
                              SM_DT_UINT16);
    decode_without_allocating(sharded, SM_DT_UINT16);
}

/* `levels` sharding codecs, each around the previous list, around [bytes]. */
static void nest(char *text, size_t cap, int levels)
{
    snprintf(text, cap, "[" LE "]");
    for (int i = 0; i < levels; i++) {
        char *next = sm_malloc(cap);
        int n = snprintf(next, cap,
                         "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":"
                         "[4,5,6],\"codecs\":%s,\"index_codecs\":[" LE "]}}]",
                         text);
        assert_true(n > 0 && (size_t)n < cap);
        memcpy(text, next, (size_t)n + 1);
        sm_free(next);
    }
}

static void test_chain_rejects_nesting_deeper_than_the_limit(void **state)
{
    (void)state;
    /* SM_CODEC_MAX_NESTING levels of sharding around a bytes chain: 9 chains deep. */
    char text[8192];
    nest(text, sizeof(text), SM_CODEC_MAX_NESTING);
    expect_chain_error(text, SM_E_DATA, "nested deeper than 8 levels");
}

static void test_chain_accepts_nesting_up_to_the_limit(void **state)
{
    (void)state;
    char text[8192];
    nest(text, sizeof(text), SM_CODEC_MAX_NESTING - 1);
    struct sm_codec_chain *c = ct_chain(text, SM_DT_UINT16, 3, shape3);
    assert_int_equal(c->height, SM_CODEC_MAX_NESTING);
    uint8_t data[240];
    ct_fill_random(data, sizeof(data), 5);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

/* Fails allocation n = 1, 2, ... of (scratch creation + a chain decode) until one succeeds; each
 * failure must be a clean SM_E_NOMEM that leaves nothing allocated. */
static void alloc_failure_loop(const char *codecs, enum sm_dtype dt)
{
    struct sm_codec_chain *c = ct_chain(codecs, dt, 3, shape3);
    const size_t len = sm_codec_chain_repr(c)->len;
    uint8_t *data = sm_malloc(len);
    ct_fill_smooth(data, len, sm_dtype_size(dt));
    struct sm_buf enc = SM_BUF_INIT;
    struct sm_scratch *s = ct_scratch();
    ct_roundtrip(c, data, &enc, s);
    sm_scratch_free(s);
    const uint64_t base = sm_alloc_current();
    bool done = false;
    unsigned failures = 0;
    for (uint64_t n = 1; n < 1000 && !done; n++) {
        struct sm_err err;
        sm_err_clear(&err);
        struct sm_buf dec = SM_BUF_INIT;
        s = NULL;
        sm_alloc_fail_at(n);
        sm_status st = sm_scratch_new(&s, &err);
        if (st == SM_OK) {
            st = sm_codec_chain_decode(c, sm_buf_bytes(&enc), &dec, s, &err);
        }
        sm_alloc_fail_at(0);
        if (st == SM_OK) {
            assert_memory_equal(dec.ptr, data, len);
            done = true;
        } else {
            assert_status(st, SM_E_NOMEM, &err);
            assert_true(err.what[0] != '\0');
            failures++;
        }
        sm_buf_free(&dec);
        sm_scratch_free(s);
        assert_int_equal(sm_alloc_current(), base);
    }
    assert_true(done);
    assert_true(failures >= 2); /* the scratch and the output at least */
    sm_buf_free(&enc);
    sm_free(data);
    sm_codec_chain_free(c);
}

static void test_chain_decode_fails_cleanly_at_every_allocation(void **state)
{
    (void)state;
    alloc_failure_loop("[" BE ",{\"name\":\"zstd\",\"configuration\":{\"level\":3}},\"crc32c\"]",
                       SM_DT_INT32);
    alloc_failure_loop("[{\"name\":\"transpose\",\"configuration\":{\"order\":[1,2,0]}}," LE
                       ",{\"name\":\"gzip\",\"configuration\":{\"level\":5}}]",
                       SM_DT_UINT16);
    alloc_failure_loop("[" LE ",{\"name\":\"blosc\",\"configuration\":{\"cname\":\"lz4\","
                       "\"clevel\":5,\"shuffle\":\"shuffle\"}}]",
                       SM_DT_FLOAT32);
    alloc_failure_loop(sharded, SM_DT_UINT16);
}

static void test_chain_new_fails_cleanly_at_every_allocation(void **state)
{
    (void)state;
    json_t *j = ct_json(sharded);
    struct sm_repr r;
    ct_repr(&r, SM_DT_UINT16, 3, shape3);
    const uint64_t base = sm_alloc_current();
    bool done = false;
    for (uint64_t n = 1; n < 1000 && !done; n++) {
        struct sm_err err;
        sm_err_clear(&err);
        struct sm_codec_chain *c = NULL;
        sm_alloc_fail_at(n);
        sm_status st = sm_codec_chain_new(j, &r, &c, &err);
        sm_alloc_fail_at(0);
        if (st == SM_OK) {
            done = true;
            sm_codec_chain_free(c);
        } else {
            assert_status(st, SM_E_NOMEM, &err);
            assert_null(c);
        }
        assert_int_equal(sm_alloc_current(), base);
    }
    assert_true(done);
    json_decref(j);
}

struct worker {
    const struct sm_codec_chain *chain;
    const struct sm_buf *enc;
    const uint8_t *want;
    int ok;
};

static void *decode_many(void *arg)
{
    struct worker *w = arg;
    struct sm_scratch *s = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf dec = SM_BUF_INIT;
    w->ok = sm_scratch_new(&s, &err) == SM_OK;
    const size_t len = sm_codec_chain_repr(w->chain)->len;
    for (int i = 0; i < 50 && w->ok; i++) {
        w->ok = sm_codec_chain_decode(w->chain, sm_buf_bytes(w->enc), &dec, s, &err) == SM_OK &&
                memcmp(dec.ptr, w->want, len) == 0;
    }
    sm_buf_free(&dec);
    sm_scratch_free(s);
    return NULL;
}

/* A prepared chain is immutable: threads share it, each with its own scratch. */
static void test_chain_is_shared_by_threads(void **state)
{
    (void)state;
    struct sm_codec_chain *c = ct_chain(sharded, SM_DT_UINT16, 3, shape3);
    uint8_t data[240];
    ct_fill_random(data, sizeof(data), 21);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    struct worker w[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){c, &enc, data, 0};
        assert_int_equal(pthread_create(&t[i], NULL, decode_many, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_true(w[i].ok);
    }
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_chain_free_accepts_null(void **state)
{
    (void)state;
    sm_codec_chain_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_names_an_unknown_codec),
        cmocka_unit_test(test_chain_rejects_array_to_array_after_bytes),
        cmocka_unit_test(test_chain_rejects_two_array_to_bytes_codecs),
        cmocka_unit_test(test_chain_rejects_bytes_to_bytes_before_array_to_bytes),
        cmocka_unit_test(test_chain_requires_an_array_to_bytes_codec),
        cmocka_unit_test(test_chain_rejects_malformed_lists),
        cmocka_unit_test(test_chain_accepts_bare_names_and_numcodecs_prefix),
        cmocka_unit_test(test_chain_keeps_the_chunk_repr_and_stage_reprs),
        cmocka_unit_test(test_chain_skips_identity_stages),
        cmocka_unit_test(test_chain_checks_the_size_after_every_stage),
        cmocka_unit_test(test_chain_decode_rejects_a_zstd_frame_of_another_size),
        cmocka_unit_test(test_chain_encode_rejects_a_wrong_input_size),
        cmocka_unit_test(test_chain_exposes_the_sharding_stage_only_when_alone),
        cmocka_unit_test(test_chain_decodes_a_transposed_shard_whole),
        cmocka_unit_test(test_chain_decode_does_not_allocate_in_steady_state),
        cmocka_unit_test(test_chain_rejects_nesting_deeper_than_the_limit),
        cmocka_unit_test(test_chain_accepts_nesting_up_to_the_limit),
        cmocka_unit_test(test_chain_decode_fails_cleanly_at_every_allocation),
        cmocka_unit_test(test_chain_new_fails_cleanly_at_every_allocation),
        cmocka_unit_test(test_chain_is_shared_by_threads),
        cmocka_unit_test(test_chain_free_accepts_null),
    };
    return cmocka_run_group_tests_name("codec_chain", tests, NULL, NULL);
}
