/* Zarr v3 node metadata (zarr.json) -> sm_array_meta, or a group's attributes (SPEC §2).
 * https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html#array-metadata
 * Invariant: every member of the document is understood or explicitly ignorable: unknown
 * members must be extension objects declaring "must_understand": false. */
#include "format_int.h"

#include <string.h>

#include "shardmill/alloc.h"

static bool in_list(const char *const *list, const char *key)
{
    for (size_t i = 0; list[i] != NULL; i++) {
        if (strcmp(list[i], key) == 0) {
            return true;
        }
    }
    return false;
}

/* Extension members are objects with "must_understand": false (ignored); anything else we do not
 * know could change the meaning of the data, so it is refused by name. "consolidated_metadata"
 * (zarr-python 3) is a cache of the members' own documents, which we read directly. */
static sm_status check_members(json_t *root, const char *const *known, struct sm_err *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v)
    {
        if (in_list(known, key) || strcmp(key, "consolidated_metadata") == 0) {
            continue;
        }
        const json_t *mu = json_object_get(v, "must_understand");
        if (json_is_object(v) && json_is_false(mu)) {
            continue;
        }
        SM_FAIL(err, SM_E_DATA,
                "unsupported metadata field '%s' (an extension must declare \"must_understand\": "
                "false to be ignored)",
                key);
    }
    return SM_OK;
}

static sm_status take_attributes(json_t *root, json_t **out, struct sm_err *err)
{
    json_t *attrs;
    SM_TRY(sm_fmt_field(root, "attributes", false, &attrs, err));
    if (attrs == NULL) {
        *out = json_object();
        if (*out == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate attributes");
        }
        return SM_OK;
    }
    if (!json_is_object(attrs)) {
        SM_FAIL(err, SM_E_DATA, "field 'attributes' must be an object");
    }
    SM_TRY(sm_fmt_json_restore(attrs, err));
    *out = json_incref(attrs);
    return SM_OK;
}

/* {"name": <name>, "configuration": {...}} as used by chunk_grid and chunk_key_encoding. */
static sm_status named_config(json_t *root, const char *field, const char **name, json_t **cfg,
                              struct sm_err *err)
{
    json_t *v;
    SM_TRY(sm_fmt_field(root, field, true, &v, err));
    const json_t *n = json_object_get(v, "name");
    if (!json_is_object(v) || !json_is_string(n)) {
        SM_FAIL(err, SM_E_DATA, "field '%s' must be an object with a string 'name'", field);
    }
    *name = json_string_value(n);
    *cfg = json_object_get(v, "configuration");
    if (*cfg != NULL && !json_is_object(*cfg)) {
        SM_FAIL(err, SM_E_DATA, "%s.configuration must be an object", field);
    }
    return SM_OK;
}

static sm_status parse_chunk_grid(json_t *root, struct sm_array_meta *m, struct sm_err *err)
{
    const char *name;
    json_t *cfg;
    SM_TRY(named_config(root, "chunk_grid", &name, &cfg, err));
    if (strcmp(name, "regular") != 0) {
        SM_FAIL(err, SM_E_DATA, "unsupported chunk grid '%s' (only \"regular\")", name);
    }
    json_t *cs = cfg != NULL ? json_object_get(cfg, "chunk_shape") : NULL;
    if (cs == NULL) {
        SM_FAIL(err, SM_E_DATA, "missing field 'chunk_grid.configuration.chunk_shape'");
    }
    unsigned n;
    SM_TRY(sm_fmt_dims(cs, "chunk_shape", true, &n, m->chunk_shape, err));
    if (n != m->ndim) {
        SM_FAIL(err, SM_E_DATA, "chunk_shape has %u dimensions but 'shape' has %u", n, m->ndim);
    }
    return SM_OK;
}

