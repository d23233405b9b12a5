/* Unit tests for engine/source/source.c and source_open.c: a source over a caller's own callbacks
 * (sm_source_new): its info copied with the slab hint clamped, plan and describe optional, every
 * read_box bounds-checked and its bytes summed by sm_source_bytes_read (a refused box reads and
 * counts nothing), close called once; and sm_source_open's refusals of its parameters and of a
 * FIFO or directory as the file (never a blocking open). */
#include "shardmill/sm_config.h"

#include <jansson.h>
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

#include "shardmill/source.h"

/* A [4, 6] uint16 volume whose value at (y, x) is 100 * y + x; each read "costs" 3 bytes per
 * value, so the count is visibly the callback's and not the box's size. */
struct mine {
    int reads, plans, closes, fail_at;
    uint64_t plan_off[2], plan_shape[2], plan_budget;
};

static sm_status mine_read(void *user, int thread, const uint64_t *off, const uint64_t *shape,
                           void *out, uint64_t *read, struct sm_err *err)
{
    (void)thread;
    struct mine *m = user;
    if (++m->reads == m->fail_at) {
        *read = 5; /* what a failing read took before it failed is counted too */
        SM_FAIL(err, SM_E_DATA, "the caller's source failed");
    }
    uint16_t *o = out;
    for (uint64_t y = 0; y < shape[0]; y++) {
        for (uint64_t x = 0; x < shape[1]; x++) {
            *o++ = (uint16_t)(100 * (off[0] + y) + off[1] + x);
        }
    }
    *read = 3 * shape[0] * shape[1];
    return SM_OK;
}

static sm_status mine_plan(void *user, const uint64_t *off, const uint64_t *shape,
                           uint64_t memory_bytes, struct sm_err *err)
{
    (void)err;
    struct mine *m = user;
    m->plans++;
    memcpy(m->plan_off, off, sizeof(m->plan_off));
    memcpy(m->plan_shape, shape, sizeof(m->plan_shape));
    m->plan_budget = memory_bytes;
    return SM_OK;
}

static json_t *mine_describe(void *user)
{
    const struct mine *m = user;
    return json_pack("{s:s,s:i}", "format", "mine", "reads", m->reads);
}

static void mine_close(void *user)
{
    ((struct mine *)user)->closes++;
}

static const struct sm_source_info info_4x6 = {
    .ndim = 2, .shape = {4, 6}, .dtype = SM_DT_UINT16, .slab = {0, 9}, .format = "mine"};

static void test_counted_reads(void **state)
{
    (void)state;
    static const struct sm_source_ops ops = {.read_box = mine_read, .close = mine_close};
    struct mine m = {0};
    struct sm_source *s = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_source_new(&ops, &m, &info_4x6, &s, &err), SM_OK);
    const struct sm_source_info *in = sm_source_info(s);
    assert_int_equal(in->ndim, 2);
    assert_int_equal(in->slab[0], 4); /* 0: no hint, the whole axis */
    assert_int_equal(in->slab[1], 6); /* past the axis: clamped */
    assert_string_equal(in->format, "mine");
    assert_int_equal(sm_source_bytes_read(s), 0);

    uint16_t box[2 * 3];
    const uint64_t off[2] = {2, 3}, shape[2] = {2, 3};
    assert_int_equal(sm_source_read_box(s, 0, off, shape, box, &err), SM_OK);
    assert_int_equal(box[0], 203);
    assert_int_equal(box[5], 305);
    assert_int_equal(sm_source_bytes_read(s), 3 * 6);
    const uint64_t off1[2] = {0, 0}, row[2] = {1, 6};
    assert_int_equal(sm_source_read_box(s, 1, off1, row, box, &err), SM_OK);
    assert_int_equal(sm_source_bytes_read(s), 3 * 6 + 3 * 6);

    const uint64_t past[2] = {3, 4}; /* [3, 5) x [4, 7): outside the volume */
    assert_int_equal(sm_source_read_box(s, 0, past, shape, box, &err), SM_E_INTERNAL);
    assert_int_equal(m.reads, 2);
    assert_int_equal(sm_source_bytes_read(s), 36);

    m.fail_at = 3;
    sm_err_clear(&err);
    assert_int_equal(sm_source_read_box(s, 0, off, shape, box, &err), SM_E_DATA);
    assert_non_null(strstr(err.what, "caller's source failed"));
    assert_int_equal(sm_source_bytes_read(s), 41);

    /* no plan, no describe: nothing to do, and the format alone */
    const uint64_t z[2] = {0, 0};
    assert_int_equal(sm_source_plan(s, z, z, 1, &err), SM_OK);
    json_t *d = sm_source_describe(s);
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "format")), "mine");
    assert_int_equal(json_object_size(d), 1);
    json_decref(d);
    sm_source_close(s);
    assert_int_equal(m.closes, 1);
    sm_source_close(NULL);
}

