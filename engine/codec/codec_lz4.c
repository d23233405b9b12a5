/* The LZ4 codec (bytes -> bytes) as numcodecs writes it: a 4-byte little-endian decoded size,
 * then one LZ4 block (liblz4's LZ4_compress_fast / LZ4_decompress_safe).
 * Spec: https://numcodecs.readthedocs.io/en/stable/compression/lz4.html
 * v3 name "numcodecs.lz4" (zarr-python 3); numcodecs id "lz4"; output.codec.name "lz4".
 * Configuration: {"acceleration": 1} (1..65537; higher is faster and larger).
 * Invariant: the declared size is checked against the known size, or against the scratch's
 * decode bound and the largest ratio an LZ4 block reaches before anything is allocated; the
 * block must decode to exactly that size. Encoding is deterministic. */
#include "codec_int.h"

#include <jansson.h>
#include <lz4.h>
#include <string.h>

#include "shardmill/alloc.h"

/* An LZ4 block's densest sequence turns 1 byte of input into at most 255 bytes of output. */
#define LZ4_MAX_RATIO 255u
#define LZ4_HEADER 4u

struct lz4_prep {
    int acceleration;
    size_t dec_len;
};

static sm_status lz4_parse(const struct json_t *cfg, void **conf, struct sm_err *err)
{
    static const char *const keys[] = {"acceleration", NULL};
    SM_TRY(sm_codec_cfg_keys(cfg, "lz4", keys, err));
    long long acc;
    SM_TRY(sm_codec_cfg_int(cfg, "lz4", "acceleration", false, 1, 65537, 1, &acc, err));
    int *c = sm_malloc(sizeof(*c));
    if (c == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate an lz4 configuration");
    }
    *c = (int)acc;
    *conf = c;
    return SM_OK;
}

static sm_status lz4_prepare(const void *conf, const struct sm_repr *in, struct sm_repr *out,
                             void **prep, struct sm_err *err)
{
    struct lz4_prep *p = sm_malloc(sizeof(*p));
    if (p == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a prepared lz4 codec");
    }
    p->acceleration = *(const int *)conf;
    p->dec_len = in->len;
    sm_repr_bytes(out, in, SM_LEN_VARIABLE);
    *prep = p;
    return SM_OK;
}

static sm_status lz4_decode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                            struct sm_scratch *scratch, struct sm_err *err)
{
    const struct lz4_prep *p = prep;
    if (in.len < LZ4_HEADER) {
        SM_FAIL(err, SM_E_DATA, "lz4: %zu bytes are shorter than the 4-byte size header", in.len);
    }
    const size_t n = (size_t)in.ptr[0] | (size_t)in.ptr[1] << 8 | (size_t)in.ptr[2] << 16 |
                     (size_t)in.ptr[3] << 24;
    const size_t body = in.len - LZ4_HEADER;
    if (p->dec_len != SM_LEN_VARIABLE && n != p->dec_len) {
        SM_FAIL(err, SM_E_DATA, "lz4: header declares %zu decoded bytes, expected %zu", n,
                p->dec_len);
    }
    if (n > (size_t)LZ4_MAX_RATIO * body + 16 || n > (size_t)LZ4_MAX_INPUT_SIZE ||
        body > (size_t)INT32_MAX) {
        SM_FAIL(err, SM_E_DATA,
                "lz4: header declares %zu decoded bytes, more than a %zu-byte "
                "block can hold",
                n, body);
    }
    if (p->dec_len == SM_LEN_VARIABLE && n > scratch->max_decoded) {
        SM_FAIL(err, SM_E_LIMIT,
                "lz4: header declares %zu decoded bytes, more than the decode limit of %zu bytes "
                "(limits.max_chunk_bytes)",
                n, scratch->max_decoded);
    }
    SM_TRY(sm_buf_reserve(out, n != 0 ? n : 1, err));
    const int got =
        LZ4_decompress_safe((const char *)in.ptr + LZ4_HEADER, (char *)out->ptr, (int)body, (int)n);
    if (got < 0 || (size_t)got != n) {
        SM_FAIL(err, SM_E_DATA, "lz4: corrupt block (decoded %d of %zu bytes)", got, n);
    }
    out->len = n;
    return SM_OK;
}

static sm_status lz4_encode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                            struct sm_scratch *scratch, struct sm_err *err)
{
    (void)scratch;
    const struct lz4_prep *p = prep;
    if (in.len > (size_t)LZ4_MAX_INPUT_SIZE) {
        SM_FAIL(err, SM_E_LIMIT, "lz4: a block holds at most %d bytes, not %zu", LZ4_MAX_INPUT_SIZE,
                in.len);
    }
    const int bound = LZ4_compressBound((int)in.len);
    SM_TRY(sm_buf_reserve(out, LZ4_HEADER + (size_t)bound, err));
    const int n = LZ4_compress_fast((const char *)in.ptr, (char *)out->ptr + LZ4_HEADER,
                                    (int)in.len, bound, p->acceleration);
    if (n <= 0) {
        SM_FAIL(err, SM_E_INTERNAL, "lz4: %zu bytes did not fit the %d-byte bound", in.len, bound);
    }
    for (unsigned i = 0; i < LZ4_HEADER; i++) {
        out->ptr[i] = (uint8_t)(in.len >> (8 * i));
    }
    out->len = LZ4_HEADER + (size_t)n;
    return SM_OK;
}

/* The writer's slots: output.codec.level is the acceleration. */
static sm_status lz4_write_config(int level, unsigned typesize, const char *variant, json_t **v3,
                                  json_t **v2, struct sm_err *err)
{
    (void)typesize, (void)variant;
    *v3 = json_pack("{s:i}", "acceleration", level);
    *v2 = json_pack("{s:i, s:s}", "acceleration", level, "id", "lz4");
    return sm_codec_config_made(v3, v2, err);
}

static const struct sm_codec_writer lz4_writer = {
    .choice = "lz4",
    .level_min = 1,
    .level_max = 9,
    .level_word = "acceleration",
    .config = lz4_write_config,
    .doc = "LZ4 blocks as numcodecs writes them (level: the acceleration, higher is faster)",
};

const struct sm_codec_ops sm_codec_lz4_ops = {
    .name = "numcodecs.lz4",
    .v2_id = "lz4",
    .kind = SM_CODEC_B2B,
    .parse = lz4_parse,
    .prepare = lz4_prepare,
    .decode = lz4_decode,
    .encode = lz4_encode,
    .free_conf = sm_free,
    .free_prep = sm_free,
    .writer = &lz4_writer,
};
