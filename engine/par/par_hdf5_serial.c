/* Serial implementation of par_hdf5.h (SM_WITH_MPI=OFF, serial HDF5): one rank, the sec2 driver,
 * default transfers. */
#include "shardmill/par_hdf5.h"

#include <hdf5.h>

_Static_assert(sizeof(hid_t) == sizeof(int64_t), "hid_t is a 64-bit integer since HDF5 1.10");

bool sm_par_h5_shared(void)
{
    return false;
}

sm_status sm_par_h5_fapl(int64_t fapl, struct sm_err *err)
{
    if (H5Pset_fapl_sec2((hid_t)fapl) < 0) {
        SM_FAIL(err, SM_E_INTERNAL, "H5Pset_fapl_sec2 failed");
    }
    return SM_OK;
}

sm_status sm_par_h5_dxpl(int64_t dxpl, struct sm_err *err)
{
    (void)dxpl;
    (void)err;
    return SM_OK;
}

const char *sm_par_h5_driver(void)
{
    return "sec2";
}
