/* The `s3` store (SPEC §3): s3://bucket/prefix is the HTTP store (store_http.c: ranges, retries,
 * counters, wire bytes, the Range-ignoring server) on the bucket's endpoint URL, plus a signer
 * that adds AWS Signature Version 4 headers to every request (store_s3_sign.c) and reads S3's XML
 * error bodies (403 refused, NoSuchBucket). Addressing: path-style <endpoint>/<bucket>/<prefix>
 * or virtual-hosted <scheme>://<bucket>.<host>/<prefix>; an endpoint that is an IP address or
 * localhost is always path-style (no DNS name can carry the bucket there). */
#include "shardmill/sm_config.h"

#include "shardmill/store.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "shardmill/alloc.h"
#include "shardmill/url.h"
#include "store_http_int.h"
#include "store_s3_int.h"

struct s3_signer {
    char *bucket, *display, *region, *key_id, *secret, *token, *from;
};

static void signer_free(void *ctx)
{
    struct s3_signer *g = ctx;
    if (g == NULL) {
        return;
    }
    if (g->secret != NULL) {
        memset(g->secret, 0, strlen(g->secret));
    }
    sm_free(g->bucket);
    sm_free(g->display);
    sm_free(g->region);
    sm_free(g->key_id);
    sm_free(g->secret);
    sm_free(g->token);
    sm_free(g->from);
    sm_free(g);
}

/* host and path of an absolute http(s) URL */
static bool split_url(const char *url, const char **host, size_t *hlen, const char **path)
{
    const char *p = strstr(url, "://");
    if (p == NULL) {
        return false;
    }
    *host = p + 3;
    const char *slash = strchr(*host, '/');
    *hlen = slash != NULL ? (size_t)(slash - *host) : strlen(*host);
    *path = slash != NULL ? slash : "/";
    return *hlen > 0;
}

static sm_status s3_sign(void *ctx, const char *method, const char *url,
                         char (*lines)[SM_HTTP_SIGN_LINE], size_t *n, struct sm_err *err)
{
    struct s3_signer *g = ctx;
    *n = 0;
    if (g->key_id == NULL) {
        return SM_OK; /* anonymous: plain requests */
    }
    const char *host, *path;
    size_t hlen;
    if (g->token != NULL && strlen(g->token) > SM_HTTP_SIGN_LINE - 64) {
        SM_FAIL(err, SM_E_USAGE, "the session token (AWS_SESSION_TOKEN) is longer than %d bytes",
                SM_HTTP_SIGN_LINE - 64);
    }
    if (!split_url(url, &host, &hlen, &path) || hlen >= 512) {
        char shown[SM_URL_REDACT_MAX];
        SM_FAIL(err, SM_E_USAGE, "cannot sign a request to '%s'",
                sm_url_redact(url, shown, sizeof(shown)));
    }
    char hostv[512], date[17], auth[SM_HTTP_SIGN_LINE - 32];
    snprintf(hostv, sizeof(hostv), "%.*s", (int)hlen, host);
    sm_s3_amz_date((int64_t)time(NULL), date);
    /* sorted by name, as SigV4 wants them */
    struct sm_s3_hdr h[4] = {{"host", hostv},
                             {"x-amz-content-sha256", SM_S3_EMPTY_SHA256},
                             {"x-amz-date", date},
                             {"x-amz-security-token", g->token}};
    const size_t nh = g->token != NULL ? 4 : 3;
    if (!sm_s3_authorization(auth, sizeof(auth), g->key_id, g->secret, g->region, "s3", date,
                             method, path, "", h, nh, SM_S3_EMPTY_SHA256)) {
        char shown[SM_URL_REDACT_MAX];
        SM_FAIL(err, SM_E_USAGE, "the signed request to '%s' is too long",
                sm_url_redact(url, shown, sizeof(shown)));
    }
    snprintf(lines[0], SM_HTTP_SIGN_LINE, "Host: %s", hostv);
    snprintf(lines[1], SM_HTTP_SIGN_LINE, "x-amz-content-sha256: %s", SM_S3_EMPTY_SHA256);
    snprintf(lines[2], SM_HTTP_SIGN_LINE, "x-amz-date: %s", date);
    snprintf(lines[3], SM_HTTP_SIGN_LINE, "Authorization: %s", auth);
    *n = 4;
    if (g->token != NULL) {
        snprintf(lines[4], SM_HTTP_SIGN_LINE, "x-amz-security-token: %s", g->token);
        *n = 5;
    }
    return SM_OK;
}

