/* The `convert` job (SPEC §1, §2 output, §5, §6): scan the ROI (histogram, checksums), derive the
 * normalization (scale, window, or percentiles of the global histogram), then write every shard
 * of the output grid: normalize to float32 exactly as SPEC §5 writes it, encode, put atomically,
 * and write the completion marker last. A rank keeps the decoded input of its tiles from the scan
 * when they fill a box holding its shards' input and it fits in half of limits.memory_bytes
 * (keep_plan); otherwise each shard's box is read again (through the encoded-object cache). Stage
 * times: `open` (store + metadata), `hydrate`/`decode` (input fetch/codec time of both phases),
 * `process` (statistics and normalization) and `write` (encode + put + flush + marker), thread sums
 * divided by the thread count; `total` is wall. Under MPI (docs/internals/ranks.md): every rank
 * scans its run of tiles, the statistics are summed over ranks (so every rank derives the same
 * window), every rank writes its run of the output shards (parallel.partition: `balanced` by input
 * bytes, or `block`), rank 0 begins the output and the others join it, every rank flushes, and rank
 * 0 writes the marker and the report only after every rank agreed on success at each phase. */
#include "jobs_run.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include <shardmill/alloc.h>
#include <shardmill/box.h>
#include <shardmill/clock.h>
#include <shardmill/codec.h>
#include <shardmill/par.h>
#include <shardmill/stats.h>
#include <shardmill/write.h>

#include "job_export.h"
#include "jobs.h"
#include "progress.h"
#include "report.h"

struct thread_state {
    struct sm_scratch *scratch;
    struct sm_buf in;
    struct sm_checksums sums; /* of the output values */
    uint64_t norm_ns;
};

struct convert {
    struct sm_array *a;
    enum sm_dtype in_dt;
    size_t in_elem;
    unsigned nd;
    const uint64_t *roi_off, *roi_shape;
    const uint8_t *keep; /* the decoded input box of this rank's tiles, or NULL */
    uint64_t keep_off[SM_MAX_DIMS], keep_shape[SM_MAX_DIMS]; /* that box, array coordinates */
    struct sm_norm norm;
    uint64_t ostride[SM_MAX_DIMS]; /* C-order strides of the output array, in elements */
    struct thread_state *ts;
    int nthreads;
};

/* The write driver's fill callback: the input values of the shard's box, normalized. */
static sm_status fill_shard(void *user, int thread, uint64_t shard, const uint64_t *offset,
                            const uint64_t *shape, void *data, size_t len, struct sm_err *err)
{
    (void)shard;
    struct convert *cv = user;
    struct thread_state *ts = &cv->ts[thread];
    size_t n = 1;
    uint64_t in_off[SM_MAX_DIMS];
    for (unsigned d = 0; d < cv->nd; d++) {
        n *= (size_t)shape[d];
        in_off[d] = cv->roi_off[d] + offset[d];
    }
    if (len != n * sizeof(float)) {
        SM_FAIL(err, SM_E_INTERNAL, "shard buffer of %zu bytes for %zu values", len, n);
    }
    SM_TRY(sm_buf_reserve(&ts->in, n * cv->in_elem, err));
    if (cv->keep != NULL) {
        const uint64_t zero[SM_MAX_DIMS] = {0};
        uint64_t rel[SM_MAX_DIMS];
        for (unsigned d = 0; d < cv->nd; d++) {
            rel[d] = in_off[d] - cv->keep_off[d];
        }
        const struct sm_box_view kv = {cv->nd, cv->in_elem, cv->keep_shape};
        const struct sm_box_view sv = {cv->nd, cv->in_elem, shape};
        sm_box_copy(&kv, cv->keep, rel, &sv, ts->in.ptr, zero, shape);
    } else {
        SM_TRY(sm_array_read_region(cv->a, in_off, shape, ts->in.ptr, n * cv->in_elem, ts->scratch,
                                    err));
    }
    const uint64_t t0 = sm_clock_ns();
    sm_normalize(&cv->norm, cv->in_dt, ts->in.ptr, n, data);
    sm_checksums_add_box(&ts->sums, SM_DT_FLOAT32, data, cv->nd, cv->ostride, offset, shape);
    ts->norm_ns += sm_clock_ns() - t0;
    return SM_OK;
}

/* The configuration text hashed into provenance: everything that determines the output bytes,
 * so thread counts, report paths and progress settings do not change zarr.json. */
