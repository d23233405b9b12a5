/* Unit tests of the OME-Zarr image group writer (engine/write/write_spec.c,
 * sm_writer_new_group): one shard numbering over the levels (locate, boxes, keys and their
 * inverse), the group's zarr.json, dimension_names on every level, the documents' SHA-256
 * covering every level, the rejected level counts, a Zarr v2 (OME-NGFF 0.4) group's documents,
 * keys and tree, the levels on level 0's shard grid
 * (sm_writer_aligned_levels) and the driver writing them with level 0 (sm_write_job.levels). */
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

/* A Zarr v2 (OME-NGFF 0.4) group: .zattrs holds the attributes themselves, each level a
 * .zarray ("/" keys, C order, the codec as a v2 compressor), keys "k/i/j/l" with no c/, their
 * inverse, and begin's tree (.zgroup first) read back by sm_writer_from_output. */
static void test_group_zarr_v2(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output_spec lv[3];
    three_levels(lv);
    for (int k = 0; k < 3; k++) {
        lv[k].zarr_v2 = true;
        lv[k].sharded = false;
        lv[k].codec = "blosc";
        lv[k].level = 5;
        lv[k].chunk[0] = 8;
        lv[k].chunk[1] = 32;
        lv[k].chunk[2] = 32;
    }
    json_t *attrs = json_pack("{s:[{s:s,s:[{s:s},{s:s},{s:s}]}]}", "multiscales", "version", "0.4",
                              "datasets", "path", "0", "path", "1", "path", "2");
    struct sm_writer *g;
    assert_ok(sm_writer_new_group(lv, 3, attrs, &g, &err), &err);
    assert_string_equal(sm_writer_doc_name(g), ".zattrs");
    assert_string_equal(sm_writer_doc_name(sm_writer_level(g, 1)), ".zarray");
    const struct sm_bytes t = sm_writer_zarr_json(g);
    json_t *back = json_loadb((const char *)t.ptr, t.len, 0, NULL);
    assert_true(json_equal(back, attrs)); /* the attributes themselves */
    json_decref(back);
    json_decref(attrs);
    const struct sm_bytes za = sm_writer_zarr_json(sm_writer_level(g, 0));
    json_t *z = json_loadb((const char *)za.ptr, za.len, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(z, "zarr_format")), 2);
    assert_string_equal(json_string_value(json_object_get(z, "dimension_separator")), "/");
    assert_string_equal(json_string_value(json_object_get(z, "order")), "C");
    assert_string_equal(json_string_value(json_object_get(z, "dtype")), "<f4");
    assert_true(json_is_null(json_object_get(z, "filters")));
    json_t *comp = json_object_get(z, "compressor");
    assert_string_equal(json_string_value(json_object_get(comp, "id")), "blosc");
    assert_string_equal(json_string_value(json_object_get(comp, "cname")), "lz4");
    assert_int_equal(json_integer_value(json_object_get(comp, "shuffle")), 1);
    assert_int_equal(json_integer_value(json_object_get(comp, "clevel")), 5);
    json_decref(z);
    assert_int_equal(sm_writer_nshards(g), 23); /* the chunk grids: 18 + 4 + 1 */
    char key[64];
    assert_ok(sm_writer_shard_key(g, 21, key, sizeof(key), &err), &err);
    assert_string_equal(key, "1/1/1/0");
    for (uint64_t i = 0; i < sm_writer_nshards(g); i++) {
        uint64_t x;
        assert_ok(sm_writer_shard_key(g, i, key, sizeof(key), &err), &err);
        assert_true(sm_writer_key_index(g, key, &x));
        assert_int_equal(x, i);
    }
    uint64_t x;
    assert_false(sm_writer_key_index(g, "1/c/1/1/0", &x)); /* a v3 key names no v2 chunk */
    assert_false(sm_writer_key_index(g, "1/01/1/0", &x));
    assert_false(sm_writer_key_index(g, "1/2/1/0", &x)); /* past level 1's grid */
    char dir[1024];
    assert_int_equal(sm_test_tmpdir("write-group-v2", dir, sizeof(dir)), 0);
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
    assert_true(sm_wfs_is_v2(fd));
    assert_string_equal(sm_wfs_root_doc(fd), ".zattrs");
    assert_int_equal(faccessat(fd, "1/.zarray", F_OK, 0), 0);
    assert_int_not_equal(faccessat(fd, "zarr.json", F_OK, 0), 0);
    struct sm_writer *rb;
    assert_ok(sm_writer_from_output(fd, sm_writer_zarr_json(g), &rb, &err), &err);
    assert_int_equal(sm_writer_levels(rb), 3);
    assert_int_equal(sm_writer_nshards(rb), 23);
    char s1[65], s2[65];
    sm_writer_docs_sha256(g, s1);
    sm_writer_docs_sha256(rb, s2);
    assert_string_equal(s1, s2);
    sm_writer_free(rb);
    close(fd);
    sm_writer_free(g);
    lv[1].sharded = true; /* a v2 array has no shards: the level is named */
    assert_status(sm_writer_new_group(lv, 3, NULL, &g, &err), SM_E_USAGE, &err);
    assert_non_null(strstr(err.what, "level 1"));
}

