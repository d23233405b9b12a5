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

/* Ends a run on every rank: the error line is printed once (rank 0; every rank holds the same
 * agreed error), MPI is finalised, and every rank returns the same exit status. */
static int finish_run(sm_status st, const struct sm_err *err)
{
    int rc = 0;
    if (st != SM_OK) {
        rc = sm_par_rank() == 0 ? sm_report_error(err) : sm_exit_code_of(err);
    }
    sm_par_finalize();
    return rc;
}

int sm_cmd_run(int argc, char **argv)
{
    struct sm_str_list set_list = {0};
    const char *report = NULL;
    bool quiet = false;
    const struct sm_opt opts[] = {
        {"set", 0, SM_OPT_STRINGS, "KEY=VALUE",
         "override a configuration key (repeatable), e.g. --set tile=[32,32,32]", &set_list},
        {"report", 0, SM_OPT_STRING, "PATH",
         "write the JSON report here ('-' = stdout, instead of the summary)", &report},
        {"quiet", 'q', SM_OPT_FLAG, NULL, "no progress output", &quiet},
        {NULL, 0, SM_OPT_FLAG, NULL, NULL, NULL},
    };
    const struct sm_cmd_spec spec = {
        "run",
        "CONFIG.yaml [--set KEY=VALUE]... [--report PATH]",
        "Runs the job a YAML pipeline describes: scan (histogram and checksums of a region), "
        "convert (scan, normalize, write a sharded Zarr v3 array), ingest (raw, NIfTI-1, TIFF "
        "stack or HDF5 dataset to Zarr v3; under mpirun each rank reads and writes its own "
        "shards) or read-bench (timed region reads with I/O counters, SPEC §8 W3); with "
        "output.ome, convert and ingest write an OME-Zarr 0.5 image with a mean pyramid. scan, "
        "convert and read-bench read a Zarr v2/v3 array or an N5 dataset from a directory, a "
        "file://, http(s):// or s3://bucket/prefix URL (input.store); ingest reads a local file or "
        "directory. Prints a "
        "short summary; the JSON report goes to --report or the config's `report`. See "
        "docs/CONFIG.md for every key and its default. SIGTERM or SIGINT (Slurm's time limit or "
        "scancel, Ctrl-C) stops every rank at its next tile or shard: no completion marker, "
        "exit status 128 + the signal (143, 130), and output.exists: resume finishes the output "
        "later.",
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
    /* ranks only when a launcher started us (SPEC §1); docs/internals/ranks.md */
    sm_status st = sm_par_init(sm_job_launched_by_mpi(), NULL, NULL, &err);
    if (st != SM_OK) {
        return sm_report_error(&err);
    }
    sm_signals_install(); /* after MPI_Init: ours, whatever the MPI library set up */
    struct sm_job_config c;
    st = sm_config_load(pos[0], set_list.v, set_list.n, &c, &err);
    if (sm_par_agree(st, &err) != SM_OK) {
        if (st == SM_OK) {
            sm_config_destroy(&c);
        }
        return finish_run(err.status, &err);
    }
    /* --report's path before anything is read or written (the config's `report` was checked by
     * sm_config_load); rank 0 writes the report */
    st = sm_par_rank() == 0 && report != NULL ? sm_config_check_report(report, "--report", &err)
                                              : SM_OK;
    if (sm_par_agree(st, &err) != SM_OK) {
        sm_config_destroy(&c);
        return finish_run(err.status, &err);
    }
    struct sm_job_s3 s3; /* an s3:// input's endpoint, region and credentials */
    st = sm_job_s3_resolve(c.input.store, c.input.s3_endpoint, c.input.s3_region,
                           c.input.s3_path_style, &s3, &err);
    if (sm_par_agree(st, &err) != SM_OK) {
        sm_job_s3_destroy(&s3);
        sm_config_destroy(&c);
        return finish_run(err.status, &err);
    }
    if (s3.active) {
        c.input.http.s3 = &s3.opts;
    }
    if (quiet) {
        c.progress = false;
    }
    const char *path = report != NULL ? report : c.report; /* NULL: the summary alone */
    switch (c.job) {
    case SM_JOB_SCAN:
        st = sm_job_scan(&c, path, &err);
        break;
    case SM_JOB_CONVERT:
        st = sm_job_convert(&c, path, &err);
        break;
    case SM_JOB_INGEST:
        st = sm_job_convert(&c, path, &err); /* convert with normalize none (config_yaml.c) */
        break;
    case SM_JOB_READ_BENCH:
        if (sm_par_size() > 1) { /* timings of one reader; ranks would contend for the same I/O */
            sm_err_set(&err, SM_E_USAGE, __FILE__, __LINE__,
                       "read-bench runs as one process, not under %d MPI ranks", sm_par_size());
            sm_err_where(&err, "%s: job", pos[0]);
            st = err.status;
            break;
        }
        st = sm_job_read_bench(&c, path, &err);
        break;
    }
    if (st == SM_E_STOPPED) { /* every rank holds the same agreed stop: name the signal */
        const bool writes =
            (c.job == SM_JOB_CONVERT || c.job == SM_JOB_INGEST) && c.output.path != NULL;
        sm_stop_explain(&err, writes ? c.output.path : pos[0],
                        writes ? "no completion marker; run it again with output.exists: resume "
                                 "to finish the output"
                               : NULL);
    }
    sm_config_destroy(&c);
    sm_job_s3_destroy(&s3);
    return finish_run(st, &err);
}
