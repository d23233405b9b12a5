/* codec/ internals shared by its sources and unit tests (STYLE B4, B8, B11): the per-thread
 * scratch, prepared chains and stages, configuration helpers and the registry's ops tables.
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html#codecs
 * Invariant: prepared state is immutable after sm_codec_chain_new; everything a decode or encode
 * mutates lives in the caller's sm_scratch or output buffer. */
#ifndef SM_CODEC_CODEC_INT_H
#define SM_CODEC_CODEC_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/buf.h"
#include "shardmill/codec.h"
#include "shardmill/status.h"

/* Chains nest through sharding_indexed: a chain containing a sharding stage whose inner chain is
 * itself sharded has height 2. Chains deeper than this are rejected by sm_codec_chain_new. */
#define SM_CODEC_MAX_NESTING 8
/* Scratch levels: a chain of height h uses levels 0..h-1 (see struct sm_scratch_level). */
#define SM_SCRATCH_LEVELS SM_CODEC_MAX_NESTING
/* libdeflate levels 0..12 (Zarr configurations use 0..9). */
#define SM_DEFLATE_LEVELS 13

struct ZSTD_DCtx_s;
struct ZSTD_CCtx_s;
struct libdeflate_decompressor;
struct libdeflate_compressor;

/* Buffers owned by one nesting level. A chain running at level L ping-pongs between tmp[0] and
 * tmp[1] of lv[L]; a sharding stage called while the scratch depth is D uses aux[] of lv[D] for
 * its index and inner chunks, and its inner chains run at level D. So a recursive inner decode
 * never clobbers the buffers of the stage that called it. */
struct sm_scratch_level {
    struct sm_buf tmp[2];
    struct sm_buf aux[3];
};

struct sm_scratch {
    struct ZSTD_DCtx_s *zstd_d; /* created lazily (through sm_malloc) */
    struct ZSTD_CCtx_s *zstd_c;
    struct libdeflate_decompressor *deflate_d;
    struct libdeflate_compressor *deflate_c[SM_DEFLATE_LEVELS]; /* one per level, lazily */
    unsigned depth;     /* chains currently running on this scratch */
    unsigned threads;   /* threads one call may use for its inner chunks (sm_scratch_set_threads) */
    size_t max_decoded; /* bound on decoded sizes the chain does not know (SIZE_MAX: none) */
    struct sm_scratch_level lv[SM_SCRATCH_LEVELS];
    struct sm_buf user[SM_SCRATCH_USER_BUFS];           /* sm_scratch_user_buf */
    struct sm_scratch *workers[SM_SCRATCH_MAX_WORKERS]; /* [0] unused: s itself */
};

/* Lazily created library contexts. SM_E_NOMEM if the library cannot allocate one. */
sm_status sm_scratch_zstd_d(struct sm_scratch *s, struct ZSTD_DCtx_s **out, struct sm_err *err);
sm_status sm_scratch_zstd_c(struct sm_scratch *s, struct ZSTD_CCtx_s **out, struct sm_err *err);
sm_status sm_scratch_deflate_d(struct sm_scratch *s, struct libdeflate_decompressor **out,
                               struct sm_err *err);
sm_status sm_scratch_deflate_c(struct sm_scratch *s, int level, struct libdeflate_compressor **out,
                               struct sm_err *err);
/* The buffers of level `lv` (SM_E_INTERNAL past the last level: chains are bounded at build). */
sm_status sm_scratch_level(struct sm_scratch *s, unsigned lv, struct sm_scratch_level **out,
                           struct sm_err *err);

/* ---- prepared chains (codec_chain.c) ---- */

struct sm_codec_stage {
    const struct sm_codec_ops *ops;
    void *conf;
    void *prep;
    struct sm_repr dec; /* decoded side (the input of encode) */
    struct sm_repr enc; /* encoded side (the input of decode) */
    bool identity;      /* decode and encode are plain copies: the chain skips the stage */
};

struct sm_codec_chain {
    struct sm_repr repr; /* the chunk representation the chain was prepared for */
    size_t n;
    struct sm_codec_stage *stages; /* metadata order: A2A..., A2B, B2B... */
    unsigned height;               /* 1 + the deepest nested chain (sharding) */
};

/* sm_codec_chain_new at nesting level `depth` (0 for a top-level chain); SM_E_DATA past
 * SM_CODEC_MAX_NESTING. */
