/* Unit tests for engine/format/format_json.c: the rewriting pass that lets jansson read the bare
 * NaN / Infinity / -Infinity tokens and uint64-sized integers Zarr writers emit, and the
 * "malformed JSON at line L column C" errors in the coordinates of the original text. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "format_int.h"
#include "shardmill/alloc.h"
#include "sm_test.h"

/* The rewritten text as a NUL-terminated copy ("" marks "nothing rewritten"). */
static char rewritten[512];

static sm_status rewrite(const char *in, struct sm_err *err)
{
    char *out;
    size_t n;
    sm_err_clear(err);
    sm_status st = sm_fmt_json_rewrite(in, strlen(in), &out, &n, err);
    rewritten[0] = '\0';
    if (st == SM_OK && out != NULL) {
        assert_true(n < sizeof(rewritten));
        memcpy(rewritten, out, n);
        rewritten[n] = '\0';
        sm_free(out);
    }
    return st;
}

static void test_json_rewrite_quotes_bare_nan_and_infinities(void **state)
{
    (void)state;
    struct sm_err err;
    assert_ok(rewrite("{\"a\": NaN, \"b\": [Infinity,-Infinity]}", &err), &err);
    assert_string_equal(rewritten, "{\"a\": \"NaN\", \"b\": [\"Infinity\",\"-Infinity\"]}");
}

static void test_json_rewrite_leaves_strings_alone(void **state)
{
    (void)state;
    struct sm_err err;
    /* NaN inside strings, after escaped quotes and backslashes, is text, not a token. */
    assert_ok(rewrite("{\"NaN\": \"x\\\" NaN\", \"k\\\\\": \"Infinity\"}", &err), &err);
    assert_string_equal(rewritten, "");
}

static void test_json_rewrite_nothing_to_do_returns_no_copy(void **state)
{
    (void)state;
    struct sm_err err;
    char *out = (char *)1;
    size_t n = 0;
    const char *doc = "{\"fill_value\": -1.5e3, \"ok\": [true, false, null]}";
    sm_err_clear(&err);
    assert_ok(sm_fmt_json_rewrite(doc, strlen(doc), &out, &n, &err), &err);
    assert_null(out);
    assert_int_equal(n, strlen(doc));
}

static void test_json_rewrite_does_not_split_longer_words(void **state)
{
    (void)state;
    struct sm_err err;
    assert_ok(rewrite("[NaNa, Infinity2, -Infinityx, NaN]", &err), &err);
    assert_string_equal(rewritten, "[NaNa, Infinity2, -Infinityx, \"NaN\"]");
}

static void test_json_rewrite_marks_integers_beyond_int64(void **state)
{
    (void)state;
    struct sm_err err;
    assert_ok(rewrite("[9223372036854775807, -9223372036854775808]", &err), &err);
    assert_string_equal(rewritten, ""); /* both fit int64 */
    assert_ok(rewrite("[18446744073709551615,-9223372036854775809, 1e400]", &err), &err);
    assert_string_equal(rewritten,
                        "[\"\\u000018446744073709551615\",\"\\u0000-9223372036854775809\", 1e400]");
}

static void test_json_rewrite_rejects_nul_escape_with_position(void **state)
{
    (void)state;
    struct sm_err err;
    assert_status(rewrite("{\n  \"a\": \"x\\u0000\"}", &err), SM_E_DATA, &err);
    assert_contains(err.what, "line 2 column 10");
    assert_contains(err.what, "\\u0000");
}

static void test_json_load_reads_big_integers_and_nan(void **state)
{
    (void)state;
    struct sm_err err;
    json_t *root;
    const char *doc = "{\"u\": 18446744073709551615, \"f\": NaN}";
    sm_err_clear(&err);
    assert_ok(sm_fmt_json_load(doc, strlen(doc), "", &root, &err), &err);
    const char *digits = NULL;
    assert_true(sm_fmt_json_bigint(json_object_get(root, "u"), &digits));
    assert_string_equal(digits, "18446744073709551615");
    assert_string_equal(json_string_value(json_object_get(root, "f")), "NaN");
    assert_false(sm_fmt_json_bigint(json_object_get(root, "f"), &digits));
    json_decref(root);
}

