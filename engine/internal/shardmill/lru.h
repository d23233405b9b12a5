/* The one intrusive least-recently-used list of the engine: the object cache (store/store_cache.c),
 * the shard-index cache (array/index_cache.c) and the whole objects the HTTP store keeps
 * (store/store_http_keep.c). A node is embedded in the cached object; the list keeps the charges
 * of its nodes (bytes, by the caller's measure), their count and the peak of the charges. Not
 * thread-safe: each cache holds its own lock around every call, and with it the one wait of the
 * three caches for an entry another thread is fetching (struct sm_lru_fetch). */
#ifndef SM_CORE_LRU_H
#define SM_CORE_LRU_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Embedded in a cached object; zeroed (calloc) it is a node outside any list. A node is in at
 * most one list at a time (a cache may keep a second list, e.g. of entries being fetched), and
 * every call names the list the node is in, or, for sm_lru_unlink and sm_lru_linked, none. */
struct sm_lru_node {
    struct sm_lru_node *prev, *next; /* prev: more recent, next: older */
    uint64_t charge;                 /* counted in the list's bytes while linked */
};

/* head = most recently used, tail = least; zeroed (calloc) it is an empty list. */
struct sm_lru {
    struct sm_lru_node *head, *tail;
    uint64_t bytes;      /* sum of the linked nodes' charges */
    uint64_t count;      /* linked nodes */
    uint64_t peak_bytes; /* the most `bytes` has been */
};

/* The object that embeds `node` as its member `member`. */
#define SM_LRU_ENTRY(node, type, member)                                                           \
    ((type *)(void *)(((char *)(node)) - offsetof(type, member)))

/* Links an unlinked node as the most recent, charging `charge` bytes. */
void sm_lru_push_front(struct sm_lru *l, struct sm_lru_node *n, uint64_t charge);

/* Whether the node is in the list l (it is in l or in no list). */
bool sm_lru_linked(const struct sm_lru *l, const struct sm_lru_node *n);

/* Makes a node of the list the most recent; nothing if it is not linked. */
void sm_lru_touch(struct sm_lru *l, struct sm_lru_node *n);

/* Unlinks a node and uncharges it; nothing if it is not linked. */
void sm_lru_unlink(struct sm_lru *l, struct sm_lru_node *n);

/* The least recently used node, or NULL when the list is empty. */
struct sm_lru_node *sm_lru_oldest(const struct sm_lru *l);

/* Unlinks and returns the least recently used node (NULL when the list is empty). */
struct sm_lru_node *sm_lru_pop_oldest(struct sm_lru *l);

/* Walks from the most recent: sm_lru_newest, then sm_lru_older until NULL (or from the oldest
 * with sm_lru_newer). The list must not change during the walk, except unlinking the node just
 * visited after its neighbour was read. */
struct sm_lru_node *sm_lru_newest(const struct sm_lru *l);
struct sm_lru_node *sm_lru_older(const struct sm_lru_node *n);
struct sm_lru_node *sm_lru_newer(const struct sm_lru_node *n);

/* Whether adding a node of `charge` bytes would take the list over max_bytes or over max_count
 * nodes (UINT64_MAX: no cap on the count). */
bool sm_lru_over(const struct sm_lru *l, uint64_t charge, uint64_t max_bytes, uint64_t max_count);

/* ---- single flight: the first caller to miss an entry fetches it, later callers wait ---- */

/* The fetch state of a cache entry, embedded next to its node; zeroed (calloc) it is a fetch in
 * flight that nobody waits for. Read and written only under the cache's lock. */
struct sm_lru_fetch {
    bool ready;       /* the fetch ended, well or not */
    bool failed;      /* it failed (or the entry is not to be used): a waiter fetches itself */
    unsigned waiters; /* callers inside sm_lru_fetch_wait: the entry must not be freed */
};

/* Waits, holding the cache's lock mu (released while asleep on cv), until the fetch f has ended.
 * The caller counts in f->waiters meanwhile, so a cache that frees an entry only when nobody
 * waits for it keeps this one. True if the fetch succeeded (the entry may be used). */
bool sm_lru_fetch_wait(struct sm_lru_fetch *f, pthread_mutex_t *mu, pthread_cond_t *cv);

/* Ends the fetch f, mu held: ready, failed unless ok, and the waiters on cv woken (they run once
 * the caller releases mu). */
void sm_lru_fetch_done(struct sm_lru_fetch *f, bool ok, pthread_cond_t *cv);

#endif