static void config_hash(const char *effective, char hex[65])
{
    static const char *const skip[] = {"parallel.",    "report",        "progress",
                                       "input.cache.", "input.http.",   "input.index_cache.",
                                       "limits.",      "output.exists", "output.path",
                                       "output.fsync", "output.sync",   NULL};
    size_t n = strlen(effective);
    char *text = sm_malloc(n + 1);
    size_t w = 0;
    for (const char *line = effective; text != NULL && *line != '\0';) {
        const char *nl = strchr(line, '\n');
        size_t len = nl != NULL ? (size_t)(nl - line) + 1 : strlen(line);
        bool drop = false;
        for (size_t i = 0; skip[i] != NULL && !drop; i++) {
            drop = strncmp(line, skip[i], strlen(skip[i])) == 0;
        }
        drop = drop || strncmp(line, "export.", 7) == 0; /* the HDF5 copy: not the Zarr bytes */
        if (!drop) {
            memcpy(text + w, line, len);
            w += len;
        }
        line += len;
    }
    sm_sha256_hex(text != NULL ? text : effective, text != NULL ? w : n, hex);
    sm_free(text);
}

static const char *norm_name(enum sm_norm_kind k)
{
    return k == SM_CFG_NORM_SCALE ? "scale" : k == SM_CFG_NORM_WINDOW ? "window" : "percentile";
}

static json_t *norm_json(const struct sm_job_config *c, const struct sm_norm *nm)
{
    json_t *o = json_pack("{s:s}", "mode", norm_name(c->normalize.mode));
    /* scale is reported as the window it equals before clamping: out = (v - 0) / (divisor - 0) */
    json_object_set_new(o, "lo", json_real(nm->mode == SM_NORM_SCALE ? 0.0 : nm->lo));
    json_object_set_new(o, "hi", json_real(nm->mode == SM_NORM_SCALE ? nm->divisor : nm->hi));
    if (nm->mode == SM_NORM_SCALE) {
        json_object_set_new(o, "divisor", json_real(nm->divisor));
    }
    if (c->normalize.mode == SM_CFG_NORM_PERCENTILE) {
        json_object_set_new(o, "percentiles", json_pack("[f,f]", c->normalize.lo, c->normalize.hi));
    }
    return o;
}

static json_t *provenance(const struct sm_job_config *c, const struct sm_scan_setup *su,
                          const struct sm_scan_result *r, const struct sm_norm *nm, unsigned nd)
{
    char hex[65];
    config_hash(c->effective != NULL ? c->effective : "", hex);
    json_t *hist = json_pack(
        "{s:i,s:[f,f],s:o,s:o,s:o,s:o,s:o,s:o}", "bins", (int)r->hist.bins, "range", r->hist.lo,
        r->hist.hi, "voxels", sm_json_u64(r->voxels), "underflow", sm_json_u64(r->hist.underflow),
        "overflow", sm_json_u64(r->hist.overflow), "nan", sm_json_u64(r->hist.nan), "checksum",
        json_integer((json_int_t)r->sums.sum), "weighted_checksum", sm_json_u64(r->sums.weighted));
    json_t *p = json_object();
    json_object_set_new(p, "engine", sm_json_engine());
    json_object_set_new(p, "config_sha256", json_string(hex));
    json_object_set_new(p, "input",
                        json_pack("{s:s,s:s}", "store", c->input.store, "array",
                                  c->input.array != NULL ? c->input.array : ""));
    json_object_set_new(p, "roi",
                        json_pack("{s:o,s:o}", "offset", sm_json_dims(su->off, nd), "shape",
                                  sm_json_dims(su->shape, nd)));
    json_object_set_new(p, "normalization", norm_json(c, nm));
    json_object_set_new(p, "histogram", hist);
    return json_pack("{s:o}", "shardmill", p);
}

