/* export.h without HDF5 (SM_WITH_HDF5=OFF): the export is unavailable, every call says so. */
#include "shardmill/export.h"

#include <string.h>

bool sm_export_hdf5_available(void)
{
    return false;
}

static sm_status unavailable(struct sm_err *err)
{
    SM_FAIL_AT(err, SM_E_USAGE, "export.hdf5.path",
               "this build has no HDF5 export (configured with SM_WITH_HDF5=OFF)");
}

sm_status sm_export_hdf5_check(const char *path, const struct sm_export_opts *opts,
                               const struct sm_export_spec *spec, char **resolved,
                               struct sm_err *err)
{
    (void)path;
    (void)opts;
    (void)spec;
    *resolved = NULL;
    return unavailable(err);
}

sm_status sm_export_hdf5_write(const char *path, const struct sm_export_opts *opts,
                               const struct sm_export_spec *spec, struct sm_array *src,
                               const struct sm_export_work *work, struct sm_scratch *scratch,
                               struct sm_export_result *res, struct sm_err *err)
{
    (void)path;
    (void)opts;
    (void)spec;
    (void)src;
    (void)work;
    (void)scratch;
    memset(res, 0, sizeof(*res));
    return unavailable(err);
}
