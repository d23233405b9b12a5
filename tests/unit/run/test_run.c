/* Unit tests for the pipeline API (run/, shardmill/pipeline.h) with one process: a scan and a
 * convert of a small uncompressed Zarr v2 uint8 array written here by hand (histogram and
 * voxels against counts taken here), a convert stopped by its flag (no marker), the result's I/O
 * counters and peak memory, a scan's prepare step, the HDF5 export phase, output.exists: auto
 * ending a run early over its complete output, and the errors that name the parameter in YAML
 * terms. Ranks are tested by tests/mpi and tests/examples. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <jansson.h>

#include "run_int.h"
#include "shardmill/pipeline.h"
#include "sm_test.h"

#define N 8 /* the array is N^3 uint8, chunks (N/2)^3 */

struct fx {
    char dir[256], store[300];
    uint8_t data[N * N * N];
};

static int setup(void **state)
{
    static struct fx f;
    memset(&f, 0, sizeof(f));
    if (sm_test_tmpdir("run", f.dir, sizeof(f.dir)) != 0) {
        return -1;
    }
    snprintf(f.store, sizeof(f.store), "%s/in.zarr", f.dir);
    char path[400];
    snprintf(path, sizeof(path), "%s/.zarray", f.store);
    const char *zarray = "{\"zarr_format\": 2, \"shape\": [8, 8, 8], \"chunks\": [4, 4, 4], "
                         "\"dtype\": \"|u1\", \"compressor\": null, \"fill_value\": 0, "
                         "\"order\": \"C\", \"filters\": null}";
    if (sm_test_write_file(path, zarray, strlen(zarray)) != 0) {
        return -1;
    }
    struct sm_test_rng rng = {7};
    for (size_t i = 0; i < sizeof(f.data); i++) {
        f.data[i] = (uint8_t)sm_test_rng_below(&rng, 200);
    }
    for (int cz = 0; cz < 2; cz++) {
        for (int cy = 0; cy < 2; cy++) {
            for (int cx = 0; cx < 2; cx++) {
                uint8_t chunk[64];
                for (int z = 0; z < 4; z++) {
                    for (int y = 0; y < 4; y++) {
                        for (int x = 0; x < 4; x++) {
                            chunk[(z * 4 + y) * 4 + x] =
                                f.data[((cz * 4 + z) * N + cy * 4 + y) * N + cx * 4 + x];
                        }
                    }
                }
                snprintf(path, sizeof(path), "%s/%d.%d.%d", f.store, cz, cy, cx);
                if (sm_test_write_file(path, chunk, sizeof(chunk)) != 0) {
                    return -1;
                }
            }
        }
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

static bool read_small(const char *dir, const char *name, char *buf, size_t cap)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *fp = fopen(p, "rb");
    if (fp == NULL) {
        return false;
    }
    const size_t n = fread(buf, 1, cap - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return n > 0;
}

static void test_scan_counts_every_value(void **state)
{
    struct fx *f = *state;
    struct sm_scan_run p = SM_SCAN_RUN_DEFAULTS;
    p.c.input.store = f->store;
    p.c.threads = 2;
    p.passes = 2;
    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_scan(&p, &r, &err), SM_OK);
    assert_int_equal(r.ranks, 1);
    assert_int_equal(r.scan.voxels, N * N * N);
    assert_int_equal(r.scan.tiles, 8); /* the tile defaults to the chunk */
    assert_int_equal(r.scan.hist.bins, 256);
    uint64_t want[256] = {0};
    for (size_t i = 0; i < sizeof(f->data); i++) {
        want[f->data[i]]++;
    }
    assert_memory_equal(r.scan.hist.counts, want, sizeof(want));
    assert_true(r.timing[SM_RUN_T_TOTAL] >= r.timing[SM_RUN_T_OPEN]);
    assert_true(r.timing_max[SM_RUN_T_TOTAL] == r.timing[SM_RUN_T_TOTAL]); /* one rank */
    assert_non_null(r.store);
    assert_int_equal(sm_array_meta(r.array)->ndim, 3);
    sm_run_result_destroy(&r);
}

static void test_convert_writes_a_complete_output(void **state)
{
    struct fx *f = *state;
    char out[400];
    snprintf(out, sizeof(out), "%s/out.zarr", f->dir);
    struct sm_convert_run p = SM_CONVERT_RUN_DEFAULTS;
    p.c.input.store = f->store;
    p.output.path = out;
    p.output.policy.sync = SM_OUTPUT_SYNC_NONE;
    const struct sm_run_dims shard = {true, 3, {4, 8, 8}};
    p.output.shard = shard;
    p.normalize.mode = SM_NORM_WINDOW;
    p.normalize.lo = 0;
    p.normalize.hi = 200;
    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_OK);
    assert_int_equal(r.output_shards, 2);
    assert_int_equal(r.shards_written, 2);
    assert_true(r.kept_input_ranks == 0); /* window: one pass, nothing kept */
    assert_true(sm_test_exists(out, "zarr.json") && sm_test_exists(out, "shardmill.complete.json"));
    assert_true(r.norm.lo == 0 && r.norm.hi == 200);
    /* one pass still counts the whole ROI: against counts and sums taken here */
    assert_int_equal(r.scan.voxels, N * N * N);
    assert_int_equal(r.scan.tiles, 8);
    uint64_t want[256] = {0}, sum = 0, weighted = 0;
    for (size_t i = 0; i < sizeof(f->data); i++) {
        want[f->data[i]]++;
        sum += f->data[i];
        weighted += (uint64_t)f->data[i] * (i + 1);
    }
    assert_memory_equal(r.scan.hist.counts, want, sizeof(want));
    assert_int_equal(r.scan.sums.sum, sum);
    assert_int_equal(r.scan.sums.weighted, weighted);
    /* zarr.json was restated with the histogram before the marker */
    char doc[8192];
    assert_true(read_small(out, "zarr.json", doc, sizeof(doc)));
    assert_non_null(strstr(doc, "\"histogram\""));
    sm_run_result_destroy(&r);
    /* the same output again: the default policy refuses it before reading anything */
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_E_USAGE);
    sm_run_result_destroy(&r);
}

