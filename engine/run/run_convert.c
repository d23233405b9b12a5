/* The convert (SPEC §1, §2 output, §5, §6): the ROI's statistics (histogram, checksums), the
 * normalization (scale, window, none, or percentiles of the global histogram) and every shard of
 * the output grid: values normalized to float32 exactly as SPEC §5 writes them (none: the input's
 * values, in its type or a lossless wider one), encoded, put atomically, the marker last. The
 * input is a Zarr/N5 array (c.input) or a volume source (p->source: raw, NIfTI, TIFF, HDF5, or a
 * caller's own), read the same way: each rank only the boxes of its tiles and shards.
 *
 * The run is a table of phases (run_phase.c drives them: stop check, agreement, timing,
 * progress): prepare → output → input → exists → plan → range → scan → reduce → begin → write →
 * flush → statistics → pyramid → export → flushed → finish → collect. With output.exists: auto,
 * exists decides (rank 0, broadcast) whether to write, resume, or end the run there (this job's
 * complete, verified output: only collect runs). Two protocols (docs/internals/pipeline.md):
 * - one pass (scale, window, none: nothing needs the statistics before writing): scan and reduce
 *   are not part of the run (their rows' `when`); each shard is written from the input region it
 * covers, whose histogram and checksums are counted on the way, so the input is read once.
 * zarr.json (an image's group document) begins without its `shardmill.histogram` provenance, and an
 * image of the input's values without its omero window (write.h `pending`); the statistics phase
 * restates it. An image's levels on level 0's shard grid are written with each level-0 shard
 * (run_pyramid.c).
 * - two passes (percentile): scan the rank's tiles, reduce, derive the window, then write. A
 *   rank keeps the decoded input of its tiles from the scan when they fill a box holding its
 *   shards' input and it fits in half of memory_bytes (sm_cv_keep_plan); otherwise each shard's
 *   box is read again. A source's tiles are the output's shards (unless `tile` is set), so its
 *   rank reads every box once when it fits.
 * Shards that share input read blocks (a TIFF strip, an HDF5 chunk, a Zarr chunk) are grouped
 * (run_read_plan.c, docs/internals/reading.md): when a group's window fits, ranks take whole
 * groups and each group's box is read once per pass into cv->win, which the scan's tiles and the
 * write's shards are cut from (scan_groups here, write_groups in run_convert_write.c).
 * Stage times: `open` (output, input), `hydrate`/`decode` (input fetch/codec time), `process`
 * (statistics and normalization) and `write` (encode + put + flush), thread sums divided by the
 * thread count; `total` is wall. Under MPI (docs/internals/ranks.md) the statistics are summed
 * over ranks, every rank writes its run of the output shards, rank 0 begins the output and the
 * others join it, every rank flushes, and rank 0 writes the marker only after every rank agreed
 * on success at each phase. */
#include "shardmill/sm_config.h"

#include "run_convert_int.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/export.h"
#include "shardmill/par.h"

/* Phase prepare: the caller's checks before anything is opened. */
static sm_status ph_prepare(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    const struct sm_convert_run *p = cv->p;
    if (p->output.path == NULL) {
        SM_FAIL_AT(err, SM_E_USAGE, "output.path", "no output path given");
    }
    const bool source = p->source != NULL || p->source_params != NULL;
    if (source && p->c.input.array != NULL && p->c.input.array[0] != '\0') {
        SM_FAIL_AT(err, SM_E_USAGE, "input.array",
                   "names a node of a Zarr store, not of a volume source");
    }
    return p->hooks.prepare != NULL ? p->hooks.prepare(p->hooks.user, err) : SM_OK;
}

/* Phase output: an existing output is refused (or taken over) before any expensive work. */
static sm_status ph_output(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    const struct sm_run_hooks *hk = &cv->p->hooks;
    SM_TRY(sm_output_open(cv->p->output.path, &cv->p->output.policy, &cv->out, err));
    sm_output_set_stop(cv->out, cv->p->c.stop);
    /* a refused export path fails the run before any conversion (with output.exists: auto once
     * the phase exists knows there is something to do: a complete output's export exists) */
    if (cv->p->output.policy.exists != SM_OUTPUT_EXISTS_AUTO) {
        SM_TRY(sm_run_export_check(&cv->p->export, sm_output_path(cv->out), err));
    }
    return hk->opened != NULL ? hk->opened(hk->user, sm_output_path(cv->out), err) : SM_OK;
}

static sm_status read_source(void *user, int thread, const uint64_t *off, const uint64_t *shape,
                             void *out, struct sm_err *err)
{
    return sm_source_read_box(user, thread, off, shape, out, err);
}

/* A source's volume as array metadata (its slab as the read unit), after checking that every
 * rank's source describes rank 0's volume (collective). */
