/* The engine allocator (STYLE B6): a 16-byte header records each block's size so the current and
 * peak totals are exact; SM_FAIL_ALLOC_AT-style injection is driven by sm_alloc_fail_at(). */
#include "shardmill/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define HDR 16 /* keeps max_align_t alignment for the caller's block */

static atomic_uint_fast64_t cur_bytes;
static atomic_uint_fast64_t peak_bytes;
static atomic_uint_fast64_t fail_countdown; /* 0: off; 1: the next allocation fails */

static int should_fail(void)
{
    uint_fast64_t n = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    while (n != 0) {
        if (atomic_compare_exchange_weak(&fail_countdown, &n, n - 1)) {
            return n == 1;
        }
    }
    return 0;
}

static void account(size_t added, size_t removed)
{
    uint_fast64_t now = atomic_fetch_add(&cur_bytes, added) + added;
    atomic_fetch_sub(&cur_bytes, removed);
    now -= removed;
    uint_fast64_t p = atomic_load_explicit(&peak_bytes, memory_order_relaxed);
    while (now > p && !atomic_compare_exchange_weak(&peak_bytes, &p, now)) {
    }
}

void *sm_malloc(size_t n)
{
    if (should_fail() || n > SIZE_MAX - HDR) {
        return NULL;
    }
    unsigned char *p = malloc(n + HDR);
    if (p == NULL) {
        return NULL;
    }
    memcpy(p, &n, sizeof(n));
    account(n, 0);
    return p + HDR;
}

void *sm_calloc(size_t count, size_t size)
{
    if (size != 0 && count > (SIZE_MAX - HDR) / size) {
        return NULL;
    }
    size_t n = count * size;
    if (should_fail()) {
        return NULL;
    }
    unsigned char *p = calloc(1, n + HDR);
    if (p == NULL) {
        return NULL;
    }
    memcpy(p, &n, sizeof(n));
    account(n, 0);
    return p + HDR;
}

void *sm_realloc(void *ptr, size_t n)
{
    if (ptr == NULL) {
        return sm_malloc(n);
    }
    if (should_fail() || n > SIZE_MAX - HDR) {
        return NULL;
    }
    unsigned char *base = (unsigned char *)ptr - HDR;
    size_t old;
    memcpy(&old, base, sizeof(old));
    unsigned char *p = realloc(base, n + HDR);
    if (p == NULL) {
        return NULL;
    }
    memcpy(p, &n, sizeof(n));
    account(n, old);
    return p + HDR;
}

void sm_free(void *ptr)
{
    if (ptr == NULL) {
        return;
    }
    unsigned char *base = (unsigned char *)ptr - HDR;
    size_t old;
    memcpy(&old, base, sizeof(old));
    account(0, old);
    free(base);
}

char *sm_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = sm_malloc(n);
    if (d != NULL) {
        memcpy(d, s, n);
    }
    return d;
}

uint64_t sm_alloc_current(void)
{
    return atomic_load(&cur_bytes);
}

uint64_t sm_alloc_peak(void)
{
    return atomic_load(&peak_bytes);
}

void sm_alloc_reset_peak(void)
{
    atomic_store(&peak_bytes, atomic_load(&cur_bytes));
}

void sm_alloc_fail_at(uint64_t n)
{
    atomic_store(&fail_countdown, n);
}
