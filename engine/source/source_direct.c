/* Large reads of a file's stored samples that bypass the page cache: a second descriptor of the
 * file, opened with O_DIRECT (sm_fs_reopen_direct), reads the block-aligned range around the
 * wanted bytes into an aligned bounce buffer, a chunk at a time, and the wanted bytes are copied
 * out of it.
 *
 * Why: a scan reads each input byte once per pass and not again soon, yet a buffered read puts
 * every 4 KiB page of it into the page cache and, once the cache fills memory, reclaims it again:
 * CPU time the codecs need. On W9's 2-vCPU EPYC VM, 8 GiB of whole 8 MiB slices read buffered
 * cost 16-18 s of system time and 24-28 s of wall time from a cold cache; with O_DIRECT, 0.5 s
 * and 6-8 s (docs/BENCHMARKS.md, "Sixth session"). No library does this for a pread of our own;
 * it is one loop. `auto` (input.direct_io) goes direct only when the input holds half of the
 * machine's memory or more: a smaller one can stay cached between passes and runs, and a warm
 * cache beats any disk. Reads below the descriptor's `min` bytes stay buffered. Where the file
 * system refuses O_DIRECT, or a read is refused for its alignment, the read is buffered as before
 * and the reader stops trying (`off`). Spec: https://man7.org/linux/man-pages/man2/open.2.html
 * (O_DIRECT) */
#include "shardmill/sm_config.h"

#include "source_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardmill/alloc.h"
#include "shardmill/fs.h"

/* The alignment of offsets, lengths and the buffer: 4 KiB holds for 512-byte and 4 KiB logical
 * blocks (a device with larger ones refuses the read with EINVAL: buffered then). */
#define DIRECT_ALIGN ((uint64_t)4096)

uint64_t sm_src_direct_min(enum sm_source_direct how, uint64_t file_bytes)
{
    return how == SM_SOURCE_DIRECT_ALWAYS ||
                   (how == SM_SOURCE_DIRECT_AUTO && sm_fs_beyond_cache(file_bytes))
               ? SM_SOURCE_DIRECT_MIN
               : UINT64_MAX;
}

void sm_src_direct_init(struct sm_src_direct *d, uint64_t min)
{
    memset(d, 0, sizeof(*d));
    d->fd = -1;
    d->min = min;
    d->off = min == UINT64_MAX;
}

/* The O_DIRECT descriptor of fd's file, reopened when fd is another file than last time (the
 * number of a closed slice's descriptor is reused by the next slice); -1 when there is none. */
static int direct_fd(struct sm_src_direct *d, int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        return -1;
    }
    if (d->fd >= 0 && d->dev == (uint64_t)st.st_dev && d->ino == (uint64_t)st.st_ino) {
        return d->fd;
    }
    if (d->fd >= 0) {
        close(d->fd);
    }
    d->fd = sm_fs_reopen_direct(fd);
    if (d->fd < 0) {
        d->off = true; /* the file system (or /proc) refuses: it will for the next file too */
        return -1;
    }
    d->dev = (uint64_t)st.st_dev;
    d->ino = (uint64_t)st.st_ino;
    return d->fd;
}

/* The bounce buffer: SM_SRC_DIRECT_CHUNK bytes at an aligned address inside d->mem. */
static uint8_t *bounce(struct sm_src_direct *d)
{
    if (d->mem == NULL) {
        d->mem = sm_malloc((size_t)(SM_SRC_DIRECT_CHUNK + DIRECT_ALIGN));
    }
    if (d->mem == NULL) {
        return NULL;
    }
    const uintptr_t a = ((uintptr_t)d->mem + DIRECT_ALIGN - 1) & ~(uintptr_t)(DIRECT_ALIGN - 1);
    return (uint8_t *)a;
}

/* [off, off + n) of the O_DIRECT descriptor dfd into dst through the bounce buffer b. SM_OK with
 * *fetched += the bytes read (the aligned range); *refused (nothing read) when the first read is
 * refused for its alignment: the caller reads buffered; SM_E_DATA when the file ends first. */
static sm_status read_aligned(int dfd, uint8_t *b, uint64_t off, uint8_t *dst, uint64_t n,
                              uint64_t *fetched, bool *refused, const char *path,
                              struct sm_err *err)
{
    const uint64_t end = off + n, aligned_end = (end + DIRECT_ALIGN - 1) & ~(DIRECT_ALIGN - 1);
    uint64_t pos = off & ~(DIRECT_ALIGN - 1), got = 0;
    while (pos < end) {
        const uint64_t len =
            aligned_end - pos < SM_SRC_DIRECT_CHUNK ? aligned_end - pos : SM_SRC_DIRECT_CHUNK;
        const ssize_t r = pread(dfd, b, (size_t)len, (off_t)pos);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0 && errno == EINVAL && got == 0) {
            *refused = true;
            return SM_OK;
        }
        if (r < 0) {
            return SM_ERRNO(err, errno, path, "read");
        }
        const uint64_t lo = pos > off ? pos : off;
        const uint64_t hi = pos + (uint64_t)r < end ? pos + (uint64_t)r : end;
        if (hi > lo) {
            memcpy(dst + (lo - off), b + (lo - pos), (size_t)(hi - lo));
        }
        got += (uint64_t)r;
        pos += (uint64_t)r;
        if (pos < end && (r == 0 || pos % DIRECT_ALIGN != 0)) { /* the file's end, mid-block */
            SM_FAIL_AT(err, SM_E_DATA, path,
                       "file ends at byte %" PRIu64 ", before the volume does", pos);
        }
    }
    *fetched += got;
    return SM_OK;
}

sm_status sm_src_pread_direct(struct sm_src_direct *d, int fd, uint64_t off, void *dst, size_t n,
                              uint64_t *fetched, const char *path, struct sm_err *err)
{
    if (!d->off && (uint64_t)n >= d->min && n > 0) {
        const int dfd = direct_fd(d, fd);
        uint8_t *b = dfd >= 0 ? bounce(d) : NULL;
        if (dfd >= 0 && b == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate a %" PRIu64 "-byte read buffer",
                    (uint64_t)SM_SRC_DIRECT_CHUNK + DIRECT_ALIGN);
        }
        bool refused = false;
        if (b != NULL) {
            SM_TRY(read_aligned(dfd, b, off, dst, (uint64_t)n, fetched, &refused, path, err));
            if (!refused) {
                return SM_OK;
            }
            d->off = true; /* the device wants a larger alignment: buffered from now on */
        }
    }
    SM_TRY(sm_src_pread(fd, off, dst, n, path, err));
    *fetched += (uint64_t)n;
    return SM_OK;
}

void sm_src_direct_end(struct sm_src_direct *d)
{
    if (d->fd >= 0) {
        close(d->fd);
    }
    sm_free(d->mem);
    sm_src_direct_init(d, d->min);
}
