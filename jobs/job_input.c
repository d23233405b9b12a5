/* Opening a job's input (SPEC §3, §4 `input`): the store with its HTTP settings, the encoded-object
 * cache in front of it when enabled, and the array with the configured limits and index cache. */
#include "jobs_run.h"

#include <jansson.h>
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
    sm_status st = sm_store_open_with(c->input.store, &c->input.http, store, err);
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
    spec->sharded = !(c->output.shard.set && c->output.shard.n == 0);
    if (c->output.shard.set && c->output.shard.n != 0) {
        if (c->output.shard.n != nd) {
            sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                       "has %u values, the output has %u dimensions", c->output.shard.n, nd);
            sm_err_where(err, "output.shard");
            return err->status;
        }
        memcpy(spec->shard, c->output.shard.v, nd * sizeof(uint64_t));
    } else if (nd != 3) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                   "the default layout is 3-D; set output.shard and output.chunk for %u-D data",
                   nd);
        sm_err_where(err, "output.shard");
        return err->status;
    }
    if (c->output.chunk.set) {
        if (c->output.chunk.n != nd) {
            sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                       "has %u values, the output has %u dimensions", c->output.chunk.n, nd);
            sm_err_where(err, "output.chunk");
            return err->status;
        }
        memcpy(spec->chunk, c->output.chunk.v, nd * sizeof(uint64_t));
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
                            struct sm_err *err)
{
    struct sm_output_spec spec;
    SM_TRY(sm_job_output_spec(c, m->ndim, su->shape, SM_DT_FLOAT32, NULL, &spec, err));
    return sm_tiling_init(grid, m->ndim, m->shape, su->off, su->shape,
                          spec.sharded ? spec.shard : spec.chunk, err);
}
