/* The `http`/`https` store's transport (SPEC §3) on libcurl, loaded by dlopen at the first open
 * (its ~25 libraries cost every process ~8 ms otherwise, W3): pooled easy handles sharing
 * connections, ranged GETs checked against their Content-Range, bodies sized from what was
 * announced, retries with backoff (docs/internals/http-retries.md), http and https only. A server
 * ignoring Range is the keep's (store_http_keep.c); the pure parsing is store_http_parse.c's. */
#include "shardmill/sm_config.h"

#include "shardmill/store.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "shardmill/alloc.h"
#include "shardmill/module.h"
#include "shardmill/clock.h"
#include "shardmill/library.h"
#include "shardmill/url.h"
#include "store_http_int.h"
#include "store_http_keep_int.h"

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
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
} curl;
static char curl_load_error[200];

struct http_store {
    struct sm_store base;
    struct sm_http_opts opts;
    CURLSH *share;
    /* one per curl_lock_data value this build knows, plus one for values it does not */
    pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST + 1];
    pthread_mutex_t pool_mu;
    CURL **pool; /* idle easy handles */
    size_t npool, cap;
    struct sm_http_keep keep; /* Range support, and the whole objects kept if it is ignored */
    const char *http_base;    /* the URL keys are appended to: own_base */
    char *own_base;           /* the URL as given (s3: the bucket's HTTP URL); base.url is its
                                 redacted form (s3: the s3:// URL) for messages */
    bool signed_;             /* requests carry the signer's headers (the s3 store) */
    struct sm_http_signer signer;
};

/* One transfer's state, filled by the curl callbacks. */
struct xfer {
    struct http_store *hs;
    CURL *h;
    const char *key;
    struct sm_buf *out;
    bool ranged;        /* a Range was sent */
    uint64_t range_len; /* its length */
    bool started;       /* the first body bytes arrived */
    struct sm_http_body body;
    struct sm_http_resp resp;
    bool overflow; /* body longer than announced */
    bool limit_hit;
    uint64_t wire; /* body bytes of 200/206 responses received (counted, SPEC §3) */
    char ebody[SM_HTTP_ERRBODY_MAX]; /* the start of an error body (signed stores only) */
    size_t elen;
    bool stopped;   /* the stop flag aborted the transfer */
    uint64_t t0_ns; /* when the attempt started (request_timeout_ms) */
    struct sm_err *err;
};

static struct http_store *hs_of(struct sm_store *s)
{
    return (struct http_store *)s;
}

/* libcurl is loaded at run time and may be newer than the headers: a lock id this build does not
 * know shares the last mutex instead of indexing past the array. */
static size_t lock_slot(curl_lock_data data)
{
    return (unsigned)data < (unsigned)CURL_LOCK_DATA_LAST ? (size_t)data
                                                          : (size_t)CURL_LOCK_DATA_LAST;
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *user)
{
    (void)h;
    (void)access;
    pthread_mutex_lock(&((struct http_store *)user)->share_mu[lock_slot(data)]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *user)
{
    (void)h;
    pthread_mutex_unlock(&((struct http_store *)user)->share_mu[lock_slot(data)]);
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

static size_t on_header(char *line, size_t size, size_t nitems, void *user)
{
    struct xfer *x = user;
    const size_t n = size * nitems;
    sm_http_header_line(&x->resp, line, n);
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
        sm_http_body_plan(code, &x->resp, x->ranged, x->range_len, &x->body);
        if (x->body.keep && x->body.have_expect) {
            if (sm_store_check_len(&x->hs->base, x->key, x->body.expect, x->err) != SM_OK) {
                x->limit_hit = true;
                return 0;
            }
            if (sm_buf_reserve(out, (size_t)x->body.expect, x->err) != SM_OK) {
                return 0;
            }
        }
    }
    if (!x->body.keep) { /* an error page: its status decides; a signer may read its start */
        if (x->hs->signed_ && x->elen < sizeof(x->ebody)) {
            const size_t k = n < sizeof(x->ebody) - x->elen ? n : sizeof(x->ebody) - x->elen;
            memcpy(x->ebody + x->elen, data, k);
            x->elen += k;
        }
        return n;
    }
    x->wire += n; /* received, whatever becomes of them */
    uint64_t grow_to;
    switch (sm_http_body_step(&x->body, x->hs->base.max_object_bytes, out->len, out->cap, n,
                              &grow_to)) {
    case SM_HTTP_APPEND:
        break;
    case SM_HTTP_GROW:
        if (grow_to > SIZE_MAX || sm_buf_reserve(out, (size_t)grow_to, x->err) != SM_OK) {
            SM_ERR(x->err, SM_E_NOMEM, "cannot hold a response body of %" PRIu64 " bytes", grow_to);
            return 0;
        }
        break;
    case SM_HTTP_OVERFLOW:
        x->overflow = true; /* more bytes than announced: never trust this body */
        return 0;
    case SM_HTTP_LIMIT:
        sm_store_check_len(&x->hs->base, x->key,
                           x->body.have_expect ? x->body.expect : (uint64_t)out->len + n, x->err);
        x->limit_hit = true;
        return 0;
    }
    memcpy(out->ptr + out->len, data, n);
    out->len += n;
    return n;
}

/* Called by libcurl about once a second or more often, also while nothing arrives: the stop
 * flag ends a transfer in flight (CURLE_ABORTED_BY_CALLBACK), not only between requests. */
static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    struct xfer *x = user;
    const atomic_int *stop = x->hs->opts.stop;
    if (stop != NULL && atomic_load_explicit(stop, memory_order_relaxed) != 0) {
        x->stopped = true;
        return 1;
    }
    return 0;
}

