/* Unit tests for engine/array/array_read.c: region reads of unsharded arrays against a reference
 * computed in the test. Arrays are written by hand into a mem store — zarr.json or .zarray plus
 * raw chunks (`bytes` codec only) cut from a random reference array, edge chunks padded with a
 * marker byte, some chunks left out (they must read as the non-zero fill value). Covers whole,
 * partial and nonaligned regions in 0-, 1-, 2- and 4-d, v2 keys, limits, bad regions, counters,
 * corrupt chunks and concurrent reads; limits.max_chunk_bytes also bounds what a codec header
 * declares where the metadata does not fix the size ([bytes, gzip, zstd]). */
#include "shardmill/sm_config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "array_int.h"
#include "shardmill/alloc.h"
#include "sm_test.h"
#include "sm_test_zarr.h"

struct spec {
    const char *path;    /* node path ("" = the store root) */
    int zarr_format;     /* 2 or 3 */
    const char *dtype;   /* v3 data type name */
    const char *v2dtype; /* numpy type string for v2 (byte order included) */
    size_t elem;         /* bytes per element */
    unsigned ndim;
    uint64_t shape[SM_TEST_MAXD], chunks[SM_TEST_MAXD];
    const char *fill_json; /* the fill value as metadata writes it */
    uint8_t fill[8];       /* ... and as little-endian bytes */
    char sep;              /* key separator */
    bool big_endian;       /* chunks stored big-endian */
    uint64_t missing_mod;  /* chunk with linear grid index % missing_mod == missing_rem is absent */
    uint64_t missing_rem;  /* (missing_mod 0: none absent) */
    uint64_t seed;
    bool fortran; /* v2 order "F": chunks stored with the axes reversed */
};

struct fx {
    struct sm_store *s;
    struct sm_array *a;
    struct sm_scratch *scr;
    struct sm_err err;
    struct sm_array_opts opts;
    struct sm_test_ref ref;
    struct spec sp;
    uint64_t nchunks, nmissing;
};

static int setup(void **state)
{
    struct fx *f = test_calloc(1, sizeof(*f));
    sm_err_clear(&f->err);
    const struct sm_array_opts defaults = SM_ARRAY_OPTS_DEFAULTS;
    f->opts = defaults;
    if (sm_store_mem_new(&f->s, &f->err) != SM_OK || sm_scratch_new(&f->scr, &f->err) != SM_OK) {
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    sm_alloc_fail_at(0);
    sm_array_close(f->a);
    sm_scratch_free(f->scr);
    sm_store_close(f->s);
    if (f->ref.data != NULL) {
        sm_test_ref_free(&f->ref);
    }
    test_free(f);
    return 0;
}

static void json_dims(char *buf, size_t cap, unsigned nd, const uint64_t *v)
{
    size_t pos = (size_t)snprintf(buf, cap, "[");
    for (unsigned d = 0; d < nd; d++) {
        pos += (size_t)snprintf(buf + pos, cap - pos, "%s%llu", d > 0 ? "," : "",
                                (unsigned long long)v[d]);
    }
    snprintf(buf + pos, cap - pos, "]");
}

static void write_metadata(struct fx *f)
{
    const struct spec *sp = &f->sp;
    char shape[256], chunks[256], doc[2048], key[512];
    json_dims(shape, sizeof(shape), sp->ndim, sp->shape);
    json_dims(chunks, sizeof(chunks), sp->ndim, sp->chunks);
    const char *slash = sp->path[0] != '\0' ? "/" : "";
    if (sp->zarr_format == 3) {
        snprintf(doc, sizeof(doc),
                 "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":%s,\"data_type\":\"%s\","
                 "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":%s}},"
                 "\"chunk_key_encoding\":{\"name\":\"default\",\"configuration\":{\"separator\":"
                 "\"%c\"}},\"fill_value\":%s,\"codecs\":[{\"name\":\"bytes\",\"configuration\":"
                 "{\"endian\":\"%s\"}}],\"attributes\":{}}",
                 shape, sp->dtype, chunks, sp->sep, sp->fill_json,
                 sp->big_endian ? "big" : "little");
        snprintf(key, sizeof(key), "%s%szarr.json", sp->path, slash);
    } else {
        snprintf(doc, sizeof(doc),
                 "{\"zarr_format\":2,\"shape\":%s,\"chunks\":%s,\"dtype\":\"%s\","
                 "\"compressor\":null,\"fill_value\":%s,\"order\":\"%s\",\"filters\":null,"
                 "\"dimension_separator\":\"%c\"}",
                 shape, chunks, sp->v2dtype, sp->fill_json, sp->fortran ? "F" : "C", sp->sep);
        snprintf(key, sizeof(key), "%s%s.zarray", sp->path, slash);
    }
    sm_test_put_str(f->s, key, doc);
}

static void swap_elems(uint8_t *p, size_t n, size_t elem)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t b = 0; b < elem / 2; b++) {
            uint8_t t = p[i * elem + b];
            p[i * elem + b] = p[i * elem + elem - 1 - b];
            p[i * elem + elem - 1 - b] = t;
        }
    }
}

/* C order -> F order (axes reversed) of one chunk. */
static void to_fortran(const uint8_t *c, uint8_t *out, unsigned nd, const uint64_t *shape,
                       size_t elem)
{
    uint64_t idx[SM_TEST_MAXD] = {0}, fstride[SM_TEST_MAXD];
    size_t i = 0;
    for (unsigned d = 0; d < nd; d++) {
        fstride[d] = d == 0 ? 1 : fstride[d - 1] * shape[d - 1];
    }
    do {
        size_t fl = 0;
        for (unsigned d = 0; d < nd; d++) {
            fl += (size_t)(idx[d] * fstride[d]);
        }
        memcpy(out + fl * elem, c + i * elem, elem);
        i++;
    } while (sm_test_next(nd, shape, idx));
}

