/* The min/max pass of SPEC §5: a wider integer or float input without histogram.range gets its
 * histogram range from the finite min and max of the whole ROI, found by one read of every
 * rank's tiles before the scan (the same tiles, threads, memo or source reader as the scan; no
 * bins, no checksums), reduced over the ranks. It is an extra read of the input: its wall time is
 * timing_ms.range, its requests and bytes are in the input's I/O counters. */
#include "run_int.h"

#include "shardmill/par.h"

sm_status sm_run_minmax_range(struct sm_array *a, struct sm_run_setup *s, uint64_t first,
                              uint64_t count, struct sm_err *err)
{
    if (s->range_from != SM_HIST_RANGE_MINMAX) {
        return SM_OK;
    }
    struct sm_scan_params p = s->params;
    p.minmax_only = true;
    p.keep = NULL;
    p.bins = 1; /* the per-thread histograms only carry min and max */
    p.lo = 0.0;
    p.hi = 1.0;
    struct sm_scan_result r;
    sm_status st = sm_scan_tiles(a, &s->tiling, first, count, &p, &r, err);
    double lo = r.hist.min, hi = r.hist.max;
    sm_scan_result_destroy(&r);
    /* every rank reaches the reductions, or none does */
    SM_TRY(sm_par_agree(st, err));
    SM_TRY(sm_par_min_f64(&lo, 1, err));
    SM_TRY(sm_par_max_f64(&hi, 1, err));
    return sm_hist_minmax_range(lo, hi, &s->params.lo, &s->params.hi, err);
}
