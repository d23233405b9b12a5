/* Unit tests for engine/format/format_n5.c: attributes.json to metadata with an [n5_block] chain:
 * axes reversed to C order, every N5 data type, each compression converted (gzip, gzip with
 * useZlib, zstd, blosc, raw, the legacy compressionType), unsupported ones refused by name, groups
 * told apart from datasets, user attributes kept, block keys fastest-first, and the named error of
 * each malformed field. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "format_int.h"
#include "shardmill/alloc.h"
#include "sm_test.h"

static char doc[2048];

/* A dataset of N5 dimensions [30, 20, 10] (x fastest), blockSize [16, 8, 4]. */
static const char *attrs(const char *dtype, const char *compression, const char *extra)
{
    snprintf(doc, sizeof(doc),
             "{\"n5\": \"2.0.0\", \"dimensions\": [30, 20, 10], \"blockSize\": [16, 8, 4], "
             "\"dataType\": \"%s\", \"compression\": %s%s}",
             dtype, compression, extra);
    return doc;
}

static sm_status parse(const char *text, enum sm_node_kind *kind, struct sm_array_meta **m,
                       json_t **gattrs, struct sm_err *err)
{
    sm_err_clear(err);
    return sm_meta_parse_n5(text, strlen(text), kind, m, gattrs, err);
}

static struct sm_array_meta *parse_ok(const char *text)
{
    struct sm_err err;
    struct sm_array_meta *m = NULL;
    enum sm_node_kind kind = SM_NODE_GROUP;
    assert_ok(parse(text, &kind, &m, NULL, &err), &err);
    assert_int_equal(kind, SM_NODE_ARRAY);
    assert_non_null(m);
    return m;
}

static void expect_error(const char *text, const char *what)
{
    struct sm_err err;
    enum sm_node_kind kind;
    struct sm_array_meta *m = (struct sm_array_meta *)1;
    assert_status(parse(text, &kind, &m, NULL, &err), SM_E_DATA, &err);
    assert_null(m);
    assert_contains(err.what, what);
}

/* The compressor object inside the n5_block codec (borrowed). */
static const json_t *compressor(const struct sm_array_meta *m)
{
    assert_int_equal(json_array_size(m->codecs), 1);
    const json_t *c = json_array_get(m->codecs, 0);
    assert_string_equal(json_string_value(json_object_get(c, "name")), "n5_block");
    return json_object_get(json_object_get(c, "configuration"), "compressor");
}

static void test_n5_axes_are_reversed(void **state)
{
    (void)state;
    struct sm_array_meta *m = parse_ok(attrs("uint16", "{\"type\": \"raw\"}", ""));
    assert_int_equal(m->zarr_format, 0);
    assert_int_equal(m->ndim, 3);
    assert_int_equal(m->shape[0], 10);
    assert_int_equal(m->shape[1], 20);
    assert_int_equal(m->shape[2], 30);
    assert_int_equal(m->chunk_shape[0], 4);
    assert_int_equal(m->chunk_shape[1], 8);
    assert_int_equal(m->chunk_shape[2], 16);
    assert_int_equal(m->dtype, SM_DT_UINT16);
    assert_true(json_is_null(compressor(m)));
    assert_int_equal(sm_codec_chain_repr(m->chain)->len, 4 * 8 * 16 * 2);
    for (size_t i = 0; i < 8; i++) {
        assert_int_equal(m->fill[i], 0);
    }
    sm_meta_free(m);
}

static void test_n5_block_keys_list_the_fastest_axis_first(void **state)
{
    (void)state;
    struct sm_array_meta *m = parse_ok(attrs("int8", "{\"type\": \"raw\"}", ""));
    const uint64_t idx[3] = {2, 1, 0}; /* z, y, x */
    char key[64];
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_meta_chunk_key(m, idx, key, sizeof(key), &err), &err);
    assert_string_equal(key, "0/1/2");
    const uint64_t idx2[3] = {0, 3, 12};
    assert_ok(sm_meta_chunk_key(m, idx2, key, sizeof(key), &err), &err);
    assert_string_equal(key, "12/3/0");
    json_t *d = sm_meta_describe(m);
    assert_string_equal(json_string_value(json_object_get(d, "format")), "n5");
    assert_true(json_is_null(json_object_get(d, "zarr_format")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(d, "chunk_key_encoding"), "name")), "n5");
    json_decref(d);
    sm_meta_free(m);
}

