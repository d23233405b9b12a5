/* Unit tests for engine/tile/tile_memo.c: reads through the per-thread chunk memo give exactly
 * what sm_array_read_region gives (random regions over a v2 uint16 array in the mem store, one
 * chunk missing so the fill value shows), units decoded once for regions smaller than a chunk
 * (chunks_read counted by the array), the slot bound, and no memo under two units of budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include <shardmill/array.h>
#include <shardmill/store.h>
#include <shardmill/tile.h>

static const uint64_t SHAPE[3] = {10, 12, 14}, CH[3] = {4, 5, 6};
#define UNIT_BYTES (4 * 5 * 6 * 2)

struct fx {
    struct sm_store *s;
    struct sm_array *a;
    struct sm_scratch *scratch;
    struct sm_err err;
};

static uint16_t value_at(uint64_t z, uint64_t y, uint64_t x)
{
    return (uint16_t)((z * SHAPE[1] + y) * SHAPE[2] + x + 1);
}

static int setup(void **state)
{
    static struct fx f;
    memset(&f, 0, sizeof(f));
    sm_err_clear(&f.err);
    if (sm_store_mem_new(&f.s, &f.err) != SM_OK) {
        return -1;
    }
    const char *zarray = "{\"zarr_format\": 2, \"shape\": [10, 12, 14], \"chunks\": [4, 5, 6], "
                         "\"dtype\": \"<u2\", \"compressor\": null, \"fill_value\": 9, "
                         "\"order\": \"C\", \"filters\": null}";
    if (sm_store_put(f.s, ".zarray", sm_bytes_of(zarray, strlen(zarray)), false, &f.err) != SM_OK) {
        return -1;
    }
    for (uint64_t cz = 0; cz < 3; cz++) {
        for (uint64_t cy = 0; cy < 3; cy++) {
            for (uint64_t cx = 0; cx < 3; cx++) {
                if (cz == 1 && cy == 1 && cx == 1) {
                    continue; /* missing: reads as the fill value 9 */
                }
                uint16_t c[4 * 5 * 6];
                for (uint64_t z = 0; z < 4; z++) {
                    for (uint64_t y = 0; y < 5; y++) {
                        for (uint64_t x = 0; x < 6; x++) {
                            c[(z * 5 + y) * 6 + x] = value_at(cz * 4 + z, cy * 5 + y,
                                                              cx * 6 + x); /* past the edge: junk */
                        }
                    }
                }
                char key[64];
                snprintf(key, sizeof(key), "%d.%d.%d", (int)cz, (int)cy, (int)cx);
                if (sm_store_put(f.s, key, sm_bytes_of(c, sizeof(c)), false, &f.err) != SM_OK) {
                    return -1;
                }
            }
        }
    }
    const struct sm_array_opts opts = SM_ARRAY_OPTS_DEFAULTS;
    if (sm_array_open(f.s, "", &opts, &f.a, &f.err) != SM_OK ||
        sm_array_scratch_new(&f.scratch, &f.err) != SM_OK) {
        return -1;
    }
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    sm_array_scratch_free(f->scratch);
    sm_array_close(f->a);
    sm_store_close(f->s);
    return 0;
}

static uint64_t below(uint64_t *rng, uint64_t n)
{
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    return (*rng >> 33) % n;
}

