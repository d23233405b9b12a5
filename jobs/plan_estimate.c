/* The estimate of `shardmill plan` (plan_estimate.h). What it reads: the rates (a small JSON), and
 * for a convert at most SM_PLAN_SAMPLES output chunks' worth of input (through the array's region
 * read or the source's box read), normalized and encoded exactly as the write phase would, to
 * measure the codec's ratio on this data (plan_sample.c). Everything else follows from the
 * metadata: the output's levels and shard grids (the engine's own layout functions), the rank
 * plans, the buffers the engine allocates for them. */
#include "plan_estimate.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shardmill/alloc.h>
#include <shardmill/buf.h>
#include <shardmill/meta.h>
#include <shardmill/pipeline.h>
#include <shardmill/stats.h>
#include <shardmill/store.h>
#include <shardmill/write.h>

#include "plan_sample.h"
#include "report.h"

/* scaling/rates.json, compiled in (jobs/CMakeLists.txt generates plan_rates_builtin.c). */
extern const unsigned char sm_plan_rates_builtin[];
extern const size_t sm_plan_rates_builtin_len;

/* Files of a finished output besides its shards: zarr.json of the array (or of the group and of
 * each level) and the completion marker; the journal and .shardmill/ are gone once the marker is
 * written (write_output.c). */
#define MARKER_FILES 1u

/* The sampled stored ratio of a scan's input raised by this much for the chunks not sampled. */
#define SM_PLAN_SAMPLE_MARGIN 1.05

/* A thread's codec contexts: a zstd level-3 compression context over a chunk of up to a few MiB
 * (its window and hash tables, ~1-3 MiB), a decompression context and gzip/blosc state. */
#define PLAN_CODEC_BYTES ((uint64_t)4 << 20)

/* What loading the HDF5 library adds to a rank's resident set (the h5source or export module and
 * libhdf5 with its own allocations): measured, a tiny HDF5 convert's peak over a tiny Zarr one's
 * (18.4 vs 8.5 MiB, Debian's HDF5 1.10.8). */
#define PLAN_HDF5_RSS_BYTES ((uint64_t)10 << 20)
/* The encoded shard's resident bytes over the sampled ratio's: its densest shard's margin. */
#define PLAN_ENC_MARGIN 1.3

static uint64_t grid_count(const uint64_t *shape, const uint64_t *obj, unsigned n)
{
    uint64_t p = 1;
    for (unsigned d = 0; d < n; d++) {
        p *= obj[d] ? (shape[d] + obj[d] - 1) / obj[d] : 0;
    }
    return p;
}

sm_status sm_plan_rates_load(const char *path, struct sm_plan_rates *r, char *from, size_t cap,
                             struct sm_err *err)
{
    const char *p = path != NULL ? path : getenv("SHARDMILL_RATES");
    if (p == NULL || p[0] == '\0') {
        snprintf(from, cap, "built in (scaling/rates.json)");
        return sm_plan_rates_parse((const char *)sm_plan_rates_builtin, sm_plan_rates_builtin_len,
                                   "built-in rates", r, err);
    }
    snprintf(from, cap, "%s", p);
    FILE *f = fopen(p, "rb");
    char *text = f != NULL ? sm_malloc(1 << 20) : NULL;
    size_t n = text != NULL ? fread(text, 1, (1 << 20) - 1, f) : 0;
    const bool ok = text != NULL && !ferror(f);
    if (f != NULL) {
        fclose(f);
    }
    sm_status st = SM_OK;
    if (!ok) {
        st = SM_ERR_AT(err, SM_E_USAGE, p, "cannot read the rates file");
    } else {
        st = sm_plan_rates_parse(text, n, p, r, err);
    }
    sm_free(text);
    return st;
}

/* The output's type: output.dtype (the loader's float32 default; ingest and none: unset, the
 * input's own). */
static enum sm_dtype out_dtype(const struct sm_plan_job *j, enum sm_dtype in)
{
    return j->run.output.dtype_set ? j->run.output.dtype : in;
}

/* The specs of every level the writer makes of the output parameters o (the engine's layout:
 * auto per level). */
static sm_status output_levels(const struct sm_run_output *out, unsigned nd, const uint64_t *shape,
                               enum sm_dtype dt, struct sm_output_spec *specs, unsigned *n,
                               struct sm_err *err)
{
    struct sm_run_output o = *out;
    o.dtype_set = true;
    o.dtype = dt;
    if (o.ome.levels != 0) {
        return sm_run_ome_levels(&o, nd, shape, dt, specs, n, err);
    }
    *n = 1;
    return sm_run_output_spec(&o, nd, shape, dt, NULL, &specs[0], err);
}

static const uint64_t *outer(const struct sm_output_spec *s)
{
    return s->sharded ? s->shard : s->chunk;
}

/* Voxels of the largest shard (or chunk) of a level: its outer shape clipped to the level's. */
static uint64_t clipped_voxels(const struct sm_output_spec *s)
{
    uint64_t v = 1;
    for (unsigned d = 0; d < s->ndim; d++) {
        v *= outer(s)[d] < s->shape[d] ? outer(s)[d] : s->shape[d];
    }
    return v;
}

