/* What scan and convert share (SPEC §1, §2, §3): opening the input with the metadata broadcast
 * from rank 0, the ROI, tile and histogram parameters, the output layout, the rank plan, the
 * reduction of scan results (wrapping sums: order-independent, so the totals do not depend on the
 * rank count) and of timings (max and mean over ranks), the gathering of shard records to rank 0
 * before the marker, and the rank context of a run. */
#include "run_int.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "shardmill/alloc.h"
#include "shardmill/par.h"
#include "shardmill/write.h"

sm_status sm_run_ranks_enter(const void *mpi_comm, bool *entered, struct sm_err *err)
{
    *entered = false;
    if (mpi_comm == NULL) {
        return SM_OK; /* the current ranks (jobs/: sm_par_init under a launcher), or one */
    }
    SM_TRY(sm_par_init_comm(true, mpi_comm, NULL, NULL, err));
    *entered = true;
    return SM_OK;
}

void sm_run_ranks_leave(bool entered)
{
    if (entered) {
        sm_par_finalize();
    }
}

sm_status sm_run_stop_check(const atomic_int *stop, sm_status st, struct sm_err *err)
{
    return st != SM_OK ? st : sm_stop_check(stop, err);
}

void sm_run_progress_begin(const struct sm_run_progress *p, const char *phase, const char *unit,
                           uint64_t total)
{
    if (p->begin != NULL) {
        p->begin(p->user, phase, unit, total);
    }
}

void sm_run_progress_end(const struct sm_run_progress *p, bool ok)
{
    if (p->end != NULL) {
        p->end(p->user, ok);
    }
}

const char *sm_run_timing_name(int i)
{
    static const char *const names[SM_RUN_NTIMINGS] = {
        "total",     "open",   "hydrate", "decode",      "process",      "allreduce",     "write",
        "scan_wall", "finish", "export",  "export_read", "export_write", "export_finish", "range"};
    return i >= 0 && i < SM_RUN_NTIMINGS ? names[i] : "?";
}

/* The local path of a file input, or NULL for an http(s) store. */
static const char *input_file(const char *store)
{
    if (store == NULL || store[0] == '\0') {
        return NULL;
    }
    if (strncmp(store, "file://", strlen("file://")) == 0) {
        return store + strlen("file://");
    }
    return strstr(store, "://") != NULL ? NULL : store;
}

sm_status sm_run_check_input_store(const char *store, struct sm_err *err)
{
    const char *path = input_file(store);
    struct stat sb;
    if (path == NULL) {
        return SM_OK;
    }
    const char *what = NULL;
    if (stat(path, &sb) != 0) {
        what = errno == ENOENT    ? "the store path does not exist"
               : errno == ENOTDIR ? "not a Zarr store directory (a component of the path is a file)"
                                  : NULL; /* anything else: the store reports it when it reads */
    } else if (!S_ISDIR(sb.st_mode)) {
        what = S_ISREG(sb.st_mode) ? "not a Zarr store directory (it is a regular file)"
                                   : "not a Zarr store directory";
    }
    if (what == NULL) {
        return SM_OK;
    }
    SM_FAIL_AT(err, SM_E_DATA, store, "%s", what);
}

/* Rank 0's metadata documents to every rank: kind and have_attrs, then the two documents. */
static sm_status bcast_docs(struct sm_meta_docs *d, struct sm_err *err)
{
    int32_t hdr[2] = {(int32_t)d->kind, d->have_attrs ? 1 : 0};
    SM_TRY(sm_par_bcast(hdr, sizeof(hdr), 0, err));
    d->kind = (enum sm_meta_docs_kind)hdr[0];
    d->have_attrs = hdr[1] != 0;
    SM_TRY(sm_par_bcast_buf(&d->doc, 0, err));
    return sm_par_bcast_buf(&d->attrs, 0, err);
}

/* A copy of the documents src into dst (replaced). */
static sm_status copy_docs(const struct sm_meta_docs *src, struct sm_meta_docs *dst,
                           struct sm_err *err)
{
    dst->kind = src->kind;
    dst->have_attrs = src->have_attrs;
    SM_TRY(sm_buf_set(&dst->doc, sm_buf_bytes(&src->doc), err));
    return sm_buf_set(&dst->attrs, sm_buf_bytes(&src->attrs), err);
}

sm_status sm_run_open_input(const struct sm_run_input *in, uint64_t memory_bytes,
                            struct sm_store **store, struct sm_array **array, struct sm_err *err)
{
    return sm_run_open_input_sha(in, memory_bytes, store, array, NULL, err);
}

