/* The tiled scan (SPEC §1 "OpenMP threads over its tiles: fetch -> decode -> per-thread
 * histogram", §5) on the engine's one work driver (work.h): each thread owns a scratch, a chunk
 * memo, a tile buffer, a histogram and checksums; results merge in thread-index order. Counts and
 * wrapping sums are order-independent, so the result is identical for any thread count. On
 * failure the error of the lowest failing tile is reported. */
#include "shardmill/tile.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/box.h"
#include "shardmill/clock.h"
#include "shardmill/work.h"

#include "tile_int.h"

struct worker {
    struct sm_scratch *scratch;
    struct sm_chunk_memo *memo;
    uint8_t *buf;
    struct sm_hist hist;
    struct sm_checksums sums;
    uint64_t voxels, tiles, process_ns;
};

struct scan {
    struct sm_array *a;
    const struct sm_tiling *t;
    const struct sm_scan_params *p;
    uint64_t first;
    enum sm_dtype dt;
    size_t elem;
    uint64_t astride[SM_MAX_DIMS];
    struct worker *ws;
};

static void worker_destroy(struct worker *w)
{
    sm_array_scratch_free(w->scratch);
    sm_chunk_memo_free(w->memo);
    sm_free(w->buf);
    sm_hist_destroy(&w->hist);
}

static sm_status worker_init(struct worker *w, const struct sm_scan_params *p,
                             const struct sm_array_meta *m, size_t tile_bytes, struct sm_err *err)
{
    memset(w, 0, sizeof(*w));
    SM_TRY(sm_hist_init(&w->hist, m->dtype, p->bins, p->lo, p->hi, err));
    if (p->reader == NULL) { /* a reader decodes with its own state */
        SM_TRY(sm_array_scratch_new(&w->scratch, err));
        SM_TRY(sm_chunk_memo_new(m, p->memo_bytes, &w->memo, err));
    }
    w->buf = sm_malloc(tile_bytes == 0 ? 1 : tile_bytes);
    if (w->buf == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a %zu-byte tile buffer", tile_bytes);
    }
    return SM_OK;
}

int sm_tile_default_threads(void)
{
    return sm_work_default_threads();
}

void sm_scan_result_destroy(struct sm_scan_result *r)
{
    sm_hist_destroy(&r->hist);
}

/* What a tile adds in a scan: the kept copy, the histogram and the checksums. */
static void count_tile(const struct scan *sc, struct worker *w, const uint64_t *off,
                       const uint64_t *shape, size_t n)
{
    const struct sm_scan_params *p = sc->p;
    const unsigned nd = sc->t->ndim;
    if (p->keep != NULL) {
        uint64_t rel[SM_MAX_DIMS];
        for (unsigned d = 0; d < nd; d++) {
            rel[d] = off[d] - p->keep_offset[d];
        }
        const struct sm_box_view tv = {nd, sc->elem, shape};
        const struct sm_box_view rv = {nd, sc->elem, p->keep_shape};
        const uint64_t zero[SM_MAX_DIMS] = {0};
        sm_box_copy(&tv, w->buf, zero, &rv, p->keep, rel, shape);
    }
    sm_hist_add(&w->hist, w->buf, n);
    sm_checksums_add_box(&w->sums, sc->dt, w->buf, nd, sc->astride, off, shape);
}

static sm_status scan_tile(void *user, int thread, uint64_t item, uint64_t *bytes,
                           struct sm_err *err)
{
    struct scan *sc = user;
    struct worker *w = &sc->ws[thread];
    const unsigned nd = sc->t->ndim;
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    sm_tiling_box(sc->t, sc->first + item, off, shape);
    size_t n = 1;
    for (unsigned d = 0; d < nd; d++) {
        n *= (size_t)shape[d];
    }
    const struct sm_box_reader *rd = sc->p->reader;
    if (rd != NULL) {
        SM_TRY(rd->read(rd->user, thread, off, shape, w->buf, err));
    } else {
        SM_TRY(
            sm_chunk_memo_read(w->memo, sc->a, off, shape, w->buf, n * sc->elem, w->scratch, err));
    }
    const uint64_t t0 = sm_clock_ns();
    if (sc->p->minmax_only) {
        sm_hist_add_minmax(&w->hist, w->buf, n);
    } else {
        count_tile(sc, w, off, shape, n);
    }
    w->process_ns += sm_clock_ns() - t0;
    w->voxels += n;
    w->tiles++;
    *bytes = n * sc->elem;
    return SM_OK;
}

