/* Unit tests for the phase driver (run/run_phase.c, run/run_result.c): a row's `when`, the trace of
 * its transitions through the progress hook, the cleanup after a failure and the early end (issue
 * 36 item 4); its pass counters (issue 33 item 4): with env.res set, the input's reads during the
 * phases range, scan and write count to those passes; the plan phase's reads, and those of a pass
 * with nothing to do (total UINT64_MAX), count to the next pass that runs; other phases' reads
 * count to none; the end-of-run reduction keeps them (one process) and states the source's input
 * bytes. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "run_int.h"
#include "shardmill/source.h"

/* A source of n x 1 x 1 uint8 whose box of [k, 1, 1] reads k bytes "from storage". */
static sm_status fake_read(void *user, int thread, const uint64_t *off, const uint64_t *shape,
                           void *out, uint64_t *read, struct sm_err *err)
{
    (void)user, (void)thread, (void)off, (void)err;
    memset(out, 0, (size_t)shape[0]);
    *read = shape[0];
    return SM_OK;
}

static const struct sm_source_ops fake_ops = {.read_box = fake_read};

struct ctx {
    struct sm_source *src;
};

static sm_status read_n(struct ctx *c, uint64_t n, struct sm_err *err)
{
    uint8_t buf[64];
    const uint64_t off[3] = {0, 0, 0}, shape[3] = {n, 1, 1};
    return sm_source_read_box(c->src, 0, off, shape, buf, err);
}

static sm_status ph_input(void *ctx, struct sm_err *err)
{
    return read_n(ctx, 40, err); /* not a pass: headers, identity */
}
static sm_status ph_plan(void *ctx, struct sm_err *err)
{
    return read_n(ctx, 3, err); /* a stream inflated for the first pass */
}
static sm_status ph_range(void *ctx, struct sm_err *err)
{
    return read_n(ctx, 5, err);
}
static uint64_t none_total(void *ctx)
{
    (void)ctx;
    return UINT64_MAX; /* this run has no range pass */
}
static sm_status ph_scan(void *ctx, struct sm_err *err)
{
    return read_n(ctx, 7, err);
}
static sm_status ph_reduce(void *ctx, struct sm_err *err)
{
    return read_n(ctx, 11, err); /* not a pass */
}
static sm_status ph_write(void *ctx, struct sm_err *err)
{
    return read_n(ctx, 13, err);
}

static void test_passes(void **state)
{
    (void)state;
    const struct sm_source_info info = {.ndim = 3, .shape = {64, 1, 1}, .dtype = SM_DT_UINT8};
    struct ctx c;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_source_new(&fake_ops, NULL, &info, &c.src, &err), SM_OK);
    static const struct run_phase phases[] = {
        {.name = "input", .run = ph_input, .timing = -1},
        {.name = "plan", .run = ph_plan, .timing = -1},
        {.name = "range", .run = ph_range, .total = none_total, .timing = -1},
        {.name = "scan", .run = ph_scan, .timing = -1},
        {.name = "reduce", .run = ph_reduce, .timing = -1},
        {.name = "write", .run = ph_write, .timing = -1},
    };
    struct sm_run_result res;
    memset(&res, 0, sizeof(res));
    res.source = c.src;
    const struct run_phase_env env = {NULL, NULL, NULL, NULL, &res};
    assert_int_equal(sm_run_phases(phases, sizeof(phases) / sizeof(phases[0]), &c, &env, &err),
                     SM_OK);
    assert_false(res.pass[SM_RUN_PASS_RANGE].ran); /* nothing to do: its reads go on */
    assert_int_equal(res.pass[SM_RUN_PASS_RANGE].bytes_read, 0);
    assert_true(res.pass[SM_RUN_PASS_SCAN].ran);
    assert_int_equal(res.pass[SM_RUN_PASS_SCAN].bytes_read, 3 + 5 + 7);
    assert_true(res.pass[SM_RUN_PASS_WRITE].ran);
    assert_int_equal(res.pass[SM_RUN_PASS_WRITE].bytes_read, 13); /* not reduce's 11 */
    assert_int_equal(sm_source_bytes_read(c.src), 40 + 3 + 5 + 7 + 11 + 13);
    assert_int_equal(res.rchar_known, access("/proc/self/io", R_OK) == 0);
    /* one process: the reduction keeps the sums, the most of one rank is the same */
    assert_int_equal(sm_run_reduce_usage(&res, &err), SM_OK);
    assert_int_equal(res.pass[SM_RUN_PASS_SCAN].bytes_read, 15);
    assert_int_equal(res.pass[SM_RUN_PASS_SCAN].bytes_read_max, 15);
    assert_int_equal(res.pass[SM_RUN_PASS_WRITE].rchar_max, res.pass[SM_RUN_PASS_WRITE].rchar);
    assert_int_equal(res.input_bytes, 0); /* a caller's source without describe: unknown */
    assert_string_equal(sm_run_pass_name(SM_RUN_PASS_WRITE), "write");
    sm_source_close(c.src);
}

/* Without env.res nothing is counted (the scan job). */
static void test_no_result(void **state)
{
    (void)state;
    const struct sm_source_info info = {.ndim = 3, .shape = {64, 1, 1}, .dtype = SM_DT_UINT8};
    struct ctx c;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_source_new(&fake_ops, NULL, &info, &c.src, &err), SM_OK);
    static const struct run_phase phases[] = {{.name = "scan", .run = ph_scan, .timing = -1}};
    const struct run_phase_env env = {NULL, NULL, NULL, NULL, NULL};
    assert_int_equal(sm_run_phases(phases, 1, &c, &env, &err), SM_OK);
    assert_int_equal(sm_source_bytes_read(c.src), 7);
    sm_source_close(c.src);
}

