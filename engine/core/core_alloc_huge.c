/* Large engine blocks on their own anonymous mapping, 2 MiB-aligned and advised MADV_HUGEPAGE.
 *
 * Why: the first touch of a fresh block costs one page fault per 4 KiB page, ~10 µs each on a
 * virtual machine, so a fresh process reading an 8 MiB region spent ~20 ms of its ~50 ms first
 * read faulting the region in (issue 23). Where transparent huge pages are in `madvise` mode (the
 * Debian default), advising the block turns 2,048 faults into 4, each zeroing 2 MiB; where they
 * are `never`, the advice is ignored and nothing is lost. glibc's own mmap of a large malloc is
 * page-aligned only, so at most the aligned interior could become huge pages; mapping here aligns
 * the caller's bytes to 2 MiB.
 * Spec: https://www.kernel.org/doc/html/latest/admin-guide/mm/transhuge.html
 * Invariant: with core_syncfs.c, one of the two files that leave the POSIX level of sm_config.h
 * (madvise's MADV_HUGEPAGE is a Linux advice, declared under _DEFAULT_SOURCE). */
#define _DEFAULT_SOURCE
#include "core_int.h"

#include <stdint.h>
#include <sys/mman.h>

#define HUGE_ALIGN ((size_t)2 << 20)

void *sm_huge_map(size_t n, size_t lead, size_t *back)
{
    if (n > SIZE_MAX - lead - HUGE_ALIGN) {
        return NULL;
    }
    unsigned char *map = mmap(NULL, n + lead + HUGE_ALIGN, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        return NULL;
    }
    /* the caller's bytes start at the first 2 MiB boundary that leaves `lead` bytes before it */
    unsigned char *data =
        map + ((((uintptr_t)map + lead + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1)) -
               (uintptr_t)map);
#ifdef MADV_HUGEPAGE
    (void)madvise(data, (n + HUGE_ALIGN - 1) & ~(HUGE_ALIGN - 1), MADV_HUGEPAGE);
#endif
    *back = (size_t)(data - lead - map);
    return data - lead;
}

void sm_huge_unmap(void *block, size_t n, size_t lead, size_t back)
{
    (void)munmap((unsigned char *)block - back, n + lead + HUGE_ALIGN);
}