/* The bytes of one tile buffer (the largest tile box: a tile clipped to the ROI), checked with
 * the buffers of all threads against the rank's budget: a tiny zarr.json can declare a chunk,
 * hence a default tile, of 2^60 voxels, which must be exit 5 naming the limit, not a failed
 * allocation. */
static sm_status tile_buffer_bytes(const struct sm_tiling *t, enum sm_dtype dt, int nthreads,
                                   uint64_t budget, size_t *bytes, struct sm_err *err)
{
    u128 one = sm_dtype_size(dt);
    char dims[SM_MAX_DIMS * 24 + 2] = "[";
    size_t len = 1;
    for (unsigned d = 0; d < t->ndim; d++) {
        const uint64_t side = t->tile[d] < t->roi_shape[d] ? t->tile[d] : t->roi_shape[d];
        one = mul_sat(one, side);
        len += (size_t)snprintf(dims + len, sizeof(dims) - len, "%s%" PRIu64, d ? ", " : "", side);
    }
    snprintf(dims + len, sizeof(dims) - len, "]");
    const u128 all = mul_sat(one, (u128)nthreads);
    if ((budget != 0 && all > budget) || one > SIZE_MAX) {
        const uint64_t shown = one > UINT64_MAX ? UINT64_MAX : (uint64_t)one;
        SM_FAIL_AT(err, SM_E_LIMIT, "tile",
                   "a tile buffer of %s %s takes %" PRIu64 " bytes and each of %d thread%s "
                   "holds one: more than limits.memory_bytes (%" PRIu64 "); set a smaller tile",
                   dims, sm_dtype_name(dt), shown, nthreads, nthreads > 1 ? "s" : "", budget);
    }
    *bytes = (size_t)one;
    return SM_OK;
}

sm_status sm_scan_tiles(struct sm_array *a, const struct sm_tiling *t, uint64_t first,
                        uint64_t count, const struct sm_scan_params *p, struct sm_scan_result *out,
                        struct sm_err *err)
{
    const struct sm_array_meta *m = p->reader != NULL ? p->reader->meta : sm_array_meta(a);
    struct scan sc = {a, t, p, first, m->dtype, sm_dtype_size(m->dtype), {0}, NULL};
    const unsigned nd = t->ndim;
    memset(out, 0, sizeof(*out));
    SM_TRY(sm_hist_init(&out->hist, sc.dt, p->bins, p->lo, p->hi, err));

    for (unsigned d = nd; d-- > 0;) {
        sc.astride[d] = d + 1 < nd ? sc.astride[d + 1] * m->shape[d + 1] : 1;
    }
    const int nthreads = p->threads > 0 ? p->threads : sm_tile_default_threads();
    size_t tile_bytes = 0;
    SM_TRY(tile_buffer_bytes(t, sc.dt, nthreads, p->memory_bytes, &tile_bytes, err));
    sc.ws = sm_calloc((size_t)nthreads, sizeof(*sc.ws));
    if (sc.ws == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate %d workers", nthreads);
    }
    sm_status st = SM_OK;
    for (int i = 0; i < nthreads && st == SM_OK; i++) {
        st = worker_init(&sc.ws[i], p, m, tile_bytes, err);
    }
    if (st == SM_OK) {
        const struct sm_work wk = {.count = count,
                                   .threads = nthreads,
                                   .item = scan_tile,
                                   .user = &sc,
                                   .progress = p->progress,
                                   .progress_user = p->progress_user,
                                   .stop = p->stop};
        st = sm_work_run(&wk, err);
    }
    for (int i = 0; i < nthreads; i++) {
        if (st == SM_OK) { /* fixed order */
            sm_hist_merge(&out->hist, &sc.ws[i].hist);
            out->sums.sum += sc.ws[i].sums.sum;
            out->sums.weighted += sc.ws[i].sums.weighted;
            out->voxels += sc.ws[i].voxels;
            out->tiles += sc.ws[i].tiles;
            out->process_ns += sc.ws[i].process_ns;
        }
        worker_destroy(&sc.ws[i]);
    }
    sm_free(sc.ws);
    sm_hist_finish(&out->hist);
    return st;
}