/* Writes metadata and every present chunk; absent chunks become fill in the reference. */
static void build(struct fx *f, const struct spec *sp)
{
    f->sp = *sp;
    sm_test_ref_init(&f->ref, sp->ndim, sp->shape, sp->elem, sp->seed);
    write_metadata(f);
    uint64_t grid[SM_TEST_MAXD], ci[SM_TEST_MAXD] = {0};
    size_t chunk_elems = 1;
    for (unsigned d = 0; d < sp->ndim; d++) {
        grid[d] = (sp->shape[d] + sp->chunks[d] - 1) / sp->chunks[d];
        chunk_elems *= (size_t)sp->chunks[d];
    }
    uint8_t *chunk = test_malloc(chunk_elems * sp->elem);
    uint8_t *fchunk = test_malloc(chunk_elems * sp->elem);
    uint64_t lin = 0;
    do {
        uint64_t origin[SM_TEST_MAXD];
        for (unsigned d = 0; d < sp->ndim; d++) {
            origin[d] = ci[d] * sp->chunks[d];
        }
        f->nchunks++;
        if (sp->missing_mod != 0 && lin % sp->missing_mod == sp->missing_rem) {
            sm_test_ref_fill_box(&f->ref, origin, sp->chunks, sp->fill);
            f->nmissing++;
        } else {
            char key[512];
            sm_test_chunk_key(key, sizeof(key), sp->path, sp->zarr_format == 3 ? "c" : "", sp->sep,
                              sp->ndim, ci);
            sm_test_ref_chunk(&f->ref, origin, sp->chunks, chunk);
            if (sp->big_endian) {
                swap_elems(chunk, chunk_elems, sp->elem);
            }
            if (sp->fortran) {
                to_fortran(chunk, fchunk, sp->ndim, sp->chunks, sp->elem);
                memcpy(chunk, fchunk, chunk_elems * sp->elem);
            }
            sm_test_put(f->s, key, chunk, chunk_elems * sp->elem);
        }
        lin++;
    } while (sp->ndim > 0 && sm_test_next(sp->ndim, grid, ci));
    test_free(fchunk);
    test_free(chunk);
    assert_ok(sm_array_open(f->s, sp->path, &f->opts, &f->a, &f->err), &f->err);
}

static size_t region_bytes(const struct fx *f, const uint64_t *ext)
{
    size_t n = f->sp.elem;
    for (unsigned d = 0; d < f->sp.ndim; d++) {
        n *= (size_t)ext[d];
    }
    return n;
}

/* Reads [off, off + ext) and compares it with the reference. */
static void check_read(struct fx *f, const uint64_t *off, const uint64_t *ext)
{
    const size_t n = region_bytes(f, ext);
    uint8_t *got = test_malloc(n == 0 ? 1 : n);
    uint8_t *want = test_malloc(n == 0 ? 1 : n);
    sm_test_ref_extract(&f->ref, off, ext, want);
    sm_err_clear(&f->err);
    assert_ok(sm_array_read_region(f->a, off, ext, got, n, f->scr, &f->err), &f->err);
    if (memcmp(got, want, n) != 0) {
        size_t i = 0;
        while (got[i] == want[i]) {
            i++;
        }
        fail_msg("region differs from the reference at byte %zu (elem %zu): got %02x want %02x", i,
                 i / f->sp.elem, got[i], want[i]);
    }
    test_free(got);
    test_free(want);
}

static void random_regions(struct fx *f, int iters, uint64_t seed)
{
    struct sm_test_rng rng = {seed};
    for (int i = 0; i < iters; i++) {
        uint64_t off[SM_TEST_MAXD], ext[SM_TEST_MAXD];
        for (unsigned d = 0; d < f->sp.ndim; d++) {
            off[d] = sm_test_rng_below(&rng, f->sp.shape[d]);
            ext[d] = 1 + sm_test_rng_below(&rng, f->sp.shape[d] - off[d]);
        }
        check_read(f, off, ext);
    }
}

/* 2-d uint16 [10, 7] in chunks [4, 3] (3 x 3 grid, partial edge chunks), chunk 4 = (1, 1)
 * missing, fill 4242. */
static const struct spec spec_2d = {"",      3,      "uint16", "<u2",        2,   2,
                                    {10, 7}, {4, 3}, "4242",   {0x92, 0x10}, '/', false,
                                    9,       4,      11,       false};

static void test_read_whole_array_matches_reference(void **state)
{
    struct fx *f = *state;
    build(f, &spec_2d);
    const uint64_t off[2] = {0, 0}, ext[2] = {10, 7};
    check_read(f, off, ext);
    struct sm_array_stats st;
    sm_array_stats(f->a, &st);
    assert_int_equal(st.chunks_read, 8);
    assert_int_equal(st.chunks_missing, 1);
}

static void test_read_chunk_aligned_region(void **state)
{
    struct fx *f = *state;
    build(f, &spec_2d);
    const uint64_t off[2] = {4, 3}, ext[2] = {4, 3};
    check_read(f, off, ext);
    const uint64_t off2[2] = {0, 3}, ext2[2] = {8, 4};
    check_read(f, off2, ext2);
}

static void test_read_random_nonaligned_regions_match_reference(void **state)
{
    struct fx *f = *state;
    build(f, &spec_2d);
    random_regions(f, 300, 99);
}

