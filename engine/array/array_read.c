/* Typed region reads (SPEC §2, §3): visit the stored objects the region touches in C order of the
 * chunk grid; decode each once and copy only its intersection with the region, by last-axis runs
 * (sm_box_copy). Sharded arrays read the index and only the touched inner chunks (shard_read.c).
 * Missing objects read as the fill value. Single-threaded per call; thread-safe across calls. */
#include "array_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"

uint64_t sm_array_lap(atomic_uint_fast64_t *counter, uint64_t t0)
{
    const uint64_t now = sm_clock_ns();
    atomic_fetch_add_explicit(counter, now - t0, memory_order_relaxed);
    return now;
}

void sm_region_put(const struct sm_region_dst *dst, const void *block, const uint64_t *block_origin,
                   const uint64_t *block_shape, const uint64_t *lo, const uint64_t *hi,
                   const uint8_t *fill)
{
    const unsigned nd = dst->view.ndim;
    uint64_t ext[SM_MAX_DIMS], src_off[SM_MAX_DIMS], dst_off[SM_MAX_DIMS];
    for (unsigned d = 0; d < nd; d++) {
        ext[d] = hi[d] - lo[d];
        src_off[d] = lo[d] - block_origin[d];
        dst_off[d] = lo[d] - dst->origin[d];
    }
    if (block == NULL) {
        sm_box_fill(&dst->view, dst->ptr, dst_off, ext, fill);
        return;
    }
    struct sm_box_view src = {nd, dst->view.elem, block_shape};
    sm_box_copy(&src, block, src_off, &dst->view, dst->ptr, dst_off, ext);
}

void sm_read_bufs_free(struct sm_read_bufs *b)
{
    sm_buf_free(&b->enc);
    sm_buf_free(&b->dec);
}

static sm_status check_region(const struct sm_array *a, const uint64_t *offset,
                              const uint64_t *shape, size_t out_len, struct sm_err *err)
{
    const struct sm_array_meta *m = a->meta;
    uint64_t n = a->elem;
    for (unsigned d = 0; d < m->ndim; d++) {
        if (offset[d] > m->shape[d] || shape[d] > m->shape[d] - offset[d]) {
            SM_FAIL(err, SM_E_USAGE,
                    "region axis %u [%" PRIu64 ", %" PRIu64
                    ") is outside the array extent %" PRIu64,
                    d, offset[d], offset[d] + shape[d], m->shape[d]);
        }
        if (__builtin_mul_overflow(n, shape[d], &n)) {
            SM_FAIL(err, SM_E_USAGE, "region size overflows");
        }
    }
    const uint64_t max = a->opts.limits.max_region_bytes;
    if (max != 0 && n > max) {
        SM_FAIL(err, SM_E_LIMIT,
                "region of %" PRIu64 " bytes exceeds limits.max_region_bytes (%" PRIu64 ")", n,
                max);
    }
    if (n != out_len) {
        SM_FAIL(err, SM_E_USAGE, "output buffer is %zu bytes, the region is %" PRIu64, out_len, n);
    }
    const uint64_t maxc = a->opts.limits.max_chunk_bytes;
    if (maxc != 0 && a->unit_len > maxc) {
        SM_FAIL(err, SM_E_LIMIT,
                "decoded chunk of %zu bytes exceeds limits.max_chunk_bytes (%" PRIu64 ")",
                a->unit_len, maxc);
    }
    return SM_OK;
}

