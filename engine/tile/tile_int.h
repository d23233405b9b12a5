/* Internal to tile/: sums of tile weights in closed form (tile_sum.c), so that planning costs
 * O(ranks x dims), never O(tiles): a tiny zarr.json can declare 2^60 tiles. */
#ifndef SM_TILE_TILE_INT_H
#define SM_TILE_TILE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "shardmill/tile.h"

/* Exact weight arithmetic: a total of many 64-bit weights does not fit 64 bits. __extension__
 * keeps -Wpedantic quiet about the GCC/Clang 128-bit integer. Sums saturate at the maximum. */
__extension__ typedef unsigned __int128 u128;
#define TILE_U128_MAX (~(u128)0)

static inline u128 mul_sat(u128 a, u128 b)
{
    return a != 0 && b > TILE_U128_MAX / a ? TILE_U128_MAX : a * b;
}

static inline u128 add_sat(u128 a, u128 b)
{
    return a > TILE_U128_MAX - b ? TILE_U128_MAX : a + b;
}

/* Prefix sums of tile weights over t in C order: the decoded input bytes the tiles touch
 * (sm_tiling_cost) for a read unit u, their voxels for u == NULL. A tile's weight is a product
 * of one factor per axis, so the sum over a C-order prefix is a sum of ndim products of per-axis
 * prefix sums, each in closed form. t and u must outlive s. */
struct sm_tiling_sums {
    const struct sm_tiling *t;
    const struct sm_read_unit *u;
    u128 after[SM_MAX_DIMS + 1]; /* the weight sum over axes d.. of all tiles (no bytes factor) */
    u128 total;                  /* the weight of every tile */
};
void sm_tiling_sums_init(struct sm_tiling_sums *s, const struct sm_tiling *t,
                         const struct sm_read_unit *u);
/* The weight of tiles [0, index) (index >= t->ntiles: all tiles). */
u128 sm_tiling_sums_before(const struct sm_tiling_sums *s, uint64_t index);

/* The weight of tile `index` alone (u == NULL: its voxels). */
u128 sm_tiling_weight(const struct sm_tiling *t, const struct sm_read_unit *u, uint64_t index);

#endif
