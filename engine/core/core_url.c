/* sm_url_redact (shardmill/url.h): one scan over the text, copying it, with the userinfo of
 * each URL authority and the values of credential-bearing query parameters replaced. */
#include "shardmill/url.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#define REDACTED "<redacted>"

struct out {
    char *p;
    size_t len, cap;
    bool changed;
};

static void put(struct out *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n && o->len + 1 < o->cap; i++) {
        o->p[o->len++] = s[i];
    }
}

static bool scheme_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '-' || c == '.';
}

/* Where a URL ends in running text. */
static bool url_end(char c)
{
    return c == '\0' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\'' || c == '"' ||
           c == '<' || c == '>' || c == '`';
}

static bool secret_key(const char *k, size_t n)
{
    static const char *const names[] = {"token",    "access_token", "sig",        "signature",
                                        "password", "passwd",       "pwd",        "secret",
                                        "key",      "api_key",      "apikey",     "authorization",
                                        "auth",     "credential",   "credentials"};
    if ((n > 6 && strncasecmp(k, "x-amz-", 6) == 0) ||
        (n > 7 && strncasecmp(k, "x-goog-", 7) == 0)) {
        return true;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strlen(names[i]) == n && strncasecmp(k, names[i], n) == 0) {
            return true;
        }
    }
    return false;
}

/* Copies the query s[0, n) (after '?'), redacting secret values (an empty one hides nothing and
 * stays, so redacting twice changes nothing); the fragment stays. */
static void put_query(struct out *o, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && s[i] != '#') {
        size_t e = i;
        while (e < n && s[e] != '&' && s[e] != ';' && s[e] != '#') {
            e++;
        }
        const char *eq = memchr(s + i, '=', e - i);
        if (eq != NULL && eq + 1 < s + e && secret_key(s + i, (size_t)(eq - (s + i)))) {
            put(o, s + i, (size_t)(eq - (s + i)) + 1);
            put(o, REDACTED, strlen(REDACTED));
            o->changed = true;
        } else {
            put(o, s + i, e - i);
        }
        if (e < n && s[e] != '#') {
            put(o, s + e, 1);
            e++;
        }
        i = e;
    }
    put(o, s + i, n - i);
}

/* An authority without '@' that still holds "user:pass": a URL cut short in a message (a quoted
 * value truncated to 48 bytes) before its '@'. host:port has only digits after its ':' (an IPv6
 * address sits in brackets). */
static bool cut_userinfo(const char *s, size_t n)
{
    size_t i = 0;
    if (n > 0 && s[0] == '[') {
        while (i < n && s[i] != ']') {
            i++;
        }
    }
    const char *colon = memchr(s + i, ':', n - i);
    if (colon == NULL) {
        return false;
    }
    for (const char *p = colon + 1; p < s + n; p++) {
        if (*p < '0' || *p > '9') {
            return true;
        }
    }
    return false;
}

/* Copies the URL whose authority starts at s (just after "://") and returns its length. */
static size_t put_url_rest(struct out *o, const char *s)
{
    size_t end = 0; /* also where another URL starts ("?next=http://u:p@h"): that one is redacted
                       on its own, as the main loop finds it */
    while (!url_end(s[end]) && !(end > 0 && s[end] == ':' && s[end + 1] == '/' &&
                                 s[end + 2] == '/' && scheme_char(s[end - 1]))) {
        end++;
    }
    size_t auth = 0; /* the authority ends at the first '/', '?' or '#' */
    while (auth < end && s[auth] != '/' && s[auth] != '?' && s[auth] != '#') {
        auth++;
    }
    /* The userinfo ends at the authority's last '@' (a pasted password may hold an unencoded
     * one: "a:p@ss@host"); a '@' of the path after it stays ("u:p@host/a@b"). A password may
     * also hold a '/' that ends the authority early ("u:pa/ss@host"): an authority with a ':'
     * but no '@' runs to the last '@' before any '?' or '#' (redacting too much is safe;
     * showing part of a secret is not). */
    size_t span = auth;
    if (memchr(s, '@', auth) == NULL && memchr(s, ':', auth) != NULL) {
        while (span < end && s[span] != '?' && s[span] != '#') {
            span++;
        }
    }
    size_t at = SIZE_MAX;
    for (size_t i = 0; i < span; i++) {
        if (s[i] == '@') {
            at = i; /* the last '@' */
        }
    }
    size_t i = 0;
    if (at != SIZE_MAX) {
        put(o, REDACTED, strlen(REDACTED));
        o->changed = true;
        i = at; /* from the '@' on */
    } else if (cut_userinfo(s, auth)) {
        put(o, REDACTED, strlen(REDACTED));
        o->changed = true;
        i = auth;
    }
    const char *q = memchr(s + i, '?', end - i);
    const char *hash = memchr(s + i, '#', end - i);
    if (q != NULL && (hash == NULL || q < hash)) {
        const size_t qi = (size_t)(q - s) + 1;
        put(o, s + i, qi - i);
        put_query(o, s + qi, end - qi);
    } else {
        put(o, s + i, end - i);
    }
    return end;
}

const char *sm_url_redact(const char *s, char *buf, size_t cap)
{
    if (s == NULL || strstr(s, "://") == NULL || cap < 16) {
        return s;
    }
    struct out o = {buf, 0, cap, false};
    size_t i = 0;
    while (s[i] != '\0') {
        if (s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/' && i > 0 && scheme_char(s[i - 1])) {
            put(&o, "://", 3);
            i += 3;
            i += put_url_rest(&o, s + i);
            continue;
        }
        put(&o, s + i, 1);
        i++;
    }
    buf[o.len] = '\0';
    return o.changed ? buf : s;
}
