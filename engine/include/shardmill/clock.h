/* Monotonic clock for stage timings, and the process's peak memory and page faults for reports
 * (SPEC §7). */
#ifndef SM_CORE_CLOCK_H
#define SM_CORE_CLOCK_H

#include <stdint.h>

/* Nanoseconds from CLOCK_MONOTONIC. */
uint64_t sm_clock_ns(void);

/* Peak resident set size of this process in bytes so far (0 if it cannot be read). */
uint64_t sm_peak_rss_bytes(void);

/* Page faults of this process so far (getrusage): minor (a page mapped without I/O, ~10 µs each
 * on a virtual machine) and major (read from disk). 0, 0 when unknown. */
void sm_page_faults(uint64_t *minor, uint64_t *major);

#endif
