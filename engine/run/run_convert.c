/* The convert (SPEC §1, §2 output, §5, §6): the ROI's statistics (histogram, checksums), the
 * normalization (scale, window, none, or percentiles of the global histogram) and every shard of
 * the output grid: values normalized to float32 exactly as SPEC §5 writes them (none: the input's
 * values, in its type or a lossless wider one), encoded, put atomically, the marker last.
 *
 * Two protocols (docs/internals/pipeline.md):
 * - one pass (scale, window, none: nothing needs the statistics before writing): the scan's work
 *   is the rank's run of output shards; each shard is written from the input region it covers,
 *   whose histogram and checksums are counted on the way (per thread, merged in thread order), so
 *   the input is read once. zarr.json begins without its `shardmill.histogram` provenance
 *   (write.h `pending`) and is restated with it after the statistics are reduced over ranks,
 *   before the marker; shards resume keeps are still read and normalized (the driver keeps one
 *   only when its values' digest equals its record's: an input changed since is rewritten).
 * - two passes (percentile): scan the rank's tiles, reduce, derive the window, then write. A rank
 *   keeps the decoded input of its tiles from the scan when they fill a box holding its shards'
 *   input and it fits in half of memory_bytes (less the chunk memos; keep_plan); otherwise each
 *   shard's box is read again (through the encoded-object cache).
 * Reads of tiles and shards go through a per-thread chunk memo (tile.h), so regions smaller than
 * an input chunk do not decode it again. Stage times: `open` (store + metadata), `hydrate`/
 * `decode` (input fetch/codec time), `process` (statistics and normalization) and `write`
 * (encode + put + flush), thread sums divided by the thread count; `total` is wall. Under MPI
 * (docs/internals/ranks.md): the statistics are summed over ranks (so every rank derives the
 * same window and provenance), every rank writes its run of the output shards (partition), rank
 * 0 begins the output and the others join it, every rank flushes, and rank 0 writes the marker
 * only after every rank agreed on success at each phase. */
#include "run_int.h"

#include <jansson.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/box.h"
#include "shardmill/clock.h"
#include "shardmill/meta.h"
#include "shardmill/par.h"
#include "shardmill/sm_version.h"
#include "shardmill/url.h"

struct thread_state {
    struct sm_scratch *scratch;
    struct sm_chunk_memo *memo;
    struct sm_buf in;
    struct sm_checksums sums; /* of the output values */
    uint64_t norm_ns;
    /* one pass: the statistics of the input this thread read */
    struct sm_hist hist;
    struct sm_checksums in_sums;
    uint64_t voxels, scan_ns;
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
    bool one_pass, keep_values; /* keep_values: normalize none */
    enum sm_dtype out_dt;
    size_t out_elem;
    uint64_t astride[SM_MAX_DIMS]; /* C-order strides of the input array, in elements */
    uint64_t ostride[SM_MAX_DIMS]; /* C-order strides of the output array, in elements */
    struct thread_state *ts;
    int nthreads;
};

/* The write driver's fill callback: the input values of the shard's box, normalized (none: cast
 * to the output type); in one pass also counted into the thread's statistics. The driver fills a
 * shard resume may keep too: the values' digest decides whether it is kept. */
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
    if (len != n * cv->out_elem) {
        SM_FAIL(err, SM_E_INTERNAL, "shard buffer of %zu bytes for %zu values", len, n);
    }
    /* the same type kept: read straight into the shard's buffer */
    const bool direct = cv->keep_values && cv->out_dt == cv->in_dt;
    uint8_t *in = direct ? data : NULL;
    if (in == NULL) {
        SM_TRY(sm_buf_reserve(&ts->in, n * cv->in_elem, err));
        in = ts->in.ptr;
    }
    if (cv->keep != NULL) {
        const uint64_t zero[SM_MAX_DIMS] = {0};
        uint64_t rel[SM_MAX_DIMS];
        for (unsigned d = 0; d < cv->nd; d++) {
            rel[d] = in_off[d] - cv->keep_off[d];
        }
        const struct sm_box_view kv = {cv->nd, cv->in_elem, cv->keep_shape};
        const struct sm_box_view sv = {cv->nd, cv->in_elem, shape};
        sm_box_copy(&kv, cv->keep, rel, &sv, in, zero, shape);
    } else {
        SM_TRY(sm_chunk_memo_read(ts->memo, cv->a, in_off, shape, in, n * cv->in_elem, ts->scratch,
                                  err));
    }
    uint64_t t0 = sm_clock_ns();
    if (cv->one_pass) {
        sm_hist_add(&ts->hist, in, n);
        sm_checksums_add_box(&ts->in_sums, cv->in_dt, in, cv->nd, cv->astride, in_off, shape);
        ts->voxels += n;
        const uint64_t t1 = sm_clock_ns();
        ts->scan_ns += t1 - t0;
        t0 = t1;
    }
    if (cv->keep_values) {
        if (!direct) {
            sm_cast_values(cv->in_dt, in, n, cv->out_dt, data);
        }
    } else {
        sm_normalize(&cv->norm, cv->in_dt, in, n, data);
    }
    sm_checksums_add_box(&ts->sums, cv->out_dt, data, cv->nd, cv->ostride, offset, shape);
    ts->norm_ns += sm_clock_ns() - t0;
    return SM_OK;
}

