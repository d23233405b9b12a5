/* Key-value stores: the `sm_store` vtable and the dispatch every caller goes through (STYLE B7,
 * SPEC §3). Keys are relative to the store root, '/'-separated, without a leading '/'.
 * Absence is not an error: get/size return SM_OK with *found = false.
 * The dispatch layer (store.c) checks capabilities, supplies defaults for NULL slots, counts
 * requests and bytes per I/O class, and checks that a ranged read returned exactly the range. */
#ifndef SM_STORE_STORE_H
#define SM_STORE_STORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/buf.h"
#include "shardmill/status.h"

enum sm_range_kind {
    SM_RANGE_ALL,    /* the whole object; len, if not 0, is the size the caller expects (a hint
                        that lets the file store skip its fstat; the result is still exact) */
    SM_RANGE_SPAN,   /* [offset, offset + len) */
    SM_RANGE_SUFFIX, /* the last len bytes */
};

struct sm_range {
    enum sm_range_kind kind;
    uint64_t offset, len;
};

static inline struct sm_range sm_range_all(void)
{
    struct sm_range r = {SM_RANGE_ALL, 0, 0};
    return r;
}
static inline struct sm_range sm_range_all_expect(uint64_t expected_len)
{
    struct sm_range r = {SM_RANGE_ALL, 0, expected_len};
    return r;
}
static inline struct sm_range sm_range_span(uint64_t offset, uint64_t len)
{
    struct sm_range r = {SM_RANGE_SPAN, offset, len};
    return r;
}
static inline struct sm_range sm_range_suffix(uint64_t len)
{
    struct sm_range r = {SM_RANGE_SUFFIX, 0, len};
    return r;
}

/* What a read is for; the counters of SPEC §7 are kept per class. */
enum sm_io_class { SM_IO_META, SM_IO_PAYLOAD, SM_IO_INDEX, SM_IO_NCLASS };

/* Request and byte counters (atomic: stores are shared by threads). A request that found nothing
 * (absent file, HTTP 404) still counts as a request with 0 bytes (SPEC §5). */
struct sm_store_stats {
    atomic_uint_fast64_t requests[SM_IO_NCLASS];
    atomic_uint_fast64_t bytes[SM_IO_NCLASS];
    atomic_uint_fast64_t puts, put_bytes;
    /* Staged writes: objects staged, committed and aborted; fsyncs and syncfs calls made for
     * durability (a fsynced stage, a directory sync, a whole-store sync each count one). */
    atomic_uint_fast64_t stages, commits, aborts, fsyncs;
};

/* Capability bits. */
#define SM_STORE_RANGE 0x1u      /* ranged reads are served without reading the whole object */
#define SM_STORE_WRITE 0x2u      /* put_atomic, and stage / commit / abort / sync */
#define SM_STORE_LIST 0x4u       /* list */
#define SM_STORE_THREADSAFE 0x8u /* every slot may be called concurrently */
/* The driver counts its own requests and received bytes (sm_store_count): the dispatch counts
 * nothing for it. HTTP: a request is one sent, bytes are the body bytes received (SPEC §3). */
#define SM_STORE_SELF_COUNTED 0x10u

struct sm_store;

/* What sm_store_sync makes durable (output.sync chooses, write.h). */
enum sm_store_sync {
    SM_STORE_SYNC_DIR, /* the entries of one directory (a key prefix; "" = the root): one fsync */
    SM_STORE_SYNC_ALL, /* everything written to the store so far: one syncfs of its file system */
};

/* A NULL-terminated list of strings, owned (sm_strv_free). */
struct sm_strv {
    char **v;
    size_t n, cap;
};
void sm_strv_free(struct sm_strv *s);
/* Appends a copy of the first n bytes of str (keeping the NULL terminator). SM_E_NOMEM. */
sm_status sm_strv_push(struct sm_strv *s, const char *str, size_t n, struct sm_err *err);

