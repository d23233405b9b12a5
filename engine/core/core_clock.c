/* Monotonic clock for stage timings (SPEC §7). */
#include "shardmill/sm_config.h"

#include "shardmill/clock.h"

#include <time.h>

uint64_t sm_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