static const char *norm_name(enum sm_run_norm_mode k)
{
    return k == SM_RUN_NORM_SCALE    ? "scale"
           : k == SM_RUN_NORM_WINDOW ? "window"
           : k == SM_RUN_NORM_NONE   ? "none"
                                     : "percentile";
}

static json_t *norm_json(const struct sm_run_norm *cfg, const struct sm_norm *nm)
{
    json_t *o = json_pack("{s:s}", "mode", norm_name(cfg->mode));
    if (cfg->mode == SM_RUN_NORM_NONE) { /* the values are kept: no window */
        json_object_set_new(o, "lo", json_null());
        json_object_set_new(o, "hi", json_null());
        return o;
    }
    /* scale is reported as the window it equals before clamping: out = (v - 0) / (divisor - 0) */
    json_object_set_new(o, "lo", json_real(nm->mode == SM_NORM_SCALE ? 0.0 : nm->lo));
    json_object_set_new(o, "hi", json_real(nm->mode == SM_NORM_SCALE ? nm->divisor : nm->hi));
    if (nm->mode == SM_NORM_SCALE) {
        json_object_set_new(o, "divisor", json_real(nm->divisor));
    }
    if (cfg->mode == SM_RUN_NORM_PERCENTILE) {
        json_object_set_new(o, "percentiles", json_pack("[f,f]", cfg->lo, cfg->hi));
    }
    return o;
}

static json_t *dims_json(const uint64_t *v, unsigned n)
{
    json_t *a = json_array();
    for (unsigned i = 0; i < n; i++) {
        json_array_append_new(a, sm_json_u64(v[i]));
    }
    return a;
}

static json_t *provenance(const struct sm_convert_run *p, const struct sm_run_setup *su,
                          const struct sm_scan_result *r, const struct sm_norm *nm, unsigned nd,
                          const char *meta_sha256)
{
    char hex[65];
    if (p->config_sha256 == NULL) {
        sm_sha256_hex("", 0, hex);
    } else {
        snprintf(hex, sizeof(hex), "%s", p->config_sha256);
    }
    /* r NULL: the statistics are pending (one pass: sm_output_restate adds them) */
    json_t *hist =
        r == NULL ? NULL
                  : json_pack("{s:i,s:[f,f],s:o,s:o,s:o,s:o,s:o,s:o}", "bins", (int)r->hist.bins,
                              "range", r->hist.lo, r->hist.hi, "voxels", sm_json_u64(r->voxels),
                              "underflow", sm_json_u64(r->hist.underflow), "overflow",
                              sm_json_u64(r->hist.overflow), "nan", sm_json_u64(r->hist.nan),
                              "checksum", json_integer((json_int_t)r->sums.sum),
                              "weighted_checksum", sm_json_u64(r->sums.weighted));
    json_t *pv = json_object();
    json_object_set_new(
        pv, "engine",
        json_pack("{s:s,s:s}", "version", SM_VERSION_STRING, "commit", SM_GIT_COMMIT));
    json_object_set_new(pv, "config_sha256", json_string(hex));
    /* the input by content too: a resume whose input metadata changed is refused naming it (its
     * values are bound shard by shard through the records' digests); its URL without its
     * credentials */
    char shown[SM_URL_REDACT_MAX];
    json_object_set_new(pv, "input",
                        json_pack("{s:s,s:s,s:s}", "store",
                                  sm_url_redact(p->c.input.store, shown, sizeof(shown)), "array",
                                  p->c.input.array != NULL ? p->c.input.array : "",
                                  "metadata_sha256", meta_sha256));
    json_object_set_new(pv, "roi",
                        json_pack("{s:o,s:o}", "offset", dims_json(su->off, nd), "shape",
                                  dims_json(su->shape, nd)));
    json_object_set_new(pv, "normalization", norm_json(&p->normalize, nm));
    if (hist != NULL) {
        json_object_set_new(pv, "histogram", hist);
    }
    return json_pack("{s:o}", "shardmill", pv);
}

