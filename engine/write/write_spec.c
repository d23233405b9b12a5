/* The output array (SPEC §2 "Output"): validate an output spec, write its zarr.json (v3 array,
 * regular grid of the shard shape, default "/" keys, [sharding_indexed{...}] or [bytes, codec]),
 * parse it back with the reader's own parser so the chain that encodes is the chain a reader
 * builds, and the shard grid (linear C-order shard indices, clipped boxes, keys).
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html
 * Invariant: what is written is exactly what zarr.json declares. */
#include "write_int.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/alloc.h"

/* ---- validation ---- */

static sm_status check_dims(const struct sm_output_spec *s, struct sm_err *err)
{
    if (s->ndim < 1 || s->ndim > SM_MAX_DIMS) {
        SM_FAIL_AT(err, SM_E_USAGE, "output.shape", "the output needs 1 to %d dimensions, got %u",
                   SM_MAX_DIMS, s->ndim);
    }
    if (sm_dtype_size(s->dtype) == 0) {
        SM_FAIL_AT(err, SM_E_USAGE, "output.dtype", "unknown data type %d", (int)s->dtype);
    }
    for (unsigned d = 0; d < s->ndim; d++) {
        if (s->chunk[d] == 0) {
            SM_FAIL_AT(err, SM_E_USAGE, "output.chunk",
                       "chunk extent 0 on axis %u (need %u positive extents)", d, s->ndim);
        }
        if (!s->sharded) {
            continue;
        }
        if (s->shard[d] == 0) {
            SM_FAIL_AT(err, SM_E_USAGE, "output.shard",
                       "shard extent 0 on axis %u (need %u positive extents)", d, s->ndim);
        }
        if (s->shard[d] % s->chunk[d] != 0) {
            SM_FAIL_AT(err, SM_E_USAGE, "output.shard",
                       "shard extent %" PRIu64 " on axis %u is not a multiple of the inner chunk "
                       "extent %" PRIu64,
                       s->shard[d], d, s->chunk[d]);
        }
    }
    return SM_OK;
}

/* ---- the default layout (SPEC §2) ---- */

sm_status sm_output_layout_auto(unsigned ndim, const uint64_t *shape, size_t elem_size,
                                bool chunk_auto, bool shard_auto, uint64_t *chunk, uint64_t *shard,
                                struct sm_err *err)
{
    if (ndim < 1 || ndim > SM_MAX_DIMS || elem_size == 0) {
        SM_FAIL_AT(err, SM_E_USAGE, "output.shard",
                   "automatic layout of %u dimensions of %zu-byte values", ndim, elem_size);
    }
    for (unsigned d = 0; d < ndim; d++) {
        if (shape[d] == 0) {
            SM_FAIL_AT(err, SM_E_USAGE, "output.shard",
                       "automatic layout of an empty array (axis %u is 0)", d);
        }
        if (chunk_auto) {
            chunk[d] = shape[d] < SM_AUTO_CHUNK ? shape[d] : SM_AUTO_CHUNK;
        } else if (chunk[d] == 0) {
            SM_FAIL_AT(err, SM_E_USAGE, "output.chunk", "chunk extent 0 on axis %u", d);
        }
    }
    if (!shard_auto) {
        return SM_OK;
    }
    /* Bytes of a full shard; every factor is at most the array's extent rounded up to a power of
     * two times the chunk, so the product of ndim <= 8 such extents of real arrays fits; stop
     * doubling well before it could wrap. */
    uint64_t bytes = elem_size;
    for (unsigned d = 0; d < ndim; d++) {
        shard[d] = chunk[d];
        bytes = bytes > UINT64_MAX / shard[d] ? UINT64_MAX : bytes * shard[d];
    }
    for (unsigned d = 0, idle = 0; bytes < SM_AUTO_SHARD_TARGET && idle < ndim;
         d = (d + 1) % ndim) {
        if (shard[d] >= shape[d]) { /* already covers the array on this axis */
            idle++;
            continue;
        }
        idle = 0;
        shard[d] *= 2;
        bytes = bytes > UINT64_MAX / 2 ? UINT64_MAX : bytes * 2;
    }
    return SM_OK;
}

bool sm_output_pad_over(uint64_t n, uint64_t c)
{
    return c > 0 && (n + c - 1) / c * c * 3 > n * 4;
}

