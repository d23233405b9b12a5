/* The export phase of `convert` (SPEC §2 "Export", §6, §7; docs/internals/export.md): the Zarr
 * output, once written and flushed by every rank, copied into one HDF5 file with parallel HDF5,
 * before the completion marker. job_convert.c calls these four functions and nothing else. */
#ifndef SM_JOBS_JOB_EXPORT_H
#define SM_JOBS_JOB_EXPORT_H

#include <jansson.h>

#include <shardmill/stats.h>
#include <shardmill/status.h>
#include <shardmill/write.h>

#include "config.h"

struct sm_job_export;

/* Open phase (local; the caller agrees): *out stays NULL when export.hdf5.path is unset.
 * Otherwise resolves and checks the export path before any expensive work (exists policy, its
 * directory, the dataset name and level; not the output directory nor inside it, whose path
 * `output_path` is) and keeps what the export phase needs. SM_E_USAGE / SM_E_IO as
 * sm_export_hdf5_check; SM_E_NOMEM. */
sm_status sm_job_export_open(const struct sm_job_config *c, const char *output_path,
                             struct sm_job_export **out, struct sm_err *err);

/* Export phase, collective: every rank calls it after the flush agreement (ex NULL: SM_OK at
 * once, on every rank alike). Re-reads the output written by `w` at `output_path` (every rank a
 * block of the shard grid, split by count) and writes it as the HDF5 dataset, with
 * the histogram `h` as /histogram and the provenance `attrs` (zarr.json's attributes) as
 * attributes. The returned status is agreed: the same on every rank. */
sm_status sm_job_export_run(struct sm_job_export *ex, const struct sm_job_config *c,
                            const struct sm_writer *w, const char *output_path,
                            const struct sm_hist *h, const json_t *attrs, struct sm_err *err);

/* Adds timing_ms.export (this rank's export phase, ms) and the report's "export" object {path,
 * bytes, dataset, chunk, deflate, driver, rounds} (SPEC §7). Every rank calls it with the same
 * configuration, so timings keep the same keys on every rank. No-op when ex is NULL. */
void sm_job_export_report(const struct sm_job_export *ex, json_t *report, json_t *timing);

void sm_job_export_free(struct sm_job_export *ex);

#endif
