/* Serial implementation of par.h: one rank, no MPI. */
#include "shardmill/par.h"

sm_status sm_par_init(bool use_mpi, int *argc, char ***argv, struct sm_err *err)
{
    (void)argc;
    (void)argv;
    if (use_mpi) {
        SM_FAIL(err, SM_E_USAGE, "launched under MPI, but this build has no MPI (SM_WITH_MPI=OFF)");
    }
    return SM_OK;
}

void sm_par_finalize(void)
{
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
