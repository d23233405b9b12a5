/* The source vtable's dispatch (shardmill/source.h): the info a source was opened with, its
 * callbacks, and one counter of the bytes its reads took from its files (relaxed atomics: read
 * after the threads joined). The file formats live in source_*.c and are opened by
 * sm_source_open (source_open.c). */
#include "source_int.h"

#include <jansson.h>
#include <string.h>

#include "shardmill/alloc.h"

sm_status sm_source_new(const struct sm_source_ops *ops, void *user,
                        const struct sm_source_info *info, struct sm_source **out,
                        struct sm_err *err)
{
    *out = NULL;
    if (ops == NULL || ops->read_box == NULL || info->ndim == 0 || info->ndim > SM_MAX_DIMS ||
        sm_dtype_size(info->dtype) == 0) {
        SM_FAIL(err, SM_E_INTERNAL, "a source without read_box, dimensions or data type");
    }
    struct sm_source *s = sm_calloc(1, sizeof(*s));
    if (s == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a source");
    }
    s->ops = ops;
    s->user = user;
    s->info = *info;
    for (unsigned d = 0; d < info->ndim; d++) { /* a hint of 0 reads as "no hint": the whole axis */
        if (s->info.slab[d] == 0 || s->info.slab[d] > s->info.shape[d]) {
            s->info.slab[d] = s->info.shape[d] > 0 ? s->info.shape[d] : 1;
        }
    }
    atomic_init(&s->bytes_read, 0);
    *out = s;
    return SM_OK;
}

const struct sm_source_info *sm_source_info(const struct sm_source *s)
{
    return &s->info;
}

sm_status sm_source_plan(struct sm_source *s, const uint64_t *off, const uint64_t *shape,
                         uint64_t memory_bytes, struct sm_err *err)
{
    return s->ops->plan != NULL ? s->ops->plan(s->user, off, shape, memory_bytes, err) : SM_OK;
}

sm_status sm_source_read_box(struct sm_source *s, int thread, const uint64_t *off,
                             const uint64_t *shape, void *out, struct sm_err *err)
{
    for (unsigned d = 0; d < s->info.ndim; d++) {
        if (off[d] > s->info.shape[d] || shape[d] > s->info.shape[d] - off[d]) {
            SM_FAIL(err, SM_E_INTERNAL, "box outside the source on axis %u", d);
        }
    }
    uint64_t n = 0;
    const sm_status st = s->ops->read_box(s->user, thread, off, shape, out, &n, err);
    atomic_fetch_add_explicit(&s->bytes_read, n, memory_order_relaxed);
    return st;
}

void sm_source_count(struct sm_source *s, uint64_t n)
{
    atomic_fetch_add_explicit(&s->bytes_read, n, memory_order_relaxed);
}

uint64_t sm_source_bytes_read(const struct sm_source *s)
{
    return atomic_load_explicit(&s->bytes_read, memory_order_relaxed);
}

void sm_source_set_input_bytes(struct sm_source *s, uint64_t n)
{
    s->input_bytes = n;
}

uint64_t sm_source_input_bytes(const struct sm_source *s)
{
    if (s->input_bytes != 0) {
        return s->input_bytes;
    }
    json_t *d = sm_source_describe(s);
    const json_t *b = json_object_get(json_object_get(d, "file"), "bytes");
    const uint64_t n =
        json_is_integer(b) && json_integer_value(b) > 0 ? (uint64_t)json_integer_value(b) : 0;
    json_decref(d);
    return n;
}

json_t *sm_source_describe(const struct sm_source *s)
{
    if (s->ops->describe != NULL) {
        return s->ops->describe(s->user);
    }
    return json_pack("{s:s}", "format", s->info.format);
}

void sm_source_close(struct sm_source *s)
{
    if (s == NULL) {
        return;
    }
    if (s->ops->close != NULL) {
        s->ops->close(s->user);
    }
    sm_free(s);
}
