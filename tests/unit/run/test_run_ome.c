/* Unit tests for the OME-Zarr levels and metadata of run/ (run_ome.c, SPEC §2): which axes each
 * level halves (downsample auto on the CT's spacing, all, yx, axes of one voxel, no spacing), the
 * level count of levels: auto and its bounds, and the group attributes (scale x factor,
 * translations that line voxel centres up, method identifiers, omero's window), and the levels
 * laid out on level 0's shard grid (automatic shards). The values of
 * the levels are checked against NumPy by tests/convert/test_convert_ome.py. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "run_int.h"
#include "shardmill/pipeline.h"

static const double ct_spacing[3] = {1.5, 0.9570312, 0.9570312};

static struct sm_run_output ct_output(enum sm_run_ome_downsample mode, unsigned levels)
{
    struct sm_run_output o = SM_RUN_OUTPUT_DEFAULTS;
    o.path = "unused";
    o.ome.levels = levels;
    o.ome.downsample = mode;
    o.ome.spacing.set = true;
    o.ome.spacing.n = 3;
    memcpy(o.ome.spacing.v, ct_spacing, sizeof(ct_spacing));
    return o;
}

static void check_shapes(const struct sm_run_output *o, const uint64_t *shape, unsigned n,
                         const uint64_t (*want)[3])
{
    struct sm_output_spec levels[SM_MAX_LEVELS];
    unsigned got = 0;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_ome_levels(o, 3, shape, SM_DT_UINT16, levels, &got, &err), SM_OK);
    assert_int_equal(got, n);
    for (unsigned k = 0; k < n; k++) {
        for (unsigned d = 0; d < 3; d++) {
            assert_int_equal(levels[k].shape[d], want[k][d]);
        }
        assert_true(levels[k].dimension_names);
    }
}

static void auto_halves_the_fine_axes_first(void **state)
{
    (void)state;
    const uint64_t ct[3] = {108, 256, 256};
    const struct sm_run_output o = ct_output(SM_RUN_OME_DOWN_AUTO, 3);
    const uint64_t want[3][3] = {{108, 256, 256}, {108, 128, 128}, {54, 64, 64}};
    check_shapes(&o, ct, 3, want);
    uint64_t f[SM_MAX_LEVELS][SM_MAX_DIMS];
    sm_run_ome_factors(&o.ome, 3, ct, 3, f);
    assert_int_equal(f[1][0], 1);
    assert_int_equal(f[1][1], 2);
    assert_int_equal(f[2][0], 2);
    assert_int_equal(f[2][2], 4);
}

static void all_halves_every_axis(void **state)
{
    (void)state;
    const uint64_t ct[3] = {108, 256, 256};
    const struct sm_run_output o = ct_output(SM_RUN_OME_DOWN_ALL, 3);
    const uint64_t want[3][3] = {{108, 256, 256}, {54, 128, 128}, {27, 64, 64}};
    check_shapes(&o, ct, 3, want);
}

static void yx_never_halves_z(void **state)
{
    (void)state;
    /* z is kept at every level, also where auto would halve it (the CT's level 2) */
    const uint64_t ct[3] = {108, 256, 256};
    struct sm_run_output o = ct_output(SM_RUN_OME_DOWN_YX, 4);
    const uint64_t want[4][3] = {{108, 256, 256}, {108, 128, 128}, {108, 64, 64}, {108, 32, 32}};
    check_shapes(&o, ct, 4, want);
    uint64_t f[SM_MAX_LEVELS][SM_MAX_DIMS];
    sm_run_ome_factors(&o.ome, 3, ct, 4, f);
    assert_int_equal(f[3][0], 1);
    assert_int_equal(f[3][1], 8);
    assert_int_equal(f[3][2], 8);
    /* levels: auto and the most levels count y and x alone: a deep, narrow stack of 1000 x 9 x 5
     * stops at 9 x 5 (both <= 256) and allows 5 levels (y 9 -> 5 -> 3 -> 2 -> 1), not the
     * eleven z's 1000 voxels would give */
    const uint64_t deep[3] = {1000, 9, 5};
    o.ome.levels = SM_RUN_OME_AUTO;
    const uint64_t one[1][3] = {{1000, 9, 5}};
    check_shapes(&o, deep, 1, one);
    o.ome.levels = 5;
    const uint64_t five[5][3] = {
        {1000, 9, 5}, {1000, 5, 3}, {1000, 3, 2}, {1000, 2, 1}, {1000, 1, 1}};
    check_shapes(&o, deep, 5, five);
    o.ome.levels = 6;
    struct sm_output_spec levels[SM_MAX_LEVELS];
    unsigned n = 0;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_ome_levels(&o, 3, deep, SM_DT_UINT16, levels, &n, &err), SM_E_USAGE);
    assert_string_equal(err.where, "output.ome.levels");
    /* a 2-D image: y and x are every axis */
    const uint64_t plane[2] = {6, 4};
    o.ome.levels = 3;
    assert_int_equal(sm_run_ome_levels(&o, 2, plane, SM_DT_UINT16, levels, &n, &err), SM_OK);
    assert_int_equal(n, 3);
    assert_int_equal(levels[2].shape[0], 2);
    assert_int_equal(levels[2].shape[1], 1);
    /* a large stack: levels auto stops at the first y, x <= 256, z untouched */
    const uint64_t big[3] = {2048, 1024, 1024};
    o.ome.levels = SM_RUN_OME_AUTO;
    const uint64_t three[3][3] = {{2048, 1024, 1024}, {2048, 512, 512}, {2048, 256, 256}};
    check_shapes(&o, big, 3, three);
}

