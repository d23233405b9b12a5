/* Fuzz target: Zarr v2 array metadata -> sm_meta_parse_v2 (.zarray with its .zattrs, the
 * compressor, order and byte order turned into a v3 chain). Input: the .zarray bytes, optionally
 * followed by a NUL byte and the .zattrs bytes. */
#include <jansson.h>
#include <stdint.h>

#include "fuzz_common.h"
#include "shardmill/meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *part[2];
    size_t len[2];
    size_t n = fuzz_split(data, size, "", 1, part, len, 2);
    struct sm_err err = {0};
    struct sm_array_meta *m = NULL;
    if (sm_meta_parse_v2((const char *)part[0], len[0], n > 1 ? (const char *)part[1] : NULL,
                         n > 1 ? len[1] : 0, &m, &err) == SM_OK) {
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
    return 0;
}
