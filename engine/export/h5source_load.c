/* h5source.h in the engine with SM_WITH_HDF5: the HDF5 ingest source lives in the module
 * libshardmill_hdf5.so (h5_source.c, table sm_hdf5_source_module in export_int.h), loaded by the
 * first sm_h5source_open, so only a run with HDF5 input maps HDF5. */
#include "shardmill/sm_config.h"

#include "shardmill/h5source.h"

#include <pthread.h>

#include "export_int.h"
#include "shardmill/alloc.h"
#include "shardmill/dtype.h"
#include "shardmill/module.h"

/* What h5_source.c calls in the engine (as export_load.c's sm_export_hdf5_imports: kept in a
 * static link, checked by tests/startup against the module's undefined symbols). */
typedef void (*sm_h5source_fn)(void);
extern const sm_h5source_fn sm_h5source_imports[];
const sm_h5source_fn sm_h5source_imports[] = {
    (sm_h5source_fn)sm_calloc,    (sm_h5source_fn)sm_free,    (sm_h5source_fn)sm_dtype_name,
    (sm_h5source_fn)sm_err_cause, (sm_h5source_fn)sm_err_set, (sm_h5source_fn)sm_err_where,
};

static const struct sm_hdf5_source_ops *ops;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct sm_err load_err;

static void load(void)
{
    const void *table = NULL;
    if (sm_module_load(SM_EXPORT_HDF5_MODULE, SM_HDF5_SOURCE_SYMBOL,
                       sizeof(struct sm_hdf5_source_ops), 0, &table, &load_err) == SM_OK) {
        ops = table;
    }
}

sm_status sm_h5source_open(const char *path, const char *dataset, unsigned flags,
                           struct sm_h5source_info *info, struct sm_h5source **out,
                           struct sm_err *err)
{
    *out = NULL;
    pthread_once(&load_once, load);
    if (ops == NULL) {
        sm_err_set(err, load_err.status, load_err.file, load_err.line, "%s", load_err.what);
        sm_err_where(err, "%s", load_err.where);
        return err->status;
    }
    return ops->open(path, dataset, flags, info, out, err);
}

sm_status sm_h5source_read_box(struct sm_h5source *s, const uint64_t *off, const uint64_t *shape,
                               void *out, struct sm_err *err)
{
    return ops->read_box(s, off, shape, out, err); /* s came from a loaded module */
}

void sm_h5source_close(struct sm_h5source *s)
{
    if (s != NULL) {
        ops->close(s);
    }
}
