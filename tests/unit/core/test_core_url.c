/* Unit tests for engine/core/core_url.c: sm_url_redact, the one place credentials in URLs are
 * removed before anything is printed or stored (issue 19): userinfo, credential-bearing query
 * values, URLs inside running text, text without URLs left as it is, truncation. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/url.h"

static void expect(const char *in, const char *want)
{
    char buf[SM_URL_REDACT_MAX];
    assert_string_equal(sm_url_redact(in, buf, sizeof(buf)), want);
}

static void test_url_redact_drops_user_and_password(void **state)
{
    (void)state;
    expect("http://alice:pw@host:8080/a/b.zarr", "http://<redacted>@host:8080/a/b.zarr");
    expect("https://alice@host/x", "https://<redacted>@host/x");
    expect("http://a:p@ss@host/x", "http://<redacted>@host/x"); /* the last '@' ends it */
    /* an unencoded '/' in a pasted password: no part of it is shown */
    expect("http://u:pa/ss@host/a.zarr", "http://<redacted>@host/a.zarr");
    /* issue 32 #19: the userinfo ends inside the authority; a path's '@' is not part of it */
    expect("http://alice:pw@host/a@b/x.zarr", "http://<redacted>@host/a@b/x.zarr");
    expect("http://u:p@h?q=a@b", "http://<redacted>@h?q=a@b");
    expect("http://a:p@ss@host/c@d", "http://<redacted>@host/c@d");
    expect("http://host/a@b/c", "http://host/a@b/c"); /* no ':' before the '/': a path's '@' */
    expect("s3://k:s@bucket", "s3://<redacted>@bucket");
    /* cut short before the '@' (a quoted value truncated in a message): the whole authority */
    expect("'http://alice:longpasswordcutsh...'", "'http://<redacted>'");
    expect("http://alice:pw", "http://<redacted>");
}

static void test_url_redact_replaces_secret_query_values(void **state)
{
    (void)state;
    expect("https://h/o?token=abc&x=1", "https://h/o?token=<redacted>&x=1");
    expect("https://h/o?X-Amz-Signature=f00&X-Amz-Credential=AK%2F1&part=2#frag",
           "https://h/o?X-Amz-Signature=<redacted>&X-Amz-Credential=<redacted>&part=2#frag");
    expect("http://h/?sig=1;Signature=2;keep=3",
           "http://h/?sig=<redacted>;Signature=<redacted>;keep=3");
    expect("http://u:p@h/o?access_token=t", "http://<redacted>@h/o?access_token=<redacted>");
}

static void test_url_redact_finds_urls_in_text(void **state)
{
    (void)state;
    expect("HTTP 302 redirect to 'ftp://u:p@evil/x' not followed",
           "HTTP 302 redirect to 'ftp://<redacted>@evil/x' not followed");
    expect("http://h/login?next=http://u:p@g/x", "http://h/login?next=http://<redacted>@g/x");
    expect("http://a:b://c:d@e", "http://<redacted>://<redacted>@e");
    expect("a http://u:p@h/x and https://v:q@g/?token=z end",
           "a http://<redacted>@h/x and https://<redacted>@g/?token=<redacted> end");
}

static void test_url_redact_leaves_text_without_secrets(void **state)
{
    (void)state;
    char buf[32];
    const char *plain[] = {"data/a@b.zarr",      "http://host/a@b/c",
                           "file:///x@y/z",      "http://h/o?tokens=1&size=2",
                           "no url at all: ://", ""};
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
        assert_ptr_equal(sm_url_redact(plain[i], buf, sizeof(buf)), plain[i]);
    }
    assert_null(sm_url_redact(NULL, buf, sizeof(buf)));
}

static void test_url_redact_truncates_only_redacted_text(void **state)
{
    (void)state;
    char buf[20];
    const char *got = sm_url_redact("http://user:secretpw@host/very/long/path", buf, sizeof(buf));
    assert_ptr_equal(got, buf);
    assert_int_equal(strlen(got), sizeof(buf) - 1);
    assert_null(strstr(got, "secret"));
    assert_string_equal(got, "http://<redacted>@h");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_redact_drops_user_and_password),
        cmocka_unit_test(test_url_redact_replaces_secret_query_values),
        cmocka_unit_test(test_url_redact_finds_urls_in_text),
        cmocka_unit_test(test_url_redact_leaves_text_without_secrets),
        cmocka_unit_test(test_url_redact_truncates_only_redacted_text),
    };
    return cmocka_run_group_tests_name("core_url", tests, NULL, NULL);
}
