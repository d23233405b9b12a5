/* Waking the CPUs a process's threads are about to use (core/core_work.c). */
#ifndef SM_CORE_THREADS_H
#define SM_CORE_THREADS_H

/* On a virtual machine an idle vCPU is halted, and the host runs it again only some time after a
 * wake-up: `perf sched` measured a 2-3 ms scheduling delay for a fresh process's first pool
 * thread here, and the first 2-thread read of a fresh `shardmill read` took 1.3-1.4x a later one.
 * sm_threads_warm starts one detached thread (named sm-warm) that yields in a loop, keeping a
 * second CPU running, until the process's first parallel work starts (the engine's work driver)
 * or 20 ms pass; the pool threads then start on a running CPU (first read 1.10x a later one,
 * docs/BENCHMARKS.md W3). Call it first thing in a process that will run parallel work soon,
 * with the thread count it will use (0: OMP_NUM_THREADS, else every core); `shardmill read`
 * does. Nothing happens for one thread, when the process may run on one CPU only, or after the
 * first call. It costs at most 20 ms of one CPU's time, once, and changes no result. */
void sm_threads_warm(int threads);

#endif