/* The SHA-256 of the input's metadata documents as fetched (zarr.json; .zarray then .zattrs;
 * attributes.json), each preceded by its length: what the provenance names the input by. */
static void docs_sha256(const struct sm_meta_docs *d, char out[65])
{
    const size_t n = 16 + d->doc.len + (d->have_attrs ? d->attrs.len : 0);
    uint8_t *all = sm_malloc(n);
    if (all == NULL) { /* a value no input has: a resume then names the input as changed */
        snprintf(out, 65, "%064d", 0);
        return;
    }
    const uint64_t lens[2] = {d->doc.len, d->have_attrs ? d->attrs.len : 0};
    memcpy(all, lens, 16);
    memcpy(all + 16, d->doc.ptr, d->doc.len);
    if (d->have_attrs) {
        memcpy(all + 16 + d->doc.len, d->attrs.ptr, d->attrs.len);
    }
    sm_sha256_hex(all, n, out);
    sm_free(all);
}

sm_status sm_run_open_input_sha(const struct sm_run_input *in, uint64_t memory_bytes,
                                struct sm_store **store, struct sm_array **array, char *meta_sha256,
                                struct sm_err *err)
{
    *store = NULL;
    *array = NULL;
    sm_status st = SM_OK;
    if (in->store == NULL) {
        st = SM_ERR_AT(err, SM_E_USAGE, "input.store", "no input store given");
    }
    if (st == SM_OK) {
        st = sm_run_check_input_store(in->store, err); /* missing, or a file: SM_E_DATA */
    }
    if (st == SM_OK) {
        st = sm_store_open_with(in->store, &in->http, store, err);
    }
    if (st == SM_OK) {
        (*store)->max_requests = in->max_requests; /* the store that sends them, not the cache */
    }
    /* The cache lives within the rank's memory budget: at most half of memory_bytes, so the peak
     * RSS follows the budget, not the volume (the other half holds the decoded tiles, shard
     * buffers and the index cache). A convert that reads no object twice bypasses it once its
     * layout is known (sm_run_cache_useful, run_convert.c's plan phase). */
    const uint64_t cache_cap =
        in->cache_max_bytes < memory_bytes / 2 ? in->cache_max_bytes : memory_bytes / 2;
    if (st == SM_OK && in->cache_enabled && cache_cap > 0) {
        st = sm_store_cache_new(*store, cache_cap, store, err);
        if (st != SM_OK) {
            *store = NULL; /* the cache closed the inner store */
        }
    }
    /* collective from here on: every rank must reach the metadata broadcast */
    st = sm_par_agree(st, err);
    if (st != SM_OK) {
        sm_store_close(*store);
        *store = NULL;
        return st;
    }
    struct sm_array_opts o = SM_ARRAY_OPTS_DEFAULTS;
    o.limits.max_object_bytes = in->max_object_bytes;
    o.limits.max_chunk_bytes = in->max_chunk_bytes;
    o.index_cache_bytes = in->index_cache_bytes;
    o.index_cache_entries = in->index_cache_entries;
    /* Metadata once (SPEC §1, §3): rank 0 fetches the documents and broadcasts them; every rank
     * opens the array from the same bytes. Collective: the fetch status is agreed first. */
    const char *path = in->array != NULL ? in->array : "";
    struct sm_meta_docs docs = SM_META_DOCS_INIT;
    if (sm_par_rank() == 0) { /* fetched, or kept from an earlier open of this input */
        st = in->docs != NULL && in->docs->kind != SM_META_DOCS_NONE
                 ? copy_docs(in->docs, &docs, err)
                 : sm_array_fetch_meta(*store, path, &o, &docs, err);
        if (st == SM_OK && in->docs != NULL && in->docs->kind == SM_META_DOCS_NONE) {
            st = copy_docs(&docs, in->docs, err);
        }
    }
    st = sm_par_agree(st, err);
    if (st == SM_OK) {
        st = bcast_docs(&docs, err);
    }
    if (st == SM_OK && in->files_size != NULL && in->files_bytes != NULL) {
        uint64_t b = sm_par_rank() == 0 ? in->files_size(in->store, path) : 0;
        st = sm_par_bcast(&b, sizeof(b), 0, err);
        *in->files_bytes = b;
    }
    if (st == SM_OK) {
        st = sm_array_open_docs(*store, path, &o, &docs, array, err);
    }
    if (st == SM_OK && meta_sha256 != NULL) {
        docs_sha256(&docs, meta_sha256);
    }
    sm_meta_docs_free(&docs);
    if (st != SM_OK) {
        sm_store_close(*store);
        *store = NULL;
    }
    return st;
}

