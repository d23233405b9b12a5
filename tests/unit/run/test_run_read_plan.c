/* Unit tests for the read plan (run_read_plan.c, docs/internals/reading.md): shards grouped by the
 * input blocks they share (a slice read whole, tiles wider than a shard, chunks inside a shard),
 * the window a group needs and whether it fits, the bytes one pass decodes, and an automatic shard
 * made shallow enough for its group's window. The bytes a run actually reads are checked against
 * the kernel's count by tests/convert/ and bench/read_once/. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "run_int.h"
#include "shardmill/pipeline.h"

#define MIB (1024ull * 1024ull)

static struct sm_array_meta volume(uint64_t z, uint64_t y, uint64_t x, uint64_t bz, uint64_t by,
                                   uint64_t bx)
{
    struct sm_array_meta m;
    memset(&m, 0, sizeof(m));
    m.ndim = 3;
    m.dtype = SM_DT_UINT16;
    m.shape[0] = z;
    m.shape[1] = y;
    m.shape[2] = x;
    m.chunk_shape[0] = bz;
    m.chunk_shape[1] = by;
    m.chunk_shape[2] = bx;
    return m;
}

static struct sm_tiling shards(const struct sm_array_meta *m, const uint64_t *off,
                               const uint64_t *shape, uint64_t sz, uint64_t sy, uint64_t sx)
{
    struct sm_tiling t;
    struct sm_err err;
    sm_err_clear(&err);
    const uint64_t tile[3] = {sz, sy, sx};
    const uint64_t zero[3] = {0, 0, 0};
    assert_int_equal(sm_tiling_init(&t, 3, m->shape, off != NULL ? off : zero,
                                    shape != NULL ? shape : m->shape, tile, &err),
                     SM_OK);
    return t;
}

/* One strip per slice: every shard of a z slab shares the slab's slices, so the group is the
 * slab, read once into a window of the slab's bytes. */
static void a_slice_read_whole_groups_a_slab(void **state)
{
    (void)state;
    const struct sm_array_meta m = volume(64, 1024, 1024, 1, 1024, 1024);
    const struct sm_tiling g = shards(&m, NULL, NULL, 64, 128, 128);
    struct sm_read_plan rp;
    sm_run_read_plan(&m, SM_SOURCE_BLOCKS, &g, 4096 * MIB, &rp);
    assert_int_equal(rp.groups.ntiles, 1);
    assert_int_equal(rp.groups.tile[1], 1024);
    assert_int_equal(rp.window_bytes, 64 * 1024 * 1024 * 2);
    assert_true(rp.windowed);
    assert_int_equal(rp.pass_bytes, rp.roi_bytes);
}

/* The same slab with too little memory for its window: each of the 64 shards decodes the 64
 * slices whole, and the plan says so (64 times the volume). */
static void a_window_that_does_not_fit_reads_per_shard(void **state)
{
    (void)state;
    const struct sm_array_meta m = volume(64, 1024, 1024, 1, 1024, 1024);
    const struct sm_tiling g = shards(&m, NULL, NULL, 64, 128, 128);
    struct sm_read_plan rp;
    sm_run_read_plan(&m, SM_SOURCE_BLOCKS, &g, 128 * MIB, &rp);
    assert_false(rp.windowed);
    assert_int_equal(rp.window_budget, 64 * MIB);
    assert_int_equal(rp.pass_bytes, 64 * rp.roi_bytes);
}

/* Chunks that tile the shards, and sources read at any box with rows of at least 64 KiB in a
 * shard: no group, no window, each byte once. */
static void aligned_or_random_access_needs_no_group(void **state)
{
    (void)state;
    const struct sm_array_meta m = volume(256, 512, 512, 64, 64, 64);
    const struct sm_tiling g = shards(&m, NULL, NULL, 128, 256, 256);
    struct sm_read_plan rp;
    sm_run_read_plan(&m, SM_SOURCE_BLOCKS, &g, 0, &rp);
    assert_false(rp.windowed);
    assert_int_equal(rp.groups.ntiles, g.ntiles);
    assert_int_equal(rp.pass_bytes, rp.roi_bytes);
    const struct sm_array_meta raw = volume(4, 1024, 65536, 1, 1024, 65536);
    const struct sm_tiling rg = shards(&raw, NULL, NULL, 4, 128, 32768);
    sm_run_read_plan(&raw, SM_SOURCE_RANDOM, &rg, 0, &rp);
    assert_false(rp.windowed);
    assert_int_equal(rp.groups.ntiles, rg.ntiles);
    assert_int_equal(rp.pass_bytes, rp.roi_bytes);
}