/* Issue 35 item 3: a 0.4 chunk (a file) is 4 planes deep and 512 x 512 in y and x, clipped to
 * the shape: a plane view fetches at most 4 planes per plane shown. */
static void v2_chunks_are_4_planes_deep(void **state)
{
    (void)state;
    uint64_t ch[3];
    const uint64_t ct[3] = {108, 256, 256};
    sm_output_chunk_v2(3, ct, 4, ch);
    assert_int_equal(ch[0], 4);
    assert_int_equal(ch[1], 256);
    assert_int_equal(ch[2], 256);
    /* y and x: powers of two within the shape, chunks spanning at most 4/3 of it (viewers tile
     * by powers of two: each tile fetches each file once) */
    const uint64_t small[3] = {3, 150, 100};
    sm_output_chunk_v2(3, small, 2, ch);
    assert_int_equal(ch[0], 3);
    assert_int_equal(ch[1], 64); /* 128: 256 / 150 > 4/3; 64: 192 / 150 */
    assert_int_equal(ch[2], 64); /* 128 > 100; 64: 128 / 100 */
    const uint64_t odd[3] = {9, 320, 3};
    sm_output_chunk_v2(3, odd, 2, ch);
    assert_int_equal(ch[0], 4);
    assert_int_equal(ch[1], 128); /* 256: 512 / 320; 128: 384 / 320 */
    assert_int_equal(ch[2], 2);   /* 2: 4 / 3, just within */
    assert_false(sm_output_pad_over(320, 128));
    assert_true(sm_output_pad_over(320, 256));
    const uint64_t big[3] = {2048, 2048, 2048}; /* uint16: 4 x 512 x 512 = 2 MiB a file */
    sm_output_chunk_v2(3, big, 2, ch);
    assert_int_equal(ch[0], 4);
    assert_int_equal(ch[1], 512);
    assert_int_equal(ch[2], 512);
    /* level 0 of an OME-NGFF 0.4 output: unsharded, Zarr v2, those chunks */
    struct sm_run_output o = ct_output(SM_RUN_OME_DOWN_YX, 3);
    o.ome.version = SM_RUN_OME_V04;
    struct sm_output_spec levels[SM_MAX_LEVELS];
    unsigned n = 0;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_ome_levels(&o, 3, ct, SM_DT_FLOAT32, levels, &n, &err), SM_OK);
    assert_int_equal(n, 3);
    assert_true(levels[0].zarr_v2 && !levels[0].sharded && levels[2].zarr_v2);
    assert_int_equal(levels[0].chunk[0], 4);
    assert_int_equal(levels[0].chunk[1], 256);
    assert_int_equal(levels[2].chunk[1], 64); /* level 2 is 108 x 64 x 64: the whole of y */
}

