/* Unit tests for engine/array/index_cache.c (through array_int.h): the shard-index cache is an LRU
 * keyed by (key, base offset, base length), capped in bytes and in entries, disabled when either
 * cap is 0; a hit copies the pairs out; hits, misses and the byte high-water mark are counted. The
 * per-entry overhead is private, so byte caps are set from the cost the cache itself reports
 * (peak_bytes after one insertion). may_hold says whether an index could ever be cached, so a
 * reader allocates nothing for a lookup of an index larger than the cache (2^59 entries). */
#include "shardmill/sm_config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "array_int.h"
#include "shardmill/alloc.h"
#include "sm_test.h"

#define NV 8 /* values per index in most cases: 4 inner chunks */

static void pairs_of(uint64_t tag, uint64_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = tag * 1000 + i;
    }
}

static struct sm_index_cache *cache_new(uint64_t bytes, uint64_t entries)
{
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_index_cache *c = NULL;
    assert_ok(sm_index_cache_new(bytes, entries, &c, &err), &err);
    assert_non_null(c);
    return c;
}

#define TOP UINT64_MAX /* base_len of a top-level shard (the whole object) */

static void put_len(struct sm_index_cache *c, const char *key, uint64_t base, uint64_t base_len,
                    uint64_t tag)
{
    uint64_t p[NV];
    pairs_of(tag, p, NV);
    sm_index_cache_put(c, key, base, base_len, p, NV, tag + 5000);
}

static void put(struct sm_index_cache *c, const char *key, uint64_t base, uint64_t tag)
{
    put_len(c, key, base, TOP, tag);
}

/* True on a hit, and then checks the pairs and shard length are those stored with `tag`. */
static bool hit_len(struct sm_index_cache *c, const char *key, uint64_t base, uint64_t base_len,
                    uint64_t tag)
{
    uint64_t p[NV], want[NV], len = 0;
    if (!sm_index_cache_get(c, key, base, base_len, p, NV, &len)) {
        return false;
    }
    pairs_of(tag, want, NV);
    assert_memory_equal(p, want, sizeof(p));
    assert_int_equal(len, tag + 5000);
    return true;
}

static bool hit(struct sm_index_cache *c, const char *key, uint64_t base, uint64_t tag)
{
    return hit_len(c, key, base, TOP, tag);
}

/* Bytes charged for one entry with NV values under a key of this length. */
static uint64_t entry_cost(size_t keylen)
{
    struct sm_index_cache *c = cache_new(1u << 20, 10);
    char key[64];
    memset(key, 'k', keylen);
    key[keylen] = '\0';
    put(c, key, 0, 1);
    uint64_t h, m, peak;
    sm_index_cache_stats(c, &h, &m, &peak);
    sm_index_cache_free(c);
    assert_true(peak >= NV * sizeof(uint64_t) + keylen + 1);
    return peak;
}

static void test_cache_disabled_when_a_cap_is_zero(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_index_cache *c = (struct sm_index_cache *)&err;
    assert_ok(sm_index_cache_new(0, 64, &c, &err), &err);
    assert_null(c);
    c = (struct sm_index_cache *)&err;
    assert_ok(sm_index_cache_new(16u << 20, 0, &c, &err), &err);
    assert_null(c);
    sm_index_cache_free(NULL);
}

static void test_cache_miss_then_hit_returns_copy_of_pairs(void **state)
{
    (void)state;
    struct sm_index_cache *c = cache_new(1u << 20, 64);
    assert_false(hit(c, "c/0/0", 0, 1));
    put(c, "c/0/0", 0, 1);
    assert_true(hit(c, "c/0/0", 0, 1));
    /* the caller's copy is its own */
    uint64_t p[NV], len;
    assert_true(sm_index_cache_get(c, "c/0/0", 0, TOP, p, NV, &len));
    memset(p, 0, sizeof(p));
    assert_true(hit(c, "c/0/0", 0, 1));
    sm_index_cache_free(c);
}

static void test_cache_put_copies_the_caller_pairs(void **state)
{
    (void)state;
    struct sm_index_cache *c = cache_new(1u << 20, 64);
    uint64_t p[NV];
    pairs_of(3, p, NV);
    char key[] = "c/1/2";
    sm_index_cache_put(c, key, 0, TOP, p, NV, 5003);
    memset(p, 0xff, sizeof(p));
    key[2] = '9';
    assert_true(hit(c, "c/1/2", 0, 3));
    sm_index_cache_free(c);
}

