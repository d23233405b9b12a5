/* Unit tests for sm_run_convert over a caller's own source (shardmill/source.h, sm_source_new;
 * run/run_convert.c) with normalize none, one process and a source made here: a uint16 volume whose
 * values are a function of the voxel index. The run's checksums and histogram are checked against
 * sums taken here (SPEC §5), the source's calls against its contract (plan once, before any read,
 * with a box that holds every box read; the boxes read cover every voxel exactly once), and the
 * failures: a read_box error ends the run with that error and no marker, a plan error leaves no
 * output directory, a float source without histogram keys makes no histogram, a source without
 * read_box is refused, a set stop flag ends the run with SM_E_STOPPED and no marker; a run of
 * more groups of shards allocates no more large blocks. Ranks are tested by tests/mpi/source_api.c.
 */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "shardmill/alloc.h"
#include "shardmill/pipeline.h"
#include "shardmill/source.h"
#include "sm_test.h"

#define Z 9
#define Y 10
#define X 11

struct src {
    atomic_int plans, reads_before_plan, outside_plan, fail_at_z; /* fail_at_z < 0: never */
    atomic_ullong voxels_read;
    uint64_t plan_off[3], plan_shape[3];
    sm_status plan_status;
    enum sm_dtype dtype;
};

static uint16_t value_at(uint64_t z, uint64_t y, uint64_t x)
{
    return (uint16_t)((z * 7919u + y * 104729u + x * 31u) % 65521u);
}

static sm_status src_plan(void *user, const uint64_t *off, const uint64_t *shape,
                          uint64_t memory_bytes, struct sm_err *err)
{
    (void)memory_bytes;
    struct src *s = user;
    atomic_fetch_add(&s->plans, 1);
    memcpy(s->plan_off, off, sizeof(s->plan_off));
    memcpy(s->plan_shape, shape, sizeof(s->plan_shape));
    if (s->plan_status != SM_OK) {
        SM_FAIL_AT(err, s->plan_status, "limits.memory_bytes", "the plan refuses");
    }
    return SM_OK;
}

static sm_status src_read_box(void *user, int thread, const uint64_t *off, const uint64_t *shape,
                              void *out, uint64_t *read, struct sm_err *err)
{
    (void)thread;
    struct src *s = user;
    if (atomic_load(&s->plans) == 0) {
        atomic_fetch_add(&s->reads_before_plan, 1);
    }
    for (int d = 0; d < 3; d++) {
        if (off[d] < s->plan_off[d] || off[d] + shape[d] > s->plan_off[d] + s->plan_shape[d]) {
            atomic_fetch_add(&s->outside_plan, 1);
        }
    }
    const int fz = atomic_load(&s->fail_at_z);
    if (fz >= 0 && off[0] <= (uint64_t)fz && (uint64_t)fz < off[0] + shape[0]) {
        SM_FAIL_AT(err, SM_E_DATA, "volume.raw", "bad slice %d", fz);
    }
    size_t i = 0;
    for (uint64_t z = off[0]; z < off[0] + shape[0]; z++) {
        for (uint64_t y = off[1]; y < off[1] + shape[1]; y++) {
            for (uint64_t x = off[2]; x < off[2] + shape[2]; x++, i++) {
                if (s->dtype == SM_DT_UINT16) {
                    ((uint16_t *)out)[i] = value_at(z, y, x);
                } else {
                    ((float *)out)[i] = (float)value_at(z, y, x) * 0.5f;
                }
            }
        }
    }
    atomic_fetch_add(&s->voxels_read, (unsigned long long)i);
    *read = i * (s->dtype == SM_DT_UINT16 ? 2 : 4);
    return SM_OK;
}

struct fx {
    char dir[256];
};

static int setup(void **state)
{
    static struct fx f;
    memset(&f, 0, sizeof(f));
    if (sm_test_tmpdir("run_ingest", f.dir, sizeof(f.dir)) != 0) {
        return -1;
    }
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    sm_test_rm_rf(f->dir);
    return 0;
}

static void init_src(struct src *s, enum sm_dtype dt)
{
    memset(s, 0, sizeof(*s));
    atomic_store(&s->fail_at_z, -1);
    s->plan_status = SM_OK;
    s->dtype = dt;
}

static const struct sm_source_ops src_ops = {src_plan, src_read_box, NULL, NULL};

/* A convert with normalize none of the source over s into out; *src must be closed. */
static struct sm_convert_run make_run(struct src *s, const char *out, struct sm_source **src)
{
    struct sm_source_info info;
    memset(&info, 0, sizeof(info));
    info.ndim = 3;
    info.shape[0] = Z;
    info.shape[1] = Y;
    info.shape[2] = X;
    info.dtype = s->dtype;
    snprintf(info.format, sizeof(info.format), "test");
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_source_new(&src_ops, s, &info, src, &err), SM_OK);
    struct sm_convert_run p = SM_CONVERT_RUN_DEFAULTS;
    p.source = *src;
    p.normalize.mode = SM_NORM_NONE;
    p.output.path = out;
    p.output.policy.sync = SM_OUTPUT_SYNC_NONE;
    const struct sm_run_dims shard = {true, 3, {4, 4, 4}}, chunk = {true, 3, {2, 2, 2}};
    p.output.shard = shard;
    p.output.chunk = chunk;
    p.c.threads = 2;
    return p;
}

