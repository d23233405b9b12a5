/* The zlib codec (bytes -> bytes) on libdeflate. A zlib stream does not record its decoded size,
 * so decoding needs the chain to know it (the usual case: right after bytes).
 * Spec: numcodecs Zlib, https://numcodecs.readthedocs.io/en/stable/zlib.html (no zarr-specs page;
 * zarr-python 3 calls it "numcodecs.zlib", accepted too). v3 name "zlib"; numcodecs id "zlib".
 * Configuration: {"level": 1} (0-9). */
#include "codec_int.h"

#include <libdeflate.h>
#include <string.h>

#include "shardmill/alloc.h"

struct zlib_prep {
    int level;
    size_t dec_len;
};

static sm_status zlib_parse(const struct json_t *cfg, void **conf, struct sm_err *err)
{
    static const char *const keys[] = {"level", NULL};
    SM_TRY(sm_codec_cfg_keys(cfg, "zlib", keys, err));
    long long level;
    SM_TRY(sm_codec_cfg_int(cfg, "zlib", "level", false, 0, 9, 6, &level, err));
    int *c = sm_malloc(sizeof(*c));
    if (c == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a zlib configuration");
    }
    *c = (int)level;
    *conf = c;
    return SM_OK;
}

static sm_status zlib_prepare(const void *conf, const struct sm_repr *in, struct sm_repr *out,
                              void **prep, struct sm_err *err)
{
    struct zlib_prep *p = sm_malloc(sizeof(*p));
    if (p == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a prepared zlib codec");
    }
    p->level = *(const int *)conf;
    p->dec_len = in->len;
    sm_repr_bytes(out, in, SM_LEN_VARIABLE);
    *prep = p;
    return SM_OK;
}

static sm_status zlib_decode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                             struct sm_scratch *scratch, struct sm_err *err)
{
    const struct zlib_prep *p = prep;
    if (p->dec_len == SM_LEN_VARIABLE) {
        SM_FAIL(err, SM_E_DATA, "zlib stream with unknown decoded size");
    }
    struct libdeflate_decompressor *d;
    SM_TRY(sm_scratch_deflate_d(scratch, &d, err));
    SM_TRY(sm_buf_reserve(out, p->dec_len, err));
    size_t ain = 0, aout = 0;
    enum libdeflate_result r =
        libdeflate_zlib_decompress_ex(d, in.ptr, in.len, out->ptr, p->dec_len, &ain, &aout);
    if (r != LIBDEFLATE_SUCCESS) {
        if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
            SM_ERR(err, SM_E_DATA, "zlib: stream decodes to more than the expected %zu bytes",
                   p->dec_len);
        } else {
            SM_ERR(err, SM_E_DATA, "zlib: corrupt stream of %zu bytes", in.len);
        }
        sm_err_cause(err, "libdeflate", (int)r);
        return err->status;
    }
    if (aout != p->dec_len) {
        SM_FAIL(err, SM_E_DATA, "zlib: decoded size %zu, expected %zu", aout, p->dec_len);
    }
    if (ain != in.len) {
        SM_FAIL(err, SM_E_DATA, "zlib: %zu bytes follow the end of the stream", in.len - ain);
    }
    out->len = aout;
    return SM_OK;
}

static sm_status zlib_encode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                             struct sm_scratch *scratch, struct sm_err *err)
{
    const struct zlib_prep *p = prep;
    struct libdeflate_compressor *c;
    SM_TRY(sm_scratch_deflate_c(scratch, p->level, &c, err));
    const size_t bound = libdeflate_zlib_compress_bound(c, in.len);
    SM_TRY(sm_buf_reserve(out, bound, err));
    const size_t n = libdeflate_zlib_compress(c, in.ptr, in.len, out->ptr, bound);
    if (n == 0) {
        SM_FAIL(err, SM_E_INTERNAL, "zlib: %zu bytes did not fit the %zu-byte bound", in.len,
                bound);
    }
    out->len = n;
    return SM_OK;
}

const struct sm_codec_ops sm_codec_zlib_ops = {
    .name = "zlib",
    .v2_id = "zlib",
    .kind = SM_CODEC_B2B,
    .parse = zlib_parse,
    .prepare = zlib_prepare,
    .decode = zlib_decode,
    .encode = zlib_encode,
    .free_conf = sm_free,
    .free_prep = sm_free,
};