void sm_output_chunk_v2(unsigned ndim, const uint64_t *shape, size_t elem_size, uint64_t *chunk)
{
    (void)elem_size; /* the bytes follow from the extents: 1-4 MiB a file for 1-4 byte values */
    for (unsigned d = 0; d < ndim; d++) {
        if (d + 2 < ndim) { /* z: clipped to the shape */
            chunk[d] = shape[d] < SM_OUTPUT_V2_DEPTH ? shape[d] : SM_OUTPUT_V2_DEPTH;
            continue;
        }
        uint64_t c = SM_OUTPUT_V2_PLANE; /* y, x: a power of two within the shape, the edge */
        while (c > 1 && (c > shape[d] || sm_output_pad_over(shape[d], c))) { /* padding bounded */
            c /= 2;
        }
        chunk[d] = c;
    }
}

/* ---- zarr.json ---- */

/* "a, b, c or none": the writable codecs of the registry (the error's list). */
static void writable_names(char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; sm_codec_at(i) != NULL && n < cap; i++) {
        if (sm_codec_at(i)->writer != NULL) {
            n += (size_t)snprintf(buf + n, cap - n, "%s, ", sm_codec_choice(sm_codec_at(i)));
        }
    }
    if (n >= 2 && n < cap) {
        snprintf(buf + n - 2, cap - (n - 2), " or none");
    }
}

/* The compressor stage (NULL for "none") and its v2 compressor (JSON null for "none"), from the
 * codec's writer slots (shardmill/codec.h): an unknown or read-only codec or a level outside the
 * writer's range is SM_E_USAGE naming output.codec. */
static sm_status compressor2(const struct sm_output_spec *s, json_t **out, json_t **v2,
                             struct sm_err *err)
{
    const char *name = s->codec != NULL ? s->codec : "zstd";
    *out = NULL;
    *v2 = NULL;
    if (strcmp(name, "none") == 0) {
        *v2 = json_null();
        return SM_OK;
    }
    const struct sm_codec_ops *ops = sm_codec_find_writer(name);
    const struct sm_codec_writer *w = ops != NULL ? ops->writer : NULL;
    if (w == NULL) {
        char names[256];
        writable_names(names, sizeof(names));
        SM_FAIL_AT(err, SM_E_USAGE, "output.codec", "unknown codec '%s' (%s)", name, names);
    }
    if (s->level < w->level_min || s->level > w->level_max) {
        SM_FAIL_AT(err, SM_E_USAGE, "output.codec", "%s %s %d is outside %d..%d", name,
                   w->level_word, s->level, w->level_min, w->level_max);
    }
    json_t *cfg = NULL;
    SM_TRY(w->config(s->level, (unsigned)sm_dtype_size(s->dtype), s->blosc_cname, &cfg, v2, err));
    *out = json_pack("{s:s, s:o}", "name", ops->name, "configuration", cfg);
    if (*out == NULL) {
        json_decref(*v2);
        *v2 = NULL;
        SM_FAIL(err, SM_E_NOMEM, "cannot build the codec configuration");
    }
    return SM_OK;
}

/* The compressor stage, or NULL for "none". */
static sm_status compressor(const struct sm_output_spec *s, json_t **out, struct sm_err *err)
{
    json_t *v2;
    SM_TRY(compressor2(s, out, &v2, err));
    json_decref(v2);
    return SM_OK;
}

/* [bytes little, compressor?] */
static json_t *bytes_chain(json_t *comp_take)
{
    json_t *a = json_pack("[{s:s, s:{s:s}}]", "name", "bytes", "configuration", "endian", "little");
    if (a != NULL && comp_take != NULL && json_array_append_new(a, comp_take) != 0) {
        json_decref(a);
        return NULL;
    }
    if (a == NULL) {
        json_decref(comp_take);
    }
    return a;
}

static json_t *codecs_json(const struct sm_output_spec *s, json_t *comp_take)
{
    json_t *inner = bytes_chain(comp_take);
    if (!s->sharded || inner == NULL) {
        return inner;
    }
    json_t *index = s->index_crc32c
                        ? json_pack("[{s:s, s:{s:s}}, {s:s}]", "name", "bytes", "configuration",
                                    "endian", "little", "name", "crc32c")
                        : bytes_chain(NULL);
    json_t *cs = sm_json_u64_array(s->chunk, s->ndim);
    if (index == NULL || cs == NULL) {
        json_decref(inner);
        json_decref(index);
        json_decref(cs);
        return NULL;
    }
    return json_pack("[{s:s, s:{s:o, s:o, s:o, s:s}}]", "name", "sharding_indexed", "configuration",
                     "chunk_shape", cs, "codecs", inner, "index_codecs", index, "index_location",
                     s->index_location == SM_SHARD_INDEX_START ? "start" : "end");
}