static void test_read_single_element_regions(void **state)
{
    struct fx *f = *state;
    build(f, &spec_2d);
    for (uint64_t y = 0; y < 10; y++) {
        for (uint64_t x = 0; x < 7; x++) {
            const uint64_t off[2] = {y, x}, ext[2] = {1, 1};
            check_read(f, off, ext);
        }
    }
}

static void test_read_missing_chunk_is_fill_value(void **state)
{
    struct fx *f = *state;
    build(f, &spec_2d);
    const uint64_t off[2] = {5, 4}, ext[2] = {2, 2}; /* inside missing chunk (1, 1) */
    uint16_t got[4] = {0};
    assert_ok(sm_array_read_region(f->a, off, ext, got, sizeof(got), f->scr, &f->err), &f->err);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(got[i], 4242);
    }
    struct sm_array_stats st;
    sm_array_stats(f->a, &st);
    assert_int_equal(st.chunks_missing, 1);
    assert_int_equal(st.chunks_read, 0);
    /* the absent chunk still cost one payload request, with no bytes (SPEC §5) */
    assert_int_equal(sm_store_requests(f->s, SM_IO_PAYLOAD), 1);
    assert_int_equal(sm_store_bytes(f->s, SM_IO_PAYLOAD), 0);
}

static void test_read_counts_one_payload_request_per_chunk_touched(void **state)
{
    struct fx *f = *state;
    build(f, &spec_2d);
    const uint64_t off[2] = {3, 2}, ext[2] = {2, 2}; /* chunks (0,0) (0,1) (1,0) (1,1) */
    uint16_t got[4];
    assert_ok(sm_array_read_region(f->a, off, ext, got, sizeof(got), f->scr, &f->err), &f->err);
    assert_int_equal(sm_store_requests(f->s, SM_IO_PAYLOAD), 4);
    assert_int_equal(sm_store_bytes(f->s, SM_IO_PAYLOAD), 3 * 4 * 3 * 2); /* 3 present chunks */
    assert_int_equal(sm_store_requests(f->s, SM_IO_INDEX), 0);
    assert_int_equal(sm_store_requests(f->s, SM_IO_META), 1); /* the open */
}

static void test_read_region_outside_array_is_usage_error(void **state)
{
    struct fx *f = *state;
    build(f, &spec_2d);
    uint16_t buf[200];
    const uint64_t cases[][4] = {
        {0, 0, 11, 7}, {0, 0, 10, 8}, {10, 0, 1, 1},
        {9, 6, 2, 1},  {11, 0, 0, 0}, {UINT64_MAX, 0, 2, 1}, /* offset + shape wraps around */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const uint64_t off[2] = {cases[i][0], cases[i][1]}, ext[2] = {cases[i][2], cases[i][3]};
        sm_err_clear(&f->err);
        size_t n = (size_t)(ext[0] * ext[1] * 2);
        assert_int_equal(
            sm_array_read_region(f->a, off, ext, buf, n < sizeof(buf) ? n : 0, f->scr, &f->err),
            SM_E_USAGE);
        assert_contains(f->err.what, "outside");
    }
    assert_int_equal(sm_store_requests(f->s, SM_IO_PAYLOAD), 0);
}

static void test_read_out_len_mismatch_is_usage_error(void **state)
{
    struct fx *f = *state;
    build(f, &spec_2d);
    uint16_t buf[16];
    const uint64_t off[2] = {1, 1}, ext[2] = {2, 3};
    const size_t wrong[] = {0, 11, 13, sizeof(buf)};
    for (size_t i = 0; i < 4; i++) {
        sm_err_clear(&f->err);
        assert_int_equal(sm_array_read_region(f->a, off, ext, buf, wrong[i], f->scr, &f->err),
                         SM_E_USAGE);
        assert_contains(f->err.what, "12");
    }
    assert_int_equal(sm_store_requests(f->s, SM_IO_PAYLOAD), 0);
}

static void test_read_zero_sized_region_reads_nothing(void **state)
{
    struct fx *f = *state;
    build(f, &spec_2d);
    const uint64_t off[2] = {3, 7}, ext[2] = {5, 0}; /* at the very end of axis 1 */
    uint8_t dummy;
    assert_ok(sm_array_read_region(f->a, off, ext, &dummy, 0, f->scr, &f->err), &f->err);
    assert_int_equal(sm_store_requests(f->s, SM_IO_PAYLOAD), 0);
}

static void test_read_max_region_bytes_is_limit(void **state)
{
    struct fx *f = *state;
    f->opts.limits.max_region_bytes = 24;
    build(f, &spec_2d);
    uint16_t buf[16];
    const uint64_t off[2] = {0, 0}, ok[2] = {3, 4}, big[2] = {2, 7};
    check_read(f, off, ok); /* exactly 24 bytes */
    assert_int_equal(sm_array_read_region(f->a, off, big, buf, 28, f->scr, &f->err), SM_E_LIMIT);
    assert_contains(f->err.what, "limits.max_region_bytes");
    assert_contains(f->err.what, "28");
}

static void test_read_max_chunk_bytes_is_limit(void **state)
{
    struct fx *f = *state;
    f->opts.limits.max_chunk_bytes = 23; /* a chunk decodes to 4 * 3 * 2 = 24 bytes */
    build(f, &spec_2d);
    uint16_t buf[1];
    const uint64_t off[2] = {0, 0}, ext[2] = {1, 1};
    assert_int_equal(sm_array_read_region(f->a, off, ext, buf, 2, f->scr, &f->err), SM_E_LIMIT);
    assert_contains(f->err.what, "limits.max_chunk_bytes");
    assert_int_equal(sm_store_requests(f->s, SM_IO_PAYLOAD), 0);
}

