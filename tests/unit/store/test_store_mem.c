/* Unit tests for engine/store/store_mem.c, beyond the conformance suite (test_store.c): the store
 * copies what it is given, frees everything on close, lists names once, and survives allocation
 * failures without leaking (torture loop over sm_alloc_fail_at). */
#include "shardmill/sm_config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/alloc.h"
#include "shardmill/store.h"
#include "sm_test.h"

static void test_mem_new_has_mem_scheme_and_url(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_store *s = NULL;
    assert_ok(sm_store_mem_new(&s, &err), &err);
    assert_string_equal(s->ops->scheme, "mem");
    assert_string_equal(s->url, "mem:");
    assert_int_equal(s->max_object_bytes, 0);
    sm_store_close(s);
}

static void test_mem_put_copies_the_caller_bytes(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_store *s = NULL;
    assert_ok(sm_store_mem_new(&s, &err), &err);
    char data[] = "original";
    assert_ok(sm_store_put_atomic(s, "k", sm_bytes_of(data, 8), &err), &err);
    memcpy(data, "CHANGED!", 8);
    struct sm_buf b = SM_BUF_INIT;
    bool found = false;
    assert_ok(sm_store_get(s, "k", sm_range_all(), SM_IO_META, &b, &found, &err), &err);
    assert_memory_equal(b.ptr, "original", 8);
    /* and get hands out a copy too */
    b.ptr[0] = 'X';
    assert_ok(sm_store_get(s, "k", sm_range_span(0, 1), SM_IO_META, &b, &found, &err), &err);
    assert_int_equal(b.ptr[0], 'o');
    sm_buf_free(&b);
    sm_store_close(s);
}

/* Found by fuzz_v2_group: an empty object has no buffer, and get formed NULL + 0 (UBSan). */
static void test_mem_get_of_an_empty_object_is_found_and_empty(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_store *s = NULL;
    assert_ok(sm_store_mem_new(&s, &err), &err);
    assert_ok(sm_store_put_atomic(s, "empty", sm_bytes_of(NULL, 0), &err), &err);
    struct sm_buf b = SM_BUF_INIT;
    bool found = false;
    assert_ok(sm_store_get(s, "empty", sm_range_all(), SM_IO_META, &b, &found, &err), &err);
    assert_true(found);
    assert_int_equal(b.len, 0);
    sm_buf_free(&b);
    sm_store_close(s);
}

