/* System libraries that only some runs need, loaded on first use (core/core_module.c): libcurl,
 * c-blosc, libtiff, liblzma and libbz2 in the engine, libyaml in jobs/. A library that is linked
 * is mapped, with its dependencies, at every process start; one loaded here is mapped only by the
 * runs that use it (docs/ARCHITECTURE.md "Modules loaded on demand"). The engine's own optional
 * parts (MPI, the HDF5 export and source) are shared modules with an import table instead
 * (module.h, internal to the engine). */
#ifndef SM_CORE_LIBRARY_H
#define SM_CORE_LIBRARY_H

#include <stdbool.h>
#include <stddef.h>

/* One entry point of a system library loaded on first use (sm_library_load). */
struct sm_library_sym {
    const char *name;
    void **slot;
};

/* dlopen of the system library `soname` (RTLD_LAZY | RTLD_LOCAL, never closed) and dlsym of every
 * symbol into its slot: for the libraries only some runs need (libcurl, c-blosc, libyaml, libtiff,
 * liblzma, libbz2), whose dependencies would otherwise be mapped by every process start. false
 * when the library cannot be loaded or lacks a symbol: `why` then holds one line (dlerror's text,
 * or "<soname> has no <symbol>") and every slot is NULL. Call it once (pthread_once). */
bool sm_library_load(const char *soname, const struct sm_library_sym *syms, size_t nsyms, char *why,
                     size_t why_cap);

#endif
