/* Unit tests for engine/codec/codec_scratch.c: per-thread contexts are created lazily, once, and
 * kept (one libdeflate compressor per level); nesting levels are bounded; free accepts NULL and
 * releases everything (zstd's memory goes through sm_malloc, so it is counted); the encode-side
 * append helper grows geometrically. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scratch_free_accepts_null),
        cmocka_unit_test(test_scratch_contexts_are_created_once_and_kept),
        cmocka_unit_test(test_scratch_zstd_memory_is_counted_and_released),
        cmocka_unit_test(test_scratch_context_allocation_failure_is_nomem),
        cmocka_unit_test(test_scratch_levels_are_bounded),
        cmocka_unit_test(test_append_grows_geometrically),
    };
    return cmocka_run_group_tests_name("codec_scratch", tests, NULL, NULL);
}
