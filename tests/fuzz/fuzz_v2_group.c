/* Fuzz target: v2 groups and free-form attributes. The documents go into a mem store as a group
 * at the root with one member "0", then: sm_meta_parse_attrs (a .zattrs alone), sm_node_describe
 * of the root and of "0" (what `info` runs), and sm_array_open of "0" and of the root (an
 * OME-Zarr group whose path names a level). Input: NUL-separated parts, in this order:
 * .zgroup, .zattrs, 0/.zarray, 0/.zattrs (missing parts are absent objects). */
#include <jansson.h>
#include <stdint.h>

#include "fuzz_common.h"
#include "shardmill/array.h"
#include "shardmill/meta.h"
#include "shardmill/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const keys[] = {".zgroup", ".zattrs", "0/.zarray", "0/.zattrs"};
    const uint8_t *part[4];
    size_t len[4];
    size_t n = fuzz_split(data, size, "", 1, part, len, 4);

    struct sm_err err = {0};
    json_t *attrs = NULL;
    if (n > 1 && sm_meta_parse_attrs((const char *)part[1], len[1], &attrs, &err) == SM_OK) {
        char *text = sm_json_dumps(attrs, JSON_COMPACT);
        sm_json_free_text(text);
    }
    json_decref(attrs);

    struct sm_store *store = NULL;
    if (sm_store_mem_new(&store, &err) != SM_OK) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        struct sm_err perr = {0};
        (void)sm_store_put_atomic(store, keys[i], sm_bytes_of(part[i], len[i]), &perr);
    }
    static const char *const paths[] = {"", "0"};
    struct sm_array_opts opts = fuzz_array_opts();
    for (size_t i = 0; i < 2; i++) {
        struct sm_err derr = {0};
        json_t *desc = NULL;
        if (sm_node_describe(store, paths[i], &desc, &derr) == SM_OK && desc) {
            char *text = sm_json_dumps(desc, JSON_COMPACT);
            sm_json_free_text(text);
        }
        json_decref(desc);
        struct sm_err aerr = {0};
        struct sm_array *a = NULL;
        if (sm_array_open(store, paths[i], &opts, &a, &aerr) == SM_OK) {
            sm_array_close(a);
        }
    }
    sm_store_close(store);
    return 0;
}
