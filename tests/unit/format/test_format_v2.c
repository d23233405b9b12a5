/* Unit tests for engine/format/format_v2.c: .zarray (+ .zattrs) to metadata with a v3 codec
 * chain: every dtype and byte order, order F as a transpose, each compressor converted, unknown
 * compressors and any filter refused by name, bare NaN/Infinity fill tokens, null fill values,
 * dimension separators, and the named error of each malformed field. */
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

/* A .zarray with shape [10, 20, 30], chunks [5, 10, 15] and the given parts. `extra` is added
 * at the end (starting with a comma) or replaces nothing when "". */
static char doc[2048];

static const char *zarray(const char *dtype, const char *order, const char *compressor,
                          const char *fill, const char *filters, const char *extra)
{
    snprintf(doc, sizeof(doc),
             "{\"zarr_format\": 2, \"shape\": [10, 20, 30], \"chunks\": [5, 10, 15], "
             "\"dtype\": \"%s\", \"order\": \"%s\", \"compressor\": %s, \"fill_value\": %s, "
             "\"filters\": %s%s}",
             dtype, order, compressor, fill, filters, extra);
    return doc;
}

static sm_status parse(const char *zarray_doc, const char *zattrs, struct sm_array_meta **m,
                       struct sm_err *err)
{
    sm_err_clear(err);
    return sm_meta_parse_v2(zarray_doc, strlen(zarray_doc), zattrs,
                            zattrs != NULL ? strlen(zattrs) : 0, m, err);
}

static struct sm_array_meta *parse_ok(const char *zarray_doc)
{
    struct sm_err err;
    struct sm_array_meta *m = NULL;
    assert_ok(parse(zarray_doc, NULL, &m, &err), &err);
    assert_non_null(m);
    return m;
}

static void expect_error(const char *zarray_doc, const char *what)
{
    struct sm_err err;
    struct sm_array_meta *m = (struct sm_array_meta *)1;
    assert_status(parse(zarray_doc, NULL, &m, &err), SM_E_DATA, &err);
    assert_null(m);
    assert_contains(err.what, what);
}

static void expect_codecs(const struct sm_array_meta *m, const char *expected)
{
    json_error_t je;
    json_t *want = json_loads(expected, 0, &je);
    assert_non_null(want);
    if (!json_equal(want, m->codecs)) {
        char *got = json_dumps(m->codecs, JSON_COMPACT);
        fail_msg("codecs %s, expected %s", got, expected);
    }
    json_decref(want);
}

static void test_v2_basic_array_fields(void **state)
{
    (void)state;
    struct sm_array_meta *m = parse_ok(zarray("<u2", "C", "null", "7", "null", ""));
    assert_int_equal(m->zarr_format, 2);
    assert_int_equal(m->ndim, 3);
    assert_int_equal(m->shape[0], 10);
    assert_int_equal(m->shape[2], 30);
    assert_int_equal(m->chunk_shape[0], 5);
    assert_int_equal(m->chunk_shape[2], 15);
    assert_int_equal(m->dtype, SM_DT_UINT16);
    assert_int_equal(m->fill[0], 7);
    assert_false(m->fill_is_null);
    assert_string_equal(m->key_prefix, "");
    assert_int_equal(m->key_separator, '.');
    assert_int_equal(m->inner_ndim, 0);
    assert_null(m->dimension_names);
    assert_true(json_is_object(m->attributes));
    assert_int_equal(json_object_size(m->attributes), 0);
    assert_non_null(m->chain);
    expect_codecs(m, "[{\"name\": \"bytes\", \"configuration\": {\"endian\": \"little\"}}]");
    sm_meta_free(m);
}

