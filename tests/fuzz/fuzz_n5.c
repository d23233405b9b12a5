/* Fuzz target: N5 input -> sm_meta_parse_n5 (attributes.json: dimensions, blockSize, dataType,
 * compression, axes reversed) and the n5_block codec (block header: mode, ndim, sizes, varlength
 * count; truncated edge blocks padded; big-endian values; the compression inside). Input: the
 * attributes.json bytes, optionally followed by a NUL byte and one block's bytes. */
#include <jansson.h>
#include <stdint.h>

#include "fuzz_common.h"
#include "shardmill/codec.h"
#include "shardmill/meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *part[2];
    size_t len[2];
    const size_t n = fuzz_split(data, size, "", 1, part, len, 2);
    struct sm_err err = {0};
    struct sm_array_meta *m = NULL;
    json_t *attrs = NULL;
    enum sm_node_kind kind;
    if (sm_meta_parse_n5((const char *)part[0], len[0], &kind, &m, &attrs, &err) == SM_OK &&
        m != NULL) {
        json_t *d = sm_meta_describe(m);
        char *text = d ? sm_json_dumps(d, JSON_COMPACT) : NULL;
        sm_json_free_text(text);
        json_decref(d);
        uint64_t idx[SM_MAX_DIMS] = {0};
        char key[512];
        (void)sm_meta_chunk_key(m, idx, key, sizeof(key), &err);
        /* Decode the block as a read would: chunks above the fuzz limit are refused there. */
        struct sm_scratch *s = NULL;
        if (n > 1 && sm_codec_chain_repr(m->chain)->len <= FUZZ_MAX_CHUNK_BYTES &&
            sm_scratch_new(&s, &err) == SM_OK) {
            sm_scratch_set_max_decoded(s, FUZZ_MAX_CHUNK_BYTES);
            struct sm_buf out = SM_BUF_INIT;
            sm_err_clear(&err);
            (void)sm_codec_chain_decode(m->chain, sm_bytes_of(part[1], len[1]), &out, s, &err);
            sm_buf_free(&out);
            sm_scratch_free(s);
        }
    }
    json_decref(attrs);
    sm_meta_free(m);
    return 0;
}
