/* Zarr v2 array metadata (.zarray + optional .zattrs) -> sm_array_meta with a v3 codec chain
 * (SPEC §2, STYLE B8; the conversion follows zarrs' array/convert.rs).
 * https://zarr-specs.readthedocs.io/en/latest/v2/v2.0.html#metadata
 * Invariant: order F, byte order and compressor become [transpose?, bytes, compressor?], so
 * nothing downstream knows the Zarr version. Filters are not supported and are refused. */
#include "format_int.h"

#include <string.h>

#include "shardmill/alloc.h"

/* The members a v2 compressor object may have, per numcodecs id (NULL-terminated). */
static bool known_option(const char *const *allowed, const char *key)
{
    for (size_t i = 0; allowed[i] != NULL; i++) {
        if (strcmp(allowed[i], key) == 0) {
            return true;
        }
    }
    return false;
}

static sm_status check_options(json_t *comp, const char *id, const char *const *allowed,
                               struct sm_err *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(comp, key, v)
    {
        if (strcmp(key, "id") != 0 && !known_option(allowed, key)) {
            SM_FAIL(err, SM_E_DATA, "unsupported option '%s' of v2 compressor '%s'", key, id);
        }
    }
    return SM_OK;
}

/* An optional integer member of a v2 compressor, with the numcodecs default. */
static sm_status int_option(const json_t *comp, const char *id, const char *key, json_int_t dflt,
                            json_int_t *out, struct sm_err *err)
{
    const json_t *v = json_object_get(comp, key);
    if (v == NULL) {
        *out = dflt;
        return SM_OK;
    }
    if (!json_is_integer(v)) {
        SM_FAIL(err, SM_E_DATA, "option '%s' of v2 compressor '%s' must be an integer", key, id);
    }
    *out = json_integer_value(v);
    return SM_OK;
}

/* numcodecs Blosc shuffle: 0 none, 1 byte, 2 bit, -1 auto (bit for 1-byte items, else byte). */
static sm_status blosc_shuffle(json_int_t shuffle, size_t typesize, const char **out,
                               struct sm_err *err)
{
    switch (shuffle) {
    case 0:
        *out = "noshuffle";
        return SM_OK;
    case 1:
        *out = "shuffle";
        return SM_OK;
    case 2:
        *out = "bitshuffle";
        return SM_OK;
    case -1:
        *out = typesize == 1 ? "bitshuffle" : "shuffle";
        return SM_OK;
    default:
        SM_FAIL(err, SM_E_DATA,
                "option 'shuffle' of v2 compressor 'blosc' is %" JSON_INTEGER_FORMAT
                " (expected -1, 0, 1 or 2)",
                shuffle);
    }
}

