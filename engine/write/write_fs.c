/* File-system reads of the output directory (SPEC §6): whole-file reads, listing, the tree walker
 * that recognises, sweeps or removes the files of a shardmill output, and the search for a
 * symbolic link in it. Nothing here follows a link: a path is resolved beneath the output's
 * descriptor (fs.h), and a walk opens one directory at a time with openat(parent, name,
 * O_NOFOLLOW) and removes with unlinkat(parent, name), as fts and rm -rf do, so a directory
 * swapped for a link during the walk is never entered. Writes go through the output's file store
 * (store.h), not here.
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html#storage
 * Invariant: every path is relative to a descriptor inside the output; nothing else is touched. */
#include "shardmill/sm_config.h"

#include "write_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardmill/alloc.h"
#include "shardmill/fs.h"

#define PATH_CAP 4096
#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
/* Deeper than any directory of an output (a level, c/, one per dimension): a search stops here. */
#define FIND_DEPTH (SM_MAX_DIMS + 8)

static sm_status link_fail(struct sm_err *err, const char *what, const char *path)
{
    SM_ERR(err, SM_E_IO,
           "%s '%s': it is a symbolic link, which shardmill never makes: refusing to go "
           "through it",
           what, path);
    sm_err_cause(err, "errno", ELOOP);
    return err->status;
}

/* openat(dirfd, name, DIR_FLAGS) of an entry readdir listed as a directory; errno ELOOP when it
 * has become a symbolic link meanwhile (Linux says ENOTDIR for O_DIRECTORY | O_NOFOLLOW). */
static int open_child(int dirfd, const char *name)
{
    const int fd = openat(dirfd, name, DIR_FLAGS);
    if (fd < 0 && errno == ENOTDIR) {
        struct stat sb;
        errno = fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode)
                    ? ELOOP
                    : ENOTDIR;
    }
    return fd;
}

sm_status sm_wfs_read(int dirfd, const char *key, struct sm_buf *out, bool *found,
                      struct sm_err *err)
{
    *found = false;
    out->len = 0;
    const int fd = sm_fs_open_beneath(dirfd, key, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) {
            return SM_OK; /* a link is not an object: never followed */
        }
        return SM_ERRNO(err, errno, NULL, "cannot open '%s'", key);
    }
    struct stat sb;
    sm_status st = SM_OK;
    if (fstat(fd, &sb) != 0) {
        st = SM_ERRNO(err, errno, NULL, "cannot stat '%s'", key);
    } else if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return SM_OK; /* a directory is not an object */
    }
    const size_t size = st == SM_OK ? (size_t)sb.st_size : 0;
    if (st == SM_OK) {
        st = sm_buf_reserve(out, size == 0 ? 1 : size, err);
    }
    size_t done = 0;
    while (st == SM_OK && done < size) {
        const ssize_t r = read(fd, out->ptr + done, size - done);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            st = SM_ERRNO(err, errno, NULL, "cannot read '%s'", key);
        } else if (r == 0) {
            break; /* shrank meanwhile: what was read is the object */
        } else {
            done += (size_t)r;
        }
    }
    close(fd);
    if (st == SM_OK) {
        out->len = done;
        *found = true;
    }
    return st;
}

/* Reads the entry names of d; with `kinds`, one enum sm_fs_kind byte per name from readdir's
 * d_type (no stat per entry). On failure `out` is released. */
static sm_status read_names(DIR *d, struct sm_strv *out, struct sm_buf *kinds, struct sm_err *err)
{
    sm_status st = SM_OK;
    const struct dirent *e;
    while (st == SM_OK && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            st = sm_strv_push(out, e->d_name, strlen(e->d_name), err);
            if (st == SM_OK && kinds != NULL) {
                st = sm_buf_reserve(kinds, kinds->len + 1, err);
                if (st == SM_OK) {
                    kinds->ptr[kinds->len++] = (uint8_t)sm_fs_dirent_kind(e->d_type);
                }
            }
        }
    }
    if (st != SM_OK) {
        sm_strv_free(out);
    }
    return st;
}

