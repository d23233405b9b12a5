/* Launcher detection (SPEC §1, STYLE B9): MPI is initialised only when mpirun/mpiexec/srun started
 * the process, so a plain run stays one cheap process without initialising MPI. */
#include "jobs_run.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static bool env_set(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0';
}

bool sm_job_launched_by_mpi(void)
{
    /* SHARDMILL_NO_MPI=1 forces a serial run (debugging a single rank under a launcher) */
    const char *no = getenv("SHARDMILL_NO_MPI");
    if (no != NULL && strcmp(no, "1") == 0) {
        return false;
    }
    if (env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMIX_RANK") || env_set("PMI_RANK") ||
        env_set("PMI_SIZE") || env_set("MPI_LOCALNRANKS") || env_set("HYDRA_CONTROL_FD")) {
        return true;
    }
    /* srun: only a multi-task step needs ranks */
    const char *procid = getenv("SLURM_PROCID"), *ntasks = getenv("SLURM_NTASKS");
    if (procid != NULL && procid[0] != '\0' && ntasks != NULL) {
        char *end = NULL;
        const long n = strtol(ntasks, &end, 10);
        return end != ntasks && n > 1;
    }
    return false;
}

int sm_job_launch_rank(void)
{
    if (!sm_job_launched_by_mpi()) {
        return 0;
    }
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                        "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = getenv(names[i]);
        char *end = NULL;
        const long r = v != NULL ? strtol(v, &end, 10) : -1;
        if (v != NULL && end != v && *end == '\0' && r >= 0 && r <= INT_MAX) {
            return (int)r;
        }
    }
    return 0; /* a launcher that names no rank: every process speaks */
}
