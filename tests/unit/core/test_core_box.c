/* Unit tests for engine/core/core_box.c: n-d box copy and fill between C-order arrays, checked
 * against a naive per-element reference (coordinates -> linear offsets, one element at a time) on
 * seeded random boxes in 1-5 dims with element sizes 1, 2, 4, 8. Destinations start as a sentinel
 * pattern, so writes outside the box are caught too. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/box.h"
#include "sm_test.h"

#define MAXND 5

static size_t nelems(unsigned nd, const uint64_t *shape)
{
    size_t n = 1;
    for (unsigned d = 0; d < nd; d++) {
        n *= (size_t)shape[d];
    }
    return n;
}

static size_t lin(unsigned nd, const uint64_t *shape, const uint64_t *off, const uint64_t *c)
{
    size_t l = 0;
    for (unsigned d = 0; d < nd; d++) {
        l = l * (size_t)shape[d] + (size_t)(off[d] + c[d]);
    }
    return l;
}

/* Advances the odometer c over ext; false when done. */
static int next(unsigned nd, const uint64_t *ext, uint64_t *c)
{
    for (unsigned d = nd; d-- > 0;) {
        if (++c[d] < ext[d]) {
            return 1;
        }
        c[d] = 0;
    }
    return 0;
}

static int box_empty(unsigned nd, const uint64_t *ext)
{
    for (unsigned d = 0; d < nd; d++) {
        if (ext[d] == 0) {
            return 1;
        }
    }
    return 0;
}

static void naive_copy(unsigned nd, size_t elem, const uint64_t *sshape, const uint8_t *src,
                       const uint64_t *soff, const uint64_t *dshape, uint8_t *dst,
                       const uint64_t *doff, const uint64_t *ext)
{
    uint64_t c[MAXND] = {0};
    if (box_empty(nd, ext)) {
        return;
    }
    do {
        memcpy(dst + lin(nd, dshape, doff, c) * elem, src + lin(nd, sshape, soff, c) * elem, elem);
    } while (next(nd, ext, c));
}

static void naive_fill(unsigned nd, size_t elem, const uint64_t *dshape, uint8_t *dst,
                       const uint64_t *doff, const uint64_t *ext, const uint8_t *fill)
{
    uint64_t c[MAXND] = {0};
    if (box_empty(nd, ext)) {
        return;
    }
    do {
        memcpy(dst + lin(nd, dshape, doff, c) * elem, fill, elem);
    } while (next(nd, ext, c));
}

struct box_case {
    unsigned nd;
    size_t elem;
    uint64_t sshape[MAXND], dshape[MAXND], soff[MAXND], doff[MAXND], ext[MAXND];
};

static void random_case(struct sm_test_rng *r, unsigned nd, size_t elem, struct box_case *bc)
{
    bc->nd = nd;
    bc->elem = elem;
    for (unsigned d = 0; d < nd; d++) {
        const uint64_t kind = sm_test_rng_below(r, 3);
        if (kind == 0) { /* the box spans the axis in both arrays: foldable */
            bc->ext[d] = bc->sshape[d] = bc->dshape[d] = 1 + sm_test_rng_below(r, 6);
            bc->soff[d] = bc->doff[d] = 0;
        } else {
            bc->sshape[d] = 1 + sm_test_rng_below(r, 7);
            bc->dshape[d] = 1 + sm_test_rng_below(r, 7);
            uint64_t m = bc->sshape[d] < bc->dshape[d] ? bc->sshape[d] : bc->dshape[d];
            bc->ext[d] = 1 + sm_test_rng_below(r, m);
            bc->soff[d] = sm_test_rng_below(r, bc->sshape[d] - bc->ext[d] + 1);
            bc->doff[d] = sm_test_rng_below(r, bc->dshape[d] - bc->ext[d] + 1);
        }
    }
}