static sm_status build_json(const struct sm_output_spec *s, json_t **out, struct sm_err *err)
{
    json_t *comp;
    SM_TRY(compressor(s, &comp, err));
    if (s->attributes != NULL && !json_is_object(s->attributes)) {
        json_decref(comp);
        SM_FAIL_AT(err, SM_E_USAGE, "output.attributes", "attributes must be a JSON object");
    }
    struct sm_array_meta fm;
    memset(&fm, 0, sizeof(fm));
    fm.dtype = s->dtype;
    memcpy(fm.fill, s->fill, sizeof(fm.fill));
    json_t *shape = sm_json_u64_array(s->shape, s->ndim);
    json_t *grid = sm_json_u64_array(s->sharded ? s->shard : s->chunk, s->ndim);
    json_t *codecs = codecs_json(s, comp);
    json_t *fill = sm_meta_fill_json(&fm);
    json_t *attrs = s->attributes != NULL ? json_deep_copy(s->attributes) : json_object();
    if (shape == NULL || grid == NULL || codecs == NULL || fill == NULL || attrs == NULL) {
        json_decref(shape);
        json_decref(grid);
        json_decref(codecs);
        json_decref(fill);
        json_decref(attrs);
        SM_FAIL(err, SM_E_NOMEM, "cannot build zarr.json");
    }
    /* Member order is fixed (jansson keeps insertion order), so the text is deterministic. */
    *out = json_pack("{s:i, s:s, s:o, s:s, s:{s:s, s:{s:o}}, s:{s:s, s:{s:s}}, s:o, s:o, s:o}",
                     "zarr_format", 3, "node_type", "array", "shape", shape, "data_type",
                     sm_dtype_name(s->dtype), "chunk_grid", "name", "regular", "configuration",
                     "chunk_shape", grid, "chunk_key_encoding", "name", "default", "configuration",
                     "separator", "/", "fill_value", fill, "codecs", codecs, "attributes", attrs);
    if (*out != NULL && s->dimension_names) {
        /* inserted before "attributes" would reorder nothing a reader cares about; appended */
        static const char *const names[] = {"z", "y", "x"};
        json_t *dn = json_array();
        for (unsigned d = 0; dn != NULL && d < s->ndim; d++) {
            const unsigned k = d + 3 - (s->ndim < 3 ? s->ndim : 3);
            json_array_append_new(dn, s->ndim <= 3 ? json_string(names[k]) : json_null());
        }
        if (dn == NULL || json_object_set_new(*out, "dimension_names", dn) != 0) {
            json_decref(*out);
            *out = NULL;
        }
    }
    if (*out == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot build zarr.json");
    }
    return SM_OK;
}

/* ---- .zarray (Zarr v2, OME-NGFF 0.4) ---- */

static const char *v2_dtype(enum sm_dtype dt)
{
    switch (dt) {
    case SM_DT_BOOL:
        return "|b1";
    case SM_DT_INT8:
        return "|i1";
    case SM_DT_UINT8:
        return "|u1";
    case SM_DT_INT16:
        return "<i2";
    case SM_DT_UINT16:
        return "<u2";
    case SM_DT_INT32:
        return "<i4";
    case SM_DT_UINT32:
        return "<u4";
    case SM_DT_INT64:
        return "<i8";
    case SM_DT_UINT64:
        return "<u8";
    case SM_DT_FLOAT32:
        return "<f4";
    case SM_DT_FLOAT64:
        return "<f8";
    default:
        return NULL;
    }
}

/* The v2 compressor of s (validated as the v3 stage; the writer slots' numcodecs object); JSON
 * null for none. */
static sm_status v2_compressor(const struct sm_output_spec *s, json_t **out, struct sm_err *err)
{
    json_t *v3;
    SM_TRY(compressor2(s, &v3, out, err));
    json_decref(v3);
    return SM_OK;
}

