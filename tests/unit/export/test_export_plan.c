/* Unit tests for engine/export/export_plan.c: the boxes a rank writes (every unit of its block
 * exactly once, whole units, in C order, at most 2*ndim-1 boxes for a contiguous block without a
 * cap, none larger than the cap), the temporary and directory names, and HDF5 path checks. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "export_int.h"
#include "shardmill/fs.h"
#include "sm_test.h"
#include "sm_test_zarr.h"

#define MAXB 4096

/* Checks the plan of [first, first + count) against a brute-force cover of the grid. */
static void check_plan(unsigned nd, const uint64_t *shape, const uint64_t *unit, uint64_t first,
                       uint64_t count, uint64_t max_units, size_t *nboxes_out)
{
    struct sm_err err;
    sm_err_clear(&err);
    uint64_t grid[SM_MAX_DIMS], total = 1;
    for (unsigned d = 0; d < nd; d++) {
        grid[d] = (shape[d] + unit[d] - 1) / unit[d];
        total *= grid[d];
    }
    size_t n = 0;
    assert_ok(sm_export_plan(nd, shape, unit, first, count, max_units, NULL, &n, &err), &err);
    assert_true(n <= MAXB);
    static struct sm_export_box boxes[MAXB];
    size_t n2 = 0;
    assert_ok(sm_export_plan(nd, shape, unit, first, count, max_units, boxes, &n2, &err), &err);
    assert_int_equal(n, n2);
    static unsigned char hit[1 << 16];
    assert_true(total <= sizeof(hit));
    memset(hit, 0, sizeof(hit));
    uint64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t lo[SM_MAX_DIMS], ext[SM_MAX_DIMS], units = 1;
        for (unsigned d = 0; d < nd; d++) {
            assert_int_equal(boxes[i].off[d] % unit[d], 0); /* starts on a unit */
            assert_true(boxes[i].shape[d] > 0);
            assert_true(boxes[i].off[d] + boxes[i].shape[d] <= shape[d]);
            const uint64_t end = boxes[i].off[d] + boxes[i].shape[d];
            /* ends on a unit or at the array edge */
            assert_true(end % unit[d] == 0 || end == shape[d]);
            lo[d] = boxes[i].off[d] / unit[d];
            ext[d] = (end + unit[d] - 1) / unit[d] - lo[d];
            units *= ext[d];
        }
        assert_true(units <= max_units);
        uint64_t c[SM_MAX_DIMS] = {0};
        do {
            uint64_t lin = 0;
            for (unsigned d = 0; d < nd; d++) {
                lin = lin * grid[d] + lo[d] + c[d];
            }
            assert_true(lin >= first && lin < first + count);
            assert_int_equal(hit[lin], 0);
            hit[lin] = 1;
        } while (sm_test_next(nd, ext, c));
        uint64_t start = 0;
        for (unsigned d = 0; d < nd; d++) {
            start = start * grid[d] + lo[d];
        }
        assert_true(i == 0 || start > prev); /* C order of first units */
        prev = start;
    }
    for (uint64_t u = 0; u < total; u++) {
        assert_int_equal(hit[u], u >= first && u < first + count);
    }
    *nboxes_out = n;
}

static void test_plan_covers_every_block_exactly(void **state)
{
    (void)state;
    const uint64_t shape[3] = {40, 70, 90}, unit[3] = {8, 32, 32}; /* grid 5 x 3 x 3 = 45 */
    for (uint64_t first = 0; first < 45; first++) {
        for (uint64_t count = 0; first + count <= 45; count++) {
            size_t n;
            check_plan(3, shape, unit, first, count, UINT64_MAX, &n);
            assert_true(n <= 5); /* 2 * ndim - 1 */
            size_t capped;
            check_plan(3, shape, unit, first, count, 4, &capped);
            assert_true(capped >= (count + 3) / 4);
        }
    }
}

static void test_plan_whole_grid_is_one_box(void **state)
{
    (void)state;
    const uint64_t shape[3] = {20, 33, 47}, unit[3] = {8, 32, 32};
    struct sm_export_box b;
    size_t n = 0;
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_export_plan(3, shape, unit, 0, 12, UINT64_MAX, &b, &n, &err), &err);
    assert_int_equal(n, 1);
    for (unsigned d = 0; d < 3; d++) {
        assert_int_equal(b.off[d], 0);
        assert_int_equal(b.shape[d], shape[d]);
    }
}

