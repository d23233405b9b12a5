/* The zstd codec (bytes -> bytes) with the thread's ZSTD_DCtx / ZSTD_CCtx from the scratch.
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/zstd/index.html
 * v3 name "zstd"; numcodecs id "zstd". Configuration: {"level": 3, "checksum": false}.
 * Invariant: decodes into exactly the known size and requires exactly that size; of unknown size,
 * never past the scratch's decode bound (several frames allowed either way); encoding is
 * deterministic. */
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_findDecompressedSize (stable since 1.3) */
#include "codec_int.h"

#include <jansson.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "shardmill/alloc.h"

struct zstd_conf {
    int level;
    bool checksum;
};

struct zstd_prep {
    struct zstd_conf c;
    size_t dec_len;
};

static sm_status zstd_parse(const struct json_t *cfg, void **conf, struct sm_err *err)
{
    static const char *const keys[] = {"level", "checksum", NULL};
    SM_TRY(sm_codec_cfg_keys(cfg, "zstd", keys, err));
    long long level;
    SM_TRY(sm_codec_cfg_int(cfg, "zstd", "level", false, ZSTD_minCLevel(), ZSTD_maxCLevel(), 3,
                            &level, err));
    bool checksum;
    SM_TRY(sm_codec_cfg_bool(cfg, "zstd", "checksum", false, &checksum, err));
    struct zstd_conf *c = sm_malloc(sizeof(*c));
    if (c == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a zstd configuration");
    }
    c->level = (int)level;
    c->checksum = checksum;
    *conf = c;
    return SM_OK;
}

static sm_status zstd_prepare(const void *conf, const struct sm_repr *in, struct sm_repr *out,
                              void **prep, struct sm_err *err)
{
    struct zstd_prep *p = sm_malloc(sizeof(*p));
    if (p == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a prepared zstd codec");
    }
    p->c = *(const struct zstd_conf *)conf;
    p->dec_len = in->len;
    sm_repr_bytes(out, in, SM_LEN_VARIABLE);
    *prep = p;
    return SM_OK;
}

static sm_status zstd_fail(struct sm_err *err, size_t r, const char *what, size_t n, size_t want)
{
    const ZSTD_ErrorCode code = ZSTD_getErrorCode(r);
    if (code == ZSTD_error_memory_allocation) {
        SM_ERR(err, SM_E_NOMEM, "zstd: out of memory decoding %zu bytes", n);
    } else if (code == ZSTD_error_dstSize_tooSmall) {
        SM_ERR(err, SM_E_DATA, "zstd: %s decodes to more than the expected %zu bytes", what, want);
    } else {
        SM_ERR(err, SM_E_DATA, "zstd: %s of %zu bytes: %s", what, n, ZSTD_getErrorName(r));
    }
    sm_err_cause(err, "zstd", (int)code);
    return err->status;
}

/* The most n input bytes can decode to: a block regenerates at most ZSTD_BLOCKSIZE_MAX bytes and
 * the smallest such block (RLE) takes 4 bytes (RFC 8878 §3.1.1.2). A frame header declaring more
 * is a lie whatever the limits. */
static size_t zstd_most(size_t n)
{
    size_t most;
    if (__builtin_mul_overflow(n / 4 + 1, (size_t)ZSTD_BLOCKSIZE_MAX, &most)) {
        return SIZE_MAX;
    }
    return most;
}

/* Known size: exactly that size (several frames allowed). */
static sm_status decode_known(struct sm_scratch *scratch, struct sm_bytes in, size_t want,
                              struct sm_buf *out, struct sm_err *err)
{
    ZSTD_DCtx *d;
    SM_TRY(sm_scratch_zstd_d(scratch, &d, err));
    SM_TRY(sm_buf_reserve(out, want, err));
    const size_t r = ZSTD_decompressDCtx(d, out->ptr, want, in.ptr, in.len);
    if (ZSTD_isError(r)) {
        return zstd_fail(err, r, "frame", in.len, want);
    }
    if (r != want) {
        SM_FAIL(err, SM_E_DATA, "zstd: decoded size %zu, expected %zu", r, want);
    }
    out->len = r;
    return SM_OK;
}

/* Unknown size (a stage after another bytes->bytes codec). The frame headers' content sizes are
 * claims of the input: trusted only as far as the input's length and the scratch's bound allow
 * (zstd itself checks each frame against its declared size while decoding). Frames without a
 * content size (streamed) give no size at all: the buffer then grows geometrically up to the
 * bound, or up to what the input's length can hold when that is less (a few hundred bytes of RLE
 * blocks cannot ask for 512 MiB), and the frames are decoded again from the start when they do
 * not fit. One-shot decoding
 * keeps zstd from allocating a window buffer (a frame may ask for up to 2 GiB of window), retrying
 * costs at most twice the decoding of the final size, and the buffer never exceeds the bound. */
