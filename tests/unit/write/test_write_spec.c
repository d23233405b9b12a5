/* Unit tests of engine/write/write_spec.c: the output array's zarr.json (round trip through the
 * reader's sm_meta_parse_v3 with the declared layout, SPEC §2 defaults, every codec), validation
 * errors naming the key, and the shard grid (coordinates, clipped boxes, keys). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jansson.h>

#include "sm_test.h"
#include "write_int.h"
#include "write_test.h"

static json_t *parse_text(const struct sm_writer *w)
{
    const struct sm_bytes t = sm_writer_zarr_json(w);
    json_error_t je;
    json_t *j = json_loadb((const char *)t.ptr, t.len, 0, &je);
    if (j == NULL) {
        fail_msg("zarr.json does not parse: %s", je.text);
    }
    return j;
}

static void test_spec_defaults_round_trip(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output_spec s = SM_OUTPUT_SPEC_DEFAULTS;
    s.shape[0] = 20;
    s.shape[1] = 70;
    s.shape[2] = 45;
    struct sm_writer *w;
    assert_ok(sm_writer_new(&s, &w, &err), &err);

    /* The reader sees the declared layout. */
    const struct sm_bytes t = sm_writer_zarr_json(w);
    enum sm_node_kind kind;
    struct sm_array_meta *m;
    assert_ok(sm_meta_parse_v3((const char *)t.ptr, t.len, &kind, &m, NULL, &err), &err);
    assert_int_equal(kind, SM_NODE_ARRAY);
    assert_int_equal(m->zarr_format, 3);
    assert_int_equal(m->dtype, SM_DT_FLOAT32);
    assert_int_equal(m->ndim, 3);
    assert_int_equal(m->chunk_shape[0], 8);
    assert_int_equal(m->chunk_shape[1], 32);
    assert_int_equal(m->chunk_shape[2], 32);
    assert_int_equal(m->inner_ndim, 3);
    assert_int_equal(m->inner_chunk_shape[0], 2);
    assert_int_equal(m->inner_chunk_shape[1], 16);
    assert_int_equal(m->inner_chunk_shape[2], 16);
    assert_string_equal(m->key_prefix, "c");
    assert_int_equal(m->key_separator, '/');
    const struct sm_shard_codec *sc = sm_codec_chain_shard(m->chain);
    assert_non_null(sc);
    const struct sm_shard_layout *L = sm_shard_layout(sc);
    assert_int_equal(L->location, SM_SHARD_INDEX_END);
    assert_int_equal(L->n_inner, 4 * 2 * 2);
    assert_int_equal(L->index_len, 4 * 2 * 2 * 16 + 4); /* with the crc32c */
    sm_meta_free(m);

    /* The JSON text itself: codecs exactly as SPEC §2 says. */
    json_t *j = parse_text(w);
    json_t *sh = json_array_get(json_object_get(j, "codecs"), 0);
    assert_string_equal(json_string_value(json_object_get(sh, "name")), "sharding_indexed");
    json_t *cfg = json_object_get(sh, "configuration");
    json_t *inner = json_object_get(cfg, "codecs");
    assert_int_equal(json_array_size(inner), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(inner, 0), "name")),
                        "bytes");
    json_t *zs = json_array_get(inner, 1);
    assert_string_equal(json_string_value(json_object_get(zs, "name")), "zstd");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(zs, "configuration"), "level")), 3);
    assert_true(json_is_false(json_object_get(json_object_get(zs, "configuration"), "checksum")));
    json_t *ic = json_object_get(cfg, "index_codecs");
    assert_int_equal(json_array_size(ic), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ic, 1), "name")),
                        "crc32c");
    assert_string_equal(json_string_value(json_object_get(cfg, "index_location")), "end");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "chunk_key_encoding"), "name")),
        "default");
    assert_true(json_is_object(json_object_get(j, "attributes")));
    json_decref(j);

    /* Grid: ceil(20/8) x ceil(70/32) x ceil(45/32) = 3 x 3 x 2. */
    assert_int_equal(sm_writer_nshards(w), 18);
    assert_int_equal(sm_writer_grid(w)[0], 3);
    assert_int_equal(sm_writer_grid(w)[1], 3);
    assert_int_equal(sm_writer_grid(w)[2], 2);
    sm_writer_free(w);
}

