/* The encoded-object cache (SPEC §3), a store wrapping a store (zarrs storage_adapter idea):
 * whole responses keyed by (key, range) in a byte-capped LRU. Misses are single-flight: the first
 * caller inserts a pending entry and fetches outside the lock, later callers for the same entry
 * wait for it (sm_lru_fetch_wait), so a chunk touched by many tiles and threads is requested once.
 * "Not found" is cached too (a missing chunk is a fill chunk on every pass).
 * Entries are immutable once ready and reference-counted: a hit takes a reference under the lock
 * and reads the bytes outside it, either lending them (sm_store_get_borrow) or copying them into
 * the caller's buffer (get). An entry evicted, or not admitted, while referenced leaves the table
 * at once and is freed by its last holder. */
#include "shardmill/sm_config.h"

#include "shardmill/store.h"

#include <pthread.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/lru.h"

struct centry {
    struct sm_lru_node lru; /* linked while admitted, charged its bytes against the cap */
    struct centry *hnext;   /* hash chain */
    char *key;
    struct sm_range range;
    uint64_t hash;
    struct sm_lru_fetch fetch; /* ready, failed, and the callers waiting for it to become ready */
    bool found;
    bool listed;   /* in the hash table (new callers find it) */
    unsigned refs; /* holders of its bytes (the fetching owner, borrowers, copiers) */
    struct sm_buf data;
    uint64_t objsize;
};

#define NBUCKETS 4096

struct cache_store {
    struct sm_store base;
    struct sm_store *inner;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t max_bytes;
    struct centry *buckets[NBUCKETS];
    struct sm_lru lru;        /* admitted entries: st.bytes and st.peak_bytes are its counters */
    struct sm_cache_stats st; /* hits, misses, evictions */
};

static struct cache_store *cs_of(struct sm_store *s)
{
    return (struct cache_store *)s;
}

static uint64_t hash_of(const char *key, struct sm_range r)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = key; *p != '\0'; p++) {
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    }
    h ^= ((uint64_t)r.kind << 62) ^ (r.offset * 0x9e3779b97f4a7c15ull) ^ r.len;
    return h;
}

static bool same(const struct centry *e, const char *key, struct sm_range r, uint64_t h)
{
    return e->hash == h && e->range.kind == r.kind && e->range.offset == r.offset &&
           e->range.len == r.len && strcmp(e->key, key) == 0;
}

static struct centry **slot_of(struct cache_store *cs, const char *key, struct sm_range r,
                               uint64_t h)
{
    struct centry **pp = &cs->buckets[h % NBUCKETS];
    while (*pp != NULL && !same(*pp, key, r, h)) {
        pp = &(*pp)->hnext;
    }
    return pp;
}

/* Frees e once it is out of the table and nobody holds or waits for it (the lock is held). */
static void maybe_free(struct centry *e)
{
    if (!e->listed && e->refs == 0 && e->fetch.waiters == 0) {
        sm_buf_free(&e->data);
        sm_free(e->key);
        sm_free(e);
    }
}

/* Takes e out of the hash chain and the LRU (uncharging it), then frees it if unheld. */
static void delist(struct cache_store *cs, struct centry *e)
{
    if (e->listed) {
        struct centry **pp = slot_of(cs, e->key, e->range, e->hash);
        if (*pp == e) {
            *pp = e->hnext;
        }
        e->hnext = NULL;
        e->listed = false;
    }
    sm_lru_unlink(&cs->lru, &e->lru);
    maybe_free(e);
}

static void evict_for(struct cache_store *cs, uint64_t need)
{
    struct sm_lru_node *n;
    while ((n = sm_lru_oldest(&cs->lru)) != NULL &&
           sm_lru_over(&cs->lru, need, cs->max_bytes, UINT64_MAX)) {
        delist(cs, SM_LRU_ENTRY(n, struct centry, lru)); /* a held entry outlives the table */
        cs->st.evictions++;
    }
}

static void entry_release(struct cache_store *cs, struct centry *e)
{
    pthread_mutex_lock(&cs->mu);
    e->refs--;
    maybe_free(e);
    pthread_mutex_unlock(&cs->mu);
}

/* A referenced ready entry for (key, r) in *out, fetched once by whoever missed it first; or
 * *out NULL when the caller must read uncached (the fetch it waited for failed, or no memory for
 * an entry). An error is the owner's own failed fetch. */