/* The output's levels: shards, values, files, and the bytes at the sampled ratio. */
struct levels {
    unsigned n;
    struct sm_output_spec s[SM_MAX_LEVELS];
    uint64_t shards[SM_MAX_LEVELS], values[SM_MAX_LEVELS];
};

/* The largest slab a pyramid thread reads of the level below (engine/run/run_pyramid.c
 * slab_step): 8 voxels per output voxel of at most a chunk's depth of the level below (the
 * deepest inner chunk of any level) by a shard's rows and columns; 0 (8 whole shards) unless
 * 3-D. */
static uint64_t pyramid_slab(const struct levels *lv)
{
    if (lv->n < 2 || lv->s[1].ndim != 3) {
        return 0;
    }
    uint64_t cz = 1, v = 8;
    for (unsigned k = 0; k < lv->n; k++) {
        cz = lv->s[k].chunk[0] > cz ? lv->s[k].chunk[0] : cz;
    }
    for (unsigned k = 1; k < lv->n; k++) {
        const struct sm_output_spec *s = &lv->s[k];
        uint64_t e[3];
        for (unsigned d = 0; d < 3; d++) {
            e[d] = outer(s)[d] < s->shape[d] ? outer(s)[d] : s->shape[d];
        }
        const uint64_t slab = 8 * (cz < e[0] ? cz : e[0]) * e[1] * e[2];
        v = slab > v ? slab : v;
    }
    return v;
}

/* The levels written with level 0, on its shard grid (*aligned, 1: level 0 alone) and the level
 * the write phase makes through the spill file (*spill, 0: none): the engine's own answers
 * (sm_writer_aligned_levels, sm_writer_spill_level) for a group writer of these specs. */
static void group_levels(const struct levels *lv, unsigned *aligned, unsigned *spill)
{
    struct sm_writer *g = NULL;
    struct sm_err ignored;
    sm_err_clear(&ignored);
    *aligned = 1;
    *spill = 0;
    if (lv->n >= 2 && sm_writer_new_group(lv->s, lv->n, NULL, &g, &ignored) == SM_OK) {
        *aligned = sm_writer_aligned_levels(g);
        *spill = sm_writer_spill_level(g);
        sm_writer_free(g);
    }
}

static unsigned aligned_levels(const struct levels *lv)
{
    unsigned aligned, spill;
    group_levels(lv, &aligned, &spill);
    return aligned;
}

/* Each level's work by the way the run makes it: with level 0 (the aligned levels), from the
 * spill file, or read back. */
static void split_levels(const struct levels *lv, struct sm_plan_level_work *lw)
{
    memset(lw, 0, sizeof(*lw));
    unsigned spill;
    group_levels(lv, &lw->levels_with, &spill);
    lw->levels = lv->n;
    lw->shards = lv->n > 0 ? lv->shards[0] : 0;
    lw->level0_value_bytes = lv->n > 0 ? lv->values[0] : 0;
    for (unsigned k = 0; k < lv->n; k++) {
        if (k < lw->levels_with) {
            lw->out_value_bytes += lv->values[k];
        } else if (k == spill) {
            lw->spill_shards = lv->shards[k];
            lw->spill_value_bytes = lv->values[k];
        } else {
            lw->pyr_shards += lv->shards[k];
            lw->pyr_value_bytes += lv->values[k];
        }
    }
}

static void level_sizes(struct levels *lv)
{
    for (unsigned k = 0; k < lv->n; k++) {
        const struct sm_output_spec *s = &lv->s[k];
        lv->shards[k] = grid_count(s->shape, outer(s), s->ndim);
        lv->values[k] = sm_plan_prod(s->shape, s->ndim) * sm_dtype_size(s->dtype);
    }
}

static void output_size(const struct levels *lv, bool ome, struct sm_plan_estimate *e)
{
    double bytes = 0;
    e->shards = 0;
    for (unsigned k = 0; k < lv->n; k++) {
        const struct sm_output_spec *s = &lv->s[k];
        const uint64_t inner = s->sharded ? grid_count(s->shard, s->chunk, s->ndim) : 0;
        bytes += (double)lv->values[k] * (k == 0 ? e->ratio : e->level_ratio);
        bytes += (double)lv->shards[k] * (double)(inner * 16 + (s->sharded ? 4 : 0)); /* index */
        bytes += 1024; /* zarr.json */
        e->shards += lv->shards[k];
    }
    bytes += ome ? 2048 : 0;               /* the group's zarr.json */
    bytes += 512 + (double)e->shards * 80; /* the marker: a record per shard */
    e->output_bytes = (uint64_t)bytes;
    /* the group's document(s): zarr.json; OME-NGFF 0.4 .zgroup and .zattrs */
    e->files = e->shards + lv->n + (ome ? (lv->s[0].zarr_v2 ? 2 : 1) : 0) + MARKER_FILES;
}

/* HDF5 metadata beyond the values: superblock, dataset and attribute headers (the provenance),
 * the histogram dataset (besides its bins), and a chunk index entry per chunk. */
#define EXPORT_META_BYTES 16384u
#define EXPORT_CHUNK_INDEX_BYTES 64u

