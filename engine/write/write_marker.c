/* Shard records (SPEC §6) in the completion marker shardmill.complete.json that `verify` and
 * `resume` read: format version (SM_MARKER_VERSION), engine version and commit, SHA-256 of
 * zarr.json, shard count, total bytes and one {"key", "size", "crc32c", "values"} record per shard
 * in grid order ("values": the 16-hex-digit sm_write_values_digest of the values the shard encodes;
 * a version 1 marker has no "values"). Any other version is refused. Spec:
 * https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html Invariant: both
 * documents are deterministic (no time stamps, fixed member order), so a resumed output is
 * byte-identical to a clean one. */
#include "write_int.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/sm_version.h"

/* Appends printf output; the caller reserved room (SM_MARKER_REC_MAX per record). */
static sm_status put(struct sm_buf *out, struct sm_err *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static sm_status put(struct sm_buf *out, struct sm_err *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf((char *)out->ptr + out->len, out->cap - out->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= out->cap - out->len) {
        SM_FAIL(err, SM_E_INTERNAL, "record does not fit the %zu bytes reserved", out->cap);
    }
    out->len += (size_t)n;
    return SM_OK;
}

sm_status sm_rec_append(struct sm_buf *out, const char *key, const struct sm_shard_rec *r,
                        struct sm_err *err)
{
    return put(out, err,
               "{\"key\": \"%s\", \"size\": %" PRIu64 ", \"crc32c\": %" PRIu32
               ", \"values\": \"%016" PRIx64 "\"}",
               key, r->size, r->crc32c, r->values);
}

/* A 16-digit lowercase hex digest; false otherwise. */
static bool hex16(const char *s, size_t n, uint64_t *v)
{
    uint64_t x = 0;
    if (n != 16) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) {
            return false;
        }
        x = x << 4 | (uint64_t)d;
    }
    *v = x;
    return true;
}

/* Reads one record object of a marker of `version`; false if malformed. */
static bool rec_of(const json_t *o, int version, const char **key, struct sm_shard_rec *r)
{
    const json_t *k = json_object_get(o, "key");
    const json_t *s = json_object_get(o, "size");
    const json_t *c = json_object_get(o, "crc32c");
    const json_t *v = json_object_get(o, "values");
    if (!json_is_object(o) || !json_is_string(k) || !json_is_integer(s) || !json_is_integer(c) ||
        json_integer_value(s) < 0 || json_integer_value(c) < 0 ||
        json_integer_value(c) > (json_int_t)UINT32_MAX) {
        return false;
    }
    r->values = 0;
    if (version >= 2 &&
        (!json_is_string(v) || !hex16(json_string_value(v), json_string_length(v), &r->values))) {
        return false;
    }
    *key = json_string_value(k);
    r->size = (uint64_t)json_integer_value(s);
    r->crc32c = (uint32_t)json_integer_value(c);
    r->set = true;
    return true;
}

/* Engine strings are [0-9A-Za-z.+-_] in practice; anything else is dropped rather than escaped. */
static void safe_copy(char *dst, size_t cap, const char *src)
{
    size_t n = 0;
    for (; *src != '\0' && n + 1 < cap; src++) {
        const char c = *src;
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            c == '.' || c == '-' || c == '_' || c == '+') {
            dst[n++] = c;
        }
    }
    dst[n] = '\0';
}

sm_status sm_marker_build(const struct sm_writer *w, const struct sm_shard_rec *recs,
                          struct sm_buf *out, struct sm_err *err)
{
    char version[64], commit[64], sha[65];
    safe_copy(version, sizeof(version), SM_VERSION_STRING);
    safe_copy(commit, sizeof(commit), SM_GIT_COMMIT);
    sm_writer_docs_sha256(w, sha);
    uint64_t total = 0;
    for (uint64_t i = 0; i < w->nshards; i++) {
        total += recs[i].size;
    }
    if (w->nshards > (SIZE_MAX - 1024) / SM_MARKER_REC_MAX) {
        SM_FAIL(err, SM_E_NOMEM, "a marker of %" PRIu64 " shards does not fit in memory",
                w->nshards);
    }
    out->len = 0;
    SM_TRY(sm_buf_reserve(out, 1024 + (size_t)w->nshards * SM_MARKER_REC_MAX, err));
    SM_TRY(put(out, err,
               "{\n  \"shardmill_complete\": %d,\n  \"engine\": {\"version\": \"%s\", "
               "\"commit\": \"%s\"},\n  \"zarr_json_sha256\": \"%s\",\n  \"shard_count\": %" PRIu64
               ",\n  \"bytes\": %" PRIu64 ",\n  \"shards\": [",
               SM_MARKER_VERSION, version, commit, sha, w->nshards, total));
    for (uint64_t i = 0; i < w->nshards; i++) {
        char key[SM_KEY_MAX];
        SM_TRY(sm_writer_shard_key(w, i, key, sizeof(key), err));
        SM_TRY(put(out, err, "%s\n    ", i == 0 ? "" : ","));
        SM_TRY(sm_rec_append(out, key, &recs[i], err));
    }
    return put(out, err, "%s]\n}\n", w->nshards == 0 ? "" : "\n  ");
}