static void one_voxel_axes_are_kept(void **state)
{
    (void)state;
    /* a single slice: auto never doubles z's factor; its y and x halve to one voxel */
    const uint64_t slice[3] = {1, 5, 3};
    struct sm_run_output o = ct_output(SM_RUN_OME_DOWN_AUTO, 4);
    const uint64_t want[4][3] = {{1, 5, 3}, {1, 3, 2}, {1, 2, 1}, {1, 1, 1}};
    check_shapes(&o, slice, 4, want);
    uint64_t f[SM_MAX_LEVELS][SM_MAX_DIMS];
    sm_run_ome_factors(&o.ome, 3, slice, 4, f);
    assert_int_equal(f[3][0], 1);
    assert_int_equal(f[3][1], 8);
    assert_int_equal(f[3][2], 4); /* x reached one voxel at level 2 */
    o.ome.levels = 5;             /* a fifth level would halve nothing */
    struct sm_output_spec levels[SM_MAX_LEVELS];
    unsigned n = 0;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_ome_levels(&o, 3, slice, SM_DT_UINT16, levels, &n, &err), SM_E_USAGE);
    assert_string_equal(err.where, "output.ome.levels");
}

static void auto_levels_stop_at_256(void **state)
{
    (void)state;
    const uint64_t big[3] = {108, 1024, 1024};
    const struct sm_run_output o = ct_output(SM_RUN_OME_DOWN_AUTO, SM_RUN_OME_AUTO);
    const uint64_t want[3][3] = {{108, 1024, 1024}, {108, 512, 512}, {54, 256, 256}};
    check_shapes(&o, big, 3, want);
}

static const json_t *transform(const json_t *ms, unsigned k, unsigned i)
{
    const json_t *ds = json_array_get(json_object_get(ms, "datasets"), k);
    return json_array_get(json_object_get(ds, "coordinateTransformations"), i);
}

static void attrs_scale_translation_method_omero(void **state)
{
    (void)state;
    const uint64_t ct[3] = {108, 256, 256};
    struct sm_run_output o = ct_output(SM_RUN_OME_DOWN_AUTO, 3);
    o.ome.unit = "millimeter";
    o.ome.method = SM_RUN_OME_NEAREST;
    const struct sm_run_omero w = {true, 0.0, 65535.0, 0.0, 65535.0};
    json_t *a = sm_run_ome_attrs(&o.ome, 3, ct, 3, &w, NULL);
    assert_non_null(a);
    const json_t *ome = json_object_get(a, "ome");
    const json_t *ms = json_array_get(json_object_get(ome, "multiscales"), 0);
    /* level 0: a scale only (no origin given) */
    assert_int_equal(
        json_array_size(json_object_get(json_array_get(json_object_get(ms, "datasets"), 0),
                                        "coordinateTransformations")),
        1);
    /* level 2: factors [2, 4, 4] */
    const json_t *sc = json_object_get(transform(ms, 2, 0), "scale");
    const json_t *tr = json_object_get(transform(ms, 2, 1), "translation");
    assert_string_equal(json_string_value(json_object_get(transform(ms, 2, 1), "type")),
                        "translation");
    assert_true(json_real_value(json_array_get(sc, 0)) == 1.5 * 2);
    assert_true(json_real_value(json_array_get(sc, 1)) == 0.9570312 * 4);
    assert_true(json_real_value(json_array_get(tr, 0)) == 1.5 * 0.5);
    assert_true(json_real_value(json_array_get(tr, 2)) == 0.9570312 * 1.5);
    assert_string_equal(json_string_value(json_object_get(ms, "type")), "nearest");
    const json_t *md = json_object_get(ms, "metadata");
    assert_string_equal(json_string_value(json_object_get(md, "method")), "shardmill.nearest");
    assert_non_null(strchr(json_string_value(json_object_get(md, "description")), ' '));
    const json_t *ch =
        json_array_get(json_object_get(json_object_get(ome, "omero"), "channels"), 0);
    const json_t *win = json_object_get(ch, "window");
    assert_true(json_real_value(json_object_get(win, "end")) == 65535.0);
    assert_true(json_is_true(json_object_get(ch, "active")));
    assert_string_equal(json_string_value(json_object_get(ch, "color")), "FFFFFF");
    const json_t *ax = json_array_get(json_object_get(ms, "axes"), 0);
    assert_string_equal(json_string_value(json_object_get(ax, "unit")), "millimeter");
    json_decref(a);
}

