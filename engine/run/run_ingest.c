/* The ingest (SPEC §2 ingest sources, §4 `ingest`, §6): a volume described by the caller's
 * source (pipeline.h: struct sm_ingest_source) written as a Zarr v3 array of the same type and
 * shape, values unchanged, with the SPEC §5 checksums and histogram of the values written. The
 * phases are a convert's without the scan: there is no global statistic to wait for, so every
 * rank fills its own run of shards straight from the source (read_box), and the statistics are
 * summed over ranks at the end (wrapping sums and counts: the totals do not depend on the rank or
 * thread count). Under MPI (docs/internals/ranks.md) the shard grid is split as convert's write
 * phase splits it (parallel.partition over the grid, the cost of a shard its voxels), rank 0
 * begins the output and the others join it, each rank keeps one journal, every rank flushes, and
 * rank 0 writes the marker from the gathered records only after every rank agreed on success.
 * Stage times: `open` (output and layout), `hydrate` (read_box) and `process` (checksums and
 * histogram), thread sums divided by the thread count; `write` (encode + put, per thread, + this
 * rank's flush); `allreduce` (the sums over ranks); `finish` (records gathered, marker); `total`
 * is wall. */
#include "run_int.h"

#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/par.h"

struct ingest_thread {
    struct sm_checksums sums;
    struct sm_hist hist; /* bins 0: no histogram */
    uint64_t read_ns, stats_ns;
};

struct ingest {
    const struct sm_ingest_source *src;
    uint64_t stride[SM_MAX_DIMS]; /* C-order strides of the volume, in elements */
    bool have_hist;
    struct ingest_thread *ts;
    int nthreads;
};

/* The write driver's fill callback: the source's values of the shard's box, counted. */
static sm_status fill_shard(void *user, int thread, uint64_t shard, const uint64_t *offset,
                            const uint64_t *shape, void *data, size_t len, struct sm_err *err)
{
    (void)shard;
    struct ingest *in = user;
    const struct sm_ingest_source *s = in->src;
    if (thread < 0 || thread >= in->nthreads) {
        SM_FAIL(err, SM_E_INTERNAL, "write thread %d of %d", thread, in->nthreads);
    }
    struct ingest_thread *ts = &in->ts[thread];
    const uint64_t t0 = sm_clock_ns();
    SM_TRY(s->read_box(s->user, thread, offset, shape, data, err));
    const uint64_t t1 = sm_clock_ns();
    sm_checksums_add_box(&ts->sums, s->dtype, data, s->ndim, in->stride, offset, shape);
    if (in->have_hist) {
        sm_hist_add(&ts->hist, data, len / sm_dtype_size(s->dtype));
    }
    ts->read_ns += t1 - t0;
    ts->stats_ns += sm_clock_ns() - t1;
    return SM_OK;
}

/* The histogram of SPEC §5 as a scan makes it; *have false (no error) for a type with no
 * default range when neither histogram key is given. */
static sm_status hist_params(const struct sm_ingest_run *p, uint32_t *bins, double *lo, double *hi,
                             bool *have, struct sm_err *err)
{
    *have = true;
    if (p->hist_range_set) {
        if (p->hist_bins == 0) {
            sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                       "histogram.bins is required with histogram.range");
            sm_err_where(err, "histogram");
            return err->status;
        }
        *bins = p->hist_bins;
        *lo = p->hist_lo;
        *hi = p->hist_hi;
        return SM_OK;
    }
    struct sm_err e2;
    sm_err_clear(&e2);
    if (sm_hist_default(p->source.dtype, bins, lo, hi, &e2) != SM_OK) {
        if (p->hist_bins != 0) {
            *err = e2;
            sm_err_where(err, "histogram");
            return err->status;
        }
        *have = false;
        return SM_OK;
    }
    if (p->hist_bins != 0) { /* bins without a range: rebin the type's default range */
        *bins = p->hist_bins;
    }
    return SM_OK;
}

static sm_status check_source(const struct sm_ingest_source *s, struct sm_err *err)
{
    if (s->read_box == NULL || s->ndim == 0 || s->ndim > SM_MAX_DIMS ||
        sm_dtype_size(s->dtype) == 0) {
        SM_FAIL(err, SM_E_INTERNAL, "ingest source without read_box, dimensions or data type");
    }
    return SM_OK;
}