/* Level specs on level 0's grid: shards 8 x 32 x 32 halved per level, every axis halved. */
static void aligned_levels(struct sm_output_spec *lv)
{
    lv[0] = wt_spec(20, 70, 45);
    lv[1] = wt_spec(10, 35, 23);
    lv[2] = wt_spec(5, 18, 12);
    for (unsigned k = 1; k < 3; k++) {
        for (unsigned d = 0; d < 3; d++) {
            lv[k].shard[d] = lv[0].shard[d] >> k;
            lv[k].chunk[d] = lv[k].shard[d] < lv[0].chunk[d] ? lv[k].shard[d] : lv[0].chunk[d];
        }
    }
}

static unsigned aligned_of(const struct sm_output_spec *lv, unsigned n)
{
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_writer *g;
    assert_ok(sm_writer_new_group(lv, n, NULL, &g, &err), &err);
    const unsigned a = sm_writer_aligned_levels(g);
    sm_writer_free(g);
    return a;
}

static void test_group_aligned_levels(void **state)
{
    (void)state;
    struct sm_output_spec lv[3];
    aligned_levels(lv);
    assert_int_equal(aligned_of(lv, 3), 3);
    assert_int_equal(aligned_of(lv, 1), 1);
    three_levels(lv); /* each level its own 8 x 32 x 32 grid */
    assert_int_equal(aligned_of(lv, 3), 1);
    aligned_levels(lv);
    lv[2].shard[2] = 16; /* level 2's x shards twice level 0's / 4: its own grid */
    lv[2].chunk[2] = 16;
    assert_int_equal(aligned_of(lv, 3), 2);
    aligned_levels(lv);
    lv[1].shape[1] = 34; /* not ceil(70 / 2): not a halving of level 0 */
    assert_int_equal(aligned_of(lv, 3), 1);
    /* one shard on every axis: aligned whatever the shard shapes */
    struct sm_output_spec one[2] = {wt_spec(6, 10, 12), wt_spec(3, 5, 6)};
    for (unsigned d = 0; d < 3; d++) {
        one[0].shard[d] = one[0].chunk[d] = one[0].shape[d];
        one[1].shard[d] = one[1].chunk[d] = one[1].shape[d];
    }
    assert_int_equal(aligned_of(one, 2), 2);
    struct sm_writer *a; /* an array writer has level 0 only */
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_writer_new(&one[0], &a, &err), &err);
    assert_int_equal(sm_writer_aligned_levels(a), 1);
    sm_writer_free(a);
}

/* The derive callback of the driver test: level k's value at q is the first value of its block
 * in level k-1 (the boxes checked against the blocks). */
static sm_status first_of_block(void *user, int thread, unsigned level,
                                const struct sm_level_box *parent, const struct sm_level_box *child,
                                struct sm_err *err)
{
    (void)thread;
    unsigned *calls = user;
    __atomic_fetch_add(&calls[level], 1u, __ATOMIC_RELAXED);
    const float *p = parent->data;
    float *c = child->data;
    for (unsigned d = 0; d < 3; d++) {
        if (parent->offset[d] != 2 * child->offset[d] ||
            (parent->shape[d] + 1) / 2 != child->shape[d]) {
            SM_FAIL(err, SM_E_INTERNAL, "level %u box does not cover its parent", level);
        }
    }
    for (uint64_t z = 0; z < child->shape[0]; z++) {
        for (uint64_t y = 0; y < child->shape[1]; y++) {
            for (uint64_t x = 0; x < child->shape[2]; x++) {
                c[(z * child->shape[1] + y) * child->shape[2] + x] =
                    p[((2 * z) * parent->shape[1] + 2 * y) * parent->shape[2] + 2 * x];
            }
        }
    }
    return SM_OK;
}

struct derived_fill {
    unsigned calls[3];
};

