/* Unit tests for engine/core/core_path.c: the output path rules every writer shares (SPEC §6):
 * ".." components, escapes from a base directory, over-long paths and paths that name no entry of
 * their own are refused with the writer's own words; containment compares whole components. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/alloc.h"
#include "shardmill/path.h"
#include "sm_test.h"

static const struct sm_path_names OUT = {"output.path", "output", "directory"};
static const struct sm_path_names EXP = {"export.hdf5.path", "export", "file"};

static void expect_ok(const char *path, const char *base, const char *want)
{
    struct sm_err err;
    sm_err_clear(&err);
    char *got = NULL;
    assert_ok(sm_path_resolve(path, base, &OUT, &got, &err), &err);
    assert_string_equal(got, want);
    sm_free(got);
}

static void expect_usage(const char *path, const char *base, const struct sm_path_names *names,
                         const char *what, const char *where)
{
    struct sm_err err;
    sm_err_clear(&err);
    char *got = (char *)"untouched";
    assert_status(sm_path_resolve(path, base, names, &got, &err), SM_E_USAGE, &err);
    assert_null(got);
    assert_contains(err.what, what);
    if (where != NULL) { /* NULL: longer than `where` holds */
        assert_string_equal(err.where, where);
    }
}

static void test_resolve_keeps_relative_and_joins_base(void **state)
{
    (void)state;
    expect_ok("out/ct.zarr", NULL, "out/ct.zarr");
    expect_ok("out/ct.zarr///", NULL, "out/ct.zarr");
    expect_ok("/abs/x", NULL, "/abs/x");
    expect_ok("x", "/base/", "/base/x");
    expect_ok("/base/a/b", "/base", "/base/a/b");
    expect_ok("/anything", "/", "/anything");
}

static void test_resolve_refuses_escapes_in_the_writers_words(void **state)
{
    (void)state;
    expect_usage("", NULL, &OUT, "the output path is empty", "output.path");
    expect_usage(NULL, NULL, &EXP, "the export path is empty", "export.hdf5.path");
    expect_usage("a/../../x", NULL, &OUT,
                 "the output path has a '..' component: name the directory directly", "a/../../x");
    expect_usage("b/../y.h5", NULL, &EXP, "the export path has a '..' component: name the file",
                 "b/../y.h5");
    expect_usage("..", NULL, &EXP, "'..' component", "..");
    expect_usage("/elsewhere/x", "/base", &OUT, "the output path is not inside /base",
                 "/elsewhere/x");
    expect_usage("/basement/x", "/base", &OUT, "is not inside", "/basement/x");
    expect_usage("/base", "/base", &OUT, "is not inside", "/base");
    expect_usage("/", NULL, &OUT, "must name a directory of its own", "/");
    expect_usage("out/.", NULL, &EXP, "the export path must name a file of its own", "out/.");
    char longp[5000];
    memset(longp, 'a', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = '\0';
    expect_usage(longp, NULL, &OUT, "longer than 4095 bytes", NULL);
}

static void test_dotdot_inside_a_name_is_a_name(void **state)
{
    (void)state;
    expect_ok("a..b/..c", NULL, "a..b/..c");
    expect_ok("./x", NULL, "./x");
}

static void test_within_compares_components(void **state)
{
    (void)state;
    assert_true(sm_path_is_within("a/b", "a"));
    assert_true(sm_path_is_within("a", "a"));
    assert_true(sm_path_is_within("./a/b", "a"));
    assert_true(sm_path_is_within("a//b", "a/"));
    assert_true(sm_path_is_within("/x/y", "/"));
    assert_true(sm_path_is_within("out/ct.zarr/ct.h5", "out/ct.zarr"));
    assert_false(sm_path_is_within("ab", "a"));
    assert_false(sm_path_is_within("out/ct.zarr.h5", "out/ct.zarr"));
    assert_false(sm_path_is_within("a", "a/b"));
    assert_false(sm_path_is_within("b/a", "a"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve_keeps_relative_and_joins_base),
        cmocka_unit_test(test_resolve_refuses_escapes_in_the_writers_words),
        cmocka_unit_test(test_dotdot_inside_a_name_is_a_name),
        cmocka_unit_test(test_within_compares_components),
    };
    return cmocka_run_group_tests_name("core_path", tests, NULL, NULL);
}
