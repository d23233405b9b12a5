/* The export phase of a convert (`export`, SPEC §2 "Export"; docs/internals/export.md): after
 * every rank wrote and flushed its Zarr shards, the output is opened from the writer's own
 * zarr.json (no metadata I/O) and every rank copies its block of shards into one HDF5 dataset
 * (export/: parallel HDF5 over MPI-IO, or sec2 with one rank). Reading the output back, instead
 * of normalizing the input a second time, makes the export equal the Zarr output bit for bit by
 * construction and never fetches the input again (it may be remote). Attributes come from
 * zarr.json's provenance. Timings: SM_RUN_T_EXPORT, this phase on this rank from opening the
 * output to the rename; SM_RUN_T_EXPORT_READ (the boxes read back), _WRITE (the H5Dwrite rounds,
 * waits for the other ranks included) and _FINISH (flush, close, fsync, rename) its parts. */
#include "run_int.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/export.h"
#include "shardmill/meta.h"
#include "shardmill/par.h"
#include "shardmill/path.h"

#define MAX_ATTRS 24

/* The histogram's dataset, beside the data (the dataset name is checked against it). */
static const char *const HIST_NAME = "/histogram";

static struct sm_export_opts export_opts(const struct sm_run_export *x, const char *output_path,
                                         bool fsync)
{
    struct sm_export_opts o = SM_EXPORT_OPTS_DEFAULTS;
    o.exists = x->exists;
    o.fsync = fsync;                   /* the same durability as the Zarr output */
    o.created_by_caller = output_path; /* out/ of out/ct.h5 may come with out/ct.zarr */
    return o;
}

/* sm_export_hdf5_check, and the export is no part of the Zarr output nor the output of it. */
static sm_status check(const struct sm_run_export *x, const struct sm_export_opts *o,
                       const char *output_path, char **resolved, struct sm_err *err)
{
    struct sm_export_spec spec = SM_EXPORT_SPEC_DEFAULTS;
    const struct sm_export_aux hist = {HIST_NAME, NULL, 0, NULL, 0};
    spec.dataset = x->dataset;
    spec.deflate = x->deflate;
    spec.aux = &hist;
    spec.naux = 1;
    SM_TRY(sm_export_hdf5_check(x->path, o, &spec, resolved, err));
    if (sm_path_is_within(*resolved, output_path) || sm_path_is_within(output_path, *resolved)) {
        SM_ERR_AT(err, SM_E_USAGE, *resolved,
                  "the export path is inside the output directory %s (give a path beside it)",
                  output_path);
        sm_free(*resolved);
        *resolved = NULL;
        return err->status;
    }
    return SM_OK;
}

