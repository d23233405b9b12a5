/* Unit tests for engine/array/shard_read.c: ranged reads of sharded arrays (sharding_indexed with
 * `bytes` inner chunks) against a reference computed in the test. Shards are assembled by hand
 * (tests/helpers/sm_test_zarr.h): index at the end or the start, with or without CRC32C, inner
 * chunks in C, reverse or shuffled byte order, empty inner chunks and absent shards reading as the
 * fill value. Checks corrupt indexes (entry past the end, CRC mismatch, truncated shard), the
 * index cache, request counts (1 index request + 1 payload request per run of byte-adjacent inner
 * chunks) and nested sharding. An index the metadata declares (2^31 or 2^59 entries, nested too)
 * is checked against limits.max_object_bytes and the shard's size before anything is allocated
 * for it. */
#include "shardmill/sm_config.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "array_int.h"
#include "shardmill/alloc.h"
#include "sm_test.h"
#include "sm_test_zarr.h"

enum layout_order { ORDER_C, ORDER_REVERSE, ORDER_SHUFFLE };

struct sspec {
    const char *path;
    const char *dtype;
    size_t elem;
    unsigned ndim;
    uint64_t shape[SM_TEST_MAXD], shard[SM_TEST_MAXD], inner[SM_TEST_MAXD];
    const char *fill_json;
    uint8_t fill[8];
    bool index_at_start, crc;
    enum layout_order order;
    uint64_t missing_mod, missing_rem; /* shard s absent if s % mod == rem (mod 0: none) */
    uint64_t empty_mod, empty_rem;     /* inner chunk empty if (7 s + i) % mod == rem */
    uint64_t seed;
};

struct fx {
    struct sm_store *s;
    struct sm_array *a;
    struct sm_scratch *scr;
    struct sm_err err;
    struct sm_array_opts opts;
    struct sm_test_ref ref;
    struct sspec sp;
    uint64_t n_inner; /* per shard */
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

#define BYTES_LE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"

/* A sharding_indexed codec object around `inner_codecs`. */
static void sharding_json(char *buf, size_t cap, unsigned nd, const uint64_t *inner,
                          const char *inner_codecs, bool crc, bool at_start)
{
    char ishape[256];
    json_dims(ishape, sizeof(ishape), nd, inner);
    snprintf(buf, cap,
             "{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":%s,\"codecs\":[%s],"
             "\"index_codecs\":[" BYTES_LE "%s],\"index_location\":\"%s\"}}",
             ishape, inner_codecs, crc ? ",{\"name\":\"crc32c\"}" : "", at_start ? "start" : "end");
}

static void write_zarr_json(struct fx *f, const char *path, const char *dtype, unsigned nd,
                            const uint64_t *shape, const uint64_t *shard, const char *fill_json,
                            const char *codec)
{
    char shp[256], grid[256], doc[4096], key[512];
    json_dims(shp, sizeof(shp), nd, shape);
    json_dims(grid, sizeof(grid), nd, shard);
    snprintf(doc, sizeof(doc),
             "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":%s,\"data_type\":\"%s\","
             "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":%s}},"
             "\"chunk_key_encoding\":{\"name\":\"default\",\"configuration\":{\"separator\":"
             "\"/\"}},\"fill_value\":%s,\"codecs\":[%s]}",
             shp, dtype, grid, fill_json, codec);
    snprintf(key, sizeof(key), "%s%szarr.json", path, path[0] != '\0' ? "/" : "");
    sm_test_put_str(f->s, key, doc);
}

/* The write order of n inner chunks. */
static void make_order(enum layout_order o, size_t n, size_t *order, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        order[i] = o == ORDER_REVERSE ? n - 1 - i : i;
    }
    if (o == ORDER_SHUFFLE) {
        struct sm_test_rng rng = {seed};
        for (size_t i = n; i > 1; i--) {
            size_t j = (size_t)sm_test_rng_below(&rng, i);
            size_t t = order[i - 1];
            order[i - 1] = order[j];
            order[j] = t;
        }
    }
}

/* Builds one shard at shard_origin from the reference: inner chunks cut from f->ref (those that
 * are empty by the spec's rule become fill in the reference). */
static uint8_t *build_shard(struct fx *f, uint64_t slin, const uint64_t *shard_origin, size_t *len)
{
    const struct sspec *sp = &f->sp;
    uint64_t cps[SM_TEST_MAXD], ii[SM_TEST_MAXD] = {0};
    size_t n = 1, inner_elems = 1;
    for (unsigned d = 0; d < sp->ndim; d++) {
        cps[d] = sp->shard[d] / sp->inner[d];
        n *= (size_t)cps[d];
        inner_elems *= (size_t)sp->inner[d];
    }
    struct sm_test_blob *blobs = test_calloc(n, sizeof(*blobs));
    uint8_t *payload = test_malloc(n * inner_elems * sp->elem);
    size_t lin = 0;
    do {
        uint64_t origin[SM_TEST_MAXD];
        for (unsigned d = 0; d < sp->ndim; d++) {
            origin[d] = shard_origin[d] + ii[d] * sp->inner[d];
        }
        if (sp->empty_mod != 0 && (7 * slin + lin) % sp->empty_mod == sp->empty_rem) {
            sm_test_ref_fill_box(&f->ref, origin, sp->inner, sp->fill);
        } else {
            uint8_t *p = payload + lin * inner_elems * sp->elem;
            sm_test_ref_chunk(&f->ref, origin, sp->inner, p);
            blobs[lin] = (struct sm_test_blob){p, inner_elems * sp->elem};
        }
        lin++;
    } while (sm_test_next(sp->ndim, cps, ii));
    size_t *order = test_malloc(n * sizeof(size_t));
    make_order(sp->order, n, order, sp->seed + slin);
    uint8_t *shard = sm_test_shard_build(blobs, n, order, sp->index_at_start, sp->crc, len);
    test_free(order);
    test_free(payload);
    test_free(blobs);
    return shard;
}

