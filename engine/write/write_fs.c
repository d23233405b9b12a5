/* File-system reads of the output directory (SPEC §6): whole-file reads, listing, and the tree
 * walker that recognises, sweeps or removes the files of a shardmill output without ever
 * following a symbolic link. Writes go through the output's file store (store.h), not here.
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

static sm_status io_fail(struct sm_err *err, const char *what, const char *path, int e)
{
    sm_err_set(err, SM_E_IO, __FILE__, __LINE__, "%s '%s': %s", what, path, strerror(e));
    sm_err_cause(err, "errno", e);
    return err->status;
}

sm_status sm_wfs_read(int dirfd, const char *key, struct sm_buf *out, bool *found,
                      struct sm_err *err)
{
    *found = false;
    out->len = 0;
    const int fd = openat(dirfd, key, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            return SM_OK;
        }
        return io_fail(err, "cannot open", key, errno);
    }
    struct stat sb;
    sm_status st = SM_OK;
    if (fstat(fd, &sb) != 0) {
        st = io_fail(err, "cannot stat", key, errno);
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
            st = io_fail(err, "cannot read", key, errno);
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

bool sm_wfs_is_tmp(const char *name)
{
    return sm_fs_is_tmp(name);
}

/* Lists an open directory descriptor (consumed); with `kinds`, one enum sm_fs_kind byte per
 * name from readdir's d_type (no stat per entry). */
static sm_status list_fd(int fd, const char *rel, struct sm_strv *out, struct sm_buf *kinds,
                         struct sm_err *err)
{
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        const int e = errno;
        close(fd);
        return io_fail(err, "cannot list", rel, e);
    }
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
    closedir(d);
    if (st != SM_OK) {
        sm_strv_free(out);
    }
    return st;
}

static sm_status list_at(int dirfd, const char *rel, struct sm_strv *out, struct sm_buf *kinds,
                         struct sm_err *err)
{
    const int fd =
        openat(dirfd, rel[0] == '\0' ? "." : rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT) {
            return SM_OK;
        }
        return io_fail(err, "cannot open directory", rel, errno);
    }
    return list_fd(fd, rel, out, kinds, err);
}

sm_status sm_wfs_list(int dirfd, const char *rel, struct sm_strv *out, struct sm_err *err)
{
    return list_at(dirfd, rel, out, NULL, err);
}

static bool all_digits(const char *s)
{
    if (*s == '\0') {
        return false;
    }
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9') {
            return false;
        }
    }
    return true;
}

static sm_status foreign(struct sm_err *err, const char *path)
{
    SM_FAIL(err, SM_E_USAGE,
            "not a shardmill output: unexpected entry '%s' (refusing to touch the directory)",
            path);
}

static sm_status walk_dir(int dirfd, const char *rel, bool chunks, enum sm_wfs_walk mode,
                          unsigned depth, struct sm_err *err)
{
    if (depth > SM_MAX_DIMS + 2) {
        return foreign(err, rel); /* deeper than any chunk key */
    }
    struct sm_strv names = {NULL, 0, 0};
    struct sm_buf kinds = SM_BUF_INIT;
    sm_status st = list_at(dirfd, rel, &names, &kinds, err);
    for (size_t i = 0; i < names.n && st == SM_OK; i++) {
        char path[PATH_CAP];
        const int n = snprintf(path, sizeof(path), "%s/%s", rel, names.v[i]);
        if (n < 0 || (size_t)n >= sizeof(path)) {
            st = foreign(err, names.v[i]);
            break;
        }
        /* the kind from readdir (no stat per entry: a shard tree has one file per shard), a
         * stat (never following a link) only where the file system does not give it */
        enum sm_fs_kind kind = (enum sm_fs_kind)kinds.ptr[i];
        if (kind == SM_FS_UNKNOWN) {
            struct stat sb;
            if (fstatat(dirfd, path, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
                if (errno == ENOENT) {
                    continue; /* removed meanwhile */
                }
                st = io_fail(err, "cannot stat", path, errno);
                break;
            }
            kind = S_ISDIR(sb.st_mode) ? SM_FS_DIR : S_ISREG(sb.st_mode) ? SM_FS_REG : SM_FS_OTHER;
        }
        const bool tmp = sm_wfs_is_tmp(names.v[i]);
        const bool is_dir = kind == SM_FS_DIR, is_reg = kind == SM_FS_REG;
        const bool ok = chunks ? (is_dir && all_digits(names.v[i])) ||
                                     (is_reg && (all_digits(names.v[i]) || tmp))
                               : is_dir || is_reg;
        if (!ok) { /* never removed: a REMOVE after a CHECK then fails on the non-empty parent */
            st = mode == SM_WFS_CHECK ? foreign(err, path) : SM_OK;
            continue;
        }
        if (is_dir) {
            st = walk_dir(dirfd, path, chunks, mode, depth + 1, err);
            if (st == SM_OK && mode == SM_WFS_REMOVE && unlinkat(dirfd, path, AT_REMOVEDIR) != 0 &&
                errno != ENOENT) {
                st = io_fail(err, "cannot remove directory", path, errno);
            }
        } else if (mode == SM_WFS_REMOVE || (mode == SM_WFS_SWEEP_TMP && tmp)) {
            if (unlinkat(dirfd, path, 0) != 0 && errno != ENOENT) {
                st = io_fail(err, "cannot remove", path, errno);
            }
        }
    }
    sm_strv_free(&names);
    sm_buf_free(&kinds);
    return st;
}

sm_status sm_wfs_walk(int dirfd, const char *rel, bool chunks, enum sm_wfs_walk mode,
                      struct sm_err *err)
{
    struct stat sb;
    if (fstatat(dirfd, rel, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
        return errno == ENOENT ? SM_OK : io_fail(err, "cannot stat", rel, errno);
    }
    if (!S_ISDIR(sb.st_mode)) {
        return mode == SM_WFS_CHECK ? foreign(err, rel) : SM_OK;
    }
    return walk_dir(dirfd, rel, chunks, mode, 0, err);
}
