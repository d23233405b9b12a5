/* The `scan` job (SPEC §4, §5, §7): the config as the engine's scan (shardmill/pipeline.h,
 * sm_run_scan: tiles over the ROI, `passes` traversals, OpenMP threads, ranks) and its report
 * (report.c: counters summed over ranks, timings the maximum over ranks as flat fields plus
 * timing_ms.max and timing_ms.mean, as the engine reduced them; written by rank 0). */
#include "jobs_run.h"

#include <shardmill/par.h>
#include <shardmill/pipeline.h>

#include "jobs.h"
#include "progress.h"
#include "report.h"
#include "report_rates.h"

sm_status sm_job_scan(const struct sm_job_config *c, const struct sm_report_to *to,
                      struct sm_err *err)
{
    struct sm_scan_run p = SM_SCAN_RUN_DEFAULTS;
    sm_job_run_common(c, &p.c);
    p.passes = c->passes;
    struct sm_job_progress jp;
    p.c.progress = sm_job_progress_hooks(&jp, c, "scan");
    p.c.stop = sm_signals_flag();
    struct sm_job_prepare prep = {c, to->flag}; /* rank 0's --report, agreed by the engine */
    p.prepare = sm_job_prepare;
    p.user = &prep;
    struct sm_run_result r;
    sm_status st = sm_run_scan(&p, &r, err);
    if (st == SM_OK) { /* rank 0's alone: the others exit 0 */
        st = sm_report_run_emit(to, false, &r, NULL, sm_report_rates_json(NULL, &r), err);
    }
    sm_run_result_destroy(&r);
    return st;
}
