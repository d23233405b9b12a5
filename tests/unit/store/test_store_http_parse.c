/* Unit tests for engine/store/store_http_parse.c: the HTTP store's pure response handling.
 * Header lines are passed as libcurl passes them (n bytes, not NUL-terminated): every case that
 * matters puts misleading bytes right after the line, which a parser reading past n would take. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sm_test.h"
#include "store_http_int.h"

/* Feeds the first n bytes of s (the rest is what follows the line in memory). */
static void feed(struct sm_http_resp *r, const char *s, size_t n)
{
    sm_http_header_line(r, s, n);
}

static void line(struct sm_http_resp *r, const char *s)
{
    feed(r, s, strlen(s));
}

static void test_u64_accepts_digits_with_spaces_and_crlf(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_true(sm_http_parse_u64("123", 3, &v));
    assert_int_equal(v, 123);
    assert_true(sm_http_parse_u64(" \t42\r\n", 6, &v));
    assert_int_equal(v, 42);
    assert_true(sm_http_parse_u64("18446744073709551615", 20, &v));
    assert_true(v == UINT64_MAX);
}

static void test_u64_rejects_junk_signs_and_overflow(void **state)
{
    (void)state;
    uint64_t v = 7;
    assert_false(sm_http_parse_u64("", 0, &v));
    assert_false(sm_http_parse_u64("  \r\n", 4, &v));
    assert_false(sm_http_parse_u64("12a", 3, &v));
    assert_false(sm_http_parse_u64("-1", 2, &v));
    assert_false(sm_http_parse_u64("+1", 2, &v));
    assert_false(sm_http_parse_u64("1 2", 3, &v));
    assert_false(sm_http_parse_u64("18446744073709551616", 20, &v)); /* 2^64: no saturation */
    assert_false(sm_http_parse_u64("99999999999999999999999", 23, &v));
}

static void test_u64_reads_only_n_bytes(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_true(sm_http_parse_u64("12345", 2, &v));
    assert_int_equal(v, 12);
}

static void test_content_range_forms(void **state)
{
    (void)state;
    uint64_t a = 0, b = 0, t = 0;
    bool known = false;
    const char *s = " bytes 0-9/100\r\n";
    assert_true(sm_http_parse_content_range(s, strlen(s), &a, &b, &known, &t));
    assert_int_equal(a, 0);
    assert_int_equal(b, 9);
    assert_true(known);
    assert_int_equal(t, 100);
    s = "Bytes 5-5/*";
    assert_true(sm_http_parse_content_range(s, strlen(s), &a, &b, &known, &t));
    assert_int_equal(a, 5);
    assert_int_equal(b, 5);
    assert_false(known);
    s = "bytes 99-99/100";
    assert_true(sm_http_parse_content_range(s, strlen(s), &a, &b, &known, &t));
}

static void test_content_range_rejects_malformed(void **state)
{
    (void)state;
    uint64_t a = 1, b = 2, t = 3;
    bool known = true;
    const char *bad[] = {
        "bytes 5-4/100",                  /* last < first */
        "bytes 0-100/100",                /* last past the total */
        "bytes */100",                    /* the unsatisfied form of a 416 */
        "bytes=0-9/100",                  /* a Range header's syntax */
        "bytes 0-9/100 junk",             /* trailing bytes */
        "bytes 0-9",                      /* no total */
        "bytes -9/100",                   /* no first */
        "bytes 0-/100",                   /* no last */
        "items 0-9/100",                  /* another unit */
        "bytes0-9/100",                   /* no space */
        "bytes 0-99999999999999999999/*", /* above 2^64 */
        "bytes 0-9/1x0",                  /* junk in the total */
        "",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (sm_http_parse_content_range(bad[i], strlen(bad[i]), &a, &b, &known, &t)) {
            fail_msg("accepted Content-Range '%s'", bad[i]);
        }
    }
    /* untouched on failure */
    assert_int_equal(a, 1);
    assert_int_equal(b, 2);
    assert_int_equal(t, 3);
}

static void test_content_range_reads_only_n_bytes(void **state)
{
    (void)state;
    uint64_t a, b, t;
    bool known;
    const char *s = "bytes 0-9/100";
    /* the first 12 bytes end in "/10": total 10, so last (9) fits */
    assert_true(sm_http_parse_content_range(s, 12, &a, &b, &known, &t));
    assert_int_equal(t, 10);
    /* the first 11 bytes end in "/1": total 1 < last: refused */
    assert_false(sm_http_parse_content_range(s, 11, &a, &b, &known, &t));
}

