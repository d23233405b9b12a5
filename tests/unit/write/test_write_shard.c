/* Unit tests of engine/write/write_shard.c: an encoded shard decodes back through the array's own
 * chain to the same values (interior and edge shards, padded with the fill value), inner chunks
 * that are all fill (and the padding outside the array) are stored empty, encoding is
 * deterministic across scratches and reuse, and misuse is reported. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "sm_test.h"
#include "write_int.h"
#include "write_test.h"

struct fixture {
    struct sm_writer *w;
    struct sm_write_scratch *ws;
    struct sm_scratch *sc;
    struct wt_pattern p;
};

static void setup_spec(struct fixture *f, const struct sm_output_spec *s, uint64_t zero_below)
{
    struct sm_err err;
    sm_err_clear(&err);
    memset(f, 0, sizeof(*f));
    assert_ok(sm_writer_new(s, &f->w, &err), &err);
    assert_ok(sm_write_scratch_new(&f->ws, &err), &err);
    assert_ok(sm_scratch_new(&f->sc, &err), &err);
    f->p = wt_pattern_of(s, zero_below);
}

static void teardown_spec(struct fixture *f)
{
    sm_writer_free(f->w);
    sm_write_scratch_free(f->ws);
    sm_scratch_free(f->sc);
}

/* Values of a shard's clipped box (malloc'd). */
static uint8_t *shard_values(struct fixture *f, uint64_t shard, size_t *len)
{
    struct sm_err err;
    sm_err_clear(&err);
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    sm_writer_shard_box(f->w, shard, off, shape);
    *len = sm_writer_shard_bytes(f->w, shard);
    uint8_t *v = malloc(*len + 1);
    assert_ok(wt_fill(&f->p, 0, shard, off, shape, v, *len, &err), &err);
    return v;
}

/* Encodes shard `shard`, decodes it with the array chain and checks every element: inside the
 * array the pattern, outside the fill value. Returns the encoded size. */
static size_t round_trip(struct fixture *f, uint64_t shard, struct sm_buf *enc)
{
    struct sm_err err;
    sm_err_clear(&err);
    size_t len = 0;
    uint8_t *v = shard_values(f, shard, &len);
    assert_ok(sm_writer_encode_shard(f->w, shard, sm_bytes_of(v, len), enc, f->ws, &err), &err);
    struct sm_buf dec = SM_BUF_INIT;
    const struct sm_array_meta *m = sm_writer_meta(f->w);
    assert_ok(sm_codec_chain_decode(m->chain, sm_buf_bytes(enc), &dec, f->sc, &err), &err);
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    sm_writer_shard_box(f->w, shard, off, shape);
    const size_t elem = sm_dtype_size(m->dtype);
    const unsigned nd = m->ndim;
    uint64_t c[SM_MAX_DIMS] = {0};
    size_t k = 0, inside = 0;
    for (;;) {
        bool in = true;
        for (unsigned d = 0; d < nd; d++) {
            in = in && c[d] < shape[d];
        }
        const uint8_t *got = dec.ptr + k * elem;
        if (in) {
            assert_memory_equal(got, v + inside * elem, elem);
            inside++;
        } else {
            assert_memory_equal(got, m->fill, elem);
        }
        k++;
        unsigned d = nd;
        while (d-- > 0) {
            if (++c[d] < m->chunk_shape[d]) {
                break;
            }
            c[d] = 0;
        }
        if (d == (unsigned)-1) {
            break;
        }
    }
    assert_int_equal(inside * elem, len);
    sm_buf_free(&dec);
    free(v);
    return enc->len;
}

/* The decoded index pairs of a sharded object (malloc'd). */
static uint64_t *index_pairs(struct fixture *f, const struct sm_buf *enc)
{
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_shard_codec *sc = sm_codec_chain_shard(sm_writer_meta(f->w)->chain);
    const struct sm_shard_layout *L = sm_shard_layout(sc);
    const uint8_t *ip =
        L->location == SM_SHARD_INDEX_END ? enc->ptr + enc->len - L->index_len : enc->ptr;
    uint64_t *pairs = malloc(2 * L->n_inner * sizeof(uint64_t));
    assert_ok(
        sm_shard_index_decode(sc, sm_bytes_of(ip, L->index_len), enc->len, pairs, f->sc, &err),
        &err);
    return pairs;
}

