/* format/ internals shared by its source files and its unit tests (STYLE B11): lenient JSON
 * loading, data types, fill values, shape fields and the common tail of v2/v3 parsing.
 * Specs: https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html and
 * https://zarr-specs.readthedocs.io/en/latest/v2/v2.0.html
 * Every failure is SM_E_DATA naming the field; the caller adds the document key as `where`. */
#ifndef SM_FORMAT_INT_H
#define SM_FORMAT_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/meta.h"

/* ---- JSON (format_json.c) ---- */

/* Rewrites the non-JSON tokens Zarr writers emit so jansson accepts the document: bare NaN,
 * Infinity and -Infinity outside strings become the strings "NaN", "Infinity", "-Infinity", and
 * integers that do not fit int64 become big-integer strings (see sm_fmt_json_bigint).
 * *out is NULL when nothing needed rewriting (then parse `text` itself); otherwise it is a new
 * sm_malloc'd buffer of *out_len bytes, owned by the caller (sm_free). Also rejects the escape
 * \u0000 in strings (jansson does too), which keeps big-integer strings unambiguous.
 * SM_E_DATA "malformed JSON at line L column C: ..." or SM_E_NOMEM. */
sm_status sm_fmt_json_rewrite(const char *text, size_t len, char **out, size_t *out_len,
                              struct sm_err *err);

/* Parses a metadata document into a JSON object (new reference in *out). `doc` is prefixed to
 * messages ("" for the document the caller names, ".zattrs: " for a companion document).
 * SM_E_DATA "malformed JSON at line L column C: <jansson text>" with positions in the original
 * text, or "... is not a JSON object"; SM_E_NOMEM. */
sm_status sm_fmt_json_load(const char *text, size_t len, const char *doc, json_t **out,
                           struct sm_err *err);

/* If v is a big-integer string made by sm_fmt_json_rewrite, returns its decimal digits (with a
 * leading '-' for negatives, NUL-terminated) and true. */
bool sm_fmt_json_bigint(const json_t *v, const char **digits);

/* Replaces every big-integer string inside v (recursively) by a JSON real, so free-form user
 * content (attributes) reads as the number it was. SM_E_NOMEM on allocation failure. */
sm_status sm_fmt_json_restore(json_t *v, struct sm_err *err);

/* Sets a JSON member, failing with SM_E_NOMEM when value is NULL or jansson fails (value is
 * consumed either way). */
sm_status sm_fmt_set(json_t *obj, const char *key, json_t *value, struct sm_err *err);

/* ---- data types (format_dtype.c) ---- */

/* Parses a v2 dtype: a NumPy typestr such as "<u2", "|b1", ">f8". `|` is accepted only for
 * 1-byte types; `<` and `>` are accepted on any size. *big_endian is false for 1-byte types.
 * SM_E_DATA naming an unsupported or malformed dtype (structured, strings, float16, ...). */
sm_status sm_fmt_dtype_v2(const json_t *v, enum sm_dtype *dt, bool *big_endian, struct sm_err *err);

/* Parses a v3 data_type (a name such as "uint16"). SM_E_DATA naming an unknown type. */
sm_status sm_fmt_dtype_v3(const json_t *v, enum sm_dtype *dt, struct sm_err *err);

/* ---- fill values (format_fill.c) ---- */

/* Converts a JSON fill_value for dt into little-endian bytes (fill[0..size), the rest zero).
 * Accepts numbers (integers range-checked; floats may be written as integers), booleans for
 * bool (and 0/1), "NaN", "Infinity", "-Infinity", hex bit patterns "0x7fc00000" (exactly two
 * hex digits per byte of dt), and null (zero bytes, *is_null true).
 * SM_E_DATA "fill_value ... " naming the value and the type. */
sm_status sm_fmt_fill_parse(const json_t *v, enum sm_dtype dt, uint8_t fill[8], bool *is_null,
                            struct sm_err *err);

/* The fill value as Zarr v3 JSON (NULL only on allocation failure). */
json_t *sm_fmt_fill_to_json(enum sm_dtype dt, const uint8_t fill[8], bool is_null);

/* ---- shared parsing (format_meta.c) ---- */

/* A zeroed metadata struct with an empty attributes object; NULL on allocation failure. */
struct sm_array_meta *sm_fmt_meta_new(void);

/* The member `key` of obj: SM_E_DATA "missing field 'key'" if required and absent; *out NULL if
 * optional and absent. */
sm_status sm_fmt_field(const json_t *obj, const char *key, bool required, json_t **out,
                       struct sm_err *err);

/* Reads `field` (an array of integers, named in messages) into out[*ndim]. Entries must be >= 0,
 * or >= 1 with `positive`. SM_E_DATA naming the field and the entry. */
sm_status sm_fmt_dims(const json_t *v, const char *field, bool positive, unsigned *ndim,
                      uint64_t *out, struct sm_err *err);

/* The common tail of both parsers: checks that the element count of shape and the byte size of
 * a chunk fit 64 bits, then prepares m->chain from m->codecs for chunks of m->chunk_shape.
 * SM_E_DATA for an overflow or anything sm_codec_chain_new rejects. */
sm_status sm_fmt_meta_finish(struct sm_array_meta *m, struct sm_err *err);

#endif
