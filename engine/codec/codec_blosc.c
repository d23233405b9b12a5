/* The blosc codec (bytes -> bytes) on c-blosc 1.x, context entry points only (STYLE B9).
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/blosc/index.html
 * v3 name "blosc"; numcodecs id "blosc" (integer shuffle -1/0/1/2 accepted too). Configuration:
 * {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}.
 * Invariant: a header is validated against the input and must announce the known decoded size;
 * of unknown size, it is trusted only up to the scratch's decode bound.
 * libblosc is loaded with dlopen when the first blosc codec is parsed: it brings snappy, lz4,
 * zlib and the C++ runtime, about 1 ms of every process's start (docs/BENCHMARKS.md "Start-up"),
 * which a run without blosc data should not pay. The compiler still checks every entry point
 * against <blosc.h> (the _Static_asserts below). */
#include "shardmill/sm_config.h"

#include "codec_int.h"

#include <blosc.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/library.h"

#define BLOSC_LIB "libblosc.so.1"

/* The c-blosc entry points used here, resolved once by dlsym. */
typedef int (*compname_to_compcode_fn)(const char *compname);
typedef const char *(*list_compressors_fn)(void);
typedef void (*cbuffer_sizes_fn)(const void *cbuffer, size_t *nbytes, size_t *cbytes,
                                 size_t *blocksize);
typedef int (*cbuffer_validate_fn)(const void *cbuffer, size_t cbytes, size_t *nbytes);
typedef int (*decompress_ctx_fn)(const void *src, void *dest, size_t destsize,
                                 int numinternalthreads);
typedef int (*compress_ctx_fn)(int clevel, int doshuffle, size_t typesize, size_t nbytes,
                               const void *src, void *dest, size_t destsize, const char *compressor,
                               size_t blocksize, int numinternalthreads);