static void test_shard_interior_and_edge_round_trip(void **state)
{
    (void)state;
    struct fixture f;
    struct sm_output_spec s = wt_spec(20, 70, 45);
    setup_spec(&f, &s, 0);
    struct sm_buf enc = SM_BUF_INIT;
    for (uint64_t i = 0; i < sm_writer_nshards(f.w); i++) {
        round_trip(&f, i, &enc);
    }
    /* The last shard: box [4, 6, 13] of [8, 32, 32]; inner chunks [2, 16, 16] entirely outside
     * the array (z >= 4, y >= 16 or x >= 16) hold only padding and are stored empty. */
    round_trip(&f, 17, &enc);
    uint64_t *pairs = index_pairs(&f, &enc);
    const struct sm_shard_layout *L =
        sm_shard_layout(sm_codec_chain_shard(sm_writer_meta(f.w)->chain));
    unsigned empty = 0;
    for (uint64_t i = 0; i < L->n_inner; i++) {
        const uint64_t z = i / 4, y = (i / 2) % 2, x = i % 2;
        const bool outside = z >= 2 || y >= 1 || x >= 1;
        if (outside) {
            assert_int_equal(pairs[2 * i], SM_SHARD_EMPTY);
            assert_int_equal(pairs[2 * i + 1], SM_SHARD_EMPTY);
            empty++;
        } else {
            assert_true(pairs[2 * i] != SM_SHARD_EMPTY);
        }
    }
    assert_int_equal(empty, 16 - 2);
    free(pairs);
    sm_buf_free(&enc);
    teardown_spec(&f);
}

static void test_shard_all_fill_inner_chunks_are_empty(void **state)
{
    (void)state;
    struct fixture f;
    struct sm_output_spec s = wt_spec(16, 32, 32);
    /* Shard 0 is entirely fill (zero_below covers it); shard 1 has its first 2 x 32 x 32 zero. */
    setup_spec(&f, &s, 8 * 32 * 32 + 2 * 32 * 32);
    struct sm_buf enc = SM_BUF_INIT;
    const struct sm_shard_layout *L =
        sm_shard_layout(sm_codec_chain_shard(sm_writer_meta(f.w)->chain));
    assert_int_equal(round_trip(&f, 0, &enc), L->index_len); /* the index alone */
    uint64_t *pairs = index_pairs(&f, &enc);
    for (uint64_t i = 0; i < 2 * L->n_inner; i++) {
        assert_int_equal(pairs[i], SM_SHARD_EMPTY);
    }
    free(pairs);
    round_trip(&f, 1, &enc);
    pairs = index_pairs(&f, &enc);
    for (uint64_t i = 0; i < L->n_inner; i++) {
        const bool zero = i < 4; /* the inner chunks of z in [0, 2) */
        assert_int_equal(pairs[2 * i] == SM_SHARD_EMPTY, zero);
    }
    free(pairs);
    sm_buf_free(&enc);
    teardown_spec(&f);
}

static void test_shard_encoding_is_deterministic(void **state)
{
    (void)state;
    struct fixture f;
    struct sm_output_spec s = wt_spec(20, 70, 45);
    setup_spec(&f, &s, 0);
    struct sm_write_scratch *other;
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_write_scratch_new(&other, &err), &err);
    for (uint64_t i = 0; i < sm_writer_nshards(f.w); i++) {
        size_t len = 0;
        uint8_t *v = shard_values(&f, i, &len);
        struct sm_buf a = SM_BUF_INIT, b = SM_BUF_INIT, c = SM_BUF_INIT;
        assert_ok(sm_writer_encode_shard(f.w, i, sm_bytes_of(v, len), &a, f.ws, &err), &err);
        assert_ok(sm_writer_encode_shard(f.w, i, sm_bytes_of(v, len), &b, other, &err), &err);
        assert_ok(sm_writer_encode_shard(f.w, i, sm_bytes_of(v, len), &c, f.ws, &err), &err);
        assert_int_equal(a.len, b.len);
        assert_int_equal(a.len, c.len);
        assert_memory_equal(a.ptr, b.ptr, a.len);
        assert_memory_equal(a.ptr, c.ptr, a.len);
        sm_buf_free(&a);
        sm_buf_free(&b);
        sm_buf_free(&c);
        free(v);
    }
    sm_write_scratch_free(other);
    teardown_spec(&f);
}

