/* allreduce_bench: cost of the convert job's statistics reduction (SPEC §1, scaling/MODEL.md).
 *
 *   mpirun -np R allreduce_bench COUNT REPS RESULT.json
 *
 * Times MPI_Allreduce(MPI_SUM) of COUNT uint64 values (a uint16 input's histogram is 65536 bins
 * plus 7 counters: engine/run/run_common.c) REPS times after a barrier, plus an MPI_Barrier alone,
 * and MPI_Init itself. Rank 0 writes min/median/max per call in microseconds. The engine's
 * timing_ms.allreduce also holds the wait for the slowest rank's scan (load imbalance); this
 * measures the collective alone. Built by scaling/model.py with mpicc; not part of the engine.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* max over ranks of each sample, sorted; writes min, median, max */
static void stats(double *v, int n, double out[3])
{
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    out[0] = v[0];
    out[1] = v[n / 2];
    out[2] = v[n - 1];
}

int main(int argc, char **argv)
{
    const double t0 = now_us();
    MPI_Init(&argc, &argv);
    const double init_us = now_us() - t0;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt); /* launch → MPI_Init done, against the driver's clock */
    double init_done_unix_us = (double)rt.tv_sec * 1e6 + (double)rt.tv_nsec / 1e3;
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4) {
        if (rank == 0) {
            fputs("usage: allreduce_bench COUNT REPS RESULT.json\n", stderr);
        }
        MPI_Finalize();
        return 2;
    }
    const long count = strtol(argv[1], NULL, 10);
    const int reps = (int)strtol(argv[2], NULL, 10);
    if (count <= 0 || reps <= 0) {
        MPI_Finalize();
        return 2;
    }
    uint64_t *buf = calloc((size_t)count, sizeof(uint64_t));
    double *ar = calloc((size_t)reps, sizeof(double));
    double *br = calloc((size_t)reps, sizeof(double));
    if (buf == NULL || ar == NULL || br == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (long i = 0; i < count; i++) {
        buf[i] = (uint64_t)(i * 31 + rank);
    }
    for (int w = 0; w < 3; w++) { /* warm-up: connections, buffers */
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    }
    for (int i = 0; i < reps; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = now_us();
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        ar[i] = now_us() - t;
        MPI_Barrier(MPI_COMM_WORLD);
        t = now_us();
        MPI_Barrier(MPI_COMM_WORLD);
        br[i] = now_us() - t;
    }
    double a[3], b[3];
    stats(ar, reps, a);
    stats(br, reps, b);
    double init_max = init_us;
    MPI_Allreduce(MPI_IN_PLACE, &init_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &init_done_unix_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        FILE *f = fopen(argv[3], "w");
        if (f == NULL) {
            perror(argv[3]);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        fprintf(f,
                "{\"ranks\": %d, \"count\": %ld, \"bytes\": %ld, \"reps\": %d, "
                "\"allreduce_us\": {\"min\": %.2f, \"median\": %.2f, \"max\": %.2f}, "
                "\"barrier_us\": {\"min\": %.2f, \"median\": %.2f, \"max\": %.2f}, "
                "\"mpi_init_us_max\": %.1f, \"init_done_unix_us_max\": %.1f}\n",
                size, count, count * 8, reps, a[0], a[1], a[2], b[0], b[1], b[2], init_max,
                init_done_unix_us);
        fclose(f);
    }
    free(buf);
    free(ar);
    free(br);
    MPI_Finalize();
    return 0;
}
