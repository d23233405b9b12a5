/* Unit tests of engine/write/write_driver.c (SPEC §1, B9): the output is byte-identical for 1, 2
 * and 4 threads; the error reported is that of the lowest failing shard for any thread count; a
 * listed (non-contiguous) job writes exactly its shards; resume counts kept shards; a stop flag
 * set mid-run skips the remaining shards (SM_E_STOPPED), and staged shards never flushed leave no
 * temporary file once the output is closed. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#include <cmocka.h>

#include "sm_test.h"
#include "write_int.h"
#include "write_test.h"

static char base[1024];

static int setup(void **state)
{
    (void)state;
    return sm_test_tmpdir("write-driver", base, sizeof(base));
}

static int teardown(void **state)
{
    (void)state;
    return sm_test_rm_rf(base);
}

static const struct sm_output_opts OPTS = {SM_OUTPUT_EXISTS_OVERWRITE, SM_OUTPUT_SYNC_NONE, NULL,
                                           true};

static void test_driver_threads_give_identical_bytes(void **state)
{
    (void)state;
    struct sm_output_spec s = wt_spec(33, 70, 45);
    s.codec = "zstd";
    s.level = 5;
    static const int threads[] = {1, 2, 4};
    char dirs[3][2048];
    for (int i = 0; i < 3; i++) {
        struct sm_err err;
        sm_err_clear(&err);
        snprintf(dirs[i], sizeof(dirs[i]), "%s/t%d.zarr", base, threads[i]);
        struct wt_pattern p = wt_pattern_of(&s, 5000);
        struct sm_write_result res;
        assert_ok(wt_write(dirs[i], &s, &OPTS, &p, threads[i], &res, &err), &err);
        assert_int_equal(res.written, 5 * 3 * 2);
        assert_true(res.bytes > 0);
    }
    assert_int_equal(wt_trees_differ(dirs[0], dirs[1]), 0);
    assert_int_equal(wt_trees_differ(dirs[0], dirs[2]), 0);
    assert_true(sm_write_default_threads() >= 1);
}

static void test_driver_reports_the_lowest_failing_shard(void **state)
{
    (void)state;
    const struct sm_output_spec s = wt_spec(33, 70, 45);
    for (int t = 1; t <= 4; t *= 2) {
        struct sm_err err;
        sm_err_clear(&err);
        char dir[2048];
        snprintf(dir, sizeof(dir), "%s/fail%d.zarr", base, t);
        struct wt_pattern p = wt_pattern_of(&s, 0);
        p.fail_shard = 7;
        struct sm_writer *w;
        struct sm_output *o;
        assert_ok(sm_writer_new(&s, &w, &err), &err);
        assert_ok(sm_output_open(dir, &OPTS, &o, &err), &err);
        assert_ok(sm_output_begin(o, w, &err), &err);
        struct sm_write_job job = {
            .first = 0, .count = sm_writer_nshards(w), .threads = t, .fill = wt_fill, .user = &p};
        struct sm_write_result res;
        assert_status(sm_write_shards(w, o, &job, &res, &err), SM_E_DATA, &err);
        assert_string_equal(err.what, "injected failure at shard 7");
        assert_true(res.written >= (t == 1 ? 7u : 0u));
        sm_output_close(o);
        sm_writer_free(w);
    }
}

static void test_driver_listed_job_and_resume(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_output_spec s = wt_spec(33, 70, 45);
    char dir[2048];
    snprintf(dir, sizeof(dir), "%s/list.zarr", base);
    struct wt_pattern p = wt_pattern_of(&s, 0);
    struct sm_writer *w;
    struct sm_output *o;
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    assert_ok(sm_output_open(dir, &OPTS, &o, &err), &err);
    assert_ok(sm_output_begin(o, w, &err), &err);
    const uint64_t even[] = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28};
    struct sm_write_job job = {
        .first = 0, .count = 15, .list = even, .threads = 2, .fill = wt_fill, .user = &p};
    struct sm_write_result res;
    assert_ok(sm_write_shards(w, o, &job, &res, &err), &err);
    assert_int_equal(res.written, 15);
    char c[2100];
    snprintf(c, sizeof(c), "%s/c", dir);
    assert_int_equal(wt_count_files(c, ""), 15);
    const uint64_t bad[] = {30};
    struct sm_write_job out_of_grid = {
        .first = 0, .count = 1, .list = bad, .threads = 1, .fill = wt_fill, .user = &p};
    assert_status(sm_write_shards(w, o, &out_of_grid, &res, &err), SM_E_INTERNAL, &err);
    sm_err_clear(&err);
    struct sm_write_job past = {
        .first = 20, .count = 11, .threads = 1, .fill = wt_fill, .user = &p};
    assert_status(sm_write_shards(w, o, &past, &res, &err), SM_E_INTERNAL, &err);
    sm_output_close(o);

    /* Resume: the 15 even shards are intact, the 15 odd ones are written. */
    sm_err_clear(&err);
    struct sm_output_opts ro = OPTS;
    ro.exists = SM_OUTPUT_EXISTS_RESUME;
    assert_ok(sm_output_open(dir, &ro, &o, &err), &err);
    assert_ok(sm_output_begin(o, w, &err), &err);
    struct sm_write_job all = {
        .first = 0, .count = sm_writer_nshards(w), .threads = 2, .fill = wt_fill, .user = &p};
    assert_ok(sm_write_shards(w, o, &all, &res, &err), &err);
    assert_int_equal(res.written, 15);
    assert_int_equal(res.kept, 15);
    assert_ok(sm_output_flush(o, &err), &err);
    assert_ok(sm_output_finish(o, &err), &err);
    struct sm_output_stats st;
    sm_output_stats(o, &st);
    assert_int_equal(st.shards_kept, 15);
    assert_int_equal(st.total_shards, 30);
    sm_output_close(o);
    sm_writer_free(w);
    struct sm_verify_report rep;
    assert_ok(sm_output_verify(dir, &rep, &err), &err);
    assert_int_equal(rep.nproblems, 0);
    sm_verify_report_destroy(&rep);
}