static void test_cache_key_and_base_both_identify_an_entry(void **state)
{
    (void)state;
    struct sm_index_cache *c = cache_new(1u << 20, 64);
    put(c, "s", 0, 1);
    put(c, "s", 4096, 2); /* a nested shard inside "s" */
    put(c, "t", 0, 3);
    assert_true(hit(c, "s", 0, 1));
    assert_true(hit(c, "s", 4096, 2));
    assert_true(hit(c, "t", 0, 3));
    assert_false(hit(c, "s", 1, 1));
    assert_false(hit(c, "u", 0, 1));
    sm_index_cache_free(c);
}

static void test_cache_base_length_separates_nested_shard_at_byte_zero(void **state)
{
    /* Regression: a nested shard stored at byte 0 has the same (key, base) as the top-level
     * index of its object; the base length tells them apart. */
    (void)state;
    struct sm_index_cache *c = cache_new(1u << 20, 64);
    put_len(c, "c/0/0", 0, TOP, 1); /* the object's own index */
    put_len(c, "c/0/0", 0, 100, 2); /* a nested shard in bytes [0, 100) */
    assert_true(hit_len(c, "c/0/0", 0, TOP, 1));
    assert_true(hit_len(c, "c/0/0", 0, 100, 2));
    assert_false(hit_len(c, "c/0/0", 0, 99, 2));
    sm_index_cache_free(c);
}

static void test_cache_value_count_mismatch_is_a_miss(void **state)
{
    (void)state;
    struct sm_index_cache *c = cache_new(1u << 20, 64);
    put(c, "s", 0, 1);
    uint64_t p[2 * NV], len;
    assert_false(sm_index_cache_get(c, "s", 0, TOP, p, 2 * NV, &len));
    assert_false(sm_index_cache_get(c, "s", 0, TOP, p, NV / 2, &len));
    sm_index_cache_free(c);
}

static void test_cache_entry_cap_evicts_least_recently_used(void **state)
{
    (void)state;
    struct sm_index_cache *c = cache_new(1u << 20, 2);
    put(c, "a", 0, 1);
    put(c, "b", 0, 2);
    assert_true(hit(c, "a", 0, 1)); /* a is now the most recent */
    put(c, "c", 0, 3);              /* evicts b */
    assert_false(hit(c, "b", 0, 2));
    assert_true(hit(c, "a", 0, 1));
    assert_true(hit(c, "c", 0, 3));
    put(c, "d", 0, 4); /* c was hit after a, so a is the least recent: evicted */
    assert_false(hit(c, "a", 0, 1));
    assert_true(hit(c, "c", 0, 3));
    assert_true(hit(c, "d", 0, 4));
    sm_index_cache_free(c);
}

static void test_cache_byte_cap_evicts_least_recently_used(void **state)
{
    (void)state;
    const uint64_t cost = entry_cost(1);
    struct sm_index_cache *c = cache_new(2 * cost + cost / 2, 100); /* room for two entries */
    put(c, "a", 0, 1);
    put(c, "b", 0, 2);
    assert_true(hit(c, "a", 0, 1));
    put(c, "c", 0, 3); /* evicts b */
    assert_false(hit(c, "b", 0, 2));
    assert_true(hit(c, "a", 0, 1));
    assert_true(hit(c, "c", 0, 3));
    uint64_t h, m, peak;
    sm_index_cache_stats(c, &h, &m, &peak);
    assert_int_equal(peak, 2 * cost);
    assert_true(peak <= 2 * cost + cost / 2);
    sm_index_cache_free(c);
}

static void test_cache_entry_larger_than_cache_is_not_cached_and_evicts_nothing(void **state)
{
    (void)state;
    const uint64_t cost = entry_cost(1);
    struct sm_index_cache *c = cache_new(cost, 100); /* exactly one small entry */
    put(c, "a", 0, 1);
    uint64_t big[4 * NV] = {0};
    sm_index_cache_put(c, "z", 0, TOP, big, 4 * NV, 1);
    uint64_t out[4 * NV], len;
    assert_false(sm_index_cache_get(c, "z", 0, TOP, out, 4 * NV, &len));
    assert_true(hit(c, "a", 0, 1));
    sm_index_cache_free(c);
}

