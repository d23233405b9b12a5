/* The sharding_indexed codec (array -> bytes), the pure half of sharding (STYLE B8); the ranged
 * I/O around it is array/shard_read.c. v3 name "sharding_indexed"; no numcodecs id.
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html
 * Configuration: {"chunk_shape": [2, 16, 16], "codecs": ["bytes"], "index_codecs": ["bytes",
 * "crc32c"], "index_location": "end"}. Invariant: each index entry is empty or inside the shard. */
#include "codec_int.h"

#include <inttypes.h>
#include <jansson.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/box.h"
#include "shardmill/work.h"

struct shard_conf {
    unsigned ndim;
    uint64_t chunk_shape[SM_MAX_DIMS];
    json_t *codecs;       /* owned reference */
    json_t *index_codecs; /* owned reference */
    enum sm_shard_index_location location;
    unsigned depth; /* nesting level of the inner and index chains */
};

struct sm_shard_codec {
    struct sm_shard_layout layout;
    struct sm_repr shard; /* the decoded shard array */
    struct sm_codec_chain *inner;
    struct sm_codec_chain *index;
    size_t pairs_len; /* decoded index bytes: 16 per inner chunk */
    unsigned height;
};

/* ---- configuration ---- */

static void shard_free_conf(void *conf)
{
    struct shard_conf *c = conf;
    if (c == NULL) {
        return;
    }
    json_decref(c->codecs);
    json_decref(c->index_codecs);
    sm_free(c);
}

static void shard_conf_depth(void *conf, unsigned depth)
{
    ((struct shard_conf *)conf)->depth = depth;
}

static sm_status parse_into(const struct json_t *cfg, struct shard_conf *c, struct sm_err *err)
{
    static const char *const keys[] = {"chunk_shape", "codecs", "index_codecs", "index_location",
                                       NULL};
    SM_TRY(sm_codec_cfg_keys(cfg, "sharding_indexed", keys, err));
    if (cfg == NULL || !json_is_object(cfg)) {
        SM_FAIL(err, SM_E_DATA, "codec 'sharding_indexed': missing configuration");
    }
    const json_t *cs = json_object_get(cfg, "chunk_shape");
    if (!json_is_array(cs) || json_array_size(cs) > SM_MAX_DIMS) {
        SM_FAIL(err, SM_E_DATA,
                "codec 'sharding_indexed': 'chunk_shape' must be an array of at most %d integers",
                SM_MAX_DIMS);
    }
    c->ndim = (unsigned)json_array_size(cs);
    for (unsigned d = 0; d < c->ndim; d++) {
        const json_t *v = json_array_get(cs, d);
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
            SM_FAIL(err, SM_E_DATA,
                    "codec 'sharding_indexed': 'chunk_shape'[%u] must be a positive integer", d);
        }
        c->chunk_shape[d] = (uint64_t)json_integer_value(v);
    }
    json_t *codecs = json_object_get(cfg, "codecs");
    if (!json_is_array(codecs)) {
        SM_FAIL(err, SM_E_DATA, "codec 'sharding_indexed': 'codecs' must be an array of codecs");
    }
    c->codecs = json_incref(codecs);
    json_t *ic = json_object_get(cfg, "index_codecs");
    if (ic == NULL || json_is_null(ic)) { /* the spec requires it; zarr-python's default */
        c->index_codecs = json_pack("[{s:s, s:{s:s}}, {s:s}]", "name", "bytes", "configuration",
                                    "endian", "little", "name", "crc32c");
        if (c->index_codecs == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate the default index codecs");
        }
    } else if (!json_is_array(ic)) {
        SM_FAIL(err, SM_E_DATA,
                "codec 'sharding_indexed': 'index_codecs' must be an array of codecs");
    } else {
        c->index_codecs = json_incref(ic);
    }
    const char *loc;
    SM_TRY(sm_codec_cfg_string(cfg, "sharding_indexed", "index_location", false, &loc, err));
    if (loc == NULL || strcmp(loc, "end") == 0) {
        c->location = SM_SHARD_INDEX_END;
    } else if (strcmp(loc, "start") == 0) {
        c->location = SM_SHARD_INDEX_START;
    } else {
        SM_FAIL(err, SM_E_DATA,
                "codec 'sharding_indexed': 'index_location' must be \"end\" or \"start\", got "
                "\"%s\"",
                loc);
    }
    return SM_OK;
}

