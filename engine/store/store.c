/* Store dispatch (STYLE B7): every caller goes through here, never through ops->. This layer does
 * what each driver would otherwise repeat: key checks, capability checks and defaults for NULL
 * slots, the per-class request/byte counters (so file and HTTP report identical numbers; the HTTP
 * driver counts itself, SM_STORE_SELF_COUNTED, since it knows what crossed the wire), the
 * check that a ranged read returned exactly the bytes asked for, and naming the object on error. */
#include "shardmill/store.h"

#include <inttypes.h>
#include <string.h>

#include "shardmill/alloc.h"

void sm_strv_free(struct sm_strv *s)
{
    for (size_t i = 0; i < s->n; i++) {
        sm_free(s->v[i]);
    }
    sm_free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

sm_status sm_strv_push(struct sm_strv *s, const char *str, size_t n, struct sm_err *err)
{
    if (s->n + 1 >= s->cap) {
        const size_t cap = s->cap == 0 ? 16 : s->cap * 2;
        char **v = sm_realloc(s->v, cap * sizeof(*v));
        if (v == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot list keys");
        }
        s->v = v;
        s->cap = cap;
    }
    char *e = sm_malloc(n + 1);
    if (e == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot list keys");
    }
    memcpy(e, str, n);
    e[n] = '\0';
    s->v[s->n++] = e;
    s->v[s->n] = NULL;
    return SM_OK;
}

void sm_store_close(struct sm_store *s)
{
    if (s == NULL) {
        return;
    }
    char *url = s->url;
    s->ops->close(s);
    sm_free(url);
}

/* Keys are relative and may not climb out of the store root. */
static sm_status check_key(const struct sm_store *s, const char *key, struct sm_err *err)
{
    const char *p = key;
    if (key[0] == '/') {
        goto bad;
    }
    while (*p != '\0') {
        const char *e = strchr(p, '/');
        size_t n = e != NULL ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            goto bad;
        }
        p += n;
        if (*p == '/') {
            p++;
        }
    }
    return SM_OK;
bad:
    SM_FAIL_AT(err, SM_E_USAGE, s->url, "key '%s' escapes the store root", key);
}

static void name_object(const struct sm_store *s, const char *key, struct sm_err *err)
{
    sm_err_where(err, "%s%s%s", s->url, key[0] != '\0' ? "/" : "", key);
}

sm_status sm_store_check_len(const struct sm_store *s, const char *key, uint64_t n,
                             struct sm_err *err)
{
    if (s->max_object_bytes != 0 && n > s->max_object_bytes) {
        SM_ERR(err, SM_E_LIMIT,
               "object of %" PRIu64 " bytes exceeds limits.max_object_bytes (%" PRIu64 ")", n,
               s->max_object_bytes);
        name_object(s, key, err);
        return err->status;
    }
    return SM_OK;
}

sm_status sm_store_admit(struct sm_store *s, uint64_t n, const char *key, struct sm_err *err)
{
    if (s->max_requests == 0) {
        return SM_OK;
    }
    /* a reservation, so concurrent callers cannot all slip past the last free request */
    const uint64_t before = atomic_fetch_add_explicit(&s->admitted, n, memory_order_relaxed);
    if (before + n <= s->max_requests) {
        return SM_OK;
    }
    SM_ERR(err, SM_E_LIMIT, "request %" PRIu64 " would exceed limits.max_requests (%" PRIu64 ")",
           before < s->max_requests ? s->max_requests + 1 : before + 1, s->max_requests);
    name_object(s, key, err);
    return err->status;
}

/* The dispatch admits requests only for the drivers it counts (the others admit their own). */
static sm_status dispatch_admit(struct sm_store *s, uint64_t n, const char *key, struct sm_err *err)
{
    if ((s->ops->caps & SM_STORE_SELF_COUNTED) != 0) {
        return SM_OK;
    }
    return sm_store_admit(s, n, key, err);
}

/* The length a ranged read must return, given what the driver delivered. */
static sm_status check_range(const struct sm_store *s, const char *key, struct sm_range r,
                             size_t got, struct sm_err *err)
{
    if (r.kind == SM_RANGE_ALL || got == r.len) {
        return SM_OK;
    }
    if (r.kind == SM_RANGE_SPAN) {
        SM_ERR(err, SM_E_DATA,
               "read of %" PRIu64 " bytes at offset %" PRIu64 " returned %zu bytes "
               "(range past the end of the object)",
               r.len, r.offset, got);
    } else {
        SM_ERR(err, SM_E_DATA,
               "object is %zu bytes, shorter than the %" PRIu64 "-byte suffix requested", got,
               r.len);
    }
    name_object(s, key, err);
    return err->status;
}

static void count(struct sm_store *s, enum sm_io_class cls, uint64_t requests, uint64_t bytes)
{
    atomic_fetch_add_explicit(&s->stats.requests[cls], requests, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->stats.bytes[cls], bytes, memory_order_relaxed);
}

void sm_store_count(struct sm_store *s, enum sm_io_class cls, uint64_t requests, uint64_t bytes)
{
    count(s, cls, requests, bytes);
}

