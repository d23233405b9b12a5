/* The report's per-stage rates (report_rates.c; SPEC §7 `rates`, docs/internals/report.md):
 * bytes and seconds of each stage of `plan`'s model that a scan or a convert went through. */
#ifndef SM_JOBS_REPORT_RATES_H
#define SM_JOBS_REPORT_RATES_H

#include <shardmill/pipeline.h>

#include "report.h"

/* The `rates` section of the report of r, a scan's (out NULL) or a convert's, out the output
 * parameters the convert ran with (sm_convert_run.output), from these alone: ranks, threads, the
 * cores of rank 0's node, the input's kind and type, and `stages` ({stage: {bytes, seconds,
 * bytes_per_s, ...}}). JSON null for a resumed or complete output (its stages did only part of
 * the work). */
json_t *sm_report_rates_json(const struct sm_run_output *out, const struct sm_run_result *r);

#endif
