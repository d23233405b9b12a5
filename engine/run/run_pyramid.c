/* The levels >= 1 of an OME-Zarr output (SPEC §2.6, §5.9). Level k+1 halves some axes of level k
 * (run_ome.c says which; size ceil(n/2)); each of its values is made from the block of level k it
 * covers (2 voxels on a halved axis, 1 on the others, fewer at the edge): `mean` sums their
 * float32 values in float64 in C order of the block, divides by their count and rounds once to
 * the output type (round-half-to-even for integers); `nearest` takes the block's first value in
 * C order. Two ways, the same values:
 * - aligned levels (level 0's shard grid): sm_run_levels_derive makes a shard from the same
 *   shard of the level above while it is in memory, for the write driver (sm_write_job.levels);
 * - the others (sm_run_pyramid, a phase after level 0 and the aligned levels are flushed): the
 *   first of them from the spill file when the write phase made it (run_spill.c), each other
 *   shard from the level above read back from the output through array/, slab by slab, so no
 *   rank holds more than one slab of the parent per thread.
 * Invariant: a level-k+1 shard depends only on the level-k values it covers, so the bytes are
 * the same for any ranks x threads. See docs/internals/pyramid.md. */
#include "run_int.h"

#include <stdio.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/par.h"
#include "shardmill/stats.h"
#include "shardmill/work.h"

/* ---- the pyramid ---- */

struct pyr_thread {
    struct sm_scratch *scratch;
    struct sm_buf slab; /* parent values of one slab, the level's dtype */
    uint64_t read_ns, mean_ns;
};

struct pyramid {
    struct sm_array *parent;    /* level k-1, read back */
    struct sm_level_reduce red; /* the level's blocks and method (stats/) */
    size_t elem;
    unsigned nd;
    uint64_t pshape[3]; /* parent shape, padded to 3 axes (leading 1s) */
    uint64_t step;      /* output planes per slab */
    struct pyr_thread *ts;
};

/* ---- levels written with level 0 ---- */

void sm_run_levels_init(struct sm_run_levels *rl, const struct sm_writer *w,
                        enum sm_run_ome_method method, int threads)
{
    memset(rl, 0, sizeof(*rl));
    const struct sm_array_meta *m0 = sm_writer_meta(sm_writer_level(w, 0));
    rl->dtype = m0->dtype;
    rl->nd = m0->ndim;
    rl->nearest = method == SM_RUN_OME_NEAREST;
    rl->threads = threads;
    const unsigned pad = 3 - rl->nd;
    for (unsigned k = 1; k < sm_writer_levels(w) && k < SM_MAX_LEVELS; k++) {
        const struct sm_array_meta *pm = sm_writer_meta(sm_writer_level(w, k - 1));
        const struct sm_array_meta *lm = sm_writer_meta(sm_writer_level(w, k));
        for (unsigned d = 0; d < 3; d++) {
            rl->block[k][d] = d >= pad && lm->shape[d - pad] < pm->shape[d - pad] ? 2 : 1;
        }
    }
}

/* One shard's derive cut into runs of output planes (axis 0 after padding), one per item. */
struct derive_cut {
    const struct pyramid *py;
    const uint8_t *parent;
    uint64_t ps[3], os[3], parts;
    uint8_t *child;
};

static void derive_planes(const struct derive_cut *dc, uint64_t z0, uint64_t nz)
{
    const struct pyramid *py = dc->py;
    const uint64_t first = py->red.block[0] * z0; /* the first parent plane of output plane z0 */
    const uint64_t ps[3] = {dc->ps[0] - first < py->red.block[0] * nz ? dc->ps[0] - first
                                                                      : py->red.block[0] * nz,
                            dc->ps[1], dc->ps[2]};
    const uint8_t *slab = dc->parent + first * dc->ps[1] * dc->ps[2] * py->elem;
    sm_level_reduce(&py->red, slab, ps, dc->os, z0, nz, dc->child);
}

static sm_status derive_part(void *user, int thread, uint64_t k, uint64_t *bytes,
                             struct sm_err *err)
{
    (void)thread;
    (void)bytes;
    (void)err;
    const struct derive_cut *dc = user;
    const uint64_t a = dc->os[0] * k / dc->parts, b = dc->os[0] * (k + 1) / dc->parts;
    if (b > a) {
        derive_planes(dc, a, b - a);
    }
    return SM_OK;
}

