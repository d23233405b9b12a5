/* Unit tests for engine/format/format_keys.c: chunk keys of the v3 "default" encoding and of
 * the v2 / v3 "v2" encoding, with both separators, for 0-d arrays and a buffer that is too small.
 */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/meta.h"
#include "sm_test.h"

static struct sm_array_meta meta(unsigned ndim, const char *prefix, char sep)
{
    struct sm_array_meta m;
    memset(&m, 0, sizeof(m));
    m.ndim = ndim;
    memcpy(m.key_prefix, prefix, strlen(prefix) + 1);
    m.key_separator = sep;
    return m;
}

static void expect_key(const struct sm_array_meta *m, const uint64_t *idx, const char *expected)
{
    struct sm_err err;
    char buf[64];
    sm_err_clear(&err);
    assert_ok(sm_meta_chunk_key(m, idx, buf, sizeof(buf), &err), &err);
    assert_string_equal(buf, expected);
}

static void test_keys_v3_default_encoding_prefixes_c(void **state)
{
    (void)state;
    const uint64_t idx[] = {0, 12, 3};
    struct sm_array_meta slash = meta(3, "c", '/');
    struct sm_array_meta dot = meta(3, "c", '.');
    expect_key(&slash, idx, "c/0/12/3");
    expect_key(&dot, idx, "c.0.12.3");
}

static void test_keys_v2_encoding_has_no_prefix(void **state)
{
    (void)state;
    const uint64_t idx[] = {7, 0, 18446744073709551615u};
    struct sm_array_meta dot = meta(3, "", '.');
    struct sm_array_meta slash = meta(3, "", '/');
    expect_key(&dot, idx, "7.0.18446744073709551615");
    expect_key(&slash, idx, "7/0/18446744073709551615");
}

static void test_keys_zero_dimensional_arrays(void **state)
{
    (void)state;
    struct sm_array_meta v3 = meta(0, "c", '/');
    struct sm_array_meta v2 = meta(0, "", '.');
    expect_key(&v3, NULL, "c");
    expect_key(&v2, NULL, "0");
}

static void test_keys_one_dimensional_arrays(void **state)
{
    (void)state;
    const uint64_t idx[] = {42};
    struct sm_array_meta v3 = meta(1, "c", '/');
    struct sm_array_meta v2 = meta(1, "", '.');
    expect_key(&v3, idx, "c/42");
    expect_key(&v2, idx, "42");
}

static void test_keys_too_long_for_the_buffer_is_internal_error(void **state)
{
    (void)state;
    const uint64_t idx[] = {123, 456};
    struct sm_array_meta m = meta(2, "c", '/');
    struct sm_err err;
    char buf[16];
    for (size_t cap = 0; cap < 10; cap++) {
        sm_err_clear(&err);
        assert_status(sm_meta_chunk_key(&m, idx, buf, cap, &err), SM_E_INTERNAL, &err);
        assert_contains(err.what, "chunk key longer than");
    }
    sm_err_clear(&err); /* "c/123/456" is 9 characters: 10 bytes fit exactly */
    assert_ok(sm_meta_chunk_key(&m, idx, buf, 10, &err), &err);
    assert_string_equal(buf, "c/123/456");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_v3_default_encoding_prefixes_c),
        cmocka_unit_test(test_keys_v2_encoding_has_no_prefix),
        cmocka_unit_test(test_keys_zero_dimensional_arrays),
        cmocka_unit_test(test_keys_one_dimensional_arrays),
        cmocka_unit_test(test_keys_too_long_for_the_buffer_is_internal_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
