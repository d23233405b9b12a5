/* Opening arrays and describing nodes (SPEC §2, §3, §4 `info`): metadata is read once per open —
 * zarr.json for v3 (one request), .zarray + .zattrs for v2, attributes.json for N5 — and everything
 * a read needs later is derived here (element size, decoded unit size, the range-readable shard
 * stage, the index cache). A missing metadata document is SM_E_DATA naming the keys tried. */
#include "array_int.h"

#include <jansson.h>
#include <string.h>

#include "shardmill/alloc.h"

/* "a/b/" for path "a/b", "/a/b/" or "a/b/"; "" for the root. */
static char *node_prefix(const char *path)
{
    while (*path == '/') {
        path++;
    }
    size_t n = strlen(path);
    while (n > 0 && path[n - 1] == '/') {
        n--;
    }
    char *p = sm_malloc(n + 2);
    if (p != NULL) {
        memcpy(p, path, n);
        if (n > 0) {
            p[n++] = '/';
        }
        p[n] = '\0';
    }
    return p;
}

/* Reads prefix+name as metadata; *found false if absent. */
static sm_status get_meta(struct sm_store *s, const char *prefix, const char *name,
                          struct sm_buf *out, bool *found, struct sm_err *err)
{
    char key[1024];
    if ((size_t)snprintf(key, sizeof(key), "%s%s", prefix, name) >= sizeof(key)) {
        SM_FAIL(err, SM_E_USAGE, "node path too long");
    }
    return sm_store_get(s, key, sm_range_all(), SM_IO_META, out, found, err);
}

static sm_status not_a_node(struct sm_store *s, const char *prefix, struct sm_err *err)
{
    SM_ERR(err, SM_E_DATA,
           "no Zarr metadata found (tried zarr.json, .zarray, .zgroup, and N5's attributes.json)");
    sm_err_where(err, "%s%s%.*s", s->url, prefix[0] != '\0' ? "/" : "",
                 (int)(prefix[0] != '\0' ? strlen(prefix) - 1 : 0), prefix);
    return err->status;
}

static sm_status is_group(struct sm_store *s, const char *prefix, struct sm_err *err)
{
    SM_ERR(err, SM_E_DATA,
           "is a group, not an array (address an array inside it by its path; `shardmill info` "
           "lists the members)");
    sm_err_where(err, "%s%s%.*s", s->url, prefix[0] != '\0' ? "/" : "",
                 (int)(prefix[0] != '\0' ? strlen(prefix) - 1 : 0), prefix);
    return err->status;
}

void sm_meta_docs_free(struct sm_meta_docs *d)
{
    sm_buf_free(&d->doc);
    sm_buf_free(&d->attrs);
    d->kind = SM_META_DOCS_NONE;
    d->have_attrs = false;
}

/* Fetches the node's metadata documents (the only metadata I/O of an open): zarr.json, else
 * .zarray (+ .zattrs), else .zgroup (+ .zattrs), else N5's attributes.json (probed last: a Zarr
 * node costs no extra request). */
static sm_status fetch_docs(struct sm_store *s, const char *prefix, struct sm_meta_docs *d,
                            struct sm_err *err)
{
    bool found;
    sm_status st = get_meta(s, prefix, "zarr.json", &d->doc, &found, err);
    if (st == SM_OK && found) {
        d->kind = SM_META_DOCS_V3;
        return SM_OK;
    }
    if (st == SM_OK) {
        st = get_meta(s, prefix, ".zarray", &d->doc, &found, err);
        if (st == SM_OK && found) {
            d->kind = SM_META_DOCS_V2_ARRAY;
        }
    }
    if (st == SM_OK && !found) {
        st = get_meta(s, prefix, ".zgroup", &d->doc, &found, err);
        if (st == SM_OK && found) {
            d->kind = SM_META_DOCS_V2_GROUP;
        }
    }
    if (st == SM_OK && !found) {
        st = get_meta(s, prefix, "attributes.json", &d->doc, &found, err);
        if (st == SM_OK && found) {
            d->kind = SM_META_DOCS_N5;
            return SM_OK;
        }
    }
    if (st == SM_OK && !found) {
        return not_a_node(s, prefix, err);
    }
    if (st == SM_OK) {
        st = get_meta(s, prefix, ".zattrs", &d->attrs, &d->have_attrs, err);
    }
    return st;
}

