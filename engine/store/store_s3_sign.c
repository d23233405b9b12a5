/* AWS Signature Version 4 for the `s3` store, and the parse of S3 XML error bodies (see
 * store_s3_int.h). HMAC-SHA256 and SHA-256 come from nettle (Debian nettle-dev, already linked for
 * write/'s SHA-256).
 * Why by hand and not libcurl's CURLOPT_AWS_SIGV4: libcurl is dlopen'ed (store_http.c) and so may
 * be any installed version; Debian 12's 7.88 signs only the headers it is given and never sends
 * x-amz-content-sha256 (S3 requires it on every signed request), and the canonicalisation of
 * CURLOPT_AWS_SIGV4 changed between releases (query sorting, header trimming, the payload hash).
 * A hundred lines here make every request's signature the same on every libcurl, and testable
 * against AWS's published vectors without a network. */
#include "shardmill/sm_config.h"

#include "store_s3_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <nettle/hmac.h>
#include <nettle/sha2.h>

static void hex_of(const uint8_t *d, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[2 * n] = '\0';
}

void sm_s3_sha256_hex(const void *data, size_t n, char out[65])
{
    struct sha256_ctx ctx;
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, n, (const uint8_t *)data);
    sha256_digest(&ctx, SHA256_DIGEST_SIZE, d);
    hex_of(d, sizeof(d), out);
}

static void hmac(const uint8_t *key, size_t klen, const char *msg, uint8_t out[32])
{
    struct hmac_sha256_ctx ctx;
    hmac_sha256_set_key(&ctx, klen, key);
    hmac_sha256_update(&ctx, strlen(msg), (const uint8_t *)msg);
    hmac_sha256_digest(&ctx, SHA256_DIGEST_SIZE, out);
}

/* Appends to out[*o..cap); false (and *o past cap) once it does not fit. */
static bool put(char *out, size_t cap, size_t *o, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool put(char *out, size_t cap, size_t *o, const char *fmt, ...)
{
    if (*o >= cap) {
        return false;
    }
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(out + *o, cap - *o, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *o) {
        *o = cap;
        return false;
    }
    *o += (size_t)n;
    return true;
}

static bool signed_headers(char *out, size_t cap, size_t *o, const struct sm_s3_hdr *hdrs, size_t n)
{
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        ok = put(out, cap, o, "%s%s", i == 0 ? "" : ";", hdrs[i].name) && ok;
    }
    return ok;
}

bool sm_s3_canonical_request(char *out, size_t cap, const char *method, const char *uri,
                             const char *query, const struct sm_s3_hdr *hdrs, size_t n,
                             const char *payload_hash)
{
    size_t o = 0;
    bool ok = put(out, cap, &o, "%s\n%s\n%s\n", method, uri[0] != '\0' ? uri : "/", query);
    for (size_t i = 0; i < n; i++) {
        ok = ok && put(out, cap, &o, "%s:%s\n", hdrs[i].name, hdrs[i].value);
    }
    ok = ok && put(out, cap, &o, "\n");
    ok = ok && signed_headers(out, cap, &o, hdrs, n);
    ok = ok && put(out, cap, &o, "\n%s", payload_hash);
    return ok;
}

bool sm_s3_string_to_sign(char *out, size_t cap, const char *amz_date, const char *region,
                          const char *service, const char *canonical_request)
{
    char h[65];
    sm_s3_sha256_hex(canonical_request, strlen(canonical_request), h);
    size_t o = 0;
    return put(out, cap, &o, "AWS4-HMAC-SHA256\n%s\n%.8s/%s/%s/aws4_request\n%s", amz_date,
               amz_date, region, service, h);
}