static void test_spec_zarr_json_is_deterministic(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    json_t *attrs = json_pack("{s:{s:s, s:s}, s:[i,i]}", "shardmill", "version", "0.1.0",
                              "config_sha256", "ab", "roi", 1, 2);
    struct sm_output_spec s = SM_OUTPUT_SPEC_DEFAULTS;
    s.shape[0] = s.shape[1] = s.shape[2] = 64;
    s.attributes = attrs;
    struct sm_writer *a, *b;
    assert_ok(sm_writer_new(&s, &a, &err), &err);
    assert_ok(sm_writer_new(&s, &b, &err), &err);
    json_decref(attrs); /* the writer keeps a copy */
    const struct sm_bytes ta = sm_writer_zarr_json(a), tb = sm_writer_zarr_json(b);
    assert_int_equal(ta.len, tb.len);
    assert_memory_equal(ta.ptr, tb.ptr, ta.len);
    assert_int_equal(ta.ptr[ta.len - 1], '\n');
    json_t *j = parse_text(a);
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(j, "attributes"), "shardmill"), "config_sha256")),
        "ab");
    json_decref(j);
    /* The parsed metadata carries the attributes too. */
    assert_non_null(json_object_get(sm_writer_meta(a)->attributes, "roi"));
    sm_writer_free(a);
    sm_writer_free(b);
}

/* Every codec and layout option yields a document the reader accepts with that layout. */
static void test_spec_every_codec_and_layout(void **state)
{
    (void)state;
    static const struct {
        const char *codec;
        int level;
        bool sharded, crc;
        enum sm_shard_index_location loc;
        enum sm_dtype dt;
    } cases[] = {
        {"zstd", 3, true, true, SM_SHARD_INDEX_END, SM_DT_FLOAT32},
        {"gzip", 6, true, true, SM_SHARD_INDEX_START, SM_DT_UINT16},
        {"blosc", 5, true, false, SM_SHARD_INDEX_END, SM_DT_INT32},
        {"none", 0, true, true, SM_SHARD_INDEX_START, SM_DT_UINT8},
        {"zstd", -1, false, true, SM_SHARD_INDEX_END, SM_DT_FLOAT64},
        {"gzip", 1, false, true, SM_SHARD_INDEX_END, SM_DT_INT8},
        {"blosc", 9, false, true, SM_SHARD_INDEX_END, SM_DT_BOOL},
        {"none", 0, false, true, SM_SHARD_INDEX_END, SM_DT_INT64},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sm_err err;
        sm_err_clear(&err);
        struct sm_output_spec s = SM_OUTPUT_SPEC_DEFAULTS;
        s.shape[0] = 9;
        s.shape[1] = 33;
        s.shape[2] = 17;
        s.codec = cases[i].codec;
        s.level = cases[i].level;
        s.sharded = cases[i].sharded;
        s.index_crc32c = cases[i].crc;
        s.index_location = cases[i].loc;
        s.dtype = cases[i].dt;
        struct sm_writer *w;
        assert_ok(sm_writer_new(&s, &w, &err), &err);
        const struct sm_array_meta *m = sm_writer_meta(w);
        assert_int_equal(m->dtype, cases[i].dt);
        const struct sm_shard_codec *sc = sm_codec_chain_shard(m->chain);
        if (cases[i].sharded) {
            assert_non_null(sc);
            assert_int_equal(sm_shard_layout(sc)->location, cases[i].loc);
            assert_int_equal(sm_shard_layout(sc)->index_len, 16 * 16 + (cases[i].crc ? 4 : 0));
            assert_int_equal(m->chunk_shape[1], 32);
        } else {
            assert_null(sc);
            assert_int_equal(m->chunk_shape[0], 2); /* the chunk is the stored object */
            assert_int_equal(m->chunk_shape[1], 16);
            assert_int_equal(sm_writer_nshards(w), 5 * 3 * 2);
        }
        json_t *j = parse_text(w);
        json_t *codecs = json_object_get(j, "codecs");
        json_t *list =
            cases[i].sharded
                ? json_object_get(json_object_get(json_array_get(codecs, 0), "configuration"),
                                  "codecs")
                : codecs;
        const bool none = strcmp(cases[i].codec, "none") == 0;
        assert_int_equal(json_array_size(list), none ? 1 : 2);
        if (!none) {
            assert_string_equal(json_string_value(json_object_get(json_array_get(list, 1), "name")),
                                cases[i].codec);
        }
        json_decref(j);
        sm_writer_free(w);
    }
}

