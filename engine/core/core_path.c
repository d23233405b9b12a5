/* Output path resolution (SPEC §6): the checks every writer applies to its configured target
 * before it creates anything, so that nothing outside the output (or the export file) is written.
 * Invariant: a resolved path has no ".." component, stays inside `base` when one is given, and its
 * last component is a name. */
#include "shardmill/path.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/alloc.h"

#define PATH_CAP 4096

/* Records a usage error about the path, then returns it. */
#define FAIL_PATH(err, path, ...)                                                                  \
    do {                                                                                           \
        sm_err_set((err), SM_E_USAGE, __FILE__, __LINE__, __VA_ARGS__);                            \
        sm_err_where((err), "%s", (path));                                                         \
        return (err)->status;                                                                      \
    } while (0)

static bool has_dotdot(const char *p)
{
    for (const char *c = p; *c != '\0';) {
        const char *e = strchr(c, '/');
        const size_t n = e != NULL ? (size_t)(e - c) : strlen(c);
        if (n == 2 && c[0] == '.' && c[1] == '.') {
            return true;
        }
        c += n;
        while (*c == '/') {
            c++;
        }
    }
    return false;
}

static size_t strip_slashes(const char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') {
        n--;
    }
    return n;
}

sm_status sm_path_resolve(const char *path, const char *base, const struct sm_path_names *names,
                          char **out, struct sm_err *err)
{
    *out = NULL;
    if (path == NULL || path[0] == '\0') {
        FAIL_PATH(err, names->key, "the %s path is empty", names->noun);
    }
    /* a ".." component would let the directories created on the way ("a" of "a/../../x") or the
     * target itself escape the path the user named */
    if (has_dotdot(path)) {
        FAIL_PATH(err, path, "the %s path has a '..' component: name the %s directly", names->noun,
                  names->kind);
    }
    char full[PATH_CAP];
    int n;
    if (base != NULL) {
        const size_t bl = strip_slashes(base);
        if (path[0] == '/') {
            if (strncmp(path, base, bl) != 0 || (path[bl] != '/' && bl != 1) ||
                path[bl + (bl != 1)] == '\0') {
                FAIL_PATH(err, path, "the %s path is not inside %s", names->noun, base);
            }
            n = snprintf(full, sizeof(full), "%s", path);
        } else {
            n = snprintf(full, sizeof(full), "%.*s/%s", (int)bl, base, path);
        }
    } else {
        n = snprintf(full, sizeof(full), "%s", path);
    }
    if (n < 0 || (size_t)n >= sizeof(full)) {
        FAIL_PATH(err, path, "the %s path is longer than %d bytes", names->noun, PATH_CAP - 1);
    }
    const size_t len = strip_slashes(full);
    full[len] = '\0';
    const char *last = strrchr(full, '/');
    last = last != NULL ? last + 1 : full;
    if (strcmp(full, "/") == 0 || strcmp(last, ".") == 0 || strcmp(last, "..") == 0 ||
        last[0] == '\0') {
        FAIL_PATH(err, path, "the %s path must name a %s of its own", names->noun, names->kind);
    }
    *out = sm_strdup(full);
    if (*out == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate the %s path", names->noun);
    }
    return SM_OK;
}

/* Skips "./" components and repeated slashes. */
static const char *skip_dots(const char *p)
{
    for (;;) {
        if (p[0] == '/' && p[1] == '/') {
            p++;
        } else if (p[0] == '.' && p[1] == '/') {
            p += 2;
        } else {
            return p;
        }
    }
}

bool sm_path_is_within(const char *path, const char *dir)
{
    const char *p = skip_dots(path), *d = skip_dots(dir);
    while (*d != '\0') {
        if (*p != *d) {
            return false;
        }
        p++;
        d++;
        if (d[-1] == '/') {
            p = skip_dots(p);
            d = skip_dots(d);
        }
    }
    /* dir consumed: path must end here or continue with a new component */
    return *p == '\0' || *p == '/' || (d > dir && d[-1] == '/');
}