static void test_json_load_reports_original_line_and_column(void **state)
{
    (void)state;
    struct sm_err err;
    json_t *root;
    /* The same syntax error with and without a rewritten token before it on its line. */
    const char *plain = "{\n  \"a\": [0, 1 2]\n}";
    const char *nan = "{\n  \"a\": [NaN, 1 2]\n}";
    sm_err_clear(&err);
    assert_status(sm_fmt_json_load(plain, strlen(plain), "", &root, &err), SM_E_DATA, &err);
    assert_null(root);
    assert_contains(err.what, "malformed JSON at line 2 column ");
    char expected[256];
    memcpy(expected, err.what, sizeof(expected));
    /* "0" and "NaN" differ by two characters: shift the expected column accordingly. */
    int line, col;
    assert_int_equal(sscanf(expected, "malformed JSON at line %d column %d", &line, &col), 2);
    sm_err_clear(&err);
    assert_status(sm_fmt_json_load(nan, strlen(nan), "", &root, &err), SM_E_DATA, &err);
    int line2, col2;
    assert_int_equal(sscanf(err.what, "malformed JSON at line %d column %d", &line2, &col2), 2);
    assert_int_equal(line2, 2);
    assert_int_equal(col2, col + 2);
}

static void test_json_load_names_companion_document(void **state)
{
    (void)state;
    struct sm_err err;
    json_t *root;
    sm_err_clear(&err);
    assert_status(sm_fmt_json_load("{", 1, ".zattrs: ", &root, &err), SM_E_DATA, &err);
    assert_contains(err.what, ".zattrs: malformed JSON at line 1");
}

static void test_json_load_rejects_non_objects_and_duplicates(void **state)
{
    (void)state;
    struct sm_err err;
    json_t *root;
    sm_err_clear(&err);
    assert_status(sm_fmt_json_load("[1, 2]", 6, "", &root, &err), SM_E_DATA, &err);
    assert_contains(err.what, "not a JSON object");
    sm_err_clear(&err);
    const char *dup = "{\"shape\": [1], \"shape\": [2]}";
    assert_status(sm_fmt_json_load(dup, strlen(dup), "", &root, &err), SM_E_DATA, &err);
    assert_contains(err.what, "malformed JSON");
    assert_contains(err.what, "duplicate");
}

static void test_json_load_uses_the_length_not_a_terminator(void **state)
{
    (void)state;
    struct sm_err err;
    json_t *root;
    const char doc[] = "{\"a\": NaN}GARBAGE";
    sm_err_clear(&err);
    assert_ok(sm_fmt_json_load(doc, 10, "", &root, &err), &err);
    assert_string_equal(json_string_value(json_object_get(root, "a")), "NaN");
    json_decref(root);
}

static void test_json_restore_turns_big_integers_into_reals(void **state)
{
    (void)state;
    struct sm_err err;
    json_t *root;
    const char *doc = "{\"a\": {\"b\": [1, 18446744073709551615]}, \"c\": 99999999999999999999}";
    sm_err_clear(&err);
    assert_ok(sm_fmt_json_load(doc, strlen(doc), "", &root, &err), &err);
    assert_ok(sm_fmt_json_restore(root, &err), &err);
    const json_t *b = json_object_get(json_object_get(root, "a"), "b");
    assert_true(json_is_integer(json_array_get(b, 0)));
    assert_true(json_is_real(json_array_get(b, 1)));
    assert_true(json_real_value(json_array_get(b, 1)) == 18446744073709551615.0);
    assert_true(json_is_real(json_object_get(root, "c")));
    json_decref(root);
}

static void test_json_parse_attrs_is_lenient_and_checks_objects(void **state)
{
    (void)state;
    struct sm_err err;
    json_t *attrs = NULL;
    const char *doc = "{\"min\": -Infinity, \"n\": 18446744073709551615}";
    sm_err_clear(&err);
    assert_ok(sm_meta_parse_attrs(doc, strlen(doc), &attrs, &err), &err);
    assert_string_equal(json_string_value(json_object_get(attrs, "min")), "-Infinity");
    assert_true(json_is_real(json_object_get(attrs, "n")));
    json_decref(attrs);
    sm_err_clear(&err);
    assert_status(sm_meta_parse_attrs("[3]", 3, &attrs, &err), SM_E_DATA, &err);
    assert_null(attrs);
    assert_contains(err.what, "not a JSON object");
}

static void test_json_rewrite_allocation_failure_is_nomem(void **state)
{
    (void)state;
    struct sm_err err;
    json_t *root = (json_t *)1;
    const uint64_t before = sm_alloc_current();
    sm_err_clear(&err);
    sm_alloc_fail_at(1);
    sm_status st = sm_fmt_json_load("{\"a\": NaN}", 10, "", &root, &err);
    sm_alloc_fail_at(0);
    assert_status(st, SM_E_NOMEM, &err);
    assert_null(root);
    assert_int_equal(sm_alloc_current(), before);
}

