/* Fuzz target: a whole-array region read (array_open.c, array_read.c, shard_read.c,
 * index_cache.c) over an in-memory store built from the input, under small limits
 * (fuzz_common.h). Input: "<metadata>" then objects separated by the 7 bytes "|CHUNK|". The
 * metadata is zarr.json, or .zarray when it contains "\"zarr_format\": 2" (v2 arrays);
 * object i is stored under the key of the i-th chunk (or shard) of the grid in C order (an empty
 * part leaves that object absent: it reads as the fill value).
 * Reads: the whole array (clipped to 64 per axis and the region limit), then its last element
 * twice (the second through the shard-index cache). */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "shardmill/alloc.h"
#include "shardmill/array.h"
#include "shardmill/codec.h"
#include "shardmill/meta.h"
#include "shardmill/store.h"

#define MAX_OBJECTS 64

static bool has_text(const uint8_t *p, size_t n, const char *s)
{
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++) {
        if (memcmp(p + i, s, k) == 0) {
            return true;
        }
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *part[MAX_OBJECTS + 1];
    size_t len[MAX_OBJECTS + 1];
    size_t n = fuzz_split(data, size, "|CHUNK|", 7, part, len, MAX_OBJECTS + 1);
    struct sm_err err = {0};
    struct sm_store *store = NULL;
    if (sm_store_mem_new(&store, &err) != SM_OK) {
        return 0;
    }
    const char *meta_key =
        has_text(part[0], len[0], "\"zarr_format\": 2") ? ".zarray" : "zarr.json";
    struct sm_array *a = NULL;
    struct sm_scratch *scratch = NULL;
    uint8_t *out = NULL;
    struct sm_array_opts opts = fuzz_array_opts();
    if (sm_store_put_atomic(store, meta_key, sm_bytes_of(part[0], len[0]), &err) != SM_OK ||
        sm_array_open(store, "", &opts, &a, &err) != SM_OK ||
        sm_scratch_new(&scratch, &err) != SM_OK) {
        goto done;
    }
    const struct sm_array_meta *m = sm_array_meta(a);
    /* the chunk grid, and the objects in C order of it */
    uint64_t grid[SM_MAX_DIMS], idx[SM_MAX_DIMS] = {0};
    for (unsigned d = 0; d < m->ndim; d++) {
        grid[d] = m->shape[d] / m->chunk_shape[d] + (m->shape[d] % m->chunk_shape[d] != 0);
    }
    for (size_t i = 1; i < n; i++) {
        bool in_grid = true;
        for (unsigned d = 0; d < m->ndim; d++) {
            in_grid = in_grid && idx[d] < grid[d];
        }
        char key[512];
        if (!in_grid || sm_meta_chunk_key(m, idx, key, sizeof(key), &err) != SM_OK ||
            (len[i] > 0 &&
             sm_store_put_atomic(store, key, sm_bytes_of(part[i], len[i]), &err) != SM_OK)) {
            break;
        }
        for (unsigned d = m->ndim; d-- > 0;) { /* next index, C order */
            if (++idx[d] < grid[d]) {
                break;
            }
            idx[d] = 0;
        }
    }
    /* the region: the whole array, clipped to 64 per axis and the region limit */
    const size_t elem = sm_dtype_size(m->dtype);
    uint64_t offset[SM_MAX_DIMS] = {0}, shape[SM_MAX_DIMS];
    size_t bytes = elem;
    for (unsigned d = 0; d < m->ndim; d++) {
        shape[d] = m->shape[d] < 64 ? m->shape[d] : 64;
        if (bytes != 0 && shape[d] > FUZZ_MAX_REGION_BYTES / bytes) {
            shape[d] = FUZZ_MAX_REGION_BYTES / bytes;
        }
        bytes *= (size_t)shape[d];
    }
    out = sm_malloc(bytes ? bytes : 1);
    if (out == NULL) {
        goto done;
    }
    if (sm_array_read_region(a, offset, shape, out, bytes, scratch, &err) != SM_OK) {
        goto done;
    }
    bool empty = false;
    for (unsigned d = 0; d < m->ndim; d++) {
        empty = empty || m->shape[d] == 0;
        offset[d] = m->shape[d] ? m->shape[d] - 1 : 0;
        shape[d] = 1;
    }
    for (int k = 0; k < 2 && !empty; k++) {
        struct sm_err rerr = {0};
        (void)sm_array_read_region(a, offset, shape, out, elem, scratch, &rerr);
    }
done:
    sm_free(out);
    sm_scratch_free(scratch);
    sm_array_close(a);
    sm_store_close(store);
    return 0;
}