/* Every rank's source must describe rank 0's volume: its dimensions, shape and type broadcast
 * from rank 0 and compared (collective). */
static sm_status same_source(const struct sm_ingest_source *s, struct sm_err *err)
{
    uint64_t mine[2 + SM_MAX_DIMS] = {s->ndim, (uint64_t)s->dtype};
    memcpy(mine + 2, s->shape, sizeof(s->shape));
    uint64_t root[2 + SM_MAX_DIMS];
    memcpy(root, mine, sizeof(root));
    SM_TRY(sm_par_bcast(root, sizeof(root), 0, err));
    if (memcmp(root, mine, sizeof(root)) != 0) {
        SM_FAIL(err, SM_E_USAGE,
                "rank %d's ingest source is not rank 0's (dimensions, shape or type)",
                sm_par_rank());
    }
    return SM_OK;
}

/* The statistics over ranks: sums, voxels, histogram (finished per rank first). */
static sm_status reduce_stats(struct ingest *in, struct sm_scan_result *r, struct sm_err *err)
{
    for (int i = 0; i < in->nthreads; i++) {
        r->sums.sum += in->ts[i].sums.sum;
        r->sums.weighted += in->ts[i].sums.weighted;
        r->fetch_ns += in->ts[i].read_ns;
        r->process_ns += in->ts[i].stats_ns;
        if (in->have_hist && i > 0) {
            sm_hist_merge(&in->ts[0].hist, &in->ts[i].hist);
        }
    }
    if (in->have_hist) {
        sm_hist_finish(&in->ts[0].hist);
        r->hist = in->ts[0].hist; /* moved: the thread's copy is cleared */
        memset(&in->ts[0].hist, 0, sizeof(in->ts[0].hist));
    }
    return run_reduce_scan(r, err);
}

