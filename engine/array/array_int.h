/* Internals of array/: the opened array, the shard reader and the shard-index cache. */
#ifndef SM_ARRAY_ARRAY_INT_H
#define SM_ARRAY_ARRAY_INT_H

#include <stdatomic.h>

#include "shardmill/array.h"
#include "shardmill/box.h"

struct sm_index_cache;

struct sm_array {
    struct sm_store *store; /* borrowed */
    char *prefix;           /* node path with a trailing '/', or "" for the store root */
    struct sm_array_meta *meta;
    struct sm_array_opts opts;
    size_t elem;        /* bytes per element */
    size_t unit_len;    /* decoded bytes of the largest unit a read decodes (innermost chunk) */
    size_t encoded_len; /* exact encoded bytes of a stored object when the chain fixes it, else 0 */
    const struct sm_shard_codec *shard; /* non-NULL when shards are read by range */
    struct sm_index_cache *icache;      /* NULL when disabled */
    atomic_uint_fast64_t chunks_read, chunks_missing, inner_read, inner_missing;
    atomic_uint_fast64_t fetch_ns, decode_ns;
};

/* Destination of a region read: the output array and where the region starts in global
 * coordinates (out holds exactly the region). */
struct sm_region_dst {
    struct sm_box_view view; /* shape = region shape */
    uint8_t *ptr;
    const uint64_t *origin; /* region offset in array coordinates */
};

/* Adds the time since t0 to a counter and returns the current time. */
uint64_t sm_array_lap(atomic_uint_fast64_t *counter, uint64_t t0);

/* Per-call buffers of a region read. */
struct sm_read_bufs {
    struct sm_buf enc, dec;
};
void sm_read_bufs_free(struct sm_read_bufs *b);

/* Reads the part [lo, hi) (array coordinates) of the shard whose first element is at `origin`,
 * stored in `key` at bytes [base, base + base_len) (base_len UINT64_MAX: the whole object, size
 * learnt from the index read), decoded by `sc`, into dst. Missing shard or inner chunks -> fill. */
sm_status sm_shard_read_box(struct sm_array *a, const char *key, uint64_t base, uint64_t base_len,
                            const struct sm_shard_codec *sc, const uint64_t *origin,
                            const uint64_t *lo, const uint64_t *hi, const struct sm_region_dst *dst,
                            struct sm_read_bufs *bufs, struct sm_scratch *scratch,
                            struct sm_err *err);

/* Copies the intersection [lo, hi) of a decoded block (array coordinates; the block starts at
 * `block_origin` and has extents `block_shape`) into dst; or fills it when block is NULL. */
void sm_region_put(const struct sm_region_dst *dst, const void *block, const uint64_t *block_origin,
                   const uint64_t *block_shape, const uint64_t *lo, const uint64_t *hi,
                   const uint8_t *fill);

/* Shard-index cache: byte- and entry-capped LRU keyed by (key, base offset, base length), so a
 * nested shard stored at byte 0 never aliases its top-level shard (base_len UINT64_MAX). */
sm_status sm_index_cache_new(uint64_t max_bytes, uint64_t max_entries, struct sm_index_cache **out,
                             struct sm_err *err);
void sm_index_cache_free(struct sm_index_cache *c);
/* False when an index of n_values values is larger than the whole cache (never cached, so a
 * lookup cannot hit and the caller need not allocate for one). */
bool sm_index_cache_may_hold(const struct sm_index_cache *c, size_t n_values);
/* Copies a cached index (n pairs*2 values) into pairs and returns true on a hit. */
bool sm_index_cache_get(struct sm_index_cache *c, const char *key, uint64_t base, uint64_t base_len,
                        uint64_t *pairs, size_t n_values, uint64_t *shard_len);
/* Inserts a copy (best effort: a failed allocation just skips caching). */
void sm_index_cache_put(struct sm_index_cache *c, const char *key, uint64_t base, uint64_t base_len,
                        const uint64_t *pairs, size_t n_values, uint64_t shard_len);
void sm_index_cache_stats(struct sm_index_cache *c, uint64_t *hits, uint64_t *misses,
                          uint64_t *peak_bytes);

#endif