static void test_cache_may_hold_only_what_fits_the_byte_cap(void **state)
{
    (void)state;
    const uint64_t cost = entry_cost(1); /* an NV-value entry under key "a" */
    struct sm_index_cache *c = cache_new(cost, 100);
    assert_true(sm_index_cache_may_hold(c, NV)); /* the empty key costs less than "a" */
    assert_false(sm_index_cache_may_hold(c, 4 * NV));
    assert_false(sm_index_cache_may_hold(c, (size_t)1 << 60)); /* 2^59 entries: no overflow */
    assert_false(sm_index_cache_may_hold(c, SIZE_MAX));
    sm_index_cache_free(c);
    c = cache_new(16u << 20, 64);
    assert_true(sm_index_cache_may_hold(c, (size_t)1 << 20));  /* 8 MiB of pairs */
    assert_false(sm_index_cache_may_hold(c, (size_t)2 << 20)); /* 16 MiB + overhead */
    sm_index_cache_free(c);
}

static void test_cache_put_of_existing_key_replaces_without_evicting_others(void **state)
{
    (void)state;
    struct sm_index_cache *c = cache_new(1u << 20, 2);
    put(c, "a", 0, 1);
    put(c, "b", 0, 2);
    put(c, "a", 0, 7); /* replaces a: still two entries */
    assert_true(hit(c, "b", 0, 2));
    assert_true(hit(c, "a", 0, 7));
    sm_index_cache_free(c);
}

static void test_cache_stats_count_hits_misses_and_peak_bytes(void **state)
{
    (void)state;
    const uint64_t cost = entry_cost(1);
    struct sm_index_cache *c = cache_new(1u << 20, 3);
    uint64_t h, m, peak;
    sm_index_cache_stats(c, &h, &m, &peak);
    assert_int_equal(h, 0);
    assert_int_equal(m, 0);
    assert_int_equal(peak, 0);
    assert_false(hit(c, "a", 0, 1));
    put(c, "a", 0, 1);
    put(c, "b", 0, 2);
    put(c, "c", 0, 3);
    put(c, "d", 0, 4); /* evicts a: bytes stay at three entries */
    assert_true(hit(c, "d", 0, 4));
    assert_true(hit(c, "c", 0, 3));
    assert_false(hit(c, "a", 0, 1));
    sm_index_cache_stats(c, &h, &m, &peak);
    assert_int_equal(h, 2);
    assert_int_equal(m, 2);
    assert_int_equal(peak, 3 * cost);
    sm_index_cache_free(c);
}

