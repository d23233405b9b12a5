/* Prepared codec chains (STYLE B8): parse the v3 "codecs" list, enforce A2A* A2B B2B*, prepare
 * each stage once with its decoded and encoded representation, and run decode (in reverse) and
 * encode, ping-ponging between the scratch's temp buffers of the chain's nesting level.
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html#codecs
 * Invariant: after every stage the length equals the stage's known length; never a silent pad. */
#include "codec_int.h"

#include <jansson.h>
#include <string.h>

#include "shardmill/alloc.h"

static const char *kind_name(enum sm_codec_kind k)
{
    switch (k) {
    case SM_CODEC_A2A:
        return "array->array";
    case SM_CODEC_A2B:
        return "array->bytes";
    case SM_CODEC_B2B:
        return "bytes->bytes";
    }
    return "?";
}

void sm_codec_chain_free(struct sm_codec_chain *c)
{
    if (c == NULL) {
        return;
    }
    for (size_t i = 0; i < c->n; i++) {
        struct sm_codec_stage *s = &c->stages[i];
        if (s->prep != NULL && s->ops->free_prep != NULL) {
            s->ops->free_prep(s->prep);
        }
        if (s->conf != NULL && s->ops->free_conf != NULL) {
            s->ops->free_conf(s->conf);
        }
    }
    sm_free(c->stages);
    sm_free(c);
}

/* Finds the codec of codecs[i]: a bare name or {"name": ..., "configuration": {...}}. */
static sm_status lookup(const json_t *el, size_t i, const struct sm_codec_ops **ops,
                        const json_t **cfg, struct sm_err *err)
{
    const char *name;
    *cfg = NULL;
    if (json_is_string(el)) {
        name = json_string_value(el);
    } else if (json_is_object(el)) {
        const json_t *n = json_object_get(el, "name");
        if (!json_is_string(n)) {
            SM_FAIL(err, SM_E_DATA, "codecs[%zu] has no string \"name\"", i);
        }
        name = json_string_value(n);
        *cfg = json_object_get(el, "configuration");
    } else {
        SM_FAIL(err, SM_E_DATA, "codecs[%zu] must be a codec name or an object with \"name\"", i);
    }
    *ops = sm_codec_find(name);
    if (*ops == NULL && strncmp(name, "numcodecs.", 10) == 0) {
        *ops = sm_codec_find_v2(name + 10); /* zarr-python 3 spells v2 codecs this way */
    }
    if (*ops == NULL) {
        SM_FAIL(err, SM_E_DATA, "unknown codec '%s' (codecs[%zu])", name, i);
    }
    return SM_OK;
}

/* Checks the order A2A* A2B B2B* over the whole list before anything is prepared. */
static sm_status check_order(const json_t *codecs, struct sm_codec_stage *stages, size_t n,
                             struct sm_err *err)
{
    const struct sm_codec_ops *prev = NULL;
    bool have_a2b = false;
    for (size_t i = 0; i < n; i++) {
        const json_t *cfg;
        SM_TRY(lookup(json_array_get(codecs, i), i, &stages[i].ops, &cfg, err));
        const struct sm_codec_ops *o = stages[i].ops;
        if (o->kind == SM_CODEC_A2A && have_a2b) {
            SM_FAIL(err, SM_E_DATA, "codec '%s' (array->array) after codec '%s' (%s)", o->name,
                    prev->name, kind_name(prev->kind));
        }
        if (o->kind == SM_CODEC_A2B && have_a2b) {
            SM_FAIL(err, SM_E_DATA, "codec '%s' (array->bytes) after codec '%s' (%s)", o->name,
                    prev->name, kind_name(prev->kind));
        }
        if (o->kind == SM_CODEC_B2B && !have_a2b) {
            SM_FAIL(err, SM_E_DATA, "codec '%s' (bytes->bytes) before any array->bytes codec",
                    o->name);
        }
        have_a2b = have_a2b || o->kind == SM_CODEC_A2B;
        prev = o;
    }
    if (!have_a2b) {
        SM_FAIL(err, SM_E_DATA, "codecs: no array->bytes codec (such as 'bytes') in the list");
    }
    return SM_OK;
}

static bool stage_is_identity(const struct sm_codec_stage *s)
{
    return s->ops->is_identity != NULL && s->ops->is_identity(s->prep);
}

