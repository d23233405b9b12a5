/* Unit tests for engine/array/array_open.c: v3 (zarr.json, one metadata request) and v2 (.zarray +
 * .zattrs) arrays open to the same metadata; a group is SM_E_DATA "is a group" naming the path;
 * no metadata is SM_E_DATA naming the path; sm_node_describe lists a group's members. Metadata is
 * written by hand into a mem store (and a file store for describe). */
#include "shardmill/sm_config.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "array_int.h"
#include "shardmill/alloc.h"
#include "sm_test.h"
#include "sm_test_zarr.h"

static const char v3_array[] =
    "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[10,7],\"data_type\":\"uint16\","
    "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[4,3]}},"
    "\"chunk_key_encoding\":{\"name\":\"default\",\"configuration\":{\"separator\":\"/\"}},"
    "\"fill_value\":4242,\"codecs\":[{\"name\":\"bytes\",\"configuration\":{\"endian\":"
    "\"little\"}}],\"attributes\":{\"units\":\"HU\"},\"dimension_names\":[\"y\",\"x\"]}";

static const char v2_array[] =
    "{\"zarr_format\":2,\"shape\":[5,6,7],\"chunks\":[2,3,4],\"dtype\":\"<i4\","
    "\"compressor\":null,\"fill_value\":-1,\"order\":\"C\",\"filters\":null,"
    "\"dimension_separator\":\".\"}";

static const char v3_group[] =
    "{\"zarr_format\":3,\"node_type\":\"group\",\"attributes\":{\"title\":\"scan\"}}";

struct fx {
    struct sm_store *s;
    struct sm_array *a;
    struct sm_err err;
    struct sm_array_opts opts;
    char dir[512];
};