/* meta.h's number policy, written: checksums are decimal strings, counts integers; an integer
 * beyond int64 (a Zarr uint64 fill_value) dumps as the bare number. */
static void test_json_policy_writes_checksums_as_strings(void **state)
{
    (void)state;
    json_t *o = json_object();
    json_object_set_new(o, "w", sm_json_checksum_u64(UINT64_C(18430814901801376625)));
    json_object_set_new(o, "c", sm_json_checksum_i64(INT64_MIN));
    json_object_set_new(o, "n", sm_json_u64(7));
    json_object_set_new(o, "f", sm_json_u64(UINT64_MAX));
    char *text = sm_json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(text, "{\"c\":\"-9223372036854775808\",\"f\":18446744073709551615,"
                              "\"n\":7,\"w\":\"18430814901801376625\"}");
    sm_json_free_text(text);
    json_decref(o);
}

/* ...and read: every form comes back exact (the legacy bare integer above 2^63 too), and a
 * document that does not parse is SM_E_DATA naming it. */
static void test_json_policy_reads_every_form_exactly(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const char *doc =
        "{\"legacy\": 18430814901801376625, \"s\": \"18430814901801376625\", "
        "\"neg\": \"-5\", \"i\": 42, \"bad\": \"01\", \"big\": \"18446744073709551616\", "
        "\"r\": 1.5, \"m\": -9223372036854775809}";
    json_t *root = NULL;
    assert_ok(sm_json_load(doc, strlen(doc), "x/zarr.json", &root, &err), &err);
    uint64_t u = 0;
    int64_t i = 0;
    assert_true(sm_json_get_u64(json_object_get(root, "legacy"), &u));
    assert_true(u == UINT64_C(18430814901801376625));
    u = 0;
    assert_true(sm_json_get_u64(json_object_get(root, "s"), &u));
    assert_true(u == UINT64_C(18430814901801376625));
    assert_false(sm_json_get_i64(json_object_get(root, "s"), &i));
    assert_true(sm_json_get_i64(json_object_get(root, "neg"), &i));
    assert_true(i == -5);
    assert_false(sm_json_get_u64(json_object_get(root, "neg"), &u));
    assert_true(sm_json_get_u64(json_object_get(root, "i"), &u) && u == 42);
    assert_false(sm_json_get_u64(json_object_get(root, "bad"), &u));
    assert_false(sm_json_get_u64(json_object_get(root, "big"), &u));
    assert_false(sm_json_get_u64(json_object_get(root, "r"), &u));
    assert_false(sm_json_get_i64(json_object_get(root, "m"), &i));
    /* read back and dumped again, the document keeps its bare integer */
    char *text = sm_json_dumps(json_object_get(root, "legacy"), JSON_ENCODE_ANY);
    assert_string_equal(text, "18430814901801376625");
    sm_json_free_text(text);
    json_decref(root);
    root = NULL;
    assert_status(sm_json_load("{\"a\": 1,", 9, "x/zarr.json", &root, &err), SM_E_DATA, &err);
    assert_null(root);
    assert_string_equal(err.where, "x/zarr.json");
    assert_contains(err.what, "malformed JSON at line 1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_rewrite_quotes_bare_nan_and_infinities),
        cmocka_unit_test(test_json_rewrite_leaves_strings_alone),
        cmocka_unit_test(test_json_rewrite_nothing_to_do_returns_no_copy),
        cmocka_unit_test(test_json_rewrite_does_not_split_longer_words),
        cmocka_unit_test(test_json_rewrite_marks_integers_beyond_int64),
        cmocka_unit_test(test_json_rewrite_rejects_nul_escape_with_position),
        cmocka_unit_test(test_json_load_reads_big_integers_and_nan),
        cmocka_unit_test(test_json_load_reports_original_line_and_column),
        cmocka_unit_test(test_json_load_names_companion_document),
        cmocka_unit_test(test_json_load_rejects_non_objects_and_duplicates),
        cmocka_unit_test(test_json_load_uses_the_length_not_a_terminator),
        cmocka_unit_test(test_json_restore_turns_big_integers_into_reals),
        cmocka_unit_test(test_json_parse_attrs_is_lenient_and_checks_objects),
        cmocka_unit_test(test_json_rewrite_allocation_failure_is_nomem),
        cmocka_unit_test(test_json_policy_writes_checksums_as_strings),
        cmocka_unit_test(test_json_policy_reads_every_form_exactly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
