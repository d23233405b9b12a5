/* What a region read and a shard's ranged read share (array_read.c, shard_read.c): the kept
 * buffers of a scratch, the parallel loop over a read's items (the one `#pragma omp` of array/),
 * the stage clocks and the placing of a decoded block in the region. Split out of array_read.c so
 * that the two readers depend on this file, not on each other. */
#include "array_int.h"

#include "shardmill/clock.h"
#include "shardmill/sm_omp.h"

/* The user buffers of a scratch (sm_scratch_user_buf) a read keeps. */
enum { BUF_ENC, BUF_DEC, BUF_PAIRS, BUF_REFS };

void sm_read_bufs_of(struct sm_scratch *scratch, unsigned threads, struct sm_read_bufs *out)
{
    out->enc = sm_scratch_user_buf(scratch, BUF_ENC);
    out->dec = sm_scratch_user_buf(scratch, BUF_DEC);
    out->pairs = sm_scratch_user_buf(scratch, BUF_PAIRS);
    out->refs = sm_scratch_user_buf(scratch, BUF_REFS);
    out->scratch = scratch;
    out->threads = threads;
}

sm_status sm_read_parallel(unsigned threads, uint64_t n, sm_read_job job, void *ctx,
                           struct sm_scratch *scratch, struct sm_err *err)
{
    struct sm_scratch *ws[SM_READ_MAX_THREADS];
    struct sm_err errs[SM_READ_MAX_THREADS];
    uint64_t failed_at[SM_READ_MAX_THREADS];
    if (threads > SM_READ_MAX_THREADS) {
        threads = SM_READ_MAX_THREADS;
    }
    for (unsigned i = 0; i < threads; i++) {
        SM_TRY(sm_scratch_worker(scratch, i, &ws[i], err));
        sm_err_clear(&errs[i]);
        failed_at[i] = UINT64_MAX;
    }
    atomic_uint_fast64_t lowest_fail = UINT64_MAX, next = 0;
    /* Items in increasing order from an atomic counter (as schedule(dynamic, 1)); a thread leaves
     * at the first item past the lowest failure (a stop is one), not skipping item by item. */
#pragma omp parallel num_threads(threads) default(none)                                            \
    shared(n, job, ctx, ws, errs, failed_at, lowest_fail, next)
    for (;;) {
        const uint64_t k = atomic_fetch_add(&next, 1);
        if (k >= n || k > atomic_load_explicit(&lowest_fail, memory_order_relaxed)) {
            break; /* a lower item failed: the call fails with that error */
        }
        const int tid = omp_get_thread_num();
        struct sm_err e;
        sm_err_clear(&e);
        if (job(ctx, k, ws[tid], &e) != SM_OK) {
            if (k < failed_at[tid]) {
                failed_at[tid] = k;
                errs[tid] = e;
            }
            uint_fast64_t cur = atomic_load(&lowest_fail);
            while (k < cur && !atomic_compare_exchange_weak(&lowest_fail, &cur, k)) {
            }
        }
    }
    unsigned worst = 0;
    for (unsigned i = 1; i < threads; i++) {
        if (failed_at[i] < failed_at[worst]) {
            worst = i;
        }
    }
    if (failed_at[worst] == UINT64_MAX) {
        return SM_OK;
    }
    if (err->status == SM_OK) {
        *err = errs[worst];
    }
    return errs[worst].status;
}

uint64_t sm_array_lap(atomic_uint_fast64_t *counter, uint64_t t0)
{
    const uint64_t now = sm_clock_ns();
    atomic_fetch_add_explicit(counter, now - t0, memory_order_relaxed);
    return now;
}

void sm_region_put(const struct sm_region_dst *dst, const void *block, const uint64_t *block_origin,
                   const uint64_t *block_shape, const uint64_t *lo, const uint64_t *hi,
                   const uint8_t *fill)
{
    const unsigned nd = dst->view.ndim;
    uint64_t ext[SM_MAX_DIMS], src_off[SM_MAX_DIMS], dst_off[SM_MAX_DIMS];
    for (unsigned d = 0; d < nd; d++) {
        ext[d] = hi[d] - lo[d];
        src_off[d] = lo[d] - block_origin[d];
        dst_off[d] = lo[d] - dst->origin[d];
    }
    if (block == NULL) {
        sm_box_fill(&dst->view, dst->ptr, dst_off, ext, fill);
        return;
    }
    struct sm_box_view src = {nd, dst->view.elem, block_shape};
    sm_box_copy(&src, block, src_off, &dst->view, dst->ptr, dst_off, ext);
}
