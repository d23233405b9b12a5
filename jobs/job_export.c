/* The export phase of `convert` (job_export.h, docs/internals/export.md): after every rank wrote
 * and flushed its Zarr shards, the output is opened from the writer's own zarr.json (no metadata
 * I/O) and every rank copies its block of shards into one HDF5 dataset (engine/export: parallel
 * HDF5 over MPI-IO, or sec2 with one rank). Reading the output back, instead of normalizing the
 * input a second time, makes the export equal the Zarr output bit for bit by construction and
 * never fetches the input again (it may be remote). Attributes come from zarr.json's provenance.
 * Time `timing_ms.export`: this phase on this rank, open to rename (max and mean over ranks);
 * `export_read` (sm_array_read_region of the boxes), `export_write` (the H5Dwrite rounds, waits
 * for the other ranks included) and `export_finish` (flush, close, fsync, rename) are its parts. */
#include "job_export.h"

#include <string.h>

#include <shardmill/alloc.h>
#include <shardmill/array.h>
#include <shardmill/clock.h>
#include <shardmill/export.h>
#include <shardmill/par.h>
#include <shardmill/path.h>
#include <shardmill/store.h>
#include <shardmill/tile.h>

#include "jobs.h"
#include "jobs_run.h"
#include "progress.h"
#include "report.h"

#define MAX_ATTRS 24

struct sm_job_export {
    char *path;    /* resolved */
    char *dataset; /* export.hdf5.dataset */
    int deflate;
    struct sm_export_opts opts;
    struct sm_export_result res;
    uint64_t ns;
    bool done;
};

static struct sm_export_opts export_opts(const struct sm_job_config *c)
{
    struct sm_export_opts o = SM_EXPORT_OPTS_DEFAULTS;
    o.exists = c->export_.hdf5_exists == SM_CFG_EXPORT_EXISTS_OVERWRITE ? SM_EXPORT_EXISTS_OVERWRITE
                                                                        : SM_EXPORT_EXISTS_ERROR;
    o.fsync = c->output.fsync; /* the same durability as the Zarr output */
    return o;
}

/* The histogram's dataset name, beside the data (checked against export.hdf5.dataset). */
static const char *const HIST_NAME = "/histogram";

sm_status sm_job_export_open(const struct sm_job_config *c, const char *output_path,
                             struct sm_job_export **out, struct sm_err *err)
{
    *out = NULL;
    if (c->export_.hdf5_path == NULL) {
        return SM_OK;
    }
    struct sm_job_export *ex = sm_calloc(1, sizeof(*ex));
    if (ex == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate the export state");
    }
    ex->opts = export_opts(c);
    ex->opts.created_by_caller = output_path; /* out/ of out/ct.h5 may come with out/ct.zarr */
    ex->deflate = (int)c->export_.hdf5_deflate;
    ex->dataset = sm_strdup(c->export_.hdf5_dataset);
    if (ex->dataset == NULL) {
        sm_free(ex);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate the export state");
    }
    struct sm_export_spec spec = SM_EXPORT_SPEC_DEFAULTS;
    const struct sm_export_aux hist = {HIST_NAME, NULL, 0, NULL, 0};
    spec.dataset = c->export_.hdf5_dataset;
    spec.deflate = (int)c->export_.hdf5_deflate;
    spec.aux = &hist;
    spec.naux = 1;
    sm_status st = sm_export_hdf5_check(c->export_.hdf5_path, &ex->opts, &spec, &ex->path, err);
    /* the export file is no part of the Zarr output, and the output no part of the export */
    if (st == SM_OK &&
        (sm_path_is_within(ex->path, output_path) || sm_path_is_within(output_path, ex->path))) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                   "the export path is inside the output directory %s (give a path beside it)",
                   output_path);
        sm_err_where(err, "%s", ex->path);
        st = err->status;
    }
    if (st != SM_OK) {
        sm_job_export_free(ex);
        return st;
    }
    *out = ex;
    return SM_OK;
}

/* ---- attributes from zarr.json's provenance ---- */