/* A source read at any box with shards narrower than a row (256 bytes of a 2 KiB row): each
 * shard would read one row at a time, 256 bytes a call; the shards of a row of the grid along x
 * are one group, read as whole rows, when its window fits a quarter of the window budget; else
 * each shard reads its own rows. */
static void random_access_groups_narrow_rows(void **state)
{
    (void)state;
    const struct sm_array_meta raw = volume(64, 1024, 1024, 1, 1024, 1024);
    const struct sm_tiling rg = shards(&raw, NULL, NULL, 64, 128, 128);
    struct sm_read_plan rp;
    sm_run_read_plan(&raw, SM_SOURCE_RANDOM, &rg, 0, &rp);
    assert_true(rp.windowed);
    assert_int_equal(rp.groups.tile[0], 64);
    assert_int_equal(rp.groups.tile[1], 128);
    assert_int_equal(rp.groups.tile[2], 1024);
    assert_int_equal(rp.groups.ntiles, 8);
    assert_int_equal(rp.window_bytes, 64 * 128 * 1024 * 2);
    assert_int_equal(rp.pass_bytes, rp.roi_bytes);
    sm_run_read_plan(&raw, SM_SOURCE_RANDOM, &rg, 64 * MIB, &rp); /* 16 MiB > a quarter of 32 */
    assert_false(rp.windowed);
    assert_int_equal(rp.groups.ntiles, rg.ntiles);
    assert_int_equal(rp.window_bytes, 0);
    assert_int_equal(rp.pass_bytes, rp.roi_bytes);
}

/* Two windows when two fit half of the window budget: the next group is read while the current
 * one is processed. A 64 MiB slab window: 512 MiB (budget 256 MiB) reads ahead, 384 MiB (192)
 * does not. */
static void the_next_group_is_read_ahead_when_two_windows_fit(void **state)
{
    (void)state;
    assert_int_equal(sm_run_read_windows(64 * MIB, 256 * MIB), 2);
    assert_int_equal(sm_run_read_windows(64 * MIB, 192 * MIB), 1);
    assert_int_equal(sm_run_read_windows(0, 96 * MIB), 1);
    const struct sm_array_meta m = volume(128, 1024, 1024, 1, 1024, 1024);
    const struct sm_tiling g = shards(&m, NULL, NULL, 32, 128, 128);
    struct sm_read_plan rp;
    sm_run_read_plan(&m, SM_SOURCE_BLOCKS, &g, 512 * MIB, &rp);
    assert_true(rp.windowed);
    assert_int_equal(rp.window_bytes, 64 * MIB);
    assert_int_equal(rp.windows, 2);
    sm_run_read_plan(&m, SM_SOURCE_BLOCKS, &g, 384 * MIB, &rp);
    assert_true(rp.windowed);
    assert_int_equal(rp.windows, 1);
    sm_run_read_plan(&m, SM_SOURCE_STREAM, &g, 1024 * MIB, &rp); /* the source holds the slabs */
    assert_int_equal(rp.windows, 1);
}

/* 512-wide tiles over 256-wide shards: a group is 2 x 2 shards of one slab; 384-wide tiles need
 * 3 shards (768, their least common multiple) on each axis. */
