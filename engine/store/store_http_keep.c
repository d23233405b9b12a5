/* The HTTP store's whole-object keep (store_http_keep_int.h): a server that ignores Range is
 * detected by the first ranged request (the others wait for it); from then on each object is
 * fetched whole once, kept in a byte-capped LRU (charged its bytes, within max_object_bytes or
 * 256 MiB) and sliced for every range. Entries being fetched are pending, and a caller asking
 * for one waits for it (sm_lru_fetch_wait). The requests are the transport's (store_http.c). */
#include "shardmill/sm_config.h"

#include "store_http_keep_int.h"

#include <string.h>

#include "shardmill/alloc.h"
#include "store_http_int.h"

/* Byte cap of the whole objects kept for a server that ignores Range, when the store has no
 * max_object_bytes (the array layer sets it from limits.max_object_bytes). */
#define KEEP_DEFAULT_BYTES (256u << 20)

/* A whole object fetched because the server ignores Range. Pending while !fetch.ready (in the
 * pending list); ready entries that fit are kept (in the LRU, charged their bytes). */
struct kept {
    struct sm_lru_node lru; /* in `pending` or in `kept`, or in neither */
    char *key;
    struct sm_buf data;
    struct sm_lru_fetch fetch; /* failed: the fetch failed, or the object was not kept */
    bool found;
};

static uint64_t keep_budget(const struct sm_http_keep *k)
{
    const uint64_t cap = k->store->max_object_bytes;
    return cap != 0 ? cap : KEEP_DEFAULT_BYTES;
}

static void kept_free(struct kept *e)
{
    sm_buf_free(&e->data);
    sm_free(e->key);
    sm_free(e);
}

/* A ready entry leaves the LRU and is freed (k->mu held, nobody waits on it). */
static void kept_drop(struct sm_http_keep *k, struct kept *e)
{
    sm_lru_unlink(&k->kept, &e->lru);
    kept_free(e);
}

static struct kept *kept_of(struct sm_lru_node *n)
{
    return SM_LRU_ENTRY(n, struct kept, lru);
}

/* The entry of `key` in the list l, newest first; NULL if none. */
static struct kept *find_in(const struct sm_lru *l, const char *key)
{
    for (struct sm_lru_node *n = sm_lru_newest(l); n != NULL; n = sm_lru_older(n)) {
        if (strcmp(kept_of(n)->key, key) == 0) {
            return kept_of(n);
        }
    }
    return NULL;
}

static struct kept *kept_find(struct sm_http_keep *k, const char *key)
{
    struct kept *e = find_in(&k->pending, key);
    return e != NULL ? e : find_in(&k->kept, key);
}

/* Makes a ready entry part of the LRU if it fits the budget (k->mu held): false if not. */
static bool keep_ready(struct sm_http_keep *k, struct kept *e)
{
    const uint64_t charge = e->data.cap + sizeof(*e) + strlen(e->key) + 1;
    const uint64_t budget = keep_budget(k);
    if (e->data.len > budget) {
        return false;
    }
    if (charge > budget) { /* an object of exactly the limit: kept alone */
        struct sm_lru_node *n;
        while ((n = sm_lru_oldest(&k->kept)) != NULL && kept_of(n)->fetch.waiters == 0) {
            kept_drop(k, kept_of(n));
        }
        if (sm_lru_newest(&k->kept) != NULL) {
            return false;
        }
        sm_lru_push_front(&k->kept, &e->lru, charge);
        return true;
    }
    for (struct sm_lru_node *v = sm_lru_oldest(&k->kept);
         v != NULL && sm_lru_over(&k->kept, charge, budget, UINT64_MAX);) {
        struct sm_lru_node *newer = sm_lru_newer(v);
        if (kept_of(v)->fetch.waiters == 0) {
            kept_drop(k, kept_of(v));
        }
        v = newer;
    }
    if (sm_lru_over(&k->kept, charge, budget, UINT64_MAX)) {
        return false;
    }
    sm_lru_push_front(&k->kept, &e->lru, charge);
    return true;
}

/* Keeps the whole object a ranged request received (the buffer moves into the keep; k->mu
 * held). Nothing if the key is already kept or pending, or the object does not fit. */
static void keep_whole(struct sm_http_keep *k, const char *key, struct sm_buf *whole)
{
    if (kept_find(k, key) != NULL) {
        return;
    }
    struct kept *e = sm_calloc(1, sizeof(*e));
    char *name = sm_strdup(key);
    if (e == NULL || name == NULL) {
        sm_free(e);
        sm_free(name);
        return;
    }
    e->key = name;
    e->data = *whole;
    e->fetch.ready = e->found = true;
    if (keep_ready(k, e)) {
        *whole = (struct sm_buf)SM_BUF_INIT; /* moved */
    } else {
        e->data = (struct sm_buf)SM_BUF_INIT;
        kept_free(e);
    }
}

static sm_status slice_into(struct sm_buf *out, struct sm_bytes whole, struct sm_range r,
                            struct sm_err *err)
{
    uint64_t off, n;
    sm_http_slice(r, whole.len, &off, &n);
    return sm_buf_set(out, sm_bytes_of(whole.ptr + off, (size_t)n), err);
}

/* A ranged GET whose response may be the whole object (*whole): slices it into out, keeping the
 * whole object when it fits. `probe`: this was the first ranged request, others wait for it. */