static void test_v2_every_dtype_and_byte_order_sets_bytes_endian(void **state)
{
    (void)state;
    static const struct {
        const char *typestr;
        enum sm_dtype dt;
        const char *bytes;
    } cases[] = {
        {"|b1", SM_DT_BOOL, "{}"},
        {"|i1", SM_DT_INT8, "{}"},
        {"|u1", SM_DT_UINT8, "{}"},
        {">u1", SM_DT_UINT8, "{}"},
        {"<i1", SM_DT_INT8, "{}"},
        {"<i2", SM_DT_INT16, "{\"endian\": \"little\"}"},
        {">i2", SM_DT_INT16, "{\"endian\": \"big\"}"},
        {"<i4", SM_DT_INT32, "{\"endian\": \"little\"}"},
        {">i8", SM_DT_INT64, "{\"endian\": \"big\"}"},
        {"<u4", SM_DT_UINT32, "{\"endian\": \"little\"}"},
        {">u8", SM_DT_UINT64, "{\"endian\": \"big\"}"},
        {"<f4", SM_DT_FLOAT32, "{\"endian\": \"little\"}"},
        {">f4", SM_DT_FLOAT32, "{\"endian\": \"big\"}"},
        {">f8", SM_DT_FLOAT64, "{\"endian\": \"big\"}"},
        {"<f8", SM_DT_FLOAT64, "{\"endian\": \"little\"}"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const bool is_bool = cases[i].dt == SM_DT_BOOL;
        struct sm_array_meta *m =
            parse_ok(zarray(cases[i].typestr, "C", "null", is_bool ? "false" : "0", "null", ""));
        assert_int_equal(m->dtype, cases[i].dt);
        char expected[256];
        snprintf(expected, sizeof(expected), "[{\"name\": \"bytes\", \"configuration\": %s}]",
                 cases[i].bytes);
        expect_codecs(m, expected);
        sm_meta_free(m);
    }
}

static void test_v2_order_f_adds_reversing_transpose(void **state)
{
    (void)state;
    struct sm_array_meta *m = parse_ok(zarray("<i2", "F", "null", "0", "null", ""));
    expect_codecs(m, "[{\"name\": \"transpose\", \"configuration\": {\"order\": [2, 1, 0]}},"
                     " {\"name\": \"bytes\", \"configuration\": {\"endian\": \"little\"}}]");
    sm_meta_free(m);
}

static void test_v2_order_f_on_one_dimension_needs_no_transpose(void **state)
{
    (void)state;
    const char *d = "{\"zarr_format\": 2, \"shape\": [100], \"chunks\": [10], \"dtype\": \"|u1\", "
                    "\"order\": \"F\", \"compressor\": null, \"fill_value\": 0, \"filters\": []}";
    struct sm_array_meta *m = parse_ok(d);
    expect_codecs(m, "[{\"name\": \"bytes\", \"configuration\": {}}]");
    sm_meta_free(m);
}

static void test_v2_gzip_and_zlib_keep_their_level(void **state)
{
    (void)state;
    struct sm_array_meta *m =
        parse_ok(zarray("<u2", "C", "{\"id\": \"gzip\", \"level\": 6}", "0", "null", ""));
    expect_codecs(m, "[{\"name\": \"bytes\", \"configuration\": {\"endian\": \"little\"}},"
                     " {\"name\": \"gzip\", \"configuration\": {\"level\": 6}}]");
    sm_meta_free(m);
    m = parse_ok(zarray("<u2", "C", "{\"id\": \"zlib\", \"level\": 1}", "0", "null", ""));
    expect_codecs(m, "[{\"name\": \"bytes\", \"configuration\": {\"endian\": \"little\"}},"
                     " {\"name\": \"zlib\", \"configuration\": {\"level\": 1}}]");
    sm_meta_free(m);
}

static void test_v2_zstd_carries_level_and_checksum(void **state)
{
    (void)state;
    struct sm_array_meta *m =
        parse_ok(zarray("|u1", "C", "{\"id\": \"zstd\", \"level\": 3}", "0", "null", ""));
    expect_codecs(m, "[{\"name\": \"bytes\", \"configuration\": {}},"
                     " {\"name\": \"zstd\", \"configuration\": {\"level\": 3, \"checksum\": "
                     "false}}]");
    sm_meta_free(m);
    m = parse_ok(zarray("|u1", "C", "{\"id\": \"zstd\", \"level\": 5, \"checksum\": true}", "0",
                        "null", ""));
    expect_codecs(m, "[{\"name\": \"bytes\", \"configuration\": {}},"
                     " {\"name\": \"zstd\", \"configuration\": {\"level\": 5, \"checksum\": "
                     "true}}]");
    sm_meta_free(m);
}

static void test_v2_blosc_maps_shuffle_and_typesize(void **state)
{
    (void)state;
    static const struct {
        const char *dtype;
        int shuffle;
        const char *expected;
        int typesize;
    } cases[] = {
        {"<f4", 0, "noshuffle", 4}, {"<f4", 1, "shuffle", 4},     {"<f4", 2, "bitshuffle", 4},
        {"<f4", -1, "shuffle", 4},  {"|u1", -1, "bitshuffle", 1}, {">i8", 1, "shuffle", 8},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char comp[256], expected[512];
        snprintf(comp, sizeof(comp),
                 "{\"id\": \"blosc\", \"cname\": \"zstd\", \"clevel\": 5, \"shuffle\": %d, "
                 "\"blocksize\": 0}",
                 cases[i].shuffle);
        struct sm_array_meta *m = parse_ok(zarray(cases[i].dtype, "C", comp, "0", "null", ""));
        const json_t *blosc = json_array_get(m->codecs, 1);
        snprintf(expected, sizeof(expected),
                 "{\"name\": \"blosc\", \"configuration\": {\"cname\": \"zstd\", \"clevel\": 5, "
                 "\"shuffle\": \"%s\", \"typesize\": %d, \"blocksize\": 0}}",
                 cases[i].expected, cases[i].typesize);
        json_t *want = json_loads(expected, 0, NULL);
        assert_non_null(want);
        assert_true(json_equal(want, blosc));
        json_decref(want);
        sm_meta_free(m);
    }
}

static void test_v2_blosc_rejects_unknown_shuffle(void **state)
{
    (void)state;
    expect_error(zarray("<f4", "C",
                        "{\"id\": \"blosc\", \"cname\": \"lz4\", \"clevel\": 5, \"shuffle\": 3, "
                        "\"blocksize\": 0}",
                        "0", "null", ""),
                 "option 'shuffle' of v2 compressor 'blosc' is 3");
}

static void test_v2_unknown_compressor_is_named(void **state)
{
    (void)state;
    expect_error(zarray("<u2", "C", "{\"id\": \"lz5\", \"acceleration\": 1}", "0", "null", ""),
                 "unsupported v2 compressor 'lz5'");
    expect_error(zarray("<u2", "C", "{\"level\": 1}", "0", "null", ""),
                 "field 'compressor' has no string 'id'");
    expect_error(zarray("<u2", "C", "\"gzip\"", "0", "null", ""),
                 "field 'compressor' must be an object or null");
}

static void test_v2_compressor_options_are_checked(void **state)
{
    (void)state;
    expect_error(
        zarray("<u2", "C", "{\"id\": \"gzip\", \"level\": 1, \"wbits\": 15}", "0", "null", ""),
        "unsupported option 'wbits' of v2 compressor 'gzip'");
    expect_error(zarray("<u2", "C", "{\"id\": \"gzip\", \"level\": \"9\"}", "0", "null", ""),
                 "option 'level' of v2 compressor 'gzip' must be an integer");
}

static void test_v2_any_filter_is_refused_by_id(void **state)
{
    (void)state;
    expect_error(zarray("<u2", "C", "null", "0", "[{\"id\": \"delta\", \"dtype\": \"<u2\"}]", ""),
                 "unsupported v2 filter 'delta'");
    expect_error(zarray("<u2", "C", "null", "0", "{}", ""),
                 "field 'filters' must be a list or null");
    struct sm_array_meta *m = parse_ok(zarray("<u2", "C", "null", "0", "[]", ""));
    sm_meta_free(m);
}

static void test_v2_bare_nan_and_infinity_fill_tokens(void **state)
{
    (void)state;
    static const struct {
        const char *fill;
        uint32_t bits;
    } cases[] = {
        {"NaN", 0x7fc00000u},     {"Infinity", 0x7f800000u},      {"-Infinity", 0xff800000u},
        {"\"NaN\"", 0x7fc00000u}, {"\"-Infinity\"", 0xff800000u},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sm_array_meta *m = parse_ok(zarray("<f4", "C", "null", cases[i].fill, "null", ""));
        uint32_t bits;
        memcpy(&bits, m->fill, 4);
        assert_int_equal(bits, cases[i].bits);
        sm_meta_free(m);
    }
}

static void test_v2_null_fill_reads_as_zero(void **state)
{
    (void)state;
    struct sm_array_meta *m = parse_ok(zarray("<f8", "C", "null", "null", "null", ""));
    assert_true(m->fill_is_null);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(m->fill[i], 0);
    }
    sm_meta_free(m);
}

