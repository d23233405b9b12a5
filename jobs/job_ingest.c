/* The `ingest` job (SPEC §4): a raw, NIfTI-1, TIFF or HDF5 volume -> a Zarr v3 array with the
 * chosen shards, chunks and codec, keeping the input's data type. The volume is the engine's
 * source (shardmill/source.h, sm_source_open on the parameters job_input.c builds from the
 * config), handed to the engine's ingest (shardmill/pipeline.h, sm_run_ingest) as its
 * struct sm_ingest_source: the engine runs the phases (output, layout, each rank's shards read box
 * by box from the source, flush, agreement, records, marker last), under MPI too. What stays here
 * is the command line's: YAML -> struct, the SPEC §6 path checks, the warning about very many
 * shards, the progress line and the report. The report has every SPEC §7 section: `result` holds
 * the SPEC §5 checksums and histogram of the values written (summed over ranks; histogram.* as for
 * scan; null for a type with no default range unless histogram.range is given); `io` is null (the
 * source is not read through a store). Stage times (rank 0's): `open` (output and layout),
 * `hydrate` (reading the source) and `process` (checksums and histogram), thread sums divided by
 * the thread count; `write` (encode + put + sync); `total` is wall, the source's open included. */
#include <shardmill/sm_config.h>

#include "jobs_run.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include <shardmill/clock.h>
#include <shardmill/par.h>
#include <shardmill/pipeline.h>
#include <shardmill/source.h>
#include <shardmill/stats.h>
#include <shardmill/write.h>

#include "jobs.h"
#include "progress.h"
#include "report.h"

/* Spacing, unit and origin of the volume (SPEC §2: kept), in the array's axis order z, y, x:
 * added to the provenance object `shardmill` when the file states them (NIfTI; raw volumes carry
 * none). input.spacing, when given, replaces the file's pixdim (which may then be anything). */
static void geometry_json(const struct sm_job_config *c, const struct sm_source_info *in,
                          const json_t *src, json_t *prov)
{
    if (!in->spacing_set) {
        return;
    }
    const bool given = c->input.spacing.set;
    json_t *sp = json_array();
    for (unsigned d = 0; d < (given ? c->input.spacing.n : in->ndim); d++) {
        json_array_append_new(sp, json_real(given ? c->input.spacing.v[d] : in->spacing[d]));
    }
    json_object_set_new(prov, "spacing", sp);
    json_object_set_new(prov, "unit", in->unit != NULL ? json_string(in->unit) : json_null());
    if (in->origin_set && in->ndim >= 3) {
        const double *o = in->origin + in->ndim - 3; /* [z, y, x] */
        json_object_set_new(prov, "origin", json_pack("[f,f,f]", o[0], o[1], o[2]));
        /* NIfTI: the sform wins over the qform (the source's provenance has both codes) */
        const json_int_t sform = json_integer_value(json_object_get(src, "sform_code"));
        json_object_set_new(prov, "origin_from", json_string(sform > 0 ? "sform" : "qform"));
    }
}

static sm_status source_plan(void *user, const uint64_t *off, const uint64_t *shape,
                             uint64_t memory_bytes, struct sm_err *err)
{
    return sm_source_plan(user, off, shape, memory_bytes, err);
}

static sm_status source_read_box(void *user, int thread, const uint64_t *off, const uint64_t *shape,
                                 void *out, struct sm_err *err)
{
    return sm_source_read_box(user, thread, off, shape, out, err);
}

static void hook_layout(void *user, const struct sm_output_spec *spec, uint64_t nshards)
{
    (void)user;
    sm_job_layout_warn(spec, nshards);
}

