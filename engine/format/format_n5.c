/* N5 dataset metadata (attributes.json) -> sm_array_meta with an [n5_block] codec chain (SPEC §2).
 * https://github.com/saalfeldlab/n5#file-system-specification
 * Invariant: N5 lists dimensions fastest-first; here every axis is reversed once, so the shape,
 * the chunk shape and a block's values are in C order and nothing downstream knows about N5. The
 * chunk keys list the grid index fastest-first again (key_reversed). Fill value 0. */
#include "format_int.h"

#include <string.h>

#include "shardmill/alloc.h"

/* The members attributes.json gives meaning to; everything else is user attributes. */
static const char *const n5_keywords[] = {
    "n5", "dimensions", "blockSize", "dataType", "compression", "compressionType", NULL,
};

static bool is_keyword(const char *key)
{
    for (size_t i = 0; n5_keywords[i] != NULL; i++) {
        if (strcmp(n5_keywords[i], key) == 0) {
            return true;
        }
    }
    return false;
}

/* An integer member of the compression object, or dflt when absent or not an integer (N5 writers
 * disagree on types; the values matter only to encoders). */
static json_int_t opt_int(const json_t *comp, const char *key, json_int_t dflt)
{
    const json_t *v = json_object_get(comp, key);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static json_int_t clamp(json_int_t v, json_int_t lo, json_int_t hi, json_int_t dflt)
{
    return v < lo || v > hi ? dflt : v;
}

/* The N5 compression names this build reads, for messages. */
#define N5_SUPPORTED "raw, gzip, zstd, blosc, xz, bzip2"

/* Converts the N5 "compression" object to the v3 bytes->bytes codec of the block payload (new
 * reference in *out; JSON null for raw). */
static sm_status convert_compression(const json_t *comp, enum sm_dtype dt, json_t **out,
                                     struct sm_err *err)
{
    *out = NULL;
    const char *type = json_string_value(json_object_get(comp, "type"));
    if (!json_is_object(comp) || type == NULL) {
        SM_FAIL(err, SM_E_DATA, "field 'compression' must be an object with a string 'type'");
    }
    if (strcmp(type, "raw") == 0) {
        *out = json_null();
    } else if (strcmp(type, "gzip") == 0) {
        const bool zlib = json_is_true(json_object_get(comp, "useZlib"));
        *out = json_pack("{s:s,s:{s:I}}", "name", zlib ? "zlib" : "gzip", "configuration", "level",
                         clamp(opt_int(comp, "level", -1), 0, 9, 6));
    } else if (strcmp(type, "zstd") == 0) {
        *out = json_pack("{s:s,s:{s:I}}", "name", "zstd", "configuration", "level",
                         clamp(opt_int(comp, "level", 3), 1, 19, 3));
    } else if (strcmp(type, "blosc") == 0) {
        const json_t *cname = json_object_get(comp, "cname");
        const json_int_t shuffle = opt_int(comp, "shuffle", 1);
        const char *shuf = shuffle == 0 ? "noshuffle" : shuffle == 2 ? "bitshuffle" : "shuffle";
        if (shuffle < 0 || shuffle > 2) {
            SM_FAIL(err, SM_E_DATA,
                    "compression 'blosc': 'shuffle' is %" JSON_INTEGER_FORMAT
                    " (expected 0, 1 or 2)",
                    shuffle);
        }
        if (cname != NULL && !json_is_string(cname)) {
            SM_FAIL(err, SM_E_DATA, "compression 'blosc': 'cname' must be a string");
        }
        *out = json_pack("{s:s,s:{s:s,s:I,s:s,s:I,s:I}}", "name", "blosc", "configuration", "cname",
                         cname != NULL ? json_string_value(cname) : "lz4", "clevel",
                         clamp(opt_int(comp, "clevel", 5), 0, 9, 5), "shuffle", shuf, "typesize",
                         (json_int_t)sm_dtype_size(dt), "blocksize",
                         clamp(opt_int(comp, "blocksize", 0), 0, INT32_MAX, 0));
    } else if (strcmp(type, "xz") == 0 || strcmp(type, "bzip2") == 0) {
        const char *name = type[0] == 'x' ? "xz" : "bz2";
        if (sm_codec_find(name) == NULL) {
            SM_FAIL(err, SM_E_DATA, "N5 compression '%s' is not supported by this build", type);
        }
        /* Only encoders use these: xz "preset" 0-9, bzip2 "blockSize" 1-9 (x 100 kB). */
        *out = type[0] == 'x' ? json_pack("{s:s,s:{s:I}}", "name", name, "configuration", "preset",
                                          clamp(opt_int(comp, "preset", 6), 0, 9, 6))
                              : json_pack("{s:s,s:{s:I}}", "name", name, "configuration", "level",
                                          clamp(opt_int(comp, "blockSize", 9), 1, 9, 9));
    } else {
        SM_FAIL(err, SM_E_DATA, "unsupported N5 compression '%s' (supported: " N5_SUPPORTED ")",
                type);
    }
    if (*out == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate JSON for compression '%s'", type);
    }
    return SM_OK;
}

/* The compression of a dataset: "compression" (N5 1.0+), else the legacy "compressionType" string
 * of N5 0.x, else raw. */
static sm_status compression(json_t *root, enum sm_dtype dt, json_t **out, struct sm_err *err)
{
    const json_t *comp = json_object_get(root, "compression");
    const json_t *legacy = json_object_get(root, "compressionType");
    if (comp == NULL && legacy != NULL) {
        if (!json_is_string(legacy)) {
            SM_FAIL(err, SM_E_DATA, "field 'compressionType' must be a string");
        }
        json_t *tmp = json_pack("{s:O}", "type", legacy);
        if (tmp == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate JSON for the compression");
        }
        sm_status st = convert_compression(tmp, dt, out, err);
        json_decref(tmp);
        return st;
    }
    if (comp == NULL) {
        *out = json_null();
        return SM_OK;
    }
    return convert_compression(comp, dt, out, err);
}

static sm_status parse_dtype(const json_t *v, enum sm_dtype *dt, struct sm_err *err)
{
    const char *s = json_string_value(v);
    if (s == NULL) {
        SM_FAIL(err, SM_E_DATA, "field 'dataType' must be a string");
    }
    /* N5's numeric types are the v3 names, without bool. */
    if (strlen(s) != json_string_length(v) || !sm_dtype_from_name(s, dt) || *dt == SM_DT_BOOL) {
        SM_FAIL(
            err, SM_E_DATA,
            "unsupported N5 dataType '%s' (expected one of uint8, uint16, uint32, uint64, int8, "
            "int16, int32, int64, float32, float64)",
            s);
    }
    return SM_OK;
}

/* attributes.json without its N5 keywords (new reference in *out). */
static sm_status user_attributes(json_t *root, json_t **out, struct sm_err *err)
{
    json_t *a = json_object();
    if (a == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate attributes");
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (!is_keyword(key) && json_object_set(a, key, v) != 0) {
            json_decref(a);
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate attributes");
        }
    }
    sm_status st = sm_fmt_json_restore(a, err);
    if (st != SM_OK) {
        json_decref(a);
        return st;
    }
    *out = a;
    return SM_OK;
}

static sm_status parse_array(json_t *root, struct sm_array_meta *m, struct sm_err *err)
{
    json_t *dims, *block, *dtype;
    uint64_t n5dims[SM_MAX_DIMS], n5block[SM_MAX_DIMS];
    unsigned bnd;
    SM_TRY(sm_fmt_field(root, "dimensions", true, &dims, err));
    SM_TRY(sm_fmt_dims(dims, "dimensions", false, &m->ndim, n5dims, err));
    SM_TRY(sm_fmt_field(root, "blockSize", true, &block, err));
    SM_TRY(sm_fmt_dims(block, "blockSize", true, &bnd, n5block, err));
    if (m->ndim == 0) {
        SM_FAIL(err, SM_E_DATA, "field 'dimensions' is empty (an N5 dataset has 1 or more axes)");
    }
    if (bnd != m->ndim) {
        SM_FAIL(err, SM_E_DATA, "field 'blockSize' has %u dimensions but 'dimensions' has %u", bnd,
                m->ndim);
    }
    for (unsigned d = 0; d < m->ndim; d++) {
        if (n5block[d] > UINT32_MAX) {
            SM_FAIL(err, SM_E_DATA, "blockSize[%u] = %llu does not fit a block header", d,
                    (unsigned long long)n5block[d]);
        }
        m->shape[m->ndim - 1 - d] = n5dims[d]; /* N5 lists the fastest axis first */
        m->chunk_shape[m->ndim - 1 - d] = n5block[d];
    }
    SM_TRY(sm_fmt_field(root, "dataType", true, &dtype, err));
    SM_TRY(parse_dtype(dtype, &m->dtype, err));
    json_t *comp = NULL;
    SM_TRY(compression(root, m->dtype, &comp, err));
    m->codecs =
        json_pack("[{s:s,s:{s:o}}]", "name", "n5_block", "configuration", "compressor", comp);
    if (m->codecs == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate the codec list");
    }
    m->zarr_format = 0;
    m->key_prefix[0] = '\0';
    m->key_separator = '/';
    m->key_reversed = true;
    json_t *attrs;
    SM_TRY(user_attributes(root, &attrs, err));
    json_decref(m->attributes);
    m->attributes = attrs;
    return SM_OK;
}

sm_status sm_meta_parse_n5(const char *json, size_t len, enum sm_node_kind *kind,
                           struct sm_array_meta **out, struct json_t **attrs, struct sm_err *err)
{
    *out = NULL;
    if (attrs != NULL) {
        *attrs = NULL;
    }
    json_t *root;
    SM_TRY(sm_fmt_json_load(json, len, "", &root, err));
    sm_status st = SM_OK;
    if (json_object_get(root, "dimensions") == NULL && json_object_get(root, "dataType") == NULL) {
        *kind = SM_NODE_GROUP; /* a group: attributes.json without a dataset's fields */
        json_t *a = NULL;
        st = user_attributes(root, &a, err);
        if (st == SM_OK && attrs != NULL) {
            *attrs = a;
        } else {
            json_decref(a);
        }
        json_decref(root);
        return st;
    }
    *kind = SM_NODE_ARRAY;
    struct sm_array_meta *m = sm_fmt_meta_new();
    if (m == NULL) {
        st = SM_ERR(err, SM_E_NOMEM, "cannot allocate array metadata");
    } else {
        st = parse_array(root, m, err);
    }
    json_decref(root);
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
