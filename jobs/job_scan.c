/* The `scan` job (SPEC §4, §5, §7): the config as the engine's scan (shardmill/pipeline.h,
 * sm_run_scan: tiles over the ROI, `passes` traversals, OpenMP threads, ranks) and its report.
 * Stage times as the engine measures them (`open`, `hydrate`, `decode`, `process`, `allreduce`,
 * `total`); rank 0 writes the report, with counters summed over ranks and timings as the maximum
 * over ranks (flat fields) plus timing_ms.max and timing_ms.mean. */
#include "jobs_run.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include <shardmill/par.h>
#include <shardmill/pipeline.h>

#include "jobs.h"
#include "progress.h"
#include "report.h"

sm_status sm_job_scan(const struct sm_job_config *c, const char *report_path, struct sm_err *err)
{
    struct sm_scan_run p = SM_SCAN_RUN_DEFAULTS;
    sm_job_run_common(c, &p.c);
    p.passes = c->passes;
    struct sm_job_progress jp;
    p.c.progress = sm_job_progress_hooks(&jp, c, "scan");
    p.c.stop = sm_signals_flag();
    struct sm_run_result r;
    sm_status st = sm_run_scan(&p, &r, err);
    if (st == SM_OK) {
        const struct sm_array_meta *m = sm_array_meta(r.array);
        struct sm_array_stats as;
        sm_array_stats(r.array, &as);
        json_t *rep = json_object();
        json_object_set_new(rep, "engine", sm_json_engine());
        json_object_set_new(rep, "job", json_string("scan"));
        json_object_set_new(rep, "ranks", json_integer(r.ranks));
        json_object_set_new(rep, "threads", json_integer(r.threads));
        json_object_set_new(rep, "input", sm_job_input_json(c, m));
        json_object_set_new(rep, "roi",
                            json_pack("{s:o,s:o}", "offset", sm_json_dims(r.roi_offset, r.ndim),
                                      "shape", sm_json_dims(r.roi_shape, r.ndim)));
        json_object_set_new(rep, "tile", sm_json_dims(r.tile, r.ndim));
        json_object_set_new(rep, "passes", sm_json_u64(r.passes));
        json_t *res = json_object();
        json_object_set_new(res, "voxels", sm_json_u64(r.scan.voxels));
        json_object_set_new(res, "voxels_processed", sm_json_u64(r.scan.voxels * r.passes));
        json_object_set_new(res, "tiles", sm_json_u64(r.scan.tiles));
        json_object_set_new(res, "checksum", json_integer((json_int_t)r.scan.sums.sum));
        json_object_set_new(res, "weighted_checksum", sm_json_u64(r.scan.sums.weighted));
        json_object_set_new(res, "histogram", sm_json_hist(&r.scan.hist));
        /* SPEC §7: what a scan does not do is null, not missing */
        json_object_set_new(res, "normalization", json_null());
        json_object_set_new(res, "output_checksum", json_null());
        json_object_set_new(res, "output_weighted_checksum", json_null());
        json_object_set_new(rep, "result", res);
        json_t *io = sm_json_io(r.store, &as);
        json_object_set_new(rep, "io", io);
        json_t *timing = json_object();
        for (int i = 0; i <= SM_RUN_T_WRITE; i++) { /* a scan has no scan_wall */
            json_object_set_new(timing, sm_run_timing_name(i), json_real(r.timing[i]));
        }
        json_object_set_new(rep, "timing_ms", timing);
        uint64_t peak = sm_peak_rss_bytes();
        st = sm_job_reduce_counters(io, err);
        if (st == SM_OK) {
            st = sm_job_reduce_timings(timing, err);
        }
        if (st == SM_OK) {
            st = sm_par_max_u64(&peak, 1, err);
        }
        json_object_set_new(rep, "memory", json_pack("{s:o}", "peak_rss_bytes", sm_json_u64(peak)));
        json_object_set_new(rep, "output", json_null());
        const double secs = json_number_value(json_object_get(timing, "total")) / 1e3;
        json_object_set_new(rep, "figure_of_merit",
                            json_pack("{s:f}", "voxels_per_s",
                                      secs > 0 ? (double)(r.scan.voxels * r.passes) / secs : 0.0));
        const char *path = report_path != NULL ? report_path : c->report;
        if (st == SM_OK && sm_par_rank() == 0) {
            st = sm_report_emit(path, rep, err); /* the JSON to `path`, a summary to stdout */
        }
        json_decref(rep);
        /* phase: report (rank 0's write failure fails every rank) */
        st = sm_par_agree(st, err);
    }
    sm_run_result_destroy(&r);
    return st;
}
