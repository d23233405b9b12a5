/* The report's `rates` section (SPEC §7, docs/internals/report.md "Per-stage rates", issue 34
 * item 6): the bytes and seconds of each stage of `plan`'s model (plan_model.h) that this run
 * went through, built from the run result alone, so that `scaling/calibrate --from-reports` fits
 * a rates file from a site's own runs. */
#include "report_rates.h"

#include <string.h>
#include <unistd.h>

#include <shardmill/pipeline.h>
#include <shardmill/source.h>

#include "plan_estimate.h"

static double secs(double ms)
{
    return ms > 0 ? ms / 1e3 : 0.0;
}

/* {"bytes", "seconds", "bytes_per_s"}: bytes_per_s is bytes / seconds (null when no time). */
static json_t *stage(uint64_t bytes, double seconds)
{
    json_t *o = json_object();
    json_object_set_new(o, "bytes", sm_json_u64(bytes));
    json_object_set_new(o, "seconds", json_real(seconds));
    json_object_set_new(o, "bytes_per_s",
                        seconds > 0 ? json_real((double)bytes / seconds) : json_null());
    return o;
}

static const char *input_kind(const struct sm_run_result *r)
{
    return r->source != NULL ? sm_source_info(r->source)->format : "zarr";
}

static enum sm_dtype input_dtype(const struct sm_run_result *r)
{
    if (r->source != NULL) {
        return sm_source_info(r->source)->dtype;
    }
    return r->array != NULL ? sm_array_meta(r->array)->dtype : SM_DT_UINT8;
}

json_t *sm_report_rates_json(const struct sm_run_output *out, const struct sm_run_result *r)
{
    const bool convert = out != NULL;
    if ((convert && r->output_found != SM_OUTPUT_FOUND_NEW) ||
        (r->source == NULL && r->array == NULL)) {
        return json_null(); /* a resume or a complete output: its stages did part of the work */
    }
    uint64_t voxels = 1;
    for (unsigned d = 0; d < r->ndim; d++) {
        voxels *= r->roi_shape[d];
    }
    const uint64_t in_bytes = voxels * sm_dtype_size(input_dtype(r));
    const double *t = r->timing_max;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const bool two_pass = !convert || sm_norm_desc(r->norm_config.mode)->needs_statistics;
    const bool kept = convert && two_pass && r->kept_input_ranks == (uint64_t)r->ranks;
    json_t *o = json_object(), *st = json_object();
    json_object_set_new(o, "ranks", json_integer(r->ranks));
    json_object_set_new(o, "threads", json_integer(r->threads));
    json_object_set_new(o, "cores", json_integer(cores > 0 ? cores : 1));
    json_object_set_new(o, "input", json_string(input_kind(r)));
    json_object_set_new(o, "input_dtype", json_string(sm_dtype_name(input_dtype(r))));
    json_object_set_new(o, "two_pass", json_boolean(two_pass));
    double range = 0.0;
    if (!r->no_histogram && r->hist_range_from == SM_HIST_RANGE_MINMAX) {
        range = secs(t[SM_RUN_T_RANGE]);
        json_object_set_new(st, "range", stage(in_bytes, range));
    }
    if (!convert) { /* the scan's passes: the whole run but its open and reduction */
        const double s = secs(t[SM_RUN_T_TOTAL] - t[SM_RUN_T_OPEN] - t[SM_RUN_T_ALLREDUCE]) - range;
        json_t *scan = stage(in_bytes * (r->passes > 0 ? r->passes : 1), s > 0 ? s : 0.0);
        json_object_set_new(scan, "passes", sm_json_u64(r->passes));
        json_object_set_new(scan, "tiles", sm_json_u64(r->scan.tiles));
        json_object_set_new(st, "scan", scan);
        json_object_set_new(o, "stages", st);
        return o;
    }
    struct sm_plan_level_work lw;
    struct sm_err ignored;
    sm_err_clear(&ignored);
    if (sm_plan_level_work(out, r->ndim, r->roi_shape, r->output_dtype, &lw, &ignored) != SM_OK) {
        json_decref(st);
        json_decref(o);
        return json_null();
    }
    json_object_set_new(o, "output_dtype", json_string(sm_dtype_name(r->output_dtype)));
    json_object_set_new(o, "kept", json_boolean(kept));
    /* scan_wall runs from the run's start (open and range included) to the scan's end (one
     * pass: to the write's end) */
    double scan = two_pass ? secs(t[SM_RUN_T_SCAN_WALL] - t[SM_RUN_T_OPEN]) - range : 0.0;
    scan = scan > 0 ? scan : 0.0;
    if (two_pass) {
        json_t *sc = stage(in_bytes, scan);
        json_object_set_new(sc, "tiles", sm_json_u64(r->scan.tiles));
        json_object_set_new(st, "scan", sc);
    }
    const double pyr = (double)r->pyramid_ns / 1e9, sync = (double)r->sync_ns / 1e9;
    const double xp = r->export.done ? secs(t[SM_RUN_T_EXPORT]) : 0.0;
    const double fin = secs(t[SM_RUN_T_FINISH]);
    /* the write phase: what the run's wall time leaves to it; `sync` is every flush of the
     * output (level 0's, the pyramid levels' and the marker's, which pyramid_ns and finish also
     * hold) */
    double w = secs(t[SM_RUN_T_TOTAL] - t[SM_RUN_T_OPEN]) - range - scan - pyr - xp - fin - sync;
    json_t *write = stage(lw.out_value_bytes, w > 0 ? w : 0.0);
    /* the input the write phase reads and decodes: in one pass as the scan counts it, in two
     * a second time unless kept */
    json_object_set_new(write, "input_bytes", sm_json_u64(kept ? 0 : in_bytes));
    json_object_set_new(write, "input_read",
                        json_string(!two_pass ? "scan"
                                    : kept    ? "kept"
                                              : "decode"));
    json_object_set_new(write, "shards", sm_json_u64(lw.shards));
    json_object_set_new(write, "files", sm_json_u64(lw.shards * lw.levels_with));
    json_object_set_new(st, "write", write);
    const double spill = (double)r->spill_ns / 1e9;
    if (lw.pyr_shards > 0) {
        json_t *p = stage(lw.pyr_value_bytes, pyr - spill > 0 ? pyr - spill : 0.0);
        json_object_set_new(p, "files", sm_json_u64(lw.pyr_shards));
        json_object_set_new(st, "pyramid", p);
    }
    if (lw.spill_shards > 0 && r->spill_level != 0) {
        json_t *p = stage(lw.spill_value_bytes, spill);
        json_object_set_new(p, "files", sm_json_u64(lw.spill_shards));
        json_object_set_new(st, "spill", p);
    }
    json_object_set_new(st, "sync", stage(r->output_bytes, sync));
    if (r->export.done) {
        json_t *x = stage(lw.level0_value_bytes, xp);
        json_object_set_new(x, "file_bytes", sm_json_u64(r->export.bytes));
        json_object_set_new(x, "shards", sm_json_u64(lw.shards));
        json_object_set_new(x, "deflate", json_boolean(r->export.deflate > 0));
        json_object_set_new(st, "export", x);
    }
    json_t *f = json_object();
    json_object_set_new(f, "files", sm_json_u64(r->output_shards));
    json_object_set_new(f, "seconds", json_real(fin));
    json_object_set_new(st, "finish", f);
    json_object_set_new(o, "stages", st);
    return o;
}
