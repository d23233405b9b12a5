/* Unit tests for engine/store/store_file.c, beyond the conformance suite (test_store.c): a root
 * that does not exist yet, atomic writes (no temporary left behind, parent directories created),
 * staged writes (invisible until commit, abort and failed commits leave no temporary file, commit
 * replaces an existing object by rename, fsync counting),
 * directories where an object is expected, and that reads see files written by other programs. */
#include "shardmill/sm_config.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "shardmill/alloc.h"
#include "shardmill/store.h"
#include "sm_test.h"

struct fx {
    char dir[512];
    char path[1024];
    struct sm_store *s;
    struct sm_err err;
};

static int setup(void **state)
{
    struct fx *f = test_calloc(1, sizeof(*f));
    if (sm_test_tmpdir("store-file", f->dir, sizeof(f->dir)) != 0) {
        test_free(f);
        return -1;
    }
    sm_err_clear(&f->err);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    sm_store_close(f->s);
    sm_test_rm_rf(f->dir);
    test_free(f);
    return 0;
}

static const char *at(struct fx *f, const char *rel)
{
    snprintf(f->path, sizeof(f->path), "%s/%s", f->dir, rel);
    return f->path;
}

static void open_at(struct fx *f, const char *rel)
{
    assert_ok(sm_store_file_open(rel[0] != '\0' ? at(f, rel) : f->dir, &f->s, &f->err), &f->err);
}

static void test_file_open_records_root_as_url_without_trailing_slash(void **state)
{
    struct fx *f = *state;
    char root[1100];
    snprintf(root, sizeof(root), "%s///", f->dir);
    assert_ok(sm_store_file_open(root, &f->s, &f->err), &f->err);
    assert_string_equal(f->s->url, f->dir);
    assert_string_equal(f->s->ops->scheme, "file");
}

static void test_file_root_that_does_not_exist_is_not_found(void **state)
{
    struct fx *f = *state;
    open_at(f, "no/such/root");
    struct sm_buf b = SM_BUF_INIT;
    bool found = true;
    assert_ok(sm_store_get(f->s, "zarr.json", sm_range_all(), SM_IO_META, &b, &found, &f->err),
              &f->err);
    assert_false(found);
    uint64_t size;
    assert_ok(sm_store_size(f->s, "zarr.json", &size, &found, &f->err), &f->err);
    assert_false(found);
    struct sm_strv names = {NULL, 0, 0};
    assert_ok(sm_store_list(f->s, "", &names, &f->err), &f->err);
    assert_int_equal(names.n, 0);
    sm_buf_free(&b);
    /* The missing read still counts as a request (SPEC §5). */
    assert_int_equal(sm_store_requests(f->s, SM_IO_META), 1);
}

static void test_file_root_created_later_is_picked_up(void **state)
{
    struct fx *f = *state;
    open_at(f, "later");
    assert_int_equal(sm_test_write_file(at(f, "later/obj"), "hello", 5), 0);
    struct sm_buf b = SM_BUF_INIT;
    bool found = false;
    assert_ok(sm_store_get(f->s, "obj", sm_range_all(), SM_IO_META, &b, &found, &f->err), &f->err);
    assert_true(found);
    assert_memory_equal(b.ptr, "hello", 5);
    sm_buf_free(&b);
}

static void test_file_root_that_is_a_regular_file_is_data_error(void **state)
{
    struct fx *f = *state;
    assert_int_equal(sm_test_write_file(at(f, "plain"), "x", 1), 0);
    struct sm_store *s = NULL;
    const uint64_t base = sm_alloc_current();
    /* SPEC §4: a file where the store should be is invalid input (3), not an I/O failure */
    assert_int_equal(sm_store_file_open(at(f, "plain"), &s, &f->err), SM_E_DATA);
    assert_null(s);
    assert_contains(f->err.what, "not a Zarr store directory");
    assert_string_equal(f->err.where, at(f, "plain"));
    assert_string_equal(f->err.cause_lib, "errno");
    assert_int_equal(sm_alloc_current(), base); /* regression: the url leaked on this path */
}

