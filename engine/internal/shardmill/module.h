/* Optional parts of the engine that are shared modules, loaded on first use (dlopen): the MPI
 * implementation of par/ (libshardmill_mpi.so, only when ranks are initialised with MPI) and the
 * HDF5 export (libshardmill_hdf5.so, only when an export is written). A plain run then maps
 * neither MPI nor HDF5 nor what they pull in (about 40 libraries and 9 ms of process start,
 * docs/BENCHMARKS.md "Start-up").
 *
 * A module is compiled and linked normally against its library (MPI, HDF5), so the compiler
 * checks every call; it exports one symbol, a `static const` table of function pointers whose
 * first member is a struct sm_module_head, and calls back into the engine by name: the program
 * that holds the engine exports its sm_* symbols (the link option
 * --dynamic-list=engine/par/sm_exports.list travels with sm_par), and the module's loader keeps
 * what the module imports linked (an import table).
 * Modules are found by the dynamic linker's search for a bare file name from the program that
 * holds the engine: its RUNPATH (the build tree's module directory; `$ORIGIN`-relative once
 * installed by `cmake --install`, which puts them beside the `shardmill` binary),
 * LD_LIBRARY_PATH, then the system directories; failing that, in the running program's
 * directory (and, in sanitizer builds, the build tree's). See docs/ARCHITECTURE.md. */
#ifndef SM_CORE_MODULE_H
#define SM_CORE_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/status.h"

/* Bumped when any module table changes: a module from another build is refused. */
#define SM_MODULE_ABI 1u

/* The first member of every module table. */
struct sm_module_head {
    uint32_t abi;  /* SM_MODULE_ABI of the module's build */
    uint32_t size; /* sizeof the whole table in the module's build */
};

/* Loads the shared module `file` (a bare name, e.g. "libshardmill_mpi.so"; loading an already
 * loaded module is cheap) with its dependencies, `global` making their symbols available to what
 * they load later (Open MPI's components need libmpi's), and returns the table exported as
 * `symbol` once its head says SM_MODULE_ABI and `size`. Modules are never unloaded. SM_E_IO with
 * `where` = the file when it cannot be loaded (dlerror's text and where modules are looked for),
 * lacks the symbol, or comes from another build. Thread-safe. */
sm_status sm_module_load(const char *file, const char *symbol, uint32_t size, int global,
                         const void **table, struct sm_err *err);

#endif
