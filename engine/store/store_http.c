/* The `http`/`https` store (SPEC §3) on libcurl. Connections are kept alive and shared through a
 * curl share handle; each concurrent caller borrows an easy handle from a pool, so threads have
 * requests in flight at once. Ranged reads send `Range:` and accept only a 206 whose Content-Range
 * matches what was asked (or a 200 with the whole object, sliced). Response buffers are reserved
 * from Content-Length or the known range size; a body that is longer or shorter than announced is
 * never decoded. 404 is "not found"; 5xx, 429, resets, truncation and timeouts are retried with
 * exponential backoff and jitter (docs/internals/http-retries.md). TLS verification stays on.
 * libcurl is loaded with dlopen when the first HTTP store opens: its ~25 dependent libraries would
 * otherwise cost every process about 8 ms of dynamic loading, HTTP or not (measured in W3). */
#include "shardmill/sm_config.h"

#include "shardmill/store.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"

/* The libcurl entry points used here, resolved once by dlsym. */
static struct {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *h);
    void (*easy_reset)(CURL *h);
    CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
    CURLcode (*easy_perform)(CURL *h);
    CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
    const char *(*easy_strerror)(CURLcode code);
    CURLSH *(*share_init)(void);
    CURLSHcode (*share_setopt)(CURLSH *sh, CURLSHoption opt, ...);
    CURLSHcode (*share_cleanup)(CURLSH *sh);
} curl;
static char curl_load_error[200];

struct http_store {
    struct sm_store base;
    struct sm_http_opts opts;
    CURLSH *share;
    pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
    pthread_mutex_t pool_mu;
    CURL **pool; /* idle easy handles */
    size_t npool, cap;
};

/* One transfer's state, filled by the curl callbacks. */
struct xfer {
    struct http_store *hs;
    CURL *h;
    const char *key;
    struct sm_buf *out;
    uint64_t expect; /* bytes the body must have: range length, or Content-Length */
    bool have_expect;
    bool started;  /* the first body bytes arrived */
    bool keep;     /* the body is the payload (200/206), not an error page */
    bool overflow; /* body longer than announced, or past the limit */
    bool limit_hit;
    long retry_after_s; /* -1 if absent */
    bool have_crange;
    uint64_t cr_first, cr_last, cr_total; /* Content-Range: bytes first-last/total */
    bool cr_total_known;
    bool have_clen;
    uint64_t clen;
    struct sm_err *err;
};

static struct http_store *hs_of(struct sm_store *s)
{
    return (struct http_store *)s;
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *user)
{
    (void)h;
    (void)access;
    pthread_mutex_lock(&((struct http_store *)user)->share_mu[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *user)
{
    (void)h;
    pthread_mutex_unlock(&((struct http_store *)user)->share_mu[data]);
}

static CURL *borrow(struct http_store *hs)
{
    CURL *h = NULL;
    pthread_mutex_lock(&hs->pool_mu);
    if (hs->npool > 0) {
        h = hs->pool[--hs->npool];
    }
    pthread_mutex_unlock(&hs->pool_mu);
    if (h == NULL) {
        h = curl.easy_init();
    }
    return h;
}

static void give_back(struct http_store *hs, CURL *h)
{
    pthread_mutex_lock(&hs->pool_mu);
    if (hs->npool == hs->cap) {
        size_t cap = hs->cap == 0 ? 8 : hs->cap * 2;
        CURL **p = sm_realloc(hs->pool, cap * sizeof(*p));
        if (p == NULL) {
            pthread_mutex_unlock(&hs->pool_mu);
            curl.easy_cleanup(h);
            return;
        }
        hs->pool = p;
        hs->cap = cap;
    }
    hs->pool[hs->npool++] = h;
    pthread_mutex_unlock(&hs->pool_mu);
}

/* Parses a decimal header value; false if absent or malformed. */
static bool header_u64(const char *line, size_t n, const char *name, uint64_t *v)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0) {
        return false;
    }
    const char *p = line + k;
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    if (*p < '0' || *p > '9') {
        return false;
    }
    char *end;
    *v = strtoull(p, &end, 10);
    return true;
}