/* Converts a v2 compressor object to its v3 codec (new reference in *out). */
static sm_status convert_compressor(json_t *comp, enum sm_dtype dt, json_t **out,
                                    struct sm_err *err)
{
    *out = NULL;
    if (!json_is_object(comp)) {
        SM_FAIL(err, SM_E_DATA, "field 'compressor' must be an object or null");
    }
    const json_t *idv = json_object_get(comp, "id");
    if (!json_is_string(idv)) {
        SM_FAIL(err, SM_E_DATA, "field 'compressor' has no string 'id'");
    }
    const char *id = json_string_value(idv);
    json_int_t level = 0; /* initialised for -Wmaybe-uninitialized at -O2 */
    if (strcmp(id, "gzip") == 0 || strcmp(id, "zlib") == 0) {
        static const char *const allowed[] = {"level", NULL};
        SM_TRY(check_options(comp, id, allowed, err));
        SM_TRY(int_option(comp, id, "level", 1, &level, err));
        *out = json_pack("{s:s,s:{s:I}}", "name", id, "configuration", "level", level);
    } else if (strcmp(id, "zstd") == 0) {
        static const char *const allowed[] = {"level", "checksum", NULL};
        SM_TRY(check_options(comp, id, allowed, err));
        SM_TRY(int_option(comp, id, "level", 1, &level, err));
        const json_t *ck = json_object_get(comp, "checksum");
        if (ck != NULL && !json_is_boolean(ck)) {
            SM_FAIL(err, SM_E_DATA, "option 'checksum' of v2 compressor 'zstd' must be a boolean");
        }
        *out = json_pack("{s:s,s:{s:I,s:b}}", "name", "zstd", "configuration", "level", level,
                         "checksum", ck != NULL && json_is_true(ck));
    } else if (strcmp(id, "blosc") == 0) {
        static const char *const allowed[] = {"cname",     "clevel",   "shuffle",
                                              "blocksize", "typesize", NULL};
        SM_TRY(check_options(comp, id, allowed, err));
        const json_t *cname = json_object_get(comp, "cname");
        if (cname != NULL && !json_is_string(cname)) {
            SM_FAIL(err, SM_E_DATA, "option 'cname' of v2 compressor 'blosc' must be a string");
        }
        json_int_t clevel = 0, shuffle = 0, blocksize = 0, typesize = 0;
        SM_TRY(int_option(comp, id, "clevel", 5, &clevel, err));
        SM_TRY(int_option(comp, id, "shuffle", 1, &shuffle, err));
        SM_TRY(int_option(comp, id, "blocksize", 0, &blocksize, err));
        /* numcodecs shuffles by the item size of the array it is given, the dtype's, unless a
         * newer numcodecs recorded an explicit typesize (null there means the same default). */
        typesize = (json_int_t)sm_dtype_size(dt);
        if (!json_is_null(json_object_get(comp, "typesize"))) {
            SM_TRY(int_option(comp, id, "typesize", typesize, &typesize, err));
        }
        if (typesize < 1 || blocksize < 0) {
            SM_FAIL(err, SM_E_DATA,
                    "option '%s' of v2 compressor 'blosc' is out of range (%" JSON_INTEGER_FORMAT
                    ")",
                    typesize < 1 ? "typesize" : "blocksize", typesize < 1 ? typesize : blocksize);
        }
        const char *shuf = NULL;
        SM_TRY(blosc_shuffle(shuffle, (size_t)typesize, &shuf, err));
        *out = json_pack("{s:s,s:{s:s,s:I,s:s,s:I,s:I}}", "name", "blosc", "configuration", "cname",
                         cname != NULL ? json_string_value(cname) : "lz4", "clevel", clevel,
                         "shuffle", shuf, "typesize", typesize, "blocksize", blocksize);
    } else if (sm_codec_find_v2(id) != NULL) {
        /* any other codec of the registry with a numcodecs id (numcodecs.lz4): its v2 options
         * are its v3 configuration, which the codec's parse checks */
        json_t *cfg = json_deep_copy(comp);
        if (cfg != NULL) {
            json_object_del(cfg, "id");
        }
        *out = cfg != NULL ? json_pack("{s:s,s:o}", "name", sm_codec_find_v2(id)->name,
                                       "configuration", cfg)
                           : NULL;
    } else {
        SM_FAIL(err, SM_E_DATA, "unsupported v2 compressor '%s'", id);
    }
    if (*out == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate JSON for compressor '%s'", id);
    }
    return SM_OK;
}

static sm_status append(json_t *codecs, json_t *codec, struct sm_err *err)
{
    if (codec == NULL || json_array_append_new(codecs, codec) != 0) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate the codec list");
    }
    return SM_OK;
}

/* [transpose (order F)], bytes (byte order), [compressor]: the v3 chain of a v2 array. */
static sm_status build_codecs(struct sm_array_meta *m, bool order_f, bool big_endian,
                              json_t *compressor, struct sm_err *err)
{
    m->codecs = json_array();
    if (m->codecs == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate the codec list");
    }
    /* An F-order chunk is the C-order chunk of the reversed axes: transpose by the reversed
     * permutation. Below two dimensions F and C are the same bytes. */
    if (order_f && m->ndim >= 2) {
        json_t *order = json_array();
        for (unsigned d = 0; order != NULL && d < m->ndim; d++) {
            if (json_array_append_new(order, json_integer((json_int_t)(m->ndim - 1 - d))) != 0) {
                json_decref(order);
                order = NULL;
            }
        }
        if (order == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate the codec list");
        }
        SM_TRY(append(
            m->codecs,
            json_pack("{s:s,s:{s:o}}", "name", "transpose", "configuration", "order", order), err));
    }
    if (sm_dtype_size(m->dtype) == 1) {
        SM_TRY(append(m->codecs, json_pack("{s:s,s:{}}", "name", "bytes", "configuration"), err));
    } else {
        SM_TRY(append(m->codecs,
                      json_pack("{s:s,s:{s:s}}", "name", "bytes", "configuration", "endian",
                                big_endian ? "big" : "little"),
                      err));
    }
    if (compressor != NULL && !json_is_null(compressor)) {
        json_t *c;
        SM_TRY(convert_compressor(compressor, m->dtype, &c, err));
        SM_TRY(append(m->codecs, c, err));
    }
    return SM_OK;
}