static sm_status shard_parse(const struct json_t *cfg, void **conf, struct sm_err *err)
{
    struct shard_conf *c = sm_calloc(1, sizeof(*c));
    if (c == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a sharding configuration");
    }
    sm_status st = parse_into(cfg, c, err);
    if (st != SM_OK) {
        shard_free_conf(c);
        return st;
    }
    *conf = c;
    return SM_OK;
}

/* ---- prepare ---- */

static void shard_free_prep(void *prep)
{
    struct sm_shard_codec *sc = prep;
    if (sc == NULL) {
        return;
    }
    sm_codec_chain_free(sc->inner);
    sm_codec_chain_free(sc->index);
    sm_free(sc);
}

/* Checks the shard shape against chunk_shape and fills the layout (index_len comes later). */
static sm_status layout_of(const struct shard_conf *c, const struct sm_repr *in,
                           struct sm_shard_layout *L, struct sm_err *err)
{
    if (c->ndim != in->ndim) {
        SM_FAIL(err, SM_E_DATA,
                "codec 'sharding_indexed': 'chunk_shape' has %u dimensions, the shard has %u",
                c->ndim, in->ndim);
    }
    memset(L, 0, sizeof(*L));
    L->ndim = c->ndim;
    L->location = c->location;
    L->n_inner = 1;
    for (unsigned d = 0; d < c->ndim; d++) {
        if (in->shape[d] % c->chunk_shape[d] != 0) {
            SM_FAIL(err, SM_E_DATA,
                    "codec 'sharding_indexed': shard extent %" PRIu64 " on axis %u is not a "
                    "multiple of the inner chunk extent %" PRIu64,
                    in->shape[d], d, c->chunk_shape[d]);
        }
        L->inner_shape[d] = c->chunk_shape[d];
        L->chunks_per_shard[d] = in->shape[d] / c->chunk_shape[d];
        if (L->chunks_per_shard[d] != 0 && L->n_inner > (SIZE_MAX / 16) / L->chunks_per_shard[d]) {
            SM_FAIL(err, SM_E_DATA,
                    "codec 'sharding_indexed': too many inner chunks per shard (more than %zu, "
                    "16 index bytes each, up to axis %u)",
                    (SIZE_MAX / 16), d);
        }
        L->n_inner *= L->chunks_per_shard[d];
    }
    return SM_OK;
}

static sm_status build_chains(const struct shard_conf *c, const struct sm_repr *in,
                              struct sm_shard_codec *sc, struct sm_err *err)
{
    const struct sm_shard_layout *L = &sc->layout;
    struct sm_repr inner;
    memset(&inner, 0, sizeof(inner));
    inner.dtype = in->dtype;
    inner.ndim = L->ndim;
    memcpy(inner.shape, L->inner_shape, sizeof(inner.shape));
    memcpy(inner.fill, in->fill, sizeof(inner.fill));
    if (!sm_repr_array_len(&inner, &inner.len)) {
        SM_FAIL(err, SM_E_DATA, "codec 'sharding_indexed': inner chunk too large");
    }
    SM_TRY(sm_codec_chain_new_at(c->codecs, &inner, c->depth, &sc->inner, err));

    struct sm_repr index;
    memset(&index, 0, sizeof(index));
    if (L->ndim + 1 > SM_MAX_DIMS) {
        SM_FAIL(err, SM_E_DATA, "codec 'sharding_indexed': the index needs %u dimensions",
                L->ndim + 1);
    }
    index.dtype = SM_DT_UINT64;
    index.ndim = L->ndim + 1;
    memcpy(index.shape, L->chunks_per_shard, L->ndim * sizeof(uint64_t));
    index.shape[L->ndim] = 2;
    index.len = (size_t)L->n_inner * 16;
    memset(index.fill, 0xff, sizeof(index.fill));
    SM_TRY(sm_codec_chain_new_at(c->index_codecs, &index, c->depth, &sc->index, err));
    sc->pairs_len = index.len;
    const size_t enc = sc->index->stages[sc->index->n - 1].enc.len;
    if (enc == SM_LEN_VARIABLE) {
        SM_FAIL(err, SM_E_DATA,
                "codec 'sharding_indexed': 'index_codecs' must have a fixed encoded size (bytes, "
                "optionally crc32c)");
    }
    sc->layout.index_len = enc;
    sc->height = sc->inner->height > sc->index->height ? sc->inner->height : sc->index->height;
    return SM_OK;
}

