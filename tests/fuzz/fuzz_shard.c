/* Fuzz target: sharding_indexed (codec_sharding.c): the shard index (located at the start or the
 * end, with or without crc32c) and the inner chunks of a whole shard object, nested shards
 * included, decoded through a prepared [sharding_indexed] chain; the index alone through
 * sm_shard_index_decode (what array/shard_read.c calls on a ranged index read). A shard that
 * decodes is encoded again and must decode to the same bytes.
 * Input header (9 bytes):
 *   [0] bit 0: index at the start; bit 1: index codecs [bytes] only (no crc32c); bit 2: big-endian
 *       inner bytes; bits 3-5: inner chain: 0 [bytes], 1 [bytes, crc32c], 2 [bytes, zstd],
 *       3 [bytes, gzip], 4 [bytes, blosc], 5 nested sharding [bytes], 6 nested sharding
 *       [bytes, gzip] with the index at the start, 7 [transpose, bytes]
 *   [1] dtype (mod 11)   [2] ndim - 1 (mod 3)
 *   [3..5] inner chunk extents - 1 (mod 4)   [6..8] chunks per shard - 1 (mod 4)
 * then the shard object. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_common.h"
#include "shardmill/codec.h"
#include "shardmill/dtype.h"

static void shape_json(const uint64_t *s, unsigned n, char *buf, size_t cap)
{
    size_t o = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < n && o < cap; i++) {
        o += (size_t)snprintf(buf + o, cap - o, "%s%u", i ? ", " : "", (unsigned)s[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 9) {
        return 0;
    }
    const unsigned flags = data[0], variant = (data[0] >> 3) & 7u;
    struct sm_repr r;
    memset(&r, 0, sizeof(r));
    r.dtype = (enum sm_dtype)(data[1] % SM_DT_COUNT);
    r.ndim = 1u + data[2] % 3u;
    uint64_t inner[3], nested[3];
    size_t elems = 1;
    for (unsigned i = 0; i < r.ndim; i++) {
        inner[i] = 1u + data[3 + i] % 4u;
        nested[i] = inner[i] % 2 == 0 ? inner[i] / 2 : inner[i];
        r.shape[i] = inner[i] * (1u + data[6 + i] % 4u);
        elems *= (size_t)r.shape[i];
    }
    r.len = elems * sm_dtype_size(r.dtype);
    struct sm_bytes in = sm_bytes_of(data + 9, size - 9);

    char inner_s[32], nested_s[32], bytes_s[96], chain_s[400], json[900];
    shape_json(inner, r.ndim, inner_s, sizeof(inner_s));
    shape_json(nested, r.ndim, nested_s, sizeof(nested_s));
    snprintf(bytes_s, sizeof(bytes_s),
             "{\"name\": \"bytes\", \"configuration\": {\"endian\": \"%s\"}}",
             (flags & 4u) ? "big" : "little");
    switch (variant) {
    case 0:
        snprintf(chain_s, sizeof(chain_s), "[%s]", bytes_s);
        break;
    case 1:
        snprintf(chain_s, sizeof(chain_s), "[%s, {\"name\": \"crc32c\"}]", bytes_s);
        break;
    case 2:
        snprintf(chain_s, sizeof(chain_s), "[%s, {\"name\": \"zstd\"}]", bytes_s);
        break;
    case 3:
        snprintf(chain_s, sizeof(chain_s), "[%s, {\"name\": \"gzip\"}]", bytes_s);
        break;
    case 4:
        snprintf(chain_s, sizeof(chain_s),
                 "[%s, {\"name\": \"blosc\", \"configuration\": {\"cname\": \"lz4\", "
                 "\"shuffle\": \"shuffle\", \"typesize\": %zu}}]",
                 bytes_s, sm_dtype_size(r.dtype));
        break;
    case 5:
    case 6:
        snprintf(chain_s, sizeof(chain_s),
                 "[{\"name\": \"sharding_indexed\", \"configuration\": {\"chunk_shape\": [%s], "
                 "\"codecs\": [%s%s], \"index_location\": \"%s\"}}]",
                 nested_s, bytes_s, variant == 6 ? ", {\"name\": \"gzip\"}" : "",
                 variant == 6 ? "start" : "end");
        break;
    default:
        snprintf(chain_s, sizeof(chain_s),
                 "[{\"name\": \"transpose\", \"configuration\": {\"order\": \"F\"}}, %s]", bytes_s);
        break;
    }
    snprintf(json, sizeof(json),
             "[{\"name\": \"sharding_indexed\", \"configuration\": {\"chunk_shape\": [%s], "
             "\"codecs\": %s, \"index_codecs\": [{\"name\": \"bytes\", \"configuration\": "
             "{\"endian\": \"little\"}}%s], \"index_location\": \"%s\"}}]",
             inner_s, chain_s, (flags & 2u) ? "" : ", {\"name\": \"crc32c\"}",
             (flags & 1u) ? "start" : "end");

    json_t *codecs = json_loads(json, 0, NULL);
    struct sm_err err = {0};
    struct sm_codec_chain *chain = NULL;
    struct sm_scratch *scratch = NULL;
    struct sm_buf out = SM_BUF_INIT, enc = SM_BUF_INIT, again = SM_BUF_INIT;
    if (codecs == NULL || sm_codec_chain_new(codecs, &r, &chain, &err) != SM_OK ||
        sm_scratch_new(&scratch, &err) != SM_OK) {
        goto done;
    }
    const struct sm_shard_codec *sc = sm_codec_chain_shard(chain);
    if (sc != NULL) {
        const struct sm_shard_layout *L = sm_shard_layout(sc);
        uint64_t pairs[2 * 64];
        if (L->n_inner <= 64 && in.len >= L->index_len) {
            const uint8_t *at =
                L->location == SM_SHARD_INDEX_END ? in.ptr + in.len - L->index_len : in.ptr;
            struct sm_err ierr = {0};
            (void)sm_shard_index_decode(sc, sm_bytes_of(at, L->index_len), in.len, pairs, scratch,
                                        &ierr);
        }
    }
    if (sm_codec_chain_decode(chain, in, &out, scratch, &err) != SM_OK) {
        goto done;
    }
    if (out.len != r.len) {
        __builtin_trap();
    }
    if (sm_codec_chain_encode(chain, sm_buf_bytes(&out), &enc, scratch, &err) != SM_OK ||
        sm_codec_chain_decode(chain, sm_buf_bytes(&enc), &again, scratch, &err) != SM_OK ||
        again.len != out.len || memcmp(again.ptr, out.ptr, out.len) != 0) {
        __builtin_trap(); /* decode(encode(x)) != x */
    }
done:
    sm_buf_free(&out);
    sm_buf_free(&enc);
    sm_buf_free(&again);
    sm_scratch_free(scratch);
    sm_codec_chain_free(chain);
    json_decref(codecs);
    return 0;
}
