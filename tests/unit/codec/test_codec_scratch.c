/* Unit tests for engine/codec/codec_scratch.c: per-thread contexts are created lazily, once, and
 * kept (one libdeflate compressor per level); nesting levels are bounded; free accepts NULL and
 * releases everything (zstd's memory goes through sm_malloc, so it is counted); the encode-side
 * append helper grows geometrically; the decode bound defaults to 1 GiB, 0 lifts it, and the
 * retry growth of decoders of unknown size doubles up to the bound and stops there. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sm_test.h"
#include "codec_test.h"

static void test_scratch_free_accepts_null(void **state)
{
    (void)state;
    sm_scratch_free(NULL);
}

static void test_scratch_contexts_are_created_once_and_kept(void **state)
{
    (void)state;
    struct sm_scratch *s = ct_scratch();
    assert_null(s->zstd_d);
    assert_null(s->deflate_d);
    struct sm_err err;
    sm_err_clear(&err);
    struct ZSTD_DCtx_s *d1, *d2;
    struct ZSTD_CCtx_s *c1, *c2;
    struct libdeflate_decompressor *l1, *l2;
    struct libdeflate_compressor *k1, *k2, *k3;
    assert_ok(sm_scratch_zstd_d(s, &d1, &err), &err);
    assert_ok(sm_scratch_zstd_d(s, &d2, &err), &err);
    assert_ptr_equal(d1, d2);
    assert_ok(sm_scratch_zstd_c(s, &c1, &err), &err);
    assert_ok(sm_scratch_zstd_c(s, &c2, &err), &err);
    assert_ptr_equal(c1, c2);
    assert_ok(sm_scratch_deflate_d(s, &l1, &err), &err);
    assert_ok(sm_scratch_deflate_d(s, &l2, &err), &err);
    assert_ptr_equal(l1, l2);
    assert_ok(sm_scratch_deflate_c(s, 1, &k1, &err), &err);
    assert_ok(sm_scratch_deflate_c(s, 9, &k2, &err), &err);
    assert_ok(sm_scratch_deflate_c(s, 1, &k3, &err), &err);
    assert_ptr_equal(k1, k3);
    assert_ptr_not_equal(k1, k2);
    assert_status(sm_scratch_deflate_c(s, 13, &k1, &err), SM_E_INTERNAL, &err);
    sm_scratch_free(s);
}

static void test_scratch_zstd_memory_is_counted_and_released(void **state)
{
    (void)state;
    const uint64_t before = sm_alloc_current();
    struct sm_scratch *s = ct_scratch();
    struct sm_err err;
    sm_err_clear(&err);
    struct ZSTD_DCtx_s *d;
    assert_ok(sm_scratch_zstd_d(s, &d, &err), &err);
    assert_true(sm_alloc_current() > before + sizeof(struct sm_scratch));
    sm_scratch_free(s);
    assert_int_equal(sm_alloc_current(), before);
}

static void test_scratch_context_allocation_failure_is_nomem(void **state)
{
    (void)state;
    struct sm_scratch *s = ct_scratch();
    struct sm_err err;
    sm_err_clear(&err);
    struct ZSTD_DCtx_s *d;
    sm_alloc_fail_at(1);
    sm_status st = sm_scratch_zstd_d(s, &d, &err);
    sm_alloc_fail_at(0);
    assert_status(st, SM_E_NOMEM, &err);
    assert_null(s->zstd_d);
    sm_scratch_free(s);
    sm_err_clear(&err);
    s = (struct sm_scratch *)1;
    sm_alloc_fail_at(1);
    st = sm_scratch_new(&s, &err);
    sm_alloc_fail_at(0);
    assert_status(st, SM_E_NOMEM, &err);
    assert_null(s);
}

static void test_scratch_levels_are_bounded(void **state)
{
    (void)state;
    struct sm_scratch *s = ct_scratch();
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_scratch_level *lv;
    assert_ok(sm_scratch_level(s, SM_SCRATCH_LEVELS - 1, &lv, &err), &err);
    assert_ptr_equal(lv, &s->lv[SM_SCRATCH_LEVELS - 1]);
    assert_status(sm_scratch_level(s, SM_SCRATCH_LEVELS, &lv, &err), SM_E_INTERNAL, &err);
    sm_scratch_free(s);
}

static void test_append_grows_geometrically(void **state)
{
    (void)state;
    struct sm_buf b = SM_BUF_INIT;
    struct sm_err err;
    sm_err_clear(&err);
    uint8_t byte = 0;
    unsigned grows = 0;
    size_t cap = 0;
    for (int i = 0; i < 10000; i++) {
        byte = (uint8_t)i;
        assert_ok(sm_codec_append(&b, &byte, 1, &err), &err);
        if (b.cap != cap) {
            grows++;
            cap = b.cap;
        }
    }
    assert_int_equal(b.len, 10000);
    assert_true(grows < 20);
    for (int i = 0; i < 10000; i++) {
        assert_int_equal(b.ptr[i], (uint8_t)i);
    }
    assert_ok(sm_codec_append(&b, NULL, 0, &err), &err);
    sm_buf_free(&b);
}

static void test_scratch_decode_bound_defaults_and_zero_lifts_it(void **state)
{
    (void)state;
    struct sm_scratch *s = ct_scratch();
    assert_int_equal(s->max_decoded, (size_t)SM_SCRATCH_MAX_DECODED_DEFAULT);
    assert_int_equal(SM_SCRATCH_MAX_DECODED_DEFAULT, 1ull << 30);
    sm_scratch_set_max_decoded(s, 4096);
    assert_int_equal(s->max_decoded, 4096);
    sm_scratch_set_max_decoded(s, 0);
    assert_int_equal(s->max_decoded, SIZE_MAX);
    sm_scratch_free(s);
}

static void test_grow_doubles_up_to_the_bound_then_stops(void **state)
{
    (void)state;
    const size_t k64 = (size_t)64 << 10;
    assert_int_equal(sm_codec_grow(0, SIZE_MAX), k64);
    assert_int_equal(sm_codec_grow(10, SIZE_MAX), k64);
    assert_int_equal(sm_codec_grow(k64, SIZE_MAX), 2 * k64);
    assert_int_equal(sm_codec_grow(0, 100), 100); /* a bound below the minimum step */
    assert_int_equal(sm_codec_grow(3 * k64, 4 * k64), 4 * k64);
    assert_int_equal(sm_codec_grow(4 * k64, 4 * k64), 0);
    assert_int_equal(sm_codec_grow(5 * k64, 4 * k64), 0);
    assert_int_equal(sm_codec_grow(SIZE_MAX / 2 + 1, SIZE_MAX), SIZE_MAX);
    assert_int_equal(sm_codec_grow(SIZE_MAX, SIZE_MAX), 0);
    /* The sequence from 0 reaches any bound in log2 steps and ends at exactly the bound. */
    size_t cap = 0, steps = 0, bound = 5000000;
    for (size_t next; (next = sm_codec_grow(cap, bound)) != 0; steps++) {
        assert_true(next > cap && next <= bound);
        cap = next;
    }
    assert_int_equal(cap, bound);
    assert_true(steps <= 8);
}

