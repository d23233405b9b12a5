/* Unit tests for engine/codec/codec_config.c: configuration objects are checked for unknown keys
 * (numcodecs' "id" always allowed), types and ranges, with messages that name the codec and key;
 * absent and null members take their defaults. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sm_test.h"
#include "codec_test.h"

static void test_cfg_keys_rejects_unknown_keys_and_allows_id(void **state)
{
    (void)state;
    static const char *const keys[] = {"level", NULL};
    struct sm_err err;
    sm_err_clear(&err);
    json_t *j = ct_json("{\"id\":\"gzip\",\"level\":1}");
    assert_ok(sm_codec_cfg_keys(j, "gzip", keys, &err), &err);
    json_decref(j);
    j = ct_json("{\"level\":1,\"lvl\":2}");
    assert_status(sm_codec_cfg_keys(j, "gzip", keys, &err), SM_E_DATA, &err);
    assert_string_equal(err.what, "codec 'gzip': unknown configuration key 'lvl'");
    json_decref(j);
    sm_err_clear(&err);
    assert_ok(sm_codec_cfg_keys(NULL, "gzip", keys, &err), &err);
    j = ct_json("null");
    assert_ok(sm_codec_cfg_keys(j, "gzip", keys, &err), &err);
    json_decref(j);
    j = ct_json("[1]");
    assert_status(sm_codec_cfg_keys(j, "gzip", keys, &err), SM_E_DATA, &err);
    assert_contains(err.what, "configuration must be a JSON object");
    json_decref(j);
}

static void test_cfg_int_checks_type_range_and_default(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    long long v = 0;
    json_t *j = ct_json("{\"level\":7,\"neg\":-3,\"s\":\"x\",\"f\":1.5,\"n\":null}");
    assert_ok(sm_codec_cfg_int(j, "c", "level", true, 0, 9, 5, &v, &err), &err);
    assert_int_equal(v, 7);
    assert_ok(sm_codec_cfg_int(j, "c", "neg", true, -5, 9, 5, &v, &err), &err);
    assert_int_equal(v, -3);
    assert_ok(sm_codec_cfg_int(j, "c", "absent", false, 0, 9, 5, &v, &err), &err);
    assert_int_equal(v, 5);
    assert_ok(sm_codec_cfg_int(j, "c", "n", false, 0, 9, 4, &v, &err), &err);
    assert_int_equal(v, 4);
    assert_status(sm_codec_cfg_int(j, "c", "neg", true, 0, 9, 5, &v, &err), SM_E_DATA, &err);
    assert_string_equal(err.what, "codec 'c': 'neg' is -3, outside 0..9");
    sm_err_clear(&err);
    assert_status(sm_codec_cfg_int(j, "c", "s", true, 0, 9, 5, &v, &err), SM_E_DATA, &err);
    assert_string_equal(err.what, "codec 'c': 's' must be an integer in 0..9");
    sm_err_clear(&err);
    assert_status(sm_codec_cfg_int(j, "c", "f", true, 0, 9, 5, &v, &err), SM_E_DATA, &err);
    sm_err_clear(&err);
    assert_status(sm_codec_cfg_int(j, "c", "absent", true, 0, 9, 5, &v, &err), SM_E_DATA, &err);
    assert_string_equal(err.what, "codec 'c': missing configuration key 'absent'");
    json_decref(j);
}

static void test_cfg_bool_and_string_check_types(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    json_t *j = ct_json("{\"b\":true,\"s\":\"lz4\",\"i\":1}");
    bool b = false;
    const char *s = NULL;
    assert_ok(sm_codec_cfg_bool(j, "c", "b", false, &b, &err), &err);
    assert_true(b);
    assert_ok(sm_codec_cfg_bool(j, "c", "absent", true, &b, &err), &err);
    assert_true(b);
    assert_status(sm_codec_cfg_bool(j, "c", "i", false, &b, &err), SM_E_DATA, &err);
    assert_string_equal(err.what, "codec 'c': 'i' must be true or false");
    sm_err_clear(&err);
    assert_ok(sm_codec_cfg_string(j, "c", "s", true, &s, &err), &err);
    assert_string_equal(s, "lz4");
    assert_ok(sm_codec_cfg_string(j, "c", "absent", false, &s, &err), &err);
    assert_null(s);
    assert_status(sm_codec_cfg_string(j, "c", "i", false, &s, &err), SM_E_DATA, &err);
    assert_string_equal(err.what, "codec 'c': 'i' must be a string");
    sm_err_clear(&err);
    assert_status(sm_codec_cfg_string(j, "c", "absent", true, &s, &err), SM_E_DATA, &err);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cfg_keys_rejects_unknown_keys_and_allows_id),
        cmocka_unit_test(test_cfg_int_checks_type_range_and_default),
        cmocka_unit_test(test_cfg_bool_and_string_check_types),
    };
    return cmocka_run_group_tests_name("codec_config", tests, NULL, NULL);
}
