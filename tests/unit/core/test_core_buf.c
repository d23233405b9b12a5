/* Unit tests for engine/core/core_buf.c: owned buffers with exact reservations (STYLE B6). A buffer
 * grows to exactly the size asked for, keeps its contents, reports SM_E_NOMEM without losing
 * them, and frees to an empty state (twice is fine). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/alloc.h"
#include "shardmill/buf.h"
#include "sm_test.h"

static void test_buf_init_is_empty(void **state)
{
    (void)state;
    struct sm_buf b = SM_BUF_INIT;
    assert_null(b.ptr);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
}

static void test_reserve_grows_to_exactly_n(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const uint64_t base = sm_alloc_current();
    struct sm_buf b = SM_BUF_INIT;
    assert_ok(sm_buf_reserve(&b, 1000, &err), &err);
    assert_non_null(b.ptr);
    assert_int_equal(b.cap, 1000);
    assert_int_equal(b.len, 0);
    assert_int_equal(sm_alloc_current(), base + 1000);
    sm_buf_free(&b);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_reserve_smaller_keeps_capacity_and_pointer(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf b = SM_BUF_INIT;
    assert_ok(sm_buf_reserve(&b, 64, &err), &err);
    uint8_t *p = b.ptr;
    assert_ok(sm_buf_reserve(&b, 10, &err), &err);
    assert_ok(sm_buf_reserve(&b, 64, &err), &err);
    assert_ptr_equal(b.ptr, p);
    assert_int_equal(b.cap, 64);
    sm_buf_free(&b);
}

static void test_reserve_keeps_contents_when_growing(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf b = SM_BUF_INIT;
    const char msg[] = "zarr.json";
    assert_ok(sm_buf_set(&b, sm_bytes_of(msg, sizeof(msg)), &err), &err);
    assert_ok(sm_buf_reserve(&b, 1 << 20, &err), &err);
    assert_int_equal(b.cap, 1 << 20);
    assert_int_equal(b.len, sizeof(msg));
    assert_memory_equal(b.ptr, msg, sizeof(msg));
    sm_buf_free(&b);
}

static void test_reserve_failure_is_nomem_and_keeps_buffer(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf b = SM_BUF_INIT;
    assert_ok(sm_buf_set(&b, sm_bytes_of("abcd", 4), &err), &err);
    uint8_t *p = b.ptr;
    sm_alloc_fail_at(1);
    assert_int_equal(sm_buf_reserve(&b, 4096, &err), SM_E_NOMEM);
    sm_alloc_fail_at(0);
    assert_int_equal(err.status, SM_E_NOMEM);
    assert_contains(err.what, "4096");
    assert_ptr_equal(b.ptr, p);
    assert_int_equal(b.cap, 4);
    assert_int_equal(b.len, 4);
    assert_memory_equal(b.ptr, "abcd", 4);
    sm_buf_free(&b);
}

static void test_set_copies_with_exact_capacity(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf b = SM_BUF_INIT;
    uint8_t src[300];
    for (size_t i = 0; i < sizeof(src); i++) {
        src[i] = (uint8_t)(i * 7);
    }
    assert_ok(sm_buf_set(&b, sm_bytes_of(src, sizeof(src)), &err), &err);
    assert_int_equal(b.len, sizeof(src));
    assert_int_equal(b.cap, sizeof(src));
    assert_ptr_not_equal(b.ptr, src);
    assert_memory_equal(b.ptr, src, sizeof(src));
    /* A shorter set reuses the buffer. */
    uint8_t *p = b.ptr;
    assert_ok(sm_buf_set(&b, sm_bytes_of("xy", 2), &err), &err);
    assert_ptr_equal(b.ptr, p);
    assert_int_equal(b.len, 2);
    assert_int_equal(b.cap, sizeof(src));
    sm_buf_free(&b);
}

static void test_set_empty_source_gives_empty_buffer(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf b = SM_BUF_INIT;
    assert_ok(sm_buf_set(&b, sm_bytes_of(NULL, 0), &err), &err);
    assert_int_equal(b.len, 0);
    assert_ok(sm_buf_set(&b, sm_bytes_of("abc", 3), &err), &err);
    assert_ok(sm_buf_set(&b, sm_bytes_of(NULL, 0), &err), &err);
    assert_int_equal(b.len, 0);
    sm_buf_free(&b);
}

static void test_set_failure_is_nomem(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf b = SM_BUF_INIT;
    sm_alloc_fail_at(1);
    assert_int_equal(sm_buf_set(&b, sm_bytes_of("abc", 3), &err), SM_E_NOMEM);
    sm_alloc_fail_at(0);
    assert_null(b.ptr);
    assert_int_equal(b.len, 0);
    sm_buf_free(&b);
}

static void test_free_leaves_empty_and_is_idempotent(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const uint64_t base = sm_alloc_current();
    struct sm_buf b = SM_BUF_INIT;
    sm_buf_free(&b); /* zeroed buffer accepted */
    assert_ok(sm_buf_set(&b, sm_bytes_of("hello", 5), &err), &err);
    sm_buf_free(&b);
    assert_null(b.ptr);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    sm_buf_free(&b);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_swap_exchanges_buffers(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf a = SM_BUF_INIT, b = SM_BUF_INIT;
    assert_ok(sm_buf_set(&a, sm_bytes_of("aaaa", 4), &err), &err);
    assert_ok(sm_buf_set(&b, sm_bytes_of("bb", 2), &err), &err);
    uint8_t *pa = a.ptr, *pb = b.ptr;
    sm_buf_swap(&a, &b);
    assert_ptr_equal(a.ptr, pb);
    assert_ptr_equal(b.ptr, pa);
    assert_int_equal(a.len, 2);
    assert_int_equal(b.len, 4);
    assert_int_equal(a.cap, 2);
    assert_int_equal(b.cap, 4);
    sm_buf_free(&a);
    sm_buf_free(&b);
}

static void test_bytes_views_borrow_without_copying(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf b = SM_BUF_INIT;
    assert_ok(sm_buf_set(&b, sm_bytes_of("0123456789", 10), &err), &err);
    b.len = 6;
    struct sm_bytes v = sm_buf_bytes(&b);
    assert_ptr_equal(v.ptr, b.ptr);
    assert_int_equal(v.len, 6);
    const char s[] = "xyz";
    struct sm_bytes w = sm_bytes_of(s, 3);
    assert_ptr_equal(w.ptr, (const uint8_t *)s);
    assert_int_equal(w.len, 3);
    sm_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_init_is_empty),
        cmocka_unit_test(test_reserve_grows_to_exactly_n),
        cmocka_unit_test(test_reserve_smaller_keeps_capacity_and_pointer),
        cmocka_unit_test(test_reserve_keeps_contents_when_growing),
        cmocka_unit_test(test_reserve_failure_is_nomem_and_keeps_buffer),
        cmocka_unit_test(test_set_copies_with_exact_capacity),
        cmocka_unit_test(test_set_empty_source_gives_empty_buffer),
        cmocka_unit_test(test_set_failure_is_nomem),
        cmocka_unit_test(test_free_leaves_empty_and_is_idempotent),
        cmocka_unit_test(test_swap_exchanges_buffers),
        cmocka_unit_test(test_bytes_views_borrow_without_copying),
    };
    return cmocka_run_group_tests_name("core_buf", tests, NULL, NULL);
}
