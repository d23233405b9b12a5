/* The transpose codec (array -> array): encoded = numpy.transpose(decoded, order), planned once
 * and copied by rows or cache-sized 2-D tiles (no per-element coordinate arithmetic).
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/transpose/index.html
 * v3 name "transpose"; no numcodecs id (format/ maps v2 order "F" onto it). Configuration:
 * {"order": [2, 0, 1]} (legacy "C"/"F" too); encoded.shape[i] = decoded.shape[order[i]]. */
#include "codec_int.h"

#include <jansson.h>
#include <string.h>

#include "shardmill/alloc.h"

/* Tile extents: TILE_ROW_BYTES of each source run (the source-contiguous axis) by TILE_C
 * destination elements. Small tiles matter: with power-of-two strides (64^3 blocks) every row of a
 * tile maps to the same cache set, and 8 rows + 8 columns fit an 8-way L1 (measured on 64^3 int32
 * order [2,1,0]: 8x8 tiles 0.3 ms, 32x32 tiles 1.0 ms). */
#define TILE_ROW_BYTES 32
#define TILE_C 8

/* A planned copy dst[i] = src[perm(i)] over merged axes of the destination, in C order. */
struct tplan {
    unsigned nd;                /* merged axes (0: a single contiguous copy) */
    size_t elem;                /* element size */
    size_t total;               /* bytes of the whole array */
    uint64_t ext[SM_MAX_DIMS];  /* destination extents */
    uint64_t sst[SM_MAX_DIMS];  /* source byte stride of each destination axis */
    uint64_t dst_[SM_MAX_DIMS]; /* destination byte strides */
    unsigned q;                 /* the axis contiguous in the source (tiled case) */
    bool rows;                  /* last axis contiguous in both: copy runs with memcpy */
};

static void plan_build(struct tplan *p, unsigned ndim, const uint64_t *shape, const unsigned *perm,
                       size_t elem)
{
    uint64_t ss[SM_MAX_DIMS];
    uint64_t s = elem;
    for (unsigned d = ndim; d-- > 0;) {
        ss[d] = s;
        s *= shape[d];
    }
    memset(p, 0, sizeof(*p));
    p->elem = elem;
    p->total = (size_t)s;
    for (unsigned i = 0; i < ndim; i++) {
        const uint64_t e = shape[perm[i]];
        if (e == 1) {
            continue; /* unit axes move nothing */
        }
        if (p->nd > 0 && p->sst[p->nd - 1] == ss[perm[i]] * e) {
            p->ext[p->nd - 1] *= e; /* contiguous in the source too: merge */
            p->sst[p->nd - 1] = ss[perm[i]];
            continue;
        }
        p->ext[p->nd] = e;
        p->sst[p->nd] = ss[perm[i]];
        p->nd++;
    }
    uint64_t t = elem;
    for (unsigned d = p->nd; d-- > 0;) {
        p->dst_[d] = t;
        t *= p->ext[d];
    }
    p->rows = p->nd == 0 || p->sst[p->nd - 1] == elem;
    for (unsigned d = 0; d < p->nd; d++) {
        if (p->sst[d] == elem) {
            p->q = d;
        }
    }
}

/* One tile: rows r along the source-contiguous axis, columns c along the destination-contiguous
 * axis. Typed copies let the compiler keep elements in registers. */
#define TILE_KERNEL(T)                                                                             \
    for (uint64_t r = 0; r < rn; r++) {                                                            \
        uint8_t *dr = d + r * dq;                                                                  \
        const uint8_t *sr = s + r * sizeof(T);                                                     \
        for (uint64_t c = 0; c < cn; c++) {                                                        \
            T v;                                                                                   \
            memcpy(&v, sr + c * sl, sizeof(T));                                                    \
            memcpy(dr + c * sizeof(T), &v, sizeof(T));                                             \
        }                                                                                          \
    }

static void tile(uint8_t *d, uint64_t dq, const uint8_t *s, uint64_t sl, uint64_t rn, uint64_t cn,
                 size_t elem)
{
    switch (elem) {
    case 1:
        TILE_KERNEL(uint8_t)
        break;
    case 2:
        TILE_KERNEL(uint16_t)
        break;
    case 4:
        TILE_KERNEL(uint32_t)
        break;
    default:
        TILE_KERNEL(uint64_t)
        break;
    }
}

