/* Atomic object writes on a POSIX file system (SPEC §6): temporary name in the target directory,
 * write, optional fsync, rename; directory fsync. The single implementation behind the file
 * store's stage / commit / abort / sync and the HDF5 export's rename (fs.h). A path relative to
 * a directory descriptor is resolved beneath it without following any symbolic link (openat2, or
 * one openat O_NOFOLLOW per directory, as fts and rm -rf walk).
 * Spec: https://pubs.opengroup.org/onlinepubs/9699919799/functions/rename.html
 * Invariant: every path is relative to the given descriptor, and beneath a descriptor no link is
 * followed; a failed stage leaves no file. */
#include "shardmill/sm_config.h"

#include "shardmill/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_CAP 4096

/* ---- beneath a descriptor: no symbolic link followed ---- */

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
#define NAME_CAP 256

static atomic_bool no_openat2;

void sm_fs_use_openat2(bool on)
{
    atomic_store(&no_openat2, !on);
}

static void close_keep_errno(int fd)
{
    const int e = errno;
    close(fd);
    errno = e;
}

/* openat2 beneath dirfd; -2 when the kernel (or a seccomp filter) refuses the call itself, which
 * then is not tried again, or gave up on a concurrent rename (EAGAIN): the walk decides. */
static int try_openat2(int dirfd, const char *rel, int flags, unsigned mode)
{
    if (atomic_load_explicit(&no_openat2, memory_order_relaxed)) {
        return -2;
    }
    const int fd = sm_fs_openat2_beneath(dirfd, rel, flags, mode);
    if (fd < 0 && (errno == ENOSYS || errno == EPERM || errno == E2BIG || errno == EINVAL)) {
        atomic_store(&no_openat2, true);
        return -2;
    }
    return fd < 0 && errno == EAGAIN ? -2 : fd;
}

/* One directory `name` of a walk, beneath cur, made first if missing and `create`. */
static int step(int cur, const char *name, bool create)
{
    int fd = openat(cur, name, DIR_FLAGS);
    if (fd < 0 && errno == ENOENT && create && (mkdirat(cur, name, 0777) == 0 || errno == EEXIST)) {
        fd = openat(cur, name, DIR_FLAGS); /* never the mkdir's word: a link may be there now */
    }
    if (fd < 0 &&
        errno == ENOTDIR) { /* O_DIRECTORY | O_NOFOLLOW meets a link: Linux says ENOTDIR */
        struct stat sb;
        errno = fstatat(cur, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode) ? ELOOP
                                                                                         : ENOTDIR;
    }
    return fd;
}

/* The directory of the first n bytes of rel, opened one component at a time beneath dirfd.
 * Returns dirfd itself when there is no component (the caller compares before closing). */
static int walk(int dirfd, const char *rel, size_t n, bool create)
{
    int cur = dirfd;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && rel[j] != '/') {
            j++;
        }
        char name[NAME_CAP];
        const size_t len = j - i;
        int next = cur;
        if (len >= sizeof(name)) {
            errno = ENAMETOOLONG;
            next = -1;
        } else if (len == 2 && rel[i] == '.' && rel[i + 1] == '.') {
            errno = EXDEV; /* not beneath */
            next = -1;
        } else if (len > 0 && !(len == 1 && rel[i] == '.')) {
            memcpy(name, rel + i, len);
            name[len] = '\0';
            next = step(cur, name, create);
        }
        if (next != cur && cur != dirfd) {
            close_keep_errno(cur);
        }
        if (next < 0) {
            return -1;
        }
        cur = next;
        i = j + 1;
    }
    return cur;
}

/* The directory p (n bytes, NUL-terminated) beneath dirfd; may return dirfd itself. */
static int open_dir(int dirfd, const char *p, size_t n, bool create)
{
    if (p[0] == '/') {
        errno = EXDEV;
        return -1;
    }
    const int fd = try_openat2(dirfd, p, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd != -2 && !(fd < 0 && errno == ENOENT && create)) {
        return fd;
    }
    return walk(dirfd, p, n, create);
}

/* The directory holding rel's last component, *name pointing at that component in rel. Returns
 * dirfd itself when rel has one component. */
