/* The pure pieces of the HTTP store's response handling (store_http.c): header parsing
 * (status line, Content-Length, Content-Range, Retry-After, Location), the decisions of the body
 * callback (how large the body must be, when to grow, when to abort), the check of a 206 against
 * the range asked and the slicing of a whole object. No libcurl, no I/O, no allocation: unit
 * tests (tests/unit/store/test_store_http_parse.c) and the fuzz target
 * (tests/fuzz/fuzz_http_response.c) drive them with arbitrary bytes. */
#ifndef SM_STORE_STORE_HTTP_INT_H
#define SM_STORE_STORE_HTTP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/store.h"

#define SM_HTTP_LOCATION_MAX 512

/* ---- the request-signing hook (the s3 store, store_s3.c, is this store plus a signer) ---- */

#define SM_HTTP_SIGN_HDRS 6      /* header lines a signer may add to one request */
#define SM_HTTP_SIGN_LINE 4096   /* bytes of one line, NUL included */
#define SM_HTTP_ERRBODY_MAX 2048 /* bytes of an error response's body kept for the signer */

struct sm_http_signer {
    void *ctx; /* owned: freed by free() when the store closes */
    /* Before every attempt: the header lines ("Name: value") to send with method ("GET" or
     * "HEAD") to the full URL. */
    sm_status (*sign)(void *ctx, const char *method, const char *url,
                      char (*lines)[SM_HTTP_SIGN_LINE], size_t *n, struct sm_err *err);
    /* After a response that is not 2xx or 416 (redirects are not followed): the status and up to
     * SM_HTTP_ERRBODY_MAX bytes of the body. True if it set err (the request fails, no retry);
     * false leaves the HTTP store's handling (404 not found, 5xx retried, ...). */
    bool (*refine)(void *ctx, long code, bool head, const char *body, size_t n, struct sm_err *err);
    void (*free)(void *ctx);
    const char *display; /* base of error locations instead of the URL (e.g. "s3://b/prefix") */
};

/* The HTTP store at `url` with every request signed (store_s3.c). Takes ownership of the
 * signer's ctx, also on failure. */
sm_status sm_store_http_open_signed(const char *url, const struct sm_http_opts *opts,
                                    const struct sm_http_signer *signer, struct sm_store **out,
                                    struct sm_err *err);

/* What the headers of the current response said. A status line starts a new response (after a
 * redirect or a 100 Continue) and resets everything else. */
struct sm_http_resp {
    long status; /* from the last status line; 0 before one */
    bool have_clen;
    uint64_t clen; /* Content-Length */
    bool have_crange;
    uint64_t cr_first, cr_last; /* Content-Range: bytes first-last/total (first <= last) */
    bool cr_total_known;
    uint64_t cr_total;                   /* valid when cr_total_known (then cr_last < cr_total) */
    long retry_after_s;                  /* Retry-After in seconds, capped at 3600; -1 if absent */
    char location[SM_HTTP_LOCATION_MAX]; /* Location, truncated; "" if absent */
};

void sm_http_resp_reset(struct sm_http_resp *r);

/* A decimal number filling all of p[0, n) after optional surrounding spaces, tabs, CR and LF.
 * False if empty, not all digits, or above UINT64_MAX. */
bool sm_http_parse_u64(const char *p, size_t n, uint64_t *v);

/* The value of a Content-Range header: "bytes first-last/total" or "bytes first-last/ *"
 * (without the space). False for anything else, for last < first, and for last >= total; the
 * unsatisfied form "bytes * /total" of a 416 is false too. */
bool sm_http_parse_content_range(const char *p, size_t n, uint64_t *first, uint64_t *last,
                                 bool *total_known, uint64_t *total);

/* Feeds one header line as libcurl delivers it: n bytes, not NUL-terminated, usually ending in
 * CRLF. Unknown headers and malformed values are ignored (a malformed Content-Length is absent;
 * a 206 without a valid Content-Range is then rejected by sm_http_check_partial). */
void sm_http_header_line(struct sm_http_resp *r, const char *line, size_t n);

/* The decision taken at a response's first body bytes. */
struct sm_http_body {
    bool keep;        /* 200/206: the body is payload; otherwise an error page, dropped */
    bool have_expect; /* the body must be exactly (206: at most) `expect` bytes */
    uint64_t expect;
};

/* code: the response status; ranged/range_len: whether a range was asked, and its length. A 206
 * to a range expects at most the range; a 200 (or a 206 to no range) expects Content-Length. */
void sm_http_body_plan(long code, const struct sm_http_resp *r, bool ranged, uint64_t range_len,
                       struct sm_http_body *out);

enum sm_http_step {
    SM_HTTP_APPEND,   /* the n bytes fit in the buffer as it is */
    SM_HTTP_GROW,     /* grow the buffer to *grow_to (>= len + n) first, then append */
    SM_HTTP_OVERFLOW, /* more bytes than announced: abort, never decode this body */
    SM_HTTP_LIMIT,    /* the body would pass `limit` (max_object_bytes; 0 = none): abort */
};

/* What the body callback does with n more bytes, holding len bytes in a buffer of cap bytes.
 * A body of known size never grows past it; one of unknown size (chunked) grows geometrically
 * from 64 KiB, bounded by limit. */
enum sm_http_step sm_http_body_step(const struct sm_http_body *b, uint64_t limit, uint64_t len,
                                    uint64_t cap, uint64_t n, uint64_t *grow_to);

enum sm_http_partial {
    SM_HTTP_PARTIAL_OK,
    SM_HTTP_PARTIAL_NO_RANGE, /* no (valid) Content-Range, or the body length disagrees with it */
    SM_HTTP_PARTIAL_MISMATCH, /* a Content-Range that is not the bytes asked for */
};

/* Checks a 206 carrying `got` body bytes against the range asked (SM_RANGE_SPAN or SUFFIX):
 * the Content-Range must start where asked (a suffix: end at the object's end), hold exactly the
 * body, and be shorter than asked only where the object ends. Sets *objsize to the total after
 * '/' when known (else leaves it). */
enum sm_http_partial sm_http_check_partial(struct sm_range asked, const struct sm_http_resp *r,
                                           uint64_t got, uint64_t *objsize);

/* The part [*off, *off + *n) of a whole object of `size` bytes that a range asks for, clipped at
 * the end (the dispatch reports a short result). */
void sm_http_slice(struct sm_range asked, uint64_t size, uint64_t *off, uint64_t *n);

#endif
