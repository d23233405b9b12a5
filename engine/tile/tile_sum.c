/* Closed-form sums of tile weights (tile_int.h). Along one axis, tile j covers
 * [o + j*t, o + min((j+1)*t, s)) of the ROI (offset o, extent s, tile side t) and touches the
 * read units (side u) from floor((o + j*t) / u) to floor((o + end - 1) / u). Consecutive tiles
 * share a unit unless the boundary between them falls on a unit boundary, so the units the first
 * k tiles touch, counted once per tile, are the span from the first tile's first unit to the
 * k-th tile's last unit, plus one for every inner boundary that is not aligned. The aligned
 * boundaries j*t + o = 0 (mod u), 1 <= j < k, are a linear congruence: counted, not walked. */
#include "tile_int.h"

#include "shardmill/box.h"

__extension__ typedef __int128 s128;

/* x with a*x = 1 (mod m), for a coprime to m > 1 (extended Euclid; |coefficients| <= m). */
static uint64_t inverse(uint64_t a, uint64_t m)
{
    s128 x0 = 0, x1 = 1;
    uint64_t r0 = m, r1 = a;
    while (r1 != 0) {
        const uint64_t q = r0 / r1, r = r0 - q * r1;
        const s128 x = x0 - (s128)q * x1;
        r0 = r1;
        r1 = r;
        x0 = x1;
        x1 = x;
    }
    return (uint64_t)(x0 < 0 ? x0 + (s128)m : x0);
}

/* How many j in [1, n] have (o + j*t) % u == 0. */
static uint64_t aligned_boundaries(uint64_t o, uint64_t t, uint64_t u, uint64_t n)
{
    if (n == 0 || u == 1) {
        return n;
    }
    const uint64_t g = sm_gcd_u64(t % u, u); /* sm_gcd_u64(0, u) = u */
    if (o % g != 0) {
        return 0;
    }
    const uint64_t m = u / g; /* j*(t/g) = -(o/g) (mod m), t/g invertible mod m */
    if (m == 1) {
        return n;
    }
    const uint64_t rhs = (m - (o / g) % m) % m;
    const uint64_t j0 = (uint64_t)((u128)rhs * inverse((t / g) % m, m) % m);
    const uint64_t j1 = j0 == 0 ? m : j0; /* the smallest positive solution */
    return j1 > n ? 0 : 1 + (n - j1) / m;
}

/* End (relative to the ROI) of the first k tiles along axis d, k >= 1. */
static uint64_t axis_end(const struct sm_tiling *t, unsigned d, uint64_t k)
{
    const u128 e = (u128)k * t->tile[d];
    return e < t->roi_shape[d] ? (uint64_t)e : t->roi_shape[d];
}

/* The weight factor of tile j along axis d: its extent, or the read units it touches. */
static u128 axis_weight(const struct sm_tiling *t, const struct sm_read_unit *u, unsigned d,
                        uint64_t j)
{
    const uint64_t start = j * t->tile[d], end = axis_end(t, d, j + 1);
    if (u == NULL) {
        return end - start;
    }
    const uint64_t o = t->roi_offset[d], us = u->shape[d];
    return (o + end - 1) / us - (o + start) / us + 1;
}

/* The sum of axis_weight over tiles [0, k) along axis d. */
static u128 axis_sum(const struct sm_tiling *t, const struct sm_read_unit *u, unsigned d,
                     uint64_t k)
{
    if (k == 0) {
        return 0;
    }
    const uint64_t end = axis_end(t, d, k);
    if (u == NULL) {
        return end;
    }
    const uint64_t o = t->roi_offset[d], us = u->shape[d];
    const u128 span = (o + end - 1) / us - o / us + 1;
    return span + (k - 1) - aligned_boundaries(o, t->tile[d], us, k - 1);
}

u128 sm_tiling_weight(const struct sm_tiling *t, const struct sm_read_unit *u, uint64_t index)
{
    u128 w = u != NULL ? u->bytes : 1;
    for (unsigned d = t->ndim; d-- > 0;) {
        w = mul_sat(w, axis_weight(t, u, d, index % t->grid[d]));
        index /= t->grid[d];
    }
    return w;
}

void sm_tiling_sums_init(struct sm_tiling_sums *s, const struct sm_tiling *t,
                         const struct sm_read_unit *u)
{
    s->t = t;
    s->u = u;
    s->after[t->ndim] = 1;
    for (unsigned d = t->ndim; d-- > 0;) {
        s->after[d] = mul_sat(s->after[d + 1], axis_sum(t, u, d, t->grid[d]));
    }
    s->total = t->ntiles == 0 ? 0 : mul_sat(s->after[0], u != NULL ? u->bytes : 1);
}

u128 sm_tiling_sums_before(const struct sm_tiling_sums *s, uint64_t index)
{
    const struct sm_tiling *t = s->t;
    if (index >= t->ntiles) {
        return s->total;
    }
    uint64_t idx[SM_MAX_DIMS];
    for (unsigned d = t->ndim; d-- > 0;) {
        idx[d] = index % t->grid[d];
        index /= t->grid[d];
    }
    /* Tiles before idx in C order: for each axis d, those that agree with idx on the axes
     * before d and lie before it on axis d, at any position on the axes after d. */
    u128 sum = 0, before = 1;
    for (unsigned d = 0; d < t->ndim; d++) {
        sum = add_sat(sum, mul_sat(mul_sat(before, axis_sum(t, s->u, d, idx[d])), s->after[d + 1]));
        before = mul_sat(before, axis_weight(t, s->u, d, idx[d]));
    }
    return mul_sat(sum, s->u != NULL ? s->u->bytes : 1);
}
