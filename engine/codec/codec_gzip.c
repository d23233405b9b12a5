/* The gzip codec (bytes -> bytes) on libdeflate; deterministic output (mtime 0, no name).
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/gzip/index.html
 * v3 name "gzip"; numcodecs id "gzip". Configuration: {"level": 6} (0-9).
 * Invariant: decodes into a buffer of the known size and requires exactly that size (members may
 * be concatenated); of unknown size, one member, never past the scratch's decode bound. */
#include "codec_int.h"

#include <jansson.h>
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
        SM_ERR(err, SM_E_DATA, "gzip: member at byte %zu decodes to more than the expected size",
               at);
    } else {
        SM_ERR(err, SM_E_DATA, "gzip: corrupt stream at byte %zu", at);
    }
    sm_err_cause(err, "libdeflate", (int)r);
    return err->status;
}

/* Deflate's densest code spends 2 bits on a 258-byte match: no member decodes to more than 1032
 * bytes per input byte (RFC 1951), so a larger ISIZE is a lie whatever the limits. */
#define DEFLATE_MAX_RATIO 1032u

/* Known size (the usual case, right after bytes): exactly that size, members concatenated. */
static sm_status decode_known(struct libdeflate_decompressor *d, struct sm_bytes in, size_t want,
                              struct sm_buf *out, struct sm_err *err)
{
    SM_TRY(sm_buf_reserve(out, want != 0 ? want : 1, err)); /* never NULL + 0 below */
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
    }
    if (got != want) {
        SM_FAIL(err, SM_E_DATA, "gzip: decoded size %zu, expected %zu", got, want);
    }
    out->len = got;
    return SM_OK;
}

/* Unknown size (a stage after another bytes->bytes codec): one member, whose ISIZE trailer (the
 * decoded size mod 2^32) is a claim of the input, so it is trusted only as far as the input's
 * length and the scratch's bound allow. libdeflate has no streaming API: when the member does not
 * fit, the buffer grows geometrically up to the bound and the member is decoded again from its
 * start. That is only reached when ISIZE lied or the member is 4 GiB or more, costs at most twice
 * the decoding of the final size, and never holds more than the bound. */
static sm_status decode_unknown(struct libdeflate_decompressor *d, struct sm_bytes in, size_t bound,
                                struct sm_buf *out, struct sm_err *err)
{
    const uint8_t *t = in.ptr + in.len - 4; /* ISIZE: little-endian */
    const size_t isize = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
    size_t most;
    if (__builtin_mul_overflow(in.len, (size_t)DEFLATE_MAX_RATIO, &most)) {
        most = SIZE_MAX;
    }
    if (isize > most) {
        SM_FAIL(err, SM_E_DATA,
                "gzip: trailer declares %zu decoded bytes, more than a %zu-byte member can hold",
                isize, in.len);
    }
    if (isize > bound) {
        SM_FAIL(err, SM_E_LIMIT,
                "gzip: trailer declares %zu decoded bytes, more than the decode limit of %zu "
                "bytes (limits.max_chunk_bytes)",
                isize, bound);
    }
    size_t cap = isize;
    for (;;) {
        SM_TRY(sm_codec_renew(out, cap, err));
        size_t ain = 0, aout = 0;
        enum libdeflate_result r =
            libdeflate_gzip_decompress_ex(d, in.ptr, in.len, out->ptr, cap, &ain, &aout);
        if (r == LIBDEFLATE_SUCCESS) {
            if (ain != in.len) {
                SM_FAIL(err, SM_E_DATA,
                        "gzip: %zu bytes follow the first member and the decoded size is unknown",
                        in.len - ain);
            }
            out->len = aout;
            return SM_OK;
        }
        if (r != LIBDEFLATE_INSUFFICIENT_SPACE) {
            return corrupt(err, r, 0);
        }
        cap = sm_codec_grow(cap, bound);
        if (cap == 0) {
            SM_ERR(err, SM_E_LIMIT,
                   "gzip: member decodes to more than the decode limit of %zu bytes "
                   "(limits.max_chunk_bytes)",
                   bound);
            sm_err_cause(err, "libdeflate", (int)r);
            return err->status;
        }
    }
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
    if (p->dec_len != SM_LEN_VARIABLE) {
        return decode_known(d, in, p->dec_len, out, err);
    }
    return decode_unknown(d, in, scratch->max_decoded, out, err);
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

uint32_t sm_codec_crc32(uint32_t crc, const void *data, size_t n)
{
    return libdeflate_crc32(crc, data, n);
}

/* The writer's slots: gzip (deflate in a gzip member) at a level. */
static sm_status gzip_write_config(int level, unsigned typesize, const char *variant, json_t **v3,
                                   json_t **v2, struct sm_err *err)
{
    (void)typesize, (void)variant;
    *v3 = json_pack("{s:i}", "level", level);
    *v2 = json_pack("{s:s, s:i}", "id", "gzip", "level", level);
    return sm_codec_config_made(v3, v2, err);
}

static const struct sm_codec_writer gzip_writer = {
    .level_min = 0,
    .level_max = 9,
    .level_word = "level",
    .config = gzip_write_config,
    .doc = "deflate in gzip members (libdeflate)",
};

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
    .writer = &gzip_writer,
};
