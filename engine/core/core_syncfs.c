/* syncfs(2) for the SYNCFS durability mode (SPEC §6, write.h): one call flushes every dirty page
 * and inode of a store's file system, in place of one fsync per object and directory.
 * Spec: https://man7.org/linux/man-pages/man2/syncfs.2.html
 * Invariant: the only file that asks for _GNU_SOURCE (syncfs is a Linux call, not POSIX), so the
 * rest of the engine stays on the POSIX level of sm_config.h. */
#define _GNU_SOURCE
#include "shardmill/sm_config.h"

#include "shardmill/fs.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

sm_status sm_fs_syncfs(int fd, struct sm_err *err)
{
    if (syncfs(fd) != 0) {
        const int e = errno;
        sm_err_set(err, SM_E_IO, __FILE__, __LINE__, "syncfs: %s", strerror(e));
        sm_err_cause(err, "errno", e);
        return err->status;
    }
    return SM_OK;
}