/* Counts for the drivers that do not count themselves. */
static void dispatch_count(struct sm_store *s, enum sm_io_class cls, uint64_t requests,
                           uint64_t bytes)
{
    if ((s->ops->caps & SM_STORE_SELF_COUNTED) == 0) {
        count(s, cls, requests, bytes);
    }
}

sm_status sm_store_get(struct sm_store *s, const char *key, struct sm_range range,
                       enum sm_io_class cls, struct sm_buf *out, bool *found, struct sm_err *err)
{
    return sm_store_get_sized(s, key, range, cls, out, found, NULL, err);
}

sm_status sm_store_get_sized(struct sm_store *s, const char *key, struct sm_range range,
                             enum sm_io_class cls, struct sm_buf *out, bool *found,
                             uint64_t *objsize, struct sm_err *err)
{
    *found = false;
    if (objsize != NULL) {
        *objsize = UINT64_MAX;
    }
    out->len = 0;
    SM_TRY(check_key(s, key, err));
    if (range.kind != SM_RANGE_ALL) {
        SM_TRY(sm_store_check_len(s, key, range.len, err));
    }
    SM_TRY(dispatch_admit(s, 1, key, err));
    sm_status st = s->ops->get(s, key, range, cls, out, found, objsize, err);
    dispatch_count(s, cls, 1, out->len);
    if (st != SM_OK) {
        name_object(s, key, err);
        return st;
    }
    if (!*found) {
        out->len = 0;
        return SM_OK;
    }
    return check_range(s, key, range, out->len, err);
}

sm_status sm_store_get_borrow(struct sm_store *s, const char *key, struct sm_range range,
                              enum sm_io_class cls, struct sm_buf *buf, struct sm_bytes *view,
                              void **ref, bool *found, struct sm_err *err)
{
    *ref = NULL;
    *view = sm_bytes_of(NULL, 0);
    if (s->ops->borrow == NULL) {
        SM_TRY(sm_store_get(s, key, range, cls, buf, found, err));
        *view = sm_buf_bytes(buf);
        return SM_OK;
    }
    *found = false;
    SM_TRY(check_key(s, key, err));
    if (range.kind != SM_RANGE_ALL) {
        SM_TRY(sm_store_check_len(s, key, range.len, err));
    }
    SM_TRY(dispatch_admit(s, 1, key, err));
    sm_status st = s->ops->borrow(s, key, range, cls, view, ref, found, err);
    dispatch_count(s, cls, 1, st == SM_OK && *found ? view->len : 0);
    if (st != SM_OK) {
        name_object(s, key, err);
        return st;
    }
    if (!*found) {
        *view = sm_bytes_of(NULL, 0);
        return SM_OK;
    }
    st = check_range(s, key, range, view->len, err);
    if (st != SM_OK) {
        sm_store_release(s, *ref);
        *ref = NULL;
    }
    return st;
}

void sm_store_release(struct sm_store *s, void *ref)
{
    if (ref != NULL && s->ops->release != NULL) {
        s->ops->release(s, ref);
    }
}

sm_status sm_store_get_many(struct sm_store *s, const char *key, const struct sm_range *ranges,
                            size_t n, enum sm_io_class cls, struct sm_buf *outs, bool *found,
                            struct sm_err *err)
{
    *found = false;
    SM_TRY(check_key(s, key, err));
    for (size_t i = 0; i < n; i++) {
        outs[i].len = 0;
        if (ranges[i].kind != SM_RANGE_ALL) {
            SM_TRY(sm_store_check_len(s, key, ranges[i].len, err));
        }
    }
    if (s->ops->get_many == NULL) {
        for (size_t i = 0; i < n; i++) {
            SM_TRY(sm_store_get(s, key, ranges[i], cls, &outs[i], found, err));
            if (!*found) {
                return SM_OK;
            }
        }
        return SM_OK;
    }
    SM_TRY(dispatch_admit(s, n, key, err));
    sm_status st = s->ops->get_many(s, key, ranges, n, cls, outs, found, err);
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        bytes += outs[i].len;
    }
    dispatch_count(s, cls, *found ? n : 1, bytes); /* a missing object: one request, as get */
    if (st != SM_OK) {
        name_object(s, key, err);
        return st;
    }
    for (size_t i = 0; *found && i < n; i++) {
        SM_TRY(check_range(s, key, ranges[i], outs[i].len, err));
    }
    return SM_OK;
}

sm_status sm_store_size(struct sm_store *s, const char *key, uint64_t *size, bool *found,
                        struct sm_err *err)
{
    *found = false;
    *size = 0;
    SM_TRY(check_key(s, key, err));
    if (s->ops->size == NULL) {
        SM_FAIL(err, SM_E_INTERNAL, "store '%s' cannot report sizes", s->ops->scheme);
    }
    sm_status st = s->ops->size(s, key, size, found, err);
    if (st != SM_OK) {
        name_object(s, key, err);
    }
    return st;
}

