/* core/ private: large blocks on their own 2 MiB-aligned mapping (core_alloc_huge.c), a pool
 * thread's first placement and the CPUs a thread may use (core_syncfs.c, for core_work.c). */
#ifndef SM_CORE_INT_H
#define SM_CORE_INT_H

#include <stddef.h>
#include <stdint.h>

/* Blocks at least this large are mapped, not malloc'ed (one huge page). */
#define SM_HUGE_MIN ((size_t)2 << 20)

/* Maps n + lead zeroed bytes whose byte `lead` is 2 MiB-aligned and advised for huge pages;
 * returns the block (the lead bytes first) and in *back its distance from the mapping's start,
 * or NULL when the mapping fails. */
void *sm_huge_map(size_t n, size_t lead, size_t *back);

/* Unmaps a block of sm_huge_map(n, lead, &back). */
void sm_huge_unmap(void *block, size_t n, size_t lead, size_t back);

/* The CPU the calling thread runs on (-1 if unknown). */
int sm_thread_cpu(void);

/* sm_threads_warm (threads.h) with its thread's longest life: 20 ms there, longer in tests. */
void sm_threads_warm_for(int threads, uint64_t most_ns);

/* Names the calling thread (pthread_setname_np: /proc/self/task/TID/comm, top, gdb). */
void sm_thread_name(const char *name);

/* How many CPUs this thread may run on (sched_getaffinity; 1 if unknown). */
int sm_thread_cpus(void);

/* Linux starts a new thread on its creator's CPU and leaves it there until the load balancer moves
 * it, a few ms later: a fresh process's first parallel read ran its two threads on one core for
 * most of its 10 ms. The first time pool thread `tid` (> 0) runs work it is moved once to the
 * tid-th CPU after from_cpu (the caller's) among those the thread may use, then given its whole
 * mask back: no binding, the scheduler (and a launcher's binding of the process) keep the last
 * word. Later calls on the same thread do nothing. */
void sm_thread_spread(int tid, int from_cpu);

#endif
