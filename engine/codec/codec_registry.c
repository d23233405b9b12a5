/* The codec registry: a NULL-terminated table of static const ops, looked up by Zarr v3 name or
 * numcodecs id (STYLE B7/B8). A new codec joins by adding one entry here (and one row to the
 * conformance suite, tests/suites/codec_suite.c); the writable ones (ops->writer) come first, in
 * the order output.codec.name lists them. */
#include "codec_int.h"

#include <string.h>

#include <jansson.h>

const struct sm_codec_ops *const sm_codec_registry[] = {
    &sm_codec_zstd_ops,
    &sm_codec_gzip_ops,
    &sm_codec_blosc_ops,
    &sm_codec_lz4_ops,
    &sm_codec_bytes_ops,
    &sm_codec_transpose_ops,
    &sm_codec_zlib_ops,
    &sm_codec_crc32c_ops,
    &sm_codec_sharding_ops,
    &sm_codec_n5_ops,
    &sm_codec_xz_ops,
    &sm_codec_bz2_ops,
    NULL,
};

const struct sm_codec_ops *sm_codec_find(const char *name)
{
    for (size_t i = 0; sm_codec_registry[i] != NULL; i++) {
        if (strcmp(sm_codec_registry[i]->name, name) == 0) {
            return sm_codec_registry[i];
        }
    }
    return NULL;
}

const struct sm_codec_ops *sm_codec_at(size_t i)
{
    for (size_t k = 0; sm_codec_registry[k] != NULL; k++) {
        if (k == i) {
            return sm_codec_registry[k];
        }
    }
    return NULL;
}

const char *sm_codec_choice(const struct sm_codec_ops *ops)
{
    return ops->writer != NULL && ops->writer->choice != NULL ? ops->writer->choice : ops->name;
}

const struct sm_codec_ops *sm_codec_find_writer(const char *choice)
{
    for (size_t i = 0; choice != NULL && sm_codec_registry[i] != NULL; i++) {
        const struct sm_codec_ops *ops = sm_codec_registry[i];
        if (ops->writer != NULL && strcmp(sm_codec_choice(ops), choice) == 0) {
            return ops;
        }
    }
    return NULL;
}

const struct sm_codec_ops *sm_codec_find_v2(const char *v2_id)
{
    for (size_t i = 0; sm_codec_registry[i] != NULL; i++) {
        if (sm_codec_registry[i]->v2_id != NULL &&
            strcmp(sm_codec_registry[i]->v2_id, v2_id) == 0) {
            return sm_codec_registry[i];
        }
    }
    return NULL;
}

sm_status sm_codec_config_made(json_t **v3, json_t **v2, struct sm_err *err)
{
    if (*v3 == NULL || *v2 == NULL) {
        json_decref(*v3);
        json_decref(*v2);
        *v3 = *v2 = NULL;
        SM_FAIL(err, SM_E_NOMEM, "cannot build the codec configuration");
    }
    return SM_OK;
}
