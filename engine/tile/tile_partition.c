/* The rank plan (SPEC §1 "plan = output shard grid over the ROI, partitioned across ranks";
 * docs/internals/ranks.md): contiguous C-order runs of tiles per rank, by count (`block`) or by
 * the decoded input bytes each tile touches (`balanced`). Contiguous runs keep each rank's reads
 * local (neighbouring tiles share input chunks and directories). Within a run, the order that
 * keeps the tiles of one input read unit together (for the per-thread chunk memo). */
#include "shardmill/tile.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardmill/alloc.h"

#include "tile_int.h"

static uint64_t sat64(u128 v)
{
    return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

void sm_partition_block(uint64_t n, int nranks, int rank, uint64_t *first, uint64_t *count)
{
    const uint64_t r = (uint64_t)rank, k = (uint64_t)nranks;
    const uint64_t base = n / k, extra = n % k;
    *first = r * base + (r < extra ? r : extra);
    *count = base + (r < extra ? 1 : 0);
}

void sm_read_unit_of(const struct sm_array_meta *m, struct sm_read_unit *u)
{
    memset(u, 0, sizeof(*u));
    const uint64_t *shape = m->inner_ndim > 0 ? m->inner_chunk_shape : m->chunk_shape;
    u->bytes = sm_dtype_size(m->dtype);
    for (unsigned d = 0; d < m->ndim; d++) {
        u->shape[d] = shape[d] > 0 ? shape[d] : 1;
        u->bytes *= u->shape[d];
    }
}

uint64_t sm_tiling_cost(const struct sm_tiling *t, const struct sm_read_unit *u, uint64_t index)
{
    return sat64(sm_tiling_weight(t, u, index));
}

uint64_t sm_tiling_total_cost(const struct sm_tiling *t, const struct sm_read_unit *u)
{
    struct sm_tiling_sums s;
    sm_tiling_sums_init(&s, t, u);
    return sat64(s.total);
}

struct unit_key {
    uint64_t unit, tile;
};

static int by_unit(const void *a, const void *b)
{
    const struct unit_key *x = a, *y = b;
    if (x->unit != y->unit) {
        return x->unit < y->unit ? -1 : 1;
    }
    return x->tile < y->tile ? -1 : x->tile > y->tile;
}

sm_status sm_tiling_order_by_unit(const struct sm_tiling *t, const struct sm_read_unit *u,
                                  uint64_t first, uint64_t count, uint64_t *order,
                                  struct sm_err *err)
{
    struct unit_key *k = sm_malloc((size_t)(count > 0 ? count : 1) * sizeof(*k));
    if (k == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot order %llu tiles", (unsigned long long)count);
    }
    for (uint64_t i = 0; i < count; i++) {
        uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS], lin = 0;
        sm_tiling_box(t, first + i, off, shape);
        for (unsigned d = 0; d < t->ndim; d++) {
            const uint64_t end = t->roi_offset[d] + t->roi_shape[d]; /* units up to the ROI's end */
            const uint64_t grid = (end + u->shape[d] - 1) / u->shape[d];
            lin = lin * grid + off[d] / u->shape[d];
        }
        k[i].unit = lin;
        k[i].tile = first + i;
    }
    qsort(k, (size_t)count, sizeof(*k), by_unit);
    for (uint64_t i = 0; i < count; i++) {
        order[i] = k[i].tile;
    }
    sm_free(k);
    return SM_OK;
}

/* The first tile rank r (1 <= r < nranks) owns, at or after lo: tile i goes to the rank whose
 * share of the cost holds the tile's midpoint, owner(i) = floor((prefix(i) + cost(i)/2) * nranks /
 * total), which never decreases with i, so every rank gets one contiguous run (ranks that own
 * nothing get an empty run where the next begins), and no rank's cost is more than a tile's off
 * the mean. A binary search on the closed-form prefix: O(log tiles), never a walk over tiles. */
static uint64_t first_owned(const struct sm_tiling_sums *s, int nranks, int r, uint64_t lo)
{
    const u128 goal = mul_sat(2 * (u128)r, s->total);
    uint64_t hi = s->t->ntiles; /* owner(i) >= r for some i < hi, or hi = ntiles */
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        const u128 before = sm_tiling_sums_before(s, mid); /* 2 x midpoint, below */
        const u128 mid2 = add_sat(add_sat(before, before), sm_tiling_weight(s->t, s->u, mid));
        if (mul_sat(mid2, (u128)nranks) >= goal) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return lo;
}

