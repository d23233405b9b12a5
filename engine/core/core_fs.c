/* Atomic object writes on a POSIX file system (SPEC §6): temporary name in the target directory,
 * write, optional fsync, rename; directory fsync. The single implementation behind the file
 * store's stage / commit / abort / sync and the HDF5 export's rename (fs.h).
 * Spec: https://pubs.opengroup.org/onlinepubs/9699919799/functions/rename.html
 * Invariant: every path is relative to the given descriptor; a failed stage leaves no file. */
#include "shardmill/sm_config.h"

#include "shardmill/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_CAP 4096

static sm_status io_fail(struct sm_err *err, const char *what, const char *path, int e)
{
    sm_err_set(err, SM_E_IO, __FILE__, __LINE__, "%s '%s': %s", what, path, strerror(e));
    sm_err_cause(err, "errno", e);
    return err->status;
}

/* mkdir of p (a writable copy of the path), creating its missing parents first. The deepest
 * directory is tried first: when only it is missing (a new shard directory under existing ones)
 * that is one mkdirat, not one failing mkdirat per level above it. */
static sm_status mkdirs_rec(int dirfd, char *p, unsigned depth, struct sm_err *err)
{
    if (p[0] == '\0' || mkdirat(dirfd, p, 0777) == 0 || errno == EEXIST) {
        return SM_OK;
    }
    char *slash = strrchr(p, '/');
    if (errno != ENOENT || slash == NULL || slash == p || depth > PATH_CAP / 2) {
        return io_fail(err, "cannot create directory", p, errno);
    }
    *slash = '\0';
    const sm_status st = mkdirs_rec(dirfd, p, depth + 1, err);
    *slash = '/';
    if (st != SM_OK) {
        return st;
    }
    if (mkdirat(dirfd, p, 0777) != 0 && errno != EEXIST) {
        return io_fail(err, "cannot create directory", p, errno);
    }
    return SM_OK;
}

sm_status sm_fs_mkdirs(int dirfd, const char *rel, struct sm_err *err)
{
    char p[PATH_CAP];
    const int n = snprintf(p, sizeof(p), "%s", rel);
    if (n < 0 || (size_t)n >= sizeof(p)) {
        SM_FAIL(err, SM_E_INTERNAL, "path of %d bytes is too long", n);
    }
    while (n > 1 && p[strlen(p) - 1] == '/') { /* "a/b/" is "a/b" */
        p[strlen(p) - 1] = '\0';
    }
    return mkdirs_rec(dirfd, p, 0, err);
}

sm_status sm_fs_tmp_name(const char *key, unsigned n, char *buf, size_t cap, struct sm_err *err)
{
    const int len = snprintf(buf, cap, "%s.tmp.%ld.%u", key, (long)getpid(), n);
    if (len < 0 || (size_t)len >= cap) {
        SM_FAIL(err, SM_E_INTERNAL, "key of %zu bytes is too long", strlen(key));
    }
    return SM_OK;
}

sm_status sm_fs_shared_tmp_name(const char *path, char *buf, size_t cap, struct sm_err *err)
{
    const char *slash = strrchr(path, '/');
    const int dl = slash != NULL ? (int)(slash - path) + 1 : 0;
    const int n = snprintf(buf, cap, "%.*s.%s.shardmill-tmp", dl, path, path + dl);
    if (n < 0 || (size_t)n >= cap) {
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                   "the path is too long for its temporary "
                   "name");
        sm_err_where(err, "%s", path);
        return err->status;
    }
    return SM_OK;
}

bool sm_fs_is_tmp(const char *name)
{
    return strstr(name, ".tmp.") != NULL;
}

static sm_status write_all(int fd, struct sm_bytes data, const char *path, struct sm_err *err)
{
    size_t done = 0;
    while (done < data.len) {
        const ssize_t w = write(fd, data.ptr + done, data.len - done);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return io_fail(err, "cannot write", path, errno);
        }
        done += (size_t)w;
    }
    return SM_OK;
}

static int create_tmp(int dirfd, const char *tmp)
{
    return openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
}

sm_status sm_fs_stage(int dirfd, const char *tmp, struct sm_bytes data, bool sync,
                      struct sm_err *err)
{
    /* Create first, mkdir only when the parent is missing: no failing mkdirat per object. */
    int fd = create_tmp(dirfd, tmp);
    const char *slash = strrchr(tmp, '/');
    if (fd < 0 && errno == ENOENT && slash != NULL && slash != tmp) {
        char parent[PATH_CAP];
        const int n = snprintf(parent, sizeof(parent), "%.*s", (int)(slash - tmp), tmp);
        if (n < 0 || (size_t)n >= sizeof(parent)) {
            SM_FAIL(err, SM_E_INTERNAL, "path of %d bytes is too long", n);
        }
        SM_TRY(sm_fs_mkdirs(dirfd, parent, err));
        fd = create_tmp(dirfd, tmp);
    }
    if (fd < 0) {
        return io_fail(err, "cannot create", tmp, errno);
    }
    sm_status st = write_all(fd, data, tmp, err);
    if (st == SM_OK && sync && fsync(fd) != 0) {
        st = io_fail(err, "cannot fsync", tmp, errno);
    }
    if (close(fd) != 0 && st == SM_OK) {
        st = io_fail(err, "cannot close", tmp, errno);
    }
    if (st != SM_OK) {
        (void)unlinkat(dirfd, tmp, 0);
    }
    return st;
}

sm_status sm_fs_rename(int dirfd, const char *tmp, const char *key, struct sm_err *err)
{
    if (renameat(dirfd, tmp, dirfd, key) != 0) {
        return io_fail(err, "cannot rename into place", key, errno);
    }
    return SM_OK;
}

sm_status sm_fs_fsync(int dirfd, const char *rel, struct sm_err *err)
{
    const char *p = rel[0] == '\0' ? "." : rel;
    const int fd = openat(dirfd, p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return io_fail(err, "cannot open for fsync", p, errno);
    }
    sm_status st = SM_OK;
    if (fsync(fd) != 0) {
        st = io_fail(err, "cannot fsync", p, errno);
    }
    close(fd);
    return st;
}