static void test_spec_fill_values_round_trip(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const float fills[] = {0.0f, -1.5f, __builtin_nanf(""), __builtin_inff()};
    for (size_t i = 0; i < 4; i++) {
        struct sm_output_spec s = SM_OUTPUT_SPEC_DEFAULTS;
        s.shape[0] = s.shape[1] = s.shape[2] = 8;
        memcpy(s.fill, &fills[i], 4);
        struct sm_writer *w;
        assert_ok(sm_writer_new(&s, &w, &err), &err);
        assert_memory_equal(sm_writer_meta(w)->fill, s.fill, 4);
        sm_writer_free(w);
    }
    struct sm_output_spec s = SM_OUTPUT_SPEC_DEFAULTS;
    s.shape[0] = s.shape[1] = s.shape[2] = 8;
    s.dtype = SM_DT_UINT16;
    s.fill[0] = 0x34;
    s.fill[1] = 0x12;
    struct sm_writer *w;
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    json_t *j = parse_text(w);
    assert_int_equal(json_integer_value(json_object_get(j, "fill_value")), 0x1234);
    json_decref(j);
    sm_writer_free(w);
}

static void expect_usage(struct sm_output_spec *s, const char *where, const char *what)
{
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_writer *w = NULL;
    assert_status(sm_writer_new(s, &w, &err), SM_E_USAGE, &err);
    assert_null(w);
    assert_string_equal(err.where, where);
    assert_contains(err.what, what);
}

static void test_spec_rejects_bad_layouts(void **state)
{
    (void)state;
    struct sm_output_spec s = wt_spec(16, 64, 64);
    s.shard[1] = 24; /* not a multiple of 16 */
    expect_usage(&s, "output.shard", "not a multiple of the inner chunk extent 16");
    s = wt_spec(16, 64, 64);
    s.chunk[2] = 0;
    expect_usage(&s, "output.chunk", "chunk extent 0 on axis 2");
    s = wt_spec(16, 64, 64);
    s.shard[0] = 0;
    expect_usage(&s, "output.shard", "shard extent 0");
    s = wt_spec(16, 64, 64);
    s.ndim = 0;
    expect_usage(&s, "output.shape", "1 to 32 dimensions");
    s = wt_spec(16, 64, 64);
    s.codec = "lzma";
    expect_usage(&s, "output.codec", "unknown codec 'lzma'");
    s = wt_spec(16, 64, 64);
    s.codec = "gzip";
    s.level = 12;
    expect_usage(&s, "output.codec", "gzip level 12 is outside 0..9");
    s = wt_spec(16, 64, 64);
    s.codec = "zstd";
    s.level = 23;
    expect_usage(&s, "output.codec", "zstd level 23");
    s = wt_spec(16, 64, 64);
    s.codec = "blosc";
    s.blosc_cname = "snappy";
    expect_usage(&s, "output.codec", "unknown blosc cname 'snappy'");
    s = wt_spec(16, 64, 64);
    json_t *arr = json_array();
    s.attributes = arr;
    expect_usage(&s, "output.attributes", "must be a JSON object");
    json_decref(arr);
    /* Unsharded: the shard shape is ignored (need not divide). */
    struct sm_err err;
    sm_err_clear(&err);
    s = wt_spec(16, 64, 64);
    s.sharded = false;
    s.shard[1] = 5;
    struct sm_writer *w;
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    sm_writer_free(w);
}

