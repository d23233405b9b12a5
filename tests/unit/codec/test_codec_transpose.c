/* Unit tests for engine/codec/codec_transpose.c: the planned, tiled copy equals a naive
 * per-element reference for every permutation of 2-, 3- and 4-d arrays, every element size and
 * shapes that are not multiples of the tile; the codec's encoded shape follows the spec
 * (encoded.shape[i] = decoded.shape[order[i]]); legacy "C"/"F"; bad orders are rejected. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sm_test.h"
#include "codec_test.h"

/* numpy.transpose(src, perm) one element at a time. */
static void naive(unsigned nd, const uint64_t *shape, const unsigned *perm, size_t elem,
                  const uint8_t *src, uint8_t *dst)
{
    uint64_t sst[8], dshape[8], total = 1;
    uint64_t s = 1;
    for (unsigned d = nd; d-- > 0;) {
        sst[d] = s;
        s *= shape[d];
    }
    for (unsigned i = 0; i < nd; i++) {
        dshape[i] = shape[perm[i]];
        total *= dshape[i];
    }
    for (uint64_t lin = 0; lin < total; lin++) {
        uint64_t rem = lin, soff = 0;
        for (unsigned i = nd; i-- > 0;) {
            const uint64_t x = rem % dshape[i];
            rem /= dshape[i];
            soff += x * sst[perm[i]];
        }
        memcpy(dst + lin * elem, src + soff * elem, elem);
    }
}

static bool next_perm(unsigned *p, unsigned n)
{
    int i = (int)n - 2;
    while (i >= 0 && p[i] > p[i + 1]) {
        i--;
    }
    if (i < 0) {
        return false;
    }
    int j = (int)n - 1;
    while (p[j] < p[i]) {
        j--;
    }
    unsigned t = p[i];
    p[i] = p[j];
    p[j] = t;
    for (int a = i + 1, b = (int)n - 1; a < b; a++, b--) {
        t = p[a];
        p[a] = p[b];
        p[b] = t;
    }
    return true;
}

static void check_all_perms(unsigned nd, const uint64_t *shape)
{
    size_t n = 1;
    for (unsigned d = 0; d < nd; d++) {
        n *= shape[d];
    }
    const size_t elems[4] = {1, 2, 4, 8};
    for (size_t e = 0; e < 4; e++) {
        const size_t elem = elems[e];
        uint8_t *src = sm_malloc(n * elem), *got = sm_malloc(n * elem), *want = sm_malloc(n * elem);
        ct_fill_random(src, n * elem, nd * 10 + e);
        unsigned perm[8];
        for (unsigned d = 0; d < nd; d++) {
            perm[d] = d;
        }
        do {
            memset(got, 0, n * elem);
            naive(nd, shape, perm, elem, src, want);
            sm_transpose_copy(nd, shape, perm, elem, src, got);
            if (memcmp(got, want, n * elem) != 0) {
                fail_msg("transpose of %u-d array, elem %zu, perm [%u %u %u %u] differs", nd, elem,
                         perm[0], nd > 1 ? perm[1] : 0, nd > 2 ? perm[2] : 0, nd > 3 ? perm[3] : 0);
            }
        } while (next_perm(perm, nd));
        sm_free(src);
        sm_free(got);
        sm_free(want);
    }
}

static void test_transpose_2d_matches_the_reference(void **state)
{
    (void)state;
    const uint64_t a[2] = {37, 45}, b[2] = {64, 64}, c[2] = {1, 100}, d[2] = {100, 33};
    check_all_perms(2, a);
    check_all_perms(2, b);
    check_all_perms(2, c);
    check_all_perms(2, d);
}

static void test_transpose_3d_matches_the_reference(void **state)
{
    (void)state;
    const uint64_t a[3] = {7, 33, 40}, b[3] = {16, 1, 65}, c[3] = {3, 4, 5}, d[3] = {1, 1, 9};
    check_all_perms(3, a);
    check_all_perms(3, b);
    check_all_perms(3, c);
    check_all_perms(3, d);
}

static void test_transpose_4d_matches_the_reference(void **state)
{
    (void)state;
    const uint64_t a[4] = {3, 5, 7, 34}, b[4] = {2, 1, 33, 3}, c[4] = {5, 6, 1, 1};
    check_all_perms(4, a);
    check_all_perms(4, b);
    check_all_perms(4, c);
}

