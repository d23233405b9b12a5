/* The one deterministic OpenMP work driver (core/core_work.c) that the tile scan (tile/) and the
 * shard writer (write/) share: items [0, count) are handed out to `threads` threads dynamically,
 * one at a time; each item runs `item(user, thread, k, &bytes, err)` with the thread's index, so
 * the caller keeps per-thread state (scratch, buffers, histograms) indexed by it and merges it in
 * thread-index order afterwards. Deterministic by contract: the result a caller builds from
 * order-independent per-thread sums does not depend on the thread count, and on failure the error
 * reported is the one of the lowest failing item (items past it are skipped), so the message is
 * the same for any thread count. The stop flag (status.h) is checked before every item; once set,
 * the remaining items are skipped and the driver returns SM_E_STOPPED unless an item failed. */
#ifndef SM_CORE_WORK_H
#define SM_CORE_WORK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shardmill/progress.h"
#include "shardmill/status.h"

/* One item. *bytes (0 on entry) is what it adds to the progress byte count. */
typedef sm_status (*sm_work_item_fn)(void *user, int thread, uint64_t item, uint64_t *bytes,
                                     struct sm_err *err);

struct sm_work {
    uint64_t count;
    int threads; /* >= 1 (sm_work_default_threads when the caller has none configured) */
    sm_work_item_fn item;
    void *user;
    /* If non-NULL, called by thread 0 after each of its items and once at the end with the items
     * done (failed ones included) and the bytes of the items that succeeded (progress.h). */
    sm_progress_fn progress;
    void *progress_user;
    const atomic_int *stop; /* or NULL */
    /* With threads == 1: run the items on the caller's thread outside any parallel region, so an
     * item may start parallel work of its own (the inner chunks of the one shard a rank has). */
    bool on_caller;
};

/* Runs every item; see above. */
sm_status sm_work_run(const struct sm_work *wk, struct sm_err *err);

/* True inside an OpenMP parallel region (active or not): a caller there stays on its thread. */
bool sm_work_in_parallel(void);

/* Threads a driver uses when none are configured: OpenMP's default (OMP_NUM_THREADS or the
 * cores), 1 without OpenMP. */
int sm_work_default_threads(void);

#endif
