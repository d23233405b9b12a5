/* Opened arrays and typed region reads (SPEC §2, §3). An array borrows its store; opening reads
 * metadata once. Region reads fetch only the chunks (and, for sharded arrays, only the shard index
 * and the inner chunks) the region touches; missing chunks read as the fill value. */
#ifndef SM_ARRAY_ARRAY_H
#define SM_ARRAY_ARRAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/buf.h"
#include "shardmill/codec.h"
#include "shardmill/meta.h"
#include "shardmill/status.h"
#include "shardmill/store.h"

struct json_t;

/* Resource limits; 0 means unlimited. Exceeding one is SM_E_LIMIT naming the limit. */
struct sm_limits {
    uint64_t max_object_bytes; /* largest encoded object (chunk, shard part) fetched */
    uint64_t max_chunk_bytes;  /* largest decoded chunk */
    uint64_t max_region_bytes; /* largest region one read_region may return */
};
#define SM_LIMITS_DEFAULTS                                                                         \
    {                                                                                              \
        .max_object_bytes = 512ull << 20, .max_chunk_bytes = 1ull << 30, .max_region_bytes = 0     \
    }

struct sm_array_opts {
    struct sm_limits limits;
    uint64_t index_cache_bytes;   /* shard-index cache: 0 disables */
    uint64_t index_cache_entries; /* 0 disables */
    /* OpenMP threads of one sm_array_read_region called outside a parallel region (0: the OpenMP
     * default, omp_get_max_threads(), for reads of at least 256 KiB of chunks or region, smaller
     * ones serial; 1: serial; N: N threads, at most 64). Inside any OpenMP parallel region (a
     * scan's or a write's thread pool) a read is always serial. */
    unsigned read_threads;
};
#define SM_ARRAY_OPTS_DEFAULTS                                                                     \
    {                                                                                              \
        .limits = SM_LIMITS_DEFAULTS, .index_cache_bytes = 16ull << 20, .index_cache_entries = 64  \
    }

/* Read counters beyond the store's request/byte counters (SPEC §7). */
struct sm_array_stats {
    uint64_t index_cache_hits, index_cache_misses, index_cache_peak_bytes;
    uint64_t chunks_read, chunks_missing, inner_chunks_read, inner_chunks_missing;
    /* Time inside region reads, summed over calling threads: waiting for the store (fetch) and
     * running codec chains (decode); copying into the region is in neither. */
    uint64_t fetch_ns, decode_ns;
};

struct sm_array;

/* Opens the node at `path` ("" = store root) of `store` (borrowed; must outlive the array).
 * Tries v3 zarr.json, then v2 .zarray (+ .zattrs). A group is SM_E_DATA naming the path, unless
 * it is OME-Zarr and `path` names a level. Missing metadata is SM_E_DATA naming the key. */
sm_status sm_array_open(struct sm_store *store, const char *path, const struct sm_array_opts *opts,
                        struct sm_array **out, struct sm_err *err);
void sm_array_close(struct sm_array *a);
/* The cooperative stop flag (status.h; NULL: none) a region read checks before each stored
 * object it reads: a region of 2^30 one-voxel chunks ends at a stop with SM_E_STOPPED instead of
 * reading on. Set before reads start (not concurrently with them). */
void sm_array_set_stop(struct sm_array *a, const atomic_int *stop);

/* The metadata documents of a node as stored (SPEC §3 "metadata is fetched once per opened
 * array, never per rank"): one process fetches them, ranks share the bytes (jobs/ broadcasts
 * them through par.h), and every rank opens the array from the same bytes without metadata I/O. */
enum sm_meta_docs_kind {
    SM_META_DOCS_NONE,
    SM_META_DOCS_V3,       /* doc = zarr.json */
    SM_META_DOCS_V2_ARRAY, /* doc = .zarray, attrs = .zattrs if have_attrs */
    SM_META_DOCS_V2_GROUP, /* doc = .zgroup, attrs = .zattrs if have_attrs */
    SM_META_DOCS_N5,       /* doc = attributes.json (an N5 dataset or group) */
};
struct sm_meta_docs {
    enum sm_meta_docs_kind kind;
    bool have_attrs;
    struct sm_buf doc, attrs;
};
#define SM_META_DOCS_INIT                                                                          \
    {                                                                                              \
        SM_META_DOCS_NONE, false, SM_BUF_INIT, SM_BUF_INIT                                         \
    }