/* ---- when, trace, cleanup, early end (issue 36 item 4) ---- */

struct log {
    char text[512]; /* "phase:what " for each transition */
    int runs[4];    /* how often each phase's run was called */
    int cleanups;
    bool done;
};

static void log_trace(void *user, const char *phase, const char *what)
{
    struct log *l = user;
    const size_t n = strlen(l->text);
    snprintf(l->text + n, sizeof(l->text) - n, "%s:%s ", phase, what);
}

static sm_status ok0(void *ctx, struct sm_err *err)
{
    (void)err;
    ((struct log *)ctx)->runs[0]++;
    return SM_OK;
}
static sm_status ok1(void *ctx, struct sm_err *err)
{
    (void)err;
    ((struct log *)ctx)->runs[1]++;
    return SM_OK;
}
static sm_status fail2(void *ctx, struct sm_err *err)
{
    ((struct log *)ctx)->runs[2]++;
    SM_FAIL(err, SM_E_DATA, "phase c fails");
}
static sm_status end2(void *ctx, struct sm_err *err)
{
    (void)err;
    struct log *l = ctx;
    l->runs[2]++;
    l->done = true; /* nothing more to do: only the ALWAYS rows run */
    return SM_OK;
}
static sm_status ok3(void *ctx, struct sm_err *err)
{
    (void)err;
    ((struct log *)ctx)->runs[3]++;
    return SM_OK;
}
static void clean(void *ctx)
{
    ((struct log *)ctx)->cleanups++;
}
static bool never(const void *ctx)
{
    (void)ctx;
    return false; /* e.g. "two passes only" in a one-pass run */
}
static bool always(const void *ctx)
{
    (void)ctx;
    return true;
}

/* A row whose `when` is false is neither run, timed nor counted as a failure; every transition is
 * traced; after a failure only the cleanups run, and the failure is the run's status. */
static void test_when_trace_cleanup(void **state)
{
    (void)state;
    struct log l;
    memset(&l, 0, sizeof(l));
    static const struct run_phase phases[] = {
        {.name = "a", .run = ok0, .when = always, .timing = 0},
        {.name = "b", .run = ok1, .when = never, .timing = 1},
        {.name = "c", .run = fail2, .cleanup = clean, .timing = -1},
        {.name = "d", .run = ok3, .cleanup = clean, .timing = -1},
        {.name = "e", .run = ok3, .timing = -1},
    };
    double timing[SM_RUN_NTIMINGS] = {0};
    const struct sm_run_progress pr = {.user = &l, .trace = log_trace};
    const struct run_phase_env env = {&pr, NULL, timing, NULL, NULL};
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_phases(phases, sizeof(phases) / sizeof(phases[0]), &l, &env, &err),
                     SM_E_DATA);
    assert_string_equal(err.what, "phase c fails");
    assert_string_equal(l.text, "a:begin a:ok b:skipped c:begin c:cleanup c:failed d:cleanup ");
    assert_int_equal(l.runs[0], 1);
    assert_int_equal(l.runs[1], 0); /* ruled out by its `when` */
    assert_int_equal(l.runs[2], 1);
    assert_int_equal(l.runs[3], 0); /* after the failure: not run, only cleaned up */
    assert_int_equal(l.cleanups, 2);
    assert_true(timing[0] >= 0.0);
    assert_true(timing[1] == 0.0); /* a skipped row is not timed */
}

/* A run that ends early (env.done) runs only the RUN_PHASE_ALWAYS rows, and succeeds. */
static void test_ended_early(void **state)
{
    (void)state;
    struct log l;
    memset(&l, 0, sizeof(l));
    static const struct run_phase phases[] = {
        {.name = "a", .run = ok0, .timing = -1},
        {.name = "c", .run = end2, .timing = -1},
        {.name = "b", .run = ok1, .timing = -1},
        {.name = "d", .run = ok3, .timing = -1, .flags = RUN_PHASE_ALWAYS},
    };
    const struct sm_run_progress pr = {.user = &l, .trace = log_trace};
    const struct run_phase_env env = {&pr, NULL, NULL, &l.done, NULL};
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_phases(phases, sizeof(phases) / sizeof(phases[0]), &l, &env, &err),
                     SM_OK);
    assert_string_equal(l.text, "a:begin a:ok c:begin c:ok b:ended d:begin d:ok ");
    assert_int_equal(l.runs[1], 0);
    assert_int_equal(l.runs[3], 1);
}

/* Without a trace hook (or without a progress at all) the driver runs the same. */
static void test_no_trace(void **state)
{
    (void)state;
    struct log l;
    memset(&l, 0, sizeof(l));
    static const struct run_phase phases[] = {
        {.name = "a", .run = ok0, .timing = -1},
        {.name = "b", .run = ok1, .when = never, .timing = -1},
    };
    const struct sm_run_progress pr = {.user = &l};
    const struct run_phase_env env = {&pr, NULL, NULL, NULL, NULL};
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_phases(phases, 2, &l, &env, &err), SM_OK);
    assert_int_equal(l.runs[0], 1);
    assert_int_equal(l.runs[1], 0);
    assert_string_equal(l.text, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_passes),
        cmocka_unit_test(test_no_result),
        cmocka_unit_test(test_when_trace_cleanup),
        cmocka_unit_test(test_ended_early),
        cmocka_unit_test(test_no_trace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