static void build(struct fx *f, const struct sspec *sp)
{
    f->sp = *sp;
    sm_test_ref_init(&f->ref, sp->ndim, sp->shape, sp->elem, sp->seed);
    char bytes[] = BYTES_LE, codec[1024];
    sharding_json(codec, sizeof(codec), sp->ndim, sp->inner, bytes, sp->crc, sp->index_at_start);
    write_zarr_json(f, sp->path, sp->dtype, sp->ndim, sp->shape, sp->shard, sp->fill_json, codec);
    uint64_t grid[SM_TEST_MAXD], si[SM_TEST_MAXD] = {0};
    f->n_inner = 1;
    for (unsigned d = 0; d < sp->ndim; d++) {
        grid[d] = (sp->shape[d] + sp->shard[d] - 1) / sp->shard[d];
        f->n_inner *= sp->shard[d] / sp->inner[d];
    }
    uint64_t slin = 0;
    do {
        uint64_t origin[SM_TEST_MAXD];
        for (unsigned d = 0; d < sp->ndim; d++) {
            origin[d] = si[d] * sp->shard[d];
        }
        if (sp->missing_mod != 0 && slin % sp->missing_mod == sp->missing_rem) {
            sm_test_ref_fill_box(&f->ref, origin, sp->shard, sp->fill);
        } else {
            size_t len;
            uint8_t *shard = build_shard(f, slin, origin, &len);
            char key[512];
            sm_test_chunk_key(key, sizeof(key), sp->path, "c", '/', sp->ndim, si);
            sm_test_put(f->s, key, shard, len);
            free(shard);
        }
        slin++;
    } while (sm_test_next(sp->ndim, grid, si));
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

static sm_status read_into(struct fx *f, const uint64_t *off, const uint64_t *ext, uint8_t *got)
{
    sm_err_clear(&f->err);
    return sm_array_read_region(f->a, off, ext, got, region_bytes(f, ext), f->scr, &f->err);
}

static void check_read(struct fx *f, const uint64_t *off, const uint64_t *ext)
{
    const size_t n = region_bytes(f, ext);
    uint8_t *got = test_malloc(n);
    uint8_t *want = test_malloc(n);
    sm_test_ref_extract(&f->ref, off, ext, want);
    assert_ok(read_into(f, off, ext, got), &f->err);
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

static void check_whole(struct fx *f)
{
    uint64_t off[SM_TEST_MAXD] = {0};
    check_read(f, off, f->sp.shape);
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

static uint64_t req(const struct fx *f, enum sm_io_class c)
{
    return sm_store_requests(f->s, c);
}

/* 2-d uint16 [19, 14], shards [8, 6], inner [2, 3]: a 3 x 3 shard grid (partial edge shards),
 * 4 x 2 = 8 inner chunks per shard, index 8 * 16 + 4 bytes. Fill 4242. No absences by default. */
static const struct sspec base_2d = {
    "",    "uint16", 2,       2, {19, 14}, {8, 6}, {2, 3}, "4242", {0x92, 0x10},
    false, true,     ORDER_C, 0, 0,        0,      0,      41};

static void test_shard_read_index_at_end_with_crc(void **state)
{
    struct fx *f = *state;
    build(f, &base_2d);
    check_whole(f);
    random_regions(f, 200, 1);
}

static void test_shard_read_index_at_start_with_crc(void **state)
{
    struct fx *f = *state;
    struct sspec sp = base_2d;
    sp.index_at_start = true;
    build(f, &sp);
    check_whole(f);
    random_regions(f, 200, 2);
}

static void test_shard_read_index_without_crc(void **state)
{
    struct fx *f = *state;
    struct sspec sp = base_2d;
    sp.crc = false;
    build(f, &sp);
    check_whole(f);
    struct sspec st = base_2d;
    st.crc = false;
    st.index_at_start = true;
    st.path = "start";
    sm_array_close(f->a);
    f->a = NULL;
    sm_test_ref_free(&f->ref);
    build(f, &st);
    check_whole(f);
}

static void test_shard_read_inner_chunks_in_any_byte_order(void **state)
{
    struct fx *f = *state;
    struct sspec sp = base_2d;
    sp.order = ORDER_SHUFFLE;
    sp.empty_mod = 5;
    sp.empty_rem = 2;
    build(f, &sp);
    check_whole(f);
    random_regions(f, 200, 3);
}

static void test_shard_read_empty_inner_chunks_are_fill(void **state)
{
    struct fx *f = *state;
    struct sspec sp = base_2d;
    sp.empty_mod = 3;
    sp.empty_rem = 1;
    build(f, &sp);
    check_whole(f);
    random_regions(f, 100, 4);
    /* inner chunk 1 of shard 0 ((7 * 0 + 1) % 3 == 1) is empty: y 0-1, x 3-5 */
    const uint64_t off[2] = {0, 3}, ext[2] = {2, 3};
    uint16_t got[6];
    const uint64_t p0 = req(f, SM_IO_PAYLOAD);
    assert_ok(read_into(f, off, ext, (uint8_t *)got), &f->err);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(got[i], 4242);
    }
    assert_int_equal(req(f, SM_IO_PAYLOAD), p0); /* no payload request for an empty chunk */
    struct sm_array_stats st;
    sm_array_stats(f->a, &st);
    assert_true(st.inner_chunks_missing > 0);
}

static void test_shard_read_missing_shard_is_fill(void **state)
{
    struct fx *f = *state;
    struct sspec sp = base_2d;
    sp.missing_mod = 4;
    sp.missing_rem = 0; /* shards 0, 4, 8 absent */
    build(f, &sp);
    const uint64_t off[2] = {1, 1}, ext[2] = {5, 4}; /* inside shard 0 */
    uint16_t got[20];
    assert_ok(read_into(f, off, ext, (uint8_t *)got), &f->err);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(got[i], 4242);
    }
    assert_int_equal(req(f, SM_IO_INDEX), 1); /* the index probe found nothing */
    assert_int_equal(sm_store_bytes(f->s, SM_IO_INDEX), 0);
    assert_int_equal(req(f, SM_IO_PAYLOAD), 0);
    struct sm_array_stats st;
    sm_array_stats(f->a, &st);
    assert_int_equal(st.chunks_missing, 1);
    check_whole(f);
}

static void test_shard_read_whole_shard_of_adjacent_chunks_is_one_payload_request(void **state)
{
    struct fx *f = *state;
    build(f, &base_2d);
    const uint64_t off[2] = {0, 0}, ext[2] = {8, 6}; /* shard (0, 0), all 8 inner chunks */
    check_read(f, off, ext);
    assert_int_equal(req(f, SM_IO_INDEX), 1);
    assert_int_equal(req(f, SM_IO_PAYLOAD), 1);
    assert_int_equal(sm_store_bytes(f->s, SM_IO_INDEX), 8 * 16 + 4);
    assert_int_equal(sm_store_bytes(f->s, SM_IO_PAYLOAD), 8 * 12);
    struct sm_array_stats st;
    sm_array_stats(f->a, &st);
    assert_int_equal(st.inner_chunks_read, 8);
}

static void test_shard_read_merges_only_byte_adjacent_chunks(void **state)
{
    struct fx *f = *state;
    build(f, &base_2d);
    /* inner (0,0) and (0,1): linear 0 and 1, adjacent bytes -> one run */
    const uint64_t off1[2] = {0, 1}, ext1[2] = {2, 4};
    check_read(f, off1, ext1);
    assert_int_equal(req(f, SM_IO_PAYLOAD), 1);
    /* inner (0,0) and (1,0): linear 0 and 2, a gap -> two runs (index now cached) */
    const uint64_t off2[2] = {0, 0}, ext2[2] = {4, 3};
    check_read(f, off2, ext2);
    assert_int_equal(req(f, SM_IO_PAYLOAD), 3);
    /* rows 0-3 of the inner grid, column 1: linear 1, 3, 5, 7 -> four runs */
    const uint64_t off3[2] = {0, 3}, ext3[2] = {8, 3};
    check_read(f, off3, ext3);
    assert_int_equal(req(f, SM_IO_PAYLOAD), 7);
    assert_int_equal(req(f, SM_IO_INDEX), 1);
}

static void test_shard_read_reverse_layout_reads_each_chunk_separately(void **state)
{
    struct fx *f = *state;
    struct sspec sp = base_2d;
    sp.order = ORDER_REVERSE;
    build(f, &sp);
    const uint64_t off[2] = {0, 0}, ext[2] = {8, 6};
    check_read(f, off, ext);
    assert_int_equal(req(f, SM_IO_INDEX), 1);
    assert_int_equal(req(f, SM_IO_PAYLOAD), 8);
}

static void test_shard_read_empty_chunks_do_not_split_a_run(void **state)
{
    struct fx *f = *state;
    struct sspec sp = base_2d;
    sp.empty_mod = 8;
    sp.empty_rem = 3; /* shard 0: inner chunk 3 empty; the others stay byte-adjacent */
    build(f, &sp);
    const uint64_t off[2] = {0, 0}, ext[2] = {8, 6};
    check_read(f, off, ext);
    assert_int_equal(req(f, SM_IO_PAYLOAD), 1);
    assert_int_equal(sm_store_bytes(f->s, SM_IO_PAYLOAD), 7 * 12);
}

static void test_shard_read_merged_runs_are_capped_at_8_mib(void **state)
{
    /* 9 byte-adjacent inner chunks of 1 MiB: the first run stops at 8 MiB, so two requests. */
    struct fx *f = *state;
    const struct sspec sp = {"big",      "uint8", 1,   1,     {9u << 20}, {9u << 20},
                             {1u << 20}, "0",     {0}, false, true,       ORDER_C,
                             0,          0,       0,   0,     81};
    build(f, &sp);
    check_whole(f);
    assert_int_equal(req(f, SM_IO_PAYLOAD), 2);
    assert_int_equal(sm_store_bytes(f->s, SM_IO_PAYLOAD), 9u << 20);
}

static void test_shard_read_index_cache_hits_on_second_read(void **state)
{
    struct fx *f = *state;
    build(f, &base_2d);
    const uint64_t off[2] = {9, 7}, ext[2] = {4, 4}; /* inside shard (1, 1) */
    check_read(f, off, ext);
    check_read(f, off, ext);
    assert_int_equal(req(f, SM_IO_INDEX), 1);
    struct sm_array_stats st;
    sm_array_stats(f->a, &st);
    assert_int_equal(st.index_cache_misses, 1);
    assert_int_equal(st.index_cache_hits, 1);
    assert_true(st.index_cache_peak_bytes >= 2 * 8 * sizeof(uint64_t));
    /* a whole-array read misses the 8 other shards once each */
    check_whole(f);
    sm_array_stats(f->a, &st);
    assert_int_equal(st.index_cache_hits, 2);
    assert_int_equal(st.index_cache_misses, 9);
    assert_int_equal(req(f, SM_IO_INDEX), 9);
}

static void test_shard_read_index_cache_disabled_reads_index_every_time(void **state)
{
    struct fx *f = *state;
    f->opts.index_cache_bytes = 0;
    build(f, &base_2d);
    const uint64_t off[2] = {9, 7}, ext[2] = {4, 4};
    check_read(f, off, ext);
    check_read(f, off, ext);
    assert_int_equal(req(f, SM_IO_INDEX), 2);
    struct sm_array_stats st;
    sm_array_stats(f->a, &st);
    assert_int_equal(st.index_cache_hits + st.index_cache_misses, 0);
}

/* Reads shard key "c/0/0" back, lets `patch` change it, and stores it again. */
static void rewrite_shard0(struct fx *f, void (*patch)(struct fx *, uint8_t *, size_t))
{
    struct sm_buf b = SM_BUF_INIT;
    bool found = false;
    assert_ok(sm_store_get(f->s, "c/0/0", sm_range_all(), SM_IO_META, &b, &found, &f->err),
              &f->err);
    assert_true(found);
    patch(f, b.ptr, b.len);
    sm_test_put(f->s, "c/0/0", b.ptr, b.len);
    sm_buf_free(&b);
}

static void patch_entry_past_end(struct fx *f, uint8_t *p, size_t len)
{
    sm_test_shard_patch(p, len, (size_t)f->n_inner, f->sp.index_at_start, f->sp.crc, 5, len - 6,
                        12);
}

static void patch_entry_overflowing(struct fx *f, uint8_t *p, size_t len)
{
    sm_test_shard_patch(p, len, (size_t)f->n_inner, f->sp.index_at_start, f->sp.crc, 0,
                        UINT64_MAX - 4, 12);
}

static void patch_entry_wrong_size(struct fx *f, uint8_t *p, size_t len)
{
    sm_test_shard_patch(p, len, (size_t)f->n_inner, f->sp.index_at_start, f->sp.crc, 0,
                        f->sp.index_at_start ? 8 * 16 + 4 : 0, 11);
}

static void patch_flip_index_byte(struct fx *f, uint8_t *p, size_t len)
{
    const size_t ilen = sm_test_shard_index_len((size_t)f->n_inner, f->sp.crc);
    uint8_t *index = f->sp.index_at_start ? p : p + len - ilen;
    index[17] ^= 0x01; /* entry 1's offset, CRC left stale */
}

static void expect_shard0_data_error(struct fx *f, const char *what)
{
    const uint64_t off[2] = {0, 0}, ext[2] = {8, 6};
    uint8_t got[8 * 6 * 2];
    assert_int_equal(read_into(f, off, ext, got), SM_E_DATA);
    assert_contains(f->err.where, "c/0/0");
    assert_contains(f->err.what, what);
}

static void test_shard_read_entry_past_end_is_data_error(void **state)
{
    struct fx *f = *state;
    build(f, &base_2d);
    rewrite_shard0(f, patch_entry_past_end);
    expect_shard0_data_error(f, "past");
}

static void test_shard_read_entry_past_end_with_index_at_start_is_data_error(void **state)
{
    struct fx *f = *state;
    struct sspec sp = base_2d;
    sp.index_at_start = true;
    build(f, &sp);
    rewrite_shard0(f, patch_entry_past_end);
    expect_shard0_data_error(f, "past");
}

static void test_shard_read_overflowing_entry_is_data_error(void **state)
{
    struct fx *f = *state;
    build(f, &base_2d);
    rewrite_shard0(f, patch_entry_overflowing);
    expect_shard0_data_error(f, "past");
}

static void test_shard_read_crc_mismatch_is_data_error(void **state)
{
    struct fx *f = *state;
    build(f, &base_2d);
    rewrite_shard0(f, patch_flip_index_byte);
    expect_shard0_data_error(f, "crc32c mismatch");
}

static void test_shard_read_inner_chunk_of_wrong_size_is_data_error(void **state)
{
    struct fx *f = *state;
    build(f, &base_2d);
    rewrite_shard0(f, patch_entry_wrong_size);
    const uint64_t off[2] = {0, 0}, ext[2] = {1, 1};
    uint8_t got[2];
    assert_int_equal(read_into(f, off, ext, got), SM_E_DATA);
    assert_contains(f->err.where, "c/0/0");
    assert_contains(f->err.where, "inner chunk");
}

static void test_shard_read_truncated_shard_is_data_error(void **state)
{
    struct fx *f = *state;
    build(f, &base_2d);
    sm_test_put(f->s, "c/0/0", "short", 5); /* shorter than the 132-byte index */
    const uint64_t off[2] = {0, 0}, ext[2] = {1, 1};
    uint8_t got[2];
    assert_int_equal(read_into(f, off, ext, got), SM_E_DATA);
    assert_contains(f->err.where, "c/0/0");
}

static void test_shard_read_truncated_shard_with_index_at_start_is_data_error(void **state)
{
    struct fx *f = *state;
    struct sspec sp = base_2d;
    sp.index_at_start = true;
    build(f, &sp);
    sm_test_put(f->s, "c/0/0", "short", 5);
    const uint64_t off[2] = {0, 0}, ext[2] = {1, 1};
    uint8_t got[2];
    assert_int_equal(read_into(f, off, ext, got), SM_E_DATA);
    assert_contains(f->err.where, "c/0/0");
}

static void test_shard_read_max_chunk_bytes_applies_to_inner_chunks(void **state)
{
    struct fx *f = *state;
    f->opts.limits.max_chunk_bytes = 12; /* an inner chunk; a shard decodes to 96 bytes */
    build(f, &base_2d);
    check_whole(f);
    sm_array_close(f->a);
    f->a = NULL;
    f->opts.limits.max_chunk_bytes = 11;
    assert_ok(sm_array_open(f->s, "", &f->opts, &f->a, &f->err), &f->err);
    const uint64_t off[2] = {0, 0}, ext[2] = {1, 1};
    uint8_t got[2];
    assert_int_equal(read_into(f, off, ext, got), SM_E_LIMIT);
    assert_contains(f->err.what, "limits.max_chunk_bytes");
}

static void test_shard_read_1d(void **state)
{
    struct fx *f = *state;
    const struct sspec sp = {"one", "uint8",       1, 1, {100}, {32}, {8}, "9", {9}, false,
                             true,  ORDER_SHUFFLE, 3, 2, 5,     4,    51};
    build(f, &sp);
    check_whole(f);
    random_regions(f, 300, 7);
}

static void test_shard_read_3d_with_absences_index_at_start(void **state)
{
    struct fx *f = *state;
    const struct sspec sp = {"three",   "float32",   4,
                             3,         {9, 10, 11}, {4, 4, 6},
                             {2, 2, 3}, "-1.0",      {0x00, 0x00, 0x80, 0xbf},
                             true,      true,        ORDER_REVERSE,
                             5,         3,           6,
                             1,         61};
    build(f, &sp);
    check_whole(f);
    random_regions(f, 300, 8);
}

static void test_shard_read_4d(void **state)
{
    struct fx *f = *state;
    const struct sspec sp = {"four",
                             "int16",
                             2,
                             4,
                             {3, 5, 4, 7},
                             {2, 4, 4, 4},
                             {1, 2, 2, 2},
                             "-3",
                             {0xfd, 0xff},
                             false,
                             false,
                             ORDER_C,
                             4,
                             1,
                             9,
                             5,
                             71};
    build(f, &sp);
    check_whole(f);
    random_regions(f, 200, 9);
}

/* ---- nested sharding: outer shard [8, 8] -> middle shards [4, 4] -> inner chunks [2, 2] ---- */

struct nested_spec {
    bool outer_at_start, middle_at_start;
    uint64_t empty_middle; /* middle chunk index left empty in every shard (4: none) */
};

static const uint64_t nested_shape[2] = {14, 8};

static void build_nested(struct fx *f, const struct nested_spec *ns)
{
    memset(&f->sp, 0, sizeof(f->sp));
    f->sp.path = "";
    f->sp.elem = 2;
    f->sp.ndim = 2;
    f->sp.shape[0] = nested_shape[0];
    f->sp.shape[1] = nested_shape[1];
    const uint8_t fill[2] = {0x34, 0x12}; /* 0x1234 */
    sm_test_ref_init(&f->ref, 2, nested_shape, 2, 777);
    const uint64_t inner[2] = {2, 2}, middle[2] = {4, 4}, outer[2] = {8, 8};
    char bytes[] = BYTES_LE, mid_codec[1024], codec[2048];
    sharding_json(mid_codec, sizeof(mid_codec), 2, inner, bytes, true, ns->middle_at_start);
    sharding_json(codec, sizeof(codec), 2, middle, mid_codec, true, ns->outer_at_start);
    write_zarr_json(f, "", "uint16", 2, nested_shape, outer, "4660", codec);
    for (uint64_t sy = 0; sy < 2; sy++) {
        struct sm_test_blob mids[4];
        uint8_t *mid_bytes[4] = {NULL};
        for (uint64_t m = 0; m < 4; m++) {
            const uint64_t morigin[2] = {sy * 8 + (m / 2) * 4, (m % 2) * 4};
            if (m == ns->empty_middle) {
                sm_test_ref_fill_box(&f->ref, morigin, middle, fill);
                mids[m] = (struct sm_test_blob){NULL, 0};
                continue;
            }
            struct sm_test_blob in[4];
            uint8_t payload[4][8];
            for (uint64_t i = 0; i < 4; i++) {
                const uint64_t iorigin[2] = {morigin[0] + (i / 2) * 2, morigin[1] + (i % 2) * 2};
                sm_test_ref_chunk(&f->ref, iorigin, inner, payload[i]);
                in[i] = (struct sm_test_blob){payload[i], 8};
            }
            size_t mlen;
            mid_bytes[m] = sm_test_shard_build(in, 4, NULL, ns->middle_at_start, true, &mlen);
            mids[m] = (struct sm_test_blob){mid_bytes[m], mlen};
        }
        size_t len;
        uint8_t *shard = sm_test_shard_build(mids, 4, NULL, ns->outer_at_start, true, &len);
        char key[32];
        snprintf(key, sizeof(key), "c/%llu/0", (unsigned long long)sy);
        sm_test_put(f->s, key, shard, len);
        free(shard);
        for (int m = 0; m < 4; m++) {
            free(mid_bytes[m]);
        }
    }
    assert_ok(sm_array_open(f->s, "", &f->opts, &f->a, &f->err), &f->err);
}

static void test_shard_read_nested_outer_index_at_start(void **state)
{
    struct fx *f = *state;
    const struct nested_spec ns = {true, false, 4};
    build_nested(f, &ns);
    check_whole(f);
    random_regions(f, 200, 10);
}

static void test_shard_read_nested_both_indexes_at_start(void **state)
{
    struct fx *f = *state;
    const struct nested_spec ns = {true, true, 4};
    build_nested(f, &ns);
    check_whole(f);
    random_regions(f, 100, 11);
}

static void test_shard_read_nested_empty_middle_chunk_is_fill(void **state)
{
    struct fx *f = *state;
    const struct nested_spec ns = {true, false, 2};
    build_nested(f, &ns);
    check_whole(f);
    const uint64_t off[2] = {4, 0}, ext[2] = {4, 4}; /* middle chunk 2 of shard 0 */
    uint16_t got[16];
    assert_ok(read_into(f, off, ext, (uint8_t *)got), &f->err);
    for (int i = 0; i < 16; i++) {
        assert_int_equal(got[i], 0x1234);
    }
}

static void test_shard_read_nested_reads_only_the_needed_innermost_chunk(void **state)
{
    struct fx *f = *state;
    const struct nested_spec ns = {true, false, 4};
    build_nested(f, &ns);
    const uint64_t off[2] = {5, 6}, ext[2] = {1, 2}; /* one innermost chunk of middle chunk 3 */
    check_read(f, off, ext);
    assert_int_equal(req(f, SM_IO_INDEX), 2); /* the outer index, then the middle one */
    assert_int_equal(req(f, SM_IO_PAYLOAD), 1);
    assert_int_equal(sm_store_bytes(f->s, SM_IO_PAYLOAD), 8);
    assert_int_equal(sm_store_bytes(f->s, SM_IO_INDEX), 2 * (4 * 16 + 4));
    /* again: both indexes come from the cache */
    check_read(f, off, ext);
    assert_int_equal(req(f, SM_IO_INDEX), 2);
    struct sm_array_stats st;
    sm_array_stats(f->a, &st);
    assert_int_equal(st.index_cache_hits, 2);
}

static void test_shard_read_nested_outer_index_at_end_without_cache(void **state)
{
    struct fx *f = *state;
    f->opts.index_cache_bytes = 0;
    const struct nested_spec ns = {false, false, 4};
    build_nested(f, &ns);
    check_whole(f);
    random_regions(f, 100, 12);
}

static void test_shard_read_nested_shard_at_byte_zero_with_cache(void **state)
{
    /* Regression: with the outer index at the end, the first middle shard starts at byte 0 of the
     * object, so its index has the same (key, base = 0) cache key as the outer index. Both have 4
     * entries, so the middle read must not be served the outer index from the cache. */
    struct fx *f = *state;
    const struct nested_spec ns = {false, false, 4};
    build_nested(f, &ns);
    const uint64_t off[2] = {0, 0}, ext[2] = {2, 2}; /* innermost chunk 0 of middle chunk 0 */
    check_read(f, off, ext);
    check_whole(f);
    random_regions(f, 100, 13);
}

static void test_shard_read_nested_stats_count_outer_shards_only(void **state)
{
    /* chunks_read counts stored objects (outer shards). With the outer index at the end, the
     * first middle shard starts at byte 0 and must not count as another stored object. The
     * cache is off so that this checks the counter alone. */
    struct fx *f = *state;
    f->opts.index_cache_bytes = 0;
    const struct nested_spec ns = {false, false, 4};
    build_nested(f, &ns);
    const uint64_t off[2] = {0, 0}, ext[2] = {4, 8}; /* middle chunks 0 and 1 of shard 0 */
    check_read(f, off, ext);
    struct sm_array_stats st;
    sm_array_stats(f->a, &st);
    assert_int_equal(st.chunks_read, 1);
    assert_int_equal(st.inner_chunks_read, 8);
}

static void test_shard_read_nested_stats_with_outer_index_at_start(void **state)
{
    struct fx *f = *state;
    const struct nested_spec ns = {true, false, 4};
    build_nested(f, &ns);
    const uint64_t off[2] = {0, 0}, ext[2] = {4, 8};
    check_read(f, off, ext);
    struct sm_array_stats st;
    sm_array_stats(f->a, &st);
    assert_int_equal(st.chunks_read, 1);
    assert_int_equal(st.inner_chunks_read, 8);
}

/* ---- threads ---- */

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
    struct sm_test_rng rng = {r->id + 200};
    uint8_t *got = malloc(r->ref->nbytes), *want = malloc(r->ref->nbytes);
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
    free(got);
    free(want);
    sm_scratch_free(scr);
    return NULL;
}

