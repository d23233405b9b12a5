/* The `convert` job, also of `job: ingest` (SPEC §1, §2, §5, §6): the config's parameters
 * (job_input.c, sm_job_convert_params) run as the engine's convert (shardmill/pipeline.h,
 * sm_run_convert), with the command line's part: the prepare step's path checks, the memory
 * ceiling, the warning about very many shards, the progress line, and the report from the result
 * (report.c) where `run` said it goes. */
#include "jobs_run.h"

#include <stdio.h>
#include <string.h>

#include <shardmill/par.h>
#include <shardmill/pipeline.h>
#include <shardmill/write.h>

#include "jobs.h"
#include "plan_estimate.h"
#include "progress.h"
#include "report.h"
#include "report_rates.h"

/* The engine's hooks: the prepare step (SPEC §6 paths, the report's path on rank 0) and rank
 * 0's warning about the layout (the export's checks are the engine's output phase). */
static void hook_layout(void *user, const struct sm_output_spec *spec, uint64_t nshards)
{
    (void)user;
    sm_job_layout_warn(spec, nshards);
}

sm_status sm_job_convert(const struct sm_job_config *c, const struct sm_report_to *to,
                         struct sm_err *err)
{
    struct sm_convert_run p;
    struct sm_job_convert_keep keep; /* what p points to: its source's parameters, its hash */
    SM_TRY(sm_job_convert_params(c, &p, &keep, err));
    struct sm_job_progress jp;
    p.c.progress = sm_job_progress_hooks(&jp, c, "convert");
    p.c.stop = sm_signals_flag();
    struct sm_job_prepare prep = {c, to->flag};
    const struct sm_run_hooks hooks = {sm_job_prepare, NULL, hook_layout, NULL, &prep};
    p.hooks = hooks;
    /* the memory ceiling (SPEC §1): plan's bound, adapted or refused before anything is
     * written; every rank computes the same from the same metadata (no collective) */
    struct sm_plan_fit fit = {.checked = false};
    struct sm_run_io preflight;
    memset(&preflight, 0, sizeof(preflight));
    struct sm_meta_docs docs = SM_META_DOCS_INIT; /* its metadata, read once: the run reuses it */
    sm_status st = SM_OK;
    if (c->limits.memory_ceiling) { /* planned from p, the parameters the run gets */
        st = sm_plan_memory_run(&p, sm_par_size(), p.c.threads, &fit, &preflight, &docs, err);
    }
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
    if (st == SM_OK) { /* rank 0's alone: the others exit 0 */
        st = sm_report_run_emit(to, true, &r, fit.checked ? sm_plan_fit_json(&fit) : NULL,
                                sm_report_rates_json(&p.output, &r), err);
    }
    /* the summary says it; with --report - (JSON only on stdout) the line goes to stderr */
    if (st == SM_OK && sm_par_rank() == 0 && r.output_found == SM_OUTPUT_FOUND_COMPLETE &&
        to->path != NULL && strcmp(to->path, "-") == 0) {
        fprintf(stderr, "shardmill: output %s is already complete and verified: nothing to do\n",
                r.output_path);
    }
    sm_run_result_destroy(&r);
    return st;
}