/* A streamed zstd frame (no content size, 128 KiB window) of n zero bytes as RLE blocks. */
static uint8_t *zstd_rle_bomb(size_t n, size_t *len)
{
    const size_t blk = (size_t)1 << 17, nblk = n / blk;
    uint8_t *f = test_malloc(6 + 4 * nblk);
    const uint8_t head[6] = {0x28, 0xb5, 0x2f, 0xfd, 0x00, (17 - 10) << 3};
    memcpy(f, head, sizeof(head));
    for (size_t i = 0; i < nblk; i++) {
        const uint32_t bh = (i + 1 == nblk ? 1u : 0u) | (1u << 1) | ((uint32_t)blk << 3);
        uint8_t *b = f + 6 + 4 * i;
        b[0] = (uint8_t)bh;
        b[1] = (uint8_t)(bh >> 8);
        b[2] = (uint8_t)(bh >> 16);
        b[3] = 0; /* the byte repeated */
    }
    *len = 6 + 4 * nblk;
    return f;
}

static void test_read_max_chunk_bytes_bounds_sizes_codecs_declare(void **state)
{
    struct fx *f = *state;
    /* [bytes, gzip, zstd]: the zstd stage's decoded size is not fixed by the metadata; its frame
     * decodes to 8 MiB of zeros in a 16-byte chunk. */
    sm_test_put_str(f->s, "zarr.json",
                    "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[16],\"data_type\":"
                    "\"uint8\",\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{"
                    "\"chunk_shape\":[16]}},\"chunk_key_encoding\":{\"name\":\"default\"},"
                    "\"fill_value\":0,\"codecs\":[\"bytes\",\"gzip\",\"zstd\"]}");
    size_t len;
    uint8_t *bomb = zstd_rle_bomb((size_t)8 << 20, &len);
    sm_test_put(f->s, "c/0", bomb, len);
    test_free(bomb);
    const uint64_t off[1] = {0}, ext[1] = {16};
    uint8_t buf[16];
    const uint64_t limits[3] = {1u << 20, 0, 16u << 20};
    const sm_status want[3] = {SM_E_LIMIT, SM_E_DATA, SM_E_DATA};
    for (int i = 0; i < 3; i++) {
        f->opts.limits.max_chunk_bytes = limits[i];
        sm_array_close(f->a);
        f->a = NULL;
        assert_ok(sm_array_open(f->s, "", &f->opts, &f->a, &f->err), &f->err);
        sm_scratch_free(f->scr); /* a fresh scratch: no buffer left grown by the last read */
        assert_ok(sm_scratch_new(&f->scr, &f->err), &f->err);
        const uint64_t before = sm_alloc_current();
        sm_alloc_reset_peak();
        sm_err_clear(&f->err);
        assert_int_equal(sm_array_read_region(f->a, off, ext, buf, 16, f->scr, &f->err), want[i]);
        assert_contains(f->err.where, "c/0");
        const uint64_t used = sm_alloc_peak() - before;
        if (want[i] == SM_E_LIMIT) {
            assert_contains(f->err.what, "decode limit of 1048576 bytes (limits.max_chunk_bytes)");
            assert_true(used <= (1u << 20) + (256u << 10)); /* the bound, the zstd context */
        } else {
            assert_contains(f->err.what, "gzip"); /* zstd decoded it; zeros are not gzip */
            assert_true(used >= 8u << 20);        /* zstd decoded all of it */
        }
    }
}

static void test_read_max_object_bytes_is_limit_naming_the_chunk(void **state)
{
    struct fx *f = *state;
    /* zarr.json (about 420 bytes) fits in 600 bytes; one 40 x 9 uint16 chunk (720 bytes) does not
     */
    f->opts.limits.max_object_bytes = 600;
    struct spec sp = spec_2d;
    sp.shape[0] = sp.chunks[0] = 40;
    sp.shape[1] = sp.chunks[1] = 9;
    build(f, &sp);
    uint16_t buf[1];
    const uint64_t off[2] = {0, 0}, ext[2] = {1, 1};
    assert_int_equal(sm_array_read_region(f->a, off, ext, buf, 2, f->scr, &f->err), SM_E_LIMIT);
    assert_contains(f->err.what, "limits.max_object_bytes");
    assert_contains(f->err.where, "c/0/0");
}

static void test_read_short_chunk_is_data_error_naming_key(void **state)
{
    struct fx *f = *state;
    build(f, &spec_2d);
    sm_test_put(f->s, "c/2/1", "\x01\x02\x03", 3); /* 3 bytes instead of 24 */
    uint16_t buf[1];
    const uint64_t off[2] = {8, 3}, ext[2] = {1, 1};
    assert_int_equal(sm_array_read_region(f->a, off, ext, buf, 2, f->scr, &f->err), SM_E_DATA);
    assert_contains(f->err.where, "c/2/1");
}

static void test_read_0d_array(void **state)
{
    struct fx *f = *state;
    const struct spec sp = {"scalar", 3,     "float64", "<f8",  8,
                            0,        {0},   {0},       "-2.5", {0, 0, 0, 0, 0, 0, 0x04, 0xc0},
                            '/',      false, 0,         0,      5,
                            false};
    build(f, &sp);
    double v = 0;
    assert_ok(sm_array_read_region(f->a, NULL, NULL, &v, sizeof(v), f->scr, &f->err), &f->err);
    assert_memory_equal(&v, f->ref.data, 8);
    assert_int_equal(sm_store_requests(f->s, SM_IO_PAYLOAD), 1);
    assert_int_equal(sm_store_bytes(f->s, SM_IO_PAYLOAD), 8);
    /* wrong out_len */
    assert_int_equal(sm_array_read_region(f->a, NULL, NULL, &v, 4, f->scr, &f->err), SM_E_USAGE);
}