static int parent_dir(int dirfd, const char *rel, bool create, const char **name)
{
    const char *slash = strrchr(rel, '/');
    *name = slash != NULL ? slash + 1 : rel;
    if (rel[0] == '/') {
        errno = EXDEV;
        return -1;
    }
    if (slash == NULL) {
        return dirfd;
    }
    char p[PATH_CAP];
    const size_t n = (size_t)(slash - rel);
    if (n >= sizeof(p)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(p, rel, n);
    p[n] = '\0';
    return open_dir(dirfd, p, n, create);
}

int sm_fs_opendir_beneath(int dirfd, const char *rel, bool create)
{
    const int fd = open_dir(dirfd, rel[0] == '\0' ? "." : rel, strlen(rel), create);
    return fd == dirfd ? openat(dirfd, ".", DIR_FLAGS) : fd;
}

int sm_fs_open_beneath(int dirfd, const char *rel, int flags, unsigned mode)
{
    int fd = try_openat2(dirfd, rel, flags | O_NOFOLLOW, mode);
    if (fd != -2) {
        return fd;
    }
    const char *name;
    const int pfd = parent_dir(dirfd, rel, false, &name);
    if (pfd < 0) {
        return -1;
    }
    if (strcmp(name, "..") == 0) {
        errno = EXDEV;
        fd = -1;
    } else {
        fd = openat(pfd, name[0] == '\0' ? "." : name, (flags | O_NOFOLLOW), (mode_t)mode);
        if (fd < 0 && errno == ENOTDIR && (flags & O_DIRECTORY) != 0) {
            struct stat sb;
            errno = fstatat(pfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode)
                        ? ELOOP
                        : ENOTDIR;
        }
    }
    if (pfd != dirfd) {
        close_keep_errno(pfd);
    }
    return fd;
}

int sm_fs_unlink_beneath(int dirfd, const char *rel, int flags)
{
    const char *name;
    const int pfd = parent_dir(dirfd, rel, false, &name);
    if (pfd < 0) {
        return -1;
    }
    const int r = unlinkat(pfd, name, flags);
    if (pfd != dirfd) {
        close_keep_errno(pfd);
    }
    return r;
}

/* The first component of rel (beneath dirfd) that is a symbolic link, or rel itself. */
static void link_in(int dirfd, const char *rel, char *out, size_t cap)
{
    snprintf(out, cap, "%s", rel);
    for (size_t i = 0;; i++) {
        if (rel[i] == '/' || rel[i] == '\0') {
            char p[PATH_CAP];
            struct stat sb;
            if (i < sizeof(p) && snprintf(p, sizeof(p), "%.*s", (int)i, rel) > 0 &&
                fstatat(dirfd, p, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode)) {
                snprintf(out, cap, "%s", p);
                return;
            }
        }
        if (rel[i] == '\0') {
            return;
        }
    }
}

sm_status sm_fs_fail(struct sm_err *err, const char *what, int dirfd, const char *rel, int e)
{
    if (e != ELOOP) {
        return SM_ERRNO(err, e, NULL, "%s '%s'", what, rel);
    }
    char link[PATH_CAP];
    link_in(dirfd, rel, link, sizeof(link));
    SM_ERR(err, SM_E_IO,
           "%s '%s': '%s' is a symbolic link, which shardmill never makes: refusing to go "
           "through it",
           what, rel, link);
    sm_err_cause(err, "errno", e);
    return err->status;
}

/* The calls of the protocol: beneath a descriptor, or a plain path as the user gave it. */
static int open_at(int dirfd, const char *rel, int flags, unsigned mode)
{
    return dirfd == AT_FDCWD ? openat(dirfd, rel, flags, (mode_t)mode)
                             : sm_fs_open_beneath(dirfd, rel, flags, mode);
}

static int unlink_at(int dirfd, const char *rel, int flags)
{
    return dirfd == AT_FDCWD ? unlinkat(dirfd, rel, flags)
                             : sm_fs_unlink_beneath(dirfd, rel, flags);
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
        return SM_ERRNO(err, errno, NULL, "cannot create directory '%s'", p);
    }
    *slash = '\0';
    const sm_status st = mkdirs_rec(dirfd, p, depth + 1, err);
    *slash = '/';
    if (st != SM_OK) {
        return st;
    }
    if (mkdirat(dirfd, p, 0777) != 0 && errno != EEXIST) {
        return SM_ERRNO(err, errno, NULL, "cannot create directory '%s'", p);
    }
    return SM_OK;
}

sm_status sm_fs_mkdirs(int dirfd, const char *rel, struct sm_err *err)
{
    if (dirfd != AT_FDCWD) { /* one level at a time, never through a link */
        const int fd = sm_fs_opendir_beneath(dirfd, rel, true);
        if (fd < 0) {
            return sm_fs_fail(err, "cannot create directory", dirfd, rel, errno);
        }
        close(fd);
        return SM_OK;
    }
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
        SM_FAIL_AT(err, SM_E_USAGE, path,
                   "the path is too long for its temporary "
                   "name");
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
            return SM_ERRNO(err, errno, NULL, "cannot write '%s'", path);
        }
        done += (size_t)w;
    }
    return SM_OK;
}

/* The bytes of data before its last partial block, written with O_DIRECT: the count written,
 * fewer (the rest is for a buffered write) where the file system refuses O_DIRECT or a write of
 * it, or SM_E_IO. Why: the copy of a large output into the page cache cost more CPU than any step
 * but the codec (W9's 2048³ TIFF convert: 32 of 259 CPU-seconds in copy_folio_from_iter_atomic,
 * docs/BENCHMARKS.md "Sixth session"), and a staged shard is not read again by this process. */
