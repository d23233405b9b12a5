/* The `file` store (SPEC §3): keys are paths under a root directory. Reads use pread of exact byte
 * ranges on a descriptor opened relative to the root (openat), so a shard index and the selected
 * inner chunks are read without touching the rest of the file. A missing root or file is "not
 * found", not an error. Writes are staged: a temporary name in the target directory (directories
 * created as needed), optionally fsynced, renamed over the key on commit; sync fsyncs a directory
 * or syncfs-es the whole file system (core/core_fs.c holds the protocol, shared with export/).
 * Every write below the root (create, mkdir, rename, unlink, fsync) resolves its key beneath the
 * root descriptor without following a symbolic link (fs.h): a link planted in a written tree
 * fails the write (SM_E_IO naming it) instead of redirecting it. Reads follow links (inputs). */
#include "shardmill/sm_config.h"

#include "shardmill/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardmill/alloc.h"
#include "shardmill/fs.h"

#define TMP_CAP 4200

struct file_store {
    struct sm_store base;
    atomic_int rootfd; /* -1 while the root does not exist */
    char *root;
    atomic_uint tmp_counter;
};

static struct file_store *fs_of(struct sm_store *s)
{
    return (struct file_store *)s;
}

/* Re-tries opening the root if it appeared since the store was opened (outputs are created). */
static int root_fd(struct file_store *fs)
{
    int fd = atomic_load(&fs->rootfd);
    if (fd >= 0) {
        return fd;
    }
    fd = open(fs->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    int expected = -1;
    if (!atomic_compare_exchange_strong(&fs->rootfd, &expected, fd)) {
        close(fd); /* another thread won the race */
        return expected;
    }
    return fd;
}

static sm_status open_key(struct file_store *fs, const char *key, int *fd, bool *found,
                          struct sm_err *err)
{
    *fd = -1;
    int dfd = root_fd(fs);
    if (dfd < 0) {
        return SM_OK; /* no root: nothing is found */
    }
    *fd = openat(dfd, key[0] == '\0' ? "." : key, O_RDONLY | O_CLOEXEC);
    if (*fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            return SM_OK;
        }
        return SM_ERRNO(err, errno, NULL, "open");
    }
    *found = true;
    return SM_OK;
}

/* Reads exactly n bytes at off, or fewer at end of file. A `whole` read stops at the first short
 * pread: on a regular file only its end makes pread return less than asked (POSIX), which saves
 * the second pread that would return 0 (~1,000 calls of a 2048² region of 64² chunks). */
static sm_status read_at(int fd, uint64_t off, size_t n, bool whole, struct sm_buf *out,
                         struct sm_err *err)
{
    SM_TRY(sm_buf_reserve(out, n, err));
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, out->ptr + done, n - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EISDIR) {
                SM_FAIL(err, SM_E_DATA, "is a directory, expected an object");
            }
            return SM_ERRNO(err, errno, NULL, "read");
        }
        done += (size_t)r;
        if (r == 0 || (whole && done < n)) {
            break;
        }
    }
    out->len = done;
    return SM_OK;
}

static sm_status read_range(struct file_store *fs, int fd, const char *key, struct sm_range r,
                            struct sm_buf *out, uint64_t *objsize, struct sm_err *err)
{
    const uint64_t max = fs->base.max_object_bytes;
    /* A whole object without fstat: read one byte more than its expected size (when the caller
     * knows it), or as much as the buffer already holds room for (a kept buffer: the largest of
     * the caller's earlier objects, so most chunks of an array fit). A pread that stops short of
     * that is the whole object (a regular file reads short only at its end); one that fills it is
     * read the general way. A chunk then costs openat + pread + close, without a stat; a fresh
     * buffer still gets an exact reservation (STYLE B6). */
    size_t want = 0;
    if (r.kind == SM_RANGE_ALL && objsize == NULL && r.len < SIZE_MAX - 1) {
        want = r.len != 0 ? (size_t)r.len + 1 : out->cap;
    }
    if (max != 0 && want > max + 1) {
        want = r.len != 0 ? 0 : (size_t)max + 1; /* past the limit: asks fstat, reserves nothing */
    }
    if (want != 0) {
        SM_TRY(read_at(fd, 0, want, true, out, err));
        if (out->len < want) {
            return SM_OK;
        }
        out->len = 0; /* larger than expected: read it the general way */
    }
    uint64_t off = r.offset, n = r.len;
    if (r.kind != SM_RANGE_SPAN || objsize != NULL) {
        struct stat st;
        if (fstat(fd, &st) != 0) {
            return SM_ERRNO(err, errno, NULL, "stat");
        }
        if (S_ISDIR(st.st_mode)) {
            SM_FAIL(err, SM_E_DATA, "is a directory, expected an object");
        }
        uint64_t size = (uint64_t)st.st_size;
        if (objsize != NULL) {
            *objsize = size;
        }
        if (r.kind == SM_RANGE_ALL) {
            off = 0;
            n = size;
            SM_TRY(sm_store_check_len(&fs->base, key, n, err));
        } else if (r.kind == SM_RANGE_SUFFIX) {
            n = r.len < size ? r.len : size;
            off = size - n;
        }
    }
    if (n > SIZE_MAX) {
        SM_FAIL(err, SM_E_LIMIT, "object too large");
    }
    return read_at(fd, off, (size_t)n, false, out, err);
}

