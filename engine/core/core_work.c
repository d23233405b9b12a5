/* The one deterministic OpenMP work driver (work.h): the pool of the tile scan and the shard
 * writer. Each thread records the error of the lowest item it saw fail; the lowest over the threads
 * wins, and items past the lowest failure known so far are skipped. */
#include "shardmill/work.h"

#include <stdatomic.h>
#include <stdbool.h>

#include "shardmill/alloc.h"
#include "shardmill/sm_omp.h"

struct failure {
    uint64_t index; /* UINT64_MAX: none */
    struct sm_err err;
};

int sm_work_default_threads(void)
{
    return omp_get_max_threads();
}

sm_status sm_work_run(const struct sm_work *wk, struct sm_err *err)
{
    const int nthreads = wk->threads > 0 ? wk->threads : 1;
    struct failure *fails = sm_calloc((size_t)nthreads, sizeof(*fails));
    if (fails == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate %d workers", nthreads);
    }
    for (int i = 0; i < nthreads; i++) {
        fails[i].index = UINT64_MAX;
    }
    atomic_uint_fast64_t lowest_fail = UINT64_MAX;
    atomic_uint_fast64_t done = 0, done_bytes = 0;
    atomic_bool stopped = false;
    atomic_uint_fast64_t next = 0;
    const uint64_t count = wk->count;
    /* Items are handed out one at a time in increasing order (an atomic counter, like
     * schedule(dynamic, 1)), and a thread leaves the loop at a stop or past the lowest failure
     * instead of skipping item by item: a count of 2^60 must not take 2^60 steps to end. */
#pragma omp parallel num_threads(nthreads) default(none)                                           \
    shared(wk, fails, lowest_fail, done, done_bytes, stopped, count, next)
    {
        const int tid = omp_get_thread_num();
        struct failure *f = &fails[tid];
        for (;;) {
            const uint64_t k = atomic_fetch_add(&next, 1);
            if (k >= count || k > atomic_load_explicit(&lowest_fail, memory_order_relaxed)) {
                break; /* every later item is higher: a lower item failed, the run fails */
            }
            struct sm_err e;
            sm_err_clear(&e);
            if (atomic_load_explicit(&stopped, memory_order_relaxed) ||
                sm_stop_check(wk->stop, &e) != SM_OK) {
                atomic_store_explicit(&stopped, true, memory_order_relaxed);
                break; /* a signal: skip the rest (SPEC §1 "at its next tile or shard") */
            }
            uint64_t bytes = 0;
            const sm_status st = wk->item(wk->user, tid, k, &bytes, &e);
            if (st != SM_OK) {
                bytes = 0;
                if (k < f->index) {
                    f->index = k;
                    f->err = e;
                }
                uint_fast64_t cur = atomic_load(&lowest_fail);
                while (k < cur && !atomic_compare_exchange_weak(&lowest_fail, &cur, k)) {
                }
            }
            const uint64_t d = atomic_fetch_add(&done, 1) + 1;
            const uint64_t b = atomic_fetch_add(&done_bytes, bytes) + bytes;
            if (tid == 0 && wk->progress != NULL) {
                wk->progress(wk->progress_user, d, b);
            }
        }
    }
    if (wk->progress != NULL) { /* the final count: thread 0 may not have seen it */
        wk->progress(wk->progress_user, atomic_load(&done), atomic_load(&done_bytes));
    }
    sm_status st = SM_OK;
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < nthreads; i++) {
        if (fails[i].index < best) {
            best = fails[i].index;
            *err = fails[i].err;
            st = err->status;
        }
    }
    sm_free(fails);
    if (st == SM_OK && atomic_load(&stopped)) { /* the flag stays set: record the stop */
        st = sm_stop_check(wk->stop, err);
    }
    return st;
}
