/* Monotonic clock for stage timings. */
#ifndef SM_CORE_CLOCK_H
#define SM_CORE_CLOCK_H

#include <stdint.h>

/* Nanoseconds from CLOCK_MONOTONIC. */
uint64_t sm_clock_ns(void);

#endif