static void test_read_0d_missing_chunk_is_fill(void **state)
{
    struct fx *f = *state;
    const struct spec sp = {
        "",  3,     "float64", "<f8", 8, 0,    {0}, {0}, "-2.5", {0, 0, 0, 0, 0, 0, 0x04, 0xc0},
        '/', false, 1,         0,     5, false};
    build(f, &sp);
    double v = 0;
    assert_ok(sm_array_read_region(f->a, NULL, NULL, &v, sizeof(v), f->scr, &f->err), &f->err);
    assert_true(v == -2.5);
}

static void test_read_0d_v2_array(void **state)
{
    struct fx *f = *state;
    const struct spec sp = {"",  2,      "int16", "<i2", 2, 0, {0}, {0},
                            "7", {7, 0}, '.',     false, 0, 0, 77,  false};
    build(f, &sp);
    int16_t v = 0;
    assert_ok(sm_array_read_region(f->a, NULL, NULL, &v, sizeof(v), f->scr, &f->err), &f->err);
    assert_memory_equal(&v, f->ref.data, 2);
}

static void test_read_1d_array_random_regions(void **state)
{
    struct fx *f = *state;
    const struct spec sp = {"one", 3,     "uint8", "|u1", 1, 1, {1000}, {64},
                            "200", {200}, '/',     false, 3, 1, 21,     false};
    build(f, &sp);
    const uint64_t off[1] = {0}, ext[1] = {1000};
    check_read(f, off, ext);
    random_regions(f, 300, 5);
}

static void test_read_4d_array_random_regions(void **state)
{
    struct fx *f = *state;
    const struct spec sp = {"four",
                            3,
                            "int32",
                            "<i4",
                            4,
                            4,
                            {5, 4, 6, 7},
                            {2, 3, 4, 3},
                            "-7",
                            {0xf9, 0xff, 0xff, 0xff},
                            '.',
                            false,
                            5,
                            2,
                            31,
                            false};
    build(f, &sp);
    const uint64_t off[4] = {0, 0, 0, 0}, ext[4] = {5, 4, 6, 7};
    check_read(f, off, ext);
    random_regions(f, 300, 6);
}

static void test_read_v2_array_with_dot_separator(void **state)
{
    struct fx *f = *state;
    struct spec sp = spec_2d;
    sp.zarr_format = 2;
    sp.sep = '.';
    sp.path = "v2/dot";
    build(f, &sp);
    const uint64_t off[2] = {0, 0}, ext[2] = {10, 7};
    check_read(f, off, ext);
    random_regions(f, 50, 8);
}

static void test_read_v2_array_with_slash_separator(void **state)
{
    struct fx *f = *state;
    struct spec sp = spec_2d;
    sp.zarr_format = 2;
    sp.sep = '/';
    build(f, &sp);
    const uint64_t off[2] = {0, 0}, ext[2] = {10, 7};
    check_read(f, off, ext);
}

static void test_read_v3_dot_separator_keys(void **state)
{
    struct fx *f = *state;
    struct spec sp = spec_2d;
    sp.sep = '.';
    build(f, &sp);
    const uint64_t off[2] = {0, 0}, ext[2] = {10, 7};
    check_read(f, off, ext);
}

static void test_read_big_endian_chunks_come_out_native(void **state)
{
    struct fx *f = *state;
    struct spec sp = spec_2d;
    sp.big_endian = true;
    build(f, &sp);
    const uint64_t off[2] = {0, 0}, ext[2] = {10, 7};
    check_read(f, off, ext);
    struct spec v2 = spec_2d;
    v2.zarr_format = 2;
    v2.v2dtype = ">u2";
    v2.big_endian = true;
    v2.path = "be";
    sm_array_close(f->a);
    f->a = NULL;
    sm_test_ref_free(&f->ref);
    build(f, &v2);
    check_read(f, off, ext);
}

static void test_read_v2_null_fill_reads_zero(void **state)
{
    struct fx *f = *state;
    struct spec sp = spec_2d;
    sp.zarr_format = 2;
    sp.fill_json = "null";
    memset(sp.fill, 0, sizeof(sp.fill));
    build(f, &sp);
    const uint64_t off[2] = {4, 3}, ext[2] = {4, 3}; /* the missing chunk (1, 1) */
    uint16_t got[12];
    assert_ok(sm_array_read_region(f->a, off, ext, got, sizeof(got), f->scr, &f->err), &f->err);
    for (int i = 0; i < 12; i++) {
        assert_int_equal(got[i], 0);
    }
    const uint64_t all[2] = {0, 0}, ext_all[2] = {10, 7};
    check_read(f, all, ext_all);
}

static void test_read_v2_fortran_order_chunks(void **state)
{
    struct fx *f = *state;
    struct spec sp = spec_2d;
    sp.zarr_format = 2;
    sp.fortran = true;
    build(f, &sp);
    const uint64_t off[2] = {0, 0}, ext[2] = {10, 7};
    check_read(f, off, ext);
    random_regions(f, 100, 14);
    struct spec sp4 = {
        "f4", 2,     "int32", "<i4", 4,  3,   {5, 6, 7}, {2, 4, 3}, "-7", {0xf9, 0xff, 0xff, 0xff},
        '.',  false, 4,       1,     33, true};
    sm_array_close(f->a);
    f->a = NULL;
    sm_test_ref_free(&f->ref);
    build(f, &sp4);
    const uint64_t off3[3] = {0, 0, 0};
    check_read(f, off3, sp4.shape);
    random_regions(f, 100, 15);
}

