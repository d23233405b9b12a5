/* JSON report helpers for jobs (SPEC §7). */
#ifndef SM_JOBS_REPORT_H
#define SM_JOBS_REPORT_H

#include <jansson.h>
#include <stdint.h>

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

#endif
