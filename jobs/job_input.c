/* Opening a job's input (SPEC §3, §4 `input`): the store with its HTTP settings, the encoded-object
 * cache in front of it when enabled, and the array with the configured limits and index cache. */
#include "jobs_run.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include <shardmill/par.h>
#include <shardmill/write.h>

#include "jobs.h"
#include "report.h"

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

sm_status sm_job_open_input(const struct sm_job_config *c, struct sm_store **store,
                            struct sm_array **array, struct sm_err *err)
{
    *store = NULL;
    *array = NULL;
    sm_status st = sm_job_check_input_store(c->input.store, err); /* missing, or a file: 3 */
    if (st == SM_OK) {
        st = sm_store_open_with(c->input.store, &c->input.http, store, err);
    }
    /* The cache lives within the rank's memory budget: at most half of limits.memory_bytes, so
     * the peak RSS follows the budget, not the volume (the other half holds the decoded tiles,
     * shard buffers and the index cache). */
    const uint64_t cache_cap = c->input.cache_max_bytes < c->limits.memory_bytes / 2
                                   ? c->input.cache_max_bytes
                                   : c->limits.memory_bytes / 2;
    if (st == SM_OK && c->input.cache_enabled && cache_cap > 0) {
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
    o.limits.max_object_bytes = c->limits.max_object_bytes;
    o.limits.max_chunk_bytes = c->limits.max_chunk_bytes;
    o.index_cache_bytes = c->input.index_cache_bytes;
    o.index_cache_entries = c->input.index_cache_entries;
    /* Metadata once (SPEC §1, §3): rank 0 fetches the documents and broadcasts them; every rank
     * opens the array from the same bytes. Collective: the fetch status is agreed first. */
    const char *path = c->input.array != NULL ? c->input.array : "";
    struct sm_meta_docs docs = SM_META_DOCS_INIT;
    st = sm_par_rank() == 0 ? sm_array_fetch_meta(*store, path, &o, &docs, err) : SM_OK;
    st = sm_par_agree(st, err);
    if (st == SM_OK) {
        st = bcast_docs(&docs, err);
    }
    if (st == SM_OK) {
        st = sm_array_open_docs(*store, path, &o, &docs, array, err);
    }
    sm_meta_docs_free(&docs);
    if (st != SM_OK) {
        sm_store_close(*store);
        *store = NULL;
    }
    return st;
}

sm_status sm_job_roi(const struct sm_job_config *c, const struct sm_array_meta *m, uint64_t *off,
                     uint64_t *shape, struct sm_err *err)
{
    if (c->roi.offset.set && c->roi.offset.n != m->ndim) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                   "has %u values, the array has %u dimensions", c->roi.offset.n, m->ndim);
        sm_err_where(err, "roi.offset");
        return err->status;
    }
    if (c->roi.shape.set && c->roi.shape.n != m->ndim) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                   "has %u values, the array has %u dimensions", c->roi.shape.n, m->ndim);
        sm_err_where(err, "roi.shape");
        return err->status;
    }
    for (unsigned d = 0; d < m->ndim; d++) {
        off[d] = c->roi.offset.set ? c->roi.offset.v[d] : 0;
        shape[d] = c->roi.shape.set ? c->roi.shape.v[d]
                                    : (off[d] < m->shape[d] ? m->shape[d] - off[d] : 0);
    }
    return SM_OK;
}

sm_status sm_job_scan_setup(const struct sm_job_config *c, const struct sm_array_meta *m,
                            struct sm_scan_setup *s, struct sm_err *err)
{
    memset(s, 0, sizeof(*s));
    SM_TRY(sm_job_roi(c, m, s->off, s->shape, err));
    if (c->tile.set && c->tile.n != m->ndim) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                   "has %u values, the array has %u dimensions", c->tile.n, m->ndim);
        sm_err_where(err, "tile");
        return err->status;
    }
    for (unsigned d = 0; d < m->ndim; d++) {
        s->tile[d] = c->tile.set ? c->tile.v[d] : m->chunk_shape[d];
    }
    SM_TRY(sm_tiling_init(&s->tiling, m->ndim, m->shape, s->off, s->shape, s->tile, err));
    struct sm_scan_params *p = &s->params;
    p->threads = (int)c->parallel.threads;
    if (c->histogram.range_set) {
        p->lo = c->histogram.lo;
        p->hi = c->histogram.hi;
        p->bins = (uint32_t)c->histogram.bins;
        if (p->bins == 0) {
            sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                       "histogram.bins is required with histogram.range");
            sm_err_where(err, "histogram");
            return err->status;
        }
        return SM_OK;
    }
    sm_status st = sm_hist_default(m->dtype, &p->bins, &p->lo, &p->hi, err);
    if (st != SM_OK) {
        sm_err_where(err, "histogram");
        return st;
    }
    if (c->histogram.bins != 0) { /* bins without a range: rebin the type's default range */
        p->bins = (uint32_t)c->histogram.bins;
    }
    return SM_OK;
}

