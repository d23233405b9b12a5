/* Shard-index cache (SPEC §3): decoded shard indexes, byte- and entry-capped, least recently used
 * evicted first. Keyed by (object key, base offset, base length) so nested shard indexes cache
 * too, without aliasing the top-level shard (base length UINT64_MAX) when stored at byte 0. One
 * mutex: lookups are rare next to the inner-chunk reads they save, and a hit copies the pairs out
 * so no entry is ever referenced outside the lock. */
#include "shardmill/sm_config.h"

#include "array_int.h"

#include <pthread.h>
#include <string.h>

#include "shardmill/alloc.h"

struct entry {
    struct entry *prev, *next; /* LRU list: head = most recent */
    char *key;
    uint64_t base, base_len, shard_len;
    uint64_t *pairs;
    size_t n_values;
    size_t bytes; /* charged against the cap */
};

struct sm_index_cache {
    pthread_mutex_t mu;
    uint64_t max_bytes, max_entries;
    uint64_t bytes, entries, peak_bytes;
    uint64_t hits, misses;
    struct entry *head, *tail;
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
    c->max_bytes = max_bytes;
    c->max_entries = max_entries;
    *out = c;
    return SM_OK;
}

static void unlink_entry(struct sm_index_cache *c, struct entry *e)
{
    if (e->prev != NULL) {
        e->prev->next = e->next;
    } else {
        c->head = e->next;
    }
    if (e->next != NULL) {
        e->next->prev = e->prev;
    } else {
        c->tail = e->prev;
    }
    e->prev = e->next = NULL;
}

static void push_front(struct sm_index_cache *c, struct entry *e)
{
    e->next = c->head;
    e->prev = NULL;
    if (c->head != NULL) {
        c->head->prev = e;
    }
    c->head = e;
    if (c->tail == NULL) {
        c->tail = e;
    }
}

static void drop(struct sm_index_cache *c, struct entry *e)
{
    unlink_entry(c, e);
    c->bytes -= e->bytes;
    c->entries--;
    sm_free(e->key);
    sm_free(e->pairs);
    sm_free(e);
}

void sm_index_cache_free(struct sm_index_cache *c)
{
    if (c == NULL) {
        return;
    }
    while (c->head != NULL) {
        drop(c, c->head);
    }
    pthread_mutex_destroy(&c->mu);
    sm_free(c);
}

static struct entry *find(struct sm_index_cache *c, const char *key, uint64_t base,
                          uint64_t base_len)
{
    for (struct entry *e = c->head; e != NULL; e = e->next) {
        if (e->base == base && e->base_len == base_len && strcmp(e->key, key) == 0) {
            return e;
        }
    }
    return NULL;
}

bool sm_index_cache_get(struct sm_index_cache *c, const char *key, uint64_t base, uint64_t base_len,
                        uint64_t *pairs, size_t n_values, uint64_t *shard_len)
{
    pthread_mutex_lock(&c->mu);
    struct entry *e = find(c, key, base, base_len);
    bool hit = e != NULL && e->n_values == n_values;
    if (hit) {
        memcpy(pairs, e->pairs, n_values * sizeof(uint64_t));
        *shard_len = e->shard_len;
        unlink_entry(c, e);
        push_front(c, e);
        c->hits++;
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

/* The bytes an entry is charged (sm_index_cache_put); SIZE_MAX when that overflows. */
static size_t entry_bytes(const char *key, size_t n_values)
{
    const size_t fixed = strlen(key) + 1 + sizeof(struct entry);
    if (n_values > (SIZE_MAX - fixed) / sizeof(uint64_t)) {
        return SIZE_MAX;
    }
    return n_values * sizeof(uint64_t) + fixed;
}

bool sm_index_cache_may_hold(const struct sm_index_cache *c, size_t n_values)
{
    return entry_bytes("", n_values) <= c->max_bytes; /* max_bytes is immutable */
}

void sm_index_cache_put(struct sm_index_cache *c, const char *key, uint64_t base, uint64_t base_len,
                        const uint64_t *pairs, size_t n_values, uint64_t shard_len)
{
    const size_t bytes = entry_bytes(key, n_values);
    if (bytes > c->max_bytes) {
        return; /* larger than the whole cache: never cached */
    }
    struct entry *e = sm_calloc(1, sizeof(*e));
    char *k = sm_strdup(key);
    uint64_t *p = sm_malloc(n_values * sizeof(uint64_t));
    if (e == NULL || k == NULL || p == NULL) {
        sm_free(e);
        sm_free(k);
        sm_free(p);
        return;
    }
    memcpy(p, pairs, n_values * sizeof(uint64_t));
    *e = (struct entry){NULL, NULL, k, base, base_len, shard_len, p, n_values, bytes};
    pthread_mutex_lock(&c->mu);
    struct entry *old = find(c, key, base, base_len);
    if (old != NULL) {
        drop(c, old);
    }
    while (c->head != NULL &&
           (c->bytes + bytes > c->max_bytes || c->entries + 1 > c->max_entries)) {
        drop(c, c->tail);
    }
    push_front(c, e);
    c->bytes += bytes;
    c->entries++;
    if (c->bytes > c->peak_bytes) {
        c->peak_bytes = c->bytes;
    }
    pthread_mutex_unlock(&c->mu);
}

void sm_index_cache_stats(struct sm_index_cache *c, uint64_t *hits, uint64_t *misses,
                          uint64_t *peak_bytes)
{
    pthread_mutex_lock(&c->mu);
    *hits = c->hits;
    *misses = c->misses;
    *peak_bytes = c->peak_bytes;
    pthread_mutex_unlock(&c->mu);
}
