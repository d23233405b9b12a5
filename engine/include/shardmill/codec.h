/* Codecs, the codec registry and prepared codec chains (STYLE B8, SPEC §2).
 * Codecs do no I/O, print nothing, and allocate only into `out` or `scratch`.
 * A chain is prepared once per chunk shape (sm_codec_chain_new) and is then immutable and shared
 * by threads; each thread brings its own sm_scratch (zstd/libdeflate contexts, temp buffers). */
#ifndef SM_CODEC_CODEC_H
#define SM_CODEC_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/buf.h"
#include "shardmill/dtype.h"
#include "shardmill/status.h"

struct json_t; /* jansson */

#define SM_MAX_DIMS 32
#define SM_LEN_VARIABLE SIZE_MAX

/* The representation flowing between two stages of a chain. */
struct sm_repr {
    enum sm_dtype dtype;
    unsigned ndim;
    uint64_t shape[SM_MAX_DIMS];
    size_t len;      /* exact byte length, or SM_LEN_VARIABLE */
    uint8_t fill[8]; /* fill value, little-endian bytes of dtype (for sharding's empty chunks) */
};

enum sm_codec_kind { SM_CODEC_A2A, SM_CODEC_A2B, SM_CODEC_B2B };

struct sm_scratch;

/* The writer's slots of a codec the output may be compressed with (output.codec.name): a codec
 * with them is writable, one without (writer NULL) is read only. write/ builds the chunks' stage
 * from them and jobs/ its choices, level range and help, so a new output codec is its own file
 * plus one registry entry (CONTRIBUTING.md "A new output codec"). */
struct sm_codec_writer {
    const char *choice;       /* its output.codec.name; NULL: the codec's v3 name */
    int level_min, level_max; /* output.codec.level, inclusive */
    const char *level_word;   /* the configuration's name of the level ("level", "clevel") */
    /* The configuration of the v3 stage {"name", "configuration": *v3} and of the v2 compressor
     * (*v2: the numcodecs object with its "id") for a level in range and values of `typesize`
     * bytes; `variant` is the codec's own sub-choice (blosc's cname; NULL: its default).
     * SM_E_USAGE (where output.codec) for a variant it does not know, SM_E_NOMEM. */
    sm_status (*config)(int level, unsigned typesize, const char *variant, struct json_t **v3,
                        struct json_t **v2, struct sm_err *err);
    const char *doc; /* one line for docs/CONFIG.md */
};

struct sm_codec_ops {
    const char *name;  /* v3 name, e.g. "zstd" */
    const char *v2_id; /* numcodecs id, or NULL */
    enum sm_codec_kind kind;
    /* Parses and validates the "configuration" object (NULL if absent). SM_E_DATA naming the key.
     */
    sm_status (*parse)(const struct json_t *cfg, void **conf, struct sm_err *);
    /* Once per shape: `in` is the decoded-side representation; fills the encoded side `out`. */
    sm_status (*prepare)(const void *conf, const struct sm_repr *in, struct sm_repr *out,
                         void **prep, struct sm_err *);
    /* Decodes `in` (encoded side) into out, reserving the exact decoded size. */
    sm_status (*decode)(const void *prep, struct sm_bytes in, struct sm_buf *out,
                        struct sm_scratch *, struct sm_err *);
    /* Encodes `in` (decoded side) into out (reserving a known bound). */
    sm_status (*encode)(const void *prep, struct sm_bytes in, struct sm_buf *out,
                        struct sm_scratch *, struct sm_err *);
    void (*free_conf)(void *conf);
    void (*free_prep)(void *prep);
    /* Optional (NULL: no). True when the prepared stage copies bytes unchanged (bytes in the
     * native order, transpose by the identity order): the chain skips it. */
    bool (*is_identity)(const void *prep);
    /* Optional: a stage with codec chains inside (sharding_indexed). set_depth tells its parsed
     * configuration the nesting level its inner chains are built at; height gives the levels of
     * chains below the prepared stage. */
    void (*set_depth)(void *conf, unsigned depth);
    unsigned (*height)(const void *prep);
    /* Optional (NULL: the output is never written with it): the writer's slots above. */
    const struct sm_codec_writer *writer;
};

/* The registry: NULL-terminated, looked up by v3 name or by numcodecs id. */
const struct sm_codec_ops *sm_codec_find(const char *name);
const struct sm_codec_ops *sm_codec_find_v2(const char *v2_id);
/* The i-th codec of the registry, NULL past the last (in registry order: the writable ones,
 * ops->writer != NULL, in the order output.codec.name lists them). */
