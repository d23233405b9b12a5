/* Unit tests for engine/format/format_v3.c: zarr.json arrays and groups, sharded arrays' inner
 * chunk shape, chunk key encodings, extension members (must_understand), and the named error of
 * each malformed field: shapes, chunk grids, data types, overflow, malformed JSON. */
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

/* A uint16 array [100, 200] chunked [10, 20] with the default key encoding; each part may be
 * replaced. `extra` is appended (starting with a comma). */
static char doc[4096];

static const char *array_doc(const char *shape, const char *dtype, const char *chunks,
                             const char *key_encoding, const char *codecs, const char *extra)
{
    snprintf(doc, sizeof(doc),
             "{\"zarr_format\": 3, \"node_type\": \"array\", \"shape\": %s, \"data_type\": %s, "
             "\"chunk_grid\": {\"name\": \"regular\", \"configuration\": {\"chunk_shape\": %s}}, "
             "\"chunk_key_encoding\": %s, \"fill_value\": 0, \"codecs\": %s%s}",
             shape, dtype, chunks, key_encoding, codecs, extra);
    return doc;
}

static const char *simple(const char *extra)
{
    return array_doc("[100, 200]", "\"uint16\"", "[10, 20]", "{\"name\": \"default\"}",
                     "[" BYTES_LE "]", extra);
}

static sm_status parse(const char *d, enum sm_node_kind *kind, struct sm_array_meta **m,
                       json_t **attrs, struct sm_err *err)
{
    sm_err_clear(err);
    return sm_meta_parse_v3(d, strlen(d), kind, m, attrs, err);
}

static struct sm_array_meta *parse_ok(const char *d)
{
    struct sm_err err;
    enum sm_node_kind kind = SM_NODE_GROUP;
    struct sm_array_meta *m = NULL;
    json_t *attrs = (json_t *)1;
    assert_ok(parse(d, &kind, &m, &attrs, &err), &err);
    assert_int_equal(kind, SM_NODE_ARRAY);
    assert_null(attrs);
    assert_non_null(m);
    return m;
}

static void expect_error(const char *d, const char *what)
{
    struct sm_err err;
    enum sm_node_kind kind;
    struct sm_array_meta *m = (struct sm_array_meta *)1;
    assert_status(parse(d, &kind, &m, NULL, &err), SM_E_DATA, &err);
    assert_null(m);
    assert_contains(err.what, what);
}

static void test_v3_array_fields(void **state)
{
    (void)state;
    struct sm_array_meta *m = parse_ok(simple(", \"attributes\": {\"units\": \"HU\"}, "
                                              "\"dimension_names\": [\"y\", null]"));
    assert_int_equal(m->zarr_format, 3);
    assert_int_equal(m->ndim, 2);
    assert_int_equal(m->shape[0], 100);
    assert_int_equal(m->shape[1], 200);
    assert_int_equal(m->chunk_shape[0], 10);
    assert_int_equal(m->chunk_shape[1], 20);
    assert_int_equal(m->dtype, SM_DT_UINT16);
    assert_false(m->fill_is_null);
    assert_string_equal(m->key_prefix, "c");
    assert_int_equal(m->key_separator, '/');
    assert_int_equal(m->inner_ndim, 0);
    assert_non_null(m->chain);
    assert_string_equal(json_string_value(json_object_get(m->attributes, "units")), "HU");
    assert_int_equal(json_array_size(m->dimension_names), 2);
    assert_string_equal(json_string_value(json_array_get(m->dimension_names, 0)), "y");
    assert_int_equal(json_array_size(m->codecs), 1);
    sm_meta_free(m);
}

static void test_v3_attributes_default_to_empty_object(void **state)
{
    (void)state;
    struct sm_array_meta *m = parse_ok(simple(""));
    assert_true(json_is_object(m->attributes));
    assert_int_equal(json_object_size(m->attributes), 0);
    assert_null(m->dimension_names);
    sm_meta_free(m);
}

static void test_v3_bare_codec_names_become_objects(void **state)
{
    (void)state;
    struct sm_array_meta *m = parse_ok(
        array_doc("[16]", "\"uint8\"", "[4]", "{\"name\": \"default\"}", "[\"bytes\"]", ""));
    json_t *want = json_loads("[{\"name\": \"bytes\"}]", 0, NULL);
    assert_true(json_equal(want, m->codecs));
    json_decref(want);
    sm_meta_free(m);
}

