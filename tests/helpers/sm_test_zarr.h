/* Fixture writers for array tests: a reference array held in memory (random contents, naive
 * per-element box extraction), full chunks cut from it (edge chunks padded with a marker byte, so a
 * reader that copies padding is caught), and shards assembled by hand — inner chunks in any byte
 * order, the index (little-endian offset/nbytes pairs, 2^64-1 for empty) at the start or end,
 * optionally followed by its CRC32C — so the tests do not depend on the engine's own encoder.
 * Header-only, `static inline`; buffers are plain malloc (they outlive single cmocka tests; ASan
 * checks the leaks) and are released with sm_test_ref_free / free.
 * Include after <cmocka.h> and sm_test.h. */
#ifndef SM_TESTS_HELPERS_SM_TEST_ZARR_H
#define SM_TESTS_HELPERS_SM_TEST_ZARR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardmill/crc32c.h"
#include "shardmill/store.h"

#define SM_TEST_MAXD 8
#define SM_TEST_PAD 0xA5 /* bytes of edge-chunk padding: must never reach a region */

struct sm_test_ref {
    unsigned ndim;
    uint64_t shape[SM_TEST_MAXD];
    size_t elem;
    size_t nelem, nbytes;
    uint8_t *data; /* C order, little-endian elements */
};

static inline void sm_test_ref_init(struct sm_test_ref *r, unsigned ndim, const uint64_t *shape,
                                    size_t elem, uint64_t seed)
{
    struct sm_test_rng rng = {seed};
    r->ndim = ndim;
    r->elem = elem;
    r->nelem = 1;
    for (unsigned d = 0; d < ndim; d++) {
        r->shape[d] = shape[d];
        r->nelem *= (size_t)shape[d];
    }
    r->nbytes = r->nelem * elem;
    r->data = malloc(r->nbytes == 0 ? 1 : r->nbytes);
    sm_test_rng_bytes(&rng, r->data, r->nbytes);
}

static inline void sm_test_ref_free(struct sm_test_ref *r)
{
    free(r->data);
    r->data = NULL;
}

/* Odometer over [0, ext); false when done. */
static inline bool sm_test_next(unsigned nd, const uint64_t *ext, uint64_t *c)
{
    for (unsigned d = nd; d-- > 0;) {
        if (++c[d] < ext[d]) {
            return true;
        }
        c[d] = 0;
    }
    return false;
}

static inline bool sm_test_box_empty(unsigned nd, const uint64_t *ext)
{
    for (unsigned d = 0; d < nd; d++) {
        if (ext[d] == 0) {
            return true;
        }
    }
    return false;
}

/* Linear element index of origin + c in the array, or SIZE_MAX if outside. */
static inline size_t sm_test_ref_lin(const struct sm_test_ref *r, const uint64_t *origin,
                                     const uint64_t *c)
{
    size_t l = 0;
    for (unsigned d = 0; d < r->ndim; d++) {
        uint64_t x = origin[d] + c[d];
        if (x >= r->shape[d]) {
            return SIZE_MAX;
        }
        l = l * (size_t)r->shape[d] + (size_t)x;
    }
    return l;
}

/* Sets every element of the box [lo, lo + ext) that lies inside the array to `fill`. */
static inline void sm_test_ref_fill_box(struct sm_test_ref *r, const uint64_t *lo,
                                        const uint64_t *ext, const uint8_t *fill)
{
    uint64_t c[SM_TEST_MAXD] = {0};
    if (sm_test_box_empty(r->ndim, ext)) {
        return;
    }
    do {
        size_t l = sm_test_ref_lin(r, lo, c);
        if (l != SIZE_MAX) {
            memcpy(r->data + l * r->elem, fill, r->elem);
        }
    } while (sm_test_next(r->ndim, ext, c));
}

/* The expected result of reading the box [off, off + ext) (inside the array), element by element.
 */
static inline void sm_test_ref_extract(const struct sm_test_ref *r, const uint64_t *off,
                                       const uint64_t *ext, uint8_t *out)
{
    uint64_t c[SM_TEST_MAXD] = {0};
    if (sm_test_box_empty(r->ndim, ext)) {
        return;
    }
    size_t i = 0;
    do {
        memcpy(out + i * r->elem, r->data + sm_test_ref_lin(r, off, c) * r->elem, r->elem);
        i++;
    } while (sm_test_next(r->ndim, ext, c));
}

