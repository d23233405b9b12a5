/* Unit tests for engine/core/core_alloc.c: exact current/peak accounting, deterministic failure
 * injection (sm_alloc_fail_at, STYLE B6 torture tests) and overflow checks in calloc/realloc.
 * Counters are process-wide, so every check is a difference against a baseline taken in the test.
 */
#include "shardmill/sm_config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/alloc.h"
#include "sm_test.h"

static int reset_injection(void **state)
{
    (void)state;
    sm_alloc_fail_at(0);
    return 0;
}

static void test_malloc_and_free_move_current_by_exact_size(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    void *a = sm_malloc(1000);
    assert_non_null(a);
    assert_int_equal(sm_alloc_current(), base + 1000);
    void *b = sm_malloc(1);
    assert_non_null(b);
    assert_int_equal(sm_alloc_current(), base + 1001);
    sm_free(a);
    assert_int_equal(sm_alloc_current(), base + 1);
    sm_free(b);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_free_null_is_a_no_op(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    sm_free(NULL);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_blocks_are_max_aligned(void **state)
{
    (void)state;
    for (size_t n = 1; n < 64; n += 7) {
        void *p = sm_malloc(n);
        void *q = sm_calloc(n, 3);
        assert_non_null(p);
        assert_non_null(q);
        assert_int_equal((uintptr_t)p % _Alignof(max_align_t), 0);
        assert_int_equal((uintptr_t)q % _Alignof(max_align_t), 0);
        sm_free(p);
        sm_free(q);
    }
}

static void test_peak_is_high_water_mark_until_reset(void **state)
{
    (void)state;
    sm_alloc_reset_peak();
    const uint64_t base = sm_alloc_current();
    assert_int_equal(sm_alloc_peak(), base);
    void *a = sm_malloc(4096);
    void *b = sm_malloc(8192);
    assert_int_equal(sm_alloc_peak(), base + 4096 + 8192);
    sm_free(b);
    sm_free(a);
    void *c = sm_malloc(10);
    assert_int_equal(sm_alloc_peak(), base + 4096 + 8192);
    sm_alloc_reset_peak();
    assert_int_equal(sm_alloc_peak(), base + 10);
    sm_free(c);
    assert_int_equal(sm_alloc_peak(), base + 10);
}

static void test_calloc_zeroes_and_counts(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    uint32_t *v = sm_calloc(100, sizeof(uint32_t));
    assert_non_null(v);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(v[i], 0);
    }
    assert_int_equal(sm_alloc_current(), base + 400);
    sm_free(v);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_calloc_overflow_returns_null_without_counting(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    assert_null(sm_calloc(SIZE_MAX / 2 + 1, 2));
    assert_null(sm_calloc(2, SIZE_MAX / 2 + 1));
    assert_null(sm_calloc(SIZE_MAX, SIZE_MAX));
    assert_null(sm_calloc(1, SIZE_MAX - 15)); /* the 16-byte header would wrap */
    assert_int_equal(sm_alloc_current(), base);
}

static void test_malloc_overflow_returns_null(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    assert_null(sm_malloc(SIZE_MAX));
    assert_null(sm_malloc(SIZE_MAX - 15));
    assert_int_equal(sm_alloc_current(), base);
}

static void test_realloc_keeps_content_and_moves_accounting(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    uint8_t *p = sm_realloc(NULL, 16); /* NULL: behaves as malloc */
    assert_non_null(p);
    assert_int_equal(sm_alloc_current(), base + 16);
    for (int i = 0; i < 16; i++) {
        p[i] = (uint8_t)i;
    }
    p = sm_realloc(p, 100000);
    assert_non_null(p);
    assert_int_equal(sm_alloc_current(), base + 100000);
    for (int i = 0; i < 16; i++) {
        assert_int_equal(p[i], i);
    }
    p = sm_realloc(p, 4);
    assert_non_null(p);
    assert_int_equal(sm_alloc_current(), base + 4);
    assert_int_equal(p[3], 3);
    sm_free(p);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_realloc_overflow_keeps_the_old_block(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    uint8_t *p = sm_malloc(8);
    assert_non_null(p);
    memset(p, 0xab, 8);
    assert_null(sm_realloc(p, SIZE_MAX));
    assert_null(sm_realloc(p, SIZE_MAX - 15));
    assert_int_equal(sm_alloc_current(), base + 8);
    assert_int_equal(p[7], 0xab);
    sm_free(p);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_fail_at_one_fails_the_next_allocation_only(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    sm_alloc_fail_at(1);
    assert_null(sm_malloc(10));
    void *p = sm_malloc(10);
    assert_non_null(p);
    sm_free(p);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_fail_at_n_counts_every_entry_point(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    sm_alloc_fail_at(4);
    void *a = sm_malloc(1);       /* 1 */
    void *b = sm_calloc(2, 2);    /* 2 */
    void *c = sm_realloc(a, 100); /* 3 */
    assert_non_null(b);
    assert_non_null(c);
    assert_null(sm_strdup("fourth")); /* 4: fails */
    char *d = sm_strdup("fifth");
    assert_non_null(d);
    assert_string_equal(d, "fifth");
    sm_free(b);
    sm_free(c);
    sm_free(d);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_injected_realloc_failure_keeps_the_old_block(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    uint8_t *p = sm_malloc(32);
    assert_non_null(p);
    memset(p, 0x11, 32);
    sm_alloc_fail_at(1);
    assert_null(sm_realloc(p, 64));
    assert_int_equal(sm_alloc_current(), base + 32);
    assert_int_equal(p[31], 0x11);
    sm_free(p);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_fail_at_zero_disables_injection(void **state)
{
    (void)state;
    sm_alloc_fail_at(2);
    sm_alloc_fail_at(0);
    for (int i = 0; i < 5; i++) {
        void *p = sm_malloc(1);
        assert_non_null(p);
        sm_free(p);
    }
}

static void test_strdup_copies_and_counts_terminator(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    const char *s = "c/0/1/2";
    char *d = sm_strdup(s);
    assert_non_null(d);
    assert_ptr_not_equal(d, s);
    assert_string_equal(d, s);
    assert_int_equal(sm_alloc_current(), base + strlen(s) + 1);
    sm_free(d);
}

enum { THREADS = 4, ROUNDS = 20000 };

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *held[8] = {NULL};
    for (int i = 0; i < ROUNDS; i++) {
        unsigned k = (seed + (unsigned)i * 2654435761u) % 8;
        if (held[k] != NULL) {
            sm_free(held[k]);
            held[k] = NULL;
        } else {
            held[k] = (i & 1) ? sm_malloc(k * 13 + 1) : sm_calloc(k + 1, 7);
            if ((i & 3) == 3 && held[k] != NULL) {
                held[k] = sm_realloc(held[k], k * 29 + 5);
            }
        }
    }
    for (int k = 0; k < 8; k++) {
        sm_free(held[k]);
    }
    return NULL;
}

static void test_accounting_is_exact_under_threads(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, churn, (void *)(i + 1)), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    assert_int_equal(sm_alloc_current(), base);
    assert_true(sm_alloc_peak() >= base);
}

#define T(f) cmocka_unit_test_teardown(f, reset_injection)

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* Blocks of 2 MiB and more live on their own mapping (core_alloc_huge.c): the caller's bytes are
 * 2 MiB-aligned outside sanitizer builds, zeroed by calloc, accounted exactly, and realloc moves
 * them into and out of a mapping keeping the common bytes. */
static void test_large_blocks_round_trip_through_every_entry_point(void **state)
{
    (void)state;
    const size_t big = (size_t)5 << 20, small = 1000;
    const uint64_t base = sm_alloc_current();
    uint8_t *p = sm_calloc(big, 1);
    assert_non_null(p);
    assert_int_equal(sm_alloc_current(), base + big);
    assert_int_equal((uintptr_t)p % _Alignof(max_align_t), 0);
    for (size_t i = 0; i < big; i += 4093) {
        assert_int_equal(p[i], 0);
    }
    assert_int_equal(p[big - 1], 0);
    for (size_t i = 0; i < big; i++) {
        p[i] = (uint8_t)(i * 7);
    }
    p = sm_realloc(p, big * 2); /* mapping to a larger mapping */
    assert_non_null(p);
    assert_int_equal(sm_alloc_current(), base + 2 * big);
    for (size_t i = 0; i < big; i += 997) {
        assert_int_equal(p[i], (uint8_t)(i * 7));
    }
    p = sm_realloc(p, small); /* out of the mapping, onto malloc */
    assert_non_null(p);
    assert_int_equal(sm_alloc_current(), base + small);
    for (size_t i = 0; i < small; i++) {
        assert_int_equal(p[i], (uint8_t)(i * 7));
    }
    p = sm_realloc(p, big); /* and back */
    assert_non_null(p);
    assert_int_equal(sm_alloc_current(), base + big);
    assert_int_equal(p[small - 1], (uint8_t)((small - 1) * 7));
    p[big - 1] = 1;
    sm_free(p);
    assert_int_equal(sm_alloc_current(), base);
    uint8_t *q = sm_malloc(big);
    assert_non_null(q);
    if (!SANITIZED) { /* sanitizer builds keep every block on malloc, for ASan to watch */
        assert_int_equal((uintptr_t)q % ((uintptr_t)2 << 20), 0);
    }
    sm_free(q);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_large_block_injection_and_overflow(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    sm_alloc_fail_at(1);
    assert_null(sm_malloc((size_t)4 << 20));
    assert_null(sm_calloc(SIZE_MAX / 2, 4));
    assert_null(sm_malloc(SIZE_MAX - 8));
    assert_int_equal(sm_alloc_current(), base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_malloc_and_free_move_current_by_exact_size),
        T(test_free_null_is_a_no_op),
        T(test_blocks_are_max_aligned),
        T(test_peak_is_high_water_mark_until_reset),
        T(test_calloc_zeroes_and_counts),
        T(test_calloc_overflow_returns_null_without_counting),
        T(test_malloc_overflow_returns_null),
        T(test_realloc_keeps_content_and_moves_accounting),
        T(test_realloc_overflow_keeps_the_old_block),
        T(test_fail_at_one_fails_the_next_allocation_only),
        T(test_fail_at_n_counts_every_entry_point),
        T(test_injected_realloc_failure_keeps_the_old_block),
        T(test_fail_at_zero_disables_injection),
        T(test_strdup_copies_and_counts_terminator),
        T(test_accounting_is_exact_under_threads),
        T(test_large_blocks_round_trip_through_every_entry_point),
        T(test_large_block_injection_and_overflow),
    };
    return cmocka_run_group_tests_name("core_alloc", tests, NULL, NULL);
}
