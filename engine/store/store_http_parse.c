/* Pure HTTP response handling for store_http.c (see store_http_int.h): every parser here reads
 * exactly the n bytes it is given (libcurl's header lines are not NUL-terminated), rejects
 * numbers above UINT64_MAX instead of saturating, and does arithmetic that cannot wrap. */
#include "shardmill/sm_config.h"

#include "store_http_int.h"

#include <string.h>

void sm_http_resp_reset(struct sm_http_resp *r)
{
    memset(r, 0, sizeof(*r));
    r->retry_after_s = -1;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Trims spaces, tabs, CR and LF at both ends of [*p, *p + *n). */
static void trim(const char **p, size_t *n)
{
    while (*n > 0 && is_space(**p)) {
        (*p)++;
        (*n)--;
    }
    while (*n > 0 && is_space((*p)[*n - 1])) {
        (*n)--;
    }
}

/* Digits at p[*i, n) into *v; false if none, or above UINT64_MAX. Advances *i. */
static bool digits(const char *p, size_t n, size_t *i, uint64_t *v)
{
    const size_t start = *i;
    uint64_t x = 0;
    while (*i < n && p[*i] >= '0' && p[*i] <= '9') {
        const uint64_t d = (uint64_t)(p[*i] - '0');
        if (x > (UINT64_MAX - d) / 10) {
            return false;
        }
        x = x * 10 + d;
        (*i)++;
    }
    *v = x;
    return *i > start;
}

bool sm_http_parse_u64(const char *p, size_t n, uint64_t *v)
{
    trim(&p, &n);
    size_t i = 0;
    return digits(p, n, &i, v) && i == n;
}

static bool ieq_prefix(const char *p, size_t n, const char *lit)
{
    const size_t k = strlen(lit);
    if (n < k) {
        return false;
    }
    for (size_t i = 0; i < k; i++) {
        char c = p[i];
        if (c >= 'A' && c <= 'Z') {
            c = (char)(c - 'A' + 'a');
        }
        if (c != lit[i]) {
            return false;
        }
    }
    return true;
}

bool sm_http_parse_content_range(const char *p, size_t n, uint64_t *first, uint64_t *last,
                                 bool *total_known, uint64_t *total)
{
    trim(&p, &n);
    if (!ieq_prefix(p, n, "bytes") || n < 6 || (p[5] != ' ' && p[5] != '\t')) {
        return false;
    }
    size_t i = 5;
    while (i < n && (p[i] == ' ' || p[i] == '\t')) {
        i++;
    }
    uint64_t a, b, t = 0;
    if (!digits(p, n, &i, &a) || i >= n || p[i] != '-') {
        return false;
    }
    i++;
    if (!digits(p, n, &i, &b) || i >= n || p[i] != '/') {
        return false;
    }
    i++;
    bool known;
    if (i < n && p[i] == '*') {
        known = false;
        i++;
    } else {
        known = true;
        if (!digits(p, n, &i, &t)) {
            return false;
        }
    }
    if (i != n || b < a || (known && b >= t)) {
        return false;
    }
    *first = a;
    *last = b;
    *total_known = known;
    *total = t;
    return true;
}

/* The value after "name:" if line starts with it (case-insensitively). */
static bool header_value(const char *line, size_t n, const char *name, const char **v, size_t *vn)
{
    const size_t k = strlen(name);
    if (!ieq_prefix(line, n, name)) {
        return false;
    }
    *v = line + k;
    *vn = n - k;
    return true;
}

/* "HTTP/1.1 206 Partial Content", "HTTP/2 200": the three-digit code, or 0. */
static long status_code(const char *line, size_t n)
{
    size_t i = 5;
    while (i < n && line[i] != ' ') {
        i++;
    }
    while (i < n && line[i] == ' ') {
        i++;
    }
    if (n - i < 3) {
        return 0;
    }
    long code = 0;
    for (size_t k = 0; k < 3; k++) {
        const char c = line[i + k];
        if (c < '0' || c > '9') {
            return 0;
        }
        code = code * 10 + (c - '0');
    }
    if (n - i > 3 && !is_space(line[i + 3])) {
        return 0;
    }
    return code;
}

void sm_http_header_line(struct sm_http_resp *r, const char *line, size_t n)
{
    const char *v;
    size_t vn;
    uint64_t x;
    if (n >= 5 && memcmp(line, "HTTP/", 5) == 0) { /* a new response (after a redirect/100) */
        sm_http_resp_reset(r);
        r->status = status_code(line, n);
    } else if (header_value(line, n, "content-length:", &v, &vn)) {
        r->have_clen = sm_http_parse_u64(v, vn, &x);
        r->clen = r->have_clen ? x : 0;
    } else if (header_value(line, n, "retry-after:", &v, &vn)) {
        if (sm_http_parse_u64(v, vn, &x)) {
            r->retry_after_s = x > 3600 ? 3600 : (long)x;
        }
    } else if (header_value(line, n, "content-range:", &v, &vn)) {
        r->have_crange = sm_http_parse_content_range(v, vn, &r->cr_first, &r->cr_last,
                                                     &r->cr_total_known, &r->cr_total);
    } else if (header_value(line, n, "location:", &v, &vn)) {
        trim(&v, &vn);
        if (vn >= sizeof(r->location)) {
            vn = sizeof(r->location) - 1;
        }
        for (size_t i = 0; i < vn; i++) { /* printable only: it may end up in an error line */
            r->location[i] = v[i] >= 0x20 && v[i] < 0x7f ? v[i] : '?';
        }
        r->location[vn] = '\0';
    }
}

void sm_http_body_plan(long code, const struct sm_http_resp *r, bool ranged, uint64_t range_len,
                       struct sm_http_body *out)
{
    out->keep = code == 200 || code == 206;
    out->have_expect = false;
    out->expect = 0;
    if (!out->keep) {
        return;
    }
    if (code == 206 && ranged) {
        out->have_expect = true; /* at most the range; the Content-Range check is exact */
        out->expect = range_len;
    } else {
        /* the whole object (a server may ignore Range): its size is the Content-Length */
        out->have_expect = r->have_clen;
        out->expect = r->clen;
    }
}

enum sm_http_step sm_http_body_step(const struct sm_http_body *b, uint64_t limit, uint64_t len,
                                    uint64_t cap, uint64_t n, uint64_t *grow_to)
{
    *grow_to = cap;
    if (b->have_expect) {
        if (len > b->expect || n > b->expect - len) {
            return SM_HTTP_OVERFLOW;
        }
        if (limit != 0 && b->expect > limit) {
            return SM_HTTP_LIMIT;
        }
        if (len > cap || n > cap - len) {
            *grow_to = b->expect; /* the announced size, once */
            return SM_HTTP_GROW;
        }
        return SM_HTTP_APPEND;
    }
    if (len <= cap && n <= cap - len) {
        return SM_HTTP_APPEND;
    }
    if (n > UINT64_MAX - len || (limit != 0 && len + n > limit)) {
        return SM_HTTP_LIMIT;
    }
    uint64_t want = cap < 65536 ? 65536 : (cap > UINT64_MAX / 2 ? UINT64_MAX : cap * 2);
    if (want < len + n) {
        want = len + n;
    }
    if (limit != 0 && want > limit) {
        want = limit; /* >= len + n, checked above */
    }
    *grow_to = want;
    return SM_HTTP_GROW;
}

enum sm_http_partial sm_http_check_partial(struct sm_range asked, const struct sm_http_resp *r,
                                           uint64_t got, uint64_t *objsize)
{
    if (asked.kind == SM_RANGE_ALL || !r->have_crange || r->cr_last < r->cr_first ||
        got != r->cr_last - r->cr_first + 1) {
        return SM_HTTP_PARTIAL_NO_RANGE;
    }
    bool ok;
    if (asked.kind == SM_RANGE_SPAN) {
        /* starts where asked; shorter than asked only where the object ends */
        const uint64_t end =
            asked.len > UINT64_MAX - asked.offset ? UINT64_MAX : asked.offset + asked.len;
        ok = r->cr_first == asked.offset && got <= asked.len &&
             (!r->cr_total_known || r->cr_last + 1 == (end < r->cr_total ? end : r->cr_total));
    } else {
        /* ends at the object's end, and holds all of the suffix the object has */
        ok = got <= asked.len &&
             (!r->cr_total_known || (r->cr_last + 1 == r->cr_total &&
                                     got == (asked.len < r->cr_total ? asked.len : r->cr_total)));
    }
    if (!ok) {
        return SM_HTTP_PARTIAL_MISMATCH;
    }
    if (r->cr_total_known) {
        *objsize = r->cr_total;
    }
    return SM_HTTP_PARTIAL_OK;
}

void sm_http_slice(struct sm_range asked, uint64_t size, uint64_t *off, uint64_t *n)
{
    if (asked.kind == SM_RANGE_ALL) {
        *off = 0;
        *n = size;
        return;
    }
    const uint64_t o =
        asked.kind == SM_RANGE_SPAN ? asked.offset : (size > asked.len ? size - asked.len : 0);
    *off = o < size ? o : size;
    *n = o >= size ? 0 : (size - o < asked.len ? size - o : asked.len);
}