static sm_status shard_prepare(const void *conf, const struct sm_repr *in, struct sm_repr *out,
                               void **prep, struct sm_err *err)
{
    const struct shard_conf *c = conf;
    if (sm_dtype_size(in->dtype) == 0 || in->len == SM_LEN_VARIABLE) {
        SM_FAIL(err, SM_E_INTERNAL, "codec 'sharding_indexed': needs an array of known size");
    }
    struct sm_shard_codec *sc = sm_calloc(1, sizeof(*sc));
    if (sc == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a prepared sharding codec");
    }
    sc->shard = *in;
    sm_status st = layout_of(c, in, &sc->layout, err);
    if (st == SM_OK) {
        st = build_chains(c, in, sc, err);
    }
    if (st != SM_OK) {
        shard_free_prep(sc);
        return st;
    }
    sm_repr_bytes(out, in, SM_LEN_VARIABLE);
    *prep = sc;
    return SM_OK;
}

static unsigned shard_height(const void *prep)
{
    return ((const struct sm_shard_codec *)prep)->height;
}

const struct sm_shard_layout *sm_shard_layout(const struct sm_shard_codec *sc)
{
    return &sc->layout;
}

const struct sm_codec_chain *sm_shard_inner(const struct sm_shard_codec *sc)
{
    return sc->inner;
}

/* ---- the index ---- */

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8); /* little-endian host (codec_bytes.c) */
    return v;
}

static void wr64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

/* Decodes the index into tmp (2 * n_inner little-endian uint64) and checks every entry. */
static sm_status index_decode(const struct sm_shard_codec *sc, struct sm_bytes index,
                              uint64_t shard_len, struct sm_buf *tmp, struct sm_scratch *scratch,
                              struct sm_err *err)
{
    const struct sm_shard_layout *L = &sc->layout;
    if (index.len != L->index_len) {
        SM_FAIL(err, SM_E_DATA, "shard index of %zu bytes, expected %zu", index.len, L->index_len);
    }
    SM_TRY(sm_codec_chain_decode(sc->index, index, tmp, scratch, err));
    for (uint64_t i = 0; i < L->n_inner; i++) {
        const uint64_t off = rd64(tmp->ptr + 16 * i), len = rd64(tmp->ptr + 16 * i + 8);
        if (off == SM_SHARD_EMPTY && len == SM_SHARD_EMPTY) {
            continue;
        }
        if (off > shard_len || len > shard_len - off) {
            SM_FAIL(err, SM_E_DATA,
                    "shard index entry of inner chunk %" PRIu64 " (offset %" PRIu64
                    ", nbytes %" PRIu64 ") ends past the shard's %" PRIu64 " bytes",
                    i, off, len, shard_len);
        }
    }
    return SM_OK;
}

sm_status sm_shard_index_decode(const struct sm_shard_codec *sc, struct sm_bytes index,
                                uint64_t shard_len, uint64_t *pairs, struct sm_scratch *scratch,
                                struct sm_err *err)
{
    struct sm_scratch_level *lv;
    SM_TRY(sm_scratch_level(scratch, scratch->depth, &lv, err));
    SM_TRY(index_decode(sc, index, shard_len, &lv->aux[0], scratch, err));
    for (uint64_t i = 0; i < 2 * sc->layout.n_inner; i++) {
        pairs[i] = rd64(lv->aux[0].ptr + 8 * i);
    }
    return SM_OK;
}

/* Encodes the pair bytes in `raw` (16 per inner chunk) into out: exactly index_len bytes. */
static sm_status index_encode(const struct sm_shard_codec *sc, const struct sm_buf *raw,
                              struct sm_buf *out, struct sm_scratch *scratch, struct sm_err *err)
{
    SM_TRY(sm_codec_chain_encode(sc->index, sm_buf_bytes(raw), out, scratch, err));
    if (out->len != sc->layout.index_len) {
        SM_FAIL(err, SM_E_INTERNAL, "shard index encoded to %zu bytes, expected %zu", out->len,
                sc->layout.index_len);
    }
    return SM_OK;
}