struct reader {
    struct sm_array *a;
    const struct sm_test_ref *ref;
    unsigned id;
    int bad;
    char msg[512];
};

static void *read_worker(void *arg)
{
    struct reader *r = arg;
    struct sm_scratch *scr = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    if (sm_scratch_new(&scr, &err) != SM_OK) {
        r->bad = 1;
        return NULL;
    }
    struct sm_test_rng rng = {r->id + 100};
    static uint8_t bufs[4][2][10 * 7 * 2];
    uint8_t *got = bufs[r->id][0], *want = bufs[r->id][1];
    for (int i = 0; i < 300 && r->bad == 0; i++) {
        uint64_t off[2], ext[2];
        for (int d = 0; d < 2; d++) {
            off[d] = sm_test_rng_below(&rng, r->ref->shape[d]);
            ext[d] = 1 + sm_test_rng_below(&rng, r->ref->shape[d] - off[d]);
        }
        const size_t n = (size_t)(ext[0] * ext[1] * 2);
        sm_test_ref_extract(r->ref, off, ext, want);
        sm_err_clear(&err);
        if (sm_array_read_region(r->a, off, ext, got, n, scr, &err) != SM_OK ||
            memcmp(got, want, n) != 0) {
            r->bad = 1;
            snprintf(r->msg, sizeof(r->msg), "region %d: %.200s", i, err.what);
        }
    }
    sm_scratch_free(scr);
    return NULL;
}

