/* Shared pieces of the `run` jobs: input opening, ROI resolution, the job table. */
#ifndef SM_JOBS_JOBS_RUN_H
#define SM_JOBS_JOBS_RUN_H

#include <shardmill/array.h>
#include <shardmill/path.h>
#include <shardmill/pipeline.h>
#include <shardmill/source.h>
#include <shardmill/status.h>
#include <shardmill/store.h>
#include <shardmill/tile.h>
#include <shardmill/write.h>

#include "config.h"

/* The engine's parameters of the config (YAML -> struct, STYLE B10): input, ROI, tile,
 * histogram, threads, partition and memory budget; the output spec and policy. Strings are
 * borrowed from c. Progress and stop are left to the caller. */
void sm_job_run_common(const struct sm_job_config *c, struct sm_run_common *rc);
void sm_job_run_output(const struct sm_job_config *c, struct sm_run_output *o);
/* normalize.* (mode, divisor, lo, hi). */
void sm_job_run_norm(const struct sm_job_config *c, struct sm_run_norm *n);
/* export.hdf5.* (path NULL: no export). */
void sm_job_run_export(const struct sm_job_config *c, struct sm_run_export *x);

/* A convert's engine parameters from the config, the one place a convert reads it: p's input,
 * ROI, tile, histogram, threads, partition, memory budget, output, output.dtype, export,
 * normalize, the provenance's config hash (everything that shapes the output's bytes, URLs
 * redacted) and, for a file source, its parameters. Progress, stop, hooks and the memory
 * ceiling's adaptation are the job's. Strings are borrowed from c; what p points to that is not
 * c's is kept in *keep, which must outlive p. SM_E_USAGE naming output.dtype for a type with no
 * name (the same on every rank). */
struct sm_job_convert_keep {
    struct sm_source_params sp;
    char config_sha256[65];
};
sm_status sm_job_convert_params(const struct sm_job_config *c, struct sm_convert_run *p,
                                struct sm_job_convert_keep *keep, struct sm_err *err);

/* True when input.format names a source (raw, nifti, tiff, hdf5), not a Zarr/N5 store. */
bool sm_job_reads_source(const struct sm_job_config *c);
/* The engine's parameters of an ingest source (input.format, input.store, input.raw.*,
 * input.hdf5.*, input.spacing given, limits.memory_bytes as the decoders' allocation bound), for
 * sm_source_open. Strings are borrowed from c. */
void sm_job_source_params(const struct sm_job_config *c, struct sm_source_params *p);
/* Opens the configured store (+ cache) and array (sm_run_open_input). On failure nothing stays
 * open. */
sm_status sm_job_open_input(const struct sm_job_config *c, struct sm_store **store,
                            struct sm_array **array, struct sm_err *err);
/* The ROI of the config for this array: defaults to the whole array; SM_E_USAGE naming
 * roi.offset / roi.shape on a dimension mismatch (bounds are checked by the tiling). */
sm_status sm_job_roi(const struct sm_job_config *c, const struct sm_array_meta *m, uint64_t *off,
                     uint64_t *shape, struct sm_err *err);

/* The output layout of the config (output.shard, output.chunk, output.codec, defaults of SPEC §2)
 * for an array of `shape` and `dtype`. SM_E_USAGE naming the key. */
sm_status sm_job_output_spec(const struct sm_job_config *c, unsigned nd, const uint64_t *shape,
                             enum sm_dtype dtype, const struct json_t *attrs,
                             struct sm_output_spec *spec, struct sm_err *err);
/* A layout that makes more shards than this gets a warning (SPEC §2: never hundreds of
 * thousands of files). */
#define SM_JOB_MANY_SHARDS 100000u
/* "shard [a, b, c] of inner chunks [d, e, f], N shards of up to X MiB" into buf; "auto" is marked
 * when the config left the layout to SPEC §2's defaults. */
void sm_job_layout_text(const struct sm_job_config *c, const struct sm_output_spec *spec,
                        uint64_t nshards, char *buf, size_t cap);