static int setup(void **state)
{
    struct fx *f = test_calloc(1, sizeof(*f));
    sm_err_clear(&f->err);
    const struct sm_array_opts defaults = SM_ARRAY_OPTS_DEFAULTS;
    f->opts = defaults;
    if (sm_store_mem_new(&f->s, &f->err) != SM_OK) {
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    sm_array_close(f->a);
    sm_store_close(f->s);
    if (f->dir[0] != '\0') {
        sm_test_rm_rf(f->dir);
    }
    test_free(f);
    return 0;
}

static void test_open_v3_array_reads_metadata_once(void **state)
{
    struct fx *f = *state;
    sm_test_put_str(f->s, "zarr.json", v3_array);
    assert_ok(sm_array_open(f->s, "", &f->opts, &f->a, &f->err), &f->err);
    const struct sm_array_meta *m = sm_array_meta(f->a);
    assert_int_equal(m->zarr_format, 3);
    assert_int_equal(m->ndim, 2);
    assert_int_equal(m->shape[0], 10);
    assert_int_equal(m->shape[1], 7);
    assert_int_equal(m->chunk_shape[0], 4);
    assert_int_equal(m->chunk_shape[1], 3);
    assert_int_equal(m->dtype, SM_DT_UINT16);
    assert_int_equal(m->fill[0] | (m->fill[1] << 8), 4242);
    assert_string_equal(json_string_value(json_object_get(m->attributes, "units")), "HU");
    assert_ptr_equal(sm_array_store(f->a), f->s);
    assert_int_equal(sm_store_requests(f->s, SM_IO_META), 1);
    assert_int_equal(sm_store_requests(f->s, SM_IO_PAYLOAD), 0);
    struct sm_array_stats st;
    sm_array_stats(f->a, &st);
    assert_int_equal(st.chunks_read + st.chunks_missing + st.index_cache_hits, 0);
}

static void test_open_v2_array_with_zattrs(void **state)
{
    struct fx *f = *state;
    sm_test_put_str(f->s, "vol/.zarray", v2_array);
    sm_test_put_str(f->s, "vol/.zattrs", "{\"spacing\":[1.5,0.5,0.5]}");
    assert_ok(sm_array_open(f->s, "vol", &f->opts, &f->a, &f->err), &f->err);
    const struct sm_array_meta *m = sm_array_meta(f->a);
    assert_int_equal(m->zarr_format, 2);
    assert_int_equal(m->ndim, 3);
    assert_int_equal(m->shape[2], 7);
    assert_int_equal(m->chunk_shape[2], 4);
    assert_int_equal(m->dtype, SM_DT_INT32);
    assert_int_equal(m->key_separator, '.');
    const uint8_t minus1[4] = {0xff, 0xff, 0xff, 0xff};
    assert_memory_equal(m->fill, minus1, 4);
    json_t *sp = json_object_get(m->attributes, "spacing");
    assert_true(json_is_array(sp));
    assert_int_equal(json_array_size(sp), 3);
}

static void test_open_v2_array_without_zattrs_has_empty_attributes(void **state)
{
    struct fx *f = *state;
    sm_test_put_str(f->s, ".zarray", v2_array);
    assert_ok(sm_array_open(f->s, "", &f->opts, &f->a, &f->err), &f->err);
    const struct sm_array_meta *m = sm_array_meta(f->a);
    assert_true(json_is_object(m->attributes));
    assert_int_equal(json_object_size(m->attributes), 0);
}

static void test_open_prefers_v3_when_both_exist(void **state)
{
    struct fx *f = *state;
    sm_test_put_str(f->s, "zarr.json", v3_array);
    sm_test_put_str(f->s, ".zarray", v2_array);
    assert_ok(sm_array_open(f->s, "", &f->opts, &f->a, &f->err), &f->err);
    assert_int_equal(sm_array_meta(f->a)->zarr_format, 3);
}

static void test_open_path_forms_name_the_same_node(void **state)
{
    struct fx *f = *state;
    sm_test_put_str(f->s, "a/b/zarr.json", v3_array);
    static const char *paths[] = {"a/b", "/a/b", "a/b/", "//a/b//"};
    for (size_t i = 0; i < 4; i++) {
        struct sm_array *a = NULL;
        sm_err_clear(&f->err);
        assert_ok(sm_array_open(f->s, paths[i], &f->opts, &a, &f->err), &f->err);
        assert_int_equal(sm_array_meta(a)->shape[0], 10);
        sm_array_close(a);
    }
}

static void test_open_v3_group_is_data_error_is_a_group(void **state)
{
    struct fx *f = *state;
    sm_test_put_str(f->s, "scan/zarr.json", v3_group);
    f->a = (struct sm_array *)f; /* must come back NULL */
    assert_int_equal(sm_array_open(f->s, "scan", &f->opts, &f->a, &f->err), SM_E_DATA);
    assert_null(f->a);
    assert_contains(f->err.what, "is a group");
    assert_string_equal(f->err.where, "mem:/scan");
}

static void test_open_v2_group_is_data_error_is_a_group(void **state)
{
    struct fx *f = *state;
    sm_test_put_str(f->s, ".zgroup", "{\"zarr_format\":2}");
    assert_int_equal(sm_array_open(f->s, "", &f->opts, &f->a, &f->err), SM_E_DATA);
    assert_contains(f->err.what, "is a group");
    assert_string_equal(f->err.where, "mem:");
}

static void test_open_without_metadata_is_data_error_naming_path(void **state)
{
    struct fx *f = *state;
    sm_test_put_str(f->s, "other/zarr.json", v3_array);
    assert_int_equal(sm_array_open(f->s, "missing/arr", &f->opts, &f->a, &f->err), SM_E_DATA);
    assert_null(f->a);
    assert_string_equal(f->err.where, "mem:/missing/arr");
    assert_contains(f->err.what, "zarr.json");
    assert_contains(f->err.what, ".zarray");
    assert_contains(f->err.what, "attributes.json");
    /* every probe was a (missing) metadata request: zarr.json, .zarray, .zgroup, attributes.json */
    assert_int_equal(sm_store_requests(f->s, SM_IO_META), 4);
    assert_int_equal(sm_store_bytes(f->s, SM_IO_META), 0);
}

static void test_open_malformed_zarr_json_is_data_error_naming_document(void **state)
{
    struct fx *f = *state;
    sm_test_put_str(f->s, "arr/zarr.json", "{\"zarr_format\":3,\"node_type\":");
    assert_int_equal(sm_array_open(f->s, "arr", &f->opts, &f->a, &f->err), SM_E_DATA);
    assert_contains(f->err.where, "arr/zarr.json");
}

static void test_open_malformed_zarray_is_data_error_naming_document(void **state)
{
    struct fx *f = *state;
    sm_test_put_str(f->s, "arr/.zarray", "{\"zarr_format\":2,\"shape\":[1]}");
    assert_int_equal(sm_array_open(f->s, "arr", &f->opts, &f->a, &f->err), SM_E_DATA);
    assert_contains(f->err.where, "arr/.zarray");
}

static void test_open_key_escaping_the_root_is_usage_error(void **state)
{
    struct fx *f = *state;
    assert_int_equal(sm_array_open(f->s, "../elsewhere", &f->opts, &f->a, &f->err), SM_E_USAGE);
    assert_null(f->a);
}

static void test_open_applies_max_object_bytes_to_the_store(void **state)
{
    struct fx *f = *state;
    sm_test_put_str(f->s, "zarr.json", v3_array);
    f->opts.limits.max_object_bytes = 100; /* smaller than zarr.json itself */
    assert_int_equal(sm_array_open(f->s, "", &f->opts, &f->a, &f->err), SM_E_LIMIT);
    assert_contains(f->err.what, "limits.max_object_bytes");
    assert_contains(f->err.where, "zarr.json");
}

static void test_open_failures_free_everything(void **state)
{
    struct fx *f = *state;
    sm_test_put_str(f->s, "zarr.json", v3_array);
    sm_test_put_str(f->s, "g/zarr.json", v3_group);
    const uint64_t base = sm_alloc_current();
    for (uint64_t n = 1; n <= 60; n++) {
        struct sm_array *a = NULL;
        sm_err_clear(&f->err);
        sm_alloc_fail_at(n);
        sm_status st = sm_array_open(f->s, (n & 1) ? "" : "g", &f->opts, &a, &f->err);
        sm_alloc_fail_at(0);
        assert_true(st == SM_OK || st == SM_E_NOMEM || st == SM_E_DATA);
        assert_true((st == SM_OK) == (a != NULL));
        sm_array_close(a);
        assert_int_equal(sm_alloc_current(), base);
    }
    sm_array_close(NULL);
}

static void test_describe_array_gives_its_metadata(void **state)
{
    struct fx *f = *state;
    sm_test_put_str(f->s, "zarr.json", v3_array);
    json_t *d = NULL;
    assert_ok(sm_node_describe(f->s, "", &d, &f->err), &f->err);
    assert_non_null(d);
    json_t *shape = json_object_get(d, "shape");
    assert_int_equal(json_array_size(shape), 2);
    assert_int_equal(json_integer_value(json_array_get(shape, 0)), 10);
    assert_string_equal(json_string_value(json_object_get(d, "data_type") != NULL
                                              ? json_object_get(d, "data_type")
                                              : json_object_get(d, "dtype")),
                        "uint16");
    json_decref(d);
}

static void test_describe_missing_node_is_data_error(void **state)
{
    struct fx *f = *state;
    json_t *d = NULL;
    assert_int_equal(sm_node_describe(f->s, "nothing", &d, &f->err), SM_E_DATA);
    assert_null(d);
    assert_string_equal(f->err.where, "mem:/nothing");
}

/* A file tree: g (v3 group) with members a (v3 array), b (v2 array), sub (v2 group), and a stray
 * directory and file that are not nodes. */
static void make_tree(struct fx *f)
{
    assert_int_equal(sm_test_tmpdir("array-open", f->dir, sizeof(f->dir)), 0);
    char p[1024];
    snprintf(p, sizeof(p), "%s/g/zarr.json", f->dir);
    assert_int_equal(sm_test_write_file(p, v3_group, strlen(v3_group)), 0);
    snprintf(p, sizeof(p), "%s/g/a/zarr.json", f->dir);
    assert_int_equal(sm_test_write_file(p, v3_array, strlen(v3_array)), 0);
    snprintf(p, sizeof(p), "%s/g/b/.zarray", f->dir);
    assert_int_equal(sm_test_write_file(p, v2_array, strlen(v2_array)), 0);
    snprintf(p, sizeof(p), "%s/g/sub/.zgroup", f->dir);
    assert_int_equal(sm_test_write_file(p, "{\"zarr_format\":2}", 17), 0);
    snprintf(p, sizeof(p), "%s/g/sub/.zattrs", f->dir);
    assert_int_equal(sm_test_write_file(p, "{\"k\":1}", 7), 0);
    snprintf(p, sizeof(p), "%s/g/notes/readme.txt", f->dir);
    assert_int_equal(sm_test_write_file(p, "hi", 2), 0);
    sm_store_close(f->s);
    f->s = NULL;
    assert_ok(sm_store_file_open(f->dir, &f->s, &f->err), &f->err);
}

static json_t *member(json_t *members, const char *path)
{
    size_t i;
    json_t *m;
    json_array_foreach(members, i, m)
    {
        if (strcmp(json_string_value(json_object_get(m, "path")), path) == 0) {
            return m;
        }
    }
    return NULL;
}

static void test_describe_group_lists_members_on_file_store(void **state)
{
    struct fx *f = *state;
    make_tree(f);
    json_t *d = NULL;
    assert_ok(sm_node_describe(f->s, "g", &d, &f->err), &f->err);
    assert_string_equal(json_string_value(json_object_get(d, "node_type")), "group");
    assert_int_equal(json_integer_value(json_object_get(d, "zarr_format")), 3);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(d, "attributes"), "title")), "scan");
    json_t *members = json_object_get(d, "members");
    assert_true(json_is_array(members));
    assert_int_equal(json_array_size(members), 3); /* a, b, sub; not notes, not zarr.json */
    json_t *a = member(members, "a"), *b = member(members, "b"), *sub = member(members, "sub");
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(sub);
    assert_int_equal(json_integer_value(json_object_get(a, "zarr_format")), 3);
    assert_int_equal(json_integer_value(json_object_get(b, "zarr_format")), 2);
    assert_string_equal(json_string_value(json_object_get(b, "node_type")), "array");
    assert_string_equal(json_string_value(json_object_get(sub, "node_type")), "group");
    json_decref(d);
}