/* Each type is the type of the function <blosc.h> declares (unevaluated: no link reference). */
#define SAME_TYPE(fn, type)                                                                        \
    _Static_assert(_Generic(&fn, type: 1, default: 0), #fn " differs from <blosc.h>")
SAME_TYPE(blosc_compname_to_compcode, compname_to_compcode_fn);
SAME_TYPE(blosc_list_compressors, list_compressors_fn);
SAME_TYPE(blosc_cbuffer_sizes, cbuffer_sizes_fn);
SAME_TYPE(blosc_cbuffer_validate, cbuffer_validate_fn);
SAME_TYPE(blosc_decompress_ctx, decompress_ctx_fn);
SAME_TYPE(blosc_compress_ctx, compress_ctx_fn);

static struct {
    compname_to_compcode_fn compname_to_compcode;
    list_compressors_fn list_compressors;
    cbuffer_sizes_fn cbuffer_sizes;
    cbuffer_validate_fn cbuffer_validate;
    decompress_ctx_fn decompress_ctx;
    compress_ctx_fn compress_ctx; /* last: non-NULL means all loaded */
} bl;
static char bl_error[200];
static pthread_once_t bl_once = PTHREAD_ONCE_INIT;

static void bl_load(void)
{
    static const struct sm_library_sym syms[] = {
        {"blosc_compname_to_compcode", (void **)&bl.compname_to_compcode},
        {"blosc_list_compressors", (void **)&bl.list_compressors},
        {"blosc_cbuffer_sizes", (void **)&bl.cbuffer_sizes},
        {"blosc_cbuffer_validate", (void **)&bl.cbuffer_validate},
        {"blosc_decompress_ctx", (void **)&bl.decompress_ctx},
        {"blosc_compress_ctx", (void **)&bl.compress_ctx},
    };
    if (!sm_library_load(BLOSC_LIB, syms, sizeof(syms) / sizeof(syms[0]), bl_error,
                         sizeof(bl_error))) {
        return;
    }
}

/* Loads libblosc once; SM_E_IO when it cannot be (every blosc codec is parsed first). */
static sm_status bl_need(struct sm_err *err)
{
    pthread_once(&bl_once, bl_load);
    if (bl.compress_ctx == NULL) {
        SM_FAIL(err, SM_E_IO, "codec 'blosc' needs c-blosc (%s, Debian package libblosc1): %s",
                BLOSC_LIB, bl_error);
    }
    return SM_OK;
}

#define AUTOSHUFFLE (-1) /* numcodecs: bit-shuffle 1-byte types, byte-shuffle the others */

struct blosc_conf {
    char cname[16];
    int clevel;
    int shuffle;     /* AUTOSHUFFLE, BLOSC_NOSHUFFLE, BLOSC_SHUFFLE or BLOSC_BITSHUFFLE */
    size_t typesize; /* 0: the element size of the array before the bytes codec */
    size_t blocksize;
};

struct blosc_prep {
    struct blosc_conf c;
    size_t dec_len;
};

static sm_status parse_shuffle(const struct json_t *cfg, int *out, struct sm_err *err)
{
    const json_t *v = cfg != NULL && json_is_object(cfg) ? json_object_get(cfg, "shuffle") : NULL;
    *out = BLOSC_SHUFFLE; /* numcodecs' default when absent */
    if (v == NULL || json_is_null(v)) {
        return SM_OK;
    }
    if (json_is_string(v)) {
        static const char *const names[] = {"noshuffle", "shuffle", "bitshuffle"};
        for (int i = 0; i < 3; i++) {
            if (strcmp(json_string_value(v), names[i]) == 0) {
                *out = i;
                return SM_OK;
            }
        }
        SM_FAIL(err, SM_E_DATA,
                "codec 'blosc': 'shuffle' must be \"noshuffle\", \"shuffle\" or \"bitshuffle\", "
                "got \"%s\"",
                json_string_value(v));
    }
    if (json_is_integer(v) && json_integer_value(v) >= -1 && json_integer_value(v) <= 2) {
        *out = (int)json_integer_value(v);
        return SM_OK;
    }
    SM_FAIL(err, SM_E_DATA, "codec 'blosc': 'shuffle' must be a shuffle name or -1..2");
}

static sm_status blosc_parse(const struct json_t *cfg, void **conf, struct sm_err *err)
{
    static const char *const keys[] = {"cname", "clevel", "shuffle", "typesize", "blocksize", NULL};
    SM_TRY(sm_codec_cfg_keys(cfg, "blosc", keys, err));
    SM_TRY(bl_need(err));
    struct blosc_conf c;
    memset(&c, 0, sizeof(c));
    const char *cname;
    SM_TRY(sm_codec_cfg_string(cfg, "blosc", "cname", false, &cname, err));
    if (cname == NULL) {
        cname = BLOSC_LZ4_COMPNAME;
    }
    if (strlen(cname) >= sizeof(c.cname) || bl.compname_to_compcode(cname) < 0) {
        SM_FAIL(err, SM_E_DATA, "codec 'blosc': compressor '%s' is not available (have %s)", cname,
                bl.list_compressors());
    }
    memcpy(c.cname, cname, strlen(cname) + 1);
    long long x;
    SM_TRY(sm_codec_cfg_int(cfg, "blosc", "clevel", false, 0, 9, 5, &x, err));
    c.clevel = (int)x;
    SM_TRY(parse_shuffle(cfg, &c.shuffle, err));
    SM_TRY(sm_codec_cfg_int(cfg, "blosc", "typesize", false, 1, BLOSC_MAX_TYPESIZE, 0, &x, err));
    c.typesize = (size_t)x;
    SM_TRY(sm_codec_cfg_int(cfg, "blosc", "blocksize", false, 0, BLOSC_MAX_BUFFERSIZE, 0, &x, err));
    c.blocksize = (size_t)x;
    struct blosc_conf *p = sm_malloc(sizeof(*p));
    if (p == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a blosc configuration");
    }
    *p = c;
    *conf = p;
    return SM_OK;
}

static sm_status blosc_prepare(const void *conf, const struct sm_repr *in, struct sm_repr *out,
                               void **prep, struct sm_err *err)
{
    struct blosc_prep *p = sm_malloc(sizeof(*p));
    if (p == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a prepared blosc codec");
    }
    p->c = *(const struct blosc_conf *)conf;
    if (p->c.typesize == 0) {
        const size_t e = sm_dtype_size(in->dtype);
        p->c.typesize = e != 0 ? e : 1;
    }
    if (p->c.shuffle == AUTOSHUFFLE) {
        p->c.shuffle = p->c.typesize == 1 ? BLOSC_BITSHUFFLE : BLOSC_SHUFFLE;
    }
    p->dec_len = in->len;
    sm_repr_bytes(out, in, SM_LEN_VARIABLE);
    *prep = p;
    return SM_OK;
}

/* What a validated header says beyond its sizes must agree with them before anything is sized
 * from it (blosc_cbuffer_validate checks only cbytes and the 2 GiB format maximum): a copied
 * buffer holds exactly nbytes after the header; a compressed one has a positive block size no
 * larger than nbytes (blosc shrinks it to nbytes) and stores a 4-byte start offset per block. */
#define BLOSC_MAX_EXPANSION 32768

static sm_status check_header(struct sm_bytes in, size_t nbytes, struct sm_err *err)
{
    size_t n = 0, cbytes = 0, blocksize = 0;
    bl.cbuffer_sizes(in.ptr, &n, &cbytes, &blocksize);
    if (nbytes == 0) {
        return SM_OK;
    }
    if ((in.ptr[2] & BLOSC_MEMCPYED) != 0) {
        if (nbytes != in.len - BLOSC_MAX_OVERHEAD) {
            SM_FAIL(err, SM_E_DATA,
                    "blosc: header of a copied buffer claims %zu decoded bytes, the buffer holds "
                    "%zu",
                    nbytes, in.len - BLOSC_MAX_OVERHEAD);
        }
        return SM_OK;
    }
    /* No codec inside blosc expands a byte into more than 32768 (zstd: a 4-byte RLE block per
     * 128 KiB; zlib 1032, lz4 255, blosclz less), so a header that claims more than that from
     * this buffer lies, whatever the limits allow (found by fuzz_codec_blosc: 54 bytes claimed
     * 855 MB). */
    if (nbytes / BLOSC_MAX_EXPANSION > in.len) {
        SM_FAIL(err, SM_E_DATA,
                "blosc: header claims %zu decoded bytes from %zu bytes, more than any codec "
                "blosc uses can expand (%dx)",
                nbytes, in.len, BLOSC_MAX_EXPANSION);
    }
    if (blocksize == 0 || blocksize > nbytes) {
        SM_FAIL(err, SM_E_DATA, "blosc: header claims blocks of %zu bytes for %zu decoded bytes",
                blocksize, nbytes);
    }
    const size_t nblocks = nbytes / blocksize + (nbytes % blocksize != 0);
    if (nblocks > (in.len - BLOSC_MAX_OVERHEAD) / 4) {
        SM_FAIL(err, SM_E_DATA,
                "blosc: header claims %zu decoded bytes in %zu blocks, more than %zu bytes can "
                "hold",
                nbytes, nblocks, in.len);
    }
    return SM_OK;
}

static sm_status blosc_decode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                              struct sm_scratch *scratch, struct sm_err *err)
{
    const struct blosc_prep *p = prep;
    if (in.len < BLOSC_MIN_HEADER_LENGTH) {
        SM_FAIL(err, SM_E_DATA, "blosc: %zu bytes are shorter than the %d-byte header", in.len,
                BLOSC_MIN_HEADER_LENGTH);
    }
    size_t nbytes = 0, cbytes = 0, blocksize = 0;
    if (bl.cbuffer_validate(in.ptr, in.len, &nbytes) != 0) {
        bl.cbuffer_sizes(in.ptr, &nbytes, &cbytes, &blocksize);
        SM_FAIL(err, SM_E_DATA,
                "blosc: invalid header for %zu bytes (it claims %zu compressed, %zu decoded)",
                in.len, cbytes, nbytes);
    }
    if (p->dec_len != SM_LEN_VARIABLE && nbytes != p->dec_len) {
        SM_FAIL(err, SM_E_DATA, "blosc: header says %zu decoded bytes, expected %zu", nbytes,
                p->dec_len);
    }
    SM_TRY(check_header(in, nbytes, err));
    if (p->dec_len == SM_LEN_VARIABLE && nbytes > scratch->max_decoded) {
        SM_FAIL(err, SM_E_LIMIT,
                "blosc: header declares %zu decoded bytes, more than the decode limit of %zu "
                "bytes (limits.max_chunk_bytes)",
                nbytes, scratch->max_decoded);
    }
    SM_TRY(sm_buf_reserve(out, nbytes, err));
    if (nbytes != 0) {
        const int r = bl.decompress_ctx(in.ptr, out->ptr, nbytes, 1);
        if (r <= 0) {
            SM_ERR(err, SM_E_DATA, "blosc: corrupt data (%zu bytes, %zu expected decoded)", in.len,
                   nbytes);
            sm_err_cause(err, "blosc", r);
            return err->status;
        }
        if ((size_t)r != nbytes) {
            SM_FAIL(err, SM_E_DATA, "blosc: decoded size %d, expected %zu", r, nbytes);
        }
    }
    out->len = nbytes;
    return SM_OK;
}