static sm_status open_source(struct cv *cv, struct sm_err *err)
{
    const struct sm_source_info *in = sm_source_info(cv->src);
    uint64_t mine[2 + SM_MAX_DIMS] = {in->ndim, (uint64_t)in->dtype};
    memcpy(mine + 2, in->shape, sizeof(in->shape));
    uint64_t root[2 + SM_MAX_DIMS];
    memcpy(root, mine, sizeof(root));
    SM_TRY(sm_par_bcast(root, sizeof(root), 0, err));
    if (memcmp(root, mine, sizeof(root)) != 0) {
        SM_FAIL(err, SM_E_USAGE, "rank %d's source is not rank 0's (dimensions, shape or type)",
                cv->rank);
    }
    struct sm_array_meta *m = &cv->src_meta;
    m->ndim = in->ndim;
    m->dtype = in->dtype;
    memcpy(m->shape, in->shape, sizeof(m->shape));
    memcpy(m->chunk_shape, in->slab, sizeof(m->chunk_shape));
    cv->m = m;
    cv->reader = (struct sm_box_reader){m, read_source, cv->src};
    return SM_OK;
}

/* A normalize none of a type with no default histogram range (wider than 16 bits, floats) and no
 * histogram.* keys makes no histogram (SPEC §5): counted into a placeholder, reported as none, so
 * it reads the input once (no min/max pass). */
static bool no_histogram(const struct cv *cv)
{
    const struct sm_run_common *c = &cv->p->c;
    uint32_t bins;
    double lo, hi;
    return cv->p->normalize.mode == SM_NORM_NONE && !c->hist_range_set && c->hist_bins == 0 &&
           !sm_hist_default(cv->m->dtype, &bins, &lo, &hi);
}

/* Phase input: the array (rank 0 fetches the metadata and broadcasts it) or the source, then
 * the ROI, tile and histogram parameters, and the output's geometry from the input's metadata. */
static sm_status ph_input(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    const struct sm_run_common *c = &cv->p->c;
    struct sm_run_result *res = cv->res;
    if (cv->src == NULL && cv->p->source_params != NULL) {
        SM_TRY(sm_source_open(cv->p->source_params, &cv->src, err));
        res->source = cv->src;
        res->owns_source_ = true;
    }
    if (cv->src != NULL) { /* agreed: the identity below is collective, and a rank whose
                            * source differs must not leave the others in it */
        SM_TRY(sm_par_agree(open_source(cv, err), err));
    } else { /* collective */
        SM_TRY(sm_run_open_input_sha(&c->input, c->memory_bytes, &res->store, &res->array,
                                     cv->meta_sha, err));
        sm_array_set_stop(res->array, c->stop);
        cv->m = sm_array_meta(res->array);
    }
    /* the input's identity (collective: rank 0's view of the files, broadcast): the provenance
     * names the input by it and output.exists: auto compares it */
    SM_TRY(sm_cv_input_identity(cv, err));
    /* the output's type, before any scan: a refused output.dtype costs no pass over the input */
    SM_TRY(sm_cv_output_dtype(&cv->p->normalize, &cv->p->output, cv->m->dtype, &cv->out_dt, err));
    res->output_dtype = cv->out_dt;
    struct sm_run_common cc = *c;
    res->no_histogram = no_histogram(cv);
    if (res->no_histogram) { /* a placeholder range: counted, never shown */
        cc.hist_range_set = true;
        cc.hist_bins = 1;
        cc.hist_lo = 0.0;
        cc.hist_hi = 1.0;
    }
    SM_TRY(sm_run_setup(&cc, cv->m, &cv->su, err));
    cv->su.params.reader = cv->src != NULL ? &cv->reader : NULL; /* a source's tiles */
    cv->su.params.progress = c->progress.update;
    cv->su.params.progress_user = c->progress.user;
    cv->su.params.stop = c->stop;
    /* the output's geometry (output.ome filled from the input's metadata), read here, once */
    cv->oo = cv->p->output;
    return sm_cv_input_geometry(cv, err);
}

/* The complete output's zarr.json carries `state` (an object {"input_state": ...}); else `what`
 * names the first member that differs. */
static sm_status same_state(const struct cv *cv, const json_t *state, bool *same, char *what,
                            size_t cap, struct sm_err *err)
{
    struct sm_store *s = NULL;
    struct sm_buf zj = SM_BUF_INIT;
    bool found = false;
    sm_status st = sm_store_file_open(sm_output_path(cv->out), &s, err);
    if (st == SM_OK) {
        st = sm_store_get(s, "zarr.json", sm_range_all(), SM_IO_META, &zj, &found, err);
    }
    if (st == SM_OK && !found) { /* an OME-NGFF 0.4 image (Zarr v2): its .zattrs (issue 35) */
        st = sm_store_get(s, ".zattrs", sm_range_all(), SM_IO_META, &zj, &found, err);
    }
    sm_store_close(s);
    *same = st == SM_OK && found && sm_output_identity_same(sm_buf_bytes(&zj), state, what, cap);
    sm_buf_free(&zj);
    return st;
}

