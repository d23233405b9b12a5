/* The gzip codec (bytes -> bytes) on libdeflate; deterministic output (mtime 0, no name).
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/gzip/index.html
 * v3 name "gzip"; numcodecs id "gzip". Configuration: {"level": 6} (0-9).
 * Invariant: decodes into a buffer of the known size (else the ISIZE trailer's) and requires
 * exactly that size; concatenated members are accepted when the size is known. */
#include "codec_int.h"

#include <libdeflate.h>
#include <string.h>

#include "shardmill/alloc.h"

struct gzip_prep {
    int level;
    size_t dec_len; /* decoded size or SM_LEN_VARIABLE */
};

static sm_status gzip_parse(const struct json_t *cfg, void **conf, struct sm_err *err)
{
    static const char *const keys[] = {"level", NULL};
    SM_TRY(sm_codec_cfg_keys(cfg, "gzip", keys, err));
    long long level;
    SM_TRY(sm_codec_cfg_int(cfg, "gzip", "level", false, 0, 9, 6, &level, err));
    int *c = sm_malloc(sizeof(*c));
    if (c == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a gzip configuration");
    }
    *c = (int)level;
    *conf = c;
    return SM_OK;
}

static sm_status gzip_prepare(const void *conf, const struct sm_repr *in, struct sm_repr *out,
                              void **prep, struct sm_err *err)
{
    struct gzip_prep *p = sm_malloc(sizeof(*p));
    if (p == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a prepared gzip codec");
    }
    p->level = *(const int *)conf;
    p->dec_len = in->len;
    sm_repr_bytes(out, in, SM_LEN_VARIABLE);
    *prep = p;
    return SM_OK;
}

static sm_status corrupt(struct sm_err *err, enum libdeflate_result r, size_t at)
{
    if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
        sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                   "gzip: member at byte %zu decodes to more than the expected size", at);
    } else {
        sm_err_set(err, SM_E_DATA, __FILE__, __LINE__, "gzip: corrupt stream at byte %zu", at);
    }
    sm_err_cause(err, "libdeflate", (int)r);
    return err->status;
}

static sm_status gzip_decode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                             struct sm_scratch *scratch, struct sm_err *err)
{
    const struct gzip_prep *p = prep;
    struct libdeflate_decompressor *d;
    SM_TRY(sm_scratch_deflate_d(scratch, &d, err));
    if (in.len < 18) { /* 10-byte header + empty deflate block + 8-byte trailer */
        SM_FAIL(err, SM_E_DATA, "gzip: stream of %zu bytes is shorter than a gzip member", in.len);
    }
    size_t want = p->dec_len;
    const bool known = want != SM_LEN_VARIABLE;
    if (!known) {
        const uint8_t *t = in.ptr + in.len - 4; /* ISIZE: decoded size mod 2^32, little-endian */
        want = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
    }
    SM_TRY(sm_buf_reserve(out, want, err));
    size_t pos = 0, got = 0;
    while (pos < in.len) {
        size_t ain = 0, aout = 0;
        enum libdeflate_result r = libdeflate_gzip_decompress_ex(
            d, in.ptr + pos, in.len - pos, out->ptr + got, want - got, &ain, &aout);
        if (r != LIBDEFLATE_SUCCESS) {
            return corrupt(err, r, pos);
        }
        pos += ain;
        got += aout;
        if (!known && pos < in.len) {
            SM_FAIL(err, SM_E_DATA,
                    "gzip: %zu bytes follow the first member and the decoded size is unknown",
                    in.len - pos);
        }
    }
    if (got != want) {
        SM_FAIL(err, SM_E_DATA, "gzip: decoded size %zu, expected %zu", got, want);
    }
    out->len = got;
    return SM_OK;
}

static sm_status gzip_encode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                             struct sm_scratch *scratch, struct sm_err *err)
{
    const struct gzip_prep *p = prep;
    struct libdeflate_compressor *c;
    SM_TRY(sm_scratch_deflate_c(scratch, p->level, &c, err));
    const size_t bound = libdeflate_gzip_compress_bound(c, in.len);
    SM_TRY(sm_buf_reserve(out, bound, err));
    const size_t n = libdeflate_gzip_compress(c, in.ptr, in.len, out->ptr, bound);
    if (n == 0) {
        SM_FAIL(err, SM_E_INTERNAL, "gzip: %zu bytes did not fit the %zu-byte bound", in.len,
                bound);
    }
    out->len = n;
    return SM_OK;
}

const struct sm_codec_ops sm_codec_gzip_ops = {
    .name = "gzip",
    .v2_id = "gzip",
    .kind = SM_CODEC_B2B,
    .parse = gzip_parse,
    .prepare = gzip_prepare,
    .decode = gzip_decode,
    .encode = gzip_encode,
    .free_conf = sm_free,
    .free_prep = sm_free,
};