static sm_status file_get(struct sm_store *s, const char *key, struct sm_range range,
                          enum sm_io_class cls, struct sm_buf *out, bool *found, uint64_t *objsize,
                          struct sm_err *err)
{
    (void)cls;
    struct file_store *fs = fs_of(s);
    int fd;
    SM_TRY(open_key(fs, key, &fd, found, err));
    if (fd < 0) {
        return SM_OK;
    }
    sm_status st = read_range(fs, fd, key, range, out, objsize, err);
    close(fd);
    return st;
}

static sm_status file_get_many(struct sm_store *s, const char *key, const struct sm_range *ranges,
                               size_t n, enum sm_io_class cls, struct sm_buf *outs, bool *found,
                               struct sm_err *err)
{
    (void)cls;
    struct file_store *fs = fs_of(s);
    int fd;
    SM_TRY(open_key(fs, key, &fd, found, err));
    if (fd < 0) {
        return SM_OK;
    }
    sm_status st = SM_OK;
    for (size_t i = 0; i < n && st == SM_OK; i++) {
        st = read_range(fs, fd, key, ranges[i], &outs[i], NULL, err);
    }
    close(fd);
    return st;
}

static sm_status file_size(struct sm_store *s, const char *key, uint64_t *size, bool *found,
                           struct sm_err *err)
{
    struct file_store *fs = fs_of(s);
    int dfd = root_fd(fs);
    if (dfd < 0) {
        return SM_OK;
    }
    struct stat st;
    if (fstatat(dfd, key[0] == '\0' ? "." : key, &st, 0) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            return SM_OK;
        }
        return SM_ERRNO(err, errno, NULL, "stat");
    }
    if (S_ISDIR(st.st_mode)) {
        return SM_OK; /* a directory is not an object (get agrees) */
    }
    *found = true;
    *size = (uint64_t)st.st_size;
    return SM_OK;
}

/* ---- staged writes: the one tmp + fsync + rename protocol (core/core_fs.c) ---- */

/* The root descriptor, creating the root directory (and its parents) if it does not exist yet. */
static sm_status root_for_write(struct file_store *fs, int *dfd, struct sm_err *err)
{
    *dfd = root_fd(fs);
    if (*dfd < 0) {
        SM_TRY(sm_fs_mkdirs(AT_FDCWD, fs->root, err));
        *dfd = root_fd(fs);
    }
    if (*dfd < 0) {
        return SM_ERRNO(err, errno, NULL, "cannot open store root");
    }
    return SM_OK;
}

static sm_status file_stage(struct sm_store *s, const char *key, struct sm_bytes data,
                            unsigned flags, uint64_t *ticket, struct sm_err *err)
{
    struct file_store *fs = fs_of(s);
    int dfd;
    SM_TRY(root_for_write(fs, &dfd, err));
    const unsigned n = atomic_fetch_add(&fs->tmp_counter, 1);
    char tmp[TMP_CAP];
    SM_TRY(sm_fs_tmp_name(key, n, tmp, sizeof(tmp), err));
    SM_TRY(sm_fs_stage(dfd, tmp, data, (flags & SM_STAGE_SYNC) != 0, (flags & SM_STAGE_DIRECT) != 0,
                       err));
    *ticket = n;
    return SM_OK;
}

static sm_status file_commit(struct sm_store *s, const char *key, uint64_t ticket,
                             struct sm_err *err)
{
    struct file_store *fs = fs_of(s);
    char tmp[TMP_CAP];
    SM_TRY(sm_fs_tmp_name(key, (unsigned)ticket, tmp, sizeof(tmp), err));
    const int dfd = root_fd(fs);
    if (dfd < 0) {
        return SM_ERRNO(err, errno, NULL, "cannot open store root");
    }
    const sm_status st = sm_fs_rename(dfd, tmp, key, err);
    if (st != SM_OK) {
        (void)sm_fs_unlink_beneath(dfd, tmp, 0);
    }
    return st;
}

