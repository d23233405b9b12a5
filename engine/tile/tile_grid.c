/* ROI tiling (SPEC §4 `roi`, `tile`): tiles of a fixed shape in C order, edge tiles clipped. */
#include "shardmill/tile.h"

#include <inttypes.h>
#include <string.h>

sm_status sm_tiling_init(struct sm_tiling *t, unsigned ndim, const uint64_t *array_shape,
                         const uint64_t *offset, const uint64_t *shape, const uint64_t *tile,
                         struct sm_err *err)
{
    memset(t, 0, sizeof(*t));
    t->ndim = ndim;
    t->ntiles = 1;
    for (unsigned d = 0; d < ndim; d++) {
        if (offset[d] > array_shape[d] || shape[d] > array_shape[d] - offset[d]) {
            sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                       "axis %u [%" PRIu64 ", %" PRIu64 ") leaves the array extent %" PRIu64, d,
                       offset[d], offset[d] + shape[d], array_shape[d]);
            sm_err_where(err, "roi");
            return err->status;
        }
        if (tile[d] == 0) {
            sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "tile side %u is 0", d);
            sm_err_where(err, "tile");
            return err->status;
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
