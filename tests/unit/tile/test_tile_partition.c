/* Unit tests for the rank plan (tile_partition.c): `block` splits by count, `balanced` by the
 * decoded input bytes each tile touches; both hand every rank one contiguous run and cover every
 * tile exactly once; costs count whole read units (inner chunks of a sharded input). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/meta.h"
#include "shardmill/tile.h"

static void tiling(struct sm_tiling *t, unsigned nd, const uint64_t *shape, const uint64_t *off,
                   const uint64_t *roi, const uint64_t *tile)
{
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_tiling_init(t, nd, shape, off, roi, tile, &err), SM_OK);
}

/* Every tile in exactly one rank, in rank order, and the reported costs are the tiles' costs. */
static void assert_cover(const struct sm_tiling *t, const struct sm_read_unit *u,
                         const struct sm_part *p, int n)
{
    uint64_t next = 0;
    for (int r = 0; r < n; r++) {
        assert_true(p[r].first == next || p[r].count == 0);
        if (p[r].count > 0) {
            next = p[r].first + p[r].count;
        }
        uint64_t cost = 0;
        for (uint64_t i = p[r].first; i < p[r].first + p[r].count; i++) {
            cost += sm_tiling_cost(t, u, i);
        }
        assert_int_equal(cost, p[r].cost);
    }
    assert_int_equal(next, t->ntiles);
}

static void test_block_is_the_count_split(void **state)
{
    (void)state;
    uint64_t first, count;
    sm_partition_block(10, 4, 0, &first, &count);
    assert_true(first == 0 && count == 3);
    sm_partition_block(10, 4, 1, &first, &count);
    assert_true(first == 3 && count == 3);
    sm_partition_block(10, 4, 3, &first, &count);
    assert_true(first == 8 && count == 2);
    sm_partition_block(2, 4, 3, &first, &count); /* more ranks than items */
    assert_true(first == 2 && count == 0);
}

static void test_read_unit_is_the_inner_chunk_of_a_sharded_array(void **state)
{
    (void)state;
    struct sm_array_meta m;
    memset(&m, 0, sizeof(m));
    m.ndim = 2;
    m.dtype = SM_DT_UINT16;
    m.chunk_shape[0] = 64;
    m.chunk_shape[1] = 64;
    struct sm_read_unit u;
    sm_read_unit_of(&m, &u);
    assert_true(u.shape[0] == 64 && u.shape[1] == 64 && u.bytes == 64 * 64 * 2);
    m.inner_ndim = 2;
    m.inner_chunk_shape[0] = 8;
    m.inner_chunk_shape[1] = 16;
    sm_read_unit_of(&m, &u);
    assert_true(u.shape[0] == 8 && u.shape[1] == 16 && u.bytes == 8 * 16 * 2);
}

static void test_cost_counts_every_unit_a_tile_touches(void **state)
{
    (void)state;
    /* ROI [3, 3) + [20, 20) of a 32x32 array in tiles of 10, chunks of 8 x 8 bytes */
    const uint64_t shape[2] = {32, 32}, off[2] = {3, 3}, roi[2] = {20, 20}, tile[2] = {10, 10};
    struct sm_tiling t;
    tiling(&t, 2, shape, off, roi, tile);
    const struct sm_read_unit u = {{8, 8}, 64};
    /* tile 0: rows/cols [3, 13) touch chunks 0..1 on each axis */
    assert_int_equal(sm_tiling_cost(&t, &u, 0), 2 * 2 * 64);
    /* tile 3: rows/cols [13, 23) touch chunks 1..2 */
    assert_int_equal(sm_tiling_cost(&t, &u, 3), 2 * 2 * 64);
    const struct sm_read_unit one = {{1, 1}, 4}; /* unit chunks: cost = voxels x 4 */
    assert_int_equal(sm_tiling_cost(&t, &one, 0), 100 * 4);
}

static void test_balanced_evens_out_clipped_edge_tiles(void **state)
{
    (void)state;
    /* 1-d ROI of 33 in tiles of 8: four full tiles and a clipped one of 1 element */
    const uint64_t shape[1] = {33}, off[1] = {0}, roi[1] = {33}, tile[1] = {8};
    struct sm_tiling t;
    tiling(&t, 1, shape, off, roi, tile);
    const struct sm_read_unit u = {{1}, 1};
    struct sm_part p[2];
    sm_partition_tiles(&t, &u, SM_PART_BLOCK, 2, p);
    assert_cover(&t, &u, p, 2);
    assert_true(p[0].count == 3 && p[1].count == 2); /* 24 vs 9 elements */
    sm_partition_tiles(&t, &u, SM_PART_BALANCED, 2, p);
    assert_cover(&t, &u, p, 2);
    assert_true(p[0].count == 2 && p[1].count == 3); /* 16 vs 17 elements */
    assert_int_equal(p[0].cost, 16);
    assert_int_equal(p[1].cost, 17);
}

