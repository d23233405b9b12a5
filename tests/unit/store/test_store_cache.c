/* Unit tests for engine/store/store_cache.c: a hit lends the cached entry instead of copying it
 * (sm_store_get_borrow: the same bytes at the same address for every borrower, no allocation),
 * an entry evicted while borrowed stays valid until its last borrower releases it, objects too
 * large to cache are lent from an entry of their own, a copying get still returns equal bytes,
 * and stores that cannot lend read into the caller's buffer. Counters: the cache store counts
 * lookups, the inner store the requests it served. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/alloc.h"
#include "shardmill/store.h"
#include "sm_test.h"

struct fx {
    struct sm_store *mem;   /* inner, owned by the cache */
    struct sm_store *cache; /* NULL in tests of the plain store */
    struct sm_err err;
};

static void put(struct sm_store *s, const char *key, const char *text)
{
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_store_put_atomic(s, key, sm_bytes_of(text, strlen(text)), &err), &err);
}

static void open_cache(struct fx *f, uint64_t max_bytes)
{
    sm_err_clear(&f->err);
    assert_ok(sm_store_mem_new(&f->mem, &f->err), &f->err);
    put(f->mem, "a", "alpha alpha alpha");
    put(f->mem, "b", "bravo bravo bravo");
    assert_ok(sm_store_cache_new(f->mem, max_bytes, &f->cache, &f->err), &f->err);
}

static void borrow(struct fx *f, const char *key, struct sm_bytes *view, void **ref)
{
    struct sm_buf buf = SM_BUF_INIT;
    bool found = false;
    assert_ok(sm_store_get_borrow(f->cache, key, sm_range_all(), SM_IO_PAYLOAD, &buf, view, ref,
                                  &found, &f->err),
              &f->err);
    assert_true(found);
    assert_null(buf.ptr); /* lent, never copied into the caller's buffer */
    assert_non_null(*ref);
}

static void test_cache_hit_lends_the_same_bytes_without_allocating(void **state)
{
    (void)state;
    struct fx f;
    open_cache(&f, 1u << 20);
    struct sm_bytes v1, v2;
    void *r1, *r2;
    borrow(&f, "a", &v1, &r1); /* miss: fetched into a new entry */
    const uint64_t before = sm_alloc_current();
    borrow(&f, "a", &v2, &r2); /* hit */
    assert_int_equal(sm_alloc_current(), before);
    assert_ptr_equal(v1.ptr, v2.ptr);
    assert_int_equal(v2.len, 17);
    assert_memory_equal(v2.ptr, "alpha alpha alpha", 17);
    struct sm_cache_stats st;
    sm_store_cache_stats(f.cache, &st);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 1);
    assert_int_equal(sm_store_requests(f.mem, SM_IO_PAYLOAD), 1);
    assert_int_equal(sm_store_requests(f.cache, SM_IO_PAYLOAD), 2);
    sm_store_release(f.cache, r1);
    sm_store_release(f.cache, r2);
    /* a copying get of a hit returns equal bytes in the caller's own buffer */
    struct sm_buf out = SM_BUF_INIT;
    bool found = false;
    assert_ok(sm_store_get(f.cache, "a", sm_range_all(), SM_IO_PAYLOAD, &out, &found, &f.err),
              &f.err);
    assert_true(found);
    assert_true(out.ptr != v1.ptr);
    assert_memory_equal(out.ptr, "alpha alpha alpha", 17);
    sm_buf_free(&out);
    sm_store_close(f.cache);
}