/* output.exists: auto on rank 0: what the output holds (sm_output_decide). A complete output
 * whose input state changed (the input rewritten in place), or whose input identity binds no
 * values (sm_run_input_reread), is resumed: every shard is checked against its values digest,
 * never "complete" unverified. So is one whose HDF5 export is missing (export.hdf5.path set,
 * nothing there): every shard is kept and the export phase writes the file before the marker is
 * written again. A file there without the HDF5 signature is no export of ours (the export is
 * renamed into place whole) and the export never replaces such a file (export.hdf5.exists:
 * overwrite neither): refused. */
static sm_status decide(const struct cv *cv, struct sm_output_decision *d, struct sm_err *err)
{
    json_t *id = sm_cv_identity(cv);
    json_t *state =
        id != NULL ? json_pack("{s:O}", "input_state", json_object_get(id, "input_state")) : NULL;
    if (id == NULL || state == NULL) {
        json_decref(id);
        SM_FAIL(err, SM_E_NOMEM, "cannot build the job's identity");
    }
    /* what the job is (another one is refused); then what binds the input's bytes now: another
     * state (the input changed in place) is resumed, every shard checked against its digest */
    json_object_del(id, "input_state");
    sm_status st = sm_output_decide(cv->out, id, d, err);
    json_decref(id);
    char what[128];
    bool same = true;
    if (st == SM_OK && d->found == SM_OUTPUT_FOUND_COMPLETE) {
        st = same_state(cv, state, &same, what, sizeof(what), err);
    }
    json_decref(state);
    if (st != SM_OK || d->found != SM_OUTPUT_FOUND_COMPLETE) {
        return st;
    }
    if (!same) {
        d->found = SM_OUTPUT_FOUND_UNFINISHED;
        snprintf(d->first_problem, sizeof(d->first_problem),
                 "input changed (%s): every shard is checked against its values digest", what);
        return SM_OK;
    }
    if (sm_run_input_reread(cv->input_id)) {
        /* nothing read cheaply binds the input's values (an HTTP/S3 Zarr input without a
         * marker): resumed, which reads the input and keeps each shard only when its values
         * have the recorded digest (SPEC §6.5) */
        d->found = SM_OUTPUT_FOUND_UNFINISHED;
        snprintf(d->first_problem, sizeof(d->first_problem),
                 "input: no identity binds its values (no marker, not a file store): every "
                 "shard is checked against its values digest");
        return SM_OK;
    }
    const char *x = cv->p->export.path;
    struct stat sb;
    if (x == NULL) {
        return SM_OK;
    }
    if (lstat(x, &sb) != 0) {
        d->found = SM_OUTPUT_FOUND_UNFINISHED;
        snprintf(d->first_problem, sizeof(d->first_problem), "%s: the export is missing", x);
        return SM_OK;
    }
    bool is_hdf5 = false; /* the file there is trusted only when it is an HDF5 file at least */
    SM_TRY(sm_export_hdf5_signature(x, &is_hdf5, err));
    if (!is_hdf5) { /* no export of ours, and the export never replaces a file that is not HDF5 */
        SM_FAIL_AT(err, SM_E_USAGE, x,
                   "output.exists: auto: the file there is not an HDF5 file (no HDF5 signature "
                   "at offset 0, 512, 1024, ...), so the output is not complete; shardmill never "
                   "overwrites it: move or remove it, and the export is written again");
    }
    return SM_OK;
}

/* An HDF5 file (the signature) at the export path of this job's output being finished: a kill
 * between the export's rename and the marker's leaves it, and `auto` must not refuse it for
 * ever as "export exists". */
static bool own_export(const char *path)
{
    struct stat sb;
    bool is_hdf5 = false;
    struct sm_err ignored;
    sm_err_clear(&ignored);
    return path != NULL && lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
           sm_export_hdf5_signature(path, &is_hdf5, &ignored) == SM_OK && is_hdf5;
}

/* The export as this run writes it: export.hdf5.exists overwrite over its own export. */
static struct sm_run_export export_of(const struct cv *cv)
{
    struct sm_run_export x = cv->p->export;
    if (cv->replace_export) {
        x.exists = SM_EXPORT_EXISTS_OVERWRITE;
    }
    return x;
}

/* Phase exists: with output.exists: auto, rank 0 decides what the output holds from this job's
 * identity (known now that the input is open; nothing expensive ran yet) and every rank settles
 * on its decision, so all write, resume or stop together. A complete output that verifies ends
 * the run here (cv->done: only collect runs); otherwise the export's checks run now. */
