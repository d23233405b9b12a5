/* The shard driver (SPEC §1 "each rank, OpenMP threads over its shards: normalize -> encode inner
 * chunks -> write shard atomically") on the engine's one work driver (work.h): each thread owns a
 * write scratch, a value buffer of one shard and an encoded buffer, kept from call to call when the
 * job brings a crew (large blocks are fresh kernel-zeroed mappings); on failure the error of the
 * lowest failing shard is reported, so the message is the same for any thread count.
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html
 * Invariant: a shard's bytes depend only on its values, never on the thread that encoded it. */
#include "write_int.h"

#include <inttypes.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/work.h"

struct worker {
    struct sm_write_scratch *ws;
    struct sm_buf *values; /* one shard's values per level written (job.levels, at least 1) */
    unsigned nvalues;
    struct sm_buf enc;
    uint64_t written, kept, bytes, fill_ns, encode_ns, write_ns;
};

/* The workers of one call, or kept by the caller from call to call (write.h). */
struct sm_write_crew {
    struct worker *wks;
    int n;
};

struct drive {
    const struct sm_writer *w;
    struct sm_output *o;
    const struct sm_write_job *job;
    unsigned levels; /* written per job shard: level 0 and the derived ones */
    struct worker *wks;
};

int sm_write_default_threads(void)
{
    return sm_work_default_threads();
}

static void worker_destroy(struct worker *wk)
{
    sm_write_scratch_free(wk->ws);
    for (unsigned k = 0; wk->values != NULL && k < wk->nvalues; k++) {
        sm_buf_free(&wk->values[k]);
    }
    sm_free(wk->values);
    sm_buf_free(&wk->enc);
    memset(wk, 0, sizeof(*wk));
}

sm_status sm_write_crew_new(struct sm_write_crew **out, struct sm_err *err)
{
    *out = sm_calloc(1, sizeof(**out));
    if (*out == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a write crew");
    }
    return SM_OK;
}

static void crew_destroy(struct sm_write_crew *c)
{
    for (int i = 0; c->wks != NULL && i < c->n; i++) {
        worker_destroy(&c->wks[i]);
    }
    sm_free(c->wks);
    c->wks = NULL;
    c->n = 0;
}

void sm_write_crew_free(struct sm_write_crew *crew)
{
    if (crew != NULL) {
        crew_destroy(crew);
        sm_free(crew);
    }
}

/* Level k's shard buffer: the largest shard of any level for level 0 (a group's read-back
 * levels run their shards through it too), level k's own for a derived level. */
static size_t level_bytes(const struct sm_writer *w, unsigned k)
{
    return k == 0 ? w->obj_bytes : w->lv[k]->obj_bytes;
}

/* Room for n bytes whose old contents do not matter: a buffer too small is freed before the new
 * one is taken (no copy, and the two never held at once). */
static sm_status reserve_empty(struct sm_buf *b, size_t n, struct sm_err *err)
{
    if (b->cap < n) {
        sm_buf_free(b);
    }
    return sm_buf_reserve(b, n, err);
}

/* A worker ready for a call of `levels` levels on w: what it holds from an earlier call (its
 * scratch's codec contexts, buffers big enough) is kept, the rest made. */
static sm_status worker_ready(struct worker *wk, const struct sm_writer *w, unsigned levels,
                              struct sm_err *err)
{
    if (wk->ws == NULL) {
        SM_TRY(sm_write_scratch_new(&wk->ws, err));
    }
    if (wk->nvalues < levels) {
        struct sm_buf *v = sm_realloc(wk->values, levels * sizeof(*v));
        if (v == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate %u shard buffers", levels);
        }
        memset(v + wk->nvalues, 0, (levels - wk->nvalues) * sizeof(*v));
        wk->values = v;
        wk->nvalues = levels;
    }
    for (unsigned k = 0; k < levels; k++) {
        SM_TRY(reserve_empty(&wk->values[k], level_bytes(w, k), err));
    }
    return SM_OK;
}

/* n workers ready (worker_ready), the crew grown to them. */
static sm_status crew_ready(struct sm_write_crew *c, int n, const struct sm_writer *w,
                            unsigned levels, unsigned codec_threads, struct sm_err *err)
{
    if (c->n < n) {
        struct worker *wks = sm_realloc(c->wks, (size_t)n * sizeof(*wks));
        if (wks == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate %d workers", n);
        }
        memset(wks + c->n, 0, (size_t)(n - c->n) * sizeof(*wks));
        c->wks = wks;
        c->n = n;
    }
    for (int i = 0; i < n; i++) { /* this call's counts, whatever fails below */
        struct worker *wk = &c->wks[i];
        wk->written = wk->kept = wk->bytes = wk->fill_ns = wk->encode_ns = wk->write_ns = 0;
    }
    for (int i = 0; i < n; i++) {
        SM_TRY(worker_ready(&c->wks[i], w, levels, err));
        sm_write_scratch_set_threads(c->wks[i].ws, codec_threads);
    }
    return SM_OK;
}

/* A filled (or derived) shard: kept (resume: the file matches its record and the values their
 * digest) or encoded and put; *bytes grows by what was put. */
