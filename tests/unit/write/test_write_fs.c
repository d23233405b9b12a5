/* Unit tests of engine/write/write_fs.c: whole-object reads (objects written through the file
 * store, as write/ does; missing objects and directories read as absent), and the tree walker:
 * CHECK refuses foreign entries and symbolic links, SWEEP_TMP removes only temporary files, REMOVE
 * empties a tree but never deletes an entry it does not recognise; the name rule, and the prune of
 * what lies outside the grid. */
#include "shardmill/sm_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#include <cmocka.h>

#include "sm_test.h"
#include "write_int.h"
#include "write_test.h"

static char dir[1024];
static int dfd = -1;

static int setup(void **state)
{
    (void)state;
    if (sm_test_tmpdir("write-fs", dir, sizeof(dir)) != 0) {
        return -1;
    }
    dfd = open(dir, O_RDONLY | O_DIRECTORY);
    return dfd >= 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    close(dfd);
    return sm_test_rm_rf(dir);
}

static void put(const char *key, const char *text, bool sync)
{
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_store *st;
    assert_ok(sm_store_file_open(dir, &st, &err), &err);
    assert_ok(sm_store_put(st, key, sm_bytes_of(text, strlen(text)), sync, &err), &err);
    sm_store_close(st);
}

static void test_fs_put_read_and_replace(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    put("a/b/c/obj", "first", true);
    put("a/b/c/obj", "second!", false);
    struct sm_buf b = SM_BUF_INIT;
    bool found;
    assert_ok(sm_wfs_read(dfd, "a/b/c/obj", &b, &found, &err), &err);
    assert_true(found);
    assert_int_equal(b.len, 7);
    assert_memory_equal(b.ptr, "second!", 7);
    put("empty", "", true);
    assert_ok(sm_wfs_read(dfd, "empty", &b, &found, &err), &err);
    assert_true(found);
    assert_int_equal(b.len, 0);
    assert_ok(sm_wfs_read(dfd, "nope/x", &b, &found, &err), &err);
    assert_false(found);
    assert_ok(sm_wfs_read(dfd, "a/b", &b, &found, &err), &err); /* a directory */
    assert_false(found);
    sm_buf_free(&b);
    assert_int_equal(wt_count_files(dir, ".tmp."), 0);
}

static void test_fs_walk_check_sweep_remove(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    put("out/c/0/0/0", "s", false);
    put("out/c/0/0/1", "s", false);
    put("out/c/1/0/0", "s", false);
    put("out/c/1/0/0.tmp.7.1", "t", false);
    put("out/.shardmill/journal/c.0.0.0.json", "{}", false);
    put("out/.shardmill/journal/c.0.0.1.json.tmp.7.2", "{", false);
    char p[2048];
    snprintf(p, sizeof(p), "%s/out", dir);
    const int ofd = open(p, O_RDONLY | O_DIRECTORY);
    assert_true(ofd >= 0);
    assert_ok(sm_wfs_walk(ofd, "c", true, SM_WFS_CHECK, &err), &err);
    assert_ok(sm_wfs_walk(ofd, ".shardmill", false, SM_WFS_CHECK, &err), &err);
    assert_ok(sm_wfs_walk(ofd, "missing", true, SM_WFS_CHECK, &err), &err);

    assert_ok(sm_wfs_walk(ofd, "c", true, SM_WFS_SWEEP_TMP, &err), &err);
    assert_ok(sm_wfs_walk(ofd, ".shardmill", false, SM_WFS_SWEEP_TMP, &err), &err);
    assert_int_equal(wt_count_files(p, ".tmp."), 0);
    assert_int_equal(wt_count_files(p, ""), 4);

    /* Foreign entries: a name that is not a key, and a symbolic link. */
    put("out/c/0/notes.txt", "n", false);
    assert_status(sm_wfs_walk(ofd, "c", true, SM_WFS_CHECK, &err), SM_E_USAGE, &err);
    assert_contains(err.what, "unexpected entry 'c/0/notes.txt'");
    /* REMOVE never deletes it: the tree stays, the parent cannot be removed. */
    sm_err_clear(&err);
    assert_status(sm_wfs_walk(ofd, "c", true, SM_WFS_REMOVE, &err), SM_E_IO, &err);
    char notes[2100];
    snprintf(notes, sizeof(notes), "%s/c/0/notes.txt", p);
    assert_int_equal(access(notes, F_OK), 0);
    assert_int_equal(unlink(notes), 0);
    char target[2100], link[2100];
    snprintf(target, sizeof(target), "%s/elsewhere", dir);
    snprintf(link, sizeof(link), "%s/c/1/0/7", p);
    put("elsewhere/keep", "k", false);
    assert_int_equal(symlink(target, link), 0);
    sm_err_clear(&err);
    assert_status(sm_wfs_walk(ofd, "c", true, SM_WFS_CHECK, &err), SM_E_USAGE, &err);
    assert_int_equal(unlink(link), 0);

    sm_err_clear(&err);
    assert_ok(sm_wfs_walk(ofd, "c", true, SM_WFS_REMOVE, &err), &err);
    snprintf(link, sizeof(link), "%s/c", p);
    assert_int_equal(sm_test_count_entries(link, ""), 0);
    assert_ok(sm_wfs_walk(ofd, ".shardmill", false, SM_WFS_REMOVE, &err), &err);
    snprintf(link, sizeof(link), "%s/.shardmill", p);
    assert_int_equal(sm_test_count_entries(link, ""), 0);
    snprintf(link, sizeof(link), "%s/elsewhere/keep", dir);
    assert_int_equal(access(link, F_OK), 0);
    close(ofd);

    struct sm_strv names = {NULL, 0, 0};
    assert_ok(sm_wfs_list(dfd, "out", &names, &err), &err);
    assert_int_equal(names.n, 2); /* c and .shardmill, both empty */
    sm_strv_free(&names);
    assert_ok(sm_wfs_list(dfd, "none", &names, &err), &err);
    assert_int_equal(names.n, 0);
}

