/* Chunk keys (SPEC §2): v3 "default" encoding ("c/1/2/3", "c" for 0-d) and the v2 / v3 "v2"
 * encoding ("1.2.3" or "1/2/3", "0" for 0-d), both with '.' or '/' separators; N5 block keys
 * ("3/2/1" for the grid index [1,2,3]: N5 lists the fastest axis first).
 * https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html#chunk-key-encoding
 * https://zarr-specs.readthedocs.io/en/latest/v2/v2.0.html#chunks
 * Invariant: a key that does not fit the caller's buffer is an error, never truncated. */
#include "shardmill/meta.h"

#include <inttypes.h>
#include <stdio.h>

sm_status sm_meta_chunk_key(const struct sm_array_meta *m, const uint64_t *idx, char *buf,
                            size_t cap, struct sm_err *err)
{
    const bool has_prefix = m->key_prefix[0] != '\0';
    int n = snprintf(buf, cap, "%s", has_prefix ? m->key_prefix : (m->ndim == 0 ? "0" : ""));
    size_t pos = n < 0 ? cap : (size_t)n;
    for (unsigned d = 0; d < m->ndim && pos < cap; d++) {
        if (has_prefix || d > 0) {
            buf[pos++] = m->key_separator;
        }
        const uint64_t i = idx[m->key_reversed ? m->ndim - 1 - d : d];
        n = pos < cap ? snprintf(buf + pos, cap - pos, "%" PRIu64, i) : -1;
        pos = n < 0 ? cap : pos + (size_t)n;
    }
    if (pos >= cap) {
        SM_FAIL(err, SM_E_INTERNAL, "chunk key longer than %zu bytes", cap);
    }
    return SM_OK;
}