void sm_s3_signature(char out[65], const char *secret, const char *amz_date, const char *region,
                     const char *service, const char *string_to_sign)
{
    /* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request") */
    char k0[256];
    const int kl = snprintf(k0, sizeof(k0), "AWS4%s", secret);
    const size_t klen = kl < 0 ? 0 : (size_t)kl < sizeof(k0) ? (size_t)kl : sizeof(k0) - 1;
    char date[9];
    snprintf(date, sizeof(date), "%.8s", amz_date);
    uint8_t a[32], b[32];
    hmac((const uint8_t *)k0, klen, date, a);
    hmac(a, sizeof(a), region, b);
    hmac(b, sizeof(b), service, a);
    hmac(a, sizeof(a), "aws4_request", b);
    hmac(b, sizeof(b), string_to_sign, a);
    hex_of(a, sizeof(a), out);
    memset(k0, 0, sizeof(k0));
    memset(b, 0, sizeof(b));
}

bool sm_s3_authorization(char *out, size_t cap, const char *access_key, const char *secret,
                         const char *region, const char *service, const char *amz_date,
                         const char *method, const char *uri, const char *query,
                         const struct sm_s3_hdr *hdrs, size_t n, const char *payload_hash)
{
    char creq[8192], sts[512], sig[65];
    if (!sm_s3_canonical_request(creq, sizeof(creq), method, uri, query, hdrs, n, payload_hash) ||
        !sm_s3_string_to_sign(sts, sizeof(sts), amz_date, region, service, creq)) {
        return false;
    }
    sm_s3_signature(sig, secret, amz_date, region, service, sts);
    size_t o = 0;
    bool ok = put(out, cap, &o, "AWS4-HMAC-SHA256 Credential=%s/%.8s/%s/%s/aws4_request, ",
                  access_key, amz_date, region, service);
    ok = ok && put(out, cap, &o, "SignedHeaders=");
    ok = ok && signed_headers(out, cap, &o, hdrs, n);
    ok = ok && put(out, cap, &o, ", Signature=%s", sig);
    return ok;
}

void sm_s3_amz_date(int64_t t, char out[17])
{
    const time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

/* ---- S3 XML error bodies ---- */

/* The text of the first <name>...</name> in body[0, n): start and length, or false. */
static bool element(const char *body, size_t n, const char *name, const char **text, size_t *len)
{
    const size_t nl = strlen(name);
    for (size_t i = 0; i + nl + 2 <= n; i++) {
        if (body[i] != '<' || memcmp(body + i + 1, name, nl) != 0 || body[i + 1 + nl] != '>') {
            continue;
        }
        const size_t s = i + nl + 2;
        for (size_t j = s; j + nl + 3 <= n; j++) {
            if (body[j] == '<' && body[j + 1] == '/' && memcmp(body + j + 2, name, nl) == 0 &&
                body[j + 2 + nl] == '>') {
                *text = body + s;
                *len = j - s;
                return true;
            }
        }
        return false;
    }
    return false;
}

static void copy_text(const char *t, size_t n, char *out, size_t cap)
{
    static const struct {
        const char *ent;
        char c;
    } ents[] = {{"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&apos;", '\''}};
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap;) {
        char c = t[i];
        size_t adv = 1;
        if (c == '&') {
            for (size_t e = 0; e < sizeof(ents) / sizeof(ents[0]); e++) {
                const size_t el = strlen(ents[e].ent);
                if (i + el <= n && memcmp(t + i, ents[e].ent, el) == 0) {
                    c = ents[e].c;
                    adv = el;
                    break;
                }
            }
        }
        out[o++] = (unsigned char)c >= 0x20 && (unsigned char)c < 0x7f ? c : '?';
        i += adv;
    }
    if (cap > 0) {
        out[o < cap ? o : cap - 1] = '\0';
    }
}

bool sm_s3_parse_error(const char *body, size_t n, char *code, size_t code_cap, char *msg,
                       size_t msg_cap)
{
    if (code_cap > 0) {
        code[0] = '\0';
    }
    if (msg_cap > 0) {
        msg[0] = '\0';
    }
    const char *t;
    size_t len;
    if (!element(body, n, "Code", &t, &len)) {
        return false;
    }
    copy_text(t, len, code, code_cap);
    if (element(body, n, "Message", &t, &len)) {
        copy_text(t, len, msg, msg_cap);
    }
    return true;
}
