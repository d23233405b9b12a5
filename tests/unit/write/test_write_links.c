/* Unit tests of "the output is the only place written" (issue 19, items 4 and 5): a symbolic link
 * planted inside an output (at an intermediate component of a shard key, or of a tree the delete
 * walk removes) is never followed. A put through it fails (SM_E_IO naming the link) in every sync
 * mode, the delete walk refuses it, a run whose tree holds a link gets no marker, and verify lists
 * the link as a problem; the other dataset the link points into is left byte for byte as it was.
 * Each case runs with openat2 and with the O_NOFOLLOW walk alone. */
#include "shardmill/sm_config.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "shardmill/fs.h"
#include "sm_test.h"
#include "write_int.h"
#include "write_test.h"

static char base[1024];

static int setup(void **state)
{
    (void)state;
    return sm_test_tmpdir("write-links", base, sizeof(base));
}

static int teardown(void **state)
{
    (void)state;
    sm_fs_use_openat2(true);
    return sm_test_rm_rf(base);
}

static void path_of(char *buf, const char *name)
{
    snprintf(buf, 4096, "%.1000s/%.1000s", base, name);
}

static const struct sm_output_spec *spec(void)
{
    static struct sm_output_spec s;
    s = wt_spec(20, 70, 45);
    return &s;
}

/* A complete output at base/name (the other dataset a planted link points into). */
static void complete(const char *name)
{
    struct sm_err err;
    sm_err_clear(&err);
    char dir[4096];
    path_of(dir, name);
    struct wt_pattern p = wt_pattern_of(spec(), 1000);
    const struct sm_output_opts o = {SM_OUTPUT_EXISTS_ERROR, SM_OUTPUT_SYNC_NONE, NULL,
                                     SM_OUTPUT_DIRECT_ALWAYS};
    assert_ok(wt_write(dir, spec(), &o, &p, 1, NULL, &err), &err);
}

/* Two identical complete outputs: `other` (the victim) and `other-ref` (its copy to compare). */
static void victim(const char *other, const char *ref)
{
    complete(other);
    complete(ref);
}

static void assert_same_tree(const char *a, const char *b)
{
    char pa[4096], pb[4096];
    path_of(pa, a);
    path_of(pb, b);
    assert_int_equal(wt_trees_differ(pa, pb), 0);
}

/* Item 5: a shard put whose key passes through a planted link fails and writes nothing there. */
static void put_through_link(enum sm_output_sync sync, const char *tag)
{
    struct sm_err err;
    sm_err_clear(&err);
    char out[4096], other[4096], ref[4096], link[4200], target[4200];
    snprintf(other, sizeof(other), "other-%s.zarr", tag);
    snprintf(ref, sizeof(ref), "ref-%s.zarr", tag);
    victim(other, ref);
    snprintf(out, sizeof(out), "out-%s.zarr", tag);
    char dir[4096];
    path_of(dir, out);
    struct sm_writer *w;
    struct sm_output *o;
    const struct sm_output_opts opts = {SM_OUTPUT_EXISTS_ERROR, sync, NULL,
                                        SM_OUTPUT_DIRECT_ALWAYS};
    assert_ok(sm_writer_new(spec(), &w, &err), &err);
    assert_ok(sm_output_open(dir, &opts, &o, &err), &err);
    assert_ok(sm_output_begin(o, w, &err), &err);
    /* planted after begin's checks: OUT/c/0 -> OTHER/c/0 (an intermediate component of c/0/0/0) */
    snprintf(link, sizeof(link), "%s/c", dir);
    assert_int_equal(mkdir(link, 0777), 0);
    snprintf(link, sizeof(link), "%s/c/0", dir);
    snprintf(target, sizeof(target), "%.1000s/%.1000s/c/0", base, other);
    assert_int_equal(symlink(target, link), 0);
    const uint8_t bytes[5] = {9, 9, 9, 9, 9};
    sm_status st = sm_output_put_shard(o, 0, sm_bytes_of(bytes, 5), 1, &err);
    if (st == SM_OK) {
        st = sm_output_flush(o, &err); /* syncfs commits in flush */
    }
    assert_status(st, SM_E_IO, &err);
    assert_contains(err.what, "'c/0' is a symbolic link");
    sm_output_close(o);
    sm_writer_free(w);
    assert_same_tree(other, ref);
}

static void test_links_put_never_writes_through_a_link(void **state)
{
    (void)state;
    put_through_link(SM_OUTPUT_SYNC_NONE, "none");
    put_through_link(SM_OUTPUT_SYNC_FSYNC, "fsync");
    put_through_link(SM_OUTPUT_SYNC_SYNCFS, "syncfs");
    sm_fs_use_openat2(false);
    put_through_link(SM_OUTPUT_SYNC_NONE, "none-walk");
    put_through_link(SM_OUTPUT_SYNC_FSYNC, "fsync-walk");
    put_through_link(SM_OUTPUT_SYNC_SYNCFS, "syncfs-walk");
    sm_fs_use_openat2(true);
}

/* Item 4: the delete walk of a tree named through an intermediate link (a level directory "1" of
 * an OME-Zarr output swapped for a link to another dataset) removes nothing there. */