static sm_status keep_or_put(const struct drive *dr, struct worker *wk, uint64_t shard,
                             const uint8_t *values, size_t len, uint64_t *bytes, struct sm_err *err)
{
    bool need;
    uint64_t was;
    SM_TRY(sm_output_shard_needed(dr->o, shard, &need, &was, err));
    const uint64_t digest = sm_write_values_digest(values, len);
    if (!need) {
        const bool same = was != 0 && was == digest; /* 0: a record without a digest */
        sm_output_shard_kept(dr->o, shard, same);
        if (same) {
            wk->kept++;
            return SM_OK;
        }
    }
    uint64_t t0 = sm_clock_ns();
    SM_TRY(sm_writer_encode_shard(dr->w, shard, sm_bytes_of(values, len), &wk->enc, wk->ws, err));
    const uint64_t t1 = sm_clock_ns();
    wk->encode_ns += t1 - t0;
    SM_TRY(sm_output_put_shard(dr->o, shard, sm_buf_bytes(&wk->enc), digest, err));
    wk->write_ns += sm_clock_ns() - t1;
    wk->written++;
    wk->bytes += wk->enc.len;
    *bytes += wk->enc.len;
    return SM_OK;
}

/* One job shard: filled, kept or put; then each derived level's shard of it from the level
 * above, kept or put. A kept shard is filled too: its values are what binds the file to this
 * run's input, and the caller's statistics and checksums cover the whole output. */
static sm_status one_shard(void *user, int thread, uint64_t item, uint64_t *bytes,
                           struct sm_err *err)
{
    const struct drive *dr = user;
    const struct sm_writer *w = dr->w;
    const struct sm_write_job *job = dr->job;
    struct worker *wk = &dr->wks[thread];
    const uint64_t shard = job->list != NULL ? job->list[item] : job->first + item;
    uint64_t off[2][SM_MAX_DIMS], shape[2][SM_MAX_DIMS];
    sm_writer_shard_box(w, shard, off[0], shape[0]);
    struct sm_level_box up = {off[0], shape[0], wk->values[0].ptr, sm_writer_shard_bytes(w, shard)};
    uint64_t t0 = sm_clock_ns();
    SM_TRY(job->fill(job->user, thread, shard, up.offset, up.shape, up.data, up.len, err));
    wk->fill_ns += sm_clock_ns() - t0;
    *bytes = 0;
    SM_TRY(keep_or_put(dr, wk, shard, up.data, up.len, bytes, err));
    for (unsigned k = 1; k < dr->levels; k++) {
        const uint64_t s = sm_writer_level_first(w, k) + shard; /* level 0's shards come first */
        sm_writer_shard_box(w, s, off[k % 2], shape[k % 2]);
        struct sm_level_box down = {off[k % 2], shape[k % 2], wk->values[k].ptr,
                                    sm_writer_shard_bytes(w, s)};
        t0 = sm_clock_ns();
        SM_TRY(job->derive(job->user, thread, k, &up, &down, err));
        wk->fill_ns += sm_clock_ns() - t0;
        SM_TRY(keep_or_put(dr, wk, s, down.data, down.len, bytes, err));
        up = down;
    }
    if (job->spill != NULL) {
        t0 = sm_clock_ns();
        SM_TRY(job->spill(job->user, thread, shard, &up, err));
        wk->fill_ns += sm_clock_ns() - t0;
    }
    return SM_OK;
}

/* The derived levels of a job: checked against the writer (a caller's mistake, not the data's). */
static sm_status job_levels(const struct sm_writer *w, const struct sm_write_job *job,
                            unsigned *levels, struct sm_err *err)
{
    *levels = job->levels > 1 ? job->levels : 1;
    if (*levels == 1) {
        return SM_OK;
    }
    if (job->derive == NULL || *levels > sm_writer_aligned_levels(w)) {
        SM_FAIL(err, SM_E_INTERNAL, "%u levels written together, %u aligned", *levels,
                sm_writer_aligned_levels(w));
    }
    const uint64_t n0 = w->lv_base[1]; /* level 0's shards come first */
    if (job->list == NULL && (job->first > n0 || job->count > n0 - job->first)) {
        SM_FAIL(err, SM_E_INTERNAL, "shards [%" PRIu64 ", +%" PRIu64 ") are not all level 0's",
                job->first, job->count);
    }
    for (uint64_t k = 0; job->list != NULL && k < job->count; k++) {
        if (job->list[k] >= n0) {
            SM_FAIL(err, SM_E_INTERNAL, "shard %" PRIu64 " is not level 0's", job->list[k]);
        }
    }
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
    unsigned levels;
    SM_TRY(job_levels(w, job, &levels, err));
    const int threads = job->threads > 0 ? job->threads : sm_write_default_threads();
    /* Fewer shards than threads (a small volume in 32-64 MiB shards is one shard): one shard at a
     * time on this thread, outside any parallel region, so the input read of its fill and the
     * encode of its inner chunks use every thread instead. */
    const bool inner = threads > 1 && count < (uint64_t)threads;
    const int nthreads = inner ? 1 : threads;
    struct sm_write_crew own = {NULL, 0};
    struct sm_write_crew *crew = job->crew != NULL ? job->crew : &own;
    sm_status st = crew_ready(crew, nthreads, w, levels, inner ? (unsigned)threads : 0, err);
    if (st == SM_OK) {
        struct drive dr = {w, o, job, levels, crew->wks};
        const struct sm_work wk = {.count = count,
                                   .threads = nthreads,
                                   .item = one_shard,
                                   .user = &dr,
                                   .progress = job->progress,
                                   .progress_user = job->progress_user,
                                   .stop = job->stop,
                                   .on_caller = inner};
        st = sm_work_run(&wk, err);
    }
    for (int i = 0; i < nthreads && i < crew->n; i++) {
        res->written += crew->wks[i].written;
        res->kept += crew->wks[i].kept;
        res->bytes += crew->wks[i].bytes;
        res->fill_ns += crew->wks[i].fill_ns;
        res->encode_ns += crew->wks[i].encode_ns;
        res->write_ns += crew->wks[i].write_ns;
    }
    crew_destroy(&own);
    return st;
}