static void test_balanced_is_within_one_tile_of_the_mean(void **state)
{
    (void)state;
    const uint64_t shape[3] = {100, 70, 90}, off[3] = {1, 2, 3}, roi[3] = {97, 61, 83};
    const uint64_t tile[3] = {8, 32, 32};
    struct sm_tiling t;
    tiling(&t, 3, shape, off, roi, tile);
    const struct sm_read_unit u = {{16, 16, 16}, 4096};
    uint64_t max_tile = 0, total = 0;
    for (uint64_t i = 0; i < t.ntiles; i++) {
        const uint64_t c = sm_tiling_cost(&t, &u, i);
        max_tile = c > max_tile ? c : max_tile;
        total += c;
    }
    for (int n = 1; n <= 7; n++) {
        struct sm_part p[7];
        sm_partition_tiles(&t, &u, SM_PART_BALANCED, n, p);
        assert_cover(&t, &u, p, n);
        for (int r = 0; r < n; r++) {
            const double dev = (double)p[r].cost - (double)total / n;
            assert_true(dev <= (double)max_tile && -dev <= (double)max_tile);
        }
    }
}

static void test_more_ranks_than_tiles_and_empty_rois(void **state)
{
    (void)state;
    const uint64_t shape[1] = {16}, off[1] = {0}, roi[1] = {16}, tile[1] = {8};
    struct sm_tiling t;
    tiling(&t, 1, shape, off, roi, tile);
    const struct sm_read_unit u = {{4}, 4};
    struct sm_part p[5];
    sm_partition_tiles(&t, &u, SM_PART_BALANCED, 5, p);
    assert_cover(&t, &u, p, 5);
    int busy = 0;
    for (int r = 0; r < 5; r++) {
        busy += p[r].count > 0;
        assert_true(p[r].count <= 1);
    }
    assert_int_equal(busy, 2);
    const uint64_t empty[1] = {0};
    tiling(&t, 1, shape, off, empty, tile);
    sm_partition_tiles(&t, &u, SM_PART_BALANCED, 3, p);
    for (int r = 0; r < 3; r++) {
        assert_true(p[r].count == 0 && p[r].cost == 0);
    }
}

static void test_run_box_is_exact_only_for_whole_rows_and_slabs(void **state)
{
    (void)state;
    /* 2 x 3 x 4 tiles of 2^3 over an 4x6x8 ROI at offset 1,1,1 */
    const uint64_t shape[3] = {9, 9, 9}, off[3] = {1, 1, 1}, roi[3] = {4, 6, 7},
                   tile[3] = {2, 2, 2};
    struct sm_tiling t;
    tiling(&t, 3, shape, off, roi, tile);
    uint64_t bo[3], bs[3];
    assert_true(sm_tiling_run_box(&t, 0, 12, bo, bs)); /* the first tile plane */
    assert_true(bo[0] == 1 && bo[1] == 1 && bo[2] == 1);
    assert_true(bs[0] == 2 && bs[1] == 6 && bs[2] == 7);
    assert_true(sm_tiling_run_box(&t, 4, 4, bo, bs)); /* one row, clipped last tile */
    assert_true(bo[1] == 3 && bs[1] == 2 && bs[2] == 7);
    assert_false(sm_tiling_run_box(&t, 2, 4, bo, bs)); /* half a row and half the next */
    assert_true(bo[1] == 1 && bs[1] == 4);             /* but the bounding box is filled */
    assert_true(sm_tiling_run_box(&t, 0, t.ntiles, bo, bs));
    assert_true(bs[0] == 4 && bs[1] == 6 && bs[2] == 7);
    assert_false(sm_tiling_run_box(&t, 3, 0, bo, bs));
}

/* [2,4] tiles of [4,8] read units over an 8x16 array (grid 4x4 tiles, 2x2 units): each unit
 * holds 2x2 tiles; the order visits them unit by unit, each unit's tiles in index order, and a
 * sub-run keeps that order within the run. */