static sm_status dims_mismatch(const char *key, unsigned n, unsigned nd, const char *what,
                               struct sm_err *err)
{
    SM_FAIL_AT(err, SM_E_USAGE, key, "has %u values, the %s has %u dimensions", n, what, nd);
}

sm_status sm_run_roi(const struct sm_run_common *c, const struct sm_array_meta *m, uint64_t *off,
                     uint64_t *shape, struct sm_err *err)
{
    if (c->roi_offset.set && c->roi_offset.n != m->ndim) {
        return dims_mismatch("roi.offset", c->roi_offset.n, m->ndim, "array", err);
    }
    if (c->roi_shape.set && c->roi_shape.n != m->ndim) {
        return dims_mismatch("roi.shape", c->roi_shape.n, m->ndim, "array", err);
    }
    for (unsigned d = 0; d < m->ndim; d++) {
        off[d] = c->roi_offset.set ? c->roi_offset.v[d] : 0;
        shape[d] = c->roi_shape.set ? c->roi_shape.v[d]
                                    : (off[d] < m->shape[d] ? m->shape[d] - off[d] : 0);
    }
    return SM_OK;
}

sm_status sm_run_setup(const struct sm_run_common *c, const struct sm_array_meta *m,
                       struct sm_run_setup *s, struct sm_err *err)
{
    memset(s, 0, sizeof(*s));
    SM_TRY(sm_run_roi(c, m, s->off, s->shape, err));
    if (c->tile.set && c->tile.n != m->ndim) {
        return dims_mismatch("tile", c->tile.n, m->ndim, "array", err);
    }
    for (unsigned d = 0; d < m->ndim; d++) {
        s->tile[d] = c->tile.set ? c->tile.v[d] : m->chunk_shape[d];
    }
    SM_TRY(sm_tiling_init(&s->tiling, m->ndim, m->shape, s->off, s->shape, s->tile, err));
    struct sm_scan_params *p = &s->params;
    p->threads = c->threads;
    /* the chunk memos of all threads share an eighth of the rank's budget (SPEC §1) */
    const int threads = c->threads > 0 ? c->threads : sm_tile_default_threads();
    p->memo_bytes = run_memo_total(c->memory_bytes) / (uint64_t)threads;
    p->memory_bytes = c->memory_bytes;
    if (c->hist_range_set) {
        s->range_from = SM_HIST_RANGE_CONFIG;
        p->lo = c->hist_lo;
        p->hi = c->hist_hi;
        p->bins = c->hist_bins;
        if (p->bins == 0) {
            SM_FAIL_AT(err, SM_E_USAGE, "histogram",
                       "histogram.bins is required with histogram.range");
        }
        return SM_OK;
    }
    if (sm_hist_default(m->dtype, &p->bins, &p->lo, &p->hi)) {
        s->range_from = SM_HIST_RANGE_TYPE;
    } else { /* SPEC §5: the min/max pass sets the range (sm_run_minmax_range) */
        s->range_from = SM_HIST_RANGE_MINMAX;
        p->bins = SM_HIST_MINMAX_BINS;
        p->lo = 0.0;
        p->hi = 1.0;
    }
    if (c->hist_bins != 0) { /* bins without a range: rebin the default (or min/max) range */
        p->bins = c->hist_bins;
    }
    return SM_OK;
}