static sm_status write_head_direct(int fd, struct sm_bytes data, const char *path, size_t *done,
                                   struct sm_err *err)
{
    const size_t head = data.len & ~(SM_FS_DIRECT_ALIGN - 1);
    *done = 0;
    if (data.len < SM_FS_DIRECT_MIN || ((uintptr_t)data.ptr & (SM_FS_DIRECT_ALIGN - 1)) != 0 ||
        !sm_fs_set_direct(fd, true)) {
        return SM_OK;
    }
    sm_status st = SM_OK;
    while (*done < head) {
        const ssize_t w = write(fd, data.ptr + *done, head - *done);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0 && errno != EINVAL) {
            st = SM_ERRNO(err, errno, NULL, "cannot write '%s'", path);
        }
        if (w <= 0 || ((size_t)w & (SM_FS_DIRECT_ALIGN - 1)) != 0) {
            if (w > 0) {
                *done += (size_t)w;
            }
            break; /* refused, or a short write: what is left goes buffered */
        }
        *done += (size_t)w;
    }
    if (!sm_fs_set_direct(fd, false) && st == SM_OK) {
        st = SM_ERRNO(err, errno, NULL, "cannot write '%s'", path);
    }
    return st;
}

static int create_tmp(int dirfd, const char *tmp)
{
    return open_at(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
}

sm_status sm_fs_stage(int dirfd, const char *tmp, struct sm_bytes data, bool sync, bool direct,
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
        return sm_fs_fail(err, "cannot create", dirfd, tmp, errno);
    }
    size_t done = 0;
    sm_status st = direct ? write_head_direct(fd, data, tmp, &done, err) : SM_OK;
    if (st == SM_OK) {
        st = write_all(fd, (struct sm_bytes){data.ptr + done, data.len - done}, tmp, err);
    }
    if (st == SM_OK && sync && fsync(fd) != 0) {
        st = SM_ERRNO(err, errno, NULL, "cannot fsync '%s'", tmp);
    } else if (st == SM_OK && !sync && data.len >= SM_FS_EARLY_WRITEBACK) {
        /* a large shard goes to the disk while the next are encoded: with the page cache full of
         * output, the one syncfs at the end waited for all of it (W9's 512×2048² TIFF convert:
         * 0.8-1.5 s, 0.3 s with this) */
        sm_fs_start_writeback(fd);
    }
    if (close(fd) != 0 && st == SM_OK) {
        st = SM_ERRNO(err, errno, NULL, "cannot close '%s'", tmp);
    }
    if (st != SM_OK) {
        (void)unlink_at(dirfd, tmp, 0);
    }
    return st;
}

/* True if a and b name entries of the same directory. */
static bool same_dir(const char *a, const char *b)
{
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    const size_t na = sa != NULL ? (size_t)(sa - a) : 0, nb = sb != NULL ? (size_t)(sb - b) : 0;
    return (sa == NULL) == (sb == NULL) && na == nb && memcmp(a, b, na) == 0;
}

sm_status sm_fs_rename(int dirfd, const char *tmp, const char *key, struct sm_err *err)
{
    if (dirfd == AT_FDCWD) {
        if (renameat(dirfd, tmp, dirfd, key) != 0) {
            return SM_ERRNO(err, errno, NULL, "cannot rename into place '%s'", key);
        }
        return SM_OK;
    }
    /* beneath: both directories opened without following a link (one open when they agree) */
    const char *tn, *kn;
    const int tp = parent_dir(dirfd, tmp, false, &tn);
    int kp = tp;
    if (tp >= 0 && !same_dir(tmp, key)) {
        kp = parent_dir(dirfd, key, false, &kn);
    } else {
        kn = key + (tn - tmp);
    }
    const int r = tp >= 0 && kp >= 0 ? renameat(tp, tn, kp, kn) : -1;
    const int e = errno;
    if (kp != tp && kp >= 0 && kp != dirfd) {
        close(kp);
    }
    if (tp >= 0 && tp != dirfd) {
        close(tp);
    }
    return r == 0 ? SM_OK : sm_fs_fail(err, "cannot rename into place", dirfd, key, e);
}

sm_status sm_fs_fsync(int dirfd, const char *rel, struct sm_err *err)
{
    const char *p = rel[0] == '\0' ? "." : rel;
    const int fd = open_at(dirfd, p, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        return sm_fs_fail(err, "cannot open for fsync", dirfd, p, errno);
    }
    sm_status st = SM_OK;
    if (fsync(fd) != 0) {
        st = SM_ERRNO(err, errno, NULL, "cannot fsync '%s'", p);
    }
    close(fd);
    return st;
}