struct sm_store_ops {
    const char *scheme; /* "file", "mem", "http", "cache" */
    unsigned caps;
    /* Reads `range` of `key` into out (reserving exactly the object or range size). If objsize is
     * non-NULL the driver stores the whole object's size there when it learns it (file: fstat,
     * HTTP: Content-Range), else leaves it untouched. Ranges past the end are clipped; the
     * dispatch layer turns a short result into an error. The dispatch counts one request per
     * call; a driver that retries counts itself (SM_STORE_SELF_COUNTED, sm_store_count). */
    sm_status (*get)(struct sm_store *, const char *key, struct sm_range range,
                     enum sm_io_class cls, struct sm_buf *out, bool *found, uint64_t *objsize,
                     struct sm_err *);
    /* Several ranges of one object; NULL: the dispatch loops over get. */
    sm_status (*get_many)(struct sm_store *, const char *key, const struct sm_range *ranges,
                          size_t n, enum sm_io_class cls, struct sm_buf *outs, bool *found,
                          struct sm_err *);
    sm_status (*size)(struct sm_store *, const char *key, uint64_t *size, bool *found,
                      struct sm_err *);
    /* Makes `key` hold exactly `data`, atomically for readers. NULL: the dispatch stages with
     * fsync and commits (the file store); a store with its own atomic put (mem) sets it. */
    sm_status (*put_atomic)(struct sm_store *, const char *key, struct sm_bytes data,
                            struct sm_err *);
    /* Writes `data` under a temporary name next to `key` (files: "<key>.tmp.<pid>.<n>" in the
     * key's directory, directories created as needed), fsynced with SM_STAGE_SYNC in `flags`,
     * past the page cache with SM_STAGE_DIRECT (a hint: files only). `key` is unchanged until
     * commit. *ticket identifies the staged object (below 2^32). Nothing is left behind on
     * failure. */
    sm_status (*stage)(struct sm_store *, const char *key, struct sm_bytes data, unsigned flags,
                       uint64_t *ticket, struct sm_err *);
    /* Renames a staged object over `key` (atomically replacing an existing object). On failure
     * the staged object is removed. */
    sm_status (*commit)(struct sm_store *, const char *key, uint64_t ticket, struct sm_err *);
    /* Removes a staged object never committed (a failed run); errors are ignored. */
    void (*abort)(struct sm_store *, const char *key, uint64_t ticket);
    /* Makes committed entries durable (enum sm_store_sync); NULL: nothing to do (mem). */
    sm_status (*sync)(struct sm_store *, enum sm_store_sync how, const char *prefix,
                      struct sm_err *);
    /* Appends the keys directly under `prefix` ("" = root; names only, no '/'). */
    sm_status (*list)(struct sm_store *, const char *prefix, struct sm_strv *out, struct sm_err *);
    void (*close)(struct sm_store *);
    /* Optional (the object cache): as get, but lends the bytes of an immutable entry in *view,
     * held by *ref until release. NULL: sm_store_get_borrow reads into the caller's buffer. */
    sm_status (*borrow)(struct sm_store *, const char *key, struct sm_range range,
                        enum sm_io_class cls, struct sm_bytes *view, void **ref, bool *found,
                        struct sm_err *);
    void (*release)(struct sm_store *, void *ref);
};

/* Drivers embed this first and downcast only in their own file. */
struct sm_store {
    const struct sm_store_ops *ops;
    struct sm_store_stats stats;
    uint64_t max_object_bytes;     /* 0: no limit; larger objects fail with SM_E_LIMIT */
    uint64_t max_requests;         /* 0: no limit; the request past it fails with SM_E_LIMIT */
    atomic_uint_fast64_t admitted; /* requests admitted against max_requests (sm_store_admit) */
    char *url;                     /* the URL or path the store was opened with (owned) */
};

/* Opens a store from a path, file:// URL or other registered scheme.
 * SM_E_USAGE for an unknown scheme; SM_E_IO if the root cannot be opened. */
sm_status sm_store_open(const char *url, struct sm_store **out, struct sm_err *err);
/* Closes and frees; accepts NULL. */
void sm_store_close(struct sm_store *s);