static void test_memo_reads_equal_plain_reads(void **state)
{
    struct fx *f = *state;
    const struct sm_array_meta *m = sm_array_meta(f->a);
    struct sm_chunk_memo *mo = NULL;
    assert_int_equal(sm_chunk_memo_new(m, 3 * UNIT_BYTES, &mo, &f->err), SM_OK);
    assert_non_null(mo);
    static uint16_t a[10 * 12 * 14], b[10 * 12 * 14];
    uint64_t rng = 11;
    for (int k = 0; k < 400; k++) {
        uint64_t off[3], shp[3];
        size_t n = 1;
        for (int d = 0; d < 3; d++) {
            off[d] = below(&rng, SHAPE[d]);
            shp[d] = 1 + below(&rng, k % 3 == 0
                                         ? SHAPE[d] - off[d]
                                         : (CH[d] < SHAPE[d] - off[d] ? CH[d] : SHAPE[d] - off[d]));
            n *= (size_t)shp[d];
        }
        assert_int_equal(sm_chunk_memo_read(mo, f->a, off, shp, a, n * 2, f->scratch, &f->err),
                         SM_OK);
        assert_int_equal(sm_array_read_region(f->a, off, shp, b, n * 2, f->scratch, &f->err),
                         SM_OK);
        assert_memory_equal(a, b, n * 2);
        /* and against the values written (the missing chunk is the fill value) */
        for (uint64_t z = 0; z < shp[0]; z++) {
            for (uint64_t y = 0; y < shp[1]; y++) {
                for (uint64_t x = 0; x < shp[2]; x++) {
                    const uint64_t Z = off[0] + z, Y = off[1] + y, X = off[2] + x;
                    const bool hole = Z / 4 == 1 && Y / 5 == 1 && X / 6 == 1;
                    assert_int_equal(a[(z * shp[1] + y) * shp[2] + x],
                                     hole ? 9 : value_at(Z, Y, X));
                }
            }
        }
    }
    uint64_t hits, misses;
    sm_chunk_memo_counts(mo, &hits, &misses);
    assert_true(hits > 0 && misses > 0);
    sm_chunk_memo_free(mo);
}

static void test_small_regions_decode_each_chunk_once(void **state)
{
    struct fx *f = *state;
    const struct sm_array_meta *m = sm_array_meta(f->a);
    struct sm_chunk_memo *mo = NULL;
    assert_int_equal(sm_chunk_memo_new(m, 1 << 20, &mo, &f->err), SM_OK);
    struct sm_array_stats s0, s1;
    sm_array_stats(f->a, &s0);
    /* the first chunk (present) in 2x5x3 tiles: 2 * 1 * 2 = 4 tiles, one decode */
    uint16_t buf[4 * 5 * 6];
    for (uint64_t z = 0; z < 4; z += 2) {
        for (uint64_t x = 0; x < 6; x += 3) {
            const uint64_t off[3] = {z, 0, x}, shp[3] = {2, 5, 3};
            assert_int_equal(
                sm_chunk_memo_read(mo, f->a, off, shp, buf, sizeof(buf) / 4, f->scratch, &f->err),
                SM_OK);
        }
    }
    sm_array_stats(f->a, &s1);
    assert_int_equal(s1.chunks_read - s0.chunks_read, 1);
    uint64_t hits, misses;
    sm_chunk_memo_counts(mo, &hits, &misses);
    assert_int_equal(misses, 1);
    assert_int_equal(hits, 3);
    sm_chunk_memo_free(mo);
}

static void test_budget_bounds_the_slots(void **state)
{
    struct fx *f = *state;
    const struct sm_array_meta *m = sm_array_meta(f->a);
    assert_int_equal(sm_chunk_memo_slots(m, 2 * UNIT_BYTES - 1), 0);
    assert_int_equal(sm_chunk_memo_slots(m, 2 * UNIT_BYTES), 1);
    assert_int_equal(sm_chunk_memo_slots(m, 5 * UNIT_BYTES), 4);
    assert_int_equal(sm_chunk_memo_slots(m, 1 << 30), 16);
    struct sm_chunk_memo *mo = (struct sm_chunk_memo *)1;
    assert_int_equal(sm_chunk_memo_new(m, UNIT_BYTES, &mo, &f->err), SM_OK);
    assert_null(mo); /* no memo: reads go straight to the array */
    uint16_t v;
    const uint64_t off[3] = {0, 0, 0}, shp[3] = {1, 1, 1};
    assert_int_equal(sm_chunk_memo_read(NULL, f->a, off, shp, &v, 2, f->scratch, &f->err), SM_OK);
    assert_int_equal(v, value_at(0, 0, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memo_reads_equal_plain_reads),
        cmocka_unit_test(test_small_regions_decode_each_chunk_once),
        cmocka_unit_test(test_budget_bounds_the_slots),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