static void plan_run(const struct tplan *p, const uint8_t *src, uint8_t *dst)
{
    if (p->total == 0) {
        return;
    }
    if (p->nd <= 1 && p->rows) {
        memcpy(dst, src, p->total);
        return;
    }
    const unsigned last = p->nd - 1;
    /* The outer axes: all but `last` (row copies) or all but `last` and `q` (tiles). */
    unsigned outer[SM_MAX_DIMS];
    unsigned no = 0;
    for (unsigned d = 0; d < last; d++) {
        if (p->rows || d != p->q) {
            outer[no++] = d;
        }
    }
    uint64_t ctr[SM_MAX_DIMS] = {0};
    const uint8_t *s = src;
    uint8_t *t = dst;
    const uint64_t run = p->ext[last] * p->elem;
    for (;;) {
        if (p->rows) {
            memcpy(t, s, run);
        } else {
            const uint64_t nq = p->ext[p->q], nl = p->ext[last];
            const uint64_t tr = TILE_ROW_BYTES / p->elem;
            for (uint64_t r0 = 0; r0 < nq; r0 += tr) {
                const uint64_t rn = nq - r0 < tr ? nq - r0 : tr;
                for (uint64_t c0 = 0; c0 < nl; c0 += TILE_C) {
                    const uint64_t cn = nl - c0 < TILE_C ? nl - c0 : TILE_C;
                    tile(t + r0 * p->dst_[p->q] + c0 * p->elem, p->dst_[p->q],
                         s + r0 * p->elem + c0 * p->sst[last], p->sst[last], rn, cn, p->elem);
                }
            }
        }
        unsigned k = no;
        while (k-- > 0) {
            const unsigned d = outer[k];
            s += p->sst[d];
            t += p->dst_[d];
            if (++ctr[k] < p->ext[d]) {
                break;
            }
            s -= p->sst[d] * p->ext[d];
            t -= p->dst_[d] * p->ext[d];
            ctr[k] = 0;
        }
        if (k == (unsigned)-1) {
            return;
        }
    }
}

void sm_transpose_copy(unsigned ndim, const uint64_t *shape, const unsigned *perm, size_t elem,
                       const void *src, void *dst)
{
    struct tplan p;
    plan_build(&p, ndim, shape, perm, elem);
    plan_run(&p, src, dst);
}

/* ---- the codec ---- */

struct transpose_conf {
    char legacy; /* 'C' or 'F' for the legacy string forms, 0 for an explicit permutation */
    unsigned n;
    unsigned order[SM_MAX_DIMS];
};

struct transpose_prep {
    size_t len;
    bool identity;
    struct tplan enc; /* decoded -> encoded */
    struct tplan dec; /* encoded -> decoded */
};

static sm_status transpose_parse(const struct json_t *cfg, void **conf, struct sm_err *err)
{
    static const char *const keys[] = {"order", NULL};
    SM_TRY(sm_codec_cfg_keys(cfg, "transpose", keys, err));
    const json_t *o = cfg != NULL && json_is_object(cfg) ? json_object_get(cfg, "order") : NULL;
    struct transpose_conf c;
    memset(&c, 0, sizeof(c));
    if (o == NULL) {
        SM_FAIL(err, SM_E_DATA, "codec 'transpose': missing configuration key 'order'");
    }
    if (json_is_string(o)) {
        const char *s = json_string_value(o);
        if (strcmp(s, "C") != 0 && strcmp(s, "F") != 0) {
            SM_FAIL(err, SM_E_DATA,
                    "codec 'transpose': 'order' must be a permutation, \"C\" or \"F\", got \"%s\"",
                    s);
        }
        c.legacy = s[0];
    } else if (json_is_array(o)) {
        const size_t n = json_array_size(o);
        if (n > SM_MAX_DIMS) {
            SM_FAIL(err, SM_E_DATA, "codec 'transpose': 'order' has %zu entries, at most %d", n,
                    SM_MAX_DIMS);
        }
        bool seen[SM_MAX_DIMS] = {false};
        for (size_t i = 0; i < n; i++) {
            const json_t *v = json_array_get(o, i);
            const json_int_t x = json_is_integer(v) ? json_integer_value(v) : -1;
            if (x < 0 || (size_t)x >= n || seen[x]) {
                SM_FAIL(err, SM_E_DATA,
                        "codec 'transpose': 'order' must be a permutation of 0..%zu (entry %zu)",
                        n - 1, i);
            }
            seen[x] = true;
            c.order[i] = (unsigned)x;
        }
        c.n = (unsigned)n;
    } else {
        SM_FAIL(err, SM_E_DATA, "codec 'transpose': 'order' must be an array of axis indices");
    }
    struct transpose_conf *p = sm_malloc(sizeof(*p));
    if (p == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a transpose configuration");
    }
    *p = c;
    *conf = p;
    return SM_OK;
}