/* "default": keys "c/1/2" (separator "/" or "."); "v2": keys "1.2" (separator "." or "/"). */
static sm_status parse_key_encoding(json_t *root, struct sm_array_meta *m, struct sm_err *err)
{
    const char *name;
    json_t *cfg;
    SM_TRY(named_config(root, "chunk_key_encoding", &name, &cfg, err));
    const bool is_default = strcmp(name, "default") == 0;
    if (!is_default && strcmp(name, "v2") != 0) {
        SM_FAIL(err, SM_E_DATA,
                "unsupported chunk key encoding '%s' (expected \"default\" or \"v2\")", name);
    }
    const char *sep = is_default ? "/" : ".";
    if (cfg != NULL) {
        const char *key;
        json_t *v;
        json_object_foreach(cfg, key, v)
        {
            if (strcmp(key, "separator") != 0) {
                SM_FAIL(err, SM_E_DATA, "unsupported chunk_key_encoding configuration field '%s'",
                        key);
            }
            sep = json_string_value(v);
            if (sep == NULL || (strcmp(sep, "/") != 0 && strcmp(sep, ".") != 0)) {
                SM_FAIL(err, SM_E_DATA, "chunk_key_encoding separator must be \"/\" or \".\"");
            }
        }
    }
    memcpy(m->key_prefix, is_default ? "c" : "", is_default ? 2 : 1);
    m->key_separator = sep[0];
    return SM_OK;
}

/* The codec list in object form (bare names become {"name": ...}); the inner chunk shape of a
 * [sharding_indexed] chain is kept for `info`. */
static sm_status parse_codecs(json_t *root, struct sm_array_meta *m, struct sm_err *err)
{
    json_t *codecs;
    SM_TRY(sm_fmt_field(root, "codecs", true, &codecs, err));
    if (!json_is_array(codecs) || json_array_size(codecs) == 0) {
        SM_FAIL(err, SM_E_DATA, "field 'codecs' must be a non-empty list");
    }
    m->codecs = json_array();
    if (m->codecs == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate the codec list");
    }
    for (size_t i = 0; i < json_array_size(codecs); i++) {
        json_t *c = json_array_get(codecs, i);
        json_t *obj;
        if (json_is_string(c)) {
            obj = json_pack("{s:O}", "name", c);
        } else if (json_is_object(c) && json_is_string(json_object_get(c, "name"))) {
            obj = json_incref(c);
        } else {
            SM_FAIL(err, SM_E_DATA, "codecs[%zu] must be an object with a string 'name'", i);
        }
        if (obj == NULL || json_array_append_new(m->codecs, obj) != 0) {
            SM_FAIL(err, SM_E_NOMEM, "cannot allocate the codec list");
        }
    }
    const json_t *first = json_array_get(m->codecs, 0);
    if (strcmp(json_string_value(json_object_get(first, "name")), "sharding_indexed") == 0) {
        const json_t *cfg = json_object_get(first, "configuration");
        const json_t *cs = json_object_get(cfg, "chunk_shape");
        if (cs == NULL) {
            SM_FAIL(err, SM_E_DATA, "missing field 'sharding_indexed.configuration.chunk_shape'");
        }
        SM_TRY(sm_fmt_dims(cs, "sharding_indexed chunk_shape", true, &m->inner_ndim,
                           m->inner_chunk_shape, err));
        if (m->inner_ndim != m->ndim) {
            SM_FAIL(err, SM_E_DATA,
                    "sharding_indexed chunk_shape has %u dimensions but 'shape' has %u",
                    m->inner_ndim, m->ndim);
        }
    }
    return SM_OK;
}

static sm_status parse_dimension_names(json_t *root, struct sm_array_meta *m, struct sm_err *err)
{
    json_t *dn;
    SM_TRY(sm_fmt_field(root, "dimension_names", false, &dn, err));
    if (dn == NULL || json_is_null(dn)) {
        return SM_OK;
    }
    if (!json_is_array(dn) || json_array_size(dn) != m->ndim) {
        SM_FAIL(err, SM_E_DATA, "field 'dimension_names' must be a list of %u names", m->ndim);
    }
    for (size_t i = 0; i < m->ndim; i++) {
        const json_t *e = json_array_get(dn, i);
        if (!json_is_string(e) && !json_is_null(e)) {
            SM_FAIL(err, SM_E_DATA, "dimension_names[%zu] must be a string or null", i);
        }
    }
    m->dimension_names = json_incref(dn);
    return SM_OK;
}