sm_status sm_store_exists(struct sm_store *s, const char *key, bool *exists, struct sm_err *err)
{
    uint64_t size;
    return sm_store_size(s, key, &size, exists, err);
}

static sm_status read_only(struct sm_store *s, const char *key, struct sm_err *err)
{
    SM_ERR(err, SM_E_USAGE, "store '%s' is read-only", s->ops->scheme);
    name_object(s, key, err);
    return err->status;
}

static bool can_stage(const struct sm_store *s)
{
    return (s->ops->caps & SM_STORE_WRITE) != 0 && s->ops->stage != NULL && s->ops->commit != NULL;
}

static void add(atomic_uint_fast64_t *c, uint64_t n)
{
    atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

sm_status sm_store_stage(struct sm_store *s, const char *key, struct sm_bytes data, unsigned flags,
                         uint64_t *ticket, struct sm_err *err)
{
    *ticket = 0;
    SM_TRY(check_key(s, key, err));
    if (!can_stage(s)) {
        return read_only(s, key, err);
    }
    sm_status st = s->ops->stage(s, key, data, flags, ticket, err);
    if (st != SM_OK) {
        name_object(s, key, err);
        return st;
    }
    add(&s->stats.stages, 1);
    add(&s->stats.put_bytes, data.len);
    add(&s->stats.fsyncs, (flags & SM_STAGE_SYNC) != 0 ? 1 : 0);
    return SM_OK;
}

sm_status sm_store_commit(struct sm_store *s, const char *key, uint64_t ticket, struct sm_err *err)
{
    SM_TRY(check_key(s, key, err));
    if (!can_stage(s)) {
        return read_only(s, key, err);
    }
    sm_status st = s->ops->commit(s, key, ticket, err);
    if (st != SM_OK) {
        name_object(s, key, err);
        return st;
    }
    add(&s->stats.commits, 1);
    add(&s->stats.puts, 1);
    return SM_OK;
}

void sm_store_abort(struct sm_store *s, const char *key, uint64_t ticket)
{
    struct sm_err ignored;
    sm_err_clear(&ignored);
    if (check_key(s, key, &ignored) != SM_OK || !can_stage(s) || s->ops->abort == NULL) {
        return;
    }
    s->ops->abort(s, key, ticket);
    add(&s->stats.aborts, 1);
}

sm_status sm_store_sync(struct sm_store *s, enum sm_store_sync how, const char *prefix,
                        struct sm_err *err)
{
    SM_TRY(check_key(s, prefix, err));
    if ((s->ops->caps & SM_STORE_WRITE) == 0) {
        return read_only(s, prefix, err);
    }
    if (s->ops->sync == NULL) {
        return SM_OK; /* nothing volatile to flush (mem) */
    }
    sm_status st = s->ops->sync(s, how, prefix, err);
    if (st != SM_OK) {
        name_object(s, prefix, err);
        return st;
    }
    add(&s->stats.fsyncs, 1);
    return SM_OK;
}

sm_status sm_store_put(struct sm_store *s, const char *key, struct sm_bytes data, unsigned flags,
                       struct sm_err *err)
{
    uint64_t ticket;
    SM_TRY(sm_store_stage(s, key, data, flags, &ticket, err));
    return sm_store_commit(s, key, ticket, err); /* a failed commit removed the staged object */
}

sm_status sm_store_put_atomic(struct sm_store *s, const char *key, struct sm_bytes data,
                              struct sm_err *err)
{
    SM_TRY(check_key(s, key, err));
    if ((s->ops->caps & SM_STORE_WRITE) == 0) {
        return read_only(s, key, err);
    }
    if (s->ops->put_atomic == NULL) {
        return sm_store_put(s, key, data, SM_STAGE_SYNC, err); /* stage + fsync + commit */
    }
    sm_status st = s->ops->put_atomic(s, key, data, err);
    if (st != SM_OK) {
        name_object(s, key, err);
        return st;
    }
    add(&s->stats.puts, 1);
    add(&s->stats.put_bytes, data.len);
    return SM_OK;
}

uint64_t sm_store_fsyncs(const struct sm_store *s)
{
    return atomic_load_explicit(&s->stats.fsyncs, memory_order_relaxed);
}

sm_status sm_store_list(struct sm_store *s, const char *prefix, struct sm_strv *out,
                        struct sm_err *err)
{
    SM_TRY(check_key(s, prefix, err));
    if ((s->ops->caps & SM_STORE_LIST) == 0 || s->ops->list == NULL) {
        SM_FAIL(err, SM_E_USAGE, "store '%s' cannot list keys", s->ops->scheme);
    }
    sm_status st = s->ops->list(s, prefix, out, err);
    if (st != SM_OK) {
        name_object(s, prefix, err);
    }
    return st;
}

uint64_t sm_store_requests(const struct sm_store *s, enum sm_io_class cls)
{
    return atomic_load_explicit(&s->stats.requests[cls], memory_order_relaxed);
}

uint64_t sm_store_bytes(const struct sm_store *s, enum sm_io_class cls)
{
    return atomic_load_explicit(&s->stats.bytes[cls], memory_order_relaxed);
}
