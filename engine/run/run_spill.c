/* The spilled level of an OME-Zarr pyramid (docs/internals/pyramid.md "The spilled level"): the
 * first level the pyramid phase would make by reading the level above back from the output
 * (level 1 of an explicit output.shard, which aligns no level) is reduced instead from that
 * level's shards while the write phase holds their values, into raw blocks of the spill file
 * (write.h), one per shard; the pyramid phase then cuts each of its shards from the blocks.
 * Why: W9's narrow layout read back and decoded all of level 0 (13.5 GB of zstd, 16 GiB of values)
 * for a level an eighth of its size; the spill writes and reads that eighth only.
 * Invariant: a block holds the level's values of exactly the box its parent shard covers (the
 * parent's offsets are even on every halved axis), made by the same reduction as the read-back,
 * so the level is byte-identical to the read-back's for any ranks x threads. */
#include "run_int.h"

#include <string.h>

#include "shardmill/alloc.h"

/* The level's box of the parent box [poff, poff + pshape) (3 axes): its blocks, clipped. */
static void child_box(const struct sm_run_spill *s, const uint64_t *poff, const uint64_t *pshape,
                      uint64_t *coff, uint64_t *cshape)
{
    for (unsigned d = 0; d < 3; d++) {
        coff[d] = poff[d] / s->red.block[d];
        cshape[d] = (pshape[d] + s->red.block[d] - 1) / s->red.block[d];
    }
}

/* The box [o, o + n) of s->nd axes padded to 3 (leading axes of one voxel). */
static void pad_box(const struct sm_run_spill *s, const uint64_t *o, const uint64_t *n,
                    uint64_t *off, uint64_t *shape)
{
    const unsigned pad = 3 - s->nd;
    for (unsigned d = 0; d < 3; d++) {
        off[d] = d < pad ? 0 : o[d - pad];
        shape[d] = d < pad ? 1 : n[d - pad];
    }
}

/* The box of the level above's shard `shard`, padded to 3 axes. */
static void parent_box(const struct sm_run_spill *s, uint64_t shard, uint64_t *off, uint64_t *shape)
{
    uint64_t o[SM_MAX_DIMS], n[SM_MAX_DIMS];
    sm_writer_shard_box(s->pw, shard, o, n);
    pad_box(s, o, n, off, shape);
}

sm_status sm_run_spill_init(struct sm_run_spill *s, const struct sm_writer *w, unsigned level,
                            const struct sm_level_reduce *red, int threads, struct sm_err *err)
{
    memset(s, 0, sizeof(*s));
    s->level = level;
    s->pw = sm_writer_level(w, level - 1);
    const struct sm_array_meta *pm = sm_writer_meta(s->pw);
    s->nd = pm->ndim;
    s->elem = sm_dtype_size(pm->dtype);
    s->red = *red;
    uint64_t off[3], shape[3], coff[3], cshape[3];
    parent_box(s, 0, off, shape); /* shard 0 is a full shard */
    child_box(s, off, shape, coff, cshape);
    s->block_bytes = s->elem;
    for (unsigned d = 0; d < 3; d++) {
        s->cshard[d] = cshape[d];
        s->block_bytes *= cshape[d];
    }
    s->nthreads = threads > 0 ? threads : 1;
    s->bufs = sm_calloc((size_t)s->nthreads, sizeof(*s->bufs));
    if (s->bufs == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate %d spill buffers", s->nthreads);
    }
    return SM_OK;
}

void sm_run_spill_free(struct sm_run_spill *s)
{
    for (int i = 0; s->bufs != NULL && i < s->nthreads; i++) {
        sm_buf_free(&s->bufs[i]);
    }
    sm_free(s->bufs);
    sm_spill_close(s->file);
    memset(s, 0, sizeof(*s));
}