/* .zarray: members in zarr-python's (sorted) order, C order, "/" keys, no filters. */
static sm_status build_v2_json(const struct sm_output_spec *s, json_t **out, struct sm_err *err)
{
    if (s->sharded) {
        SM_FAIL_AT(err, SM_E_USAGE, "output.shard", "a Zarr v2 array (OME-NGFF 0.4) has no shards");
    }
    const char *dt = v2_dtype(s->dtype);
    if (dt == NULL) {
        SM_FAIL_AT(err, SM_E_USAGE, "output.dtype", "no Zarr v2 type for %s",
                   sm_dtype_name(s->dtype));
    }
    json_t *comp;
    SM_TRY(v2_compressor(s, &comp, err));
    struct sm_array_meta fm;
    memset(&fm, 0, sizeof(fm));
    fm.dtype = s->dtype;
    memcpy(fm.fill, s->fill, sizeof(fm.fill));
    json_t *shape = sm_json_u64_array(s->shape, s->ndim);
    json_t *chunks = sm_json_u64_array(s->chunk, s->ndim);
    json_t *fill = sm_meta_fill_json(&fm);
    if (shape == NULL || chunks == NULL || fill == NULL) {
        json_decref(comp);
        json_decref(shape);
        json_decref(chunks);
        json_decref(fill);
        SM_FAIL(err, SM_E_NOMEM, "cannot build .zarray");
    }
    *out = json_pack("{s:o, s:o, s:s, s:s, s:o, s:n, s:s, s:o, s:i}", "chunks", chunks,
                     "compressor", comp, "dimension_separator", "/", "dtype", dt, "fill_value",
                     fill, "filters", "order", "C", "shape", shape, "zarr_format", 2);
    if (*out == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot build .zarray");
    }
    return SM_OK;
}

static sm_status dump_text(const json_t *j, struct sm_buf *out, struct sm_err *err)
{
    char *text = sm_json_dumps(j, JSON_INDENT(2));
    if (text == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot format zarr.json");
    }
    const size_t n = strlen(text);
    sm_status st = sm_buf_reserve(out, n + 1, err);
    if (st == SM_OK) {
        memcpy(out->ptr, text, n);
        out->ptr[n] = '\n';
        out->len = n + 1;
    }
    free(text); /* checksrc: allow alloc (jansson's allocator owns json_dumps text) */
    return st;
}

/* ---- the writer ---- */

void sm_writer_free(struct sm_writer *w)
{
    if (w == NULL) {
        return;
    }
    for (unsigned k = 0; w->lv != NULL && k < w->nlevels; k++) {
        sm_writer_free(w->lv[k]);
    }
    sm_free(w->lv);
    sm_free(w->lv_base);
    sm_buf_free(&w->text);
    sm_meta_free(w->meta);
    sm_free(w);
}

/* Parses w->text and derives the grid from it. */
static sm_status from_text(struct sm_writer *w, struct sm_err *err)
{
    enum sm_node_kind kind = SM_NODE_ARRAY;
    if (w->v2) {
        SM_TRY(sm_meta_parse_v2((const char *)w->text.ptr, w->text.len, NULL, 0, &w->meta, err));
    } else {
        SM_TRY(
            sm_meta_parse_v3((const char *)w->text.ptr, w->text.len, &kind, &w->meta, NULL, err));
    }
    if (kind != SM_NODE_ARRAY || w->meta == NULL) {
        SM_FAIL(err, SM_E_DATA, "zarr.json describes a group, not an array");
    }
    const struct sm_array_meta *m = w->meta;
    if (m->ndim < 1 || m->key_prefix[0] != (w->v2 ? '\0' : 'c') || m->key_separator != '/') {
        SM_FAIL(err, SM_E_DATA,
                "not a shardmill output array (needs >= 1 dimension and default '/' keys)");
    }
    w->ndim = m->ndim;
    w->elem = sm_dtype_size(m->dtype);
    w->nshards = 1;
    w->obj_bytes = w->elem;
    for (unsigned d = 0; d < m->ndim; d++) {
        w->obj[d] = m->chunk_shape[d];
        w->grid[d] = m->shape[d] / m->chunk_shape[d] + (m->shape[d] % m->chunk_shape[d] != 0);
        if (w->grid[d] != 0 && w->nshards > UINT64_MAX / w->grid[d]) {
            SM_FAIL(err, SM_E_DATA, "the shard grid has more than 2^64 shards");
        }
        w->nshards *= w->grid[d];
        w->obj_bytes *= (size_t)w->obj[d]; /* the chain checked the product fits */
    }
    return SM_OK;
}

static sm_status from_doc(struct sm_bytes text, bool v2, struct sm_writer **out, struct sm_err *err)
{
    *out = NULL;
    struct sm_writer *w = sm_calloc(1, sizeof(*w));
    if (w == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a writer");
    }
    w->v2 = v2;
    w->spec.zarr_v2 = v2;
    sm_status st = sm_buf_set(&w->text, text, err);
    if (st == SM_OK) {
        st = from_text(w, err);
    }
    if (st != SM_OK) {
        sm_writer_free(w);
        return st;
    }
    *out = w;
    return SM_OK;
}

sm_status sm_writer_from_json(struct sm_bytes text, struct sm_writer **out, struct sm_err *err)
{
    return from_doc(text, false, out, err);
}

