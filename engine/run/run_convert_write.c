/* The write side of a convert (SPEC §1, §2, §5, §6): every shard of this rank's run filled from
 * the input (a Zarr array through the threads' chunk memos, a source through its read_box, or the
 * input kept from the scan), normalized as SPEC §5 writes it, to float32 or rounded to uint8/uint16
 * (SPEC §2; none: cast to the output type), encoded and put; then the flush, and in one pass the
 * statistics counted on the way, reduced over ranks and restated into zarr.json before anything
 * reads the output. */
#include "run_convert_int.h"

#include <jansson.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/box.h"
#include "shardmill/clock.h"
#include "shardmill/par.h"
#include "shardmill/work.h"

static sm_status read_input(struct cv *cv, struct cv_thread *ts, int thread, const uint64_t *in_off,
                            const uint64_t *shape, uint8_t *in, size_t n, struct sm_err *err)
{
    if (cv->keep != NULL) {
        const uint64_t zero[SM_MAX_DIMS] = {0};
        uint64_t rel[SM_MAX_DIMS];
        for (unsigned d = 0; d < cv->m->ndim; d++) {
            rel[d] = in_off[d] - cv->su.params.keep_offset[d];
        }
        const struct sm_box_view kv = {cv->m->ndim, cv->in_elem, cv->su.params.keep_shape};
        const struct sm_box_view sv = {cv->m->ndim, cv->in_elem, shape};
        sm_box_copy(&kv, cv->keep, rel, &sv, in, zero, shape);
        return SM_OK;
    }
    if (cv->grouped && sm_run_window_covers(&cv->win, in_off, shape)) {
        sm_run_window_copy(&cv->win, in_off, shape, in);
        return SM_OK;
    }
    if (cv->src != NULL) {
        return sm_source_read_box(cv->src, thread, in_off, shape, in, err);
    }
    return sm_chunk_memo_read(ts->memo, cv->res->array, in_off, shape, in, n * cv->in_elem,
                              ts->scratch, err);
}

/* The input values of the box [offset, offset + shape) of the output, normalized (none: cast to
 * the output type) into data; in one pass also counted into the thread's statistics. */
static sm_status fill_box(struct cv *cv, int thread, const uint64_t *offset, const uint64_t *shape,
                          void *data, size_t len, struct sm_err *err)
{
    struct cv_thread *ts = &cv->ts[thread];
    const unsigned nd = cv->m->ndim;
    const enum sm_dtype in_dt = cv->m->dtype;
    size_t n = 1;
    uint64_t in_off[SM_MAX_DIMS];
    for (unsigned d = 0; d < nd; d++) {
        n *= (size_t)shape[d];
        in_off[d] = cv->su.off[d] + offset[d];
    }
    if (len != n * cv->out_elem) {
        SM_FAIL(err, SM_E_INTERNAL, "shard buffer of %zu bytes for %zu values", len, n);
    }
    /* the same type kept: read straight into the shard's buffer */
    const bool direct = cv->keep_values && cv->out_dt == in_dt;
    uint8_t *in = direct ? data : NULL;
    if (in == NULL) {
        SM_TRY(sm_buf_reserve(&ts->in, n * cv->in_elem, err));
        in = ts->in.ptr;
    }
    SM_TRY(read_input(cv, ts, thread, in_off, shape, in, n, err));
    uint64_t t0 = sm_clock_ns();
    if (cv->one_pass) {
        sm_hist_add(&ts->hist, in, n);
        sm_checksums_add_box(&ts->in_sums, in_dt, in, nd, cv->astride, in_off, shape);
        ts->voxels += n;
        const uint64_t t1 = sm_clock_ns();
        ts->scan_ns += t1 - t0;
        t0 = t1;
    }
    if (cv->keep_values) {
        if (!direct) {
            sm_cast_values(in_dt, in, n, cv->out_dt, data);
        }
    } else {
        sm_norm_lut_apply(&cv->lut, in, n, data); /* one pass; cv->res->norm, a table */
    }
    sm_checksums_add_box(&ts->sums, cv->out_dt, data, nd, cv->ostride, offset, shape);
    ts->norm_ns += sm_clock_ns() - t0;
    return SM_OK;
}

