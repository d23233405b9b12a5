/* Unit tests for the file records of the input's identity (run/run_input_id.c,
 * sm_run_file_identity; issue 32): a file's record names it resolved (a symbolic link counts as its
 * target) and changes when the file is replaced or rewritten in place even with its mtime
 * restored (st_ctim); a directory's records_sha256 changes when one file changes that way, and
 * not when nothing changed. The end-to-end cases are tests/convert/test_convert_auto_identity.py.
 */
#include "shardmill/sm_config.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "run_convert_int.h"
#include "shardmill/alloc.h"
#include "shardmill/meta.h"
#include "shardmill/path.h"
#include "sm_test.h"

static char dir[512];

static int setup(void **state)
{
    (void)state;
    return sm_test_tmpdir("input-id", dir, sizeof(dir));
}

static int teardown(void **state)
{
    (void)state;
    return sm_test_rm_rf(dir);
}

/* Past the file system's timestamp granularity (a coarse clock tick): the next change gets a
 * later st_ctim. */
static void tick(void)
{
    const struct timespec t = {0, 30 * 1000 * 1000};
    nanosleep(&t, NULL);
}

static void put(const char *name, const char *text)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    assert_int_equal(sm_test_write_file(p, text, strlen(text)), 0);
}

/* The record of dir/name as compact JSON text (the caller frees it), the resolved path too. */
static char *record(const char *name, char *resolved, size_t cap)
{
    char p[600];
    snprintf(p, sizeof(p), "%s%s%s", dir, name[0] != '\0' ? "/" : "", name);
    struct sm_err err;
    sm_err_clear(&err);
    json_t *o = NULL;
    assert_ok(sm_run_file_identity(p, resolved, cap, &o, &err), &err);
    char *t = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    assert_non_null(t);
    return t;
}

/* Restores dir/name's atime and mtime to st's (touch -d). */
static void restore_times(const char *name, const struct stat *st)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    const struct timespec ts[2] = {st->st_atim, st->st_mtim};
    assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
}

static void stat_of(const char *name, struct stat *st)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    assert_int_equal(stat(p, st), 0);
}

static void file_record_binds_inode_and_ctime(void **state)
{
    (void)state;
    put("a.raw", "0123456789");
    char res[600];
    char *first = record("a.raw", res, sizeof(res));
    assert_contains(first, "\"ctime_ns\":");
    assert_contains(first, "\"ino\":\"");
    assert_contains(first, "\"files\":\"1\"");
    char *again = record("a.raw", res, sizeof(res));
    assert_string_equal(first, again); /* nothing changed: the same record */
    sm_json_free_text(again);

    struct stat st;
    stat_of("a.raw", &st);
    tick();
    put("a.raw", "9876543210"); /* in place: the same inode and size, mtime restored */
    restore_times("a.raw", &st);
    char *inplace = record("a.raw", res, sizeof(res));
    assert_string_not_equal(first, inplace);

    stat_of("a.raw", &st);
    tick();
    put("b.tmp", "abcdefghij"); /* replaced by rename: another inode, mtime restored */
    char from[600], to[600];
    snprintf(from, sizeof(from), "%s/b.tmp", dir);
    snprintf(to, sizeof(to), "%s/a.raw", dir);
    assert_int_equal(rename(from, to), 0);
    restore_times("a.raw", &st);
    char *replaced = record("a.raw", res, sizeof(res));
    assert_string_not_equal(inplace, replaced);
    sm_json_free_text(first);
    sm_json_free_text(inplace);
    sm_json_free_text(replaced);
}

static void symlink_resolves_to_its_target(void **state)
{
    (void)state;
    put("scanA.raw", "aaaa");
    put("scanB.raw", "bbbb");
    char link[600];
    snprintf(link, sizeof(link), "%s/latest.raw", dir);
    assert_int_equal(symlink("scanA.raw", link), 0);
    char res[600], want[600];
    char *a = record("latest.raw", res, sizeof(res));
    snprintf(want, sizeof(want), "%s/scanA.raw", dir);
    char *real = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_path_canonical(want, &real, &err), &err);
    assert_string_equal(res, real);
    sm_free(real);
    assert_int_equal(unlink(link), 0);
    assert_int_equal(symlink("scanB.raw", link), 0);
    char *b = record("latest.raw", res, sizeof(res));
    assert_string_not_equal(a, b);
    snprintf(want, sizeof(want), "%s/scanB.raw", dir);
    assert_ok(sm_path_canonical(want, &real, &err), &err);
    assert_string_equal(res, real);
    sm_free(real);
    sm_json_free_text(a);
    sm_json_free_text(b);
}

static void directory_records_change_with_one_file(void **state)
{
    (void)state;
    char sub[600];
    snprintf(sub, sizeof(sub), "%s/stack", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    put("stack/s0.tif", "slice-0");
    put("stack/s1.tif", "slice-1");
    put("stack/.hidden", "not a slice");
    char res[600];
    char *first = record("stack", res, sizeof(res));
    assert_contains(first, "\"files\":\"2\""); /* dot files are no slices */
    assert_contains(first, "\"records_sha256\":\"");
    char *again = record("stack", res, sizeof(res));
    assert_string_equal(first, again);
    sm_json_free_text(again);
    struct stat st, dst;
    stat_of("stack/s1.tif", &st);
    stat_of("stack", &dst);
    tick();
    put("stack/s1.tif", "slice-9"); /* same size, mtime restored, the directory's too */
    restore_times("stack/s1.tif", &st);
    restore_times("stack", &dst);
    char *changed = record("stack", res, sizeof(res));
    assert_string_not_equal(first, changed);
    sm_json_free_text(first);
    sm_json_free_text(changed);
}

static void missing_file_is_an_io_error(void **state)
{
    (void)state;
    char p[600], res[600];
    snprintf(p, sizeof(p), "%s/none.raw", dir);
    struct sm_err err;
    sm_err_clear(&err);
    json_t *o = NULL;
    assert_status(sm_run_file_identity(p, res, sizeof(res), &o, &err), SM_E_IO, &err);
    assert_null(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(file_record_binds_inode_and_ctime, setup, teardown),
        cmocka_unit_test_setup_teardown(symlink_resolves_to_its_target, setup, teardown),
        cmocka_unit_test_setup_teardown(directory_records_change_with_one_file, setup, teardown),
        cmocka_unit_test_setup_teardown(missing_file_is_an_io_error, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
