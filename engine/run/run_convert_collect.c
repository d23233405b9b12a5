/* Phase collect of a convert: the result every rank returns — the output's checksums, counters
 * and a source's bytes summed over ranks, timings max and mean (SPEC §7) — from what the phases
 * left in the run's state. */
#include "run_convert_int.h"

#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/par.h"

/* The input bytes of this rank's shards' boxes: its share of a source. */
static uint64_t share_bytes(const struct cv *cv)
{
    uint64_t sum = 0, off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    for (uint64_t i = 0; i < cv->nmine; i++) {
        sm_tiling_box(&cv->grid, cv->grouped ? cv->order[i] : cv->shards.first + i, off, shape);
        uint64_t n = cv->in_elem;
        for (unsigned d = 0; d < cv->m->ndim; d++) {
            n *= shape[d];
        }
        sum += n;
    }
    return sum;
}

/* A source's reads: summed, the most any rank read, and the most a rank read beyond its share
 * (docs/internals/pipeline.md: at most one slab when its boxes are read once). */
static sm_status source_counts(struct cv *cv, struct sm_err *err)
{
    struct sm_run_result *res = cv->res;
    const uint64_t read = sm_source_bytes_read(cv->src), share = share_bytes(cv);
    uint64_t sum = read, max[2] = {read, read > share ? read - share : 0};
    SM_TRY(sm_par_sum_u64(&sum, 1, err));
    SM_TRY(sm_par_max_u64(max, 2, err));
    res->source_bytes = sum;
    res->source_bytes_max = max[0];
    res->source_excess_max = max[1];
    res->source_slab_bytes = cv->in_elem;
    for (unsigned d = 0; d < cv->m->ndim; d++) {
        res->source_slab_bytes *= sm_source_info(cv->src)->slab[d];
    }
    return SM_OK;
}

static void stage_times(struct cv *cv, const struct sm_output_stats *os, uint64_t norm_ns)
{
    struct sm_run_result *res = cv->res;
    struct sm_array_stats as;
    memset(&as, 0, sizeof(as));
    if (res->array != NULL) {
        sm_array_stats(res->array, &as);
    } else {
        as.fetch_ns = res->scan.fetch_ns; /* a source's read time is not split */
    }
    const double per = (double)cv->nthreads;
    double *t = res->timing;
    t[SM_RUN_T_TOTAL] = run_ms(sm_clock_ns() - cv->t_start);
    t[SM_RUN_T_HYDRATE] = run_ms(as.fetch_ns) / per;
    t[SM_RUN_T_DECODE] = run_ms(as.decode_ns) / per;
    t[SM_RUN_T_PROCESS] = run_ms(res->scan.process_ns + norm_ns) / per;
    t[SM_RUN_T_ALLREDUCE] = run_ms(cv->allreduce_ns);
    t[SM_RUN_T_WRITE] = run_ms(cv->wr.encode_ns + cv->wr.write_ns) / per + run_ms(os->sync_ns);
    t[SM_RUN_T_SCAN_WALL] = run_ms(cv->t_scan);
    res->sync_ns = os->sync_ns;
}

sm_status sm_cv_collect(void *ctx, struct sm_err *err)
{
    struct cv *cv = ctx;
    struct sm_run_result *res = cv->res;
    uint64_t osum[2] = {0, 0}, norm_ns = 0;
    for (int i = 0; cv->ts != NULL && i < cv->nthreads; i++) { /* none: the run ended early */
        osum[0] += cv->ts[i].sums.sum;
        osum[1] += cv->ts[i].sums.weighted;
        norm_ns += cv->ts[i].norm_ns;
    }
    const uint64_t t0 = sm_clock_ns();
    SM_TRY(sm_par_sum_u64(osum, 2, err));
    cv->allreduce_ns += sm_clock_ns() - t0;
    struct sm_output_stats os;
    sm_output_stats(cv->out, &os);
    stage_times(cv, &os, norm_ns);
    res->ranks = cv->nranks;
    res->threads = cv->nthreads;
    res->ndim = cv->m->ndim;
    memcpy(res->roi_offset, cv->su.off, sizeof(cv->su.off));
    memcpy(res->roi_shape, cv->su.shape, sizeof(cv->su.shape));
    memcpy(res->tile, cv->su.tile, sizeof(cv->su.tile));
    res->passes = 1;
    res->hist_range_from = cv->su.range_from;
    res->output_checksum = osum[0];
    res->output_weighted_checksum = osum[1];
    res->output_path = sm_strdup(sm_output_path(cv->out));
    if (res->output_path == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot copy the output path");
    }
    /* shards and bytes of the whole output are rank 0's (set by finish); the rest is summed */
    uint64_t counts[6] = {cv->rank == 0 ? os.total_shards : 0,
                          cv->rank == 0 ? os.total_bytes : 0,
                          os.shards_written,
                          cv->keep != NULL || cv->keep_bytes != 0 ? 1 : 0,
                          cv->keep_bytes,
                          cv->wr.kept};
    SM_TRY(sm_par_sum_u64(counts, 6, err));
    res->output_shards = cv->done ? cv->done_shards : counts[0]; /* complete: the marker's */
    res->output_bytes = cv->done ? cv->done_bytes : counts[1];
    res->shards_written = counts[2];
    res->kept_input_ranks = counts[3];
    res->kept_input_bytes = counts[4];
    res->shards_kept = counts[5];
    if (cv->src != NULL) {
        SM_TRY(source_counts(cv, err));
    }
    if (res->no_histogram) { /* the placeholder is not a histogram of the values */
        sm_hist_destroy(&res->scan.hist);
        memset(&res->scan.hist, 0, sizeof(res->scan.hist));
    }
    return sm_run_reduce_timings(res, err);
}
