/* The phase driver of a run (docs/internals/pipeline.md): what every phase of scan and convert
 * needs around its own work, written once — the progress line, the stop check before it, the
 * agreement on the lowest failing rank's error after it, and its wall time. A phase runs only
 * while every rank succeeded; after a failure the phases with a cleanup (the flush of written
 * shards) still run it on every rank, so a resume keeps what was done. A run that ends early
 * (env->done, e.g. output.exists: auto over a complete output) runs only the phases flagged
 * RUN_PHASE_ALWAYS (the result); a phase whose `when` is false is not part of this run. Each
 * transition is traced through the progress hook (progress->trace). With env->res it also counts
 * the input's reads of each pass (range, scan, write: SPEC §7 io.source.passes). */
#include "run_int.h"

#include <string.h>

#include "shardmill/clock.h"

/* The pass counters of a run (env->res): the slot of a phase by its name (SM_RUN_PASS_*), PLAN
 * for the phase whose reads count to the next pass, -1 for the rest. */
enum { PASS_NONE = -1, PASS_PLAN = -2 };
static int pass_slot(const char *name)
{
    for (int i = 0; i < SM_RUN_NPASSES; i++) {
        if (strcmp(name, sm_run_pass_name(i)) == 0) {
            return i;
        }
    }
    return strcmp(name, "plan") == 0 ? PASS_PLAN : PASS_NONE;
}

/* What the input's reads fetched during one phase, and the reads not yet given to a pass. */
struct pass_probe {
    uint64_t bytes0, rchar0;
    uint64_t carry_bytes, carry_rchar;
};

static void probe_begin(struct sm_run_result *res, struct pass_probe *pr)
{
    pr->bytes0 = sm_run_input_read(res);
    if (!sm_run_rchar(&pr->rchar0)) {
        res->rchar_known = false;
    }
}

/* A pass that had work (`active`) gets what its phase read and the carry; the plan phase's reads
 * and those of a pass with nothing to do (the range pass of a job without one) go to the next. */
static void probe_end(struct sm_run_result *res, struct pass_probe *pr, int slot, bool active)
{
    uint64_t rchar1 = pr->rchar0;
    if (!sm_run_rchar(&rchar1)) {
        res->rchar_known = false;
    }
    pr->carry_bytes += sm_run_input_read(res) - pr->bytes0;
    pr->carry_rchar += rchar1 - pr->rchar0;
    if (slot >= 0 && active) {
        res->pass[slot].bytes_read += pr->carry_bytes;
        res->pass[slot].rchar += pr->carry_rchar;
        res->pass[slot].ran = true;
        pr->carry_bytes = pr->carry_rchar = 0;
    }
}

static void trace(const struct run_phase_env *env, const struct run_phase *p, const char *what)
{
    const struct sm_run_progress *pr = env->progress;
    if (pr != NULL && pr->trace != NULL) {
        pr->trace(pr->user, p->name, what);
    }
}

sm_status sm_run_phases(const struct run_phase *ph, size_t n, void *ctx,
                        const struct run_phase_env *env, struct sm_err *err)
{
    sm_status st = SM_OK;
    bool agreed = false; /* the failure in st is every rank's already */
    struct pass_probe probe = {0, 0, 0, 0};
    if (env->res != NULL) {
        uint64_t r;
        env->res->rchar_known = sm_run_rchar(&r);
    }
    for (size_t i = 0; i < n; i++) {
        const struct run_phase *p = &ph[i];
        const uint64_t t0 = sm_clock_ns();
        if (st != SM_OK) {
            if (p->cleanup != NULL) {
                trace(env, p, "cleanup");
                p->cleanup(ctx);
            }
            continue;
        }
        if (env->done != NULL && *env->done && (p->flags & RUN_PHASE_ALWAYS) == 0) {
            trace(env, p, "ended");
            continue; /* ended early, alike on every rank: nothing to agree on */
        }
        if (p->when != NULL && !p->when(ctx)) {
            trace(env, p, "skipped");
            continue; /* not part of this run, alike on every rank */
        }
        trace(env, p, "begin");
        const bool shown = p->unit != NULL && (p->total == NULL || p->total(ctx) != UINT64_MAX);
        if (shown) {
            sm_run_progress_begin(env->progress, p->name, p->unit,
                                  p->total != NULL ? p->total(ctx) : 0);
        }
        /* checked before the work, agreed after it: a stop starts no new phase */
        st = (p->flags & RUN_PHASE_NO_STOP) != 0 ? SM_OK : sm_run_stop_check(env->stop, SM_OK, err);
        const int slot = env->res != NULL ? pass_slot(p->name) : PASS_NONE;
        if (st == SM_OK && slot != PASS_NONE) {
            probe_begin(env->res, &probe);
        }
        if (st == SM_OK) {
            st = p->run(ctx, err);
        }
        if (st == SM_OK && slot != PASS_NONE) {
            probe_end(env->res, &probe, slot,
                      slot >= 0 && (p->total == NULL || p->total(ctx) != UINT64_MAX));
        }
        if (shown) {
            sm_run_progress_end(env->progress, st == SM_OK); /* every rank, success or not */
        }
        if (st != SM_OK && p->cleanup != NULL) {
            trace(env, p, "cleanup");
            p->cleanup(ctx);
        }
        st = sm_run_agree(&agreed, st, err);
        trace(env, p, st == SM_OK ? "ok" : "failed");
        if (p->timing >= 0 && env->timing_ms != NULL) {
            env->timing_ms[p->timing] += run_ms(sm_clock_ns() - t0);
        }
    }
    return st;
}