/* A shard filled by every thread (the write driver's one shard at a time, outside any parallel
 * region): its box cut into slabs of axis 0, one per work item, each filled by the thread that
 * takes it into its own statistics, which are merged like any thread's. The cuts fall on the
 * source's read unit along axis 0 (an HDF5 chunk's depth), so no unit is read twice. */
struct split_fill {
    struct cv *cv;
    const uint64_t *offset, *shape;
    uint8_t *data;
    uint64_t parts, unit; /* unit: the source's read unit on axis 0 */
    size_t plane;         /* output bytes of one index of axis 0 */
};

static sm_status fill_part(void *user, int thread, uint64_t k, uint64_t *bytes, struct sm_err *err)
{
    (void)bytes;
    const struct split_fill *sf = user;
    const unsigned nd = sf->cv->m->ndim;
    const uint64_t first = sf->cv->su.off[0] + sf->offset[0];
    const uint64_t a = sm_run_part_start(first, sf->shape[0], sf->parts, sf->unit, k);
    const uint64_t b = sm_run_part_start(first, sf->shape[0], sf->parts, sf->unit, k + 1);
    if (b <= a) {
        return SM_OK; /* a part that rounded away */
    }
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    for (unsigned d = 0; d < nd; d++) {
        off[d] = sf->offset[d];
        shape[d] = sf->shape[d];
    }
    off[0] += a;
    shape[0] = b - a;
    return fill_box(sf->cv, thread, off, shape, sf->data + a * sf->plane, (b - a) * sf->plane, err);
}

/* The write driver's fill callback: the shard's box (fill_box). The driver fills a shard resume
 * may keep too: the values' digest decides whether it is kept. A source's (or the kept input's)
 * box is split over the threads when the driver runs one shard at a time outside a parallel
 * region; a Zarr input's region read is parallel there by itself. */
static sm_status fill_shard(void *user, int thread, uint64_t shard, const uint64_t *offset,
                            const uint64_t *shape, void *data, size_t len, struct sm_err *err)
{
    (void)shard;
    struct cv *cv = user;
    const bool split = cv->nthreads > 1 && cv->m->ndim > 0 && shape[0] > 1 &&
                       (cv->src != NULL || cv->keep != NULL || cv->grouped) &&
                       !sm_work_in_parallel();
    if (!split) {
        return fill_box(cv, thread, offset, shape, data, len, err);
    }
    const uint64_t unit = cv->src != NULL && sm_source_info(cv->src)->slab[0] > 0
                              ? sm_source_info(cv->src)->slab[0]
                              : 1;
    const uint64_t parts =
        sm_run_part_count(cv->su.off[0] + offset[0], shape[0], unit, cv->nthreads);
    struct split_fill sf = {cv, offset, shape, data, parts, unit, len / (size_t)shape[0]};
    const struct sm_work wk = {.count = sf.parts,
                               .threads = cv->nthreads,
                               .item = fill_part,
                               .user = &sf,
                               .stop = cv->p->c.stop};
    return sm_work_run(&wk, err);
}

/* The write driver's derive callback: an OME-Zarr level's shard from the level above it. */
static sm_status derive_shard(void *user, int thread, unsigned level,
                              const struct sm_level_box *parent, const struct sm_level_box *child,
                              struct sm_err *err)
{
    (void)thread;
    const struct cv *cv = user;
    return sm_run_levels_derive(&cv->levels, level, parent, child, err);
}

static sm_status spill_shard(void *user, int thread, uint64_t shard,
                             const struct sm_level_box *last, struct sm_err *err)
{
    struct cv *cv = user;
    return sm_run_spill_put(&cv->spill, thread, shard, last, err);
}

