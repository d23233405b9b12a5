/* MPI implementation of par.h. MPI_Init is called only when a launcher started the process, so a
 * plain run stays a single cheap process (SPEC §1). */
#include "shardmill/par.h"

#include <mpi.h>

static bool mpi_on;
static int my_rank;
static int n_ranks = 1;

sm_status sm_par_init(bool use_mpi, int *argc, char ***argv, struct sm_err *err)
{
    if (!use_mpi) {
        return SM_OK;
    }
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
        sm_err_set(err, SM_E_INTERNAL, __FILE__, __LINE__, "MPI_Init_thread failed (code %d)", rc);
        sm_err_cause(err, "mpi", rc);
        return err->status;
    }
    mpi_on = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    return SM_OK;
}

void sm_par_finalize(void)
{
    if (mpi_on) {
        MPI_Finalize();
        mpi_on = false;
    }
}

int sm_par_rank(void)
{
    return my_rank;
}

int sm_par_size(void)
{
    return n_ranks;
}

bool sm_par_have_mpi(void)
{
    return true;
}
