/* What v2 and v3 metadata share once parsed: shape fields, the size checks and chain
 * preparation, release, and the `shardmill info` description (SPEC §2, §4 `info`).
 * https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html#array-metadata
 * Invariant: a parsed sm_array_meta has a prepared chain whose chunk byte length is the exact
 * product of chunk_shape and the dtype size, and that product fits a size_t. */
#include "format_int.h"

#include <string.h>

#include "shardmill/alloc.h"

struct sm_array_meta *sm_fmt_meta_new(void)
{
    struct sm_array_meta *m = sm_calloc(1, sizeof(*m));
    if (m == NULL) {
        return NULL;
    }
    m->attributes = json_object();
    if (m->attributes == NULL) {
        sm_free(m);
        return NULL;
    }
    return m;
}

void sm_meta_free(struct sm_array_meta *m)
{
    if (m == NULL) {
        return;
    }
    sm_codec_chain_free(m->chain);
    json_decref(m->codecs);
    json_decref(m->attributes);
    json_decref(m->dimension_names);
    sm_free(m);
}

sm_status sm_fmt_field(const json_t *obj, const char *key, bool required, json_t **out,
                       struct sm_err *err)
{
    *out = json_object_get(obj, key);
    if (*out == NULL && required) {
        SM_FAIL(err, SM_E_DATA, "missing field '%s'", key);
    }
    return SM_OK;
}

sm_status sm_fmt_dims(const json_t *v, const char *field, bool positive, unsigned *ndim,
                      uint64_t *out, struct sm_err *err)
{
    if (!json_is_array(v)) {
        SM_FAIL(err, SM_E_DATA, "field '%s' must be an array of integers", field);
    }
    const size_t n = json_array_size(v);
    if (n > SM_MAX_DIMS) {
        SM_FAIL(err, SM_E_DATA, "field '%s' has %zu dimensions (at most %d are supported)", field,
                n, SM_MAX_DIMS);
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        const char *digits;
        if (sm_fmt_json_bigint(e, &digits)) {
            SM_FAIL(err, SM_E_DATA, "%s[%zu] = %s is out of range", field, i, digits);
        }
        if (!json_is_integer(e)) {
            SM_FAIL(err, SM_E_DATA, "%s[%zu] must be an integer", field, i);
        }
        const json_int_t x = json_integer_value(e);
        if (x < 0 || (positive && x == 0)) {
            SM_FAIL(err, SM_E_DATA, "%s[%zu] = %" JSON_INTEGER_FORMAT " must be %s", field, i, x,
                    positive ? "at least 1" : "non-negative");
        }
        out[i] = (uint64_t)x;
    }
    *ndim = (unsigned)n;
    return SM_OK;
}

sm_status sm_fmt_meta_finish(struct sm_array_meta *m, struct sm_err *err)
{
    uint64_t elements = 1, bytes = sm_dtype_size(m->dtype);
    size_t chunk_bytes = sm_dtype_size(m->dtype);
    for (unsigned d = 0; d < m->ndim; d++) {
        if (__builtin_mul_overflow(elements, m->shape[d], &elements)) {
            SM_FAIL(err, SM_E_DATA, "shape: the number of elements overflows 64 bits");
        }
        if (__builtin_mul_overflow(bytes, m->shape[d], &bytes)) { /* regions, ROIs, reports */
            SM_FAIL(err, SM_E_DATA, "shape: the byte size of a %s array overflows 64 bits",
                    sm_dtype_name(m->dtype));
        }
        if (__builtin_mul_overflow(chunk_bytes, m->chunk_shape[d], &chunk_bytes)) {
            SM_FAIL(err, SM_E_DATA, "chunk shape: the byte size of a %s chunk overflows %zu bits",
                    sm_dtype_name(m->dtype), 8 * sizeof(size_t));
        }
    }
    if (chunk_bytes == SM_LEN_VARIABLE) {
        SM_FAIL(err, SM_E_DATA, "chunk shape: the byte size of a %s chunk overflows %zu bits",
                sm_dtype_name(m->dtype), 8 * sizeof(size_t));
    }
    struct sm_repr chunk;
    memset(&chunk, 0, sizeof(chunk));
    chunk.dtype = m->dtype;
    chunk.ndim = m->ndim;
    memcpy(chunk.shape, m->chunk_shape, sizeof(chunk.shape));
    chunk.len = chunk_bytes;
    memcpy(chunk.fill, m->fill, sizeof(chunk.fill));
    return sm_codec_chain_new(m->codecs, &chunk, &m->chain, err);
}

/* ---- describe ---- */

/* A copy the caller may change without touching m (NULL stays NULL -> JSON null). */
static json_t *copy_or_null(const json_t *v)
{
    return v != NULL ? json_deep_copy(v) : json_null();
}

static sm_status describe_into(const struct sm_array_meta *m, json_t *d, struct sm_err *err)
{
    const bool sharded = m->inner_ndim > 0;
    const bool v3_default = strcmp(m->key_prefix, "c") == 0;
    const char sep[2] = {m->key_separator, '\0'};
    if (m->zarr_format == 0) { /* N5 */
        SM_TRY(sm_fmt_set(d, "format", json_string("n5"), err));
        SM_TRY(sm_fmt_set(d, "zarr_format", json_null(), err));
    } else {
        SM_TRY(sm_fmt_set(d, "zarr_format", json_integer(m->zarr_format), err));
    }
    SM_TRY(sm_fmt_set(d, "node_type", json_string("array"), err));
    SM_TRY(sm_fmt_set(d, "shape", sm_json_u64_array(m->shape, m->ndim), err));
    SM_TRY(sm_fmt_set(d, "dtype", json_string(sm_dtype_name(m->dtype)), err));
    SM_TRY(sm_fmt_set(d, "chunks",
                      sharded ? sm_json_u64_array(m->inner_chunk_shape, m->inner_ndim)
                              : sm_json_u64_array(m->chunk_shape, m->ndim),
                      err));
    SM_TRY(sm_fmt_set(d, "shards",
                      sharded ? sm_json_u64_array(m->chunk_shape, m->ndim) : json_null(), err));
    SM_TRY(sm_fmt_set(d, "codecs", copy_or_null(m->codecs), err));
    SM_TRY(sm_fmt_set(d, "fill_value", sm_meta_fill_json(m), err));
    SM_TRY(sm_fmt_set(d, "chunk_key_encoding",
                      json_pack("{s:s,s:s}", "name",
                                m->key_reversed ? "n5"
                                : v3_default    ? "default"
                                                : "v2",
                                "separator", sep),
                      err));
    SM_TRY(sm_fmt_set(d, "attributes",
                      m->attributes != NULL ? json_deep_copy(m->attributes) : json_object(), err));
    SM_TRY(sm_fmt_set(d, "dimension_names", copy_or_null(m->dimension_names), err));
    return SM_OK;
}

json_t *sm_meta_describe(const struct sm_array_meta *m)
{
    json_t *d = json_object();
    struct sm_err err;
    sm_err_clear(&err);
    if (d != NULL && describe_into(m, d, &err) != SM_OK) {
        json_decref(d);
        d = NULL;
    }
    return d;
}