static void test_v3_group_returns_attributes_and_no_meta(void **state)
{
    (void)state;
    struct sm_err err;
    enum sm_node_kind kind = SM_NODE_ARRAY;
    struct sm_array_meta *m = (struct sm_array_meta *)1;
    json_t *attrs = NULL;
    const char *g = "{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": "
                    "{\"multiscales\": [{\"version\": \"0.5\"}]}, \"consolidated_metadata\": null}";
    assert_ok(parse(g, &kind, &m, &attrs, &err), &err);
    assert_int_equal(kind, SM_NODE_GROUP);
    assert_null(m);
    assert_non_null(json_object_get(attrs, "multiscales"));
    json_decref(attrs);
    /* Without an attrs pointer nothing leaks; without attributes the object is empty. */
    assert_ok(parse(g, &kind, &m, NULL, &err), &err);
    assert_ok(parse("{\"zarr_format\": 3, \"node_type\": \"group\"}", &kind, &m, &attrs, &err),
              &err);
    assert_int_equal(json_object_size(attrs), 0);
    json_decref(attrs);
}

static void test_v3_group_rejects_array_fields(void **state)
{
    (void)state;
    expect_error("{\"zarr_format\": 3, \"node_type\": \"group\", \"shape\": [1]}",
                 "unsupported metadata field 'shape'");
    expect_error("{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": []}",
                 "field 'attributes' must be an object");
}

static void test_v3_sharding_sets_inner_chunk_shape(void **state)
{
    (void)state;
    struct sm_array_meta *m = parse_ok(array_doc(
        "[64, 64]", "\"uint16\"", "[32, 32]", "{\"name\": \"default\"}",
        "[{\"name\": \"sharding_indexed\", \"configuration\": {\"chunk_shape\": [8, 16], "
        "\"codecs\": [" BYTES_LE "], \"index_codecs\": [" BYTES_LE ", {\"name\": \"crc32c\"}], "
        "\"index_location\": \"end\"}}]",
        ""));
    assert_int_equal(m->chunk_shape[0], 32);
    assert_int_equal(m->inner_ndim, 2);
    assert_int_equal(m->inner_chunk_shape[0], 8);
    assert_int_equal(m->inner_chunk_shape[1], 16);
    assert_non_null(sm_codec_chain_shard(m->chain));
    sm_meta_free(m);
}

static void test_v3_sharding_inner_shape_must_match_ndim(void **state)
{
    (void)state;
    expect_error(array_doc("[64, 64]", "\"uint16\"", "[32, 32]", "{\"name\": \"default\"}",
                           "[{\"name\": \"sharding_indexed\", \"configuration\": {\"chunk_shape\": "
                           "[8], \"codecs\": [" BYTES_LE "], \"index_codecs\": [" BYTES_LE "]}}]",
                           ""),
                 "sharding_indexed chunk_shape has 1 dimensions but 'shape' has 2");
    expect_error(array_doc("[64, 64]", "\"uint16\"", "[32, 32]", "{\"name\": \"default\"}",
                           "[{\"name\": \"sharding_indexed\", \"configuration\": {\"chunk_shape\": "
                           "[8, 0], \"codecs\": [" BYTES_LE "], \"index_codecs\": [" BYTES_LE
                           "]}}]",
                           ""),
                 "sharding_indexed chunk_shape[1] = 0 must be at least 1");
}

static void test_v3_chunk_key_encodings(void **state)
{
    (void)state;
    static const struct {
        const char *encoding, *prefix;
        char sep;
    } cases[] = {
        {"{\"name\": \"default\"}", "c", '/'},
        {"{\"name\": \"default\", \"configuration\": {\"separator\": \".\"}}", "c", '.'},
        {"{\"name\": \"default\", \"configuration\": {\"separator\": \"/\"}}", "c", '/'},
        {"{\"name\": \"v2\"}", "", '.'},
        {"{\"name\": \"v2\", \"configuration\": {\"separator\": \"/\"}}", "", '/'},
        {"{\"name\": \"v2\", \"configuration\": {}}", "", '.'},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sm_array_meta *m = parse_ok(array_doc("[100, 200]", "\"uint16\"", "[10, 20]",
                                                     cases[i].encoding, "[" BYTES_LE "]", ""));
        assert_string_equal(m->key_prefix, cases[i].prefix);
        assert_int_equal(m->key_separator, cases[i].sep);
        sm_meta_free(m);
    }
}