static void test_cache_entry_evicted_while_borrowed_lives_until_released(void **state)
{
    (void)state;
    struct fx f;
    const uint64_t base = sm_alloc_current();
    open_cache(&f, 200); /* room for one entry (17 bytes plus bookkeeping) */
    struct sm_bytes va, vb;
    void *ra, *rb;
    borrow(&f, "a", &va, &ra);
    borrow(&f, "b", &vb, &rb); /* evicts "a", still borrowed */
    struct sm_cache_stats st;
    sm_store_cache_stats(f.cache, &st);
    assert_int_equal(st.evictions, 1);
    assert_memory_equal(va.ptr, "alpha alpha alpha", 17);
    const uint64_t held = sm_alloc_current();
    sm_store_release(f.cache, ra); /* the last holder frees the evicted entry */
    assert_true(sm_alloc_current() < held);
    struct sm_bytes va2;
    void *ra2;
    borrow(&f, "a", &va2, &ra2); /* a miss again: fetched anew */
    assert_int_equal(sm_store_requests(f.mem, SM_IO_PAYLOAD), 3);
    sm_store_release(f.cache, rb);
    sm_store_release(f.cache, ra2);
    sm_store_close(f.cache);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_cache_object_too_large_is_lent_from_its_own_entry(void **state)
{
    (void)state;
    struct fx f;
    const uint64_t base = sm_alloc_current();
    open_cache(&f, 16); /* smaller than any entry */
    struct sm_bytes v1, v2;
    void *r1, *r2;
    borrow(&f, "b", &v1, &r1);
    borrow(&f, "b", &v2, &r2);
    assert_true(v1.ptr != v2.ptr); /* not cached: two fetches, two entries */
    assert_memory_equal(v2.ptr, "bravo bravo bravo", 17);
    assert_int_equal(sm_store_requests(f.mem, SM_IO_PAYLOAD), 2);
    sm_store_release(f.cache, r1);
    sm_store_release(f.cache, r2);
    sm_store_close(f.cache);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_borrow_of_a_missing_object_is_not_found(void **state)
{
    (void)state;
    struct fx f;
    open_cache(&f, 1u << 20);
    for (int i = 0; i < 2; i++) { /* a miss, then a cached "not found" */
        struct sm_buf buf = SM_BUF_INIT;
        struct sm_bytes v;
        void *ref = NULL;
        bool found = true;
        assert_ok(sm_store_get_borrow(f.cache, "nope", sm_range_all(), SM_IO_PAYLOAD, &buf, &v,
                                      &ref, &found, &f.err),
                  &f.err);
        assert_false(found);
        assert_int_equal(v.len, 0);
        sm_store_release(f.cache, ref);
    }
    assert_int_equal(sm_store_requests(f.mem, SM_IO_PAYLOAD), 1);
    sm_store_close(f.cache);
}

static void test_borrow_from_a_store_that_cannot_lend_reads_into_the_buffer(void **state)
{
    (void)state;
    struct fx f;
    sm_err_clear(&f.err);
    assert_ok(sm_store_mem_new(&f.mem, &f.err), &f.err);
    put(f.mem, "a", "alpha alpha alpha");
    struct sm_buf buf = SM_BUF_INIT;
    struct sm_bytes v;
    void *ref = (void *)&f;
    bool found = false;
    assert_ok(sm_store_get_borrow(f.mem, "a", sm_range_span(6, 5), SM_IO_PAYLOAD, &buf, &v, &ref,
                                  &found, &f.err),
              &f.err);
    assert_true(found);
    assert_null(ref);
    assert_ptr_equal(v.ptr, buf.ptr);
    assert_int_equal(v.len, 5);
    assert_memory_equal(v.ptr, "alpha", 5);
    sm_buf_free(&buf);
    sm_store_close(f.mem);
}

static void test_borrow_of_a_short_range_is_a_data_error_and_holds_nothing(void **state)
{
    (void)state;
    struct fx f;
    const uint64_t base = sm_alloc_current();
    open_cache(&f, 1u << 20);
    struct sm_buf buf = SM_BUF_INIT;
    struct sm_bytes v;
    void *ref = NULL;
    bool found = false;
    assert_int_equal(sm_store_get_borrow(f.cache, "a", sm_range_span(10, 50), SM_IO_PAYLOAD, &buf,
                                         &v, &ref, &found, &f.err),
                     SM_E_DATA);
    assert_null(ref);
    sm_store_close(f.cache);
    assert_int_equal(sm_alloc_current(), base);
}

/* A bypassed cache (sm_store_cache_bypass) reads through: no entry kept, no lookup counted, a
 * borrow reads into the caller's buffer, an entry lent before it still released; the stats say
 * bypassed. */
static void test_bypassed_cache_reads_through_and_keeps_nothing(void **state)
{
    (void)state;
    struct fx f;
    const uint64_t base = sm_alloc_current();
    open_cache(&f, 1u << 20);
    struct sm_bytes va;
    void *ra;
    borrow(&f, "a", &va, &ra); /* an entry, lent across the bypass */
    const uint64_t cached = sm_alloc_current();
    sm_store_cache_bypass(f.cache);
    sm_store_cache_bypass(f.cache); /* twice: nothing more */
    assert_memory_equal(va.ptr, "alpha alpha alpha", 17);
    sm_store_release(f.cache, ra); /* freed now: out of the table already */
    assert_true(sm_alloc_current() < cached);
    struct sm_buf buf = SM_BUF_INIT;
    struct sm_bytes v;
    void *r = NULL;
    bool found = false;
    for (int i = 0; i < 2; i++) {
        assert_ok(sm_store_get_borrow(f.cache, "b", sm_range_all(), SM_IO_PAYLOAD, &buf, &v, &r,
                                      &found, &f.err),
                  &f.err);
        assert_true(found);
        assert_null(r); /* read into the caller's buffer */
        assert_ptr_equal(v.ptr, buf.ptr);
        assert_memory_equal(v.ptr, "bravo bravo bravo", 17);
    }
    assert_ok(sm_store_get(f.cache, "nope", sm_range_all(), SM_IO_PAYLOAD, &buf, &found, &f.err),
              &f.err);
    assert_false(found);
    sm_buf_free(&buf);
    struct sm_cache_stats st;
    sm_store_cache_stats(f.cache, &st);
    assert_true(st.bypassed);
    assert_int_equal(st.hits, 0);
    assert_int_equal(st.misses, 1); /* "a" before the bypass alone */
    assert_int_equal(st.bytes, 0);
    assert_int_equal(sm_store_requests(f.mem, SM_IO_PAYLOAD), 4); /* every read reached it */
    assert_ptr_equal(sm_store_backing(f.cache), f.mem);
    sm_store_close(f.cache);
    assert_int_equal(sm_alloc_current(), base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_hit_lends_the_same_bytes_without_allocating),
        cmocka_unit_test(test_cache_entry_evicted_while_borrowed_lives_until_released),
        cmocka_unit_test(test_cache_object_too_large_is_lent_from_its_own_entry),
        cmocka_unit_test(test_borrow_of_a_missing_object_is_not_found),
        cmocka_unit_test(test_borrow_from_a_store_that_cannot_lend_reads_into_the_buffer),
        cmocka_unit_test(test_borrow_of_a_short_range_is_a_data_error_and_holds_nothing),
        cmocka_unit_test(test_bypassed_cache_reads_through_and_keeps_nothing),
    };
    return cmocka_run_group_tests_name("store_cache", tests, NULL, NULL);
}