static void test_convert_percentile_keeps_its_input(void **state)
{
    struct fx *f = *state;
    char out[400];
    snprintf(out, sizeof(out), "%s/pct.zarr", f->dir);
    struct sm_convert_run p = SM_CONVERT_RUN_DEFAULTS;
    p.c.input.store = f->store;
    p.output.path = out;
    p.output.policy.sync = SM_OUTPUT_SYNC_NONE;
    p.normalize.mode = SM_NORM_PERCENTILE;
    p.normalize.lo = 1;
    p.normalize.hi = 99;
    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_OK);
    assert_true(r.kept_input_ranks == 1); /* two passes: 512 bytes fit the default budget */
    assert_int_equal(r.scan.voxels, N * N * N);
    sm_run_result_destroy(&r);
}

/* normalize none keeps the values: the output checksums are the input's (whole-array ROI, so
 * the same linear indices), in the input's type or a wider one; a narrowing type is refused. */
static void test_convert_none_keeps_values(void **state)
{
    struct fx *f = *state;
    uint64_t sum = 0, weighted = 0;
    for (size_t i = 0; i < sizeof(f->data); i++) {
        sum += f->data[i];
        weighted += (uint64_t)f->data[i] * (i + 1);
    }
    static const struct {
        bool set;
        enum sm_dtype dt;
        const char *name;
    } cases[] = {{false, SM_DT_UINT8, "\"uint8\""},
                 {true, SM_DT_INT32, "\"int32\""},
                 {true, SM_DT_FLOAT32, "\"float32\""}};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        char out[400];
        snprintf(out, sizeof(out), "%s/none%zu.zarr", f->dir, k);
        struct sm_convert_run p = SM_CONVERT_RUN_DEFAULTS;
        p.c.input.store = f->store;
        p.c.threads = 2;
        p.output.path = out;
        p.output.policy.sync = SM_OUTPUT_SYNC_NONE;
        p.normalize.mode = SM_NORM_NONE;
        p.output.dtype_set = cases[k].set;
        p.output.dtype = cases[k].dt;
        struct sm_run_result r;
        struct sm_err err;
        sm_err_clear(&err);
        assert_int_equal(sm_run_convert(&p, &r, &err), SM_OK);
        if (cases[k].dt == SM_DT_FLOAT32) { /* bit patterns of the float values */
            uint64_t fs = 0, fw = 0;
            for (size_t i = 0; i < sizeof(f->data); i++) {
                const float v = (float)f->data[i];
                uint32_t b;
                memcpy(&b, &v, sizeof(b));
                fs += b;
                fw += (uint64_t)b * (i + 1);
            }
            assert_int_equal(r.output_checksum, fs);
            assert_int_equal(r.output_weighted_checksum, fw);
        } else {
            assert_int_equal(r.output_checksum, sum);
            assert_int_equal(r.output_weighted_checksum, weighted);
        }
        char doc[8192];
        assert_true(read_small(out, "zarr.json", doc, sizeof(doc)));
        assert_non_null(strstr(doc, cases[k].name));
        sm_run_result_destroy(&r);
    }
    char out[400];
    snprintf(out, sizeof(out), "%s/narrow.zarr", f->dir);
    struct sm_convert_run p = SM_CONVERT_RUN_DEFAULTS;
    p.c.input.store = f->store;
    p.output.path = out;
    p.normalize.mode = SM_NORM_NONE;
    p.output.dtype_set = true;
    p.output.dtype = SM_DT_INT8;
    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_E_USAGE);
    assert_string_equal(err.where, "output.dtype");
    assert_non_null(strstr(err.what, "narrowing"));
    sm_run_result_destroy(&r);
}