const struct sm_codec_ops *sm_codec_at(size_t i);
/* The writable codec whose output.codec.name is `choice` (its writer's choice, else its v3
 * name), or NULL. */
const struct sm_codec_ops *sm_codec_find_writer(const char *choice);
/* The output.codec.name of a writable codec. */
const char *sm_codec_choice(const struct sm_codec_ops *ops);

/* Per-thread codec state. Not thread-safe: one per thread. */
sm_status sm_scratch_new(struct sm_scratch **out, struct sm_err *err);
void sm_scratch_free(struct sm_scratch *s);

/* The default of sm_scratch_set_max_decoded (the default of limits.max_chunk_bytes). */
#define SM_SCRATCH_MAX_DECODED_DEFAULT (1ull << 30)

/* Bounds every decoded size a chain does not know from its metadata: a size the input declares (a
 * gzip ISIZE trailer, a zstd frame header, a blosc header) or a stream reaches, in chains such as
 * [bytes, zstd, gzip] where a bytes->bytes stage decodes into another one's input. A declared
 * size past the bound is refused before anything is allocated (SM_E_LIMIT, or SM_E_DATA when the
 * header is impossible for the input's length); a stream without a declared size is refused once
 * it decodes past the bound. Sizes the chain knows (the chunk's, from the metadata) are the
 * caller's to check: sm_array_read_region checks them against limits.max_chunk_bytes and sets
 * this bound from the same limit. 0: no bound. A new scratch starts at
 * SM_SCRATCH_MAX_DECODED_DEFAULT. */
void sm_scratch_set_max_decoded(struct sm_scratch *s, uint64_t max_bytes);

/* Threads one encode on s may use for the inner chunks of a shard (sharding_indexed), each on a
 * worker scratch of s (sm_scratch_worker): a caller with fewer shards than threads, outside any
 * OpenMP parallel region, sets it to its thread count. The bytes are the same for any count.
 * 0 or 1 (the default): serial. */
void sm_scratch_set_threads(struct sm_scratch *s, unsigned threads);

/* Buffers a caller keeps on its scratch between calls: array/ region reads keep their encoded,
 * decoded, shard-index and inner-reference buffers here, so that reads in steady state allocate
 * nothing. Slot i < SM_SCRATCH_USER_BUFS; the buffers are owned by the scratch (freed with it) and
 * are never touched by codecs. */
#define SM_SCRATCH_USER_BUFS 4
struct sm_buf *sm_scratch_user_buf(struct sm_scratch *s, unsigned i);

/* The scratch helper thread i of a parallel call made on s uses (i = 0: s itself; one per helper
 * thread, i < SM_SCRATCH_MAX_WORKERS). Created on first use and kept, owned by s (freed with it),
 * with s's decoded-size bound. Only the thread that owns s may call this; each helper then uses
 * its own scratch alone. Helpers never get helpers: a worker's own worker list stays empty.
 * SM_E_NOMEM. */
#define SM_SCRATCH_MAX_WORKERS 64
sm_status sm_scratch_worker(struct sm_scratch *s, unsigned i, struct sm_scratch **out,
                            struct sm_err *err);

/* A prepared codec chain, ordered as in the metadata: A2A..., one A2B, B2B... */
struct sm_codec_chain;

/* Parses a v3 "codecs" JSON array (objects {"name", "configuration"} or bare name strings) and
 * prepares it for chunks described by `chunk` (dtype, ndim, shape, len, fill).
 * SM_E_DATA for an unknown codec (naming it), a bad configuration or an illegal order. */
sm_status sm_codec_chain_new(const struct json_t *codecs, const struct sm_repr *chunk,
                             struct sm_codec_chain **out, struct sm_err *err);
void sm_codec_chain_free(struct sm_codec_chain *c);

/* Decodes an encoded chunk into out: exactly the chunk's byte length, C order, native endian.
 * Runs B2B in reverse, then A2B, then A2A in reverse, checking the length after every stage
 * (a mismatch is SM_E_DATA, never a silent pad). Thread-safe with a per-thread scratch. */
sm_status sm_codec_chain_decode(const struct sm_codec_chain *c, struct sm_bytes in,
                                struct sm_buf *out, struct sm_scratch *scratch, struct sm_err *err);