/* The one name rule (issue 32 item 13): canonical decimals only; temporary names only for files. */
static void test_fs_chunk_name_rule(void **state)
{
    (void)state;
    uint64_t v = 7;
    assert_true(sm_wfs_decimal("0", &v) && v == 0);
    assert_true(sm_wfs_decimal("17", &v) && v == 17);
    assert_false(sm_wfs_decimal("01", NULL));
    assert_false(sm_wfs_decimal("00", NULL));
    assert_false(sm_wfs_decimal("", NULL));
    assert_false(sm_wfs_decimal("1a", NULL));
    assert_false(sm_wfs_decimal("-1", NULL));
    assert_false(sm_wfs_decimal("99999999999999999999", NULL)); /* past 2^64 */
    assert_int_equal(sm_wfs_chunk_name("3", true, false), SM_WFS_NAME_KEY);
    assert_int_equal(sm_wfs_chunk_name("3", false, true), SM_WFS_NAME_KEY);
    assert_int_equal(sm_wfs_chunk_name("03", false, true), SM_WFS_NAME_FOREIGN);
    assert_int_equal(sm_wfs_chunk_name("3.tmp.1.2", false, true), SM_WFS_NAME_TMP);
    assert_int_equal(sm_wfs_chunk_name("3.tmp.1.2", true, false), SM_WFS_NAME_FOREIGN);
    assert_int_equal(sm_wfs_chunk_name("3", false, false), SM_WFS_NAME_FOREIGN); /* a link */
}

/* sm_wfs_prune removes every key-like entry outside the grid, with what is under it, and keeps
 * the grid's keys, temporary files (the sweep's) and entries of another kind. */
static void test_fs_prune_removes_what_lies_outside_the_grid(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output_spec spec = wt_spec(20, 20, 20); /* shard 8x8x8 below: a 3x3x3 grid */
    for (unsigned d = 0; d < 3; d++) {
        spec.shard[d] = 8;
        spec.chunk[d] = 4;
    }
    struct sm_writer *w;
    assert_ok(sm_writer_new(&spec, &w, &err), &err);
    assert_int_equal(w->grid[0], 3);
    static const char *const keep[] = {"pr/c/0/0/0", "pr/c/2/2/2", "pr/c/0/0/1.tmp.7.1"};
    static const char *const drop[] = {"pr/c/0/0/3", "pr/c/3/0/0", "pr/c/0/9/1/2", "pr/c/1/1"};
    for (size_t i = 0; i < 3; i++) {
        put(keep[i], "k", false);
    }
    for (size_t i = 0; i < 4; i++) {
        put(drop[i], "d", false);
    }
    char p[2048];
    snprintf(p, sizeof(p), "%s/pr/c/0/0/2", dir); /* a directory where a shard belongs */
    assert_int_equal(mkdir(p, 0777), 0);
    snprintf(p, sizeof(p), "%s/pr", dir);
    const int ofd = open(p, O_RDONLY | O_DIRECTORY);
    assert_true(ofd >= 0);
    uint64_t removed = 0;
    assert_ok(sm_wfs_prune(ofd, "c", w, NULL, &removed, &err), &err);
    /* c/0/0/3, c/3, c/0/9 (whole), c/1/1 (a file at a directory's place), c/0/0/2/ */
    assert_int_equal(removed, 5);
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, keep[i]);
        assert_int_equal(access(p, F_OK), 0);
    }
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, drop[i]);
        assert_int_not_equal(access(p, F_OK), 0);
    }
    snprintf(p, sizeof(p), "%s/pr/c/0/9", dir);
    assert_int_not_equal(access(p, F_OK), 0);
    snprintf(p, sizeof(p), "%s/pr/c/0/0/2", dir);
    assert_int_not_equal(access(p, F_OK), 0);
    assert_ok(sm_wfs_prune(ofd, "missing", w, NULL, &removed, &err), &err);
    close(ofd);
    sm_writer_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fs_put_read_and_replace),
        cmocka_unit_test(test_fs_walk_check_sweep_remove),
        cmocka_unit_test(test_fs_chunk_name_rule),
        cmocka_unit_test(test_fs_prune_removes_what_lies_outside_the_grid),
    };
    return cmocka_run_group_tests_name("write_fs", tests, setup, teardown);
}
