/* core/ private: large blocks on their own 2 MiB-aligned mapping (core_alloc_huge.c). */
#ifndef SM_CORE_INT_H
#define SM_CORE_INT_H

#include <stddef.h>

/* Blocks at least this large are mapped, not malloc'ed (one huge page). */
#define SM_HUGE_MIN ((size_t)2 << 20)

/* Maps n + lead zeroed bytes whose byte `lead` is 2 MiB-aligned and advised for huge pages;
 * returns the block (the lead bytes first) and in *back its distance from the mapping's start,
 * or NULL when the mapping fails. */
void *sm_huge_map(size_t n, size_t lead, size_t *back);

/* Unmaps a block of sm_huge_map(n, lead, &back). */
void sm_huge_unmap(void *block, size_t n, size_t lead, size_t back);

#endif
