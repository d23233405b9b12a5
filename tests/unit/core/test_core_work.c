#define _GNU_SOURCE /* sched_getaffinity, sched_getcpu: what sm_thread_spread must leave */
/* Unit tests for engine/core/core_work.c (work.h): every item runs once with a thread index in
 * range, the error of the lowest failing item is reported for any thread count, a set stop flag
 * skips the items and returns SM_E_STOPPED, progress ends at the full count, on_caller runs the
 * items outside any parallel region, a pool thread's first placement (sm_thread_spread), and the
 * warm-up thread of sm_threads_warm (threads.h), which the first work run ends. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <shardmill/alloc.h>
#include <shardmill/sm_omp.h>
#include <shardmill/threads.h>
#include <shardmill/work.h>

#include "core_int.h"

#define NITEMS 200

struct job {
    int threads;
    atomic_int runs[NITEMS];
    atomic_int bad_thread;
    uint64_t fail_from; /* items >= this and multiple of 7 fail */
    uint64_t last_done, last_bytes;
};

static sm_status item(void *user, int thread, uint64_t k, uint64_t *bytes, struct sm_err *err)
{
    struct job *j = user;
    if (thread < 0 || thread >= j->threads) {
        atomic_store(&j->bad_thread, 1);
    }
    atomic_fetch_add(&j->runs[k], 1);
    if (k >= j->fail_from && k % 7 == 0) {
        SM_FAIL(err, SM_E_DATA, "item %d failed", (int)k);
    }
    *bytes = 3;
    return SM_OK;
}

static void progress(void *user, uint64_t done, uint64_t bytes)
{
    struct job *j = user;
    j->last_done = done;
    j->last_bytes = bytes;
}

/* Threads of this process named `name` (/proc/self/task/TID/comm). */
static int threads_named(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[300], comm[32] = "";
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        FILE *f = e->d_name[0] == '.' ? NULL : fopen(path, "r");
        if (f != NULL) {
            n += fgets(comm, sizeof(comm), f) != NULL && strncmp(comm, name, strlen(name)) == 0 &&
                 comm[strlen(name)] == '\n';
            fclose(f);
        }
    }
    closedir(d);
    return n;
}

/* Polls up to 200 ms for `want` threads named sm-warm; returns the last count. */
static int wait_warm(int want)
{
    int n = threads_named("sm-warm");
    for (int i = 0; i < 200 && n != want; i++) {
        nanosleep(&(struct timespec){0, 1000000}, NULL);
        n = threads_named("sm-warm");
    }
    return n;
}

static sm_status nothing(void *user, int thread, uint64_t item, uint64_t *bytes, struct sm_err *err)
{
    (void)user, (void)thread, (void)item, (void)bytes, (void)err;
    return SM_OK;
}

/* First in the group: the work runs of the other tests end the warm-up for the whole process. */
static void test_warm_runs_until_the_first_work(void **state)
{
    (void)state;
    if (sm_thread_cpus() < 2) {
        skip(); /* one CPU: nothing to wake, and no thread is started */
    }
    sm_threads_warm(1);
    assert_int_equal(wait_warm(1), 0);    /* one thread: none */
    sm_threads_warm_for(2, 60000000000u); /* a minute: only the work run can end it in time */
    assert_int_equal(wait_warm(1), 1);
    sm_threads_warm(0); /* once per process */
    assert_int_equal(threads_named("sm-warm"), 1);
    const struct sm_work wk = {.count = 4, .threads = 2, .item = nothing};
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_work_run(&wk, &err), SM_OK);
    assert_int_equal(wait_warm(0), 0); /* ended by the work run */
}

static void test_every_item_once(void **state)
{
    (void)state;
    for (int t = 1; t <= 4; t++) {
        static struct job j;
        memset(&j, 0, sizeof(j));
        j.threads = t;
        j.fail_from = UINT64_MAX;
        const struct sm_work wk = {NITEMS, t, item, &j, progress, &j, NULL, false};
        struct sm_err err;
        sm_err_clear(&err);
        assert_int_equal(sm_work_run(&wk, &err), SM_OK);
        for (int k = 0; k < NITEMS; k++) {
            assert_int_equal(atomic_load(&j.runs[k]), 1);
        }
        assert_int_equal(atomic_load(&j.bad_thread), 0);
        assert_int_equal(j.last_done, NITEMS);
        assert_int_equal(j.last_bytes, 3 * NITEMS);
    }
}

static void test_lowest_failure_wins(void **state)
{
    (void)state;
    for (int t = 1; t <= 4; t++) {
        static struct job j;
        memset(&j, 0, sizeof(j));
        j.threads = t;
        j.fail_from = 50; /* 56, 63, ... fail: 56 is reported */
        const struct sm_work wk = {NITEMS, t, item, &j, NULL, NULL, NULL, false};
        struct sm_err err;
        sm_err_clear(&err);
        assert_int_equal(sm_work_run(&wk, &err), SM_E_DATA);
        assert_string_equal(err.what, "item 56 failed");
        for (int k = 0; k < 56; k++) {
            assert_int_equal(atomic_load(&j.runs[k]), 1); /* below it: all ran */
        }
    }
}