static sm_status make_norm(const struct sm_run_norm *cfg, const struct sm_hist *h,
                           struct sm_norm *nm, struct sm_err *err)
{
    memset(nm, 0, sizeof(*nm));
    switch (cfg->mode) {
    case SM_RUN_NORM_NONE: /* unused: the values are cast, not normalized */
    case SM_RUN_NORM_SCALE:
        nm->mode = SM_NORM_SCALE;
        nm->divisor = cfg->divisor;
        return SM_OK;
    case SM_RUN_NORM_WINDOW:
        nm->mode = SM_NORM_WINDOW;
        nm->lo = cfg->lo;
        nm->hi = cfg->hi;
        return SM_OK;
    case SM_RUN_NORM_PERCENTILE:
        nm->mode = SM_NORM_WINDOW;
        nm->lo = sm_hist_percentile(h, cfg->lo);
        nm->hi = sm_hist_percentile(h, cfg->hi);
        if (!(nm->hi > nm->lo)) {
            sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                       "percentiles %g and %g give an empty window [%g, %g] for this data", cfg->lo,
                       cfg->hi, nm->lo, nm->hi);
            sm_err_where(err, "normalize");
            return err->status;
        }
        return SM_OK;
    }
    return SM_OK;
}

/* SPEC §1: a rank keeps its decoded input for the write phase when it fits half of memory_bytes.
 * It can when its run of tiles fills a box (one rank: the ROI; several: e.g. whole tile rows or
 * slabs) that holds the input of every shard of its run; then the scan copies each tile into that
 * box (su->params.keep) and the shards are filled from it. Returns the buffer (NULL: re-read
 * through the cache) and its size in *bytes. */
static uint8_t *keep_plan(uint64_t memory_bytes, const struct sm_array_meta *m,
                          struct sm_run_setup *su, const struct sm_part *tiles,
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
    if (n > memory_bytes / 2 - run_memo_total(memory_bytes)) {
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

/* One pass: the provenance member zarr.json gets only once the statistics are reduced. */
#define PENDING_ATTR "shardmill/histogram"

/* The output's type (SPEC §2): float32, or with normalize none the input's type or output.dtype
 * when that holds every input value. */
static sm_status run_output_dtype(const struct sm_run_norm *nm, const struct sm_run_output *o,
                                  enum sm_dtype in, enum sm_dtype *out, struct sm_err *err)
{
    if (nm->mode != SM_RUN_NORM_NONE) {
        *out = SM_DT_FLOAT32;
        if (o->dtype_set && o->dtype != SM_DT_FLOAT32) {
            sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                       "a normalized output is float32; %s needs normalize.mode: none",
                       sm_dtype_name(o->dtype));
            sm_err_where(err, "output.dtype");
            return err->status;
        }
        return SM_OK;
    }
    *out = o->dtype_set ? o->dtype : in;
    if (!sm_cast_lossless(in, *out)) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                   "%s -> %s is a narrowing cast (not every %s value is a %s value); normalize "
                   "none keeps values: use the input's type or a wider one",
                   sm_dtype_name(in), sm_dtype_name(*out), sm_dtype_name(in), sm_dtype_name(*out));
        sm_err_where(err, "output.dtype");
        return err->status;
    }
    return SM_OK;
}