static void test_v3_bad_chunk_key_encodings_are_named(void **state)
{
    (void)state;
    expect_error(array_doc("[4]", "\"uint8\"", "[2]", "{\"name\": \"hashed\"}", "[\"bytes\"]", ""),
                 "unsupported chunk key encoding 'hashed'");
    expect_error(array_doc("[4]", "\"uint8\"", "[2]",
                           "{\"name\": \"default\", \"configuration\": {\"separator\": \"-\"}}",
                           "[\"bytes\"]", ""),
                 "chunk_key_encoding separator must be \"/\" or \".\"");
    expect_error(array_doc("[4]", "\"uint8\"", "[2]",
                           "{\"name\": \"default\", \"configuration\": {\"sep\": \".\"}}",
                           "[\"bytes\"]", ""),
                 "unsupported chunk_key_encoding configuration field 'sep'");
    expect_error(array_doc("[4]", "\"uint8\"", "[2]", "\"default\"", "[\"bytes\"]", ""),
                 "field 'chunk_key_encoding' must be an object with a string 'name'");
}

static void test_v3_bad_shapes_are_named(void **state)
{
    (void)state;
    expect_error(array_doc("[100, -5]", "\"uint16\"", "[10, 20]", "{\"name\": \"default\"}",
                           "[" BYTES_LE "]", ""),
                 "shape[1] = -5 must be non-negative");
    expect_error(array_doc("[100, \"x\"]", "\"uint16\"", "[10, 20]", "{\"name\": \"default\"}",
                           "[" BYTES_LE "]", ""),
                 "shape[1] must be an integer");
    expect_error(
        array_doc("{}", "\"uint16\"", "[10, 20]", "{\"name\": \"default\"}", "[" BYTES_LE "]", ""),
        "field 'shape' must be an array of integers");
    expect_error(array_doc("[100, 18446744073709551615]", "\"uint16\"", "[10, 20]",
                           "{\"name\": \"default\"}", "[" BYTES_LE "]", ""),
                 "shape[1] = 18446744073709551615 is out of range");
    expect_error(array_doc("[100, 200]", "\"uint16\"", "[10, 0]", "{\"name\": \"default\"}",
                           "[" BYTES_LE "]", ""),
                 "chunk_shape[1] = 0 must be at least 1");
    expect_error(array_doc("[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]",
                           "\"uint16\"", "[1]", "{\"name\": \"default\"}", "[" BYTES_LE "]", ""),
                 "field 'shape' has 33 dimensions (at most 32 are supported)");
}

static void test_v3_zero_length_dimension_is_accepted(void **state)
{
    (void)state;
    struct sm_array_meta *m = parse_ok(array_doc("[0, 200]", "\"uint16\"", "[10, 20]",
                                                 "{\"name\": \"default\"}", "[" BYTES_LE "]", ""));
    assert_int_equal(m->shape[0], 0);
    sm_meta_free(m);
}

static void test_v3_chunk_ndim_mismatch_is_named(void **state)
{
    (void)state;
    expect_error(array_doc("[100, 200]", "\"uint16\"", "[10, 20, 30]", "{\"name\": \"default\"}",
                           "[" BYTES_LE "]", ""),
                 "chunk_shape has 3 dimensions but 'shape' has 2");
}

static void test_v3_overflowing_products_are_refused(void **state)
{
    (void)state;
    expect_error(array_doc("[4294967296, 4294967296, 4294967296]", "\"uint8\"", "[1, 1, 1]",
                           "{\"name\": \"default\"}", "[\"bytes\"]", ""),
                 "shape: the number of elements overflows 64 bits");
    expect_error(array_doc("[10, 10]", "\"int64\"", "[4294967296, 1073741824]",
                           "{\"name\": \"default\"}", "[" BYTES_LE "]", ""),
                 "the byte size of a int64 chunk overflows");
    /* 2^63 elements fit 64 bits, their 2^66 bytes do not */
    expect_error(array_doc("[2097152, 2097152, 2097152]", "\"float64\"", "[1, 1, 1]",
                           "{\"name\": \"default\"}", "[" BYTES_LE "]", ""),
                 "shape: the byte size of a float64 array overflows 64 bits");
    /* a sharding_indexed chunk_shape that makes 2^62 inner chunks per shard (a 2^66-byte index) */
    expect_error(array_doc("[2147483648, 2147483648]", "\"uint8\"", "[2147483648, 2147483648]",
                           "{\"name\": \"default\"}",
                           "[{\"name\": \"sharding_indexed\", \"configuration\": "
                           "{\"chunk_shape\": [1, 1], \"codecs\": [\"bytes\"], "
                           "\"index_codecs\": [\"bytes\"]}}]",
                           ""),
                 "too many inner chunks per shard");
}

