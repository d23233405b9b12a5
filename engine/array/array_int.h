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
    const atomic_int *stop; /* sm_array_set_stop: checked before each object of a region read */
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

/* The buffers of a region read, kept on the caller's scratch (sm_scratch_user_buf) so that reads
 * in steady state allocate nothing: the encoded object or byte run, the decoded chunk, the
 * top-level shard index and the inner-chunk references. `threads` > 1 lets a shard read decode
 * the inner chunks of one byte run with that many OpenMP threads (their own worker scratches). */
struct sm_read_bufs {
    struct sm_buf *enc, *dec, *pairs, *refs;
    struct sm_scratch *scratch;
    unsigned threads;
};
void sm_read_bufs_of(struct sm_scratch *scratch, unsigned threads, struct sm_read_bufs *out);

/* Most OpenMP threads one region read uses (and worker scratches it keeps per caller). */
#define SM_READ_MAX_THREADS 64
/* With read_threads 0, reads of less work than this (bytes decoded or returned) stay serial. */
#define SM_READ_PARALLEL_MIN_BYTES (256u << 10)

/* One unit of a parallel read: item k of n, on the scratch of the thread running it. */
typedef sm_status (*sm_read_job)(void *ctx, uint64_t k, struct sm_scratch *scratch,
                                 struct sm_err *err);
/* Runs job for k = 0 .. n-1 on `threads` threads (2 .. SM_READ_MAX_THREADS) of core's work driver
 * (sm_work_run), thread i on worker scratch i of `scratch` (sm_scratch_worker; 0 is scratch
 * itself), items handed out in order. Items after a failed one are skipped; every item before it
 * still runs, and the error of the lowest failing item is the one returned (so a failure reads as
 * in a serial loop; an error already in err is kept). Allocates nothing once the worker scratches
 * exist. */
sm_status sm_read_parallel(unsigned threads, uint64_t n, sm_read_job job, void *ctx,
                           struct sm_scratch *scratch, struct sm_err *err);

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
/* Copies a cached index (n pairs*2 values) into pairs and returns true on a hit (tests). */
bool sm_index_cache_get(struct sm_index_cache *c, const char *key, uint64_t base, uint64_t base_len,
                        uint64_t *pairs, size_t n_values, uint64_t *shard_len);
/* Inserts a copy (best effort: a failed allocation just skips caching). */
void sm_index_cache_put(struct sm_index_cache *c, const char *key, uint64_t base, uint64_t base_len,
                        const uint64_t *pairs, size_t n_values, uint64_t shard_len);

/* The reader's path: borrow, or fill once. */
struct sm_index_entry;
enum sm_icache_got {
    SM_ICACHE_HIT,  /* *out is a ready entry, borrowed: read it, then release it */
    SM_ICACHE_FILL, /* *out is a new pending entry this caller must fill (sm_index_entry_fill_buf)
                       and then complete; concurrent callers of the same key wait meanwhile */
    SM_ICACHE_NONE, /* not cached and not cacheable now: fetch without the cache */
};
/* Looks (key, base, base_len) up; waits while another caller fills it. Counts a hit or a miss. */
enum sm_icache_got sm_index_cache_acquire(struct sm_index_cache *c, const char *key, uint64_t base,
                                          uint64_t base_len, size_t n_values,
                                          struct sm_index_entry **out);
/* The immutable pairs of a ready entry (valid until release) and its shard length. */
const uint64_t *sm_index_entry_pairs(const struct sm_index_entry *e, uint64_t *shard_len);
/* Where the filling owner decodes the n_values pairs. */
uint64_t *sm_index_entry_fill_buf(struct sm_index_entry *e);
/* Ends a fill: ok lists the entry (evicting LRU entries for room) and wakes the waiters; !ok
 * drops it (waiters then fetch themselves). The owner still holds its reference. */
void sm_index_cache_complete(struct sm_index_cache *c, struct sm_index_entry *e, bool ok,
                             uint64_t shard_len);
/* Drops a reference (NULL-safe); an evicted entry is freed by its last borrower. */
void sm_index_cache_release(struct sm_index_cache *c, struct sm_index_entry *e);
void sm_index_cache_stats(struct sm_index_cache *c, uint64_t *hits, uint64_t *misses,
                          uint64_t *peak_bytes);

#endif
