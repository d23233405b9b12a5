/* Typed region reads (SPEC §2, §3): visit the stored objects the region touches in C order of the
 * chunk grid; decode each once and copy only its intersection with the region, by last-axis runs
 * (sm_box_copy). Sharded arrays read the index and only the touched inner chunks (shard_read.c).
 * Missing objects read as the fill value. Thread-safe across calls.
 *
 * Parallel reads (docs/internals/sharding-reads.md "Parallel region reads and the hot path"): a
 * call made outside any OpenMP parallel region hands the objects it touches to the threads of
 * core's work driver (sm_read_parallel on sm_work_run), or, when the region lies in fewer shards
 * than there are threads, the inner chunks of each merged byte run. Every object writes a disjoint
 * box of the output, so the bytes do not depend on the thread count or order; with a sink, the
 * thread that completes a band of chunk rows hands it on (sm_array_read_region_to). Each thread
 * decodes on its own worker scratch of the caller's scratch, whose buffers are kept: memory is per
 * thread (one encoded object or run, one decoded chunk), never per chunk. array/ has no `#pragma
 * omp` of its own: its reads, the scan's and the write's pools all run on core's work driver, and a
 * read made inside a pool (sm_work_in_parallel) stays serial. The parallel loop, the per-thread
 * buffers and the placing of a decoded block in the region are array_region.c's, shared with
 * shard_read.c. */
#include "array_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/work.h"

/* Threads a read may use: 1 inside a parallel region (active or not: a pool of one thread asked
 * for one thread) or with a store that is not thread-safe; else opts.read_threads (0: the work
 * driver's default). */
static unsigned read_threads(const struct sm_array *a)
{
    if (sm_work_in_parallel() || (a->store->ops->caps & SM_STORE_THREADSAFE) == 0) {
        return 1;
    }
    int t = a->opts.read_threads != 0 ? (int)a->opts.read_threads : sm_work_default_threads();
    if (t < 1) {
        t = 1;
    }
    return t > SM_READ_MAX_THREADS ? SM_READ_MAX_THREADS : (unsigned)t;
}

static sm_status check_region(const struct sm_array *a, const uint64_t *offset,
                              const uint64_t *shape, size_t out_len, struct sm_err *err)
{
    const struct sm_array_meta *m = a->meta;
    uint64_t n = a->elem;
    for (unsigned d = 0; d < m->ndim; d++) {
        if (offset[d] > m->shape[d] || shape[d] > m->shape[d] - offset[d]) {
            SM_FAIL(err, SM_E_USAGE,
                    "region axis %u [%" PRIu64 ", %" PRIu64
                    ") is outside the array extent %" PRIu64,
                    d, offset[d], offset[d] + shape[d], m->shape[d]);
        }
        if (__builtin_mul_overflow(n, shape[d], &n)) {
            SM_FAIL(err, SM_E_USAGE, "region size overflows");
        }
    }
    const uint64_t max = a->opts.limits.max_region_bytes;
    if (max != 0 && n > max) {
        SM_FAIL(err, SM_E_LIMIT,
                "region of %" PRIu64 " bytes exceeds limits.max_region_bytes (%" PRIu64 ")", n,
                max);
    }
    if (n != out_len) {
        SM_FAIL(err, SM_E_USAGE, "output buffer is %zu bytes, the region is %" PRIu64, out_len, n);
    }
    const uint64_t maxc = a->opts.limits.max_chunk_bytes;
    if (maxc != 0 && a->unit_len > maxc) { /* every chunk of the array: name the array */
        const size_t pn = strlen(a->prefix);
        SM_ERR(err, SM_E_LIMIT,
               "decoded chunk of %zu bytes exceeds limits.max_chunk_bytes (%" PRIu64 ")",
               a->unit_len, maxc);
        sm_err_where(err, "%s%s%.*s", a->store->url, pn > 0 ? "/" : "", (int)(pn > 0 ? pn - 1 : 0),
                     a->prefix);
        return err->status;
    }
    return SM_OK;
}