sm_status sm_run_levels_derive(const struct sm_run_levels *rl, unsigned level,
                               const struct sm_level_box *parent, const struct sm_level_box *child,
                               struct sm_err *err)
{
    struct pyramid py = {.red = {.dtype = rl->dtype, .nearest = rl->nearest},
                         .elem = sm_dtype_size(rl->dtype),
                         .nd = rl->nd};
    struct derive_cut dc = {.py = &py, .parent = parent->data, .child = child->data};
    const unsigned pad = 3 - rl->nd;
    for (unsigned d = 0; d < 3; d++) {
        py.red.block[d] = level < SM_MAX_LEVELS ? rl->block[level][d] : 1;
        dc.ps[d] = d < pad ? 1 : parent->shape[d - pad];
        dc.os[d] = d < pad ? 1 : child->shape[d - pad];
        const uint64_t po = d < pad ? 0 : parent->offset[d - pad];
        const uint64_t co = d < pad ? 0 : child->offset[d - pad];
        /* the parent box is the child's blocks, clipped to the parent level */
        if (po != co * py.red.block[d] || dc.ps[d] > dc.os[d] * py.red.block[d] ||
            dc.ps[d] <= (dc.os[d] - 1) * py.red.block[d]) {
            SM_FAIL(err, SM_E_INTERNAL, "level %u shard box does not match its parent's", level);
        }
    }
    if (parent->len != dc.ps[0] * dc.ps[1] * dc.ps[2] * py.elem ||
        child->len != dc.os[0] * dc.os[1] * dc.os[2] * py.elem) {
        SM_FAIL(err, SM_E_INTERNAL, "level %u shard buffers of %zu and %zu bytes", level,
                parent->len, child->len);
    }
    /* a shard derived outside a parallel region (the driver's one-shard mode) uses every thread */
    const uint64_t parts = (uint64_t)(rl->threads > 1 ? rl->threads : 1);
    if (parts > 1 && dc.os[0] > 1 && !sm_work_in_parallel()) {
        dc.parts = dc.os[0] < parts ? dc.os[0] : parts;
        const struct sm_work wk = {
            .count = dc.parts, .threads = rl->threads, .item = derive_part, .user = &dc};
        return sm_work_run(&wk, err);
    }
    derive_planes(&dc, 0, dc.os[0]);
    return SM_OK;
}

/* ---- levels read back ---- */

/* The write driver's fill callback: a level-k shard from the level-(k-1) values it covers. */
static sm_status fill_level(void *user, int thread, uint64_t shard, const uint64_t *offset,
                            const uint64_t *shape, void *data, size_t len, struct sm_err *err)
{
    (void)shard;
    struct pyramid *py = user;
    struct pyr_thread *ts = &py->ts[thread];
    const unsigned pad = 3 - py->nd;
    uint64_t oo[3] = {0, 0, 0}, os[3] = {1, 1, 1};
    for (unsigned d = 0; d < py->nd; d++) {
        oo[d + pad] = offset[d];
        os[d + pad] = shape[d];
    }
    if (len != os[0] * os[1] * os[2] * py->elem) {
        SM_FAIL(err, SM_E_INTERNAL, "level shard buffer of %zu bytes", len);
    }
    for (uint64_t z0 = 0; z0 < os[0]; z0 += py->step) {
        const uint64_t nz = os[0] - z0 < py->step ? os[0] - z0 : py->step;
        uint64_t po[3], ps[3];
        for (unsigned d = 0; d < 3; d++) {
            const uint64_t first = d == 0 ? oo[0] + z0 : oo[d];
            const uint64_t n = d == 0 ? nz : os[d];
            const uint64_t b = py->red.block[d];
            po[d] = b * first;
            const uint64_t end = b * (first + n) < py->pshape[d] ? b * (first + n) : py->pshape[d];
            ps[d] = end - po[d];
        }
        const size_t bytes = (size_t)(ps[0] * ps[1] * ps[2]) * py->elem;
        SM_TRY(sm_buf_reserve(&ts->slab, bytes, err));
        const uint64_t t0 = sm_clock_ns();
        SM_TRY(sm_array_read_region(py->parent, po + pad, ps + pad, ts->slab.ptr, bytes,
                                    ts->scratch, err));
        const uint64_t t1 = sm_clock_ns();
        sm_level_reduce(&py->red, ts->slab.ptr, ps, os, z0, nz, data);
        ts->read_ns += t1 - t0;
        ts->mean_ns += sm_clock_ns() - t1;
    }
    return SM_OK;
}