static void test_shard_read_threads_share_the_index_cache(void **state)
{
    struct fx *f = *state;
    f->opts.index_cache_entries = 3; /* fewer than the 9 shards: constant eviction */
    struct sspec sp = base_2d;
    sp.order = ORDER_SHUFFLE;
    sp.empty_mod = 4;
    sp.empty_rem = 3;
    sp.missing_mod = 7;
    sp.missing_rem = 5;
    build(f, &sp);
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

/* Reads [off, off + ext) with `threads` read threads (the array reopened with them): status and
 * bytes into got, and the error message into what. */
static sm_status read_with_threads(struct fx *f, unsigned threads, const uint64_t *off,
                                   const uint64_t *ext, uint8_t *got, char *what, size_t cap)
{
    f->opts.read_threads = threads;
    sm_array_close(f->a);
    assert_ok(sm_array_open(f->s, f->sp.path, &f->opts, &f->a, &f->err), &f->err);
    sm_status st = read_into(f, off, ext, got);
    snprintf(what, cap, "%s | %s", f->err.where, f->err.what);
    return st;
}

/* One thread and two threads give the same bytes (and the reference): across shards (objects
 * in parallel), inside one shard (inner chunks of a run in parallel), with empty inner chunks,
 * absent shards and a shuffled layout; and a corrupt shard gives the same error either way. */
static void test_shard_read_one_and_two_threads_give_identical_bytes(void **state)
{
    struct fx *f = *state;
    struct sspec sp = base_2d;
    sp.shape[0] = 40;
    sp.shape[1] = 30;
    sp.order = ORDER_SHUFFLE;
    sp.empty_mod = 5;
    sp.empty_rem = 2;
    sp.missing_mod = 6;
    sp.missing_rem = 4;
    build(f, &sp);
    const uint64_t regions[][4] = {
        {0, 0, 40, 30}, /* every shard: objects in parallel */
        {1, 2, 37, 25}, /* unaligned */
        {8, 6, 8, 6},   /* exactly one shard: its inner chunks in parallel */
        {9, 7, 5, 4},   /* inside one shard, unaligned */
        {7, 5, 3, 3},   /* four shards: fewer than 2 per thread, inner chunks in parallel */
    };
    for (size_t i = 0; i < sizeof(regions) / sizeof(regions[0]); i++) {
        const uint64_t *off = regions[i], *ext = regions[i] + 2;
        const size_t n = region_bytes(f, ext);
        uint8_t *one = test_malloc(n), *two = test_malloc(n), *want = test_malloc(n);
        char w1[600], w2[600];
        assert_int_equal(read_with_threads(f, 1, off, ext, one, w1, sizeof(w1)), SM_OK);
        assert_int_equal(read_with_threads(f, 2, off, ext, two, w2, sizeof(w2)), SM_OK);
        sm_test_ref_extract(&f->ref, off, ext, want);
        assert_memory_equal(one, two, n);
        assert_memory_equal(two, want, n);
        test_free(one);
        test_free(two);
        test_free(want);
    }
    /* shard c/0/0 corrupt: the same first error with 1 and 2 threads */
    rewrite_shard0(f, patch_flip_index_byte);
    const uint64_t off[2] = {0, 0}, ext[2] = {40, 30};
    uint8_t *got = test_malloc(region_bytes(f, ext));
    char w1[600], w2[600];
    assert_int_equal(read_with_threads(f, 1, off, ext, got, w1, sizeof(w1)), SM_E_DATA);
    assert_int_equal(read_with_threads(f, 2, off, ext, got, w2, sizeof(w2)), SM_E_DATA);
    assert_string_equal(w1, w2);
    assert_contains(w2, "c/0/0");
    test_free(got);
}

/* A store over the fixture's mem store whose shard-index reads are slow: the first one waits for
 * the test's second reader to start its read, then a little more, so that without single-flight
 * both readers would miss the index cache and fetch. Counted by the dispatch like any store. */
static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

struct slow_store {
    struct sm_store base;
    struct sm_store *inner;
    atomic_int second_started;
};

static sm_status slow_get(struct sm_store *s, const char *key, struct sm_range r,
                          enum sm_io_class cls, struct sm_buf *out, bool *found, uint64_t *objsize,
                          struct sm_err *err)
{
    struct slow_store *ss = (struct slow_store *)s;
    if (cls == SM_IO_INDEX) {
        for (int i = 0; i < 2000 && atomic_load(&ss->second_started) == 0; i++) {
            sleep_us(1000);
        }
        sleep_us(50000);
    }
    return sm_store_get_sized(ss->inner, key, r, cls, out, found, objsize, err);
}

static void slow_close(struct sm_store *s)
{
    (void)s;
}

static const struct sm_store_ops slow_ops = {
    .scheme = "slow",
    .caps = SM_STORE_RANGE | SM_STORE_THREADSAFE,
    .get = slow_get,
    .close = slow_close,
};

struct sf_reader {
    struct sm_array *a;
    struct slow_store *ss;
    bool second;
    uint8_t got[8 * 6 * 2];
    sm_status st;
};

static void *sf_worker(void *arg)
{
    struct sf_reader *r = arg;
    struct sm_scratch *scr = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    r->st = sm_scratch_new(&scr, &err);
    if (r->second) {
        atomic_store(&r->ss->second_started, 1);
    }
    const uint64_t off[2] = {0, 0}, ext[2] = {8, 6};
    if (r->st == SM_OK) {
        r->st = sm_array_read_region(r->a, off, ext, r->got, sizeof(r->got), scr, &err);
    }
    sm_scratch_free(scr);
    return NULL;
}

/* Two threads miss the same shard index together: one fetch (the store's index counter), one
 * miss and one hit; both read the right bytes. */
static void test_shard_read_concurrent_index_misses_fetch_once(void **state)
{
    struct fx *f = *state;
    build(f, &base_2d);
    static char url[] = "slow";
    struct slow_store ss;
    memset(&ss, 0, sizeof(ss));
    ss.base.ops = &slow_ops;
    ss.base.url = url;
    ss.inner = f->s;
    struct sm_array *a = NULL;
    f->opts.read_threads = 1;
    assert_ok(sm_array_open(&ss.base, "", &f->opts, &a, &f->err), &f->err);
    struct sf_reader r[2] = {{a, &ss, false, {0}, SM_OK}, {a, &ss, true, {0}, SM_OK}};
    pthread_t th[2];
    assert_int_equal(pthread_create(&th[0], NULL, sf_worker, &r[0]), 0);
    sleep_us(5000); /* the first reader is (usually) the one that fetches */
    assert_int_equal(pthread_create(&th[1], NULL, sf_worker, &r[1]), 0);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    uint8_t want[8 * 6 * 2];
    const uint64_t off[2] = {0, 0}, ext[2] = {8, 6};
    sm_test_ref_extract(&f->ref, off, ext, want);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(r[i].st, SM_OK);
        assert_memory_equal(r[i].got, want, sizeof(want));
    }
    assert_int_equal(sm_store_requests(&ss.base, SM_IO_INDEX), 1);
    struct sm_array_stats st;
    sm_array_stats(a, &st);
    assert_int_equal(st.index_cache_misses, 1);
    assert_int_equal(st.index_cache_hits, 1);
    sm_array_close(a);
}