static sm_status ranged_direct(struct sm_http_keep *k, const char *key, struct sm_range r,
                               enum sm_io_class cls, struct sm_buf *out, bool *found,
                               uint64_t *objsize, bool probe, struct sm_err *err)
{
    bool whole;
    long code;
    sm_status st = k->fetch(k->fetch_ctx, key, r, cls, out, found, objsize, &whole, &code, err);
    pthread_mutex_lock(&k->mu);
    if (st == SM_OK && whole) {
        atomic_fetch_add_explicit(&k->whole_fetches, 1, memory_order_relaxed);
        k->ranges = SM_HTTP_RANGES_IGNORED;
        struct sm_buf w = *out;
        *out = (struct sm_buf)SM_BUF_INIT;
        st = slice_into(out, sm_buf_bytes(&w), r, err);
        keep_whole(k, key, &w);
        sm_buf_free(&w);
    } else if (st == SM_OK && code == 206 && k->ranges == SM_HTTP_RANGES_UNKNOWN) {
        k->ranges = SM_HTTP_RANGES_HONOURED;
    }
    if (probe) {
        k->probing = false;
    }
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    return st;
}

/* The server ignores Range: fetch the object whole into the pending entry e, then publish it. */
static sm_status fetch_whole(struct sm_http_keep *k, struct kept *e, struct sm_range r,
                             enum sm_io_class cls, struct sm_buf *out, bool *found,
                             uint64_t *objsize, struct sm_err *err)
{
    bool whole;
    long code;
    uint64_t size = UINT64_MAX;
    sm_status st = k->fetch(k->fetch_ctx, e->key, sm_range_all(), cls, &e->data, &e->found, &size,
                            &whole, &code, err);
    pthread_mutex_lock(&k->mu);
    sm_lru_unlink(&k->pending, &e->lru);
    if (st == SM_OK) {
        atomic_fetch_add_explicit(&k->whole_fetches, e->found ? 1 : 0, memory_order_relaxed);
        *found = e->found;
        if (e->found) {
            *objsize = e->data.len;
            st = slice_into(out, sm_buf_bytes(&e->data), r, err);
        }
    }
    sm_lru_fetch_done(&e->fetch, st == SM_OK && keep_ready(k, e), &k->cv);
    if (e->fetch.failed && e->fetch.waiters == 0) {
        kept_free(e);
    }
    pthread_mutex_unlock(&k->mu);
    return st;
}

sm_status sm_http_keep_get(struct sm_http_keep *k, const char *key, struct sm_range r,
                           enum sm_io_class cls, struct sm_buf *out, bool *found, uint64_t *objsize,
                           struct sm_err *err)
{
    pthread_mutex_lock(&k->mu);
    for (;;) {
        struct kept *e = kept_find(k, key);
        if (e != NULL) {
            if (sm_lru_fetch_wait(&e->fetch, &k->mu, &k->cv)) { /* sliced from it: no request */
                sm_lru_touch(&k->kept, &e->lru);
                atomic_fetch_add_explicit(&k->kept_slices, 1, memory_order_relaxed);
                *found = e->found;
                sm_status st = SM_OK;
                if (e->found) {
                    *objsize = e->data.len;
                    st = slice_into(out, sm_buf_bytes(&e->data), r, err);
                }
                pthread_mutex_unlock(&k->mu);
                return st;
            }
            if (e->fetch.waiters == 0) { /* failed or too large to keep: nobody else holds it */
                kept_free(e);
            }
            pthread_mutex_unlock(&k->mu);
            return ranged_direct(k, key, r, cls, out, found, objsize, false, err);
        }
        if (k->ranges == SM_HTTP_RANGES_HONOURED) {
            pthread_mutex_unlock(&k->mu);
            return ranged_direct(k, key, r, cls, out, found, objsize, false, err);
        }
        if (k->ranges == SM_HTTP_RANGES_IGNORED) {
            e = sm_calloc(1, sizeof(*e));
            char *name = sm_strdup(key);
            if (e == NULL || name == NULL) {
                sm_free(e);
                sm_free(name);
                pthread_mutex_unlock(&k->mu);
                SM_FAIL(err, SM_E_NOMEM, "cannot allocate a kept-object entry");
            }
            e->key = name;
            e->data = (struct sm_buf)SM_BUF_INIT;
            sm_lru_push_front(&k->pending, &e->lru, 0); /* later callers for it wait for it */
            pthread_mutex_unlock(&k->mu);
            return fetch_whole(k, e, r, cls, out, found, objsize, err);
        }
        if (!k->probing) {
            k->probing = true;
            pthread_mutex_unlock(&k->mu);
            return ranged_direct(k, key, r, cls, out, found, objsize, true, err);
        }
        pthread_cond_wait(&k->cv, &k->mu); /* the probe's answer, not an entry's fetch */
    }
}

void sm_http_keep_init(struct sm_http_keep *k, const struct sm_store *store, sm_http_fetch_fn fetch,
                       void *ctx)
{
    memset(k, 0, sizeof(*k));
    k->store = store;
    k->fetch = fetch;
    k->fetch_ctx = ctx;
    k->ranges = SM_HTTP_RANGES_UNKNOWN;
    atomic_init(&k->whole_fetches, 0);
    atomic_init(&k->kept_slices, 0);
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
}

void sm_http_keep_destroy(struct sm_http_keep *k)
{
    struct sm_lru_node *n;
    while ((n = sm_lru_pop_oldest(&k->kept)) != NULL) {
        kept_free(kept_of(n));
    }
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
}

void sm_http_keep_stats(struct sm_http_keep *k, struct sm_http_stats *out)
{
    pthread_mutex_lock(&k->mu);
    out->range_ignored = k->ranges == SM_HTTP_RANGES_IGNORED;
    pthread_mutex_unlock(&k->mu);
    out->whole_fetches = atomic_load_explicit(&k->whole_fetches, memory_order_relaxed);
    out->kept_slices = atomic_load_explicit(&k->kept_slices, memory_order_relaxed);
}