/* Opens level k of the group writer's output for reading, from the writer's own document (no
 * metadata request). */
static sm_status open_level(const struct sm_run_pyramid *p, struct sm_store *store, unsigned k,
                            struct sm_array **out, struct sm_err *err)
{
    struct sm_array_opts o = SM_ARRAY_OPTS_DEFAULTS;
    o.limits.max_chunk_bytes = p->max_chunk_bytes;
    o.limits.max_object_bytes = UINT64_MAX / 4; /* our own shards: any size we wrote */
    struct sm_meta_docs docs = SM_META_DOCS_INIT;
    const bool v2 = strcmp(sm_writer_doc_name(sm_writer_level(p->writer, k)), ".zarray") == 0;
    docs.kind = v2 ? SM_META_DOCS_V2_ARRAY : SM_META_DOCS_V3; /* OME-NGFF 0.4: Zarr v2 levels */
    char path[16];
    snprintf(path, sizeof(path), "%u", k);
    sm_status st = sm_buf_set(&docs.doc, sm_writer_zarr_json(sm_writer_level(p->writer, k)), err);
    if (st == SM_OK) {
        st = sm_array_open_docs(store, path, &o, &docs, out, err);
    }
    sm_meta_docs_free(&docs);
    return st;
}

/* Output planes per slab: the parent's inner chunk depth over the block depth (so a slab decodes
 * each inner chunk once), fewer while the slabs of every thread exceed half of the memory budget.
 */
static uint64_t slab_step(const struct sm_run_pyramid *p, const struct sm_writer *pw,
                          const struct sm_writer *lw, const uint64_t *block, int threads)
{
    const struct sm_array_meta *pm = sm_writer_meta(pw);
    const unsigned nd = pm->ndim, pad = 3 - nd;
    uint64_t obj[3] = {1, 1, 1}, off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    sm_writer_shard_box(lw, 0, off, shape); /* shard 0 is a full shard (or the whole level) */
    for (unsigned d = 0; d < nd; d++) {
        obj[d + pad] = shape[d];
    }
    uint64_t cz = 2;
    if (nd == 3) {
        cz = pm->inner_ndim > 0 ? pm->inner_chunk_shape[0] : pm->chunk_shape[0];
    }
    uint64_t step = cz / block[0] > 0 ? cz / block[0] : 1;
    step = step < obj[0] ? step : obj[0];
    const uint64_t per_plane =
        block[0] * block[1] * block[2] * obj[1] * obj[2] * sm_dtype_size(pm->dtype);
    while (step > 1 && per_plane * step * (uint64_t)threads > p->memory_bytes / 2) {
        step /= 2;
    }
    return step;
}

/* This rank's block of n shards. */
static void block_of(uint64_t n, uint64_t *first, uint64_t *count)
{
    const uint64_t r = (uint64_t)sm_par_rank(), R = (uint64_t)sm_par_size();
    *first = n * r / R;
    *count = n * (r + 1) / R - *first;
}