sm_status sm_shard_index_encode(const struct sm_shard_codec *sc, const uint64_t *pairs,
                                struct sm_buf *out, struct sm_scratch *scratch, struct sm_err *err)
{
    struct sm_scratch_level *lv;
    SM_TRY(sm_scratch_level(scratch, scratch->depth, &lv, err));
    struct sm_buf *raw = &lv->aux[2];
    SM_TRY(sm_buf_reserve(raw, sc->pairs_len, err));
    for (uint64_t i = 0; i < 2 * sc->layout.n_inner; i++) {
        wr64(raw->ptr + 8 * i, pairs[i]);
    }
    raw->len = sc->pairs_len;
    return index_encode(sc, raw, out, scratch, err);
}

/* ---- whole shards ---- */

/* Advances a C-order index over the inner grid (wrapping to zeros after the last one). */
static void next_index(const struct sm_shard_layout *L, uint64_t *idx)
{
    unsigned d = L->ndim;
    while (d-- > 0) {
        if (++idx[d] < L->chunks_per_shard[d]) {
            return;
        }
        idx[d] = 0;
    }
}

static void origin_of(const struct sm_shard_layout *L, const uint64_t *idx, uint64_t *origin)
{
    for (unsigned d = 0; d < L->ndim; d++) {
        origin[d] = idx[d] * L->inner_shape[d];
    }
}

static sm_status shard_decode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                              struct sm_scratch *scratch, struct sm_err *err)
{
    const struct sm_shard_codec *sc = prep;
    const struct sm_shard_layout *L = &sc->layout;
    if (in.len < L->index_len) {
        SM_FAIL(err, SM_E_DATA, "shard of %zu bytes is shorter than its %zu-byte index", in.len,
                L->index_len);
    }
    struct sm_scratch_level *lv;
    SM_TRY(sm_scratch_level(scratch, scratch->depth, &lv, err));
    struct sm_buf *pairs = &lv->aux[0], *piece = &lv->aux[1];
    const struct sm_bytes index = sm_bytes_of(
        L->location == SM_SHARD_INDEX_END ? in.ptr + in.len - L->index_len : in.ptr, L->index_len);
    SM_TRY(index_decode(sc, index, in.len, pairs, scratch, err));
    SM_TRY(sm_buf_reserve(out, sc->shard.len, err));
    const size_t elem = sm_dtype_size(sc->shard.dtype);
    const struct sm_box_view shard_view = {L->ndim, elem, sc->shard.shape};
    const struct sm_box_view inner_view = {L->ndim, elem, L->inner_shape};
    const uint64_t zero[SM_MAX_DIMS] = {0};
    uint64_t idx[SM_MAX_DIMS] = {0}, origin[SM_MAX_DIMS];
    for (uint64_t i = 0; i < L->n_inner; i++, next_index(L, idx)) {
        origin_of(L, idx, origin);
        const uint64_t off = rd64(pairs->ptr + 16 * i), len = rd64(pairs->ptr + 16 * i + 8);
        if (off == SM_SHARD_EMPTY && len == SM_SHARD_EMPTY) {
            sm_box_fill(&shard_view, out->ptr, origin, L->inner_shape, sc->shard.fill);
        } else {
            SM_TRY(sm_codec_chain_decode(sc->inner, sm_bytes_of(in.ptr + off, (size_t)len), piece,
                                         scratch, err));
            sm_box_copy(&inner_view, piece->ptr, zero, &shard_view, out->ptr, origin,
                        L->inner_shape);
        }
    }
    out->len = sc->shard.len;
    return SM_OK;
}

/* True when every element of p equals the fill pattern (then the inner chunk is left out). */
static bool all_fill(const uint8_t *p, size_t len, const uint8_t *fill, size_t elem)
{
    if (len == 0) {
        return true;
    }
    return memcmp(p, fill, elem) == 0 && memcmp(p, p + elem, len - elem) == 0;
}

