/* sm_source_open (shardmill/source.h): the engine's file sources by input.format. */
#include "source_int.h"

#include <string.h>

static const struct {
    const char *name;
    sm_status (*open)(const struct sm_source_params *p, struct sm_source **out, struct sm_err *err);
} formats[] = {
    {"raw", sm_src_open_raw},
    {"nifti", sm_src_open_nifti},
    {"tiff", sm_src_open_tiff},
    {"hdf5", sm_src_open_hdf5},
};

sm_status sm_source_open(const struct sm_source_params *p, struct sm_source **out,
                         struct sm_err *err)
{
    *out = NULL;
    if (p->path == NULL || p->path[0] == '\0') {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "a source needs a file");
        sm_err_where(err, "input.store");
        return err->status;
    }
    for (size_t i = 0; p->format != NULL && i < sizeof(formats) / sizeof(formats[0]); i++) {
        if (strcmp(p->format, formats[i].name) == 0) {
            return formats[i].open(p, out, err);
        }
    }
    sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
               "'%s' is no source format (raw, nifti, tiff or hdf5)",
               p->format != NULL ? p->format : "");
    sm_err_where(err, "input.format");
    return err->status;
}
