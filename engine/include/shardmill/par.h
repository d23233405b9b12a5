/* Ranks: the only MPI surface of the project (STYLE B9). An MPI build still runs serially without
 * calling MPI_Init when no launcher started the process (SPEC §1): jobs/ detects the launcher and
 * passes `use_mpi`. With one rank (serial build, or an MPI build without a launcher) every
 * collective below is a cheap local no-op with the obvious single-rank result.
 *
 * par/ holds no process-wide state fixed to MPI_COMM_WORLD: the ranks are those of a communicator
 * (sm_par_init_comm), and every collective runs on a private duplicate of it (MPI_Comm_dup), so
 * the engine can run inside another MPI program, on a sub-communicator it split off, without its
 * messages meeting the program's. MPI is initialised only when it is not yet (MPI_Initialized),
 * and finalised only by the one who initialised it. The rank context is current for the process
 * (one at a time): sm_par_init_comm, the run, sm_par_finalize.
 *
 * Collectives must be called by every rank in the same order (MPI semantics). A failure inside a
 * collective is an MPI failure: the MPI library's default error handler (MPI_ERRORS_ARE_FATAL)
 * aborts the whole job, which is the "last resort" of docs/internals/ranks.md. */
#ifndef SM_PAR_PAR_H
#define SM_PAR_PAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/buf.h"
#include "shardmill/status.h"

/* Initialises ranks. With use_mpi false (or a serial build) this is one rank and costs nothing.
 * With use_mpi: sm_par_init_comm(true, NULL, ...), the ranks of MPI_COMM_WORLD. */
sm_status sm_par_init(bool use_mpi, int *argc, char ***argv, struct sm_err *err);
/* Initialises ranks on a communicator. `mpi_comm` is NULL or points to an MPI_Comm of the caller
 * (`MPI_Comm c; ... sm_par_init_comm(true, &c, ...)`: the header keeps <mpi.h> out, so the
 * pointer is opaque here); the caller keeps its communicator, par/ works on a duplicate of it.
 * - use_mpi false and mpi_comm NULL: one rank, no MPI call at all (SPEC §1).
 * - otherwise: MPI_Init_thread(MPI_THREAD_FUNNELED) only if MPI is not initialised yet (argc and
 *   argv may be NULL), then the thread level MPI granted must be at least MPI_THREAD_FUNNELED
 *   (the drivers call MPI from the main thread while OpenMP threads run): SM_E_USAGE naming the
 *   level otherwise; then MPI_Comm_dup of *mpi_comm (MPI_COMM_WORLD when NULL).
 * SM_E_USAGE when ranks are already initialised (sm_par_finalize first), when MPI was finalised
 * already, or when a communicator is given to a build without MPI; SM_E_INTERNAL when an MPI call
 * fails. On failure nothing stays initialised (MPI that this call initialised is finalised). */
sm_status sm_par_init_comm(bool use_mpi, const void *mpi_comm, int *argc, char ***argv,
                           struct sm_err *err);
/* Frees the duplicate communicator and finalises MPI if (and only if) sm_par_init* initialised it;
 * afterwards this is one rank again. A no-op when nothing was initialised. */
void sm_par_finalize(void);
/* The duplicate communicator the collectives run on, as a pointer to an MPI_Comm (const void *,
 * like sm_par_init_comm's argument), or NULL with one rank without MPI. For tests and par/. */
const void *sm_par_comm(void);
/* True when this process initialised MPI through sm_par_init* (and sm_par_finalize will finalise
 * it); false when MPI was initialised by the program around the engine, or not at all. */
bool sm_par_owns_mpi(void);
int sm_par_rank(void);
int sm_par_size(void);
/* True once sm_par_init started MPI (false in serial runs). */
bool sm_par_active(void);

/* Every rank waits for all. */
void sm_par_barrier(void);

