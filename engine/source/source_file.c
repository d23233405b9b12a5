/* What every file source needs: errors from errno, exact preads, and the file's identity in the
 * provenance (issue 19: a resume whose source changed is refused naming
 * attributes.shardmill.source.file; the records' value digests bind every kept shard to the bytes
 * read as well); files opened without blocking on a FIFO (issue 32 item 9). */
#include "shardmill/sm_config.h"

#include "source_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardmill/alloc.h"

sm_status sm_src_pread(int fd, uint64_t off, void *dst, size_t n, const char *path,
                       struct sm_err *err)
{
    uint8_t *p = dst;
    while (n > 0) {
        const ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            return SM_ERRNO(err, errno, path, "read");
        }
        if (r == 0) {
            SM_FAIL_AT(err, SM_E_DATA, path,
                       "file ends at byte %" PRIu64 ", before the volume does", off);
        }
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return SM_OK;
}

/* The kind of a file that is neither regular nor a directory, for the message. */
static const char *file_kind(mode_t m)
{
    return S_ISFIFO(m)   ? "a FIFO (named pipe)"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
           : S_ISDIR(m)  ? "a directory"
                         : "not a regular file";
}

sm_status sm_src_open_file(const char *path, bool dir_ok, int *fd, struct sm_err *err)
{
    *fd = -1;
    const int f = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (f < 0) {
        return SM_ERRNO(err, errno, path, "open");
    }
    struct stat st;
    if (fstat(f, &st) != 0) {
        const int e = errno;
        close(f);
        return SM_ERRNO(err, e, path, "stat");
    }
    if (!S_ISREG(st.st_mode) && !(dir_ok && S_ISDIR(st.st_mode))) {
        close(f);
        SM_FAIL_AT(err, SM_E_DATA, path, "is %s, not a regular file%s", file_kind(st.st_mode),
                   dir_ok ? " or a directory" : "");
    }
    const int fl = fcntl(f, F_GETFL);
    if (fl < 0 || fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) { /* reads block as usual again */
        const int e = errno;
        close(f);
        return SM_ERRNO(err, e, path, "fcntl");
    }
    *fd = f;
    return SM_OK;
}

char *sm_src_strdup(const char *s)
{
    const size_t n = strlen(s) + 1;
    char *d = sm_malloc(n);
    if (d != NULL) {
        memcpy(d, s, n);
    }
    return d;
}

bool sm_src_ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* jansson integers are int64: a larger count (no file has one) becomes a real. */
static json_t *u64_json(uint64_t v)
{
    return v <= (uint64_t)INT64_MAX ? json_integer((json_int_t)v) : json_real((double)v);
}

/* The file's size and modification time; for a directory (a TIFF stack) the sum of its files'
 * sizes, their count and the latest mtime. */
static json_t *file_json(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        return json_null();
    }
    uint64_t bytes = 0, files = 0;
    int64_t mtime = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    if (S_ISREG(sb.st_mode)) {
        bytes = (uint64_t)sb.st_size;
        files = 1;
    } else if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        for (struct dirent *de; d != NULL && (de = readdir(d)) != NULL;) {
            char p[4096];
            struct stat fb;
            if (de->d_name[0] == '.' ||
                (size_t)snprintf(p, sizeof(p), "%s/%s", path, de->d_name) >= sizeof(p) ||
                stat(p, &fb) != 0 || !S_ISREG(fb.st_mode)) {
                continue;
            }
            const int64_t t = (int64_t)fb.st_mtim.tv_sec * 1000000000 + fb.st_mtim.tv_nsec;
            mtime = t > mtime ? t : mtime;
            bytes += (uint64_t)fb.st_size;
            files++;
        }
        if (d != NULL) {
            closedir(d);
        }
    }
    return json_pack("{s:o,s:o,s:I}", "bytes", u64_json(bytes), "files", u64_json(files),
                     "mtime_ns", (json_int_t)mtime);
}

json_t *sm_src_describe_file(const char *path, const struct sm_source_info *info)
{
    json_t *shape = json_array();
    for (unsigned d = 0; shape != NULL && d < info->ndim; d++) {
        json_array_append_new(shape, u64_json(info->shape[d]));
    }
    json_t *o = json_pack("{s:s,s:s,s:o,s:s}", "path", path, "format", info->format, "shape", shape,
                          "dtype", sm_dtype_name(info->dtype));
    if (o != NULL) {
        json_object_set_new(o, "file", file_json(path));
    }
    return o;
}

void sm_src_swap_values(uint8_t *p, size_t n, size_t es)
{
    for (size_t i = 0; i < n; i++, p += es) {
        for (size_t a = 0, b = es - 1; a < b; a++, b--) {
            const uint8_t c = p[a];
            p[a] = p[b];
            p[b] = c;
        }
    }
}