static void walk_through_link(const char *tag)
{
    struct sm_err err;
    sm_err_clear(&err);
    char out[4096], other[256], ref[256], target[4096], link[4200];
    snprintf(other, sizeof(other), "wother-%s.zarr", tag);
    snprintf(ref, sizeof(ref), "wref-%s.zarr", tag);
    victim(other, ref);
    snprintf(link, sizeof(link), "wout-%s", tag);
    path_of(out, link);
    assert_int_equal(mkdir(out, 0777), 0);
    snprintf(link, sizeof(link), "%s/1", out);
    path_of(target, other);
    assert_int_equal(symlink(target, link), 0);
    const int ofd = open(out, O_RDONLY | O_DIRECTORY);
    assert_true(ofd >= 0);
    assert_status(sm_wfs_walk(ofd, "1/c", true, SM_WFS_REMOVE, &err), SM_E_IO, &err);
    assert_contains(err.what, "'1' is a symbolic link");
    sm_err_clear(&err);
    assert_status(sm_wfs_walk(ofd, "1/c", true, SM_WFS_SWEEP_TMP, &err), SM_E_IO, &err);
    sm_err_clear(&err);
    assert_status(sm_wfs_walk(ofd, "1/c", true, SM_WFS_CHECK, &err), SM_E_USAGE, &err);
    sm_err_clear(&err);
    struct sm_strv names = {NULL, 0, 0};
    assert_status(sm_wfs_list(ofd, "1/c", &names, &err), SM_E_IO, &err);
    sm_err_clear(&err);
    struct sm_buf b = SM_BUF_INIT;
    bool found = true;
    assert_ok(sm_wfs_read(ofd, "1/zarr.json", &b, &found, &err), &err);
    assert_false(found); /* a link is not an object */
    sm_buf_free(&b);
    close(ofd);
    assert_same_tree(other, ref);
}

static void test_links_delete_walk_never_enters_a_link(void **state)
{
    (void)state;
    walk_through_link("openat2");
    sm_fs_use_openat2(false);
    walk_through_link("walk");
    sm_fs_use_openat2(true);
}

/* Replaces directory base/out/rel by a link to a copy of it (base/<out>-moved): the data the
 * output's marker records is still reachable, only through a link. */
static void swap_for_link(const char *out, const char *rel)
{
    char from[4200], to[4200], dir[4096];
    path_of(dir, out);
    snprintf(from, sizeof(from), "%s/%s", dir, rel);
    snprintf(to, sizeof(to), "%s-moved", dir);
    assert_int_equal(rename(from, to), 0);
    assert_int_equal(symlink(to, from), 0);
}

/* Item 5: a run whose tree holds a link it did not make (planted after its shards were written)
 * fails with SM_E_IO and writes no marker. */
static void test_links_finish_refuses_a_tree_holding_a_link(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    char dir[4096], marker[4200];
    path_of(dir, "fin.zarr");
    struct sm_writer *w;
    struct sm_output *o;
    const struct sm_output_opts opts = {SM_OUTPUT_EXISTS_ERROR, SM_OUTPUT_SYNC_NONE, NULL,
                                        SM_OUTPUT_DIRECT_ALWAYS};
    assert_ok(sm_writer_new(spec(), &w, &err), &err);
    assert_ok(sm_output_open(dir, &opts, &o, &err), &err);
    assert_ok(sm_output_begin(o, w, &err), &err);
    struct wt_pattern p = wt_pattern_of(spec(), 1000);
    struct sm_write_job job = {
        .first = 0, .count = sm_writer_nshards(w), .threads = 1, .fill = wt_fill, .user = &p};
    struct sm_write_result res;
    assert_ok(sm_write_shards(w, o, &job, &res, &err), &err);
    assert_ok(sm_output_flush(o, &err), &err);
    swap_for_link("fin.zarr", "c/0/0");
    assert_status(sm_output_finish(o, &err), SM_E_IO, &err);
    assert_contains(err.what, "'c/0/0' is a symbolic link");
    snprintf(marker, sizeof(marker), "%s/" SM_MARKER_NAME, dir);
    assert_int_not_equal(access(marker, F_OK), 0);
    sm_output_close(o);
    sm_writer_free(w);
}

/* verify lists a link in the output as a problem, even when the bytes behind it are right. */
static void test_links_verify_reports_a_link(void **state)
{
    (void)state;
    complete("ver.zarr");
    swap_for_link("ver.zarr", "c/0/0");
    struct sm_err err;
    sm_err_clear(&err);
    char dir[4096];
    path_of(dir, "ver.zarr");
    struct sm_verify_report rep;
    assert_ok(sm_output_verify(dir, &rep, &err), &err);
    bool listed = false;
    for (size_t i = 0; i < rep.nproblems; i++) {
        listed = listed || (strcmp(rep.problems[i].key, "c/0/0") == 0 &&
                            strstr(rep.problems[i].what, "symbolic link") != NULL);
    }
    assert_true(listed);
    sm_verify_report_destroy(&rep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_links_put_never_writes_through_a_link),
        cmocka_unit_test(test_links_delete_walk_never_enters_a_link),
        cmocka_unit_test(test_links_finish_refuses_a_tree_holding_a_link),
        cmocka_unit_test(test_links_verify_reports_a_link),
    };
    return cmocka_run_group_tests_name("write_links", tests, setup, teardown);
}