static sm_status ph_exists(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    const struct sm_convert_run *p = cv->p;
    struct sm_run_result *res = cv->res;
    const enum sm_output_exists ex = p->output.policy.exists;
    if (ex != SM_OUTPUT_EXISTS_AUTO) {
        res->output_found =
            ex == SM_OUTPUT_EXISTS_RESUME ? SM_OUTPUT_FOUND_UNFINISHED : SM_OUTPUT_FOUND_NEW;
        return SM_OK;
    }
    struct sm_output_decision d;
    memset(&d, 0, sizeof(d));
    sm_status st = cv->rank == 0 ? decide(cv, &d, err) : SM_OK;
    bool agreed = false;
    st = sm_run_agree(&agreed, st, err);
    if (st == SM_OK) {
        st = sm_par_bcast(&d, sizeof(d), 0, err);
    }
    SM_TRY(st);
    sm_output_settle(cv->out, d.found);
    res->output_found = d.found;
    res->output_problems = d.problems;
    memcpy(res->output_problem, d.first_problem, sizeof(res->output_problem));
    if (d.found == SM_OUTPUT_FOUND_COMPLETE) {
        cv->done = true;
        cv->done_shards = d.shards;
        cv->done_bytes = d.bytes;
        return SM_OK;
    }
    cv->replace_export = false;
    if (cv->rank == 0 && d.found != SM_OUTPUT_FOUND_NEW) {
        cv->replace_export = own_export(p->export.path);
    }
    SM_TRY(sm_par_bcast(&cv->replace_export, sizeof(cv->replace_export), 0, err));
    const struct sm_run_export x = export_of(cv);
    return sm_run_export_check(&x, sm_output_path(cv->out), err);
}

/* grouped: this rank's shards into cv->order, group after group (each group's in C order of the
 * shard grid), and where each group starts (cv->gstart). */
static sm_status group_shards(struct cv *cv, struct sm_err *err)
{
    const struct sm_tiling *g = &cv->rp.groups, *t = &cv->grid;
    const unsigned nd = t->ndim;
    uint64_t lo[SM_MAX_DIMS], hi[SM_MAX_DIMS], off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    cv->gstart = sm_malloc((size_t)(cv->gmine.count + 1) * sizeof(*cv->gstart));
    if (cv->gstart == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot list %llu groups", (unsigned long long)cv->gmine.count);
    }
    uint64_t n = 0;
    for (int fill = 0; fill < 2; fill++) { /* count, then list */
        n = 0;
        for (uint64_t k = 0; k < cv->gmine.count; k++) {
            cv->gstart[k] = n;
            sm_tiling_box(g, cv->gmine.first + k, off, shape);
            uint64_t count = 1;
            for (unsigned d = 0; d < nd; d++) { /* the group's shards per axis: [lo, hi) */
                lo[d] = (off[d] - t->roi_offset[d]) / t->tile[d];
                hi[d] = (off[d] + shape[d] - t->roi_offset[d] + t->tile[d] - 1) / t->tile[d];
                count *= hi[d] - lo[d];
            }
            for (uint64_t i = 0; fill && i < count; i++) {
                uint64_t rest = i, index = 0, stride = 1;
                for (unsigned d = nd; d-- > 0;) {
                    const uint64_t ext = hi[d] - lo[d];
                    index += (lo[d] + rest % ext) * stride;
                    rest /= ext;
                    stride *= t->grid[d];
                }
                cv->order[n + i] = index;
            }
            n += count;
        }
        cv->gstart[cv->gmine.count] = n;
        if (!fill) {
            cv->order = sm_malloc((size_t)(n > 0 ? n : 1) * sizeof(*cv->order));
            if (cv->order == NULL) {
                SM_FAIL(err, SM_E_NOMEM, "cannot list %llu shards", (unsigned long long)n);
            }
        }
    }
    cv->nmine = n;
    return SM_OK;
}

/* This rank's shards' bounding box (none: false). */
static bool shards_box(const struct cv *cv, uint64_t *off, uint64_t *shape)
{
    if (cv->grouped) {
        if (cv->gmine.count == 0) {
            return false;
        }
        sm_tiling_run_box(&cv->rp.groups, cv->gmine.first, cv->gmine.count, off, shape);
        return true;
    }
    if (cv->shards.count == 0) {
        return false;
    }
    sm_tiling_run_box(&cv->grid, cv->shards.first, cv->shards.count, off, shape);
    return true;
}

/* A source's bounding box of this rank's tiles and shards: what its plan may load. */
static sm_status plan_source(struct cv *cv, struct sm_err *err)
{
    const unsigned nd = cv->m->ndim;
    uint64_t lo[SM_MAX_DIMS], hi[SM_MAX_DIMS], off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    bool any = false;
    if (shards_box(cv, off, shape)) {
        memcpy(lo, off, sizeof(lo));
        for (unsigned d = 0; d < nd; d++) {
            hi[d] = off[d] + shape[d];
        }
        any = true;
    }
    const struct {
        const struct sm_tiling *t;
        const struct sm_part *p;
    } runs[1] = {{&cv->su.tiling, &cv->mine}};
    for (int k = 0; k < (cv->one_pass || cv->grouped ? 0 : 1); k++) {
        if (runs[k].p->count == 0) {
            continue;
        }
        sm_tiling_run_box(runs[k].t, runs[k].p->first, runs[k].p->count, off, shape);
        for (unsigned d = 0; d < nd; d++) {
            lo[d] = any && lo[d] < off[d] ? lo[d] : off[d];
            hi[d] = any && hi[d] > off[d] + shape[d] ? hi[d] : off[d] + shape[d];
        }
        any = true;
    }
    for (unsigned d = 0; d < nd; d++) {
        off[d] = any ? lo[d] : 0;
        shape[d] = any ? hi[d] - lo[d] : 0;
    }
    return sm_source_plan(cv->src, off, shape, cv->p->c.memory_bytes, err);
}

