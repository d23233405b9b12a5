/* Unit tests of the OME-Zarr image group writer (engine/write/write_spec.c,
 * sm_writer_new_group): one shard numbering over the levels (locate, boxes, keys and their
 * inverse), the group's zarr.json, dimension_names on every level, the documents' SHA-256
 * covering every level, and the rejected level counts. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <unistd.h>

#include "sm_test.h"
#include "write_int.h"
#include "write_test.h"

/* Level specs of a 3-level pyramid of a 20 x 70 x 45 level 0, shards 8 x 32 x 32. */
static void three_levels(struct sm_output_spec *lv)
{
    lv[0] = wt_spec(20, 70, 45);
    lv[1] = wt_spec(10, 35, 23);
    lv[2] = wt_spec(5, 18, 12);
    for (int k = 0; k < 3; k++) {
        lv[k].dimension_names = true;
    }
}

static void test_group_numbering_boxes_keys(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output_spec lv[3];
    three_levels(lv);
    json_t *attrs = json_pack("{s:{s:s}}", "ome", "version", "0.5");
    struct sm_writer *g;
    assert_ok(sm_writer_new_group(lv, 3, attrs, &g, &err), &err);
    json_decref(attrs);
    assert_int_equal(sm_writer_levels(g), 3);
    /* level 0: 3 x 3 x 2 = 18 shards; level 1: 2 x 2 x 1 = 4; level 2: 1 */
    assert_int_equal(sm_writer_level_first(g, 0), 0);
    assert_int_equal(sm_writer_level_first(g, 1), 18);
    assert_int_equal(sm_writer_level_first(g, 2), 22);
    assert_int_equal(sm_writer_nshards(g), 23);
    unsigned k;
    uint64_t local;
    const struct sm_writer *l1 = sm_writer_locate(g, 21, &k, &local);
    assert_ptr_equal(l1, sm_writer_level(g, 1));
    assert_int_equal(k, 1);
    assert_int_equal(local, 3);
    uint64_t off[3], shape[3];
    sm_writer_shard_box(g, 21, off, shape); /* level 1's last shard: [8, 32, 0] + [2, 3, 23] */
    assert_int_equal(off[0], 8);
    assert_int_equal(off[1], 32);
    assert_int_equal(off[2], 0);
    assert_int_equal(shape[0], 2);
    assert_int_equal(shape[1], 3);
    assert_int_equal(shape[2], 23);
    assert_int_equal(sm_writer_shard_bytes(g, 21), 2 * 3 * 23 * 4);
    char key[64];
    assert_ok(sm_writer_shard_key(g, 21, key, sizeof(key), &err), &err);
    assert_string_equal(key, "1/c/1/1/0");
    assert_ok(sm_writer_shard_key(g, 22, key, sizeof(key), &err), &err);
    assert_string_equal(key, "2/c/0/0/0");
    for (uint64_t i = 0; i < sm_writer_nshards(g); i++) {
        uint64_t back;
        assert_ok(sm_writer_shard_key(g, i, key, sizeof(key), &err), &err);
        assert_true(sm_writer_key_index(g, key, &back));
        assert_int_equal(back, i);
    }
    uint64_t x;
    assert_false(sm_writer_key_index(g, "c/0/0/0", &x));   /* an array key, not a level's */
    assert_false(sm_writer_key_index(g, "3/c/0/0/0", &x)); /* no level 3 */
    assert_false(sm_writer_key_index(g, "01/c/0/0/0", &x));
    assert_false(sm_writer_key_index(g, "1/c/2/0/0", &x)); /* outside level 1's grid */
    /* the group document and dimension_names on every level */
    const struct sm_bytes t = sm_writer_zarr_json(g);
    json_t *j = json_loadb((const char *)t.ptr, t.len, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "node_type")), "group");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(j, "attributes"), "ome"), "version")),
                        "0.5");
    json_decref(j);
    for (unsigned l = 0; l < 3; l++) {
        const struct sm_bytes lt = sm_writer_zarr_json(sm_writer_level(g, l));
        json_t *a = json_loadb((const char *)lt.ptr, lt.len, 0, NULL);
        json_t *dn = json_object_get(a, "dimension_names");
        assert_int_equal(json_array_size(dn), 3);
        assert_string_equal(json_string_value(json_array_get(dn, 0)), "z");
        assert_string_equal(json_string_value(json_array_get(dn, 2)), "x");
        json_decref(a);
    }
    sm_writer_free(g);
}

