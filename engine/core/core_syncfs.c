/* syncfs(2) for the SYNCFS durability mode (SPEC §6, write.h): one call flushes every dirty page
 * and inode of a store's file system, in place of one fsync per object and directory. Also the
 * readdir d_type kinds (DT_*), so tree walks need no stat per entry, and openat2(2), which
 * resolves a path inside the output in one call without following any symbolic link (fs.h). And a
 * new worker thread's first placement (sched_getcpu, sched_setaffinity; core_int.h). And
 * sync_file_range(2), which starts a staged shard's write-out while the next ones are encoded. And
 * O_DIRECT, for a source's large reads that bypass the page cache (source_direct.c).
 * Spec: https://man7.org/linux/man-pages/man2/syncfs.2.html
 * Invariant: the only file that asks for _GNU_SOURCE (syncfs, openat2 and the affinity calls are
 * Linux's, not POSIX), so the rest of the engine stays on the POSIX level of sm_config.h. */
#define _GNU_SOURCE
#include "shardmill/sm_config.h"

#include "shardmill/fs.h"

#include "core_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

sm_status sm_fs_syncfs(int fd, struct sm_err *err)
{
    if (syncfs(fd) != 0) {
        return SM_ERRNO(err, errno, NULL, "syncfs");
    }
    return SM_OK;
}

void sm_fs_start_writeback(int fd)
{
#ifdef SYNC_FILE_RANGE_WRITE
    (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE); /* best effort: syncfs checks */
#else
    (void)fd;
#endif
}

int sm_fs_reopen_direct(int fd)
{
#ifdef O_DIRECT
    char path[40];
    (void)snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    const int d = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat a, b;
    if (d < 0) {
        return -1;
    }
    if (fstat(fd, &a) != 0 || fstat(d, &b) != 0 || !S_ISREG(b.st_mode) || a.st_dev != b.st_dev ||
        a.st_ino != b.st_ino) { /* /proc/self/fd is a link to fd's file: anything else is not it */
        close(d);
        errno = EXDEV;
        return -1;
    }
    return d;
#else
    (void)fd;
    errno = EINVAL;
    return -1;
#endif
}

uint64_t sm_fs_memory_bytes(void)
{
    const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

bool sm_fs_beyond_cache(uint64_t bytes)
{
    const uint64_t mem = sm_fs_memory_bytes();
    return mem != 0 && bytes >= mem / 2;
}

bool sm_fs_set_direct(int fd, bool on)
{
#ifdef O_DIRECT
    const int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && fcntl(fd, F_SETFL, on ? fl | O_DIRECT : fl & ~O_DIRECT) == 0;
#else
    (void)fd, (void)on;
    return false;
#endif
}

enum sm_fs_kind sm_fs_dirent_kind(unsigned char d_type)
{
    switch (d_type) {
    case DT_DIR:
        return SM_FS_DIR;
    case DT_REG:
        return SM_FS_REG;
    case DT_UNKNOWN:
        return SM_FS_UNKNOWN;
    default:
        return SM_FS_OTHER;
    }
}

/* struct open_how and the RESOLVE_* bits of <linux/openat2.h> (a fixed kernel ABI), declared here
 * so the build does not need that header. */
struct how {
    uint64_t flags, mode, resolve;
};
#define RESOLVE_NO_SYMLINKS_ 0x04
#define RESOLVE_BENEATH_ 0x08

int sm_fs_openat2_beneath(int dirfd, const char *rel, int flags, unsigned mode)
{
#ifdef SYS_openat2
    const struct how h = {(uint64_t)(unsigned)flags, (flags & O_CREAT) != 0 ? mode : 0,
                          RESOLVE_BENEATH_ | RESOLVE_NO_SYMLINKS_};
    return (int)syscall(SYS_openat2, dirfd, rel[0] == '\0' ? "." : rel, &h, sizeof(h));
#else
    (void)dirfd, (void)rel, (void)flags, (void)mode;
    errno = ENOSYS;
    return -1;
#endif
}

int sm_thread_cpu(void)
{
    return sched_getcpu();
}

void sm_thread_name(const char *name)
{
    (void)pthread_setname_np(pthread_self(), name); /* at most 15 bytes; a longer one is kept out */
}

int sm_thread_cpus(void)
{
    cpu_set_t all;
    if (sched_getaffinity(0, sizeof(all), &all) != 0) {
        return 1;
    }
    return CPU_COUNT(&all);
}

/* Once per thread: a pool thread is placed once, the first time it runs work. */
static _Thread_local bool spread_done;

void sm_thread_spread(int tid, int from_cpu)
{
    if (spread_done || tid <= 0 || from_cpu < 0) {
        return;
    }
    spread_done = true;
    cpu_set_t all;
    if (sched_getaffinity(0, sizeof(all), &all) != 0 || CPU_COUNT(&all) < 2) {
        return;
    }
    int want = tid % CPU_COUNT(&all), cpu = from_cpu; /* the tid-th allowed CPU after from_cpu */
    for (int step = 0; want > 0 && step < CPU_SETSIZE; step++) {
        cpu = (cpu + 1) % CPU_SETSIZE;
        want -= CPU_ISSET(cpu, &all) ? 1 : 0;
    }
    if (want != 0 || cpu == from_cpu) {
        return;
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) == 0) { /* moved there now; then free again */
        (void)sched_setaffinity(0, sizeof(all), &all);
    }
}
