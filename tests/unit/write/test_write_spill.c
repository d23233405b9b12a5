/* Unit tests of the pyramid's spill (engine/write/write_spill.c, sm_writer_spill_level in
 * write_spec.c, the driver's sm_write_job.spill): which level a group writer can make in the
 * write phase (even shard extents on the halved axes, one shard across an odd one, none after
 * the last level), the file's blocks round trip at fixed offsets and survive a reopen, a block no
 * rank wrote is SM_E_IO naming the file, the file sits in .shardmill/ and is removed (twice is
 * fine), and the driver hands the spill each job shard's last level once. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>
#include <stdio.h>
#include <unistd.h>

#include "sm_test.h"
#include "write_test.h"

/* Level specs of a 3-level pyramid of a 20 x 70 x 45 level 0, every axis halved; shards
 * sz x sy x sx (chunks the same) on every level. */
static void levels_of(struct sm_output_spec *lv, uint64_t sz, uint64_t sy, uint64_t sx)
{
    lv[0] = wt_spec(20, 70, 45);
    lv[1] = wt_spec(10, 35, 23);
    lv[2] = wt_spec(5, 18, 12);
    for (unsigned k = 0; k < 3; k++) {
        const uint64_t s[3] = {sz, sy, sx};
        for (unsigned d = 0; d < 3; d++) {
            lv[k].shard[d] = lv[k].chunk[d] = s[d];
        }
    }
}

static unsigned spill_of(const struct sm_output_spec *lv, unsigned n)
{
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_writer *g;
    assert_ok(sm_writer_new_group(lv, n, NULL, &g, &err), &err);
    const unsigned s = sm_writer_spill_level(g);
    sm_writer_free(g);
    return s;
}

static void test_spill_level(void **state)
{
    (void)state;
    struct sm_output_spec lv[3];
    levels_of(lv, 8, 32, 32); /* no level on level 0's grid, even shards: level 1 */
    assert_int_equal(spill_of(lv, 3), 1);
    assert_int_equal(spill_of(lv, 2), 1);
    assert_int_equal(spill_of(lv, 1), 0); /* no level 1 */
    levels_of(lv, 7, 32, 32);             /* shards of 7 along z split z's blocks */
    assert_int_equal(spill_of(lv, 3), 0);
    levels_of(lv, 8, 32, 45); /* x: one shard of 45 across the axis, so no block is split */
    assert_int_equal(spill_of(lv, 3), 1);
    levels_of(lv, 8, 32, 32);
    lv[1].shape[0] = lv[2].shape[0] = 20; /* z kept (downsample yx): its odd shards are fine */
    for (unsigned k = 0; k < 3; k++) {
        lv[k].shard[0] = lv[k].chunk[0] = 5;
    }
    assert_int_equal(spill_of(lv, 3), 1);
    /* levels 0 and 1 on one grid (made together), level 2 its own: level 2 spills when level 1's
     * shards are even (4 x 16 x 16) */
    levels_of(lv, 8, 32, 32);
    for (unsigned d = 0; d < 3; d++) {
        lv[1].shard[d] = lv[1].chunk[d] = lv[0].shard[d] / 2;
    }
    lv[2].shard[2] = lv[2].chunk[2] = 16;
    assert_int_equal(spill_of(lv, 3), 2);
}