static void test_v3_unknown_data_type_is_named(void **state)
{
    (void)state;
    expect_error(
        array_doc("[4]", "\"complex64\"", "[2]", "{\"name\": \"default\"}", "[\"bytes\"]", ""),
        "unsupported data type 'complex64'");
    expect_error(array_doc("[4]", "{\"name\": \"r16\"}", "[2]", "{\"name\": \"default\"}",
                           "[\"bytes\"]", ""),
                 "unsupported data type 'r16'");
}

static void test_v3_unknown_codec_is_named(void **state)
{
    (void)state;
    expect_error(array_doc("[4]", "\"uint8\"", "[2]", "{\"name\": \"default\"}",
                           "[\"bytes\", {\"name\": \"frobnicate\"}]", ""),
                 "frobnicate");
    expect_error(array_doc("[4]", "\"uint8\"", "[2]", "{\"name\": \"default\"}", "[]", ""),
                 "field 'codecs' must be a non-empty list");
    expect_error(array_doc("[4]", "\"uint8\"", "[2]", "{\"name\": \"default\"}", "[3]", ""),
                 "codecs[0] must be an object with a string 'name'");
}

static void test_v3_unsupported_chunk_grid_is_named(void **state)
{
    (void)state;
    expect_error("{\"zarr_format\": 3, \"node_type\": \"array\", \"shape\": [4], \"data_type\": "
                 "\"uint8\", \"chunk_grid\": {\"name\": \"rectilinear\", \"configuration\": {}}, "
                 "\"chunk_key_encoding\": {\"name\": \"default\"}, \"fill_value\": 0, "
                 "\"codecs\": [\"bytes\"]}",
                 "unsupported chunk grid 'rectilinear'");
    expect_error("{\"zarr_format\": 3, \"node_type\": \"array\", \"shape\": [4], \"data_type\": "
                 "\"uint8\", \"chunk_grid\": {\"name\": \"regular\"}, "
                 "\"chunk_key_encoding\": {\"name\": \"default\"}, \"fill_value\": 0, "
                 "\"codecs\": [\"bytes\"]}",
                 "missing field 'chunk_grid.configuration.chunk_shape'");
}

static void test_v3_malformed_json_reports_line_and_column(void **state)
{
    (void)state;
    struct sm_err err;
    enum sm_node_kind kind;
    struct sm_array_meta *m;
    const char *bad = "{\n  \"zarr_format\": 3,\n  \"shape\": [1,, 2]\n}";
    assert_status(parse(bad, &kind, &m, NULL, &err), SM_E_DATA, &err);
    assert_contains(err.what, "malformed JSON at line 3 column ");
}

static void test_v3_extension_members_need_must_understand_false(void **state)
{
    (void)state;
    struct sm_array_meta *m =
        parse_ok(simple(", \"my_ext\": {\"must_understand\": false, \"x\": 1}"));
    sm_meta_free(m);
    expect_error(simple(", \"my_ext\": {\"must_understand\": true}"),
                 "unsupported metadata field 'my_ext'");
    expect_error(simple(", \"my_ext\": {\"x\": 1}"), "unsupported metadata field 'my_ext'");
    expect_error(simple(", \"my_ext\": 5"), "\"must_understand\": false");
}

static void test_v3_storage_transformers_must_be_empty(void **state)
{
    (void)state;
    struct sm_array_meta *m = parse_ok(simple(", \"storage_transformers\": []"));
    sm_meta_free(m);
    expect_error(simple(", \"storage_transformers\": [{\"name\": \"offset\"}]"),
                 "unsupported storage transformer 'offset'");
}

