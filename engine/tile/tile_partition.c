/* The rank plan (SPEC §1 "plan = output shard grid over the ROI, partitioned across ranks";
 * docs/internals/ranks.md): contiguous C-order runs of tiles per rank, by count (`block`) or by
 * the decoded input bytes each tile touches (`balanced`). Contiguous runs keep each rank's reads
 * local (neighbouring tiles share input chunks and directories). Within a run, the order that
 * keeps the tiles of one input read unit together (for the per-thread chunk memo). */
#include "shardmill/tile.h"

#include <stdlib.h>
#include <string.h>

#include "shardmill/alloc.h"

/* Exact cost arithmetic: a total of many 64-bit costs times the rank count does not fit 64 bits.
 * __extension__ keeps -Wpedantic quiet about the GCC/Clang 128-bit integer. */
__extension__ typedef unsigned __int128 u128;

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
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    sm_tiling_box(t, index, off, shape);
    uint64_t units = 1;
    for (unsigned d = 0; d < t->ndim; d++) {
        if (shape[d] == 0) {
            return 0;
        }
        units *= (off[d] + shape[d] - 1) / u->shape[d] - off[d] / u->shape[d] + 1;
    }
    return units * u->bytes;
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

void sm_partition_tiles(const struct sm_tiling *t, const struct sm_read_unit *u,
                        enum sm_part_kind kind, int nranks, struct sm_part *parts)
{
    memset(parts, 0, (size_t)nranks * sizeof(*parts));
    u128 total = 0;
    for (uint64_t i = 0; i < t->ntiles; i++) {
        total += sm_tiling_cost(t, u, i);
    }
    if (kind == SM_PART_BLOCK || total == 0) {
        for (int r = 0; r < nranks; r++) {
            sm_partition_block(t->ntiles, nranks, r, &parts[r].first, &parts[r].count);
        }
    } else {
        /* Tile i goes to the rank whose share of the cost holds the tile's midpoint: owner(i) =
         * floor((prefix(i) + cost(i)/2) * nranks / total). It never decreases with i, so every
         * rank gets one contiguous run, and no rank's cost is more than a tile's off the mean. */
        u128 prefix = 0;
        int owner = 0;
        parts[0].first = 0;
        for (uint64_t i = 0; i < t->ntiles; i++) {
            const uint64_t c = sm_tiling_cost(t, u, i);
            u128 o = ((2 * prefix + c) * (u128)nranks) / (2 * total);
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
            parts[r].cost += sm_tiling_cost(t, u, i);
        }
    }
}