static size_t on_header(char *line, size_t size, size_t nitems, void *user)
{
    struct xfer *x = user;
    const size_t n = size * nitems;
    uint64_t v;
    if (n > 5 && strncmp(line, "HTTP/", 5) == 0) { /* a new response (after a redirect/100) */
        x->have_clen = x->have_crange = false;
        x->retry_after_s = -1;
    } else if (header_u64(line, n, "content-length:", &v)) {
        x->have_clen = true;
        x->clen = v;
    } else if (header_u64(line, n, "retry-after:", &v)) {
        x->retry_after_s = v > 3600 ? 3600 : (long)v;
    } else if (n > 14 && strncasecmp(line, "content-range:", 14) == 0) {
        unsigned long long a, b;
        char total[32] = "";
        if (sscanf(line + 14, " bytes %llu-%llu/%31[0-9*]", &a, &b, total) == 3) {
            x->have_crange = true;
            x->cr_first = a;
            x->cr_last = b;
            x->cr_total_known = total[0] != '*';
            x->cr_total = x->cr_total_known ? strtoull(total, NULL, 10) : 0;
        }
    }
    return n;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *user)
{
    struct xfer *x = user;
    const size_t n = size * nmemb;
    struct sm_buf *out = x->out;
    if (!x->started) { /* first body bytes: decide what they are and size the buffer once */
        x->started = true;
        long code = 0;
        curl.easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
        x->keep = code == 200 || code == 206;
        if (x->keep && (code == 200 || !x->have_expect)) {
            /* the whole object (a server may ignore Range): its size is the Content-Length */
            x->have_expect = x->have_clen;
            x->expect = x->clen;
            if (x->have_expect) {
                if (sm_store_check_len(&x->hs->base, x->key, x->expect, x->err) != SM_OK) {
                    x->limit_hit = true;
                    return 0;
                }
                if (sm_buf_reserve(out, (size_t)x->expect, x->err) != SM_OK) {
                    return 0;
                }
            }
        }
    }
    if (!x->keep) {
        return n; /* an error page: its status decides, its bytes are dropped */
    }
    if (x->have_expect && out->len + n > x->expect) {
        x->overflow = true; /* more bytes than announced: never trust this body */
        return 0;
    }
    if (!x->have_expect && out->len + n > out->cap) {
        /* No Content-Length (chunked encoding): grow geometrically, bounded by the object limit. */
        uint64_t want = out->cap < 65536 ? 65536 : (uint64_t)out->cap * 2;
        if (want < out->len + n) {
            want = out->len + n;
        }
        if (sm_store_check_len(&x->hs->base, x->key, out->len + n, x->err) != SM_OK) {
            x->limit_hit = true;
            return 0;
        }
        if (sm_buf_reserve(out, (size_t)want, x->err) != SM_OK) {
            return 0;
        }
    }
    memcpy(out->ptr + out->len, data, n);
    out->len += n;
    return n;
}

static void sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Backoff with jitter: min(max, base * 2^attempt) * [0.5, 1). */
static uint64_t backoff_ms(const struct sm_http_opts *o, unsigned attempt, long retry_after_s)
{
    uint64_t d = (uint64_t)o->backoff_base_ms << (attempt < 20 ? attempt : 20);
    if (d > o->backoff_max_ms) {
        d = o->backoff_max_ms;
    }
    uint64_t r = sm_clock_ns();
    r ^= r >> 33;
    r *= 0xff51afd7ed558ccdull;
    r ^= r >> 33;
    d = d / 2 + (d / 2 == 0 ? 0 : r % (d / 2));
    if (retry_after_s >= 0) {
        uint64_t ra = (uint64_t)retry_after_s * 1000u;
        d = ra > o->backoff_max_ms ? o->backoff_max_ms : ra;
    }
    return d;
}

enum outcome { DONE, RETRY, FAIL };