static sm_status parse_array(json_t *root, struct sm_array_meta *m, struct sm_err *err)
{
    static const char *const known[] = {
        "zarr_format",          "node_type",  "shape",  "data_type",  "chunk_grid",
        "chunk_key_encoding",   "fill_value", "codecs", "attributes", "dimension_names",
        "storage_transformers", NULL};
    SM_TRY(check_members(root, known, err));
    m->zarr_format = 3;
    json_t *v;
    SM_TRY(sm_fmt_field(root, "shape", true, &v, err));
    SM_TRY(sm_fmt_dims(v, "shape", false, &m->ndim, m->shape, err));
    SM_TRY(sm_fmt_field(root, "data_type", true, &v, err));
    SM_TRY(sm_fmt_dtype_v3(v, &m->dtype, err));
    SM_TRY(parse_chunk_grid(root, m, err));
    SM_TRY(parse_key_encoding(root, m, err));
    SM_TRY(sm_fmt_field(root, "fill_value", true, &v, err));
    SM_TRY(sm_fmt_fill_parse(v, m->dtype, m->fill, &m->fill_is_null, err));
    SM_TRY(sm_fmt_field(root, "storage_transformers", false, &v, err));
    if (v != NULL && !json_is_null(v)) {
        if (!json_is_array(v)) {
            SM_FAIL(err, SM_E_DATA, "field 'storage_transformers' must be a list");
        }
        if (json_array_size(v) > 0) {
            const char *name = json_string_value(json_object_get(json_array_get(v, 0), "name"));
            SM_FAIL(err, SM_E_DATA, "unsupported storage transformer '%s'",
                    name != NULL ? name : "?");
        }
    }
    SM_TRY(parse_codecs(root, m, err));
    SM_TRY(parse_dimension_names(root, m, err));
    json_decref(m->attributes);
    m->attributes = NULL;
    SM_TRY(take_attributes(root, &m->attributes, err));
    return sm_fmt_meta_finish(m, err);
}

static sm_status parse_root(json_t *root, enum sm_node_kind *kind, struct sm_array_meta **out,
                            json_t **attrs, struct sm_err *err)
{
    json_t *v;
    SM_TRY(sm_fmt_field(root, "zarr_format", true, &v, err));
    if (!json_is_integer(v)) {
        SM_FAIL(err, SM_E_DATA, "field 'zarr_format' must be an integer");
    }
    if (json_integer_value(v) != 3) {
        SM_FAIL(err, SM_E_DATA, "unsupported zarr_format %" JSON_INTEGER_FORMAT " (expected 3)",
                json_integer_value(v));
    }
    SM_TRY(sm_fmt_field(root, "node_type", true, &v, err));
    const char *nt = json_string_value(v);
    if (nt != NULL && strcmp(nt, "group") == 0) {
        static const char *const known[] = {"zarr_format", "node_type", "attributes", NULL};
        *kind = SM_NODE_GROUP;
        SM_TRY(check_members(root, known, err));
        json_t *a;
        SM_TRY(take_attributes(root, &a, err));
        if (attrs != NULL) {
            *attrs = a;
        } else {
            json_decref(a);
        }
        return SM_OK;
    }
    if (nt == NULL || strcmp(nt, "array") != 0) {
        SM_FAIL(err, SM_E_DATA, "field 'node_type' must be \"array\" or \"group\"");
    }
    *kind = SM_NODE_ARRAY;
    struct sm_array_meta *m = sm_fmt_meta_new();
    if (m == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate array metadata");
    }
    const sm_status st = parse_array(root, m, err);
    if (st != SM_OK) {
        sm_meta_free(m);
        return st;
    }
    *out = m;
    return SM_OK;
}

sm_status sm_meta_parse_v3(const char *json, size_t len, enum sm_node_kind *kind,
                           struct sm_array_meta **out, struct json_t **attrs, struct sm_err *err)
{
    *out = NULL;
    *kind = SM_NODE_ARRAY;
    if (attrs != NULL) {
        *attrs = NULL;
    }
    json_t *root;
    SM_TRY(sm_fmt_json_load(json, len, "", &root, err));
    const sm_status st = parse_root(root, kind, out, attrs, err);
    json_decref(root);
    return st;
}
