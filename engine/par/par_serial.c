/* Serial implementation of par.h: one rank, no MPI. */
#include "shardmill/par.h"

#include <string.h>

sm_status sm_par_init(bool use_mpi, int *argc, char ***argv, struct sm_err *err)
{
    (void)argc;
    (void)argv;
    if (use_mpi) {
        SM_FAIL(err, SM_E_USAGE, "launched under MPI, but this build has no MPI (SM_WITH_MPI=OFF)");
    }
    return SM_OK;
}

sm_status sm_par_init_comm(bool use_mpi, const void *mpi_comm, int *argc, char ***argv,
                           struct sm_err *err)
{
    if (mpi_comm != NULL) {
        SM_FAIL(err, SM_E_USAGE,
                "an MPI communicator was given, but this build has no MPI "
                "(SM_WITH_MPI=OFF)");
    }
    return sm_par_init(use_mpi, argc, argv, err);
}

void sm_par_finalize(void)
{
}

const void *sm_par_comm(void)
{
    return NULL;
}

bool sm_par_owns_mpi(void)
{
    return false;
}

int sm_par_rank(void)
{
    return 0;
}

int sm_par_size(void)
{
    return 1;
}

bool sm_par_have_mpi(void)
{
    return false;
}

bool sm_par_active(void)
{
    return false;
}

void sm_par_barrier(void)
{
}

sm_status sm_par_bcast(void *buf, size_t len, int root, struct sm_err *err)
{
    (void)buf;
    (void)len;
    (void)root;
    (void)err;
    return SM_OK;
}

sm_status sm_par_bcast_buf(struct sm_buf *b, int root, struct sm_err *err)
{
    (void)b;
    (void)root;
    (void)err;
    return SM_OK;
}

sm_status sm_par_gatherv_bytes(struct sm_bytes mine, struct sm_buf *all, int root,
                               struct sm_err *err)
{
    (void)root;
    all->len = 0;
    SM_TRY(sm_buf_reserve(all, mine.len, err));
    if (mine.len > 0) {
        memcpy(all->ptr, mine.ptr, mine.len);
    }
    all->len = mine.len;
    return SM_OK;
}

sm_status sm_par_sum_u64(uint64_t *v, size_t n, struct sm_err *err)
{
    (void)v;
    (void)n;
    (void)err;
    return SM_OK;
}

sm_status sm_par_max_u64(uint64_t *v, size_t n, struct sm_err *err)
{
    (void)v;
    (void)n;
    (void)err;
    return SM_OK;
}

sm_status sm_par_sum_f64(double *v, size_t n, struct sm_err *err)
{
    (void)v;
    (void)n;
    (void)err;
    return SM_OK;
}

sm_status sm_par_agree(sm_status local, struct sm_err *err)
{
    (void)err;
    return local;
}

sm_status sm_par_agree_within(sm_status local, uint64_t timeout_ms, struct sm_err *err)
{
    (void)timeout_ms;
    (void)err;
    return local;
}

bool sm_par_stuck(void)
{
    return false;
}

void sm_par_abort(int code)
{
    (void)code;
}

void sm_par_progress_post(const uint64_t v[2], bool last)
{
    (void)v;
    (void)last;
}

int sm_par_progress_poll(uint64_t *all)
{
    (void)all;
    return 0;
}