/* Classifies a finished transfer and validates the body against the request. */
static enum outcome judge(struct http_store *hs, struct xfer *x, CURLcode cc, long code,
                          struct sm_range r, bool *found, uint64_t *objsize, struct sm_err *err)
{
    (void)hs;
    if (x->limit_hit) {
        return FAIL; /* err already says which limit */
    }
    if (err->status == SM_E_NOMEM) {
        return FAIL;
    }
    if (cc == CURLE_WRITE_ERROR && x->overflow) {
        sm_err_set(err, SM_E_IO, __FILE__, __LINE__,
                   "server sent more bytes than announced (%" PRIu64 ")", x->expect);
        return RETRY;
    }
    if (cc != CURLE_OK) {
        sm_err_set(err, SM_E_IO, __FILE__, __LINE__, "%s", curl.easy_strerror(cc));
        sm_err_cause(err, "curl", (int)cc);
        switch (cc) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
            return RETRY;
        default:
            return FAIL;
        }
    }
    if (code == 404 || code == 410) {
        *found = false;
        x->out->len = 0;
        return DONE;
    }
    if (code == 429 || code >= 500) {
        sm_err_set(err, SM_E_IO, __FILE__, __LINE__, "HTTP %ld", code);
        return RETRY;
    }
    if (code == 416) { /* range not satisfiable: nothing there; the dispatch reports the range */
        *found = true;
        x->out->len = 0;
        return DONE;
    }
    if (code != 200 && code != 206) {
        sm_err_set(err, SM_E_IO, __FILE__, __LINE__, "HTTP %ld", code);
        return FAIL;
    }
    if (x->have_clen && x->out->len != x->clen) {
        sm_err_set(err, SM_E_IO, __FILE__, __LINE__,
                   "truncated body: %zu of %" PRIu64 " bytes announced", x->out->len, x->clen);
        return RETRY;
    }
    *found = true;
    if (code == 200) {
        /* The whole object: for a ranged request the server ignored Range; slice it here. */
        const uint64_t size = x->out->len;
        *objsize = size;
        if (r.kind != SM_RANGE_ALL) {
            uint64_t off = r.kind == SM_RANGE_SPAN ? r.offset : (size > r.len ? size - r.len : 0);
            uint64_t n = off >= size ? 0 : (size - off < r.len ? size - off : r.len);
            memmove(x->out->ptr, x->out->ptr + (off < size ? off : 0), (size_t)n);
            x->out->len = (size_t)n;
        }
        return DONE;
    }
    /* 206: the Content-Range must be exactly the bytes asked for (clipped at the end). */
    if (r.kind == SM_RANGE_ALL || !x->have_crange || x->cr_last < x->cr_first ||
        x->out->len != x->cr_last - x->cr_first + 1) {
        sm_err_set(err, SM_E_IO, __FILE__, __LINE__,
                   "partial response without a matching Content-Range (%zu bytes received)",
                   x->out->len);
        return RETRY;
    }
    if (x->cr_total_known) {
        *objsize = x->cr_total;
    }
    /* Shorter than asked only where the object ends (the total after '/' says where). */
    const uint64_t got = x->cr_last - x->cr_first + 1;
    bool ok;
    if (r.kind == SM_RANGE_SPAN) {
        const uint64_t end = r.offset + r.len;
        ok = x->cr_first == r.offset && got <= r.len &&
             (!x->cr_total_known || x->cr_last + 1 == (end < x->cr_total ? end : x->cr_total));
    } else {
        ok = got <= r.len &&
             (!x->cr_total_known || (x->cr_last + 1 == x->cr_total &&
                                     got == (r.len < x->cr_total ? r.len : x->cr_total)));
    }
    if (!ok) {
        sm_err_set(err, SM_E_IO, __FILE__, __LINE__,
                   "Content-Range bytes %" PRIu64 "-%" PRIu64 " does not match the request",
                   x->cr_first, x->cr_last);
        return RETRY;
    }
    return DONE;
}

static void set_range(CURL *h, struct sm_range r, char *buf, size_t cap)
{
    if (r.kind == SM_RANGE_SPAN) {
        snprintf(buf, cap, "%" PRIu64 "-%" PRIu64, r.offset, r.offset + r.len - 1);
        curl.easy_setopt(h, CURLOPT_RANGE, buf);
    } else if (r.kind == SM_RANGE_SUFFIX) {
        snprintf(buf, cap, "-%" PRIu64, r.len);
        curl.easy_setopt(h, CURLOPT_RANGE, buf);
    } else {
        curl.easy_setopt(h, CURLOPT_RANGE, NULL);
    }
}

static void common_opts(struct http_store *hs, CURL *h)
{
    curl.easy_setopt(h, CURLOPT_SHARE, hs->share);
    curl.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl.easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl.easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, hs->opts.connect_timeout_ms);
    curl.easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, hs->opts.low_speed_bytes);
    curl.easy_setopt(h, CURLOPT_LOW_SPEED_TIME, hs->opts.low_speed_time_s);
    curl.easy_setopt(h, CURLOPT_SSL_VERIFYPEER, hs->opts.verify_tls ? 1L : 0L);
    curl.easy_setopt(h, CURLOPT_SSL_VERIFYHOST, hs->opts.verify_tls ? 2L : 0L);
    curl.easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl.easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl.easy_setopt(h, CURLOPT_USERAGENT, "shardmill");
}