/* Level 0's value at (z, y, x) is z * 10000 + y * 100 + x. */
static sm_status index_fill(void *user, int thread, uint64_t shard, const uint64_t *offset,
                            const uint64_t *shape, void *data, size_t len, struct sm_err *err)
{
    (void)thread;
    (void)shard;
    struct derived_fill *df = user;
    __atomic_fetch_add(&df->calls[0], 1u, __ATOMIC_RELAXED);
    float *v = data;
    if (len != shape[0] * shape[1] * shape[2] * sizeof(float)) {
        SM_FAIL(err, SM_E_INTERNAL, "fill of %zu bytes", len);
    }
    for (uint64_t z = 0; z < shape[0]; z++) {
        for (uint64_t y = 0; y < shape[1]; y++) {
            for (uint64_t x = 0; x < shape[2]; x++) {
                v[(z * shape[1] + y) * shape[2] + x] =
                    (float)((offset[0] + z) * 10000 + (offset[1] + y) * 100 + offset[2] + x);
            }
        }
    }
    return SM_OK;
}

static sm_status derive_calls(void *user, int thread, unsigned level,
                              const struct sm_level_box *parent, const struct sm_level_box *child,
                              struct sm_err *err)
{
    struct derived_fill *df = user;
    return first_of_block(df->calls, thread, level, parent, child, err);
}

static void test_group_driver_writes_aligned_levels(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    char dir[1024];
    assert_int_equal(sm_test_tmpdir("write-group-derive", dir, sizeof(dir)), 0);
    struct sm_output_spec lv[3];
    aligned_levels(lv);
    struct sm_writer *g;
    assert_ok(sm_writer_new_group(lv, 3, NULL, &g, &err), &err);
    const uint64_t n0 = sm_writer_nshards(sm_writer_level(g, 0));
    char path[1100];
    snprintf(path, sizeof(path), "%s/img.zarr", dir);
    for (int threads = 1; threads <= 3; threads += 2) {
        struct sm_output *o = wt_begin_image(path, g);
        struct derived_fill df = {{0, 0, 0}};
        struct sm_write_job job = {.first = 0,
                                   .count = n0,
                                   .threads = threads,
                                   .fill = index_fill,
                                   .user = &df,
                                   .levels = 3,
                                   .derive = derive_calls};
        struct sm_write_result res;
        assert_ok(sm_write_shards(g, o, &job, &res, &err), &err);
        /* every level's shard of every level-0 shard, each derived once from the level above */
        assert_int_equal(res.written, sm_writer_nshards(g));
        assert_int_equal(df.calls[0], n0);
        assert_int_equal(df.calls[1], n0);
        assert_int_equal(df.calls[2], n0);
        assert_ok(sm_output_flush(o, &err), &err);
        assert_ok(sm_output_finish(o, &err), &err);
        sm_output_close(o);
        /* level 2's value at (z, y, x) is level 0's at (4z, 4y, 4x), read back from the files */
        char l2[1200];
        snprintf(l2, sizeof(l2), "%s/2", path);
        const size_t len = 5 * 18 * 12 * sizeof(float);
        float *back = (float *)wt_read_back(l2, len, &err);
        assert_non_null(back);
        for (uint64_t z = 0; z < 5; z++) {
            for (uint64_t y = 0; y < 18; y++) {
                for (uint64_t x = 0; x < 12; x++) {
                    const float want = (float)(4 * z * 10000 + 4 * y * 100 + 4 * x);
                    assert_true(back[(z * 18 + y) * 12 + x] == want);
                }
            }
        }
        free(back);
    }
    /* more levels than are aligned, no derive, or a shard that is not level 0's: the caller's
     * mistake, refused before anything is written */
    struct sm_output *o = wt_begin_image(path, g);
    struct derived_fill df = {{0, 0, 0}};
    struct sm_write_job bad = {
        .first = 0, .count = n0, .threads = 1, .fill = index_fill, .user = &df, .levels = 4};
    bad.derive = derive_calls;
    struct sm_write_result res;
    assert_status(sm_write_shards(g, o, &bad, &res, &err), SM_E_INTERNAL, &err);
    bad.levels = 3;
    bad.derive = NULL;
    assert_status(sm_write_shards(g, o, &bad, &res, &err), SM_E_INTERNAL, &err);
    bad.derive = derive_calls;
    bad.first = n0;
    bad.count = 1;
    assert_status(sm_write_shards(g, o, &bad, &res, &err), SM_E_INTERNAL, &err);
    assert_int_equal(df.calls[0], 0);
    sm_output_close(o);
    sm_writer_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_numbering_boxes_keys),
        cmocka_unit_test(test_group_docs_sha_covers_levels),
        cmocka_unit_test(test_group_rejects_level_counts),
        cmocka_unit_test(test_group_from_output),
        cmocka_unit_test(test_group_zarr_v2),
        cmocka_unit_test(test_group_aligned_levels),
        cmocka_unit_test(test_group_driver_writes_aligned_levels),
    };
    return cmocka_run_group_tests_name("write_group", tests, NULL, NULL);
}
