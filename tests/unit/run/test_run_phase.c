/* Unit tests for the phase driver's pass counters (run/run_phase.c, run/run_result.c; issue 33 item
 * 4): with env.res set, the input's reads during the phases range, scan and write count to those
 * passes; the plan phase's reads, and those of a pass with nothing to do (total UINT64_MAX), count
 * to the next pass that runs; other phases' reads count to none; the end-of-run reduction keeps
 * them (one process) and states the source's input bytes. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
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
        {"input", ph_input, NULL, NULL, NULL, -1, 0},
        {"plan", ph_plan, NULL, NULL, NULL, -1, 0},
        {"range", ph_range, NULL, NULL, none_total, -1, 0},
        {"scan", ph_scan, NULL, NULL, NULL, -1, 0},
        {"reduce", ph_reduce, NULL, NULL, NULL, -1, 0},
        {"write", ph_write, NULL, NULL, NULL, -1, 0},
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
    static const struct run_phase phases[] = {{"scan", ph_scan, NULL, NULL, NULL, -1, 0}};
    const struct run_phase_env env = {NULL, NULL, NULL, NULL, NULL};
    assert_int_equal(sm_run_phases(phases, 1, &c, &env, &err), SM_OK);
    assert_int_equal(sm_source_bytes_read(c.src), 7);
    sm_source_close(c.src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_passes),
        cmocka_unit_test(test_no_result),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
