/* The shard driver (SPEC §1 "each rank, OpenMP threads over its shards: normalize -> encode inner
 * chunks -> write shard atomically"): each thread owns a write scratch, a value buffer of one
 * shard and an encoded buffer; shards are handed out dynamically; on failure the error of the
 * lowest failing shard index is reported, so the message is the same for any thread count.
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html
 * Invariant: a shard's bytes depend only on its values, never on the thread that encoded it. */
#include "write_int.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"

struct worker {
    struct sm_write_scratch *ws;
    uint8_t *values;
    struct sm_buf enc;
    uint64_t written, kept, bytes, fill_ns, encode_ns, write_ns;
    uint64_t fail_index; /* UINT64_MAX: none */
    struct sm_err err;
};

int sm_write_default_threads(void)
{
    return omp_get_max_threads();
}

static void worker_destroy(struct worker *wk)
{
    sm_write_scratch_free(wk->ws);
    sm_free(wk->values);
    sm_buf_free(&wk->enc);
}

static sm_status worker_init(struct worker *wk, size_t values, struct sm_err *err)
{
    memset(wk, 0, sizeof(*wk));
    wk->fail_index = UINT64_MAX;
    SM_TRY(sm_write_scratch_new(&wk->ws, err));
    wk->values = sm_malloc(values == 0 ? 1 : values);
    if (wk->values == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a %zu-byte shard buffer", values);
    }
    return SM_OK;
}

/* One shard: resume check, fill, encode, put. */
static sm_status one_shard(const struct sm_writer *w, struct sm_output *o,
                           const struct sm_write_job *job, int thread, uint64_t shard,
                           struct worker *wk, struct sm_err *err)
{
    bool need;
    SM_TRY(sm_output_shard_needed(o, shard, &need, err));
    if (!need) {
        wk->kept++;
        return SM_OK;
    }
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    sm_writer_shard_box(w, shard, off, shape);
    const size_t len = sm_writer_shard_bytes(w, shard);
    uint64_t t0 = sm_clock_ns();
    SM_TRY(job->fill(job->user, thread, shard, off, shape, wk->values, len, err));
    uint64_t t1 = sm_clock_ns();
    wk->fill_ns += t1 - t0;
    SM_TRY(sm_writer_encode_shard(w, shard, sm_bytes_of(wk->values, len), &wk->enc, wk->ws, err));
    t0 = sm_clock_ns();
    wk->encode_ns += t0 - t1;
    SM_TRY(sm_output_put_shard(o, shard, sm_buf_bytes(&wk->enc), err));
    wk->write_ns += sm_clock_ns() - t0;
    wk->written++;
    wk->bytes += wk->enc.len;
    return SM_OK;
}

sm_status sm_write_shards(const struct sm_writer *w, struct sm_output *o,
                          const struct sm_write_job *job, struct sm_write_result *res,
                          struct sm_err *err)
{
    memset(res, 0, sizeof(*res));
    const uint64_t count = job->count;
    if (job->list == NULL && (job->first > w->nshards || count > w->nshards - job->first)) {
        SM_FAIL(err, SM_E_INTERNAL, "shards [%" PRIu64 ", +%" PRIu64 ") outside a grid of %" PRIu64,
                job->first, count, w->nshards);
    }
    for (uint64_t k = 0; job->list != NULL && k < count; k++) {
        if (job->list[k] >= w->nshards) {
            SM_FAIL(err, SM_E_INTERNAL, "shard %" PRIu64 " outside a grid of %" PRIu64,
                    job->list[k], w->nshards);
        }
    }
    const int nthreads = job->threads > 0 ? job->threads : sm_write_default_threads();
    struct worker *wks = sm_calloc((size_t)nthreads, sizeof(*wks));
    if (wks == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate %d workers", nthreads);
    }
    sm_status st = SM_OK;
    for (int i = 0; i < nthreads && st == SM_OK; i++) {
        st = worker_init(&wks[i], w->obj_bytes, err);
    }
    atomic_uint_fast64_t lowest_fail = UINT64_MAX;
    atomic_uint_fast64_t done = 0, done_bytes = 0;
    atomic_bool stopped = false;
    if (st == SM_OK) {
#pragma omp parallel num_threads(nthreads) default(none)                                           \
    shared(w, o, job, wks, lowest_fail, count, done, done_bytes, stopped)
        {
            const int t = omp_get_thread_num();
            struct worker *wk = &wks[t];
#pragma omp for schedule(dynamic, 1)
            for (uint64_t k = 0; k < count; k++) {
                const uint64_t shard = job->list != NULL ? job->list[k] : job->first + k;
                if (shard > atomic_load_explicit(&lowest_fail, memory_order_relaxed)) {
                    continue; /* a lower shard failed: the job fails with that error */
                }
                struct sm_err e;
                sm_err_clear(&e);
                if (atomic_load_explicit(&stopped, memory_order_relaxed) ||
                    sm_stop_check(job->stop, &e) != SM_OK) {
                    atomic_store_explicit(&stopped, true, memory_order_relaxed);
                    continue; /* a signal: skip the rest (SPEC §1 "at its next shard") */
                }
                const uint64_t before = wk->bytes;
                const sm_status sst = one_shard(w, o, job, t, shard, wk, &e);
                const uint64_t d = atomic_fetch_add(&done, 1) + 1;
                const uint64_t add = wk->bytes - before;
                const uint64_t b = atomic_fetch_add(&done_bytes, add) + add;
                if (t == 0 && job->progress != NULL) {
                    job->progress(job->progress_user, d, b);
                }
                if (sst != SM_OK) {
                    if (shard < wk->fail_index) {
                        wk->fail_index = shard;
                        wk->err = e;
                    }
                    uint_fast64_t cur = atomic_load(&lowest_fail);
                    while (shard < cur &&
                           !atomic_compare_exchange_weak(&lowest_fail, &cur, shard)) {
                    }
                }
            }
        }
        if (job->progress != NULL) { /* the final count: thread 0 may not have seen it */
            job->progress(job->progress_user, atomic_load(&done), atomic_load(&done_bytes));
        }
        uint64_t best = UINT64_MAX;
        for (int i = 0; i < nthreads; i++) {
            if (wks[i].fail_index < best) {
                best = wks[i].fail_index;
                *err = wks[i].err;
                st = err->status;
            }
        }
        if (st == SM_OK && atomic_load(&stopped)) { /* the flag stays set: record the stop */
            st = sm_stop_check(job->stop, err);
        }
    }
    for (int i = 0; i < nthreads; i++) {
        res->written += wks[i].written;
        res->kept += wks[i].kept;
        res->bytes += wks[i].bytes;
        res->fill_ns += wks[i].fill_ns;
        res->encode_ns += wks[i].encode_ns;
        res->write_ns += wks[i].write_ns;
        worker_destroy(&wks[i]);
    }
    sm_free(wks);
    return st;
}