static void test_source_sums_and_contract(void **state)
{
    struct fx *f = *state;
    char out[400];
    snprintf(out, sizeof(out), "%s/u16.zarr", f->dir);
    struct src s;
    init_src(&s, SM_DT_UINT16);
    struct sm_source *src = NULL;
    struct sm_convert_run p = make_run(&s, out, &src);
    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_OK);
    /* SPEC §5 over the values, taken here */
    uint64_t sum = 0, weighted = 0, i = 0;
    static uint64_t counts[65536];
    memset(counts, 0, sizeof(counts));
    for (uint64_t z = 0; z < Z; z++) {
        for (uint64_t y = 0; y < Y; y++) {
            for (uint64_t x = 0; x < X; x++) {
                const uint16_t v = value_at(z, y, x);
                sum += v;
                weighted += (uint64_t)v * (++i);
                counts[v]++;
            }
        }
    }
    assert_int_equal(r.scan.voxels, Z * Y * X);
    assert_int_equal(r.scan.sums.sum, sum);
    assert_int_equal(r.scan.sums.weighted, weighted);
    assert_int_equal(r.output_checksum, sum);
    assert_int_equal(r.output_weighted_checksum, weighted);
    assert_int_equal(r.scan.hist.bins, 65536); /* uint16 default: one bin per value */
    assert_memory_equal(r.scan.hist.counts, counts, sizeof(counts));
    /* 3 x 3 x 3 shards, every one written, the marker last */
    assert_int_equal(r.output_shards, 27);
    assert_int_equal(r.shards_written, 27);
    assert_int_equal(r.shards_kept, 0);
    assert_true(sm_test_exists(out, "zarr.json") && sm_test_exists(out, "shardmill.complete.json"));
    assert_false(sm_test_exists(out, ".shardmill"));
    /* the source's contract: plan once, first, with a box that holds every read; each voxel
     * read once */
    assert_int_equal(atomic_load(&s.plans), 1);
    assert_int_equal(atomic_load(&s.reads_before_plan), 0);
    assert_int_equal(atomic_load(&s.outside_plan), 0);
    assert_int_equal(atomic_load(&s.voxels_read), Z * Y * X);
    assert_true(s.plan_shape[0] == Z && s.plan_shape[1] == Y && s.plan_shape[2] == X);
    sm_run_result_destroy(&r);

    /* resume of the complete output: every shard read again (its values' digest must equal its
     * record's: issue 19, a changed input is never kept), none written */
    init_src(&s, SM_DT_UINT16);
    p.output.policy.exists = SM_OUTPUT_EXISTS_RESUME;
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_OK);
    assert_int_equal(r.shards_kept, 27);
    assert_int_equal(r.shards_written, 0);
    assert_int_equal(atomic_load(&s.voxels_read), Z * Y * X);
    sm_run_result_destroy(&r);
    sm_source_close(src);
}

static void test_read_error_ends_the_run_without_marker(void **state)
{
    struct fx *f = *state;
    char out[400];
    snprintf(out, sizeof(out), "%s/bad.zarr", f->dir);
    struct src s;
    init_src(&s, SM_DT_UINT16);
    atomic_store(&s.fail_at_z, 5);
    struct sm_source *src = NULL;
    struct sm_convert_run p = make_run(&s, out, &src);
    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_E_DATA);
    assert_string_equal(err.where, "volume.raw");
    assert_non_null(strstr(err.what, "bad slice 5"));
    assert_false(sm_test_exists(out, "shardmill.complete.json"));
    sm_run_result_destroy(&r);
    sm_source_close(src);
}

static void test_plan_error_leaves_no_output(void **state)
{
    struct fx *f = *state;
    char out[400];
    snprintf(out, sizeof(out), "%s/limit.zarr", f->dir);
    struct src s;
    init_src(&s, SM_DT_UINT16);
    s.plan_status = SM_E_LIMIT;
    struct sm_source *src = NULL;
    struct sm_convert_run p = make_run(&s, out, &src);
    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_E_LIMIT);
    assert_string_equal(err.where, "limits.memory_bytes");
    assert_false(sm_test_exists(f->dir, "limit.zarr"));
    assert_int_equal(atomic_load(&s.voxels_read), 0);
    sm_run_result_destroy(&r);
    sm_source_close(src);
}