static sm_status ingest_ranks(const struct sm_ingest_run *p, struct sm_run_result *res,
                              struct sm_err *err)
{
    const struct sm_ingest_source *src = &p->source;
    const struct sm_run_hooks *hk = &p->hooks;
    const uint64_t t_start = sm_clock_ns();
    const int rank = sm_par_rank(), nranks = sm_par_size();
    const int nthreads = p->threads > 0 ? p->threads : sm_write_default_threads();
    struct sm_output *out = NULL;
    struct sm_writer *w = NULL;
    struct ingest in = {0};
    bool agreed = false;
    /* Phase open: the caller's checks, the output path (nothing written yet), the layout. */
    sm_status st = check_source(src, err);
    if (st == SM_OK && p->output.path == NULL) {
        st = sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "no output path given");
        sm_err_where(err, "output.path");
    }
    if (st == SM_OK && hk->prepare != NULL) {
        st = hk->prepare(hk->user, err);
    }
    st = sm_par_agree(st, err);
    if (st == SM_OK) {
        st = sm_par_agree(same_source(src, err), err);
    }
    if (st == SM_OK) {
        st = sm_par_agree(sm_output_open(p->output.path, &p->output.policy, &out, err), err);
        if (st == SM_OK) {
            sm_output_set_stop(out, p->stop);
        }
    }
    if (st == SM_OK && hk->opened != NULL) {
        st = sm_par_agree(hk->opened(hk->user, sm_output_path(out), err), err);
    }
    agreed = st != SM_OK;
    const unsigned nd = src->ndim;
    const uint64_t zeros[SM_MAX_DIMS] = {0};
    struct sm_output_spec spec;
    struct sm_tiling grid;
    struct sm_part mine = {0, 0, 0};
    uint32_t bins = 0;
    double lo = 0.0, hi = 0.0;
    if (st == SM_OK) {
        st =
            sm_run_output_spec(&p->output, nd, src->shape, src->dtype, src->attributes, &spec, err);
    }
    if (st == SM_OK) {
        st = hist_params(p, &bins, &lo, &hi, &in.have_hist, err);
    }
    if (st == SM_OK) { /* output.ome: an OME-Zarr image whose level 0 is the volume */
        st = p->output.ome.levels != 0 ? sm_run_ome_writer(&p->output, nd, src->shape, src->dtype,
                                                           src->attributes, &w, err)
                                       : sm_writer_new(&spec, &w, err);
    }
    if (st == SM_OK) { /* level 0's C-order shard grid as a tiling of the volume */
        st = sm_tiling_init(&grid, nd, src->shape, zeros, src->shape,
                            spec.sharded ? spec.shard : spec.chunk, err);
    }
    if (st == SM_OK) {
        st = run_check_shards(grid.ntiles, p->memory_bytes, err);
    }
    if (st == SM_OK && grid.ntiles != sm_writer_nshards(sm_writer_level(w, 0))) {
        st = sm_err_set(err, SM_E_INTERNAL, __FILE__, __LINE__,
                        "plan of %llu shards for a grid of %llu", (unsigned long long)grid.ntiles,
                        (unsigned long long)sm_writer_nshards(sm_writer_level(w, 0)));
    }
    if (st == SM_OK && rank == 0 && hk->layout != NULL) {
        hk->layout(hk->user, &spec, grid.ntiles);
    }
    if (st == SM_OK) { /* convert's write partition; a shard costs its voxels */
        struct sm_read_unit u;
        memset(&u, 0, sizeof(u));
        u.bytes = sm_dtype_size(src->dtype);
        for (unsigned d = 0; d < nd; d++) {
            u.shape[d] = 1;
        }
        struct sm_part *parts = sm_calloc((size_t)nranks, sizeof(*parts));
        if (parts == NULL) {
            st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__,
                            "cannot allocate the plan of %d ranks", nranks);
        } else {
            sm_partition_tiles(&grid, &u, p->partition, nranks, parts);
            mine = parts[rank];
            sm_free(parts);
        }
    }
    in.src = src;
    in.nthreads = nthreads;
    for (unsigned d = nd; st == SM_OK && d-- > 0;) {
        in.stride[d] = d + 1 < nd ? in.stride[d + 1] * src->shape[d + 1] : 1;
    }
    if (st == SM_OK) {
        in.ts = sm_calloc((size_t)nthreads, sizeof(*in.ts));
        if (in.ts == NULL) {
            st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot allocate %d threads",
                            nthreads);
        }
    }
    for (int i = 0; st == SM_OK && in.have_hist && i < nthreads; i++) {
        st = sm_hist_init(&in.ts[i].hist, src->dtype, bins, lo, hi, err);
        if (st != SM_OK) {
            sm_err_where(err, "histogram");
        }
    }
    /* The source learns the box this rank reads (a gzip stream loads it here, within the
     * budget); agreed before the output directory is created, so a refused source leaves none. */
    if (st == SM_OK && src->plan != NULL) {
        uint64_t boff[SM_MAX_DIMS] = {0}, bshape[SM_MAX_DIMS] = {0};
        if (mine.count > 0) {
            sm_tiling_run_box(&grid, mine.first, mine.count, boff, bshape); /* bounding box */
        }
        st = src->plan(src->user, boff, bshape, p->memory_bytes, err);
    }
    st = run_agree(&agreed, st, err);
    const uint64_t t_open = sm_clock_ns() - t_start;
    st = run_begin(out, w, st, &agreed, err);
    /* Phase write: this rank's run of shards, then its flush. */
    struct sm_write_result wr = {0};
    run_progress_begin(&p->progress, "write", "shards",
                       w != NULL ? sm_writer_nshards(sm_writer_level(w, 0)) : 0);
    if (st == SM_OK) {
        const struct sm_write_job job = {mine.first,         mine.count,       NULL,
                                         nthreads,           fill_shard,       &in,
                                         p->progress.update, p->progress.user, p->stop};
        st = sm_write_shards(w, out, &job, &wr, err);
    }
    run_progress_end(&p->progress, st == SM_OK); /* every rank, success or not */
    st = run_agree(&agreed, run_stop_check(p->stop, st, err), err);
    if (st == SM_OK) {
        st = sm_output_flush(out, err);
    } else if (w != NULL) {
        /* a stop or a failure keeps what is done: the finished shards are flushed into place
         * for resume */
        struct sm_err ignored;
        sm_err_clear(&ignored);
        (void)sm_output_flush(out, &ignored);
    }
    st = run_agree(&agreed, run_stop_check(p->stop, st, err), err);
    if (st == SM_OK && sm_writer_levels(w) > 1) { /* levels 1.. of an OME-Zarr image */
        const uint64_t t0 = sm_clock_ns();
        const struct sm_run_pyramid py = {
            w, out, nthreads, p->memory_bytes, (uint64_t)1 << 30, p->progress, p->stop};
        st = run_agree(&agreed, sm_run_pyramid(&py, &wr, err), err);
        res->pyramid_ns = sm_clock_ns() - t0;
    }
    res->levels = w != NULL ? sm_writer_levels(w) : 0;
    /* The statistics over ranks (every rank still in step here). */
    uint64_t allreduce_ns = 0;
    if (st == SM_OK) {
        const uint64_t t0 = sm_clock_ns();
        st = reduce_stats(&in, &res->scan, err);
        allreduce_ns = sm_clock_ns() - t0;
    }
    if (st == SM_OK && hk->flushed != NULL) {
        const struct sm_run_flushed f = {w, sm_output_path(out), &res->scan.hist, src->attributes};
        st = hk->flushed(hk->user, &f, err);
    }
    /* Phase finish: every rank wrote and flushed; the records reach rank 0 by one gather and rank
     * 0 writes the marker from them (SPEC §6). */
    const uint64_t t_finish0 = sm_clock_ns();
    if (st == SM_OK) {
        st = run_finish(out, p->stop, err);
    }
    st = run_agree(&agreed, st, err);
    const uint64_t t_finish = sm_clock_ns() - t_finish0;
    const uint64_t t_total = sm_clock_ns() - t_start;
    if (st == SM_OK) {
        struct sm_output_stats os;
        sm_output_stats(out, &os);
        const double per = (double)nthreads;
        res->ranks = nranks;
        res->threads = nthreads;
        res->ndim = nd;
        memcpy(res->roi_shape, src->shape, nd * sizeof(uint64_t));
        res->passes = 1;
        res->scan.voxels = 1;
        for (unsigned d = 0; d < nd; d++) {
            res->scan.voxels *= src->shape[d];
        }
        res->output_checksum = res->scan.sums.sum;
        res->output_weighted_checksum = res->scan.sums.weighted;
        res->sync_ns = os.sync_ns;
        res->timing[SM_RUN_T_TOTAL] = run_ms(t_total);
        res->timing[SM_RUN_T_OPEN] = run_ms(t_open);
        res->timing[SM_RUN_T_HYDRATE] = run_ms(res->scan.fetch_ns) / per;
        res->timing[SM_RUN_T_PROCESS] = run_ms(res->scan.process_ns) / per;
        res->timing[SM_RUN_T_ALLREDUCE] = run_ms(allreduce_ns);
        res->timing[SM_RUN_T_WRITE] = run_ms(wr.encode_ns + wr.write_ns) / per + run_ms(os.sync_ns);
        res->timing[SM_RUN_T_FINISH] = run_ms(t_finish);
        res->output_path = sm_strdup(sm_output_path(out));
        /* shards and bytes of the whole output are rank 0's (set by finish); the rest summed */
        uint64_t counts[4] = {rank == 0 ? os.total_shards : 0, rank == 0 ? os.total_bytes : 0,
                              wr.written, wr.kept};
        st = sm_par_sum_u64(counts, 4, err);
        if (st == SM_OK) {
            res->output_shards = counts[0];
            res->output_bytes = counts[1];
            res->shards_written = counts[2];
            res->shards_kept = counts[3];
            st = run_reduce_timings(res, err);
        }
        if (st == SM_OK && res->output_path == NULL) {
            st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot copy the output path");
        }
        st = sm_par_agree(st, err);
    }
    for (int i = 0; in.ts != NULL && i < nthreads; i++) {
        sm_hist_destroy(&in.ts[i].hist);
    }
    sm_free(in.ts);
    sm_output_close(out); /* before the writer: it names the shards to clean up */
    sm_writer_free(w);
    return st;
}

sm_status sm_run_ingest(const struct sm_ingest_run *p, struct sm_run_result *res,
                        struct sm_err *err)
{
    memset(res, 0, sizeof(*res));
    bool entered = false;
    SM_TRY(run_ranks_enter(p->mpi_comm, &entered, err));
    const sm_status st = ingest_ranks(p, res, err);
    run_ranks_leave(entered);
    return st;
}
