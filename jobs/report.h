/* The JSON report of `run` (SPEC §7; docs/internals/report.md), built in one place (report.c)
 * from what the engine returns (struct sm_run_result), never from the configuration again; its
 * atomic writer and the short summary on standard output (report_emit.c). */
#ifndef SM_JOBS_REPORT_H
#define SM_JOBS_REPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <shardmill/array.h>
#include <shardmill/meta.h>
#include <shardmill/pipeline.h>
#include <shardmill/stats.h>
#include <shardmill/status.h>
#include <shardmill/store.h>

json_t *sm_json_hist(const struct sm_hist *h);
/* {"requests": {...}, "bytes": {...}, "cache": {...}, "index_cache": {...}, "http": {...}} */
json_t *sm_json_io(const struct sm_run_io *io);
/* {"range_ignored": b, "whole_objects": n, "kept_slices": n} for an HTTP store (or a cache over
 * one), JSON null for other stores. */
json_t *sm_json_http(struct sm_store *store);
json_t *sm_json_engine(void);

/* Nanoseconds as milliseconds, for timing_ms fields. */
static inline double sm_ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* The sections every job's report has, in SPEC §7's order: engine, job, ranks, threads, input,
 * roi, tile, passes, result, io, timing_ms, [export], memory ({peak_rss_bytes}), output,
 * figure_of_merit ({voxels_per_s}). The json_t members are taken (NULL: JSON null; export NULL:
 * no such section). */
struct sm_report_parts {
    const char *job; /* sm_config_job_name */
    int ranks, threads;
    json_t *input; /* sm_report_array_input, or a source's */
    unsigned ndim;
    const uint64_t *roi_offset, *roi_shape;
    json_t *tile, *passes, *result, *io, *timing, *export, *output;
    uint64_t peak_rss_bytes;
    double voxels_per_s;
};
/* A new report (NULL if it cannot be allocated). A job adds its own sections after these. */
json_t *sm_report_new(const struct sm_report_parts *p);

/* The "input" object of a Zarr/N5 array's report: the store (credentials redacted), the array's
 * path and its metadata m. */
json_t *sm_report_array_input(const char *store, const char *array, const struct sm_array_meta *m);

/* The report of a scan or a convert (`convert`: also an ingest) named `job` (sm_config_job_name)
 * from its result r alone, of a Zarr/N5 array or a file source (r->source): counters summed and
 * peaks the maximum over ranks, timings the maximum (flat fields and timing_ms.max) and mean over
 * ranks, as the engine reduced them. NULL if it cannot be allocated. */
json_t *sm_report_run(const char *job, bool convert, const struct sm_run_result *r);

/* Where a run's report goes and the name it gives the job, settled once by `run` (cmd_run.c)
 * before the job starts, so a job hands the report its result and these alone. */
struct sm_report_to {
    const char *job;  /* the report's `job` (sm_config_job_name: "ingest" of an ingest) */
    const char *path; /* --report, else the config's `report`; NULL: the summary alone */
    const char *flag; /* --report as given (NULL: none): the engine's prepare step checks it */
};

/* Rank 0: sm_report_run, then sm_report_emit to to->path. The other ranks do nothing.
 * `ceiling` (stolen; NULL: none) is memory.ceiling: the memory ceiling's check of the run
 * (sm_plan_fit_json); `rates` (stolen; NULL: none) the per-stage rates (sm_report_rates_json),
 * both built by the job. A failure here is rank 0's alone (its exit status; the run itself
 * succeeded on every rank, so the others exit 0): no collective follows a run. */
sm_status sm_report_run_emit(const struct sm_report_to *to, bool convert,
                             const struct sm_run_result *r, json_t *ceiling, json_t *rates,
                             struct sm_err *err);

/* The payload objects' bytes of a local Zarr/N5 array (store, array; 0: a remote store, or none
 * found): the input's size on disk (io.source.input_bytes, plan's memory bound). */
uint64_t sm_report_zarr_input_bytes(const char *store, const char *array);

/* Writes the report atomically to path (tmp + rename). SM_E_IO naming the path. */
sm_status sm_report_write(const char *path, json_t *report, struct sm_err *err);

/* What every job does with its finished report on rank 0 (SPEC §7): with a path (--report, else
 * the config's `report`) the whole JSON goes there ("-" = standard output); unless the JSON went
 * to standard output, standard output gets the short summary of sm_report_summary. Without a
 * path only the summary is printed, never the whole JSON. SM_E_IO naming the path. */
sm_status sm_report_emit(const char *path, json_t *report, struct sm_err *err);

/* The short human summary of a report, a handful of lines: job, voxels, checksums, window,
 * output, stage times, figure of merit (read-bench: one line per case), and the report path
 * when one was written (report_path may be NULL). */
void sm_report_summary(FILE *f, const json_t *report, const char *report_path);

#endif