/* The HDF5 export (engine/run/run_export.c): level 0's values in chunks of export.hdf5.chunk
 * (default the output's chunk shape), deflated at about the output codec's sampled ratio (the
 * values' bytes without deflate), one file; a rank buffers min(64 MiB, memory_bytes / 4) of
 * values, at least a shard. */
static void export_size(const struct sm_plan_job *j, const struct levels *lv, uint64_t bins,
                        struct sm_plan_estimate *e)
{
    if (j->run.export.path == NULL || lv->n == 0) {
        return;
    }
    const struct sm_output_spec *s = &lv->s[0];
    const size_t elem = sm_dtype_size(s->dtype);
    uint64_t chunk[SM_MAX_DIMS];
    for (unsigned d = 0; d < s->ndim; d++) {
        const uint64_t want = j->run.export.chunk.set && j->run.export.chunk.n == s->ndim
                                  ? j->run.export.chunk.v[d]
                                  : s->chunk[d];
        chunk[d] = want > 0 && want < s->shape[d] ? want : s->shape[d];
    }
    e->export_path = j->run.export.path;
    e->export_deflate = j->run.export.deflate;
    e->export_chunks = grid_count(s->shape, chunk, s->ndim);
    e->export_chunk_bytes = sm_plan_prod(chunk, s->ndim) * elem;
    const double ratio = e->export_deflate > 0 ? e->ratio : 1.0;
    e->export_bytes = (uint64_t)((double)lv->values[0] * ratio) + EXPORT_META_BYTES +
                      (bins + 16u) * 8u + e->export_chunks * EXPORT_CHUNK_INDEX_BYTES;
    const uint64_t quarter = j->run.c.memory_bytes / 4, cap = 64ull << 20;
    const uint64_t shard = clipped_voxels(s) * elem;
    const uint64_t buf = quarter < cap ? quarter : cap;
    e->export_buffer_bytes = buf > shard ? buf : shard;
}

/* The busiest rank's input box (decoded bytes) and whether every rank keeps its input: its run
 * of tiles fills a box holding its shards' input and fits half the budget less the memos
 * (engine/run/run_convert_meta.c sm_cv_keep_plan). */
struct sm_part sm_plan_phase_share(const struct sm_plan_phase *ph, int r, size_t *cursor)
{
    while (*cursor < ph->n && ph->shares[*cursor].rank < r) {
        (*cursor)++;
    }
    if (*cursor < ph->n && ph->shares[*cursor].rank == r) {
        return ph->shares[*cursor].part;
    }
    const struct sm_part idle = {*cursor < ph->n ? ph->shares[*cursor].part.first : ph->items, 0,
                                 0};
    return idle;
}

/* The next rank after r listed in either phase (INT_MAX when none). */
static int next_listed(const struct sm_plan_phase *a, const struct sm_plan_phase *b, size_t ia,
                       size_t ib)
{
    const int ra = ia < a->n ? a->shares[ia].rank : INT_MAX;
    const int rb = b != NULL && ib < b->n ? b->shares[ib].rank : INT_MAX;
    return ra < rb ? ra : rb;
}

static void rank_boxes(const struct sm_plan_job *j, const struct sm_array_meta *m,
                       const struct sm_run_setup *su, const struct sm_plan_phase *tph,
                       const struct sm_tiling *grid, const struct sm_plan_phase *sph, int ranks,
                       bool two_pass, uint64_t *max_in, bool *all_kept, bool *some_kept,
                       uint64_t *max_tiles, uint64_t *max_shards)
{
    *max_tiles = *max_shards = 0;
    const size_t elem = sm_dtype_size(m->dtype);
    const uint64_t budget = j->run.c.memory_bytes / 2 - j->run.c.memory_bytes / 8;
    *max_in = 0;
    *all_kept = two_pass;
    *some_kept = false;
    /* only the ranks with tiles or shards: a rank with neither keeps nothing (no box) */
    size_t it = 0, is = 0, listed = 0;
    for (int r = next_listed(tph, sph, it, is); r < ranks; r = next_listed(tph, sph, it, is)) {
        listed++;
        const struct sm_part tile_run = sm_plan_phase_share(tph, r, &it);
        const struct sm_part shard_run =
            sph != NULL ? sm_plan_phase_share(sph, r, &is) : (struct sm_part){0, 0, 0};
        const struct sm_part *tiles = &tile_run, *shards = sph != NULL ? &shard_run : NULL;
        it += it < tph->n && tph->shares[it].rank == r;
        is += sph != NULL && is < sph->n && sph->shares[is].rank == r;
        uint64_t off[SM_MAX_DIMS] = {0}, shape[SM_MAX_DIMS] = {0};
        uint64_t so[SM_MAX_DIMS] = {0}, ss[SM_MAX_DIMS] = {0};
        bool box = two_pass ? sm_tiling_run_box(&su->tiling, tiles->first, tiles->count, off, shape)
                            : false;
        const bool has_shards = shards != NULL && shards->count > 0 &&
                                sm_tiling_run_box(grid, shards->first, shards->count, so, ss);
        for (unsigned d = 0; box && has_shards && d < m->ndim; d++) {
            box = so[d] >= off[d] && so[d] + ss[d] <= off[d] + shape[d];
        }
        uint64_t bytes = 0;
        if (two_pass && tiles->count > 0) {
            sm_tiling_run_box(&su->tiling, tiles->first, tiles->count, off, shape);
            bytes = sm_plan_prod(shape, m->ndim) * elem;
        }
        if (has_shards) {
            const uint64_t sb = sm_plan_prod(ss, m->ndim) * elem;
            bytes = sb > bytes ? sb : bytes;
        }
        *max_in = bytes > *max_in ? bytes : *max_in;
        *max_tiles = tiles->count > *max_tiles ? tiles->count : *max_tiles;
        if (shards != NULL) {
            *max_shards = shards->count > *max_shards ? shards->count : *max_shards;
        }
        *all_kept = *all_kept && box && bytes <= budget;
        *some_kept = *some_kept || (two_pass && box && bytes <= budget);
    }
    if (listed < (size_t)ranks) {
        *all_kept = false; /* an idle rank */
    }
}

