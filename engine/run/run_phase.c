/* The phase driver of a run (docs/internals/pipeline.md): what every phase of scan and convert
 * needs around its own work, written once — the progress line, the stop check before it, the
 * agreement on the lowest failing rank's error after it, and its wall time. A phase runs only
 * while every rank succeeded; after a failure the phases with a cleanup (the flush of written
 * shards) still run it on every rank, so a resume keeps what was done. A run that ends early
 * (env->done, e.g. output.exists: auto over a complete output) runs only the phases flagged
 * RUN_PHASE_ALWAYS (the result). */
#include "run_int.h"

#include "shardmill/clock.h"

sm_status sm_run_phases(const struct run_phase *ph, size_t n, void *ctx,
                        const struct run_phase_env *env, struct sm_err *err)
{
    sm_status st = SM_OK;
    bool agreed = false; /* the failure in st is every rank's already */
    for (size_t i = 0; i < n; i++) {
        const struct run_phase *p = &ph[i];
        const uint64_t t0 = sm_clock_ns();
        if (st != SM_OK) {
            if (p->cleanup != NULL) {
                p->cleanup(ctx);
            }
            continue;
        }
        if (env->done != NULL && *env->done && (p->flags & RUN_PHASE_ALWAYS) == 0) {
            continue; /* ended early, alike on every rank: nothing to agree on */
        }
        const bool shown = p->unit != NULL && (p->total == NULL || p->total(ctx) != UINT64_MAX);
        if (shown) {
            sm_run_progress_begin(env->progress, p->name, p->unit,
                                  p->total != NULL ? p->total(ctx) : 0);
        }
        /* checked before the work, agreed after it: a stop starts no new phase */
        st = (p->flags & RUN_PHASE_NO_STOP) != 0 ? SM_OK : sm_run_stop_check(env->stop, SM_OK, err);
        if (st == SM_OK) {
            st = p->run(ctx, err);
        }
        if (shown) {
            sm_run_progress_end(env->progress, st == SM_OK); /* every rank, success or not */
        }
        if (st != SM_OK && p->cleanup != NULL) {
            p->cleanup(ctx);
        }
        st = sm_run_agree(&agreed, st, err);
        if (p->timing >= 0 && env->timing_ms != NULL) {
            env->timing_ms[p->timing] += run_ms(sm_clock_ns() - t0);
        }
    }
    return st;
}