static sm_status check_filters(const json_t *filters, struct sm_err *err)
{
    if (json_is_null(filters)) {
        return SM_OK;
    }
    if (!json_is_array(filters)) {
        SM_FAIL(err, SM_E_DATA, "field 'filters' must be a list or null");
    }
    if (json_array_size(filters) > 0) {
        const json_t *id = json_object_get(json_array_get(filters, 0), "id");
        if (json_is_string(id)) {
            SM_FAIL(err, SM_E_DATA, "unsupported v2 filter '%s'", json_string_value(id));
        }
        SM_FAIL(err, SM_E_DATA, "unsupported v2 filter (filters[0] has no string 'id')");
    }
    return SM_OK;
}

static sm_status parse_root(json_t *root, struct sm_array_meta *m, struct sm_err *err)
{
    json_t *zf, *shape, *chunks, *dtype, *compressor, *fill, *order, *filters, *sep;
    SM_TRY(sm_fmt_field(root, "zarr_format", true, &zf, err));
    if (!json_is_integer(zf)) {
        SM_FAIL(err, SM_E_DATA, "field 'zarr_format' must be an integer");
    }
    if (json_integer_value(zf) != 2) {
        SM_FAIL(err, SM_E_DATA, "unsupported zarr_format %" JSON_INTEGER_FORMAT " (expected 2)",
                json_integer_value(zf));
    }
    m->zarr_format = 2;
    SM_TRY(sm_fmt_field(root, "shape", true, &shape, err));
    SM_TRY(sm_fmt_dims(shape, "shape", false, &m->ndim, m->shape, err));
    SM_TRY(sm_fmt_field(root, "chunks", true, &chunks, err));
    unsigned chunk_ndim;
    SM_TRY(sm_fmt_dims(chunks, "chunks", true, &chunk_ndim, m->chunk_shape, err));
    if (chunk_ndim != m->ndim) {
        SM_FAIL(err, SM_E_DATA, "field 'chunks' has %u dimensions but 'shape' has %u", chunk_ndim,
                m->ndim);
    }
    bool big_endian;
    SM_TRY(sm_fmt_field(root, "dtype", true, &dtype, err));
    SM_TRY(sm_fmt_dtype_v2(dtype, &m->dtype, &big_endian, err));
    SM_TRY(sm_fmt_field(root, "fill_value", true, &fill, err));
    SM_TRY(sm_fmt_fill_parse(fill, m->dtype, m->fill, &m->fill_is_null, err));
    SM_TRY(sm_fmt_field(root, "order", true, &order, err));
    const char *ord = json_string_value(order);
    if (ord == NULL || (strcmp(ord, "C") != 0 && strcmp(ord, "F") != 0)) {
        SM_FAIL(err, SM_E_DATA, "field 'order' must be \"C\" or \"F\"");
    }
    SM_TRY(sm_fmt_field(root, "filters", true, &filters, err));
    SM_TRY(check_filters(filters, err));
    SM_TRY(sm_fmt_field(root, "dimension_separator", false, &sep, err));
    const char *s = sep != NULL && !json_is_null(sep) ? json_string_value(sep) : ".";
    if (s == NULL || (strcmp(s, ".") != 0 && strcmp(s, "/") != 0)) {
        SM_FAIL(err, SM_E_DATA, "field 'dimension_separator' must be \".\" or \"/\"");
    }
    m->key_prefix[0] = '\0';
    m->key_separator = s[0];
    SM_TRY(sm_fmt_field(root, "compressor", true, &compressor, err));
    SM_TRY(build_codecs(m, ord[0] == 'F', big_endian, compressor, err));
    return SM_OK;
}

static sm_status parse_attrs(const char *zattrs, size_t len, struct sm_array_meta *m,
                             struct sm_err *err)
{
    json_t *attrs;
    SM_TRY(sm_fmt_json_load(zattrs, len, ".zattrs: ", &attrs, err));
    json_decref(m->attributes);
    m->attributes = attrs;
    return sm_fmt_json_restore(attrs, err);
}

sm_status sm_meta_parse_v2(const char *zarray, size_t len, const char *zattrs, size_t zattrs_len,
                           struct sm_array_meta **out, struct sm_err *err)
{
    *out = NULL;
    json_t *root;
    SM_TRY(sm_fmt_json_load(zarray, len, "", &root, err));
    struct sm_array_meta *m = sm_fmt_meta_new();
    sm_status st;
    if (m == NULL) {
        st = SM_ERR(err, SM_E_NOMEM, "cannot allocate array metadata");
    } else {
        st = parse_root(root, m, err);
    }
    json_decref(root);
    if (st == SM_OK && zattrs != NULL) {
        st = parse_attrs(zattrs, zattrs_len, m, err);
    }
    if (st == SM_OK) {
        st = sm_fmt_meta_finish(m, err);
    }
    if (st != SM_OK) {
        sm_meta_free(m);
        return st;
    }
    *out = m;
    return SM_OK;
}