static void test_plan_and_describe(void **state)
{
    (void)state;
    static const struct sm_source_ops ops = {
        .plan = mine_plan, .read_box = mine_read, .describe = mine_describe, .close = mine_close};
    struct mine m = {0};
    struct sm_source *s = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_source_new(&ops, &m, &info_4x6, &s, &err), SM_OK);
    const uint64_t off[2] = {1, 0}, shape[2] = {2, 6};
    assert_int_equal(sm_source_plan(s, off, shape, 4096, &err), SM_OK);
    assert_int_equal(m.plans, 1);
    assert_int_equal(m.plan_off[0], 1);
    assert_int_equal(m.plan_shape[0], 2);
    assert_int_equal(m.plan_shape[1], 6);
    assert_int_equal(m.plan_budget, 4096);
    uint16_t box[12];
    assert_int_equal(sm_source_read_box(s, 0, off, shape, box, &err), SM_OK);
    json_t *d = sm_source_describe(s); /* the callback's object, made when asked */
    assert_string_equal(json_string_value(json_object_get(d, "format")), "mine");
    assert_int_equal(json_integer_value(json_object_get(d, "reads")), 1);
    json_decref(d);
    sm_source_close(s);
    assert_int_equal(m.closes, 1);
}

static void test_new_refuses(void **state)
{
    (void)state;
    static const struct sm_source_ops no_read = {.close = mine_close};
    static const struct sm_source_ops ops = {.read_box = mine_read};
    struct mine m = {0};
    struct sm_source *s = (struct sm_source *)&m; /* overwritten with NULL on failure */
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_source_new(&no_read, &m, &info_4x6, &s, &err), SM_E_INTERNAL);
    assert_null(s);
    struct sm_source_info bad = info_4x6;
    bad.ndim = 0;
    assert_int_equal(sm_source_new(&ops, &m, &bad, &s, &err), SM_E_INTERNAL);
    bad.ndim = SM_MAX_DIMS + 1;
    assert_int_equal(sm_source_new(&ops, &m, &bad, &s, &err), SM_E_INTERNAL);
    bad = info_4x6;
    bad.dtype = SM_DT_COUNT;
    assert_int_equal(sm_source_new(&ops, &m, &bad, &s, &err), SM_E_INTERNAL);
    assert_int_equal(m.closes, 0); /* a refused source never owned the state */
}

static void test_open_refuses(void **state)
{
    (void)state;
    struct sm_source *s = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_source_params p = {.format = "zarr", .path = "/nonexistent/volume"};
    assert_int_equal(sm_source_open(&p, &s, &err), SM_E_USAGE);
    assert_string_equal(err.where, "input.format");
    assert_null(s);
    sm_err_clear(&err);
    p.format = "raw";
    p.path = NULL;
    assert_int_equal(sm_source_open(&p, &s, &err), SM_E_USAGE);
    assert_string_equal(err.where, "input.store");
    sm_err_clear(&err);
    p.path = "/nonexistent/volume";
    p.raw_dtype = SM_DT_COUNT; /* raw: a type and a shape are required */
    assert_int_equal(sm_source_open(&p, &s, &err), SM_E_USAGE);
    assert_string_equal(err.where, "input.raw.dtype");
    sm_err_clear(&err);
    p.raw_dtype = SM_DT_UINT8;
    assert_int_equal(sm_source_open(&p, &s, &err), SM_E_USAGE);
    assert_string_equal(err.where, "input.raw.shape");
    sm_err_clear(&err);
    p.raw_ndim = 1;
    p.raw_shape[0] = 10;
    assert_int_equal(sm_source_open(&p, &s, &err), SM_E_IO);
    assert_string_equal(err.where, "/nonexistent/volume");
    assert_null(s);
}

/* Issue 32 item 9: a FIFO (or a directory) as a source file is SM_E_DATA naming it, at once:
 * the open does not block waiting for a writer (a hang here is the ctest timeout). */
static void test_open_refuses_fifo(void **state)
{
    (void)state;
    char dir[] = "/tmp/sm-src-fifo-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char fifo[64], gz[64];
    snprintf(fifo, sizeof(fifo), "%s/v.raw", dir);
    snprintf(gz, sizeof(gz), "%s/v.nii.gz", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(mkfifo(gz, 0600), 0);
    const struct {
        const char *format, *path;
    } cases[] = {{"raw", fifo}, {"nifti", fifo}, {"nifti", gz}, {"tiff", fifo}, {"raw", dir}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sm_source *s = NULL;
        struct sm_err err;
        sm_err_clear(&err);
        struct sm_source_params p = {.format = cases[i].format,
                                     .path = cases[i].path,
                                     .raw_dtype = SM_DT_UINT8,
                                     .raw_ndim = 1,
                                     .raw_shape = {4}};
        assert_int_equal(sm_source_open(&p, &s, &err), SM_E_DATA);
        assert_string_equal(err.where, cases[i].path);
        assert_non_null(strstr(err.what, "not a regular file"));
        assert_null(s);
    }
    assert_int_equal(unlink(fifo), 0);
    assert_int_equal(unlink(gz), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counted_reads),     cmocka_unit_test(test_plan_and_describe),
        cmocka_unit_test(test_new_refuses),       cmocka_unit_test(test_open_refuses),
        cmocka_unit_test(test_open_refuses_fifo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