static void test_shard_read_allocation_failures_are_nomem_without_leaks(void **state)
{
    struct fx *f = *state;
    struct sspec sp = base_2d;
    sp.empty_mod = 5;
    sp.empty_rem = 1;
    build(f, &sp);
    const uint64_t off[2] = {3, 2}, ext[2] = {10, 9};
    uint8_t *got = test_malloc(10 * 9 * 2);
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0 with a cold index cache; pass 1 warm. A first good read sizes the scratch
         * buffers (per-thread state that persists) and, in pass 1, fills the cache. */
        if (pass == 1) {
            check_read(f, off, ext);
        }
        for (uint64_t n = 1; n <= 30; n++) {
            const uint64_t base = sm_alloc_current();
            sm_alloc_fail_at(n);
            sm_status st = read_into(f, off, ext, got);
            sm_alloc_fail_at(0);
            assert_true(st == SM_OK || st == SM_E_NOMEM);
            /* only cache insertions and scratch growth may stay behind */
            if (pass == 1) {
                assert_int_equal(sm_alloc_current(), base);
            } else {
                assert_true(sm_alloc_current() >= base);
            }
        }
    }
    test_free(got);
    check_read(f, off, ext);
}

static void test_shard_read_references_of_many_tiny_inner_chunks_stay_bounded(void **state)
{
    struct fx *f = *state;
    /* 300,000 single-element inner chunks in one shard, read whole: references are held 65,536 at
     * a time (24 bytes each), so the one byte-adjacent run is read in 5 pieces and the read needs
     * about the index (4.8 MB, held a few times) rather than 300,000 references. */
    const struct sspec sp = {"",    "uint8", 1,       1, {300000}, {300000}, {1}, "0", {0},
                             false, true,    ORDER_C, 0, 0,        0,        0,   77};
    f->opts.index_cache_bytes = 0;
    build(f, &sp);
    const uint64_t off[1] = {0}, ext[1] = {300000};
    const uint64_t before = sm_alloc_current();
    sm_alloc_reset_peak();
    check_read(f, off, ext);
    const uint64_t used = sm_alloc_peak() - before;
    if (used > (32u << 20)) {
        fail_msg("the read allocated %llu bytes", (unsigned long long)used);
    }
    assert_int_equal(req(f, SM_IO_INDEX), 1);
    assert_int_equal(req(f, SM_IO_PAYLOAD), 5); /* ceil(300000 / 65536) */
    assert_int_equal(sm_store_bytes(f->s, SM_IO_PAYLOAD), 300000);
}

