/* The pyramid's spill file (write.h, docs/internals/pyramid.md "The spilled level"):
 * .shardmill/spill-<level> of the output, raw blocks of one fixed size, block i at
 * i * block_bytes. Why a file and not memory: every rank puts the blocks of its own level-0 shards
 * and the pyramid's ranks get any block, and the level is an eighth of level 0's values, more
 * than a rank should hold at 4096³. It lives in .shardmill/ so the output's checks accept it and
 * the marker's clean-up removes what a stopped run left. */
#include "shardmill/sm_config.h"

#include "write_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "shardmill/alloc.h"
#include "shardmill/fs.h"

struct sm_spill {
    int fd;
    size_t block_bytes;
    char rel[32]; /* .shardmill/spill-<level> */
};

static void spill_rel(unsigned level, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/spill-%u", SM_PRIV_DIR, level);
}

sm_status sm_spill_open(struct sm_output *o, unsigned level, size_t block_bytes, bool create,
                        struct sm_spill **out, struct sm_err *err)
{
    *out = NULL;
    if (o->rootfd < 0 || block_bytes == 0) {
        SM_FAIL(err, SM_E_INTERNAL, "spill of an output that did not begin");
    }
    struct sm_spill *s = sm_calloc(1, sizeof(*s));
    if (s == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate the spill");
    }
    s->block_bytes = block_bytes;
    spill_rel(level, s->rel, sizeof(s->rel));
    sm_status st = create ? sm_fs_mkdirs(o->rootfd, SM_PRIV_DIR, err) : SM_OK;
    if (st == SM_OK) {
        /* no O_TRUNC: the ranks open it together, and each rewrites its blocks whole */
        s->fd = sm_fs_open_beneath(
            o->rootfd, s->rel, create ? O_RDWR | O_CREAT | O_CLOEXEC : O_RDONLY | O_CLOEXEC, 0600);
        if (s->fd < 0) {
            st = sm_fs_fail(err, "cannot open", o->rootfd, s->rel, errno);
            sm_err_where(err, "%s", o->root);
        }
    }
    if (st != SM_OK) {
        sm_free(s);
        return st;
    }
    *out = s;
    return SM_OK;
}

static sm_status spill_at(const struct sm_spill *s, uint64_t block, size_t len, off_t *at,
                          struct sm_err *err)
{
    if (len > s->block_bytes || block > (uint64_t)INT64_MAX / s->block_bytes) {
        SM_FAIL(err, SM_E_INTERNAL, "spill block %" PRIu64 " of %zu bytes (blocks of %zu)", block,
                len, s->block_bytes);
    }
    *at = (off_t)(block * s->block_bytes);
    return SM_OK;
}

sm_status sm_spill_put(struct sm_spill *s, uint64_t block, const void *data, size_t len,
                       struct sm_err *err)
{
    off_t at = 0;
    SM_TRY(spill_at(s, block, len, &at, err));
    for (size_t done = 0; done < len;) {
        const ssize_t w = pwrite(s->fd, (const char *)data + done, len - done, at + (off_t)done);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return SM_ERRNO(err, w < 0 ? errno : EIO, NULL, "cannot write '%s'", s->rel);
        }
        done += (size_t)w;
    }
    return SM_OK;
}

sm_status sm_spill_get(struct sm_spill *s, uint64_t block, void *data, size_t len,
                       struct sm_err *err)
{
    off_t at = 0;
    SM_TRY(spill_at(s, block, len, &at, err));
    for (size_t done = 0; done < len;) {
        const ssize_t r = pread(s->fd, (char *)data + done, len - done, at + (off_t)done);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            return SM_ERRNO(err, errno, NULL, "cannot read '%s'", s->rel);
        }
        if (r == 0) { /* a block no rank wrote: the write phase did not finish */
            SM_FAIL(err, SM_E_IO, "'%s' ends before block %" PRIu64, s->rel, block);
        }
        done += (size_t)r;
    }
    return SM_OK;
}

void sm_spill_close(struct sm_spill *s)
{
    if (s != NULL) {
        close(s->fd);
        sm_free(s);
    }
}

sm_status sm_spill_remove(struct sm_output *o, unsigned level, struct sm_err *err)
{
    char rel[32];
    spill_rel(level, rel, sizeof(rel));
    if (o->rootfd >= 0 && sm_fs_unlink_beneath(o->rootfd, rel, 0) != 0 && errno != ENOENT) {
        return sm_fs_fail(err, "cannot remove", o->rootfd, rel, errno);
    }
    return SM_OK;
}