json_t *sm_job_input_json(const struct sm_job_config *c, const struct sm_array_meta *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "store", json_string(c->input.store));
    json_object_set_new(o, "array", json_string(c->input.array != NULL ? c->input.array : ""));
    json_object_set_new(o, "zarr_format", json_integer(m->zarr_format));
    json_object_set_new(o, "shape", sm_json_dims(m->shape, m->ndim));
    json_object_set_new(o, "dtype", json_string(sm_dtype_name(m->dtype)));
    if (m->inner_ndim != 0) {
        json_object_set_new(o, "chunks", sm_json_dims(m->inner_chunk_shape, m->inner_ndim));
        json_object_set_new(o, "shards", sm_json_dims(m->chunk_shape, m->ndim));
    } else {
        json_object_set_new(o, "chunks", sm_json_dims(m->chunk_shape, m->ndim));
        json_object_set_new(o, "shards", json_null());
    }
    return o;
}

sm_status sm_job_output_spec(const struct sm_job_config *c, unsigned nd, const uint64_t *shape,
                             enum sm_dtype dtype, const json_t *attrs, struct sm_output_spec *spec,
                             struct sm_err *err)
{
    const struct sm_output_spec defaults = SM_OUTPUT_SPEC_DEFAULTS;
    *spec = defaults;
    spec->ndim = nd;
    memcpy(spec->shape, shape, nd * sizeof(uint64_t));
    spec->dtype = dtype;
    const struct sm_cfg_dims *cs = &c->output.shard, *cc = &c->output.chunk;
    const bool shard_auto = !cs->set || cs->is_auto, chunk_auto = !cc->set || cc->is_auto;
    spec->sharded = !(cs->set && !cs->is_auto && cs->n == 0); /* [] = unsharded */
    if (spec->sharded && !shard_auto) {
        if (cs->n != nd) {
            sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                       "has %u values, the output has %u dimensions", cs->n, nd);
            sm_err_where(err, "output.shard");
            return err->status;
        }
        memcpy(spec->shard, cs->v, nd * sizeof(uint64_t));
    }
    if (!chunk_auto) {
        if (cc->n != nd) {
            sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                       "has %u values, the output has %u dimensions", cc->n, nd);
            sm_err_where(err, "output.chunk");
            return err->status;
        }
        memcpy(spec->chunk, cc->v, nd * sizeof(uint64_t));
    }
    /* SPEC §2 default layout. An explicit shard with an automatic chunk: 64 where it divides the
     * shard's extent, else the whole extent, so the chunk always divides the shard. */
    const size_t elem = sm_dtype_size(dtype);
    SM_TRY(sm_output_layout_auto(nd, shape, elem, chunk_auto, spec->sharded && shard_auto,
                                 spec->chunk, spec->shard, err));
    if (chunk_auto && spec->sharded && !shard_auto) {
        for (unsigned d = 0; d < nd; d++) {
            const uint64_t want = spec->shard[d] < SM_AUTO_CHUNK ? spec->shard[d] : SM_AUTO_CHUNK;
            spec->chunk[d] = spec->shard[d] % want == 0 ? want : spec->shard[d];
        }
    }
    spec->codec = c->output.codec != NULL ? c->output.codec : "zstd";
    spec->level = (int)c->output.codec_level;
    spec->attributes = attrs;
    return SM_OK;
}