/* A directory stream on fd (consumed, also on failure). */
static sm_status open_stream(int fd, const char *rel, DIR **d, struct sm_err *err)
{
    *d = fdopendir(fd);
    if (*d == NULL) {
        const int e = errno;
        close(fd);
        return SM_ERRNO(err, e, NULL, "cannot list '%s'", rel);
    }
    return SM_OK;
}

static sm_status list_at(int dirfd, const char *rel, struct sm_strv *out, struct sm_err *err)
{
    const int fd = sm_fs_opendir_beneath(dirfd, rel, false);
    if (fd < 0) {
        return errno == ENOENT ? SM_OK
                               : sm_fs_fail(err, "cannot open directory", dirfd, rel, errno);
    }
    DIR *d;
    SM_TRY(open_stream(fd, rel, &d, err));
    const sm_status st = read_names(d, out, NULL, err);
    closedir(d);
    return st;
}

sm_status sm_wfs_list(int dirfd, const char *rel, struct sm_strv *out, struct sm_err *err)
{
    return list_at(dirfd, rel, out, err);
}

/* ---- the one rule for the names of an output's tree ---- */

bool sm_wfs_decimal(const char *name, uint64_t *v)
{
    uint64_t x = 0;
    const char *p = name;
    if (*p < '0' || *p > '9' || (*p == '0' && p[1] != '\0')) {
        return false; /* empty, not a digit, or zero-padded ("01", "00") */
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        if (x > (UINT64_MAX - 9) / 10) {
            return false;
        }
        x = x * 10 + (uint64_t)(*p - '0');
    }
    if (*p != '\0') {
        return false;
    }
    if (v != NULL) {
        *v = x;
    }
    return true;
}

enum sm_wfs_name sm_wfs_chunk_name(const char *name, bool dir, bool reg)
{
    if ((dir || reg) && sm_wfs_decimal(name, NULL)) {
        return SM_WFS_NAME_KEY;
    }
    return reg && sm_fs_is_tmp(name) ? SM_WFS_NAME_TMP : SM_WFS_NAME_FOREIGN;
}

bool sm_wfs_in_grid(const struct sm_writer *lw, unsigned d, const char *name, bool dir)
{
    uint64_t v;
    if (d >= lw->ndim || !sm_wfs_decimal(name, &v) || v >= lw->grid[d]) {
        return false;
    }
    return d + 1 == lw->ndim ? !dir : dir;
}

static sm_status foreign(struct sm_err *err, const char *path)
{
    SM_FAIL(err, SM_E_USAGE,
            "not a shardmill output: unexpected entry '%s' (refusing to touch the directory)",
            path);
}

/* The kind of entry `name` of dirfd: readdir's, or a stat (never following a link) where the
 * file system does not give it or calls it OTHER (a link among them). false: removed meanwhile. */
static bool entry_kind(int dirfd, const char *name, enum sm_fs_kind *kind, bool *link, int *e)
{
    *link = false;
    *e = 0;
    if (*kind != SM_FS_UNKNOWN && *kind != SM_FS_OTHER) {
        return true;
    }
    struct stat sb;
    if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
        *e = errno == ENOENT ? 0 : errno;
        return false;
    }
    *link = S_ISLNK(sb.st_mode);
    *kind = S_ISDIR(sb.st_mode) ? SM_FS_DIR : S_ISREG(sb.st_mode) ? SM_FS_REG : SM_FS_OTHER;
    return true;
}

/* Walks the open directory fd (consumed), named `rel` in messages. Every entry is reached as
 * (this directory's descriptor, its name): a directory is entered by open_child, never through a
 * link, and removed by unlinkat on this descriptor. */