/* Per-thread state: scratch and chunk memo (a Zarr input read again), one pass's statistics. */
static sm_status threads_new(struct cv *cv, struct sm_err *err)
{
    const struct sm_array_meta *m = cv->m;
    cv->ts = sm_calloc((size_t)cv->nthreads, sizeof(*cv->ts));
    if (cv->ts == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate %d threads", cv->nthreads);
    }
    /* the chunk memos share the budget's eighth (sm_run_setup), none when the input is kept */
    const bool memo = cv->keep == NULL && cv->src == NULL && !cv->grouped;
    const uint64_t each = memo ? run_memo_total(cv->p->c.memory_bytes) / cv->nthreads : 0;
    for (int i = 0; i < cv->nthreads; i++) {
        if (memo) {
            SM_TRY(sm_scratch_new(&cv->ts[i].scratch, err));
            SM_TRY(sm_chunk_memo_new(m, each, &cv->ts[i].memo, err));
        }
        if (cv->one_pass) {
            const struct sm_scan_params *sp = &cv->su.params;
            SM_TRY(sm_hist_init(&cv->ts[i].hist, m->dtype, sp->bins, sp->lo, sp->hi, err));
        }
    }
    return SM_OK;
}

void sm_cv_threads_free(struct cv *cv)
{
    for (int i = 0; cv->ts != NULL && i < cv->nthreads; i++) {
        sm_scratch_free(cv->ts[i].scratch);
        sm_chunk_memo_free(cv->ts[i].memo);
        sm_hist_destroy(&cv->ts[i].hist);
        sm_buf_free(&cv->ts[i].in);
    }
    sm_free(cv->ts);
    cv->ts = NULL;
}

uint64_t sm_cv_write_total(void *ctx)
{
    const struct cv *cv = ctx;
    return sm_writer_nshards(sm_writer_level(cv->w, 0));
}

struct write_group {
    const struct sm_write_job *all;
    struct sm_write_job job;
    struct sm_run_progress_base pb;
};

static sm_status write_group(struct cv *cv, void *user, uint64_t k, const uint64_t *off,
                             const uint64_t *shape, struct sm_err *err)
{
    (void)off;
    (void)shape;
    struct write_group *wg = user;
    wg->job.list = cv->order + cv->gstart[k];
    wg->job.count = cv->gstart[k + 1] - cv->gstart[k];
    struct sm_write_result r;
    const sm_status st = sm_write_shards(cv->w, cv->out, &wg->job, &r, err);
    cv->wr.written += r.written;
    cv->wr.kept += r.kept;
    cv->wr.bytes += r.bytes;
    cv->wr.fill_ns += r.fill_ns;
    cv->wr.encode_ns += r.encode_ns;
    cv->wr.write_ns += r.write_ns;
    sm_run_progress_next(&wg->pb);
    return st;
}

/* A grouped rank's write: each group's box read into the window (unless the scan kept the rank's
 * whole box there), then the group's shards cut from it (sm_cv_groups reads the next group ahead
 * when two windows fit) by one crew of writers; the write results and the progress add up over
 * the groups. */
static sm_status write_groups(struct cv *cv, const struct sm_write_job *all, struct sm_err *err)
{
    struct write_group wg = {all, *all, {all->progress, all->progress_user, 0, 0, 0, 0}};
    wg.job.progress = sm_run_progress_based;
    wg.job.progress_user = &wg.pb;
    memset(&cv->wr, 0, sizeof(cv->wr));
    /* the threads' shard buffers and codec contexts made once for all the groups */
    SM_TRY(sm_write_crew_new(&wg.job.crew, err));
    const sm_status st = sm_cv_groups(cv, write_group, &wg, err);
    sm_write_crew_free(wg.job.crew);
    return st;
}

/* Phase write: this rank's block of shards (one pass: scanning the input of each). One pass
 * writes them in the order of the input read units they start in, so the shards that share an
 * input chunk reach the threads' chunk memos one after another (C order would sweep a whole
 * plane of chunks between two shards of the same chunk); the output does not depend on it. */
