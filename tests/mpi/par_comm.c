/* par/ on a communicator (SPEC §1, STYLE B9): a test program that may run MPI itself, as an
 * application around the engine would. Cases (argv[1]):
 *   plain   no launcher: sm_par_init(false) is one rank and leaves MPI uninitialised.
 *   own     under mpiexec, MPI not initialised: sm_par_init(true) initialises it, works on a
 *           duplicate of MPI_COMM_WORLD, and sm_par_finalize finalises it.
 *   split   under mpiexec -n 3: the program initialises MPI (FUNNELED) and splits ranks 0-1 off;
 *           par/ runs on those two only, on a duplicate of the split communicator, and neither
 *           re-initialises nor finalises MPI; a second init while active is refused.
 *   single  under mpiexec -n 1: the program initialises MPI with MPI_THREAD_SINGLE; par/ refuses
 *           it (SM_E_USAGE naming the level) and leaves MPI to the program.
 * Exit 0 when every check holds; otherwise a line on stderr and exit 1. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/par.h"

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "par_comm: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);     \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static int mpi_initialized(void)
{
    int v = 0;
    MPI_Initialized(&v);
    return v;
}

static int mpi_finalized(void)
{
    int v = 0;
    MPI_Finalized(&v);
    return v;
}

static void collectives(MPI_Comm expect_like)
{
    struct sm_err err;
    sm_err_clear(&err);
    const void *c = sm_par_comm();
    CHECK(c != NULL);
    if (c != NULL) {
        int cmp = MPI_IDENT;
        MPI_Comm_compare(*(const MPI_Comm *)c, expect_like, &cmp);
        CHECK(cmp == MPI_CONGRUENT); /* the same ranks, but a duplicate: not the caller's */
    }
    int r = 0, n = 0;
    MPI_Comm_rank(expect_like, &r);
    MPI_Comm_size(expect_like, &n);
    CHECK(sm_par_rank() == r);
    CHECK(sm_par_size() == n);
    uint64_t v = (uint64_t)r + 1;
    CHECK(sm_par_sum_u64(&v, 1, &err) == SM_OK);
    CHECK(v == (uint64_t)n * (uint64_t)(n + 1) / 2);
    /* an agreement: the last rank fails, every rank gets its error */
    sm_status local = SM_OK;
    if (r == n - 1) {
        local = SM_ERR(&err, SM_E_DATA, "bad chunk on rank %d", r);
    }
    CHECK(sm_par_agree(local, &err) == SM_E_DATA);
    char want[64];
    snprintf(want, sizeof(want), "bad chunk on rank %d", n - 1);
    CHECK(strcmp(err.what, want) == 0);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    struct sm_err err;
    sm_err_clear(&err);
    if (strcmp(mode, "plain") == 0) {
        CHECK(sm_par_init(false, NULL, NULL, &err) == SM_OK);
        CHECK(sm_par_size() == 1 && !sm_par_active() && sm_par_comm() == NULL);
        CHECK(!mpi_initialized());
        sm_par_finalize();
        CHECK(!mpi_initialized());
    } else if (strcmp(mode, "own") == 0) {
        CHECK(!mpi_initialized());
        CHECK(sm_par_init(true, &argc, &argv, &err) == SM_OK);
        CHECK(mpi_initialized() && sm_par_owns_mpi() && sm_par_active());
        collectives(MPI_COMM_WORLD);
        sm_par_finalize();
        CHECK(mpi_finalized()); /* it initialised MPI, so it finalised it */
        CHECK(!sm_par_active() && sm_par_size() == 1);
    } else if (strcmp(mode, "split") == 0) {
        int provided = 0;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
        int wr = 0, wn = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &wr);
        MPI_Comm_size(MPI_COMM_WORLD, &wn);
        CHECK(wn == 3);
        MPI_Comm sub;
        MPI_Comm_split(MPI_COMM_WORLD, wr < 2 ? 0 : 1, wr, &sub);
        if (wr < 2) {
            CHECK(sm_par_init_comm(true, &sub, NULL, NULL, &err) == SM_OK);
            CHECK(!sm_par_owns_mpi());
            collectives(sub);
            struct sm_err e2;
            sm_err_clear(&e2);
            CHECK(sm_par_init_comm(true, &sub, NULL, NULL, &e2) == SM_E_USAGE);
            CHECK(strstr(e2.what, "already initialised") != NULL);
            sm_par_finalize();
            CHECK(mpi_initialized() && !mpi_finalized()); /* the program's MPI stays */
            CHECK(sm_par_size() == 1 && sm_par_comm() == NULL);
        }
        /* the program's own world still works after the engine let go */
        int one = 1, all = 0;
        MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        CHECK(all == 3);
        MPI_Comm_free(&sub);
        MPI_Finalize();
    } else if (strcmp(mode, "single") == 0) {
        int provided = 0;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
        if (provided >= MPI_THREAD_FUNNELED) {
            fprintf(stderr, "par_comm: this MPI grants FUNNELED when SINGLE is asked for; "
                            "nothing to test\n");
        } else {
            CHECK(sm_par_init_comm(true, NULL, NULL, NULL, &err) == SM_E_USAGE);
            CHECK(strstr(err.what, "MPI_THREAD_SINGLE") != NULL);
            CHECK(!sm_par_active());
            CHECK(mpi_initialized() && !mpi_finalized()); /* not par/'s to finalise */
        }
        MPI_Finalize();
    } else {
        fprintf(stderr, "usage: par_comm plain|own|split|single\n");
        return 2;
    }
    if (failures == 0) {
        printf("par_comm %s: ok\n", mode);
    }
    return failures == 0 ? 0 : 1;
}