static uint64_t index_cache_bytes(const struct sm_plan_job *j, const struct sm_array_meta *m)
{
    if (m->inner_ndim == 0 || j->run.c.input.index_cache_entries == 0) {
        return 0;
    }
    const uint64_t inner = grid_count(m->chunk_shape, m->inner_chunk_shape, m->ndim);
    const uint64_t all = grid_count(m->shape, m->chunk_shape, m->ndim) * (inner * 16 + 4);
    return all < j->run.c.input.index_cache_bytes ? all : j->run.c.input.index_cache_bytes;
}

/* The largest window a rank holds: a windowed pass's group box (one group at a time per rank, two
 * when the next is read ahead: rp.windows; the write pass only when it reads). */
static uint64_t window_bytes(const struct sm_plan_estimate *e)
{
    const uint64_t scan = e->two_pass && e->rp_scan.windowed
                              ? e->rp_scan.window_bytes * (e->rp_scan.windows > 1 ? 2 : 1)
                              : 0;
    const uint64_t write = e->convert && !e->kept && e->rp_write.windowed
                               ? e->rp_write.window_bytes * (e->rp_write.windows > 1 ? 2 : 1)
                               : 0;
    return scan > write ? scan : write;
}

/* Whether every level-0 shard's box (clipped to the ROI) is whole in the input's read units on
 * every axis: it starts on a unit boundary and ends on one or at the array's end. A whole box is
 * read straight into the shard (engine/tile/tile_memo.c), never through a chunk memo. */
static bool units_whole(const struct sm_array_meta *m, const struct sm_run_setup *su,
                        const struct levels *lv)
{
    if (lv->n == 0) {
        return false;
    }
    const uint64_t *u = m->inner_ndim > 0 ? m->inner_chunk_shape : m->chunk_shape;
    const uint64_t *o = outer(&lv->s[0]);
    for (unsigned d = 0; d < m->ndim; d++) {
        const uint64_t end = su->off[d] + su->shape[d];
        const bool one = o[d] >= su->shape[d]; /* a single shard along d */
        if (u[d] == 0 || su->off[d] % u[d] != 0 || (!one && o[d] % u[d] != 0) ||
            (end % u[d] != 0 && end != m->shape[d])) {
            return false;
        }
    }
    return true;
}

/* Output chunks without a shard codec, some of them at an edge: the writer pads each edge chunk
 * into a full one before its encode (engine/write/write_shard.c). */
static bool padded(const struct levels *lv)
{
    if (lv->n == 0 || lv->s[0].sharded) {
        return false;
    }
    for (unsigned d = 0; d < lv->s[0].ndim; d++) {
        if (lv->s[0].shape[d] % lv->s[0].chunk[d] != 0) {
            return true;
        }
    }
    return false;
}

/* The stored/decoded ratio of a few boxes of one input read unit each on the ROI's diagonal
 * (sm_plan_sample_read); false when the sample fails or reads nothing. */
static bool unit_sample_ratio(const struct sm_plan_job *j, const struct sm_plan_input *in,
                              const struct sm_run_setup *su, double *ratio)
{
    const struct sm_array_meta *m = in->m;
    struct sm_output_spec s0;
    memset(&s0, 0, sizeof(s0));
    s0.ndim = m->ndim;
    const uint64_t *u = m->inner_ndim > 0 ? m->inner_chunk_shape : m->chunk_shape;
    for (unsigned d = 0; d < m->ndim; d++) {
        s0.shape[d] = su->shape[d];
        s0.chunk[d] = u[d] < su->shape[d] ? u[d] : su->shape[d];
    }
    struct sm_plan_sample sp;
    memset(&sp, 0, sizeof(sp));
    uint64_t units = 0;
    struct sm_err ignored;
    sm_err_clear(&ignored);
    const sm_status st = sm_plan_sample_read(j, in, su, &s0, &sp, &units, &ignored);
    for (unsigned i = 0; i < SM_PLAN_SAMPLES; i++) {
        sm_buf_free(&sp.in[i]);
    }
    *ratio = sp.in_ratio;
    return st == SM_OK && sp.n > 0;
}