static void file_abort(struct sm_store *s, const char *key, uint64_t ticket)
{
    struct file_store *fs = fs_of(s);
    char tmp[TMP_CAP];
    struct sm_err ignored;
    sm_err_clear(&ignored);
    const int dfd = root_fd(fs);
    if (dfd >= 0 && sm_fs_tmp_name(key, (unsigned)ticket, tmp, sizeof(tmp), &ignored) == SM_OK) {
        (void)sm_fs_unlink_beneath(dfd, tmp, 0);
    }
}

static sm_status file_sync(struct sm_store *s, enum sm_store_sync how, const char *prefix,
                           struct sm_err *err)
{
    struct file_store *fs = fs_of(s);
    int dfd;
    SM_TRY(root_for_write(fs, &dfd, err));
    return how == SM_STORE_SYNC_ALL ? sm_fs_syncfs(dfd, err) : sm_fs_fsync(dfd, prefix, err);
}

static sm_status file_list(struct sm_store *s, const char *prefix, struct sm_strv *out,
                           struct sm_err *err)
{
    struct file_store *fs = fs_of(s);
    int dfd = root_fd(fs);
    if (dfd < 0) {
        return SM_OK;
    }
    int fd = openat(dfd, prefix[0] == '\0' ? "." : prefix, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return (errno == ENOENT || errno == ENOTDIR) ? SM_OK
                                                     : SM_ERRNO(err, errno, NULL, "opendir");
    }
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return SM_ERRNO(err, errno, NULL, "opendir");
    }
    sm_status st = SM_OK;
    struct dirent *e;
    while (st == SM_OK && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        st = sm_strv_push(out, e->d_name, strlen(e->d_name), err);
    }
    closedir(d);
    return st;
}

static void file_close(struct sm_store *s)
{
    struct file_store *fs = fs_of(s);
    int fd = atomic_load(&fs->rootfd);
    if (fd >= 0) {
        close(fd);
    }
    sm_free(fs->root);
    sm_free(fs);
}

static const struct sm_store_ops file_ops = {
    .scheme = "file",
    .caps = SM_STORE_RANGE | SM_STORE_WRITE | SM_STORE_LIST | SM_STORE_THREADSAFE,
    .get = file_get,
    .get_many = file_get_many,
    .size = file_size,
    .put_atomic = NULL, /* the dispatch: stage with fsync, then commit */
    .stage = file_stage,
    .commit = file_commit,
    .abort = file_abort,
    .sync = file_sync,
    .list = file_list,
    .close = file_close,
};

sm_status sm_store_file_open(const char *root, struct sm_store **out, struct sm_err *err)
{
    *out = NULL;
    struct file_store *fs = sm_calloc(1, sizeof(*fs));
    if (fs == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a file store");
    }
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/') {
        n--; /* "a/b/" and "a/b" are the same root */
    }
    fs->root = sm_malloc(n + 1);
    fs->base.url = sm_malloc(n + 1);
    if (fs->root == NULL || fs->base.url == NULL) {
        sm_free(fs->root);
        sm_free(fs->base.url);
        sm_free(fs);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a file store");
    }
    memcpy(fs->root, root, n);
    fs->root[n] = '\0';
    memcpy(fs->base.url, root, n);
    fs->base.url[n] = '\0';
    fs->base.ops = &file_ops;
    atomic_init(&fs->rootfd, -1);
    if (root_fd(fs) < 0 && errno != ENOENT) {
        int e = errno;
        if (e == ENOTDIR) { /* a file where the store should be: invalid input, not I/O (§4) */
            SM_ERR(err, SM_E_DATA,
                   "not a Zarr store directory (the path or one of its parents is a file)");
        } else {
            SM_ERR(err, SM_E_IO, "cannot open store root: %s", strerror(e));
        }
        sm_err_cause(err, "errno", e);
        sm_err_where(err, "%s", fs->root);
        sm_free(fs->base.url); /* sm_store_close frees it on the normal path */
        file_close(&fs->base);
        return err->status;
    }
    *out = &fs->base;
    return SM_OK;
}

size_t sm_store_file_early_writeback(void)
{
    return SM_FS_EARLY_WRITEBACK;
}