static void test_transpose_encoded_shape_follows_the_order(void **state)
{
    (void)state;
    const uint64_t shape[3] = {2, 3, 4};
    struct sm_codec_chain *c =
        ct_chain("[{\"name\":\"transpose\",\"configuration\":{\"order\":[2,0,1]}},"
                 "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}]",
                 SM_DT_UINT8, 3, shape);
    assert_int_equal(c->stages[0].enc.shape[0], 4);
    assert_int_equal(c->stages[0].enc.shape[1], 2);
    assert_int_equal(c->stages[0].enc.shape[2], 3);
    uint8_t data[24], want[24];
    for (int i = 0; i < 24; i++) {
        data[i] = (uint8_t)i;
    }
    const unsigned perm[3] = {2, 0, 1};
    naive(3, shape, perm, 1, data, want);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf enc = SM_BUF_INIT;
    ct_roundtrip(c, data, &enc, s);
    assert_memory_equal(enc.ptr, want, 24);
    /* encoded[k][i][j] = decoded[i][j][k]: the first encoded row is decoded[..][..][0] */
    const uint8_t row0[6] = {0, 4, 8, 12, 16, 20};
    assert_memory_equal(enc.ptr, row0, 6);
    sm_buf_free(&enc);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

static void test_transpose_legacy_f_reverses_the_axes(void **state)
{
    (void)state;
    const uint64_t shape[3] = {5, 6, 7};
    struct sm_codec_chain *f =
        ct_chain("[{\"name\":\"transpose\",\"configuration\":{\"order\":\"F\"}},{\"name\":"
                 "\"bytes\",\"configuration\":{\"endian\":\"little\"}}]",
                 SM_DT_INT16, 3, shape);
    struct sm_codec_chain *p =
        ct_chain("[{\"name\":\"transpose\",\"configuration\":{\"order\":[2,1,0]}},{\"name\":"
                 "\"bytes\",\"configuration\":{\"endian\":\"little\"}}]",
                 SM_DT_INT16, 3, shape);
    struct sm_codec_chain *cc =
        ct_chain("[{\"name\":\"transpose\",\"configuration\":{\"order\":\"C\"}},{\"name\":"
                 "\"bytes\",\"configuration\":{\"endian\":\"little\"}}]",
                 SM_DT_INT16, 3, shape);
    assert_true(cc->stages[0].identity);
    uint8_t data[420];
    ct_fill_random(data, sizeof(data), 4);
    struct sm_scratch *s = ct_scratch();
    struct sm_buf a = SM_BUF_INIT, b = SM_BUF_INIT;
    ct_roundtrip(f, data, &a, s);
    ct_roundtrip(p, data, &b, s);
    assert_memory_equal(a.ptr, b.ptr, sizeof(data));
    sm_buf_free(&a);
    sm_buf_free(&b);
    sm_scratch_free(s);
    sm_codec_chain_free(f);
    sm_codec_chain_free(p);
    sm_codec_chain_free(cc);
}

static void expect_bad(const char *cfg, unsigned nd, const char *needle)
{
    const uint64_t shape[4] = {2, 3, 4, 5};
    struct sm_repr r;
    ct_repr(&r, SM_DT_UINT8, nd, shape);
    char text[512];
    snprintf(text, sizeof(text), "[{\"name\":\"transpose\",\"configuration\":%s},\"bytes\"]", cfg);
    struct sm_err err;
    struct sm_codec_chain *c;
    assert_status(ct_chain_try(text, &r, &c, &err), SM_E_DATA, &err);
    assert_contains(err.what, needle);
}

static void test_transpose_rejects_bad_orders(void **state)
{
    (void)state;
    expect_bad("{\"order\":[0,0,1]}", 3, "must be a permutation of 0..2 (entry 1)");
    expect_bad("{\"order\":[0,1,3]}", 3, "must be a permutation");
    expect_bad("{\"order\":[0,-1,2]}", 3, "must be a permutation");
    expect_bad("{\"order\":[0,1]}", 3, "'order' has 2 entries, the array 3 dimensions");
    expect_bad("{\"order\":\"X\"}", 3, "got \"X\"");
    expect_bad("{\"order\":3}", 3, "'order' must be an array");
    expect_bad("{}", 3, "missing configuration key 'order'");
}

static void test_transpose_decode_rejects_a_wrong_size(void **state)
{
    (void)state;
    const uint64_t shape[2] = {4, 5};
    struct sm_codec_chain *c =
        ct_chain("[{\"name\":\"transpose\",\"configuration\":{\"order\":[1,0]}},\"bytes\"]",
                 SM_DT_UINT8, 2, shape);
    uint8_t data[21] = {0};
    struct sm_scratch *s = ct_scratch();
    ct_decode_fails(c, sm_bytes_of(data, 21), SM_E_DATA, "decode input of 21 bytes, expected 20",
                    s);
    sm_scratch_free(s);
    sm_codec_chain_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transpose_2d_matches_the_reference),
        cmocka_unit_test(test_transpose_3d_matches_the_reference),
        cmocka_unit_test(test_transpose_4d_matches_the_reference),
        cmocka_unit_test(test_transpose_encoded_shape_follows_the_order),
        cmocka_unit_test(test_transpose_legacy_f_reverses_the_axes),
        cmocka_unit_test(test_transpose_rejects_bad_orders),
        cmocka_unit_test(test_transpose_decode_rejects_a_wrong_size),
    };
    return cmocka_run_group_tests_name("codec_transpose", tests, NULL, NULL);
}