/* As sm_codec_chain_decode, but when no stage changes the bytes (raw little-endian data, identity
 * transposes) *decoded points into `in` after the length check and out is left untouched; else
 * *decoded = out->ptr. Readers use it to skip one copy per raw chunk. */
sm_status sm_codec_chain_decode_view(const struct sm_codec_chain *c, struct sm_bytes in,
                                     struct sm_buf *out, const uint8_t **decoded,
                                     struct sm_scratch *scratch, struct sm_err *err);

/* Encodes a decoded chunk (exactly the chunk's byte length) into out. Deterministic. */
sm_status sm_codec_chain_encode(const struct sm_codec_chain *c, struct sm_bytes in,
                                struct sm_buf *out, struct sm_scratch *scratch, struct sm_err *err);

/* The exact encoded size of every chunk when the chain fixes it (bytes, transpose, crc32c only),
 * else 0. */
size_t sm_codec_chain_encoded_len(const struct sm_codec_chain *c);

/* CRC-32 (IEEE 802.3, gzip's) extending `crc` (0 to start) over n bytes, by libdeflate; with
 * crc32c.h's Castagnoli CRC it makes the 64-bit digest of a shard's values (write/). */
uint32_t sm_codec_crc32(uint32_t crc, const void *data, size_t n);

/* The chunk representation the chain was prepared for. */
const struct sm_repr *sm_codec_chain_repr(const struct sm_codec_chain *c);

/* ---- sharding_indexed: the pure parts (array/shard_read.c does the I/O) ---- */

#define SM_SHARD_EMPTY UINT64_MAX /* offset and length of an absent inner chunk */

enum sm_shard_index_location { SM_SHARD_INDEX_END, SM_SHARD_INDEX_START };

struct sm_shard_layout {
    unsigned ndim;
    uint64_t inner_shape[SM_MAX_DIMS];      /* inner chunk shape */
    uint64_t chunks_per_shard[SM_MAX_DIMS]; /* shard shape / inner shape, per axis */
    uint64_t n_inner;                       /* product of chunks_per_shard */
    size_t index_len;                       /* encoded index bytes (fixed) */
    enum sm_shard_index_location location;
};

struct sm_shard_codec; /* a prepared sharding_indexed stage */

/* The sharding stage if the chain is exactly [sharding_indexed] (so a reader can fetch the index
 * and single inner chunks by range); NULL otherwise (the chain then decodes whole objects).
 * Stages that are plain copies (an identity transpose) do not count. */
const struct sm_shard_codec *sm_codec_chain_shard(const struct sm_codec_chain *c);

const struct sm_shard_layout *sm_shard_layout(const struct sm_shard_codec *sc);

/* Encodes, with the chain [sc] (sm_codec_chain_shard), the shard whose values inside the box
 * [0, clip) are `in` (C order, that box's bytes) and the fill value elsewhere: the bytes of the
 * chain's encode of the shard padded with the fill value, without the padded copy (an edge shard
 * of a volume). SM_E_INTERNAL for a clip past the shard or an input of the wrong size. */
sm_status sm_shard_encode_clipped(const struct sm_shard_codec *sc, struct sm_bytes in,
                                  const uint64_t *clip, struct sm_buf *out,
                                  struct sm_scratch *scratch, struct sm_err *err);
/* The prepared chain of the inner chunks (may itself be sharded: nested sharding). */
const struct sm_codec_chain *sm_shard_inner(const struct sm_shard_codec *sc);

/* Decodes the encoded index (exactly layout->index_len bytes) into 2 * n_inner little-endian
 * (offset, nbytes) pairs in C order of the inner grid, verifying any crc32c.
 * SM_E_DATA on a checksum mismatch, or an entry that is not SM_SHARD_EMPTY in both fields and
 * ends past `shard_len` (the whole shard object's size; offsets count from the shard start). */
sm_status sm_shard_index_decode(const struct sm_shard_codec *sc, struct sm_bytes index,
                                uint64_t shard_len, uint64_t *pairs, struct sm_scratch *scratch,
                                struct sm_err *err);
/* Encodes 2 * n_inner pairs into out (exactly index_len bytes). */
sm_status sm_shard_index_encode(const struct sm_shard_codec *sc, const uint64_t *pairs,
                                struct sm_buf *out, struct sm_scratch *scratch, struct sm_err *err);

#endif