/* The driver allocates nothing (a warm parallel region read must not): with every allocation
 * failing it still runs every item and reports the lowest failure. */
static void test_run_allocates_nothing(void **state)
{
    (void)state;
    for (int t = 1; t <= 4; t++) {
        static struct job j;
        memset(&j, 0, sizeof(j));
        j.threads = t;
        j.fail_from = 100; /* 105 is the lowest failure */
        const struct sm_work wk = {.count = NITEMS, .threads = t, .item = item, .user = &j};
        struct sm_err err;
        sm_err_clear(&err);
        const uint64_t base = sm_alloc_current();
        sm_alloc_fail_at(1);
        const sm_status st = sm_work_run(&wk, &err);
        sm_alloc_fail_at(0);
        assert_int_equal(st, SM_E_DATA);
        assert_string_equal(err.what, "item 105 failed");
        assert_int_equal(sm_alloc_current(), base);
        for (int k = 0; k < 105; k++) {
            assert_int_equal(atomic_load(&j.runs[k]), 1);
        }
    }
}

static void test_stop_skips_the_rest(void **state)
{
    (void)state;
    static struct job j;
    memset(&j, 0, sizeof(j));
    j.threads = 2;
    j.fail_from = UINT64_MAX;
    atomic_int stop = 15;
    const struct sm_work wk = {NITEMS, 2, item, &j, NULL, NULL, &stop, false};
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_work_run(&wk, &err), SM_E_STOPPED);
    assert_int_equal(err.cause, 15);
    for (int k = 0; k < NITEMS; k++) {
        assert_int_equal(atomic_load(&j.runs[k]), 0);
    }
}

static sm_status level_item(void *user, int thread, uint64_t k, uint64_t *bytes, struct sm_err *err)
{
    (void)thread;
    (void)k;
    (void)bytes;
    (void)err;
    int *levels = user;
    levels[k] = omp_get_level();
    return SM_OK;
}

/* on_caller with one thread runs the items outside any parallel region (an item may open its
 * own), in order; without it, even one thread runs inside a region (a read there stays serial). */
static void test_on_caller_runs_outside_a_parallel_region(void **state)
{
    (void)state;
    int levels[4] = {-1, -1, -1, -1};
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_work on = {
        .count = 4, .threads = 1, .item = level_item, .user = levels, .on_caller = true};
    assert_int_equal(sm_work_run(&on, &err), SM_OK);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(levels[i], 0);
    }
#ifdef _OPENMP
    const struct sm_work in = {.count = 4, .threads = 1, .item = level_item, .user = levels};
    assert_int_equal(sm_work_run(&in, &err), SM_OK);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(levels[i], 1);
    }
#endif
}

struct spread_probe {
    int from, tid, cpu_after, allowed_before, allowed_after;
};

static void *spread_thread(void *arg)
{
    struct spread_probe *p = arg;
    cpu_set_t m;
    CPU_ZERO(&m);
    p->allowed_before = sched_getaffinity(0, sizeof(m), &m) == 0 ? CPU_COUNT(&m) : -1;
    sm_thread_spread(p->tid, p->from);
    p->cpu_after = sm_thread_cpu();
    CPU_ZERO(&m);
    p->allowed_after = sched_getaffinity(0, sizeof(m), &m) == 0 ? CPU_COUNT(&m) : -1;
    sm_thread_spread(p->tid, p->cpu_after); /* once per thread: no second move */
    return NULL;
}

/* A pool thread's first placement: moved to another CPU than the caller's when the process may
 * use two, its whole mask given back (no binding); thread 0 and a second call stay put. */
static void test_spread_moves_once_and_frees(void **state)
{
    (void)state;
    cpu_set_t m;
    CPU_ZERO(&m);
    assert_int_equal(sched_getaffinity(0, sizeof(m), &m), 0);
    struct spread_probe p = {.from = sm_thread_cpu(), .tid = 1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, spread_thread, &p), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(p.allowed_after, p.allowed_before); /* the whole mask again */
    if (CPU_COUNT(&m) >= 2 && p.from >= 0) {
        assert_int_not_equal(p.cpu_after, p.from);
    }
    struct spread_probe zero = {.from = sm_thread_cpu(), .tid = 0};
    assert_int_equal(pthread_create(&t, NULL, spread_thread, &zero), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(zero.allowed_after, zero.allowed_before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warm_runs_until_the_first_work),
        cmocka_unit_test(test_every_item_once),
        cmocka_unit_test(test_lowest_failure_wins),
        cmocka_unit_test(test_run_allocates_nothing),
        cmocka_unit_test(test_stop_skips_the_rest),
        cmocka_unit_test(test_on_caller_runs_outside_a_parallel_region),
        cmocka_unit_test(test_spread_moves_once_and_frees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