sm_status sm_codec_chain_new_at(const struct json_t *codecs, const struct sm_repr *chunk,
                                unsigned depth, struct sm_codec_chain **out, struct sm_err *err);

/* ---- representations (codec_repr.c) ---- */

/* The representation of `len` bytes produced from `from` (dtype kept for typesize defaults; ndim 1,
 * shape [len] or [0] when the length is SM_LEN_VARIABLE). */
void sm_repr_bytes(struct sm_repr *out, const struct sm_repr *from, size_t len);

/* Product of the shape times the element size; false on overflow. */
bool sm_repr_array_len(const struct sm_repr *r, size_t *len);

/* ---- configuration helpers (codec_config.c); every failure names the codec and the key ---- */

/* Fails for a configuration that is neither absent nor an object, or has a key not in `keys`
 * (NULL-terminated). The numcodecs key "id" is always allowed (v2 configurations). */
sm_status sm_codec_cfg_keys(const struct json_t *cfg, const char *codec, const char *const *keys,
                            struct sm_err *err);
/* An integer in [lo, hi]; *out = dflt when absent and not required. */
sm_status sm_codec_cfg_int(const struct json_t *cfg, const char *codec, const char *key,
                           bool required, long long lo, long long hi, long long dflt,
                           long long *out, struct sm_err *err);
sm_status sm_codec_cfg_bool(const struct json_t *cfg, const char *codec, const char *key, bool dflt,
                            bool *out, struct sm_err *err);
/* A string member (borrowed from cfg); *out = NULL when absent and not required. */
sm_status sm_codec_cfg_string(const struct json_t *cfg, const char *codec, const char *key,
                              bool required, const char **out, struct sm_err *err);

/* ---- buffer helpers ---- */

/* The capacity to retry with when a decoder ran out of room in `cap` bytes and the decoded size is
 * unknown (no header declares it, or the one that does lied): doubles, at least 64 KiB, capped at
 * `bound`; 0 once cap has reached the bound (the caller then fails with SM_E_LIMIT). */
size_t sm_codec_grow(size_t cap, size_t bound);

/* Replaces b's storage with an empty buffer of capacity n (the old contents are dropped first, so
 * growing for a retry never holds both the old and the new buffer). */
sm_status sm_codec_renew(struct sm_buf *b, size_t n, struct sm_err *err);

/* Appends n bytes, growing geometrically (encode side only: the encoded size is not known before
 * the inner chunks are encoded). */
sm_status sm_codec_append(struct sm_buf *b, const void *p, size_t n, struct sm_err *err);

/* ---- transpose kernel (codec_transpose.c), exposed for tests and the benchmark ---- */

/* dst = numpy.transpose(src, perm): dst.shape[i] = shape[perm[i]]. elem is 1, 2, 4 or 8. */
void sm_transpose_copy(unsigned ndim, const uint64_t *shape, const unsigned *perm, size_t elem,
                       const void *src, void *dst);

/* ---- the registry's entries ---- */

extern const struct sm_codec_ops sm_codec_bytes_ops;
extern const struct sm_codec_ops sm_codec_transpose_ops;
extern const struct sm_codec_ops sm_codec_gzip_ops;
extern const struct sm_codec_ops sm_codec_zlib_ops;
extern const struct sm_codec_ops sm_codec_zstd_ops;
extern const struct sm_codec_ops sm_codec_blosc_ops;
extern const struct sm_codec_ops sm_codec_crc32c_ops;
extern const struct sm_codec_ops sm_codec_sharding_ops;
extern const struct sm_codec_ops sm_codec_n5_ops;
extern const struct sm_codec_ops sm_codec_xz_ops;  /* liblzma, dlopen()ed on first parse */
extern const struct sm_codec_ops sm_codec_bz2_ops; /* libbz2, dlopen()ed on first parse */
extern const struct sm_codec_ops sm_codec_lz4_ops; /* numcodecs' LZ4 (liblz4) */

/* The registry itself (NULL-terminated), for the conformance suite. */
extern const struct sm_codec_ops *const sm_codec_registry[];

/* A writer's config slot's end (shardmill/codec.h `config`): SM_E_NOMEM, both released and
 * NULL, when either object could not be built (codec_registry.c). */
sm_status sm_codec_config_made(struct json_t **v3, struct json_t **v2, struct sm_err *err);

#endif
