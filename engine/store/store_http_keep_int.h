/* The HTTP store's whole-object keep (store_http_keep.c), for servers that ignore Range: the
 * first ranged request learns whether the server honours Range (later ones wait for it); if not,
 * each object is fetched whole once, kept in a byte-capped LRU and sliced for every range. The
 * transport (store_http.c) owns one keep per store and hands it its GET as a callback. */
#ifndef SM_STORE_STORE_HTTP_KEEP_INT_H
#define SM_STORE_STORE_HTTP_KEEP_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shardmill/lru.h"
#include "shardmill/store.h"

/* The transport's GET of key (store_http.c's request): the body in out, *found, *objsize when
 * known; *whole when a ranged request got the whole object (a 200), *code the final status. */
typedef sm_status (*sm_http_fetch_fn)(void *ctx, const char *key, struct sm_range r,
                                      enum sm_io_class cls, struct sm_buf *out, bool *found,
                                      uint64_t *objsize, bool *whole, long *code,
                                      struct sm_err *err);

enum sm_http_ranges { SM_HTTP_RANGES_UNKNOWN, SM_HTTP_RANGES_HONOURED, SM_HTTP_RANGES_IGNORED };

struct sm_http_keep {
    const struct sm_store *store; /* its max_object_bytes caps the keep (read at each keep) */
    sm_http_fetch_fn fetch;
    void *fetch_ctx;
    pthread_mutex_t mu; /* guards everything below but the counters */
    pthread_cond_t cv;
    enum sm_http_ranges ranges;
    bool probing; /* a first ranged request is in flight; others wait to learn the answer */
    struct sm_lru pending; /* entries being fetched, newest first (nothing charged) */
    struct sm_lru kept;    /* the ready entries kept, most recently used first */
    atomic_uint_fast64_t whole_fetches, kept_slices;
};

/* A keep for `store`, whose GETs go through fetch(ctx, ...). */
void sm_http_keep_init(struct sm_http_keep *k, const struct sm_store *store, sm_http_fetch_fn fetch,
                       void *ctx);

/* Frees the kept objects, the lock and the condition (nothing may be in flight). */
void sm_http_keep_destroy(struct sm_http_keep *k);

/* A ranged GET (r not SM_RANGE_ALL, not empty): sent as such while the server honours Range (or
 * is being probed), sliced from the kept whole object once it is known to ignore it. */
sm_status sm_http_keep_get(struct sm_http_keep *k, const char *key, struct sm_range r,
                           enum sm_io_class cls, struct sm_buf *out, bool *found, uint64_t *objsize,
                           struct sm_err *err);

/* range_ignored, whole_fetches and kept_slices of sm_store_http_stats. */
void sm_http_keep_stats(struct sm_http_keep *k, struct sm_http_stats *out);

#endif
