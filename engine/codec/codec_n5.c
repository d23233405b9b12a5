/* The N5 block codec (array -> bytes): an N5 block is a big-endian header (mode, ndim, the block's
 * size per dimension fastest-first, and for mode 1 an element count) followed by the compressed
 * big-endian values. format/format_n5.c reverses the N5 axes, so a block's values are the C-order
 * values of its (possibly truncated) shape; decode pads a truncated edge block with the fill value.
 * Spec: https://github.com/saalfeldlab/n5#file-system-specification
 * v3 name "n5_block" (shardmill-internal; no numcodecs id). Configuration:
 * {"compressor": {"name": "gzip", "configuration": {"level": 6}}} or {"compressor": null}.
 * Invariant: nothing is allocated from a header's claims beyond the chunk's own byte size: a
 * header naming more elements than the chunk holds is refused before decompression. */
#include "codec_int.h"

#include <jansson.h>
#include <string.h>

#include "shardmill/alloc.h"

#define N5_MODE_DEFAULT 0
#define N5_MODE_VARLENGTH 1

struct n5_conf {
    const struct sm_codec_ops *comp; /* a bytes->bytes codec, or NULL for raw */
    void *comp_conf;
};

struct n5_prep {
    unsigned ndim;
    uint64_t shape[SM_MAX_DIMS]; /* the chunk shape, C order */
    size_t elem, len;
    uint8_t fill[8];
    const struct sm_codec_ops *comp;
    void *full; /* the compressor prepared for a whole block (exact size) */
    void *var;  /* ... and for a truncated block (size checked after decoding) */
};

static void n5_free_conf(void *conf)
{
    struct n5_conf *c = conf;
    if (c != NULL && c->comp_conf != NULL && c->comp->free_conf != NULL) {
        c->comp->free_conf(c->comp_conf);
    }
    sm_free(c);
}

static void n5_free_prep(void *prep)
{
    struct n5_prep *p = prep;
    if (p != NULL && p->comp != NULL && p->comp->free_prep != NULL) {
        if (p->full != NULL) {
            p->comp->free_prep(p->full);
        }
        if (p->var != NULL) {
            p->comp->free_prep(p->var);
        }
    }
    sm_free(p);
}

static sm_status n5_parse(const struct json_t *cfg, void **conf, struct sm_err *err)
{
    static const char *const keys[] = {"compressor", NULL};
    SM_TRY(sm_codec_cfg_keys(cfg, "n5_block", keys, err));
    const json_t *comp = cfg != NULL ? json_object_get(cfg, "compressor") : NULL;
    const struct sm_codec_ops *ops = NULL;
    const json_t *ccfg = NULL;
    if (comp != NULL && !json_is_null(comp)) {
        const char *name = json_string_value(json_object_get(comp, "name"));
        if (!json_is_object(comp) || name == NULL) {
            SM_FAIL(err, SM_E_DATA,
                    "codec 'n5_block': 'compressor' must be null or a codec object with a name");
        }
        ops = sm_codec_find(name);
        if (ops == NULL || ops->kind != SM_CODEC_B2B) {
            SM_FAIL(err, SM_E_DATA, "codec 'n5_block': '%s' is not a bytes->bytes codec", name);
        }
        ccfg = json_object_get(comp, "configuration");
    }
    struct n5_conf *c = sm_calloc(1, sizeof(*c));
    if (c == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate an n5_block configuration");
    }
    c->comp = ops;
    if (ops != NULL) {
        sm_status st = ops->parse(ccfg, &c->comp_conf, err);
        if (st != SM_OK) {
            sm_free(c);
            return st;
        }
    }
    *conf = c;
    return SM_OK;
}

static sm_status n5_prepare(const void *conf, const struct sm_repr *in, struct sm_repr *out,
                            void **prep, struct sm_err *err)
{
    const struct n5_conf *c = conf;
    const size_t elem = sm_dtype_size(in->dtype);
    if (elem == 0 || in->len == SM_LEN_VARIABLE) {
        SM_FAIL(err, SM_E_INTERNAL, "codec 'n5_block': needs an array of a known type and size");
    }
    if (in->ndim == 0) {
        SM_FAIL(err, SM_E_DATA, "codec 'n5_block': an N5 block has at least one dimension");
    }
    for (unsigned d = 0; d < in->ndim; d++) {
        if (in->shape[d] > UINT32_MAX) {
            SM_FAIL(err, SM_E_DATA,
                    "codec 'n5_block': block dimension %u is %llu, more than a header holds", d,
                    (unsigned long long)in->shape[d]);
        }
    }
    struct n5_prep *p = sm_calloc(1, sizeof(*p));
    if (p == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a prepared n5_block codec");
    }
    p->ndim = in->ndim;
    memcpy(p->shape, in->shape, sizeof(p->shape));
    p->elem = elem;
    p->len = in->len;
    memcpy(p->fill, in->fill, sizeof(p->fill));
    p->comp = c->comp;
    sm_status st = SM_OK;
    if (c->comp != NULL) {
        struct sm_repr full, var, enc;
        sm_repr_bytes(&full, in, in->len);
        sm_repr_bytes(&var, in, SM_LEN_VARIABLE);
        st = c->comp->prepare(c->comp_conf, &full, &enc, &p->full, err);
        if (st == SM_OK) {
            st = c->comp->prepare(c->comp_conf, &var, &enc, &p->var, err);
        }
    }
    if (st != SM_OK) {
        n5_free_prep(p);
        return st;
    }
    sm_repr_bytes(out, in, SM_LEN_VARIABLE);
    *prep = p;
    return SM_OK;
}

