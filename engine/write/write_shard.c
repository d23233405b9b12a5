/* Shard assembly (SPEC §2 "Every shard of the output grid is written"): a shard's decoded values
 * (clipped to the array) are padded with the fill value when the shard crosses the array's edge,
 * then encoded by the array's own chain; the sharding stage cuts the inner chunks out by row spans
 * (sm_box_copy), stores inner chunks that are all fill as empty, and appends the index.
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html
 * Invariant: deterministic bytes (no uninitialised padding, single-threaded codecs). */
#include "write_int.h"

#include <inttypes.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/box.h"

struct sm_write_scratch {
    struct sm_scratch *codec; /* compression contexts, reused from shard to shard */
    struct sm_buf pad;        /* an edge shard padded to the full shard shape */
};

sm_status sm_write_scratch_new(struct sm_write_scratch **out, struct sm_err *err)
{
    *out = NULL;
    struct sm_write_scratch *ws = sm_calloc(1, sizeof(*ws));
    if (ws == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a write scratch");
    }
    sm_status st = sm_scratch_new(&ws->codec, err);
    if (st != SM_OK) {
        sm_free(ws);
        return st;
    }
    *out = ws;
    return SM_OK;
}

void sm_write_scratch_free(struct sm_write_scratch *ws)
{
    if (ws == NULL) {
        return;
    }
    sm_scratch_free(ws->codec);
    sm_buf_free(&ws->pad);
    sm_free(ws);
}

void sm_write_scratch_set_threads(struct sm_write_scratch *ws, unsigned threads)
{
    sm_scratch_set_threads(ws->codec, threads);
}

sm_status sm_writer_encode_shard(const struct sm_writer *w, uint64_t shard, struct sm_bytes data,
                                 struct sm_buf *out, struct sm_write_scratch *ws,
                                 struct sm_err *err)
{
    if (shard >= w->nshards) {
        SM_FAIL(err, SM_E_INTERNAL, "shard %" PRIu64 " of a grid of %" PRIu64, shard, w->nshards);
    }
    if (w->nlevels > 0) { /* a group's shard is its level's */
        w = sm_writer_locate(w, shard, NULL, &shard);
    }
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    sm_writer_shard_box(w, shard, off, shape);
    size_t want = w->elem;
    bool edge = false;
    for (unsigned d = 0; d < w->ndim; d++) {
        want *= (size_t)shape[d];
        edge = edge || shape[d] != w->obj[d];
    }
    if (data.len != want) {
        SM_FAIL(err, SM_E_INTERNAL, "shard %" PRIu64 ": %zu bytes of values, its box holds %zu",
                shard, data.len, want);
    }
    const struct sm_shard_codec *sc = sm_codec_chain_shard(w->meta->chain);
    sm_status st;
    if (edge && sc != NULL) { /* no padded copy: the inner chunks are cut from the clipped box */
        st = sm_shard_encode_clipped(sc, data, shape, out, ws->codec, err);
    } else if (edge) {
        SM_TRY(sm_buf_reserve(&ws->pad, w->obj_bytes, err));
        const uint64_t zero[SM_MAX_DIMS] = {0};
        const struct sm_box_view full = {w->ndim, w->elem, w->obj};
        const struct sm_box_view clip = {w->ndim, w->elem, shape};
        sm_box_fill(&full, ws->pad.ptr, zero, w->obj, w->meta->fill);
        if (want != 0) {
            sm_box_copy(&clip, data.ptr, zero, &full, ws->pad.ptr, zero, shape);
        }
        ws->pad.len = w->obj_bytes;
        st = sm_codec_chain_encode(w->meta->chain, sm_buf_bytes(&ws->pad), out, ws->codec, err);
    } else {
        st = sm_codec_chain_encode(w->meta->chain, data, out, ws->codec, err);
    }
    if (st != SM_OK) {
        char key[SM_KEY_MAX];
        struct sm_err ke;
        sm_err_clear(&ke);
        if (sm_writer_shard_key(w, shard, key, sizeof(key), &ke) == SM_OK) {
            sm_err_where(err, "%s", key);
        }
    }
    return st;
}