/* Parses fetched documents (no I/O): an array (meta) or a group (meta NULL, *kind GROUP). */
static sm_status parse_docs(struct sm_store *s, const char *prefix, const struct sm_meta_docs *d,
                            enum sm_node_kind *kind, struct sm_array_meta **meta,
                            json_t **group_attrs, int *zarr_format, struct sm_err *err)
{
    sm_status st = SM_OK;
    *meta = NULL;
    *group_attrs = NULL;
    switch (d->kind) {
    case SM_META_DOCS_V3:
        *zarr_format = 3;
        st = sm_meta_parse_v3((const char *)d->doc.ptr, d->doc.len, kind, meta, group_attrs, err);
        if (st != SM_OK) {
            sm_err_where(err, "%s/%szarr.json", s->url, prefix);
        }
        return st;
    case SM_META_DOCS_V2_ARRAY:
        *zarr_format = 2;
        *kind = SM_NODE_ARRAY;
        st = sm_meta_parse_v2((const char *)d->doc.ptr, d->doc.len,
                              d->have_attrs ? (const char *)d->attrs.ptr : NULL, d->attrs.len, meta,
                              err);
        if (st != SM_OK) {
            sm_err_where(err, "%s/%s.zarray", s->url, prefix);
        }
        return st;
    case SM_META_DOCS_V2_GROUP:
        *zarr_format = 2;
        *kind = SM_NODE_GROUP;
        if (d->have_attrs) {
            st = sm_meta_parse_attrs((const char *)d->attrs.ptr, d->attrs.len, group_attrs, err);
            if (st != SM_OK) {
                sm_err_where(err, "%s/%s.zattrs", s->url, prefix);
            }
        }
        return st;
    case SM_META_DOCS_N5:
        *zarr_format = 0;
        st = sm_meta_parse_n5((const char *)d->doc.ptr, d->doc.len, kind, meta, group_attrs, err);
        if (st != SM_OK) {
            sm_err_where(err, "%s/%sattributes.json", s->url, prefix);
        }
        return st;
    case SM_META_DOCS_NONE:
        break;
    }
    return not_a_node(s, prefix, err);
}

/* Reads and parses the node's metadata: an array (meta) or a group (meta NULL, *kind GROUP). */
static sm_status read_node(struct sm_store *s, const char *prefix, enum sm_node_kind *kind,
                           struct sm_array_meta **meta, json_t **group_attrs, int *zarr_format,
                           struct sm_err *err)
{
    struct sm_meta_docs d = SM_META_DOCS_INIT;
    *meta = NULL;
    *group_attrs = NULL;
    sm_status st = fetch_docs(s, prefix, &d, err);
    if (st == SM_OK) {
        st = parse_docs(s, prefix, &d, kind, meta, group_attrs, zarr_format, err);
    }
    sm_meta_docs_free(&d);
    return st;
}

/* Decoded bytes of the innermost unit a ranged shard read decodes. */
static size_t innermost_len(const struct sm_shard_codec *sc)
{
    const struct sm_codec_chain *inner = sm_shard_inner(sc);
    const struct sm_shard_codec *nested = sm_codec_chain_shard(inner);
    return nested != NULL ? innermost_len(nested) : sm_codec_chain_repr(inner)->len;
}

static void apply_limits(struct sm_store *store, const struct sm_array_opts *opts)
{
    store->max_object_bytes = opts->limits.max_object_bytes;
    sm_store_backing(store)->max_object_bytes = opts->limits.max_object_bytes;
}

sm_status sm_array_fetch_meta(struct sm_store *store, const char *path,
                              const struct sm_array_opts *opts, struct sm_meta_docs *docs,
                              struct sm_err *err)
{
    sm_meta_docs_free(docs);
    char *prefix = node_prefix(path);
    if (prefix == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a path");
    }
    apply_limits(store, opts);
    sm_status st = fetch_docs(store, prefix, docs, err);
    if (st != SM_OK) {
        sm_meta_docs_free(docs);
    }
    sm_free(prefix);
    return st;
}