static void tiles_wider_than_a_shard_group_by_their_multiple(void **state)
{
    (void)state;
    const struct sm_array_meta m = volume(128, 2048, 2048, 1, 512, 512);
    const struct sm_tiling g = shards(&m, NULL, NULL, 64, 256, 256);
    struct sm_read_plan rp;
    sm_run_read_plan(&m, SM_SOURCE_BLOCKS, &g, 0, &rp);
    assert_true(rp.windowed);
    assert_int_equal(rp.groups.tile[0], 64);
    assert_int_equal(rp.groups.tile[1], 512);
    assert_int_equal(rp.groups.tile[2], 512);
    assert_int_equal(rp.groups.ntiles, 2 * 4 * 4);
    assert_int_equal(rp.pass_bytes, rp.roi_bytes);
    const struct sm_array_meta odd = volume(64, 2304, 2304, 1, 384, 384);
    const struct sm_tiling og = shards(&odd, NULL, NULL, 64, 256, 256);
    sm_run_read_plan(&odd, SM_SOURCE_BLOCKS, &og, 0, &rp);
    assert_int_equal(rp.groups.tile[1], 768);
    assert_int_equal(rp.pass_bytes, rp.roi_bytes);
}

/* A ROI that starts inside a block: the groups start at the ROI, so the block across each group
 * boundary is read by both groups, and pass_bytes counts it. */
static void a_roi_inside_a_block_counts_the_shared_blocks(void **state)
{
    (void)state;
    const struct sm_array_meta m = volume(256, 256, 256, 64, 256, 256);
    const uint64_t off[3] = {32, 0, 0}, shape[3] = {192, 256, 256};
    const struct sm_tiling g = shards(&m, off, shape, 32, 256, 256);
    struct sm_read_plan rp;
    sm_run_read_plan(&m, SM_SOURCE_BLOCKS, &g, 0, &rp);
    assert_int_equal(rp.groups.tile[0], 64);
    /* groups [32,96) [96,160) [160,224): blocks 0-1, 1-2, 2-3: six blocks of 64 slices */
    assert_int_equal(rp.pass_bytes, 6 * 64 * 256 * 256 * 2);
    assert_int_equal(rp.roi_bytes, 192 * 256 * 256 * 2);
}

/* A stream is one group on one rank when its slabs fit the budget (its plan holds them), so it is
 * inflated once; otherwise each rank inflates up to the end of its own box. */
static void a_stream_is_one_group_when_it_fits(void **state)
{
    (void)state;
    const struct sm_array_meta m = volume(64, 128, 128, 1, 128, 128);
    const struct sm_tiling g = shards(&m, NULL, NULL, 16, 64, 64);
    struct sm_read_plan rp;
    sm_run_read_plan(&m, SM_SOURCE_STREAM, &g, 4 * MIB, &rp);
    assert_true(rp.windowed);
    assert_int_equal(rp.groups.ntiles, 1);
    assert_int_equal(rp.window_bytes, 64 * 128 * 128 * 2);
    assert_int_equal(rp.pass_bytes, rp.roi_bytes);
    sm_run_read_plan(&m, SM_SOURCE_STREAM, &g, 1 * MIB, &rp);
    assert_false(rp.windowed);
    assert_int_equal(rp.groups.ntiles, g.ntiles);
}

/* output.shard auto: a 256-deep shard's slab window (128 MiB) does not fit half of 64 MiB, a
 * 64-deep one (32 MiB) does; an explicit shard is never changed. */
static void an_automatic_shard_is_made_shallow_enough(void **state)
{
    (void)state;
    const struct sm_array_meta m = volume(256, 512, 512, 1, 512, 512);
    struct sm_run_setup su;
    memset(&su, 0, sizeof(su));
    memcpy(su.shape, m.shape, sizeof(su.shape));
    struct sm_run_output o = SM_RUN_OUTPUT_DEFAULTS;
    o.path = "unused";
    o.dtype_set = true;
    o.dtype = SM_DT_UINT16;
    struct sm_tiling grid;
    struct sm_output_spec spec;
    struct sm_read_plan rp;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_input_layout(&o, &m, SM_SOURCE_BLOCKS, &su, 0, &grid, &spec, &rp, &err),
                     SM_OK);
    const uint64_t deep = spec.shard[0];
    assert_true(deep > 64);
    assert_int_equal(
        sm_run_input_layout(&o, &m, SM_SOURCE_BLOCKS, &su, 64 * MIB, &grid, &spec, &rp, &err),
        SM_OK);
    assert_int_equal(spec.shard[0], 64);
    assert_int_equal(grid.tile[0], 64);
    assert_true(rp.windowed);
    assert_true(rp.window_bytes <= 32 * MIB);
    assert_non_null(strstr(rp.why, "shard depth 64"));
    o.shard.set = true;
    o.shard.n = 3;
    o.shard.v[0] = 256;
    o.shard.v[1] = 128;
    o.shard.v[2] = 128;
    assert_int_equal(
        sm_run_input_layout(&o, &m, SM_SOURCE_BLOCKS, &su, 64 * MIB, &grid, &spec, &rp, &err),
        SM_OK);
    assert_int_equal(spec.shard[0], 256);
    assert_false(rp.windowed);
    assert_string_equal(rp.why, "");
}