/* Reads one whole stored object, decodes it and copies [lo, hi) of it into dst. */
static sm_status read_chunk(struct sm_array *a, const char *key, const uint64_t *origin,
                            const uint64_t *lo, const uint64_t *hi, const struct sm_region_dst *dst,
                            struct sm_read_bufs *bufs, struct sm_scratch *scratch,
                            struct sm_err *err)
{
    const struct sm_array_meta *m = a->meta;
    bool found;
    struct sm_bytes enc;
    void *ref; /* an object-cache entry lent to us, or NULL (enc is then bufs->enc) */
    uint64_t t = sm_clock_ns();
    SM_TRY(sm_store_get_borrow(a->store, key, sm_range_all_expect(a->encoded_len), SM_IO_PAYLOAD,
                               bufs->enc, &enc, &ref, &found, err));
    t = sm_array_lap(&a->fetch_ns, t);
    if (!found) {
        atomic_fetch_add_explicit(&a->chunks_missing, 1, memory_order_relaxed);
        sm_region_put(dst, NULL, origin, m->chunk_shape, lo, hi, m->fill);
        return SM_OK;
    }
    atomic_fetch_add_explicit(&a->chunks_read, 1, memory_order_relaxed);
    const uint8_t *block;
    sm_status st = sm_codec_chain_decode_view(m->chain, enc, bufs->dec, &block, scratch, err);
    sm_array_lap(&a->decode_ns, t);
    if (st != SM_OK) {
        sm_store_release(a->store, ref);
        sm_err_where(err, "%s/%s", a->store->url, key);
        return st;
    }
    sm_region_put(dst, block, origin, m->chunk_shape, lo, hi, m->fill); /* block may be enc */
    sm_store_release(a->store, ref);
    return SM_OK;
}

/* One region read: the region, its chunk-grid box and where it goes. */
struct region_job {
    struct sm_array *a;
    const uint64_t *offset, *shape;
    const struct sm_region_dst *dst;
    uint64_t c0[SM_MAX_DIMS], n[SM_MAX_DIMS]; /* first chunk index and chunks per axis */
    unsigned inner_threads;                   /* threads for a shard's inner chunks */
    const struct sm_region_sink *sink;        /* or NULL */
    atomic_uint_fast64_t *left;               /* per band of axis 0: its objects not yet read */
    uint64_t per_band;                        /* objects in one band */
    size_t row_bytes;                         /* bytes of one index of axis 0 in the region */
};

/* Reads stored object k (C order in the region's chunk box) and places its part of the region. */
static sm_status region_item(void *ctx, uint64_t k, struct sm_scratch *scratch, struct sm_err *err)
{
    const struct region_job *j = ctx;
    struct sm_array *a = j->a;
    SM_TRY(sm_stop_check(a->stop, err));
    const struct sm_array_meta *m = a->meta;
    const unsigned nd = m->ndim;
    uint64_t ci[SM_MAX_DIMS], origin[SM_MAX_DIMS], lo[SM_MAX_DIMS], hi[SM_MAX_DIMS];
    for (unsigned d = nd; d-- > 0;) {
        ci[d] = j->c0[d] + k % j->n[d];
        k /= j->n[d];
    }
    for (unsigned d = 0; d < nd; d++) {
        origin[d] = ci[d] * m->chunk_shape[d];
        const uint64_t end = origin[d] + m->chunk_shape[d];
        const uint64_t rend = j->offset[d] + j->shape[d];
        lo[d] = origin[d] > j->offset[d] ? origin[d] : j->offset[d];
        hi[d] = end < rend ? end : rend;
    }
    char key[1024];
    const size_t plen = strlen(a->prefix);
    if (plen >= sizeof(key)) {
        SM_FAIL(err, SM_E_USAGE, "array path too long");
    }
    memcpy(key, a->prefix, plen);
    SM_TRY(sm_meta_chunk_key(m, ci, key + plen, sizeof(key) - plen, err));
    struct sm_read_bufs bufs;
    sm_read_bufs_of(scratch, j->inner_threads, &bufs);
    if (a->shard != NULL) {
        return sm_shard_read_box(a, key, 0, UINT64_MAX, a->shard, origin, lo, hi, j->dst, &bufs,
                                 scratch, err);
    }
    return read_chunk(a, key, origin, lo, hi, j->dst, &bufs, scratch, err);
}

