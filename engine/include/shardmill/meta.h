/* Zarr v2 and v3 metadata: parse, validate, and describe (SPEC §2). Both versions end as the same
 * struct with a v3-style codec chain (v2 compressor, filters, order and byte order converted), so
 * nothing downstream knows the Zarr version; N5 attributes.json ends there too ([n5_block]). */
#ifndef SM_FORMAT_META_H
#define SM_FORMAT_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/codec.h"
#include "shardmill/dtype.h"
#include "shardmill/status.h"

struct json_t;

enum sm_node_kind { SM_NODE_ARRAY, SM_NODE_GROUP };

struct sm_array_meta {
    int zarr_format; /* 2 or 3; 0 for an N5 dataset */
    unsigned ndim;
    uint64_t shape[SM_MAX_DIMS];
    uint64_t chunk_shape[SM_MAX_DIMS]; /* the stored object grid: the shard shape if sharded */
    enum sm_dtype dtype;
    uint8_t fill[8]; /* fill value as little-endian bytes of dtype (zero if null) */
    bool fill_is_null;
    /* chunk keys: v2 -> prefix "", separator '.' or '/'; v3 default -> "c" + '/', v3 "v2" -> ""
     * + '.' or '/'. A 0-d array's key is the prefix alone ("c" for v3 default, "0" for v2). */
    char key_prefix[8];
    char key_separator;
    bool key_reversed; /* N5: the key lists the grid index fastest-first ("2/1/0" for [0,1,2]) */
    struct sm_codec_chain *chain;   /* prepared for chunk_shape (owned) */
    struct json_t *codecs;          /* the v3-form codec list (owned; for info and provenance) */
    struct json_t *attributes;      /* owned; empty object if none */
    struct json_t *dimension_names; /* owned; NULL if none */
    /* Sharded arrays: the inner chunk shape, for `info` (ndim 0 if not sharded). */
    unsigned inner_ndim;
    uint64_t inner_chunk_shape[SM_MAX_DIMS];
};

/* Parses a v3 zarr.json document. *kind tells whether it is an array or a group; for a group,
 * *out is NULL and *attrs (if non-NULL) receives the attributes (owned by the caller).
 * SM_E_DATA with a precise message for malformed JSON (line:column), a missing or mistyped
 * field, a negative shape entry or a chunk dimension below 1 (zero-length array dimensions are
 * valid), an unknown data type or codec (named), a shape or chunk product that overflows, an
 * unsupported chunk grid / key encoding / storage transformer, or an unknown member that is not
 * an extension object with "must_understand": false. SM_E_NOMEM on allocation failure.
 * Bare NaN / Infinity / -Infinity tokens and integers beyond int64 (uint64 fill values) are
 * accepted although they are not strict JSON. Thread-safe (no shared state). */
sm_status sm_meta_parse_v3(const char *json, size_t len, enum sm_node_kind *kind,
                           struct sm_array_meta **out, struct json_t **attrs, struct sm_err *err);

/* Parses a v2 .zarray document; `zattrs` (may be NULL) is the .zattrs document. Order F, byte
 * order and the compressor become a v3 chain ([transpose], bytes, [gzip|zlib|zstd|blosc]).
 * SM_E_DATA as for v3, and for an unsupported compressor or any filter (named); errors in
 * .zattrs start with ".zattrs: ". SM_E_NOMEM on allocation failure. */
sm_status sm_meta_parse_v2(const char *zarray, size_t len, const char *zattrs, size_t zattrs_len,
                           struct sm_array_meta **out, struct sm_err *err);

/* Parses an N5 attributes.json. A document with neither 'dimensions' nor 'dataType' is a group
 * (*kind GROUP, *out NULL, *attrs its members but 'n5'). For a dataset the axes are reversed to C
 * order (shape, chunk_shape), the fill value is 0, and the chain is [n5_block] with the
 * compression (raw, gzip / zlib, zstd, blosc; xz and bzip2 when the codecs are built) inside.
 * SM_E_DATA for malformed JSON, a missing or mistyped field, an empty 'dimensions', a blockSize
 * entry below 1 or above 2^32-1, a rank mismatch, a non-numeric dataType, or an unsupported
 * compression (named). SM_E_NOMEM on allocation failure. Thread-safe. */
sm_status sm_meta_parse_n5(const char *json, size_t len, enum sm_node_kind *kind,
                           struct sm_array_meta **out, struct json_t **attrs, struct sm_err *err);

