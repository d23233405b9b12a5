/* Shard-index cache (SPEC §3): decoded shard indexes, byte- and entry-capped, least recently used
 * evicted first. Keyed by (object key, base offset, base length) so nested shard indexes cache
 * too, without aliasing the top-level shard (base length UINT64_MAX) when stored at byte 0.
 * Lookups hash into buckets. Entries are immutable once ready and reference-counted: a hit borrows
 * the entry (sm_index_cache_acquire / _release) instead of copying the pairs, and an entry evicted
 * while borrowed leaves the table at once but is freed by its last borrower. Misses are
 * single-flight: the first caller inserts a pending entry and decodes the index straight into it,
 * later callers for the same key wait for it (sm_lru_fetch_wait: one fetch per index, however
 * many threads ask). */
#include "shardmill/sm_config.h"

#include "array_int.h"

#include <pthread.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/lru.h"

#define NBUCKETS 256

struct sm_index_entry {
    struct sm_lru_node lru;       /* ready entries only, charged entry_bytes() against the cap */
    struct sm_index_entry *hnext; /* hash chain */
    char *key;
    uint64_t base, base_len, shard_len, hash;
    uint64_t *pairs;
    size_t n_values;
    unsigned refs; /* borrowers, the filling owner included */
    /* ready: the pairs are final (or failed); failed: the owner could not fill it, waiters fetch
     * themselves; waiters: callers waiting for the owner (the entry is not freed under them) */
    struct sm_lru_fetch fetch;
    bool listed; /* in the hash table (and, when ready, in the LRU list and charged) */
};

struct sm_index_cache {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t max_bytes, max_entries;
    uint64_t hits, misses;
    struct sm_lru lru; /* the ready entries: their bytes, count and peak */
    struct sm_index_entry *buckets[NBUCKETS];
};

sm_status sm_index_cache_new(uint64_t max_bytes, uint64_t max_entries, struct sm_index_cache **out,
                             struct sm_err *err)
{
    *out = NULL;
    if (max_bytes == 0 || max_entries == 0) {
        return SM_OK; /* disabled */
    }
    struct sm_index_cache *c = sm_calloc(1, sizeof(*c));
    if (c == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate the shard-index cache");
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->max_bytes = max_bytes;
    c->max_entries = max_entries;
    *out = c;
    return SM_OK;
}

static uint64_t hash_of(const char *key, uint64_t base, uint64_t base_len)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = key; *p != '\0'; p++) {
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    }
    return h ^ (base * 0x9e3779b97f4a7c15ull) ^ (base_len * 0xc2b2ae3d27d4eb4full);
}

static struct sm_index_entry **slot_of(struct sm_index_cache *c, const char *key, uint64_t base,
                                       uint64_t base_len, uint64_t h)
{
    struct sm_index_entry **pp = &c->buckets[h % NBUCKETS];
    while (*pp != NULL && !((*pp)->hash == h && (*pp)->base == base &&
                            (*pp)->base_len == base_len && strcmp((*pp)->key, key) == 0)) {
        pp = &(*pp)->hnext;
    }
    return pp;
}

static void entry_free(struct sm_index_entry *e)
{
    sm_free(e->key);
    sm_free(e->pairs);
    sm_free(e);
}

/* Frees e once it is out of the table and nobody borrows or waits for it (the lock is held). */
static void maybe_free(struct sm_index_entry *e)
{
    if (!e->listed && e->refs == 0 && e->fetch.waiters == 0) {
        entry_free(e);
    }
}

/* Takes e out of the table (hash chain, LRU list, charge); freed now unless held. */
static void delist(struct sm_index_cache *c, struct sm_index_entry *e)
{
    if (e->listed) {
        struct sm_index_entry **pp = slot_of(c, e->key, e->base, e->base_len, e->hash);
        if (*pp == e) {
            *pp = e->hnext;
        }
        e->hnext = NULL;
        sm_lru_unlink(&c->lru, &e->lru); /* nothing unless ready and admitted */
        e->listed = false;
    }
    maybe_free(e);
}

void sm_index_cache_free(struct sm_index_cache *c)
{
    if (c == NULL) {
        return;
    }
    for (size_t i = 0; i < NBUCKETS; i++) {
        while (c->buckets[i] != NULL) {
            struct sm_index_entry *e = c->buckets[i];
            e->refs = e->fetch.waiters = 0; /* no borrower outlives the array */
            delist(c, e);
        }
    }
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    sm_free(c);
}

/* The bytes an entry is charged; SIZE_MAX when that overflows. */
static size_t entry_bytes(const char *key, size_t n_values)
{
    const size_t fixed = strlen(key) + 1 + sizeof(struct sm_index_entry);
    if (n_values > (SIZE_MAX - fixed) / sizeof(uint64_t)) {
        return SIZE_MAX;
    }
    return n_values * sizeof(uint64_t) + fixed;
}

bool sm_index_cache_may_hold(const struct sm_index_cache *c, size_t n_values)
{
    return entry_bytes("", n_values) <= c->max_bytes; /* max_bytes is immutable */
}

/* A new unlisted entry with room for n_values pairs (NULL when an allocation fails). */
static struct sm_index_entry *entry_new(const char *key, uint64_t base, uint64_t base_len,
                                        size_t n_values, uint64_t h)
{
    struct sm_index_entry *e = sm_calloc(1, sizeof(*e));
    char *k = sm_strdup(key);
    uint64_t *p = sm_malloc(n_values * sizeof(uint64_t));
    if (e == NULL || k == NULL || p == NULL) {
        sm_free(e);
        sm_free(k);
        sm_free(p);
        return NULL;
    }
    e->key = k;
    e->base = base;
    e->base_len = base_len;
    e->hash = h;
    e->pairs = p;
    e->n_values = n_values;
    return e;
}

