/* The scan (SPEC §4, §5, §7): tiles over the ROI in C order, `passes` traversals without
 * reopening metadata, OpenMP threads over tiles; histogram, checksum and weighted checksum per
 * SPEC §5; every pass must agree. A table of phases on the driver of run_phase.c (stop check,
 * agreement, timing, progress): prepare → open → setup → range → scan → reduce → collect; range
 * is the min/max pass of SPEC §5 (run_range.c), run only when the histogram needs it. Stage times:
 * `open` is the wall time of the caller's checks and of opening store and metadata; `hydrate`,
 * `decode` and `process` the time threads spent fetching encoded bytes, running codecs and
 * computing statistics, summed over threads and divided by the thread count; `total` the wall
 * time. Under MPI (docs/internals/ranks.md) each
 * rank scans its run of tiles (partition) and the results are summed over ranks. */
#include "run_int.h"

#include <string.h>

#include "shardmill/clock.h"
#include "shardmill/par.h"

struct sc {
    const struct sm_scan_run *p;
    struct sm_run_result *res;
    uint64_t t_start, passes, process_ns, allreduce_ns;
    const struct sm_array_meta *m;
    struct sm_run_setup su;
    struct sm_part mine;
};

static bool same_result(const struct sm_scan_result *a, const struct sm_scan_result *b)
{
    return a->sums.sum == b->sums.sum && a->sums.weighted == b->sums.weighted &&
           a->voxels == b->voxels && a->hist.underflow == b->hist.underflow &&
           a->hist.overflow == b->hist.overflow && a->hist.nan == b->hist.nan &&
           memcmp(a->hist.counts, b->hist.counts, a->hist.bins * sizeof(uint64_t)) == 0;
}

/* Phase prepare: the caller's checks before anything is opened (jobs/: rank 0's --report). */
static sm_status ph_prepare(void *ctx, struct sm_err *err)
{
    const struct sc *sc = ctx;
    return sc->p->prepare != NULL ? sc->p->prepare(sc->p->user, err) : SM_OK;
}

/* Phase open: the store and array (rank 0 fetches the metadata and broadcasts it). */
static sm_status ph_open(void *ctx, struct sm_err *err)
{
    struct sc *sc = ctx;
    const struct sm_run_common *c = &sc->p->c;
    SM_TRY(sm_run_open_input(&c->input, c->memory_bytes, &sc->res->store, &sc->res->array, err));
    sm_array_set_stop(sc->res->array, c->stop); /* a tile of many chunks ends at a stop too */
    sc->m = sm_array_meta(sc->res->array);
    return SM_OK;
}

/* Phase setup: ROI, tiles, histogram, and this rank's run of tiles. */
static sm_status ph_setup(void *ctx, struct sm_err *err)
{
    struct sc *sc = ctx;
    const struct sm_run_common *c = &sc->p->c;
    SM_TRY(sm_run_setup(c, sc->m, &sc->su, err));
    /* one traversal of tiles that hold whole input objects: none is read twice (SPEC §3) */
    if (sc->passes == 1 &&
        !sm_run_cache_useful(sc->m, &sc->su.tiling, false, sc->su.range_from, false)) {
        sm_store_cache_bypass(sc->res->store);
    }
    sc->su.params.progress = c->progress.update;
    sc->su.params.progress_user = c->progress.user;
    sc->su.params.stop = c->stop;
    return sm_run_rank_part(c->partition, sc->m, &sc->su.tiling, &sc->mine, err);
}

static uint64_t range_total(void *ctx)
{
    const struct sc *sc = ctx;
    return sc->su.range_from == SM_HIST_RANGE_MINMAX ? sc->mine.count : UINT64_MAX;
}

/* Phase range: the min/max pass (SPEC §5) when the histogram has no range of its own. */
static sm_status ph_range(void *ctx, struct sm_err *err)
{
    struct sc *sc = ctx;
    return sm_run_minmax_range(sc->res->array, &sc->su, sc->mine.first, sc->mine.count, err);
}

static uint64_t scan_total(void *ctx)
{
    const struct sc *sc = ctx;
    return sc->su.tiling.ntiles * sc->passes;
}