static void test_spec_grid_boxes_and_keys(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output_spec s = wt_spec(20, 70, 45);
    struct sm_writer *w;
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    uint64_t idx[3], off[3], shape[3];
    sm_writer_shard_coords(w, 17, idx); /* the last shard */
    assert_int_equal(idx[0], 2);
    assert_int_equal(idx[1], 2);
    assert_int_equal(idx[2], 1);
    sm_writer_shard_box(w, 17, off, shape);
    assert_int_equal(off[0], 16);
    assert_int_equal(off[1], 64);
    assert_int_equal(off[2], 32);
    assert_int_equal(shape[0], 4);
    assert_int_equal(shape[1], 6);
    assert_int_equal(shape[2], 13);
    assert_int_equal(sm_writer_shard_bytes(w, 17), 4 * 6 * 13 * 4);
    assert_int_equal(sm_writer_shard_bytes(w, 0), 8 * 32 * 32 * 4);
    char key[64];
    assert_ok(sm_writer_shard_key(w, 17, key, sizeof(key), &err), &err);
    assert_string_equal(key, "c/2/2/1");
    for (uint64_t i = 0; i < sm_writer_nshards(w); i++) {
        uint64_t back;
        assert_ok(sm_writer_shard_key(w, i, key, sizeof(key), &err), &err);
        assert_true(sm_writer_key_index(w, key, &back));
        assert_int_equal(back, i);
    }
    uint64_t x;
    assert_false(sm_writer_key_index(w, "c/3/0/0", &x)); /* outside the grid */
    assert_false(sm_writer_key_index(w, "c/0/0", &x));
    assert_false(sm_writer_key_index(w, "c/0/0/0/0", &x));
    assert_false(sm_writer_key_index(w, "c/0/a/0", &x));
    assert_false(sm_writer_key_index(w, "d/0/0/0", &x));
    char tiny[4];
    assert_status(sm_writer_shard_key(w, 17, tiny, sizeof(tiny), &err), SM_E_INTERNAL, &err);
    sm_writer_free(w);
}

static void test_spec_from_json_reads_other_documents(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_writer *w;
    const char *group = "{\"zarr_format\": 3, \"node_type\": \"group\"}";
    assert_status(sm_writer_from_json(sm_bytes_of(group, strlen(group)), &w, &err), SM_E_DATA,
                  &err);
    sm_err_clear(&err);
    assert_status(sm_writer_from_json(sm_bytes_of("{", 1), &w, &err), SM_E_DATA, &err);
}

/* SPEC §2 default layout: 64³ inner chunks clipped to the ROI, shards of 32..64 MiB of values. */
static void layout(const uint64_t *shape, size_t elem, uint64_t *chunk, uint64_t *shard)
{
    struct sm_err err;
    sm_err_clear(&err);
    assert_status(sm_output_layout_auto(3, shape, elem, true, true, chunk, shard, &err), SM_OK,
                  &err);
}

static uint64_t nshards(const uint64_t *shape, const uint64_t *shard)
{
    uint64_t n = 1;
    for (unsigned d = 0; d < 3; d++) {
        n *= (shape[d] + shard[d] - 1) / shard[d];
    }
    return n;
}

static void test_layout_auto_float32_volumes(void **state)
{
    (void)state;
    uint64_t chunk[3], shard[3];
    /* 1024³ float32 = 4 GiB: 64³ chunks (1 MiB), 5 doublings z,y,x,z,y -> 32 MiB shards */
    const uint64_t big[3] = {1024, 1024, 1024};
    layout(big, 4, chunk, shard);
    assert_int_equal(chunk[0], 64);
    assert_int_equal(chunk[2], 64);
    assert_int_equal(shard[0], 256);
    assert_int_equal(shard[1], 256);
    assert_int_equal(shard[2], 128);
    assert_int_equal(nshards(big, shard), 128); /* 4 GiB / 32 MiB */
    /* 4096³ float32: the same shard, 8192 files instead of the 8.4 million of [8,32,32] */
    const uint64_t huge[3] = {4096, 4096, 4096};
    layout(huge, 4, chunk, shard);
    assert_int_equal(nshards(huge, shard), 8192);
    /* uint16 values: 64³ is 0.5 MiB, one more doubling */
    layout(big, 2, chunk, shard);
    assert_int_equal(shard[0] * shard[1] * shard[2] * 2, (uint64_t)32 << 20);
}

