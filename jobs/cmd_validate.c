/* `shardmill validate CONFIG.yaml [--set key.path=value]...` (SPEC §4): loads and checks a job
 * configuration without opening any store, then prints "CONFIG.yaml: ok (job NAME)" and the
 * effective configuration as YAML on stdout (exit 0), or the one error line (exit 2).
 * `--markdown` prints docs/CONFIG.md, generated from the same schema table. */
#include <shardmill/sm_config.h>

#include "jobs.h"

#include <stdio.h>
#include <string.h>

#include <shardmill/alloc.h>

#include "config.h"
#include "jobs_run.h"

/* A failed write of the output (a full disk, a closed pipe) is an I/O failure, exit 4. */
static int flush_stdout(struct sm_err *err)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        SM_ERR_AT(err, SM_E_IO, "standard output", "cannot write the output");
        return sm_report_error(err);
    }
    return 0;
}

/* The output layout when the config alone fixes the output's shape (roi.shape of a convert, the
 * shape of a raw ingest); otherwise where it will come from. Nothing is opened. */
static void print_layout(const struct sm_job_config *c)
{
    if (c->job != SM_JOB_CONVERT && c->job != SM_JOB_INGEST) {
        return;
    }
    const bool raw =
        c->job == SM_JOB_INGEST && c->input.format != NULL && strcmp(c->input.format, "raw") == 0;
    const struct sm_cfg_dims *shape = raw ? &c->input.raw_shape : &c->roi.shape;
    enum sm_dtype dt = SM_DT_FLOAT32;
    if (raw && (c->input.raw_dtype == NULL || !sm_dtype_from_name(c->input.raw_dtype, &dt))) {
        dt = SM_DT_FLOAT32;
    }
    struct sm_output_spec spec;
    struct sm_err err;
    sm_err_clear(&err);
    if (!shape->set || shape->is_auto ||
        sm_job_output_spec(c, shape->n, shape->v, dt, NULL, &spec, &err) != SM_OK) {
        printf(
            "layout: output.shard %s, output.chunk %s, chosen from the input's shape at run time "
            "(`shardmill plan` prints it)\n",
            c->output.shard.is_auto || !c->output.shard.set ? "auto" : "as given",
            c->output.chunk.is_auto || !c->output.chunk.set ? "auto" : "as given");
        return;
    }
    uint64_t n = 1;
    const uint64_t *outer = spec.sharded ? spec.shard : spec.chunk;
    for (unsigned d = 0; d < spec.ndim; d++) {
        n *= (spec.shape[d] + outer[d] - 1) / outer[d];
    }
    char line[512];
    sm_job_layout_text(c, &spec, n, line, sizeof(line));
    printf("layout: %s\n", line);
    sm_job_layout_warn(&spec, n);
}

int sm_cmd_validate(int argc, char **argv)
{
    struct sm_str_list sets = {0};
    bool quiet = false, markdown = false;
    const char *report = NULL, *log_dir = NULL, *writes = NULL;
    const struct sm_opt opts[] = {
        {"set", 0, SM_OPT_STRINGS, "KEY=VALUE",
         "override a key after the file (repeatable; VALUE is YAML)", &sets,
         SM_PATHC_NONE /* each value: its key's row */},
        {"report", 0, SM_OPT_STRING, "PATH",
         "the --report a run will get: checked as run checks it (writable, and the output rule: "
         "not the input, not inside or containing an input or an output)",
         &report, SM_PATHC_REPORT},
        {"log-dir", 0, SM_OPT_STRING, "DIR",
         "a directory a batch system writes the job's logs into (slurm/render --output-dir): "
         "not an input or an output, nor inside one",
         &log_dir, SM_PATHC_LOG_DIR},
        {"writes", 0, SM_OPT_STRING, "FILE",
         "another file written for the job (slurm/render -o, the batch script): the output rule",
         &writes, SM_PATHC_OUTPUT},
        {"quiet", 'q', SM_OPT_FLAG, NULL, "print only the ok line", &quiet, SM_PATHC_NONE},
        {"markdown", 0, SM_OPT_FLAG, NULL,
         "print the configuration reference (docs/CONFIG.md) and exit", &markdown, SM_PATHC_NONE},
        {NULL, 0, SM_OPT_FLAG, NULL, NULL, NULL, SM_PATHC_NONE},
    };
    const struct sm_cmd_spec spec = {
        "validate",
        "CONFIG.yaml [--set KEY=VALUE]... [--report PATH] [--log-dir DIR] [--writes FILE] "
        "[--quiet] | --markdown",
        "Loads a job configuration, applies the --set overrides and checks every key (types, "
        "ranges, required keys, keys that must agree) without opening any store. Prints "
        "\"CONFIG.yaml: ok (job NAME)\" and then the effective configuration, every key the job "
        "uses with defaults included, as YAML that validates to the same values; a key the job "
        "does not use is an error. Every path written (output.path, export.hdf5.path, report, and "
        "--report, --log-dir, --writes) is compared with the input and the others after "
        "resolving links: none may be the input or lie inside or contain an input or an output "
        "(a log directory may contain them). Errors: one line "
        "\"shardmill: error: FILE:LINE:COL: ...\" and exit 2. Keys: docs/CONFIG.md.",
        opts,
        0,
        1};
    const char *pos[1];
    unsigned npos = 0;
    int rc = sm_cli_parse(&spec, argc, argv, pos, &npos);
    if (rc >= 0) {
        return rc;
    }
    struct sm_err err;
    sm_err_clear(&err);
    if (markdown) {
        char *md = sm_config_markdown();
        if (md == NULL) {
            SM_ERR(&err, SM_E_NOMEM, "out of memory");
            return sm_report_error(&err);
        }
        fputs(md, stdout);
        sm_free(md);
        return flush_stdout(&err);
    }
    if (npos == 0) {
        return sm_usage_error("validate", "missing argument (usage: shardmill validate %s)",
                              spec.usage);
    }
    struct sm_job_config cfg;
    sm_status st = sm_config_load(pos[0], sets.v, sets.n, &cfg, &err);
    if (st != SM_OK) {
        return sm_report_error(&err);
    }
    /* the paths as a run compares them: no store is opened */
    struct sm_path_use extra[3];
    unsigned nextra = 0;
    if (report != NULL) {
        extra[nextra++] = (struct sm_path_use){"--report", "report", SM_PATHC_REPORT, report};
        st = sm_config_check_report(report, "--report", &err);
    }
    if (log_dir != NULL) {
        extra[nextra++] =
            (struct sm_path_use){"--log-dir", "log directory", SM_PATHC_LOG_DIR, log_dir};
    }
    if (writes != NULL) {
        extra[nextra++] = (struct sm_path_use){"--writes", "file", SM_PATHC_OUTPUT, writes};
    }
    if (st == SM_OK) {
        st = sm_job_check_paths(&cfg, extra, nextra, &err);
    }
    if (st != SM_OK) {
        sm_config_destroy(&cfg);
        return sm_report_error(&err);
    }
    printf("%s: ok (job %s)\n", pos[0], sm_config_job_name(cfg.job));
    print_layout(&cfg);
    rc = 0;
    if (!quiet) {
        char *yaml = sm_config_format_yaml(&cfg);
        if (yaml == NULL) {
            SM_ERR(&err, SM_E_NOMEM, "out of memory");
            rc = sm_report_error(&err);
        } else {
            fputs(yaml, stdout);
            sm_free(yaml);
        }
    }
    sm_config_destroy(&cfg);
    return rc != 0 ? rc : flush_stdout(&err);
}