void sm_meta_docs_free(struct sm_meta_docs *d);

/* Fetches the documents of the node at `path` (the metadata requests of sm_array_open: zarr.json,
 * else .zarray + .zattrs, else .zgroup + .zattrs, else N5's attributes.json), applying opts->limits
 * to the store as sm_array_open does. docs must be initialised (SM_META_DOCS_INIT); it is replaced.
 * A node with no document is SM_E_DATA naming the path; SM_E_IO; SM_E_LIMIT. */
sm_status sm_array_fetch_meta(struct sm_store *store, const char *path,
                              const struct sm_array_opts *opts, struct sm_meta_docs *docs,
                              struct sm_err *err);
/* sm_array_open from documents fetched by sm_array_fetch_meta (here or by another rank): no
 * metadata request is sent. The same errors as sm_array_open for the same documents. */
sm_status sm_array_open_docs(struct sm_store *store, const char *path,
                             const struct sm_array_opts *opts, const struct sm_meta_docs *docs,
                             struct sm_array **out, struct sm_err *err);

const struct sm_array_meta *sm_array_meta(const struct sm_array *a);
struct sm_store *sm_array_store(const struct sm_array *a);
void sm_array_stats(const struct sm_array *a, struct sm_array_stats *out);

/* Reads the box [offset, offset + shape) into out: C order, native (little-endian) values of the
 * array's dtype, exactly out_len = product(shape) * dtype size bytes.
 * Called outside an OpenMP parallel region, the read decodes its chunks (or, for a region inside
 * one or a few shards, the inner chunks of each shard) with opts.read_threads OpenMP threads,
 * each on a worker scratch that `scratch` keeps (sm_scratch_worker): the bytes written are the
 * same for any thread count, and the memory is per thread, not per chunk. Inside a parallel
 * region (omp_get_level() > 0) it runs serially on the caller's thread. Buffers are kept on the
 * scratch, so repeated reads allocate nothing in steady state.
 * Thread-safe for concurrent calls with distinct scratches.
 * SM_E_USAGE if the box is outside the array or out_len is wrong; SM_E_LIMIT past a limit;
 * SM_E_DATA for corrupt or inconsistent data (naming the key and byte offset); SM_E_IO. */
sm_status sm_array_read_region(struct sm_array *a, const uint64_t *offset, const uint64_t *shape,
                               void *out, size_t out_len, struct sm_scratch *scratch,
                               struct sm_err *err);

/* Where finished parts of a region go while the rest is still being read: `band` is called once
 * for each band of whole chunk rows along axis 0 (and once for the whole region of a 0-d array),
 * as soon as every chunk it touches is in `out`, with the band's byte range in `out`. The bands
 * cover the region exactly once, complete in any order, and may be passed from several threads
 * at once. A band's error fails the read as the error of the chunk that completed it. */
struct sm_region_sink {
    sm_status (*band)(void *ctx, const void *bytes, size_t offset, size_t len, struct sm_err *err);
    void *ctx;
};

/* sm_array_read_region, handing each finished band to `sink` (NULL: none): `read -o FILE`
 * writes the bands while the threads decode the rest. */
sm_status sm_array_read_region_to(struct sm_array *a, const uint64_t *offset, const uint64_t *shape,
                                  void *out, size_t out_len, const struct sm_region_sink *sink,
                                  struct sm_scratch *scratch, struct sm_err *err);

/* The per-thread scratch sm_array_read_region decodes with (codec contexts, temporary buffers),
 * so that readers of arrays need not use codec/ themselves (docs/ARCHITECTURE.md). One per
 * thread, never shared; free with sm_array_scratch_free (NULL-safe). SM_E_NOMEM. */
sm_status sm_array_scratch_new(struct sm_scratch **out, struct sm_err *err);
void sm_array_scratch_free(struct sm_scratch *s);

/* Describes a node for `shardmill info`: an array's metadata, or a group's attributes and members.
 * New JSON reference in *out. SM_E_DATA if there is no node at path. */
sm_status sm_node_describe(struct sm_store *store, const char *path, struct json_t **out,
                           struct sm_err *err);

#endif
