/* `shardmill run CONFIG.yaml [--set key.path=value]... [--report PATH]` (SPEC §4): loads the
 * pipeline, runs its job, writes the JSON report (to --report, else the config's `report`; `-` is
 * standard output) with a short summary on standard output (SPEC §7: without a report path only
 * the summary, never the whole JSON) and maps the outcome to the exit status. */
#include "jobs.h"

#include <stdio.h>

#include <shardmill/par.h>

#include "config.h"
#include "job_s3.h"
#include "jobs_run.h"
#include "report.h"

/* Ends a run: the error line is printed once, by rank 0 (every rank holds the same error: the
 * engine agreed it), MPI is finalised, and the exit status is the error's. A report that rank 0
 * failed to write is rank 0's error alone (the run succeeded: the other ranks exit 0). */
static int finish_run(sm_status st, const struct sm_err *err)
{
    if (st != SM_OK && sm_par_stuck()) {
        /* Parallel HDF5 left another rank blocked after a failure of the export: no agreement,
         * no collective is possible any more (docs/internals/export.md). This rank says why and
         * ends the job; the temporary file is already removed and no marker is written. */
        sm_report_error(err);
        sm_par_abort(sm_exit_code(st));
    }
    int rc = 0;
    if (st != SM_OK) {
        rc = sm_par_rank() == 0 ? sm_report_error(err) : sm_exit_code_of(err);
    }
    sm_par_finalize();
    return rc;
}

/* A run that fails before ranks start: every rank read the same arguments, file and environment,
 * so every rank fails alike; the launcher's rank 0 prints the line. */
static int fail_before_ranks(const struct sm_err *err)
{
    return sm_job_launch_rank() == 0 ? sm_report_error(err) : sm_exit_code_of(err);
}