/* Phase plan: this rank's tiles and shards (every rank computes the same plan). */
static sm_status ph_plan(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    const struct sm_convert_run *p = cv->p;
    const struct sm_run_common *c = &p->c;
    const struct sm_run_hooks *hk = &p->hooks;
    /* one pass unless percentile needs the statistics first */
    cv->one_pass = !sm_norm_desc(p->normalize.mode)->needs_statistics;
    struct sm_run_output o = p->output; /* the grid of the output's own type (its writer's) */
    o.dtype_set = true;
    o.dtype = cv->out_dt;
    const enum sm_source_access access =
        cv->src != NULL ? sm_source_info(cv->src)->access : SM_SOURCE_BLOCKS;
    SM_TRY(sm_run_input_layout(&o, cv->m, access, &cv->su, c->memory_bytes, &cv->grid, &cv->layout,
                               &cv->rp, err));
    cv->res->read_plan = cv->rp;
    /* a Zarr input whose objects are each read once: no encoded-object cache (SPEC §3) */
    if (cv->src == NULL &&
        !sm_run_cache_useful(cv->m, &cv->grid, !cv->one_pass, cv->su.range_from, cv->rp.windowed)) {
        sm_store_cache_bypass(cv->res->store);
    }
    SM_TRY(sm_run_check_shards(cv->grid.ntiles, c->memory_bytes, err));
    if (cv->rank == 0 && hk->layout != NULL) {
        hk->layout(hk->user, &cv->layout, cv->grid.ntiles);
    }
    /* shards that share input blocks go to one rank, group by group, when a group's window fits;
     * otherwise each rank takes a run of shards (and reads their blocks whole, each shard) */
    cv->grouped = cv->rp.windowed;
    if (cv->grouped) {
        SM_TRY(sm_run_rank_part(c->partition, cv->m, &cv->rp.groups, &cv->gmine, err));
        SM_TRY(group_shards(cv, err));
        cv->shards = (struct sm_part){0, cv->nmine, 0};
    } else {
        SM_TRY(sm_run_rank_part(c->partition, cv->m, &cv->grid, &cv->shards, err));
        cv->nmine = cv->shards.count;
    }
    sm_run_window_init(&cv->win, cv->m->ndim, sm_dtype_size(cv->m->dtype), &cv->m->chunk_shape[0]);
    sm_run_window_init(&cv->ahead, cv->m->ndim, sm_dtype_size(cv->m->dtype),
                       &cv->m->chunk_shape[0]);
    if (cv->src != NULL && !c->tile.set) { /* a source's tiles are the shards: read once */
        memcpy(cv->su.tile, cv->grid.tile, sizeof(cv->su.tile));
        cv->su.tiling = cv->grid;
    }
    SM_TRY(sm_run_rank_part(c->partition, cv->m, &cv->su.tiling, &cv->mine, err));
    return cv->src != NULL ? plan_source(cv, err) : SM_OK;
}

static uint64_t range_total(void *ctx)
{
    const struct cv *cv = ctx;
    return cv->su.range_from == SM_HIST_RANGE_MINMAX ? cv->mine.count : UINT64_MAX;
}

/* Phase range: the min/max pass (SPEC §5, run_range.c) when the histogram has no range of its
 * own (this rank's scan tiles, read once more before the scan or the one-pass write); then, in
 * one pass, the histogram the write's threads merge into. */
static sm_status ph_range(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    SM_TRY(sm_run_minmax_range(cv->res->array, &cv->su, cv->mine.first, cv->mine.count, err));
    if (cv->one_pass) {
        const struct sm_scan_params *sp = &cv->su.params;
        SM_TRY(sm_hist_init(&cv->res->scan.hist, cv->m->dtype, sp->bins, sp->lo, sp->hi, err));
    }
    return SM_OK;
}

static uint64_t scan_total(void *ctx)
{
    const struct cv *cv = ctx;
    return cv->su.tiling.ntiles;
}

/* The rows of the statistics pass (scan, reduce): a percentile window needs them first. */
static bool two_passes(const void *ctx)
{
    const struct cv *cv = ctx;
    return !cv->one_pass;
}