/* Reads the region's `items` objects, in parallel when it pays (see sm_array_read_region). */
static sm_status read_items(struct sm_array *a, struct region_job *j, sm_read_job item,
                            uint64_t items, size_t out_len, struct sm_scratch *scratch,
                            struct sm_err *err)
{
    unsigned threads = read_threads(a);
    /* Left to the default (read_threads 0), a small read stays serial: waking threads costs more
     * than decoding a few chunks (and a loaded machine may not run them soon). The work is the
     * region or the decoded chunks it touches, whichever is larger. */
    uint64_t work = out_len, touched;
    if (__builtin_mul_overflow(items, (uint64_t)a->unit_len, &touched)) {
        touched = UINT64_MAX;
    }
    if (touched > work) {
        work = touched;
    }
    if (a->opts.read_threads == 0 && work < SM_READ_PARALLEL_MIN_BYTES) {
        threads = 1;
    }
    /* Objects are the parallel items when there are enough of them to keep the threads busy;
     * a region in fewer shards than that decodes each shard's inner chunks in parallel. */
    const bool per_object = a->shard == NULL ? items > 1 : items >= 2 * (uint64_t)threads;
    if (threads > 1 && per_object) {
        return sm_read_parallel(threads, items, item, j, scratch, err);
    }
    if (a->shard != NULL) {
        j->inner_threads = threads;
    }
    for (uint64_t k = 0; k < items; k++) {
        SM_TRY(item(j, k, scratch, err));
    }
    return SM_OK;
}

/* region_item, then the band of object k to the sink when k was its last object. */
static sm_status region_item_banded(void *ctx, uint64_t k, struct sm_scratch *scratch,
                                    struct sm_err *err)
{
    const struct region_job *j = ctx;
    SM_TRY(region_item(ctx, k, scratch, err));
    const uint64_t b = k / j->per_band;
    if (atomic_fetch_sub_explicit(&j->left[b], 1, memory_order_acq_rel) != 1) {
        return SM_OK; /* acq_rel: the last one sees every other object's bytes of the band */
    }
    const uint64_t cs = j->a->meta->chunk_shape[0], first = j->offset[0],
                   end = j->offset[0] + j->shape[0];
    const uint64_t lo = (j->c0[0] + b) * cs > first ? (j->c0[0] + b) * cs : first;
    const uint64_t hi = (j->c0[0] + b + 1) * cs < end ? (j->c0[0] + b + 1) * cs : end;
    return j->sink->band(j->sink->ctx, j->dst->ptr, (size_t)(lo - first) * j->row_bytes,
                         (size_t)(hi - lo) * j->row_bytes, err);
}

sm_status sm_array_read_region(struct sm_array *a, const uint64_t *offset, const uint64_t *shape,
                               void *out, size_t out_len, struct sm_scratch *scratch,
                               struct sm_err *err)
{
    return sm_array_read_region_to(a, offset, shape, out, out_len, NULL, scratch, err);
}

sm_status sm_array_read_region_to(struct sm_array *a, const uint64_t *offset, const uint64_t *shape,
                                  void *out, size_t out_len, const struct sm_region_sink *sink,
                                  struct sm_scratch *scratch, struct sm_err *err)
{
    const struct sm_array_meta *m = a->meta;
    const unsigned nd = m->ndim;
    SM_TRY(check_region(a, offset, shape, out_len, err));
    /* Sizes the input declares (codec headers inside chains such as [bytes, zstd, gzip]) are
     * bounded by the same limit as the chunks the metadata declares. */
    sm_scratch_set_max_decoded(scratch, a->opts.limits.max_chunk_bytes);
    if (out_len == 0) {
        return SM_OK;
    }
    const struct sm_region_dst dst = {{nd, a->elem, shape}, out, offset};
    struct region_job j = {a, offset, shape, &dst, {0}, {0}, 1, NULL, NULL, 1, 0};
    uint64_t items = 1;
    for (unsigned d = 0; d < nd; d++) {
        j.c0[d] = offset[d] / m->chunk_shape[d];
        j.n[d] = (offset[d] + shape[d] - 1) / m->chunk_shape[d] - j.c0[d] + 1;
        items *= j.n[d]; /* no more than the region's elements */
    }
    if (sink != NULL && nd == 0) {
        SM_TRY(region_item(&j, 0, scratch, err));
        return sink->band(sink->ctx, out, 0, out_len, err);
    }
    sm_read_job item = region_item;
    if (sink != NULL) {
        j.sink = sink;
        j.per_band = items / j.n[0];
        j.row_bytes = out_len / (size_t)shape[0];
        j.left = sm_calloc((size_t)j.n[0], sizeof(*j.left));
        if (j.left == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate the band counters of a region");
        }
        for (uint64_t b = 0; b < j.n[0]; b++) {
            atomic_init(&j.left[b], j.per_band);
        }
        item = region_item_banded;
    }
    const sm_status st = read_items(a, &j, item, items, out_len, scratch, err);
    sm_free(j.left);
    return st;
}

sm_status sm_array_scratch_new(struct sm_scratch **out, struct sm_err *err)
{
    return sm_scratch_new(out, err);
}

void sm_array_scratch_free(struct sm_scratch *s)
{
    sm_scratch_free(s);
}