/* Reads a range of an object. A missing object is SM_OK with *found = false and out->len = 0.
 * A ranged read that returns a length other than requested, or past the end, is SM_E_DATA.
 * Objects larger than max_object_bytes are SM_E_LIMIT (checked before allocating). */
sm_status sm_store_get(struct sm_store *s, const char *key, struct sm_range range,
                       enum sm_io_class cls, struct sm_buf *out, bool *found, struct sm_err *err);
/* As sm_store_get, and also reports the whole object's size in *objsize (UINT64_MAX if the driver
 * could not tell). Used for shard indexes, whose entries are checked against the shard size. */
sm_status sm_store_get_sized(struct sm_store *s, const char *key, struct sm_range range,
                             enum sm_io_class cls, struct sm_buf *out, bool *found,
                             uint64_t *objsize, struct sm_err *err);
/* As sm_store_get, but the object cache lends a hit instead of copying it: *view points into a
 * reference-counted immutable entry, held in *ref until sm_store_release(s, *ref) (an entry evicted
 * meanwhile is freed by its last borrower). Stores that cannot lend read into `buf` and set *view
 * to its bytes and *ref to NULL. Counted and checked as sm_store_get. */
sm_status sm_store_get_borrow(struct sm_store *s, const char *key, struct sm_range range,
                              enum sm_io_class cls, struct sm_buf *buf, struct sm_bytes *view,
                              void **ref, bool *found, struct sm_err *err);
/* Returns a reference of sm_store_get_borrow (NULL-safe). */
void sm_store_release(struct sm_store *s, void *ref);
/* Several ranges of the same object in one call (parallel or merged where the driver can). */
sm_status sm_store_get_many(struct sm_store *s, const char *key, const struct sm_range *ranges,
                            size_t n, enum sm_io_class cls, struct sm_buf *outs, bool *found,
                            struct sm_err *err);
sm_status sm_store_size(struct sm_store *s, const char *key, uint64_t *size, bool *found,
                        struct sm_err *err);
/* Makes `key` hold `data` atomically for readers, durably where the store can (files: stage with
 * fsync, then commit). SM_E_USAGE for a read-only store. */
sm_status sm_store_put_atomic(struct sm_store *s, const char *key, struct sm_bytes data,
                              struct sm_err *err);
/* sm_store_stage's flags: fsync the object; write it past the page cache (a file store: O_DIRECT
 * for an object of 1 MiB or more from a 4 KiB-aligned buffer, core/core_fs.c sm_fs_stage; other
 * stores ignore it). `true` is SM_STAGE_SYNC. */
#define SM_STAGE_SYNC 1u
#define SM_STAGE_DIRECT 2u
/* Staged writes (SPEC §6), for writers that batch their durability (write/): stage writes the
 * object under a temporary name (`flags`: SM_STAGE_*) and returns a ticket; commit renames it over
 * the key; abort removes it; sync makes the directory entries (SM_STORE_SYNC_DIR, one fsync of
 * `prefix`) or the whole store (SM_STORE_SYNC_ALL, one syncfs) durable. Readers never see a
 * partial object: `key` is absent or old until commit. SM_E_USAGE for a read-only store. */
sm_status sm_store_stage(struct sm_store *s, const char *key, struct sm_bytes data, unsigned flags,
                         uint64_t *ticket, struct sm_err *err);
sm_status sm_store_commit(struct sm_store *s, const char *key, uint64_t ticket, struct sm_err *err);
void sm_store_abort(struct sm_store *s, const char *key, uint64_t ticket);
sm_status sm_store_sync(struct sm_store *s, enum sm_store_sync how, const char *prefix,
                        struct sm_err *err);
/* Stage then commit in one call, with sm_store_stage's flags (`true` is SM_STAGE_SYNC;
 * sm_store_put_atomic is the sync case). */
sm_status sm_store_put(struct sm_store *s, const char *key, struct sm_bytes data, unsigned flags,
                       struct sm_err *err);