static void test_plan_one_and_four_dimensions(void **state)
{
    (void)state;
    const uint64_t s1[1] = {1000}, u1[1] = {64};
    size_t n;
    check_plan(1, s1, u1, 3, 9, UINT64_MAX, &n);
    assert_int_equal(n, 1);
    check_plan(1, s1, u1, 3, 9, 2, &n);
    assert_int_equal(n, 5);
    const uint64_t s4[4] = {3, 5, 7, 9}, u4[4] = {2, 2, 3, 4}; /* grid 2 x 3 x 3 x 3 = 54 */
    for (uint64_t first = 0; first < 54; first += 5) {
        for (uint64_t count = 1; first + count <= 54; count += 7) {
            check_plan(4, s4, u4, first, count, UINT64_MAX, &n);
            assert_true(n <= 7);
            check_plan(4, s4, u4, first, count, 5, &n);
        }
    }
}

static void test_plan_rejects_bad_input(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const uint64_t shape[2] = {10, 10}, unit[2] = {5, 5}, zero[2] = {5, 0};
    size_t n = 7;
    assert_status(sm_export_plan(2, shape, unit, 3, 2, 1, NULL, &n, &err), SM_E_INTERNAL, &err);
    assert_int_equal(n, 0);
    sm_err_clear(&err);
    assert_status(sm_export_plan(2, shape, zero, 0, 1, 1, NULL, &n, &err), SM_E_INTERNAL, &err);
    sm_err_clear(&err);
    assert_status(sm_export_plan(2, shape, unit, 0, 1, 0, NULL, &n, &err), SM_E_INTERNAL, &err);
    sm_err_clear(&err);
    assert_status(sm_export_plan(0, shape, unit, 0, 0, 1, NULL, &n, &err), SM_E_INTERNAL, &err);
}

static void test_tmp_and_dir_names(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    char buf[64];
    assert_ok(sm_fs_shared_tmp_name("out/ct.h5", buf, sizeof(buf), &err), &err);
    assert_string_equal(buf, "out/.ct.h5.shardmill-tmp");
    assert_ok(sm_fs_shared_tmp_name("ct.h5", buf, sizeof(buf), &err), &err);
    assert_string_equal(buf, ".ct.h5.shardmill-tmp");
    assert_ok(sm_fs_shared_tmp_name("/ct.h5", buf, sizeof(buf), &err), &err);
    assert_string_equal(buf, "/.ct.h5.shardmill-tmp");
    assert_ok(sm_export_dir_name("out/sub/ct.h5", buf, sizeof(buf), &err), &err);
    assert_string_equal(buf, "out/sub");
    assert_ok(sm_export_dir_name("ct.h5", buf, sizeof(buf), &err), &err);
    assert_string_equal(buf, ".");
    assert_ok(sm_export_dir_name("/ct.h5", buf, sizeof(buf), &err), &err);
    assert_string_equal(buf, "/");
    char small[8];
    assert_status(sm_fs_shared_tmp_name("out/ct.h5", small, sizeof(small), &err), SM_E_USAGE, &err);
    assert_string_equal(err.where, "out/ct.h5");
}

static void test_h5path_rules(void **state)
{
    (void)state;
    static const char *const good[] = {"/data", "/ct/volume", "/a.b/c..d", NULL};
    static const char *const bad[] = {"data",   "/",     "//x", "/a//b", "/a/",
                                      "/a/./b", "/../x", "",    NULL};
    struct sm_err err;
    for (size_t i = 0; good[i] != NULL; i++) {
        sm_err_clear(&err);
        assert_ok(sm_export_check_h5path(good[i], "k", &err), &err);
    }
    for (size_t i = 0; bad[i] != NULL; i++) {
        sm_err_clear(&err);
        assert_status(sm_export_check_h5path(bad[i], "export.hdf5.dataset", &err), SM_E_USAGE,
                      &err);
        assert_string_equal(err.where, "export.hdf5.dataset");
    }
    sm_err_clear(&err);
    assert_status(sm_export_check_h5path(NULL, "k", &err), SM_E_USAGE, &err);
    char longname[300];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[0] = '/';
    longname[sizeof(longname) - 1] = '\0';
    sm_err_clear(&err);
    assert_status(sm_export_check_h5path(longname, "k", &err), SM_E_USAGE, &err);
    assert_contains(err.what, "longer than 255");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_covers_every_block_exactly),
        cmocka_unit_test(test_plan_whole_grid_is_one_box),
        cmocka_unit_test(test_plan_one_and_four_dimensions),
        cmocka_unit_test(test_plan_rejects_bad_input),
        cmocka_unit_test(test_tmp_and_dir_names),
        cmocka_unit_test(test_h5path_rules),
    };
    return cmocka_run_group_tests_name("export_plan", tests, NULL, NULL);
}
