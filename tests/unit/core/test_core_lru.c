/* Unit tests for engine/core/core_lru.c: the intrusive LRU list of the three caches keeps recency
 * order, its byte and count totals and their peak through push, touch, unlink and pop, and an
 * unlinked node (or one of another list) is left alone; the caches' fetch-wait counts its waiters
 * and hands every one of them the fetch's outcome. */
#include "shardmill/sm_config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "shardmill/lru.h"
#include "sm_test.h"

struct item {
    int id;
    struct sm_lru_node node;
};

static int id_of(struct sm_lru_node *n)
{
    return SM_LRU_ENTRY(n, struct item, node)->id;
}

/* The ids from the most recent to the oldest, checked against the walk back from the oldest. */
static size_t order(const struct sm_lru *l, int *ids, size_t cap)
{
    size_t n = 0;
    for (struct sm_lru_node *p = sm_lru_newest(l); p != NULL && n < cap; p = sm_lru_older(p)) {
        ids[n++] = id_of(p);
    }
    size_t back = n;
    for (struct sm_lru_node *p = sm_lru_oldest(l); p != NULL; p = sm_lru_newer(p)) {
        assert_true(back > 0);
        assert_int_equal(id_of(p), ids[--back]);
    }
    assert_int_equal(back, 0);
    return n;
}

static void test_lru_empty_list_has_no_oldest(void **state)
{
    (void)state;
    struct sm_lru l = {0};
    assert_null(sm_lru_oldest(&l));
    assert_null(sm_lru_newest(&l));
    assert_null(sm_lru_pop_oldest(&l));
    assert_int_equal(l.bytes, 0);
    assert_int_equal(l.count, 0);
}

static void test_lru_push_front_orders_newest_first_and_counts(void **state)
{
    (void)state;
    struct sm_lru l = {0};
    struct item it[3] = {{.id = 0}, {.id = 1}, {.id = 2}};
    for (int i = 0; i < 3; i++) {
        sm_lru_push_front(&l, &it[i].node, 10u * (unsigned)(i + 1));
    }
    int ids[3];
    assert_int_equal(order(&l, ids, 3), 3);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 1);
    assert_int_equal(ids[2], 0);
    assert_int_equal(l.bytes, 60);
    assert_int_equal(l.count, 3);
    assert_int_equal(l.peak_bytes, 60);
    assert_int_equal(id_of(sm_lru_oldest(&l)), 0);
}

static void test_lru_touch_moves_to_front(void **state)
{
    (void)state;
    struct sm_lru l = {0};
    struct item it[3] = {{.id = 0}, {.id = 1}, {.id = 2}};
    for (int i = 0; i < 3; i++) {
        sm_lru_push_front(&l, &it[i].node, 1);
    }
    sm_lru_touch(&l, &it[0].node); /* the oldest */
    sm_lru_touch(&l, &it[1].node); /* a middle one */
    sm_lru_touch(&l, &it[1].node); /* already the newest */
    int ids[3];
    assert_int_equal(order(&l, ids, 3), 3);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 0);
    assert_int_equal(ids[2], 2);
    assert_int_equal(l.bytes, 3);
    assert_int_equal(l.count, 3);
}

static void test_lru_touch_and_unlink_leave_an_unlinked_node_alone(void **state)
{
    (void)state;
    struct sm_lru l = {0};
    struct item a = {.id = 0}, loose = {.id = 9};
    sm_lru_push_front(&l, &a.node, 5);
    assert_false(sm_lru_linked(&l, &loose.node));
    sm_lru_touch(&l, &loose.node);
    sm_lru_unlink(&l, &loose.node);
    assert_true(sm_lru_linked(&l, &a.node));
    assert_int_equal(l.count, 1);
    assert_int_equal(l.bytes, 5);
    assert_ptr_equal(sm_lru_newest(&l), &a.node);
    assert_ptr_equal(sm_lru_oldest(&l), &a.node);
}

static void test_lru_unlink_uncharges_head_middle_and_tail(void **state)
{
    (void)state;
    struct sm_lru l = {0};
    struct item it[4] = {{.id = 0}, {.id = 1}, {.id = 2}, {.id = 3}};
    for (int i = 0; i < 4; i++) {
        sm_lru_push_front(&l, &it[i].node, (uint64_t)1 << i);
    }
    sm_lru_unlink(&l, &it[2].node); /* middle */
    sm_lru_unlink(&l, &it[3].node); /* head */
    sm_lru_unlink(&l, &it[0].node); /* tail */
    assert_false(sm_lru_linked(&l, &it[0].node));
    assert_null(it[0].node.prev);
    assert_null(it[0].node.next);
    int ids[4];
    assert_int_equal(order(&l, ids, 4), 1);
    assert_int_equal(ids[0], 1);
    assert_int_equal(l.bytes, 2);
    assert_int_equal(l.count, 1);
    assert_int_equal(l.peak_bytes, 15); /* the peak stays */
    sm_lru_unlink(&l, &it[1].node);
    assert_null(sm_lru_newest(&l));
    assert_null(sm_lru_oldest(&l));
    assert_int_equal(l.bytes, 0);
    assert_int_equal(l.count, 0);
}

