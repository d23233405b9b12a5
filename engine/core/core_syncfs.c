/* syncfs(2) for the SYNCFS durability mode (SPEC §6, write.h): one call flushes every dirty page
 * and inode of a store's file system, in place of one fsync per object and directory. Also the
 * readdir d_type kinds (DT_*), so tree walks need no stat per entry.
 * Spec: https://man7.org/linux/man-pages/man2/syncfs.2.html
 * Invariant: the only file that asks for _GNU_SOURCE (syncfs is a Linux call, not POSIX), so the
 * rest of the engine stays on the POSIX level of sm_config.h. */
#define _GNU_SOURCE
#include "shardmill/sm_config.h"

#include "shardmill/fs.h"

#include <dirent.h>
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