/* Lists a ready entry (the lock is held): evicts least recently used entries for room. */
static void admit(struct sm_index_cache *c, struct sm_index_entry *e)
{
    const uint64_t charge = entry_bytes(e->key, e->n_values);
    struct sm_lru_node *n;
    while ((n = sm_lru_oldest(&c->lru)) != NULL &&
           sm_lru_over(&c->lru, charge, c->max_bytes, c->max_entries)) {
        delist(c, SM_LRU_ENTRY(n, struct sm_index_entry, lru));
    }
    sm_lru_push_front(&c->lru, &e->lru, charge);
}

enum sm_icache_got sm_index_cache_acquire(struct sm_index_cache *c, const char *key, uint64_t base,
                                          uint64_t base_len, size_t n_values,
                                          struct sm_index_entry **out)
{
    *out = NULL;
    if (entry_bytes(key, n_values) > c->max_bytes) {
        pthread_mutex_lock(&c->mu);
        c->misses++;
        pthread_mutex_unlock(&c->mu);
        return SM_ICACHE_NONE;
    }
    const uint64_t h = hash_of(key, base, base_len);
    pthread_mutex_lock(&c->mu);
    struct sm_index_entry **pp = slot_of(c, key, base, base_len, h);
    struct sm_index_entry *e = *pp;
    if (e != NULL) {
        if (sm_lru_fetch_wait(&e->fetch, &c->mu, &c->cv) && e->n_values == n_values) {
            c->hits++;
            e->refs++;
            if (e->listed) {
                sm_lru_touch(&c->lru, &e->lru);
            }
            pthread_mutex_unlock(&c->mu);
            *out = e;
            return SM_ICACHE_HIT;
        }
        maybe_free(e); /* failed fill, or another layout under the same key: fetch uncached */
        c->misses++;
        pthread_mutex_unlock(&c->mu);
        return SM_ICACHE_NONE;
    }
    c->misses++;
    e = entry_new(key, base, base_len, n_values, h);
    if (e == NULL) { /* best effort: read uncached */
        pthread_mutex_unlock(&c->mu);
        return SM_ICACHE_NONE;
    }
    e->refs = 1;
    e->listed = true;
    *pp = e; /* pending: later callers wait for the owner */
    pthread_mutex_unlock(&c->mu);
    *out = e;
    return SM_ICACHE_FILL;
}

const uint64_t *sm_index_entry_pairs(const struct sm_index_entry *e, uint64_t *shard_len)
{
    *shard_len = e->shard_len;
    return e->pairs;
}

uint64_t *sm_index_entry_fill_buf(struct sm_index_entry *e)
{
    return e->pairs;
}

void sm_index_cache_complete(struct sm_index_cache *c, struct sm_index_entry *e, bool ok,
                             uint64_t shard_len)
{
    pthread_mutex_lock(&c->mu);
    e->shard_len = shard_len;
    sm_lru_fetch_done(&e->fetch, ok, &c->cv); /* the waiters run once the lock is released */
    if (ok) {
        admit(c, e);
    } else {
        delist(c, e); /* still referenced by the owner */
    }
    pthread_mutex_unlock(&c->mu);
}

void sm_index_cache_release(struct sm_index_cache *c, struct sm_index_entry *e)
{
    if (e == NULL) {
        return;
    }
    pthread_mutex_lock(&c->mu);
    e->refs--;
    maybe_free(e);
    pthread_mutex_unlock(&c->mu);
}

bool sm_index_cache_get(struct sm_index_cache *c, const char *key, uint64_t base, uint64_t base_len,
                        uint64_t *pairs, size_t n_values, uint64_t *shard_len)
{
    const uint64_t h = hash_of(key, base, base_len);
    pthread_mutex_lock(&c->mu);
    struct sm_index_entry *e = *slot_of(c, key, base, base_len, h);
    bool hit = e != NULL && e->fetch.ready && !e->fetch.failed && e->n_values == n_values;
    if (hit) {
        memcpy(pairs, e->pairs, n_values * sizeof(uint64_t));
        *shard_len = e->shard_len;
        sm_lru_touch(&c->lru, &e->lru);
        c->hits++;
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

void sm_index_cache_put(struct sm_index_cache *c, const char *key, uint64_t base, uint64_t base_len,
                        const uint64_t *pairs, size_t n_values, uint64_t shard_len)
{
    if (entry_bytes(key, n_values) > c->max_bytes) {
        return; /* larger than the whole cache: never cached */
    }
    const uint64_t h = hash_of(key, base, base_len);
    struct sm_index_entry *e = entry_new(key, base, base_len, n_values, h);
    if (e == NULL) {
        return;
    }
    memcpy(e->pairs, pairs, n_values * sizeof(uint64_t));
    e->shard_len = shard_len;
    e->fetch.ready = true;
    pthread_mutex_lock(&c->mu);
    struct sm_index_entry **pp = slot_of(c, key, base, base_len, h);
    if (*pp != NULL && !(*pp)->fetch.ready) { /* someone is filling it: theirs wins */
        pthread_mutex_unlock(&c->mu);
        entry_free(e);
        return;
    }
    if (*pp != NULL) {
        delist(c, *pp);
        pp = slot_of(c, key, base, base_len, h);
    }
    e->listed = true;
    e->hnext = *pp;
    *pp = e;
    admit(c, e);
    pthread_mutex_unlock(&c->mu);
}

void sm_index_cache_stats(struct sm_index_cache *c, uint64_t *hits, uint64_t *misses,
                          uint64_t *peak_bytes)
{
    pthread_mutex_lock(&c->mu);
    *hits = c->hits;
    *misses = c->misses;
    *peak_bytes = c->lru.peak_bytes;
    pthread_mutex_unlock(&c->mu);
}