static void test_cache_free_releases_all_entries(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    struct sm_index_cache *c = cache_new(1u << 20, 1000);
    for (int i = 0; i < 100; i++) {
        char key[16];
        snprintf(key, sizeof(key), "c/%d", i);
        put(c, key, (uint64_t)i, (uint64_t)i);
    }
    sm_index_cache_free(c);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_cache_put_allocation_failure_skips_caching(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    struct sm_index_cache *c = cache_new(1u << 20, 10);
    for (uint64_t n = 1; n <= 3; n++) {
        sm_alloc_fail_at(n);
        put(c, "a", 0, 1);
        sm_alloc_fail_at(0);
        assert_false(hit(c, "a", 0, 1));
    }
    put(c, "a", 0, 1);
    assert_true(hit(c, "a", 0, 1));
    sm_index_cache_free(c);
    assert_int_equal(sm_alloc_current(), base);
}

struct cache_thread {
    struct sm_index_cache *c;
    unsigned id;
    int bad;
};

static void *cache_worker(void *arg)
{
    struct cache_thread *t = arg;
    struct sm_test_rng rng = {t->id + 11};
    for (int i = 0; i < 5000; i++) {
        const uint64_t k = sm_test_rng_below(&rng, 12);
        char key[16];
        snprintf(key, sizeof(key), "s/%llu", (unsigned long long)k);
        uint64_t p[NV], len = 0;
        if (sm_index_cache_get(t->c, key, k * 16, TOP, p, NV, &len)) {
            uint64_t want[NV];
            pairs_of(k, want, NV);
            if (memcmp(p, want, sizeof(p)) != 0 || len != k + 5000) {
                t->bad++;
            }
        } else {
            pairs_of(k, p, NV);
            sm_index_cache_put(t->c, key, k * 16, TOP, p, NV, k + 5000);
        }
    }
    return NULL;
}

static void test_cache_is_consistent_under_threads(void **state)
{
    (void)state;
    struct sm_index_cache *c = cache_new(6 * entry_cost(4), 8); /* evicts constantly */
    struct cache_thread t[4];
    pthread_t th[4];
    for (unsigned i = 0; i < 4; i++) {
        t[i] = (struct cache_thread){c, i, 0};
        assert_int_equal(pthread_create(&th[i], NULL, cache_worker, &t[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(t[i].bad, 0);
    }
    uint64_t h, m, peak;
    sm_index_cache_stats(c, &h, &m, &peak);
    assert_int_equal(h + m, 4 * 5000);
    assert_true(peak <= 6 * entry_cost(4));
    sm_index_cache_free(c);
}

/* The reader's path: a miss hands out a pending entry to fill; once completed, hits borrow the
 * same immutable pairs (same address, no allocation); an entry evicted while borrowed stays
 * readable until released; a failed fill is dropped and the next acquire fills again. */
static void test_cache_acquire_fills_once_then_lends_the_same_pairs(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    struct sm_index_cache *c = cache_new(1u << 20, 1);
    struct sm_index_entry *e1 = NULL, *e2 = NULL, *e3 = NULL;
    assert_int_equal(sm_index_cache_acquire(c, "c/0/0", 0, TOP, NV, &e1), SM_ICACHE_FILL);
    pairs_of(3, sm_index_entry_fill_buf(e1), NV);
    sm_index_cache_complete(c, e1, true, 77);
    const uint64_t before = sm_alloc_current();
    assert_int_equal(sm_index_cache_acquire(c, "c/0/0", 0, TOP, NV, &e2), SM_ICACHE_HIT);
    assert_int_equal(sm_alloc_current(), before);
    uint64_t len1 = 0, len2 = 0, want[NV];
    const uint64_t *p1 = sm_index_entry_pairs(e1, &len1), *p2 = sm_index_entry_pairs(e2, &len2);
    assert_ptr_equal(p1, p2);
    assert_int_equal(len2, 77);
    pairs_of(3, want, NV);
    assert_memory_equal(p2, want, sizeof(want));
    /* a second key evicts the first (one entry allowed); the borrowed pairs stay readable */
    put(c, "c/0/1", 0, 4);
    assert_false(hit(c, "c/0/0", 0, 3));
    assert_memory_equal(p2, want, sizeof(want));
    sm_index_cache_release(c, e1);
    sm_index_cache_release(c, e2);
    /* a failed fill is not cached */
    assert_int_equal(sm_index_cache_acquire(c, "c/9/9", 0, TOP, NV, &e3), SM_ICACHE_FILL);
    sm_index_cache_complete(c, e3, false, 0);
    sm_index_cache_release(c, e3);
    assert_int_equal(sm_index_cache_acquire(c, "c/9/9", 0, TOP, NV, &e3), SM_ICACHE_FILL);
    sm_index_cache_complete(c, e3, false, 0);
    sm_index_cache_release(c, e3);
    uint64_t h, m, peak;
    sm_index_cache_stats(c, &h, &m, &peak);
    assert_int_equal(h, 1);
    sm_index_cache_free(c);
    assert_int_equal(sm_alloc_current(), base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_acquire_fills_once_then_lends_the_same_pairs),
        cmocka_unit_test(test_cache_disabled_when_a_cap_is_zero),
        cmocka_unit_test(test_cache_miss_then_hit_returns_copy_of_pairs),
        cmocka_unit_test(test_cache_put_copies_the_caller_pairs),
        cmocka_unit_test(test_cache_key_and_base_both_identify_an_entry),
        cmocka_unit_test(test_cache_base_length_separates_nested_shard_at_byte_zero),
        cmocka_unit_test(test_cache_value_count_mismatch_is_a_miss),
        cmocka_unit_test(test_cache_entry_cap_evicts_least_recently_used),
        cmocka_unit_test(test_cache_byte_cap_evicts_least_recently_used),
        cmocka_unit_test(test_cache_entry_larger_than_cache_is_not_cached_and_evicts_nothing),
        cmocka_unit_test(test_cache_may_hold_only_what_fits_the_byte_cap),
        cmocka_unit_test(test_cache_put_of_existing_key_replaces_without_evicting_others),
        cmocka_unit_test(test_cache_stats_count_hits_misses_and_peak_bytes),
        cmocka_unit_test(test_cache_free_releases_all_entries),
        cmocka_unit_test(test_cache_put_allocation_failure_skips_caching),
        cmocka_unit_test(test_cache_is_consistent_under_threads),
    };
    return cmocka_run_group_tests_name("array_index_cache", tests, NULL, NULL);
}