/* A fill that raises the stop flag while filling shard `at` (a signal arriving mid-run). */
struct stop_fill {
    struct wt_pattern p;
    uint64_t at;
    atomic_int flag;
};

static sm_status stop_fill(void *user, int thread, uint64_t shard, const uint64_t *off,
                           const uint64_t *shape, void *data, size_t len, struct sm_err *err)
{
    struct stop_fill *sf = user;
    if (shard == sf->at) {
        atomic_store(&sf->flag, 15);
    }
    return wt_fill(&sf->p, thread, shard, off, shape, data, len, err);
}

static void test_driver_stops_at_the_next_shard(void **state)
{
    (void)state;
    const struct sm_output_spec s = wt_spec(33, 70, 45); /* 30 shards */
    for (int t = 1; t <= 4; t *= 2) {
        struct sm_err err;
        sm_err_clear(&err);
        char dir[2048];
        snprintf(dir, sizeof(dir), "%s/stop%d.zarr", base, t);
        static struct stop_fill sf;
        sf.p = wt_pattern_of(&s, 0);
        sf.at = 5;
        atomic_store(&sf.flag, 0);
        struct sm_writer *w;
        struct sm_output *o;
        assert_ok(sm_writer_new(&s, &w, &err), &err);
        assert_ok(sm_output_open(dir, &OPTS, &o, &err), &err);
        assert_ok(sm_output_begin(o, w, &err), &err);
        struct sm_write_job job = {.first = 0,
                                   .count = sm_writer_nshards(w),
                                   .threads = t,
                                   .fill = stop_fill,
                                   .user = &sf,
                                   .stop = &sf.flag};
        struct sm_write_result res;
        assert_status(sm_write_shards(w, o, &job, &res, &err), SM_E_STOPPED, &err);
        assert_string_equal(err.what, "stopped by signal 15");
        assert_int_equal(err.cause, 15);
        /* the shard being filled is finished (puts stay whole); each thread then stops */
        assert_true(res.written >= 6 && res.written <= 5 + (uint64_t)t);
        char c[2100];
        snprintf(c, sizeof(c), "%s/c", dir);
        assert_int_equal(wt_count_files(c, ""), (int)res.written);
        sm_output_close(o);
        /* a real failure below the stop point is reported instead of the stop */
        sm_err_clear(&err);
        atomic_store(&sf.flag, 0);
        sf.p.fail_shard = 3;
        assert_ok(sm_output_open(dir, &OPTS, &o, &err), &err);
        assert_ok(sm_output_begin(o, w, &err), &err);
        assert_status(sm_write_shards(w, o, &job, &res, &err), SM_E_DATA, &err);
        sm_output_close(o);
        sm_writer_free(w);
    }
}

static void test_close_removes_staged_shards_never_flushed(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_output_spec s = wt_spec(33, 70, 45);
    char dir[2048];
    snprintf(dir, sizeof(dir), "%s/staged.zarr", base);
    struct sm_output_opts so = OPTS;
    so.sync = SM_OUTPUT_SYNC_SYNCFS;
    struct wt_pattern p = wt_pattern_of(&s, 0);
    struct sm_writer *w;
    struct sm_output *o;
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    assert_ok(sm_output_open(dir, &so, &o, &err), &err);
    assert_ok(sm_output_begin(o, w, &err), &err);
    struct sm_write_job job = {.first = 0, .count = 12, .threads = 2, .fill = wt_fill, .user = &p};
    struct sm_write_result res;
    assert_ok(sm_write_shards(w, o, &job, &res, &err), &err);
    assert_int_equal(res.written, 12);
    char c[2100];
    snprintf(c, sizeof(c), "%s/c", dir);
    assert_int_equal(wt_count_files(c, ".tmp."), 12); /* staged, not yet renamed */
    sm_output_close(o);                               /* no flush: a failed or stopped run */
    assert_int_equal(wt_count_files(c, ".tmp."), 0);
    assert_int_equal(wt_count_files(c, ""), 0);
    sm_writer_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_driver_threads_give_identical_bytes),
        cmocka_unit_test(test_driver_reports_the_lowest_failing_shard),
        cmocka_unit_test(test_driver_listed_job_and_resume),
        cmocka_unit_test(test_driver_stops_at_the_next_shard),
        cmocka_unit_test(test_close_removes_staged_shards_never_flushed),
    };
    return cmocka_run_group_tests_name("write_driver", tests, setup, teardown);
}