/* A normalized output as uint8 or uint16 (SPEC §2): the values are rint(float32(v) / 255 * MAX)
 * half to even, the output checksums are sums of the integer values (SPEC §5 as for integer
 * inputs), zarr.json and the result say the type; any other type is refused naming
 * output.dtype. */
static void test_convert_integer_outputs(void **state)
{
    struct fx *f = *state;
    static const enum sm_dtype types[] = {SM_DT_UINT8, SM_DT_UINT16};
    for (size_t k = 0; k < 2; k++) {
        const float max = types[k] == SM_DT_UINT8 ? 255.0f : 65535.0f;
        uint64_t sum = 0, weighted = 0;
        for (size_t i = 0; i < sizeof(f->data); i++) {
            volatile float w = (float)f->data[i] / 255.0f; /* scale, the default divisor */
            const uint64_t v = (uint64_t)rintf(w * max);
            sum += v;
            weighted += v * (i + 1);
        }
        char out[400];
        snprintf(out, sizeof(out), "%s/int%zu.zarr", f->dir, k);
        struct sm_convert_run p = SM_CONVERT_RUN_DEFAULTS;
        p.c.input.store = f->store;
        p.c.threads = 2;
        p.output.path = out;
        p.output.policy.sync = SM_OUTPUT_SYNC_NONE;
        p.output.dtype_set = true;
        p.output.dtype = types[k];
        struct sm_run_result r;
        struct sm_err err;
        sm_err_clear(&err);
        assert_int_equal(sm_run_convert(&p, &r, &err), SM_OK);
        assert_int_equal(r.output_dtype, types[k]);
        assert_int_equal(r.output_checksum, sum);
        assert_int_equal(r.output_weighted_checksum, weighted);
        char doc[8192], want[64];
        assert_true(read_small(out, "zarr.json", doc, sizeof(doc)));
        snprintf(want, sizeof(want), "\"%s\"", sm_dtype_name(types[k]));
        assert_non_null(strstr(doc, want));
        snprintf(want, sizeof(want), "\"output_dtype\": \"%s\"", sm_dtype_name(types[k]));
        assert_non_null(strstr(doc, want));
        sm_run_result_destroy(&r);
    }
    char out[400];
    snprintf(out, sizeof(out), "%s/int16.zarr", f->dir);
    struct sm_convert_run p = SM_CONVERT_RUN_DEFAULTS;
    p.c.input.store = f->store;
    p.output.path = out;
    p.normalize.mode = SM_NORM_WINDOW;
    p.normalize.lo = 0;
    p.normalize.hi = 100;
    p.output.dtype_set = true;
    p.output.dtype = SM_DT_INT16;
    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_E_USAGE);
    assert_string_equal(err.where, "output.dtype");
    assert_non_null(strstr(err.what, "float32, uint8 or uint16"));
    sm_run_result_destroy(&r);
}