/* Inner chunk (at idx) of the shard `in`, cut out into `chunk` and encoded into `enc`; *len
 * SM_SHARD_EMPTY when it holds only the fill value (then it is left out of the shard). `in` holds
 * the values of the box [0, clip) of the shard; the rest of the shard is the fill value. */
static sm_status encode_inner(const struct sm_shard_codec *sc, struct sm_bytes in,
                              const uint64_t *clip, const uint64_t *idx, struct sm_buf *chunk,
                              struct sm_buf *enc, struct sm_scratch *scratch, uint64_t *len,
                              struct sm_err *err)
{
    const struct sm_shard_layout *L = &sc->layout;
    const size_t elem = sm_dtype_size(sc->shard.dtype);
    const struct sm_box_view in_view = {L->ndim, elem, clip};
    const struct sm_box_view inner_view = {L->ndim, elem, L->inner_shape};
    const uint64_t zero[SM_MAX_DIMS] = {0};
    uint64_t origin[SM_MAX_DIMS], ext[SM_MAX_DIMS];
    origin_of(L, idx, origin);
    bool whole = true;
    *len = SM_SHARD_EMPTY;
    for (unsigned d = 0; d < L->ndim; d++) {
        if (origin[d] >= clip[d]) {
            return SM_OK; /* wholly past the values: only the fill value */
        }
        ext[d] = clip[d] - origin[d] < L->inner_shape[d] ? clip[d] - origin[d] : L->inner_shape[d];
        whole = whole && ext[d] == L->inner_shape[d];
    }
    if (!whole) {
        sm_box_fill(&inner_view, chunk->ptr, zero, L->inner_shape, sc->shard.fill);
    }
    sm_box_copy(&in_view, in.ptr, origin, &inner_view, chunk->ptr, zero, ext);
    if (all_fill(chunk->ptr, chunk->len, sc->shard.fill, elem)) {
        return SM_OK;
    }
    SM_TRY(sm_codec_chain_encode(sc->inner, sm_buf_bytes(chunk), enc, scratch, err));
    *len = enc->len;
    return SM_OK;
}

/* A shard's inner chunks encoded by several threads (sm_scratch_set_threads): the chunks are cut
 * into blocks of consecutive ones, each block encoded into a buffer of its own by whichever thread
 * takes it (core's work driver), then the blocks are joined in order, so the shard's bytes are the
 * serial encode's. */
struct par_encode {
    const struct sm_shard_codec *sc;
    struct sm_bytes in;
    const uint64_t *clip;
    struct sm_scratch *ws[SM_SCRATCH_MAX_WORKERS];
    /* per thread, kept from shard to shard: the caller's own for thread 0, level 0 of its worker
     * scratch for the others (whose inner chains run on that level's tmp buffers) */
    struct sm_buf *chunk[SM_SCRATCH_MAX_WORKERS], *enc[SM_SCRATCH_MAX_WORKERS];
    struct sm_buf *blocks; /* per block */
    uint8_t *pairs;        /* offsets relative to the block until joined */
    uint64_t nblocks;
};

static uint64_t block_start(const struct par_encode *pe, uint64_t b)
{
    return b * pe->sc->layout.n_inner / pe->nblocks;
}

static sm_status encode_block(void *user, int thread, uint64_t b, uint64_t *bytes,
                              struct sm_err *err)
{
    (void)bytes;
    const struct par_encode *pe = user;
    const struct sm_shard_layout *L = &pe->sc->layout;
    uint64_t idx[SM_MAX_DIMS], rest = block_start(pe, b);
    for (unsigned d = L->ndim; d-- > 0;) {
        idx[d] = rest % L->chunks_per_shard[d];
        rest /= L->chunks_per_shard[d];
    }
    struct sm_buf *blk = &pe->blocks[b], *enc = pe->enc[thread];
    for (uint64_t i = block_start(pe, b); i < block_start(pe, b + 1); i++, next_index(L, idx)) {
        uint64_t off = SM_SHARD_EMPTY, len;
        SM_TRY(encode_inner(pe->sc, pe->in, pe->clip, idx, pe->chunk[thread], enc, pe->ws[thread],
                            &len, err));
        if (len != SM_SHARD_EMPTY) {
            off = blk->len;
            SM_TRY(sm_codec_append(blk, enc->ptr, enc->len, err));
        }
        wr64(pe->pairs + 16 * i, off);
        wr64(pe->pairs + 16 * i + 8, len);
    }
    return SM_OK;
}