/* ---- the marker's own layout, read in place ----
 * A DOM of a marker with 131,072 records costs about 70 MB (a jansson object per record); the
 * layout sm_marker_build writes is read here with the header alone through jansson and the
 * records scanned in place, so the memory is the records' (recs) only. Anything that is not
 * exactly that layout (other whitespace, escapes, key order, bad numbers) goes to the DOM
 * parser, which accepts any JSON and words the errors. */

#define SHARDS_OPEN "\"shards\": ["

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')) {
        p++;
    }
    return p;
}

static const char *lit(const char *p, const char *end, const char *s)
{
    const size_t n = strlen(s);
    return (size_t)(end - p) >= n && memcmp(p, s, n) == 0 ? p + n : NULL;
}

/* A JSON number as written by put(): no sign, no leading zero, at most 19 digits. */
static const char *u64_at(const char *p, const char *end, uint64_t *v)
{
    const char *q = p;
    uint64_t x = 0;
    while (q < end && *q >= '0' && *q <= '9' && q - p < 19) {
        x = x * 10 + (uint64_t)(*q - '0');
        q++;
    }
    if (q == p || (q - p > 1 && *p == '0') || (q < end && *q >= '0' && *q <= '9')) {
        return NULL;
    }
    *v = x;
    return q;
}

/* One record '{"key": "K", "size": N, "crc32c": C, "values": "H"}' (version 1: without
 * "values") with a plain ASCII key. */
static const char *rec_at(const char *p, const char *end, int version, char *key,
                          struct sm_shard_rec *r)
{
    p = lit(p, end, "{\"key\": \"");
    if (p == NULL) {
        return NULL;
    }
    size_t n = 0;
    for (; p < end && *p != '"'; p++) {
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e || *p == '\\' ||
            n + 1 >= SM_KEY_MAX) {
            return NULL;
        }
        key[n++] = *p;
    }
    key[n] = '\0';
    uint64_t size, crc;
    if (p == end || (p = lit(p, end, "\", \"size\": ")) == NULL ||
        (p = u64_at(p, end, &size)) == NULL || (p = lit(p, end, ", \"crc32c\": ")) == NULL ||
        (p = u64_at(p, end, &crc)) == NULL || crc > UINT32_MAX || size > INT64_MAX) {
        return NULL;
    }
    uint64_t values = 0;
    if (version >= 2) {
        if ((p = lit(p, end, ", \"values\": \"")) == NULL || end - p < 17 ||
            !hex16(p, 16, &values) || p[16] != '"') {
            return NULL;
        }
        p += 17;
    }
    if ((p = lit(p, end, "}")) == NULL) {
        return NULL;
    }
    *r = (struct sm_shard_rec){size, values, (uint32_t)crc, true};
    return p;
}

/* Checks the header fields: a known format version, the documents' hash, the shard count (in
 * *count), the total bytes and the record array. */
static bool header_ok(const json_t *j, uint64_t *count, struct sm_marker_head *head, char *why,
                      size_t why_cap)
{
    const json_t *ver = json_object_get(j, "shardmill_complete");
    const json_t *sha = json_object_get(j, "zarr_json_sha256");
    const json_t *c = json_object_get(j, "shard_count");
    const json_t *b = json_object_get(j, "bytes");
    if (!json_is_object(j) || !json_is_integer(ver)) {
        snprintf(why, why_cap, "not a shardmill completion marker");
        return false;
    }
    if (json_integer_value(ver) < 1 || json_integer_value(ver) > SM_MARKER_VERSION) {
        snprintf(why, why_cap,
                 "unknown marker format version %" JSON_INTEGER_FORMAT
                 " (this shardmill reads 1 to %d)",
                 json_integer_value(ver), SM_MARKER_VERSION);
        return false;
    }
    if (!json_is_string(sha) || strlen(json_string_value(sha)) != 64) {
        snprintf(why, why_cap, "'zarr_json_sha256' must be a 64-digit hex string");
        return false;
    }
    if (!json_is_integer(c) || json_integer_value(c) < 0 ||
        !json_is_array(json_object_get(j, "shards"))) {
        snprintf(why, why_cap, "'shard_count' and 'shards' are required");
        return false;
    }
    if (!json_is_integer(b) || json_integer_value(b) < 0) {
        snprintf(why, why_cap, "'bytes' must be a non-negative integer");
        return false;
    }
    memcpy(head->zarr_sha, json_string_value(sha), 65);
    head->version = (int)json_integer_value(ver);
    head->bytes = (uint64_t)json_integer_value(b);
    *count = (uint64_t)json_integer_value(c);
    return true;
}

