/* Fuzz target: Zarr v3 metadata (zarr.json) -> sm_meta_parse_v3, then everything `info` derives
 * from a parsed array (describe, fill value, chunk key). Input: the document's bytes. */
#include <jansson.h>
#include <stdint.h>

#include "fuzz_common.h"
#include "shardmill/meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sm_err err = {0};
    enum sm_node_kind kind = SM_NODE_ARRAY;
    struct sm_array_meta *m = NULL;
    json_t *attrs = NULL;
    if (sm_meta_parse_v3((const char *)data, size, &kind, &m, &attrs, &err) == SM_OK && m) {
        json_t *d = sm_meta_describe(m);
        char *text = d ? sm_json_dumps(d, JSON_COMPACT) : NULL;
        sm_json_free_text(text);
        json_decref(d);
        json_decref(sm_meta_fill_json(m));
        uint64_t idx[SM_MAX_DIMS] = {0};
        char key[512];
        (void)sm_meta_chunk_key(m, idx, key, sizeof(key), &err);
    }
    sm_meta_free(m);
    json_decref(attrs);
    return 0;
}
