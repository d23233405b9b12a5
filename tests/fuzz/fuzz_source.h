/* The body of a source's libFuzzer target (fuzz_tiff.c, fuzz_source_<name>.c): the input is
 * written to a memory file (memfd) and opened by sm_source_open as format FUZZ_SOURCE_FORMAT, as an
 * ingest job opens it; when it opens, the first slices (at most 64 x 64 pixels of each) and the far
 * corner of the last one are read. The library below the source (libtiff, libpng) is Debian's, not
 * instrumented: what is fuzzed is our use of what it reports. A refusal must be SM_E_DATA / SM_E_IO
 * / SM_E_NOMEM / SM_E_LIMIT with a message; a read may fail only the same way (a read of a source
 * read at any box that succeeds counts exactly its box's bytes: they are read in part, issue 33);
 * sizes the file declares past FUZZ_SOURCE_MAX_ALLOC are refused, never allocated. */
#ifndef SM_FUZZ_SOURCE_H
#define SM_FUZZ_SOURCE_H

#define _GNU_SOURCE
#include "shardmill/sm_config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shardmill/source.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_refusal(const struct sm_err *err)
{
    if ((err->status != SM_E_DATA && err->status != SM_E_IO && err->status != SM_E_NOMEM &&
         err->status != SM_E_LIMIT) ||
        err->what[0] == '\0') {
        __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const int fd = memfd_create("fuzz_source", MFD_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    struct sm_source *t = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    /* the source refuses single allocations above 16 MiB, like a small memory budget would */
    const struct sm_source_params p = {
        .format = FUZZ_SOURCE_FORMAT, .path = path, .max_alloc = (uint64_t)16 << 20};
    if (sm_source_open(&p, &t, &err) != SM_OK) {
        check_refusal(&err);
        close(fd);
        return 0;
    }
    const struct sm_source_info *in = sm_source_info(t);
    const uint64_t *shape = in->shape;
    const enum sm_dtype dt = in->dtype;
    if (in->ndim != 3 || shape[0] < 1 || shape[1] < 1 || shape[2] < 1) {
        __builtin_trap();
    }
    /* the first slices, at most 64 x 64 pixels of each, and the far corner of the last one */
    const uint64_t box[3] = {shape[0] < 4 ? shape[0] : 4, shape[1] < 64 ? shape[1] : 64,
                             shape[2] < 64 ? shape[2] : 64};
    const uint64_t origin[3] = {0, 0, 0};
    const uint64_t corner[3] = {shape[0] - 1, shape[1] - (box[1] < shape[1] ? box[1] : shape[1]),
                                shape[2] - box[2]};
    const uint64_t last[3] = {1, box[1], box[2]};
    void *buf = malloc((size_t)(box[0] * box[1] * box[2] * sm_dtype_size(dt)));
    if (buf != NULL) {
        sm_err_clear(&err);
        if (sm_source_read_box(t, 0, origin, box, buf, &err) != SM_OK) {
            check_refusal(&err);
        } else if (in->access == SM_SOURCE_RANDOM &&
                   sm_source_bytes_read(t) != box[0] * box[1] * box[2] * sm_dtype_size(dt)) {
            __builtin_trap(); /* uncompressed pages: the box's own bytes, fetched by pread */
        }
        sm_err_clear(&err);
        if (sm_source_read_box(t, 0, corner, last, buf, &err) != SM_OK) {
            check_refusal(&err);
        }
        free(buf);
    }
    sm_source_close(t);
    close(fd);
    return 0;
}

#endif