static void test_lru_pop_oldest_evicts_in_least_recent_order(void **state)
{
    (void)state;
    struct sm_lru l = {0};
    struct item it[3] = {{.id = 0}, {.id = 1}, {.id = 2}};
    for (int i = 0; i < 3; i++) {
        sm_lru_push_front(&l, &it[i].node, 4);
    }
    sm_lru_touch(&l, &it[0].node);
    const int want[3] = {1, 2, 0};
    for (int i = 0; i < 3; i++) {
        struct sm_lru_node *n = sm_lru_pop_oldest(&l);
        assert_non_null(n);
        assert_int_equal(id_of(n), want[i]);
        assert_false(sm_lru_linked(&l, n));
        assert_int_equal(l.bytes, 4u * (unsigned)(2 - i));
    }
    assert_null(sm_lru_pop_oldest(&l));
    /* a popped node can be pushed again */
    sm_lru_push_front(&l, &it[1].node, 7);
    assert_int_equal(l.bytes, 7);
    assert_int_equal(l.count, 1);
    assert_int_equal(l.peak_bytes, 12);
}

static void test_lru_over_checks_bytes_and_count_caps(void **state)
{
    (void)state;
    struct sm_lru l = {0};
    struct item it[2] = {{.id = 0}, {.id = 1}};
    sm_lru_push_front(&l, &it[0].node, 60);
    sm_lru_push_front(&l, &it[1].node, 30);
    assert_false(sm_lru_over(&l, 10, 100, UINT64_MAX)); /* exactly the cap fits */
    assert_true(sm_lru_over(&l, 11, 100, UINT64_MAX));
    assert_false(sm_lru_over(&l, 0, 100, 3));
    assert_true(sm_lru_over(&l, 0, 100, 2)); /* a third node exceeds a count cap of 2 */
}

static void test_lru_two_lists_keep_their_own_nodes(void **state)
{
    (void)state;
    struct sm_lru pending = {0}, kept = {0};
    struct item a = {.id = 0}, b = {.id = 1};
    sm_lru_push_front(&pending, &a.node, 0);
    sm_lru_push_front(&pending, &b.node, 0);
    sm_lru_unlink(&pending, &a.node); /* the tail of pending */
    sm_lru_push_front(&kept, &a.node, 8);
    assert_true(sm_lru_linked(&kept, &a.node));
    assert_true(sm_lru_linked(&pending, &b.node));
    assert_int_equal(pending.count, 1);
    assert_int_equal(kept.count, 1);
    assert_int_equal(kept.bytes, 8);
    assert_ptr_equal(sm_lru_oldest(&pending), &b.node);
    assert_ptr_equal(sm_lru_oldest(&kept), &a.node);
}

/* ---- the fetch-wait ---- */

struct cache {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct sm_lru_fetch f;
};

struct waiter {
    struct cache *c;
    bool ok;
};

static void *wait_for_fetch(void *arg)
{
    struct waiter *w = arg;
    pthread_mutex_lock(&w->c->mu);
    w->ok = sm_lru_fetch_wait(&w->c->f, &w->c->mu, &w->c->cv);
    pthread_mutex_unlock(&w->c->mu);
    return NULL;
}

static unsigned waiting(struct cache *c)
{
    pthread_mutex_lock(&c->mu);
    const unsigned n = c->f.waiters;
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* Two threads wait for a fetch in flight; both are counted while they wait, wake at its end and
 * get its outcome. */
static void fetch_outcome_reaches_every_waiter(bool ok)
{
    struct cache c = {.f = {0}};
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    struct waiter w[2] = {{.c = &c, .ok = !ok}, {.c = &c, .ok = !ok}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, wait_for_fetch, &w[i]), 0);
    }
    while (waiting(&c) < 2) {
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&c.mu);
    sm_lru_fetch_done(&c.f, ok, &c.cv);
    assert_true(c.f.ready);
    assert_int_equal(c.f.failed, !ok);
    assert_int_equal(c.f.waiters, 2); /* they run once the lock is released */
    pthread_mutex_unlock(&c.mu);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(w[i].ok, ok);
    }
    assert_int_equal(c.f.waiters, 0);
    pthread_cond_destroy(&c.cv);
    pthread_mutex_destroy(&c.mu);
}

static void test_lru_fetch_wait_hands_waiters_a_success(void **state)
{
    (void)state;
    fetch_outcome_reaches_every_waiter(true);
}

static void test_lru_fetch_wait_hands_waiters_a_failure(void **state)
{
    (void)state;
    fetch_outcome_reaches_every_waiter(false);
}

static void test_lru_fetch_wait_on_an_ended_fetch_returns_at_once(void **state)
{
    (void)state;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    struct sm_lru_fetch f = {.ready = true};
    pthread_mutex_lock(&mu);
    assert_true(sm_lru_fetch_wait(&f, &mu, &cv));
    f.failed = true;
    assert_false(sm_lru_fetch_wait(&f, &mu, &cv));
    pthread_mutex_unlock(&mu);
    assert_int_equal(f.waiters, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lru_empty_list_has_no_oldest),
        cmocka_unit_test(test_lru_push_front_orders_newest_first_and_counts),
        cmocka_unit_test(test_lru_touch_moves_to_front),
        cmocka_unit_test(test_lru_touch_and_unlink_leave_an_unlinked_node_alone),
        cmocka_unit_test(test_lru_unlink_uncharges_head_middle_and_tail),
        cmocka_unit_test(test_lru_pop_oldest_evicts_in_least_recent_order),
        cmocka_unit_test(test_lru_over_checks_bytes_and_count_caps),
        cmocka_unit_test(test_lru_two_lists_keep_their_own_nodes),
        cmocka_unit_test(test_lru_fetch_wait_hands_waiters_a_success),
        cmocka_unit_test(test_lru_fetch_wait_hands_waiters_a_failure),
        cmocka_unit_test(test_lru_fetch_wait_on_an_ended_fetch_returns_at_once),
    };
    return cmocka_run_group_tests_name("core_lru", tests, NULL, NULL);
}