const char *sm_writer_doc_name(const struct sm_writer *w)
{
    return !w->v2 ? SM_ZARR_JSON : w->nlevels > 0 ? SM_ZATTRS : SM_ZARRAY;
}

void sm_writer_tree(const struct sm_writer *w, unsigned k, char *buf, size_t cap)
{
    if (w->nlevels == 0) {
        snprintf(buf, cap, "c");
    } else if (w->v2) {
        snprintf(buf, cap, "%u", k);
    } else {
        snprintf(buf, cap, "%u/c", k);
    }
}

sm_status sm_writer_new(const struct sm_output_spec *spec, struct sm_writer **out,
                        struct sm_err *err)
{
    *out = NULL;
    SM_TRY(check_dims(spec, err));
    json_t *doc;
    SM_TRY(spec->zarr_v2 ? build_v2_json(spec, &doc, err) : build_json(spec, &doc, err));
    struct sm_writer *w = sm_calloc(1, sizeof(*w));
    if (w == NULL) {
        json_decref(doc);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a writer");
    }
    w->spec = *spec;
    w->spec.attributes = NULL;
    w->v2 = spec->zarr_v2;
    sm_status st = dump_text(doc, &w->text, err);
    json_decref(doc);
    if (st == SM_OK) {
        struct sm_err e;
        sm_err_clear(&e);
        if (from_text(w, &e) != SM_OK) {
            /* Our own document was rejected: an unsupported combination the spec let through
             * (e.g. a shard too large to prepare), reported as the configuration's problem. */
            st = SM_ERR_AT(err, e.status == SM_E_NOMEM ? SM_E_NOMEM : SM_E_USAGE, "output",
                           "the output layout is not writable: %s", e.what);
        }
    }
    if (st != SM_OK) {
        sm_writer_free(w);
        return st;
    }
    *out = w;
    return SM_OK;
}

struct sm_bytes sm_writer_zarr_json(const struct sm_writer *w)
{
    return sm_buf_bytes(&w->text);
}

const struct sm_array_meta *sm_writer_meta(const struct sm_writer *w)
{
    return w->nlevels > 0 ? w->lv[0]->meta : w->meta;
}

uint64_t sm_writer_nshards(const struct sm_writer *w)
{
    return w->nshards;
}

const uint64_t *sm_writer_grid(const struct sm_writer *w)
{
    return w->nlevels > 0 ? w->lv[0]->grid : w->grid;
}

const struct sm_writer *sm_writer_locate(const struct sm_writer *w, uint64_t shard, unsigned *level,
                                         uint64_t *local)
{
    unsigned k = 0;
    if (w->nlevels > 0) {
        while (k + 1 < w->nlevels && shard >= w->lv_base[k + 1]) {
            k++;
        }
        shard -= w->lv_base[k];
    }
    if (level != NULL) {
        *level = k;
    }
    if (local != NULL) {
        *local = shard;
    }
    return w->nlevels > 0 ? w->lv[k] : w;
}

unsigned sm_writer_levels(const struct sm_writer *w)
{
    return w->nlevels;
}

const struct sm_writer *sm_writer_level(const struct sm_writer *w, unsigned k)
{
    return w->nlevels > 0 ? (k < w->nlevels ? w->lv[k] : NULL) : (k == 0 ? w : NULL);
}

/* Level k's shard grid is level 0's, box for box: on every axis the same number of shards, and
 * either one shard or level 0's shard f times level k's, f the axis' factor so far (2 per level
 * that halved it: extent ceil(n/2)). */
static bool level_aligned(const struct sm_writer *w, unsigned k, uint64_t *f)
{
    const struct sm_writer *l0 = w->lv[0], *lk = w->lv[k], *up = w->lv[k - 1];
    for (unsigned d = 0; d < w->ndim; d++) {
        const uint64_t n = up->spec.shape[d];
        if (lk->spec.shape[d] != n && lk->spec.shape[d] != (n + 1) / 2) {
            return false;
        }
        f[d] *= lk->spec.shape[d] < n ? 2 : 1;
        if (lk->grid[d] != l0->grid[d] || (l0->grid[d] > 1 && l0->obj[d] != lk->obj[d] * f[d])) {
            return false;
        }
    }
    return true;
}

unsigned sm_writer_aligned_levels(const struct sm_writer *w)
{
    uint64_t f[SM_MAX_DIMS];
    for (unsigned d = 0; d < SM_MAX_DIMS; d++) {
        f[d] = 1;
    }
    unsigned n = 1;
    while (n < w->nlevels && level_aligned(w, n, f)) {
        n++;
    }
    return n;
}