sm_status sm_cv_write(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    const struct sm_array_meta *m = cv->m;
    if (cv->grid.ntiles != sm_writer_nshards(sm_writer_level(cv->w, 0))) {
        SM_FAIL(err, SM_E_INTERNAL, "plan of %llu shards for a grid of %llu",
                (unsigned long long)cv->grid.ntiles,
                (unsigned long long)sm_writer_nshards(sm_writer_level(cv->w, 0)));
    }
    cv->in_elem = sm_dtype_size(m->dtype);
    cv->out_elem = sm_dtype_size(cv->out_dt);
    cv->keep_values = cv->p->normalize.mode == SM_NORM_NONE;
    for (unsigned d = m->ndim; d-- > 0;) {
        cv->ostride[d] = d + 1 < m->ndim ? cv->ostride[d + 1] * cv->su.shape[d + 1] : 1;
        cv->astride[d] = d + 1 < m->ndim ? cv->astride[d + 1] * m->shape[d + 1] : 1;
    }
    SM_TRY(threads_new(cv, err));
    uint64_t *order = NULL;
    const struct sm_part *s = &cv->shards;
    if (cv->one_pass && s->count > 1 && !cv->grouped) {
        struct sm_read_unit u;
        sm_read_unit_of(m, &u);
        order = sm_malloc((size_t)s->count * sizeof(*order));
        if (order == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot order %llu shards", (unsigned long long)s->count);
        }
        const sm_status st = sm_tiling_order_by_unit(&cv->grid, &u, s->first, s->count, order, err);
        if (st != SM_OK) {
            sm_free(order);
            return st;
        }
    }
    /* an OME-Zarr image's levels on level 0's shard grid are made from its values in memory */
    cv->levels_with = sm_writer_levels(cv->w) > 1 ? sm_writer_aligned_levels(cv->w) : 1;
    /* read back at once, so kept in the page cache: the pyramid's parents (the last level made
     * in memory up to the one before the last level), and level 0 when the export copies it */
    const unsigned nlev = sm_writer_levels(cv->w);
    cv->spill_level = sm_writer_spill_level(cv->w);
    const unsigned back = cv->spill_level != 0 ? cv->levels_with : cv->levels_with - 1;
    if (nlev >= 2 && back <= nlev - 2) {
        sm_output_set_read_back(cv->out, back, nlev - 2);
    }
    if (cv->p->export.path != NULL) {
        sm_output_set_read_back(cv->out, 0, 0);
    }
    uint64_t value_bytes = 0; /* output.direct_io auto: does the output fit the page cache? */
    for (unsigned k = 0; k < (nlev > 0 ? nlev : 1); k++) {
        const struct sm_array_meta *lm =
            sm_writer_meta(nlev > 0 ? sm_writer_level(cv->w, k) : cv->w);
        uint64_t n = sm_dtype_size(lm->dtype);
        for (unsigned d = 0; d < lm->ndim; d++) {
            n *= lm->shape[d];
        }
        value_bytes += n;
    }
    sm_output_set_size(cv->out, value_bytes);
    sm_run_levels_init(&cv->levels, cv->w, cv->oo.ome.method, cv->nthreads);
    const struct sm_run_progress *pg = &cv->p->c.progress;
    const struct sm_write_job job = {.first = s->first,
                                     .count = s->count,
                                     .list = order,
                                     .threads = cv->nthreads,
                                     .fill = fill_shard,
                                     .user = cv,
                                     .progress = pg->update,
                                     .progress_user = pg->user,
                                     .stop = cv->p->c.stop,
                                     .levels = cv->levels_with,
                                     .derive = derive_shard,
                                     .spill = cv->spill_level != 0 ? spill_shard : NULL};
    struct sm_run_spill *sp = &cv->spill;
    sm_status st = SM_OK;
    if (cv->spill_level != 0) {
        struct sm_level_reduce red = {.dtype = cv->levels.dtype, .nearest = cv->levels.nearest};
        memcpy(red.block, cv->levels.block[cv->spill_level], sizeof(red.block));
        st = sm_run_spill_init(sp, cv->w, cv->spill_level, &red, cv->nthreads, err);
        if (st == SM_OK) {
            st = sm_spill_open(cv->out, cv->spill_level, sp->block_bytes, true, &sp->file, err);
        }
        cv->res->spill_level = cv->spill_level;
        cv->res->spill_bytes = (uint64_t)sp->block_bytes * cv->grid.ntiles; /* every rank's */
    }
    if (st == SM_OK) {
        st = cv->grouped ? write_groups(cv, &job, err)
                         : sm_write_shards(cv->w, cv->out, &job, &cv->wr, err);
    }
    sm_run_spill_free(sp); /* closed before the pyramid's ranks open it */
    sm_free(order);
    return st;
}