struct sm_output_opts sm_job_output_opts(const struct sm_job_config *c)
{
    struct sm_output_opts o = SM_OUTPUT_OPTS_DEFAULTS;
    o.exists = c->output.exists == SM_EXISTS_RESUME      ? SM_OUTPUT_EXISTS_RESUME
               : c->output.exists == SM_EXISTS_OVERWRITE ? SM_OUTPUT_EXISTS_OVERWRITE
                                                         : SM_OUTPUT_EXISTS_ERROR;
    o.sync = !c->output.fsync                      ? SM_OUTPUT_SYNC_NONE
             : c->output.sync == SM_CFG_SYNC_FSYNC ? SM_OUTPUT_SYNC_FSYNC
                                                   : SM_OUTPUT_SYNC_SYNCFS;
    return o;
}

sm_status sm_job_write_output(const struct sm_writer *w, struct sm_output *out,
                              const struct sm_write_job *job, struct sm_write_result *res,
                              struct sm_err *err)
{
    const sm_status st = sm_write_shards(w, out, job, res, err);
    if (st == SM_E_STOPPED) { /* keep the finished shards for resume (as convert does) */
        struct sm_err ignored;
        sm_err_clear(&ignored);
        (void)sm_output_flush(out, &ignored);
    }
    SM_TRY(st);
    SM_TRY(sm_output_flush(out, err));
    SM_TRY(sm_job_stop_check(SM_OK, err)); /* a signal after the last shard: no marker */
    return sm_output_finish(out, err);
}

sm_status sm_job_shard_grid(const struct sm_job_config *c, const struct sm_array_meta *m,
                            const struct sm_scan_setup *su, struct sm_tiling *grid,
                            struct sm_output_spec *spec_out, struct sm_err *err)
{
    struct sm_output_spec spec;
    SM_TRY(sm_job_output_spec(c, m->ndim, su->shape, SM_DT_FLOAT32, NULL, &spec, err));
    if (spec_out != NULL) {
        *spec_out = spec;
    }
    return sm_tiling_init(grid, m->ndim, m->shape, su->off, su->shape,
                          spec.sharded ? spec.shard : spec.chunk, err);
}

static size_t dims_str(const uint64_t *v, unsigned n, char *buf, size_t cap)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (unsigned d = 0; d < n && k < cap; d++) {
        k += (size_t)snprintf(buf + k, cap - k, "%s%" PRIu64, d ? ", " : "", v[d]);
    }
    if (k < cap) {
        k += (size_t)snprintf(buf + k, cap - k, "]");
    }
    return k < cap ? k : cap;
}

void sm_job_layout_text(const struct sm_job_config *c, const struct sm_output_spec *spec,
                        uint64_t nshards, char *buf, size_t cap)
{
    const bool shard_auto = !c->output.shard.set || c->output.shard.is_auto;
    const bool chunk_auto = !c->output.chunk.set || c->output.chunk.is_auto;
    const uint64_t *outer = spec->sharded ? spec->shard : spec->chunk;
    double bytes = (double)sm_dtype_size(spec->dtype);
    for (unsigned d = 0; d < spec->ndim; d++) {
        bytes *= (double)outer[d];
    }
    char s[160], k[160], size[32];
    if (bytes >= 1048576.0) {
        snprintf(size, sizeof(size), "%.1f MiB", bytes / 1048576.0);
    } else {
        snprintf(size, sizeof(size), "%.1f KiB", bytes / 1024.0);
    }
    dims_str(spec->shard, spec->ndim, s, sizeof(s));
    dims_str(spec->chunk, spec->ndim, k, sizeof(k));
    if (spec->sharded) {
        snprintf(buf, cap, "shard %s%s of inner chunks %s%s: %" PRIu64 " shard%s of up to %s", s,
                 shard_auto ? " (auto)" : "", k, chunk_auto ? " (auto)" : "", nshards,
                 nshards == 1 ? "" : "s", size);
    } else {
        snprintf(buf, cap, "unsharded, chunks %s%s: %" PRIu64 " chunk file%s of up to %.1f MiB", k,
                 chunk_auto ? " (auto)" : "", nshards, nshards == 1 ? "" : "s", bytes / 1048576.0);
    }
}

void sm_job_layout_warn(const struct sm_output_spec *spec, uint64_t nshards)
{
    if (nshards <= SM_JOB_MANY_SHARDS) {
        return;
    }
    fprintf(stderr,
            "shardmill: warning: output.shard: this layout makes %" PRIu64 " %s, one file each "
            "(over %u): set `output.shard: auto` (shards of 32-64 MiB) or a larger shard shape\n",
            nshards, spec->sharded ? "shards" : "chunk files", SM_JOB_MANY_SHARDS);
}
