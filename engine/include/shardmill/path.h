/* Output path checks shared by every writer (SPEC §6: "no path outside output.path (or the export
 * path) is ever written"): the Zarr output directory (write/) and the HDF5 export file (export/)
 * resolve their configured path here, so both refuse the same escapes with the same words. */
#ifndef SM_CORE_PATH_H
#define SM_CORE_PATH_H

#include <stdbool.h>

#include "shardmill/status.h"

/* How a path is named in messages: `key` is the configuration key (the `where` of an empty path),
 * `noun` the path's role and `kind` what it must name, e.g. {"output.path", "output",
 * "directory"} gives "the output path must name a directory of its own". */
struct sm_path_names {
    const char *key;
    const char *noun;
    const char *kind;
};

/* Resolves `path` for writing: relative paths stay relative (to the working directory), or are
 * joined to `base` when base is non-NULL; trailing slashes are dropped. *out is an sm_malloc'd
 * string (sm_free it). SM_E_USAGE, `where` = the path: an empty path (where = names->key); a ".."
 * component (it would let the directories created on the way, or the target itself, escape);
 * an absolute path outside a non-NULL base; a path of 4096 bytes or more; a path whose last
 * component is not a name of its own ("/", ".", ".."). SM_E_NOMEM. */
sm_status sm_path_resolve(const char *path, const char *base, const struct sm_path_names *names,
                          char **out, struct sm_err *err);

/* True when `path` (resolved) is `dir` itself or lies inside it, comparing path components:
 * "a/b" is inside "a", "ab" is not. Both must be resolved alike (both relative to the working
 * directory, or both absolute): no file-system lookup is made. */
bool sm_path_is_within(const char *path, const char *dir);

/* How one path lies relative to another, once both are resolved (SPEC §6: the output may not be
 * the input, lie inside it, or contain it). */
enum sm_path_rel {
    SM_PATH_DISJOINT, /* neither holds the other */
    SM_PATH_SAME,     /* the same entry */
    SM_PATH_INSIDE,   /* a lies inside b */
    SM_PATH_CONTAINS, /* a contains b */
};

/* The absolute form of `path` with every symbolic link resolved: the realpath of its deepest
 * existing ancestor (the working directory for a relative path) with the components that do not
 * exist yet appended, "." dropped and ".." taken lexically (a name that does not exist is no
 * link). The path itself need not exist. *out is an sm_malloc'd string (sm_free it).
 * SM_E_USAGE (where = path): empty, or 4096 bytes or more once resolved. SM_E_IO: the working
 * directory cannot be read. SM_E_NOMEM. */
sm_status sm_path_canonical(const char *path, char **out, struct sm_err *err);

/* The relation of `a` to `b` after sm_path_canonical of both: SAME, a INSIDE b, a CONTAINS b, or
 * DISJOINT. Looks the paths up in the file system (lstat/realpath), creates nothing. Fails as
 * sm_path_canonical does. */
sm_status sm_path_relation(const char *a, const char *b, enum sm_path_rel *rel, struct sm_err *err);

/* mkdir -p of the plain path `dir` (relative to the working directory, or absolute): every
 * missing directory is made, one level at a time, as the writers make the output's. For a
 * program's own files next to an output (jobs/: the report's directory). SM_E_IO naming the
 * directory that cannot be made. */
sm_status sm_path_mkdirs(const char *dir, struct sm_err *err);

#endif