int sm_cmd_run(int argc, char **argv)
{
    struct sm_str_list set_list = {0};
    const char *report = NULL;
    bool quiet = false;
    const struct sm_opt opts[] = {
        {"set", 0, SM_OPT_STRINGS, "KEY=VALUE",
         "override a configuration key (repeatable), e.g. --set tile=[32,32,32]", &set_list,
         SM_PATHC_NONE /* each value: its key's row */},
        {"report", 0, SM_OPT_STRING, "PATH",
         "write the JSON report here ('-' = stdout, instead of the summary)", &report,
         SM_PATHC_REPORT},
        {"quiet", 'q', SM_OPT_FLAG, NULL, "no progress output", &quiet, SM_PATHC_NONE},
        {NULL, 0, SM_OPT_FLAG, NULL, NULL, NULL, SM_PATHC_NONE},
    };
    const struct sm_cmd_spec spec = {
        "run",
        "CONFIG.yaml [--set KEY=VALUE]... [--report PATH]",
        "Runs the job a YAML pipeline describes: scan (histogram and checksums of a region), "
        "convert (histogram, normalize to float32, uint8 or uint16 (output.dtype), write a "
        "sharded Zarr v3 array, or with output.ome an OME-Zarr 0.5 image: a mean (or nearest) "
        "pyramid that halves the finer axes first, with the omero window), ingest (convert with "
        "normalize.mode none: the "
        "values and type kept) or read-bench (timed region reads with I/O counters, SPEC §8 W3). "
        "scan and read-bench read a Zarr v2/v3 array or an N5 dataset from a directory, a "
        "file://, http(s):// or s3://bucket/prefix URL (input.store); convert and ingest read "
        "those or the file of a source (input.format: docs/CONFIG.md lists the sources), "
        "each rank only the slabs of its own shards under mpirun. Prints a "
        "short summary; the JSON report goes to --report or the config's `report`. See "
        "docs/CONFIG.md for every key and its default. SIGTERM or SIGINT (Slurm's time limit or "
        "scancel, Ctrl-C) stops every rank at its next tile or shard: no completion marker, "
        "exit status 128 + the signal (143, 130), and output.exists: resume (or auto) finishes "
        "the output later. output.exists: auto, for batch scripts, writes a new output, resumes "
        "the same job's unfinished one and exits 0 with \"nothing to do\" over its complete, "
        "verified one.",
        opts,
        1,
        1};
    const char *pos[1];
    unsigned npos;
    int rc = sm_cli_parse(&spec, argc, argv, pos, &npos);
    if (rc >= 0) {
        return rc;
    }
    struct sm_err err;
    sm_err_clear(&err);
    /* What a run takes from its arguments, its configuration file and the environment is settled
     * before ranks start (docs/internals/ranks.md): a failure is every rank's without an
     * agreement, and a run that cannot start never starts MPI. */
    struct sm_job_config c;
    sm_status st = sm_config_load(pos[0], set_list.v, set_list.n, &c, &err);
    if (st != SM_OK) {
        return fail_before_ranks(&err);
    }
    struct sm_job_s3 s3; /* an s3:// input's endpoint, region and credentials */
    st = sm_job_s3_resolve(c.input.store, c.input.s3_endpoint, c.input.s3_region,
                           c.input.s3_path_style, &s3, &err);
    /* --report before anything is read or written (the config's `report` was checked by
     * sm_config_load): scan, convert and ingest (a convert) check it on rank 0, which writes the
     * report, in the engine's prepare step; read-bench is one process and checks it here */
    if (st == SM_OK && c.job == SM_JOB_READ_BENCH) {
        const struct sm_path_use flag = {"--report", "report", SM_PATHC_REPORT, report};
        if (report != NULL) {
            st = sm_config_check_report(report, "--report", &err);
        }
        if (st == SM_OK) { /* the output rule: the report is not the input, nor inside it */
            st =
                sm_job_check_paths(&c, report != NULL ? &flag : NULL, report != NULL ? 1 : 0, &err);
        }
    }
    /* ranks only when a launcher started us (SPEC §1); docs/internals/ranks.md */
    if (st == SM_OK) {
        st = sm_par_init(sm_job_launched_by_mpi(), NULL, NULL, &err);
    }
    if (st != SM_OK) {
        sm_job_s3_destroy(&s3);
        sm_config_destroy(&c);
        return fail_before_ranks(&err);
    }
    sm_signals_install(); /* after MPI started: ours, whatever the MPI library set up */
    if (s3.active) {
        c.input.http.s3 = &s3.opts;
    }
    if (quiet) {
        c.progress = false;
    }
    /* each job's report goes to --report, else the config's (NULL: the summary alone) */
    const struct sm_report_to to = {sm_config_job_name(c.job), report != NULL ? report : c.report,
                                    report};
    switch (c.job) {
    case SM_JOB_SCAN:
        st = sm_job_scan(&c, &to, &err);
        break;
    case SM_JOB_CONVERT:
        st = sm_job_convert(&c, &to, &err);
        break;
    case SM_JOB_INGEST:
        st = sm_job_convert(&c, &to, &err); /* convert with normalize none (config_rules.c) */
        break;
    case SM_JOB_READ_BENCH:
        if (sm_par_size() > 1) { /* timings of one reader; ranks would contend for the same I/O */
            SM_ERR(&err, SM_E_USAGE, "read-bench runs as one process, not under %d MPI ranks",
                   sm_par_size());
            sm_err_where(&err, "%s: job", pos[0]);
            st = err.status;
            break;
        }
        st = sm_job_read_bench(&c, to.path, &err);
        break;
    }
    if (st == SM_E_STOPPED) { /* every rank holds the same agreed stop: name the signal */
        const bool writes =
            (c.job == SM_JOB_CONVERT || c.job == SM_JOB_INGEST) && c.output.path != NULL;
        sm_stop_explain(&err, writes ? c.output.path : pos[0],
                        writes ? "no completion marker; run it again with output.exists: resume "
                                 "or auto to finish the output"
                               : NULL);
    }
    sm_config_destroy(&c);
    sm_job_s3_destroy(&s3);
    return finish_run(st, &err);
}