static bool s3_refine(void *ctx, long code, bool head, const char *body, size_t n,
                      struct sm_err *err)
{
    struct s3_signer *g = ctx;
    char scode[64], msg[160];
    const bool have = sm_s3_parse_error(body, n, scode, sizeof(scode), msg, sizeof(msg));
    if (code == 404 && have && strcmp(scode, "NoSuchBucket") == 0) {
        SM_ERR(err, SM_E_DATA, "the bucket '%s' does not exist (S3 NoSuchBucket)", g->bucket);
        return true;
    }
    if (code == 404 || code == 410 || code == 429 || code >= 500) {
        return false; /* not found, or retried by the HTTP store */
    }
    char signed_with[200];
    if (g->key_id != NULL) {
        snprintf(signed_with, sizeof(signed_with), "signed with access key id %s (%s, region %s)",
                 g->key_id, g->from != NULL ? g->from : "given", g->region);
    } else {
        snprintf(signed_with, sizeof(signed_with),
                 "sent unsigned: no AWS credentials found (AWS_ACCESS_KEY_ID, AWS_PROFILE)");
    }
    const char *detail = have ? msg : head ? "no error body to a HEAD request" : "no S3 error body";
    if (code == 403 || code == 401) {
        SM_ERR(err, SM_E_IO, "the request was refused: HTTP %ld %s, %s: %s", code,
               have ? scode : "", signed_with, detail);
    } else {
        SM_ERR(err, SM_E_IO, "S3 answered HTTP %ld %s, %s: %s", code, have ? scode : "",
               signed_with, detail);
    }
    return true;
}

static char *dup_or_null(const char *s, bool *oom)
{
    if (s == NULL || s[0] == '\0') {
        return NULL;
    }
    char *d = sm_strdup(s);
    *oom = *oom || d == NULL;
    return d;
}

/* True for an IPv4 literal, a bracketed IPv6 literal or localhost (with or without a port). */
static bool ip_or_localhost(const char *host, size_t n)
{
    if (n > 0 && host[0] == '[') {
        return true;
    }
    size_t end = 0;
    while (end < n && host[end] != ':') {
        end++;
    }
    if (end == strlen("localhost") && strncmp(host, "localhost", end) == 0) {
        return true;
    }
    for (size_t i = 0; i < end; i++) {
        if (!((host[i] >= '0' && host[i] <= '9') || host[i] == '.')) {
            return false;
        }
    }
    return end > 0;
}

/* Appends s percent-encoded (RFC 3986 unreserved and '/' kept), as store_http.c encodes keys. */
static bool put_encoded(char *out, size_t cap, size_t *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        const bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                           (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~' ||
                           c == '/';
        if (*o + 4 >= cap) {
            return false;
        }
        if (plain) {
            out[(*o)++] = (char)c;
        } else {
            out[(*o)++] = '%';
            out[(*o)++] = hex[c >> 4];
            out[(*o)++] = hex[c & 15];
        }
    }
    out[*o] = '\0';
    return true;
}