/* A whole chunk (extents cshape) at `origin`, C order; elements past the array edge are padding. */
static inline void sm_test_ref_chunk(const struct sm_test_ref *r, const uint64_t *origin,
                                     const uint64_t *cshape, uint8_t *out)
{
    uint64_t c[SM_TEST_MAXD] = {0};
    size_t i = 0;
    do {
        size_t l = sm_test_ref_lin(r, origin, c);
        if (l == SIZE_MAX) {
            memset(out + i * r->elem, SM_TEST_PAD, r->elem);
        } else {
            memcpy(out + i * r->elem, r->data + l * r->elem, r->elem);
        }
        i++;
    } while (r->ndim > 0 && sm_test_next(r->ndim, cshape, c));
}

/* Writes "<prefix><sep-joined idx>" (v3 default: prefix "c", sep '/'; v2: prefix "" ). */
static inline void sm_test_chunk_key(char *buf, size_t cap, const char *path, const char *prefix,
                                     char sep, unsigned nd, const uint64_t *idx)
{
    size_t pos = (size_t)snprintf(buf, cap, "%s%s%s", path, path[0] != '\0' ? "/" : "", prefix);
    if (nd == 0 && prefix[0] == '\0') {
        snprintf(buf + pos, cap - pos, "0");
        return;
    }
    const char sepstr[2] = {sep, '\0'};
    for (unsigned d = 0; d < nd && pos < cap; d++) {
        const bool lead = prefix[0] != '\0' || d > 0;
        pos += (size_t)snprintf(buf + pos, cap - pos, "%s%llu", lead ? sepstr : "",
                                (unsigned long long)idx[d]);
    }
}

static inline void sm_test_put(struct sm_store *s, const char *key, const void *data, size_t n)
{
    struct sm_err err;
    sm_err_clear(&err);
    sm_status st = sm_store_put_atomic(s, key, sm_bytes_of(data, n), &err);
    if (st != SM_OK) {
        fail_msg("put %s: %s", key, err.what);
    }
}

static inline void sm_test_put_str(struct sm_store *s, const char *key, const char *text)
{
    sm_test_put(s, key, text, strlen(text));
}

/* ---- shards by hand ---- */

struct sm_test_blob {
    const uint8_t *ptr; /* NULL: an empty inner chunk (index entry 2^64-1, 2^64-1) */
    size_t len;
};

static inline void sm_test_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static inline size_t sm_test_shard_index_len(size_t n, bool crc)
{
    return 16 * n + (crc ? 4 : 0);
}

/* Assembles a shard of n inner chunks: payloads written in `order` (a permutation of 0..n-1, or
 * NULL for C order), then the index at the start or the end, with a CRC32C (little-endian) of the
 * 16 * n index bytes after them if `crc`. Returns a malloc'd buffer (free it) and its length. */
static inline uint8_t *sm_test_shard_build(const struct sm_test_blob *inner, size_t n,
                                           const size_t *order, bool index_at_start, bool crc,
                                           size_t *out_len)
{
    const size_t ilen = sm_test_shard_index_len(n, crc);
    size_t total = ilen;
    for (size_t i = 0; i < n; i++) {
        total += inner[i].ptr != NULL ? inner[i].len : 0;
    }
    uint8_t *out = malloc(total == 0 ? 1 : total);
    uint8_t *index = index_at_start ? out : out + (total - ilen);
    size_t pos = index_at_start ? ilen : 0;
    for (size_t k = 0; k < n; k++) {
        const size_t i = order != NULL ? order[k] : k;
        if (inner[i].ptr == NULL) {
            sm_test_le64(index + 16 * i, UINT64_MAX);
            sm_test_le64(index + 16 * i + 8, UINT64_MAX);
            continue;
        }
        memcpy(out + pos, inner[i].ptr, inner[i].len);
        sm_test_le64(index + 16 * i, pos);
        sm_test_le64(index + 16 * i + 8, inner[i].len);
        pos += inner[i].len;
    }
    if (crc) {
        const uint32_t c = sm_crc32c(0, index, 16 * n);
        for (int b = 0; b < 4; b++) {
            index[16 * n + (size_t)b] = (uint8_t)(c >> (8 * b));
        }
    }
    *out_len = total;
    return out;
}

/* Rewrites index entry i of a built shard (and its CRC if any). */
static inline void sm_test_shard_patch(uint8_t *shard, size_t len, size_t n, bool index_at_start,
                                       bool crc, size_t i, uint64_t off, uint64_t nbytes)
{
    const size_t ilen = sm_test_shard_index_len(n, crc);
    uint8_t *index = index_at_start ? shard : shard + (len - ilen);
    sm_test_le64(index + 16 * i, off);
    sm_test_le64(index + 16 * i + 8, nbytes);
    if (crc) {
        const uint32_t c = sm_crc32c(0, index, 16 * n);
        for (int b = 0; b < 4; b++) {
            index[16 * n + (size_t)b] = (uint8_t)(c >> (8 * b));
        }
    }
}

#endif