static sm_status transpose_prepare(const void *conf, const struct sm_repr *in, struct sm_repr *out,
                                   void **prep, struct sm_err *err)
{
    const struct transpose_conf *c = conf;
    const size_t elem = sm_dtype_size(in->dtype);
    if (elem == 0 || in->len == SM_LEN_VARIABLE) {
        SM_FAIL(err, SM_E_INTERNAL, "codec 'transpose': needs an array of a known type and size");
    }
    unsigned order[SM_MAX_DIMS], inv[SM_MAX_DIMS];
    const unsigned n = in->ndim;
    if (c->legacy == 0 && c->n != n) {
        SM_FAIL(err, SM_E_DATA,
                "codec 'transpose': 'order' has %u entries, the array %u dimensions", c->n, n);
    }
    bool identity = true;
    for (unsigned i = 0; i < n; i++) {
        order[i] = c->legacy == 'C' ? i : c->legacy == 'F' ? n - 1 - i : c->order[i];
        identity = identity && order[i] == i;
    }
    for (unsigned i = 0; i < n; i++) {
        inv[order[i]] = i;
    }
    struct transpose_prep *p = sm_malloc(sizeof(*p));
    if (p == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a prepared transpose codec");
    }
    *out = *in;
    for (unsigned i = 0; i < n; i++) {
        out->shape[i] = in->shape[order[i]];
    }
    p->len = in->len;
    p->identity = identity;
    plan_build(&p->enc, n, in->shape, order, elem);
    plan_build(&p->dec, n, out->shape, inv, elem);
    *prep = p;
    return SM_OK;
}

static bool transpose_is_identity(const void *prep)
{
    return ((const struct transpose_prep *)prep)->identity;
}

static sm_status transpose_run(const struct transpose_prep *p, const struct tplan *plan,
                               struct sm_bytes in, struct sm_buf *out, const char *side,
                               struct sm_err *err)
{
    if (in.len != p->len) {
        SM_FAIL(err, SM_E_DATA, "codec 'transpose': %s input of %zu bytes, expected %zu", side,
                in.len, p->len);
    }
    SM_TRY(sm_buf_reserve(out, p->len, err));
    plan_run(plan, in.ptr, out->ptr);
    out->len = p->len;
    return SM_OK;
}

static sm_status transpose_decode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                                  struct sm_scratch *scratch, struct sm_err *err)
{
    (void)scratch;
    const struct transpose_prep *p = prep;
    return transpose_run(p, &p->dec, in, out, "decode", err);
}

static sm_status transpose_encode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                                  struct sm_scratch *scratch, struct sm_err *err)
{
    (void)scratch;
    const struct transpose_prep *p = prep;
    return transpose_run(p, &p->enc, in, out, "encode", err);
}

const struct sm_codec_ops sm_codec_transpose_ops = {
    .name = "transpose",
    .v2_id = NULL,
    .kind = SM_CODEC_A2A,
    .parse = transpose_parse,
    .prepare = transpose_prepare,
    .decode = transpose_decode,
    .encode = transpose_encode,
    .free_conf = sm_free,
    .free_prep = sm_free,
    .is_identity = transpose_is_identity,
};
