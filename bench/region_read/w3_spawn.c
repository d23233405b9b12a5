/* w3_spawn: run one benchmark process and report its wall time and peak RSS (bench/region_read).
 *
 *   w3_spawn RESULT.json PROGRAM [ARGS...]
 *
 * Why a launcher: Linux records the pre-exec address space's high-water RSS into the child's
 * ru_maxrss at execve (fs/exec.c exec_mmap -> setmax_mm_hiwater_rss), so a process spawned
 * straight from the Python driver reports at least the driver's own RSS (tens of MiB with
 * NumPy and zarr loaded). Spawned from this tiny launcher, the bias is bounded by the
 * launcher's own RSS, which is written to the result as spawner_hwm_kib.
 *
 * The result JSON holds wall_ns (CLOCK_MONOTONIC around posix_spawnp .. wait4), the exit code
 * or signal, and the child's rusage (ru_maxrss in KiB, user and system time). stdin, stdout and
 * stderr are inherited. The launcher is built by bench/region_read/w3.py with the system C
 * compiler.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* VmHWM of this launcher in KiB, or -1. */
static long self_hwm_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;

    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            if (sscanf(line + 6, "%ld", &kib) != 1) {
                kib = -1;
            }
            break;
        }
    }
    fclose(f);
    return kib;
}

int main(int argc, char **argv)
{
    pid_t pid;
    int status = 0;
    struct rusage ru;
    long long t0;
    long long t1;
    long hwm;
    int rc;
    FILE *out;

    if (argc < 3) {
        fputs("usage: w3_spawn RESULT.json PROGRAM [ARGS...]\n", stderr);
        return 2;
    }
    hwm = self_hwm_kib();
    t0 = now_ns();
    rc = posix_spawnp(&pid, argv[2], NULL, NULL, &argv[2], environ);
    if (rc != 0) {
        fprintf(stderr, "w3_spawn: %s: %s\n", argv[2], strerror(rc));
        return 127;
    }
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("w3_spawn: wait4");
            return 127;
        }
    }
    t1 = now_ns();
    out = fopen(argv[1], "w");
    if (out == NULL) {
        perror("w3_spawn: result file");
        return 127;
    }
    fprintf(out,
            "{\"wall_ns\": %lld, \"exited\": %d, \"exit_code\": %d, \"signal\": %d, "
            "\"maxrss_kib\": %ld, \"utime_us\": %lld, \"stime_us\": %lld, "
            "\"spawner_hwm_kib\": %ld}\n",
            t1 - t0, WIFEXITED(status) ? 1 : 0, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
            WIFSIGNALED(status) ? WTERMSIG(status) : 0, ru.ru_maxrss,
            (long long)ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec,
            (long long)ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec, hwm);
    if (fclose(out) != 0) {
        perror("w3_spawn: result file");
        return 127;
    }
    return 0;
}
