/* HDF5 file access over ranks (STYLE B9: par/ is the only MPI surface). The HDF5 export opens one
 * file that every rank writes; how the ranks share it is decided here and nowhere else: with MPI
 * started and more than one rank, the MPI-IO file driver on the ranks' communicator (sm_par_comm)
 * and collective transfers (HDF5 1.10 needs collective writes for filtered, i.e. deflated,
 * datasets); otherwise (one rank, or no launcher so MPI was never initialised) the POSIX sec2
 * driver and the default transfer. Built only with SM_WITH_HDF5; HDF5 handles (hid_t, int64_t since
 * HDF5 1.10) travel as int64_t so that this header needs no HDF5 include path. */
#ifndef SM_PAR_PAR_HDF5_H
#define SM_PAR_PAR_HDF5_H

#include <stdbool.h>
#include <stdint.h>

#include "shardmill/status.h"

/* True when the export file is shared by every rank through MPI-IO: then every HDF5 call that
 * creates, writes or closes anything in it is collective (every rank calls it, in the same order,
 * with the same arguments; a rank with nothing to write selects nothing). False with one rank. */
bool sm_par_h5_shared(void);

/* Sets the file driver of a file-access property list: MPI-IO on the ranks' communicator (with
 * MPI_INFO_NULL) when shared, else sec2. SM_E_INTERNAL naming the HDF5 call if it fails. */
sm_status sm_par_h5_fapl(int64_t fapl, struct sm_err *err);

/* Sets the transfer mode of a dataset-transfer property list: H5FD_MPIO_COLLECTIVE when shared,
 * nothing otherwise. SM_E_INTERNAL naming the HDF5 call if it fails. */
sm_status sm_par_h5_dxpl(int64_t dxpl, struct sm_err *err);

/* "mpio" or "sec2": the driver sm_par_h5_fapl selects (for reports). */
const char *sm_par_h5_driver(void);

#endif