static void test_n5_every_data_type(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        enum sm_dtype dt;
    } types[] = {{"uint8", SM_DT_UINT8},    {"uint16", SM_DT_UINT16}, {"uint32", SM_DT_UINT32},
                 {"uint64", SM_DT_UINT64},  {"int8", SM_DT_INT8},     {"int16", SM_DT_INT16},
                 {"int32", SM_DT_INT32},    {"int64", SM_DT_INT64},   {"float32", SM_DT_FLOAT32},
                 {"float64", SM_DT_FLOAT64}};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        struct sm_array_meta *m = parse_ok(attrs(types[i].name, "{\"type\": \"raw\"}", ""));
        assert_int_equal(m->dtype, types[i].dt);
        sm_meta_free(m);
    }
    expect_error(attrs("object", "{\"type\": \"raw\"}", ""), "unsupported N5 dataType 'object'");
    expect_error(attrs("bool", "{\"type\": \"raw\"}", ""), "unsupported N5 dataType 'bool'");
    expect_error(attrs("<u2", "{\"type\": \"raw\"}", ""), "unsupported N5 dataType '<u2'");
}

static void test_n5_compressions_are_converted(void **state)
{
    (void)state;
    struct sm_array_meta *m =
        parse_ok(attrs("int16", "{\"type\": \"gzip\", \"level\": -1, \"useZlib\": false}", ""));
    const json_t *c = compressor(m);
    assert_string_equal(json_string_value(json_object_get(c, "name")), "gzip");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(c, "configuration"), "level")), 6);
    sm_meta_free(m);
    m = parse_ok(attrs("int16", "{\"type\": \"gzip\", \"level\": 3, \"useZlib\": true}", ""));
    c = compressor(m);
    assert_string_equal(json_string_value(json_object_get(c, "name")), "zlib");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(c, "configuration"), "level")), 3);
    sm_meta_free(m);
    m = parse_ok(attrs("float32", "{\"type\": \"zstd\", \"level\": 5, \"nbWorkers\": 0}", ""));
    assert_string_equal(json_string_value(json_object_get(compressor(m), "name")), "zstd");
    sm_meta_free(m);
    m = parse_ok(attrs("float64",
                       "{\"type\": \"blosc\", \"cname\": \"zstd\", \"clevel\": 3, \"shuffle\": 2, "
                       "\"blocksize\": 0, \"nthreads\": 1}",
                       ""));
    const json_t *cfg = json_object_get(compressor(m), "configuration");
    assert_string_equal(json_string_value(json_object_get(cfg, "cname")), "zstd");
    assert_string_equal(json_string_value(json_object_get(cfg, "shuffle")), "bitshuffle");
    assert_int_equal(json_integer_value(json_object_get(cfg, "typesize")), 8);
    assert_int_equal(json_integer_value(json_object_get(cfg, "clevel")), 3);
    sm_meta_free(m);
    /* N5 0.x: "compressionType" names the compression; no member at all means raw. */
    m = parse_ok("{\"dimensions\": [5], \"blockSize\": [2], \"dataType\": \"uint8\", "
                 "\"compressionType\": \"gzip\"}");
    assert_string_equal(json_string_value(json_object_get(compressor(m), "name")), "gzip");
    sm_meta_free(m);
    m = parse_ok("{\"dimensions\": [5], \"blockSize\": [2], \"dataType\": \"uint8\"}");
    assert_true(json_is_null(compressor(m)));
    sm_meta_free(m);
}