unsigned sm_writer_spill_level(const struct sm_writer *w)
{
    const unsigned k = w->nlevels > 1 ? sm_writer_aligned_levels(w) : 0;
    if (k == 0 || k >= w->nlevels) {
        return 0;
    }
    const struct sm_writer *up = w->lv[k - 1], *lk = w->lv[k];
    for (unsigned d = 0; d < w->ndim; d++) { /* a halved axis: its shards start on even offsets */
        if (lk->spec.shape[d] < up->spec.shape[d] && up->grid[d] > 1 && up->obj[d] % 2 != 0) {
            return 0;
        }
    }
    return k;
}

uint64_t sm_writer_level_first(const struct sm_writer *w, unsigned k)
{
    return w->nlevels > 0 && k <= w->nlevels ? w->lv_base[k] : 0;
}

void sm_writer_shard_coords(const struct sm_writer *w, uint64_t shard, uint64_t *idx)
{
    w = sm_writer_locate(w, shard, NULL, &shard);
    for (unsigned d = w->ndim; d-- > 0;) {
        idx[d] = shard % w->grid[d];
        shard /= w->grid[d];
    }
}

void sm_writer_shard_box(const struct sm_writer *w, uint64_t shard, uint64_t *offset,
                         uint64_t *shape)
{
    uint64_t idx[SM_MAX_DIMS];
    w = sm_writer_locate(w, shard, NULL, &shard);
    sm_writer_shard_coords(w, shard, idx);
    for (unsigned d = 0; d < w->ndim; d++) {
        offset[d] = idx[d] * w->obj[d];
        const uint64_t left = w->meta->shape[d] - offset[d];
        shape[d] = left < w->obj[d] ? left : w->obj[d];
    }
}

size_t sm_writer_shard_bytes(const struct sm_writer *w, uint64_t shard)
{
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    sm_writer_shard_box(w, shard, off, shape);
    size_t n = w->elem;
    for (unsigned d = 0; d < w->ndim; d++) {
        n *= (size_t)shape[d];
    }
    return n;
}

sm_status sm_writer_shard_key(const struct sm_writer *w, uint64_t shard, char *buf, size_t cap,
                              struct sm_err *err)
{
    uint64_t idx[SM_MAX_DIMS];
    unsigned k;
    const struct sm_writer *lw = sm_writer_locate(w, shard, &k, &shard);
    sm_writer_shard_coords(lw, shard, idx);
    if (w->nlevels == 0) {
        return sm_meta_chunk_key(lw->meta, idx, buf, cap, err);
    }
    const int n = snprintf(buf, cap, "%u/", k);
    if (n < 0 || (size_t)n >= cap) {
        SM_FAIL(err, SM_E_INTERNAL, "shard key of level %u does not fit", k);
    }
    return sm_meta_chunk_key(lw->meta, idx, buf + n, cap - (size_t)n, err);
}

static bool array_key_index(const struct sm_writer *w, const char *key, uint64_t *shard)
{
    if (!w->v2 && key[0] != 'c') {
        return false;
    }
    const char *p = w->v2 ? key : key + 1; /* v2: "0/1/2", no prefix */
    uint64_t lin = 0;
    for (unsigned d = 0; d < w->ndim; d++) {
        const bool sep = !w->v2 || d > 0;
        if ((sep && *p != '/') || p[sep] < '0' || p[sep] > '9' ||
            (p[sep] == '0' && p[sep + 1] >= '0' && p[sep + 1] <= '9')) {
            return false; /* not a canonical decimal: "01" names no shard */
        }
        p += sep;
        uint64_t v = 0;
        while (*p >= '0' && *p <= '9') {
            if (v > (UINT64_MAX - 9) / 10) {
                return false;
            }
            v = v * 10 + (uint64_t)(*p++ - '0');
        }
        if (v >= w->grid[d]) {
            return false;
        }
        lin = lin * w->grid[d] + v;
    }
    if (*p != '\0') {
        return false;
    }
    *shard = lin;
    return true;
}

bool sm_writer_key_index(const struct sm_writer *w, const char *key, uint64_t *shard)
{
    if (w->nlevels == 0) {
        return array_key_index(w, key, shard);
    }
    unsigned k = 0;
    const char *p = key;
    if (*p < '0' || *p > '9' || (*p == '0' && p[1] != '/')) {
        return false;
    }
    while (*p >= '0' && *p <= '9' && k < SM_MAX_LEVELS) {
        k = k * 10 + (unsigned)(*p++ - '0');
    }
    uint64_t local;
    if (*p != '/' || k >= w->nlevels || !array_key_index(w->lv[k], p + 1, &local)) {
        return false;
    }
    *shard = w->lv_base[k] + local;
    return true;
}