static sm_status acquire(struct cache_store *cs, const char *key, struct sm_range r,
                         enum sm_io_class cls, struct centry **out, struct sm_err *err)
{
    *out = NULL;
    const uint64_t h = hash_of(key, r);
    pthread_mutex_lock(&cs->mu);
    struct centry **pp = slot_of(cs, key, r, h);
    struct centry *e = *pp;
    if (e != NULL) {
        if (sm_lru_fetch_wait(&e->fetch, &cs->mu, &cs->cv)) {
            cs->st.hits++;
            sm_lru_touch(&cs->lru, &e->lru); /* nothing if it was not admitted */
            e->refs++;
            pthread_mutex_unlock(&cs->mu);
            *out = e;
            return SM_OK;
        }
        maybe_free(e); /* the fetch we waited for failed (and left the table): read ourselves */
        cs->st.misses++;
        pthread_mutex_unlock(&cs->mu);
        return SM_OK;
    }
    cs->st.misses++;
    e = sm_calloc(1, sizeof(*e));
    char *k = sm_strdup(key);
    if (e == NULL || k == NULL) {
        sm_free(e);
        sm_free(k);
        pthread_mutex_unlock(&cs->mu);
        return SM_OK;
    }
    e->key = k;
    e->range = r;
    e->hash = h;
    e->objsize = UINT64_MAX;
    e->listed = true;
    e->refs = 1;
    *pp = e; /* pending: later callers wait for it */
    pthread_mutex_unlock(&cs->mu);

    sm_status st =
        sm_store_get_sized(cs->inner, key, r, cls, &e->data, &e->found, &e->objsize, err);

    pthread_mutex_lock(&cs->mu);
    sm_lru_fetch_done(&e->fetch, st == SM_OK, &cs->cv); /* the waiters run once we unlock */
    const uint64_t charge = e->data.cap + sizeof(*e) + strlen(e->key) + 1;
    if (!e->fetch.failed && charge <= cs->max_bytes) {
        evict_for(cs, charge);
        sm_lru_push_front(&cs->lru, &e->lru, charge);
    } else {
        delist(cs, e); /* too large, or failed: held by us; waiters see `failed` and refetch */
    }
    if (e->fetch.failed) {
        e->refs--;
        maybe_free(e);
        e = NULL;
    }
    pthread_mutex_unlock(&cs->mu);
    *out = e;
    return st;
}

static sm_status cache_get(struct sm_store *s, const char *key, struct sm_range r,
                           enum sm_io_class cls, struct sm_buf *out, bool *found, uint64_t *objsize,
                           struct sm_err *err)
{
    struct cache_store *cs = cs_of(s);
    struct centry *e;
    SM_TRY(acquire(cs, key, r, cls, &e, err));
    if (e == NULL) {
        return sm_store_get_sized(cs->inner, key, r, cls, out, found, objsize, err);
    }
    *found = e->found; /* immutable from here: copied outside the lock */
    if (objsize != NULL && e->objsize != UINT64_MAX) {
        *objsize = e->objsize;
    }
    sm_status st = e->found ? sm_buf_set(out, sm_buf_bytes(&e->data), err) : SM_OK;
    entry_release(cs, e);
    return st;
}

static sm_status cache_borrow(struct sm_store *s, const char *key, struct sm_range r,
                              enum sm_io_class cls, struct sm_bytes *view, void **ref, bool *found,
                              struct sm_err *err)
{
    struct cache_store *cs = cs_of(s);
    struct centry *e;
    SM_TRY(acquire(cs, key, r, cls, &e, err));
    if (e == NULL) { /* uncached read into an entry of our own, freed on release */
        e = sm_calloc(1, sizeof(*e));
        if (e == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate an object cache entry");
        }
        e->refs = 1;
        e->fetch.ready = true;
        sm_status st = sm_store_get(cs->inner, key, r, cls, &e->data, &e->found, err);
        if (st != SM_OK) {
            sm_buf_free(&e->data);
            sm_free(e);
            return st;
        }
    }
    *found = e->found;
    *view = e->found ? sm_buf_bytes(&e->data) : sm_bytes_of(NULL, 0);
    *ref = e;
    return SM_OK;
}

static void cache_release(struct sm_store *s, void *ref)
{
    entry_release(cs_of(s), ref);
}

static sm_status cache_size(struct sm_store *s, const char *key, uint64_t *size, bool *found,
                            struct sm_err *err)
{
    return sm_store_size(cs_of(s)->inner, key, size, found, err);
}

static sm_status cache_put(struct sm_store *s, const char *key, struct sm_bytes data,
                           struct sm_err *err)
{
    return sm_store_put_atomic(cs_of(s)->inner, key, data, err);
}

static sm_status cache_stage(struct sm_store *s, const char *key, struct sm_bytes data,
                             unsigned flags, uint64_t *ticket, struct sm_err *err)
{
    return sm_store_stage(cs_of(s)->inner, key, data, flags, ticket, err);
}

static sm_status cache_commit(struct sm_store *s, const char *key, uint64_t ticket,
                              struct sm_err *err)
{
    return sm_store_commit(cs_of(s)->inner, key, ticket, err);
}

static void cache_abort(struct sm_store *s, const char *key, uint64_t ticket)
{
    sm_store_abort(cs_of(s)->inner, key, ticket);
}

static sm_status cache_sync(struct sm_store *s, enum sm_store_sync how, const char *prefix,
                            struct sm_err *err)
{
    return sm_store_sync(cs_of(s)->inner, how, prefix, err);
}