/* Reads [0, 1) expecting `status` with `what` in the message and "c/0" in `where`, allocating
 * less than 64 KiB on the way. */
static void expect_refused_small(struct fx *f, sm_status status, const char *what)
{
    sm_array_close(f->a);
    f->a = NULL;
    assert_ok(sm_array_open(f->s, "", &f->opts, &f->a, &f->err), &f->err);
    const uint64_t off[1] = {0}, ext[1] = {1};
    uint8_t got[1];
    const uint64_t before = sm_alloc_current();
    sm_alloc_reset_peak();
    assert_int_equal(read_into(f, off, ext, got), status);
    assert_contains(f->err.what, what);
    assert_contains(f->err.where, "c/0");
    if (sm_alloc_peak() - before > (64 << 10)) {
        fail_msg("the refused read allocated %llu bytes",
                 (unsigned long long)(sm_alloc_peak() - before));
    }
}

static void huge_index_array(struct fx *f, uint64_t entries, bool at_start)
{
    f->sp.elem = 1;
    f->sp.ndim = 1;
    const uint64_t shape[1] = {entries}, inner[1] = {1};
    char codec[1024];
    sharding_json(codec, sizeof(codec), 1, inner, BYTES_LE, true, at_start);
    write_zarr_json(f, "", "uint8", 1, shape, shape, "0", codec);
    uint8_t junk[100];
    memset(junk, 0x5a, sizeof(junk));
    sm_test_put(f->s, "c/0", junk, sizeof(junk));
}

