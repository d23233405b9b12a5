/* Unit tests for the closed-form plan (tile_sum.c): the rank plan and the run box come from
 * per-axis sums, never from a walk over the tiles, so `plan` of a tiny zarr.json declaring 2^60
 * tiles costs O(ranks). Checked against the walk they replace (the reference below, the code of
 * 5789521) on many small tilings, and on a 2^60-tile grid no walk could finish. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/tile.h"

__extension__ typedef unsigned __int128 u128;

static void tiling(struct sm_tiling *t, unsigned nd, const uint64_t *shape, const uint64_t *off,
                   const uint64_t *roi, const uint64_t *tile)
{
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_tiling_init(t, nd, shape, off, roi, tile, &err), SM_OK);
}

/* The reference: a tile's cost from its box, the partition by walking every tile. */
static uint64_t ref_cost(const struct sm_tiling *t, const struct sm_read_unit *u, uint64_t i)
{
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS], units = 1;
    sm_tiling_box(t, i, off, shape);
    for (unsigned d = 0; d < t->ndim; d++) {
        units *= (off[d] + shape[d] - 1) / u->shape[d] - off[d] / u->shape[d] + 1;
    }
    return units * u->bytes;
}

static void ref_partition(const struct sm_tiling *t, const struct sm_read_unit *u,
                          enum sm_part_kind kind, int nranks, struct sm_part *parts)
{
    memset(parts, 0, (size_t)nranks * sizeof(*parts));
    u128 total = 0;
    for (uint64_t i = 0; i < t->ntiles; i++) {
        total += ref_cost(t, u, i);
    }
    if (kind == SM_PART_BLOCK || total == 0) {
        for (int r = 0; r < nranks; r++) {
            sm_partition_block(t->ntiles, nranks, r, &parts[r].first, &parts[r].count);
        }
    } else {
        u128 prefix = 0;
        int owner = 0;
        for (uint64_t i = 0; i < t->ntiles; i++) {
            const uint64_t c = ref_cost(t, u, i);
            const u128 o = ((2 * prefix + c) * (u128)nranks) / (2 * total);
            const int want = o >= (u128)nranks ? nranks - 1 : (int)o;
            while (owner < want) {
                parts[++owner].first = i;
            }
            parts[owner].count++;
            prefix += c;
        }
        for (int r = owner + 1; r < nranks; r++) {
            parts[r].first = t->ntiles;
        }
    }
    for (int r = 0; r < nranks; r++) {
        for (uint64_t i = parts[r].first; i < parts[r].first + parts[r].count; i++) {
            parts[r].cost += ref_cost(t, u, i);
        }
    }
}

static bool ref_run_box(const struct sm_tiling *t, uint64_t first, uint64_t count, uint64_t *lo,
                        uint64_t *shape)
{
    uint64_t hi[SM_MAX_DIMS], voxels = 0, box = 1;
    for (uint64_t i = first; i < first + count; i++) {
        uint64_t off[SM_MAX_DIMS], shp[SM_MAX_DIMS], n = 1;
        sm_tiling_box(t, i, off, shp);
        for (unsigned d = 0; d < t->ndim; d++) {
            lo[d] = i == first || off[d] < lo[d] ? off[d] : lo[d];
            hi[d] = i == first || off[d] + shp[d] > hi[d] ? off[d] + shp[d] : hi[d];
            n *= shp[d];
        }
        voxels += n;
    }
    for (unsigned d = 0; d < t->ndim; d++) {
        shape[d] = hi[d] - lo[d];
        box *= shape[d];
    }
    return box == voxels;
}

/* sm_tiling_run_boxes: at most 2 nd - 1 exact boxes, in C order, that hold every tile of the
 * run once and no other tile (each tile's first voxel in exactly one box, only for the run's). */
