/* The report's per-stage rates (report_rates.c; SPEC §7 `rates`, docs/internals/report.md):
 * bytes and seconds of each stage of `plan`'s model that a scan or a convert went through. */
#ifndef SM_JOBS_REPORT_RATES_H
#define SM_JOBS_REPORT_RATES_H

#include "config.h"
#include "report.h"

/* The `rates` section of the report of r (a scan or a convert of c): ranks, threads, the cores of
 * rank 0's node, the input's kind and type, and `stages` ({stage: {bytes, seconds, bytes_per_s,
 * ...}}). JSON null for a resumed or complete output (its stages did only part of the work). */
json_t *sm_report_rates_json(const struct sm_job_config *c, const struct sm_run_result *r);

#endif
