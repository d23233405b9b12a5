/* The body of the per-codec fuzz targets fuzz_codec_<name>.c (docs/internals/fuzzing.md): a codec
 * chain is prepared from a small header at the start of the input and the rest is decoded with
 * sm_codec_chain_decode. A decoded chunk is encoded again and decoded once more, which must give
 * back the same bytes (a failed round trip traps).
 * Input header (6 bytes):
 *   [0] dtype (mod 11)   [1] bits 0-1: ndim - 1 (1..3); bit 2: big endian; bit 3: unknown-size
 *       mode (a compressor sits inside the fuzzed codec, so its output length is not known
 *       in advance, as in [bytes, zstd, gzip] or inside a shard); bits 4-7: level or variant
 *   [2..4] chunk extents - 1 (mod 16)   [5] transpose permutation / blosc shuffle and typesize
 * then the encoded chunk. */
#ifndef SM_TESTS_FUZZ_CODEC_H
#define SM_TESTS_FUZZ_CODEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fuzz_common.h"
#include "shardmill/codec.h"
#include "shardmill/dtype.h"

/* The configuration object of `codec` for variant v (0..15), or "{}". */
static void fuzz_codec_conf(const char *codec, unsigned v, unsigned extra, char *buf, size_t cap)
{
    if (strcmp(codec, "gzip") == 0 || strcmp(codec, "zlib") == 0) {
        snprintf(buf, cap, "{\"level\": %u}", v % 10);
    } else if (strcmp(codec, "zstd") == 0) {
        snprintf(buf, cap, "{\"level\": %d, \"checksum\": %s}", (int)(v & 7) - 1,
                 (v & 8) ? "true" : "false");
    } else if (strcmp(codec, "blosc") == 0) {
        static const char *const cnames[] = {"lz4", "lz4hc", "blosclz", "zstd", "zlib", "lz4"};
        static const char *const shuffles[] = {"noshuffle", "shuffle", "bitshuffle", "shuffle"};
        snprintf(buf, cap,
                 "{\"cname\": \"%s\", \"clevel\": %u, \"shuffle\": \"%s\", \"typesize\": %u, "
                 "\"blocksize\": 0}",
                 cnames[v % 6], v % 10, shuffles[extra & 3], 1u + ((extra >> 2) & 7));
    } else {
        snprintf(buf, cap, "{}");
    }
}

static void fuzz_codec_run(const char *codec, const uint8_t *data, size_t size)
{
    if (size < 6) {
        return;
    }
    struct sm_repr r;
    memset(&r, 0, sizeof(r));
    r.dtype = (enum sm_dtype)(data[0] % SM_DT_COUNT);
    r.ndim = 1u + (data[1] & 3u) % 3u;
    bool big = (data[1] & 4u) != 0, unknown = (data[1] & 8u) != 0;
    unsigned variant = data[1] >> 4;
    size_t elems = 1;
    for (unsigned i = 0; i < r.ndim; i++) {
        r.shape[i] = 1u + data[2 + i] % 16u;
        elems *= (size_t)r.shape[i];
    }
    r.len = elems * sm_dtype_size(r.dtype);
    struct sm_bytes in = sm_bytes_of(data + 6, size - 6);

    char bytes_stage[96], stage[256], inner[160], json[640], conf[200];
    snprintf(bytes_stage, sizeof(bytes_stage),
             "{\"name\": \"bytes\", \"configuration\": {\"endian\": \"%s\"}}",
             big ? "big" : "little");
    if (strcmp(codec, "bytes") == 0) {
        snprintf(json, sizeof(json), "[%s]", bytes_stage);
    } else if (strcmp(codec, "transpose") == 0) {
        /* one of the ndim! permutations, chosen by data[5] (Lehmer code) */
        unsigned perm[3], left[3] = {0, 1, 2}, k = data[5], nleft = r.ndim;
        for (unsigned i = 0; i < r.ndim; i++) {
            unsigned pick = k % nleft;
            k /= nleft;
            perm[i] = left[pick];
            memmove(left + pick, left + pick + 1, (nleft - pick - 1) * sizeof(left[0]));
            nleft--;
        }
        char order[32] = "";
        size_t o = 0;
        for (unsigned i = 0; i < r.ndim; i++) {
            o += (size_t)snprintf(order + o, sizeof(order) - o, "%s%u", i ? ", " : "", perm[i]);
        }
        snprintf(json, sizeof(json),
                 "[{\"name\": \"transpose\", \"configuration\": {\"order\": [%s]}}, %s]", order,
                 bytes_stage);
    } else {
        fuzz_codec_conf(codec, variant, data[5], conf, sizeof(conf));
        snprintf(stage, sizeof(stage), "{\"name\": \"%s\", \"configuration\": %s}", codec, conf);
        inner[0] = '\0';
        if (unknown) { /* a compressor inside: the fuzzed stage cannot know its output length */
            snprintf(inner, sizeof(inner), "{\"name\": \"%s\"}, ",
                     strcmp(codec, "zlib") == 0 ? "gzip" : "zlib");
        }
        snprintf(json, sizeof(json), "[%s, %s%s]", bytes_stage, inner, stage);
    }

    json_t *codecs = json_loads(json, 0, NULL);
    struct sm_err err = {0};
    struct sm_codec_chain *chain = NULL;
    struct sm_scratch *scratch = NULL;
    struct sm_buf out = SM_BUF_INIT, enc = SM_BUF_INIT, again = SM_BUF_INIT;
    if (codecs == NULL || sm_codec_chain_new(codecs, &r, &chain, &err) != SM_OK ||
        sm_scratch_new(&scratch, &err) != SM_OK) {
        goto done;
    }
    if (sm_codec_chain_decode(chain, in, &out, scratch, &err) != SM_OK) {
        goto done;
    }
    if (out.len != r.len) {
        __builtin_trap(); /* the chain promises exactly the chunk's length */
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
}

#endif