static void test_file_put_atomic_creates_parent_dirs(void **state)
{
    struct fx *f = *state;
    open_at(f, "out"); /* the root itself does not exist yet either */
    assert_ok(sm_store_put_atomic(f->s, "arr/c/0/1/2", sm_bytes_of("abc", 3), &f->err), &f->err);
    struct stat st;
    assert_int_equal(stat(at(f, "out/arr/c/0/1/2"), &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_size, 3);
    struct sm_buf b = SM_BUF_INIT;
    bool found = false;
    assert_ok(sm_store_get(f->s, "arr/c/0/1/2", sm_range_all(), SM_IO_PAYLOAD, &b, &found, &f->err),
              &f->err);
    assert_true(found);
    sm_buf_free(&b);
}

static void test_file_put_atomic_leaves_no_temp_file_behind(void **state)
{
    struct fx *f = *state;
    open_at(f, "");
    for (int i = 0; i < 5; i++) {
        assert_ok(sm_store_put_atomic(f->s, "d/zarr.json", sm_bytes_of("{}", 2), &f->err), &f->err);
    }
    assert_ok(sm_store_put_atomic(f->s, "d/c", sm_bytes_of("0", 1), &f->err), &f->err);
    assert_int_equal(sm_test_count_entries(at(f, "d"), ""), 2);
    assert_int_equal(sm_test_count_entries(at(f, "d"), "tmp"), 0);
}

static void test_file_put_atomic_failure_leaves_no_temp_file(void **state)
{
    struct fx *f = *state;
    open_at(f, "");
    /* The target name is a directory: rename fails after the temporary was written. */
    assert_int_equal(mkdir(at(f, "dir"), 0777), 0);
    assert_int_equal(mkdir(at(f, "dir/obj"), 0777), 0);
    assert_int_equal(sm_test_write_file(at(f, "dir/obj/child"), "x", 1), 0);
    assert_int_equal(sm_store_put_atomic(f->s, "dir/obj", sm_bytes_of("abc", 3), &f->err), SM_E_IO);
    assert_contains(f->err.where, "dir/obj");
    assert_string_equal(f->err.cause_lib, "errno");
    assert_int_equal(sm_test_count_entries(at(f, "dir"), "tmp"), 0);
}

static void test_file_put_atomic_below_a_file_is_io_error(void **state)
{
    struct fx *f = *state;
    open_at(f, "");
    assert_ok(sm_store_put_atomic(f->s, "a", sm_bytes_of("x", 1), &f->err), &f->err);
    assert_int_equal(sm_store_put_atomic(f->s, "a/b", sm_bytes_of("y", 1), &f->err), SM_E_IO);
    assert_contains(f->err.where, "a/b");
}

static void test_file_directory_as_object_is_error(void **state)
{
    struct fx *f = *state;
    open_at(f, "");
    assert_int_equal(mkdir(at(f, "c"), 0777), 0);
    struct sm_buf b = SM_BUF_INIT;
    bool found;
    assert_int_equal(sm_store_get(f->s, "c", sm_range_all(), SM_IO_PAYLOAD, &b, &found, &f->err),
                     SM_E_DATA);
    assert_contains(f->err.what, "directory");
    assert_contains(f->err.where, "/c");
    const struct sm_range others[] = {sm_range_suffix(4), sm_range_span(0, 4)};
    for (int i = 0; i < 2; i++) {
        sm_err_clear(&f->err);
        assert_int_not_equal(sm_store_get(f->s, "c", others[i], SM_IO_PAYLOAD, &b, &found, &f->err),
                             SM_OK);
        assert_contains(f->err.where, "/c");
    }
    /* The root itself is a directory too. */
    sm_err_clear(&f->err);
    assert_int_equal(sm_store_get(f->s, "", sm_range_all(), SM_IO_META, &b, &found, &f->err),
                     SM_E_DATA);
    sm_buf_free(&b);
}

static void test_file_size_of_directory_is_not_an_object(void **state)
{
    struct fx *f = *state;
    open_at(f, "");
    assert_int_equal(mkdir(at(f, "grp"), 0777), 0);
    /* get("grp") is an error (above); a size probe must not report the directory as an object
     * of st_size bytes (the mem store, like HTTP, has no object at a prefix). */
    uint64_t size = 0;
    bool found = false;
    sm_status st = sm_store_size(f->s, "grp", &size, &found, &f->err);
    assert_true(st != SM_OK || !found);
}

static void test_file_reads_files_written_by_other_programs(void **state)
{
    struct fx *f = *state;
    uint8_t data[10000];
    for (size_t i = 0; i < sizeof(data); i++) {
        data[i] = (uint8_t)(i ^ (i >> 7));
    }
    assert_int_equal(sm_test_write_file(at(f, "arr/c/0/0"), data, sizeof(data)), 0);
    open_at(f, "arr");
    struct sm_buf b = SM_BUF_INIT;
    bool found = false;
    assert_ok(
        sm_store_get(f->s, "c/0/0", sm_range_span(4097, 3000), SM_IO_PAYLOAD, &b, &found, &f->err),
        &f->err);
    assert_true(found);
    assert_memory_equal(b.ptr, data + 4097, 3000);
    uint64_t objsize = 0;
    assert_ok(sm_store_get_sized(f->s, "c/0/0", sm_range_span(0, 1), SM_IO_PAYLOAD, &b, &found,
                                 &objsize, &f->err),
              &f->err);
    assert_int_equal(objsize, sizeof(data));
    sm_buf_free(&b);
}

static void test_file_unreadable_object_is_io_error_with_errno(void **state)
{
    struct fx *f = *state;
    if (geteuid() == 0) {
        skip(); /* root reads through permissions */
    }
    assert_int_equal(sm_test_write_file(at(f, "secret"), "x", 1), 0);
    assert_int_equal(chmod(at(f, "secret"), 0), 0);
    open_at(f, "");
    struct sm_buf b = SM_BUF_INIT;
    bool found;
    assert_int_equal(
        sm_store_get(f->s, "secret", sm_range_all(), SM_IO_PAYLOAD, &b, &found, &f->err), SM_E_IO);
    assert_string_equal(f->err.cause_lib, "errno");
    assert_int_equal(f->err.cause, EACCES);
    assert_contains(f->err.where, "secret");
    sm_buf_free(&b);
}

static void test_file_list_includes_files_and_directories(void **state)
{
    struct fx *f = *state;
    assert_int_equal(sm_test_write_file(at(f, "g/a/zarr.json"), "{}", 2), 0);
    assert_int_equal(sm_test_write_file(at(f, "g/zarr.json"), "{}", 2), 0);
    open_at(f, "");
    struct sm_strv names = {NULL, 0, 0};
    assert_ok(sm_store_list(f->s, "g", &names, &f->err), &f->err);
    assert_int_equal(names.n, 2);
    assert_null(names.v[2]);
    bool a = false, z = false;
    for (size_t i = 0; i < names.n; i++) {
        a = a || strcmp(names.v[i], "a") == 0;
        z = z || strcmp(names.v[i], "zarr.json") == 0;
    }
    assert_true(a && z);
    sm_strv_free(&names);
}

static void test_file_close_releases_everything(void **state)
{
    struct fx *f = *state;
    const uint64_t base = sm_alloc_current();
    open_at(f, "");
    assert_ok(sm_store_put_atomic(f->s, "x", sm_bytes_of("1", 1), &f->err), &f->err);
    sm_store_close(f->s);
    f->s = NULL;
    assert_int_equal(sm_alloc_current(), base);
}

static void test_file_open_allocation_failure_is_nomem(void **state)
{
    struct fx *f = *state;
    const uint64_t base = sm_alloc_current();
    for (uint64_t n = 1; n <= 3; n++) {
        struct sm_store *s = NULL;
        sm_err_clear(&f->err);
        sm_alloc_fail_at(n);
        sm_status st = sm_store_file_open(f->dir, &s, &f->err);
        sm_alloc_fail_at(0);
        assert_true(st == SM_OK || st == SM_E_NOMEM);
        assert_true((st == SM_OK) == (s != NULL));
        sm_store_close(s);
        assert_int_equal(sm_alloc_current(), base);
    }
}

/* ---- staged writes (stage / commit / abort / sync) ---- */

static void test_file_staged_object_is_invisible_until_commit(void **state)
{
    struct fx *f = *state;
    open_at(f, "out");
    uint64_t t = 0;
    assert_ok(sm_store_stage(f->s, "c/0/1", sm_bytes_of("shard", 5), false, &t, &f->err), &f->err);
    /* The bytes sit under "<key>.tmp.<pid>.<ticket>" in the key's (created) directory. */
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "out/c/0/1.tmp.%ld.%u", (long)getpid(), (unsigned)t);
    struct stat sb;
    assert_int_equal(stat(at(f, tmp), &sb), 0);
    assert_int_equal(sb.st_size, 5);
    assert_int_equal(sm_test_count_entries(at(f, "out/c/0"), ".tmp."), 1);
    bool exists = true;
    assert_ok(sm_store_exists(f->s, "c/0/1", &exists, &f->err), &f->err);
    assert_false(exists);
    assert_int_not_equal(stat(at(f, "out/c/0/1"), &sb), 0);
    assert_ok(sm_store_commit(f->s, "c/0/1", t, &f->err), &f->err);
    assert_int_equal(stat(at(f, "out/c/0/1"), &sb), 0);
    assert_int_equal(sb.st_size, 5);
    assert_int_equal(sm_test_count_entries(at(f, "out/c/0"), ".tmp."), 0);
}

