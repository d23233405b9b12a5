/* sm_run_convert (shardmill/pipeline.h) of a caller's own source (shardmill/source.h,
 * sm_source_new) with normalize none on a communicator, as an MPI application would call it: the
 * program initialises MPI, passes MPI_COMM_WORLD as mpi_comm and a source made here (uint16
 * values that are a function of the voxel index). Under mpiexec -n N (argv[1]: a work directory):
 *   - every rank gets SM_OK, ranks == N, the SPEC §5 checksums of the whole volume (summed here),
 *     27 shards and the marker; every rank reads only inside the box its plan got, the voxels
 *     read by all ranks add up to the volume exactly once, and with N > 1 no rank reads it all;
 *   - a source whose shape differs on rank 1: every rank gets SM_E_USAGE and no output exists.
 * Exit 0 when every check holds on every rank; otherwise lines on stderr and exit 1. */
#include "shardmill/sm_config.h"

#include <mpi.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardmill/pipeline.h"
#include "shardmill/source.h"

#define Z 9
#define Y 10
#define X 11

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "source_api: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

struct src {
    atomic_ullong voxels_read;
    atomic_int outside_plan;
    uint64_t plan_off[3], plan_shape[3];
};

static uint16_t value_at(uint64_t z, uint64_t y, uint64_t x)
{
    return (uint16_t)((z * 7919u + y * 104729u + x * 31u) % 65521u);
}

static sm_status src_plan(void *user, const uint64_t *off, const uint64_t *shape,
                          uint64_t memory_bytes, struct sm_err *err)
{
    (void)memory_bytes;
    (void)err;
    struct src *s = user;
    memcpy(s->plan_off, off, sizeof(s->plan_off));
    memcpy(s->plan_shape, shape, sizeof(s->plan_shape));
    return SM_OK;
}

static sm_status src_read_box(void *user, int thread, const uint64_t *off, const uint64_t *shape,
                              void *out, uint64_t *read, struct sm_err *err)
{
    (void)thread;
    (void)err;
    struct src *s = user;
    for (int d = 0; d < 3; d++) {
        if (off[d] < s->plan_off[d] || off[d] + shape[d] > s->plan_off[d] + s->plan_shape[d]) {
            atomic_fetch_add(&s->outside_plan, 1);
        }
    }
    uint16_t *o = out;
    size_t i = 0;
    for (uint64_t z = off[0]; z < off[0] + shape[0]; z++) {
        for (uint64_t y = off[1]; y < off[1] + shape[1]; y++) {
            for (uint64_t x = off[2]; x < off[2] + shape[2]; x++) {
                o[i++] = value_at(z, y, x);
            }
        }
    }
    atomic_fetch_add(&s->voxels_read, (unsigned long long)i);
    *read = 2 * i;
    return SM_OK;
}

static const struct sm_source_ops src_ops = {src_plan, src_read_box, NULL, NULL};

/* A convert with normalize none of a Z x Y x X (x_extra wider) source over s into out. */
static struct sm_convert_run make_run(struct src *s, const char *out, const MPI_Comm *comm,
                                      uint64_t x_extra, struct sm_source **src)
{
    struct sm_source_info info;
    memset(&info, 0, sizeof(info));
    info.ndim = 3;
    info.shape[0] = Z;
    info.shape[1] = Y;
    info.shape[2] = X + x_extra;
    info.dtype = SM_DT_UINT16;
    snprintf(info.format, sizeof(info.format), "test");
    struct sm_err err;
    sm_err_clear(&err);
    CHECK(sm_source_new(&src_ops, s, &info, src, &err) == SM_OK);
    struct sm_convert_run p = SM_CONVERT_RUN_DEFAULTS;
    p.source = *src;
    p.normalize.mode = SM_NORM_NONE;
    p.output.path = out;
    p.output.policy.exists = SM_OUTPUT_EXISTS_OVERWRITE;
    p.output.policy.sync = SM_OUTPUT_SYNC_NONE;
    const struct sm_run_dims shard = {true, 3, {4, 4, 4}}, chunk = {true, 3, {2, 2, 2}};
    p.output.shard = shard;
    p.output.chunk = chunk;
    p.c.threads = 1;
    p.c.mpi_comm = comm;
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: source_api WORKDIR\n");
        return 2;
    }
    int provided = 0, rank = 0, size = 1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const MPI_Comm comm = MPI_COMM_WORLD;
    char out[512];
    snprintf(out, sizeof(out), "%s/api.zarr", argv[1]);
    if (rank == 0) {
        mkdir(argv[1], 0755);
    }
    MPI_Barrier(comm);

    struct src s;
    memset(&s, 0, sizeof(s));
    struct sm_source *src = NULL;
    struct sm_convert_run p = make_run(&s, out, &comm, 0, &src);
    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    const sm_status st = sm_run_convert(&p, &r, &err);
    CHECK(st == SM_OK);
    if (st != SM_OK) {
        fprintf(stderr, "source_api: rank %d: %s: %s\n", rank, err.where, err.what);
    }
    uint64_t sum = 0, weighted = 0, i = 0;
    for (uint64_t z = 0; z < Z; z++) {
        for (uint64_t y = 0; y < Y; y++) {
            for (uint64_t x = 0; x < X; x++) {
                const uint16_t v = value_at(z, y, x);
                sum += v;
                weighted += (uint64_t)v * (++i);
            }
        }
    }
    if (st == SM_OK) {
        CHECK(r.ranks == size);
        CHECK(r.scan.sums.sum == sum && r.scan.sums.weighted == weighted);
        CHECK(r.scan.hist.bins == 65536);
        CHECK(r.output_shards == 27 && r.shards_written == 27);
        struct stat sb;
        char marker[600];
        snprintf(marker, sizeof(marker), "%s/shardmill.complete.json", out);
        CHECK(stat(marker, &sb) == 0);
    }
    if (st == SM_OK) { /* the engine's count of the bytes read agrees */
        CHECK(r.source_bytes == 2ull * Z * Y * X);
    }
    sm_run_result_destroy(&r);
    sm_source_close(src);
    unsigned long long mine = atomic_load(&s.voxels_read), all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm);
    CHECK(all == (unsigned long long)(Z * Y * X));
    CHECK(size == 1 || mine < (unsigned long long)(Z * Y * X));
    CHECK(atomic_load(&s.outside_plan) == 0);

    /* rank 1's source is another volume: refused on every rank before any output exists */
    long pid = (long)getpid(); /* rank 0's: a name no earlier run used */
    MPI_Bcast(&pid, 1, MPI_LONG, 0, comm);
    char out2[512];
    snprintf(out2, sizeof(out2), "%s/mismatch-%ld.zarr", argv[1], pid);
    memset(&s, 0, sizeof(s));
    p = make_run(&s, out2, &comm, rank == 1 ? 1 : 0, &src);
    sm_err_clear(&err);
    const sm_status st2 = sm_run_convert(&p, &r, &err);
    CHECK(size == 1 ? st2 == SM_OK : st2 == SM_E_USAGE);
    sm_run_result_destroy(&r);
    sm_source_close(src);
    if (size > 1) {
        struct stat sb;
        CHECK(stat(out2, &sb) != 0);
        CHECK(atomic_load(&s.voxels_read) == 0);
    }

    int bad = failures, any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_SUM, comm);
    MPI_Finalize();
    return any == 0 ? 0 : 1;
}