sm_status sm_run_output_spec(const struct sm_run_output *o, unsigned nd, const uint64_t *shape,
                             enum sm_dtype dtype, const struct json_t *attrs,
                             struct sm_output_spec *spec, struct sm_err *err)
{
    const struct sm_output_spec defaults = SM_OUTPUT_SPEC_DEFAULTS;
    *spec = defaults;
    spec->ndim = nd;
    memcpy(spec->shape, shape, nd * sizeof(uint64_t));
    spec->dtype = dtype;
    const struct sm_run_dims *cs = &o->shard, *cc = &o->chunk;
    const bool shard_auto = !cs->set, chunk_auto = !cc->set;
    const bool v2 = o->ome.version == SM_RUN_OME_V04; /* OME-NGFF 0.4: Zarr v2, never sharded */
    spec->sharded = !(cs->set && cs->n == 0) && !v2;  /* [] = unsharded */
    if (spec->sharded && !shard_auto) {
        if (cs->n != nd) {
            return dims_mismatch("output.shard", cs->n, nd, "output", err);
        }
        memcpy(spec->shard, cs->v, nd * sizeof(uint64_t));
    }
    if (!chunk_auto) {
        if (cc->n != nd) {
            return dims_mismatch("output.chunk", cc->n, nd, "output", err);
        }
        memcpy(spec->chunk, cc->v, nd * sizeof(uint64_t));
    }
    /* SPEC §2 default layout. An explicit shard with an automatic chunk: 64 where it divides the
     * shard's extent, else the whole extent, so the chunk always divides the shard. */
    const size_t elem = sm_dtype_size(dtype);
    SM_TRY(sm_output_layout_auto(nd, shape, elem, chunk_auto, spec->sharded && shard_auto,
                                 spec->chunk, spec->shard, err));
    if (spec->sharded && shard_auto && o->shard_depth != 0 && o->shard_depth < spec->shard[0] &&
        o->shard_depth % spec->chunk[0] == 0) {
        spec->shard[0] = o->shard_depth; /* the read plan's shallower group (run_read_plan.c) */
    }
    if (chunk_auto && spec->sharded && !shard_auto) {
        for (unsigned d = 0; d < nd; d++) {
            const uint64_t want = spec->shard[d] < SM_AUTO_CHUNK ? spec->shard[d] : SM_AUTO_CHUNK;
            spec->chunk[d] = spec->shard[d] % want == 0 ? want : spec->shard[d];
        }
    }
    if (v2) {
        spec->zarr_v2 = true;
        if (chunk_auto) {
            sm_output_chunk_v2(nd, shape, elem, spec->chunk);
        }
    }
    spec->codec = o->codec != NULL ? o->codec : "zstd";
    spec->level = o->level;
    spec->attributes = attrs;
    return SM_OK;
}

sm_status sm_run_shard_grid(const struct sm_run_output *o, const struct sm_array_meta *m,
                            const struct sm_run_setup *s, struct sm_tiling *grid,
                            struct sm_output_spec *spec_out, struct sm_err *err)
{
    struct sm_output_spec spec; /* the writer's layout: the auto shard depends on the type */
    SM_TRY(sm_run_output_spec(o, m->ndim, s->shape, o->dtype_set ? o->dtype : SM_DT_FLOAT32, NULL,
                              &spec, err));
    if (spec_out != NULL) {
        *spec_out = spec;
    }
    return sm_tiling_init(grid, m->ndim, m->shape, s->off, s->shape,
                          spec.sharded ? spec.shard : spec.chunk, err);
}

void sm_run_plan(enum sm_part_kind kind, const struct sm_array_meta *m, const struct sm_tiling *t,
                 int nranks, struct sm_part *parts)
{
    struct sm_read_unit u;
    sm_read_unit_of(m, &u);
    sm_partition_tiles(t, &u, kind, nranks, parts);
}

size_t sm_run_plan_shares(enum sm_part_kind kind, const struct sm_array_meta *m,
                          const struct sm_tiling *t, int nranks, struct sm_rank_part *out)
{
    struct sm_read_unit u;
    sm_read_unit_of(m, &u);
    return sm_partition_shares(t, &u, kind, nranks, out);
}

sm_status sm_run_rank_part(enum sm_part_kind kind, const struct sm_array_meta *m,
                           const struct sm_tiling *t, struct sm_part *mine, struct sm_err *err)
{
    const int n = sm_par_size();
    struct sm_part *parts = sm_calloc((size_t)n, sizeof(*parts));
    if (parts == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate the plan of %d ranks", n);
    }
    sm_run_plan(kind, m, t, n, parts);
    *mine = parts[sm_par_rank()];
    sm_free(parts);
    return SM_OK;
}

sm_status sm_run_reduce_scan(struct sm_scan_result *r, struct sm_err *err)
{
    if (sm_par_size() == 1) {
        return SM_OK;
    }
    const size_t fixed = 9, n = fixed + r->hist.bins;
    uint64_t *v = sm_malloc(n * sizeof(uint64_t));
    sm_status st = SM_OK;
    if (v == NULL) {
        st = SM_ERR(err, SM_E_NOMEM, "cannot allocate the reduction of %zu counters", n);
    }
    /* every rank must take part in the reduction, so a failure to allocate is agreed first */
    SM_TRY(sm_par_agree(st, err));
    v[0] = r->hist.underflow;
    v[1] = r->hist.overflow;
    v[2] = r->hist.nan;
    v[3] = r->sums.sum;
    v[4] = r->sums.weighted;
    v[5] = r->voxels;
    v[6] = r->tiles;
    v[7] = r->hist.inf_pos;
    v[8] = r->hist.inf_neg;
    if (r->hist.bins != 0) {
        memcpy(v + fixed, r->hist.counts, r->hist.bins * sizeof(uint64_t));
    }
    st = sm_par_sum_u64(v, n, err);
    if (st == SM_OK) {
        r->hist.underflow = v[0];
        r->hist.overflow = v[1];
        r->hist.nan = v[2];
        r->sums.sum = v[3];
        r->sums.weighted = v[4];
        r->voxels = v[5];
        r->tiles = v[6];
        r->hist.inf_pos = v[7];
        r->hist.inf_neg = v[8];
        if (r->hist.bins != 0) {
            memcpy(r->hist.counts, v + fixed, r->hist.bins * sizeof(uint64_t));
        }
    }
    sm_free(v);
    if (st == SM_OK) { /* the finite min and max (SPEC §7 report), exact */
        st = sm_par_min_f64(&r->hist.min, 1, err);
    }
    if (st == SM_OK) {
        st = sm_par_max_f64(&r->hist.max, 1, err);
    }
    return st;
}

