/* Monotonic clock for stage timings, and the process's peak memory for reports (SPEC §7). */
#ifndef SM_CORE_CLOCK_H
#define SM_CORE_CLOCK_H

#include <stdint.h>

/* Nanoseconds from CLOCK_MONOTONIC. */
uint64_t sm_clock_ns(void);

/* Peak resident set size of this process in bytes so far (0 if it cannot be read). */
uint64_t sm_peak_rss_bytes(void);

#endif