static uint32_t rd_be32(const uint8_t *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

static uint16_t rd_be16(const uint8_t *b)
{
    return (uint16_t)(b[0] << 8 | b[1]);
}

static void wr_be32(uint8_t *b, uint32_t v)
{
    b[0] = (uint8_t)(v >> 24);
    b[1] = (uint8_t)(v >> 16);
    b[2] = (uint8_t)(v >> 8);
    b[3] = (uint8_t)v;
}

/* Copies n elements of size elem, reversing the bytes of each (big <-> little endian). */
static void swap_copy(uint8_t *dst, const uint8_t *src, size_t n, size_t elem)
{
    switch (elem) {
    case 1:
        memcpy(dst, src, n);
        return;
    case 2:
        for (size_t i = 0; i < n; i++) {
            dst[2 * i] = src[2 * i + 1];
            dst[2 * i + 1] = src[2 * i];
        }
        return;
    default:
        for (size_t i = 0; i < n; i++) {
            for (size_t k = 0; k < elem; k++) {
                dst[i * elem + k] = src[i * elem + elem - 1 - k];
            }
        }
        return;
    }
}

/* Parses the header of an N5 block for a dataset of `ndim` axes whose chunk shape (C order, the N5
 * axes reversed) is chunk[ndim]: block[] receives the block's size in C order, *header_len the
 * header's length. SM_E_DATA for a short or truncated header, a mode other than 0 and 1, another
 * number of dimensions, a size above the chunk's, or a varlength element count that differs from
 * the size's product. */
static sm_status n5_header_parse(struct sm_bytes in, unsigned ndim, const uint64_t *chunk,
                                 uint64_t *block, size_t *header_len, struct sm_err *err)
{
    if (in.len < 4) {
        SM_FAIL(err, SM_E_DATA, "N5 block of %zu bytes is shorter than its 4-byte header start",
                in.len);
    }
    const unsigned mode = rd_be16(in.ptr), n = rd_be16(in.ptr + 2);
    if (mode != N5_MODE_DEFAULT && mode != N5_MODE_VARLENGTH) {
        SM_FAIL(err, SM_E_DATA, "N5 block mode %u is not supported (0 default, 1 varlength)", mode);
    }
    if (n != ndim) {
        SM_FAIL(err, SM_E_DATA, "N5 block header has %u dimensions, the dataset %u", n, ndim);
    }
    const size_t need = 4 + 4 * (size_t)n + (mode == N5_MODE_VARLENGTH ? 4 : 0);
    if (in.len < need) {
        SM_FAIL(err, SM_E_DATA, "N5 block header truncated: %zu bytes, the header needs %zu",
                in.len, need);
    }
    uint64_t count = 1;
    for (unsigned d = 0; d < n; d++) {
        const uint64_t s = rd_be32(in.ptr + 4 + 4 * (size_t)d);
        const unsigned c = ndim - 1 - d; /* N5 lists the fastest dimension first */
        if (s > chunk[c]) {
            SM_FAIL(err, SM_E_DATA,
                    "N5 block size %llu in dimension %u exceeds the blockSize %llu of the dataset",
                    (unsigned long long)s, d, (unsigned long long)chunk[c]);
        }
        block[c] = s;
        count *= s; /* bounded by the chunk's element count, which fits size_t */
    }
    if (mode == N5_MODE_VARLENGTH) {
        const uint32_t num = rd_be32(in.ptr + 4 + 4 * (size_t)n);
        if (num != count) {
            SM_FAIL(err, SM_E_DATA,
                    "N5 varlength block declares %lu elements, its block size holds %llu",
                    (unsigned long)num, (unsigned long long)count);
        }
    }
    *header_len = need;
    return SM_OK;
}

/* Decompresses the payload into dst: exactly want bytes (a whole block through the prepared exact
 * size, a truncated one with the decode bound lowered to its size). */
static sm_status decompress(const struct n5_prep *p, struct sm_bytes payload, size_t want,
                            struct sm_buf *dst, struct sm_scratch *scratch, struct sm_err *err)
{
    if (want == p->len) {
        return p->comp->decode(p->full, payload, dst, scratch, err);
    }
    /* One spare byte: a stream that goes on past the block is then seen, not cut off. */
    const size_t bound = scratch->max_decoded;
    scratch->max_decoded = want < bound ? want + 1 : bound;
    sm_status st = p->comp->decode(p->var, payload, dst, scratch, err);
    scratch->max_decoded = bound;
    if (st == SM_E_LIMIT && want < bound) {
        sm_err_clear(err); /* not the configured limit: the block's own size was exceeded */
        SM_FAIL(err, SM_E_DATA,
                "N5 block data decodes to more than the %zu bytes of its block size", want);
    }
    if (st == SM_OK && dst->len != want) {
        SM_FAIL(err, SM_E_DATA, "N5 block data decodes to %zu bytes, its block size holds %zu",
                dst->len, want);
    }
    return st;
}

static sm_status n5_decode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                           struct sm_scratch *scratch, struct sm_err *err)
{
    const struct n5_prep *p = prep;
    uint64_t block[SM_MAX_DIMS];
    size_t hlen = 0;
    SM_TRY(n5_header_parse(in, p->ndim, p->shape, block, &hlen, err));
    size_t count = 1;
    bool whole = true;
    for (unsigned d = 0; d < p->ndim; d++) {
        count *= (size_t)block[d];
        whole = whole && block[d] == p->shape[d];
    }
    const size_t want = count * p->elem;
    struct sm_bytes payload = {in.ptr + hlen, in.len - hlen};
    if (p->comp != NULL) {
        struct sm_scratch_level *lv;
        SM_TRY(sm_scratch_level(scratch, scratch->depth, &lv, err));
        SM_TRY(decompress(p, payload, want, &lv->aux[0], scratch, err));
        payload = sm_buf_bytes(&lv->aux[0]);
    } else if (payload.len != want) {
        SM_FAIL(err, SM_E_DATA, "N5 block data is %zu bytes, its block size holds %zu", payload.len,
                want);
    }
    SM_TRY(sm_buf_reserve(out, p->len != 0 ? p->len : 1, err));
    out->len = p->len;
    if (whole) {
        swap_copy(out->ptr, payload.ptr, count, p->elem);
        return SM_OK;
    }
    /* A truncated edge block: fill, then copy it row by row (its last axis is contiguous). */
    for (size_t i = 0; i < p->len / p->elem; i++) {
        memcpy(out->ptr + i * p->elem, p->fill, p->elem);
    }
    if (count == 0) {
        return SM_OK;
    }
    const unsigned nd = p->ndim;
    const size_t row = (size_t)block[nd - 1];
    size_t stride[SM_MAX_DIMS]; /* elements, in the chunk */
    stride[nd - 1] = 1;
    for (unsigned d = nd - 1; d-- > 0;) {
        stride[d] = stride[d + 1] * (size_t)p->shape[d + 1];
    }
    uint64_t idx[SM_MAX_DIMS];
    memset(idx, 0, sizeof(idx));
    for (size_t r = 0; r < count / row; r++) {
        size_t at = 0;
        for (unsigned d = 0; d + 1 < nd; d++) {
            at += (size_t)idx[d] * stride[d];
        }
        swap_copy(out->ptr + at * p->elem, payload.ptr + r * row * p->elem, row, p->elem);
        for (unsigned d = nd - 1; d-- > 0;) { /* next row: odometer over the outer axes */
            if (++idx[d] < block[d]) {
                break;
            }
            idx[d] = 0;
        }
    }
    return SM_OK;
}

