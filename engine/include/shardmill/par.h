/* Ranks: the only MPI surface of the project (STYLE B9). An MPI build still runs serially without
 * calling MPI_Init when no launcher started the process (SPEC §1): jobs/ detects the launcher and
 * passes `use_mpi`. */
#ifndef SM_PAR_PAR_H
#define SM_PAR_PAR_H

#include <stdbool.h>
#include <stdint.h>

#include "shardmill/status.h"

/* Initialises ranks. With use_mpi false (or a serial build) this is one rank and costs nothing. */
sm_status sm_par_init(bool use_mpi, int *argc, char ***argv, struct sm_err *err);
void sm_par_finalize(void);
int sm_par_rank(void);
int sm_par_size(void);
/* True if the MPI implementation is compiled in. */
bool sm_par_have_mpi(void);

#endif