static void test_group_docs_sha_covers_levels(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output_spec lv[3];
    three_levels(lv);
    struct sm_writer *a, *b;
    assert_ok(sm_writer_new_group(lv, 3, NULL, &a, &err), &err);
    lv[2].level = 5; /* another codec level on level 2 only: the group document is the same */
    assert_ok(sm_writer_new_group(lv, 3, NULL, &b, &err), &err);
    const struct sm_bytes ta = sm_writer_zarr_json(a), tb = sm_writer_zarr_json(b);
    assert_int_equal(ta.len, tb.len);
    assert_memory_equal(ta.ptr, tb.ptr, ta.len);
    char sa[65], sb[65];
    sm_writer_docs_sha256(a, sa);
    sm_writer_docs_sha256(b, sb);
    assert_string_not_equal(sa, sb);
    sm_writer_free(a);
    sm_writer_free(b);
}

static void test_group_rejects_level_counts(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output_spec lv[3];
    three_levels(lv);
    struct sm_writer *g;
    assert_status(sm_writer_new_group(lv, 0, NULL, &g, &err), SM_E_USAGE, &err);
    assert_string_equal(err.where, "output.ome.levels");
    sm_err_clear(&err);
    lv[1].shard[0] = 3; /* not a multiple of the inner chunk: the level is named */
    assert_status(sm_writer_new_group(lv, 3, NULL, &g, &err), SM_E_USAGE, &err);
    assert_non_null(strstr(err.what, "level 1"));
}

/* A group written by begin is read back by sm_writer_from_output (what verify uses), also when
 * the provenance holds an integer beyond int64 (a weighted checksum), which strict JSON parsers
 * refuse. */
static void test_group_from_output(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    char dir[1024];
    assert_int_equal(sm_test_tmpdir("write-group", dir, sizeof(dir)), 0);
    struct sm_output_spec lv[3];
    three_levels(lv);
    json_t *attrs = json_pack("{s:{s:s,s:[{s:[{s:s},{s:s},{s:s}]}]},s:{s:o}}", "ome", "version",
                              "0.5", "multiscales", "datasets", "path", "0", "path", "1", "path",
                              "2", "shardmill", "weighted_checksum", sm_json_u64(UINT64_MAX - 5));
    struct sm_writer *g;
    assert_ok(sm_writer_new_group(lv, 3, attrs, &g, &err), &err);
    json_decref(attrs);
    struct sm_output_opts oo = SM_OUTPUT_OPTS_DEFAULTS;
    oo.sync = SM_OUTPUT_SYNC_NONE;
    char path[1100];
    snprintf(path, sizeof(path), "%s/img.zarr", dir);
    struct sm_output *o;
    assert_ok(sm_output_open(path, &oo, &o, &err), &err);
    assert_ok(sm_output_begin(o, g, &err), &err);
    sm_output_close(o);
    const int fd = open(path, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    struct sm_writer *back;
    assert_ok(sm_writer_from_output(fd, sm_writer_zarr_json(g), &back, &err), &err);
    assert_int_equal(sm_writer_levels(back), 3);
    assert_int_equal(sm_writer_nshards(back), sm_writer_nshards(g));
    char s1[65], s2[65];
    sm_writer_docs_sha256(g, s1);
    sm_writer_docs_sha256(back, s2);
    assert_string_equal(s1, s2);
    sm_writer_free(back);
    close(fd);
    sm_writer_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_numbering_boxes_keys),
        cmocka_unit_test(test_group_docs_sha_covers_levels),
        cmocka_unit_test(test_group_rejects_level_counts),
        cmocka_unit_test(test_group_from_output),
    };
    return cmocka_run_group_tests_name("write_group", tests, NULL, NULL);
}
