/* The `ingest` job (SPEC §4): a raw binary or NIfTI-1 volume -> a Zarr v3 array with the chosen
 * shards, chunks and codec, keeping the input's data type. Shards are filled box by box straight
 * from the file (pread of row spans) or from the inflated .nii.gz, so a raw volume streams
 * through memory one shard per thread. Same output safety as convert: atomic shards, journal,
 * completion marker last. The report has every SPEC §7 section: `result` holds the SPEC §5
 * checksums and histogram of the values written (histogram.* as for scan; null for a type with no
 * default range unless histogram.range is given); `io` is null (the source is not read through a
 * store). Stage times: `open` (output and source), `hydrate` (reading the source) and `process`
 * (checksums and histogram), thread sums divided by the thread count; `write` (encode + put +
 * sync); `total` is wall. */
#include "jobs_run.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include <shardmill/clock.h>
#include <shardmill/stats.h>
#include <shardmill/write.h>

#include "ingest_source.h"
#include "jobs.h"
#include "report.h"

struct ingest {
    const struct sm_volume *v;
    struct sm_checksums *sums;    /* one per thread */
    struct sm_hist *hists;        /* one per thread, or NULL when no histogram is computed */
    uint64_t *read_ns, *stats_ns; /* per thread: reading the source, checksums + histogram */
    uint64_t stride[SM_CFG_MAX_DIMS];
};

static sm_status fill_shard(void *user, int thread, uint64_t shard, const uint64_t *offset,
                            const uint64_t *shape, void *data, size_t len, struct sm_err *err)
{
    (void)shard;
    struct ingest *in = user;
    const uint64_t t0 = sm_clock_ns();
    SM_TRY(sm_volume_read_box(in->v, offset, shape, data, err));
    const uint64_t t1 = sm_clock_ns();
    /* SPEC §5 checksums and histogram of the values written (the output keeps them as read) */
    sm_checksums_add_box(&in->sums[thread], in->v->dtype, data, in->v->ndim, in->stride, offset,
                         shape);
    if (in->hists != NULL) {
        sm_hist_add(&in->hists[thread], data, len / sm_dtype_size(in->v->dtype));
    }
    in->read_ns[thread] += t1 - t0;
    in->stats_ns[thread] += sm_clock_ns() - t1;
    return SM_OK;
}

/* The histogram of SPEC §5 as scan computes it (histogram.bins and .range, else the type's
 * default). *have is false, without an error, for a type with no default range and no
 * histogram keys given: the report's histogram is then null. */
static sm_status hist_params(const struct sm_job_config *c, enum sm_dtype dt, uint32_t *bins,
                             double *lo, double *hi, bool *have, struct sm_err *err)
{
    *have = true;
    if (c->histogram.range_set) {
        if (c->histogram.bins == 0) {
            sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                       "histogram.bins is required with histogram.range");
            sm_err_where(err, "histogram");
            return err->status;
        }
        *bins = (uint32_t)c->histogram.bins;
        *lo = c->histogram.lo;
        *hi = c->histogram.hi;
        return SM_OK;
    }
    struct sm_err e2;
    sm_err_clear(&e2);
    if (sm_hist_default(dt, bins, lo, hi, &e2) != SM_OK) {
        if (c->histogram.bins != 0) {
            *err = e2;
            sm_err_where(err, "histogram");
            return err->status;
        }
        *have = false;
        return SM_OK;
    }
    if (c->histogram.bins != 0) { /* bins without a range: rebin the type's default range */
        *bins = (uint32_t)c->histogram.bins;
    }
    return SM_OK;
}

static json_t *source_json(const struct sm_job_config *c, const struct sm_volume *v)
{
    json_t *o = json_pack("{s:s,s:s,s:o,s:s}", "path", c->input.store, "format", v->format, "shape",
                          sm_json_dims(v->shape, v->ndim), "dtype", sm_dtype_name(v->dtype));
    if (v->nifti) {
        const struct sm_nifti_hdr *n = &v->nii;
        /* pixdim[1..3] as the header stores them (x, y, z) */
        json_object_set_new(o, "pixdim",
                            json_pack("[f,f,f]", n->pixdim[0], n->pixdim[1], n->pixdim[2]));
        json_object_set_new(o, "xyzt_units", json_integer(n->xyzt_units));
        json_object_set_new(o, "qform_code", json_integer(n->qform_code));
        json_object_set_new(o, "sform_code", json_integer(n->sform_code));
        if (v->scaled) {
            json_object_set_new(o, "scaling",
                                json_pack("{s:f,s:f,s:s}", "scl_slope", v->slope, "scl_inter",
                                          v->inter, "stored_dtype", sm_dtype_name(v->stored)));
        }
    }
    return o;
}

