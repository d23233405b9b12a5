/* The HDF5 file signature (HDF5 File Format Specification, "Format Signature"): the 8 bytes
 * \x89HDF\r\n\x1a\n at offset 0, or at 512, 1024, 2048, ... when the file has a user block.
 * `output.exists: auto` looks for it before it trusts an existing export (SPEC §6).
 * Spec: https://docs.hdfgroup.org/hdf5/develop/_f_m_t3.html#Superblock
 * Invariant: reads only; in the library either way (with or without SM_WITH_HDF5). */
#include "shardmill/sm_config.h"

#include "shardmill/export.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const unsigned char HDF5_SIGNATURE[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

sm_status sm_export_hdf5_signature(const char *path, bool *is_hdf5, struct sm_err *err)
{
    *is_hdf5 = false;
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        return SM_ERRNO(err, errno, path, "cannot open the export");
    }
    struct stat sb;
    sm_status st = SM_OK;
    if (fstat(fd, &sb) != 0) {
        st = SM_ERRNO(err, errno, path, "cannot stat the export");
    }
    /* a regular file only: a FIFO or a device is no export (and reading one may block) */
    for (off_t at = 0; st == SM_OK && S_ISREG(sb.st_mode) && at + 8 <= sb.st_size;
         at = at == 0 ? 512 : at * 2) {
        unsigned char b[8];
        ssize_t r;
        do {
            r = pread(fd, b, sizeof(b), at);
        } while (r < 0 && errno == EINTR);
        if (r < 0) {
            st = SM_ERRNO(err, errno, path, "cannot read the export");
        } else if (r == (ssize_t)sizeof(b) && memcmp(b, HDF5_SIGNATURE, sizeof(b)) == 0) {
            *is_hdf5 = true;
            break;
        }
    }
    close(fd);
    return st;
}