static sm_status cache_list(struct sm_store *s, const char *prefix, struct sm_strv *out,
                            struct sm_err *err)
{
    return sm_store_list(cs_of(s)->inner, prefix, out, err);
}

static void cache_close(struct sm_store *s)
{
    struct cache_store *cs = cs_of(s);
    for (size_t i = 0; i < NBUCKETS; i++) {
        while (cs->buckets[i] != NULL) {
            struct centry *e = cs->buckets[i];
            e->refs = e->fetch.waiters = 0; /* nobody outlives the store */
            delist(cs, e);
        }
    }
    pthread_cond_destroy(&cs->cv);
    pthread_mutex_destroy(&cs->mu);
    sm_store_close(cs->inner);
    sm_free(cs);
}

/* Bypassed (sm_store_cache_bypass): every read goes to the wrapped store, and without a borrow op
 * sm_store_get_borrow reads into the caller's buffer as it would from that store (a reference
 * lent before keeps cache_release). */
static sm_status bypass_get(struct sm_store *s, const char *key, struct sm_range r,
                            enum sm_io_class cls, struct sm_buf *out, bool *found,
                            uint64_t *objsize, struct sm_err *err)
{
    return sm_store_get_sized(cs_of(s)->inner, key, r, cls, out, found, objsize, err);
}

/* Four tables: the cache writes and lists only when the store it wraps does, and a bypassed
 * cache reads through and lends nothing. */
#define CACHE_CAPS_RO (SM_STORE_RANGE | SM_STORE_THREADSAFE)
#define CACHE_CAPS_RW (CACHE_CAPS_RO | SM_STORE_WRITE | SM_STORE_LIST)
#define CACHE_OPS(CAPS, GET, BORROW)                                                               \
    {                                                                                              \
        .scheme = "cache", .caps = (CAPS), .get = (GET), .get_many = NULL, .size = cache_size,     \
        .put_atomic = cache_put, .stage = cache_stage, .commit = cache_commit,                     \
        .abort = cache_abort, .sync = cache_sync, .list = cache_list, .close = cache_close,        \
        .borrow = (BORROW), .release = cache_release,                                              \
    }
static const struct sm_store_ops cache_ops_ro = CACHE_OPS(CACHE_CAPS_RO, cache_get, cache_borrow);
static const struct sm_store_ops cache_ops_rw = CACHE_OPS(CACHE_CAPS_RW, cache_get, cache_borrow);
static const struct sm_store_ops bypass_ops_ro = CACHE_OPS(CACHE_CAPS_RO, bypass_get, NULL);
static const struct sm_store_ops bypass_ops_rw = CACHE_OPS(CACHE_CAPS_RW, bypass_get, NULL);

sm_status sm_store_cache_new(struct sm_store *inner_take, uint64_t max_bytes, struct sm_store **out,
                             struct sm_err *err)
{
    *out = NULL;
    struct cache_store *cs = sm_calloc(1, sizeof(*cs));
    char *url = inner_take->url != NULL ? sm_strdup(inner_take->url) : NULL;
    if (cs == NULL || url == NULL) {
        sm_free(cs);
        sm_free(url);
        sm_store_close(inner_take);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate the object cache");
    }
    const unsigned rw = SM_STORE_WRITE | SM_STORE_LIST;
    cs->base.ops = (inner_take->ops->caps & rw) == rw ? &cache_ops_rw : &cache_ops_ro;
    cs->base.url = url;
    cs->inner = inner_take;
    cs->max_bytes = max_bytes;
    pthread_mutex_init(&cs->mu, NULL);
    pthread_cond_init(&cs->cv, NULL);
    *out = &cs->base;
    return SM_OK;
}

void sm_store_cache_bypass(struct sm_store *s)
{
    if (s == NULL || s->ops->close != cache_close || s->ops->get == bypass_get) {
        return;
    }
    struct cache_store *cs = cs_of(s);
    pthread_mutex_lock(&cs->mu);
    s->ops = s->ops == &cache_ops_rw ? &bypass_ops_rw : &bypass_ops_ro;
    struct sm_lru_node *n;
    while ((n = sm_lru_oldest(&cs->lru)) != NULL) { /* a held entry outlives the table */
        delist(cs, SM_LRU_ENTRY(n, struct centry, lru));
    }
    pthread_mutex_unlock(&cs->mu);
}

void sm_store_cache_stats(struct sm_store *s, struct sm_cache_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (s->ops->close != cache_close) {
        return;
    }
    struct cache_store *cs = cs_of(s);
    pthread_mutex_lock(&cs->mu);
    *out = cs->st;
    out->bytes = cs->lru.bytes;
    out->peak_bytes = cs->lru.peak_bytes;
    out->bypassed = s->ops->get == bypass_get;
    pthread_mutex_unlock(&cs->mu);
}

struct sm_store *sm_store_backing(struct sm_store *s)
{
    return s->ops->close == cache_close ? cs_of(s)->inner : s;
}