/* Opens from `docs`, or fetches them first when docs is NULL. */
static sm_status array_open(struct sm_store *store, const char *path,
                            const struct sm_array_opts *opts, const struct sm_meta_docs *docs,
                            struct sm_array **out, struct sm_err *err)
{
    *out = NULL;
    struct sm_array *a = sm_calloc(1, sizeof(*a));
    if (a == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate an array");
    }
    a->store = store;
    a->opts = *opts;
    a->prefix = node_prefix(path);
    if (a->prefix == NULL) {
        sm_free(a);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate an array");
    }
    apply_limits(store, opts);
    enum sm_node_kind kind = SM_NODE_ARRAY;
    json_t *gattrs = NULL;
    int zf = 0;
    sm_status st = docs != NULL
                       ? parse_docs(store, a->prefix, docs, &kind, &a->meta, &gattrs, &zf, err)
                       : read_node(store, a->prefix, &kind, &a->meta, &gattrs, &zf, err);
    json_decref(gattrs);
    if (st == SM_OK && kind == SM_NODE_GROUP) {
        st = is_group(store, a->prefix, err);
    }
    if (st == SM_OK) {
        const struct sm_array_meta *m = a->meta;
        a->elem = sm_dtype_size(m->dtype);
        a->shard = sm_codec_chain_shard(m->chain);
        a->encoded_len = sm_codec_chain_encoded_len(m->chain);
        a->unit_len =
            a->shard != NULL ? innermost_len(a->shard) : sm_codec_chain_repr(m->chain)->len;
        if (a->shard != NULL) {
            st = sm_index_cache_new(opts->index_cache_bytes, opts->index_cache_entries, &a->icache,
                                    err);
        }
    }
    if (st != SM_OK) {
        sm_array_close(a);
        return st;
    }
    *out = a;
    return SM_OK;
}

sm_status sm_array_open(struct sm_store *store, const char *path, const struct sm_array_opts *opts,
                        struct sm_array **out, struct sm_err *err)
{
    return array_open(store, path, opts, NULL, out, err);
}

sm_status sm_array_open_docs(struct sm_store *store, const char *path,
                             const struct sm_array_opts *opts, const struct sm_meta_docs *docs,
                             struct sm_array **out, struct sm_err *err)
{
    return array_open(store, path, opts, docs, out, err);
}

void sm_array_close(struct sm_array *a)
{
    if (a == NULL) {
        return;
    }
    sm_index_cache_free(a->icache);
    sm_meta_free(a->meta);
    sm_free(a->prefix);
    sm_free(a);
}

const struct sm_array_meta *sm_array_meta(const struct sm_array *a)
{
    return a->meta;
}

struct sm_store *sm_array_store(const struct sm_array *a)
{
    return a->store;
}

void sm_array_stats(const struct sm_array *a, struct sm_array_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (a->icache != NULL) {
        sm_index_cache_stats(a->icache, &out->index_cache_hits, &out->index_cache_misses,
                             &out->index_cache_peak_bytes);
    }
    out->chunks_read = atomic_load(&a->chunks_read);
    out->chunks_missing = atomic_load(&a->chunks_missing);
    out->inner_chunks_read = atomic_load(&a->inner_read);
    out->inner_chunks_missing = atomic_load(&a->inner_missing);
    out->fetch_ns = atomic_load(&a->fetch_ns);
    out->decode_ns = atomic_load(&a->decode_ns);
}

/* A member's metadata document `key` (read and parsed under meta.h's JSON policy: one that does
 * not parse is SM_E_DATA naming it) and the node type it declares: a v3 zarr.json's node_type
 * ("array" or "group"; NULL for neither: the member is still listed, without a type), an N5
 * attributes.json "array" when it has "dimensions", else "group". */
static sm_status member_type(struct sm_store *s, const char *key, bool n5, const char **type,
                             struct sm_err *err)
{
    struct sm_buf b = SM_BUF_INIT;
    bool found = false;
    *type = NULL;
    sm_status st = sm_store_get(s, key, sm_range_all(), SM_IO_META, &b, &found, err);
    json_t *doc = NULL;
    if (st == SM_OK && found) {
        char where[1400];
        snprintf(where, sizeof(where), "%s/%s", s->url, key);
        st = sm_json_load((const char *)b.ptr, b.len, where, &doc, err);
    }
    if (doc != NULL && n5) {
        *type = json_object_get(doc, "dimensions") != NULL ? "array" : "group";
    } else if (doc != NULL) {
        const char *t = json_string_value(json_object_get(doc, "node_type"));
        if (t != NULL && strcmp(t, "array") == 0) {
            *type = "array";
        } else if (t != NULL && strcmp(t, "group") == 0) {
            *type = "group";
        }
    }
    json_decref(doc);
    sm_buf_free(&b);
    return st;
}

