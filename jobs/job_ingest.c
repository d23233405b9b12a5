/* The `ingest` job (SPEC §4): a raw, NIfTI-1, TIFF or HDF5 volume -> a Zarr v3 array with the
 * chosen shards, chunks and codec, keeping the input's data type. The volume is opened here
 * (jobs/ingest_source.c reads files; the engine never does) and handed to the engine's ingest
 * (shardmill/pipeline.h, sm_run_ingest) as its source: the engine runs the phases (output,
 * layout, each rank's shards read box by box from the source, flush, agreement, records, marker
 * last), under MPI too. What stays here is the command line's: YAML -> struct, the SPEC §6 path
 * checks, the warning about very many shards, the progress line and the report. The report has
 * every SPEC §7 section: `result` holds the SPEC §5 checksums and histogram of the values written
 * (summed over ranks; histogram.* as for scan; null for a type with no default range unless
 * histogram.range is given); `io` is null (the source is not read through a store). Stage times
 * (rank 0's): `open` (output and layout), `hydrate` (reading the source) and `process` (checksums
 * and histogram), thread sums divided by the thread count; `write` (encode + put + sync); `total`
 * is wall, the source's open included. */
#include <shardmill/sm_config.h>

#include "jobs_run.h"

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <shardmill/clock.h>
#include <shardmill/par.h>
#include <shardmill/pipeline.h>
#include <shardmill/stats.h>
#include <shardmill/write.h>

#include "ingest_source.h"
#include "jobs.h"
#include "progress.h"
#include "report.h"

/* The input file's identity for the provenance (issue 19): its size and modification time, or for
 * a directory (a TIFF stack) the sum of its files' sizes, their count and the latest mtime. A
 * resume whose source changed is then refused naming attributes.shardmill.source.file; the
 * records' value digests bind every kept shard to the bytes read as well. */
static json_t *file_json(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        return json_null();
    }
    uint64_t bytes = 0, files = 0;
    int64_t mtime = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    if (S_ISREG(sb.st_mode)) {
        bytes = (uint64_t)sb.st_size;
        files = 1;
    } else if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        for (struct dirent *de; d != NULL && (de = readdir(d)) != NULL;) {
            char p[4096];
            struct stat fb;
            if (de->d_name[0] == '.' ||
                (size_t)snprintf(p, sizeof(p), "%s/%s", path, de->d_name) >= sizeof(p) ||
                stat(p, &fb) != 0 || !S_ISREG(fb.st_mode)) {
                continue;
            }
            const int64_t t = (int64_t)fb.st_mtim.tv_sec * 1000000000 + fb.st_mtim.tv_nsec;
            mtime = t > mtime ? t : mtime;
            bytes += (uint64_t)fb.st_size;
            files++;
        }
        if (d != NULL) {
            closedir(d);
        }
    }
    return json_pack("{s:o,s:o,s:I}", "bytes", sm_json_u64(bytes), "files", sm_json_u64(files),
                     "mtime_ns", (json_int_t)mtime);
}

static json_t *source_json(const struct sm_job_config *c, const struct sm_volume *v)
{
    json_t *o = json_pack("{s:s,s:s,s:o,s:s}", "path", c->input.store, "format", v->format, "shape",
                          sm_json_dims(v->shape, v->ndim), "dtype", sm_dtype_name(v->dtype));
    json_object_set_new(o, "file", file_json(c->input.store));
    if (v->h5 != NULL) {
        json_object_set_new(o, "dataset", json_string(c->input.hdf5_dataset));
        json_object_set_new(o, "stored_dtype", json_string(v->h5info.stored));
        json_object_set_new(o, "layout", json_string(v->h5info.layout));
        json_object_set_new(o, "filters", json_string(v->h5info.filters));
    }
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
 * added to the provenance object `shardmill` (NIfTI only; raw volumes carry none). input.spacing,
 * when given, replaces the file's pixdim (which may then be anything). */
static void geometry_json(const struct sm_job_config *c, const struct sm_volume *v, json_t *prov)
{
    if (!v->nifti) {
        return;
    }
    const struct sm_nifti_hdr *n = &v->nii;
    const bool given = c->input.spacing.set;
    json_t *sp = json_array();
    for (unsigned d = 0; d < (given ? c->input.spacing.n : v->ndim); d++) {
        json_array_append_new(sp, json_real(given ? c->input.spacing.v[d] : n->spacing[d]));
    }
    json_object_set_new(prov, "spacing", sp);
    json_object_set_new(prov, "unit", n->unit != NULL ? json_string(n->unit) : json_null());
    if (n->have_origin) {
        json_object_set_new(prov, "origin",
                            json_pack("[f,f,f]", n->origin[0], n->origin[1], n->origin[2]));
        json_object_set_new(prov, "origin_from", json_string(n->origin_from));
    }
}

/* A NIfTI voxel size (pixdim[1..]) the output takes, as OME `scale` and provenance, must be a
 * positive finite number: NaN, 0 or a negative size would write a scale OME-Zarr readers reject
 * (JSON has no NaN: it would drop out of the array). input.spacing replaces it. */
static sm_status nifti_spacing_check(const struct sm_job_config *c, const struct sm_volume *v,
                                     struct sm_err *err)
{
    if (!v->nifti || c->input.spacing.set) {
        return SM_OK;
    }
    for (unsigned d = 0; d < v->ndim; d++) {
        const double s = v->nii.spacing[d];
        if (!isfinite(s) || s <= 0) {
            sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                       "pixdim[%u] is %g: a voxel size must be a positive finite number "
                       "(input.spacing replaces the file's)",
                       v->ndim - d, s);
            sm_err_where(err, "%s: pixdim", c->input.store);
            return err->status;
        }
    }
    return SM_OK;
}

