/* The tiled scan driver (SPEC §1 "OpenMP threads over its tiles: fetch -> decode -> per-thread
 * histogram", §5): each thread owns a scratch, a tile buffer, a histogram and checksums; tiles are
 * handed out dynamically; results merge in thread-index order. Counts and wrapping sums are
 * order-independent, so the result is identical for any thread count. On failure, threads skip
 * tiles past the lowest failing index and that tile's error is reported. */
#include "shardmill/tile.h"

#include <stdatomic.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/box.h"
#include "shardmill/clock.h"
#include "shardmill/sm_omp.h"

struct worker {
    struct sm_scratch *scratch;
    uint8_t *buf;
    struct sm_hist hist;
    struct sm_checksums sums;
    uint64_t voxels, tiles, process_ns;
    uint64_t fail_index; /* UINT64_MAX: none */
    struct sm_err err;
};

static void worker_destroy(struct worker *w)
{
    sm_array_scratch_free(w->scratch);
    sm_free(w->buf);
    sm_hist_destroy(&w->hist);
}

static sm_status worker_init(struct worker *w, const struct sm_scan_params *p, enum sm_dtype dt,
                             size_t tile_bytes, struct sm_err *err)
{
    memset(w, 0, sizeof(*w));
    w->fail_index = UINT64_MAX;
    SM_TRY(sm_hist_init(&w->hist, dt, p->bins, p->lo, p->hi, err));
    SM_TRY(sm_array_scratch_new(&w->scratch, err));
    w->buf = sm_malloc(tile_bytes == 0 ? 1 : tile_bytes);
    if (w->buf == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a %zu-byte tile buffer", tile_bytes);
    }
    return SM_OK;
}

int sm_tile_default_threads(void)
{
    return omp_get_max_threads();
}

void sm_scan_result_destroy(struct sm_scan_result *r)
{
    sm_hist_destroy(&r->hist);
}

sm_status sm_scan_tiles(struct sm_array *a, const struct sm_tiling *t, uint64_t first,
                        uint64_t count, const struct sm_scan_params *p, struct sm_scan_result *out,
                        struct sm_err *err)
{
    const struct sm_array_meta *m = sm_array_meta(a);
    const enum sm_dtype dt = m->dtype;
    const size_t elem = sm_dtype_size(dt);
    const unsigned nd = t->ndim;
    memset(out, 0, sizeof(*out));
    SM_TRY(sm_hist_init(&out->hist, dt, p->bins, p->lo, p->hi, err));

    uint64_t astride[SM_MAX_DIMS];
    size_t tile_bytes = elem;
    for (unsigned d = nd; d-- > 0;) {
        astride[d] = d + 1 < nd ? astride[d + 1] * m->shape[d + 1] : 1;
        tile_bytes *= (size_t)t->tile[d];
    }
    const int nthreads = p->threads > 0 ? p->threads : sm_tile_default_threads();
    struct worker *ws = sm_calloc((size_t)nthreads, sizeof(*ws));
    if (ws == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate %d workers", nthreads);
    }
    sm_status st = SM_OK;
    for (int i = 0; i < nthreads && st == SM_OK; i++) {
        st = worker_init(&ws[i], p, dt, tile_bytes, err);
    }
    atomic_uint_fast64_t lowest_fail = UINT64_MAX;
    atomic_uint_fast64_t done = 0, done_bytes = 0;
    atomic_bool stopped = false;
    if (st == SM_OK) {
#pragma omp parallel num_threads(nthreads) default(none) shared(                                   \
        a, t, ws, lowest_fail, first, count, dt, elem, nd, astride, p, done, done_bytes, stopped)
        {
            const int tid = omp_get_thread_num();
            struct worker *w = &ws[tid];
#pragma omp for schedule(dynamic, 1)
            for (uint64_t k = first; k < first + count; k++) {
                if (k > atomic_load_explicit(&lowest_fail, memory_order_relaxed)) {
                    continue; /* a lower tile failed: the job fails with that error */
                }
                struct sm_err e;
                sm_err_clear(&e);
                if (atomic_load_explicit(&stopped, memory_order_relaxed) ||
                    sm_stop_check(p->stop, &e) != SM_OK) {
                    atomic_store_explicit(&stopped, true, memory_order_relaxed);
                    continue; /* a signal: skip the rest (SPEC §1 "at its next tile") */
                }
                uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
                sm_tiling_box(t, k, off, shape);
                size_t n = 1;
                for (unsigned d = 0; d < nd; d++) {
                    n *= (size_t)shape[d];
                }
                if (sm_array_read_region(a, off, shape, w->buf, n * elem, w->scratch, &e) !=
                    SM_OK) {
                    if (k < w->fail_index) {
                        w->fail_index = k;
                        w->err = e;
                    }
                    uint_fast64_t cur = atomic_load(&lowest_fail);
                    while (k < cur && !atomic_compare_exchange_weak(&lowest_fail, &cur, k)) {
                    }
                    continue;
                }
                const uint64_t t0 = sm_clock_ns();
                if (p->keep != NULL) {
                    uint64_t rel[SM_MAX_DIMS];
                    for (unsigned d = 0; d < nd; d++) {
                        rel[d] = off[d] - p->keep_offset[d];
                    }
                    const struct sm_box_view tv = {nd, elem, shape};
                    const struct sm_box_view rv = {nd, elem, p->keep_shape};
                    const uint64_t zero[SM_MAX_DIMS] = {0};
                    sm_box_copy(&tv, w->buf, zero, &rv, p->keep, rel, shape);
                }
                sm_hist_add(&w->hist, w->buf, n);
                sm_checksums_add_box(&w->sums, dt, w->buf, nd, astride, off, shape);
                w->process_ns += sm_clock_ns() - t0;
                w->voxels += n;
                w->tiles++;
                const uint64_t d = atomic_fetch_add(&done, 1) + 1;
                const uint64_t b = atomic_fetch_add(&done_bytes, n * elem) + n * elem;
                if (tid == 0 && p->progress != NULL) {
                    p->progress(p->progress_user, d, b);
                }
            }
        }
        if (p->progress != NULL) { /* the final count: thread 0 may not have seen it */
            p->progress(p->progress_user, atomic_load(&done), atomic_load(&done_bytes));
        }
        uint64_t best = UINT64_MAX;
        for (int i = 0; i < nthreads; i++) {
            if (ws[i].fail_index < best) {
                best = ws[i].fail_index;
                *err = ws[i].err;
                st = err->status;
            }
        }
        if (st == SM_OK && atomic_load(&stopped)) { /* the flag stays set: record the stop */
            st = sm_stop_check(p->stop, err);
        }
    }
    for (int i = 0; i < nthreads; i++) {
        if (st == SM_OK) { /* fixed order */
            sm_hist_merge(&out->hist, &ws[i].hist);
            out->sums.sum += ws[i].sums.sum;
            out->sums.weighted += ws[i].sums.weighted;
            out->voxels += ws[i].voxels;
            out->tiles += ws[i].tiles;
            out->process_ns += ws[i].process_ns;
        }
        worker_destroy(&ws[i]);
    }
    sm_free(ws);
    sm_hist_finish(&out->hist);
    return st;
}