/* Runs sm_box_copy and the reference on the same case and compares the whole destination. */
static void check_copy(struct sm_test_rng *r, const struct box_case *bc)
{
    const size_t sbytes = nelems(bc->nd, bc->sshape) * bc->elem;
    const size_t dbytes = nelems(bc->nd, bc->dshape) * bc->elem;
    uint8_t *src = test_malloc(sbytes);
    uint8_t *got = test_malloc(dbytes);
    uint8_t *want = test_malloc(dbytes);
    sm_test_rng_bytes(r, src, sbytes);
    for (size_t i = 0; i < dbytes; i++) {
        got[i] = want[i] = (uint8_t)(0xA0 ^ i);
    }
    const struct sm_box_view sv = {bc->nd, bc->elem, bc->sshape};
    const struct sm_box_view dv = {bc->nd, bc->elem, bc->dshape};
    sm_box_copy(&sv, src, bc->soff, &dv, got, bc->doff, bc->ext);
    naive_copy(bc->nd, bc->elem, bc->sshape, src, bc->soff, bc->dshape, want, bc->doff, bc->ext);
    assert_memory_equal(got, want, dbytes);
    test_free(src);
    test_free(got);
    test_free(want);
}

static void check_fill(const struct box_case *bc, const uint8_t *fill)
{
    const size_t dbytes = nelems(bc->nd, bc->dshape) * bc->elem;
    uint8_t *got = test_malloc(dbytes);
    uint8_t *want = test_malloc(dbytes);
    for (size_t i = 0; i < dbytes; i++) {
        got[i] = want[i] = (uint8_t)(0x5C ^ i);
    }
    const struct sm_box_view dv = {bc->nd, bc->elem, bc->dshape};
    sm_box_fill(&dv, got, bc->doff, bc->ext, fill);
    naive_fill(bc->nd, bc->elem, bc->dshape, want, bc->doff, bc->ext, fill);
    assert_memory_equal(got, want, dbytes);
    test_free(got);
    test_free(want);
}

static const size_t elem_sizes[] = {1, 2, 4, 8};

static void test_box_copy_matches_naive_reference_on_random_boxes(void **state)
{
    (void)state;
    struct sm_test_rng rng = {0xB0C5};
    for (unsigned nd = 1; nd <= MAXND; nd++) {
        for (size_t e = 0; e < 4; e++) {
            for (int iter = 0; iter < 150; iter++) {
                struct box_case bc;
                random_case(&rng, nd, elem_sizes[e], &bc);
                check_copy(&rng, &bc);
            }
        }
    }
}

static void test_box_fill_matches_naive_reference_with_non_uniform_pattern(void **state)
{
    (void)state;
    struct sm_test_rng rng = {0xF111};
    const uint8_t pattern[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF};
    for (unsigned nd = 1; nd <= MAXND; nd++) {
        for (size_t e = 0; e < 4; e++) {
            for (int iter = 0; iter < 150; iter++) {
                struct box_case bc;
                random_case(&rng, nd, elem_sizes[e], &bc);
                check_fill(&bc, pattern);
            }
        }
    }
}

static void test_box_fill_uniform_pattern_matches_reference(void **state)
{
    (void)state;
    struct sm_test_rng rng = {0xF222};
    const uint8_t same[8] = {0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F};
    const uint8_t zero[8] = {0};
    for (size_t e = 0; e < 4; e++) {
        for (int iter = 0; iter < 100; iter++) {
            struct box_case bc;
            random_case(&rng, 1 + (unsigned)(iter % MAXND), elem_sizes[e], &bc);
            check_fill(&bc, (iter & 1) ? same : zero);
        }
    }
}