/* Reads one whole stored object, decodes it and copies [lo, hi) of it into dst. */
static sm_status read_chunk(struct sm_array *a, const char *key, const uint64_t *origin,
                            const uint64_t *lo, const uint64_t *hi, const struct sm_region_dst *dst,
                            struct sm_read_bufs *bufs, struct sm_scratch *scratch,
                            struct sm_err *err)
{
    const struct sm_array_meta *m = a->meta;
    bool found;
    uint64_t t = sm_clock_ns();
    SM_TRY(sm_store_get(a->store, key, sm_range_all_expect(a->encoded_len), SM_IO_PAYLOAD,
                        &bufs->enc, &found, err));
    t = sm_array_lap(&a->fetch_ns, t);
    if (!found) {
        atomic_fetch_add_explicit(&a->chunks_missing, 1, memory_order_relaxed);
        sm_region_put(dst, NULL, origin, m->chunk_shape, lo, hi, m->fill);
        return SM_OK;
    }
    atomic_fetch_add_explicit(&a->chunks_read, 1, memory_order_relaxed);
    const uint8_t *block;
    sm_status st = sm_codec_chain_decode_view(m->chain, sm_buf_bytes(&bufs->enc), &bufs->dec,
                                              &block, scratch, err);
    sm_array_lap(&a->decode_ns, t);
    if (st != SM_OK) {
        sm_err_where(err, "%s/%s", a->store->url, key);
        return st;
    }
    sm_region_put(dst, block, origin, m->chunk_shape, lo, hi, m->fill);
    return SM_OK;
}

sm_status sm_array_read_region(struct sm_array *a, const uint64_t *offset, const uint64_t *shape,
                               void *out, size_t out_len, struct sm_scratch *scratch,
                               struct sm_err *err)
{
    const struct sm_array_meta *m = a->meta;
    const unsigned nd = m->ndim;
    SM_TRY(check_region(a, offset, shape, out_len, err));
    /* Sizes the input declares (codec headers inside chains such as [bytes, zstd, gzip]) are
     * bounded by the same limit as the chunks the metadata declares. */
    sm_scratch_set_max_decoded(scratch, a->opts.limits.max_chunk_bytes);
    if (out_len == 0) {
        return SM_OK;
    }
    struct sm_region_dst dst = {{nd, a->elem, shape}, out, offset};
    uint64_t c0[SM_MAX_DIMS], c1[SM_MAX_DIMS], ci[SM_MAX_DIMS];
    for (unsigned d = 0; d < nd; d++) {
        c0[d] = offset[d] / m->chunk_shape[d];
        c1[d] = (offset[d] + shape[d] - 1) / m->chunk_shape[d];
        ci[d] = c0[d];
    }
    struct sm_read_bufs bufs = {SM_BUF_INIT, SM_BUF_INIT};
    char key[1024];
    const size_t plen = strlen(a->prefix);
    if (plen >= sizeof(key)) {
        SM_FAIL(err, SM_E_USAGE, "array path too long");
    }
    memcpy(key, a->prefix, plen);
    sm_status st = SM_OK;
    for (;;) {
        uint64_t origin[SM_MAX_DIMS], lo[SM_MAX_DIMS], hi[SM_MAX_DIMS];
        for (unsigned d = 0; d < nd; d++) {
            origin[d] = ci[d] * m->chunk_shape[d];
            uint64_t end = origin[d] + m->chunk_shape[d];
            lo[d] = origin[d] > offset[d] ? origin[d] : offset[d];
            hi[d] = end < offset[d] + shape[d] ? end : offset[d] + shape[d];
        }
        st = sm_meta_chunk_key(m, ci, key + plen, sizeof(key) - plen, err);
        if (st != SM_OK) {
            break;
        }
        if (a->shard != NULL) {
            st = sm_shard_read_box(a, key, 0, UINT64_MAX, a->shard, origin, lo, hi, &dst, &bufs,
                                   scratch, err);
        } else {
            st = read_chunk(a, key, origin, lo, hi, &dst, &bufs, scratch, err);
        }
        if (st != SM_OK) {
            break;
        }
        /* next chunk index in C order */
        unsigned d = nd;
        while (d-- > 0) {
            if (++ci[d] <= c1[d]) {
                break;
            }
            ci[d] = c0[d];
        }
        if (d == (unsigned)-1) {
            break;
        }
    }
    sm_read_bufs_free(&bufs);
    return st;
}

sm_status sm_array_scratch_new(struct sm_scratch **out, struct sm_err *err)
{
    return sm_scratch_new(out, err);
}

void sm_array_scratch_free(struct sm_scratch *s)
{
    sm_scratch_free(s);
}