sm_status sm_run_spill_put(struct sm_run_spill *s, int thread, uint64_t shard,
                           const struct sm_level_box *box, struct sm_err *err)
{
    uint64_t off[3], shape[3], coff[3], cshape[3];
    pad_box(s, box->offset, box->shape, off, shape); /* the driver's box of the shard */
    child_box(s, off, shape, coff, cshape);
    const size_t bytes = (size_t)(cshape[0] * cshape[1] * cshape[2]) * s->elem;
    if (box->len != (size_t)(shape[0] * shape[1] * shape[2]) * s->elem || thread < 0 ||
        thread >= s->nthreads) {
        SM_FAIL(err, SM_E_INTERNAL, "spill of a %zu-byte box on thread %d", box->len, thread);
    }
    struct sm_buf *b = &s->bufs[thread];
    SM_TRY(sm_buf_reserve(b, bytes, err));
    sm_level_reduce(&s->red, box->data, shape, cshape, 0, cshape[0], b->ptr);
    return sm_spill_put(s->file, shard, b->ptr, bytes, err);
}

/* Copies the part of block (boff, bshape) inside the shard box (o, n) into the shard's values. */
static void copy_overlap(const struct sm_run_spill *s, const uint8_t *blk, const uint64_t *boff,
                         const uint64_t *bshape, const uint64_t *o, const uint64_t *n,
                         uint8_t *data)
{
    uint64_t lo[3], hi[3];
    for (unsigned d = 0; d < 3; d++) {
        lo[d] = boff[d] > o[d] ? boff[d] : o[d];
        const uint64_t be = boff[d] + bshape[d], se = o[d] + n[d];
        hi[d] = be < se ? be : se;
    }
    const size_t row = (size_t)(hi[2] - lo[2]) * s->elem;
    for (uint64_t z = lo[0]; z < hi[0]; z++) {
        for (uint64_t y = lo[1]; y < hi[1]; y++) {
            const uint64_t src =
                ((z - boff[0]) * bshape[1] + (y - boff[1])) * bshape[2] + (lo[2] - boff[2]);
            const uint64_t dst = ((z - o[0]) * n[1] + (y - o[1])) * n[2] + (lo[2] - o[2]);
            memcpy(data + dst * s->elem, blk + src * s->elem, row);
        }
    }
}

sm_status sm_run_spill_fill(void *user, int thread, uint64_t shard, const uint64_t *offset,
                            const uint64_t *shape, void *data, size_t len, struct sm_err *err)
{
    (void)shard;
    struct sm_run_spill *s = user;
    const unsigned pad = 3 - s->nd;
    uint64_t o[3], n[3];
    pad_box(s, offset, shape, o, n);
    if (len != (size_t)(n[0] * n[1] * n[2]) * s->elem || thread < 0 || thread >= s->nthreads) {
        SM_FAIL(err, SM_E_INTERNAL, "level shard buffer of %zu bytes on thread %d", len, thread);
    }
    /* the parent shards whose blocks the box covers: a C-order walk of their grid coordinates */
    const uint64_t *grid = sm_writer_grid(s->pw);
    uint64_t g[3] = {1, 1, 1}, first[3], last[3], j[3];
    for (unsigned d = 0; d < 3; d++) {
        g[d] = d < pad ? 1 : grid[d - pad];
        first[d] = o[d] / s->cshard[d];
        last[d] = (o[d] + n[d] - 1) / s->cshard[d];
    }
    struct sm_buf *b = &s->bufs[thread];
    SM_TRY(sm_buf_reserve(b, s->block_bytes, err));
    for (j[0] = first[0]; j[0] <= last[0]; j[0]++) {
        for (j[1] = first[1]; j[1] <= last[1]; j[1]++) {
            for (j[2] = first[2]; j[2] <= last[2]; j[2]++) {
                const uint64_t idx = (j[0] * g[1] + j[1]) * g[2] + j[2];
                uint64_t poff[3], pshape[3], boff[3], bshape[3];
                parent_box(s, idx, poff, pshape);
                child_box(s, poff, pshape, boff, bshape);
                const size_t bytes = (size_t)(bshape[0] * bshape[1] * bshape[2]) * s->elem;
                SM_TRY(sm_spill_get(s->file, idx, b->ptr, bytes, err));
                copy_overlap(s, b->ptr, boff, bshape, o, n, data);
            }
        }
    }
    return SM_OK;
}