/* Encodes a whole block (mode 0, the chunk's full size, as zarr-python's N5 writer does). */
static sm_status n5_encode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                           struct sm_scratch *scratch, struct sm_err *err)
{
    const struct n5_prep *p = prep;
    struct sm_scratch_level *lv;
    SM_TRY(sm_scratch_level(scratch, scratch->depth, &lv, err));
    struct sm_buf *be = &lv->aux[0], *packed = &lv->aux[1];
    SM_TRY(sm_buf_reserve(be, in.len != 0 ? in.len : 1, err));
    swap_copy(be->ptr, in.ptr, in.len / p->elem, p->elem);
    be->len = in.len;
    struct sm_bytes payload = sm_buf_bytes(be);
    if (p->comp != NULL) {
        SM_TRY(p->comp->encode(p->full, payload, packed, scratch, err));
        payload = sm_buf_bytes(packed);
    }
    const size_t hlen = 4 + 4 * (size_t)p->ndim;
    SM_TRY(sm_buf_reserve(out, hlen + payload.len, err));
    out->ptr[0] = 0;
    out->ptr[1] = N5_MODE_DEFAULT;
    out->ptr[2] = (uint8_t)(p->ndim >> 8);
    out->ptr[3] = (uint8_t)p->ndim;
    for (unsigned d = 0; d < p->ndim; d++) {
        wr_be32(out->ptr + 4 + 4 * (size_t)d, (uint32_t)p->shape[p->ndim - 1 - d]);
    }
    if (payload.len > 0) {
        memcpy(out->ptr + hlen, payload.ptr, payload.len);
    }
    out->len = hlen + payload.len;
    return SM_OK;
}

const struct sm_codec_ops sm_codec_n5_ops = {
    .name = "n5_block",
    .v2_id = NULL,
    .kind = SM_CODEC_A2B,
    .parse = n5_parse,
    .prepare = n5_prepare,
    .decode = n5_decode,
    .encode = n5_encode,
    .free_conf = n5_free_conf,
    .free_prep = n5_free_prep,
};