/* The in-place reader. false with *own false: not the layout (the DOM parser decides); false
 * with *own true: the marker is wrong (why says how). */
static bool parse_own(const struct sm_writer *w, struct sm_bytes doc, struct sm_shard_rec *recs,
                      struct sm_marker_head *head, char *why, size_t why_cap, bool *own)
{
    *own = false;
    const char *b = (const char *)doc.ptr, *end = b + doc.len;
    const char *open = NULL;
    for (const char *q = b; q + strlen(SHARDS_OPEN) <= end; q++) {
        if (memcmp(q, SHARDS_OPEN, strlen(SHARDS_OPEN)) == 0) {
            open = q;
            break;
        }
    }
    if (open == NULL || open - b > 4096) {
        return false;
    }
    char hdoc[4096 + 64];
    const int hn = snprintf(hdoc, sizeof(hdoc), "%.*s\"shards\": []}", (int)(open - b), b);
    if (hn < 0 || (size_t)hn >= sizeof(hdoc)) {
        return false;
    }
    json_error_t je;
    json_t *j = json_loadb(hdoc, (size_t)hn, 0, &je);
    if (j == NULL) {
        return false;
    }
    uint64_t count = 0;
    char hwhy[160];
    const bool hok = header_ok(j, &count, head, hwhy, sizeof(hwhy));
    json_decref(j);
    if (!hok) {
        return false; /* the DOM parser words it */
    }
    const char *p = skip_ws(open + strlen(SHARDS_OPEN), end);
    uint64_t n = 0;
    bool first = true;
    while (p < end && *p != ']') {
        if (!first) {
            if (*p != ',') {
                return false;
            }
            p = skip_ws(p + 1, end);
        }
        first = false;
        char key[SM_KEY_MAX];
        struct sm_shard_rec r;
        uint64_t idx;
        p = rec_at(p, end, head->version, key, &r);
        if (p == NULL) {
            return false;
        }
        if (!sm_writer_key_index(w, key, &idx) || recs[idx].set) {
            return false; /* the DOM parser names the record */
        }
        recs[idx] = r;
        n++;
        p = skip_ws(p, end);
    }
    if (p == end || (p = lit(skip_ws(p + 1, end), end, "}")) == NULL || skip_ws(p, end) != end) {
        return false;
    }
    *own = true;
    if (n != count) {
        snprintf(why, why_cap, "'shard_count' is %" PRIu64 " but %" PRIu64 " shards listed", count,
                 n);
        return false;
    }
    return true;
}

bool sm_marker_parse(const struct sm_writer *w, struct sm_bytes doc, struct sm_shard_rec *recs,
                     struct sm_marker_head *head, char *why, size_t why_cap)
{
    bool own;
    memset(head, 0, sizeof(*head));
    if (parse_own(w, doc, recs, head, why, why_cap, &own)) {
        return true;
    }
    if (own) {
        return false;
    }
    memset(recs, 0, (size_t)w->nshards * sizeof(*recs)); /* a partial scan: start again */
    json_t *j = NULL;
    struct sm_err e;
    sm_err_clear(&e);
    if (sm_json_load((const char *)doc.ptr, doc.len, SM_MARKER_NAME, &j, &e) != SM_OK) {
        snprintf(why, why_cap, "%s", e.what); /* meta.h's policy: never a default */
        return false;
    }
    bool ok = false;
    uint64_t count = 0;
    const json_t *shards = json_object_get(j, "shards");
    if (!header_ok(j, &count, head, why, why_cap)) {
        ok = false;
    } else if (count != json_array_size(shards)) {
        snprintf(why, why_cap, "'shard_count' is %" PRIu64 " but %zu shards listed", count,
                 json_array_size(shards));
    } else {
        ok = true;
        for (size_t i = 0; ok && i < json_array_size(shards); i++) {
            const char *key;
            struct sm_shard_rec r;
            uint64_t idx;
            if (!rec_of(json_array_get(shards, i), head->version, &key, &r)) {
                snprintf(why, why_cap, "'shards'[%zu] is not a {key, size, crc32c%s} record", i,
                         head->version >= 2 ? ", values" : "");
                ok = false;
            } else if (!sm_writer_key_index(w, key, &idx)) {
                snprintf(why, why_cap, "'shards'[%zu] names '%.40s', not a shard of zarr.json", i,
                         key);
                ok = false;
            } else if (recs[idx].set) {
                snprintf(why, why_cap, "'shards' lists '%.40s' twice", key);
                ok = false;
            } else {
                recs[idx] = r;
            }
        }
    }
    json_decref(j);
    return ok;
}