static sm_status decode_unknown(struct sm_scratch *scratch, struct sm_bytes in, struct sm_buf *out,
                                struct sm_err *err)
{
    const size_t bound = scratch->max_decoded;
    const unsigned long long fcs = ZSTD_findDecompressedSize(in.ptr, in.len);
    if (fcs == ZSTD_CONTENTSIZE_ERROR) {
        SM_FAIL(err, SM_E_DATA, "zstd: %zu bytes are not a sequence of zstd frames", in.len);
    }
    if (fcs != ZSTD_CONTENTSIZE_UNKNOWN) {
        if (fcs > zstd_most(in.len)) {
            SM_FAIL(err, SM_E_DATA,
                    "zstd: frame headers declare %llu decoded bytes, more than %zu bytes of "
                    "frames can hold",
                    fcs, in.len);
        }
        if (fcs > bound) {
            SM_FAIL(err, SM_E_LIMIT,
                    "zstd: frame headers declare %llu decoded bytes, more than the decode limit "
                    "of %zu bytes (limits.max_chunk_bytes)",
                    fcs, bound);
        }
        return decode_known(scratch, in, (size_t)fcs, out, err);
    }
    ZSTD_DCtx *d;
    SM_TRY(sm_scratch_zstd_d(scratch, &d, err));
    const size_t most = zstd_most(in.len);
    size_t cap = 0;
    for (;;) {
        cap = sm_codec_grow(cap, most < bound ? most : bound);
        if (cap == 0 && most < bound) {
            SM_FAIL(err, SM_E_DATA,
                    "zstd: frames without a content size decode to more than %zu bytes of "
                    "frames can hold",
                    in.len);
        }
        if (cap == 0) {
            SM_FAIL(err, SM_E_LIMIT,
                    "zstd: frames without a content size decode to more than the decode limit of "
                    "%zu bytes (limits.max_chunk_bytes)",
                    bound);
        }
        SM_TRY(sm_codec_renew(out, cap, err));
        const size_t r = ZSTD_decompressDCtx(d, out->ptr, cap, in.ptr, in.len);
        if (!ZSTD_isError(r)) {
            out->len = r;
            return SM_OK;
        }
        if (ZSTD_getErrorCode(r) != ZSTD_error_dstSize_tooSmall) {
            return zstd_fail(err, r, "frame", in.len, cap);
        }
    }
}

static sm_status zstd_decode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                             struct sm_scratch *scratch, struct sm_err *err)
{
    const struct zstd_prep *p = prep;
    if (in.len == 0) {
        SM_FAIL(err, SM_E_DATA, "zstd: frame of 0 bytes (no frame at all)");
    }
    if (p->dec_len != SM_LEN_VARIABLE) {
        return decode_known(scratch, in, p->dec_len, out, err);
    }
    return decode_unknown(scratch, in, out, err);
}

static sm_status zstd_encode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                             struct sm_scratch *scratch, struct sm_err *err)
{
    const struct zstd_prep *p = prep;
    ZSTD_CCtx *c;
    SM_TRY(sm_scratch_zstd_c(scratch, &c, err));
    size_t r = ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
    if (!ZSTD_isError(r)) {
        r = ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, p->c.level);
    }
    if (!ZSTD_isError(r)) {
        r = ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, p->c.checksum ? 1 : 0);
    }
    if (ZSTD_isError(r)) {
        SM_ERR(err, SM_E_INTERNAL, "zstd: cannot set level %d: %s", p->c.level,
               ZSTD_getErrorName(r));
        sm_err_cause(err, "zstd", (int)ZSTD_getErrorCode(r));
        return err->status;
    }
    const size_t bound = ZSTD_compressBound(in.len);
    SM_TRY(sm_buf_reserve(out, bound, err));
    r = ZSTD_compress2(c, out->ptr, bound, in.ptr, in.len);
    if (ZSTD_isError(r)) {
        const ZSTD_ErrorCode code = ZSTD_getErrorCode(r);
        SM_ERR(err, code == ZSTD_error_memory_allocation ? SM_E_NOMEM : SM_E_INTERNAL,
               "zstd: compressing %zu bytes: %s", in.len, ZSTD_getErrorName(r));
        sm_err_cause(err, "zstd", (int)code);
        return err->status;
    }
    out->len = r;
    return SM_OK;
}

/* The writer's slots: zstd at a level, without the frame checksum. */
static sm_status zstd_write_config(int level, unsigned typesize, const char *variant, json_t **v3,
                                   json_t **v2, struct sm_err *err)
{
    (void)typesize, (void)variant;
    *v3 = json_pack("{s:i, s:b}", "level", level, "checksum", 0);
    *v2 = json_pack("{s:s, s:i}", "id", "zstd", "level", level);
    return sm_codec_config_made(v3, v2, err);
}

static const struct sm_codec_writer zstd_writer = {
    .level_min = -131072,
    .level_max = 22,
    .level_word = "level",
    .config = zstd_write_config,
    .doc = "Zstandard (fast levels below 1)",
};

const struct sm_codec_ops sm_codec_zstd_ops = {
    .name = "zstd",
    .v2_id = "zstd",
    .kind = SM_CODEC_B2B,
    .parse = zstd_parse,
    .prepare = zstd_prepare,
    .decode = zstd_decode,
    .encode = zstd_encode,
    .free_conf = sm_free,
    .free_prep = sm_free,
    .writer = &zstd_writer,
};