static void test_order_by_unit_groups_the_tiles_of_a_unit(void **state)
{
    (void)state;
    const uint64_t shape[2] = {8, 16}, off[2] = {0, 0}, tile[2] = {2, 4};
    struct sm_tiling t;
    tiling(&t, 2, shape, off, shape, tile);
    const struct sm_read_unit u = {{4, 8}, 64};
    uint64_t order[16];
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_tiling_order_by_unit(&t, &u, 0, 16, order, &err), SM_OK);
    const uint64_t want[16] = {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15};
    assert_memory_equal(order, want, sizeof(want));
    assert_int_equal(sm_tiling_order_by_unit(&t, &u, 3, 6, order, &err), SM_OK);
    const uint64_t run[6] = {4, 5, 3, 6, 7, 8};
    assert_memory_equal(order, run, sizeof(run));
    /* units no larger than the tiles: C order unchanged */
    const struct sm_read_unit small = {{2, 4}, 16};
    assert_int_equal(sm_tiling_order_by_unit(&t, &small, 0, 16, order, &err), SM_OK);
    for (uint64_t i = 0; i < 16; i++) {
        assert_int_equal(order[i], i);
    }
}

/* sm_partition_shares lists exactly the non-empty shares of sm_partition_tiles, by rank, for
 * both kinds, fewer and more ranks than tiles (clipped edge tiles: unequal costs), an empty ROI,
 * and a million ranks over 60 tiles without an array of a million shares. */
static void test_shares_are_the_nonempty_parts(void **state)
{
    (void)state;
    const uint64_t shape[3] = {100, 70, 90}, off[3] = {1, 2, 3}, roi[3] = {97, 61, 83};
    const uint64_t tile[3] = {24, 32, 32};
    struct sm_tiling t;
    tiling(&t, 3, shape, off, roi, tile); /* 5 x 2 x 3 = 30 tiles */
    const struct sm_read_unit u = {{16, 16, 16}, 4096};
    static struct sm_part p[200];
    static struct sm_rank_part sh[200];
    const int counts[] = {1, 2, 7, 29, 30, 31, 45, 60, 61, 199};
    for (int kind = 0; kind < 2; kind++) {
        const enum sm_part_kind k = kind ? SM_PART_BALANCED : SM_PART_BLOCK;
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            const int n = counts[c];
            sm_partition_tiles(&t, &u, k, n, p);
            const size_t got = sm_partition_shares(&t, &u, k, n, sh);
            size_t want = 0;
            for (int r = 0; r < n; r++) {
                if (p[r].count == 0) {
                    continue;
                }
                assert_true(want < got);
                assert_int_equal(sh[want].rank, r);
                assert_int_equal(sh[want].part.first, p[r].first);
                assert_int_equal(sh[want].part.count, p[r].count);
                assert_int_equal(sh[want].part.cost, p[r].cost);
                want++;
            }
            assert_int_equal(got, want);
            assert_true(got <= (size_t)n && got <= t.ntiles);
        }
    }
    const int million = 1048576;
    size_t got = sm_partition_shares(&t, &u, SM_PART_BALANCED, million, sh);
    assert_int_equal(got, t.ntiles); /* one tile each, spread over the ranks */
    uint64_t next = 0;
    for (size_t i = 0; i < got; i++) {
        assert_true(i == 0 || sh[i].rank > sh[i - 1].rank);
        assert_true(sh[i].rank < million && sh[i].part.first == next && sh[i].part.count == 1);
        next++;
    }
    got = sm_partition_shares(&t, &u, SM_PART_BLOCK, million, sh);
    assert_int_equal(got, t.ntiles);
    assert_int_equal(sh[got - 1].rank, (int)t.ntiles - 1);
    const uint64_t empty[3] = {0, 0, 0};
    tiling(&t, 3, shape, off, empty, tile);
    assert_int_equal(sm_partition_shares(&t, &u, SM_PART_BALANCED, 5, sh), 0);
    assert_int_equal(sm_partition_shares(&t, &u, SM_PART_BLOCK, million, sh), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_is_the_count_split),
        cmocka_unit_test(test_read_unit_is_the_inner_chunk_of_a_sharded_array),
        cmocka_unit_test(test_cost_counts_every_unit_a_tile_touches),
        cmocka_unit_test(test_balanced_evens_out_clipped_edge_tiles),
        cmocka_unit_test(test_balanced_is_within_one_tile_of_the_mean),
        cmocka_unit_test(test_more_ranks_than_tiles_and_empty_rois),
        cmocka_unit_test(test_run_box_is_exact_only_for_whole_rows_and_slabs),
        cmocka_unit_test(test_order_by_unit_groups_the_tiles_of_a_unit),
        cmocka_unit_test(test_shares_are_the_nonempty_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