struct attr_set {
    struct sm_export_attr a[MAX_ATTRS];
    size_t n;
    double f64[16];
    size_t nf;
    uint64_t roi[2][SM_MAX_DIMS];
};

static void add_str(struct attr_set *s, const char *name, const char *v)
{
    if (v != NULL && s->n < MAX_ATTRS) {
        s->a[s->n++] =
            (struct sm_export_attr){.name = name, .kind = SM_EXPORT_ATTR_STRING, .str = v};
    }
}

/* Scalar (n == 0) or 1-D array of n doubles from the JSON numbers in v (array) or v itself. */
static void add_f64(struct attr_set *s, const char *name, const json_t *v, size_t n)
{
    if (v == NULL || s->n >= MAX_ATTRS || s->nf + (n > 0 ? n : 1) > 16) {
        return;
    }
    double *dst = &s->f64[s->nf];
    if (n == 0) {
        dst[0] = json_number_value(v);
    } else {
        for (size_t i = 0; i < n; i++) {
            dst[i] = json_number_value(json_array_get(v, i));
        }
    }
    s->nf += n > 0 ? n : 1;
    s->a[s->n++] = (struct sm_export_attr){
        .name = name, .kind = SM_EXPORT_ATTR_F64, .array = n > 0, .n = n, .f64 = dst};
}

static void add_dims(struct attr_set *s, const char *name, const json_t *v, uint64_t *dst)
{
    const size_t n = json_array_size(v);
    if (n == 0 || n > SM_MAX_DIMS || s->n >= MAX_ATTRS) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        dst[i] = (uint64_t)json_integer_value(json_array_get(v, i));
    }
    s->a[s->n++] = (struct sm_export_attr){
        .name = name, .kind = SM_EXPORT_ATTR_U64, .array = true, .n = n, .u64 = dst};
}

static const char *jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* The dataset's attributes: normalization (mode, lo, hi [, divisor, percentiles]) and provenance
 * (engine, config SHA-256, input, ROI, the Zarr output, and zarr.json's whole `shardmill`
 * attribute object as JSON text). Strings point into `prov` and `text`. */
static void dataset_attrs(struct attr_set *s, const json_t *prov, const char *output_path,
                          const char *text)
{
    const json_t *nm = json_object_get(prov, "normalization");
    add_str(s, "normalization_mode", jstr(nm, "mode"));
    add_f64(s, "normalization_lo", json_object_get(nm, "lo"), 0);
    add_f64(s, "normalization_hi", json_object_get(nm, "hi"), 0);
    add_f64(s, "normalization_divisor", json_object_get(nm, "divisor"), 0);
    const json_t *pct = json_object_get(nm, "percentiles");
    add_f64(s, "normalization_percentiles", pct, json_array_size(pct) == 2 ? 2 : 0);
    const json_t *eng = json_object_get(prov, "engine");
    add_str(s, "shardmill_version", jstr(eng, "version"));
    add_str(s, "shardmill_commit", jstr(eng, "commit"));
    add_str(s, "config_sha256", jstr(prov, "config_sha256"));
    const json_t *in = json_object_get(prov, "input");
    add_str(s, "input_store", jstr(in, "store"));
    add_str(s, "input_array", jstr(in, "array"));
    const json_t *roi = json_object_get(prov, "roi");
    add_dims(s, "roi_offset", json_object_get(roi, "offset"), s->roi[0]);
    add_dims(s, "roi_shape", json_object_get(roi, "shape"), s->roi[1]);
    add_str(s, "zarr_output", output_path);
    add_str(s, "provenance", text);
    /* SPEC §2: the voxel spacing (z, y, x), its unit and the origin, when the run knows them */
    const json_t *sp = json_object_get(prov, "spacing"), *org = json_object_get(prov, "origin");
    if (json_array_size(sp) > 0 && json_array_size(sp) <= 4) {
        add_f64(s, "spacing", sp, json_array_size(sp));
    }
    add_str(s, "unit", jstr(prov, "unit"));
    if (json_array_size(org) > 0 && json_array_size(org) <= 4) {
        add_f64(s, "origin", org, json_array_size(org));
    }
}

