/* export.h in the engine with SM_WITH_HDF5: the HDF5 export lives in the module
 * libshardmill_hdf5.so (export_int.h), loaded by the first call that needs it, so only a run with
 * an export maps HDF5 (and, with parallel HDF5, MPI). */
#include "shardmill/sm_config.h"

#include "shardmill/export.h"

#include <pthread.h>
#include <string.h>

#include "export_int.h"
#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/dtype.h"
#include "shardmill/fs.h"
#include "shardmill/module.h"
#include "shardmill/par.h"
#include "shardmill/path.h"

/* What the module calls in the engine, resolved when it is loaded (the program exports its
 * sm_* symbols: engine/par/sm_exports.list, set by sm_par). Naming them here keeps them in a static
 * link that would otherwise drop the ones nothing else uses; tests/startup checks this list against
 * the module's undefined symbols. Extern, so the compiler keeps the table. */
typedef void (*sm_export_fn)(void);
extern const sm_export_fn sm_export_hdf5_imports[];
const sm_export_fn sm_export_hdf5_imports[] = {
    (sm_export_fn)sm_array_meta,
    (sm_export_fn)sm_array_read_region,
    (sm_export_fn)sm_malloc,
    (sm_export_fn)sm_calloc,
    (sm_export_fn)sm_free,
    (sm_export_fn)sm_clock_ns,
    (sm_export_fn)sm_dtype_name,
    (sm_export_fn)sm_err_cause,
    (sm_export_fn)sm_err_clear,
    (sm_export_fn)sm_err_errno,
    (sm_export_fn)sm_err_set,
    (sm_export_fn)sm_err_set_at,
    (sm_export_fn)sm_err_where,
    (sm_export_fn)sm_stop_check,
    (sm_export_fn)sm_fs_fsync,
    (sm_export_fn)sm_fs_rename,
    (sm_export_fn)sm_fs_shared_tmp_name,
    (sm_export_fn)sm_path_is_within,
    (sm_export_fn)sm_path_resolve,
    (sm_export_fn)sm_par_active,
    (sm_export_fn)sm_par_agree,
    (sm_export_fn)sm_par_agree_within,
    (sm_export_fn)sm_par_barrier,
    (sm_export_fn)sm_par_bcast,
    (sm_export_fn)sm_par_comm,
    (sm_export_fn)sm_par_max_u64,
    (sm_export_fn)sm_par_rank,
    (sm_export_fn)sm_par_size,
    (sm_export_fn)sm_par_stuck,
};

static const struct sm_export_hdf5_ops *ops;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct sm_err load_err;

static void load(void)
{
    const void *table = NULL;
    if (sm_module_load(SM_EXPORT_HDF5_MODULE, SM_EXPORT_HDF5_SYMBOL,
                       sizeof(struct sm_export_hdf5_ops), 0, &table, &load_err) == SM_OK) {
        ops = table;
    }
}

/* The module's table, or load_err copied into err. */
static sm_status module(struct sm_err *err)
{
    pthread_once(&load_once, load);
    if (ops == NULL) {
        sm_err_set(err, load_err.status, load_err.file, load_err.line, "%s", load_err.what);
        sm_err_where(err, "%s", load_err.where);
        return err->status;
    }
    return SM_OK;
}

bool sm_export_hdf5_available(void)
{
    return true;
}

sm_status sm_export_hdf5_check(const char *path, const struct sm_export_opts *opts,
                               const struct sm_export_spec *spec, char **resolved,
                               struct sm_err *err)
{
    *resolved = NULL;
    SM_TRY(module(err));
    return ops->check(path, opts, spec, resolved, err);
}

sm_status sm_export_hdf5_write(const char *path, const struct sm_export_opts *opts,
                               const struct sm_export_spec *spec, struct sm_array *src,
                               const struct sm_export_work *work, struct sm_scratch *scratch,
                               struct sm_export_result *res, struct sm_err *err)
{
    memset(res, 0, sizeof(*res));
    SM_TRY(module(err));
    return ops->write(path, opts, spec, src, work, scratch, res, err);
}
