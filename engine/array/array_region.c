/* What a region read and a shard's ranged read share (array_read.c, shard_read.c): the kept
 * buffers of a scratch, the parallel loop over a read's items (on core's work driver, work.h),
 * the stage clocks and the placing of a decoded block in the region. Split out of array_read.c so
 * that the two readers depend on this file, not on each other. */
#include "array_int.h"

#include "shardmill/clock.h"
#include "shardmill/work.h"

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

/* sm_read_parallel's items on the work driver: item k on the worker scratch of its thread. */
struct read_run {
    sm_read_job job;
    void *ctx;
    struct sm_scratch *const *ws;
};

static sm_status read_item(void *user, int thread, uint64_t k, uint64_t *bytes, struct sm_err *err)
{
    (void)bytes;
    const struct read_run *r = user;
    return r->job(r->ctx, k, r->ws[thread], err);
}

sm_status sm_read_parallel(unsigned threads, uint64_t n, sm_read_job job, void *ctx,
                           struct sm_scratch *scratch, struct sm_err *err)
{
    struct sm_scratch *ws[SM_READ_MAX_THREADS];
    if (threads > SM_READ_MAX_THREADS) {
        threads = SM_READ_MAX_THREADS;
    }
    for (unsigned i = 0; i < threads; i++) {
        SM_TRY(sm_scratch_worker(scratch, i, &ws[i], err));
    }
    struct read_run r = {job, ctx, ws};
    const struct sm_work wk = {.count = n, .threads = (int)threads, .item = read_item, .user = &r};
    struct sm_err e;
    sm_err_clear(&e);
    const sm_status st = sm_work_run(&wk, &e);
    if (st != SM_OK && err->status == SM_OK) { /* the first error in err wins */
        *err = e;
    }
    return st;
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