static void test_n5_unsupported_compressions_are_named(void **state)
{
    (void)state;
    expect_error(attrs("uint8", "{\"type\": \"lz4\", \"blockSize\": 65536}", ""),
                 "unsupported N5 compression 'lz4' (supported: raw, gzip, zstd, blosc");
    expect_error(attrs("uint8", "{\"level\": 1}", ""),
                 "field 'compression' must be an object with a string 'type'");
    expect_error(attrs("uint8", "\"gzip\"", ""),
                 "field 'compression' must be an object with a string 'type'");
    expect_error(attrs("uint8", "{\"type\": \"blosc\", \"shuffle\": 7}", ""),
                 "'shuffle' is 7 (expected 0, 1 or 2)");
    expect_error(attrs("uint8", "{\"type\": \"blosc\", \"cname\": \"nope\"}", ""),
                 "compressor 'nope' is not available");
    expect_error("{\"dimensions\": [5], \"blockSize\": [2], \"dataType\": \"uint8\", "
                 "\"compressionType\": 3}",
                 "field 'compressionType' must be a string");
}

static void test_n5_groups_and_attributes(void **state)
{
    (void)state;
    struct sm_err err;
    enum sm_node_kind kind = SM_NODE_ARRAY;
    struct sm_array_meta *m = (struct sm_array_meta *)1;
    json_t *g = NULL;
    assert_ok(parse("{\"n5\": \"2.0.0\", \"owner\": \"lab\"}", &kind, &m, &g, &err), &err);
    assert_int_equal(kind, SM_NODE_GROUP);
    assert_null(m);
    assert_non_null(g);
    assert_null(json_object_get(g, "n5"));
    assert_string_equal(json_string_value(json_object_get(g, "owner")), "lab");
    json_decref(g);
    m = parse_ok(attrs("uint8", "{\"type\": \"raw\"}", ", \"pixelResolution\": [1, 2, 3]"));
    assert_int_equal(json_object_size(m->attributes), 1);
    assert_true(json_is_array(json_object_get(m->attributes, "pixelResolution")));
    sm_meta_free(m);
}

static void test_n5_malformed_fields_are_named(void **state)
{
    (void)state;
    expect_error("{\"dimensions\": [5, 6], \"dataType\": \"uint8\"}", "missing field 'blockSize'");
    expect_error("{\"blockSize\": [5], \"dataType\": \"uint8\"}", "missing field 'dimensions'");
    expect_error("{\"dimensions\": [5], \"blockSize\": [5]}", "missing field 'dataType'");
    expect_error("{\"dimensions\": [5, 6], \"blockSize\": [5], \"dataType\": \"uint8\"}",
                 "field 'blockSize' has 1 dimensions but 'dimensions' has 2");
    expect_error("{\"dimensions\": [], \"blockSize\": [], \"dataType\": \"uint8\"}",
                 "field 'dimensions' is empty");
    expect_error("{\"dimensions\": [5], \"blockSize\": [0], \"dataType\": \"uint8\"}",
                 "blockSize[0] = 0 must be at least 1");
    expect_error("{\"dimensions\": [-5], \"blockSize\": [1], \"dataType\": \"uint8\"}",
                 "dimensions[0] = -5 must be non-negative");
    expect_error("{\"dimensions\": [5], \"blockSize\": [4294967296], \"dataType\": \"uint8\"}",
                 "blockSize[0] = 4294967296 does not fit a block header");
    expect_error("{\"dimensions\": [5], \"blockSize\": [2], \"dataType\": 7}",
                 "field 'dataType' must be a string");
    expect_error("{\"dimensions\": [5", "malformed JSON at line 1");
    expect_error("[1, 2]", "is not a JSON object");
    /* A block of more bytes than size_t holds. */
    expect_error("{\"dimensions\": [5, 5, 5], \"blockSize\": [4294967295, 4294967295, 4294967295], "
                 "\"dataType\": \"float64\"}",
                 "overflows");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_n5_axes_are_reversed),
        cmocka_unit_test(test_n5_block_keys_list_the_fastest_axis_first),
        cmocka_unit_test(test_n5_every_data_type),
        cmocka_unit_test(test_n5_compressions_are_converted),
        cmocka_unit_test(test_n5_unsupported_compressions_are_named),
        cmocka_unit_test(test_n5_groups_and_attributes),
        cmocka_unit_test(test_n5_malformed_fields_are_named),
    };
    return cmocka_run_group_tests_name("format_n5", tests, NULL, NULL);
}