static void test_float_without_histogram_keys_and_bad_sources(void **state)
{
    struct fx *f = *state;
    char out[400];
    snprintf(out, sizeof(out), "%s/f32.zarr", f->dir);
    struct src s;
    init_src(&s, SM_DT_FLOAT32);
    struct sm_source *src = NULL;
    struct sm_convert_run p = make_run(&s, out, &src);
    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_OK);
    assert_int_equal(r.scan.hist.bins, 0); /* no default range for float32: none made */
    assert_int_equal(r.scan.voxels, Z * Y * X);
    sm_run_result_destroy(&r);

    /* histogram.bins without histogram.range for float32: the min/max pass gives the range
     * (SPEC §5), over which the 16 bins count every voxel */
    snprintf(out, sizeof(out), "%s/f32b.zarr", f->dir);
    p.output.path = out;
    p.c.hist_bins = 16;
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_OK);
    assert_int_equal(r.hist_range_from, SM_HIST_RANGE_MINMAX);
    assert_int_equal(r.scan.hist.bins, 16);
    assert_true(r.scan.hist.lo == r.scan.hist.min);
    assert_true(r.scan.hist.hi == nextafter(r.scan.hist.max, INFINITY));
    assert_int_equal(sm_hist_total(&r.scan.hist), Z * Y * X);
    assert_int_equal(r.scan.hist.underflow + r.scan.hist.overflow, 0);
    sm_run_result_destroy(&r);

    snprintf(out, sizeof(out), "%s/none.zarr", f->dir);
    p.output.path = out;
    /* a source without read_box is refused when it is made */
    const struct sm_source_ops no_read = {src_plan, NULL, NULL, NULL};
    struct sm_source_info info = *sm_source_info(src);
    struct sm_source *bad = NULL;
    sm_err_clear(&err);
    assert_int_equal(sm_source_new(&no_read, &s, &info, &bad, &err), SM_E_INTERNAL);
    assert_null(bad);
    sm_source_close(src);
}

static void test_stopped_leaves_no_marker(void **state)
{
    struct fx *f = *state;
    char out[400];
    snprintf(out, sizeof(out), "%s/stopped.zarr", f->dir);
    struct src s;
    init_src(&s, SM_DT_UINT16);
    atomic_int stop = 15; /* as if SIGTERM arrived before the run */
    struct sm_source *src = NULL;
    struct sm_convert_run p = make_run(&s, out, &src);
    p.c.stop = &stop;
    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_E_STOPPED);
    assert_int_equal(err.cause, 15);
    assert_false(sm_test_exists(out, "shardmill.complete.json"));
    sm_run_result_destroy(&r);
    sm_source_close(src);
}

/* A run of `depth` x 256 x 512 whose source is read in whole slices, in shards of 16 x 256 x 256
 * (2 MiB each: a large block): its groups are the rows of two shards, depth / 16 of them. Returns
 * the large blocks (alloc.h) the run allocated. */
static uint64_t grouped_run_large_blocks(struct fx *f, uint64_t depth)
{
    char out[400];
    snprintf(out, sizeof(out), "%s/groups-%llu.zarr", f->dir, (unsigned long long)depth);
    struct src s;
    init_src(&s, SM_DT_UINT16);
    struct sm_source_info info;
    memset(&info, 0, sizeof(info));
    info.ndim = 3;
    info.shape[0] = depth;
    info.shape[1] = info.slab[1] = 256;
    info.shape[2] = info.slab[2] = 512;
    info.slab[0] = 1;
    info.access = SM_SOURCE_BLOCKS;
    info.dtype = SM_DT_UINT16;
    snprintf(info.format, sizeof(info.format), "test");
    struct sm_source *src = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_source_new(&src_ops, &s, &info, &src, &err), SM_OK);
    struct sm_convert_run p = SM_CONVERT_RUN_DEFAULTS;
    p.source = src;
    p.normalize.mode = SM_NORM_NONE;
    p.output.path = out;
    p.output.policy.sync = SM_OUTPUT_SYNC_NONE;
    const struct sm_run_dims shard = {true, 3, {16, 256, 256}}, chunk = {true, 3, {16, 64, 64}};
    p.output.shard = shard;
    p.output.chunk = chunk;
    p.c.threads = 2;
    struct sm_run_result r;
    const uint64_t before = sm_alloc_large_count();
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_OK);
    const uint64_t large = sm_alloc_large_count() - before;
    assert_int_equal(r.output_shards, depth / 16 * 2);
    assert_int_equal(r.shards_written, depth / 16 * 2);
    assert_int_equal(atomic_load(&s.voxels_read), depth * 256 * 512); /* each voxel read once */
    sm_run_result_destroy(&r);
    sm_source_close(src);
    return large;
}

/* The write keeps its threads' shard buffers from group to group (write.h, sm_write_crew): a run
 * of 4 groups allocates no more large blocks than one of 2. Before, each group mapped fresh shard
 * buffers, pages the kernel zeroes again (issue 33: clear_page 6 % of the W9 profile). */
static void test_groups_reuse_buffers(void **state)
{
    struct fx *f = *state;
    const uint64_t two = grouped_run_large_blocks(f, 32);
    const uint64_t four = grouped_run_large_blocks(f, 64);
    assert_true(two > 0); /* the shard buffers are large blocks: the count sees them */
    assert_int_equal(four, two);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_source_sums_and_contract),
        cmocka_unit_test(test_read_error_ends_the_run_without_marker),
        cmocka_unit_test(test_plan_error_leaves_no_output),
        cmocka_unit_test(test_float_without_histogram_keys_and_bad_sources),
        cmocka_unit_test(test_stopped_leaves_no_marker),
        cmocka_unit_test(test_groups_reuse_buffers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
