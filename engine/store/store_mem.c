/* The `mem` store: objects in memory, for tests and fixtures. Thread-safe (one mutex): a reference
 * driver for the store conformance suite, with the same range semantics as the file store. */
#include "shardmill/sm_config.h"

#include "shardmill/store.h"

#include <pthread.h>
#include <string.h>

#include "shardmill/alloc.h"

struct mem_obj {
    char *key;
    struct sm_buf data;
};

struct mem_store {
    struct sm_store base;
    pthread_mutex_t mu;
    struct mem_obj *objs;
    size_t n, cap;
};

static struct mem_store *ms_of(struct sm_store *s)
{
    return (struct mem_store *)s;
}

static struct mem_obj *find(struct mem_store *ms, const char *key)
{
    for (size_t i = 0; i < ms->n; i++) {
        if (strcmp(ms->objs[i].key, key) == 0) {
            return &ms->objs[i];
        }
    }
    return NULL;
}

static sm_status mem_get(struct sm_store *s, const char *key, struct sm_range r,
                         enum sm_io_class cls, struct sm_buf *out, bool *found, uint64_t *objsize,
                         struct sm_err *err)
{
    (void)cls;
    struct mem_store *ms = ms_of(s);
    sm_status st = SM_OK;
    pthread_mutex_lock(&ms->mu);
    const struct mem_obj *o = find(ms, key);
    if (o != NULL) {
        *found = true;
        uint64_t size = o->data.len, off = 0, n = size;
        if (objsize != NULL) {
            *objsize = size;
        }
        if (r.kind == SM_RANGE_SPAN) {
            off = r.offset < size ? r.offset : size;
            n = r.len < size - off ? r.len : size - off;
        } else if (r.kind == SM_RANGE_SUFFIX) {
            n = r.len < size ? r.len : size;
            off = size - n;
        } else {
            st = sm_store_check_len(s, key, size, err);
        }
        if (st == SM_OK) {
            /* an empty object has no buffer: never form NULL + 0 (UBSan) */
            const uint8_t *p = o->data.ptr != NULL ? o->data.ptr + off : NULL;
            st = sm_buf_set(out, sm_bytes_of(p, (size_t)n), err);
        }
    }
    pthread_mutex_unlock(&ms->mu);
    return st;
}

static sm_status mem_size(struct sm_store *s, const char *key, uint64_t *size, bool *found,
                          struct sm_err *err)
{
    (void)err;
    struct mem_store *ms = ms_of(s);
    pthread_mutex_lock(&ms->mu);
    const struct mem_obj *o = find(ms, key);
    if (o != NULL) {
        *found = true;
        *size = o->data.len;
    }
    pthread_mutex_unlock(&ms->mu);
    return SM_OK;
}

static sm_status mem_put(struct sm_store *s, const char *key, struct sm_bytes data,
                         struct sm_err *err)
{
    struct mem_store *ms = ms_of(s);
    sm_status st = SM_OK;
    struct sm_buf copy = SM_BUF_INIT;
    SM_TRY(sm_buf_set(&copy, data, err));
    pthread_mutex_lock(&ms->mu);
    struct mem_obj *o = find(ms, key);
    if (o == NULL) {
        if (ms->n == ms->cap) {
            size_t cap = ms->cap == 0 ? 8 : ms->cap * 2;
            struct mem_obj *v = sm_realloc(ms->objs, cap * sizeof(*v));
            if (v == NULL) {
                st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot store object");
                goto out;
            }
            ms->objs = v;
            ms->cap = cap;
        }
        char *k = sm_strdup(key);
        if (k == NULL) {
            st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot store object");
            goto out;
        }
        o = &ms->objs[ms->n++];
        o->key = k;
        o->data = copy;
        copy = (struct sm_buf)SM_BUF_INIT; /* moved into the store */
    } else {
        sm_buf_swap(&o->data, &copy);
    }
out:
    pthread_mutex_unlock(&ms->mu);
    sm_buf_free(&copy); /* the replaced data, or ours on failure; empty if it was moved */
    return st;
}

static sm_status mem_list(struct sm_store *s, const char *prefix, struct sm_strv *out,
                          struct sm_err *err)
{
    struct mem_store *ms = ms_of(s);
    size_t plen = strlen(prefix);
    sm_status st = SM_OK;
    pthread_mutex_lock(&ms->mu);
    for (size_t i = 0; i < ms->n && st == SM_OK; i++) {
        const char *k = ms->objs[i].key;
        if (plen > 0 && (strncmp(k, prefix, plen) != 0 || k[plen] != '/')) {
            continue;
        }
        const char *name = k + (plen > 0 ? plen + 1 : 0);
        size_t nlen = strcspn(name, "/");
        bool dup = false;
        for (size_t j = 0; j < out->n && !dup; j++) {
            dup = strlen(out->v[j]) == nlen && strncmp(out->v[j], name, nlen) == 0;
        }
        if (dup) {
            continue;
        }
        st = sm_strv_push(out, name, nlen, err);
    }
    pthread_mutex_unlock(&ms->mu);
    return st;
}

static void mem_close(struct sm_store *s)
{
    struct mem_store *ms = ms_of(s);
    for (size_t i = 0; i < ms->n; i++) {
        sm_free(ms->objs[i].key);
        sm_buf_free(&ms->objs[i].data);
    }
    sm_free(ms->objs);
    pthread_mutex_destroy(&ms->mu);
    sm_free(ms);
}

static const struct sm_store_ops mem_ops = {
    .scheme = "mem",
    .caps = SM_STORE_RANGE | SM_STORE_WRITE | SM_STORE_LIST | SM_STORE_THREADSAFE,
    .get = mem_get,
    .get_many = NULL,
    .size = mem_size,
    .put_atomic = mem_put,
    .list = mem_list,
    .close = mem_close,
};

sm_status sm_store_mem_new(struct sm_store **out, struct sm_err *err)
{
    *out = NULL;
    struct mem_store *ms = sm_calloc(1, sizeof(*ms));
    char *url = sm_strdup("mem:");
    if (ms == NULL || url == NULL) {
        sm_free(ms);
        sm_free(url);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a mem store");
    }
    pthread_mutex_init(&ms->mu, NULL);
    ms->base.ops = &mem_ops;
    ms->base.url = url;
    *out = &ms->base;
    return SM_OK;
}
