/* Unit tests for engine/core/core_path.c: the output path rules every writer shares (SPEC §6):
 * ".." components, escapes from a base directory, over-long paths and paths that name no entry of
 * their own are refused with the writer's own words; containment compares whole components; the
 * canonical form and relation of two paths resolve links in a scratch directory (SPEC §6: the
 * output may not be the input, lie inside it or contain it). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* ---- canonical paths and relations, in a scratch directory ---- */

struct tree {
    char dir[512];   /* as created (TMPDIR may itself hold a link) */
    char canon[512]; /* its canonical form */
};

static char *at(const struct tree *t, const char *rel, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s/%s", t->dir, rel);
    assert_true(n > 0 && (size_t)n < cap);
    return buf;
}

static int tree_setup(void **state)
{
    struct tree *t = sm_calloc(1, sizeof(*t));
    assert_non_null(t);
    assert_int_equal(sm_test_tmpdir("path", t->dir, sizeof(t->dir)), 0);
    struct sm_err err;
    sm_err_clear(&err);
    char *c = NULL;
    assert_ok(sm_path_canonical(t->dir, &c, &err), &err);
    assert_true(strlen(c) < sizeof(t->canon));
    memcpy(t->canon, c, strlen(c) + 1);
    sm_free(c);
    char p[1024], q[1024];
    assert_int_equal(sm_test_mkdir_parents(at(t, "in.zarr/c/0", p, sizeof(p))), 0);
    assert_int_equal(sm_test_mkdir_parents(at(t, "real/sub", p, sizeof(p))), 0);
    assert_int_equal(sm_test_write_file(at(t, "in.raw", p, sizeof(p)), "x", 1), 0);
    assert_int_equal(symlink("in.zarr", at(t, "rel_link", p, sizeof(p))), 0);
    assert_int_equal(symlink(at(t, "in.zarr", q, sizeof(q)), at(t, "abs_link", p, sizeof(p))), 0);
    assert_int_equal(symlink("real/sub", at(t, "sub_link", p, sizeof(p))), 0);
    assert_int_equal(symlink("missing/target", at(t, "dangling", p, sizeof(p))), 0);
    assert_int_equal(symlink("loop_b", at(t, "loop_a", p, sizeof(p))), 0);
    assert_int_equal(symlink("loop_a", at(t, "loop_b", p, sizeof(p))), 0);
    assert_int_equal(symlink("..", at(t, "real/up", p, sizeof(p))), 0);
    *state = t;
    return 0;
}

static int tree_teardown(void **state)
{
    struct tree *t = *state;
    sm_test_rm_rf(t->dir);
    sm_free(t);
    return 0;
}

static void expect_canonical(const struct tree *t, const char *rel, const char *want_rel)
{
    char p[1024], want[1024];
    struct sm_err err;
    sm_err_clear(&err);
    char *got = NULL;
    assert_ok(sm_path_canonical(at(t, rel, p, sizeof(p)), &got, &err), &err);
    snprintf(want, sizeof(want), "%s%s%s", t->canon, want_rel[0] != '\0' ? "/" : "", want_rel);
    assert_string_equal(got, want);
    sm_free(got);
}

static enum sm_path_rel relation(const struct tree *t, const char *a, const char *b)
{
    char pa[1024], pb[1024];
    struct sm_err err;
    sm_err_clear(&err);
    enum sm_path_rel r = SM_PATH_DISJOINT;
    assert_ok(sm_path_relation(at(t, a, pa, sizeof(pa)), at(t, b, pb, sizeof(pb)), &r, &err), &err);
    return r;
}

static void test_canonical_appends_what_does_not_exist(void **state)
{
    const struct tree *t = *state;
    expect_canonical(t, "in.zarr", "in.zarr");
    expect_canonical(t, "in.zarr/c/0/new/deeper", "in.zarr/c/0/new/deeper");
    expect_canonical(t, "new//./x/../y/", "new/y");
    expect_canonical(t, "in.raw/x", "in.raw/x"); /* below a file: nothing exists */
    expect_canonical(t, ".", "");
}