/* ---- the phase ---- */

/* Opens the output written by w as an array, from w's zarr.json (every rank holds the same). */
static sm_status open_output(const struct sm_job_config *c, const struct sm_writer *w,
                             const char *output_path, struct sm_store **store, struct sm_array **a,
                             struct sm_err *err)
{
    SM_TRY(sm_store_file_open(output_path, store, err));
    struct sm_array_opts o = SM_ARRAY_OPTS_DEFAULTS;
    o.limits.max_object_bytes = c->limits.max_object_bytes;
    o.limits.max_chunk_bytes = c->limits.max_chunk_bytes;
    struct sm_meta_docs docs = SM_META_DOCS_INIT;
    docs.kind = SM_META_DOCS_V3;
    /* an OME-Zarr image (output.ome) exports its level 0, the array "0" */
    sm_status st = sm_buf_set(&docs.doc, sm_writer_zarr_json(sm_writer_level(w, 0)), err);
    if (st == SM_OK) {
        st = sm_array_open_docs(*store, sm_writer_levels(w) > 0 ? "0" : "", &o, &docs, a, err);
    }
    sm_meta_docs_free(&docs);
    return st;
}

sm_status sm_job_export_run(struct sm_job_export *ex, const struct sm_job_config *c,
                            const struct sm_writer *w, const char *output_path,
                            const struct sm_hist *h, const json_t *attrs, struct sm_err *err)
{
    if (ex == NULL) {
        return SM_OK;
    }
    const uint64_t t0 = sm_clock_ns();
    const struct sm_array_meta *om = sm_writer_meta(w);
    struct sm_store *store = NULL;
    struct sm_array *a = NULL;
    struct sm_scratch *scratch = NULL;
    const json_t *prov = json_object_get(attrs, "shardmill");
    char *text = sm_json_dumps(prov, JSON_COMPACT | JSON_SORT_KEYS);
    /* Local preparation, then one agreement before the collective write. */
    sm_status st = text != NULL ? SM_OK
                                : sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__,
                                             "cannot format the export's provenance");
    struct sm_export_spec spec = SM_EXPORT_SPEC_DEFAULTS;
    spec.dataset = c->export_.hdf5_dataset;
    spec.deflate = (int)c->export_.hdf5_deflate;
    spec.timeout_ms = c->export_.hdf5_timeout_s * 1000;
    const struct sm_cfg_dims *ck = &c->export_.hdf5_chunk;
    if (st == SM_OK && ck->set && ck->n != om->ndim) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                   "has %u values, the output has %u dimensions", ck->n, om->ndim);
        sm_err_where(err, "export.hdf5.chunk");
        st = err->status;
    }
    for (unsigned d = 0; d < om->ndim; d++) {
        spec.chunk[d] = ck->set ? ck->v[d] : om->chunk_shape[d];
    }
    /* one rank's buffer: a quarter of the memory budget, at most 64 MiB (at least one shard) */
    const uint64_t quarter = c->limits.memory_bytes / 4;
    spec.buffer_bytes = quarter < spec.buffer_bytes ? quarter : spec.buffer_bytes;
    struct attr_set ds = {0};
    dataset_attrs(&ds, prov, output_path, text);
    spec.attrs = ds.a;
    spec.nattrs = ds.n;
    const uint64_t voxels =
        (uint64_t)json_integer_value(json_object_get(json_object_get(prov, "histogram"), "voxels"));
    const uint64_t bins = h->bins;
    const double range[2] = {h->lo, h->hi};
    const struct sm_export_attr hist_attrs[] = {
        {.name = "bins", .kind = SM_EXPORT_ATTR_U64, .u64 = &bins},
        {.name = "range", .kind = SM_EXPORT_ATTR_F64, .array = true, .n = 2, .f64 = range},
        {.name = "underflow", .kind = SM_EXPORT_ATTR_U64, .u64 = &h->underflow},
        {.name = "overflow", .kind = SM_EXPORT_ATTR_U64, .u64 = &h->overflow},
        {.name = "nan", .kind = SM_EXPORT_ATTR_U64, .u64 = &h->nan},
        {.name = "voxels", .kind = SM_EXPORT_ATTR_U64, .u64 = &voxels},
    };
    const struct sm_export_aux hist = {HIST_NAME, h->counts, h->bins, hist_attrs,
                                       sizeof(hist_attrs) / sizeof(hist_attrs[0])};
    spec.aux = &hist;
    spec.naux = 1;
    if (st == SM_OK) {
        st = open_output(c, w, output_path, &store, &a, err);
    }
    if (st == SM_OK) {
        st = sm_scratch_new(&scratch, err);
    }
    /* An even split of the shard grid by count: the export's work is per output value, whatever
     * the input cost that parallel.partition balances the write phase by. Any rank may read any
     * shard now that every rank flushed. */
    uint64_t first = 0, count = 0;
    sm_partition_block(sm_writer_nshards(sm_writer_level(w, 0)), sm_par_size(), sm_par_rank(),
                       &first, &count);
    uint64_t total = 1; /* values of the whole output, for rank 0's progress */
    for (unsigned d = 0; d < om->ndim; d++) {
        total *= om->shape[d];
    }
    struct sm_progress pg;
    sm_progress_begin(&pg, c, "convert", "export", "values", total);
    const struct sm_export_work work = {om->chunk_shape,    first, count,
                                        sm_progress_update, &pg,   sm_signals_flag()};
    st = sm_par_agree(st, err);
    if (st == SM_OK) {
        st = sm_export_hdf5_write(ex->path, &ex->opts, &spec, a, &work, scratch, &ex->res, err);
    }
    if (st != SM_OK && sm_par_stuck()) {
        /* Parallel HDF5 left another rank blocked after a failure: no agreement, no collective
         * is possible any more (docs/internals/export.md). This rank says why and ends the job;
         * the temporary file is already removed and no marker is written. */
        sm_report_error(err);
        sm_par_abort(sm_exit_code(st));
    }
    sm_progress_end(&pg, st == SM_OK); /* every rank (the stuck case ended above) */
    ex->done = st == SM_OK;
    sm_scratch_free(scratch);
    sm_array_close(a);
    sm_store_close(store);
    sm_json_free_text(text);
    ex->ns = sm_clock_ns() - t0;
    return st;
}

