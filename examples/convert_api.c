/* convert_api: converts a Zarr array by calling shardmill's public engine API only
 * (<shardmill/pipeline.h>; no jobs/ code), the way another C program or an MPI application would.
 *
 *   convert_api [--mpi-split K] STORE OUTPUT [CONFIG_SHA256]
 *
 * The run equals this YAML under `shardmill run` (the output trees are byte-identical when
 * CONFIG_SHA256 is the hash `shardmill run` stored in zarr.json's provenance):
 *
 *   job: convert
 *   input: {store: STORE}
 *   normalize: {mode: percentile, lo: 1.5, hi: 99}
 *   output: {path: OUTPUT, shard: [16, 32, 32], chunk: [8, 16, 16], fsync: false}
 *
 * With --mpi-split K (an MPI build, under mpirun), the program initialises MPI itself, splits the
 * first K ranks of MPI_COMM_WORLD off into a communicator of their own and runs the conversion on
 * it; the other ranks only wait. The engine works on a duplicate of that communicator and neither
 * initialises nor finalises MPI (the program does both). Prints a short summary on rank 0 and
 * exits 0, or prints the engine's error and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shardmill/pipeline.h>

#ifdef SM_EXAMPLE_WITH_MPI
#include <mpi.h>
#endif

static int convert(const char *store, const char *output, const char *sha, const void *comm)
{
    struct sm_convert_run p = SM_CONVERT_RUN_DEFAULTS;
    p.c.input.store = store;
    p.c.mpi_comm = comm; /* NULL: one process, no MPI */
    p.normalize.mode = SM_NORM_PERCENTILE;
    p.normalize.lo = 1.5;
    p.normalize.hi = 99.0;
    p.output.path = output;
    const struct sm_run_dims shard = {true, 3, {16, 32, 32}}, chunk = {true, 3, {8, 16, 16}};
    p.output.shard = shard;
    p.output.chunk = chunk;
    p.output.policy.sync = SM_OUTPUT_SYNC_NONE; /* output.fsync: false */
    p.config_sha256 = sha;

    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    const sm_status st = sm_run_convert(&p, &r, &err);
    if (st != SM_OK) {
        fprintf(stderr, "convert_api: error: %s: %s\n", err.where, err.what);
        sm_run_result_destroy(&r);
        return 1;
    }
    printf("convert_api: %d rank%s: %llu voxels, checksum %llu, window [%g, %g], %llu shards in "
           "%s, %.1f ms\n",
           r.ranks, r.ranks == 1 ? "" : "s", (unsigned long long)r.scan.voxels,
           (unsigned long long)r.scan.sums.sum, r.norm.lo, r.norm.hi,
           (unsigned long long)r.output_shards, r.output_path, r.timing_max[SM_RUN_T_TOTAL]);
    sm_run_result_destroy(&r);
    return 0;
}

int main(int argc, char **argv)
{
    int split = 0, a = 1;
    if (argc > 2 && strcmp(argv[1], "--mpi-split") == 0) {
        split = (int)strtol(argv[2], NULL, 10); /* an example: no range checks */
        a = 3;
    }
    if (argc - a < 2 || argc - a > 3) {
        fprintf(stderr, "usage: convert_api [--mpi-split K] STORE OUTPUT [CONFIG_SHA256]\n");
        return 2;
    }
    const char *store = argv[a], *output = argv[a + 1], *sha = argc - a == 3 ? argv[a + 2] : NULL;
    if (split == 0) {
        return convert(store, output, sha, NULL);
    }
#ifdef SM_EXAMPLE_WITH_MPI
    int provided = 0, rank = 0, rc = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, rank < split ? 0 : MPI_UNDEFINED, rank, &sub);
    if (sub != MPI_COMM_NULL) {
        int subrank = 0;
        MPI_Comm_rank(sub, &subrank);
        if (subrank != 0) {
            fclose(stdout); /* one summary */
        }
        rc = convert(store, output, sha, &sub);
        int inited = 0, finalized = 0;
        MPI_Initialized(&inited);
        MPI_Finalized(&finalized);
        if (!inited || finalized) {
            fprintf(stderr, "convert_api: the engine finalised the program's MPI\n");
            rc = 1;
        }
        MPI_Comm_free(&sub);
    }
    int all = 0; /* the program's own MPI still works: every rank's status */
    MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return all;
#else
    fprintf(stderr, "convert_api: --mpi-split needs an MPI build\n");
    return 2;
#endif
}