/* Phase flush: every rank flushes (syncfs covers one node, directory fsyncs cover this
 * process's entries). */
sm_status sm_cv_flush(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    return sm_output_flush(cv->out, err);
}

/* A stop or a failure keeps what is done: the shards this rank finished are flushed into place
 * (SYNCFS renames its staged ones after its syncfs), so a resume keeps them and rewrites only
 * what is missing; the stop or failure stays the error. */
void sm_cv_flush_kept(void *ctx)
{
    struct cv *cv = ctx;
    if (cv->w != NULL && cv->out != NULL) {
        struct sm_err ignored;
        sm_err_clear(&ignored);
        (void)sm_output_flush(cv->out, &ignored);
    }
}

/* Two passes: zarr.json restated as begun (its pending input_state is this run's: a resume of an
 * input changed in place ends with the new one). */
static sm_status restate_two_pass(struct cv *cv, struct sm_err *err)
{
    if (cv->oo.ome.levels != 0) {
        struct sm_run_omero omero;
        sm_cv_omero(cv, &omero);
        SM_TRY(sm_run_ome_writer(&cv->oo, cv->m->ndim, cv->su.shape, cv->out_dt, &omero, cv->attrs,
                                 cv->spec.pending, &cv->w_final, err));
    } else {
        SM_TRY(sm_writer_new(&cv->spec, &cv->w_final, err));
    }
    SM_TRY(sm_output_restate(cv->out, cv->w_final, cv->rank == 0, err));
    cv->final = cv->w_final;
    return SM_OK;
}

/* Phase statistics. One pass: the threads' statistics in thread order, summed over ranks;
 * zarr.json restated with them (rank 0 puts it) before anything reads the output. Two passes:
 * zarr.json restated with the input's state (restate_two_pass). */
sm_status sm_cv_statistics(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    cv->final = cv->w;
    if (!cv->one_pass) {
        return restate_two_pass(cv, err);
    }
    struct sm_scan_result *r = &cv->res->scan;
    for (int i = 0; i < cv->nthreads; i++) {
        sm_hist_merge(&r->hist, &cv->ts[i].hist);
        r->sums.sum += cv->ts[i].in_sums.sum;
        r->sums.weighted += cv->ts[i].in_sums.weighted;
        r->voxels += cv->ts[i].voxels;
        r->process_ns += cv->ts[i].scan_ns;
    }
    r->tiles = cv->mine.count; /* the tiles of the ROI this rank's share stands for */
    sm_hist_finish(&r->hist);
    cv->t_scan = sm_clock_ns() - cv->t_start;
    const uint64_t t0 = sm_clock_ns();
    SM_TRY(sm_run_reduce_scan(r, err));
    cv->allreduce_ns += sm_clock_ns() - t0;
    json_decref(cv->attrs);
    cv->attrs = sm_cv_provenance(cv, r);
    sm_run_provenance_spacing(cv->attrs, &cv->oo.ome, cv->m->ndim); /* as the begun one has it */
    if (cv->oo.ome.levels != 0) { /* an OME-Zarr image: its group document holds them */
        struct sm_run_omero omero;
        sm_cv_omero(cv, &omero);
        SM_TRY(sm_run_ome_writer(&cv->oo, cv->m->ndim, cv->su.shape, cv->out_dt, &omero, cv->attrs,
                                 cv->spec.pending, &cv->w_final, err));
    } else {
        SM_TRY(sm_run_output_spec(&cv->p->output, cv->m->ndim, cv->su.shape, cv->out_dt, cv->attrs,
                                  &cv->spec, err));
        SM_TRY(sm_writer_new(&cv->spec, &cv->w_final, err));
    }
    SM_TRY(sm_output_restate(cv->out, cv->w_final, cv->rank == 0, err));
    cv->final = cv->w_final;
    return SM_OK;
}
