/* The engine allocator (STYLE B6): a 16-byte header records each block's size so the current and
 * peak totals are exact; SM_FAIL_ALLOC_AT-style injection is driven by sm_alloc_fail_at().
 *
 * The counters are shared by every thread, so each sits on a cache line of its own and is updated
 * with relaxed atomics: one fetch_add per allocation or free on the current total (a realloc adds
 * its difference), a load of the peak that writes only when a new peak is reached, and a load of
 * the injection countdown that writes only while injection is armed. Per-thread counters summed on
 * read would bounce nothing at all but could not give an exact peak, which memory tests and the
 * run report rely on; the read hot path allocates nothing per call anyway (array/). */
#include "shardmill/alloc.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define HDR 16 /* keeps max_align_t alignment for the caller's block */
#define LINE 64

struct padded_counter {
    alignas(LINE) atomic_uint_fast64_t v;
    char pad[LINE - sizeof(atomic_uint_fast64_t)];
};

static struct padded_counter cur_bytes;
static struct padded_counter peak_bytes;
static struct padded_counter fail_countdown; /* 0: off; 1: the next allocation fails */

static int should_fail(void)
{
    uint_fast64_t n = atomic_load_explicit(&fail_countdown.v, memory_order_relaxed);
    while (n != 0) {
        if (atomic_compare_exchange_weak_explicit(&fail_countdown.v, &n, n - 1,
                                                  memory_order_relaxed, memory_order_relaxed)) {
            return n == 1;
        }
    }
    return 0;
}

static void account(size_t added, size_t removed)
{
    /* unsigned wrap-around makes one add of (added - removed) exact for either sign */
    const uint_fast64_t delta = (uint_fast64_t)added - (uint_fast64_t)removed;
    const uint_fast64_t now =
        atomic_fetch_add_explicit(&cur_bytes.v, delta, memory_order_relaxed) + delta;
    if (added <= removed) {
        return; /* a total that shrinks is no new peak */
    }
    uint_fast64_t p = atomic_load_explicit(&peak_bytes.v, memory_order_relaxed);
    while (now > p && !atomic_compare_exchange_weak_explicit(
                          &peak_bytes.v, &p, now, memory_order_relaxed, memory_order_relaxed)) {
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
    return atomic_load(&cur_bytes.v);
}

uint64_t sm_alloc_peak(void)
{
    return atomic_load(&peak_bytes.v);
}

void sm_alloc_reset_peak(void)
{
    atomic_store(&peak_bytes.v, atomic_load(&cur_bytes.v));
}

void sm_alloc_fail_at(uint64_t n)
{
    atomic_store(&fail_countdown.v, n);
}