static sm_status blosc_encode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                              struct sm_scratch *scratch, struct sm_err *err)
{
    (void)scratch;
    const struct blosc_prep *p = prep;
    if (in.len > (size_t)BLOSC_MAX_BUFFERSIZE) {
        SM_FAIL(err, SM_E_DATA, "blosc: cannot compress %zu bytes (the limit is %d)", in.len,
                BLOSC_MAX_BUFFERSIZE);
    }
    const size_t cap = in.len + BLOSC_MAX_OVERHEAD;
    SM_TRY(sm_buf_reserve(out, cap, err));
    const int r = bl.compress_ctx(p->c.clevel, p->c.shuffle, p->c.typesize, in.len, in.ptr,
                                  out->ptr, cap, p->c.cname, p->c.blocksize, 1);
    if (r <= 0) {
        SM_ERR(err, SM_E_INTERNAL, "blosc: compressing %zu bytes with %s failed", in.len,
               p->c.cname);
        sm_err_cause(err, "blosc", r);
        return err->status;
    }
    out->len = (size_t)r;
    return SM_OK;
}

/* The writer's slots: blosc with byte shuffle and an automatic block size, as bioformats2raw
 * writes it; variant: the inner compressor (cname, default lz4). */
static sm_status blosc_write_config(int level, unsigned typesize, const char *variant, json_t **v3,
                                    json_t **v2, struct sm_err *err)
{
    static const char *const cnames[] = {"lz4", "lz4hc", "blosclz", "zstd", "zlib", NULL};
    const char *cname = variant != NULL ? variant : cnames[0];
    bool ok = false;
    char known[64] = "";
    for (const char *const *k = cnames; *k != NULL; k++) {
        ok = ok || strcmp(*k, cname) == 0;
        size_t n = strlen(known);
        snprintf(known + n, sizeof(known) - n, "%s%s", k == cnames ? "" : ", ", *k);
    }
    if (!ok) {
        SM_FAIL_AT(err, SM_E_USAGE, "output.codec", "unknown blosc cname '%s' (%s)", cname, known);
    }
    *v3 = json_pack("{s:s, s:i, s:s, s:i, s:i}", "cname", cname, "clevel", level, "shuffle",
                    "shuffle", "typesize", (int)typesize, "blocksize", 0);
    *v2 = json_pack("{s:i, s:i, s:s, s:s, s:i}", "blocksize", 0, "clevel", level, "cname", cname,
                    "id", "blosc", "shuffle", 1);
    return sm_codec_config_made(v3, v2, err);
}

static const struct sm_codec_writer blosc_writer = {
    .level_min = 0,
    .level_max = 9,
    .level_word = "clevel",
    .config = blosc_write_config,
    .doc = "c-blosc (lz4 inside by default) with byte shuffle",
};

const struct sm_codec_ops sm_codec_blosc_ops = {
    .name = "blosc",
    .v2_id = "blosc",
    .kind = SM_CODEC_B2B,
    .parse = blosc_parse,
    .prepare = blosc_prepare,
    .decode = blosc_decode,
    .encode = blosc_encode,
    .free_conf = sm_free,
    .free_prep = sm_free,
    .writer = &blosc_writer,
};
