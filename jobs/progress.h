/* Progress of a long phase on rank 0's stderr (SPEC §1 "progress on long runs"): items done /
 * total over every rank, MB/s and ETA; a live line on a terminal, plain lines every
 * `progress_interval` seconds otherwise (Slurm logs). Other ranks post their counts to rank 0
 * without waiting (sm_par_progress_post); rank 0 sums them when it updates. */
#ifndef SM_JOBS_PROGRESS_H
#define SM_JOBS_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include <shardmill/pipeline.h>

#include "config.h"

struct sm_progress {
    bool enabled; /* rank 0 prints (others only post) */
    bool tty;
    const char *job, *phase, *unit; /* "convert", "write", "shards" */
    uint64_t total;                 /* items over every rank */
    uint64_t base_done, base_bytes; /* this rank: items of earlier driver calls (scan passes) */
    uint64_t done, bytes;           /* this rank, base included */
    uint64_t *all;                  /* rank 0: 3 per rank, the others' posts (par.h) */
    uint64_t t0, next_print, next_post, interval_ns;
    uint64_t shown; /* the items the last line showed */
    bool printed;
};

/* Starts a phase on every rank (not a collective). */
void sm_progress_begin(struct sm_progress *p, const struct sm_job_config *c, const char *job,
                       const char *phase, const char *unit, uint64_t total);
/* sm_progress_fn for the drivers (main thread): this driver call's done and bytes so far. */
void sm_progress_update(void *user, uint64_t done, uint64_t bytes);
/* Folds a finished driver call into the base (before the next pass of a scan). */
void sm_progress_next_call(struct sm_progress *p);
/* Ends the phase on every rank (every rank calls it, success or not): the others post their
 * last counts, rank 0 waits for them while it keeps the line current, then prints the last line
 * if it printed any (`ok` false: the phase failed, the line ends without a summary). */
void sm_progress_end(struct sm_progress *p, bool ok);

/* The engine's progress callbacks (shardmill/pipeline.h) on a struct sm_progress: each phase the
 * engine begins becomes a progress phase of `job` ("scan", "convert"). jp must outlive the run. */
struct sm_job_progress {
    struct sm_progress pg; /* first: the drivers' update gets jp as its user */
    const struct sm_job_config *c;
    const char *job;
};
struct sm_run_progress sm_job_progress_hooks(struct sm_job_progress *jp,
                                             const struct sm_job_config *c, const char *job);

#endif