sm_status sm_run_pyramid(const struct sm_run_pyramid *p, struct sm_write_result *wr,
                         struct sm_err *err)
{
    const struct sm_writer *w = p->writer;
    const unsigned nlev = sm_writer_levels(w);
    const int threads = p->threads > 0 ? p->threads : sm_write_default_threads();
    struct pyramid py = {0};
    struct sm_store *store = NULL;
    struct sm_write_crew *crew = NULL; /* the writers' buffers, made once for all the levels */
    sm_status st = SM_OK;
    py.ts = sm_calloc((size_t)threads, sizeof(*py.ts));
    if (py.ts == NULL) {
        st = SM_ERR(err, SM_E_NOMEM, "cannot allocate %d threads", threads);
    }
    for (int i = 0; st == SM_OK && i < threads; i++) {
        st = sm_scratch_new(&py.ts[i].scratch, err);
    }
    if (st == SM_OK) {
        st = sm_store_file_open(sm_output_path(p->output), &store, err);
    }
    if (st == SM_OK) {
        st = sm_write_crew_new(&crew, err);
    }
    st = sm_par_agree(st, err);
    for (unsigned k = p->done > 1 ? p->done : 1; st == SM_OK && k < nlev; k++) {
        const struct sm_writer *lw = sm_writer_level(w, k), *pw = sm_writer_level(w, k - 1);
        const struct sm_array_meta *pm = sm_writer_meta(pw), *lm = sm_writer_meta(lw);
        py.red.dtype = pm->dtype;
        py.elem = sm_dtype_size(pm->dtype);
        py.nd = pm->ndim;
        py.red.nearest = p->method == SM_RUN_OME_NEAREST;
        for (unsigned d = 0; d < 3; d++) { /* an axis the level keeps has blocks of 1 */
            const unsigned a = d - (3 - py.nd);
            py.pshape[d] = d < 3 - py.nd ? 1 : pm->shape[a];
            py.red.block[d] = d >= 3 - py.nd && lm->shape[a] < pm->shape[a] ? 2 : 1;
        }
        py.step = slab_step(p, pw, lw, py.red.block, threads);
        struct sm_run_spill spill = {0};
        const bool spilled = k == p->spill;
        const uint64_t t0 = sm_clock_ns();
        if (spilled) { /* made in the write phase: nothing read back (run_spill.c) */
            st = sm_run_spill_init(&spill, w, k, &py.red, threads, err);
            if (st == SM_OK) {
                st = sm_spill_open(p->output, k, spill.block_bytes, false, &spill.file, err);
            }
        } else {
            st = open_level(p, store, k - 1, &py.parent, err);
        }
        uint64_t first, count;
        block_of(sm_writer_nshards(lw), &first, &count);
        sm_run_progress_begin(&p->progress, "pyramid", "shards", sm_writer_nshards(lw));
        struct sm_write_result r = {0};
        if (st == SM_OK) {
            const struct sm_write_job job = {.first = sm_writer_level_first(w, k) + first,
                                             .count = count,
                                             .threads = threads,
                                             .fill = spilled ? sm_run_spill_fill : fill_level,
                                             .user = spilled ? (void *)&spill : (void *)&py,
                                             .progress = p->progress.update,
                                             .progress_user = p->progress.user,
                                             .stop = p->stop,
                                             .crew = crew};
            st = sm_write_shards(w, p->output, &job, &r, err);
        }
        sm_run_progress_end(&p->progress, st == SM_OK);
        wr->written += r.written;
        wr->kept += r.kept;
        wr->bytes += r.bytes;
        wr->fill_ns += r.fill_ns;
        wr->encode_ns += r.encode_ns;
        wr->write_ns += r.write_ns;
        sm_array_close(py.parent);
        py.parent = NULL;
        sm_run_spill_free(&spill);
        /* every rank's level k is in place before any rank reads it for level k+1 */
        st = sm_par_agree(sm_run_stop_check(p->stop, st, err), err);
        if (spilled && sm_par_rank() == 0) { /* every rank closed it; a resume spills again */
            struct sm_err ignored;
            sm_err_clear(&ignored);
            (void)sm_spill_remove(p->output, k, &ignored);
        }
        if (spilled && p->spill_ns != NULL) {
            *p->spill_ns = sm_clock_ns() - t0;
        }
        if (st == SM_OK) {
            st = sm_par_agree(sm_output_flush(p->output, err), err);
        } else { /* a stop or a failure keeps the finished shards for resume */
            struct sm_err ignored;
            sm_err_clear(&ignored);
            (void)sm_output_flush(p->output, &ignored);
        }
    }
    for (int i = 0; py.ts != NULL && i < threads; i++) {
        sm_scratch_free(py.ts[i].scratch);
        sm_buf_free(&py.ts[i].slab);
    }
    sm_free(py.ts);
    sm_write_crew_free(crew);
    sm_store_close(store);
    return st;
}
