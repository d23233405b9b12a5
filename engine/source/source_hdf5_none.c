/* HDF5 input in a build without HDF5 (SM_WITH_HDF5=OFF): refused, naming input.format. */
#include "source_int.h"

sm_status sm_src_open_hdf5(const struct sm_source_params *p, struct sm_source **out,
                           struct sm_err *err)
{
    (void)p;
    *out = NULL;
    SM_FAIL_AT(err, SM_E_USAGE, "input.format",
               "this build has no HDF5 (configured with SM_WITH_HDF5=OFF)");
}