static void test_header_lines_fill_the_response(void **state)
{
    (void)state;
    struct sm_http_resp r;
    sm_http_resp_reset(&r);
    assert_int_equal(r.retry_after_s, -1);
    line(&r, "HTTP/1.1 206 Partial Content\r\n");
    assert_int_equal(r.status, 206);
    line(&r, "Content-Length: 10\r\n");
    line(&r, "content-range: bytes 10-19/100\r\n");
    line(&r, "Retry-After: 99999\r\n");
    line(&r, "X-Other: 5\r\n");
    assert_true(r.have_clen);
    assert_int_equal(r.clen, 10);
    assert_true(r.have_crange);
    assert_int_equal(r.cr_first, 10);
    assert_int_equal(r.cr_last, 19);
    assert_true(r.cr_total_known);
    assert_int_equal(r.cr_total, 100);
    assert_int_equal(r.retry_after_s, 3600); /* capped */
}

static void test_a_status_line_starts_a_new_response(void **state)
{
    (void)state;
    struct sm_http_resp r;
    sm_http_resp_reset(&r);
    line(&r, "HTTP/1.1 302 Found\r\n");
    line(&r, "Location: http://elsewhere/x\r\n");
    line(&r, "Content-Length: 5\r\n");
    line(&r, "Retry-After: 3\r\n");
    assert_int_equal(r.status, 302);
    assert_string_equal(r.location, "http://elsewhere/x");
    line(&r, "HTTP/2 200\r\n");
    assert_int_equal(r.status, 200);
    assert_false(r.have_clen);
    assert_false(r.have_crange);
    assert_int_equal(r.retry_after_s, -1);
    assert_string_equal(r.location, "");
}

static void test_header_lines_are_read_to_n_only(void **state)
{
    (void)state;
    struct sm_http_resp r;
    sm_http_resp_reset(&r);
    /* libcurl's lines are not NUL-terminated: what follows must not be read */
    const char mem[] = "Content-Length: 12"
                       "345678";
    feed(&r, mem, strlen("Content-Length: 12"));
    assert_true(r.have_clen);
    assert_int_equal(r.clen, 12);
    const char cr[] = "Content-Range: bytes 0-1/2"
                      "0";
    feed(&r, cr, strlen("Content-Range: bytes 0-1/2"));
    assert_true(r.have_crange);
    assert_int_equal(r.cr_total, 2);
    const char st[] = "HTTP/1.1 20"
                      "6 Partial";
    feed(&r, st, strlen("HTTP/1.1 20"));
    assert_int_equal(r.status, 0); /* a two-digit status is no status */
}

static void test_malformed_values_are_absent(void **state)
{
    (void)state;
    struct sm_http_resp r;
    sm_http_resp_reset(&r);
    line(&r, "Content-Length: 10\r\n");
    line(&r, "Content-Length: 1e3\r\n"); /* a later malformed one wins: absent, not 10 */
    assert_false(r.have_clen);
    line(&r, "Content-Length: 99999999999999999999999\r\n");
    assert_false(r.have_clen);
    line(&r, "Content-Range: bytes 9-0/100\r\n");
    assert_false(r.have_crange);
    line(&r, "Retry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n"); /* a date: ignored */
    assert_int_equal(r.retry_after_s, -1);
}

static void test_location_is_truncated_and_printable(void **state)
{
    (void)state;
    struct sm_http_resp r;
    sm_http_resp_reset(&r);
    char big[2 * SM_HTTP_LOCATION_MAX];
    memcpy(big, "Location: ", 10);
    memset(big + 10, 'a', sizeof(big) - 10);
    big[12] = '\x1b'; /* an escape sequence must not reach a terminal */
    feed(&r, big, sizeof(big));
    assert_int_equal(strlen(r.location), SM_HTTP_LOCATION_MAX - 1);
    assert_int_equal(r.location[2], '?');
}

static void test_body_plan(void **state)
{
    (void)state;
    struct sm_http_resp r;
    struct sm_http_body b;
    sm_http_resp_reset(&r);
    r.have_clen = true;
    r.clen = 1000;
    sm_http_body_plan(206, &r, true, 100, &b); /* at most the range */
    assert_true(b.keep && b.have_expect);
    assert_int_equal(b.expect, 100);
    sm_http_body_plan(200, &r, true, 100, &b); /* Range ignored: the whole object */
    assert_true(b.keep && b.have_expect);
    assert_int_equal(b.expect, 1000);
    r.have_clen = false;
    sm_http_body_plan(200, &r, false, 0, &b); /* chunked: unknown */
    assert_true(b.keep);
    assert_false(b.have_expect);
    sm_http_body_plan(404, &r, true, 100, &b);
    assert_false(b.keep);
    sm_http_body_plan(500, &r, false, 0, &b);
    assert_false(b.keep);
}