sm_status sm_run_export_check(const struct sm_run_export *x, const char *output_path,
                              struct sm_err *err)
{
    if (x->path == NULL) {
        return SM_OK;
    }
    const struct sm_export_opts o = export_opts(x, output_path, false);
    char *resolved = NULL;
    const sm_status st = check(x, &o, output_path, &resolved, err);
    sm_free(resolved);
    return st;
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
static sm_status open_output(const struct sm_convert_run *p, const struct sm_writer *w,
                             const char *output_path, struct sm_store **store, struct sm_array **a,
                             struct sm_err *err)
{
    SM_TRY(sm_store_file_open(output_path, store, err));
    struct sm_array_opts o = SM_ARRAY_OPTS_DEFAULTS;
    o.limits.max_object_bytes = p->c.input.max_object_bytes;
    o.limits.max_chunk_bytes = p->c.input.max_chunk_bytes;
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

/* What the write needs besides the array: the spec with its attributes (pointing into `ds`,
 * `hist_attrs` and the locals of the caller), built from the run's parameters. */
struct export_plan {
    struct sm_export_spec spec;
    struct attr_set ds;
    uint64_t bins, voxels;
    double range[2];
    struct sm_export_attr hist_attrs[6];
    struct sm_export_aux hist;
};

static sm_status plan_spec(const struct sm_convert_run *p, const struct sm_run_flushed *f,
                           const struct sm_array_meta *om, const json_t *prov, const char *text,
                           struct export_plan *e, struct sm_err *err)
{
    const struct sm_run_export *x = &p->export;
    struct sm_export_spec spec = SM_EXPORT_SPEC_DEFAULTS;
    spec.dataset = x->dataset;
    spec.deflate = x->deflate;
    spec.timeout_ms = x->collective_timeout_s * 1000;
    if (x->chunk.set && x->chunk.n != om->ndim) {
        SM_FAIL_AT(err, SM_E_USAGE, "export.hdf5.chunk",
                   "has %u values, the output has %u dimensions", x->chunk.n, om->ndim);
    }
    for (unsigned d = 0; d < om->ndim; d++) {
        spec.chunk[d] = x->chunk.set ? x->chunk.v[d] : om->chunk_shape[d];
    }
    /* one rank's buffer: a quarter of the memory budget, at most 64 MiB (at least one shard) */
    const uint64_t quarter = p->c.memory_bytes / 4;
    spec.buffer_bytes = quarter < spec.buffer_bytes ? quarter : spec.buffer_bytes;
    dataset_attrs(&e->ds, prov, f->output_path, text);
    spec.attrs = e->ds.a;
    spec.nattrs = e->ds.n;
    const struct sm_hist *h = f->hist;
    e->voxels =
        (uint64_t)json_integer_value(json_object_get(json_object_get(prov, "histogram"), "voxels"));
    e->bins = h->bins;
    e->range[0] = h->lo;
    e->range[1] = h->hi;
    const struct sm_export_attr ha[6] = {
        {.name = "bins", .kind = SM_EXPORT_ATTR_U64, .u64 = &e->bins},
        {.name = "range", .kind = SM_EXPORT_ATTR_F64, .array = true, .n = 2, .f64 = e->range},
        {.name = "underflow", .kind = SM_EXPORT_ATTR_U64, .u64 = &h->underflow},
        {.name = "overflow", .kind = SM_EXPORT_ATTR_U64, .u64 = &h->overflow},
        {.name = "nan", .kind = SM_EXPORT_ATTR_U64, .u64 = &h->nan},
        {.name = "voxels", .kind = SM_EXPORT_ATTR_U64, .u64 = &e->voxels},
    };
    memcpy(e->hist_attrs, ha, sizeof(ha));
    e->hist = (struct sm_export_aux){HIST_NAME, h->counts, h->bins, e->hist_attrs, 6};
    spec.aux = &e->hist;
    spec.naux = 1;
    e->spec = spec;
    return SM_OK;
}

/* What the export wrote, for the report: the same on every rank. */
static void keep_result(const struct sm_run_export *x, const struct sm_export_result *er,
                        char *path, struct sm_run_result *res)
{
    struct sm_run_export_result *o = &res->export;
    o->dataset = x->dataset;
    o->deflate = x->deflate;
    sm_free(o->path);
    o->done = true;
    o->path = path;
    snprintf(o->driver, sizeof(o->driver), "%s", er->driver != NULL ? er->driver : "");
    o->ndim = er->ndim;
    memcpy(o->chunk, er->chunk, sizeof(o->chunk));
    o->bytes = er->bytes;
    o->rounds = er->rounds;
    res->timing[SM_RUN_T_EXPORT_READ] = run_ms(er->read_ns);
    res->timing[SM_RUN_T_EXPORT_WRITE] = run_ms(er->write_ns);
    res->timing[SM_RUN_T_EXPORT_FINISH] = run_ms(er->finish_ns);
}

sm_status sm_run_export(const struct sm_convert_run *p, const struct sm_run_flushed *f,
                        struct sm_run_result *res, struct sm_err *err)
{
    const uint64_t t0 = sm_clock_ns();
    const struct sm_run_common *c = &p->c;
    const struct sm_array_meta *om = sm_writer_meta(f->writer);
    const struct sm_export_opts opts =
        export_opts(&p->export, f->output_path, p->output.policy.sync != SM_OUTPUT_SYNC_NONE);
    struct sm_store *store = NULL;
    struct sm_array *a = NULL;
    struct sm_scratch *scratch = NULL;
    char *path = NULL;
    const json_t *prov = json_object_get(f->attributes, "shardmill");
    char *text = sm_json_dumps(prov, JSON_COMPACT | JSON_SORT_KEYS);
    struct export_plan *e = sm_calloc(1, sizeof(*e));
    /* Local preparation (the checks of the open phase again: the file system may have changed
     * during the conversion), then one agreement before the collective write. */
    sm_status st = text != NULL && e != NULL
                       ? SM_OK
                       : SM_ERR(err, SM_E_NOMEM, "cannot format the export's provenance");
    if (st == SM_OK) {
        st = check(&p->export, &opts, f->output_path, &path, err);
    }
    if (st == SM_OK) {
        st = plan_spec(p, f, om, prov, text, e, err);
    }
    if (st == SM_OK) {
        st = open_output(p, f->writer, f->output_path, &store, &a, err);
    }
    if (st == SM_OK) {
        st = sm_array_scratch_new(&scratch, err);
    }
    /* An even split of the shard grid by count: the export's work is per output value, whatever
     * the input cost that parallel.partition balances the write phase by. Any rank may read any
     * shard now that every rank flushed. */
    uint64_t first = 0, count = 0;
    sm_partition_block(sm_writer_nshards(sm_writer_level(f->writer, 0)), sm_par_size(),
                       sm_par_rank(), &first, &count);
    uint64_t total = 1; /* values of the whole output, for rank 0's progress */
    for (unsigned d = 0; d < om->ndim; d++) {
        total *= om->shape[d];
    }
    sm_run_progress_begin(&c->progress, "export", "values", total);
    const struct sm_export_work work = {om->chunk_shape,  first,  count, c->progress.update,
                                        c->progress.user, c->stop};
    st = sm_par_agree(st, err);
    struct sm_export_result er = {0};
    if (st == SM_OK) {
        st = sm_export_hdf5_write(path, &opts, &e->spec, a, &work, scratch, &er, err);
    }
    /* Parallel HDF5 left another rank blocked after a failure: no collective is possible any
     * more, not even the progress line's last post (the caller aborts the job: export.md). */
    if (!(st != SM_OK && sm_par_stuck())) {
        sm_run_progress_end(&c->progress, st == SM_OK);
    }
    if (st == SM_OK) {
        keep_result(&p->export, &er, path, res);
        path = NULL;
    }
    sm_array_scratch_free(scratch);
    sm_array_close(a);
    sm_store_close(store);
    sm_json_free_text(text);
    sm_free(e);
    sm_free(path);
    res->timing[SM_RUN_T_EXPORT] = run_ms(sm_clock_ns() - t0);
    return st;
}
