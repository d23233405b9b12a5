/* The memory ceiling (SPEC §1, issue 34 item 4): limits.memory_bytes bounds each rank's peak RSS
 * as a whole process. The bound is `plan`'s own (sm_plan_estimate, sm_plan_peak_rss); when it is
 * over the ceiling the run adapts, in order: the input re-read instead of kept, then fewer
 * threads (each thread holds one shard in flight); when even one thread re-reading is over, the
 * run stops before anything is written: exit 5 naming the bound and its parts. */
#include "plan_estimate.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "report.h"

/* The bound with `threads` threads, the input re-read or not (no sample read). */
static sm_status bound_of(const struct sm_plan_job *j, const struct sm_plan_input *in,
                          const struct sm_run_setup *su, const struct sm_plan_phase *tiles,
                          const struct sm_tiling *grid, const struct sm_plan_phase *shards,
                          int ranks, int threads, bool reread, const struct sm_plan_estimate *proto,
                          struct sm_plan_estimate *e, struct sm_err *err)
{
    *e = *proto;
    e->reread = reread;
    e->memory_only = true;
    return sm_plan_estimate(j, in, su, tiles, grid, shards, ranks, threads, e, err);
}

sm_status sm_plan_memory_fit(const struct sm_plan_job *j, const struct sm_plan_input *in,
                             const struct sm_run_setup *su, const struct sm_plan_phase *tiles,
                             const struct sm_tiling *grid, const struct sm_plan_phase *shards,
                             int ranks, int threads, const struct sm_plan_estimate *proto,
                             struct sm_plan_fit *fit, struct sm_err *err)
{
    memset(fit, 0, sizeof(*fit));
    const uint64_t limit = j->run.c.memory_bytes;
    const int T = threads > 0 ? threads : 1;
    struct sm_plan_estimate e;
    SM_TRY(bound_of(j, in, su, tiles, grid, shards, ranks, T, false, proto, &e, err));
    fit->checked = true;
    fit->limit = limit;
    fit->threads_asked = fit->threads = T;
    fit->kept_asked = e.kept || e.kept_some;
    fit->bound_asked = fit->bound = e.peak_rss_bytes;
    fit->parts = e.rss;
    snprintf(fit->adapted, sizeof(fit->adapted), "none");
    if (e.peak_rss_bytes <= limit) {
        fit->fits = true;
        return SM_OK;
    }
    bool reread = false;
    if (fit->kept_asked) { /* 1: re-read instead of keep */
        SM_TRY(bound_of(j, in, su, tiles, grid, shards, ranks, T, true, proto, &e, err));
        if (e.peak_rss_bytes < fit->bound) {
            reread = true;
            fit->reread = true;
            fit->bound = e.peak_rss_bytes;
            fit->parts = e.rss;
        }
    }
    /* 2: the most threads whose bound fits (the bound grows with the threads): bound(lo) fits,
     * bound(hi) does not */
    int best = T;
    if (fit->bound > limit) {
        SM_TRY(bound_of(j, in, su, tiles, grid, shards, ranks, 1, reread, proto, &e, err));
        if (e.peak_rss_bytes > limit) {
            fit->bound = e.peak_rss_bytes;
            fit->parts = e.rss;
            fit->threads = 1;
            snprintf(fit->adapted, sizeof(fit->adapted), "none fits");
            return SM_OK;
        }
        int lo = 1, hi = T;
        while (hi - lo > 1) {
            const int mid = lo + (hi - lo) / 2;
            SM_TRY(bound_of(j, in, su, tiles, grid, shards, ranks, mid, reread, proto, &e, err));
            if (e.peak_rss_bytes <= limit) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        best = lo;
    }
    SM_TRY(bound_of(j, in, su, tiles, grid, shards, ranks, best, reread, proto, &e, err));
    const uint64_t best_bound = e.peak_rss_bytes;
    const struct sm_plan_rss_parts best_parts = e.rss;
    fit->fits = true;
    fit->threads = best;
    fit->bound = best_bound;
    fit->parts = best_parts;
    char thr[64] = "";
    if (best < T) {
        snprintf(thr, sizeof(thr), "%d thread%s, not %d", best, best > 1 ? "s" : "", T);
    }
    snprintf(fit->adapted, sizeof(fit->adapted), "%s%s%s",
             reread ? "the input re-read for the write pass, not kept" : "",
             reread && thr[0] != '\0' ? "; " : "", thr);
    return SM_OK;
}

static void mib(uint64_t b, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.1f MiB", (double)b / 1048576.0);
}

sm_status sm_plan_memory_refuse(const struct sm_plan_fit *f, struct sm_err *err)
{
    const struct sm_plan_rss_parts *p = &f->parts;
    char v[9][32];
    const uint64_t all[9] = {f->bound, f->limit, p->baseline, p->caches, p->input,
                             p->scan,  p->write, p->pyramid,  p->hdf5};
    for (int i = 0; i < 9; i++) {
        mib(all[i], v[i], sizeof(v[i]));
    }
    SM_FAIL_AT(err, SM_E_LIMIT, "limits.memory_bytes",
               "a rank's peak RSS would reach %s (baseline %s, caches %s, input %s, scan %s, "
               "write %s, pyramid %s, export %s) with 1 thread%s, over the ceiling of %s; raise "
               "it or run more ranks (nothing was written)",
               v[0], v[2], v[3], v[4], v[5], v[6], v[7], v[8],
               f->kept_asked ? " and the input re-read" : "", v[1]);
}

json_t *sm_plan_fit_json(const struct sm_plan_fit *f)
{
    return json_pack("{s:o,s:o,s:o,s:b,s:i,s:i,s:b,s:s}", "limit_bytes", sm_json_u64(f->limit),
                     "bound_bytes", sm_json_u64(f->bound), "bound_as_configured_bytes",
                     sm_json_u64(f->bound_asked), "fits", f->fits, "threads", f->threads,
                     "threads_asked", f->threads_asked, "reread", f->reread, "adapted", f->adapted);
}