static sm_status walk_dir(int fd, const char *rel, bool chunks, enum sm_wfs_walk mode,
                          unsigned depth, const atomic_int *stop, const char *doc,
                          struct sm_err *err)
{
    if (depth > SM_MAX_DIMS + 2) {
        close(fd);
        return foreign(err, rel); /* deeper than any chunk key */
    }
    DIR *d;
    SM_TRY(open_stream(fd, rel, &d, err));
    const int dfd = dirfd(d);
    struct sm_strv names = {NULL, 0, 0};
    struct sm_buf kinds = SM_BUF_INIT;
    sm_status st = read_names(d, &names, &kinds, err);
    for (size_t i = 0; i < names.n && st == SM_OK; i++) {
        const char *name = names.v[i];
        if (stop != NULL && atomic_load_explicit(stop, memory_order_relaxed) != 0) {
            st = SM_ERR(err, SM_E_STOPPED, "stopped while walking %s",
                        rel); /* a walk of a huge tree ends at a stop too */
            break;
        }
        char path[PATH_CAP];
        const int n = snprintf(path, sizeof(path), "%s/%s", rel, name);
        if (n < 0 || (size_t)n >= sizeof(path)) {
            st = foreign(err, name);
            break;
        }
        enum sm_fs_kind kind = (enum sm_fs_kind)kinds.ptr[i];
        bool link;
        int e;
        if (!entry_kind(dfd, name, &kind, &link, &e)) {
            st = e == 0
                     ? SM_OK
                     : SM_ERRNO(err, e, NULL, "cannot stat '%s'", path); /* 0: removed meanwhile */
            continue;
        }
        const bool tmp = sm_fs_is_tmp(name);
        const bool is_dir = kind == SM_FS_DIR, is_reg = kind == SM_FS_REG;
        if (depth == 0 && doc != NULL && is_reg && strcmp(name, doc) == 0) {
            continue; /* a Zarr v2 level's .zarray: its directory's owner handles it */
        }
        const bool ok = chunks ? sm_wfs_chunk_name(name, is_dir, is_reg) != SM_WFS_NAME_FOREIGN
                               : is_dir || is_reg;
        if (!ok) { /* never removed: a REMOVE after a CHECK then fails on the non-empty parent */
            st = mode == SM_WFS_CHECK ? foreign(err, path)
                 : link               ? link_fail(err, "cannot walk", path)
                                      : SM_OK;
            continue;
        }
        if (is_dir) {
            const int cfd = open_child(dfd, name);
            if (cfd < 0) { /* ENOENT: removed meanwhile; ELOOP: swapped for a link meanwhile */
                st = errno == ENOENT ? SM_OK
                     : errno != ELOOP
                         ? SM_ERRNO(err, errno, NULL, "cannot open directory '%s'", path)
                     : mode == SM_WFS_CHECK ? foreign(err, path)
                                            : link_fail(err, "cannot walk", path);
                continue;
            }
            st = walk_dir(cfd, path, chunks, mode, depth + 1, stop, NULL, err);
            if (st == SM_OK && mode == SM_WFS_REMOVE && unlinkat(dfd, name, AT_REMOVEDIR) != 0 &&
                errno != ENOENT) {
                st = SM_ERRNO(err, errno, NULL, "cannot remove directory '%s'", path);
            }
        } else if (mode == SM_WFS_REMOVE || (mode == SM_WFS_SWEEP_TMP && tmp)) {
            if (unlinkat(dfd, name, 0) != 0 && errno != ENOENT) {
                st = SM_ERRNO(err, errno, NULL, "cannot remove '%s'", path);
            }
        }
    }
    sm_strv_free(&names);
    sm_buf_free(&kinds);
    closedir(d);
    return st;
}

sm_status sm_wfs_walk(int dirfd, const char *rel, bool chunks, enum sm_wfs_walk mode,
                      struct sm_err *err)
{
    return sm_wfs_walk_stop(dirfd, rel, chunks, mode, NULL, err);
}

/* Opens rel below dirfd without following links and walks it (doc: a Zarr v2 level's document,
 * NULL for a v3 c/ tree); a missing directory is nothing to walk, a file or link where it belongs
 * is foreign under CHECK. */
static sm_status walk_beneath(int dirfd, const char *rel, bool chunks, enum sm_wfs_walk mode,
                              const atomic_int *stop, const char *doc, struct sm_err *err)
{
    const int fd = sm_fs_opendir_beneath(dirfd, rel, false);
    if (fd < 0) {
        const int e = errno;
        if (e == ENOENT) {
            return SM_OK;
        }
        if (mode == SM_WFS_CHECK && (e == ENOTDIR || e == ELOOP)) {
            return foreign(err, rel); /* a file or a link where a directory belongs */
        }
        return e == ENOTDIR ? SM_OK : sm_fs_fail(err, "cannot open directory", dirfd, rel, e);
    }
    return walk_dir(fd, rel, chunks, mode, 0, stop, doc, err);
}

