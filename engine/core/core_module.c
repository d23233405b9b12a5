/* Shared modules loaded on first use (module.h): dlopen by bare name (else from the program's
 * and the build tree's directory), dlsym of the one table; and system libraries loaded on first
 * use, dlsym of each entry point. */
#include "shardmill/sm_config.h"

#include "shardmill/module.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shardmill/library.h"

/* dlerror's text is per thread but not reentrant with other dl* users: one load at a time. */
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;

/* Copies the directory part of `path` (absolute only) into buf; false when there is none. */
static bool dir_of(const char *path, char *buf, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (path[0] != '/' || slash == NULL || (size_t)(slash - path) + 1 > cap) {
        return false;
    }
    const size_t n = slash == path ? 1 : (size_t)(slash - path);
    memcpy(buf, path, n);
    buf[n] = '\0';
    return true;
}

/* dlopen of `file` in `dir`, or NULL. */
static void *open_in(const char *dir, const char *file, int flags)
{
    char path[PATH_MAX];
    const int n = snprintf(path, sizeof(path), "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= sizeof(path) || access(path, F_OK) != 0) {
        return NULL;
    }
    return dlopen(path, flags);
}

/* The bare name first: the dynamic linker searches the RUNPATH of the object that calls dlopen
 * (the program holding the engine; $ORIGIN once installed), LD_LIBRARY_PATH, the system. Where
 * that caller is not the program (a sanitizer runtime intercepts dlopen), the same places by
 * hand: the directory of the running program (the engine is linked into it statically), then,
 * in a sanitizer build, the build tree's module directory. On failure `why` holds the first dlerror
 * and `where` what was tried. */
static void *open_module(const char *file, int flags, char *why, size_t why_cap, char *where,
                         size_t where_cap)
{
    void *lib = dlopen(file, flags);
    if (lib != NULL) {
        return lib;
    }
    const char *e = dlerror();
    snprintf(why, why_cap, "%s", e != NULL ? e : "dlopen failed");
    char dirs[2][PATH_MAX];
    size_t nd = 0;
    char exe[PATH_MAX];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (len > 0) {
        exe[len] = '\0';
        nd += dir_of(exe, dirs[nd], sizeof(dirs[nd]));
    }
#ifdef SM_MODULE_BUILD_DIR
    snprintf(dirs[nd++], sizeof(dirs[0]), "%s", SM_MODULE_BUILD_DIR);
#endif
    size_t used = 0;
    where[0] = '\0';
    for (size_t i = 0; i < nd; i++) {
        lib = open_in(dirs[i], file, flags);
        if (lib != NULL) {
            return lib;
        }
        const int n =
            snprintf(where + used, where_cap - used, "%s%s", used > 0 ? ", " : "", dirs[i]);
        if (n > 0 && (size_t)n < where_cap - used) {
            used += (size_t)n;
        }
    }
    return NULL;
}

sm_status sm_module_load(const char *file, const char *symbol, uint32_t size, int global,
                         const void **table, struct sm_err *err)
{
    *table = NULL;
    sm_status st = SM_OK;
    char why[160], where[2 * PATH_MAX + 8];
    pthread_mutex_lock(&load_mu);
    void *lib = open_module(file, RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL), why, sizeof(why),
                            where, sizeof(where));
    if (lib == NULL) {
        const size_t fl = strlen(file); /* dlerror repeats the file name: drop it */
        const char *w =
            strncmp(why, file, fl) == 0 && strncmp(why + fl, ": ", 2) == 0 ? why + fl + 2 : why;
        st = SM_ERR(err, SM_E_IO,
                    "cannot load this part of shardmill (%s; also looked in %s); cmake "
                    "--install puts it beside the shardmill binary",
                    w, where[0] != '\0' ? where : "the program's directory");
    } else {
        const struct sm_module_head *h = dlsym(lib, symbol);
        if (h == NULL) {
            st = SM_ERR(err, SM_E_IO, "not a shardmill module of this build: it has no %s", symbol);
        } else if (h->abi != SM_MODULE_ABI || h->size != size) {
            st = SM_ERR(err, SM_E_IO,
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

bool sm_library_load(const char *soname, const struct sm_library_sym *syms, size_t nsyms, char *why,
                     size_t why_cap)
{
    pthread_mutex_lock(&load_mu);
    /* Lazy binding: libcurl's ~30 dependencies resolve only the functions a run calls (0.3-0.7
     * ms less per HTTP run, W1); every symbol taken here is checked by dlsym below. */
    void *lib = dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
    bool ok = lib != NULL;
    if (!ok) {
        const char *e = dlerror();
        snprintf(why, why_cap, "%s", e != NULL ? e : "dlopen failed");
    }
    for (size_t i = 0; ok && i < nsyms; i++) {
        *syms[i].slot = dlsym(lib, syms[i].name);
        if (*syms[i].slot == NULL) {
            snprintf(why, why_cap, "%s has no %s", soname, syms[i].name);
            ok = false;
        }
    }
    for (size_t i = 0; !ok && i < nsyms; i++) {
        *syms[i].slot = NULL;
    }
    pthread_mutex_unlock(&load_mu);
    return ok;
}