static void test_v2_dimension_separators(void **state)
{
    (void)state;
    struct sm_array_meta *m =
        parse_ok(zarray("<u2", "C", "null", "0", "null", ", \"dimension_separator\": \"/\""));
    assert_int_equal(m->key_separator, '/');
    assert_string_equal(m->key_prefix, "");
    sm_meta_free(m);
    m = parse_ok(zarray("<u2", "C", "null", "0", "null", ", \"dimension_separator\": \".\""));
    assert_int_equal(m->key_separator, '.');
    sm_meta_free(m);
    expect_error(zarray("<u2", "C", "null", "0", "null", ", \"dimension_separator\": \"_\""),
                 "field 'dimension_separator' must be \".\" or \"/\"");
}

static void test_v2_zattrs_become_attributes(void **state)
{
    (void)state;
    struct sm_err err;
    struct sm_array_meta *m = NULL;
    assert_ok(parse(zarray("<u2", "C", "null", "0", "null", ""),
                    "{\"units\": \"HU\", \"scale\": NaN, \"big\": 18446744073709551615}", &m, &err),
              &err);
    assert_string_equal(json_string_value(json_object_get(m->attributes, "units")), "HU");
    assert_string_equal(json_string_value(json_object_get(m->attributes, "scale")), "NaN");
    assert_true(json_is_real(json_object_get(m->attributes, "big")));
    sm_meta_free(m);
}