static void test_spill_file(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    char dir[1024], path[1100], file[1200];
    assert_int_equal(sm_test_tmpdir("write-spill", dir, sizeof(dir)), 0);
    snprintf(path, sizeof(path), "%s/img.zarr", dir);
    snprintf(file, sizeof(file), "%s/.shardmill/spill-1", path);
    struct sm_output_spec lv[3];
    levels_of(lv, 8, 32, 32);
    struct sm_writer *g;
    assert_ok(sm_writer_new_group(lv, 3, NULL, &g, &err), &err);
    struct sm_output *o = wt_begin_image(path, g);
    struct sm_spill *s;
    assert_ok(sm_spill_open(o, 1, 64, true, &s, &err), &err);
    uint8_t a[64], b[64], got[64];
    memset(a, 0xa5, sizeof(a));
    for (unsigned i = 0; i < sizeof(b); i++) {
        b[i] = (uint8_t)i;
    }
    assert_ok(sm_spill_put(s, 3, b, sizeof(b), &err), &err); /* any order, holes between */
    assert_ok(sm_spill_put(s, 0, a, 40, &err), &err);        /* a short (edge) block */
    assert_status(sm_spill_put(s, 1, a, 65, &err), SM_E_INTERNAL, &err);
    sm_err_clear(&err);
    sm_spill_close(s);
    assert_int_equal(access(file, F_OK), 0);
    assert_ok(sm_spill_open(o, 1, 64, false, &s, &err), &err); /* read-only, as the pyramid */
    assert_ok(sm_spill_get(s, 3, got, sizeof(got), &err), &err);
    assert_memory_equal(got, b, sizeof(b));
    assert_ok(sm_spill_get(s, 0, got, 40, &err), &err);
    assert_memory_equal(got, a, 40);
    /* a block past the end (no rank wrote it): SM_E_IO naming the file */
    assert_status(sm_spill_get(s, 4, got, sizeof(got), &err), SM_E_IO, &err);
    assert_non_null(strstr(err.what, "spill-1"));
    sm_err_clear(&err);
    assert_status(sm_spill_put(s, 0, a, 8, &err), SM_E_IO, &err); /* opened read-only */
    sm_spill_close(s);
    sm_spill_close(NULL);
    assert_ok(sm_spill_remove(o, 1, &err), &err);
    assert_int_not_equal(access(file, F_OK), 0);
    assert_ok(sm_spill_remove(o, 1, &err), &err); /* gone already: fine */
    sm_output_close(o);
    sm_writer_free(g);
}

struct spill_calls {
    unsigned n;
    uint64_t seen[64];
    uint64_t len[64];
};

static sm_status zero_fill(void *user, int thread, uint64_t shard, const uint64_t *offset,
                           const uint64_t *shape, void *data, size_t len, struct sm_err *err)
{
    (void)user;
    (void)thread;
    (void)shard;
    (void)offset;
    (void)shape;
    (void)err;
    memset(data, 0, len);
    return SM_OK;
}

static sm_status count_spill(void *user, int thread, uint64_t shard,
                             const struct sm_level_box *last, struct sm_err *err)
{
    (void)thread;
    (void)err;
    struct spill_calls *c = user;
    const unsigned i = __atomic_fetch_add(&c->n, 1u, __ATOMIC_RELAXED);
    if (i < 64) {
        c->seen[i] = shard;
        c->len[i] = last->len;
    }
    return SM_OK;
}

static void test_spill_driver(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    char dir[1024], path[1100];
    assert_int_equal(sm_test_tmpdir("write-spill-driver", dir, sizeof(dir)), 0);
    snprintf(path, sizeof(path), "%s/img.zarr", dir);
    struct sm_output_spec lv[3];
    levels_of(lv, 8, 32, 32);
    struct sm_writer *g;
    assert_ok(sm_writer_new_group(lv, 3, NULL, &g, &err), &err);
    const struct sm_writer *l0 = sm_writer_level(g, 0);
    const uint64_t n0 = sm_writer_nshards(l0); /* 3 x 3 x 2 */
    assert_int_equal(n0, 18);
    for (int threads = 1; threads <= 2; threads++) {
        struct sm_output *o = wt_begin_image(path, g);
        struct spill_calls c = {0};
        struct sm_write_job job = {.first = 0,
                                   .count = n0,
                                   .threads = threads,
                                   .fill = zero_fill,
                                   .user = &c,
                                   .spill = count_spill};
        struct sm_write_result res;
        assert_ok(sm_write_shards(g, o, &job, &res, &err), &err);
        assert_int_equal(c.n, n0); /* once per shard, with that shard's values */
        uint64_t mask = 0;
        for (unsigned i = 0; i < c.n; i++) {
            mask |= (uint64_t)1 << c.seen[i];
            assert_int_equal(c.len[i], sm_writer_shard_bytes(l0, c.seen[i]));
        }
        assert_int_equal(mask, ((uint64_t)1 << n0) - 1);
        sm_output_close(o);
    }
    sm_writer_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spill_level),
        cmocka_unit_test(test_spill_file),
        cmocka_unit_test(test_spill_driver),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
