/* ROI tiling and the tiled scan driver (SPEC §1, §5): tiles of a fixed shape over a region of
 * interest in C order (edge tiles clipped), split across ranks, and a scan that reads every tile
 * with OpenMP threads into per-thread histograms and checksums merged in a fixed order, so the
 * result is identical for any thread count. */
#ifndef SM_TILE_TILE_H
#define SM_TILE_TILE_H

#include <stdbool.h>
#include <stdint.h>

#include "shardmill/array.h"
#include "shardmill/progress.h"
#include "shardmill/stats.h"
#include "shardmill/status.h"

struct sm_tiling {
    unsigned ndim;
    uint64_t roi_offset[SM_MAX_DIMS];
    uint64_t roi_shape[SM_MAX_DIMS];
    uint64_t tile[SM_MAX_DIMS];
    uint64_t grid[SM_MAX_DIMS]; /* tiles per axis */
    uint64_t ntiles;
};

/* Prepares the tiling of the ROI [offset, offset + shape) of an array of extent `array_shape`.
 * SM_E_USAGE naming `roi` if the ROI leaves the array, `tile` if a tile side is 0. */
sm_status sm_tiling_init(struct sm_tiling *t, unsigned ndim, const uint64_t *array_shape,
                         const uint64_t *offset, const uint64_t *shape, const uint64_t *tile,
                         struct sm_err *err);

/* The box of tile `index` (C order over the tile grid), clipped to the ROI. */
void sm_tiling_box(const struct sm_tiling *t, uint64_t index, uint64_t *offset, uint64_t *shape);

/* The bounding box of tiles [first, first + count) in array coordinates; true if their union is
 * exactly that box (as for whole rows, planes or slabs of the tile grid), false otherwise or if
 * count is 0. */
bool sm_tiling_run_box(const struct sm_tiling *t, uint64_t first, uint64_t count, uint64_t *offset,
                       uint64_t *shape);

/* The C-order run of tiles [first, first + count) as disjoint boxes, each exactly a union of
 * whole tiles (sm_tiling_run_box true), in C order: the end of the first row, plane, ..., the
 * whole slabs, then the start of the last ... row. Writes at most 2 * ndim - 1 boxes into
 * offset and shape and returns their number (0 when count is 0). */
#define SM_TILING_RUN_BOXES (2 * SM_MAX_DIMS - 1)
unsigned sm_tiling_run_boxes(const struct sm_tiling *t, uint64_t first, uint64_t count,
                             uint64_t (*offset)[SM_MAX_DIMS], uint64_t (*shape)[SM_MAX_DIMS]);

/* Contiguous split of n items over `nranks`: rank r gets [first, first + count). */
void sm_partition_block(uint64_t n, int nranks, int rank, uint64_t *first, uint64_t *count);

/* ---- the rank plan (tile_partition.c, docs/internals/ranks.md) ----
 * Both partitions hand every rank one contiguous C-order run of tiles (a shard grid is a tiling
 * of the ROI with the shard shape): `block` by count, `balanced` by cost, the decoded input
 * bytes a tile touches, so clipped edge tiles and tiles straddling more input chunks weigh what
 * they cost. The cost needs metadata only, never payload. */
enum sm_part_kind { SM_PART_BLOCK, SM_PART_BALANCED };

/* One rank's share: tiles [first, first + count) and their summed cost in input bytes. */
struct sm_part {
    uint64_t first, count, cost;
};

/* The input read unit of a tile cost: the chunk (the inner chunk of a sharded array), its
 * decoded size in bytes. */
struct sm_read_unit {
    uint64_t shape[SM_MAX_DIMS];
    uint64_t bytes;
};
void sm_read_unit_of(const struct sm_array_meta *m, struct sm_read_unit *u);

/* Tiles [first, first + count) of t in the order that keeps the tiles sharing an input read unit
 * together: by the read unit holding each tile's first voxel (C order of the unit grid), then by
 * index. A thread's chunk memo (below) then sees a unit's tiles one after another instead of once
 * per sweep of a whole plane of units (tiles smaller than the unit: [8,32,32] shards of 64^3
 * chunks decoded each chunk 8 times per thread in C order). Writes `count` indices into order;
 * SM_E_NOMEM only. */
sm_status sm_tiling_order_by_unit(const struct sm_tiling *t, const struct sm_read_unit *u,
                                  uint64_t first, uint64_t count, uint64_t *order,
                                  struct sm_err *err);

/* Decoded input bytes tile `index` of t touches: every read unit it intersects, whole. */
uint64_t sm_tiling_cost(const struct sm_tiling *t, const struct sm_read_unit *u, uint64_t index);
/* The sum of sm_tiling_cost over every tile of t (saturated), in O(sum of the grid's extents). */
uint64_t sm_tiling_total_cost(const struct sm_tiling *t, const struct sm_read_unit *u);

/* The shares of all `nranks` ranks (parts[nranks]). `balanced` puts the boundary between ranks
 * r-1 and r at the first tile whose preceding cost reaches r/nranks of the total, so each rank's
 * cost is within one tile's of the mean; with equal costs it equals `block`. Two passes over the
 * tiles, no allocation; every rank computes the same plan. */
void sm_partition_tiles(const struct sm_tiling *t, const struct sm_read_unit *u,
                        enum sm_part_kind kind, int nranks, struct sm_part *parts);

/* One rank's share by its rank: what sm_partition_shares lists. */
struct sm_rank_part {
    int rank;
    struct sm_part part;
};