static sm_status prepare_all(const json_t *codecs, struct sm_codec_chain *c, unsigned depth,
                             struct sm_err *err)
{
    struct sm_repr cur = c->repr;
    for (size_t i = 0; i < c->n; i++) {
        struct sm_codec_stage *s = &c->stages[i];
        const json_t *cfg;
        SM_TRY(lookup(json_array_get(codecs, i), i, &s->ops, &cfg, err));
        SM_TRY(s->ops->parse(cfg, &s->conf, err));
        if (s->ops->set_depth != NULL) { /* a stage with chains inside (sharding_indexed) */
            s->ops->set_depth(s->conf, depth + 1);
        }
        s->dec = cur;
        SM_TRY(s->ops->prepare(s->conf, &s->dec, &s->enc, &s->prep, err));
        s->identity = stage_is_identity(s);
        if (s->ops->height != NULL) {
            const unsigned h = 1 + s->ops->height(s->prep);
            c->height = h > c->height ? h : c->height;
        }
        cur = s->enc;
    }
    return SM_OK;
}

sm_status sm_codec_chain_new_at(const struct json_t *codecs, const struct sm_repr *chunk,
                                unsigned depth, struct sm_codec_chain **out, struct sm_err *err)
{
    *out = NULL;
    if (depth >= SM_CODEC_MAX_NESTING) {
        SM_FAIL(err, SM_E_DATA, "codecs nested deeper than %d levels (sharding inside sharding)",
                SM_CODEC_MAX_NESTING);
    }
    if (!json_is_array(codecs)) {
        SM_FAIL(err, SM_E_DATA, "codecs must be a JSON array");
    }
    size_t len;
    if (!sm_repr_array_len(chunk, &len)) {
        SM_FAIL(err, SM_E_DATA, "a chunk of %u dimensions of %s does not fit in memory",
                chunk->ndim, sm_dtype_name(chunk->dtype));
    }
    if (len != chunk->len) {
        SM_FAIL(err, SM_E_INTERNAL, "chunk representation says %zu bytes, its shape %zu",
                chunk->len, len);
    }
    const size_t n = json_array_size(codecs);
    if (n == 0) {
        SM_FAIL(err, SM_E_DATA, "codecs: the list is empty (an array->bytes codec is required)");
    }
    struct sm_codec_chain *c = sm_calloc(1, sizeof(*c));
    if (c == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a codec chain");
    }
    c->stages = sm_calloc(n, sizeof(*c->stages));
    if (c->stages == NULL) {
        sm_free(c);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a codec chain of %zu stages", n);
    }
    c->repr = *chunk;
    c->height = 1;
    sm_status st = check_order(codecs, c->stages, n, err);
    if (st == SM_OK) {
        c->n = n; /* from here on, free() releases what prepare_all built */
        st = prepare_all(codecs, c, depth, err);
    }
    if (st != SM_OK) {
        sm_codec_chain_free(c);
        return st;
    }
    *out = c;
    return SM_OK;
}

sm_status sm_codec_chain_new(const struct json_t *codecs, const struct sm_repr *chunk,
                             struct sm_codec_chain **out, struct sm_err *err)
{
    return sm_codec_chain_new_at(codecs, chunk, 0, out, err);
}

size_t sm_codec_chain_encoded_len(const struct sm_codec_chain *c)
{
    const size_t len = c->n > 0 ? c->stages[c->n - 1].enc.len : c->repr.len;
    return len == SM_LEN_VARIABLE ? 0 : len;
}

const struct sm_repr *sm_codec_chain_repr(const struct sm_codec_chain *c)
{
    return &c->repr;
}

const struct sm_shard_codec *sm_codec_chain_shard(const struct sm_codec_chain *c)
{
    const struct sm_codec_stage *shard = NULL;
    for (size_t i = 0; i < c->n; i++) {
        const struct sm_codec_stage *s = &c->stages[i];
        if (s->ops->height != NULL) { /* the one codec with chains inside: sharding_indexed */
            shard = s;
        } else if (!s->identity) {
            return NULL; /* another stage transforms the object: decode it whole */
        }
    }
    return shard != NULL ? (const struct sm_shard_codec *)shard->prep : NULL;
}