/* The file store's staged objects of this many bytes or more start their write-out as they are
 * put, when the put does not fsync them (core/core_fs.c): a SYNC_ALL at the end then waits only
 * for what has not reached the disk yet. For plan's flush term. */
size_t sm_store_file_early_writeback(void);

/* Durability counter snapshot (fsyncs and syncfs calls made through the store). */
uint64_t sm_store_fsyncs(const struct sm_store *s);
sm_status sm_store_list(struct sm_store *s, const char *prefix, struct sm_strv *out,
                        struct sm_err *err);
/* True if `key` exists (a size probe). */
sm_status sm_store_exists(struct sm_store *s, const char *key, bool *exists, struct sm_err *err);

/* Counter snapshot helpers. */
uint64_t sm_store_requests(const struct sm_store *s, enum sm_io_class cls);
uint64_t sm_store_bytes(const struct sm_store *s, enum sm_io_class cls);

/* For SM_STORE_SELF_COUNTED drivers: `requests` requests of class cls sent, `bytes` received. */
void sm_store_count(struct sm_store *s, enum sm_io_class cls, uint64_t requests, uint64_t bytes);

/* Admits n more requests before they are sent: SM_E_LIMIT naming key and limits.max_requests
 * once they would pass the store's max_requests (0: no limit). The dispatch admits for the
 * drivers it counts; an SM_STORE_SELF_COUNTED driver admits each attempt it will count. */
sm_status sm_store_admit(struct sm_store *s, uint64_t n, const char *key, struct sm_err *err);

/* For drivers: SM_E_LIMIT naming key when n exceeds the store's max_object_bytes. */
sm_status sm_store_check_len(const struct sm_store *s, const char *key, uint64_t n,
                             struct sm_err *err);

/* s3:// stores (SPEC §3): where buckets are served and the credentials requests are signed with
 * (AWS Signature Version 4). The engine never reads the environment or ~/.aws: jobs/ fills this
 * from input.s3.* and the AWS variables and files. Strings are borrowed for the store's life. */
struct sm_s3_opts {
    const char
        *endpoint;      /* "http://127.0.0.1:9000"; NULL or "": https://s3.<region>.amazonaws.com */
    const char *region; /* NULL or "": us-east-1 */
    bool path_style;    /* <endpoint>/<bucket>/<key>; false: <bucket>.<endpoint host>/<key>
                           (an endpoint that is an IP address or localhost is always path-style) */
    const char *access_key_id; /* NULL or "": requests go unsigned (public buckets) */
    const char *secret_access_key;
    const char *session_token; /* NULL or "": none (sent as x-amz-security-token) */
    const char
        *credentials_from; /* where the credentials came from, for messages ("AWS_ACCESS_KEY_ID",
                              "profile 'x' of ~/.aws/credentials"); NULL: unsaid */
};

/* HTTP store settings (SPEC §3). Retries: 5xx, 429 (Retry-After honoured, capped at
 * backoff_max_ms), connection reset, truncated body, timeout; delay = min(backoff_max_ms,
 * backoff_base_ms * 2^attempt) scaled by a random factor in [0.5, 1) (jitter). */
struct sm_http_opts {
    long connect_timeout_ms; /* TCP + TLS connect */
    long low_speed_bytes;    /* abort a transfer slower than this many bytes/s ... */
    long low_speed_time_s;   /* ... for this many seconds */
    unsigned max_retries;    /* further attempts after the first */
    unsigned backoff_base_ms;
    unsigned backoff_max_ms;
    bool verify_tls;             /* peer and host verification (never off by default) */
    const struct sm_s3_opts *s3; /* s3:// stores (borrowed); NULL: unsigned, us-east-1, AWS */
    /* Deadline of one attempt, connect to last body byte (0: none): a server trickling just
     * above the low-speed limit cannot hold a request forever. Timed out is retried. */
    long request_timeout_ms;
    /* The cooperative stop flag (status.h), or NULL: a transfer in flight and a retry's backoff
     * end within about a second of it being set, with SM_E_STOPPED. */
    const atomic_int *stop;
};
#define SM_HTTP_OPTS_DEFAULTS                                                                      \
    {                                                                                              \
        .connect_timeout_ms = 10000, .low_speed_bytes = 1024, .low_speed_time_s = 20,              \
        .max_retries = 4, .backoff_base_ms = 100, .backoff_max_ms = 5000, .verify_tls = true,      \
        .request_timeout_ms = 300000                                                               \
    }

