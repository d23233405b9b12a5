/* Unit tests for sm_array_fetch_meta / sm_array_open_docs (engine/array/array_open.c): the
 * documents fetched by one process open, in another store without any metadata request, to the
 * same array as sm_array_open (v3, v2 with and without .zattrs); a group and a missing node fail
 * as sm_array_open does. This is what ranks rely on (docs/internals/ranks.md). */
#include "shardmill/sm_config.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "array_int.h"
#include "sm_test.h"
#include "sm_test_zarr.h"

static const char v3_array[] =
    "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[10,7],\"data_type\":\"uint16\","
    "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[4,3]}},"
    "\"chunk_key_encoding\":{\"name\":\"default\",\"configuration\":{\"separator\":\"/\"}},"
    "\"fill_value\":4242,\"codecs\":[{\"name\":\"bytes\",\"configuration\":{\"endian\":"
    "\"little\"}}],\"attributes\":{\"units\":\"HU\"}}";

static const char v2_array[] =
    "{\"zarr_format\":2,\"shape\":[5,6,7],\"chunks\":[2,3,4],\"dtype\":\"<i4\","
    "\"compressor\":null,\"fill_value\":-1,\"order\":\"C\",\"filters\":null,"
    "\"dimension_separator\":\".\"}";

/* Fetches in `src`, opens in an empty store `dst`: same metadata as sm_array_open in src. */
static void roundtrip(struct sm_store *src, const char *path, uint64_t meta_requests)
{
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_array_opts o = SM_ARRAY_OPTS_DEFAULTS;
    struct sm_meta_docs d = SM_META_DOCS_INIT;
    assert_int_equal(sm_array_fetch_meta(src, path, &o, &d, &err), SM_OK);
    assert_int_equal(sm_store_requests(src, SM_IO_META), meta_requests);
    struct sm_store *dst = NULL;
    assert_int_equal(sm_store_mem_new(&dst, &err), SM_OK);
    struct sm_array *a = NULL, *b = NULL;
    assert_int_equal(sm_array_open_docs(dst, path, &o, &d, &a, &err), SM_OK);
    assert_int_equal(sm_store_requests(dst, SM_IO_META), 0);
    assert_int_equal(sm_array_open(src, path, &o, &b, &err), SM_OK);
    const struct sm_array_meta *ma = sm_array_meta(a), *mb = sm_array_meta(b);
    assert_int_equal(ma->zarr_format, mb->zarr_format);
    assert_int_equal(ma->ndim, mb->ndim);
    assert_memory_equal(ma->shape, mb->shape, ma->ndim * sizeof(uint64_t));
    assert_memory_equal(ma->chunk_shape, mb->chunk_shape, ma->ndim * sizeof(uint64_t));
    assert_int_equal(ma->dtype, mb->dtype);
    assert_memory_equal(ma->fill, mb->fill, sizeof(ma->fill));
    assert_true(json_equal(ma->attributes, mb->attributes));
    sm_array_close(a);
    sm_array_close(b);
    sm_meta_docs_free(&d);
    sm_store_close(dst);
}

static void test_v3_docs_open_elsewhere_without_requests(void **state)
{
    (void)state;
    struct sm_err err;
    struct sm_store *s = NULL;
    assert_int_equal(sm_store_mem_new(&s, &err), SM_OK);
    sm_test_put_str(s, "a/zarr.json", v3_array);
    roundtrip(s, "a", 1);
    sm_store_close(s);
}

static void test_v2_docs_with_and_without_zattrs(void **state)
{
    (void)state;
    struct sm_err err;
    struct sm_store *s = NULL;
    assert_int_equal(sm_store_mem_new(&s, &err), SM_OK);
    sm_test_put_str(s, "v/.zarray", v2_array);
    sm_test_put_str(s, "v/.zattrs", "{\"spacing\":[1.5,0.5,0.5]}");
    sm_test_put_str(s, "w/.zarray", v2_array);
    roundtrip(s, "v", 3); /* zarr.json (absent), .zarray, .zattrs */
    struct sm_meta_docs d = SM_META_DOCS_INIT;
    const struct sm_array_opts o = SM_ARRAY_OPTS_DEFAULTS;
    assert_int_equal(sm_array_fetch_meta(s, "w", &o, &d, &err), SM_OK);
    assert_int_equal(d.kind, SM_META_DOCS_V2_ARRAY);
    assert_false(d.have_attrs);
    sm_meta_docs_free(&d);
    sm_store_close(s);
}

static void test_group_and_missing_node_fail_like_open(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_store *s = NULL;
    assert_int_equal(sm_store_mem_new(&s, &err), SM_OK);
    sm_test_put_str(s, "g/.zgroup", "{\"zarr_format\":2}");
    const struct sm_array_opts o = SM_ARRAY_OPTS_DEFAULTS;
    struct sm_meta_docs d = SM_META_DOCS_INIT;
    assert_int_equal(sm_array_fetch_meta(s, "g", &o, &d, &err), SM_OK);
    assert_int_equal(d.kind, SM_META_DOCS_V2_GROUP);
    struct sm_array *a = NULL;
    assert_int_equal(sm_array_open_docs(s, "g", &o, &d, &a, &err), SM_E_DATA);
    assert_null(a);
    assert_non_null(strstr(err.what, "is a group"));
    sm_meta_docs_free(&d);
    sm_err_clear(&err);
    assert_int_equal(sm_array_fetch_meta(s, "nothing", &o, &d, &err), SM_E_DATA);
    assert_int_equal(d.kind, SM_META_DOCS_NONE);
    assert_non_null(strstr(err.what, "no Zarr metadata"));
    sm_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v3_docs_open_elsewhere_without_requests),
        cmocka_unit_test(test_v2_docs_with_and_without_zattrs),
        cmocka_unit_test(test_group_and_missing_node_fail_like_open),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