/* The first and last stage (in metadata order) that is not a plain copy; false if none. */
static bool effective_range(const struct sm_codec_chain *c, size_t *lo, size_t *hi)
{
    bool any = false;
    for (size_t i = 0; i < c->n; i++) {
        if (!c->stages[i].identity) {
            if (!any) {
                *lo = i;
            }
            *hi = i;
            any = true;
        }
    }
    return any;
}

sm_status sm_codec_chain_decode(const struct sm_codec_chain *c, struct sm_bytes in,
                                struct sm_buf *out, struct sm_scratch *scratch, struct sm_err *err)
{
    size_t lo = 0, hi = 0;
    if (!effective_range(c, &lo, &hi)) {
        if (in.len != c->repr.len) { /* named after the array->bytes codec: here, 'bytes' */
            const struct sm_codec_stage *a2b = &c->stages[0];
            while (a2b->ops->kind != SM_CODEC_A2B) {
                a2b++;
            }
            SM_FAIL(err, SM_E_DATA, "codec '%s': decoded size %zu, expected %zu", a2b->ops->name,
                    in.len, c->repr.len);
        }
        return sm_buf_set(out, in, err);
    }
    const unsigned level = scratch->depth;
    struct sm_scratch_level *lv;
    SM_TRY(sm_scratch_level(scratch, level, &lv, err));
    scratch->depth = level + 1;
    sm_status st = SM_OK;
    struct sm_bytes cur = in;
    unsigned k = 0;
    for (size_t i = hi + 1; i-- > lo;) {
        const struct sm_codec_stage *s = &c->stages[i];
        if (s->identity) {
            continue;
        }
        struct sm_buf *dst = i == lo ? out : &lv->tmp[k & 1];
        st = s->ops->decode(s->prep, cur, dst, scratch, err);
        if (st != SM_OK) {
            break;
        }
        if (s->dec.len != SM_LEN_VARIABLE && dst->len != s->dec.len) {
            st = SM_ERR(err, SM_E_DATA, "codec '%s': decoded size %zu, expected %zu", s->ops->name,
                        dst->len, s->dec.len);
            break;
        }
        cur = sm_buf_bytes(dst);
        k++;
    }
    scratch->depth = level;
    return st;
}

sm_status sm_codec_chain_decode_view(const struct sm_codec_chain *c, struct sm_bytes in,
                                     struct sm_buf *out, const uint8_t **decoded,
                                     struct sm_scratch *scratch, struct sm_err *err)
{
    size_t lo = 0, hi = 0;
    if (!effective_range(c, &lo, &hi) && in.len == c->repr.len) {
        *decoded = in.ptr;
        return SM_OK;
    }
    *decoded = NULL;
    SM_TRY(sm_codec_chain_decode(c, in, out, scratch, err));
    *decoded = out->ptr;
    return SM_OK;
}

sm_status sm_codec_chain_encode(const struct sm_codec_chain *c, struct sm_bytes in,
                                struct sm_buf *out, struct sm_scratch *scratch, struct sm_err *err)
{
    if (in.len != c->repr.len) {
        SM_FAIL(err, SM_E_INTERNAL, "encode input of %zu bytes, the chunk is %zu bytes", in.len,
                c->repr.len);
    }
    size_t lo = 0, hi = 0;
    if (!effective_range(c, &lo, &hi)) {
        return sm_buf_set(out, in, err);
    }
    const unsigned level = scratch->depth;
    struct sm_scratch_level *lv;
    SM_TRY(sm_scratch_level(scratch, level, &lv, err));
    scratch->depth = level + 1;
    sm_status st = SM_OK;
    struct sm_bytes cur = in;
    unsigned k = 0;
    for (size_t i = lo; i <= hi; i++) {
        const struct sm_codec_stage *s = &c->stages[i];
        if (s->identity) {
            continue;
        }
        struct sm_buf *dst = i == hi ? out : &lv->tmp[k & 1];
        st = s->ops->encode(s->prep, cur, dst, scratch, err);
        if (st != SM_OK) {
            break;
        }
        if (s->enc.len != SM_LEN_VARIABLE && dst->len != s->enc.len) {
            st = SM_ERR(err, SM_E_INTERNAL, "codec '%s': encoded size %zu, expected %zu",
                        s->ops->name, dst->len, s->enc.len);
            break;
        }
        cur = sm_buf_bytes(dst);
        k++;
    }
    scratch->depth = level;
    return st;
}