/* A box of the input from the group's window (the scan's reader when grouped). */
static sm_status read_window(void *user, int thread, const uint64_t *off, const uint64_t *shape,
                             void *out, struct sm_err *err)
{
    const struct cv *cv = user;
    if (!sm_run_window_covers(&cv->win, off, shape)) { /* a stream's slabs, held by its plan */
        return cv->src != NULL ? sm_source_read_box(cv->src, thread, off, shape, out, err)
                               : SM_ERR(err, SM_E_INTERNAL, "a tile outside its group's window");
    }
    sm_run_window_copy(&cv->win, off, shape, out);
    return SM_OK;
}

/* Adds one window's scan into the rank's. */
static void scan_merge(struct sm_scan_result *into, const struct sm_scan_result *r)
{
    sm_hist_merge(&into->hist, &r->hist);
    into->sums.sum += r->sums.sum;
    into->sums.weighted += r->sums.weighted;
    into->voxels += r->voxels;
    into->tiles += r->tiles;
    into->fetch_ns += r->fetch_ns;
    into->decode_ns += r->decode_ns;
    into->process_ns += r->process_ns;
}

struct scan_group {
    const struct sm_scan_params *sp;
    struct sm_run_progress_base pb;
    const struct cv_boxes *boxes;
    /* planes: the progress of a slab in shards of the rank (units), by the voxels scanned */
    uint64_t units, voxels, rank_voxels, slab_units, slab_tiles;
};

/* A slab's progress in the rank's shards, from its own tiles done. */
static void slab_progress(void *user, uint64_t done, uint64_t bytes)
{
    struct scan_group *sg = user;
    const uint64_t u = sg->slab_tiles == 0 ? 0 : sg->slab_units * done / sg->slab_tiles;
    sm_run_progress_based(&sg->pb, u, bytes);
}

/* One box's tiles scanned from the window into the rank's scan: a group's shards, or the parts of
 * the shards a slab of planes holds (their depth the slab's). */
static sm_status scan_group(struct cv *cv, void *user, uint64_t k, const uint64_t *off,
                            const uint64_t *shape, struct sm_err *err)
{
    (void)k;
    struct scan_group *sg = user;
    uint64_t tile[SM_MAX_DIMS];
    memcpy(tile, cv->grid.tile, sizeof(tile));
    struct sm_scan_params sp = *sg->sp;
    if (sg->boxes->planes) {
        tile[0] = shape[0];
        uint64_t n = 1;
        for (unsigned d = 0; d < cv->m->ndim; d++) {
            n *= shape[d];
        }
        const uint64_t before = sg->units;
        sg->voxels += n;
        sg->units =
            sg->voxels >= sg->rank_voxels
                ? cv->nmine
                : (uint64_t)((double)cv->nmine * (double)sg->voxels / (double)sg->rank_voxels);
        sg->slab_units = sg->units - before;
        sp.progress = slab_progress;
        sp.progress_user = sg;
    }
    struct sm_tiling sub; /* the box's shards (or their parts) as tiles */
    SM_TRY(sm_tiling_init(&sub, cv->m->ndim, cv->m->shape, off, shape, tile, err));
    sg->slab_tiles = sub.ntiles;
    struct sm_scan_result r;
    const sm_status st = sm_scan_tiles(NULL, &sub, 0, sub.ntiles, &sp, &r, err);
    if (st == SM_OK) {
        scan_merge(&cv->res->scan, &r);
        sm_run_progress_next(&sg->pb);
    }
    sm_scan_result_destroy(&r);
    return st;
}

/* The scan of a grouped rank: each group's box read once into the window and its shards scanned
 * from there, or a source read at any box in slabs of whole planes (sm_cv_planes). When the
 * rank's whole box fits what a kept input may hold, it is the one window, read once, and the
 * write cuts its shards from it too (the input read once in all). */
static sm_status scan_groups(struct cv *cv, struct sm_err *err)
{
    const uint64_t memory = cv->p->c.memory_bytes;
    struct sm_scan_params sp = cv->su.params;
    const struct sm_box_reader rd = {cv->m, read_window, cv};
    sp.reader = &rd;
    sp.keep = NULL;
    SM_TRY(sm_hist_init(&cv->res->scan.hist, cv->m->dtype, sp.bins, sp.lo, sp.hi, err));
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    bool kept = false;
    uint64_t n = cv->win.elem;
    if (shards_box(cv, off, shape)) {
        for (unsigned d = 0; d < cv->m->ndim; d++) {
            n *= shape[d];
        }
        if (!cv->p->c.reread && (memory == 0 || n <= memory / 2 - run_memo_total(memory))) {
            SM_TRY(sm_cv_window_load(cv, off, shape, err));
            cv->keep_bytes = n; /* reported as the kept input */
            kept = true;
        }
    }
    struct cv_boxes boxes;
    if (kept || !sm_cv_planes(cv, &boxes)) {
        sm_cv_group_boxes(cv, &boxes);
    }
    struct scan_group sg = {
        &sp, {sp.progress, sp.progress_user, 0, 0, 0, 0}, &boxes, 0, 0, boxes.voxels, 0, 0};
    sp.progress = sm_run_progress_based;
    sp.progress_user = &sg.pb;
    SM_TRY(sm_cv_each_box(cv, &boxes, scan_group, &sg, err));
    sm_hist_finish(&cv->res->scan.hist);
    return SM_OK;
}

