/* The scan (SPEC §4, §5, §7): tiles over the ROI in C order, `passes` traversals without
 * reopening metadata, OpenMP threads over tiles; histogram, checksum and weighted checksum per
 * SPEC §5; every pass must agree. Stage times: `open` is the wall time of opening store and
 * metadata; `hydrate`, `decode` and `process` the time threads spent fetching encoded bytes,
 * running codecs and computing statistics, summed over threads and divided by the thread count;
 * `total` the wall time. Under MPI (docs/internals/ranks.md) each rank scans its run of tiles
 * (partition) and the results are summed over ranks. */
#include "run_int.h"

#include <string.h>

#include "shardmill/clock.h"
#include "shardmill/par.h"

static bool same_result(const struct sm_scan_result *a, const struct sm_scan_result *b)
{
    return a->sums.sum == b->sums.sum && a->sums.weighted == b->sums.weighted &&
           a->voxels == b->voxels && a->hist.underflow == b->hist.underflow &&
           a->hist.overflow == b->hist.overflow && a->hist.nan == b->hist.nan &&
           memcmp(a->hist.counts, b->hist.counts, a->hist.bins * sizeof(uint64_t)) == 0;
}

static sm_status scan_ranks(const struct sm_scan_run *p, struct sm_run_result *res,
                            struct sm_err *err)
{
    const struct sm_run_common *c = &p->c;
    const uint64_t t_start = sm_clock_ns();
    /* phase: open (the caller's checks first; agreed, so a rank that cannot open its input
     * stops every rank) */
    if (p->prepare != NULL) {
        SM_TRY(sm_par_agree(p->prepare(p->user, err), err));
    }
    SM_TRY(sm_par_agree(
        sm_run_open_input(&c->input, c->memory_bytes, &res->store, &res->array, err), err));
    const uint64_t t_open = sm_clock_ns() - t_start;
    const struct sm_array_meta *m = sm_array_meta(res->array);
    sm_array_set_stop(res->array, c->stop); /* a tile of many chunks ends at a stop too */
    const uint64_t passes = p->passes > 0 ? p->passes : 1;

    struct sm_run_setup su;
    struct sm_scan_result r = {0};
    sm_status st = sm_par_agree(sm_run_setup(c, m, &su, err), err);
    const bool agreed_failure = st != SM_OK;
    struct sm_scan_params sp = su.params;
    struct sm_part mine = {0, 0, 0};
    if (st == SM_OK) {
        st = run_rank_part(c->partition, m, &su.tiling, &mine, err); /* agreed below */
    }
    uint64_t process_ns = 0;
    run_progress_begin(&c->progress, "scan", "tiles", su.tiling.ntiles * passes);
    sp.progress = c->progress.update;
    sp.progress_user = c->progress.user;
    sp.stop = c->stop;
    for (uint64_t pass = 0; st == SM_OK && pass < passes; pass++) {
        if (c->progress.next_call != NULL) {
            c->progress.next_call(c->progress.user);
        }
        st = sm_scan_tiles(res->array, &su.tiling, mine.first, mine.count, &sp,
                           pass == 0 ? &res->scan : &r, err);
        process_ns += pass == 0 ? res->scan.process_ns : r.process_ns;
        if (st == SM_OK && pass > 0) {
            if (!same_result(&res->scan, &r)) {
                sm_err_set(err, SM_E_INTERNAL, __FILE__, __LINE__,
                           "pass %llu disagrees with pass 1", (unsigned long long)pass + 1);
                st = err->status;
            }
            sm_scan_result_destroy(&r);
        }
    }
    sm_scan_result_destroy(&r);
    run_progress_end(&c->progress, st == SM_OK); /* every rank, success or not */
    /* phase: scan */
    const uint64_t t_red = sm_clock_ns();
    if (!agreed_failure) {
        st = sm_par_agree(run_stop_check(c->stop, st, err), err);
    }
    if (st == SM_OK) {
        st = run_reduce_scan(&res->scan, err);
    }
    const uint64_t allreduce_ns = sm_clock_ns() - t_red;
    if (st != SM_OK) {
        return st;
    }
    res->ranks = sm_par_size();
    res->threads = sp.threads > 0 ? sp.threads : sm_tile_default_threads();
    res->ndim = m->ndim;
    memcpy(res->roi_offset, su.off, sizeof(su.off));
    memcpy(res->roi_shape, su.shape, sizeof(su.shape));
    memcpy(res->tile, su.tile, sizeof(su.tile));
    res->passes = passes;
    struct sm_array_stats as;
    sm_array_stats(res->array, &as);
    const double per = (double)res->threads;
    res->timing[SM_RUN_T_TOTAL] = run_ms(sm_clock_ns() - t_start);
    res->timing[SM_RUN_T_OPEN] = run_ms(t_open);
    res->timing[SM_RUN_T_HYDRATE] = run_ms(as.fetch_ns) / per;
    res->timing[SM_RUN_T_DECODE] = run_ms(as.decode_ns) / per;
    res->timing[SM_RUN_T_PROCESS] = run_ms(process_ns) / per;
    res->timing[SM_RUN_T_ALLREDUCE] = run_ms(allreduce_ns);
    return run_reduce_timings(res, err);
}

sm_status sm_run_scan(const struct sm_scan_run *p, struct sm_run_result *res, struct sm_err *err)
{
    memset(res, 0, sizeof(*res));
    bool entered = false;
    SM_TRY(run_ranks_enter(p->c.mpi_comm, &entered, err));
    const sm_status st = scan_ranks(p, res, err);
    run_ranks_leave(entered);
    return st;
}
