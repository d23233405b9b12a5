/* The bytes codec (array -> bytes): big-endian data is swapped to and from the native
 * little-endian decoded array; little-endian data is a plain copy (the chain skips the stage).
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/bytes/index.html
 * v3 name "bytes"; no numcodecs id (format/ maps a v2 dtype's '<' / '>' onto it).
 * Configuration: {"endian": "little"} or {"endian": "big"}; may be omitted for 1-byte types. */
#include "codec_int.h"

#include <string.h>

#include "shardmill/alloc.h"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) &&                                 \
    __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "shardmill keeps decoded arrays in little-endian order and needs a little-endian host"
#endif

enum endian { ENDIAN_ABSENT, ENDIAN_LITTLE, ENDIAN_BIG };

struct bytes_conf {
    enum endian endian;
};

struct bytes_prep {
    size_t len;  /* bytes of the whole array */
    size_t elem; /* element size */
    bool swap;   /* big-endian multi-byte elements */
};

static sm_status bytes_parse(const struct json_t *cfg, void **conf, struct sm_err *err)
{
    static const char *const keys[] = {"endian", NULL};
    SM_TRY(sm_codec_cfg_keys(cfg, "bytes", keys, err));
    const char *e;
    SM_TRY(sm_codec_cfg_string(cfg, "bytes", "endian", false, &e, err));
    enum endian en = ENDIAN_ABSENT;
    if (e != NULL && strcmp(e, "little") == 0) {
        en = ENDIAN_LITTLE;
    } else if (e != NULL && strcmp(e, "big") == 0) {
        en = ENDIAN_BIG;
    } else if (e != NULL) {
        SM_FAIL(err, SM_E_DATA, "codec 'bytes': 'endian' must be \"little\" or \"big\", got \"%s\"",
                e);
    }
    struct bytes_conf *c = sm_malloc(sizeof(*c));
    if (c == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a bytes configuration");
    }
    c->endian = en;
    *conf = c;
    return SM_OK;
}

static sm_status bytes_prepare(const void *conf, const struct sm_repr *in, struct sm_repr *out,
                               void **prep, struct sm_err *err)
{
    const struct bytes_conf *c = conf;
    const size_t elem = sm_dtype_size(in->dtype);
    if (elem == 0 || in->len == SM_LEN_VARIABLE) {
        SM_FAIL(err, SM_E_INTERNAL, "codec 'bytes': needs an array of a known type and size");
    }
    if (elem > 1 && c->endian == ENDIAN_ABSENT) {
        SM_FAIL(err, SM_E_DATA, "codec 'bytes': 'endian' is required for %s",
                sm_dtype_name(in->dtype));
    }
    struct bytes_prep *p = sm_malloc(sizeof(*p));
    if (p == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a prepared bytes codec");
    }
    p->len = in->len;
    p->elem = elem;
    p->swap = elem > 1 && c->endian == ENDIAN_BIG;
    sm_repr_bytes(out, in, in->len);
    *prep = p;
    return SM_OK;
}

static bool bytes_is_identity(const void *prep)
{
    return !((const struct bytes_prep *)prep)->swap;
}

/* dst = src with every elem-byte element reversed (n is a multiple of elem). */
static void swap_copy(uint8_t *dst, const uint8_t *src, size_t n, size_t elem)
{
    switch (elem) {
    case 2:
        for (size_t i = 0; i < n; i += 2) {
            uint16_t v;
            memcpy(&v, src + i, 2);
            v = (uint16_t)((v >> 8) | (v << 8));
            memcpy(dst + i, &v, 2);
        }
        break;
    case 4:
        for (size_t i = 0; i < n; i += 4) {
            uint32_t v;
            memcpy(&v, src + i, 4);
            v = (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
            memcpy(dst + i, &v, 4);
        }
        break;
    case 8:
        for (size_t i = 0; i < n; i += 8) {
            uint64_t v;
            memcpy(&v, src + i, 8);
            v = ((v & 0x00000000ffffffffull) << 32) | ((v & 0xffffffff00000000ull) >> 32);
            v = ((v & 0x0000ffff0000ffffull) << 16) | ((v & 0xffff0000ffff0000ull) >> 16);
            v = ((v & 0x00ff00ff00ff00ffull) << 8) | ((v & 0xff00ff00ff00ff00ull) >> 8);
            memcpy(dst + i, &v, 8);
        }
        break;
    default:
        for (size_t i = 0; i < n; i += elem) {
            for (size_t b = 0; b < elem; b++) {
                dst[i + b] = src[i + elem - 1 - b];
            }
        }
        break;
    }
}

/* Decode and encode are the same operation: a copy, swapped when big-endian. */
static sm_status bytes_convert(const void *prep, struct sm_bytes in, struct sm_buf *out,
                               const char *side, struct sm_err *err)
{
    const struct bytes_prep *p = prep;
    if (in.len != p->len) {
        SM_FAIL(err, SM_E_DATA, "codec 'bytes': %s input of %zu bytes, expected %zu", side, in.len,
                p->len);
    }
    SM_TRY(sm_buf_reserve(out, p->len, err));
    if (p->len != 0) {
        if (p->swap) {
            swap_copy(out->ptr, in.ptr, p->len, p->elem);
        } else {
            memcpy(out->ptr, in.ptr, p->len);
        }
    }
    out->len = p->len;
    return SM_OK;
}

static sm_status bytes_decode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                              struct sm_scratch *scratch, struct sm_err *err)
{
    (void)scratch;
    return bytes_convert(prep, in, out, "decode", err);
}

static sm_status bytes_encode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                              struct sm_scratch *scratch, struct sm_err *err)
{
    (void)scratch;
    return bytes_convert(prep, in, out, "encode", err);
}

const struct sm_codec_ops sm_codec_bytes_ops = {
    .name = "bytes",
    .v2_id = NULL,
    .kind = SM_CODEC_A2B,
    .parse = bytes_parse,
    .prepare = bytes_prepare,
    .decode = bytes_decode,
    .encode = bytes_encode,
    .free_conf = sm_free,
    .free_prep = sm_free,
    .is_identity = bytes_is_identity,
};