static void test_convert_stopped_leaves_no_marker(void **state)
{
    struct fx *f = *state;
    char out[400];
    snprintf(out, sizeof(out), "%s/stopped.zarr", f->dir);
    atomic_int stop = 15; /* as if SIGTERM arrived before the run */
    struct sm_convert_run p = SM_CONVERT_RUN_DEFAULTS;
    p.c.input.store = f->store;
    p.c.stop = &stop;
    p.output.path = out;
    p.output.policy.sync = SM_OUTPUT_SYNC_NONE;
    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_E_STOPPED);
    assert_int_equal(err.cause, 15);
    assert_false(sm_test_exists(out, "shardmill.complete.json"));
    sm_run_result_destroy(&r);
}

/* output.exists: auto through the API: a new output is written; run again, the run ends after
 * its exists phase (the plan's layout hook is never called) with the output complete and nothing
 * written; another config_sha256 is SM_E_USAGE naming the member. */
static void count_layout(void *user, const struct sm_output_spec *spec, uint64_t nshards)
{
    (void)spec;
    (void)nshards;
    ++*(int *)user;
}

static void test_convert_exists_auto(void **state)
{
    struct fx *f = *state;
    char out[400];
    snprintf(out, sizeof(out), "%s/auto.zarr", f->dir);
    int layouts = 0;
    struct sm_convert_run p = SM_CONVERT_RUN_DEFAULTS;
    p.c.input.store = f->store;
    p.output.path = out;
    p.output.policy.exists = SM_OUTPUT_EXISTS_AUTO;
    p.output.policy.sync = SM_OUTPUT_SYNC_NONE;
    const struct sm_run_dims shard = {true, 3, {4, 8, 8}};
    p.output.shard = shard;
    p.config_sha256 = "c1";
    p.hooks.layout = count_layout;
    p.hooks.user = &layouts;
    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_OK);
    assert_int_equal(r.output_found, SM_OUTPUT_FOUND_NEW);
    assert_int_equal(r.shards_written, 2);
    assert_int_equal(layouts, 1);
    const uint64_t bytes = r.output_bytes;
    sm_run_result_destroy(&r);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_OK);
    assert_int_equal(r.output_found, SM_OUTPUT_FOUND_COMPLETE);
    assert_int_equal(layouts, 1); /* ended after the exists phase: no plan */
    assert_int_equal(r.shards_written, 0);
    assert_int_equal(r.output_shards, 2);
    assert_int_equal(r.output_bytes, bytes);
    assert_int_equal(r.scan.voxels, 0);
    assert_true(r.timing[SM_RUN_T_TOTAL] > 0);
    assert_non_null(r.output_path);
    sm_run_result_destroy(&r);
    p.config_sha256 = "c2";
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_E_USAGE);
    assert_non_null(strstr(err.what, "attributes.shardmill.config_sha256"));
    sm_run_result_destroy(&r);
}

/* The end of a run: the input's counters and the peak resident set in the result (one rank: this
 * process's own), and a scan's prepare step that fails before anything is opened. */
static sm_status refuse(void *user, struct sm_err *err)
{
    ++*(int *)user;
    SM_FAIL_AT(err, SM_E_USAGE, "--report", "refused");
}

static void test_result_holds_io_and_memory(void **state)
{
    struct fx *f = *state;
    struct sm_scan_run p = SM_SCAN_RUN_DEFAULTS;
    p.c.input.store = f->store;
    p.passes = 2;
    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_scan(&p, &r, &err), SM_OK);
    struct sm_run_io io;
    sm_run_io_of(r.store, r.array, &io);
    assert_memory_equal(&r.io, &io, sizeof(io));
    assert_int_equal(r.io.requests[SM_IO_PAYLOAD], 8); /* 8 chunks; pass 2 from the cache */
    assert_int_equal(r.io.cache_hits, 8);
    assert_true(r.io.cache_enabled && !r.io.http);
    assert_true(r.peak_rss_bytes > (uint64_t)1 << 20);
    assert_false(r.export.done);
    sm_run_result_destroy(&r);

    int calls = 0;
    p.prepare = refuse;
    p.user = &calls;
    sm_err_clear(&err);
    assert_int_equal(sm_run_scan(&p, &r, &err), SM_E_USAGE);
    assert_int_equal(calls, 1);
    assert_string_equal(err.where, "--report");
    assert_null(r.store); /* nothing was opened */
    sm_run_result_destroy(&r);
}

