/* JSON report helpers for jobs (SPEC §7). */
#ifndef SM_JOBS_REPORT_H
#define SM_JOBS_REPORT_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include <shardmill/array.h>
#include <shardmill/meta.h>
#include <shardmill/stats.h>
#include <shardmill/status.h>
#include <shardmill/store.h>

json_t *sm_json_dims(const uint64_t *v, unsigned n);
json_t *sm_json_hist(const struct sm_hist *h);
/* {"requests": {...}, "bytes": {...}, "cache": {...}, "index_cache": {...}, "http": {...}} */
json_t *sm_json_io(struct sm_store *store, const struct sm_array_stats *as);
/* {"range_ignored": b, "whole_objects": n, "kept_slices": n} for an HTTP store (or a cache over
 * one), JSON null for other stores. */
json_t *sm_json_http(struct sm_store *store);
json_t *sm_json_engine(void);

/* Nanoseconds as milliseconds, for timing_ms fields. */
static inline double sm_ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

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

/* Adds every integer of src into the integer at the same path of dst (objects recursively, keys
 * missing in dst are copied); keys naming "peak" keep the maximum. Other values are left as they
 * are in dst. For counters of several stores (read-bench cases). */
void sm_json_add_counters(json_t *dst, json_t *src);

#endif
