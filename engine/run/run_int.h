/* Internal pieces of run/ shared by the scan and the convert. */
#ifndef SM_RUN_RUN_INT_H
#define SM_RUN_RUN_INT_H

#include "shardmill/pipeline.h"

/* Ranks for a run: with mpi_comm set, par/ on a duplicate of it for the run's duration. *entered
 * says whether run_ranks_leave must release it. */
sm_status run_ranks_enter(const void *mpi_comm, bool *entered, struct sm_err *err);
void run_ranks_leave(bool entered);

/* st, or SM_E_STOPPED when st is SM_OK and the stop flag is set. */
sm_status run_stop_check(const atomic_int *stop, sm_status st, struct sm_err *err);

/* This rank's share of the plan (every rank computes the same plan). */
sm_status run_rank_part(enum sm_part_kind kind, const struct sm_array_meta *m,
                        const struct sm_tiling *t, struct sm_part *mine, struct sm_err *err);
/* Sums histogram counts, underflow/overflow/nan, checksums, voxels and tiles over ranks. */
sm_status run_reduce_scan(struct sm_scan_result *r, struct sm_err *err);
/* res->timing over ranks into timing_max and timing_mean (collective). */
sm_status run_reduce_timings(struct sm_run_result *res, struct sm_err *err);

/* Progress helpers: NULL members are skipped. */
void run_progress_begin(const struct sm_run_progress *p, const char *phase, const char *unit,
                        uint64_t total);
void run_progress_end(const struct sm_run_progress *p, bool ok);

/* The rank's budget for the per-thread chunk memos (tile.h): an eighth of limits.memory_bytes,
 * taken from the half the kept input may use. */
static inline uint64_t run_memo_total(uint64_t memory_bytes)
{
    return memory_bytes / 8;
}

static inline double run_ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

#endif