/* What the encoded-object cache holds per decoded byte of a Zarr/N5 input (1: unknown, no cache
 * or a source): a local array's payload bytes over its decoded bytes (its files: the same for plan
 * and run's ceiling check); a scan of a remote one (no ceiling check: plan alone decides its
 * bound) from the payload of a few input chunks on the ROI's diagonal (sm_plan_sample_read), raised
 * by SM_PLAN_SAMPLE_MARGIN for the chunks it did not read; a failed sample leaves 1. */
static double cache_ratio(const struct sm_plan_job *j, const struct sm_plan_input *in,
                          const struct sm_run_setup *su, const struct sm_plan_estimate *e)
{
    const struct sm_array_meta *m = in->m;
    if (in->array == NULL || !j->run.c.input.cache_enabled) {
        return 1.0;
    }
    const double files =
        (double)(e->input_files_given
                     ? e->input_files_bytes
                     : sm_report_zarr_input_bytes(j->run.c.input.store, j->run.c.input.array));
    const double full = (double)sm_plan_prod(m->shape, m->ndim) * (double)sm_dtype_size(m->dtype);
    if (files > 0 && full > 0) {
        return files / full;
    }
    if (e->convert || e->memory_only) {
        return 1.0;
    }
    double sampled = e->in_ratio; /* a remote scan's sample (scan_stored_ratio), already read */
    if (!e->in_sampled && !unit_sample_ratio(j, in, su, &sampled)) {
        return 1.0;
    }
    const double r = sampled * SM_PLAN_SAMPLE_MARGIN;
    return r < 1.0 ? r : 1.0;
}

/* An http(s) or s3 input (input.store's scheme): its reads are requests (rates http_*). */
static bool remote_input(const struct sm_plan_job *j)
{
    const char *s = j->run.c.input.store;
    return s != NULL && (strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0 ||
                         strncmp(s, "s3://", 5) == 0);
}

/* A remote scan's stored/decoded ratio (e->in_ratio, e->in_sampled): its fetches carry the stored
 * bytes, not the decoded (scan-http: 135 of 268 MB), and no file can be walked for them. The
 * sample reads up to SM_PLAN_SAMPLES boxes of one input read unit each, as cache_ratio's; a
 * failed or empty sample leaves the ratio unknown (1). */
static void scan_stored_ratio(const struct sm_plan_job *j, const struct sm_plan_input *in,
                              const struct sm_run_setup *su, struct sm_plan_estimate *e)
{
    double sampled;
    if (in->array == NULL || e->convert || e->memory_only || !e->remote ||
        !unit_sample_ratio(j, in, su, &sampled) || sampled >= 1.0) {
        return;
    }
    e->in_ratio = sampled;
    e->in_sampled = true;
}

/* The requests of a pass that decodes pass_bytes of blocks whole: one per read unit (a chunk, or
 * an inner chunk's range of a shard; store_http.c has no multi-range get), the ROI's units when
 * the read plan has no bytes. */
static uint64_t pass_requests(const struct sm_array_meta *m, const struct sm_run_setup *su,
                              uint64_t pass_bytes)
{
    const uint64_t *u = m->inner_ndim > 0 ? m->inner_chunk_shape : m->chunk_shape;
    const uint64_t unit = sm_plan_prod(u, m->ndim) * sm_dtype_size(m->dtype);
    return pass_bytes > 0 && unit > 0 ? (pass_bytes + unit - 1) / unit
                                      : sm_plan_units_of(m, su->off, su->shape);
}

/* A sharded input's shard indexes the ROI touches (one request each, then the index cache). */
static uint64_t index_requests(const struct sm_array_meta *m, const struct sm_run_setup *su)
{
    if (m->inner_ndim == 0) {
        return 0;
    }
    uint64_t n = 1;
    for (unsigned d = 0; d < m->ndim; d++) {
        const uint64_t s = m->chunk_shape[d];
        n *= s ? (su->off[d] + su->shape[d] - 1) / s - su->off[d] / s + 1 : 1;
    }
    return n;
}