sm_status sm_run_reduce_timings(struct sm_run_result *res, struct sm_err *err)
{
    /* max through the bits of non-negative doubles, which order like the values */
    uint64_t bits[SM_RUN_NTIMINGS];
    for (int i = 0; i < SM_RUN_NTIMINGS; i++) {
        const double d = res->timing[i] > 0.0 ? res->timing[i] : 0.0;
        memcpy(&bits[i], &d, sizeof(d));
        res->timing_mean[i] = res->timing[i];
    }
    SM_TRY(sm_par_max_u64(bits, SM_RUN_NTIMINGS, err));
    SM_TRY(sm_par_sum_f64(res->timing_mean, SM_RUN_NTIMINGS, err));
    for (int i = 0; i < SM_RUN_NTIMINGS; i++) {
        memcpy(&res->timing_max[i], &bits[i], sizeof(double));
        res->timing_mean[i] /= (double)sm_par_size();
    }
    return sm_run_reduce_usage(res, err);
}

/* The shard records of every rank adopted by rank 0 (one MPI gather); agreed. */
static sm_status gather_records(struct sm_output *out, struct sm_err *err)
{
    struct sm_buf mine = SM_BUF_INIT, all = SM_BUF_INIT;
    sm_status st = sm_par_agree(sm_output_records_export(out, &mine, err), err);
    if (st == SM_OK) {
        st = sm_par_gatherv_bytes(sm_buf_bytes(&mine), &all, 0, err);
    }
    if (st == SM_OK && sm_par_rank() == 0) {
        st = sm_output_records_adopt(out, sm_buf_bytes(&all), err);
    }
    sm_buf_free(&mine);
    sm_buf_free(&all);
    return sm_par_agree(st, err);
}

sm_status sm_run_agree(bool *agreed, sm_status st, struct sm_err *err)
{
    if (!*agreed && !sm_par_stuck()) {
        st = sm_par_agree(st, err);
        *agreed = st != SM_OK;
    }
    return st;
}

sm_status sm_run_begin(struct sm_output *out, const struct sm_writer *w, sm_status st, bool *agreed,
                       struct sm_err *err)
{
    const int rank = sm_par_rank();
    if (st == SM_OK && rank == 0) {
        st = sm_output_begin(out, w, err);
    }
    st = sm_run_agree(agreed, st, err);
    if (st == SM_OK && rank != 0) {
        st = sm_output_join(out, w, err);
    }
    st = sm_run_agree(agreed, st, err);
    if (st == SM_OK) { /* one journal file per rank and run: rank 0's token names them all */
        uint64_t token = rank == 0 ? sm_output_run_token(out) : 0;
        st = sm_par_bcast(&token, sizeof(token), 0, err);
        sm_output_set_run(out, token, rank);
    }
    return st;
}

sm_status sm_run_finish(struct sm_output *out, const atomic_int *stop, struct sm_err *err)
{
    sm_status st = gather_records(out, err);
    if (st == SM_OK && sm_par_rank() == 0) {
        st = sm_run_stop_check(stop, st, err); /* a signal after the last agreement: no marker */
    }
    if (st == SM_OK && sm_par_rank() == 0) {
        st = sm_output_finish(out, err);
    }
    return st;
}

void sm_run_result_destroy(struct sm_run_result *res)
{
    if (res == NULL) {
        return;
    }
    sm_scan_result_destroy(&res->scan);
    sm_array_close(res->array);
    sm_store_close(res->store);
    if (res->owns_source_) {
        sm_source_close(res->source);
    }
    sm_free(res->output_path);
    sm_free(res->export.path);
    json_decref(res->input_identity);
    memset(res, 0, sizeof(*res));
}