/* Sleeps ms, in slices, so a stop flag set meanwhile ends the wait early: false if stopped. */
static bool sleep_ms(uint64_t ms, const atomic_int *stop)
{
    while (ms > 0) {
        if (stop != NULL && atomic_load_explicit(stop, memory_order_relaxed) != 0) {
            return false;
        }
        const uint64_t step = ms < 50 ? ms : 50;
        struct timespec ts = {0, (long)step * 1000000L};
        while (nanosleep(&ts, &ts) != 0) {
        }
        ms -= step;
    }
    return stop == NULL || atomic_load_explicit(stop, memory_order_relaxed) == 0;
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

/* Classifies a finished transfer and validates the body against the request. A 200 to a ranged
 * request leaves the whole object in x->out and sets *whole (the caller keeps and slices it). */
static enum outcome judge(struct xfer *x, CURLcode cc, long code, bool head, struct sm_range r,
                          bool *found, uint64_t *objsize, bool *whole, struct sm_err *err)
{
    if (x->limit_hit) {
        return FAIL; /* err already says which limit */
    }
    if (err->status == SM_E_NOMEM) {
        return FAIL;
    }
    if (x->stopped) {
        sm_stop_check(x->hs->opts.stop, err);
        return FAIL;
    }
    if (cc == CURLE_WRITE_ERROR && x->overflow) {
        SM_ERR(err, SM_E_IO, "server sent more bytes than announced (%" PRIu64 ")", x->body.expect);
        return RETRY;
    }
    if (cc != CURLE_OK && code >= 300 && code < 400 && x->resp.location[0] != '\0') {
        /* a redirect libcurl refused to follow: to another protocol, or too many */
        char shown[SM_URL_REDACT_MAX];
        SM_ERR(err, SM_E_IO,
               "HTTP %ld redirect to '%s' not followed: %s (only http and https redirects "
               "are followed, at most 5)",
               code, sm_url_redact(x->resp.location, shown, sizeof(shown)), curl.easy_strerror(cc));
        sm_err_cause(err, "curl", (int)cc);
        return FAIL;
    }
    const long limit = x->hs->opts.request_timeout_ms;
    if (cc == CURLE_OPERATION_TIMEDOUT && limit > 0 &&
        (sm_clock_ns() - x->t0_ns) / 1000000u >= (uint64_t)limit) {
        SM_ERR(err, SM_E_IO, "no complete response within input.http.request_timeout_ms (%ld ms)",
               limit);
        sm_err_cause(err, "curl", (int)cc);
        return RETRY;
    }
    if (cc != CURLE_OK) {
        SM_ERR(err, SM_E_IO, "%s", curl.easy_strerror(cc));
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
    if (x->hs->signed_ && code >= 300 && code != 416 &&
        x->hs->signer.refine(x->hs->signer.ctx, code, head, x->ebody, x->elen, err)) {
        return FAIL;
    }
    if (code == 404 || code == 410) {
        *found = false;
        x->out->len = 0;
        return DONE;
    }
    if (code == 429 || code >= 500) {
        SM_ERR(err, SM_E_IO, "server answered HTTP %ld", code);
        return RETRY;
    }
    if (code == 416) { /* range not satisfiable: nothing there; the dispatch reports the range */
        *found = true;
        x->out->len = 0;
        return DONE;
    }
    if (code != 200 && code != 206) {
        SM_ERR(err, SM_E_IO, "server answered HTTP %ld", code);
        return FAIL;
    }
    if (x->resp.have_clen && x->out->len != x->resp.clen) {
        SM_ERR(err, SM_E_IO, "truncated body: %zu of %" PRIu64 " bytes announced", x->out->len,
               x->resp.clen);
        return RETRY;
    }
    *found = true;
    if (code == 200) {
        /* The whole object; for a ranged request the server ignored Range. */
        *objsize = x->out->len;
        *whole = r.kind != SM_RANGE_ALL;
        return DONE;
    }
    switch (sm_http_check_partial(r, &x->resp, x->out->len, objsize)) {
    case SM_HTTP_PARTIAL_OK:
        return DONE;
    case SM_HTTP_PARTIAL_NO_RANGE:
        SM_ERR(err, SM_E_IO,
               "partial response without a matching Content-Range (%zu bytes received)",
               x->out->len);
        return RETRY;
    case SM_HTTP_PARTIAL_MISMATCH:
        break;
    }
    SM_ERR(err, SM_E_IO, "Content-Range bytes %" PRIu64 "-%" PRIu64 " does not match the request",
           x->resp.cr_first, x->resp.cr_last);
    return RETRY;
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

/* Only http and https, for the URL and for every redirect (never file://, ftp://, ...).
 * libcurl >= 7.85 takes the names; older ones the CURLPROTO_ bits (options 181 and 182, by
 * number: the names are deprecated in the headers this is built with). */
static CURLcode restrict_protocols(CURL *h)
{
    CURLcode a = curl.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode b = curl.easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    if (a == CURLE_OK && b == CURLE_OK) {
        return CURLE_OK;
    }
    const long bits = CURLPROTO_HTTP | CURLPROTO_HTTPS;
    a = curl.easy_setopt(h, (CURLoption)(CURLOPTTYPE_LONG + 181), bits);
    b = curl.easy_setopt(h, (CURLoption)(CURLOPTTYPE_LONG + 182), bits);
    return a != CURLE_OK ? a : b;
}

static CURLcode common_opts(struct http_store *hs, CURL *h)
{
    curl.easy_setopt(h, CURLOPT_SHARE, hs->share);
    curl.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl.easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl.easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, hs->opts.connect_timeout_ms);
    curl.easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, hs->opts.low_speed_bytes);
    curl.easy_setopt(h, CURLOPT_LOW_SPEED_TIME, hs->opts.low_speed_time_s);
    curl.easy_setopt(h, CURLOPT_TIMEOUT_MS, hs->opts.request_timeout_ms);
    curl.easy_setopt(h, CURLOPT_SSL_VERIFYPEER, hs->opts.verify_tls ? 1L : 0L);
    curl.easy_setopt(h, CURLOPT_SSL_VERIFYHOST, hs->opts.verify_tls ? 2L : 0L);
    curl.easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl.easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl.easy_setopt(h, CURLOPT_USERAGENT, "shardmill");
    return restrict_protocols(h);
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

/* The signer's header lines for one attempt, as a curl list set on h (*hdrs: freed by the
 * caller after the transfer). */
static sm_status sign_request(struct http_store *hs, CURL *h, bool head, const char *url,
                              struct curl_slist **hdrs, struct sm_err *err)
{
    char lines[SM_HTTP_SIGN_HDRS][SM_HTTP_SIGN_LINE];
    size_t n = 0;
    SM_TRY(hs->signer.sign(hs->signer.ctx, head ? "HEAD" : "GET", url, lines, &n, err));
    for (size_t i = 0; i < n && i < SM_HTTP_SIGN_HDRS; i++) {
        struct curl_slist *l = curl.slist_append(*hdrs, lines[i]);
        if (l == NULL) {
            curl.slist_free_all(*hdrs);
            *hdrs = NULL;
            SM_FAIL(err, SM_E_NOMEM, "cannot build the request headers");
        }
        *hdrs = l;
    }
    memset(lines, 0, sizeof(lines));
    curl.easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
    return SM_OK;
}

/* One logical request with retries. `head` asks for the size only. Every attempt of a GET counts
 * as one request with the body bytes it received. The caller's err is only ever set (first error
 * wins), never cleared: each attempt fails into its own context, and the final message is the
 * last failure, with the number of attempts and, if it differed, the first failure. */
static sm_status request(struct http_store *hs, const char *key, struct sm_range r,
                         enum sm_io_class cls, struct sm_buf *out, bool head, bool *found,
                         uint64_t *objsize, bool *whole, long *final_code, struct sm_err *err)
{
    *whole = false;
    *final_code = 0;
    char url[4096];
    if (!build_url(url, sizeof(url), hs->http_base, key)) {
        SM_FAIL(err, SM_E_USAGE, "URL too long");
    }
    CURL *h = borrow(hs);
    if (h == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot create a curl handle");
    }
    char range[64];
    sm_status st = SM_OK;
    struct sm_err first, last;
    sm_err_clear(&first);
    unsigned attempt = 0;
    enum outcome o = FAIL;
    for (;; attempt++) {
        sm_err_clear(&last);
        struct xfer x = {0};
        x.hs = hs;
        x.h = h;
        x.key = key;
        x.out = out;
        x.err = &last;
        x.ranged = r.kind != SM_RANGE_ALL;
        x.range_len = r.len;
        sm_http_resp_reset(&x.resp);
        out->len = 0;
        if (!head && sm_store_admit(&hs->base, 1, key, &last) != SM_OK) { /* counted below */
            st = last.status;
            o = FAIL;
            break;
        }
        if (r.kind != SM_RANGE_ALL && !head) {
            st = sm_buf_reserve(out, (size_t)r.len, err); /* a range has a known size */
            if (st != SM_OK) {
                break;
            }
        }
        curl.easy_reset(h);
        if (common_opts(hs, h) != CURLE_OK) {
            SM_ERR(&last, SM_E_IO, "this libcurl cannot restrict requests to http and https");
            st = SM_E_IO;
            o = FAIL;
            break;
        }
        curl.easy_setopt(h, CURLOPT_URL, url);
        curl.easy_setopt(h, CURLOPT_NOBODY, head ? 1L : 0L);
        if (hs->signed_) { /* a signature holds for one host: S3's redirects are errors */
            curl.easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
        }
        struct curl_slist *hdrs = NULL;
        if (hs->signed_) { /* signed anew for every attempt: a fresh date */
            if (sign_request(hs, h, head, url, &hdrs, &last) != SM_OK) {
                st = last.status;
                o = FAIL;
                break;
            }
        }
        curl.easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl.easy_setopt(h, CURLOPT_HEADERDATA, &x);
        curl.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl.easy_setopt(h, CURLOPT_WRITEDATA, &x);
        curl.easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl.easy_setopt(h, CURLOPT_XFERINFODATA, &x);
        curl.easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        set_range(h, r, range, sizeof(range));
        x.t0_ns = sm_clock_ns();
        CURLcode cc = curl.easy_perform(h);
        curl.easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
        curl.slist_free_all(hdrs);
        long code = 0;
        curl.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        *final_code = code;
        if (!head) {
            sm_store_count(&hs->base, cls, 1, x.wire);
        }
        if (head && cc == CURLE_OK && (code == 200 || code == 204)) {
            *found = true;
            *objsize = x.resp.have_clen ? x.resp.clen : UINT64_MAX;
            break;
        }
        o = judge(&x, cc, code, head, r, found, objsize, whole, &last);
        if (o == DONE) {
            break;
        }
        if (attempt == 0) {
            first = last;
        }
        st = last.status != SM_OK ? last.status : SM_E_IO;
        if (o == FAIL || attempt >= hs->opts.max_retries) {
            break;
        }
        if (!sleep_ms(backoff_ms(&hs->opts, attempt, x.resp.retry_after_s), hs->opts.stop)) {
            sm_err_clear(&last);
            sm_stop_check(hs->opts.stop, &last);
            st = last.status;
            o = FAIL;
            break;
        }
        st = SM_OK;
    }
    give_back(hs, h);
    if (st == SM_OK) {
        return SM_OK;
    }
    if (last.status == SM_OK) { /* failed outside the transfer (err already says why) */
        return st;
    }
    if (o == RETRY || attempt > 0) { /* retries ran out, or a retry failed for good */
        const bool differ = attempt > 0 && strcmp(first.what, last.what) != 0;
        size_t len = strlen(last.what);
        snprintf(last.what + len, sizeof(last.what) - len, " (after %u attempts%s%s)", attempt + 1,
                 differ ? "; first: " : "", differ ? first.what : "");
    }
    if (hs->signed_) { /* the s3:// URL of the object, not the endpoint's */
        sm_err_where(&last, "%s/%s", hs->base.url, key);
    }
    char shown[SM_URL_REDACT_MAX];
    sm_err_where(&last, "%s", sm_url_redact(url, shown, sizeof(shown)));
    if (err->status == SM_OK) {
        *err = last;
    }
    return st;
}

/* The keep's GET (sm_http_fetch_fn): one request of the transport. */
static sm_status keep_fetch(void *ctx, const char *key, struct sm_range r, enum sm_io_class cls,
                            struct sm_buf *out, bool *found, uint64_t *objsize, bool *whole,
                            long *code, struct sm_err *err)
{
    return request(ctx, key, r, cls, out, false, found, objsize, whole, code, err);
}

static sm_status http_get(struct sm_store *s, const char *key, struct sm_range r,
                          enum sm_io_class cls, struct sm_buf *out, bool *found, uint64_t *objsize,
                          struct sm_err *err)
{
    struct http_store *hs = hs_of(s);
    uint64_t size = UINT64_MAX;
    sm_status st;
    if (r.kind != SM_RANGE_ALL && r.len == 0) {
        out->len = 0; /* an empty range needs no request */
        *found = true;
        return SM_OK;
    }
    if (r.kind == SM_RANGE_ALL) {
        bool whole;
        long code;
        st = request(hs, key, r, cls, out, false, found, &size, &whole, &code, err);
    } else {
        st = sm_http_keep_get(&hs->keep, key, r, cls, out, found, &size, err);
    }
    if (objsize != NULL && size != UINT64_MAX) {
        *objsize = size;
    }
    return st;
}

static sm_status http_size(struct sm_store *s, const char *key, uint64_t *size, bool *found,
                           struct sm_err *err)
{
    struct sm_buf none = SM_BUF_INIT;
    bool whole;
    long code;
    sm_status st = request(hs_of(s), key, sm_range_all(), SM_IO_META, &none, true, found, size,
                           &whole, &code, err);
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
    for (int i = 0; i <= CURL_LOCK_DATA_LAST; i++) {
        pthread_mutex_destroy(&hs->share_mu[i]);
    }
    pthread_mutex_destroy(&hs->pool_mu);
    sm_http_keep_destroy(&hs->keep);
    if (hs->signed_ && hs->signer.free != NULL) {
        hs->signer.free(hs->signer.ctx);
    }
    sm_free(hs->own_base);
    sm_free(hs);
}

static const struct sm_store_ops http_ops = {
    .scheme = "http",
    .caps = SM_STORE_RANGE | SM_STORE_THREADSAFE | SM_STORE_SELF_COUNTED,
    .get = http_get,
    .get_many = NULL,
    .size = http_size,
    .put_atomic = NULL,
    .list = NULL,
    .close = http_close,
};

/* The s3 store: the same driver, every request signed (sm_store_http_open_signed). */
static const struct sm_store_ops s3_ops = {
    .scheme = "s3",
    .caps = SM_STORE_RANGE | SM_STORE_THREADSAFE | SM_STORE_SELF_COUNTED,
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
    static const struct sm_library_sym syms[] = {
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
        {"curl_slist_append", (void **)&curl.slist_append},
        {"curl_slist_free_all", (void **)&curl.slist_free_all},
        {"curl_easy_init", (void **)&curl.easy_init}, /* last: non-NULL means all loaded */
    };
    if (!sm_library_load("libcurl.so.4", syms, sizeof(syms) / sizeof(syms[0]), curl_load_error,
                         sizeof(curl_load_error))) {
        return;
    }
    const CURLcode cc = curl.global_init(CURL_GLOBAL_DEFAULT);
    if (cc != CURLE_OK) {
        snprintf(curl_load_error, sizeof(curl_load_error),
                 "curl_global_init failed: %s (CURLcode %d)",
                 curl.easy_strerror != NULL ? curl.easy_strerror(cc) : "?", (int)cc);
        curl.easy_init = NULL;
    }
}

/* The store's name in messages (base.url): the first n bytes of s with any credentials
 * redacted (sm_url_redact grows a text by at most 10 bytes per byte). NULL if out of memory. */
static char *display_url(const char *s, size_t n)
{
    char *raw = sm_malloc(n + 1);
    const size_t cap = 11 * n + 32;
    char *buf = sm_malloc(cap);
    char *shown = NULL;
    if (raw != NULL && buf != NULL) {
        memcpy(raw, s, n);
        raw[n] = '\0';
        shown = sm_strdup(sm_url_redact(raw, buf, cap));
    }
    sm_free(raw);
    sm_free(buf);
    return shown;
}

sm_status sm_store_http_open(const char *url, const struct sm_http_opts *opts,
                             struct sm_store **out, struct sm_err *err)
{
    return sm_store_http_open_signed(url, opts, NULL, out, err);
}

sm_status sm_store_http_open_signed(const char *url, const struct sm_http_opts *opts,
                                    const struct sm_http_signer *signer, struct sm_store **out,
                                    struct sm_err *err)
{
    *out = NULL;
    pthread_once(&curl_once, curl_init_once);
    if (curl.easy_init == NULL) {
        if (signer != NULL && signer->free != NULL) {
            signer->free(signer->ctx);
        }
        SM_ERR(err, SM_E_IO,
               "HTTP stores need a working libcurl (libcurl.so.4, Debian package libcurl4): %s",
               curl_load_error);
        char shown[SM_URL_REDACT_MAX];
        sm_err_where(
            err, "%s",
            sm_url_redact(signer != NULL && signer->display != NULL ? signer->display : url, shown,
                          sizeof(shown)));
        return err->status;
    }
    struct http_store *hs = sm_calloc(1, sizeof(*hs));
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/') {
        n--;
    }
    char *u = sm_malloc(n + 1);
    char *shown = signer != NULL ? display_url(signer->display, strlen(signer->display))
                                 : display_url(url, n);
    if (hs == NULL || u == NULL || shown == NULL) {
        sm_free(hs);
        sm_free(u);
        sm_free(shown);
        if (signer != NULL && signer->free != NULL) {
            signer->free(signer->ctx);
        }
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate an HTTP store");
    }
    memcpy(u, url, n);
    u[n] = '\0';
    hs->base.ops = signer != NULL ? &s3_ops : &http_ops;
    hs->base.url = shown; /* what messages name: the URL as given, credentials redacted */
    hs->http_base = u;    /* what requests go to */
    hs->own_base = u;
    if (signer != NULL) {
        hs->signed_ = true;
        hs->signer = *signer;
    }
    hs->opts = *opts;
    for (int i = 0; i <= CURL_LOCK_DATA_LAST; i++) {
        pthread_mutex_init(&hs->share_mu[i], NULL);
    }
    pthread_mutex_init(&hs->pool_mu, NULL);
    sm_http_keep_init(&hs->keep, &hs->base, keep_fetch, hs);
    hs->pool = sm_calloc(8, sizeof(*hs->pool)); /* up front: a first get must not grow state */
    hs->cap = hs->pool != NULL ? 8 : 0;
    hs->share = curl.share_init();
    if (hs->share == NULL) {
        char *shown_url = hs->base.url; /* freed by sm_store_close, not http_close */
        http_close(&hs->base);
        sm_free(shown_url);
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

bool sm_store_http_stats(struct sm_store *s, struct sm_http_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (s == NULL || (s->ops != &http_ops && s->ops != &s3_ops)) {
        return false;
    }
    sm_http_keep_stats(&hs_of(s)->keep, out);
    return true;
}
