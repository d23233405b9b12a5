/* Shared pieces of the `run` jobs: input opening, ROI resolution, the job table. */
#ifndef SM_JOBS_JOBS_RUN_H
#define SM_JOBS_JOBS_RUN_H

#include <shardmill/array.h>
#include <shardmill/status.h>
#include <shardmill/store.h>

#include "config.h"

/* Opens the configured store (+ cache) and array. On failure nothing stays open. */
sm_status sm_job_open_input(const struct sm_job_config *c, struct sm_store **store,
                            struct sm_array **array, struct sm_err *err);

/* The ROI of the config for this array: defaults to the whole array; SM_E_USAGE naming
 * roi.offset / roi.shape on a dimension mismatch (bounds are checked by the tiling). */
sm_status sm_job_roi(const struct sm_job_config *c, const struct sm_array_meta *m, uint64_t *off,
                     uint64_t *shape, struct sm_err *err);

/* The jobs. Each returns SM_OK or fills err; `report_path` (may be NULL) overrides c->report. */
sm_status sm_job_scan(const struct sm_job_config *c, const char *report_path, struct sm_err *err);

#endif