static void test_file_abort_leaves_no_temp_file(void **state)
{
    struct fx *f = *state;
    open_at(f, "");
    uint64_t t[3];
    for (int i = 0; i < 3; i++) {
        assert_ok(sm_store_stage(f->s, "d/x", sm_bytes_of("abc", 3), i == 1, &t[i], &f->err),
                  &f->err);
    }
    assert_int_equal(sm_test_count_entries(at(f, "d"), ".tmp."), 3);
    /* A failed run: nothing committed; each staged temporary file is removed. */
    for (int i = 0; i < 3; i++) {
        sm_store_abort(f->s, "d/x", t[i]);
    }
    assert_int_equal(sm_test_count_entries(at(f, "d"), ""), 0);
    assert_int_equal(atomic_load(&f->s->stats.aborts), 3);
    /* A commit whose rename fails (a directory at the key) also removes its temporary file. */
    assert_int_equal(mkdir(at(f, "d/x"), 0777), 0);
    assert_int_equal(sm_test_write_file(at(f, "d/x/child"), "x", 1), 0);
    uint64_t u;
    assert_ok(sm_store_stage(f->s, "d/x", sm_bytes_of("abc", 3), false, &u, &f->err), &f->err);
    assert_int_equal(sm_store_commit(f->s, "d/x", u, &f->err), SM_E_IO);
    assert_contains(f->err.what, "cannot rename into place");
    assert_contains(f->err.where, "d/x");
    assert_int_equal(sm_test_count_entries(at(f, "d"), ".tmp."), 0);
}