/* base + "/" + key, percent-encoding every key byte outside RFC 3986 "unreserved" and '/': a key
 * names an object, so '%', '#', '?', spaces and non-ASCII are data, never URL syntax. */
static bool build_url(char *url, size_t cap, const char *base, const char *key)
{
    static const char hex[] = "0123456789ABCDEF";
    int n = snprintf(url, cap, "%s/", base);
    if (n < 0 || (size_t)n >= cap) {
        return false;
    }
    size_t o = (size_t)n;
    for (const unsigned char *p = (const unsigned char *)key; *p != '\0'; p++) {
        const unsigned char c = *p;
        const bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                           (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~' ||
                           c == '/';
        if (o + (plain ? 1 : 3) >= cap) {
            return false;
        }
        if (plain) {
            url[o++] = (char)c;
        } else {
            url[o++] = '%';
            url[o++] = hex[c >> 4];
            url[o++] = hex[c & 15];
        }
    }
    url[o] = '\0';
    return true;
}

/* One logical request with retries. `head` asks for the size only. */
static sm_status request(struct http_store *hs, const char *key, struct sm_range r,
                         enum sm_io_class cls, struct sm_buf *out, bool head, bool *found,
                         uint64_t *objsize, struct sm_err *err)
{
    char url[4096];
    if (!build_url(url, sizeof(url), hs->base.url, key)) {
        SM_FAIL(err, SM_E_USAGE, "URL too long");
    }
    CURL *h = borrow(hs);
    if (h == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot create a curl handle");
    }
    char range[64];
    sm_status st = SM_OK;
    if (r.kind != SM_RANGE_ALL && r.len == 0 && !head) {
        give_back(hs, h); /* an empty range needs no request */
        out->len = 0;
        *found = true;
        return SM_OK;
    }
    for (unsigned attempt = 0;; attempt++) {
        sm_err_clear(err); /* only the last attempt's failure is reported */
        struct xfer x = {0};
        x.hs = hs;
        x.h = h;
        x.key = key;
        x.out = out;
        x.retry_after_s = -1;
        x.err = err;
        out->len = 0;
        if (r.kind != SM_RANGE_ALL && !head) {
            x.have_expect = true; /* a range has a known size: reserve it now */
            x.expect = r.len;
            st = sm_buf_reserve(out, (size_t)r.len, err);
            if (st != SM_OK) {
                break;
            }
        }
        curl.easy_reset(h);
        common_opts(hs, h);
        curl.easy_setopt(h, CURLOPT_URL, url);
        curl.easy_setopt(h, CURLOPT_NOBODY, head ? 1L : 0L);
        curl.easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl.easy_setopt(h, CURLOPT_HEADERDATA, &x);
        curl.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl.easy_setopt(h, CURLOPT_WRITEDATA, &x);
        set_range(h, r, range, sizeof(range));
        CURLcode cc = curl.easy_perform(h);
        long code = 0;
        curl.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        if (head && cc == CURLE_OK && (code == 200 || code == 204)) {
            *found = true;
            *objsize = x.have_clen ? x.clen : UINT64_MAX;
            break;
        }
        enum outcome o = judge(hs, &x, cc, code, r, found, objsize, err);
        if (o == DONE) {
            sm_err_clear(err);
            break;
        }
        st = err->status != SM_OK ? err->status : SM_E_IO;
        if (o == FAIL || attempt >= hs->opts.max_retries) {
            if (o == RETRY) {
                size_t len = strlen(err->what);
                snprintf(err->what + len, sizeof(err->what) - len, " (after %u attempts)",
                         attempt + 1);
            }
            break;
        }
        sleep_ms(backoff_ms(&hs->opts, attempt, x.retry_after_s));
        sm_store_count_retry(&hs->base, cls);
        st = SM_OK;
    }
    give_back(hs, h);
    if (st == SM_OK) {
        return SM_OK;
    }
    sm_err_where(err, "%s", url);
    return st;
}

static sm_status http_get(struct sm_store *s, const char *key, struct sm_range r,
                          enum sm_io_class cls, struct sm_buf *out, bool *found, uint64_t *objsize,
                          struct sm_err *err)
{
    uint64_t size = UINT64_MAX;
    sm_status st = request(hs_of(s), key, r, cls, out, false, found, &size, err);
    if (objsize != NULL && size != UINT64_MAX) {
        *objsize = size;
    }
    return st;
}

static sm_status http_size(struct sm_store *s, const char *key, uint64_t *size, bool *found,
                           struct sm_err *err)
{
    struct sm_buf none = SM_BUF_INIT;
    sm_status st =
        request(hs_of(s), key, sm_range_all(), SM_IO_META, &none, true, found, size, err);
    sm_buf_free(&none);
    return st;
}

static void http_close(struct sm_store *s)
{
    struct http_store *hs = hs_of(s);
    for (size_t i = 0; i < hs->npool; i++) {
        curl.easy_cleanup(hs->pool[i]);
    }
    sm_free(hs->pool);
    if (hs->share != NULL) {
        curl.share_cleanup(hs->share);
    }
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) {
        pthread_mutex_destroy(&hs->share_mu[i]);
    }
    pthread_mutex_destroy(&hs->pool_mu);
    sm_free(hs);
}