/* Phase scan (its row's `when`: two passes only): this rank's tiles, kept when they hold its
 * shards' input. */
static sm_status ph_scan(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    if (cv->grouped) {
        const sm_status st = scan_groups(cv, err);
        cv->t_scan = sm_clock_ns() - cv->t_start;
        return st;
    }
    cv->keep = cv->p->c.reread ? NULL
                               : sm_cv_keep_plan(cv->p->c.memory_bytes, cv->m, &cv->su, &cv->mine,
                                                 &cv->grid, &cv->shards, &cv->keep_bytes);
    const sm_status st = sm_scan_tiles(cv->res->array, &cv->su.tiling, cv->mine.first,
                                       cv->mine.count, &cv->su.params, &cv->res->scan, err);
    cv->t_scan = sm_clock_ns() - cv->t_start;
    return st;
}

/* Phase reduce (its row's `when`: two passes only): the global statistics, the same on every rank.
 */
static sm_status ph_reduce(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    const uint64_t t0 = sm_clock_ns();
    const sm_status st = sm_run_reduce_scan(&cv->res->scan, err);
    cv->allreduce_ns += sm_clock_ns() - t0;
    return st;
}

/* Phase begin: the same window, zarr.json and writer on every rank (from the global statistics
 * or, in one pass, from the configuration: zarr.json's histogram is pending); rank 0 prepares
 * the directory, then the others attach to it. */
static sm_status ph_begin(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    const struct sm_convert_run *p = cv->p;
    const unsigned nd = cv->m->ndim;
    SM_TRY(sm_cv_make_norm(&p->normalize, &cv->res->scan.hist, &cv->res->norm, err));
    if (p->normalize.mode != SM_NORM_NONE) { /* none: the values are cast */
        SM_TRY(sm_norm_lut_init(&cv->lut, &cv->res->norm, cv->m->dtype, cv->out_dt, err));
    }
    cv->attrs = sm_cv_provenance(cv, cv->one_pass ? NULL : &cv->res->scan);
    /* cv->oo has the input's geometry (ph_input); now the shard depth the partition used */
    cv->oo.shard_depth = !p->output.shard.set && cv->layout.sharded ? cv->layout.shard[0] : 0;
    SM_TRY(sm_run_output_spec(&cv->oo, nd, cv->su.shape, cv->out_dt, cv->attrs, &cv->spec, err));
    const bool window_later = cv->one_pass && p->normalize.mode == SM_NORM_NONE;
    cv->spec.pending = !cv->one_pass                          ? CV_PENDING_STATE
                       : window_later && p->output.ome.levels ? CV_PENDING_OME_NONE
                                                              : CV_PENDING_ATTR;
    sm_run_provenance_spacing(cv->attrs, &cv->oo.ome, nd);
    struct sm_run_omero omero;
    sm_cv_omero(cv, &omero);
    omero.set = omero.set && !window_later; /* the input's p1..p99: restated after the write */
    SM_TRY(cv->oo.ome.levels != 0 ? sm_run_ome_writer(&cv->oo, nd, cv->su.shape, cv->out_dt, &omero,
                                                      cv->attrs, cv->spec.pending, &cv->w, err)
                                  : sm_writer_new(&cv->spec, &cv->w, err));
    bool agreed = false;
    return sm_run_begin(cv->out, cv->w, SM_OK, &agreed, err);
}

/* Phase pyramid: levels 1.. of an OME-Zarr image (each written, flushed and agreed). */
static sm_status ph_pyramid(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    const struct sm_run_common *c = &cv->p->c;
    cv->res->levels = sm_writer_levels(cv->w);
    if (sm_writer_levels(cv->w) <= 1) {
        return SM_OK;
    }
    const uint64_t t0 = sm_clock_ns();
    const struct sm_run_pyramid py = {.writer = cv->w,
                                      .output = cv->out,
                                      .method = cv->oo.ome.method,
                                      .threads = cv->nthreads,
                                      .memory_bytes = c->memory_bytes,
                                      .max_chunk_bytes = c->input.max_chunk_bytes,
                                      .progress = c->progress,
                                      .stop = c->stop,
                                      .done = cv->levels_with,
                                      .spill = cv->spill_level,
                                      .spill_ns = &cv->res->spill_ns};
    const sm_status st = sm_run_pyramid(&py, &cv->wr, err);
    cv->res->pyramid_ns = sm_clock_ns() - t0;
    return st;
}

static struct sm_run_flushed flushed_of(const struct cv *cv)
{
    return (struct sm_run_flushed){cv->final, sm_output_path(cv->out), &cv->res->scan.hist,
                                   cv->attrs};
}