/* Releases m and everything it owns; accepts NULL. */
void sm_meta_free(struct sm_array_meta *m);

/* Parses a free-form attributes document (a v2 .zattrs, e.g. of a group) with the same lenient
 * JSON rules as the metadata parsers; *out is a new object owned by the caller.
 * SM_E_DATA "malformed JSON at line L column C: ..." or "... is not a JSON object"; SM_E_NOMEM. */
sm_status sm_meta_parse_attrs(const char *json, size_t len, struct json_t **out,
                              struct sm_err *err);

/* Writes the key of the chunk at grid index idx[ndim] into buf ("c/0/1/2", "0.1.2").
 * SM_E_INTERNAL if it does not fit. */
sm_status sm_meta_chunk_key(const struct sm_array_meta *m, const uint64_t *idx, char *buf,
                            size_t cap, struct sm_err *err);

/* A JSON description for `shardmill info`: zarr_format (null for N5, with "format": "n5" and
 * chunk_key_encoding {"name": "n5", "separator": "/"}), node_type, shape, dtype, chunks (the
 * inner chunk shape if sharded), shards (the shard shape, or null), codecs (v3 form, also for v2
 * arrays), fill_value, chunk_key_encoding {name, separator}, attributes, dimension_names (or
 * null). New reference for the caller, sharing nothing with m; NULL on allocation failure. */
struct json_t *sm_meta_describe(const struct sm_array_meta *m);

/* The one JSON number policy of every document shardmill writes or reads (zarr.json and its
 * provenance, the marker, the report, `info`, `plan`; SPEC §6.3, §7):
 * - checksums (SPEC §5.2, §5.8: checksum, weighted_checksum and their output_ forms) are decimal
 *   strings, sm_json_checksum_u64/_i64, so that every JSON reader (JavaScript's, whose numbers
 *   are doubles, too) keeps them exact;
 * - counts, sizes and indices are JSON integers, sm_json_u64; only a Zarr uint64 fill_value
 *   (which the Zarr spec makes a number) can exceed 2^63-1, and is then written as the bare
 *   number;
 * - every document is parsed by sm_json_load, which holds any integer exactly, and a document that
 *   does not parse is an error (SM_E_DATA naming it), never a default;
 * - sm_json_get_u64/_i64 read a number back from either form (so outputs of earlier versions,
 *   whose checksums were bare integers, still read).
 * jansson integers are int64: an integer outside it is held as a string starting with NUL
 * ("\u0000<digits>", which no parsed string can be) and sm_json_dumps() renders it bare. */
struct json_t *sm_json_u64(uint64_t v);
/* The n values of v as a JSON array of sm_json_u64 (shapes, chunk shapes, counts); NULL on
 * allocation failure. */
struct json_t *sm_json_u64_array(const uint64_t *v, unsigned n);
/* A checksum as its decimal string ("18430814901801376625"); the signed form for SPEC §5.2's
 * `checksum` ("-12"). NULL on allocation failure. */
struct json_t *sm_json_checksum_u64(uint64_t v);
struct json_t *sm_json_checksum_i64(int64_t v);
/* The number v holds, as a JSON integer, an integer outside int64 (see above) or a decimal
 * string of digits (with a leading '-' for _i64) within the type; false for anything else. */
bool sm_json_get_u64(const struct json_t *v, uint64_t *out);
bool sm_json_get_i64(const struct json_t *v, int64_t *out);
/* Parses a document shardmill reads (see the policy above) into a JSON object, a new reference in
 * *out. SM_E_DATA "malformed JSON at line L column C: ..." or "... is not a JSON object" with
 * `where` (the document's path or key) as the error's where; SM_E_NOMEM. */
sm_status sm_json_load(const char *text, size_t len, const char *where, struct json_t **out,
                       struct sm_err *err);
/* json_dumps(j, flags) with marked values unmarked; release with sm_json_free_text(). */
char *sm_json_dumps(const struct json_t *j, size_t flags);
/* Releases text from sm_json_dumps or json_dumps with jansson's configured allocator. */
void sm_json_free_text(char *text);

/* The fill value as JSON the way Zarr v3 writes it ("NaN", "Infinity", numbers, bools; a NaN
 * with a non-canonical payload as its hex bit pattern "0x..."; null if fill_is_null). A uint64
 * above 2^63-1 is sm_json_u64's exact integer. NULL on allocation failure. */
struct json_t *sm_meta_fill_json(const struct sm_array_meta *m);

#endif
