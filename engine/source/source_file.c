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
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

int sm_src_natural_cmp(const char *a, const char *b)
{
    const char *p = a, *q = b;
    while (*p != '\0' && *q != '\0') {
        if (*p >= '0' && *p <= '9' && *q >= '0' && *q <= '9') {
            while (*p == '0') {
                p++;
            }
            while (*q == '0') {
                q++;
            }
            size_t np = 0, nq = 0;
            while (p[np] >= '0' && p[np] <= '9') {
                np++;
            }
            while (q[nq] >= '0' && q[nq] <= '9') {
                nq++;
            }
            if (np != nq) {
                return np < nq ? -1 : 1;
            }
            const int c = strncmp(p, q, np);
            if (c != 0) {
                return c;
            }
            p += np;
            q += nq;
        } else if (*p != *q) {
            return (unsigned char)*p < (unsigned char)*q ? -1 : 1;
        } else {
            p++;
            q++;
        }
    }
    if (*p != *q) {
        return *p == '\0' ? -1 : 1;
    }
    return strcmp(a, b); /* "a01" and "a1": still a total order */
}

static int natural_qsort(const void *x, const void *y)
{
    return sm_src_natural_cmp(*(char *const *)x, *(char *const *)y);
}

char *sm_src_join(const char *dir, const char *name)
{
    const size_t n = strlen(dir) + strlen(name) + 2;
    char *s = sm_malloc(n);
    if (s != NULL) {
        snprintf(s, n, "%s/%s", dir, name);
    }
    return s;
}

/* name ends in one of the "|"-separated extensions (any case), and is no hidden file */
static bool has_extension(const char *name, const char *extensions)
{
    const size_t n = strlen(name);
    for (const char *e = extensions; name[0] != '.' && *e != '\0';) {
        const size_t len = strcspn(e, "|");
        if (len > 0 && len < n && strncasecmp(name + n - len, e, len) == 0) {
            return true;
        }
        e += len + (e[len] == '|');
    }
    return false;
}

void sm_src_free_names(char **names, uint64_t n)
{
    for (uint64_t i = 0; names != NULL && i < n; i++) {
        sm_free(names[i]);
    }
    sm_free(names);
}

/* "no .tif or .tiff slices in the directory", from the extensions */
static sm_status no_slices(const char *dir, const char *extensions, struct sm_err *err)
{
    char list[96] = "";
    size_t at = 0;
    for (const char *e = extensions; *e != '\0' && at < sizeof(list);) {
        const size_t len = strcspn(e, "|");
        const char *sep = at == 0 ? "" : e[len] == '\0' ? " or " : ", ";
        at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%.*s", sep, (int)len, e);
        e += len + (e[len] == '|');
    }
    SM_FAIL_AT(err, SM_E_DATA, dir, "no %s slices in the directory", list);
}

sm_status sm_src_list_slices(const char *dir, const char *extensions, char ***names, uint64_t *n,
                             struct sm_err *err)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (d == NULL) {
        return SM_ERRNO(err, errno, dir, "open directory");
    }
    uint64_t cap = 0;
    sm_status s = SM_OK;
    for (struct dirent *de; s == SM_OK && (de = readdir(d)) != NULL;) {
        if (!has_extension(de->d_name, extensions)) {
            continue;
        }
        if (*n == cap) {
            cap = cap == 0 ? 64 : cap * 2;
            char **grown = sm_realloc(*names, cap * sizeof(*grown));
            if (grown == NULL) {
                s = SM_ERR(err, SM_E_NOMEM, "cannot list the slices");
                break;
            }
            *names = grown;
        }
        (*names)[*n] = sm_src_strdup(de->d_name);
        if ((*names)[*n] == NULL) {
            s = SM_ERR(err, SM_E_NOMEM, "cannot list the slices");
            break;
        }
        (*n)++;
    }
    closedir(d);
    if (s == SM_OK && *n == 0) {
        s = no_slices(dir, extensions, err);
    }
    if (s == SM_OK) {
        qsort(*names, (size_t)*n, sizeof(**names), natural_qsort);
    }
    return s;
}
