/* Helpers shared by the codec unit tests and the codec conformance suite: JSON from text, chunk
 * representations, chains built from a JSON literal, deterministic test content ("smooth" and
 * "random") and an encode/decode round trip that checks every byte. Header-only, static inline.
 * Include after <cmocka.h> and sm_test.h. */
#ifndef SM_TESTS_UNIT_CODEC_CODEC_TEST_H
#define SM_TESTS_UNIT_CODEC_CODEC_TEST_H

#include <jansson.h>
#include <string.h>

#include "codec_int.h"
#include "shardmill/alloc.h"
#include "shardmill/codec.h"

static inline json_t *ct_json(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
    if (j == NULL) {
        fail_msg("bad test JSON (%s): %s", je.text, text);
    }
    return j;
}

static inline void ct_repr(struct sm_repr *r, enum sm_dtype dt, unsigned ndim,
                           const uint64_t *shape)
{
    memset(r, 0, sizeof(*r));
    r->dtype = dt;
    r->ndim = ndim;
    size_t n = sm_dtype_size(dt);
    for (unsigned d = 0; d < ndim; d++) {
        r->shape[d] = shape[d];
        n *= (size_t)shape[d];
    }
    r->len = n;
}

/* Builds a chain from JSON text; returns the status (the chain in *out on success). */
static inline sm_status ct_chain_try(const char *codecs, const struct sm_repr *r,
                                     struct sm_codec_chain **out, struct sm_err *err)
{
    json_t *j = ct_json(codecs);
    sm_err_clear(err);
    sm_status st = sm_codec_chain_new(j, r, out, err);
    json_decref(j);
    return st;
}

static inline struct sm_codec_chain *ct_chain(const char *codecs, enum sm_dtype dt, unsigned ndim,
                                              const uint64_t *shape)
{
    struct sm_repr r;
    ct_repr(&r, dt, ndim, shape);
    struct sm_err err;
    struct sm_codec_chain *c = NULL;
    sm_status st = ct_chain_try(codecs, &r, &c, &err);
    if (st != SM_OK) {
        fail_msg("chain %s: %s", codecs, err.what);
    }
    return c;
}

/* Smooth content: a slow gradient over the linear index, in the element type. */
static inline void ct_fill_smooth(uint8_t *p, size_t len, size_t elem)
{
    for (size_t i = 0; i < len / elem; i++) {
        uint64_t v = i / 7 + (i % 64) / 16;
        memcpy(p + i * elem, &v, elem);
    }
}

static inline void ct_fill_random(uint8_t *p, size_t len, uint64_t seed)
{
    struct sm_test_rng rng = {seed};
    sm_test_rng_bytes(&rng, p, len);
}

static inline struct sm_scratch *ct_scratch(void)
{
    struct sm_scratch *s = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_scratch_new(&s, &err), &err);
    return s;
}

/* Encodes `data`, decodes the result and checks it byte for byte; the encoded bytes stay in enc. */
static inline void ct_roundtrip(const struct sm_codec_chain *c, const uint8_t *data,
                                struct sm_buf *enc, struct sm_scratch *s)
{
    const size_t len = sm_codec_chain_repr(c)->len;
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_codec_chain_encode(c, sm_bytes_of(data, len), enc, s, &err), &err);
    struct sm_buf dec = SM_BUF_INIT;
    assert_ok(sm_codec_chain_decode(c, sm_buf_bytes(enc), &dec, s, &err), &err);
    assert_int_equal(dec.len, len);
    if (len != 0) {
        assert_memory_equal(dec.ptr, data, len);
    }
    sm_buf_free(&dec);
}

/* Decodes `in` expecting a failure with `status` whose message contains `needle`. */
static inline void ct_decode_fails(const struct sm_codec_chain *c, struct sm_bytes in,
                                   sm_status status, const char *needle, struct sm_scratch *s)
{
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf dec = SM_BUF_INIT;
    assert_status(sm_codec_chain_decode(c, in, &dec, s, &err), status, &err);
    assert_contains(err.what, needle);
    assert_string_equal(err.where, ""); /* codecs never fill `where` */
    sm_buf_free(&dec);
}

/* Hex text to bytes (for golden vectors); returns the byte count. */
/* Decodes expecting `status` and `needle` in the message (NULL: any); the engine's allocations
 * during the decode stay below `most` bytes above what was allocated before (sizes the input
 * declares are not trusted: issue 10). */
static inline void ct_decode_bounded(const struct sm_codec_chain *c, struct sm_bytes in,
                                     sm_status status, const char *needle, uint64_t most,
                                     struct sm_scratch *s)
{
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf dec = SM_BUF_INIT;
    const uint64_t before = sm_alloc_current();
    sm_alloc_reset_peak();
    assert_status(sm_codec_chain_decode(c, in, &dec, s, &err), status, &err);
    if (needle != NULL) {
        assert_contains(err.what, needle);
    }
    if (sm_alloc_peak() - before > most) {
        fail_msg("decode allocated %llu bytes, at most %llu expected",
                 (unsigned long long)(sm_alloc_peak() - before), (unsigned long long)most);
    }
    sm_buf_free(&dec);
}

static inline size_t ct_hex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = strlen(hex) / 2;
    assert_true(n <= cap);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
    return n;
}

#endif
