/* The `convert` job (SPEC §1, §2 output, §5, §6): the config as the engine's convert
 * (shardmill/pipeline.h, sm_run_convert: scan, global statistics, normalization, write, flush,
 * agreement, completion marker) and its report. What stays here is the command line's: the path
 * checks of SPEC §6 and the HDF5 export (export.hdf5, jobs/job_export.c) as the engine's hooks,
 * the warning about very many shards, the progress line, and the JSON report built from the
 * result (counters summed over ranks, timings max and mean over ranks). */
#include "jobs_run.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include <shardmill/alloc.h>
#include <shardmill/par.h>
#include <shardmill/pipeline.h>
#include <shardmill/source.h>
#include <shardmill/write.h>

#include "job_export.h"
#include "jobs.h"
#include "progress.h"
#include "report.h"

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

static json_t *norm_json(const struct sm_job_config *c, const struct sm_norm *nm)
{
    json_t *o = json_pack("{s:s}", "mode",
                          c->normalize.mode == SM_CFG_NORM_SCALE    ? "scale"
                          : c->normalize.mode == SM_CFG_NORM_WINDOW ? "window"
                          : c->normalize.mode == SM_CFG_NORM_NONE   ? "none"
                                                                    : "percentile");
    if (c->normalize.mode == SM_CFG_NORM_NONE) { /* the values are kept: no window */
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
    if (c->normalize.mode == SM_CFG_NORM_PERCENTILE) {
        json_object_set_new(o, "percentiles", json_pack("[f,f]", c->normalize.lo, c->normalize.hi));
    }
    return o;
}

static json_t *array_io(const struct sm_run_result *r)
{
    struct sm_array_stats as;
    sm_array_stats(r->array, &as);
    return sm_json_io(r->store, &as);
}

/* A source is read with pread, zlib, libtiff or HDF5, not through a store: its bytes read
 * (summed over ranks by the engine), the most one rank read and beyond its share. */
static json_t *source_io(const struct sm_run_result *r)
{
    return json_pack(
        "{s:n,s:o,s:n,s:n,s:{s:o,s:o,s:o,s:o}}", "requests", "bytes", sm_json_u64(r->source_bytes),
        "cache", "index_cache", "source", "bytes_read", sm_json_u64(r->source_bytes),
        "bytes_read_max_rank", sm_json_u64(r->source_bytes_max), "beyond_share_max_rank",
        sm_json_u64(r->source_excess_max), "slab_bytes", sm_json_u64(r->source_slab_bytes));
}

/* The engine's hooks: SPEC §6 path checks, the export's open and run (collective, agreed inside),
 * and rank 0's warning about the layout. */
struct hooks {
    const struct sm_job_config *c;
    struct sm_job_export *ex; /* NULL when there is no export.hdf5 */
};

static sm_status hook_prepare(void *user, struct sm_err *err)
{
    const struct hooks *h = user;
    return sm_job_check_paths(h->c, err);
}

static sm_status hook_opened(void *user, const char *output_path, struct sm_err *err)
{
    struct hooks *h = user;
    return sm_job_export_open(h->c, output_path, &h->ex, err);
}

static void hook_layout(void *user, const struct sm_output_spec *spec, uint64_t nshards)
{
    (void)user;
    sm_job_layout_warn(spec, nshards);
}

static sm_status hook_flushed(void *user, const struct sm_run_flushed *f, struct sm_err *err)
{
    struct hooks *h = user;
    return sm_job_export_run(h->ex, h->c, f->writer, f->output_path, f->hist, f->attributes, err);
}

sm_status sm_job_convert(const struct sm_job_config *c, const char *report_path, struct sm_err *err)
{
    struct sm_convert_run p = SM_CONVERT_RUN_DEFAULTS;
    sm_job_run_common(c, &p.c);
    sm_job_run_output(c, &p.output);
    /* output.dtype: float32 unless normalize none (the engine checks it against the input) */
    p.output.dtype_set = c->output.dtype != NULL;
    if (p.output.dtype_set && !sm_dtype_from_name(c->output.dtype, &p.output.dtype)) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "unknown data type '%s'", c->output.dtype);
        sm_err_where(err, "output.dtype");
        return err->status; /* the same on every rank: the same config */
    }
    p.normalize.mode = c->normalize.mode == SM_CFG_NORM_SCALE    ? SM_RUN_NORM_SCALE
                       : c->normalize.mode == SM_CFG_NORM_WINDOW ? SM_RUN_NORM_WINDOW
                       : c->normalize.mode == SM_CFG_NORM_NONE   ? SM_RUN_NORM_NONE
                                                                 : SM_RUN_NORM_PERCENTILE;
    p.normalize.divisor = c->normalize.divisor;
    p.normalize.lo = c->normalize.lo;
    p.normalize.hi = c->normalize.hi;
    char hex[65];
    config_hash(c->effective != NULL ? c->effective : "", hex);
    p.config_sha256 = hex;
    struct sm_job_progress jp;
    p.c.progress = sm_job_progress_hooks(&jp, c, "convert");
    p.c.stop = sm_signals_flag();
    struct hooks hk = {c, NULL};
    const struct sm_run_hooks hooks = {hook_prepare, hook_opened, hook_layout, hook_flushed, &hk};
    p.hooks = hooks;
    struct sm_run_result r;
    memset(&r, 0, sizeof(r));
    struct sm_source_params sp; /* the engine opens the file on every rank */
    if (sm_job_reads_source(c)) {
        sm_job_source_params(c, &sp);
        p.source_params = &sp;
    }
    sm_status st = sm_run_convert(&p, &r, err);
    const struct sm_source *src = r.source;
    if (st == SM_OK) {
        json_t *rep = json_object();
        json_object_set_new(rep, "engine", sm_json_engine());
        json_object_set_new(rep, "job", json_string(sm_config_job_name(c->job)));
        json_object_set_new(rep, "ranks", json_integer(r.ranks));
        json_object_set_new(rep, "threads", json_integer(r.threads));
        json_object_set_new(rep, "input",
                            src != NULL ? sm_job_source_json(src)
                                        : sm_job_input_json(c, sm_array_meta(r.array)));
        json_object_set_new(rep, "roi",
                            json_pack("{s:o,s:o}", "offset", sm_json_dims(r.roi_offset, r.ndim),
                                      "shape", sm_json_dims(r.roi_shape, r.ndim)));
        json_object_set_new(rep, "tile", sm_json_dims(r.tile, r.ndim));
        json_object_set_new(rep, "passes", json_integer(1));
        json_t *res = json_object();
        json_object_set_new(res, "voxels", sm_json_u64(r.scan.voxels));
        json_object_set_new(res, "voxels_processed", sm_json_u64(r.scan.voxels));
        json_object_set_new(res, "tiles", sm_json_u64(r.scan.tiles));
        json_object_set_new(res, "checksum", json_integer((json_int_t)r.scan.sums.sum));
        json_object_set_new(res, "weighted_checksum", sm_json_u64(r.scan.sums.weighted));
        json_object_set_new(res, "histogram",
                            r.no_histogram ? json_null() : sm_json_hist(&r.scan.hist));
        json_object_set_new(res, "normalization", norm_json(c, &r.norm));
        json_object_set_new(res, "output_checksum", json_integer((json_int_t)r.output_checksum));
        json_object_set_new(res, "output_weighted_checksum",
                            sm_json_u64(r.output_weighted_checksum));
        json_object_set_new(rep, "result", res);
        json_t *io = src != NULL ? source_io(&r) : array_io(&r);
        json_object_set_new(rep, "io", io);
        json_t *timing = json_object();
        for (int i = 0; i < SM_RUN_NTIMINGS; i++) {
            json_object_set_new(timing, sm_run_timing_name(i), json_real(r.timing[i]));
        }
        json_object_set_new(rep, "timing_ms", timing);
        sm_job_export_report(hk.ex, rep, timing);
        uint64_t peak = sm_peak_rss_bytes();
        st = src != NULL ? SM_OK : sm_job_reduce_counters(io, err); /* a source's: reduced */
        if (st == SM_OK) {
            st = sm_job_reduce_timings(timing, err);
        }
        if (st == SM_OK) {
            st = sm_par_max_u64(&peak, 1, err);
        }
        json_object_set_new(rep, "memory",
                            json_pack("{s:o,s:b,s:o,s:o}", "peak_rss_bytes", sm_json_u64(peak),
                                      "kept_input", r.kept_input_ranks == (uint64_t)r.ranks,
                                      "kept_input_ranks", sm_json_u64(r.kept_input_ranks),
                                      "kept_input_bytes", sm_json_u64(r.kept_input_bytes)));
        json_object_set_new(rep, "output",
                            json_pack("{s:s,s:o,s:o,s:o,s:b}", "path", r.output_path, "shards",
                                      sm_json_u64(r.output_shards), "bytes",
                                      sm_json_u64(r.output_bytes), "written",
                                      sm_json_u64(r.shards_written), "complete", true));
        if (r.levels > 0) { /* output.ome: the image's levels and rank 0's pyramid phase (wall) */
            json_t *o = json_object_get(rep, "output");
            json_object_set_new(o, "levels", json_integer(r.levels));
            json_object_set_new(o, "pyramid_ms", json_real((double)r.pyramid_ns / 1e6));
        }
        const double total_ms = json_number_value(json_object_get(timing, "total"));
        const double secs = total_ms / 1e3;
        json_object_set_new(
            rep, "figure_of_merit",
            json_pack("{s:f}", "voxels_per_s", secs > 0 ? (double)r.scan.voxels / secs : 0.0));
        const char *path = report_path != NULL ? report_path : c->report;
        if (st == SM_OK && sm_par_rank() == 0) {
            st = sm_report_emit(path, rep, err); /* the JSON to `path`, a summary to stdout */
        }
        json_decref(rep);
        st = sm_par_agree(st, err); /* phase report: rank 0's failure is every rank's */
    }
    sm_job_export_free(hk.ex);
    sm_run_result_destroy(&r);
    return st;
}