static void test_box_fill_long_run_repeats_pattern_exactly(void **state)
{
    (void)state;
    /* 1-d, 1000 float64-sized elements: the doubling copy must not drift off the pattern. */
    const uint8_t pattern[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    struct box_case bc = {1, 8, {1000}, {1003}, {0}, {1}, {1000}};
    check_fill(&bc, pattern);
    struct box_case odd = {1, 4, {0}, {997}, {0}, {3}, {991}};
    check_fill(&odd, pattern);
}

static void test_box_copy_folds_contiguous_trailing_axes(void **state)
{
    (void)state;
    struct sm_test_rng rng = {3};
    /* Whole array to whole array: one run. */
    struct box_case whole = {3, 2, {4, 5, 6}, {4, 5, 6}, {0, 0, 0}, {0, 0, 0}, {4, 5, 6}};
    check_copy(&rng, &whole);
    /* Full trailing axes, partial leading axis at an offset in both arrays. */
    struct box_case slab = {3, 4, {5, 3, 4}, {7, 3, 4}, {2, 0, 0}, {4, 0, 0}, {3, 3, 4}};
    check_copy(&rng, &slab);
    /* Full last axis only. */
    struct box_case rows = {3, 8, {3, 4, 5}, {2, 6, 5}, {1, 1, 0}, {0, 2, 0}, {2, 3, 5}};
    check_copy(&rng, &rows);
    /* 5-d with three full trailing axes. */
    struct box_case deep = {
        5, 1, {3, 4, 2, 3, 2}, {2, 5, 2, 3, 2}, {1, 0, 0, 0, 0}, {0, 1, 0, 0, 0}, {2, 3, 2, 3, 2}};
    check_copy(&rng, &deep);
}

static void test_box_copy_does_not_fold_when_only_one_side_is_full(void **state)
{
    (void)state;
    struct sm_test_rng rng = {4};
    /* The last axis is full in the source but not in the destination, and vice versa. */
    struct box_case a = {2, 2, {4, 3}, {4, 5}, {0, 0}, {0, 1}, {4, 3}};
    check_copy(&rng, &a);
    struct box_case b = {2, 4, {4, 5}, {4, 3}, {0, 2}, {0, 0}, {4, 3}};
    check_copy(&rng, &b);
    struct box_case c = {3, 1, {2, 3, 4}, {2, 4, 4}, {0, 0, 0}, {0, 1, 0}, {2, 3, 4}};
    check_copy(&rng, &c);
}

static void test_box_fill_folds_full_trailing_axes(void **state)
{
    (void)state;
    const uint8_t pattern[4] = {9, 8, 7, 6};
    struct box_case a = {3, 4, {0}, {3, 4, 5}, {0}, {1, 0, 0}, {2, 4, 5}};
    check_fill(&a, pattern);
    struct box_case b = {3, 4, {0}, {3, 4, 5}, {0}, {0, 1, 0}, {3, 2, 5}};
    check_fill(&b, pattern);
}

static void test_box_ndim0_copies_and_fills_one_element(void **state)
{
    (void)state;
    for (size_t e = 0; e < 4; e++) {
        const size_t elem = elem_sizes[e];
        const uint8_t src[8] = {0xde, 0xad, 0xbe, 0xef, 0x01, 0x02, 0x03, 0x04};
        uint8_t dst[16];
        memset(dst, 0xcc, sizeof(dst));
        const struct sm_box_view v = {0, elem, NULL};
        sm_box_copy(&v, src, NULL, &v, dst, NULL, NULL);
        assert_memory_equal(dst, src, elem);
        for (size_t i = elem; i < sizeof(dst); i++) {
            assert_int_equal(dst[i], 0xcc);
        }
        const uint8_t fill[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        memset(dst, 0xcc, sizeof(dst));
        sm_box_fill(&v, dst, NULL, NULL, fill);
        assert_memory_equal(dst, fill, elem);
        for (size_t i = elem; i < sizeof(dst); i++) {
            assert_int_equal(dst[i], 0xcc);
        }
    }
}

static void test_box_zero_extent_touches_nothing(void **state)
{
    (void)state;
    uint8_t src[24], dst[24];
    memset(src, 1, sizeof(src));
    memset(dst, 0xcc, sizeof(dst));
    const uint64_t shape[2] = {4, 6};
    const struct sm_box_view v = {2, 1, shape};
    const uint64_t off[2] = {1, 1};
    const uint64_t ext0[2] = {0, 3}, ext1[2] = {2, 0};
    sm_box_copy(&v, src, off, &v, dst, off, ext0);
    sm_box_copy(&v, src, off, &v, dst, off, ext1);
    const uint8_t fill = 7;
    sm_box_fill(&v, dst, off, ext0, &fill);
    sm_box_fill(&v, dst, off, ext1, &fill);
    for (size_t i = 0; i < sizeof(dst); i++) {
        assert_int_equal(dst[i], 0xcc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_box_copy_matches_naive_reference_on_random_boxes),
        cmocka_unit_test(test_box_fill_matches_naive_reference_with_non_uniform_pattern),
        cmocka_unit_test(test_box_fill_uniform_pattern_matches_reference),
        cmocka_unit_test(test_box_fill_long_run_repeats_pattern_exactly),
        cmocka_unit_test(test_box_copy_folds_contiguous_trailing_axes),
        cmocka_unit_test(test_box_copy_does_not_fold_when_only_one_side_is_full),
        cmocka_unit_test(test_box_fill_folds_full_trailing_axes),
        cmocka_unit_test(test_box_ndim0_copies_and_fills_one_element),
        cmocka_unit_test(test_box_zero_extent_touches_nothing),
    };
    return cmocka_run_group_tests_name("core_box", tests, NULL, NULL);
}