static void test_shard_read_declared_huge_index_is_refused_before_allocating(void **state)
{
    struct fx *f = *state;
    const uint64_t entries[2] = {(uint64_t)1 << 31, (uint64_t)1 << 59};
    for (int e = 0; e < 2; e++) {
        for (int at_start = 0; at_start < 2; at_start++) {
            for (int cache = 0; cache < 2; cache++) {
                huge_index_array(f, entries[e], at_start != 0);
                f->opts.index_cache_bytes = cache ? 16u << 20 : 0;
                f->opts.limits.max_object_bytes = 512u << 20;
                expect_refused_small(f, SM_E_LIMIT, "exceeds limits.max_object_bytes");
                assert_contains(f->err.what, "inner chunks");
                assert_contains(f->err.where, "(shard index)");
                /* without the limit, the shard's own 100 bytes refuse it */
                f->opts.limits.max_object_bytes = 0;
                expect_refused_small(f, SM_E_DATA, at_start ? "past the end" : "shorter than");
            }
        }
    }
}

static void test_shard_read_declared_huge_nested_index_is_refused_before_allocating(void **state)
{
    struct fx *f = *state;
    /* An outer shard of 2 inner chunks of 2^31 elements, each itself sharded into 2^31 chunks of 1
     * element; the outer shard holds a 50-byte "nested shard" and an index of 2 entries. */
    const uint64_t shape[1] = {(uint64_t)1 << 32}, outer_inner[1] = {(uint64_t)1 << 31};
    const uint64_t one[1] = {1};
    char nested[1024], codec[2048];
    sharding_json(nested, sizeof(nested), 1, one, BYTES_LE, false, false);
    sharding_json(codec, sizeof(codec), 1, outer_inner, nested, false, false);
    write_zarr_json(f, "", "uint8", 1, shape, shape, "0", codec);
    f->sp.elem = 1;
    f->sp.ndim = 1;
    uint8_t shard[50 + 32];
    memset(shard, 0x5a, 50);
    const uint64_t index[4] = {0, 50, UINT64_MAX, UINT64_MAX};
    memcpy(shard + 50, index, sizeof(index)); /* little-endian host */
    sm_test_put(f->s, "c/0", shard, sizeof(shard));
    expect_refused_small(f, SM_E_LIMIT, "an index of 2147483648 inner chunks");
    f->opts.limits.max_object_bytes = 0;
    expect_refused_small(f, SM_E_DATA, "nested shard of 50 bytes is shorter than its");
    assert_contains(f->err.where, "(shard index)");
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_shard_read_index_at_end_with_crc),
        T(test_shard_read_index_at_start_with_crc),
        T(test_shard_read_index_without_crc),
        T(test_shard_read_inner_chunks_in_any_byte_order),
        T(test_shard_read_empty_inner_chunks_are_fill),
        T(test_shard_read_missing_shard_is_fill),
        T(test_shard_read_whole_shard_of_adjacent_chunks_is_one_payload_request),
        T(test_shard_read_merges_only_byte_adjacent_chunks),
        T(test_shard_read_reverse_layout_reads_each_chunk_separately),
        T(test_shard_read_empty_chunks_do_not_split_a_run),
        T(test_shard_read_merged_runs_are_capped_at_8_mib),
        T(test_shard_read_index_cache_hits_on_second_read),
        T(test_shard_read_index_cache_disabled_reads_index_every_time),
        T(test_shard_read_entry_past_end_is_data_error),
        T(test_shard_read_entry_past_end_with_index_at_start_is_data_error),
        T(test_shard_read_overflowing_entry_is_data_error),
        T(test_shard_read_crc_mismatch_is_data_error),
        T(test_shard_read_inner_chunk_of_wrong_size_is_data_error),
        T(test_shard_read_truncated_shard_is_data_error),
        T(test_shard_read_truncated_shard_with_index_at_start_is_data_error),
        T(test_shard_read_max_chunk_bytes_applies_to_inner_chunks),
        T(test_shard_read_1d),
        T(test_shard_read_3d_with_absences_index_at_start),
        T(test_shard_read_4d),
        T(test_shard_read_nested_outer_index_at_start),
        T(test_shard_read_nested_both_indexes_at_start),
        T(test_shard_read_nested_empty_middle_chunk_is_fill),
        T(test_shard_read_nested_reads_only_the_needed_innermost_chunk),
        T(test_shard_read_nested_outer_index_at_end_without_cache),
        T(test_shard_read_nested_shard_at_byte_zero_with_cache),
        T(test_shard_read_nested_stats_count_outer_shards_only),
        T(test_shard_read_nested_stats_with_outer_index_at_start),
        T(test_shard_read_threads_share_the_index_cache),
        T(test_shard_read_one_and_two_threads_give_identical_bytes),
        T(test_shard_read_concurrent_index_misses_fetch_once),
        T(test_shard_read_allocation_failures_are_nomem_without_leaks),
        T(test_shard_read_declared_huge_index_is_refused_before_allocating),
        T(test_shard_read_references_of_many_tiny_inner_chunks_stay_bounded),
        T(test_shard_read_declared_huge_nested_index_is_refused_before_allocating),
    };
    return cmocka_run_group_tests_name("array_shard_read", tests, NULL, NULL);
}
