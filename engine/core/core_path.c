/* Output path resolution (SPEC §6): the checks every writer applies to its configured target
 * before it creates anything, so that nothing outside the output (or the export file) is written,
 * and the relation of two paths after resolving links (the output may not be the input, lie
 * inside it or contain it). Invariant: a resolved path has no ".." component, stays inside `base`
 * when one is given, and its last component is a name. Also mkdir -p of a plain path for a
 * program's own files (core_fs.c beneath AT_FDCWD). */
#include "shardmill/sm_config.h"

#include "shardmill/path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardmill/alloc.h"
#include "shardmill/fs.h"

#define PATH_CAP 4096

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
        SM_FAIL_AT(err, SM_E_USAGE, names->key, "the %s path is empty", names->noun);
    }
    /* a ".." component would let the directories created on the way ("a" of "a/../../x") or the
     * target itself escape the path the user named */
    if (has_dotdot(path)) {
        SM_FAIL_AT(err, SM_E_USAGE, path, "the %s path has a '..' component: name the %s directly",
                   names->noun, names->kind);
    }
    char full[PATH_CAP];
    int n;
    if (base != NULL) {
        const size_t bl = strip_slashes(base);
        if (path[0] == '/') {
            if (strncmp(path, base, bl) != 0 || (path[bl] != '/' && bl != 1) ||
                path[bl + (bl != 1)] == '\0') {
                SM_FAIL_AT(err, SM_E_USAGE, path, "the %s path is not inside %s", names->noun,
                           base);
            }
            n = snprintf(full, sizeof(full), "%s", path);
        } else {
            n = snprintf(full, sizeof(full), "%.*s/%s", (int)bl, base, path);
        }
    } else {
        n = snprintf(full, sizeof(full), "%s", path);
    }
    if (n < 0 || (size_t)n >= sizeof(full)) {
        SM_FAIL_AT(err, SM_E_USAGE, path, "the %s path is longer than %d bytes", names->noun,
                   PATH_CAP - 1);
    }
    const size_t len = strip_slashes(full);
    full[len] = '\0';
    const char *last = strrchr(full, '/');
    last = last != NULL ? last + 1 : full;
    if (strcmp(full, "/") == 0 || strcmp(last, ".") == 0 || strcmp(last, "..") == 0 ||
        last[0] == '\0') {
        SM_FAIL_AT(err, SM_E_USAGE, path, "the %s path must name a %s of its own", names->noun,
                   names->kind);
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

/* ---- canonical paths and their relation ---- */

/* Appends the component c[0..n) to the absolute path buf (length *bl) lexically: "." and empty
 * components are dropped, ".." removes the last component ("/" stays "/"). False when the result
 * would not fit PATH_CAP. */
static bool push_component(char *buf, size_t *bl, const char *c, size_t n)
{
    if (n == 0 || (n == 1 && c[0] == '.')) {
        return true;
    }
    if (n == 2 && c[0] == '.' && c[1] == '.') {
        while (*bl > 1 && buf[*bl - 1] != '/') {
            (*bl)--;
        }
        if (*bl > 1) {
            (*bl)--;
        }
        buf[*bl] = '\0';
        return true;
    }
    const size_t sep = *bl > 1 ? 1 : 0;
    if (*bl + sep + n >= PATH_CAP) {
        return false;
    }
    if (sep != 0) {
        buf[(*bl)++] = '/';
    }
    memcpy(buf + *bl, c, n);
    *bl += n;
    buf[*bl] = '\0';
    return true;
}

/* Symbolic links followed while resolving one path before it counts as a loop (Linux: 40). */
#define MAX_LINKS 40

static sm_status too_long(const char *path, struct sm_err *err)
{
    SM_FAIL_AT(err, SM_E_USAGE, path, "the path is longer than %d bytes once resolved",
               PATH_CAP - 1);
}

sm_status sm_path_canonical(const char *path, char **out, struct sm_err *err)
{
    *out = NULL;
    if (path == NULL || path[0] == '\0') {
        SM_FAIL(err, SM_E_USAGE, "empty path");
    }
    /* res: the resolved part, a real absolute path; rem: what is left to walk */
    char res[PATH_CAP], rem[2 * PATH_CAP], next[2 * PATH_CAP], link[PATH_CAP];
    size_t rl = 0;
    if (path[0] == '/') {
        res[rl++] = '/';
        res[rl] = '\0';
    } else if (getcwd(res, sizeof(res)) == NULL) {
        return SM_ERRNO(err, errno, path, "cannot read the working directory");
    } else {
        rl = strlen(res);
    }
    if ((size_t)snprintf(rem, sizeof(rem), "%s", path) >= sizeof(rem)) {
        return too_long(path, err);
    }
    bool exists = true; /* res names an existing entry: look the next component up */
    unsigned links = 0;
    for (const char *c = rem; *c != '\0';) {
        while (*c == '/') {
            c++;
        }
        const char *e = strchr(c, '/');
        const size_t n = e != NULL ? (size_t)(e - c) : strlen(c);
        if (n == 0) {
            break;
        }
        const size_t before = rl;
        if (!push_component(res, &rl, c, n)) {
            return too_long(path, err);
        }
        c += n;
        const bool name = !(n == 1 && c[-1] == '.') && !(n == 2 && c[-1] == '.' && c[-2] == '.');
        struct stat sb;
        if (!exists || !name) {
            continue; /* "." and ".." of a real directory; names below a missing one */
        }
        if (lstat(res, &sb) != 0) {
            exists = false; /* from here on nothing exists, so no name is a link */
            continue;
        }
        if (!S_ISLNK(sb.st_mode)) {
            continue;
        }
        if (++links > MAX_LINKS) {
            SM_FAIL_AT(err, SM_E_USAGE, path, "too many levels of symbolic links");
        }
        const ssize_t ll = readlink(res, link, sizeof(link));
        if (ll < 0 || (size_t)ll >= sizeof(link)) {
            exists = false; /* unreadable: keep the name as written */
            continue;
        }
        /* the link's target, then what followed the link, replace the rest of the walk */
        if ((size_t)snprintf(next, sizeof(next), "%.*s/%s", (int)ll, link, c) >= sizeof(next)) {
            return too_long(path, err);
        }
        memcpy(rem, next, strlen(next) + 1);
        c = rem;
        if (link[0] == '/') {
            rl = 1;
            res[1] = '\0';
        } else {
            rl = before; /* relative to the directory holding the link */
            res[rl] = '\0';
        }
    }
    *out = sm_strdup(res);
    if (*out == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a path");
    }
    return SM_OK;
}

sm_status sm_path_relation(const char *a, const char *b, enum sm_path_rel *rel, struct sm_err *err)
{
    *rel = SM_PATH_DISJOINT;
    char *ca = NULL, *cb = NULL;
    SM_TRY(sm_path_canonical(a, &ca, err));
    sm_status st = sm_path_canonical(b, &cb, err);
    if (st == SM_OK) {
        *rel = strcmp(ca, cb) == 0         ? SM_PATH_SAME
               : sm_path_is_within(ca, cb) ? SM_PATH_INSIDE
               : sm_path_is_within(cb, ca) ? SM_PATH_CONTAINS
                                           : SM_PATH_DISJOINT;
    }
    sm_free(ca);
    sm_free(cb);
    return st;
}

sm_status sm_path_mkdirs(const char *dir, struct sm_err *err)
{
    return sm_fs_mkdirs(AT_FDCWD, dir, err);
}