static const struct sm_store_ops http_ops = {
    .scheme = "http",
    .caps = SM_STORE_RANGE | SM_STORE_THREADSAFE,
    .get = http_get,
    .get_many = NULL,
    .size = http_size,
    .put_atomic = NULL,
    .list = NULL,
    .close = http_close,
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

/* Loads libcurl and resolves every entry point, or records why not (curl.easy_init stays NULL). */
static void curl_init_once(void)
{
    void *lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(curl_load_error, sizeof(curl_load_error), "%s", dlerror());
        return;
    }
    struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"curl_global_init", (void **)&curl.global_init},
        {"curl_easy_cleanup", (void **)&curl.easy_cleanup},
        {"curl_easy_reset", (void **)&curl.easy_reset},
        {"curl_easy_setopt", (void **)&curl.easy_setopt},
        {"curl_easy_perform", (void **)&curl.easy_perform},
        {"curl_easy_getinfo", (void **)&curl.easy_getinfo},
        {"curl_easy_strerror", (void **)&curl.easy_strerror},
        {"curl_share_init", (void **)&curl.share_init},
        {"curl_share_setopt", (void **)&curl.share_setopt},
        {"curl_share_cleanup", (void **)&curl.share_cleanup},
        {"curl_easy_init", (void **)&curl.easy_init}, /* last: non-NULL means all loaded */
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        *syms[i].slot = dlsym(lib, syms[i].name);
        if (*syms[i].slot == NULL) {
            snprintf(curl_load_error, sizeof(curl_load_error), "libcurl has no %s", syms[i].name);
            curl.easy_init = NULL;
            return;
        }
    }
    curl.global_init(CURL_GLOBAL_DEFAULT);
}

sm_status sm_store_http_open(const char *url, const struct sm_http_opts *opts,
                             struct sm_store **out, struct sm_err *err)
{
    *out = NULL;
    pthread_once(&curl_once, curl_init_once);
    if (curl.easy_init == NULL) {
        sm_err_set(err, SM_E_IO, __FILE__, __LINE__,
                   "HTTP stores need libcurl (libcurl.so.4, Debian package libcurl4): %s",
                   curl_load_error);
        sm_err_where(err, "%s", url);
        return err->status;
    }
    struct http_store *hs = sm_calloc(1, sizeof(*hs));
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/') {
        n--;
    }
    char *u = sm_malloc(n + 1);
    if (hs == NULL || u == NULL) {
        sm_free(hs);
        sm_free(u);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate an HTTP store");
    }
    memcpy(u, url, n);
    u[n] = '\0';
    hs->base.ops = &http_ops;
    hs->base.url = u;
    hs->opts = *opts;
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++) {
        pthread_mutex_init(&hs->share_mu[i], NULL);
    }
    pthread_mutex_init(&hs->pool_mu, NULL);
    hs->pool = sm_calloc(8, sizeof(*hs->pool)); /* up front: a first get must not grow state */
    hs->cap = hs->pool != NULL ? 8 : 0;
    hs->share = curl.share_init();
    if (hs->share == NULL) {
        http_close(&hs->base);
        sm_free(u);
        SM_FAIL(err, SM_E_NOMEM, "cannot create a curl share handle");
    }
    curl.share_setopt(hs->share, CURLSHOPT_LOCKFUNC, share_lock);
    curl.share_setopt(hs->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl.share_setopt(hs->share, CURLSHOPT_USERDATA, hs);
    curl.share_setopt(hs->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    curl.share_setopt(hs->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl.share_setopt(hs->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    *out = &hs->base;
    return SM_OK;
}
