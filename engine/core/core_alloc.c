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

#include "core_int.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define HDR 16 /* keeps max_align_t alignment for the caller's block */
#define LINE 64

/* A block's header: its size, and 0 for a malloc block or 1 + the distance from its mapping's
 * start for a block of SM_HUGE_MIN bytes or more (core_alloc_huge.c). Sanitizer builds keep every
 * block on the C allocator, so ASan still sees overflows and uses after free of the large ones;
 * their large blocks are page-aligned there too (ALIGNED), as a mapping's are, so the paths that
 * need that (O_DIRECT writes of a shard, core_fs.c) run in those builds as in a release. */
struct hdr {
    size_t n, mapped;
};
_Static_assert(sizeof(struct hdr) <= HDR, "the header fits its 16 bytes");

#if defined(__SANITIZE_ADDRESS__)
#define SM_HUGE_OK 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SM_HUGE_OK 0
#endif
#endif
#ifndef SM_HUGE_OK
#define SM_HUGE_OK 1
#endif
#define PAGE ((size_t)4096)
#define ALIGNED SIZE_MAX /* hdr.mapped of a large block from aligned_alloc (sanitizer builds) */

struct padded_counter {
    alignas(LINE) atomic_uint_fast64_t v;
    char pad[LINE - sizeof(atomic_uint_fast64_t)];
};

static struct padded_counter cur_bytes;
static struct padded_counter peak_bytes;
static struct padded_counter fail_countdown; /* 0: off; 1: the next allocation fails */
static struct padded_counter large_count;    /* blocks of SM_HUGE_MIN bytes or more */

/* n bytes after a header, zeroed when `zero`; no accounting, no injection. */
static unsigned char *raw_alloc(size_t n, int zero)
{
    if (n > SIZE_MAX - HDR) {
        return NULL;
    }
    struct hdr h = {n, 0};
    unsigned char *p = NULL;
    if (n >= SM_HUGE_MIN) {
        atomic_fetch_add_explicit(&large_count.v, 1, memory_order_relaxed);
    }
    if (SM_HUGE_OK && n >= SM_HUGE_MIN) {
        size_t back;
        p = sm_huge_map(n, HDR, &back); /* fresh anonymous pages are zero */
        h.mapped = back + 1;
    }
    if (!SM_HUGE_OK && n >= SM_HUGE_MIN && n <= SIZE_MAX - 2 * PAGE) {
        /* the caller's bytes on a page boundary, the header just before them */
        unsigned char *base = aligned_alloc(PAGE, (PAGE + n + PAGE - 1) & ~(PAGE - 1));
        if (base != NULL) {
            if (zero) {
                memset(base + PAGE, 0, n);
            }
            p = base + PAGE - HDR;
            h.mapped = ALIGNED;
        }
    }
    if (p == NULL) {
        h.mapped = 0;
        p = zero ? calloc(1, n + HDR) : malloc(n + HDR);
    }
    if (p != NULL) {
        memcpy(p, &h, sizeof(h));
    }
    return p;
}

static void raw_free(unsigned char *base)
{
    struct hdr h;
    memcpy(&h, base, sizeof(h));
    if (h.mapped == ALIGNED) {
        free(base - (PAGE - HDR));
    } else if (h.mapped != 0) {
        sm_huge_unmap(base, h.n, HDR, h.mapped - 1);
    } else {
        free(base);
    }
}

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
    if (should_fail()) {
        return NULL;
    }
    unsigned char *p = raw_alloc(n, 0);
    if (p == NULL) {
        return NULL;
    }
    account(n, 0);
    return p + HDR;
}

void *sm_calloc(size_t count, size_t size)
{
    if (size != 0 && count > (SIZE_MAX - HDR) / size) {
        return NULL;
    }
    const size_t n = count * size;
    if (should_fail()) {
        return NULL;
    }
    unsigned char *p = raw_alloc(n, 1);
    if (p == NULL) {
        return NULL;
    }
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
    struct hdr h;
    memcpy(&h, base, sizeof(h));
    const size_t old = h.n;
    unsigned char *p;
    if (h.mapped == 0 && n < SM_HUGE_MIN) { /* a large block is a mapping (or ALIGNED) */
        p = realloc(base, n + HDR);
        if (p == NULL) {
            return NULL;
        }
        h.n = n;
        memcpy(p, &h, sizeof(h));
    } else { /* into or out of a mapping: a new block, the common bytes copied */
        p = raw_alloc(n, 0);
        if (p == NULL) {
            return NULL;
        }
        memcpy(p + HDR, ptr, old < n ? old : n);
        raw_free(base);
    }
    account(n, old);
    return p + HDR;
}

void sm_free(void *ptr)
{
    if (ptr == NULL) {
        return;
    }
    unsigned char *base = (unsigned char *)ptr - HDR;
    struct hdr h;
    memcpy(&h, base, sizeof(h));
    account(0, h.n);
    raw_free(base);
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

uint64_t sm_alloc_large_count(void)
{
    return atomic_load(&large_count.v);
}

void sm_alloc_fail_at(uint64_t n)
{
    atomic_store(&fail_countdown.v, n);
}