static void estimate_memory(const struct sm_plan_job *j, const struct sm_plan_input *in,
                            const struct sm_run_setup *su, const struct levels *lv,
                            uint64_t rank_in, int ranks, bool cache, struct sm_plan_estimate *e)
{
    const struct sm_array_meta *m = in->m;
    const size_t in_elem = sm_dtype_size(m->dtype);
    const uint64_t *unit = m->inner_ndim > 0 ? m->inner_chunk_shape : m->chunk_shape;
    uint64_t tile[SM_MAX_DIMS];
    for (unsigned d = 0; d < m->ndim; d++) {
        tile[d] = su->tiling.tile[d] < su->shape[d] ? su->tiling.tile[d] : su->shape[d];
    }
    const char *fmt = in->src != NULL ? sm_source_info(in->src)->format : "";
    const size_t slen = j->run.c.input.store != NULL ? strlen(j->run.c.input.store) : 0;
    const struct sm_plan_mem mm = {
        .baseline =
            (ranks > 1 ? e->rates.baseline_rss_mpi_bytes : e->rates.baseline_rss_bytes) +
            (strcmp(fmt, "hdf5") == 0 || j->run.export.path != NULL ? PLAN_HDF5_RSS_BYTES : 0),
        .memory_bytes = j->run.c.memory_bytes,
        .threads = e->threads,
        .two_pass = e->two_pass,
        .kept = e->kept,
        .kept_some = e->kept_some,
        .source_loads =
            in->src != NULL && (strcmp(fmt, "nifti") == 0 ||
                                (slen > 3 && strcmp(j->run.c.input.store + slen - 3, ".gz") == 0)),
        .source = in->src != NULL,
        .grouped = e->convert && e->rp_write.windowed,
        .aligned = lv->n > 1 && aligned_levels(lv) > 1,
        .scan_job = !e->convert,
        .units_whole = in->src == NULL && units_whole(m, su, lv),
        .padded = padded(lv),
        .rank_in_bytes = rank_in,
        /* at the stored/decoded ratio of a local array's files (the same for plan and run's
         * check: no sample), a remote scan's sample, else the decoded bytes */
        .rank_stored_bytes = (uint64_t)((double)rank_in * cache_ratio(j, in, su, e)),
        .cache_max_bytes =
            j->run.c.input.cache_enabled && cache ? j->run.c.input.cache_max_bytes : 0,
        .index_cache_bytes = index_cache_bytes(j, m),
        .tile_bytes = sm_plan_prod(tile, m->ndim) * in_elem,
        .chunk_bytes = sm_plan_prod(unit, m->ndim) * in_elem,
        .shard_voxels = lv->n > 0 ? clipped_voxels(&lv->s[0]) : 0,
        /* the pyramid phase runs for the levels not written with level 0 */
        .pyr_shard_voxels = lv->n > 1 && aligned_levels(lv) < lv->n ? clipped_voxels(&lv->s[1]) : 0,
        .rank_tiles = e->two_pass ? e->rank_tiles : 0,
        .rank_shards = e->rank_shards,
        .pyr_slab_voxels = pyramid_slab(lv),
        .in_elem = in_elem,
        .out_elem = lv->n > 0 ? sm_dtype_size(lv->s[0].dtype) : 0,
        .hist_bytes = ((uint64_t)su->params.bins + 65536u) * 8u,
        .shard_records = sm_output_track_bytes(e->shards),
        .codec_bytes = PLAN_CODEC_BYTES,
        .window_bytes = window_bytes(e),
        .export_buffer_bytes = e->export_buffer_bytes,
        .export_chunk_bytes = e->export_chunk_bytes,
        /* the densest shard compresses worse than the sample's mean */
        .enc_share = e->samples > 0 || e->ratio_given > 0 ? e->ratio * PLAN_ENC_MARGIN : 1.0,
    };
    e->peak_rss_bytes = sm_plan_peak_rss(&mm, &e->rss);
}

/* A source's files' size on disk (their describe's file.bytes; 0 when unknown). */
static uint64_t source_file_bytes(const struct sm_source *src)
{
    json_t *d = sm_source_describe(src);
    json_t *b = json_object_get(json_object_get(d, "file"), "bytes");
    const double v = json_is_number(b) ? json_number_value(b) : 0.0;
    json_decref(d);
    return v > 0 ? (uint64_t)v : 0;
}

/* What each pass reads from storage: the input's size on disk (a source's files, or the ROI's
 * decoded bytes at the sampled stored/decoded ratio), times each pass's amplification from its
 * read plan; the range pass (a wide integer or float input's min/max, one pass or two) and the
 * scan read as the scan's tiles do, the write pass as its shards do unless every rank kept its
 * input. */
