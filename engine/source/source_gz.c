/* A gzip file read forward through one zlib stream (.nii.gz): members one after another, each
 * checked (CRC-32 and length) as its end is read. The compressed bytes read are counted for the
 * source's byte counter. */
#include "shardmill/sm_config.h"

#include "source_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "shardmill/alloc.h"

#define GZ_IN_BYTES (256u << 10)

struct sm_gz {
    int fd;
    const char *path;
    z_stream zs;
    bool init, end; /* end: the last member's trailer was read and checked */
    uint64_t pos;   /* inflated bytes delivered so far */
    uint64_t in;    /* compressed bytes read */
    uint64_t size;  /* of the file */
    uint8_t *buf;
};

sm_status sm_gz_fail(struct sm_gz *g, struct sm_err *err, const char *what)
{
    SM_FAIL_AT(err, SM_E_DATA, g->path, "%s (inflated byte %" PRIu64 ")", what, g->pos);
}

void sm_gz_close(struct sm_gz *g)
{
    if (g == NULL) {
        return;
    }
    if (g->init) {
        inflateEnd(&g->zs);
    }
    if (g->fd >= 0) {
        close(g->fd);
    }
    sm_free(g->buf);
    sm_free(g);
}

sm_status sm_gz_open(const char *path, struct sm_gz **out, struct sm_err *err)
{
    *out = NULL;
    struct sm_gz *g = sm_calloc(1, sizeof(*g));
    if (g == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a gzip reader");
    }
    g->path = path;
    struct stat sb;
    sm_status ost = sm_src_open_file(path, false, &g->fd, err);
    if (ost == SM_OK && fstat(g->fd, &sb) != 0) {
        ost = SM_ERRNO(err, errno, path, "stat");
    }
    if (ost != SM_OK) {
        sm_gz_close(g);
        return ost;
    }
    g->size = (uint64_t)sb.st_size;
    g->buf = sm_malloc(GZ_IN_BYTES);
    if (g->buf == NULL) {
        sm_gz_close(g);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a gzip input buffer");
    }
    if (inflateInit2(&g->zs, 16 + MAX_WBITS) != Z_OK) { /* gzip wrapper only */
        sm_gz_close(g);
        SM_FAIL(err, SM_E_NOMEM, "cannot start a zlib stream");
    }
    g->init = true;
    *out = g;
    return SM_OK;
}

uint64_t sm_gz_file_size(const struct sm_gz *g)
{
    return g->size;
}

uint64_t sm_gz_bytes_in(const struct sm_gz *g)
{
    return g->in;
}

/* More compressed input; *r == 0 at the end of the file. */
static sm_status fill(struct sm_gz *g, ssize_t *r, struct sm_err *err)
{
    do {
        *r = read(g->fd, g->buf, GZ_IN_BYTES);
    } while (*r < 0 && errno == EINTR);
    if (*r < 0) {
        return SM_ERRNO(err, errno, g->path, "read");
    }
    g->in += (uint64_t)*r;
    g->zs.next_in = g->buf;
    g->zs.avail_in = (uInt)*r;
    return SM_OK;
}

/* After a member's end: another member may follow (gzip allows concatenation). */
static sm_status member_end(struct sm_gz *g, struct sm_err *err)
{
    if (g->zs.avail_in == 0) {
        ssize_t r;
        SM_TRY(fill(g, &r, err));
    }
    if (g->zs.avail_in == 0) {
        g->end = true;
    } else if (inflateReset(&g->zs) != Z_OK) {
        return sm_gz_fail(g, err, "cannot restart the zlib stream");
    }
    return SM_OK;
}

sm_status sm_gz_read(struct sm_gz *g, uint8_t *dst, uint64_t n, uint64_t *got, struct sm_err *err)
{
    uint8_t sink[16384];
    *got = 0;
    while (*got < n && !g->end) {
        if (g->zs.avail_in == 0) {
            ssize_t r;
            SM_TRY(fill(g, &r, err));
            if (r == 0) {
                return sm_gz_fail(g, err, "the gzip stream is truncated");
            }
        }
        const uint64_t want = n - *got;
        uint8_t *to = dst != NULL ? dst + *got : sink;
        const uInt room = (uInt)(dst != NULL ? (want < (1u << 30) ? want : (1u << 30))
                                             : (want < sizeof(sink) ? want : sizeof(sink)));
        g->zs.next_out = to;
        g->zs.avail_out = room;
        const int rc = inflate(&g->zs, Z_NO_FLUSH);
        const uInt made = room - g->zs.avail_out;
        *got += made;
        g->pos += made;
        if (rc == Z_STREAM_END) {
            SM_TRY(member_end(g, err));
        } else if (rc == Z_DATA_ERROR) {
            return sm_gz_fail(g, err,
                              g->pos == 0 ? "not a gzip file (bad header)" : "corrupt gzip data");
        } else if (rc == Z_MEM_ERROR) {
            SM_FAIL(err, SM_E_NOMEM, "zlib is out of memory");
        } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
            return sm_gz_fail(g, err, "zlib cannot inflate the stream");
        }
    }
    return SM_OK;
}

sm_status sm_gz_skip(struct sm_gz *g, uint64_t n, struct sm_err *err)
{
    uint64_t got = 0;
    SM_TRY(sm_gz_read(g, NULL, n, &got, err));
    return got == n ? SM_OK : sm_gz_fail(g, err, "the file ends before the volume does");
}

sm_status sm_gz_finish(struct sm_gz *g, struct sm_err *err)
{
    uint64_t got = 0;
    while (!g->end) {
        SM_TRY(sm_gz_read(g, NULL, UINT64_MAX, &got, err));
    }
    return SM_OK;
}