/* Phase scan: this rank's tiles, `passes` times; every pass must give the first's result. */
static sm_status ph_scan(void *ctx, struct sm_err *err)
{
    struct sc *sc = ctx;
    const struct sm_run_progress *pg = &sc->p->c.progress;
    struct sm_scan_result r = {0};
    sm_status st = SM_OK;
    for (uint64_t pass = 0; st == SM_OK && pass < sc->passes; pass++) {
        if (pg->next_call != NULL) {
            pg->next_call(pg->user);
        }
        struct sm_scan_result *into = pass == 0 ? &sc->res->scan : &r;
        st = sm_scan_tiles(sc->res->array, &sc->su.tiling, sc->mine.first, sc->mine.count,
                           &sc->su.params, into, err);
        sc->process_ns += into->process_ns;
        if (st == SM_OK && pass > 0 && !same_result(&sc->res->scan, &r)) {
            st = SM_ERR(err, SM_E_INTERNAL, "pass %llu disagrees with pass 1",
                        (unsigned long long)pass + 1);
        }
        sm_scan_result_destroy(&r);
    }
    return st;
}

/* Phase reduce: the statistics summed over ranks. */
static sm_status ph_reduce(void *ctx, struct sm_err *err)
{
    struct sc *sc = ctx;
    const uint64_t t0 = sm_clock_ns();
    const sm_status st = sm_run_reduce_scan(&sc->res->scan, err);
    sc->allreduce_ns = sm_clock_ns() - t0;
    return st;
}

/* Phase collect: the result every rank returns, timings max and mean over ranks. */
static sm_status ph_collect(void *ctx, struct sm_err *err)
{
    struct sc *sc = ctx;
    struct sm_run_result *res = sc->res;
    const struct sm_run_setup *su = &sc->su;
    res->ranks = sm_par_size();
    res->threads = su->params.threads > 0 ? su->params.threads : sm_tile_default_threads();
    res->ndim = sc->m->ndim;
    memcpy(res->roi_offset, su->off, sizeof(su->off));
    memcpy(res->roi_shape, su->shape, sizeof(su->shape));
    memcpy(res->tile, su->tile, sizeof(su->tile));
    res->passes = sc->passes;
    res->hist_range_from = su->range_from;
    struct sm_array_stats as;
    sm_array_stats(res->array, &as);
    const double per = (double)res->threads;
    res->timing[SM_RUN_T_TOTAL] = run_ms(sm_clock_ns() - sc->t_start);
    res->timing[SM_RUN_T_HYDRATE] = run_ms(as.fetch_ns) / per;
    res->timing[SM_RUN_T_DECODE] = run_ms(as.decode_ns) / per;
    res->timing[SM_RUN_T_PROCESS] = run_ms(sc->process_ns) / per;
    res->timing[SM_RUN_T_ALLREDUCE] = run_ms(sc->allreduce_ns);
    return sm_run_reduce_timings(res, err);
}

static const struct run_phase scan_phases[] = {
    {.name = "prepare", .run = ph_prepare, .timing = SM_RUN_T_OPEN},
    {.name = "open", .run = ph_open, .timing = SM_RUN_T_OPEN},
    {.name = "setup", .run = ph_setup, .timing = -1},
    {.name = "range",
     .run = ph_range,
     .unit = "tiles",
     .total = range_total,
     .timing = SM_RUN_T_RANGE},
    {.name = "scan", .run = ph_scan, .unit = "tiles", .total = scan_total, .timing = -1},
    {.name = "reduce", .run = ph_reduce, .timing = -1},
    {.name = "collect", .run = ph_collect, .timing = -1, .flags = RUN_PHASE_NO_STOP},
};

sm_status sm_run_scan(const struct sm_scan_run *p, struct sm_run_result *res, struct sm_err *err)
{
    memset(res, 0, sizeof(*res));
    res->input_store = p->c.input.store;
    res->input_array = p->c.input.array;
    bool entered = false;
    SM_TRY(sm_run_ranks_enter(p->c.mpi_comm, &entered, err));
    struct sc sc;
    memset(&sc, 0, sizeof(sc));
    sc.p = p;
    sc.res = res;
    sc.t_start = sm_clock_ns();
    sc.passes = p->passes > 0 ? p->passes : 1;
    const struct run_phase_env env = {&p->c.progress, p->c.stop, res->timing, NULL, NULL};
    const sm_status st =
        sm_run_phases(scan_phases, sizeof(scan_phases) / sizeof(scan_phases[0]), &sc, &env, err);
    sm_run_ranks_leave(entered);
    return st;
}