static sm_status source_plan(void *user, const uint64_t *off, const uint64_t *shape,
                             uint64_t memory_bytes, struct sm_err *err)
{
    return sm_volume_plan(user, off, shape, memory_bytes, err);
}

static sm_status source_read_box(void *user, int thread, const uint64_t *off, const uint64_t *shape,
                                 void *out, struct sm_err *err)
{
    (void)thread;
    return sm_volume_read_box(user, off, shape, out, err);
}

static void hook_layout(void *user, const struct sm_output_spec *spec, uint64_t nshards)
{
    (void)user;
    sm_job_layout_warn(spec, nshards);
}

static json_t *report_json(const struct sm_job_config *c, const struct sm_volume *v,
                           const struct sm_run_result *r, uint64_t peak)
{
    const double secs = r->timing[SM_RUN_T_TOTAL] / 1e3;
    /* SPEC §7: the sections of every job; what does not apply to ingest is null. A resumed
     * run does not re-read the shards it kept, so its sums would cover only part of the
     * output: they are null then, not wrong. */
    const bool whole = r->shards_kept == 0;
    const bool have_hist = r->scan.hist.bins != 0;
    const uint64_t zeros[SM_CFG_MAX_DIMS] = {0};
    json_t *input = source_json(c, v);
    geometry_json(c, v, input);
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
    struct sm_volume v;
    SM_TRY(sm_par_agree(sm_volume_open(c, &v, err), err)); /* every rank its own handle */
    sm_status st = SM_OK;
    if (c->output.dtype != NULL && strcmp(c->output.dtype, sm_dtype_name(v.dtype)) != 0) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                   "ingest keeps the input's data type (%s); got '%s'", sm_dtype_name(v.dtype),
                   c->output.dtype);
        sm_err_where(err, "output.dtype");
        st = err->status; /* the same on every rank: the same config and file */
    }
    json_t *attrs = json_pack("{s:{s:o,s:o}}", "shardmill", "engine", sm_json_engine(), "source",
                              source_json(c, &v));
    if (st == SM_OK) {
        st = nifti_spacing_check(c, &v, err);
    }
    geometry_json(c, &v, json_object_get(attrs, "shardmill"));
    struct sm_ingest_run p = SM_INGEST_RUN_DEFAULTS;
    p.source.ndim = v.ndim;
    memcpy(p.source.shape, v.shape, v.ndim * sizeof(uint64_t));
    p.source.dtype = v.dtype;
    p.source.plan = source_plan;
    p.source.read_box = source_read_box;
    p.source.user = &v;
    p.source.attributes = attrs;
    sm_job_run_output(c, &p.output);
    struct sm_run_ome *ome = &p.output.ome;
    if (st == SM_OK && ome->spacing.set && ome->spacing.n != v.ndim) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "has %u values, the input has %u axes",
                   ome->spacing.n, v.ndim);
        sm_err_where(err, "input.spacing");
        st = err->status;
    }
    if (st == SM_OK && ome->origin.set && ome->origin.n != v.ndim) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "has %u values, the input has %u axes",
                   ome->origin.n, v.ndim);
        sm_err_where(err, "input.origin");
        st = err->status;
    }
    if (!v.nifti && ome->spacing.set) { /* raw, TIFF, HDF5: input.spacing/unit in the provenance */
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
    if (ome->levels != 0 && v.nifti) { /* OME-Zarr output: the NIfTI geometry where unset */
        if (!ome->spacing.set) {
            ome->spacing.set = true;
            ome->spacing.n = v.ndim;
            for (unsigned d = 0; d < v.ndim && d < SM_MAX_DIMS; d++) {
                ome->spacing.v[d] = v.nii.spacing[d];
            }
        }
        if (ome->unit == NULL) {
            ome->unit = v.nii.unit;
        }
        if (!ome->origin.set && v.nii.have_origin && v.ndim == 3) {
            ome->origin.set = true;
            ome->origin.n = 3;
            memcpy(ome->origin.v, v.nii.origin, sizeof(v.nii.origin));
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
        json_t *rep = report_json(c, &v, &r, peak);
        if (st == SM_OK && sm_par_rank() == 0) {
            st = sm_report_emit(report_path != NULL ? report_path : c->report, rep, err);
        }
        json_decref(rep);
        st = sm_par_agree(st, err); /* phase report: rank 0's failure is every rank's */
    }
    sm_run_result_destroy(&r);
    json_decref(attrs);
    sm_volume_close(&v);
    return st;
}
