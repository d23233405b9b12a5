/* Reading codec "configuration" objects, v3 ones and numcodecs v2 ones (an extra "id" key).
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html#codecs
 * Every failure is SM_E_DATA naming the codec, the key and the offending value, so the metadata
 * layer only has to add the document's key. */
#include "codec_int.h"

#include <jansson.h>
#include <string.h>

/* jansson's iteration API takes non-const objects although it only reads them. */
static json_t *readonly(const json_t *v)
{
    return (json_t *)(uintptr_t)v;
}

sm_status sm_codec_cfg_keys(const struct json_t *cfg, const char *codec, const char *const *keys,
                            struct sm_err *err)
{
    if (cfg == NULL || json_is_null(cfg)) {
        return SM_OK;
    }
    if (!json_is_object(cfg)) {
        SM_FAIL(err, SM_E_DATA, "codec '%s': configuration must be a JSON object", codec);
    }
    const char *k;
    const json_t *v;
    json_object_foreach(readonly(cfg), k, v)
    {
        (void)v;
        bool known = strcmp(k, "id") == 0;
        for (size_t i = 0; !known && keys != NULL && keys[i] != NULL; i++) {
            known = strcmp(k, keys[i]) == 0;
        }
        if (!known) {
            SM_FAIL(err, SM_E_DATA, "codec '%s': unknown configuration key '%s'", codec, k);
        }
    }
    return SM_OK;
}

/* The member, or NULL when cfg or the member is absent (null counts as absent). */
static const json_t *member(const struct json_t *cfg, const char *key)
{
    if (cfg == NULL || !json_is_object(cfg)) {
        return NULL;
    }
    const json_t *v = json_object_get(cfg, key);
    return v == NULL || json_is_null(v) ? NULL : v;
}

sm_status sm_codec_cfg_int(const struct json_t *cfg, const char *codec, const char *key,
                           bool required, long long lo, long long hi, long long dflt,
                           long long *out, struct sm_err *err)
{
    const json_t *v = member(cfg, key);
    if (v == NULL) {
        if (required) {
            SM_FAIL(err, SM_E_DATA, "codec '%s': missing configuration key '%s'", codec, key);
        }
        *out = dflt;
        return SM_OK;
    }
    if (!json_is_integer(v)) {
        SM_FAIL(err, SM_E_DATA, "codec '%s': '%s' must be an integer in %lld..%lld", codec, key, lo,
                hi);
    }
    const long long x = (long long)json_integer_value(v);
    if (x < lo || x > hi) {
        SM_FAIL(err, SM_E_DATA, "codec '%s': '%s' is %lld, outside %lld..%lld", codec, key, x, lo,
                hi);
    }
    *out = x;
    return SM_OK;
}

sm_status sm_codec_cfg_bool(const struct json_t *cfg, const char *codec, const char *key, bool dflt,
                            bool *out, struct sm_err *err)
{
    const json_t *v = member(cfg, key);
    if (v == NULL) {
        *out = dflt;
        return SM_OK;
    }
    if (!json_is_boolean(v)) {
        SM_FAIL(err, SM_E_DATA, "codec '%s': '%s' must be true or false", codec, key);
    }
    *out = json_is_true(v);
    return SM_OK;
}

sm_status sm_codec_cfg_string(const struct json_t *cfg, const char *codec, const char *key,
                              bool required, const char **out, struct sm_err *err)
{
    const json_t *v = member(cfg, key);
    *out = NULL;
    if (v == NULL) {
        if (required) {
            SM_FAIL(err, SM_E_DATA, "codec '%s': missing configuration key '%s'", codec, key);
        }
        return SM_OK;
    }
    if (!json_is_string(v)) {
        SM_FAIL(err, SM_E_DATA, "codec '%s': '%s' must be a string", codec, key);
    }
    *out = json_string_value(v);
    return SM_OK;
}