/* Members of a group for `info`: each child with its zarr_format and node_type (stores that can
 * list; the others get the members the group's metadata names, see ome_describe). */
static sm_status list_members(struct sm_store *s, const char *prefix, json_t *desc,
                              struct sm_err *err)
{
    if ((s->ops->caps & SM_STORE_LIST) == 0) {
        return SM_OK;
    }
    struct sm_strv names = {NULL, 0, 0};
    char sub[1024];
    snprintf(sub, sizeof(sub), "%.*s", (int)(prefix[0] != '\0' ? strlen(prefix) - 1 : 0), prefix);
    SM_TRY(sm_store_list(s, sub, &names, err));
    json_t *members = json_array();
    for (size_t i = 0; i < names.n && err->status == SM_OK; i++) {
        static const struct {
            const char *doc, *type;
        } probes[] = {{"zarr.json", NULL},
                      {".zarray", "array"},
                      {".zgroup", "group"},
                      {"attributes.json", NULL}}; /* N5 */
        for (size_t k = 0; k < 4; k++) {
            char key[1200];
            bool exists = false;
            snprintf(key, sizeof(key), "%s%s/%s", prefix, names.v[i], probes[k].doc);
            if (sm_store_exists(s, key, &exists, err) != SM_OK) {
                break;
            }
            if (exists) {
                json_t *m = json_object();
                json_object_set_new(m, "path", json_string(names.v[i]));
                if (k == 3) {
                    json_object_set_new(m, "format", json_string("n5"));
                }
                json_object_set_new(m, "zarr_format",
                                    k == 3 ? json_null() : json_integer(k == 0 ? 3 : 2));
                const char *type = probes[k].type;
                if ((k == 0 || k == 3) && member_type(s, key, k == 3, &type, err) != SM_OK) {
                    json_decref(m);
                    break;
                }
                if (type != NULL) {
                    json_object_set_new(m, "node_type", json_string(type));
                }
                json_array_append_new(members, m);
                break;
            }
        }
    }
    sm_strv_free(&names);
    json_object_set_new(desc, "members", members);
    return err->status;
}

/* The transformation of a type ("scale", "translation") in a coordinateTransformations list:
 * its numbers (a new reference), or NULL. */
static json_t *transform(const json_t *list, const char *type)
{
    size_t i;
    const json_t *t;
    json_array_foreach(list, i, t)
    {
        const char *tt = json_string_value(json_object_get(t, "type"));
        const json_t *v = json_object_get(t, type);
        if (tt != NULL && strcmp(tt, type) == 0 && json_is_array(v)) {
            return json_deep_copy(v);
        }
    }
    return NULL;
}

#define OME_MAX_LEVELS 64

/* One OME-Zarr level: its path, and from its own metadata shape and dtype; scale and translation
 * from the dataset's coordinateTransformations. A level that cannot be opened is listed with an
 * "error" (the group is still described). */
static json_t *ome_level(struct sm_store *s, const char *prefix, const char *path, const json_t *ds,
                         int *zarr_format)
{
    json_t *lv = json_object();
    json_object_set_new(lv, "path", json_string(path));
    char *sub = NULL;
    const size_t n = strlen(prefix) + strlen(path) + 1;
    char joined[1024];
    struct sm_err e;
    sm_err_clear(&e);
    if (n < sizeof(joined)) {
        snprintf(joined, sizeof(joined), "%s%s", prefix, path);
        sub = node_prefix(joined);
    }
    enum sm_node_kind kind = SM_NODE_ARRAY;
    struct sm_array_meta *meta = NULL;
    json_t *gattrs = NULL;
    sm_status st = sub != NULL ? read_node(s, sub, &kind, &meta, &gattrs, zarr_format, &e)
                               : SM_ERR(&e, SM_E_DATA, "path too long");
    if (st == SM_OK && kind != SM_NODE_ARRAY) {
        st = SM_ERR(&e, SM_E_DATA, "is a group, not an array");
    }
    if (st == SM_OK) {
        json_t *d = sm_meta_describe(meta);
        json_object_set(lv, "shape", json_object_get(d, "shape"));
        json_object_set(lv, "dtype", json_object_get(d, "dtype"));
        json_decref(d);
    } else {
        json_object_set_new(lv, "error", json_string(e.what));
    }
    const json_t *ct = json_object_get(ds, "coordinateTransformations");
    json_t *scale = transform(ct, "scale"), *trans = transform(ct, "translation");
    json_object_set_new(lv, "scale", scale != NULL ? scale : json_null());
    if (trans != NULL) {
        json_object_set_new(lv, "translation", trans);
    }
    json_decref(gattrs);
    sm_meta_free(meta);
    sm_free(sub);
    return lv;
}

