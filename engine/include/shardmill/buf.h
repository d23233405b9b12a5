/* Borrowed byte views and owned byte buffers (STYLE B6).
 * A `struct sm_bytes` argument is borrowed for the call. A `struct sm_buf` is owned by its holder
 * and released by sm_buf_free(). Callees reserve the exact known size (never grow blindly). */
#ifndef SM_CORE_BUF_H
#define SM_CORE_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "shardmill/status.h"

struct sm_bytes {
    const uint8_t *ptr;
    size_t len;
};

struct sm_buf {
    uint8_t *ptr;
    size_t len, cap;
};

#define SM_BUF_INIT                                                                                \
    {                                                                                              \
        NULL, 0, 0                                                                                 \
    }

/* Ensures cap >= n (contents up to len kept). Reallocates to exactly n when it must grow.
 * SM_E_NOMEM on allocation failure. */
sm_status sm_buf_reserve(struct sm_buf *b, size_t n, struct sm_err *err);

/* Copies `src` into b (exact reservation). */
sm_status sm_buf_set(struct sm_buf *b, struct sm_bytes src, struct sm_err *err);

/* Releases the memory; accepts a zeroed buffer. Leaves b empty. */
void sm_buf_free(struct sm_buf *b);

/* Exchanges two buffers (used to ping-pong codec stages without copies). */
void sm_buf_swap(struct sm_buf *a, struct sm_buf *b);

static inline struct sm_bytes sm_buf_bytes(const struct sm_buf *b)
{
    struct sm_bytes v = {b->ptr, b->len};
    return v;
}

static inline struct sm_bytes sm_bytes_of(const void *p, size_t n)
{
    struct sm_bytes v = {(const uint8_t *)p, n};
    return v;
}

#endif