void sm_partition_tiles(const struct sm_tiling *t, const struct sm_read_unit *u,
                        enum sm_part_kind kind, int nranks, struct sm_part *parts)
{
    memset(parts, 0, (size_t)nranks * sizeof(*parts));
    struct sm_tiling_sums s;
    sm_tiling_sums_init(&s, t, u);
    if (kind == SM_PART_BLOCK || s.total == 0) {
        for (int r = 0; r < nranks; r++) {
            sm_partition_block(t->ntiles, nranks, r, &parts[r].first, &parts[r].count);
        }
    } else {
        for (int r = 1; r < nranks; r++) {
            parts[r].first = first_owned(&s, nranks, r, parts[r - 1].first);
        }
        for (int r = 0; r < nranks; r++) {
            const uint64_t next = r + 1 < nranks ? parts[r + 1].first : t->ntiles;
            parts[r].count = next - parts[r].first;
        }
    }
    for (int r = 0; r < nranks; r++) {
        parts[r].cost = sat64(sm_tiling_sums_before(&s, parts[r].first + parts[r].count) -
                              sm_tiling_sums_before(&s, parts[r].first));
    }
}

/* The rank owning tile i under `balanced`: the last r with first_owned(r) <= i, that is the last
 * r whose goal the tile's doubled midpoint reaches (the predicate first_owned searches on, which
 * grows with r), found by a binary search over the ranks. */
static int owner_of(const struct sm_tiling_sums *s, int nranks, uint64_t i)
{
    const u128 before = sm_tiling_sums_before(s, i);
    const u128 mid2 =
        mul_sat(add_sat(add_sat(before, before), sm_tiling_weight(s->t, s->u, i)), (u128)nranks);
    int lo = 0, hi = nranks - 1; /* rank 0 always qualifies */
    while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (mid2 >= mul_sat(2 * (u128)mid, s->total)) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    return lo;
}

size_t sm_partition_shares(const struct sm_tiling *t, const struct sm_read_unit *u,
                           enum sm_part_kind kind, int nranks, struct sm_rank_part *out)
{
    struct sm_tiling_sums s;
    sm_tiling_sums_init(&s, t, u);
    size_t n = 0;
    if (kind == SM_PART_BLOCK || s.total == 0 || (uint64_t)nranks <= t->ntiles) {
        /* block's counts never grow with the rank; with no more ranks than tiles the closed
         * form per rank is at most O(ntiles) ranks anyway */
        struct sm_part p = {0, 0, 0};
        uint64_t next = 0; /* balanced: the first tile of rank r (rank 0's is 0) */
        for (int r = 0; r < nranks; r++) {
            if (kind == SM_PART_BLOCK || s.total == 0) {
                sm_partition_block(t->ntiles, nranks, r, &p.first, &p.count);
                if (p.count == 0) {
                    break;
                }
            } else {
                p.first = next;
                next = r + 1 < nranks ? first_owned(&s, nranks, r + 1, p.first) : t->ntiles;
                p.count = next - p.first;
                if (p.count == 0) {
                    continue;
                }
            }
            p.cost = sat64(sm_tiling_sums_before(&s, p.first + p.count) -
                           sm_tiling_sums_before(&s, p.first));
            out[n].rank = r;
            out[n].part = p;
            n++;
        }
        return n;
    }
    for (uint64_t i = 0; i < t->ntiles; i++) {
        const int r = owner_of(&s, nranks, i);
        if (n > 0 && out[n - 1].rank == r) {
            out[n - 1].part.count++;
            continue;
        }
        out[n].rank = r;
        out[n].part.first = i;
        out[n].part.count = 1;
        n++;
    }
    for (size_t k = 0; k < n; k++) {
        struct sm_part *p = &out[k].part;
        p->cost = sat64(sm_tiling_sums_before(&s, p->first + p->count) -
                        sm_tiling_sums_before(&s, p->first));
    }
    return n;
}
