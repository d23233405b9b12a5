/* Shared modules loaded on first use (module.h): dlopen by bare name, dlsym of the one table. */
#include "shardmill/sm_config.h"

#include "shardmill/module.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

/* dlerror's text is per thread but not reentrant with other dl* users: one load at a time. */
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;

sm_status sm_module_load(const char *file, const char *symbol, uint32_t size, int global,
                         const void **table, struct sm_err *err)
{
    *table = NULL;
    sm_status st = SM_OK;
    pthread_mutex_lock(&load_mu);
    void *lib = dlopen(file, RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (lib == NULL) {
        const char *why = dlerror();
        st = sm_err_set(err, SM_E_IO, __FILE__, __LINE__,
                        "cannot load this optional part of shardmill: %s (modules are installed "
                        "beside the shardmill binary by cmake --install, or found through "
                        "LD_LIBRARY_PATH)",
                        why != NULL ? why : "dlopen failed");
    } else {
        const struct sm_module_head *h = dlsym(lib, symbol);
        if (h == NULL) {
            st = sm_err_set(err, SM_E_IO, __FILE__, __LINE__,
                            "not a shardmill module of this build: it has no %s", symbol);
        } else if (h->abi != SM_MODULE_ABI || h->size != size) {
            st = sm_err_set(err, SM_E_IO, __FILE__, __LINE__,
                            "a shardmill module of another build (module ABI %u, table of %u "
                            "bytes; this build expects ABI %u, %u bytes)",
                            (unsigned)h->abi, (unsigned)h->size, SM_MODULE_ABI, (unsigned)size);
        } else {
            *table = h;
        }
    }
    pthread_mutex_unlock(&load_mu);
    if (st != SM_OK) {
        sm_err_where(err, "%s", file);
    }
    return st;
}
