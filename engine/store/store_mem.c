/* The `mem` store: objects in memory, for tests and fixtures. Thread-safe (one mutex): a reference
 * driver for the store conformance suite, with the same range semantics as the file store. Staged
 * objects live apart from the published ones until commit (nothing to fsync). */
#include "shardmill/sm_config.h"

#include "shardmill/store.h"

#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "shardmill/alloc.h"

struct mem_obj {
    char *key;
    struct sm_buf data;
    uint64_t ticket; /* staged objects only */
};

struct mem_store {
    struct sm_store base;
    pthread_mutex_t mu;
    struct mem_obj *objs;
    size_t n, cap;
    struct mem_obj *staged; /* staged, not yet committed: invisible to get, size and list */
    size_t nstaged, capstaged;
    uint64_t next_ticket;
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

/* Appends an entry (key copied, data moved in) to an array; caller holds the lock. */
static sm_status append_locked(struct mem_obj **arr, size_t *n, size_t *cap, const char *key,
                               struct sm_buf *data, uint64_t ticket, struct sm_err *err)
{
    if (*n == *cap) {
        const size_t c = *cap == 0 ? 8 : *cap * 2;
        struct mem_obj *v = sm_realloc(*arr, c * sizeof(*v));
        if (v == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot store object");
        }
        *arr = v;
        *cap = c;
    }
    char *k = sm_strdup(key);
    if (k == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot store object");
    }
    struct mem_obj *o = &(*arr)[(*n)++];
    o->key = k;
    o->data = *data;
    o->ticket = ticket;
    *data = (struct sm_buf)SM_BUF_INIT; /* moved into the store */
    return SM_OK;
}

/* Makes key hold *data (swapped in: *data gets the replaced bytes, or is emptied). */
static sm_status publish_locked(struct mem_store *ms, const char *key, struct sm_buf *data,
                                struct sm_err *err)
{
    struct mem_obj *o = find(ms, key);
    if (o != NULL) {
        sm_buf_swap(&o->data, data);
        return SM_OK;
    }
    return append_locked(&ms->objs, &ms->n, &ms->cap, key, data, 0, err);
}

static sm_status mem_put(struct sm_store *s, const char *key, struct sm_bytes data,
                         struct sm_err *err)
{
    struct mem_store *ms = ms_of(s);
    struct sm_buf copy = SM_BUF_INIT;
    SM_TRY(sm_buf_set(&copy, data, err));
    pthread_mutex_lock(&ms->mu);
    const sm_status st = publish_locked(ms, key, &copy, err);
    pthread_mutex_unlock(&ms->mu);
    sm_buf_free(&copy); /* the replaced data, or ours on failure; empty if it was moved */
    return st;
}

static sm_status mem_stage(struct sm_store *s, const char *key, struct sm_bytes data,
                           unsigned flags, uint64_t *ticket, struct sm_err *err)
{
    (void)flags; /* memory has nothing to make durable, and no page cache */
    struct mem_store *ms = ms_of(s);
    struct sm_buf copy = SM_BUF_INIT;
    SM_TRY(sm_buf_set(&copy, data, err));
    pthread_mutex_lock(&ms->mu);
    const uint64_t t = ms->next_ticket++;
    const sm_status st =
        append_locked(&ms->staged, &ms->nstaged, &ms->capstaged, key, &copy, t, err);
    pthread_mutex_unlock(&ms->mu);
    sm_buf_free(&copy);
    if (st == SM_OK) {
        *ticket = t;
    }
    return st;
}

/* Index of the staged entry (key, ticket), or nstaged. Caller holds the lock. */
static size_t find_staged(const struct mem_store *ms, const char *key, uint64_t ticket)
{
    size_t i = 0;
    while (i < ms->nstaged &&
           (ms->staged[i].ticket != ticket || strcmp(ms->staged[i].key, key) != 0)) {
        i++;
    }
    return i;
}

/* Removes staged entry i (its data moved to *data first if data is non-NULL). */
static void drop_staged_locked(struct mem_store *ms, size_t i, struct sm_buf *data)
{
    if (data != NULL) {
        sm_buf_swap(&ms->staged[i].data, data);
    }
    sm_free(ms->staged[i].key);
    sm_buf_free(&ms->staged[i].data);
    ms->staged[i] = ms->staged[--ms->nstaged];
}

static sm_status mem_commit(struct sm_store *s, const char *key, uint64_t ticket,
                            struct sm_err *err)
{
    struct mem_store *ms = ms_of(s);
    struct sm_buf data = SM_BUF_INIT;
    sm_status st = SM_OK;
    pthread_mutex_lock(&ms->mu);
    const size_t i = find_staged(ms, key, ticket);
    if (i == ms->nstaged) {
        st = SM_ERR(err, SM_E_INTERNAL, "no staged object %" PRIu64 " for this key", ticket);
    } else {
        drop_staged_locked(ms, i, &data);
        st = publish_locked(ms, key, &data, err);
    }
    pthread_mutex_unlock(&ms->mu);
    sm_buf_free(&data);
    return st;
}

static void mem_abort(struct sm_store *s, const char *key, uint64_t ticket)
{
    struct mem_store *ms = ms_of(s);
    pthread_mutex_lock(&ms->mu);
    const size_t i = find_staged(ms, key, ticket);
    if (i < ms->nstaged) {
        drop_staged_locked(ms, i, NULL);
    }
    pthread_mutex_unlock(&ms->mu);
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
    for (size_t i = 0; i < ms->nstaged; i++) {
        sm_free(ms->staged[i].key);
        sm_buf_free(&ms->staged[i].data);
    }
    sm_free(ms->staged);
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
    .stage = mem_stage,
    .commit = mem_commit,
    .abort = mem_abort,
    .sync = NULL, /* nothing to make durable */
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
