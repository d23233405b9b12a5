/* ROI tiling (SPEC §4 `roi`, `tile`): tiles of a fixed shape in C order, edge tiles clipped. */
#include "shardmill/tile.h"

#include <inttypes.h>
#include <string.h>

#include "tile_int.h"

sm_status sm_tiling_init(struct sm_tiling *t, unsigned ndim, const uint64_t *array_shape,
                         const uint64_t *offset, const uint64_t *shape, const uint64_t *tile,
                         struct sm_err *err)
{
    memset(t, 0, sizeof(*t));
    t->ndim = ndim;
    t->ntiles = 1;
    for (unsigned d = 0; d < ndim; d++) {
        if (offset[d] > array_shape[d] || shape[d] > array_shape[d] - offset[d]) {
            SM_FAIL_AT(err, SM_E_USAGE, "roi",
                       "axis %u [%" PRIu64 ", %" PRIu64 ") leaves the array extent %" PRIu64, d,
                       offset[d], offset[d] + shape[d], array_shape[d]);
        }
        if (tile[d] == 0) {
            SM_FAIL_AT(err, SM_E_USAGE, "tile", "tile side %u is 0", d);
        }
        t->roi_offset[d] = offset[d];
        t->roi_shape[d] = shape[d];
        t->tile[d] = tile[d];
        t->grid[d] = (shape[d] + tile[d] - 1) / tile[d];
        t->ntiles *= t->grid[d];
    }
    return SM_OK;
}

void sm_tiling_box(const struct sm_tiling *t, uint64_t index, uint64_t *offset, uint64_t *shape)
{
    for (unsigned d = t->ndim; d-- > 0;) {
        uint64_t i = index % t->grid[d];
        index /= t->grid[d];
        uint64_t start = i * t->tile[d];
        uint64_t end = start + t->tile[d] < t->roi_shape[d] ? start + t->tile[d] : t->roi_shape[d];
        offset[d] = t->roi_offset[d] + start;
        shape[d] = end - start;
    }
}

/* The lowest and highest tile index along axis d among tiles [a, b] (C order): the run's
 * quotients by the stride of d are consecutive, so their residues are one interval unless the
 * run wraps around the axis, in which case it spans the whole axis. */
static void axis_range(const struct sm_tiling *t, unsigned d, uint64_t a, uint64_t b, uint64_t *lo,
                       uint64_t *hi)
{
    uint64_t stride = 1;
    for (unsigned e = d + 1; e < t->ndim; e++) {
        stride *= t->grid[e]; /* <= ntiles */
    }
    const uint64_t qa = a / stride, qb = b / stride, g = t->grid[d];
    const uint64_t ra = qa % g, rb = qb % g;
    if (qb - qa >= g - 1 || ra > rb) {
        *lo = 0;
        *hi = g - 1;
    } else {
        *lo = ra;
        *hi = rb;
    }
}

bool sm_tiling_run_box(const struct sm_tiling *t, uint64_t first, uint64_t count, uint64_t *offset,
                       uint64_t *shape)
{
    if (count == 0) {
        return false;
    }
    u128 box = 1;
    for (unsigned d = 0; d < t->ndim; d++) {
        uint64_t lo, hi;
        axis_range(t, d, first, first + count - 1, &lo, &hi);
        const u128 end = (u128)(hi + 1) * t->tile[d];
        offset[d] = t->roi_offset[d] + lo * t->tile[d];
        shape[d] = (end < t->roi_shape[d] ? (uint64_t)end : t->roi_shape[d]) - lo * t->tile[d];
        box = mul_sat(box, shape[d]);
    }
    /* disjoint tiles fill their bounding box iff the volumes agree */
    struct sm_tiling_sums s;
    sm_tiling_sums_init(&s, t, NULL);
    const u128 voxels = sm_tiling_sums_before(&s, first + count) - sm_tiling_sums_before(&s, first);
    return box == voxels;
}

unsigned sm_tiling_run_boxes(const struct sm_tiling *t, uint64_t first, uint64_t count,
                             uint64_t (*offset)[SM_MAX_DIMS], uint64_t (*shape)[SM_MAX_DIMS])
{
    uint64_t stride[SM_MAX_DIMS];
    for (unsigned d = t->ndim; d-- > 0;) {
        stride[d] = d + 1 < t->ndim ? stride[d + 1] * t->grid[d + 1] : 1; /* <= ntiles */
    }
    unsigned n = 0;
    const uint64_t end = first + count;
    for (uint64_t i = first; i < end && t->ndim > 0;) {
        /* the outermost axis whose whole slabs start at i and fit the rest of the run */
        unsigned d = 0;
        while (d + 1 < t->ndim && (i % stride[d] != 0 || stride[d] > end - i)) {
            d++;
        }
        uint64_t k = (end - i) / stride[d];
        if (d > 0) { /* not past the end of the enclosing slab of axis d - 1 */
            const uint64_t room = t->grid[d] - i / stride[d] % t->grid[d];
            k = k < room ? k : room;
        }
        (void)sm_tiling_run_box(t, i, k * stride[d], offset[n], shape[n]);
        n++;
        i += k * stride[d];
    }
    return n;
}