/* Encodes the inner chunks into out (after `out->len` bytes) and their pairs into raw, on
 * `threads` threads, thread 0 cutting into `chunk` and encoding into `enc` (the serial path's
 * buffers); see struct par_encode. */
static sm_status encode_parallel(const struct sm_shard_codec *sc, struct sm_bytes in,
                                 const uint64_t *clip, unsigned threads, struct sm_buf *chunk,
                                 struct sm_buf *enc, struct sm_buf *raw, struct sm_buf *out,
                                 struct sm_scratch *scratch, struct sm_err *err)
{
    const struct sm_repr *ir = sm_codec_chain_repr(sc->inner);
    struct par_encode pe = {.sc = sc, .in = in, .clip = clip, .pairs = raw->ptr};
    pe.nblocks =
        4 * (uint64_t)threads < sc->layout.n_inner ? 4 * (uint64_t)threads : sc->layout.n_inner;
    pe.blocks = sm_calloc((size_t)pe.nblocks, sizeof(struct sm_buf));
    if (pe.blocks == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate the blocks of a parallel shard encode");
    }
    sm_status st = SM_OK;
    pe.chunk[0] = chunk;
    pe.enc[0] = enc;
    for (unsigned t = 0; t < threads && st == SM_OK; t++) {
        st = sm_scratch_worker(scratch, t, &pe.ws[t], err);
        struct sm_scratch_level *lv;
        if (st == SM_OK && t > 0 && (st = sm_scratch_level(pe.ws[t], 0, &lv, err)) == SM_OK) {
            pe.chunk[t] = &lv->aux[0];
            pe.enc[t] = &lv->aux[1];
            st = sm_buf_reserve(pe.chunk[t], ir->len, err);
            pe.chunk[t]->len = ir->len;
        }
    }
    if (st == SM_OK) {
        const struct sm_work wk = {
            .count = pe.nblocks, .threads = (int)threads, .item = encode_block, .user = &pe};
        st = sm_work_run(&wk, err);
    }
    for (uint64_t b = 0; b < pe.nblocks && st == SM_OK; b++) {
        const uint64_t base = out->len;
        for (uint64_t i = block_start(&pe, b); i < block_start(&pe, b + 1); i++) {
            const uint64_t off = rd64(pe.pairs + 16 * i);
            if (off != SM_SHARD_EMPTY) {
                wr64(pe.pairs + 16 * i, base + off);
            }
        }
        st = sm_codec_append(out, pe.blocks[b].ptr, pe.blocks[b].len, err);
    }
    for (uint64_t b = 0; b < pe.nblocks; b++) {
        sm_buf_free(&pe.blocks[b]);
    }
    sm_free(pe.blocks);
    return st;
}

/* Room in out, whose old bytes do not matter, for the encoded shard as a codec that does not
 * shrink the values makes it: the values, 1/64 more and 64 bytes per inner chunk (zstd's and
 * gzip's worst case on incompressible data stays under that), and the index. Taken once: grown
 * chunk by chunk, the buffer was copied at every doubling, each time into fresh pages the kernel
 * zeroes (a large block is a mapping of its own); unused pages of a mapping cost no memory. A
 * shard that needs more still grows on append. */
static sm_status reserve_shard(const struct sm_shard_codec *sc, struct sm_buf *out,
                               struct sm_err *err)
{
    const struct sm_shard_layout *L = &sc->layout;
    const size_t len = sc->shard.len;
    if (L->n_inner > (SIZE_MAX - L->index_len) / 128 || len > SIZE_MAX / 2) {
        return SM_OK; /* no sensible guess: grown on append */
    }
    const size_t want = len + len / 64 + (size_t)L->n_inner * 64 + L->index_len;
    if (out->cap < want) {
        sm_buf_free(out);
        SM_TRY(sm_buf_reserve(out, want, err));
    }
    return SM_OK;
}