static sm_status make_norm(const struct sm_job_config *c, const struct sm_hist *h,
                           struct sm_norm *nm, struct sm_err *err)
{
    memset(nm, 0, sizeof(*nm));
    switch (c->normalize.mode) {
    case SM_CFG_NORM_SCALE:
        nm->mode = SM_NORM_SCALE;
        nm->divisor = c->normalize.divisor;
        return SM_OK;
    case SM_CFG_NORM_WINDOW:
        nm->mode = SM_NORM_WINDOW;
        nm->lo = c->normalize.lo;
        nm->hi = c->normalize.hi;
        return SM_OK;
    case SM_CFG_NORM_PERCENTILE:
        nm->mode = SM_NORM_WINDOW;
        nm->lo = sm_hist_percentile(h, c->normalize.lo);
        nm->hi = sm_hist_percentile(h, c->normalize.hi);
        if (!(nm->hi > nm->lo)) {
            sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                       "percentiles %g and %g give an empty window [%g, %g] for this data",
                       c->normalize.lo, c->normalize.hi, nm->lo, nm->hi);
            sm_err_where(err, "normalize");
            return err->status;
        }
        return SM_OK;
    }
    return SM_OK;
}

/* SPEC §1: a rank keeps its decoded input for the write phase when it fits half of
 * limits.memory_bytes. It can when its run of tiles fills a box (one rank: the ROI; several:
 * e.g. whole tile rows or slabs) that holds the input of every shard of its run; then the scan
 * copies each tile into that box (su->params.keep) and the shards are filled from it. Returns
 * the buffer (NULL: re-read through the cache) and its size in *bytes. */
static uint8_t *keep_plan(const struct sm_job_config *c, const struct sm_array_meta *m,
                          struct sm_scan_setup *su, const struct sm_part *tiles,
                          const struct sm_tiling *grid, const struct sm_part *shards, size_t *bytes)
{
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS], soff[SM_MAX_DIMS], sshape[SM_MAX_DIMS];
    if (!sm_tiling_run_box(&su->tiling, tiles->first, tiles->count, off, shape)) {
        return NULL;
    }
    if (shards->count > 0) {
        sm_tiling_run_box(grid, shards->first, shards->count, soff, sshape); /* bounding box */
        for (unsigned d = 0; d < m->ndim; d++) {
            if (soff[d] < off[d] || soff[d] + sshape[d] > off[d] + shape[d]) {
                return NULL; /* some of its shards need input another rank scanned */
            }
        }
    }
    size_t n = sm_dtype_size(m->dtype);
    for (unsigned d = 0; d < m->ndim; d++) {
        n *= (size_t)shape[d];
    }
    if (n > c->limits.memory_bytes / 2) {
        return NULL;
    }
    uint8_t *keep = sm_malloc(n == 0 ? 1 : n); /* NULL (re-read) if it cannot be had */
    if (keep != NULL) {
        su->params.keep = keep;
        memcpy(su->params.keep_offset, off, sizeof(off));
        memcpy(su->params.keep_shape, shape, sizeof(shape));
        *bytes = n;
    }
    return keep;
}