sm_status sm_wfs_walk_stop(int dirfd, const char *rel, bool chunks, enum sm_wfs_walk mode,
                           const atomic_int *stop, struct sm_err *err)
{
    return walk_beneath(dirfd, rel, chunks, mode, stop, NULL, err);
}

sm_status sm_wfs_walk_doc(int dirfd, const char *rel, const char *doc, enum sm_wfs_walk mode,
                          const atomic_int *stop, struct sm_err *err)
{
    return walk_beneath(dirfd, rel, true, mode, stop, doc, err);
}

bool sm_wfs_is_v2(int dirfd)
{
    struct stat sb;
    return fstatat(dirfd, SM_ZGROUP, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode);
}

const char *sm_wfs_root_doc(int dirfd)
{
    return sm_wfs_is_v2(dirfd) ? SM_ZATTRS : SM_ZARR_JSON;
}

/* ---- entries outside the grid ---- */

/* Removes directory `name` of dfd (named `path`) and everything in it. */
static sm_status remove_dir(int dfd, const char *name, const char *path, const atomic_int *stop,
                            struct sm_err *err)
{
    const int cfd = open_child(dfd, name);
    if (cfd < 0) {
        return errno == ENOENT  ? SM_OK
               : errno == ELOOP ? link_fail(err, "cannot walk", path)
                                : SM_ERRNO(err, errno, NULL, "cannot open directory '%s'", path);
    }
    SM_TRY(walk_dir(cfd, path, true, SM_WFS_REMOVE, 0, stop, NULL, err));
    if (unlinkat(dfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return SM_ERRNO(err, errno, NULL, "cannot remove directory '%s'", path);
    }
    return SM_OK;
}

/* Prunes the open directory fd (consumed), component d of lw's keys, named `rel`. */
static sm_status prune_dir(int fd, const char *rel, const struct sm_writer *lw, unsigned d,
                           const atomic_int *stop, uint64_t *removed, struct sm_err *err)
{
    DIR *dir;
    SM_TRY(open_stream(fd, rel, &dir, err));
    const int dfd = dirfd(dir);
    struct sm_strv names = {NULL, 0, 0};
    struct sm_buf kinds = SM_BUF_INIT;
    sm_status st = read_names(dir, &names, &kinds, err);
    for (size_t i = 0; i < names.n && st == SM_OK; i++) {
        const char *name = names.v[i];
        if (stop != NULL && atomic_load_explicit(stop, memory_order_relaxed) != 0) {
            st = SM_ERR(err, SM_E_STOPPED, "stopped while walking %s", rel);
            break;
        }
        char path[PATH_CAP];
        const int n = snprintf(path, sizeof(path), "%s/%s", rel, name);
        enum sm_fs_kind kind = (enum sm_fs_kind)kinds.ptr[i];
        bool link;
        int e;
        if (n < 0 || (size_t)n >= sizeof(path)) {
            st = foreign(err, name);
        } else if (!entry_kind(dfd, name, &kind, &link, &e)) {
            st = e == 0 ? SM_OK : SM_ERRNO(err, e, NULL, "cannot stat '%s'", path);
        } else if (link) {
            st = link_fail(err, "cannot walk", path);
        } else if (sm_wfs_chunk_name(name, kind == SM_FS_DIR, kind == SM_FS_REG) !=
                   SM_WFS_NAME_KEY) {
            continue; /* a temporary file is swept, anything else was refused by the check */
        } else if (sm_wfs_in_grid(lw, d, name, kind == SM_FS_DIR)) {
            if (kind == SM_FS_DIR) {
                const int cfd = open_child(dfd, name);
                st = cfd >= 0          ? prune_dir(cfd, path, lw, d + 1, stop, removed, err)
                     : errno == ENOENT ? SM_OK
                     : errno == ELOOP
                         ? link_fail(err, "cannot walk", path)
                         : SM_ERRNO(err, errno, NULL, "cannot open directory '%s'", path);
            }
        } else {
            st = kind == SM_FS_DIR ? remove_dir(dfd, name, path, stop, err)
                 : unlinkat(dfd, name, 0) != 0 && errno != ENOENT
                     ? SM_ERRNO(err, errno, NULL, "cannot remove '%s'", path)
                     : SM_OK;
            *removed += st == SM_OK;
        }
    }
    sm_strv_free(&names);
    sm_buf_free(&kinds);
    closedir(dir);
    return st;
}

sm_status sm_wfs_prune(int dirfd, const char *rel, const struct sm_writer *lw,
                       const atomic_int *stop, uint64_t *removed, struct sm_err *err)
{
    const int fd = sm_fs_opendir_beneath(dirfd, rel, false);
    if (fd < 0) {
        const int e = errno;
        return e == ENOENT ? SM_OK : sm_fs_fail(err, "cannot open directory", dirfd, rel, e);
    }
    return prune_dir(fd, rel, lw, 0, stop, removed, err);
}

/* ---- symbolic links in the output ---- */

/* Searches the open directory fd (consumed), whose path is the first len bytes of `path` (a
 * PATH_CAP buffer), depth first, straight from readdir: no allocation, as the run's search comes
 * after everything else that can fail and before its marker. On *found, `path` names the link. */
static sm_status find_in(int fd, char *path, size_t len, unsigned depth, bool *found,
                         struct sm_err *err)
{
    DIR *d;
    SM_TRY(open_stream(fd, len == 0 ? "." : path, &d, err));
    const int dfd = dirfd(d);
    sm_status st = SM_OK;
    const struct dirent *e;
    while (st == SM_OK && !*found && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        const int n = snprintf(path + len, PATH_CAP - len, "%s%s", len == 0 ? "" : "/", e->d_name);
        if (n < 0 || (size_t)n >= PATH_CAP - len) {
            path[len] = '\0';
            continue; /* no name of an output is that long */
        }
        enum sm_fs_kind kind = sm_fs_dirent_kind(e->d_type);
        bool link;
        int er;
        if (!entry_kind(dfd, e->d_name, &kind, &link, &er)) {
            st = er == 0 ? SM_OK : SM_ERRNO(err, er, NULL, "cannot stat '%s'", path);
        } else if (!link && kind == SM_FS_DIR && depth < FIND_DEPTH) {
            const int cfd = open_child(dfd, e->d_name);
            link = cfd < 0 && errno == ELOOP;
            if (cfd >= 0) {
                st = find_in(cfd, path, len + (size_t)n, depth + 1, found, err);
            } else if (!link && errno != ENOENT) {
                st = SM_ERRNO(err, errno, NULL, "cannot open directory '%s'", path);
            }
        }
        *found = *found || link;
        if (!*found) {
            path[len] = '\0';
        }
    }
    closedir(d);
    return st;
}

sm_status sm_wfs_find_link(int dirfd, char *where, size_t cap, bool *found, struct sm_err *err)
{
    *found = false;
    const int fd = openat(dirfd, ".", DIR_FLAGS);
    if (fd < 0) {
        return SM_ERRNO(err, errno, NULL, "cannot open directory '.'");
    }
    char path[PATH_CAP] = "";
    const sm_status st = find_in(fd, path, 0, 0, found, err);
    snprintf(where, cap, "%s", *found ? path : "");
    return st;
}

sm_status sm_wfs_refuse_links(int rootfd, struct sm_err *err)
{
    char where[PATH_CAP];
    bool found;
    SM_TRY(sm_wfs_find_link(rootfd, where, sizeof(where), &found, err));
    if (found) {
        SM_ERR(err, SM_E_IO,
               "output.path: '%s' is a symbolic link, which shardmill never makes (planted "
               "during the run?): refusing to complete the output",
               where);
        sm_err_cause(err, "errno", ELOOP);
        return err->status;
    }
    return SM_OK;
}
