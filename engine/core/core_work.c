/* The one deterministic OpenMP work driver (work.h): the pool of the tile scan, the shard writer
 * and the region reads of array/. A failing item records its error under a lock when it is the
 * lowest failure so far; items past the lowest failure known so far are skipped. The driver
 * allocates nothing, so a warm region read stays allocation-free. Also sm_threads_warm
 * (threads.h), which the first work run ends. */
#include "shardmill/work.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "shardmill/clock.h"
#include "shardmill/sm_omp.h"
#include "shardmill/threads.h"

#include "core_int.h"

struct failure {
    uint64_t index; /* UINT64_MAX: none */
    struct sm_err err;
};

bool sm_work_in_parallel(void)
{
    return omp_get_level() > 0;
}

int sm_work_default_threads(void)
{
    return omp_get_max_threads();
}

/* What the threads of one run share. */
struct run {
    const struct sm_work *wk;
    atomic_uint_fast64_t lowest_fail, done, done_bytes, next; /* lowest_fail: written under mu */
    atomic_bool stopped;
    int from_cpu;        /* the caller's CPU: where new pool threads start (sm_thread_spread) */
    pthread_mutex_t mu;  /* guards fail */
    struct failure fail; /* the lowest failing item so far and its error */
};

/* One thread's loop: items are handed out one at a time in increasing order (an atomic counter,
 * like schedule(dynamic, 1)), and a thread leaves the loop at a stop or past the lowest failure
 * instead of skipping item by item: a count of 2^60 must not take 2^60 steps to end. */
static void run_thread(struct run *r, int tid)
{
    const struct sm_work *wk = r->wk;
    sm_thread_spread(tid, r->from_cpu);
    for (;;) {
        const uint64_t k = atomic_fetch_add(&r->next, 1);
        if (k >= wk->count || k > atomic_load_explicit(&r->lowest_fail, memory_order_relaxed)) {
            break; /* every later item is higher: a lower item failed, the run fails */
        }
        struct sm_err e;
        sm_err_clear(&e);
        if (atomic_load_explicit(&r->stopped, memory_order_relaxed) ||
            sm_stop_check(wk->stop, &e) != SM_OK) {
            atomic_store_explicit(&r->stopped, true, memory_order_relaxed);
            break; /* a signal: skip the rest (SPEC §1 "at its next tile or shard") */
        }
        uint64_t bytes = 0;
        const sm_status st = wk->item(wk->user, tid, k, &bytes, &e);
        if (st != SM_OK) {
            bytes = 0;
            pthread_mutex_lock(&r->mu);
            if (k < r->fail.index) {
                r->fail.index = k;
                r->fail.err = e;
                atomic_store(&r->lowest_fail, k);
            }
            pthread_mutex_unlock(&r->mu);
        }
        const uint64_t d = atomic_fetch_add(&r->done, 1) + 1;
        const uint64_t b = atomic_fetch_add(&r->done_bytes, bytes) + bytes;
        if (tid == 0 && wk->progress != NULL) {
            wk->progress(wk->progress_user, d, b);
        }
    }
}

/* sm_threads_warm starts its thread once (warm_started); the first work run ends it (warm_stop). */
static atomic_bool warm_stop;
static atomic_flag warm_started = ATOMIC_FLAG_INIT;

static void *warm_loop(void *arg)
{
    const uint64_t end = sm_clock_ns() + *(const uint64_t *)arg;
    sm_thread_name("sm-warm");
    while (!atomic_load_explicit(&warm_stop, memory_order_relaxed) && sm_clock_ns() < end) {
        sched_yield(); /* any thread made runnable on this CPU runs at once */
    }
    return NULL;
}

void sm_threads_warm(int threads)
{
    sm_threads_warm_for(threads, 20000000u);
}

void sm_threads_warm_for(int threads, uint64_t most_ns)
{
    static uint64_t most; /* read by the one thread started, written before it starts */
    const int n = threads > 0 ? threads : omp_get_max_threads();
    if (n < 2 || sm_thread_cpus() < 2 || atomic_flag_test_and_set(&warm_started)) {
        return;
    }
    pthread_attr_t a;
    pthread_t t;
    if (pthread_attr_init(&a) != 0) {
        return;
    }
    most = most_ns;
    if (pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED) == 0) {
        (void)pthread_create(&t, &a, warm_loop, &most); /* without it, only slower */
    }
    pthread_attr_destroy(&a);
}

sm_status sm_work_run(const struct sm_work *wk, struct sm_err *err)
{
    if (!atomic_load_explicit(&warm_stop, memory_order_relaxed)) { /* read-shared after once */
        atomic_store_explicit(&warm_stop, true, memory_order_relaxed);
    }
    const int nthreads = wk->threads > 0 ? wk->threads : 1;
    struct run r = {
        .wk = wk, .lowest_fail = UINT64_MAX, .from_cpu = -1, .fail = {.index = UINT64_MAX}};
    pthread_mutex_init(&r.mu, NULL);
    if (wk->on_caller && nthreads == 1) {
        run_thread(&r, 0); /* no parallel region: an item may open its own */
    } else {
        r.from_cpu = sm_thread_cpu();
        struct run *rp = &r;
#pragma omp parallel num_threads(nthreads) default(none) shared(rp)
        run_thread(rp, omp_get_thread_num());
    }
    pthread_mutex_destroy(&r.mu);
    if (wk->progress != NULL) { /* the final count: thread 0 may not have seen it */
        wk->progress(wk->progress_user, atomic_load(&r.done), atomic_load(&r.done_bytes));
    }
    sm_status st = SM_OK;
    if (r.fail.index != UINT64_MAX) {
        *err = r.fail.err;
        st = err->status;
    }
    if (st == SM_OK && atomic_load(&r.stopped)) { /* the flag stays set: record the stop */
        st = sm_stop_check(wk->stop, err);
    }
    return st;
}