sm_status sm_s3_map_url(const char *url, const struct sm_s3_opts *o, struct sm_s3_url *out,
                        struct sm_err *err)
{
    char shown[SM_URL_REDACT_MAX]; /* a URL in a message: credentials redacted */
    const char *b = url + strlen("s3://");
    size_t blen = strcspn(b, "/");
    const char *prefix = b[blen] == '/' ? b + blen + 1 : "";
    size_t plen = strlen(prefix);
    while (plen > 0 && prefix[plen - 1] == '/') {
        plen--;
    }
    bool bucket_ok = strncmp(url, "s3://", 5) == 0 && blen >= 1 && blen < sizeof(out->bucket);
    for (size_t i = 0; i < blen; i++) {
        const char c = b[i];
        bucket_ok = bucket_ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                  (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_');
    }
    if (!bucket_ok) {
        SM_FAIL_AT(err, SM_E_USAGE, sm_url_redact(url, shown, sizeof(shown)),
                   "not an S3 URL: want s3://bucket/prefix with a bucket name of letters, digits, "
                   "'.', '-' and '_'");
    }
    snprintf(out->bucket, sizeof(out->bucket), "%.*s", (int)blen, b);
    const char *region = o->region != NULL && o->region[0] != '\0' ? o->region : "us-east-1";
    snprintf(out->region, sizeof(out->region), "%s", region);
    char endpoint[1024];
    if (o->endpoint != NULL && o->endpoint[0] != '\0') {
        snprintf(endpoint, sizeof(endpoint), "%s", o->endpoint);
    } else {
        snprintf(endpoint, sizeof(endpoint), "https://s3.%s.amazonaws.com", region);
    }
    size_t elen = strlen(endpoint);
    while (elen > 0 && endpoint[elen - 1] == '/') {
        endpoint[--elen] = '\0';
    }
    const bool https = strncmp(endpoint, "https://", 8) == 0;
    if ((!https && strncmp(endpoint, "http://", 7) != 0) || strchr(endpoint, '?') != NULL ||
        strchr(endpoint, '#') != NULL || strlen(endpoint) <= (https ? 8u : 7u)) {
        SM_FAIL_AT(err, SM_E_USAGE, "input.s3.endpoint",
                   "the S3 endpoint '%s' is not an http:// or https:// URL",
                   sm_url_redact(endpoint, shown, sizeof(shown)));
    }
    const char *host = endpoint + (https ? 8 : 7);
    const size_t hlen = strcspn(host, "/");
    const bool path_style = o->path_style || ip_or_localhost(host, hlen);
    int w;
    if (path_style) {
        w = snprintf(out->base, sizeof(out->base), "%s/%s", endpoint, out->bucket);
    } else {
        w = snprintf(out->base, sizeof(out->base), "%s%s.%s", https ? "https://" : "http://",
                     out->bucket, host);
    }
    bool ok = w > 0 && (size_t)w < sizeof(out->base);
    size_t n = ok ? (size_t)w : 0;
    if (ok && plen > 0) {
        ok = n + 1 < sizeof(out->base);
        if (ok) {
            out->base[n++] = '/';
            ok = put_encoded(out->base, sizeof(out->base), &n, prefix, plen);
        }
    }
    w = snprintf(out->display, sizeof(out->display), "s3://%s%s%.*s", out->bucket,
                 plen > 0 ? "/" : "", (int)plen, prefix);
    if (!ok || w < 0 || (size_t)w >= sizeof(out->display)) {
        SM_FAIL_AT(err, SM_E_USAGE, sm_url_redact(url, shown, sizeof(shown)),
                   "the S3 URL is too long");
    }
    return SM_OK;
}

sm_status sm_store_s3_open(const char *url, const struct sm_http_opts *opts, struct sm_store **out,
                           struct sm_err *err)
{
    char shown[SM_URL_REDACT_MAX]; /* a URL in a message: credentials redacted */
    *out = NULL;
    static const struct sm_s3_opts none = {0};
    const struct sm_s3_opts *o = opts->s3 != NULL ? opts->s3 : &none;
    struct sm_s3_url *m = sm_malloc(sizeof(*m));
    if (m == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate an S3 store");
    }
    sm_status st = sm_s3_map_url(url, o, m, err);
    if (st != SM_OK) {
        sm_free(m);
        return st;
    }
    struct s3_signer *g = sm_calloc(1, sizeof(*g));
    bool oom = g == NULL;
    if (g != NULL) {
        g->display = dup_or_null(m->display, &oom);
        g->bucket = dup_or_null(m->bucket, &oom);
        g->region = dup_or_null(m->region, &oom);
        g->key_id = dup_or_null(o->access_key_id, &oom);
        g->secret = g->key_id != NULL ? dup_or_null(o->secret_access_key, &oom) : NULL;
        g->token = g->key_id != NULL ? dup_or_null(o->session_token, &oom) : NULL;
        g->from = dup_or_null(o->credentials_from, &oom);
    }
    if (oom) {
        signer_free(g);
        sm_free(m);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate an S3 store");
    }
    if (g->key_id != NULL && g->secret == NULL) {
        signer_free(g);
        sm_free(m);
        SM_FAIL_AT(err, SM_E_USAGE, sm_url_redact(url, shown, sizeof(shown)),
                   "an access key id without a secret access key (AWS_SECRET_ACCESS_KEY)");
    }
    const struct sm_http_signer signer = {
        .ctx = g, .sign = s3_sign, .refine = s3_refine, .free = signer_free, .display = g->display};
    st = sm_store_http_open_signed(m->base, opts, &signer, out, err);
    sm_free(m);
    return st;
}