/* Broadcasts `len` bytes of buf from `root` to every rank (every rank passes the same len). */
sm_status sm_par_bcast(void *buf, size_t len, int root, struct sm_err *err);
/* Broadcasts the contents of b from `root`: its length, then its bytes. On the other ranks b is
 * replaced (reserved to the root's length; b->len set). SM_E_NOMEM if a rank cannot hold it. */
sm_status sm_par_bcast_buf(struct sm_buf *b, int root, struct sm_err *err);

/* Gathers every rank's bytes on `root`, concatenated in rank order: on root `all` is replaced
 * (all->len the total), elsewhere it is left alone. Every rank calls it. If root cannot hold the
 * total (SM_E_NOMEM) every rank returns that failure. One rank: all = mine. */
sm_status sm_par_gatherv_bytes(struct sm_bytes mine, struct sm_buf *all, int root,
                               struct sm_err *err);

/* In-place allreduce over ranks of n values: wrapping sum, maximum; sum of doubles (the reduction
 * order is MPI's, so use it only for timings, never for bytes that are written). */
sm_status sm_par_sum_u64(uint64_t *v, size_t n, struct sm_err *err);
sm_status sm_par_max_u64(uint64_t *v, size_t n, struct sm_err *err);
sm_status sm_par_sum_f64(double *v, size_t n, struct sm_err *err);
/* In-place maximum and minimum of doubles over ranks (exact: no rounding; the min/max pass of
 * SPEC §5). Values must not be NaN. */
sm_status sm_par_max_f64(double *v, size_t n, struct sm_err *err);
sm_status sm_par_min_f64(double *v, size_t n, struct sm_err *err);

/* Agreement at a phase boundary (STYLE B5): every rank passes its local status (err filled when
 * it is not SM_OK). Every rank learns whether any rank failed; if so, all ranks return the status
 * of the LOWEST failing rank and their err holds that rank's status, cause, where and what, so
 * the one-line error is the same everywhere. Returns SM_OK iff every rank succeeded. */
sm_status sm_par_agree(sm_status local, struct sm_err *err);

/* sm_par_agree with a deadline, for agreement points right after a collective call of a library
 * (parallel HDF5) that may itself leave some ranks blocked in its own communication when it fails
 * on another rank: if not every rank arrives within timeout_ms of this rank's arrival, returns
 * SM_E_INTERNAL (or `local` if it is a failure, its text kept) with "...; ranks did not reach an
 * agreement within N s" added to `what`, and from then on sm_par_stuck() is true: the ranks can
 * no longer communicate, so the caller calls no further collective and the job ends with
 * sm_par_abort (jobs/). Otherwise exactly sm_par_agree. One rank: returns `local`. */
sm_status sm_par_agree_within(sm_status local, uint64_t timeout_ms, struct sm_err *err);
/* True once an sm_par_agree_within timed out on this rank. */
bool sm_par_stuck(void);

/* Progress of a phase (jobs/progress.c): point to point and non-blocking, so no rank ever waits
 * for another's progress. Main thread only (MPI_THREAD_FUNNELED). A rank other than 0 posts its
 * counts v[2]: sent only if its previous post was delivered; `last` marks the final post of the
 * phase and waits for its delivery. Rank 0 polls with a table of 3 per rank, zeroed when the
 * phase began: every pending post is received into all[3r] and all[3r + 1] (the maximum seen:
 * counts only grow) and all[3r + 2] is set by rank r's last post. Returns the number of ranks
 * whose last post arrived (with all NULL posts are drained and every rank counts as done). With
 * one rank both are no-ops and poll returns 0. */
void sm_par_progress_post(const uint64_t v[2], bool last);
int sm_par_progress_poll(uint64_t *all);

/* Last resort (jobs/ only, STYLE B5): MPI_Abort ends every rank with exit code `code`. Without
 * MPI (one rank) it returns, and the caller ends the process itself (engine/ never exits). */
void sm_par_abort(int code);

#endif
