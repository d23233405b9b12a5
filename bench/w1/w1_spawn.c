/* w1_spawn: run one W1 benchmark process, report its wall time and peak RSS (bench/w1).
 *
 *   w1_spawn RESULT.json STDOUT STDERR PROGRAM [ARGS...]
 *
 * Linux copies the pre-exec address space's high-water RSS into the child's ru_maxrss at execve
 * (fs/exec.c exec_mmap -> setmax_mm_hiwater_rss), so a process spawned straight from the Python
 * driver (NumPy and the oracle's arrays loaded: >100 MiB) reports at least the driver's RSS.
 * Spawned from this small launcher the bias is bounded by the launcher's own VmHWM, written to
 * the result as spawner_hwm_kib. The child gets /dev/null as stdin and STDOUT / STDERR (files,
 * truncated) as its outputs. RESULT.json: wall_ns (CLOCK_MONOTONIC around posix_spawn..wait4),
 * exit code or signal, ru_maxrss (KiB), user and system time. Built by bench/w1/w1.py with the
 * system C compiler.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int status = 0;
    struct rusage ru;
    long long t0;
    long long t1;
    long hwm;
    int rc;
    FILE *out;

    if (argc < 5) {
        fputs("usage: w1_spawn RESULT.json STDOUT STDERR PROGRAM [ARGS...]\n", stderr);
        return 2;
    }
    if (posix_spawn_file_actions_init(&fa) != 0 ||
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) != 0 ||
        posix_spawn_file_actions_addopen(&fa, 1, argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644) !=
            0 ||
        posix_spawn_file_actions_addopen(&fa, 2, argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644) !=
            0) {
        fputs("w1_spawn: posix_spawn_file_actions failed\n", stderr);
        return 127;
    }
    hwm = self_hwm_kib();
    t0 = now_ns();
    rc = posix_spawnp(&pid, argv[4], &fa, NULL, &argv[4], environ);
    if (rc != 0) {
        fprintf(stderr, "w1_spawn: %s: %s\n", argv[4], strerror(rc));
        return 127;
    }
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("w1_spawn: wait4");
            return 127;
        }
    }
    t1 = now_ns();
    posix_spawn_file_actions_destroy(&fa);
    out = fopen(argv[1], "w");
    if (out == NULL) {
        perror("w1_spawn: result file");
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
        perror("w1_spawn: result file");
        return 127;
    }
    return 0;
}