static sm_status convert_ranks(const struct sm_convert_run *p, struct sm_run_result *res,
                               struct sm_err *err)
{
    const struct sm_run_common *c = &p->c;
    const struct sm_run_hooks *hk = &p->hooks;
    const uint64_t t_start = sm_clock_ns();
    const int rank = sm_par_rank(), nranks = sm_par_size();
    struct sm_output *out = NULL;
    struct sm_writer *w = NULL;
    struct sm_scan_result *r = &res->scan;
    struct convert cv = {0};
    uint8_t *keep = NULL;
    json_t *attrs = NULL;
    struct sm_writer *w_final = NULL; /* one pass: w with the statistics in its zarr.json */
    char meta_sha[65] = "";           /* of the input's metadata documents */
    bool agreed = false;              /* the failure in st is every rank's */
    /* Phase open: the caller's checks, then an existing output is refused before any expensive
     * work, then the input is opened. Every phase ends with an agreement, so all ranks continue
     * or all stop with the same error. */
    sm_status st = SM_OK;
    if (p->output.path == NULL) {
        st = sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "no output path given");
        sm_err_where(err, "output.path");
    }
    if (st == SM_OK && hk->prepare != NULL) {
        st = hk->prepare(hk->user, err);
    }
    st = sm_par_agree(st, err);
    if (st == SM_OK) {
        st = sm_par_agree(sm_output_open(p->output.path, &p->output.policy, &out, err), err);
        if (st == SM_OK) {
            sm_output_set_stop(out, c->stop);
        }
    }
    if (st == SM_OK && hk->opened != NULL) {
        st = sm_par_agree(hk->opened(hk->user, sm_output_path(out), err), err);
    }
    if (st == SM_OK) { /* collective (metadata broadcast) */
        st = run_open_input(&c->input, c->memory_bytes, &res->store, &res->array, meta_sha, err);
        if (st == SM_OK) {
            sm_array_set_stop(res->array, c->stop);
        }
    }
    const uint64_t t_open = sm_clock_ns() - t_start;
    struct sm_run_setup su;
    const struct sm_array_meta *m = st == SM_OK ? sm_array_meta(res->array) : NULL;
    if (st == SM_OK) {
        st = sm_run_setup(c, m, &su, err);
    }
    st = sm_par_agree(st, err);
    agreed = st != SM_OK;
    /* Phase plan: this rank's tiles and shards. Then, with percentile only, phase scan: this
     * rank's tiles, then the global statistics (one pass counts them while writing). */
    /* one pass unless percentile needs the statistics first, or an OME-Zarr image (its group
     * document holds the provenance: written once, after the scan) */
    const bool one_pass = p->normalize.mode != SM_RUN_NORM_PERCENTILE && p->output.ome.levels == 0;
    size_t keep_bytes = 0;
    uint64_t allreduce_ns = 0;
    struct sm_tiling grid; /* the output shard grid as a tiling of the ROI */
    struct sm_output_spec layout;
    struct sm_part shards = {0, 0, 0}, mine = {0, 0, 0};
    if (st == SM_OK) {
        su.params.progress = c->progress.update;
        su.params.progress_user = c->progress.user;
        su.params.stop = c->stop;
        st = run_rank_part(c->partition, m, &su.tiling, &mine, err);
        if (st == SM_OK) {
            st = sm_run_shard_grid(&p->output, m, &su, &grid, &layout, err);
        }
        if (st == SM_OK) {
            st = run_check_shards(grid.ntiles, c->memory_bytes, err);
        }
        if (st == SM_OK && rank == 0 && hk->layout != NULL) {
            hk->layout(hk->user, &layout, grid.ntiles);
        }
        if (st == SM_OK) {
            st = run_rank_part(c->partition, m, &grid, &shards, err);
        }
        if (one_pass) {
            if (st == SM_OK) {
                st = sm_hist_init(&r->hist, m->dtype, su.params.bins, su.params.lo, su.params.hi,
                                  err);
            }
            st = sm_par_agree(st, err);
            agreed = st != SM_OK;
        }
    }
    if (st == SM_OK && !one_pass) {
        run_progress_begin(&c->progress, "scan", "tiles", su.tiling.ntiles);
        keep = keep_plan(c->memory_bytes, m, &su, &mine, &grid, &shards, &keep_bytes);
        st = sm_scan_tiles(res->array, &su.tiling, mine.first, mine.count, &su.params, r, err);
        run_progress_end(&c->progress, st == SM_OK); /* every rank, success or not */
        const uint64_t t0 = sm_clock_ns();
        st = sm_par_agree(run_stop_check(c->stop, st, err), err);
        if (st == SM_OK) {
            st = run_reduce_scan(r, err);
        }
        agreed = st != SM_OK;
        allreduce_ns += sm_clock_ns() - t0;
    } else if (!one_pass) {
        st = sm_par_agree(st, err);
        agreed = st != SM_OK;
    }
    uint64_t t_scan = sm_clock_ns() - t_start;
    /* Phase begin: the same window, zarr.json and writer on every rank (they derive from the
     * global statistics only, or, in one pass, from the configuration: zarr.json's histogram is
     * pending); rank 0 prepares the directory, then the others attach to it. */
    if (st == SM_OK) {
        st = make_norm(&p->normalize, &r->hist, &res->norm, err);
    }
    enum sm_dtype out_dt = SM_DT_FLOAT32;
    if (st == SM_OK) {
        st = run_output_dtype(&p->normalize, &p->output, m->dtype, &out_dt, err);
    }
    struct sm_output_spec spec;
    if (st == SM_OK) {
        attrs = provenance(p, &su, one_pass ? NULL : r, &res->norm, m->ndim, meta_sha);
        st = sm_run_output_spec(&p->output, m->ndim, su.shape, out_dt, attrs, &spec, err);
        spec.pending = one_pass ? PENDING_ATTR : NULL;
    }
    struct sm_run_output oo = p->output; /* output.ome with the input's spacing where unset */
    char unit[48];
    if (st == SM_OK) { /* collective; reads the input's group only for an OME-Zarr output */
        st = run_ome_geometry(res->store, c->input.array, m->attributes, m->ndim, su.off,
                              oo.ome.levels != 0, &oo.ome, unit, sizeof(unit), err);
    }
    if (st == SM_OK) { /* output.ome: an OME-Zarr image whose level 0 is this array */
        run_provenance_spacing(attrs, &oo.ome, m->ndim);
        st = oo.ome.levels != 0 ? sm_run_ome_writer(&oo, m->ndim, su.shape, out_dt, attrs, &w, err)
                                : sm_writer_new(&spec, &w, err);
    }
    st = run_begin(out, w, st, &agreed, err);
    const int nthreads = c->threads > 0 ? c->threads : sm_write_default_threads();
    struct sm_write_result wr = {0};
    if (st == SM_OK) {
        cv.a = res->array;
        cv.in_dt = m->dtype;
        cv.in_elem = sm_dtype_size(m->dtype);
        cv.nd = m->ndim;
        cv.roi_off = su.off;
        cv.roi_shape = su.shape;
        cv.keep = keep;
        memcpy(cv.keep_off, su.params.keep_offset, sizeof(cv.keep_off));
        memcpy(cv.keep_shape, su.params.keep_shape, sizeof(cv.keep_shape));
        cv.norm = res->norm;
        cv.one_pass = one_pass;
        cv.keep_values = p->normalize.mode == SM_RUN_NORM_NONE;
        cv.out_dt = out_dt;
        cv.out_elem = sm_dtype_size(out_dt);
        for (unsigned d = m->ndim; d-- > 0;) {
            cv.ostride[d] = d + 1 < m->ndim ? cv.ostride[d + 1] * su.shape[d + 1] : 1;
            cv.astride[d] = d + 1 < m->ndim ? cv.astride[d + 1] * m->shape[d + 1] : 1;
        }
        cv.nthreads = nthreads;
        cv.ts = sm_calloc((size_t)nthreads, sizeof(*cv.ts));
        if (cv.ts == NULL) {
            st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot allocate %d threads",
                            nthreads);
        }
        /* the chunk memos share the budget's eighth (sm_run_setup), none when the input is kept */
        const uint64_t memo = keep != NULL ? 0 : run_memo_total(c->memory_bytes) / nthreads;
        for (int i = 0; st == SM_OK && i < nthreads; i++) {
            st = sm_scratch_new(&cv.ts[i].scratch, err);
            if (st == SM_OK) {
                st = sm_chunk_memo_new(m, memo, &cv.ts[i].memo, err);
            }
            if (st == SM_OK && one_pass) {
                st = sm_hist_init(&cv.ts[i].hist, m->dtype, su.params.bins, su.params.lo,
                                  su.params.hi, err);
            }
        }
    }
    /* Phase write: this rank's block of shards (one pass: scanning the input of each), then its
     * flush (every rank flushes: syncfs covers one node, directory fsyncs cover this process's
     * entries). */
    run_progress_begin(&c->progress, "write", "shards",
                       w != NULL ? sm_writer_nshards(sm_writer_level(w, 0)) : 0);
    if (st == SM_OK && grid.ntiles != sm_writer_nshards(sm_writer_level(w, 0))) {
        st = sm_err_set(err, SM_E_INTERNAL, __FILE__, __LINE__,
                        "plan of %llu shards for a grid of %llu", (unsigned long long)grid.ntiles,
                        (unsigned long long)sm_writer_nshards(sm_writer_level(w, 0)));
    }
    /* One pass: the rank's shards in the order of the input read units they start in, so the
     * shards that share an input chunk reach the threads' chunk memos one after another (C order
     * would sweep a whole plane of chunks between two shards of the same chunk). The output
     * does not depend on the order. */
    uint64_t *order = NULL;
    if (st == SM_OK && one_pass && shards.count > 1) {
        struct sm_read_unit u;
        sm_read_unit_of(m, &u);
        order = sm_malloc((size_t)shards.count * sizeof(*order));
        st = order == NULL
                 ? sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot order %llu shards",
                              (unsigned long long)shards.count)
                 : sm_tiling_order_by_unit(&grid, &u, shards.first, shards.count, order, err);
    }
    if (st == SM_OK) {
        const struct sm_write_job job = {shards.first,       shards.count,     order,
                                         nthreads,           fill_shard,       &cv,
                                         c->progress.update, c->progress.user, c->stop};
        st = sm_write_shards(w, out, &job, &wr, err);
    }
    sm_free(order);
    run_progress_end(&c->progress, st == SM_OK); /* every rank, success or not */
    st = run_agree(&agreed, run_stop_check(c->stop, st, err), err);
    if (st == SM_OK) {
        st = sm_output_flush(out, err);
    } else if (w != NULL) {
        /* A stop or a failure keeps what is done: the shards this rank finished are flushed
         * into place (SYNCFS renames its staged ones after its syncfs), so a resume keeps them
         * and rewrites only what is missing; the stop or failure stays the error. */
        struct sm_err ignored;
        sm_err_clear(&ignored);
        (void)sm_output_flush(out, &ignored);
    }
    st = run_agree(&agreed, run_stop_check(c->stop, st, err), err);
    /* One pass, phase statistics: the threads' statistics in thread order, summed over ranks;
     * zarr.json restated with them (rank 0 puts it) before anything reads the output. */
    const struct sm_writer *final = w;
    if (one_pass && st == SM_OK) {
        for (int i = 0; i < nthreads; i++) {
            sm_hist_merge(&r->hist, &cv.ts[i].hist);
            r->sums.sum += cv.ts[i].in_sums.sum;
            r->sums.weighted += cv.ts[i].in_sums.weighted;
            r->voxels += cv.ts[i].voxels;
            r->process_ns += cv.ts[i].scan_ns;
        }
        r->tiles = mine.count; /* the tiles of the ROI this rank's share stands for */
        sm_hist_finish(&r->hist);
        t_scan = sm_clock_ns() - t_start;
        const uint64_t t0 = sm_clock_ns();
        st = run_reduce_scan(r, err);
        allreduce_ns += sm_clock_ns() - t0;
        json_decref(attrs);
        attrs = provenance(p, &su, r, &res->norm, m->ndim, meta_sha);
        run_provenance_spacing(attrs, &oo.ome, m->ndim); /* as the begun zarr.json has it */
        if (st == SM_OK) {
            st = sm_run_output_spec(&p->output, m->ndim, su.shape, out_dt, attrs, &spec, err);
        }
        if (st == SM_OK) {
            st = sm_writer_new(&spec, &w_final, err);
        }
        if (st == SM_OK) {
            st = sm_output_restate(out, w_final, rank == 0, err);
            final = w_final;
        }
        st = run_agree(&agreed, st, err);
    }
    if (st == SM_OK && sm_writer_levels(w) > 1) { /* levels 1.. of an OME-Zarr image */
        const uint64_t t0 = sm_clock_ns();
        const struct sm_run_pyramid py = {
            w, out, nthreads, c->memory_bytes, c->input.max_chunk_bytes, c->progress, c->stop};
        st = run_agree(&agreed, sm_run_pyramid(&py, &wr, err), err);
        res->pyramid_ns = sm_clock_ns() - t0;
    }
    res->levels = w != NULL ? sm_writer_levels(w) : 0;
    /* Phase export (export.path: run_export.c), then the caller's collective step, between the
     * flush and the marker; each status is the same on every rank, and a failure leaves no
     * marker. */
    if (st == SM_OK && (p->export.path != NULL || hk->flushed != NULL)) {
        const struct sm_run_flushed f = {final, sm_output_path(out), &r->hist, attrs};
        if (p->export.path != NULL) {
            st = run_export(p, &f, res, err);
        }
        if (st == SM_OK && hk->flushed != NULL) {
            st = hk->flushed(hk->user, &f, err);
        }
    }
    /* Phase finish: only now that every rank wrote and flushed, every rank's shard records are
     * gathered on rank 0 (one MPI gather: no rank reads another's journal) and rank 0 writes the
     * marker from them (SPEC §6). */
    const uint64_t t_finish0 = sm_clock_ns();
    if (st == SM_OK) {
        st = run_finish(out, c->stop, err);
    }
    st = run_agree(&agreed, st, err);
    const uint64_t t_finish = sm_clock_ns() - t_finish0;
    const uint64_t t_total = sm_clock_ns() - t_start;
    uint64_t osum[2] = {0, 0};
    uint64_t norm_ns = 0;
    for (int i = 0; cv.ts != NULL && i < cv.nthreads; i++) {
        osum[0] += cv.ts[i].sums.sum;
        osum[1] += cv.ts[i].sums.weighted;
        norm_ns += cv.ts[i].norm_ns;
        sm_scratch_free(cv.ts[i].scratch);
        sm_chunk_memo_free(cv.ts[i].memo);
        sm_hist_destroy(&cv.ts[i].hist);
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
        sm_array_stats(res->array, &as);
        struct sm_output_stats os;
        sm_output_stats(out, &os);
        const double per = (double)nthreads;
        res->ranks = nranks;
        res->threads = nthreads;
        res->ndim = m->ndim;
        memcpy(res->roi_offset, su.off, sizeof(su.off));
        memcpy(res->roi_shape, su.shape, sizeof(su.shape));
        memcpy(res->tile, su.tile, sizeof(su.tile));
        res->passes = 1;
        res->output_checksum = osum[0];
        res->output_weighted_checksum = osum[1];
        res->sync_ns = os.sync_ns;
        res->timing[SM_RUN_T_TOTAL] = run_ms(t_total);
        res->timing[SM_RUN_T_OPEN] = run_ms(t_open);
        res->timing[SM_RUN_T_HYDRATE] = run_ms(as.fetch_ns) / per;
        res->timing[SM_RUN_T_DECODE] = run_ms(as.decode_ns) / per;
        res->timing[SM_RUN_T_PROCESS] = run_ms(r->process_ns + norm_ns) / per;
        res->timing[SM_RUN_T_ALLREDUCE] = run_ms(allreduce_ns);
        res->timing[SM_RUN_T_WRITE] = run_ms(wr.encode_ns + wr.write_ns) / per + run_ms(os.sync_ns);
        res->timing[SM_RUN_T_SCAN_WALL] = run_ms(t_scan);
        res->timing[SM_RUN_T_FINISH] = run_ms(t_finish);
        res->output_path = sm_strdup(sm_output_path(out));
        /* shards and bytes of the whole output are rank 0's (set by finish); written is summed */
        uint64_t counts[5] = {rank == 0 ? os.total_shards : 0, rank == 0 ? os.total_bytes : 0,
                              os.shards_written, keep != NULL ? 1 : 0, keep_bytes};
        st = sm_par_sum_u64(counts, 5, err);
        if (st == SM_OK) {
            res->output_shards = counts[0];
            res->output_bytes = counts[1];
            res->shards_written = counts[2];
            res->kept_input_ranks = counts[3];
            res->kept_input_bytes = counts[4];
            st = run_reduce_timings(res, err);
        }
        if (st == SM_OK && res->output_path == NULL) {
            st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot copy the output path");
        }
        st = sm_par_agree(st, err);
    }
    json_decref(attrs);
    sm_output_close(out); /* before the writers: it names the shards to clean up */
    sm_writer_free(w);
    sm_writer_free(w_final);
    sm_free(keep);
    return st;
}

sm_status sm_run_convert(const struct sm_convert_run *p, struct sm_run_result *res,
                         struct sm_err *err)
{
    memset(res, 0, sizeof(*res));
    bool entered = false;
    SM_TRY(run_ranks_enter(p->c.mpi_comm, &entered, err));
    const sm_status st = convert_ranks(p, res, err);
    run_ranks_leave(entered);
    return st;
}