static void test_body_step_known_size(void **state)
{
    (void)state;
    struct sm_http_body b = {true, true, 100};
    uint64_t g;
    assert_int_equal(sm_http_body_step(&b, 0, 0, 100, 60, &g), SM_HTTP_APPEND);
    assert_int_equal(sm_http_body_step(&b, 0, 60, 100, 40, &g), SM_HTTP_APPEND);
    assert_int_equal(sm_http_body_step(&b, 0, 60, 100, 41, &g), SM_HTTP_OVERFLOW);
    assert_int_equal(sm_http_body_step(&b, 0, 0, 100, UINT64_MAX, &g), SM_HTTP_OVERFLOW);
    assert_int_equal(sm_http_body_step(&b, 0, 0, 10, 50, &g), SM_HTTP_GROW); /* not reserved */
    assert_int_equal(g, 100);
    assert_int_equal(sm_http_body_step(&b, 50, 0, 0, 1, &g), SM_HTTP_LIMIT);
}

static void test_body_step_unknown_size_grows_bounded(void **state)
{
    (void)state;
    struct sm_http_body b = {true, false, 0};
    uint64_t g;
    assert_int_equal(sm_http_body_step(&b, 0, 0, 0, 10, &g), SM_HTTP_GROW);
    assert_int_equal(g, 65536);
    assert_int_equal(sm_http_body_step(&b, 0, 65536, 65536, 1, &g), SM_HTTP_GROW);
    assert_int_equal(g, 131072); /* geometric */
    assert_int_equal(sm_http_body_step(&b, 0, 0, 0, 200000, &g), SM_HTTP_GROW);
    assert_int_equal(g, 200000); /* at least what arrived */
    assert_int_equal(sm_http_body_step(&b, 100000, 65536, 65536, 1, &g), SM_HTTP_GROW);
    assert_int_equal(g, 100000); /* capped at the limit */
    assert_int_equal(sm_http_body_step(&b, 100000, 99999, 100000, 2, &g), SM_HTTP_LIMIT);
    assert_int_equal(sm_http_body_step(&b, 0, 10, 10, UINT64_MAX, &g), SM_HTTP_LIMIT); /* wrap */
    assert_int_equal(sm_http_body_step(&b, 0, 10, 100, 90, &g), SM_HTTP_APPEND);
}

static struct sm_http_resp partial(uint64_t first, uint64_t last, bool known, uint64_t total)
{
    struct sm_http_resp r;
    sm_http_resp_reset(&r);
    r.status = 206;
    r.have_crange = true;
    r.cr_first = first;
    r.cr_last = last;
    r.cr_total_known = known;
    r.cr_total = total;
    return r;
}

static void test_partial_span(void **state)
{
    (void)state;
    uint64_t size = 0;
    struct sm_http_resp r = partial(10, 19, true, 100);
    assert_int_equal(sm_http_check_partial(sm_range_span(10, 10), &r, 10, &size),
                     SM_HTTP_PARTIAL_OK);
    assert_int_equal(size, 100);
    /* body length disagrees with the Content-Range */
    assert_int_equal(sm_http_check_partial(sm_range_span(10, 10), &r, 9, &size),
                     SM_HTTP_PARTIAL_NO_RANGE);
    /* starts elsewhere */
    assert_int_equal(sm_http_check_partial(sm_range_span(11, 10), &r, 10, &size),
                     SM_HTTP_PARTIAL_MISMATCH);
    /* shorter than asked although the object goes on */
    assert_int_equal(sm_http_check_partial(sm_range_span(10, 11), &r, 10, &size),
                     SM_HTTP_PARTIAL_MISMATCH);
    /* shorter than asked where the object ends: clipped, fine */
    r = partial(90, 99, true, 100);
    assert_int_equal(sm_http_check_partial(sm_range_span(90, 50), &r, 10, &size),
                     SM_HTTP_PARTIAL_OK);
    /* total unknown: trust the start and the length */
    r = partial(10, 19, false, 0);
    size = 7;
    assert_int_equal(sm_http_check_partial(sm_range_span(10, 10), &r, 10, &size),
                     SM_HTTP_PARTIAL_OK);
    assert_int_equal(size, 7); /* left alone */
    /* a span whose end would wrap */
    r = partial(UINT64_MAX - 1, UINT64_MAX - 1, false, 0);
    assert_int_equal(sm_http_check_partial(sm_range_span(UINT64_MAX - 1, UINT64_MAX), &r, 1, &size),
                     SM_HTTP_PARTIAL_OK);
    /* no Content-Range, or a 206 to no range at all */
    r.have_crange = false;
    assert_int_equal(sm_http_check_partial(sm_range_span(0, 1), &r, 1, &size),
                     SM_HTTP_PARTIAL_NO_RANGE);
    r = partial(0, 0, true, 1);
    assert_int_equal(sm_http_check_partial(sm_range_all(), &r, 1, &size), SM_HTTP_PARTIAL_NO_RANGE);
}