static void test_layout_auto_clips_to_small_arrays(void **state)
{
    (void)state;
    uint64_t chunk[3], shard[3];
    /* W2: 128³ float32 = 8 MiB, smaller than one target shard: one shard covering it */
    const uint64_t w2[3] = {128, 128, 128};
    layout(w2, 4, chunk, shard);
    assert_int_equal(chunk[0], 64);
    assert_int_equal(shard[0], 128);
    assert_int_equal(shard[1], 128);
    assert_int_equal(shard[2], 128);
    /* nonaligned W2 ROI: chunks stay 64, shards cover the ROI rounded up to powers of two */
    const uint64_t odd[3] = {125, 124, 123};
    layout(odd, 4, chunk, shard);
    assert_int_equal(nshards(odd, shard), 1);
    assert_int_equal(shard[0] % chunk[0], 0);
    /* axes shorter than 64: chunks clipped to the array; the head CT 108x256x256 float32 (27 MiB)
     */
    const uint64_t thin[3] = {5, 300, 40};
    layout(thin, 4, chunk, shard);
    assert_int_equal(chunk[0], 5);
    assert_int_equal(chunk[1], 64);
    assert_int_equal(chunk[2], 40);
    assert_int_equal(shard[0], 5);
    assert_int_equal(shard[2], 40);
    assert_int_equal(nshards(thin, shard), 1);
    const uint64_t ct[3] = {108, 256, 256};
    layout(ct, 4, chunk, shard);
    assert_int_equal(nshards(ct, shard), 1);
}

static void test_layout_auto_keeps_what_is_given(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const uint64_t big[3] = {1024, 1024, 1024};
    uint64_t chunk[3] = {2, 16, 16}, shard[3] = {8, 32, 32};
    /* shard auto, chunk given: the shard is a multiple of the given chunk */
    assert_status(sm_output_layout_auto(3, big, 4, false, true, chunk, shard, &err), SM_OK, &err);
    assert_int_equal(chunk[0], 2);
    for (unsigned d = 0; d < 3; d++) {
        assert_int_equal(shard[d] % chunk[d], 0);
    }
    assert_true(shard[0] * shard[1] * shard[2] * 4 >= ((uint64_t)32 << 20));
    assert_true(shard[0] * shard[1] * shard[2] * 4 < ((uint64_t)64 << 20));
    /* both given: untouched */
    uint64_t c2[3] = {4, 8, 8}, s2[3] = {8, 8, 8};
    assert_status(sm_output_layout_auto(3, big, 4, false, false, c2, s2, &err), SM_OK, &err);
    assert_int_equal(c2[0], 4);
    assert_int_equal(s2[0], 8);
    const uint64_t empty[3] = {4, 0, 4};
    assert_status(sm_output_layout_auto(3, empty, 4, true, true, c2, s2, &err), SM_E_USAGE, &err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_defaults_round_trip),
        cmocka_unit_test(test_spec_zarr_json_is_deterministic),
        cmocka_unit_test(test_spec_every_codec_and_layout),
        cmocka_unit_test(test_spec_fill_values_round_trip),
        cmocka_unit_test(test_spec_rejects_bad_layouts),
        cmocka_unit_test(test_spec_grid_boxes_and_keys),
        cmocka_unit_test(test_spec_from_json_reads_other_documents),
        cmocka_unit_test(test_layout_auto_float32_volumes),
        cmocka_unit_test(test_layout_auto_clips_to_small_arrays),
        cmocka_unit_test(test_layout_auto_keeps_what_is_given),
    };
    return cmocka_run_group_tests_name("write_spec", tests, NULL, NULL);
}