/* sm_run_cache_useful (SPEC §3.5): no object cache only when no input object can be read twice:
 * one pass, no min/max pass, no windows, and the output shards' boundaries inside the ROI on the
 * input's object grid (a shard covering an axis whole has none there). */
static void the_cache_is_useful_unless_each_object_is_read_once(void **state)
{
    (void)state;
    const struct sm_array_meta m = volume(512, 512, 512, 64, 64, 64);
    const enum sm_hist_range_from type = SM_HIST_RANGE_TYPE;
    const struct sm_tiling w5 = shards(&m, NULL, NULL, 64, 256, 256); /* W5: aligned */
    assert_false(sm_run_cache_useful(&m, &w5, false, type, false));
    assert_true(sm_run_cache_useful(&m, &w5, true, type, false)); /* percentile: two passes */
    assert_true(sm_run_cache_useful(&m, &w5, false, SM_HIST_RANGE_MINMAX, false));
    assert_true(sm_run_cache_useful(&m, &w5, false, type, true));       /* group windows */
    const struct sm_tiling half = shards(&m, NULL, NULL, 32, 256, 256); /* a chunk in 2 shards */
    assert_true(sm_run_cache_useful(&m, &half, false, type, false));
    const struct sm_tiling wide = shards(&m, NULL, NULL, 96, 512, 512); /* 96: no multiple */
    assert_true(sm_run_cache_useful(&m, &wide, false, type, false));
    /* a ROI off the chunk grid moves every boundary off it; one shard along an axis has none */
    const uint64_t off[3] = {16, 0, 0}, roi[3] = {256, 512, 512};
    const struct sm_tiling moved = shards(&m, off, roi, 64, 512, 512);
    assert_true(sm_run_cache_useful(&m, &moved, false, type, false));
    const struct sm_tiling whole = shards(&m, off, roi, 256, 512, 512);
    assert_false(sm_run_cache_useful(&m, &whole, false, type, false));
    /* a sharded input: its outer shard is the object grid */
    struct sm_array_meta sh = volume(512, 512, 512, 128, 128, 128);
    sh.inner_ndim = 3;
    sh.inner_chunk_shape[0] = sh.inner_chunk_shape[1] = sh.inner_chunk_shape[2] = 64;
    assert_true(sm_run_cache_useful(&sh, &w5, false, type, false));
    const struct sm_tiling outer = shards(&sh, NULL, NULL, 128, 256, 256);
    assert_false(sm_run_cache_useful(&sh, &outer, false, type, false));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_slice_read_whole_groups_a_slab),
        cmocka_unit_test(a_window_that_does_not_fit_reads_per_shard),
        cmocka_unit_test(aligned_or_random_access_needs_no_group),
        cmocka_unit_test(random_access_groups_narrow_rows),
        cmocka_unit_test(the_next_group_is_read_ahead_when_two_windows_fit),
        cmocka_unit_test(tiles_wider_than_a_shard_group_by_their_multiple),
        cmocka_unit_test(a_roi_inside_a_block_counts_the_shared_blocks),
        cmocka_unit_test(a_stream_is_one_group_when_it_fits),
        cmocka_unit_test(an_automatic_shard_is_made_shallow_enough),
        cmocka_unit_test(the_cache_is_useful_unless_each_object_is_read_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