/* Spacing, unit and origin of the volume (SPEC §2: kept), in the array's axis order z, y, x:
 * added to the provenance object `shardmill` (NIfTI only; raw volumes carry none). */
static void geometry_json(const struct sm_volume *v, json_t *prov)
{
    if (!v->nifti) {
        return;
    }
    const struct sm_nifti_hdr *n = &v->nii;
    json_t *sp = json_array();
    for (unsigned d = 0; d < v->ndim; d++) {
        json_array_append_new(sp, json_real(n->spacing[d]));
    }
    json_object_set_new(prov, "spacing", sp);
    json_object_set_new(prov, "unit", n->unit != NULL ? json_string(n->unit) : json_null());
    if (n->have_origin) {
        json_object_set_new(prov, "origin",
                            json_pack("[f,f,f]", n->origin[0], n->origin[1], n->origin[2]));
        json_object_set_new(prov, "origin_from", json_string(n->origin_from));
    }
}

sm_status sm_job_ingest(const struct sm_job_config *c, const char *report_path, struct sm_err *err)
{
    const uint64_t t_start = sm_clock_ns();
    struct sm_volume v;
    struct sm_output *out = NULL;
    struct sm_writer *w = NULL;
    const struct sm_output_opts oopts = sm_job_output_opts(c);
    SM_TRY(sm_job_check_paths(c, err)); /* SPEC §6: the output may not overlap the source */
    SM_TRY(sm_output_open(c->output.path, &oopts, &out, err));
    sm_status st = sm_volume_open(c, &v, err);
    if (st != SM_OK) {
        sm_output_close(out);
        return st;
    }
    const uint64_t t_open = sm_clock_ns() - t_start;
    json_t *attrs = json_pack("{s:{s:o,s:o}}", "shardmill", "engine", sm_json_engine(), "source",
                              source_json(c, &v));
    geometry_json(&v, json_object_get(attrs, "shardmill"));
    struct sm_output_spec spec;
    st = sm_job_output_spec(c, v.ndim, v.shape, v.dtype, attrs, &spec, err);
    if (st == SM_OK && c->output.dtype != NULL &&
        strcmp(c->output.dtype, sm_dtype_name(v.dtype)) != 0) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                   "ingest keeps the input's data type (%s); got '%s'", sm_dtype_name(v.dtype),
                   c->output.dtype);
        sm_err_where(err, "output.dtype");
        st = err->status;
    }
    uint32_t bins = 0;
    double lo = 0, hi = 0;
    bool have_hist = false;
    if (st == SM_OK) {
        st = hist_params(c, v.dtype, &bins, &lo, &hi, &have_hist, err);
    }
    if (st == SM_OK) {
        st = sm_writer_new(&spec, &w, err);
    }
    if (st == SM_OK) {
        sm_job_layout_warn(&spec, sm_writer_nshards(w));
    }
    if (st == SM_OK) {
        st = sm_output_begin(out, w, err);
    }
    const int nthreads =
        c->parallel.threads > 0 ? (int)c->parallel.threads : sm_write_default_threads();
    struct sm_checksums sums[64] = {{0, 0}};
    struct sm_hist hists[64];
    uint64_t read_ns[64] = {0}, stats_ns[64] = {0};
    int nhists = 0;
    memset(hists, 0, sizeof(hists));
    struct ingest in = {&v, sums, NULL, read_ns, stats_ns, {0}};
    for (unsigned d = v.ndim; d-- > 0;) {
        in.stride[d] = d + 1 < v.ndim ? in.stride[d + 1] * v.shape[d + 1] : 1;
    }
    struct sm_write_result wr = {0};
    if (st == SM_OK && nthreads > 64) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "at most 64 threads");
        sm_err_where(err, "parallel.threads");
        st = err->status;
    }
    for (; st == SM_OK && have_hist && nhists < nthreads; nhists++) {
        st = sm_hist_init(&hists[nhists], v.dtype, bins, lo, hi, err);
        if (st != SM_OK) {
            sm_err_where(err, "histogram");
        }
    }
    if (have_hist) {
        in.hists = hists;
    }
    if (st == SM_OK) {
        const struct sm_write_job job = {
            0,    sm_writer_nshards(w), NULL, nthreads, fill_shard, &in, NULL,
            NULL, sm_signals_flag()};
        st = sm_job_write_output(w, out, &job, &wr, err);
    }
    const uint64_t t_total = sm_clock_ns() - t_start;
    if (st == SM_OK) {
        struct sm_checksums all = {0, 0};
        uint64_t rd = 0, sn = 0;
        for (int i = 0; i < nthreads; i++) {
            all.sum += sums[i].sum;
            all.weighted += sums[i].weighted;
            rd += read_ns[i];
            sn += stats_ns[i];
        }
        for (int i = 1; i < nhists; i++) {
            sm_hist_merge(&hists[0], &hists[i]);
        }
        if (nhists > 0) {
            sm_hist_finish(&hists[0]);
        }
        struct sm_output_stats os;
        sm_output_stats(out, &os);
        uint64_t voxels = 1;
        for (unsigned d = 0; d < v.ndim; d++) {
            voxels *= v.shape[d];
        }
        const uint64_t zeros[SM_CFG_MAX_DIMS] = {0};
        const double per = (double)nthreads, secs = (double)t_total / 1e9;
        /* SPEC §7: the sections of every job; what does not apply to ingest is null. A resumed
         * run does not re-read the shards it kept, so its sums would cover only part of the
         * output: they are null then, not wrong. */
        const bool whole = wr.kept == 0;
        json_t *input = source_json(c, &v);
        geometry_json(&v, input);
        json_object_set_new(input, "store", json_string(c->input.store));
        json_object_set_new(input, "chunks", json_null());
        json_object_set_new(input, "shards", json_null());
        json_t *res = json_object();
        json_object_set_new(res, "voxels", sm_json_u64(voxels));
        json_object_set_new(res, "voxels_processed", sm_json_u64(voxels));
        json_object_set_new(res, "tiles", json_null());
        json_object_set_new(res, "checksum",
                            whole ? json_integer((json_int_t)all.sum) : json_null());
        json_object_set_new(res, "weighted_checksum",
                            whole ? sm_json_u64(all.weighted) : json_null());
        json_object_set_new(res, "histogram",
                            whole && nhists > 0 ? sm_json_hist(&hists[0]) : json_null());
        json_object_set_new(res, "normalization", json_null());
        /* the output holds the values read, at the same linear indices */
        json_object_set_new(res, "output_checksum",
                            whole ? json_integer((json_int_t)all.sum) : json_null());
        json_object_set_new(res, "output_weighted_checksum",
                            whole ? sm_json_u64(all.weighted) : json_null());
        json_t *rep = json_object();
        json_object_set_new(rep, "engine", sm_json_engine());
        json_object_set_new(rep, "job", json_string("ingest"));
        json_object_set_new(rep, "ranks", json_integer(1));
        json_object_set_new(rep, "threads", json_integer(nthreads));
        json_object_set_new(rep, "input", input);
        json_object_set_new(rep, "roi",
                            json_pack("{s:o,s:o}", "offset", sm_json_dims(zeros, v.ndim), "shape",
                                      sm_json_dims(v.shape, v.ndim)));
        json_object_set_new(rep, "tile", json_null());
        json_object_set_new(rep, "passes", json_integer(1));
        json_object_set_new(rep, "result", res);
        /* the source is read with pread (or from the inflated .nii.gz), not through a store */
        json_object_set_new(
            rep, "io", json_pack("{s:n,s:n,s:n,s:n}", "requests", "bytes", "cache", "index_cache"));
        json_object_set_new(rep, "timing_ms",
                            json_pack("{s:f,s:f,s:f,s:n,s:f,s:n,s:f}", "total", sm_ms(t_total),
                                      "open", sm_ms(t_open), "hydrate", sm_ms(rd) / per, "decode",
                                      "process", sm_ms(sn) / per, "allreduce", "write",
                                      sm_ms(wr.encode_ns + wr.write_ns) / per + sm_ms(os.sync_ns)));
        json_object_set_new(rep, "memory",
                            json_pack("{s:o}", "peak_rss_bytes", sm_json_u64(sm_peak_rss_bytes())));
        json_object_set_new(rep, "output",
                            json_pack("{s:s,s:o,s:o,s:o,s:b}", "path", sm_output_path(out),
                                      "shards", sm_json_u64(os.total_shards), "bytes",
                                      sm_json_u64(os.total_bytes), "written",
                                      sm_json_u64(wr.written), "complete", true));
        json_object_set_new(
            rep, "figure_of_merit",
            json_pack("{s:f}", "voxels_per_s", secs > 0 ? (double)voxels / secs : 0.0));
        st = sm_report_emit(report_path != NULL ? report_path : c->report, rep, err);
        json_decref(rep);
    }
    for (int i = 0; i < nhists; i++) {
        sm_hist_destroy(&hists[i]);
    }
    json_decref(attrs);
    sm_output_close(out); /* before the writer: it names the shards to clean up */
    sm_writer_free(w);
    sm_volume_close(&v);
    return st;
}