static void test_read_from_threads_with_own_scratch(void **state)
{
    struct fx *f = *state;
    build(f, &spec_2d);
    struct reader r[4];
    pthread_t th[4];
    for (unsigned i = 0; i < 4; i++) {
        r[i] = (struct reader){f->a, &f->ref, i, 0, ""};
        assert_int_equal(pthread_create(&th[i], NULL, read_worker, &r[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
    }
    for (int i = 0; i < 4; i++) {
        if (r[i].bad) {
            fail_msg("thread %d: %s", i, r[i].msg);
        }
    }
}

static void test_read_allocation_failures_are_nomem_without_leaks(void **state)
{
    struct fx *f = *state;
    build(f, &spec_2d);
    const uint64_t off[2] = {1, 1}, ext[2] = {8, 5};
    uint16_t buf[40];
    const uint64_t base = sm_alloc_current();
    for (uint64_t n = 1; n <= 12; n++) {
        /* A fresh scratch each time: what a read keeps lives on the scratch and goes with it. */
        struct sm_scratch *scr = NULL;
        assert_ok(sm_array_scratch_new(&scr, &f->err), &f->err);
        sm_err_clear(&f->err);
        sm_alloc_fail_at(n);
        sm_status st = sm_array_read_region(f->a, off, ext, buf, sizeof(buf), scr, &f->err);
        sm_alloc_fail_at(0);
        assert_true(st == SM_OK || st == SM_E_NOMEM);
        sm_array_scratch_free(scr);
        assert_int_equal(sm_alloc_current(), base);
    }
    check_read(f, off, ext);
}

/* The hot path allocates nothing per call: once a scratch (and, for a parallel read, each of its
 * worker scratches) has served a read, the same read again succeeds with every allocation failing,
 * and the allocator's total does not move. The workers are warmed by serial reads on each of them,
 * since which worker decodes which chunk is up to the OpenMP schedule. */
static void test_read_again_on_a_warm_scratch_allocates_nothing(void **state)
{
    struct fx *f = *state;
    build(f, &spec_2d);
    const uint64_t off[2] = {1, 1}, ext[2] = {8, 5};
    uint16_t buf[40];
    struct sm_array *serial = NULL, *par = NULL;
    f->opts.read_threads = 1;
    assert_ok(sm_array_open(f->s, f->sp.path, &f->opts, &serial, &f->err), &f->err);
    f->opts.read_threads = 2;
    assert_ok(sm_array_open(f->s, f->sp.path, &f->opts, &par, &f->err), &f->err);
    for (unsigned i = 0; i < 2; i++) {
        struct sm_scratch *w = NULL;
        assert_ok(sm_scratch_worker(f->scr, i, &w, &f->err), &f->err);
        assert_ok(sm_array_read_region(serial, off, ext, buf, sizeof(buf), w, &f->err), &f->err);
    }
    struct sm_array *arrays[2] = {serial, par};
    for (unsigned k = 0; k < 2; k++) {
        memset(buf, 0, sizeof(buf));
        const uint64_t base = sm_alloc_current();
        sm_alloc_fail_at(1);
        sm_status st = sm_array_read_region(arrays[k], off, ext, buf, sizeof(buf), f->scr, &f->err);
        sm_alloc_fail_at(0);
        assert_ok(st, &f->err);
        assert_int_equal(sm_alloc_current(), base);
        uint16_t want[40];
        sm_test_ref_extract(&f->ref, off, ext, (uint8_t *)want);
        assert_memory_equal(buf, want, sizeof(want));
    }
    sm_array_close(serial);
    sm_array_close(par);
}

/* v2, 4-byte elements, big-endian, 6 x 5 chunk grid with absences. */
static const struct spec spec_v2_par = {
    "grp/a", 2,    "int32", ">i4", 4,  2,    {23, 19}, {4, 4}, "-7", {0xf9, 0xff, 0xff, 0xff},
    '.',     true, 7,       3,     29, false};

/* One thread and two threads give the same bytes (and the reference) on a v2 array, for whole,
 * unaligned and single-chunk regions; a corrupt chunk gives the same error either way. */
static void test_read_v2_one_and_two_threads_give_identical_bytes(void **state)
{
    struct fx *f = *state;
    build(f, &spec_v2_par);
    const uint64_t regions[][4] = {{0, 0, 23, 19}, {1, 2, 21, 15}, {4, 4, 4, 4}, {5, 3, 2, 9}};
    for (size_t i = 0; i < sizeof(regions) / sizeof(regions[0]); i++) {
        const uint64_t *off = regions[i], *ext = regions[i] + 2;
        const size_t n = region_bytes(f, ext);
        uint8_t *got[2];
        for (unsigned t = 1; t <= 2; t++) {
            f->opts.read_threads = t;
            sm_array_close(f->a);
            assert_ok(sm_array_open(f->s, f->sp.path, &f->opts, &f->a, &f->err), &f->err);
            got[t - 1] = test_malloc(n);
            assert_ok(sm_array_read_region(f->a, off, ext, got[t - 1], n, f->scr, &f->err),
                      &f->err);
        }
        assert_memory_equal(got[0], got[1], n);
        check_read(f, off, ext);
        test_free(got[0]);
        test_free(got[1]);
    }
    /* chunks 1.1 and 3.2 cut short: the first in C order is the error with 1 and 2 threads */
    const char *bad[2] = {"grp/a/3.2", "grp/a/1.1"};
    for (int i = 0; i < 2; i++) {
        sm_test_put(f->s, bad[i], "xx", 2);
    }
    char what[2][600];
    uint8_t *buf = test_malloc(23 * 19 * 4);
    const uint64_t off[2] = {0, 0}, ext[2] = {23, 19};
    for (unsigned t = 1; t <= 2; t++) {
        f->opts.read_threads = t;
        sm_array_close(f->a);
        assert_ok(sm_array_open(f->s, f->sp.path, &f->opts, &f->a, &f->err), &f->err);
        sm_err_clear(&f->err);
        assert_int_equal(sm_array_read_region(f->a, off, ext, buf, 23 * 19 * 4, f->scr, &f->err),
                         SM_E_DATA);
        snprintf(what[t - 1], sizeof(what[0]), "%s | %s", f->err.where, f->err.what);
    }
    assert_string_equal(what[0], what[1]);
    assert_contains(what[1], "grp/a/1.1");
    test_free(buf);
}

/* A region sink that copies each band it is handed and counts how often each byte came. */
struct band_copy {
    pthread_mutex_t mu;
    uint8_t *copy, *seen;
    size_t n;
    unsigned bands, fail_at; /* fail_at: the band that fails (1 = the first), 0 none */
};

static sm_status band_copy_band(void *ctx, const void *bytes, size_t off, size_t len,
                                struct sm_err *err)
{
    struct band_copy *b = ctx;
    pthread_mutex_lock(&b->mu);
    const unsigned k = ++b->bands;
    pthread_mutex_unlock(&b->mu);
    if (k == b->fail_at) {
        SM_FAIL(err, SM_E_IO, "band %u refused", k);
    }
    if (off > b->n || len > b->n - off) {
        SM_FAIL(err, SM_E_USAGE, "band out of the region");
    }
    memcpy(b->copy + off, (const uint8_t *)bytes + off, len); /* disjoint bands: no lock */
    for (size_t i = off; i < off + len; i++) {
        b->seen[i]++;
    }
    return SM_OK;
}

/* sm_array_read_region_to hands every byte of the region to the sink exactly once, in bands of
 * whole chunk rows, with the bytes already final, for one and two threads; a sink's error fails
 * the read with that error. */
static void test_read_to_sink_hands_every_band_once(void **state)
{
    struct fx *f = *state;
    build(f, &spec_v2_par);
    const uint64_t regions[][4] = {{0, 0, 23, 19}, {1, 2, 21, 15}, {4, 4, 4, 4}, {5, 3, 2, 9}};
    for (unsigned t = 1; t <= 2; t++) {
        f->opts.read_threads = t;
        sm_array_close(f->a);
        assert_ok(sm_array_open(f->s, f->sp.path, &f->opts, &f->a, &f->err), &f->err);
        for (size_t i = 0; i < sizeof(regions) / sizeof(regions[0]); i++) {
            const uint64_t *off = regions[i], *ext = regions[i] + 2;
            const size_t n = region_bytes(f, ext);
            struct band_copy b = {.n = n};
            pthread_mutex_init(&b.mu, NULL);
            b.copy = test_calloc(1, n);
            b.seen = test_calloc(1, n);
            uint8_t *out = test_malloc(n), *want = test_malloc(n);
            const struct sm_region_sink sink = {band_copy_band, &b};
            assert_ok(sm_array_read_region_to(f->a, off, ext, out, n, &sink, f->scr, &f->err),
                      &f->err);
            sm_test_ref_extract(&f->ref, off, ext, want);
            assert_memory_equal(out, want, n);
            assert_memory_equal(b.copy, want, n);
            for (size_t k = 0; k < n; k++) {
                assert_int_equal(b.seen[k], 1);
            }
            /* bands are whole chunk rows of axis 0 (chunks of 4 rows) */
            assert_int_equal(b.bands, (off[0] + ext[0] - 1) / 4 - off[0] / 4 + 1);
            b.bands = 0;
            b.fail_at = 2;
            sm_err_clear(&f->err);
            const sm_status st =
                sm_array_read_region_to(f->a, off, ext, out, n, &sink, f->scr, &f->err);
            if (ext[0] > 4 || off[0] % 4 + ext[0] > 4) {
                assert_int_equal(st, SM_E_IO);
                assert_contains(f->err.what, "band 2 refused");
            } else {
                assert_ok(st, &f->err); /* one band only */
            }
            sm_err_clear(&f->err);
            pthread_mutex_destroy(&b.mu);
            test_free(b.copy);
            test_free(b.seen);
            test_free(out);
            test_free(want);
        }
    }
}

/* A store over the fixture's whose first payload read of a round waits (up to wait_ms) for a second
 * read to be in flight at the same time: it records whether reads overlapped. */
struct meet_store {
    struct sm_store base;
    struct sm_store *inner;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned inflight, max_inflight;
    bool waited;
    long wait_ms; /* how long the first payload read waits for company */
};

static sm_status meet_get(struct sm_store *s, const char *key, struct sm_range r,
                          enum sm_io_class cls, struct sm_buf *out, bool *found, uint64_t *objsize,
                          struct sm_err *err)
{
    struct meet_store *m = (struct meet_store *)s;
    pthread_mutex_lock(&m->mu);
    m->inflight++;
    if (m->inflight > m->max_inflight) {
        m->max_inflight = m->inflight;
    }
    pthread_cond_broadcast(&m->cv);
    if (cls == SM_IO_PAYLOAD && !m->waited) {
        m->waited = true;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += m->wait_ms / 1000;
        until.tv_nsec += (m->wait_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (m->inflight < 2 && pthread_cond_timedwait(&m->cv, &m->mu, &until) == 0) {
        }
    }
    pthread_mutex_unlock(&m->mu);
    sm_status st = sm_store_get_sized(m->inner, key, r, cls, out, found, objsize, err);
    pthread_mutex_lock(&m->mu);
    m->inflight--;
    pthread_mutex_unlock(&m->mu);
    return st;
}

static void meet_close(struct sm_store *s)
{
    (void)s;
}

static const struct sm_store_ops meet_ops = {
    .scheme = "meet",
    .caps = SM_STORE_RANGE | SM_STORE_THREADSAFE,
    .get = meet_get,
    .close = meet_close,
};

/* With read_threads 2 a region read really runs two reads at once (objects in parallel); with
 * read_threads 1, or on a store that is not thread-safe, never. */
static void test_read_region_threads_overlap_reads_only_when_asked(void **state)
{
    struct fx *f = *state;
    build(f, &spec_v2_par);
    static char url[] = "meet";
    struct meet_store m;
    memset(&m, 0, sizeof(m));
    m.base.ops = &meet_ops;
    m.base.url = url;
    m.inner = f->s;
    pthread_mutex_init(&m.mu, NULL);
    pthread_cond_init(&m.cv, NULL);
    const uint64_t off[2] = {0, 0}, ext[2] = {23, 19};
    uint8_t *buf = test_malloc(23 * 19 * 4);
    const unsigned want_max[3] = {1, 2, 1};
    for (unsigned t = 1; t <= 3; t++) {
        struct sm_store_ops ops = meet_ops;
        if (t == 3) {
            ops.caps = SM_STORE_RANGE; /* not thread-safe: serial even with 2 threads asked */
        }
        m.base.ops = &ops;
        m.max_inflight = 0;
        m.waited = false;
        m.wait_ms = t == 2 ? 5000 : 200; /* the parallel round ends its wait once a read joins */
        f->opts.read_threads = t == 1 ? 1 : 2;
        struct sm_array *a = NULL;
        assert_ok(sm_array_open(&m.base, f->sp.path, &f->opts, &a, &f->err), &f->err);
        assert_ok(sm_array_read_region(a, off, ext, buf, 23 * 19 * 4, f->scr, &f->err), &f->err);
        sm_array_close(a);
        assert_int_equal(m.max_inflight, want_max[t - 1]);
    }
    m.base.ops = &meet_ops;
    test_free(buf);
    pthread_cond_destroy(&m.cv);
    pthread_mutex_destroy(&m.mu);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_read_whole_array_matches_reference),
        T(test_read_chunk_aligned_region),
        T(test_read_random_nonaligned_regions_match_reference),
        T(test_read_single_element_regions),
        T(test_read_missing_chunk_is_fill_value),
        T(test_read_counts_one_payload_request_per_chunk_touched),
        T(test_read_region_outside_array_is_usage_error),
        T(test_read_out_len_mismatch_is_usage_error),
        T(test_read_zero_sized_region_reads_nothing),
        T(test_read_max_region_bytes_is_limit),
        T(test_read_max_chunk_bytes_is_limit),
        T(test_read_max_chunk_bytes_bounds_sizes_codecs_declare),
        T(test_read_max_object_bytes_is_limit_naming_the_chunk),
        T(test_read_short_chunk_is_data_error_naming_key),
        T(test_read_0d_array),
        T(test_read_0d_missing_chunk_is_fill),
        T(test_read_0d_v2_array),
        T(test_read_1d_array_random_regions),
        T(test_read_4d_array_random_regions),
        T(test_read_v2_array_with_dot_separator),
        T(test_read_v2_array_with_slash_separator),
        T(test_read_v3_dot_separator_keys),
        T(test_read_big_endian_chunks_come_out_native),
        T(test_read_v2_null_fill_reads_zero),
        T(test_read_v2_fortran_order_chunks),
        T(test_read_from_threads_with_own_scratch),
        T(test_read_allocation_failures_are_nomem_without_leaks),
        T(test_read_again_on_a_warm_scratch_allocates_nothing),
        T(test_read_v2_one_and_two_threads_give_identical_bytes),
        T(test_read_to_sink_hands_every_band_once),
        T(test_read_region_threads_overlap_reads_only_when_asked),
    };
    return cmocka_run_group_tests_name("array_read", tests, NULL, NULL);
}