/* On stderr: a warning that the layout makes more than SM_JOB_MANY_SHARDS shards, and how to
 * choose a larger shard. Nothing for fewer. */
void sm_job_layout_warn(const struct sm_output_spec *spec, uint64_t nshards);
/* output.exists and output.fsync as writer options. */
struct sm_output_opts sm_job_output_opts(const struct sm_job_config *c);

/* The local path of a file input (input.store as a path or a file:// URL), or NULL for an
 * http(s) store (jobs/job_paths.c). */
const char *sm_job_input_file(const char *store);
/* SPEC §4: SM_E_DATA (where = store) when a file input's path does not exist ("the store path
 * does not exist") or is no directory ("not a Zarr store directory"); SM_OK otherwise (http(s)
 * stores are not looked at). */
sm_status sm_job_check_input_store(const char *store, struct sm_err *err);
/* "is", "lies inside" or "contains": how messages name a relation other than DISJOINT. */
const char *sm_job_path_rel_words(enum sm_path_rel r);
/* SPEC §6, the output rule over `uses` (config.h): SM_E_USAGE, where = the key of the written
 * path, the message naming both paths, when a written path (OUTPUT, REPORT, LOG_DIR) is a local
 * input, lies inside one or contains one, or overlaps a written path before it in `uses`, after
 * resolving links; a LOG_DIR may contain the others. URLs, empty paths and the report's "-" are
 * skipped. Creates nothing. */
sm_status sm_job_check_path_uses(const struct sm_path_use *uses, unsigned n, struct sm_err *err);
/* The output rule over the job's paths: every schema row of a path class that the job uses
 * (input.store, output.path, export.hdf5.path, report), then `extra` (command-line paths: a
 * REPORT among them, run's --report, replaces the `report` row). Every job; creates nothing. */
sm_status sm_job_check_paths(const struct sm_job_config *c, const struct sm_path_use *extra,
                             unsigned nextra, struct sm_err *err);

/* The engine's prepare step of a scan or convert (hooks.prepare; user: a struct sm_job_prepare),
 * whose status the engine agrees over the ranks before anything is opened: on rank 0 the
 * --report path (sm_config_check_report: the config's `report` was checked with the
 * configuration), then sm_job_check_paths with it. */
struct sm_job_prepare {
    const struct sm_job_config *c;
    const char *report_flag; /* --report (NULL: none) */
};
sm_status sm_job_prepare(void *user, struct sm_err *err);

/* True when an MPI launcher (mpirun/mpiexec: OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK, PMI_SIZE;
 * srun: SLURM_PROCID with SLURM_NTASKS > 1) started the process; false forces
 * SHARDMILL_NO_MPI=1. Only `run` asks for ranks (jobs/launcher.c). */
bool sm_job_launched_by_mpi(void);
/* The rank the launcher gave this process (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK,
 * SLURM_PROCID), before MPI starts; 0 without a launcher or when it names none. */
int sm_job_launch_rank(void);

/* The jobs. Each returns SM_OK or fills err; `to` says where the report goes (report.h: --report,
 * else the config's `report`, as `run` settled it). jobs/ makes no collective call of its own
 * (tests/arch/test_jobs_collectives.py): the engine agrees on every phase and reduces what the
 * report needs; a job's status is the same on every rank, except a report that rank 0 fails to
 * write (rank 0's exit status alone). */
struct sm_report_to;
sm_status sm_job_scan(const struct sm_job_config *c, const struct sm_report_to *to,
                      struct sm_err *err);
/* convert, also of `job: ingest` (the loader set normalize none) */
sm_status sm_job_convert(const struct sm_job_config *c, const struct sm_report_to *to,
                         struct sm_err *err);
/* read-bench: one process; report_path (NULL: the config's `report`) */
sm_status sm_job_read_bench(const struct sm_job_config *c, const char *report_path,
                            struct sm_err *err);

#endif
