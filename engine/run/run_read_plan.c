/* Reading each input byte once per pass (docs/internals/reading.md): the output's shards grouped
 * by the input read blocks they share, the window a group is read into, what a pass reads, and
 * an automatic shard made shallow enough for a group's window to fit the memory budget. */
#include "run_int.h"

#include <stdio.h>
#include <string.h>

#include "shardmill/box.h"

/* Shards per group on one axis: the fewest whole shards whose run ends on a block boundary
 * (r * shard a multiple of block), all of the axis when none does first. Groups start at the
 * ROI's start; a ROI that starts inside a block shares one block between neighbouring groups,
 * which both read (counted in pass_bytes). */
static uint64_t group_run(uint64_t shard, uint64_t block, uint64_t nshards)
{
    if (block <= 1 || shard % block == 0) {
        return 1;
    }
    const uint64_t r = block / sm_gcd_u64(shard, block); /* r * shard = lcm(shard, block) */
    return r < nshards ? r : nshards;
}

static uint64_t mul_sat(uint64_t a, uint64_t b)
{
    return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

unsigned sm_run_read_windows(uint64_t window_bytes, uint64_t window_budget)
{
    /* the other buffers of a run (shards, levels, codecs) take about what one window does of the
     * rest: two windows only when both fit half of the window budget */
    return window_bytes > 0 && window_bytes <= window_budget / 4 ? 2 : 1;
}

/* A source read at any box reads a shard's box row by row: a shard narrower than the input's
 * last axis makes one read call per row of the shard, each of its width. Below this many bytes
 * per row the shards of a row of the grid along the last axis are one group, read as whole rows
 * (a strip's rows in one call), when that window fits a quarter of the window budget. */
#define SM_RUN_ROW_READ_MIN (64u * 1024u)

static uint64_t random_run(const struct sm_tiling *grid, unsigned d, size_t elem)
{
    const unsigned last = grid->ndim - 1;
    if (grid->ndim < 2 || d != last || grid->grid[d] < 2 ||
        (uint64_t)elem * grid->tile[d] >= SM_RUN_ROW_READ_MIN) {
        return 1;
    }
    return grid->grid[d];
}

/* A stream (.nii.gz) is inflated from its start to the end of a rank's box, so splitting it over
 * ranks does not shorten the read and makes every rank after the first inflate the bytes of the
 * ranks before it. The whole ROI is one group, on one rank, when the z slabs its plan holds fit
 * limits.memory_bytes; no window: the source serves the boxes from those slabs. */
static void stream_plan(const struct sm_array_meta *m, const struct sm_tiling *grid,
                        uint64_t memory_bytes, struct sm_read_plan *rp)
{
    const unsigned nd = grid->ndim;
    uint64_t roi = sm_dtype_size(m->dtype), slabs = sm_dtype_size(m->dtype);
    for (unsigned d = 0; d < nd; d++) {
        roi = mul_sat(roi, grid->roi_shape[d]);
        slabs = mul_sat(slabs, d == 0 ? grid->roi_shape[d] : m->shape[d]);
    }
    rp->roi_bytes = rp->pass_bytes = roi;
    rp->window_budget = memory_bytes == 0 ? UINT64_MAX : memory_bytes;
    const bool one = grid->ntiles > 1 && slabs <= rp->window_budget;
    struct sm_err ignored;
    (void)sm_tiling_init(&rp->groups, nd, m->shape, grid->roi_offset, grid->roi_shape,
                         one ? grid->roi_shape : grid->tile, &ignored);
    rp->window_bytes = one ? slabs : 0;
    rp->windowed = one;
    rp->windows = 1; /* the source holds the slabs: nothing to read ahead */
}

void sm_run_read_plan(const struct sm_array_meta *m, enum sm_source_access access,
                      const struct sm_tiling *grid, uint64_t memory_bytes, struct sm_read_plan *rp)
{
    memset(rp, 0, sizeof(*rp));
    const unsigned nd = grid->ndim;
    if (access == SM_SOURCE_STREAM) {
        stream_plan(m, grid, memory_bytes, rp);
        return;
    }
    struct sm_read_unit u;
    sm_read_unit_of(m, &u);
    const size_t elem = sm_dtype_size(m->dtype);
    uint64_t gtile[SM_MAX_DIMS], roi = elem, window = elem;
    bool several = false;
    for (unsigned d = 0; d < nd; d++) {
        const uint64_t r = access == SM_SOURCE_BLOCKS
                               ? group_run(grid->tile[d], u.shape[d], grid->grid[d])
                               : random_run(grid, d, elem);
        several = several || r > 1;
        gtile[d] = grid->tile[d] * r;
        roi = mul_sat(roi, grid->roi_shape[d]);
        window = mul_sat(window, gtile[d] < grid->roi_shape[d] ? gtile[d] : grid->roi_shape[d]);
    }
    struct sm_err ignored;
    /* the groups tile the grid's own ROI with whole shards: the same checks pass */
    (void)sm_tiling_init(&rp->groups, nd, m->shape, grid->roi_offset, grid->roi_shape, gtile,
                         &ignored);
    rp->roi_bytes = roi;
    rp->window_bytes = several ? window : 0;
    rp->window_budget = memory_bytes == 0 ? UINT64_MAX : memory_bytes / 2;
    /* a source read at any box needs no window: its rows are grouped only into a quarter of the
     * budget, so the read stays within what it read shard by shard */
    rp->windowed = several && window <= (access == SM_SOURCE_BLOCKS ? rp->window_budget
                                                                    : rp->window_budget / 4);
    rp->windows = rp->windowed ? sm_run_read_windows(window, rp->window_budget) : 1;
    if (access != SM_SOURCE_BLOCKS && !rp->windowed) { /* rows read shard by shard, as before */
        (void)sm_tiling_init(&rp->groups, nd, m->shape, grid->roi_offset, grid->roi_shape,
                             grid->tile, &ignored);
        rp->window_bytes = 0;
    }
    if (access != SM_SOURCE_BLOCKS) { /* every box reads its own bytes (a stream: its plan) */
        rp->pass_bytes = roi;
        return;
    }
    /* each group (windowed) or each shard (not) decodes every block it touches, whole */
    rp->pass_bytes = sm_tiling_total_cost(rp->windowed || !several ? &rp->groups : grid, &u);
}

/* How deep a shard may be on axis 0 for its group's window to fit: the largest multiple of the
 * chunk depth, at most the automatic shard's, whose window fits (0: none does). */
static uint64_t fitting_depth(const struct sm_array_meta *m, enum sm_source_access access,
                              const struct sm_tiling *grid, uint64_t chunk0, uint64_t memory_bytes)
{
    for (uint64_t depth = grid->tile[0]; depth >= chunk0 && depth > 0; depth -= chunk0) {
        struct sm_tiling g = *grid;
        g.tile[0] = depth;
        g.grid[0] = (g.roi_shape[0] + depth - 1) / depth;
        struct sm_read_plan rp;
        sm_run_read_plan(m, access, &g, memory_bytes, &rp);
        if (rp.window_bytes <= rp.window_budget) {
            return depth;
        }
    }
    return 0;
}

sm_status sm_run_input_layout(const struct sm_run_output *o, const struct sm_array_meta *m,
                              enum sm_source_access access, const struct sm_run_setup *s,
                              uint64_t memory_bytes, struct sm_tiling *grid,
                              struct sm_output_spec *spec, struct sm_read_plan *rp,
                              struct sm_err *err)
{
    struct sm_output_spec sp;
    SM_TRY(sm_run_shard_grid(o, m, s, grid, &sp, err));
    sm_run_read_plan(m, access, grid, memory_bytes, rp);
    const bool shard_auto = !o->shard.set && sp.sharded && m->ndim > 0;
    /* random access never needs a window (rows are grouped only when it fits): keep the shard */
    if (shard_auto && access == SM_SOURCE_BLOCKS && rp->window_bytes > rp->window_budget) {
        const uint64_t was = sp.shard[0];
        const uint64_t depth = fitting_depth(m, access, grid, sp.chunk[0], memory_bytes);
        if (depth != 0 && depth < was) {
            sp.shard[0] = depth;
            SM_TRY(sm_tiling_init(grid, m->ndim, m->shape, s->off, s->shape, sp.shard, err));
            sm_run_read_plan(m, access, grid, memory_bytes, rp);
            snprintf(rp->why, sizeof(rp->why),
                     "shard depth %llu, not %llu: a group of shards sharing input blocks is read "
                     "once into a window of %llu bytes, within half of limits.memory_bytes",
                     (unsigned long long)depth, (unsigned long long)was,
                     (unsigned long long)rp->window_bytes);
        } else {
            snprintf(rp->why, sizeof(rp->why),
                     "no shard depth fits a group's window (%llu bytes) in half of "
                     "limits.memory_bytes: each shard reads its input blocks whole",
                     (unsigned long long)rp->window_bytes);
        }
    } else if (shard_auto) {
        if (rp->windowed) {
            snprintf(rp->why, sizeof(rp->why),
                     "the default shard: a group's window of %llu bytes fits half of "
                     "limits.memory_bytes",
                     (unsigned long long)rp->window_bytes);
        } else {
            snprintf(rp->why, sizeof(rp->why),
                     "the default shard: no two shards share an input block");
        }
    }
    if (spec != NULL) {
        *spec = sp;
    }
    return SM_OK;
}

bool sm_run_cache_useful(const struct sm_array_meta *m, const struct sm_tiling *grid, bool two_pass,
                         enum sm_hist_range_from range_from, bool windowed)
{
    if (m == NULL || grid == NULL || two_pass || range_from == SM_HIST_RANGE_MINMAX || windowed) {
        return true; /* a second pass over the input, or groups cut from windows: may hit */
    }
    for (unsigned d = 0; d < m->ndim; d++) {
        /* the stored object grid (a sharded input's outer shard: its index and merged runs are
         * read per output shard that touches it) */
        const uint64_t c = m->chunk_shape[d];
        if (grid->tile[d] >= grid->roi_shape[d]) {
            continue; /* one output shard along this axis: no boundary inside the ROI */
        }
        if (c == 0 || grid->roi_offset[d] % c != 0 || grid->tile[d] % c != 0) {
            return true; /* an input object may straddle two output shards' boxes */
        }
    }
    return false;
}
