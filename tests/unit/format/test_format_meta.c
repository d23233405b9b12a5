/* Unit tests for engine/format/format_meta.c: the `shardmill info` description of v2, v3 and
 * sharded arrays (SPEC §4), the shape-field reader, and release of partial metadata. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "format_int.h"
#include "sm_test.h"

#define BYTES_LE "{\"name\": \"bytes\", \"configuration\": {\"endian\": \"little\"}}"

static void expect_member(const json_t *d, const char *key, const char *expected)
{
    json_t *want = json_loads(expected, JSON_DECODE_ANY, NULL);
    assert_non_null(want);
    const json_t *got = json_object_get(d, key);
    if (got == NULL || !json_equal(want, got)) {
        char *s = got != NULL ? json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        fail_msg("'%s' is %s, expected %s", key, s != NULL ? s : "(absent)", expected);
    }
    json_decref(want);
}

static void test_meta_describe_v2_array(void **state)
{
    (void)state;
    const char *zarray =
        "{\"zarr_format\": 2, \"shape\": [10, 20], \"chunks\": [5, 10], \"dtype\": \">f4\", "
        "\"order\": \"F\", \"compressor\": {\"id\": \"gzip\", \"level\": 4}, \"fill_value\": "
        "\"NaN\", \"filters\": null, \"dimension_separator\": \"/\"}";
    struct sm_err err;
    struct sm_array_meta *m;
    sm_err_clear(&err);
    assert_ok(sm_meta_parse_v2(zarray, strlen(zarray), "{\"a\": 1}", 8, &m, &err), &err);
    json_t *d = sm_meta_describe(m);
    assert_non_null(d);
    expect_member(d, "zarr_format", "2");
    expect_member(d, "node_type", "\"array\"");
    expect_member(d, "shape", "[10, 20]");
    expect_member(d, "dtype", "\"float32\"");
    expect_member(d, "chunks", "[5, 10]");
    expect_member(d, "shards", "null");
    expect_member(d, "fill_value", "\"NaN\"");
    expect_member(d, "chunk_key_encoding", "{\"name\": \"v2\", \"separator\": \"/\"}");
    expect_member(d, "attributes", "{\"a\": 1}");
    expect_member(d, "dimension_names", "null");
    expect_member(d, "codecs",
                  "[{\"name\": \"transpose\", \"configuration\": {\"order\": [1, 0]}},"
                  " {\"name\": \"bytes\", \"configuration\": {\"endian\": \"big\"}},"
                  " {\"name\": \"gzip\", \"configuration\": {\"level\": 4}}]");
    json_decref(d);
    sm_meta_free(m);
}

static void test_meta_describe_v3_sharded_array(void **state)
{
    (void)state;
    const char *doc =
        "{\"zarr_format\": 3, \"node_type\": \"array\", \"shape\": [64, 64], \"data_type\": "
        "\"int16\", \"chunk_grid\": {\"name\": \"regular\", \"configuration\": {\"chunk_shape\": "
        "[32, 32]}}, \"chunk_key_encoding\": {\"name\": \"default\"}, \"fill_value\": -1, "
        "\"codecs\": [{\"name\": \"sharding_indexed\", \"configuration\": {\"chunk_shape\": "
        "[16, 8], \"codecs\": [" BYTES_LE "], \"index_codecs\": [" BYTES_LE
        "], \"index_location\": \"end\"}}], \"dimension_names\": [\"y\", \"x\"]}";
    struct sm_err err;
    enum sm_node_kind kind;
    struct sm_array_meta *m;
    sm_err_clear(&err);
    assert_ok(sm_meta_parse_v3(doc, strlen(doc), &kind, &m, NULL, &err), &err);
    json_t *d = sm_meta_describe(m);
    assert_non_null(d);
    expect_member(d, "zarr_format", "3");
    expect_member(d, "dtype", "\"int16\"");
    expect_member(d, "chunks", "[16, 8]");
    expect_member(d, "shards", "[32, 32]");
    expect_member(d, "fill_value", "-1");
    expect_member(d, "chunk_key_encoding", "{\"name\": \"default\", \"separator\": \"/\"}");
    expect_member(d, "attributes", "{}");
    expect_member(d, "dimension_names", "[\"y\", \"x\"]");
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(d, "codecs"), 0), "name")),
        "sharding_indexed");
    json_decref(d);
    sm_meta_free(m);
}

static void test_meta_describe_returns_independent_copies(void **state)
{
    (void)state;
    const char *doc =
        "{\"zarr_format\": 3, \"node_type\": \"array\", \"shape\": [4], \"data_type\": \"uint8\", "
        "\"chunk_grid\": {\"name\": \"regular\", \"configuration\": {\"chunk_shape\": [4]}}, "
        "\"chunk_key_encoding\": {\"name\": \"v2\"}, \"fill_value\": 0, \"codecs\": [\"bytes\"], "
        "\"attributes\": {\"k\": [1]}}";
    struct sm_err err;
    enum sm_node_kind kind;
    struct sm_array_meta *m;
    sm_err_clear(&err);
    assert_ok(sm_meta_parse_v3(doc, strlen(doc), &kind, &m, NULL, &err), &err);
    json_t *d = sm_meta_describe(m);
    expect_member(d, "chunk_key_encoding", "{\"name\": \"v2\", \"separator\": \".\"}");
    json_array_append_new(json_object_get(json_object_get(d, "attributes"), "k"), json_integer(2));
    json_array_clear(json_object_get(d, "codecs"));
    assert_int_equal(json_array_size(json_object_get(m->attributes, "k")), 1);
    assert_int_equal(json_array_size(m->codecs), 1);
    json_decref(d);
    sm_meta_free(m);
}

static void test_meta_dims_reads_and_validates_entries(void **state)
{
    (void)state;
    struct sm_err err;
    uint64_t out[SM_MAX_DIMS];
    unsigned n = 99;
    json_t *v = json_loads("[0, 3, 9223372036854775807]", 0, NULL);
    sm_err_clear(&err);
    assert_ok(sm_fmt_dims(v, "shape", false, &n, out, &err), &err);
    assert_int_equal(n, 3);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[2], INT64_MAX);
    sm_err_clear(&err);
    assert_status(sm_fmt_dims(v, "chunks", true, &n, out, &err), SM_E_DATA, &err);
    assert_string_equal(err.what, "chunks[0] = 0 must be at least 1");
    json_decref(v);
    v = json_loads("[]", 0, NULL);
    sm_err_clear(&err);
    assert_ok(sm_fmt_dims(v, "shape", true, &n, out, &err), &err);
    assert_int_equal(n, 0);
    json_decref(v);
}

static void test_meta_field_names_missing_members(void **state)
{
    (void)state;
    struct sm_err err;
    json_t *obj = json_loads("{\"a\": 1}", 0, NULL);
    json_t *v;
    sm_err_clear(&err);
    assert_ok(sm_fmt_field(obj, "b", false, &v, &err), &err);
    assert_null(v);
    assert_status(sm_fmt_field(obj, "b", true, &v, &err), SM_E_DATA, &err);
    assert_string_equal(err.what, "missing field 'b'");
    json_decref(obj);
}

static void test_meta_free_accepts_null_and_partial(void **state)
{
    (void)state;
    sm_meta_free(NULL);
    struct sm_array_meta *m = sm_fmt_meta_new();
    assert_non_null(m);
    assert_true(json_is_object(m->attributes));
    sm_meta_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meta_describe_v2_array),
        cmocka_unit_test(test_meta_describe_v3_sharded_array),
        cmocka_unit_test(test_meta_describe_returns_independent_copies),
        cmocka_unit_test(test_meta_dims_reads_and_validates_entries),
        cmocka_unit_test(test_meta_field_names_missing_members),
        cmocka_unit_test(test_meta_free_accepts_null_and_partial),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