static void levels_of(const struct sm_run_output *o, const uint64_t *shape, enum sm_dtype dt,
                      struct sm_output_spec *levels, unsigned n)
{
    unsigned got = 0;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_ome_levels(o, 3, shape, dt, levels, &got, &err), SM_OK);
    assert_int_equal(got, n);
}

/* SPEC §2.6 "Writing": with automatic shards a level takes level 0's shard / its factor (the
 * inner chunk where it divides that) while that divides and holds >= 512 KiB of values, or level
 * 0 is one shard; after the first level that cannot, each level has its own automatic layout. */
static void auto_shards_align_levels_with_level_0(void **state)
{
    (void)state;
    struct sm_run_output o = SM_RUN_OUTPUT_DEFAULTS;
    o.path = "unused";
    o.ome.levels = 4;
    o.ome.downsample = SM_RUN_OME_DOWN_ALL;
    struct sm_output_spec lv[SM_MAX_LEVELS];
    const uint64_t big[3] = {1024, 1024, 1024}; /* float32: 256 x 256 x 128 shards of 32 MiB */
    levels_of(&o, big, SM_DT_FLOAT32, lv, 4);
    const uint64_t want_shard[3][3] = {{256, 256, 128}, {128, 128, 64}, {64, 64, 32}};
    /* inner chunks 4 planes deep, y and x square and doubled up to 128 KiB (issue 35) */
    const uint64_t want_chunk[3][3] = {{4, 128, 128}, {4, 64, 64}, {4, 32, 32}};
    for (unsigned k = 0; k < 3; k++) {
        for (unsigned d = 0; d < 3; d++) {
            assert_int_equal(lv[k].shard[d], want_shard[k][d]);
            assert_int_equal(lv[k].chunk[d], want_chunk[k][d]);
        }
    }
    /* level 3 would be 32 x 32 x 16 (64 KiB): its own layout, one 128^3 shard */
    for (unsigned d = 0; d < 3; d++) {
        assert_int_equal(lv[3].shape[d], 128);
        assert_int_equal(lv[3].shard[d], 128);
    }
    /* the CT, one shard at level 0: every level aligned, however small */
    const uint64_t ct[3] = {108, 256, 256};
    struct sm_run_output c = ct_output(SM_RUN_OME_DOWN_AUTO, 3);
    levels_of(&c, ct, SM_DT_UINT16, lv, 3);
    assert_int_equal(lv[1].shard[1], lv[0].shard[1] / 2);
    assert_int_equal(lv[2].shard[0], lv[0].shard[0] / 2);
    assert_int_equal(lv[2].shard[2], lv[0].shard[2] / 4);
    /* an explicit shard is kept at every level */
    o.shard.set = true;
    o.shard.n = 3;
    for (unsigned d = 0; d < 3; d++) {
        o.shard.v[d] = 128;
    }
    levels_of(&o, big, SM_DT_FLOAT32, lv, 4);
    for (unsigned k = 0; k < 4; k++) {
        assert_int_equal(lv[k].shard[0], 128);
    }
}