void sm_job_export_report(const struct sm_job_export *ex, json_t *report, json_t *timing)
{
    if (ex == NULL) {
        return;
    }
    json_object_set_new(timing, "export", json_real(sm_ms(ex->ns)));
    /* its parts: reading the output back, the H5Dwrite rounds, flush + close + rename */
    json_object_set_new(timing, "export_read", json_real(sm_ms(ex->res.read_ns)));
    json_object_set_new(timing, "export_write", json_real(sm_ms(ex->res.write_ns)));
    json_object_set_new(timing, "export_finish", json_real(sm_ms(ex->res.finish_ns)));
    json_t *o = json_object();
    json_object_set_new(o, "path", json_string(ex->path));
    json_object_set_new(o, "bytes", sm_json_u64(ex->res.bytes));
    json_object_set_new(o, "dataset", json_string(ex->dataset));
    json_object_set_new(o, "chunk", sm_json_dims(ex->res.chunk, ex->res.ndim));
    json_object_set_new(o, "deflate", json_integer(ex->deflate));
    json_object_set_new(o, "driver", json_string(ex->res.driver != NULL ? ex->res.driver : ""));
    json_object_set_new(o, "rounds", sm_json_u64(ex->res.rounds));
    json_object_set_new(o, "complete", json_boolean(ex->done));
    json_object_set_new(report, "export", o);
}

void sm_job_export_free(struct sm_job_export *ex)
{
    if (ex != NULL) {
        sm_free(ex->path);
        sm_free(ex->dataset);
        sm_free(ex);
    }
}
