/* Monotonic clock for stage timings, and the peak resident set and page faults of reports
 * (SPEC §7). */
#include "shardmill/sm_config.h"

#include "shardmill/clock.h"

#include <stdbool.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

uint64_t sm_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t sm_peak_rss_bytes(void)
{
    /* VmHWM, not getrusage: Linux carries the parent's high-water mark into ru_maxrss across exec,
     * so a shardmill started by a large Python or mpirun would report the parent's peak. */
    FILE *f = fopen("/proc/self/status", "r");
    if (f != NULL) {
        char line[256];
        unsigned long long kib = 0;
        bool found = false;
        while (!found && fgets(line, sizeof(line), f) != NULL) {
            found = sscanf(line, "VmHWM: %llu kB", &kib) == 1;
        }
        fclose(f);
        if (found) {
            return (uint64_t)kib * 1024u;
        }
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) {
        return 0;
    }
    return (uint64_t)ru.ru_maxrss * 1024u;
}

void sm_page_faults(uint64_t *minor, uint64_t *major)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) {
        *minor = *major = 0;
        return;
    }
    *minor = (uint64_t)ru.ru_minflt;
    *major = (uint64_t)ru.ru_majflt;
}
