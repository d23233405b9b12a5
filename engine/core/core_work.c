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
    struct failure *fails;
    atomic_uint_fast64_t lowest_fail, done, done_bytes, next;
    atomic_bool stopped;
};

/* One thread's loop: items are handed out one at a time in increasing order (an atomic counter,
 * like schedule(dynamic, 1)), and a thread leaves the loop at a stop or past the lowest failure
 * instead of skipping item by item: a count of 2^60 must not take 2^60 steps to end. */
static void run_thread(struct run *r, int tid)
{
    const struct sm_work *wk = r->wk;
    struct failure *f = &r->fails[tid];
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
            if (k < f->index) {
                f->index = k;
                f->err = e;
            }
            uint_fast64_t cur = atomic_load(&r->lowest_fail);
            while (k < cur && !atomic_compare_exchange_weak(&r->lowest_fail, &cur, k)) {
            }
        }
        const uint64_t d = atomic_fetch_add(&r->done, 1) + 1;
        const uint64_t b = atomic_fetch_add(&r->done_bytes, bytes) + bytes;
        if (tid == 0 && wk->progress != NULL) {
            wk->progress(wk->progress_user, d, b);
        }
    }
}

sm_status sm_work_run(const struct sm_work *wk, struct sm_err *err)
{
    const int nthreads = wk->threads > 0 ? wk->threads : 1;
    struct run r = {wk,   sm_calloc((size_t)nthreads, sizeof(struct failure)), UINT64_MAX, 0, 0, 0,
                    false};
    if (r.fails == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate %d workers", nthreads);
    }
    for (int i = 0; i < nthreads; i++) {
        r.fails[i].index = UINT64_MAX;
    }
    if (wk->on_caller && nthreads == 1) {
        run_thread(&r, 0); /* no parallel region: an item may open its own */
    } else {
        struct run *rp = &r;
#pragma omp parallel num_threads(nthreads) default(none) shared(rp)
        run_thread(rp, omp_get_thread_num());
    }
    if (wk->progress != NULL) { /* the final count: thread 0 may not have seen it */
        wk->progress(wk->progress_user, atomic_load(&r.done), atomic_load(&r.done_bytes));
    }
    sm_status st = SM_OK;
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < nthreads; i++) {
        if (r.fails[i].index < best) {
            best = r.fails[i].index;
            *err = r.fails[i].err;
            st = err->status;
        }
    }
    sm_free(r.fails);
    if (st == SM_OK && atomic_load(&r.stopped)) { /* the flag stays set: record the stop */
        st = sm_stop_check(wk->stop, err);
    }
    return st;
}
