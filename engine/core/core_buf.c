/* Owned byte buffers with exact reservations (STYLE B6). */
#include "shardmill/buf.h"

#include <string.h>

#include "shardmill/alloc.h"

sm_status sm_buf_reserve(struct sm_buf *b, size_t n, struct sm_err *err)
{
    if (b->cap >= n) {
        return SM_OK;
    }
    uint8_t *p = sm_realloc(b->ptr, n == 0 ? 1 : n);
    if (p == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate %zu bytes", n);
    }
    b->ptr = p;
    b->cap = n;
    return SM_OK;
}

sm_status sm_buf_set(struct sm_buf *b, struct sm_bytes src, struct sm_err *err)
{
    SM_TRY(sm_buf_reserve(b, src.len, err));
    if (src.len != 0) {
        memcpy(b->ptr, src.ptr, src.len);
    }
    b->len = src.len;
    return SM_OK;
}

void sm_buf_free(struct sm_buf *b)
{
    sm_free(b->ptr);
    b->ptr = NULL;
    b->len = 0;
    b->cap = 0;
}

void sm_buf_swap(struct sm_buf *a, struct sm_buf *b)
{
    struct sm_buf t = *a;
    *a = *b;
    *b = t;
}