static void test_v2_malformed_zattrs_is_named(void **state)
{
    (void)state;
    struct sm_err err;
    struct sm_array_meta *m = NULL;
    assert_status(parse(zarray("<u2", "C", "null", "0", "null", ""), "{\"a\": }", &m, &err),
                  SM_E_DATA, &err);
    assert_null(m);
    assert_contains(err.what, ".zattrs: malformed JSON at line 1");
    assert_status(parse(zarray("<u2", "C", "null", "0", "null", ""), "[]", &m, &err), SM_E_DATA,
                  &err);
    assert_contains(err.what, ".zattrs: metadata document is not a JSON object");
}

static void test_v2_missing_and_mistyped_fields_are_named(void **state)
{
    (void)state;
    expect_error("{\"shape\": [1], \"chunks\": [1]}", "missing field 'zarr_format'");
    expect_error("{\"zarr_format\": 3}", "unsupported zarr_format 3 (expected 2)");
    expect_error("{\"zarr_format\": \"2\"}", "field 'zarr_format' must be an integer");
    expect_error("{\"zarr_format\": 2, \"chunks\": [1]}", "missing field 'shape'");
    expect_error("{\"zarr_format\": 2, \"shape\": [1]}", "missing field 'chunks'");
    expect_error("{\"zarr_format\": 2, \"shape\": [4], \"chunks\": [2], \"dtype\": \"<u2\"}",
                 "missing field 'fill_value'");
    expect_error("{\"zarr_format\": 2, \"shape\": [4], \"chunks\": [2], \"dtype\": \"<u2\", "
                 "\"fill_value\": 0, \"order\": \"C\", \"filters\": null}",
                 "missing field 'compressor'");
    expect_error(zarray("<u2", "X", "null", "0", "null", ""),
                 "field 'order' must be \"C\" or \"F\"");
    expect_error(zarray("<U8", "C", "null", "0", "null", ""), "unsupported v2 dtype '<U8'");
    expect_error(zarray("<u2", "C", "null", "-1", "null", ""),
                 "fill_value -1 is out of range for uint16");
}

static void test_v2_shapes_and_chunks_are_validated(void **state)
{
    (void)state;
    expect_error("{\"zarr_format\": 2, \"shape\": [4, -1], \"chunks\": [2, 2]}",
                 "shape[1] = -1 must be non-negative");
    expect_error("{\"zarr_format\": 2, \"shape\": [4, 4], \"chunks\": [2, 0]}",
                 "chunks[1] = 0 must be at least 1");
    expect_error("{\"zarr_format\": 2, \"shape\": [4, 4], \"chunks\": [2]}",
                 "field 'chunks' has 1 dimensions but 'shape' has 2");
    expect_error("{\"zarr_format\": 2, \"shape\": [4.0], \"chunks\": [2]}",
                 "shape[0] must be an integer");
    expect_error("{\"zarr_format\": 2, \"shape\": 4, \"chunks\": [2]}",
                 "field 'shape' must be an array of integers");
}