static json_t *report_json(const struct sm_job_config *c, const struct sm_source *src,
                           const struct sm_run_result *r, uint64_t peak)
{
    const double secs = r->timing[SM_RUN_T_TOTAL] / 1e3;
    /* SPEC §7: the sections of every job; what does not apply to ingest is null. A resumed
     * run does not re-read the shards it kept, so its sums would cover only part of the
     * output: they are null then, not wrong. */
    const bool whole = r->shards_kept == 0;
    const bool have_hist = r->scan.hist.bins != 0;
    const uint64_t zeros[SM_CFG_MAX_DIMS] = {0};
    const struct sm_source_info *v = sm_source_info(src);
    json_t *input = sm_source_describe(src);
    geometry_json(c, v, input, input);
    json_object_set_new(input, "store", json_string(c->input.store));
    json_object_set_new(input, "chunks", json_null());
    json_object_set_new(input, "shards", json_null());
    json_t *res = json_object();
    json_object_set_new(res, "voxels", sm_json_u64(r->scan.voxels));
    json_object_set_new(res, "voxels_processed", sm_json_u64(r->scan.voxels));
    json_object_set_new(res, "tiles", json_null());
    json_object_set_new(res, "checksum",
                        whole ? json_integer((json_int_t)r->scan.sums.sum) : json_null());
    json_object_set_new(res, "weighted_checksum",
                        whole ? sm_json_u64(r->scan.sums.weighted) : json_null());
    json_object_set_new(res, "histogram",
                        whole && have_hist ? sm_json_hist(&r->scan.hist) : json_null());
    json_object_set_new(res, "normalization", json_null());
    /* the output holds the values read, at the same linear indices */
    json_object_set_new(res, "output_checksum",
                        whole ? json_integer((json_int_t)r->output_checksum) : json_null());
    json_object_set_new(res, "output_weighted_checksum",
                        whole ? sm_json_u64(r->output_weighted_checksum) : json_null());
    json_t *rep = json_object();
    json_object_set_new(rep, "engine", sm_json_engine());
    json_object_set_new(rep, "job", json_string("ingest"));
    json_object_set_new(rep, "ranks", json_integer(r->ranks));
    json_object_set_new(rep, "threads", json_integer(r->threads));
    json_object_set_new(rep, "input", input);
    json_object_set_new(rep, "roi",
                        json_pack("{s:o,s:o}", "offset", sm_json_dims(zeros, v->ndim), "shape",
                                  sm_json_dims(v->shape, v->ndim)));
    json_object_set_new(rep, "tile", json_null());
    json_object_set_new(rep, "passes", json_integer(1));
    json_object_set_new(rep, "result", res);
    /* the source is read with pread (or streamed from the .nii.gz), not through a store */
    json_object_set_new(
        rep, "io", json_pack("{s:n,s:n,s:n,s:n}", "requests", "bytes", "cache", "index_cache"));
    const double *t = r->timing;
    json_object_set_new(rep, "timing_ms",
                        json_pack("{s:f,s:f,s:f,s:n,s:f,s:n,s:f}", "total", t[SM_RUN_T_TOTAL],
                                  "open", t[SM_RUN_T_OPEN], "hydrate", t[SM_RUN_T_HYDRATE],
                                  "decode", "process", t[SM_RUN_T_PROCESS], "allreduce", "write",
                                  t[SM_RUN_T_WRITE]));
    json_object_set_new(rep, "memory", json_pack("{s:o}", "peak_rss_bytes", sm_json_u64(peak)));
    json_object_set_new(rep, "output",
                        json_pack("{s:s,s:o,s:o,s:o,s:b}", "path", r->output_path, "shards",
                                  sm_json_u64(r->output_shards), "bytes",
                                  sm_json_u64(r->output_bytes), "written",
                                  sm_json_u64(r->shards_written), "complete", true));
    if (r->levels > 0) { /* output.ome: the image's levels and rank 0's pyramid phase (wall) */
        json_t *o = json_object_get(rep, "output");
        json_object_set_new(o, "levels", json_integer(r->levels));
        json_object_set_new(o, "pyramid_ms", json_real((double)r->pyramid_ns / 1e6));
    }
    json_object_set_new(
        rep, "figure_of_merit",
        json_pack("{s:f}", "voxels_per_s", secs > 0 ? (double)r->scan.voxels / secs : 0.0));
    return rep;
}

