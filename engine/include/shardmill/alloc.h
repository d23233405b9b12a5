/* The engine's only allocator entry points (STYLE B6): one place for peak accounting and for
 * deterministic allocation-failure injection in tests. Thread-safe. */
#ifndef SM_CORE_ALLOC_H
#define SM_CORE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *sm_malloc(size_t n);
void *sm_calloc(size_t count, size_t size);
void *sm_realloc(void *p, size_t n);
void sm_free(void *p);
char *sm_strdup(const char *s);

/* Bytes currently allocated and the high-water mark since start (or the last reset). */
uint64_t sm_alloc_current(void);
uint64_t sm_alloc_peak(void);
void sm_alloc_reset_peak(void);

/* Blocks of 2 MiB or more allocated since start (each a fresh mapping, core_alloc_huge.c, whose
 * pages the kernel zeroes on first touch): what a run's buffer reuse is checked by. */
uint64_t sm_alloc_large_count(void);

/* Makes the Nth allocation from now on fail (1 = the next one); 0 disables. For torture tests. */
void sm_alloc_fail_at(uint64_t n);

#endif
