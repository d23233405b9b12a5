/* Progress callbacks of the drivers (tile/ and write/): jobs/ turns them into the progress line
 * of rank 0 (jobs/progress.c). The engine prints nothing itself (STYLE B10). */
#ifndef SM_CORE_PROGRESS_H
#define SM_CORE_PROGRESS_H

#include <stdint.h>

/* Called by a driver from its calling thread only (OpenMP thread 0, which is the thread that may
 * call MPI under MPI_THREAD_FUNNELED), after it finished an item: `done` items and `bytes` so far
 * in this call of the driver, summed over all its threads, and once more when every thread is
 * done. Must be cheap: it runs once per item. */
typedef void (*sm_progress_fn)(void *user, uint64_t done, uint64_t bytes);

#endif