static void test_renew_replaces_the_storage_without_holding_both(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf b = SM_BUF_INIT;
    assert_ok(sm_codec_renew(&b, 0, &err), &err);
    assert_non_null(b.ptr); /* never NULL, so decoders may form b.ptr + 0 */
    assert_int_equal(b.len, 0);
    assert_ok(sm_codec_renew(&b, 1000, &err), &err);
    b.len = 1000;
    const uint64_t before = sm_alloc_current();
    sm_alloc_reset_peak();
    assert_ok(sm_codec_renew(&b, (size_t)1 << 20, &err), &err);
    assert_int_equal(b.len, 0);
    assert_true(b.cap >= (size_t)1 << 20);
    /* the 1000-byte block was released before the new one was taken */
    assert_true(sm_alloc_peak() <= before - 1000 + ((size_t)1 << 20));
    uint8_t *p = b.ptr;
    assert_ok(sm_codec_renew(&b, 10, &err), &err); /* large enough: kept */
    assert_ptr_equal(b.ptr, p);
    sm_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scratch_free_accepts_null),
        cmocka_unit_test(test_scratch_contexts_are_created_once_and_kept),
        cmocka_unit_test(test_scratch_zstd_memory_is_counted_and_released),
        cmocka_unit_test(test_scratch_context_allocation_failure_is_nomem),
        cmocka_unit_test(test_scratch_levels_are_bounded),
        cmocka_unit_test(test_append_grows_geometrically),
        cmocka_unit_test(test_scratch_decode_bound_defaults_and_zero_lifts_it),
        cmocka_unit_test(test_grow_doubles_up_to_the_bound_then_stops),
        cmocka_unit_test(test_renew_replaces_the_storage_without_holding_both),
    };
    return cmocka_run_group_tests_name("codec_scratch", tests, NULL, NULL);
}