/* ---- OME-Zarr image groups ---- */

void sm_writer_docs_sha256(const struct sm_writer *w, char out[65])
{
    if (w->nlevels == 0) {
        sm_sha256_hex(w->text.ptr, w->text.len, out);
        return;
    }
    size_t n = w->text.len;
    for (unsigned k = 0; k < w->nlevels; k++) {
        n += w->lv[k]->text.len;
    }
    uint8_t *all = sm_malloc(n);
    if (all == NULL) { /* cannot hash: a value no document has, so verify reports a mismatch */
        snprintf(out, 65, "%064d", 0);
        return;
    }
    memcpy(all, w->text.ptr, w->text.len);
    size_t at = w->text.len;
    for (unsigned k = 0; k < w->nlevels; k++) {
        memcpy(all + at, w->lv[k]->text.ptr, w->lv[k]->text.len);
        at += w->lv[k]->text.len;
    }
    sm_sha256_hex(all, n, out);
    sm_free(all);
}

static sm_status group_text(const json_t *attrs, bool v2, struct sm_buf *out, struct sm_err *err)
{
    if (attrs != NULL && !json_is_object(attrs)) {
        SM_FAIL_AT(err, SM_E_USAGE, "output.attributes", "attributes must be a JSON object");
    }
    if (v2) { /* .zattrs: the attributes themselves */
        json_t *a = attrs != NULL ? json_deep_copy(attrs) : json_object();
        if (a == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot build the group's .zattrs");
        }
        const sm_status st = dump_text(a, out, err);
        json_decref(a);
        return st;
    }
    json_t *doc = json_pack("{s:i, s:s, s:o}", "zarr_format", 3, "node_type", "group", "attributes",
                            attrs != NULL ? json_deep_copy(attrs) : json_object());
    if (doc == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot build the group's zarr.json");
    }
    const sm_status st = dump_text(doc, out, err);
    json_decref(doc);
    return st;
}

/* The group writer around levels lv[0..n) (taken). */
static sm_status group_take(struct sm_writer **lv, unsigned n, struct sm_writer *g,
                            struct sm_err *err)
{
    g->lv = lv;
    g->nlevels = n;
    g->lv_base = sm_calloc((size_t)n + 1, sizeof(*g->lv_base));
    if (g->lv_base == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a group writer");
    }
    g->ndim = lv[0]->ndim;
    g->elem = lv[0]->elem;
    memcpy(g->obj, lv[0]->obj, sizeof(g->obj));
    memcpy(g->grid, lv[0]->grid, sizeof(g->grid));
    g->spec = lv[0]->spec;
    for (unsigned k = 0; k < n; k++) {
        if (lv[k]->ndim != g->ndim) {
            SM_FAIL(err, SM_E_DATA, "level %u has %u dimensions, level 0 has %u", k, lv[k]->ndim,
                    g->ndim);
        }
        g->lv_base[k + 1] = g->lv_base[k] + lv[k]->nshards;
        g->obj_bytes = lv[k]->obj_bytes > g->obj_bytes ? lv[k]->obj_bytes : g->obj_bytes;
    }
    g->nshards = g->lv_base[n];
    return SM_OK;
}

sm_status sm_writer_new_group(const struct sm_output_spec *levels, unsigned nlevels,
                              const struct json_t *attrs, struct sm_writer **out,
                              struct sm_err *err)
{
    *out = NULL;
    if (nlevels < 1 || nlevels > SM_MAX_LEVELS) {
        SM_FAIL_AT(err, SM_E_USAGE, "output.ome.levels", "%u levels (need 1 to %u)", nlevels,
                   SM_MAX_LEVELS);
    }
    struct sm_writer *g = sm_calloc(1, sizeof(*g));
    struct sm_writer **lv = sm_calloc(nlevels, sizeof(*lv));
    if (g == NULL || lv == NULL) {
        sm_free(g);
        sm_free(lv);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a group writer");
    }
    sm_status st = SM_OK;
    unsigned made = 0;
    for (; made < nlevels && st == SM_OK; made++) {
        st = sm_writer_new(&levels[made], &lv[made], err);
        if (st != SM_OK) { /* the key is named already: say which level */
            char what[sizeof(err->what)];
            snprintf(what, sizeof(what), "OME-Zarr level %u: %.200s", made, err->what);
            memcpy(err->what, what, sizeof(what));
            sm_err_where(err, "output.ome");
        }
    }
    if (st != SM_OK) {
        for (unsigned k = 0; k < made; k++) {
            sm_writer_free(lv[k]);
        }
        sm_free(lv);
        sm_free(g);
        return st;
    }
    st = group_take(lv, nlevels, g, err);
    g->v2 = levels[0].zarr_v2;
    for (unsigned k = 1; st == SM_OK && k < nlevels; k++) {
        if (levels[k].zarr_v2 != g->v2) {
            st = SM_ERR(err, SM_E_INTERNAL, "level %u is not of level 0's Zarr version", k);
        }
    }
    if (st == SM_OK) {
        st = group_text(attrs, g->v2, &g->text, err);
    }
    if (st != SM_OK) {
        sm_writer_free(g);
        return st;
    }
    *out = g;
    return SM_OK;
}