static void estimate_reads(const struct sm_plan_input *in, const struct sm_run_setup *su,
                           struct sm_plan_work *w, struct sm_plan_estimate *e)
{
    const struct sm_array_meta *m = in->m;
    const uint64_t roi = w->in_bytes;
    e->disk_bytes = (uint64_t)((double)roi * e->in_ratio + 0.5);
    e->disk_from = (e->samples > 0 || e->in_sampled) && e->in_ratio < 1.0 ? "sample" : "decoded";
    const uint64_t files = in->src != NULL ? source_file_bytes(in->src) : 0;
    if (files > 0) {
        const double full =
            (double)sm_plan_prod(m->shape, m->ndim) * (double)sm_dtype_size(m->dtype);
        e->disk_bytes = full > 0 ? (uint64_t)((double)files * ((double)roi / full) + 0.5) : files;
        e->disk_from = "files";
    }
    e->reads[SM_PLAN_PASS_RANGE] = su->range_from == SM_HIST_RANGE_MINMAX; /* SPEC §5 */
    e->reads[SM_PLAN_PASS_SCAN] = e->two_pass;
    e->reads[SM_PLAN_PASS_WRITE] = e->convert && !e->kept;
    for (int p = 0; p < SM_PLAN_PASSES; p++) {
        const struct sm_read_plan *rp = p == SM_PLAN_PASS_WRITE ? &e->rp_write : &e->rp_scan;
        const double amp = rp->roi_bytes > 0 ? (double)rp->pass_bytes / (double)rp->roi_bytes : 1.0;
        e->read_ratio[p] = e->reads[p] ? amp : 0.0;
        e->read_bytes[p] =
            e->reads[p] ? sm_plan_pass_read_bytes(rp->pass_bytes, rp->roi_bytes, e->disk_bytes) : 0;
        w->read_bytes[p] = e->read_bytes[p]; /* of one pass: a scan job's `passes` repeat it */
        w->read_amp[p] = e->read_ratio[p];
    }
    bool index = in->array != NULL; /* the shard indexes: fetched by the first pass that reads */
    for (int p = 0; in->array != NULL && p < SM_PLAN_PASSES; p++) {
        const struct sm_read_plan *rp = p == SM_PLAN_PASS_WRITE ? &e->rp_write : &e->rp_scan;
        if (e->reads[p]) {
            e->read_requests[p] =
                pass_requests(m, su, rp->pass_bytes) + (index ? index_requests(m, su) : 0);
            index = false;
        }
        w->read_requests[p] = e->read_requests[p];
    }
    /* an http(s) or s3 input: requests over connections at the rates' HTTP fetch rate, no page
     * cache; --fs-read-bandwidth (the server's or the link's aggregate) caps them together */
    w->remote = e->remote;
    e->http = e->remote && e->rates.http_bytes_per_s > 0;
    if (e->http) {
        e->fs_read_bytes_per_s = e->fs_read_given > 0 ? e->fs_read_given : 0;
        e->fs_read_from = e->fs_read_given > 0 ? "--fs-read-bandwidth" : "rates (http)";
        w->fs_bytes_per_s = e->fs_given;
        w->fs_read_bytes_per_s = e->fs_read_bytes_per_s;
        return;
    }
    if (e->fs_read_given > 0) {
        e->fs_read_bytes_per_s = e->fs_read_given;
        e->fs_read_from = "--fs-read-bandwidth";
    } else {
        /* what one node read at calibration, for each node (--fs-read-bandwidth caps a shared
         * file system's aggregate) */
        const double nodes = e->nodes > 1 ? (double)e->nodes : 1.0;
        e->fs_read_bytes_per_s = nodes * (e->warm ? e->rates.fs_read_warm_bytes_per_s
                                                  : e->rates.fs_read_cold_bytes_per_s);
        e->fs_read_from = e->warm ? "rates (warm)" : "rates (cold)";
        /* a shared file system: the nodes together read no faster than its aggregate */
        if (e->fs_given > 0 &&
            !(e->fs_read_bytes_per_s > 0 && e->fs_read_bytes_per_s <= e->fs_given)) {
            e->fs_read_bytes_per_s = e->fs_given;
            e->fs_read_from = "--fs-bandwidth";
        }
    }
    w->fs_bytes_per_s = e->fs_given;
    if (!(e->fs_read_bytes_per_s > 0)) {
        e->fs_read_bytes_per_s = 0;
        e->fs_read_from = "none";
    }
    w->fs_read_bytes_per_s = e->fs_read_bytes_per_s;
}

sm_status sm_plan_level_work(const struct sm_run_output *o, unsigned nd, const uint64_t *shape,
                             enum sm_dtype out_dt, struct sm_plan_level_work *lw,
                             struct sm_err *err)
{
    memset(lw, 0, sizeof(*lw));
    struct levels lv = {0};
    SM_TRY(output_levels(o, nd, shape, out_dt, lv.s, &lv.n, err));
    level_sizes(&lv);
    split_levels(&lv, lw);
    return SM_OK;
}