/* Opens a store with explicit HTTP settings (other schemes ignore them). */
sm_status sm_store_open_with(const char *url, const struct sm_http_opts *http,
                             struct sm_store **out, struct sm_err *err);

/* Driver constructors (also reachable through sm_store_open by scheme). */
sm_status sm_store_file_open(const char *root, struct sm_store **out, struct sm_err *err);
/* http:// and https:// via libcurl: keep-alive connection reuse, ranged GETs, a handle per
 * concurrent caller, bounded retries. Read-only. A server that ignores Range is detected and each
 * object is fetched whole once, kept (at most max_object_bytes in all, 256 MiB without a limit;
 * least recently used first out) and sliced. Counts its own requests and wire bytes. */
sm_status sm_store_http_open(const char *url, const struct sm_http_opts *opts,
                             struct sm_store **out, struct sm_err *err);
/* s3://bucket/prefix: the HTTP store on the bucket's endpoint URL, every request signed with
 * AWS SigV4 from opts->s3 (x-amz-content-sha256, x-amz-date, x-amz-security-token). 403 fails
 * naming the key ("the request was refused"), a missing bucket is SM_E_DATA, a missing key is
 * "not found"; ranges, retries and counters are the HTTP store's. SM_E_USAGE for a malformed URL
 * or endpoint. */
sm_status sm_store_s3_open(const char *url, const struct sm_http_opts *opts, struct sm_store **out,
                           struct sm_err *err);
/* What the HTTP store learned about the server (SPEC §3): range_ignored once a ranged request was
 * answered with the whole object; whole_fetches counts objects fetched whole for that reason
 * (each once while it stays kept), kept_slices the ranged reads served from a kept object
 * without a request. */
struct sm_http_stats {
    bool range_ignored;
    uint64_t whole_fetches, kept_slices;
};
/* False (and zeros) unless s is an HTTP or S3 store (pass sm_store_backing() of a cache). */
bool sm_store_http_stats(struct sm_store *s, struct sm_http_stats *out);

/* The encoded-object cache (SPEC §3): a decorator holding whole responses (objects and byte
 * ranges) in a byte-capped LRU. Concurrent misses on the same key and range are single-flight:
 * one caller fetches, the others wait, so each distinct object is requested once while it stays
 * cached. Takes ownership of `inner` (closed with the cache). Objects larger than max_bytes pass
 * through uncached. The outer store's counters count lookups; the inner store's count requests. */
sm_status sm_store_cache_new(struct sm_store *inner_take, uint64_t max_bytes, struct sm_store **out,
                             struct sm_err *err);
struct sm_cache_stats {
    uint64_t hits, misses, evictions, bytes, peak_bytes;
    bool bypassed; /* sm_store_cache_bypass: the counters stopped there */
};
/* Turns a cache store into a pass-through for the rest of its life: reads go to the wrapped
 * store, admitted entries are freed (a lent one when released). For a run that knows no object
 * will be read twice (sm_run_cache_useful); call it while no read is in flight. Nothing for other
 * stores. */
void sm_store_cache_bypass(struct sm_store *s);
/* Counters of a cache store; all zero for other stores. */
void sm_store_cache_stats(struct sm_store *s, struct sm_cache_stats *out);
/* The store that really performs requests: the inner store of a cache, else s itself. */
struct sm_store *sm_store_backing(struct sm_store *s);

/* An in-memory store, for tests and fixtures; thread-safe. */
sm_status sm_store_mem_new(struct sm_store **out, struct sm_err *err);

#endif
