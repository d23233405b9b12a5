/* startup_timer: wall time of fresh processes, alternating between commands (bench/startup).
 *
 *   startup_timer ROUNDS OUTPUT -- CMD_A [ARGS...] -- CMD_B [ARGS...] [-- ...]
 *
 * Each round runs every command once (the first command of a round rotates, so no command is
 * always first), each as a fresh process: posix_spawn, then waitpid, timed with CLOCK_MONOTONIC
 * around both. The children's stdout and stderr go to the file OUTPUT (truncated before every
 * process, so it holds the last one's output). Prints a JSON object to stdout:
 * {"rounds": N, "wall_ns": [[A1, A2, ...], [B1, ...], ...], "cpu_ns": [...]} in the order of
 * the commands; cpu_ns is the child's user + system time (wait4 rusage), which a busy machine
 * disturbs less than the wall time. Exits 1
 * (no JSON) if a process cannot be started or exits with a status other
 * than 0, naming it on stderr. A round-robin of fresh processes from a tiny launcher: Python's
 * fork/exec would add milliseconds of noise of its own to every sample. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

#define MAX_CMDS 8

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 5 || strcmp(argv[3], "--") != 0) {
        fprintf(stderr, "usage: startup_timer ROUNDS OUTPUT -- CMD [ARGS...] [-- CMD ...]\n");
        return 2;
    }
    const long rounds = strtol(argv[1], NULL, 10);
    const char *output = argv[2];
    char **cmds[MAX_CMDS];
    int ncmds = 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            argv[i] = NULL; /* ends the previous command's argv */
            if (i + 1 < argc && ncmds < MAX_CMDS) {
                cmds[ncmds++] = &argv[i + 1];
            }
        }
    }
    if (rounds < 1 || ncmds == 0) {
        fprintf(stderr, "startup_timer: need ROUNDS >= 1 and at least one command\n");
        return 2;
    }
    long long *wall = calloc((size_t)rounds * (size_t)ncmds, sizeof(*wall));
    long long *cpu = calloc((size_t)rounds * (size_t)ncmds, sizeof(*cpu));
    if (wall == NULL || cpu == NULL) {
        return 1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    for (long r = 0; r < rounds; r++) {
        for (int k = 0; k < ncmds; k++) {
            const int c = (int)((r + k) % ncmds);
            pid_t pid;
            const long long t0 = now_ns();
            const int rc = posix_spawn(&pid, cmds[c][0], &fa, NULL, cmds[c], environ);
            if (rc != 0) {
                fprintf(stderr, "startup_timer: cannot start %s: %s\n", cmds[c][0], strerror(rc));
                return 1;
            }
            int status = 0;
            struct rusage ru;
            if (wait4(pid, &status, 0, &ru) != pid) {
                perror("startup_timer: wait4");
                return 1;
            }
            wall[r * ncmds + c] = now_ns() - t0;
            cpu[r * ncmds + c] = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
                                 (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "startup_timer: %s failed (status 0x%x; output in %s)\n",
                        cmds[c][0], status, output);
                return 1;
            }
        }
    }
    printf("{\"rounds\": %ld", rounds);
    for (int k = 0; k < 2; k++) {
        const long long *v = k == 0 ? wall : cpu;
        printf(", \"%s\": [", k == 0 ? "wall_ns" : "cpu_ns");
        for (int c = 0; c < ncmds; c++) {
            printf("%s[", c > 0 ? ", " : "");
            for (long r = 0; r < rounds; r++) {
                printf("%s%lld", r > 0 ? ", " : "", v[r * ncmds + c]);
            }
            printf("]");
        }
        printf("]");
    }
    printf("}\n");
    posix_spawn_file_actions_destroy(&fa);
    free(wall);
    free(cpu);
    return 0;
}