sm_status sm_job_ingest(const struct sm_job_config *c, const char *report_path, struct sm_err *err)
{
    const uint64_t t_start = sm_clock_ns();
    /* SPEC §6: the output may not overlap the source; checked before anything is read */
    SM_TRY(sm_par_agree(sm_job_check_paths(c, err), err));
    struct sm_source_params params;
    sm_job_source_params(c, &params);
    struct sm_source *src = NULL;
    SM_TRY(sm_par_agree(sm_source_open(&params, &src, err), err)); /* every rank its own handle */
    const struct sm_source_info *v = sm_source_info(src);
    sm_status st = SM_OK;
    if (c->output.dtype != NULL && strcmp(c->output.dtype, sm_dtype_name(v->dtype)) != 0) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                   "ingest keeps the input's data type (%s); got '%s'", sm_dtype_name(v->dtype),
                   c->output.dtype);
        sm_err_where(err, "output.dtype");
        st = err->status; /* the same on every rank: the same config and file */
    }
    json_t *desc = sm_source_describe(src);
    json_t *attrs =
        json_pack("{s:{s:o,s:O}}", "shardmill", "engine", sm_json_engine(), "source", desc);
    geometry_json(c, v, desc, json_object_get(attrs, "shardmill"));
    json_decref(desc);
    struct sm_ingest_run p = SM_INGEST_RUN_DEFAULTS;
    p.source.ndim = v->ndim;
    memcpy(p.source.shape, v->shape, v->ndim * sizeof(uint64_t));
    p.source.dtype = v->dtype;
    p.source.plan = source_plan;
    p.source.read_box = source_read_box;
    p.source.user = src;
    p.source.attributes = attrs;
    sm_job_run_output(c, &p.output);
    struct sm_run_ome *ome = &p.output.ome;
    if (st == SM_OK && ome->spacing.set && ome->spacing.n != v->ndim) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "has %u values, the input has %u axes",
                   ome->spacing.n, v->ndim);
        sm_err_where(err, "input.spacing");
        st = err->status;
    }
    if (st == SM_OK && ome->origin.set && ome->origin.n != v->ndim) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "has %u values, the input has %u axes",
                   ome->origin.n, v->ndim);
        sm_err_where(err, "input.origin");
        st = err->status;
    }
    if (!v->spacing_set && ome->spacing.set) { /* raw, TIFF, HDF5: input.spacing/unit kept */
        json_t *pv = json_object_get(attrs, "shardmill");
        json_t *sp = json_array();
        for (unsigned d = 0; d < ome->spacing.n; d++) {
            json_array_append_new(sp, json_real(ome->spacing.v[d]));
        }
        json_object_set_new(pv, "spacing", sp);
        if (ome->unit != NULL) {
            json_object_set_new(pv, "unit", json_string(ome->unit));
        }
    }
    if (ome->levels != 0 && v->spacing_set) { /* OME-Zarr output: the file's geometry if unset */
        if (!ome->spacing.set) {
            ome->spacing.set = true;
            ome->spacing.n = v->ndim;
            memcpy(ome->spacing.v, v->spacing, v->ndim * sizeof(double));
        }
        if (ome->unit == NULL) {
            ome->unit = v->unit;
        }
        if (!ome->origin.set && v->origin_set && v->ndim == 3) {
            ome->origin.set = true;
            ome->origin.n = 3;
            memcpy(ome->origin.v, v->origin, 3 * sizeof(double));
        }
    }
    p.hist_bins = (uint32_t)c->histogram.bins;
    p.hist_range_set = c->histogram.range_set;
    p.hist_lo = c->histogram.lo;
    p.hist_hi = c->histogram.hi;
    p.threads = (int)c->parallel.threads;
    p.partition = c->parallel.partition == SM_PARTITION_BLOCK ? SM_PART_BLOCK : SM_PART_BALANCED;
    p.memory_bytes = c->limits.memory_bytes;
    struct sm_job_progress jp;
    p.progress = sm_job_progress_hooks(&jp, c, "ingest");
    p.stop = sm_signals_flag();
    p.hooks.layout = hook_layout;
    struct sm_run_result r;
    memset(&r, 0, sizeof(r));
    if (st == SM_OK) {
        st = sm_run_ingest(&p, &r, err);
    }
    if (st == SM_OK) {
        r.timing[SM_RUN_T_TOTAL] = (double)(sm_clock_ns() - t_start) / 1e6; /* the open too */
        uint64_t peak = sm_peak_rss_bytes();
        st = sm_par_max_u64(&peak, 1, err); /* every rank: a collective */
        json_t *rep = report_json(c, src, &r, peak);
        if (st == SM_OK && sm_par_rank() == 0) {
            st = sm_report_emit(report_path != NULL ? report_path : c->report, rep, err);
        }
        json_decref(rep);
        st = sm_par_agree(st, err); /* phase report: rank 0's failure is every rank's */
    }
    sm_run_result_destroy(&r);
    json_decref(attrs);
    sm_source_close(src);
    return st;
}