/* The shares of sm_partition_tiles(t, u, kind, nranks) that hold tiles (count > 0), in rank
 * order, into out (room for min(nranks, ntiles)); returns their number. The ranks not listed get
 * nothing. Without the array of every rank: O(min(nranks, ntiles) + ntiles log nranks) time when
 * ranks outnumber tiles (`plan --ranks 1048576` of 64 shards), O(nranks log ntiles) otherwise;
 * no allocation. */
size_t sm_partition_shares(const struct sm_tiling *t, const struct sm_read_unit *u,
                           enum sm_part_kind kind, int nranks, struct sm_rank_part *out);

/* What one scan of tiles [first, first + count) produced. */
struct sm_scan_result {
    struct sm_hist hist; /* finished */
    struct sm_checksums sums;
    uint64_t voxels, tiles;
    uint64_t fetch_ns, decode_ns, process_ns; /* summed over threads */
};

/* A reader of boxes other than an array's chunks (a volume source, shardmill/source.h, as run/
 * hands it): `meta` gives the volume's ndim, shape and dtype; read fills [off, off + shape) with
 * C-order values, thread-safe (thread 0 .. threads - 1). */
struct sm_box_reader {
    const struct sm_array_meta *meta;
    sm_status (*read)(void *user, int thread, const uint64_t *off, const uint64_t *shape, void *out,
                      struct sm_err *err);
    void *user;
};

struct sm_scan_params {
    /* non-NULL: the tiles are read through it and sm_scan_tiles takes no array (a NULL `a`) */
    const struct sm_box_reader *reader;
    uint32_t bins;
    double lo, hi;
    int threads; /* <= 0: the OpenMP default */
    /* If non-NULL, every tile read is also copied here: the box [keep_offset, + keep_shape) in
     * array coordinates (C order, dtype values, product(keep_shape) * elem bytes), which holds
     * every tile scanned (e.g. the ROI, or a rank's run of tiles: sm_tiling_run_box), so a
     * later phase need not read the input again. */
    uint8_t *keep;
    uint64_t keep_offset[SM_MAX_DIMS], keep_shape[SM_MAX_DIMS];
    /* Bytes of the per-thread chunk memo (sm_chunk_memo_new; 0: none), part of the rank's
     * memory budget (sm_run_setup gives each thread its share). */
    uint64_t memo_bytes;
    /* The rank's budget (limits.memory_bytes; 0: unchecked): the tile buffers of all threads
     * must fit in it, else SM_E_LIMIT before anything is allocated or read. */
    uint64_t memory_bytes;
    /* If non-NULL, called after each tile with the tiles done and their decoded bytes. */
    sm_progress_fn progress;
    void *progress_user;
    /* If non-NULL, the cooperative stop flag (status.h): checked before every tile by every
     * thread; once set, the remaining tiles are skipped and the scan returns SM_E_STOPPED. */
    const atomic_int *stop;
    /* The min/max pass (SPEC §5): only hist.min and hist.max (sm_hist_add_minmax) and voxels
     * and tiles are counted; no bins, checksums or keep. */
    bool minmax_only;
};

/* Scans tiles of `t` with OpenMP threads. On failure the error reported is that of the lowest
 * failing tile index, so the message does not depend on the thread count; a stop (p->stop) is
 * SM_E_STOPPED unless a tile failed. `out` is initialised
 * by the call (sm_scan_result_destroy releases it, also after a failure). */
sm_status sm_scan_tiles(struct sm_array *a, const struct sm_tiling *t, uint64_t first,
                        uint64_t count, const struct sm_scan_params *p, struct sm_scan_result *out,
                        struct sm_err *err);
void sm_scan_result_destroy(struct sm_scan_result *r);

/* ---- the per-thread chunk memo (tile_memo.c) ----
 * The last decoded input read units (chunks, or inner chunks of a sharded input) of one thread,
 * so tiles or shards smaller than a unit do not decode it again. Bounded: at most 16 units, and
 * (units + 1 spare) * unit bytes <= max_bytes; a budget below two units gives no memo (NULL), and
 * sm_chunk_memo_read with a NULL memo is sm_array_read_region. One per thread, never shared. */
struct sm_chunk_memo;
/* The slots a memo of max_bytes gets for this array (0: none). */
unsigned sm_chunk_memo_slots(const struct sm_array_meta *m, uint64_t max_bytes);
sm_status sm_chunk_memo_new(const struct sm_array_meta *m, uint64_t max_bytes,
                            struct sm_chunk_memo **out, struct sm_err *err);
void sm_chunk_memo_free(struct sm_chunk_memo *mo);
/* sm_array_read_region of [off, off + shape) through the memo: units the region covers only in
 * part come from (or go to) the memo; a region that covers all its units whole is one plain
 * read. The values are those sm_array_read_region gives. */
sm_status sm_chunk_memo_read(struct sm_chunk_memo *mo, struct sm_array *a, const uint64_t *off,
                             const uint64_t *shape, void *dst, size_t len,
                             struct sm_scratch *scratch, struct sm_err *err);
/* Units found in the memo and units read into it, since sm_chunk_memo_new. */
void sm_chunk_memo_counts(const struct sm_chunk_memo *mo, uint64_t *hits, uint64_t *misses);

/* Threads a driver uses when none are configured: OpenMP's default (OMP_NUM_THREADS or the
 * cores), 1 without OpenMP. */
int sm_tile_default_threads(void);

#endif