static void test_shard_layouts_and_codecs_round_trip(void **state)
{
    (void)state;
    static const struct {
        const char *codec;
        int level;
        bool sharded, crc;
        enum sm_shard_index_location loc;
        enum sm_dtype dt;
    } cases[] = {
        {"gzip", 6, true, true, SM_SHARD_INDEX_START, SM_DT_UINT16},
        {"blosc", 5, true, false, SM_SHARD_INDEX_END, SM_DT_INT32},
        {"none", 0, true, true, SM_SHARD_INDEX_START, SM_DT_UINT8},
        {"zstd", 1, false, true, SM_SHARD_INDEX_END, SM_DT_FLOAT64},
        {"blosc", 3, false, true, SM_SHARD_INDEX_END, SM_DT_BOOL},
        {"none", 0, false, true, SM_SHARD_INDEX_END, SM_DT_INT64},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fixture f;
        struct sm_output_spec s = wt_spec(9, 40, 21);
        s.codec = cases[i].codec;
        s.level = cases[i].level;
        s.sharded = cases[i].sharded;
        s.index_crc32c = cases[i].crc;
        s.index_location = cases[i].loc;
        s.dtype = cases[i].dt;
        setup_spec(&f, &s, 100);
        struct sm_buf enc = SM_BUF_INIT;
        for (uint64_t k = 0; k < sm_writer_nshards(f.w); k++) {
            round_trip(&f, k, &enc);
        }
        sm_buf_free(&enc);
        teardown_spec(&f);
    }
}

static void test_shard_nan_fill_chunks_are_empty(void **state)
{
    (void)state;
    struct fixture f;
    struct sm_output_spec s = wt_spec(8, 32, 32);
    const float nan = __builtin_nanf("");
    memcpy(s.fill, &nan, 4);
    setup_spec(&f, &s, 0);
    struct sm_err err;
    sm_err_clear(&err);
    const size_t n = 8 * 32 * 32;
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        v[i] = nan;
    }
    struct sm_buf enc = SM_BUF_INIT;
    assert_ok(sm_writer_encode_shard(f.w, 0, sm_bytes_of(v, n * 4), &enc, f.ws, &err), &err);
    const struct sm_shard_layout *L =
        sm_shard_layout(sm_codec_chain_shard(sm_writer_meta(f.w)->chain));
    assert_int_equal(enc.len, L->index_len);
    free(v);
    sm_buf_free(&enc);
    teardown_spec(&f);
}

static void test_shard_rejects_misuse(void **state)
{
    (void)state;
    struct fixture f;
    struct sm_output_spec s = wt_spec(20, 70, 45);
    setup_spec(&f, &s, 0);
    struct sm_err err;
    sm_err_clear(&err);
    uint8_t v[16] = {0};
    struct sm_buf enc = SM_BUF_INIT;
    assert_status(sm_writer_encode_shard(f.w, 0, sm_bytes_of(v, sizeof(v)), &enc, f.ws, &err),
                  SM_E_INTERNAL, &err);
    assert_contains(err.what, "its box holds 32768");
    sm_err_clear(&err);
    assert_status(sm_writer_encode_shard(f.w, 18, sm_bytes_of(v, sizeof(v)), &enc, f.ws, &err),
                  SM_E_INTERNAL, &err);
    sm_buf_free(&enc);
    teardown_spec(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shard_interior_and_edge_round_trip),
        cmocka_unit_test(test_shard_all_fill_inner_chunks_are_empty),
        cmocka_unit_test(test_shard_encoding_is_deterministic),
        cmocka_unit_test(test_shard_layouts_and_codecs_round_trip),
        cmocka_unit_test(test_shard_nan_fill_chunks_are_empty),
        cmocka_unit_test(test_shard_rejects_misuse),
    };
    return cmocka_run_group_tests_name("write_shard", tests, NULL, NULL);
}