sm_status sm_job_convert(const struct sm_job_config *c, const char *report_path, struct sm_err *err)
{
    const uint64_t t_start = sm_clock_ns();
    const int rank = sm_par_rank(), nranks = sm_par_size();
    struct sm_store *store = NULL;
    struct sm_array *a = NULL;
    struct sm_output *out = NULL;
    struct sm_writer *w = NULL;
    struct sm_scan_result r = {0};
    struct convert cv = {0};
    uint8_t *keep = NULL;
    json_t *attrs = NULL;
    struct sm_job_export *ex = NULL; /* export.hdf5 (jobs/job_export.c), NULL when none */
    const struct sm_output_opts oopts = sm_job_output_opts(c);
    /* Phase open: refuse an output or export that overlaps the input (SPEC §6) and an existing
     * output before any expensive work, open the input. Every phase ends with sm_par_agree, so
     * all ranks continue or all stop with the same error. */
    sm_status st = sm_par_agree(sm_job_check_paths(c, err), err);
    if (st == SM_OK) {
        st = sm_par_agree(sm_output_open(c->output.path, &oopts, &out, err), err);
    }
    if (st == SM_OK) {
        st = sm_par_agree(sm_job_export_open(c, sm_output_path(out), &ex, err), err);
    }
    if (st == SM_OK) {
        st = sm_job_open_input(c, &store, &a, err); /* collective (metadata broadcast) */
    }
    const uint64_t t_open = sm_clock_ns() - t_start;
    struct sm_scan_setup su;
    const struct sm_array_meta *m = st == SM_OK ? sm_array_meta(a) : NULL;
    if (st == SM_OK) {
        st = sm_job_scan_setup(c, m, &su, err);
    }
    st = sm_par_agree(st, err);
    /* Phase scan: this rank's tiles, then the global statistics. */
    size_t keep_bytes = 0;
    uint64_t allreduce_ns = 0;
    struct sm_tiling grid; /* the output shard grid as a tiling of the ROI */
    struct sm_output_spec layout;
    struct sm_part shards = {0, 0, 0};
    if (st == SM_OK) {
        struct sm_part mine;
        struct sm_progress pg;
        sm_progress_begin(&pg, c, "convert", "scan", "tiles", su.tiling.ntiles);
        su.params.progress = sm_progress_update;
        su.params.progress_user = &pg;
        su.params.stop = sm_signals_flag();
        st = sm_job_rank_part(c, m, &su.tiling, &mine, err);
        if (st == SM_OK) {
            st = sm_job_shard_grid(c, m, &su, &grid, &layout, err);
        }
        if (st == SM_OK && rank == 0) {
            sm_job_layout_warn(&layout, grid.ntiles);
        }
        if (st == SM_OK) {
            st = sm_job_rank_part(c, m, &grid, &shards, err);
        }
        if (st == SM_OK) {
            keep = keep_plan(c, m, &su, &mine, &grid, &shards, &keep_bytes);
        }
        if (st == SM_OK) {
            st = sm_scan_tiles(a, &su.tiling, mine.first, mine.count, &su.params, &r, err);
        }
        sm_progress_end(&pg, st == SM_OK); /* every rank, success or not */
        const uint64_t t0 = sm_clock_ns();
        st = sm_par_agree(sm_job_stop_check(st, err), err);
        if (st == SM_OK) {
            st = sm_job_reduce_scan(&r, err);
        }
        allreduce_ns += sm_clock_ns() - t0;
    }
    const uint64_t t_scan = sm_clock_ns() - t_start;
    /* Phase begin: the same window, zarr.json and writer on every rank (they derive from the
     * global statistics only); rank 0 prepares the directory, then the others attach to it. */
    struct sm_norm nm;
    bool agreed = st != SM_OK; /* a failure here is already every rank's */
    if (st == SM_OK) {
        st = make_norm(c, &r.hist, &nm, err);
    }
    struct sm_output_spec spec;
    if (st == SM_OK) {
        attrs = provenance(c, &su, &r, &nm, m->ndim);
        st = sm_job_output_spec(c, m->ndim, su.shape, SM_DT_FLOAT32, attrs, &spec, err);
    }
    if (st == SM_OK && c->output.dtype != NULL && strcmp(c->output.dtype, "float32") != 0) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                   "convert writes float32 (the SPEC §5 normalization); got '%s'", c->output.dtype);
        sm_err_where(err, "output.dtype");
        st = err->status;
    }
    if (st == SM_OK) {
        st = sm_writer_new(&spec, &w, err);
    }
    if (st == SM_OK && rank == 0) {
        st = sm_output_begin(out, w, err);
    }
    if (!agreed) {
        st = sm_par_agree(st, err);
        agreed = st != SM_OK;
    }
    if (st == SM_OK && rank != 0) {
        st = sm_output_join(out, w, err);
    }
    if (!agreed) {
        st = sm_par_agree(st, err);
        agreed = st != SM_OK;
    }
    if (st == SM_OK) { /* one journal file per rank and run: rank 0's token names them all */
        uint64_t token = rank == 0 ? sm_output_run_token(out) : 0;
        st = sm_par_bcast(&token, sizeof(token), 0, err);
        sm_output_set_run(out, token, rank);
    }
    const int nthreads =
        c->parallel.threads > 0 ? (int)c->parallel.threads : sm_write_default_threads();
    struct sm_write_result wr = {0};
    if (st == SM_OK) {
        cv.a = a;
        cv.in_dt = m->dtype;
        cv.in_elem = sm_dtype_size(m->dtype);
        cv.nd = m->ndim;
        cv.roi_off = su.off;
        cv.roi_shape = su.shape;
        cv.keep = keep;
        memcpy(cv.keep_off, su.params.keep_offset, sizeof(cv.keep_off));
        memcpy(cv.keep_shape, su.params.keep_shape, sizeof(cv.keep_shape));
        cv.norm = nm;
        for (unsigned d = m->ndim; d-- > 0;) {
            cv.ostride[d] = d + 1 < m->ndim ? cv.ostride[d + 1] * su.shape[d + 1] : 1;
        }
        cv.nthreads = nthreads;
        cv.ts = sm_calloc((size_t)nthreads, sizeof(*cv.ts));
        if (cv.ts == NULL) {
            st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot allocate %d threads",
                            nthreads);
        }
        for (int i = 0; st == SM_OK && i < nthreads; i++) {
            st = sm_scratch_new(&cv.ts[i].scratch, err);
        }
    }
    /* Phase write: this rank's block of shards, then its flush (every rank flushes: syncfs
     * covers one node, directory fsyncs cover this process's entries). */
    struct sm_progress pg;
    sm_progress_begin(&pg, c, "convert", "write", "shards", w != NULL ? sm_writer_nshards(w) : 0);
    if (st == SM_OK && grid.ntiles != sm_writer_nshards(w)) {
        st = sm_err_set(err, SM_E_INTERNAL, __FILE__, __LINE__,
                        "plan of %llu shards for a grid of %llu", (unsigned long long)grid.ntiles,
                        (unsigned long long)sm_writer_nshards(w));
    }
    if (st == SM_OK) {
        const struct sm_write_job job = {shards.first,       shards.count, NULL,
                                         nthreads,           fill_shard,   &cv,
                                         sm_progress_update, &pg,          sm_signals_flag()};
        st = sm_write_shards(w, out, &job, &wr, err);
    }
    sm_progress_end(&pg, st == SM_OK); /* every rank, success or not */
    if (!agreed) {
        st = sm_par_agree(sm_job_stop_check(st, err), err);
        agreed = st != SM_OK;
    }
    if (st == SM_OK) {
        st = sm_output_flush(out, err);
    } else if (st == SM_E_STOPPED && w != NULL) {
        /* A stop keeps what is done: the shards this rank finished are flushed into place
         * (SYNCFS renames its staged ones), so resume keeps them; the stop stays the error. */
        struct sm_err ignored;
        sm_err_clear(&ignored);
        (void)sm_output_flush(out, &ignored);
    }
    if (!agreed) {
        st = sm_par_agree(sm_job_stop_check(st, err), err);
        agreed = st != SM_OK;
    }
    /* Phase export (export.hdf5): collective, agreed inside; a failure leaves no marker. */
    if (st == SM_OK) {
        st = sm_job_export_run(ex, c, w, sm_output_path(out), &r.hist, attrs, err);
    }
    /* Phase finish: only now that every rank wrote and flushed, every rank's shard records are
     * gathered on rank 0 (MPI; no rank reads another's journal) and rank 0 writes the marker. */
    const uint64_t t_finish0 = sm_clock_ns();
    if (st == SM_OK) {
        st = sm_job_gather_records(out, err);
    }
    if (st == SM_OK && rank == 0) {
        st = sm_job_stop_check(st, err); /* a signal after the last agreement: still no marker */
    }
    if (st == SM_OK && rank == 0) {
        st = sm_output_finish(out, err);
    }
    const uint64_t t_finish = sm_clock_ns() - t_finish0;
    if (!agreed) {
        st = sm_par_agree(st, err);
        agreed = st != SM_OK;
    }
    const uint64_t t_total = sm_clock_ns() - t_start;
    uint64_t osum[2] = {0, 0};
    uint64_t norm_ns = 0;
    for (int i = 0; cv.ts != NULL && i < cv.nthreads; i++) {
        osum[0] += cv.ts[i].sums.sum;
        osum[1] += cv.ts[i].sums.weighted;
        norm_ns += cv.ts[i].norm_ns;
        sm_scratch_free(cv.ts[i].scratch);
        sm_buf_free(&cv.ts[i].in);
    }
    sm_free(cv.ts);
    if (st == SM_OK) {
        const uint64_t t0 = sm_clock_ns();
        st = sm_par_sum_u64(osum, 2, err);
        allreduce_ns += sm_clock_ns() - t0;
    }
    if (st == SM_OK) {
        struct sm_array_stats as;
        sm_array_stats(a, &as);
        struct sm_output_stats os;
        sm_output_stats(out, &os);
        const double per = (double)nthreads;
        json_t *rep = json_object();
        json_object_set_new(rep, "engine", sm_json_engine());
        json_object_set_new(rep, "job", json_string("convert"));
        json_object_set_new(rep, "ranks", json_integer(nranks));
        json_object_set_new(rep, "threads", json_integer(nthreads));
        json_object_set_new(rep, "input", sm_job_input_json(c, m));
        json_object_set_new(rep, "roi",
                            json_pack("{s:o,s:o}", "offset", sm_json_dims(su.off, m->ndim), "shape",
                                      sm_json_dims(su.shape, m->ndim)));
        json_object_set_new(rep, "tile", sm_json_dims(su.tile, m->ndim));
        json_object_set_new(rep, "passes", json_integer(1));
        json_t *res = json_object();
        json_object_set_new(res, "voxels", sm_json_u64(r.voxels));
        json_object_set_new(res, "voxels_processed", sm_json_u64(r.voxels));
        json_object_set_new(res, "tiles", sm_json_u64(r.tiles));
        json_object_set_new(res, "checksum", json_integer((json_int_t)r.sums.sum));
        json_object_set_new(res, "weighted_checksum", sm_json_u64(r.sums.weighted));
        json_object_set_new(res, "histogram", sm_json_hist(&r.hist));
        json_object_set_new(res, "normalization", norm_json(c, &nm));
        json_object_set_new(res, "output_checksum", json_integer((json_int_t)osum[0]));
        json_object_set_new(res, "output_weighted_checksum", sm_json_u64(osum[1]));
        json_object_set_new(rep, "result", res);
        json_t *io = sm_json_io(store, &as);
        json_object_set_new(rep, "io", io);
        json_t *timing = json_pack(
            "{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "total", sm_ms(t_total), "open", sm_ms(t_open),
            "hydrate", sm_ms(as.fetch_ns) / per, "decode", sm_ms(as.decode_ns) / per, "process",
            sm_ms(r.process_ns + norm_ns) / per, "allreduce", sm_ms(allreduce_ns), "write",
            sm_ms(wr.encode_ns + wr.write_ns) / per + sm_ms(os.sync_ns), "scan_wall", sm_ms(t_scan),
            "finish", sm_ms(t_finish));
        json_object_set_new(rep, "timing_ms", timing);
        sm_job_export_report(ex, rep, timing);
        /* shards and bytes of the whole output are rank 0's (set by finish); written is summed */
        uint64_t counts[2] = {sm_par_rank() == 0 ? os.total_shards : 0,
                              sm_par_rank() == 0 ? os.total_bytes : 0};
        uint64_t written = os.shards_written, peak = sm_peak_rss_bytes();
        uint64_t kept[2] = {keep != NULL ? 1 : 0, keep_bytes}; /* ranks that kept, bytes */
        st = sm_job_reduce_counters(io, err);
        if (st == SM_OK) {
            st = sm_job_reduce_timings(timing, err);
        }
        if (st == SM_OK) {
            st = sm_par_sum_u64(counts, 2, err);
        }
        if (st == SM_OK) {
            st = sm_par_sum_u64(&written, 1, err);
        }
        if (st == SM_OK) {
            st = sm_par_sum_u64(kept, 2, err);
        }
        if (st == SM_OK) {
            st = sm_par_max_u64(&peak, 1, err);
        }
        json_object_set_new(rep, "memory",
                            json_pack("{s:o,s:b,s:o,s:o}", "peak_rss_bytes", sm_json_u64(peak),
                                      "kept_input", kept[0] == (uint64_t)nranks, "kept_input_ranks",
                                      sm_json_u64(kept[0]), "kept_input_bytes",
                                      sm_json_u64(kept[1])));
        json_object_set_new(rep, "output",
                            json_pack("{s:s,s:o,s:o,s:o,s:b}", "path", sm_output_path(out),
                                      "shards", sm_json_u64(counts[0]), "bytes",
                                      sm_json_u64(counts[1]), "written", sm_json_u64(written),
                                      "complete", true));
        const double total_ms = json_number_value(json_object_get(timing, "total"));
        const double secs = total_ms / 1e3;
        json_object_set_new(
            rep, "figure_of_merit",
            json_pack("{s:f}", "voxels_per_s", secs > 0 ? (double)r.voxels / secs : 0.0));
        const char *path = report_path != NULL ? report_path : c->report;
        if (st == SM_OK && rank == 0) {
            st = sm_report_emit(path, rep, err); /* the JSON to `path`, a summary to stdout */
        }
        json_decref(rep);
        st = sm_par_agree(st, err); /* phase report: rank 0's failure is every rank's */
    }
    json_decref(attrs);
    sm_job_export_free(ex);
    sm_output_close(out); /* before the writer: it names the shards to clean up */
    sm_writer_free(w);
    sm_free(keep);
    sm_scan_result_destroy(&r);
    sm_array_close(a);
    sm_store_close(store);
    return st;
}