static void test_v3_version_and_node_type_are_checked(void **state)
{
    (void)state;
    expect_error("{\"zarr_format\": 2, \"node_type\": \"array\"}",
                 "unsupported zarr_format 2 (expected 3)");
    expect_error("{\"node_type\": \"array\"}", "missing field 'zarr_format'");
    expect_error("{\"zarr_format\": 3}", "missing field 'node_type'");
    expect_error("{\"zarr_format\": 3, \"node_type\": \"dataset\"}",
                 "field 'node_type' must be \"array\" or \"group\"");
}

static void test_v3_fill_value_is_required_and_may_be_null(void **state)
{
    (void)state;
    expect_error("{\"zarr_format\": 3, \"node_type\": \"array\", \"shape\": [4], \"data_type\": "
                 "\"uint8\", \"chunk_grid\": {\"name\": \"regular\", \"configuration\": "
                 "{\"chunk_shape\": [2]}}, \"chunk_key_encoding\": {\"name\": \"default\"}, "
                 "\"codecs\": [\"bytes\"]}",
                 "missing field 'fill_value'");
    struct sm_array_meta *m =
        parse_ok("{\"zarr_format\": 3, \"node_type\": \"array\", \"shape\": [4], \"data_type\": "
                 "\"float32\", \"chunk_grid\": {\"name\": \"regular\", \"configuration\": "
                 "{\"chunk_shape\": [2]}}, \"chunk_key_encoding\": {\"name\": \"default\"}, "
                 "\"fill_value\": null, \"codecs\": [" BYTES_LE "]}");
    assert_true(m->fill_is_null);
    sm_meta_free(m);
}

static void test_v3_uint64_fill_beyond_int64(void **state)
{
    (void)state;
    struct sm_array_meta *m =
        parse_ok("{\"zarr_format\": 3, \"node_type\": \"array\", \"shape\": [4], \"data_type\": "
                 "\"uint64\", \"chunk_grid\": {\"name\": \"regular\", \"configuration\": "
                 "{\"chunk_shape\": [2]}}, \"chunk_key_encoding\": {\"name\": \"default\"}, "
                 "\"fill_value\": 18446744073709551615, \"codecs\": [" BYTES_LE "]}");
    for (int i = 0; i < 8; i++) {
        assert_int_equal(m->fill[i], 0xff);
    }
    sm_meta_free(m);
}

static void test_v3_dimension_names_are_validated(void **state)
{
    (void)state;
    expect_error(simple(", \"dimension_names\": [\"y\"]"),
                 "field 'dimension_names' must be a list of 2 names");
    expect_error(simple(", \"dimension_names\": [\"y\", 3]"),
                 "dimension_names[1] must be a string or null");
    struct sm_array_meta *m = parse_ok(simple(", \"dimension_names\": null"));
    assert_null(m->dimension_names);
    sm_meta_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v3_array_fields),
        cmocka_unit_test(test_v3_attributes_default_to_empty_object),
        cmocka_unit_test(test_v3_bare_codec_names_become_objects),
        cmocka_unit_test(test_v3_group_returns_attributes_and_no_meta),
        cmocka_unit_test(test_v3_group_rejects_array_fields),
        cmocka_unit_test(test_v3_sharding_sets_inner_chunk_shape),
        cmocka_unit_test(test_v3_sharding_inner_shape_must_match_ndim),
        cmocka_unit_test(test_v3_chunk_key_encodings),
        cmocka_unit_test(test_v3_bad_chunk_key_encodings_are_named),
        cmocka_unit_test(test_v3_bad_shapes_are_named),
        cmocka_unit_test(test_v3_zero_length_dimension_is_accepted),
        cmocka_unit_test(test_v3_chunk_ndim_mismatch_is_named),
        cmocka_unit_test(test_v3_overflowing_products_are_refused),
        cmocka_unit_test(test_v3_unknown_data_type_is_named),
        cmocka_unit_test(test_v3_unknown_codec_is_named),
        cmocka_unit_test(test_v3_unsupported_chunk_grid_is_named),
        cmocka_unit_test(test_v3_malformed_json_reports_line_and_column),
        cmocka_unit_test(test_v3_extension_members_need_must_understand_false),
        cmocka_unit_test(test_v3_storage_transformers_must_be_empty),
        cmocka_unit_test(test_v3_version_and_node_type_are_checked),
        cmocka_unit_test(test_v3_fill_value_is_required_and_may_be_null),
        cmocka_unit_test(test_v3_uint64_fill_beyond_int64),
        cmocka_unit_test(test_v3_dimension_names_are_validated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