static bool exporting(const void *ctx)
{
    const struct cv *cv = ctx;
    return cv->p->export.path != NULL;
}

/* Phase export (export.path: run_export.c), after the flush and before the marker; its status is
 * the same on every rank, and a failure leaves no marker. */
static sm_status ph_export(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    const struct sm_run_flushed f = flushed_of(cv);
    struct sm_convert_run p = *cv->p; /* its export's policy as ph_exists settled it */
    p.export = export_of(cv);
    return sm_run_export(&p, &f, cv->res, err);
}

/* Phase flushed: the caller's collective step, between the flush (and export) and the marker. */
static sm_status ph_flushed(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    const struct sm_run_hooks *hk = &cv->p->hooks;
    const struct sm_run_flushed f = flushed_of(cv);
    return hk->flushed != NULL ? hk->flushed(hk->user, &f, err) : SM_OK;
}

/* Phase finish: only now that every rank wrote and flushed, every rank's shard records are
 * gathered on rank 0 (one MPI gather: no rank reads another's journal) and rank 0 writes the
 * marker from them (SPEC §6). */
static sm_status ph_finish(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    return sm_run_finish(cv->out, cv->p->c.stop, err);
}

static const struct run_phase convert_phases[] = {
    {.name = "prepare", .run = ph_prepare, .timing = SM_RUN_T_OPEN},
    {.name = "output", .run = ph_output, .timing = SM_RUN_T_OPEN},
    {.name = "input", .run = ph_input, .timing = SM_RUN_T_OPEN},
    {.name = "exists", .run = ph_exists, .timing = SM_RUN_T_OPEN},
    {.name = "plan", .run = ph_plan, .timing = -1},
    {.name = "range",
     .run = ph_range,
     .unit = "tiles",
     .total = range_total,
     .timing = SM_RUN_T_RANGE},
    {.name = "scan",
     .run = ph_scan,
     .unit = "tiles",
     .total = scan_total,
     .when = two_passes,
     .timing = -1},
    {.name = "reduce", .run = ph_reduce, .when = two_passes, .timing = -1},
    {.name = "begin", .run = ph_begin, .timing = -1},
    {.name = "write",
     .run = sm_cv_write,
     .unit = "shards",
     .total = sm_cv_write_total,
     .timing = -1},
    {.name = "flush", .run = sm_cv_flush, .cleanup = sm_cv_flush_kept, .timing = -1},
    {.name = "statistics", .run = sm_cv_statistics, .timing = -1},
    {.name = "pyramid", .run = ph_pyramid, .timing = -1},
    {.name = "export", .run = ph_export, .when = exporting, .timing = -1},
    {.name = "flushed", .run = ph_flushed, .timing = -1},
    {.name = "finish", .run = ph_finish, .timing = SM_RUN_T_FINISH},
    {.name = "collect",
     .run = sm_cv_collect,
     .timing = -1,
     .flags = RUN_PHASE_NO_STOP | RUN_PHASE_ALWAYS},
};

static void cv_free(struct cv *cv)
{
    sm_cv_threads_free(cv);
    json_decref(cv->attrs);
    json_decref(cv->input_id);
    sm_output_close(cv->out); /* before the writers: it names the shards to clean up */
    sm_writer_free(cv->w);
    sm_writer_free(cv->w_final);
    sm_free(cv->keep);
    sm_free(cv->order);
    sm_free(cv->gstart);
    sm_norm_lut_destroy(&cv->lut);
    sm_run_window_free(&cv->win);
    sm_run_window_free(&cv->ahead);
}

sm_status sm_run_convert(const struct sm_convert_run *p, struct sm_run_result *res,
                         struct sm_err *err)
{
    memset(res, 0, sizeof(*res));
    if (p->c.preflight != NULL) {
        res->preflight = *p->c.preflight;
    }
    bool entered = false;
    SM_TRY(sm_run_ranks_enter(p->c.mpi_comm, &entered, err));
    struct cv cv;
    memset(&cv, 0, sizeof(cv));
    cv.p = p;
    cv.res = res;
    cv.src = p->source;
    res->source = p->source;
    res->norm_config = p->normalize;
    res->input_store = p->c.input.store;
    res->input_array = p->c.input.array;
    cv.t_start = sm_clock_ns();
    cv.rank = sm_par_rank();
    cv.nranks = sm_par_size();
    cv.nthreads = p->c.threads > 0 ? p->c.threads : sm_write_default_threads();
    const struct run_phase_env env = {&p->c.progress, p->c.stop, res->timing, &cv.done, res};
    const sm_status st = sm_run_phases(
        convert_phases, sizeof(convert_phases) / sizeof(convert_phases[0]), &cv, &env, err);
    res->input_identity = cv.input_id != NULL ? sm_run_input_part(cv.input_id, false) : NULL;
    cv_free(&cv);
    sm_run_ranks_leave(entered);
    return st;
}
