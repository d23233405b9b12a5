/* MPI implementation of par_hdf5.h: the one place that hands the ranks' communicator (par/'s
 * duplicate, sm_par_comm) to HDF5 (MPI-IO file driver, collective transfers). Built with
 * SM_WITH_MPI and SM_WITH_HDF5 against parallel HDF5. */
#include "shardmill/par_hdf5.h"

#include <hdf5.h>

#include "shardmill/par.h"

/* par_hdf5.h passes hid_t as int64_t */
_Static_assert(sizeof(hid_t) == sizeof(int64_t), "hid_t is a 64-bit integer since HDF5 1.10");

bool sm_par_h5_shared(void)
{
    return sm_par_active() && sm_par_size() > 1;
}

sm_status sm_par_h5_fapl(int64_t fapl, struct sm_err *err)
{
    if (sm_par_h5_shared()) {
        if (H5Pset_fapl_mpio((hid_t)fapl, *(const MPI_Comm *)sm_par_comm(), MPI_INFO_NULL) < 0) {
            SM_FAIL(err, SM_E_INTERNAL, "H5Pset_fapl_mpio failed");
        }
        return SM_OK;
    }
    if (H5Pset_fapl_sec2((hid_t)fapl) < 0) {
        SM_FAIL(err, SM_E_INTERNAL, "H5Pset_fapl_sec2 failed");
    }
    return SM_OK;
}

sm_status sm_par_h5_dxpl(int64_t dxpl, struct sm_err *err)
{
    if (sm_par_h5_shared() && H5Pset_dxpl_mpio((hid_t)dxpl, H5FD_MPIO_COLLECTIVE) < 0) {
        SM_FAIL(err, SM_E_INTERNAL, "H5Pset_dxpl_mpio(H5FD_MPIO_COLLECTIVE) failed");
    }
    return SM_OK;
}

const char *sm_par_h5_driver(void)
{
    return sm_par_h5_shared() ? "mpio" : "sec2";
}
