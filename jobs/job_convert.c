/* The `convert` job, also of `job: ingest` (SPEC §1, §2 output, §5, §6): the config as the
 * engine's convert of a Zarr/N5 array or a file source (shardmill/pipeline.h, sm_run_convert:
 * scan, global statistics, normalization, write, flush, the HDF5 export of export.hdf5,
 * agreement, completion marker) and its report (report.c, from the result the engine reduced
 * over the ranks). What stays here is the command line's: the path checks of SPEC §6 and of the
 * report as the engine's prepare step, the export's early check once the output is open, the
 * warning about very many shards and the progress line. */
#include "jobs_run.h"

#include <stdio.h>
#include <string.h>

#include <shardmill/alloc.h>
#include <shardmill/par.h>
#include <shardmill/pipeline.h>
#include <shardmill/source.h>
#include <shardmill/url.h>
#include <shardmill/write.h>

#include "jobs.h"
#include "plan_estimate.h"
#include "progress.h"
#include "report.h"
#include "report_rates.h"

/* The configuration text hashed into provenance: everything that determines the output bytes,
 * so thread counts, report paths and progress settings do not change zarr.json. input.store is
 * left out: the provenance's `input` names the input resolved (its realpath, a URL redacted:
 * run_input_id.c), so `./in.zarr`, `in.zarr/` and the absolute path are one job; every other
 * URL is hashed redacted (issue 32: a password neither shapes config_sha256 nor can be guessed
 * offline from it). */
static void config_hash(const char *effective, char hex[65])
{
    static const char *const skip[] = {"parallel.",   "report",
                                       "progress",    "input.cache.",
                                       "input.http.", "input.index_cache.",
                                       "limits.",     "output.exists",
                                       "output.path", "output.fsync",
                                       "output.sync", "input.store=",
                                       NULL};
    size_t n = strlen(effective);
    char *text = sm_malloc(n + 1);
    size_t w = 0;
    for (const char *line = effective; text != NULL && *line != '\0';) {
        const char *nl = strchr(line, '\n');
        size_t len = nl != NULL ? (size_t)(nl - line) + 1 : strlen(line);
        bool drop = false;
        for (size_t i = 0; skip[i] != NULL && !drop; i++) {
            drop = strncmp(line, skip[i], strlen(skip[i])) == 0;
        }
        drop = drop || strncmp(line, "export.", 7) == 0; /* the HDF5 copy: not the Zarr bytes */
        if (!drop) {
            memcpy(text + w, line, len);
            w += len;
        }
        line += len;
    }
    if (text != NULL) {
        text[w] = '\0';
    }
    /* a redacted URL is longer than its secret by at most "<redacted>" per secret: 3n bounds it */
    const size_t cap = 3 * (text != NULL ? w : n) + 64;
    char *red = sm_malloc(cap);
    const char *hashed = text != NULL ? text : effective;
    if (red != NULL) {
        hashed = sm_url_redact(hashed, red, cap);
    } else {
        hashed = ""; /* out of memory: never hash a secret */
    }
    sm_sha256_hex(hashed, strlen(hashed), hex);
    sm_free(red);
    sm_free(text);
}

/* The engine's hooks: the prepare step (SPEC §6 paths, the report's path on rank 0) and rank
 * 0's warning about the layout (the export's checks are the engine's output phase). */
static void hook_layout(void *user, const struct sm_output_spec *spec, uint64_t nshards)
{
    (void)user;
    sm_job_layout_warn(spec, nshards);
}

sm_status sm_job_convert(const struct sm_job_config *c, const char *report_path, struct sm_err *err)
{
    struct sm_convert_run p = SM_CONVERT_RUN_DEFAULTS;
    sm_job_run_common(c, &p.c);
    sm_job_run_output(c, &p.output);
    sm_job_run_export(c, &p.export);
    /* output.dtype: float32 unless normalize none (the engine checks it against the input) */
    p.output.dtype_set = c->output.dtype != NULL;
    if (p.output.dtype_set && !sm_dtype_from_name(c->output.dtype, &p.output.dtype)) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "unknown data type '%s'", c->output.dtype);
        sm_err_where(err, "output.dtype");
        return err->status; /* the same on every rank: the same config */
    }
    sm_job_run_norm(c, &p.normalize);
    char hex[65];
    config_hash(c->effective != NULL ? c->effective : "", hex);
    p.config_sha256 = hex;
    struct sm_job_progress jp;
    p.c.progress = sm_job_progress_hooks(&jp, c, "convert");
    p.c.stop = sm_signals_flag();
    struct sm_job_prepare prep = {c, report_path};
    const struct sm_run_hooks hooks = {sm_job_prepare, NULL, hook_layout, NULL, &prep};
    p.hooks = hooks;
    struct sm_source_params sp; /* the engine opens the file on every rank */
    if (sm_job_reads_source(c)) {
        sm_job_source_params(c, &sp);
        p.source_params = &sp;
    }
    /* the memory ceiling (SPEC §1): plan's bound, adapted or refused before anything is
     * written; every rank computes the same from the same metadata (no collective) */
    struct sm_plan_fit fit;
    struct sm_run_io preflight;
    struct sm_meta_docs docs = SM_META_DOCS_INIT; /* its metadata, read once: the run reuses it */
    sm_status st = sm_plan_memory_run(c, sm_par_size(), p.c.threads, &fit, &preflight, &docs, err);
    p.c.preflight = &preflight; /* its metadata read: in the report's requests */
    p.c.input.docs = &docs;
    if (st == SM_OK && fit.checked && !fit.fits) {
        st = sm_plan_memory_refuse(&fit, err);
    }
    if (st != SM_OK) {
        sm_meta_docs_free(&docs);
        return st;
    }
    if (fit.checked) {
        p.c.threads = fit.threads;
        p.c.reread = fit.reread;
    }
    struct sm_run_result r;
    st = sm_run_convert(&p, &r, err);
    sm_meta_docs_free(&docs);
    const char *rp = report_path != NULL ? report_path : c->report;
    if (st == SM_OK) { /* rank 0's alone: the others exit 0 */
        st = sm_report_run_emit(sm_config_job_name(c->job), true, rp, &r,
                                fit.checked ? sm_plan_fit_json(&fit) : NULL,
                                sm_report_rates_json(c, &r), err);
    }
    /* the summary says it; with --report - (JSON only on stdout) the line goes to stderr */
    if (st == SM_OK && sm_par_rank() == 0 && r.output_found == SM_OUTPUT_FOUND_COMPLETE &&
        rp != NULL && strcmp(rp, "-") == 0) {
        fprintf(stderr, "shardmill: output %s is already complete and verified: nothing to do\n",
                r.output_path);
    }
    sm_run_result_destroy(&r);
    return st;
}