sm_status sm_plan_estimate(const struct sm_plan_job *j, const struct sm_plan_input *in,
                           const struct sm_run_setup *su, const struct sm_plan_phase *tiles,
                           const struct sm_tiling *grid, const struct sm_plan_phase *shards,
                           int ranks, int threads, struct sm_plan_estimate *e, struct sm_err *err)
{
    const struct sm_array_meta *m = in->m;
    e->threads = threads;
    e->convert = j->convert;
    e->ratio = 1.0;
    e->in_ratio = 1.0;
    e->ratio_from = e->convert ? "codec none" : "no output";
    const bool ome = j->run.output.ome.levels != 0;
    e->two_pass = !e->convert || sm_norm_desc(j->run.normalize.mode)->needs_statistics;
    uint64_t rank_in = 0;
    /* grouped (docs/internals/reading.md): both phases' shares are runs of groups */
    const bool grouped = e->convert && e->rp_write.windowed;
    struct sm_run_setup sg = *su;
    if (grouped) {
        sg.tiling = e->rp_write.groups;
    }
    rank_boxes(j, m, grouped ? &sg : su, tiles, grouped ? &e->rp_write.groups : grid,
               e->convert ? shards : NULL, ranks, e->two_pass, &rank_in, &e->kept, &e->kept_some,
               &e->rank_tiles, &e->rank_shards);
    const uint64_t rank_groups = grouped ? e->rank_tiles : 0;
    if (grouped) { /* items are groups: each holds this many shards (tiles: the same boxes) */
        uint64_t per = 1;
        for (unsigned d = 0; d < grid->ndim; d++) {
            per *= (e->rp_write.groups.tile[d] + grid->tile[d] - 1) / grid->tile[d];
        }
        e->rank_tiles *= per;
        e->rank_shards *= per;
    }
    e->kept = e->kept && e->convert && !e->reread;
    /* the run's adaptation: never kept; a scan keeps nothing (it reads each tile once) */
    e->kept_some = e->kept_some && !e->reread && e->convert;
    struct levels lv = {0};
    if (e->convert) {
        const enum sm_dtype dt = out_dtype(j, m->dtype);
        SM_TRY(output_levels(&j->run.output, m->ndim, su->shape, dt, lv.s, &lv.n, err));
        level_sizes(&lv);
        if (e->ratio_given > 0) {
            e->ratio = e->ratio_given; /* a metadata-only sizing: no chunk is read */
            e->ratio_from = "--ratio";
        } else if (e->memory_only) {
            e->ratio_from = "not sampled"; /* run's memory check: the ratio is not in the bound */
        } else if (strcmp(lv.s[0].codec, "none") != 0) {
            struct sm_plan_sample sp;
            memset(&sp, 0, sizeof(sp));
            sm_status st = sm_plan_sample_read(j, in, su, &lv.s[0], &sp, &e->sample_in_chunks, err);
            if (st == SM_OK) {
                /* the pyramid's types (a level below of another type keeps level 0's ratio) */
                const enum sm_dtype od = lv.s[0].dtype;
                const bool reduce =
                    lv.n > 1 && (od == SM_DT_FLOAT32 || od == SM_DT_UINT8 || od == SM_DT_UINT16);
                st = sm_plan_sample_encode(j, su, m->dtype, &lv.s[0], reduce ? &lv.s[1] : NULL, &sp,
                                           e, err);
            }
            for (unsigned i = 0; i < SM_PLAN_SAMPLES; i++) {
                sm_buf_free(&sp.in[i]);
            }
            SM_TRY(st);
            e->samples = sp.n;
            e->in_ratio = sp.in_ratio;
            e->ratio = e->sample_raw > 0 ? (double)e->sample_encoded / (double)e->sample_raw : 1.0;
            e->level_ratio = e->level_sample_raw > 0
                                 ? (double)e->level_sample_encoded / (double)e->level_sample_raw
                                 : e->ratio;
            e->ratio_from = "sample";
            if (sp.n == 0) { /* not even one output chunk within SM_PLAN_SAMPLE_UNITS reads */
                e->ratio_from = "metadata";
                e->sample_units_needed = sp.units_first;
            }
        }
        if (!(e->level_ratio > 0)) {
            e->level_ratio = e->ratio; /* --ratio, codec none, or no sample */
        }
        output_size(&lv, ome, e);
        export_size(j, &lv, (uint64_t)su->params.bins, e);
    }
    /* the run skips the object cache when no input object is read twice (the same predicate) */
    const bool cache =
        in->src != NULL ||
        sm_run_cache_useful(m, e->convert ? grid : &su->tiling,
                            e->convert ? e->two_pass : j->passes > 1, su->range_from, grouped);
    e->remote = in->array != NULL && remote_input(j);
    scan_stored_ratio(j, in, su, e);
    estimate_memory(j, in, su, &lv, rank_in, ranks, cache, e);
    struct sm_plan_work w = {
        .ranks = ranks,
        .threads = threads,
        .nodes = e->nodes,
        .cores_per_node = e->cores_per_node,
        .mpi = ranks > 1,
        .two_pass = e->two_pass,
        .kept = e->kept,
        .tiles = su->tiling.ntiles,
        .in_bytes = sm_plan_prod(su->shape, m->ndim) * sm_dtype_size(m->dtype),
        .shards = lv.n > 0 ? lv.shards[0] : 0,
        .out_bytes = e->output_bytes,
        .scan_passes = e->convert || j->passes < 1 ? 1u : (unsigned)j->passes,
        .export_value_bytes = e->export_path != NULL ? lv.values[0] : 0,
        .export_file_bytes = e->export_bytes,
        .export_deflate = e->export_deflate > 0,
    };
    /* the aligned levels are made and written with each level-0 shard, the next one (when it
     * spills) from the spill file, the others read back */
    struct sm_plan_level_work lw;
    split_levels(&lv, &lw);
    w.levels_with = lw.levels_with;
    w.out_value_bytes = lw.out_value_bytes;
    w.spill_shards = lw.spill_shards;
    w.spill_value_bytes = lw.spill_value_bytes;
    w.pyr_shards = lw.pyr_shards;
    w.pyr_value_bytes = lw.pyr_value_bytes;
    e->levels = lv.n;
    estimate_reads(in, su, &w, e);
    struct sm_plan_rates rt; /* a source's, an output type's or a scan job's own rates */
    const struct sm_source_info *si = in->src != NULL ? sm_source_info(in->src) : NULL;
    /* the run reads a source's next group ahead when two windows fit (sm_cv_groups) */
    w.ahead_groups =
        grouped && si != NULL && si->access != SM_SOURCE_STREAM && e->rp_write.windows > 1
            ? rank_groups
            : 0;
    sm_plan_rates_for(
        &e->rates, !e->convert,
        si != NULL ? sm_plan_source_rates_name(si->format, si->access == SM_SOURCE_RANDOM) : NULL,
        lv.n > 0 ? sm_dtype_name(lv.s[0].dtype) : NULL, &rt);
    sm_plan_seconds(&rt, &w, &e->t);
    return SM_OK;
}