static void test_file_commit_over_existing_key_replaces_atomically(void **state)
{
    struct fx *f = *state;
    open_at(f, "");
    assert_ok(sm_store_put_atomic(f->s, "k", sm_bytes_of("old object", 10), &f->err), &f->err);
    /* A reader that opened the old object keeps reading it whole; the key is never partial. */
    const int rfd = open(at(f, "k"), O_RDONLY);
    assert_true(rfd >= 0);
    struct stat before, after;
    assert_int_equal(fstat(rfd, &before), 0);
    uint64_t t;
    assert_ok(sm_store_stage(f->s, "k", sm_bytes_of("new", 3), true, &t, &f->err), &f->err);
    struct sm_buf b = SM_BUF_INIT;
    bool found;
    assert_ok(sm_store_get(f->s, "k", sm_range_all(), SM_IO_META, &b, &found, &f->err), &f->err);
    assert_int_equal(b.len, 10); /* still the old object between stage and commit */
    assert_ok(sm_store_commit(f->s, "k", t, &f->err), &f->err);
    assert_ok(sm_store_get(f->s, "k", sm_range_all(), SM_IO_META, &b, &found, &f->err), &f->err);
    assert_int_equal(b.len, 3);
    assert_memory_equal(b.ptr, "new", 3);
    assert_int_equal(stat(at(f, "k"), &after), 0);
    assert_true(after.st_ino != before.st_ino); /* a new file renamed in, not rewritten in place */
    char old[16] = {0};
    assert_int_equal(pread(rfd, old, sizeof(old), 0), 10);
    assert_memory_equal(old, "old object", 10);
    close(rfd);
    sm_buf_free(&b);
    assert_int_equal(sm_test_count_entries(f->dir, ".tmp."), 0);
}