static void test_mem_close_frees_objects_keys_and_overwritten_data(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const uint64_t base = sm_alloc_current();
    struct sm_store *s = NULL;
    assert_ok(sm_store_mem_new(&s, &err), &err);
    uint8_t blob[777] = {0};
    for (int i = 0; i < 40; i++) { /* forces the object table to grow */
        char key[32];
        snprintf(key, sizeof(key), "c/%d/%d", i / 7, i % 7);
        assert_ok(sm_store_put_atomic(s, key, sm_bytes_of(blob, (size_t)i * 10), &err), &err);
    }
    for (int i = 0; i < 10; i++) {
        assert_ok(
            sm_store_put_atomic(s, "c/0/0", sm_bytes_of(blob, sizeof(blob) - (size_t)i), &err),
            &err);
    }
    sm_store_close(s);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_mem_list_deduplicates_child_prefixes(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_store *s = NULL;
    assert_ok(sm_store_mem_new(&s, &err), &err);
    const char *keys[] = {"a/c/0/0", "a/c/0/1", "a/c/1/0", "a/zarr.json", "zarr.json"};
    for (size_t i = 0; i < 5; i++) {
        assert_ok(sm_store_put_atomic(s, keys[i], sm_bytes_of("x", 1), &err), &err);
    }
    struct sm_strv names = {NULL, 0, 0};
    assert_ok(sm_store_list(s, "a", &names, &err), &err);
    assert_int_equal(names.n, 2); /* "c" once, "zarr.json" */
    sm_strv_free(&names);
    assert_ok(sm_store_list(s, "a/c", &names, &err), &err);
    assert_int_equal(names.n, 2); /* "0", "1" */
    sm_strv_free(&names);
    assert_ok(sm_store_list(s, "", &names, &err), &err);
    assert_int_equal(names.n, 2); /* "a", "zarr.json" */
    sm_strv_free(&names);
    sm_store_close(s);
}

static void test_mem_prefix_is_not_an_object(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_store *s = NULL;
    assert_ok(sm_store_mem_new(&s, &err), &err);
    assert_ok(sm_store_put_atomic(s, "grp/arr/zarr.json", sm_bytes_of("{}", 2), &err), &err);
    bool exists = true;
    assert_ok(sm_store_exists(s, "grp/arr", &exists, &err), &err);
    assert_false(exists);
    struct sm_buf b = SM_BUF_INIT;
    bool found = true;
    assert_ok(sm_store_get(s, "grp", sm_range_all(), SM_IO_META, &b, &found, &err), &err);
    assert_false(found);
    sm_buf_free(&b);
    sm_store_close(s);
}

static void test_mem_put_allocation_failures_are_nomem_without_leaks(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    for (uint64_t n = 1; n <= 12; n++) {
        struct sm_err err;
        sm_err_clear(&err);
        struct sm_store *s = NULL;
        sm_alloc_fail_at(n);
        sm_status st = sm_store_mem_new(&s, &err);
        for (int i = 0; st == SM_OK && i < 10; i++) {
            char key[16];
            snprintf(key, sizeof(key), "k%d", i % 9); /* the last put overwrites */
            st = sm_store_put_atomic(s, key, sm_bytes_of("payload", 7), &err);
        }
        struct sm_strv names = {NULL, 0, 0};
        if (st == SM_OK) {
            st = sm_store_list(s, "", &names, &err);
        }
        sm_alloc_fail_at(0);
        assert_true(st == SM_OK || st == SM_E_NOMEM);
        if (st == SM_OK) {
            assert_int_equal(names.n, 9);
        }
        sm_strv_free(&names);
        sm_store_close(s);
        assert_int_equal(sm_alloc_current(), base);
    }
}

enum { RACE_THREADS = 4, RACE_ROUNDS = 3000 };

struct racer {
    struct sm_store *s;
    pthread_barrier_t *bar;
    unsigned id;
    int failures;
};

static void *race_put(void *arg)
{
    struct racer *r = arg;
    uint8_t data[64];
    memset(data, (int)r->id, sizeof(data));
    for (int round = 0; round < RACE_ROUNDS; round++) {
        char key[32];
        snprintf(key, sizeof(key), "r/%d", round);
        pthread_barrier_wait(r->bar); /* every thread puts the same new key at once */
        struct sm_err err;
        sm_err_clear(&err);
        if (sm_store_put_atomic(r->s, key, sm_bytes_of(data, 1 + r->id), &err) != SM_OK) {
            r->failures++;
        }
    }
    return NULL;
}

static void test_mem_concurrent_puts_of_one_new_key_keep_one_copy(void **state)
{
    /* Regression: mem_put decided whether to free its copy by reading o->data after unlocking,
     * so a second writer of the same just-inserted key could make the first free a buffer the
     * store (or the second writer) still owned. */
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const uint64_t base = sm_alloc_current();
    struct sm_store *s = NULL;
    assert_ok(sm_store_mem_new(&s, &err), &err);
    pthread_barrier_t bar;
    assert_int_equal(pthread_barrier_init(&bar, NULL, RACE_THREADS), 0);
    struct racer r[RACE_THREADS];
    pthread_t th[RACE_THREADS];
    for (unsigned i = 0; i < RACE_THREADS; i++) {
        r[i] = (struct racer){s, &bar, i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, race_put, &r[i]), 0);
    }
    for (unsigned i = 0; i < RACE_THREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(r[i].failures, 0);
    }
    pthread_barrier_destroy(&bar);
    struct sm_buf b = SM_BUF_INIT;
    for (int round = 0; round < RACE_ROUNDS; round++) {
        char key[32];
        snprintf(key, sizeof(key), "r/%d", round);
        bool found = false;
        assert_ok(sm_store_get(s, key, sm_range_all(), SM_IO_META, &b, &found, &err), &err);
        assert_true(found);
        assert_true(b.len >= 1 && b.len <= RACE_THREADS);
        for (size_t i = 0; i < b.len; i++) {
            assert_int_equal(b.ptr[i], b.len - 1); /* one writer's bytes, whole */
        }
    }
    sm_buf_free(&b);
    sm_store_close(s);
    assert_int_equal(sm_alloc_current(), base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mem_new_has_mem_scheme_and_url),
        cmocka_unit_test(test_mem_put_copies_the_caller_bytes),
        cmocka_unit_test(test_mem_get_of_an_empty_object_is_found_and_empty),
        cmocka_unit_test(test_mem_close_frees_objects_keys_and_overwritten_data),
        cmocka_unit_test(test_mem_list_deduplicates_child_prefixes),
        cmocka_unit_test(test_mem_prefix_is_not_an_object),
        cmocka_unit_test(test_mem_put_allocation_failures_are_nomem_without_leaks),
        cmocka_unit_test(test_mem_concurrent_puts_of_one_new_key_keep_one_copy),
    };
    return cmocka_run_group_tests_name("store_mem", tests, NULL, NULL);
}