/* Several stores' counters: sums, the maximum of the peaks, a flag true if any store's is. */
static void test_io_add(void **state)
{
    (void)state;
    struct sm_run_io a = {0}, b = {0};
    a.requests[SM_IO_META] = 2;
    a.bytes[SM_IO_PAYLOAD] = 100;
    a.cache_hits = 3;
    a.cache_peak_bytes = 50;
    a.index_peak_bytes = 7;
    b.requests[SM_IO_META] = 5;
    b.bytes[SM_IO_PAYLOAD] = 1;
    b.cache_hits = 4;
    b.cache_peak_bytes = 20;
    b.index_peak_bytes = 9;
    b.http = true;
    b.range_ignored = true;
    b.whole_objects = 6;
    sm_run_io_add(&a, &b);
    assert_int_equal(a.requests[SM_IO_META], 7);
    assert_int_equal(a.bytes[SM_IO_PAYLOAD], 101);
    assert_int_equal(a.cache_hits, 7);
    assert_int_equal(a.cache_peak_bytes, 50);
    assert_int_equal(a.index_peak_bytes, 9);
    assert_true(a.http && a.range_ignored && !a.cache_enabled);
    assert_int_equal(a.whole_objects, 6);
}

/* The export phase of a convert (export.path): the HDF5 file renamed into place before the
 * marker, what it wrote and its times in the result; its early check refuses a path inside the
 * output. Needs the HDF5 module (SM_WITH_HDF5). */
static void test_convert_exports_hdf5(void **state)
{
    struct fx *f = *state;
    if (!sm_export_hdf5_available()) {
        skip();
    }
    char out[400], h5[400], inside[420];
    snprintf(out, sizeof(out), "%s/exp.zarr", f->dir);
    snprintf(h5, sizeof(h5), "%s/exp.h5", f->dir);
    snprintf(inside, sizeof(inside), "%s/x.h5", out);
    struct sm_convert_run p = SM_CONVERT_RUN_DEFAULTS;
    p.c.input.store = f->store;
    p.output.path = out;
    p.output.policy.sync = SM_OUTPUT_SYNC_NONE;
    p.export.path = h5;
    p.export.deflate = 4;
    struct sm_run_result r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&p, &r, &err), SM_OK);
    assert_true(r.export.done);
    assert_non_null(strstr(r.export.path, "exp.h5"));
    assert_string_equal(r.export.driver, "sec2");
    assert_int_equal(r.export.ndim, 3);
    assert_true(r.export.bytes > 0 && r.export.rounds > 0);
    assert_true(r.timing[SM_RUN_T_EXPORT] > 0);
    assert_true(r.timing_max[SM_RUN_T_EXPORT] == r.timing[SM_RUN_T_EXPORT]);
    assert_true(sm_test_exists(f->dir, "exp.h5") && sm_test_exists(out, "shardmill.complete.json"));
    sm_run_result_destroy(&r);
    /* the export exists now: exists error refuses it in the open phase's check */
    sm_err_clear(&err);
    assert_int_equal(sm_run_export_check(&p.export, out, &err), SM_E_USAGE);
    assert_non_null(strstr(err.what, "exists"));
    p.export.path = inside;
    sm_err_clear(&err);
    assert_int_equal(sm_run_export_check(&p.export, out, &err), SM_E_USAGE);
    assert_non_null(strstr(err.what, "inside the output"));
    p.export.path = NULL;
    assert_int_equal(sm_run_export_check(&p.export, out, &err), SM_OK);
}