static void test_partial_suffix(void **state)
{
    (void)state;
    uint64_t size = 0;
    struct sm_http_resp r = partial(90, 99, true, 100);
    assert_int_equal(sm_http_check_partial(sm_range_suffix(10), &r, 10, &size), SM_HTTP_PARTIAL_OK);
    assert_int_equal(size, 100);
    /* not at the end */
    r = partial(89, 98, true, 100);
    assert_int_equal(sm_http_check_partial(sm_range_suffix(10), &r, 10, &size),
                     SM_HTTP_PARTIAL_MISMATCH);
    /* a suffix longer than the object: the whole object */
    r = partial(0, 49, true, 50);
    assert_int_equal(sm_http_check_partial(sm_range_suffix(80), &r, 50, &size), SM_HTTP_PARTIAL_OK);
    /* ... but not less of it */
    r = partial(1, 49, true, 50);
    assert_int_equal(sm_http_check_partial(sm_range_suffix(80), &r, 49, &size),
                     SM_HTTP_PARTIAL_MISMATCH);
    /* more than asked */
    r = partial(80, 99, true, 100);
    assert_int_equal(sm_http_check_partial(sm_range_suffix(10), &r, 20, &size),
                     SM_HTTP_PARTIAL_MISMATCH);
}

static void test_slice_of_a_whole_object(void **state)
{
    (void)state;
    uint64_t off, n;
    sm_http_slice(sm_range_span(10, 20), 100, &off, &n);
    assert_int_equal(off, 10);
    assert_int_equal(n, 20);
    sm_http_slice(sm_range_span(90, 20), 100, &off, &n); /* clipped at the end */
    assert_int_equal(off, 90);
    assert_int_equal(n, 10);
    sm_http_slice(sm_range_span(150, 20), 100, &off, &n); /* past the end: nothing */
    assert_int_equal(n, 0);
    assert_true(off <= 100);
    sm_http_slice(sm_range_suffix(30), 100, &off, &n);
    assert_int_equal(off, 70);
    assert_int_equal(n, 30);
    sm_http_slice(sm_range_suffix(300), 100, &off, &n);
    assert_int_equal(off, 0);
    assert_int_equal(n, 100);
    sm_http_slice(sm_range_all(), 100, &off, &n);
    assert_int_equal(off, 0);
    assert_int_equal(n, 100);
    sm_http_slice(sm_range_span(UINT64_MAX, UINT64_MAX), 100, &off, &n);
    assert_int_equal(n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_u64_accepts_digits_with_spaces_and_crlf),
        cmocka_unit_test(test_u64_rejects_junk_signs_and_overflow),
        cmocka_unit_test(test_u64_reads_only_n_bytes),
        cmocka_unit_test(test_content_range_forms),
        cmocka_unit_test(test_content_range_rejects_malformed),
        cmocka_unit_test(test_content_range_reads_only_n_bytes),
        cmocka_unit_test(test_header_lines_fill_the_response),
        cmocka_unit_test(test_a_status_line_starts_a_new_response),
        cmocka_unit_test(test_header_lines_are_read_to_n_only),
        cmocka_unit_test(test_malformed_values_are_absent),
        cmocka_unit_test(test_location_is_truncated_and_printable),
        cmocka_unit_test(test_body_plan),
        cmocka_unit_test(test_body_step_known_size),
        cmocka_unit_test(test_body_step_unknown_size_grows_bounded),
        cmocka_unit_test(test_partial_span),
        cmocka_unit_test(test_partial_suffix),
        cmocka_unit_test(test_slice_of_a_whole_object),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