/* Issue 35 item 3, from the layouts alone: at every level of the CT, 1024^3 and 48x320^2 (uint8,
 * uint16, float32; downsample auto, all, yx) the automatic inner chunk divides the shard, is at
 * most 4 planes deep with square power-of-two y and x, and bounds the bytes of the chunks a
 * full xy plane crosses (values with their padding, incompressible) at 8x the plane's and those
 * of the whole level at 2x; an explicit chunk is kept. */
static void inner_chunks_bound_plane_and_volume_reads(void **state)
{
    (void)state;
    const uint64_t ct[3] = {108, 256, 256}, big[3] = {1024, 1024, 1024}, odd[3] = {48, 320, 320};
    const uint64_t *shapes[3] = {ct, big, odd};
    const enum sm_dtype types[3] = {SM_DT_UINT8, SM_DT_UINT16, SM_DT_FLOAT32};
    const enum sm_run_ome_downsample modes[3] = {SM_RUN_OME_DOWN_AUTO, SM_RUN_OME_DOWN_ALL,
                                                 SM_RUN_OME_DOWN_YX};
    for (unsigned i = 0; i < 3; i++) {
        for (unsigned t = 0; t < 3; t++) {
            for (unsigned m = 0; m < 3; m++) {
                struct sm_run_output o = ct_output(modes[m], 3);
                struct sm_output_spec lv[SM_MAX_LEVELS];
                levels_of(&o, shapes[i], types[t], lv, 3);
                for (unsigned k = 0; k < 3; k++) {
                    const uint64_t *c = lv[k].chunk, *sh = lv[k].shard, *n = lv[k].shape;
                    double pad = 1.0; /* the chunks' extents over the level's, per axis */
                    for (unsigned d = 0; d < 3; d++) {
                        assert_int_equal(sh[d] % c[d], 0);
                        pad *= (double)(((n[d] + c[d] - 1) / c[d]) * c[d]) / (double)n[d];
                    }
                    assert_true(c[0] <= 4);
                    assert_int_equal(c[1], c[2]);
                    assert_int_equal(c[1] & (c[1] - 1), 0);
                    const double z_pad = (double)(((n[0] + c[0] - 1) / c[0]) * c[0]) / (double)n[0];
                    assert_true(pad / z_pad * (double)c[0] <= 8.0); /* one plane */
                    assert_true(pad <= 2.0);                        /* the level */
                }
            }
        }
    }
    struct sm_run_output o = ct_output(SM_RUN_OME_DOWN_AUTO, 3);
    o.chunk.set = true;
    o.chunk.n = 3;
    o.chunk.v[0] = o.chunk.v[1] = o.chunk.v[2] = 32;
    struct sm_output_spec lv[SM_MAX_LEVELS];
    levels_of(&o, ct, SM_DT_UINT16, lv, 3);
    for (unsigned k = 0; k < 3; k++) {
        assert_int_equal(lv[k].chunk[0], 32);
        assert_int_equal(lv[k].chunk[2], 32);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(auto_halves_the_fine_axes_first),
        cmocka_unit_test(all_halves_every_axis),
        cmocka_unit_test(yx_never_halves_z),
        cmocka_unit_test(v2_chunks_are_4_planes_deep),
        cmocka_unit_test(one_voxel_axes_are_kept),
        cmocka_unit_test(auto_levels_stop_at_256),
        cmocka_unit_test(attrs_scale_translation_method_omero),
        cmocka_unit_test(auto_shards_align_levels_with_level_0),
        cmocka_unit_test(inner_chunks_bound_plane_and_volume_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