/* The shard whose values inside [0, clip) are `in` and the fill value elsewhere. */
static sm_status encode_clipped(const struct sm_shard_codec *sc, struct sm_bytes in,
                                const uint64_t *clip, struct sm_buf *out,
                                struct sm_scratch *scratch, struct sm_err *err)
{
    const struct sm_shard_layout *L = &sc->layout;
    const struct sm_repr *ir = sm_codec_chain_repr(sc->inner);
    size_t want = sm_dtype_size(sc->shard.dtype);
    for (unsigned d = 0; d < L->ndim; d++) {
        if (clip[d] > sc->shard.shape[d]) {
            SM_FAIL(err, SM_E_INTERNAL, "clip of %" PRIu64 " on axis %u, the shard has %" PRIu64,
                    clip[d], d, sc->shard.shape[d]);
        }
        want *= (size_t)clip[d];
    }
    if (in.len != want) {
        SM_FAIL(err, SM_E_INTERNAL, "shard encode input of %zu bytes, its box holds %zu", in.len,
                want);
    }
    struct sm_scratch_level *lv;
    SM_TRY(sm_scratch_level(scratch, scratch->depth, &lv, err));
    struct sm_buf *chunk = &lv->aux[0], *enc = &lv->aux[1], *raw = &lv->aux[2];
    SM_TRY(sm_buf_reserve(chunk, ir->len, err));
    SM_TRY(sm_buf_reserve(raw, sc->pairs_len, err));
    chunk->len = ir->len;
    raw->len = sc->pairs_len;
    SM_TRY(reserve_shard(sc, out, err));
    out->len = 0;
    if (L->location == SM_SHARD_INDEX_START) { /* the index is written over this at the end */
        SM_TRY(sm_buf_reserve(out, L->index_len, err));
        memset(out->ptr, 0, L->index_len);
        out->len = L->index_len;
    }
    /* Helpers get no helpers: a worker scratch has no threads of its own, and a shard nested in
     * a shard being encoded in parallel (inside the work driver's region) is encoded serially,
     * for the workers' scratches are in use by the outer shard's threads. */
    const unsigned threads = scratch->threads;
    if (threads > 1 && L->n_inner > 1 && !sm_work_in_parallel()) {
        SM_TRY(encode_parallel(sc, in, clip, threads, chunk, enc, raw, out, scratch, err));
    } else {
        uint64_t idx[SM_MAX_DIMS] = {0};
        for (uint64_t i = 0; i < L->n_inner; i++, next_index(L, idx)) {
            uint64_t off = SM_SHARD_EMPTY, len;
            SM_TRY(encode_inner(sc, in, clip, idx, chunk, enc, scratch, &len, err));
            if (len != SM_SHARD_EMPTY) {
                off = out->len;
                SM_TRY(sm_codec_append(out, enc->ptr, enc->len, err));
            }
            wr64(raw->ptr + 16 * i, off);
            wr64(raw->ptr + 16 * i + 8, len);
        }
    }
    SM_TRY(index_encode(sc, raw, chunk, scratch, err));
    if (L->location == SM_SHARD_INDEX_START) {
        memcpy(out->ptr, chunk->ptr, L->index_len);
        return SM_OK;
    }
    return sm_codec_append(out, chunk->ptr, L->index_len, err);
}

static sm_status shard_encode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                              struct sm_scratch *scratch, struct sm_err *err)
{
    const struct sm_shard_codec *sc = prep;
    return encode_clipped(sc, in, sc->shard.shape, out, scratch, err);
}

sm_status sm_shard_encode_clipped(const struct sm_shard_codec *sc, struct sm_bytes in,
                                  const uint64_t *clip, struct sm_buf *out,
                                  struct sm_scratch *scratch, struct sm_err *err)
{
    const unsigned level = scratch->depth; /* as the chain's own stage would run */
    scratch->depth = level + 1;
    const sm_status st = encode_clipped(sc, in, clip, out, scratch, err);
    scratch->depth = level;
    return st;
}

const struct sm_codec_ops sm_codec_sharding_ops = {
    .name = "sharding_indexed",
    .v2_id = NULL,
    .kind = SM_CODEC_A2B,
    .parse = shard_parse,
    .prepare = shard_prepare,
    .decode = shard_decode,
    .encode = shard_encode,
    .free_conf = shard_free_conf,
    .free_prep = shard_free_prep,
    .set_depth = shard_conf_depth,
    .height = shard_height,
};