static void test_canonical_resolves_links(void **state)
{
    const struct tree *t = *state;
    expect_canonical(t, "rel_link", "in.zarr");
    expect_canonical(t, "abs_link/c/9", "in.zarr/c/9");
    expect_canonical(t, "sub_link/../x", "real/x");    /* ".." of the link's target */
    expect_canonical(t, "real/up/in.zarr", "in.zarr"); /* a link to ".." */
    expect_canonical(t, "dangling", "missing/target"); /* where a write would land */
    expect_canonical(t, "dangling/deeper", "missing/target/deeper");
}

static void test_canonical_relative_to_the_working_directory(void **state)
{
    const struct tree *t = *state;
    char cwd[1024], want[1024];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(t->dir), 0);
    struct sm_err err;
    sm_err_clear(&err);
    char *got = NULL;
    const sm_status st = sm_path_canonical("rel_link/./c/../x", &got, &err);
    assert_int_equal(chdir(cwd), 0);
    assert_ok(st, &err);
    snprintf(want, sizeof(want), "%s/in.zarr/x", t->canon);
    assert_string_equal(got, want);
    sm_free(got);
}

static void test_canonical_refuses_loops_and_empty(void **state)
{
    const struct tree *t = *state;
    char p[1024];
    struct sm_err err;
    sm_err_clear(&err);
    char *got = NULL;
    assert_status(sm_path_canonical(at(t, "loop_a/x", p, sizeof(p)), &got, &err), SM_E_USAGE, &err);
    assert_null(got);
    assert_contains(err.what, "too many levels of symbolic links");
    sm_err_clear(&err);
    assert_status(sm_path_canonical("", &got, &err), SM_E_USAGE, &err);
    assert_null(got);
}

static void test_relation_same_inside_contains_disjoint(void **state)
{
    const struct tree *t = *state;
    assert_int_equal(relation(t, "in.zarr", "in.zarr/"), SM_PATH_SAME);
    assert_int_equal(relation(t, "in.zarr/c/9", "in.zarr"), SM_PATH_INSIDE);
    assert_int_equal(relation(t, "in.zarr/sub", "in.zarr"), SM_PATH_INSIDE);
    assert_int_equal(relation(t, "", "in.zarr"), SM_PATH_CONTAINS);
    assert_int_equal(relation(t, "out", "in.zarr"), SM_PATH_DISJOINT);
    assert_int_equal(relation(t, "in.zarr.h5", "in.zarr"), SM_PATH_DISJOINT);
    assert_int_equal(relation(t, "in.raw/x", "in.raw"), SM_PATH_INSIDE);
}

static void test_relation_through_links(void **state)
{
    const struct tree *t = *state;
    assert_int_equal(relation(t, "rel_link", "in.zarr"), SM_PATH_SAME);
    assert_int_equal(relation(t, "abs_link", "rel_link"), SM_PATH_SAME);
    assert_int_equal(relation(t, "rel_link/c/9", "in.zarr"), SM_PATH_INSIDE);
    assert_int_equal(relation(t, "in.zarr/sub", "abs_link"), SM_PATH_INSIDE);
    assert_int_equal(relation(t, "real/up", "abs_link"), SM_PATH_CONTAINS);
    assert_int_equal(relation(t, "sub_link/x", "real"), SM_PATH_INSIDE);
    assert_int_equal(relation(t, "real", "sub_link"), SM_PATH_CONTAINS);
    assert_int_equal(relation(t, "sub_link", "in.zarr"), SM_PATH_DISJOINT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve_keeps_relative_and_joins_base),
        cmocka_unit_test(test_resolve_refuses_escapes_in_the_writers_words),
        cmocka_unit_test(test_dotdot_inside_a_name_is_a_name),
        cmocka_unit_test(test_within_compares_components),
        cmocka_unit_test_setup_teardown(test_canonical_appends_what_does_not_exist, tree_setup,
                                        tree_teardown),
        cmocka_unit_test_setup_teardown(test_canonical_resolves_links, tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_canonical_relative_to_the_working_directory,
                                        tree_setup, tree_teardown),
        cmocka_unit_test_setup_teardown(test_canonical_refuses_loops_and_empty, tree_setup,
                                        tree_teardown),
        cmocka_unit_test_setup_teardown(test_relation_same_inside_contains_disjoint, tree_setup,
                                        tree_teardown),
        cmocka_unit_test_setup_teardown(test_relation_through_links, tree_setup, tree_teardown),
    };
    return cmocka_run_group_tests_name("core_path", tests, NULL, NULL);
}
