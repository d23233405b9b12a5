/* The crc32c codec (bytes -> bytes): encode appends the CRC-32C of the data as 4 little-endian
 * bytes; decode verifies and strips it, so corrupt bytes never reach the next stage.
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/crc32c/index.html
 * v3 name "crc32c"; no numcodecs id. Configuration: none, e.g. {"name": "crc32c"} or "crc32c". */
#include "codec_int.h"

#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/crc32c.h"

struct crc32c_prep {
    size_t dec_len;
};

static sm_status crc32c_parse(const struct json_t *cfg, void **conf, struct sm_err *err)
{
    SM_TRY(sm_codec_cfg_keys(cfg, "crc32c", NULL, err));
    *conf = NULL; /* nothing to keep */
    return SM_OK;
}

static sm_status crc32c_prepare(const void *conf, const struct sm_repr *in, struct sm_repr *out,
                                void **prep, struct sm_err *err)
{
    (void)conf;
    struct crc32c_prep *p = sm_malloc(sizeof(*p));
    if (p == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a prepared crc32c codec");
    }
    p->dec_len = in->len;
    sm_repr_bytes(out, in, in->len == SM_LEN_VARIABLE ? SM_LEN_VARIABLE : in->len + 4);
    *prep = p;
    return SM_OK;
}

static sm_status crc32c_decode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                               struct sm_scratch *scratch, struct sm_err *err)
{
    (void)scratch;
    const struct crc32c_prep *p = prep;
    if (in.len < 4) {
        SM_FAIL(err, SM_E_DATA, "crc32c: %zu bytes are shorter than the 4-byte checksum", in.len);
    }
    const size_t n = in.len - 4;
    if (p->dec_len != SM_LEN_VARIABLE && n != p->dec_len) {
        SM_FAIL(err, SM_E_DATA, "crc32c: decoded size %zu, expected %zu", n, p->dec_len);
    }
    const uint8_t *t = in.ptr + n;
    const uint32_t stored =
        (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
    const uint32_t computed = sm_crc32c(0, in.ptr, n);
    if (stored != computed) {
        SM_FAIL(err, SM_E_DATA, "crc32c mismatch: stored %08x, computed %08x", stored, computed);
    }
    SM_TRY(sm_buf_reserve(out, n, err));
    if (n != 0) {
        memcpy(out->ptr, in.ptr, n);
    }
    out->len = n;
    return SM_OK;
}

static sm_status crc32c_encode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                               struct sm_scratch *scratch, struct sm_err *err)
{
    (void)prep;
    (void)scratch;
    if (in.len > SIZE_MAX - 4) {
        SM_FAIL(err, SM_E_DATA, "crc32c: %zu bytes cannot take a checksum", in.len);
    }
    SM_TRY(sm_buf_reserve(out, in.len + 4, err));
    if (in.len != 0) {
        memcpy(out->ptr, in.ptr, in.len);
    }
    const uint32_t crc = sm_crc32c(0, in.ptr, in.len);
    uint8_t *t = out->ptr + in.len;
    t[0] = (uint8_t)crc;
    t[1] = (uint8_t)(crc >> 8);
    t[2] = (uint8_t)(crc >> 16);
    t[3] = (uint8_t)(crc >> 24);
    out->len = in.len + 4;
    return SM_OK;
}

const struct sm_codec_ops sm_codec_crc32c_ops = {
    .name = "crc32c",
    .v2_id = NULL,
    .kind = SM_CODEC_B2B,
    .parse = crc32c_parse,
    .prepare = crc32c_prepare,
    .decode = crc32c_decode,
    .encode = crc32c_encode,
    .free_conf = sm_free,
    .free_prep = sm_free,
};