/* An OME-Zarr image group (attributes "multiscales" of 0.4 in .zattrs, or "ome": {"multiscales"}
 * of 0.5 in zarr.json): "multiscales" with each level's path, shape, dtype and scale. A store
 * that cannot list (HTTP) gets "members": the arrays the metadata names. */
static void ome_describe(struct sm_store *s, const char *prefix, const json_t *gattrs, json_t *desc)
{
    const json_t *ome = json_object_get(gattrs, "ome");
    const json_t *list = json_object_get(gattrs, "multiscales");
    const json_t *version = NULL;
    if (!json_is_array(list) && json_is_object(ome)) {
        list = json_object_get(ome, "multiscales");
        version = json_object_get(ome, "version");
    }
    if (!json_is_array(list)) {
        return;
    }
    const bool listed = json_object_get(desc, "members") != NULL;
    json_t *out = json_array(), *members = json_array();
    size_t i, j, total = 0;
    const json_t *ms, *ds;
    json_array_foreach(list, i, ms)
    {
        json_t *o = json_object();
        const json_t *v = json_object_get(ms, "version");
        v = v != NULL ? v : version;
        if (json_is_string(v)) {
            json_object_set_new(o, "version", json_deep_copy(v));
        }
        if (json_is_string(json_object_get(ms, "name"))) {
            json_object_set_new(o, "name", json_deep_copy(json_object_get(ms, "name")));
        }
        if (json_is_array(json_object_get(ms, "axes"))) {
            json_object_set_new(o, "axes", json_deep_copy(json_object_get(ms, "axes")));
        }
        json_t *levels = json_array();
        json_array_foreach(json_object_get(ms, "datasets"), j, ds)
        {
            const char *path = json_string_value(json_object_get(ds, "path"));
            if (path == NULL || total++ >= OME_MAX_LEVELS) {
                continue;
            }
            int zf = 0;
            json_t *lv = ome_level(s, prefix, path, ds, &zf);
            if (!listed && json_object_get(lv, "error") == NULL) {
                json_array_append_new(members, json_pack("{s:s,s:i,s:s}", "path", path,
                                                         "zarr_format", zf, "node_type", "array"));
            }
            json_array_append_new(levels, lv);
        }
        json_object_set_new(o, "levels", levels);
        json_array_append_new(out, o);
    }
    json_object_set_new(desc, "multiscales", out);
    if (!listed) {
        json_object_set_new(desc, "members", members);
    } else {
        json_decref(members);
    }
}

sm_status sm_node_describe(struct sm_store *store, const char *path, json_t **out,
                           struct sm_err *err)
{
    *out = NULL;
    char *prefix = node_prefix(path);
    if (prefix == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a path");
    }
    enum sm_node_kind kind = SM_NODE_ARRAY;
    struct sm_array_meta *meta = NULL;
    json_t *gattrs = NULL;
    int zf = 0;
    sm_status st = read_node(store, prefix, &kind, &meta, &gattrs, &zf, err);
    if (st == SM_OK && kind == SM_NODE_ARRAY) {
        *out = sm_meta_describe(meta);
    } else if (st == SM_OK) {
        json_t *d = json_object();
        if (zf == 0) {
            json_object_set_new(d, "format", json_string("n5"));
        }
        json_object_set_new(d, "zarr_format", zf != 0 ? json_integer(zf) : json_null());
        json_object_set_new(d, "node_type", json_string("group"));
        json_object_set_new(d, "attributes", gattrs != NULL ? json_incref(gattrs) : json_object());
        st = list_members(store, prefix, d, err);
        if (st == SM_OK && gattrs != NULL) {
            ome_describe(store, prefix, gattrs, d);
        }
        *out = d;
    }
    json_decref(gattrs);
    sm_meta_free(meta);
    sm_free(prefix);
    return st;
}

void sm_array_set_stop(struct sm_array *a, const atomic_int *stop)
{
    a->stop = stop;
}