/* The level paths of a shardmill OME group: attributes.ome.multiscales[0].datasets[k].path must
 * be "k". Returns the count, 0 if the document is not one. */
static unsigned group_levels(const json_t *attrs, bool v2)
{
    const json_t *ms = v2 ? json_object_get(attrs, "multiscales") /* 0.4: no "ome" member */
                          : json_object_get(json_object_get(attrs, "ome"), "multiscales");
    const json_t *ds = json_object_get(json_array_get(ms, 0), "datasets");
    const size_t n = json_array_size(ds);
    if (n < 1 || n > SM_MAX_LEVELS) {
        return 0;
    }
    for (size_t k = 0; k < n; k++) {
        char want[16];
        snprintf(want, sizeof(want), "%zu", k);
        const char *p = json_string_value(json_object_get(json_array_get(ds, k), "path"));
        if (p == NULL || strcmp(p, want) != 0) {
            return 0;
        }
    }
    return (unsigned)n;
}

sm_status sm_writer_from_output(int dirfd, struct sm_bytes text, struct sm_writer **out,
                                struct sm_err *err)
{
    *out = NULL;
    /* the reader's own parser: the provenance may hold integers beyond int64 */
    enum sm_node_kind kind = SM_NODE_GROUP;
    struct sm_array_meta *m = NULL;
    json_t *attrs = NULL;
    const bool v2 = sm_wfs_is_v2(dirfd); /* then text is the group's .zattrs */
    if (v2) {
        SM_TRY(sm_json_load((const char *)text.ptr, text.len, SM_ZATTRS, &attrs, err));
    } else {
        SM_TRY(sm_meta_parse_v3((const char *)text.ptr, text.len, &kind, &m, &attrs, err));
    }
    sm_meta_free(m);
    if (kind != SM_NODE_GROUP) {
        json_decref(attrs);
        return sm_writer_from_json(text, out, err);
    }
    const unsigned n = group_levels(attrs, v2);
    json_decref(attrs);
    if (n == 0) {
        SM_FAIL(err, SM_E_DATA, "%s is a group without OME multiscales datasets \"0\", \"1\", ...",
                v2 ? SM_ZATTRS : SM_ZARR_JSON);
    }
    struct sm_writer *g = sm_calloc(1, sizeof(*g));
    struct sm_writer **lv = sm_calloc(n, sizeof(*lv));
    if (g == NULL || lv == NULL) {
        sm_free(g);
        sm_free(lv);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a group writer");
    }
    sm_status st = sm_buf_set(&g->text, text, err);
    g->v2 = v2;
    unsigned made = 0;
    for (; made < n && st == SM_OK; made++) {
        char key[32];
        snprintf(key, sizeof(key), "%u/%s", made, v2 ? SM_ZARRAY : SM_ZARR_JSON);
        struct sm_buf b = SM_BUF_INIT;
        bool found;
        st = sm_wfs_read(dirfd, key, &b, &found, err);
        if (st == SM_OK && !found) {
            st = SM_ERR(err, SM_E_DATA, "%s is missing", key);
        }
        if (st == SM_OK) {
            st = from_doc(sm_buf_bytes(&b), v2, &lv[made], err);
            if (st != SM_OK) {
                sm_err_where(err, "%s", key);
            }
        }
        sm_buf_free(&b);
        if (st != SM_OK) {
            break;
        }
    }
    if (st != SM_OK) {
        for (unsigned k = 0; k < made; k++) {
            sm_writer_free(lv[k]);
        }
        sm_free(lv);
        sm_writer_free(g);
        return st;
    }
    st = group_take(lv, n, g, err);
    if (st != SM_OK) {
        sm_writer_free(g);
        return st;
    }
    *out = g;
    return SM_OK;
}