static void test_errors_name_the_parameter(void **state)
{
    struct fx *f = *state;
    struct sm_run_result r;
    struct sm_err err;
    struct sm_scan_run s = SM_SCAN_RUN_DEFAULTS;
    s.c.input.store = f->store;
    const struct sm_run_dims two = {true, 2, {1, 1}};
    s.c.roi_shape = two;
    sm_err_clear(&err);
    assert_int_equal(sm_run_scan(&s, &r, &err), SM_E_USAGE);
    assert_string_equal(err.where, "roi.shape");
    sm_run_result_destroy(&r);

    s.c.roi_shape.set = false;
    s.c.hist_range_set = true;
    s.c.hist_hi = 10;
    sm_err_clear(&err);
    assert_int_equal(sm_run_scan(&s, &r, &err), SM_E_USAGE);
    assert_string_equal(err.where, "histogram");
    sm_run_result_destroy(&r);

    char missing[400];
    snprintf(missing, sizeof(missing), "%s/nothing.zarr", f->dir);
    s.c.hist_range_set = false;
    s.c.input.store = missing;
    sm_err_clear(&err);
    assert_int_equal(sm_run_scan(&s, &r, &err), SM_E_DATA);
    assert_non_null(strstr(err.what, "does not exist"));
    sm_run_result_destroy(&r);

    struct sm_convert_run c = SM_CONVERT_RUN_DEFAULTS;
    c.c.input.store = f->store;
    sm_err_clear(&err);
    assert_int_equal(sm_run_convert(&c, &r, &err), SM_E_USAGE);
    assert_string_equal(err.where, "output.path");
    sm_run_result_destroy(&r);

    /* a communicator while MPI is not initialised (or without MPI at all): refused, and the
     * pointer is not even read */
    int not_a_comm = 0;
    s.c.input.store = f->store;
    s.c.mpi_comm = &not_a_comm;
    sm_err_clear(&err);
    assert_int_equal(sm_run_scan(&s, &r, &err), SM_E_USAGE);
    assert_non_null(strstr(err.what, "communicator"));
    sm_run_result_destroy(&r);
}

/* The normalization object zarr.json and the report share (sm_run_norm_json), mode by mode. */
static void test_norm_json_states_each_mode(void **state)
{
    (void)state;
    const struct {
        struct sm_run_norm cfg;
        struct sm_norm nm;
        const char *want;
    } cases[] = {
        {{.mode = SM_NORM_SCALE, .divisor = 255.0},
         {.mode = SM_NORM_SCALE, .divisor = 255.0},
         "{\"mode\": \"scale\", \"lo\": 0.0, \"hi\": 255.0, \"divisor\": 255.0}"},
        {{.mode = SM_NORM_WINDOW, .lo = -10.0, .hi = 90.5},
         {.mode = SM_NORM_WINDOW, .lo = -10.0, .hi = 90.5},
         "{\"mode\": \"window\", \"lo\": -10.0, \"hi\": 90.5}"},
        {{.mode = SM_NORM_PERCENTILE, .lo = 1.0, .hi = 99.0},
         {.mode = SM_NORM_WINDOW, .lo = 12.0, .hi = 200.0},
         "{\"mode\": \"percentile\", \"lo\": 12.0, \"hi\": 200.0, \"percentiles\": [1.0, "
         "99.0]}"},
        {{.mode = SM_NORM_NONE},
         {.mode = SM_NORM_SCALE},
         "{\"mode\": \"none\", \"lo\": null, \"hi\": null}"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *o = sm_run_norm_json(&cases[i].cfg, &cases[i].nm);
        assert_non_null(o);
        char *s = json_dumps(o, JSON_PRESERVE_ORDER);
        assert_string_equal(s, cases[i].want);
        free(s);
        json_decref(o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_counts_every_value),
        cmocka_unit_test(test_convert_writes_a_complete_output),
        cmocka_unit_test(test_convert_percentile_keeps_its_input),
        cmocka_unit_test(test_convert_none_keeps_values),
        cmocka_unit_test(test_convert_integer_outputs),
        cmocka_unit_test(test_convert_stopped_leaves_no_marker),
        cmocka_unit_test(test_convert_exists_auto),
        cmocka_unit_test(test_result_holds_io_and_memory),
        cmocka_unit_test(test_io_add),
        cmocka_unit_test(test_convert_exports_hdf5),
        cmocka_unit_test(test_errors_name_the_parameter),
        cmocka_unit_test(test_norm_json_states_each_mode),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
