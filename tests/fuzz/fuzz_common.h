/* Helpers shared by the fuzz targets of tests/fuzz (docs/internals/fuzzing.md): splitting one
 * input into parts, and the small limits every target runs under so memory stays bounded
 * whatever a hostile input declares. Header-only: each target is one translation unit. */
#ifndef SM_TESTS_FUZZ_COMMON_H
#define SM_TESTS_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardmill/array.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant of a target: abort() (a crash libFuzzer reports) when it does not hold. */
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Limits of the targets that read through sm_array (as a job with small limits would). */
#define FUZZ_MAX_OBJECT_BYTES (4ull << 20)
#define FUZZ_MAX_CHUNK_BYTES (16ull << 20)
#define FUZZ_MAX_REGION_BYTES (4ull << 20)

static inline struct sm_array_opts fuzz_array_opts(void)
{
    struct sm_array_opts o = SM_ARRAY_OPTS_DEFAULTS;
    o.limits.max_object_bytes = FUZZ_MAX_OBJECT_BYTES;
    o.limits.max_chunk_bytes = FUZZ_MAX_CHUNK_BYTES;
    o.limits.max_region_bytes = FUZZ_MAX_REGION_BYTES;
    o.index_cache_bytes = 1u << 20;
    o.index_cache_entries = 8;
    return o;
}

/* Splits [data, data + size) at each occurrence of the seplen bytes of sep: up to max parts; the
 * last part holds the rest. Returns the number of parts (at least 1). */
static inline size_t fuzz_split(const uint8_t *data, size_t size, const char *sep, size_t seplen,
                                const uint8_t **part, size_t *part_len, size_t max)
{
    size_t n = 0, start = 0;
    for (size_t i = 0; n + 1 < max && i + seplen <= size;) {
        if (memcmp(data + i, sep, seplen) == 0) {
            part[n] = data + start;
            part_len[n] = i - start;
            n++;
            i += seplen;
            start = i;
        } else {
            i++;
        }
    }
    part[n] = data + start;
    part_len[n] = size - start;
    return n + 1;
}

#endif