static void test_v2_zero_length_dimension_is_accepted(void **state)
{
    (void)state;
    const char *d =
        "{\"zarr_format\": 2, \"shape\": [0, 8], \"chunks\": [4, 4], \"dtype\": \"<i4\", "
        "\"order\": \"C\", \"compressor\": null, \"fill_value\": 0, \"filters\": null}";
    struct sm_array_meta *m = parse_ok(d);
    assert_int_equal(m->shape[0], 0);
    sm_meta_free(m);
}

static void test_v2_chunk_byte_size_overflow_is_refused(void **state)
{
    (void)state;
    const char *d = "{\"zarr_format\": 2, \"shape\": [10, 10, 10], \"chunks\": [4294967296, "
                    "4294967296, 2], \"dtype\": \"<f8\", \"order\": \"C\", \"compressor\": null, "
                    "\"fill_value\": 0, \"filters\": null}";
    expect_error(d, "the byte size of a float64 chunk overflows");
    /* 2^63 elements fit 64 bits, their 2^66 bytes do not */
    d = "{\"zarr_format\": 2, \"shape\": [2097152, 2097152, 2097152], \"chunks\": [1, 1, 1], "
        "\"dtype\": \"<f8\", \"order\": \"C\", \"compressor\": null, \"fill_value\": 0, "
        "\"filters\": null}";
    expect_error(d, "shape: the byte size of a float64 array overflows 64 bits");
}

static void test_v2_zero_dimensional_array(void **state)
{
    (void)state;
    const char *d = "{\"zarr_format\": 2, \"shape\": [], \"chunks\": [], \"dtype\": \"<f8\", "
                    "\"order\": \"C\", \"compressor\": null, \"fill_value\": 1.5, \"filters\": "
                    "null}";
    struct sm_array_meta *m = parse_ok(d);
    assert_int_equal(m->ndim, 0);
    sm_meta_free(m);
}

static void test_v2_allocation_failures_are_reported_and_leak_nothing(void **state)
{
    (void)state;
    /* Rewritten tokens in both documents, a transpose and a compressor: every allocation path. */
    const char *d = zarray("<f4", "F", "{\"id\": \"gzip\", \"level\": 1}", "NaN", "null", "");
    const uint64_t before = sm_alloc_current();
    bool succeeded = false;
    for (uint64_t n = 1; n < 256 && !succeeded; n++) {
        struct sm_err err;
        struct sm_array_meta *m = NULL;
        sm_alloc_fail_at(n);
        sm_status st = parse(d, "{\"a\": -Infinity}", &m, &err);
        sm_alloc_fail_at(0);
        if (st == SM_OK) {
            succeeded = true;
            sm_meta_free(m);
        } else {
            assert_status(st, SM_E_NOMEM, &err);
            assert_null(m);
        }
        assert_int_equal(sm_alloc_current(), before);
    }
    assert_true(succeeded);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v2_basic_array_fields),
        cmocka_unit_test(test_v2_every_dtype_and_byte_order_sets_bytes_endian),
        cmocka_unit_test(test_v2_order_f_adds_reversing_transpose),
        cmocka_unit_test(test_v2_order_f_on_one_dimension_needs_no_transpose),
        cmocka_unit_test(test_v2_gzip_and_zlib_keep_their_level),
        cmocka_unit_test(test_v2_zstd_carries_level_and_checksum),
        cmocka_unit_test(test_v2_blosc_maps_shuffle_and_typesize),
        cmocka_unit_test(test_v2_blosc_rejects_unknown_shuffle),
        cmocka_unit_test(test_v2_unknown_compressor_is_named),
        cmocka_unit_test(test_v2_compressor_options_are_checked),
        cmocka_unit_test(test_v2_any_filter_is_refused_by_id),
        cmocka_unit_test(test_v2_bare_nan_and_infinity_fill_tokens),
        cmocka_unit_test(test_v2_null_fill_reads_as_zero),
        cmocka_unit_test(test_v2_dimension_separators),
        cmocka_unit_test(test_v2_zattrs_become_attributes),
        cmocka_unit_test(test_v2_malformed_zattrs_is_named),
        cmocka_unit_test(test_v2_missing_and_mistyped_fields_are_named),
        cmocka_unit_test(test_v2_shapes_and_chunks_are_validated),
        cmocka_unit_test(test_v2_zero_length_dimension_is_accepted),
        cmocka_unit_test(test_v2_chunk_byte_size_overflow_is_refused),
        cmocka_unit_test(test_v2_zero_dimensional_array),
        cmocka_unit_test(test_v2_allocation_failures_are_reported_and_leak_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