static void test_describe_v2_group_includes_zattrs(void **state)
{
    struct fx *f = *state;
    make_tree(f);
    json_t *d = NULL;
    assert_ok(sm_node_describe(f->s, "g/sub", &d, &f->err), &f->err);
    assert_int_equal(json_integer_value(json_object_get(d, "zarr_format")), 2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(d, "attributes"), "k")), 1);
    assert_int_equal(json_array_size(json_object_get(d, "members")), 0);
    json_decref(d);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_open_v3_array_reads_metadata_once),
        T(test_open_v2_array_with_zattrs),
        T(test_open_v2_array_without_zattrs_has_empty_attributes),
        T(test_open_prefers_v3_when_both_exist),
        T(test_open_path_forms_name_the_same_node),
        T(test_open_v3_group_is_data_error_is_a_group),
        T(test_open_v2_group_is_data_error_is_a_group),
        T(test_open_without_metadata_is_data_error_naming_path),
        T(test_open_malformed_zarr_json_is_data_error_naming_document),
        T(test_open_malformed_zarray_is_data_error_naming_document),
        T(test_open_key_escaping_the_root_is_usage_error),
        T(test_open_applies_max_object_bytes_to_the_store),
        T(test_open_failures_free_everything),
        T(test_describe_array_gives_its_metadata),
        T(test_describe_missing_node_is_data_error),
        T(test_describe_group_lists_members_on_file_store),
        T(test_describe_v2_group_includes_zattrs),
    };
    return cmocka_run_group_tests_name("array_open", tests, NULL, NULL);
}