static void check_run_boxes(const struct sm_tiling *t, uint64_t first, uint64_t count)
{
    uint64_t bo[SM_TILING_RUN_BOXES][SM_MAX_DIMS], bs[SM_TILING_RUN_BOXES][SM_MAX_DIMS];
    const unsigned n = sm_tiling_run_boxes(t, first, count, bo, bs);
    assert_true(n >= 1 && n <= 2 * t->ndim - 1);
    for (uint64_t i = 0; i < t->ntiles; i++) {
        uint64_t off[SM_MAX_DIMS], shp[SM_MAX_DIMS];
        sm_tiling_box(t, i, off, shp);
        unsigned in = 0, whole = 0;
        for (unsigned b = 0; b < n; b++) {
            bool at = true, all = true;
            for (unsigned d = 0; d < t->ndim; d++) {
                at = at && off[d] >= bo[b][d] && off[d] < bo[b][d] + bs[b][d];
                all = all && off[d] + shp[d] <= bo[b][d] + bs[b][d];
            }
            in += at;
            whole += at && all;
        }
        const bool mine = i >= first && i < first + count;
        assert_int_equal(in, mine ? 1 : 0);
        assert_int_equal(whole, in);
    }
    uint64_t at = first; /* in C order: each box starts at the run's next tile */
    for (unsigned b = 0; b < n; b++) {
        uint64_t off[SM_MAX_DIMS], shp[SM_MAX_DIMS], tiles = 1;
        sm_tiling_box(t, at, off, shp);
        assert_memory_equal(off, bo[b], t->ndim * sizeof(uint64_t));
        for (unsigned d = 0; d < t->ndim; d++) {
            tiles *= (bs[b][d] + t->tile[d] - 1) / t->tile[d];
        }
        at += tiles;
    }
    assert_int_equal(at, first + count);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd(uint64_t n) /* uniform-ish in [0, n) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state % n;
}

/* Random 1-3-d ROIs, tiles and read units (aligned or not, larger or smaller than the tiles):
 * every rank count's plan, every tile's cost and the box of random runs equal the walk's. */
static void test_closed_form_equals_the_walk(void **state)
{
    (void)state;
    for (int iter = 0; iter < 3000; iter++) {
        const unsigned nd = 1 + (unsigned)rnd(3);
        uint64_t shape[3], off[3], roi[3], tile[3];
        struct sm_read_unit u;
        memset(&u, 0, sizeof(u));
        u.bytes = 1 + rnd(8);
        for (unsigned d = 0; d < nd; d++) {
            shape[d] = 1 + rnd(40);
            off[d] = rnd(shape[d]);
            roi[d] = rnd(shape[d] - off[d] + 1); /* may be 0 */
            tile[d] = 1 + rnd(12);
            u.shape[d] = 1 + rnd(12);
            u.bytes *= u.shape[d];
        }
        struct sm_tiling t;
        tiling(&t, nd, shape, off, roi, tile);
        for (uint64_t i = 0; i < t.ntiles; i++) {
            assert_int_equal(sm_tiling_cost(&t, &u, i), ref_cost(&t, &u, i));
        }
        for (int n = 1; n <= 9; n++) {
            struct sm_part got[9], want[9];
            const enum sm_part_kind kind = iter % 4 == 0 ? SM_PART_BLOCK : SM_PART_BALANCED;
            sm_partition_tiles(&t, &u, kind, n, got);
            ref_partition(&t, &u, kind, n, want);
            for (int r = 0; r < n; r++) {
                assert_int_equal(got[r].first, want[r].first);
                assert_int_equal(got[r].count, want[r].count);
                assert_int_equal(got[r].cost, want[r].cost);
            }
        }
        for (int k = 0; k < 8 && t.ntiles > 0; k++) {
            const uint64_t first = rnd(t.ntiles), count = 1 + rnd(t.ntiles - first);
            uint64_t go[3], gs[3], wo[3], ws[3];
            const bool g = sm_tiling_run_box(&t, first, count, go, gs);
            const bool w = ref_run_box(&t, first, count, wo, ws);
            assert_int_equal(g, w);
            assert_memory_equal(go, wo, nd * sizeof(uint64_t));
            assert_memory_equal(gs, ws, nd * sizeof(uint64_t));
            check_run_boxes(&t, first, count);
        }
    }
}

/* The repro of issue 19: [2^20]^3 voxels in tiles of 1 (2^60 tiles). The walk took forever;
 * the closed form gives exact totals. With 64^3 read units every tile costs one unit, so
 * `balanced` equals `block`; 3-voxel units make the costs uneven yet exactly known. */
static void test_two_to_the_sixty_tiles(void **state)
{
    (void)state;
    const uint64_t side = (uint64_t)1 << 20, shape[3] = {side, side, side}, zero[3] = {0};
    const uint64_t one[3] = {1, 1, 1};
    struct sm_tiling t;
    tiling(&t, 3, shape, zero, shape, one);
    assert_true(t.ntiles == (uint64_t)1 << 60);
    const struct sm_read_unit u = {{64, 64, 64}, 64 * 64 * 64};
    struct sm_part p[4];
    sm_partition_tiles(&t, &u, SM_PART_BALANCED, 4, p);
    for (int r = 0; r < 4; r++) {
        assert_true(p[r].first == (uint64_t)r << 58 && p[r].count == (uint64_t)1 << 58);
        assert_true(p[r].cost == UINT64_MAX); /* 2^58 x 2^18 bytes saturates */
    }
    const struct sm_read_unit bytes = {{1, 1, 1}, 1};
    sm_partition_tiles(&t, &bytes, SM_PART_BLOCK, 3, p);
    uint64_t sum = 0;
    for (int r = 0; r < 3; r++) {
        assert_int_equal(p[r].cost, p[r].count);
        sum += p[r].count;
    }
    assert_true(sum == (uint64_t)1 << 60);
    uint64_t bo[3], bs[3];
    assert_true(sm_tiling_run_box(&t, 0, t.ntiles, bo, bs)); /* the whole volume */
    assert_true(bs[0] == side && bs[1] == side && bs[2] == side);
    assert_true(sm_tiling_run_box(&t, p[1].first, side * side, bo, bs) ==
                (p[1].first % (side * side) == 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closed_form_equals_the_walk),
        cmocka_unit_test(test_two_to_the_sixty_tiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