static void test_file_fsyncs_are_counted(void **state)
{
    struct fx *f = *state;
    open_at(f, "");
    uint64_t t;
    assert_int_equal(sm_store_fsyncs(f->s), 0);
    assert_ok(sm_store_stage(f->s, "a/b", sm_bytes_of("x", 1), false, &t, &f->err), &f->err);
    assert_int_equal(sm_store_fsyncs(f->s), 0); /* not asked to sync */
    assert_ok(sm_store_commit(f->s, "a/b", t, &f->err), &f->err);
    assert_ok(sm_store_stage(f->s, "a/c", sm_bytes_of("x", 1), true, &t, &f->err), &f->err);
    assert_int_equal(sm_store_fsyncs(f->s), 1);
    assert_ok(sm_store_commit(f->s, "a/c", t, &f->err), &f->err);
    assert_ok(sm_store_put_atomic(f->s, "a/d", sm_bytes_of("x", 1), &f->err), &f->err);
    assert_int_equal(sm_store_fsyncs(f->s), 2); /* put_atomic = stage with fsync + commit */
    assert_ok(sm_store_put(f->s, "a/e", sm_bytes_of("x", 1), false, &f->err), &f->err);
    assert_int_equal(sm_store_fsyncs(f->s), 2);
    assert_ok(sm_store_sync(f->s, SM_STORE_SYNC_DIR, "a", &f->err), &f->err);
    assert_ok(sm_store_sync(f->s, SM_STORE_SYNC_DIR, "", &f->err), &f->err);
    assert_ok(sm_store_sync(f->s, SM_STORE_SYNC_ALL, "", &f->err), &f->err);
    assert_int_equal(sm_store_fsyncs(f->s), 5);
    /* A directory that does not exist cannot be synced: SM_E_IO naming it, not counted. */
    assert_int_equal(sm_store_sync(f->s, SM_STORE_SYNC_DIR, "zz", &f->err), SM_E_IO);
    assert_contains(f->err.where, "zz");
    assert_int_equal(sm_store_fsyncs(f->s), 5);
    assert_int_equal(atomic_load(&f->s->stats.commits), 4);
}

static void test_file_stage_into_missing_root_creates_it(void **state)
{
    struct fx *f = *state;
    open_at(f, "new/root");
    uint64_t t;
    assert_ok(sm_store_stage(f->s, "zarr.json", sm_bytes_of("{}", 2), true, &t, &f->err), &f->err);
    assert_ok(sm_store_commit(f->s, "zarr.json", t, &f->err), &f->err);
    struct stat sb;
    assert_int_equal(stat(at(f, "new/root/zarr.json"), &sb), 0);
    assert_int_equal(sb.st_size, 2);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_file_open_records_root_as_url_without_trailing_slash),
        T(test_file_root_that_does_not_exist_is_not_found),
        T(test_file_root_created_later_is_picked_up),
        T(test_file_root_that_is_a_regular_file_is_data_error),
        T(test_file_put_atomic_creates_parent_dirs),
        T(test_file_put_atomic_leaves_no_temp_file_behind),
        T(test_file_put_atomic_failure_leaves_no_temp_file),
        T(test_file_put_atomic_below_a_file_is_io_error),
        T(test_file_directory_as_object_is_error),
        T(test_file_size_of_directory_is_not_an_object),
        T(test_file_reads_files_written_by_other_programs),
        T(test_file_unreadable_object_is_io_error_with_errno),
        T(test_file_list_includes_files_and_directories),
        T(test_file_close_releases_everything),
        T(test_file_open_allocation_failure_is_nomem),
        T(test_file_staged_object_is_invisible_until_commit),
        T(test_file_abort_leaves_no_temp_file),
        T(test_file_commit_over_existing_key_replaces_atomically),
        T(test_file_fsyncs_are_counted),
        T(test_file_stage_into_missing_root_creates_it),
    };
    return cmocka_run_group_tests_name("store_file", tests, NULL, NULL);
}
