/* Unit tests for the YAML loader of SPEC §4 (jobs/config_load.c, config_yaml.c, config_parse.c,
 * config_rules.c). Every type's good and bad values, sizes, enum names, unknown keys with
 * suggestions, duplicates, exact FILE:LINE:COL of errors, --set overrides, required keys per job,
 * checks across keys, flow and block styles, empty and misshapen documents, the effective text,
 * files on disk, and allocation failures. */
#include "shardmill/sm_config.h"

#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/source.h"

#include "config.h"
#include "config_schema.h"
#include "shardmill/alloc.h"
#include "sm_test.h"

/* ---- helpers ---- */

static sm_status load_sets(const char *text, const char *const *sets, unsigned n,
                           struct sm_job_config *c, struct sm_err *err)
{
    sm_err_clear(err);
    return sm_config_load_string("f.yaml", text, strlen(text), sets, n, c, err);
}

static sm_status load(const char *text, struct sm_job_config *c, struct sm_err *err)
{
    return load_sets(text, NULL, 0, c, err);
}

/* Loads text (with optional sets) expecting SM_E_USAGE at `where` with `what` in the message;
 * the config must come back zeroed. */
static void expect_error_sets(const char *text, const char *const *sets, unsigned n,
                              const char *where, const char *what)
{
    struct sm_job_config c;
    struct sm_err err;
    sm_status st = load_sets(text, sets, n, &c, &err);
    if (st != SM_E_USAGE) {
        fail_msg("status %s, expected usage (where '%s', what '%s') for:\n%s", sm_status_name(st),
                 err.where, err.what, text);
    }
    if (strcmp(err.where, where) != 0) {
        fail_msg("where '%s', expected '%s' (what '%s')", err.where, where, err.what);
    }
    assert_contains(err.what, what);
    static const struct sm_job_config zero;
    assert_memory_equal(&c, &zero, sizeof(c));
}

static void expect_error(const char *text, const char *where, const char *what)
{
    expect_error_sets(text, NULL, 0, where, what);
}

static void expect_ok_text(const char *text)
{
    struct sm_job_config c;
    struct sm_err err;
    assert_status(load(text, &c, &err), SM_OK, &err);
    sm_config_destroy(&c);
}

static void expect_set_error(const char *text, const char *set, const char *where, const char *what)
{
    const char *sets[1] = {set};
    expect_error_sets(text, sets, 1, where, what);
}

#define SCAN "job: scan\ninput: {store: x.zarr}\n"
#define CONVERT "job: convert\ninput: {store: x.zarr}\noutput: {path: out/x.zarr}\n"

/* Loads SCAN + one extra line (line 3) and returns the config (caller destroys). */
static void load_ok(const char *text, struct sm_job_config *c)
{
    struct sm_err err;
    assert_ok(load(text, c, &err), &err);
}

/* ---- scalar types ---- */

static void test_bool_values(void **state)
{
    (void)state;
    struct sm_job_config c;
    load_ok(SCAN "progress: false\n", &c);
    assert_false(c.progress);
    sm_config_destroy(&c);
    load_ok(SCAN "progress: True\ninput.cache.enabled: FALSE\n", &c);
    assert_true(c.progress);
    assert_false(c.input.cache_enabled);
    sm_config_destroy(&c);
    expect_error(SCAN "progress: yes\n", "f.yaml:3:11",
                 "progress: expected true or false, got 'yes'");
    expect_error(SCAN "progress: 1\n", "f.yaml:3:11", "expected true or false, got '1'");
    expect_error(SCAN "progress:\n", "f.yaml:3:10", "progress: expected true or false, got null");
}

static void test_uint_values(void **state)
{
    (void)state;
    struct sm_job_config c;
    load_ok(SCAN "passes: 8\nhistogram: {bins: 65536}\ninput.http.retries: 0\n", &c);
    assert_int_equal(c.passes, 8);
    assert_int_equal(c.histogram.bins, 65536);
    assert_int_equal(c.input.http.max_retries, 0);
    sm_config_destroy(&c);
    expect_error(SCAN "passes: 0\n", "f.yaml:3:9", "passes: 0 is out of range (1 to 1000000)");
    expect_error(SCAN "passes: -1\n", "f.yaml:3:9", "passes: -1 is out of range");
    expect_error(SCAN "passes: 1.5\n", "f.yaml:3:9",
                 "passes: expected a non-negative integer, got '1.5'");
    expect_error(SCAN "passes: 1000001\n", "f.yaml:3:9", "out of range (1 to 1000000)");
    expect_error(SCAN "passes: 99999999999999999999999\n", "f.yaml:3:9",
                 "expected a non-negative integer");
    expect_error(SCAN "passes: \"two\"\n", "f.yaml:3:9", "got 'two'");
    expect_error(SCAN "input.http.retries: 101\n", "f.yaml:3:21", "out of range (0 to 100)");
}

static void test_int_values(void **state)
{
    (void)state;
    struct sm_job_config c;
    load_ok(CONVERT "output.codec.level: -5\ninput.http.connect_timeout_ms: +250\n", &c);
    assert_int_equal(c.output.codec_level, -5);
    assert_int_equal(c.input.http.connect_timeout_ms, 250);
    sm_config_destroy(&c);
    expect_error(CONVERT "output.codec.level: 23\n", "f.yaml:4:21",
                 "output.codec.level: 23 is out of range (-131072 to 22)");
    expect_error(CONVERT "output.codec.level: -131073\n", "f.yaml:4:21", "out of range");
    expect_error(CONVERT "output.codec.level: high\n", "f.yaml:4:21",
                 "output.codec.level: expected an integer, got 'high'");
    expect_error(SCAN "input.http.connect_timeout_ms: 0\n", "f.yaml:3:32",
                 "out of range (1 to 600000)");
}

static void test_float_values(void **state)
{
    (void)state;
    struct sm_job_config c;
    load_ok(CONVERT "normalize: {divisor: 4095.5}\n", &c);
    assert_true(c.normalize.divisor == 4095.5);
    sm_config_destroy(&c);
    load_ok(CONVERT "normalize: {mode: window, lo: -1e3, hi: 2.5E1}\n", &c);
    assert_true(c.normalize.lo == -1000.0);
    assert_true(c.normalize.hi == 25.0);
    sm_config_destroy(&c);
    /* the keys of another mode would be ignored: refused */
    expect_error(
        CONVERT "normalize: {mode: percentile, lo: 1, hi: 99, divisor: 3}\n", "f.yaml:4:46",
        "`normalize.divisor` is used by normalize.mode scale only (the mode is percentile)");
    expect_error(CONVERT "normalize: {lo: 1}\n", "f.yaml:4:13",
                 "`normalize.lo` is used by normalize.mode window and percentile only (the mode is "
                 "scale)");
    expect_error(SCAN "normalize: {divisor: 0}\n", "f.yaml:3:22",
                 "normalize.divisor: must not be 0");
    expect_error(SCAN "normalize: {divisor: .nan}\n", "f.yaml:3:22",
                 "normalize.divisor: expected a finite number, got '.nan'");
    expect_error(SCAN "normalize: {divisor: inf}\n", "f.yaml:3:22", "got 'inf'");
    expect_error(SCAN "normalize: {divisor: 1e999}\n", "f.yaml:3:22", "got '1e999'");
    expect_error(SCAN "normalize: {divisor: 0x10}\n", "f.yaml:3:22", "got '0x10'");
    expect_error(SCAN "normalize: {divisor: [1]}\n", "f.yaml:3:22", "got a sequence");
}

static void test_size_values(void **state)
{
    (void)state;
    struct sm_job_config c;
    load_ok(SCAN "input.cache: {max_bytes: 123}\ninput.index_cache: {max_bytes: 64KiB}\n"
                 "limits: {memory_bytes: 2MiB, max_object_bytes: 1GiB, max_chunk_bytes: 2TiB}\n",
            &c);
    assert_int_equal(c.input.cache_max_bytes, 123);
    assert_int_equal(c.input.index_cache_bytes, 64 * 1024);
    assert_int_equal(c.limits.memory_bytes, 2 * 1024 * 1024);
    assert_int_equal(c.limits.max_object_bytes, 1ull << 30);
    assert_int_equal(c.limits.max_chunk_bytes, 2ull << 40);
    sm_config_destroy(&c);
    load_ok(SCAN "input.index_cache: {max_bytes: 0}\nlimits: {memory_bytes: \"3GiB\"}\n", &c);
    assert_int_equal(c.input.index_cache_bytes, 0); /* 0 disables */
    assert_int_equal(c.limits.memory_bytes, 3ull << 30);
    sm_config_destroy(&c);
    const char *bad[] = {"lots", "12 MiB", "1.5GiB", "2mib", "1PiB", "-1", "64KB", "MiB"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[128], what[128];
        snprintf(text, sizeof(text), SCAN "limits: {memory_bytes: %s}\n", bad[i]);
        snprintf(what, sizeof(what), "limits.memory_bytes: expected a size like 256MiB, got '%s'",
                 bad[i]);
        expect_error(text, "f.yaml:3:24", what);
    }
    expect_error(SCAN "limits: {memory_bytes: 0}\n", "f.yaml:3:24",
                 "limits.memory_bytes: 0 is out of range (1 to 1024TiB)");
    expect_error(SCAN "limits: {memory_bytes: 2048TiB}\n", "f.yaml:3:24", "out of range");
    expect_error(SCAN "limits: {memory_bytes: 99999999999GiB}\n", "f.yaml:3:24", "expected a size");
}

static void test_string_values(void **state)
{
    (void)state;
    struct sm_job_config c;
    load_ok("job: scan\ninput: {store: 'a b.zarr', array: 0}\nreport: \"r #1.json\"\n", &c);
    assert_string_equal(c.input.store, "a b.zarr");
    assert_string_equal(c.input.array, "0"); /* a plain scalar is text for a string key */
    assert_string_equal(c.report, "r #1.json");
    sm_config_destroy(&c);
    load_ok(CONVERT "report: ~\nexport: {hdf5: {path: null}}\n", &c);
    assert_null(c.report);
    assert_null(c.export_.hdf5_path);
    sm_config_destroy(&c);
    expect_error("job: scan\ninput: {store: \"\"}\n", "f.yaml:2:16",
                 "input.store: must not be empty");
    expect_error("job: scan\ninput: {store: [a]}\n", "f.yaml:2:16",
                 "input.store: expected a string, got a sequence");
    expect_error("job: scan\ninput: {store: {a: 1}}\n", "f.yaml:2:16", "got a mapping");
    expect_error("job: scan\ninput: {store: null}\n", "f.yaml:2:16",
                 "input.store: expected a string, got null");
    expect_error("job: scan\ninput: {store: \"a\\0b\"}\n", "f.yaml:2:16", "NUL");
}

static void test_enum_values(void **state)
{
    (void)state;
    struct sm_job_config c;
    load_ok("job: read-bench\ninput: {store: x.zarr}\n", &c);
    assert_int_equal(c.job, SM_JOB_READ_BENCH);
    sm_config_destroy(&c);
    load_ok(CONVERT "normalize: {mode: scale}\noutput.exists: resume\noutput.codec: {name: none}\n"
                    "parallel: {partition: block}\n",
            &c);
    assert_int_equal(c.job, SM_JOB_CONVERT);
    assert_int_equal(c.output.exists, SM_OUTPUT_EXISTS_RESUME);
    assert_string_equal(c.output.codec, "none");
    assert_int_equal(c.parallel.partition, SM_PART_BLOCK);
    sm_config_destroy(&c);
    expect_error("job: read_bench\n", "f.yaml:1:6",
                 "job: expected one of scan, convert, ingest, read-bench, got 'read_bench' "
                 "(did you mean 'read-bench'?)");
    expect_error("job: Scan\n", "f.yaml:1:6", "(did you mean 'scan'?)");
    expect_error("job: transmogrify\n", "f.yaml:1:6",
                 "job: expected one of scan, convert, ingest, read-bench, got 'transmogrify'");
    expect_error(SCAN "normalize: {mode: linear}\n", "f.yaml:3:19",
                 "normalize.mode: expected one of scale, window, percentile, none, got 'linear'");
    expect_error(SCAN "output: {exists: replace}\n", "f.yaml:3:18",
                 "output.exists: expected one of error, overwrite, resume, auto, got 'replace'");
    expect_error(SCAN "parallel: {partition: cyclic}\n", "f.yaml:3:23",
                 "expected one of block, balanced, got 'cyclic'");
    /* the choices come from the codec registry (unit.jobs.config_schema compares them): a new
     * output codec changes the list, not this test */
    expect_error(SCAN "output: {codec: {name: lz5}}\n", "f.yaml:3:24",
                 "output.codec.name: expected one of zstd, ");
    expect_error(SCAN "output: {codec: {name: lz5}}\n", "f.yaml:3:24", ", none, got 'lz5'");
    expect_error(SCAN "output: {codec: {name: null}}\n", "f.yaml:3:24", "got null");
    expect_error(SCAN "input.format: dicom\n", "f.yaml:3:15", "got 'dicom'");
    expect_error(SCAN "input.format: dicom\n", "f.yaml:3:15", "expected one of zarr, ");
    char every[256] = "expected one of zarr, n5"; /* then the source registry's rows, in order */
    for (const struct sm_source_format *f = sm_source_formats; f->name != NULL; f++) {
        snprintf(every + strlen(every), sizeof(every) - strlen(every), ", %s", f->name);
    }
    snprintf(every + strlen(every), sizeof(every) - strlen(every), ", got 'dicom'");
    expect_error(SCAN "input.format: dicom\n", "f.yaml:3:15", every);
}

static void test_threads_auto_or_count(void **state)
{
    (void)state;
    struct sm_job_config c;
    load_ok(SCAN "parallel: {threads: auto}\n", &c);
    assert_int_equal(c.parallel.threads, 0);
    sm_config_destroy(&c);
    load_ok(SCAN "parallel: {threads: 8}\n", &c);
    assert_int_equal(c.parallel.threads, 8);
    sm_config_destroy(&c);
    expect_error(SCAN "parallel: {threads: 0}\n", "f.yaml:3:21",
                 "parallel.threads: 0 is out of range (1 to 65536)");
    expect_error(SCAN "parallel: {threads: many}\n", "f.yaml:3:21",
                 "parallel.threads: expected 'auto' or an integer >= 1, got 'many'");
}

/* ---- lists ---- */

static void test_dims_values(void **state)
{
    (void)state;
    struct sm_job_config c;
    load_ok(CONVERT "tile: [64, 64, 64]\nroi:\n  offset: [0, 0, 0]\n  shape:\n    - 1\n    - 2\n"
                    "    - 3\noutput.shard: []\n",
            &c);
    assert_true(c.tile.set);
    assert_int_equal(c.tile.n, 3);
    assert_int_equal(c.tile.v[2], 64);
    assert_int_equal(c.roi.offset.v[1], 0);
    assert_int_equal(c.roi.shape.n, 3);
    assert_int_equal(c.roi.shape.v[2], 3);
    assert_true(c.output.shard.set);
    assert_int_equal(c.output.shard.n, 0); /* [] = not sharded */
    sm_config_destroy(&c);
    load_ok(SCAN "tile: null\n", &c);
    assert_false(c.tile.set);
    sm_config_destroy(&c);
    expect_error(SCAN "tile: 64\n", "f.yaml:3:7",
                 "tile: expected a list of positive integers like [64, 64, 64], got '64'");
    expect_error(SCAN "tile: []\n", "f.yaml:3:7", "tile: expected at least one dimension");
    expect_error(SCAN "tile: [64, 0, 64]\n", "f.yaml:3:12",
                 "tile[1]: expected a positive integer, got '0'");
    expect_error(SCAN "tile: [64, -1]\n", "f.yaml:3:12", "tile[1]: expected a positive integer");
    expect_error(SCAN "tile: [[1]]\n", "f.yaml:3:8",
                 "tile[0]: expected a positive integer, got "
                 "a sequence");
    expect_error(SCAN "roi: {offset: [0, x]}\n", "f.yaml:3:19",
                 "roi.offset[1]: expected a non-negative integer, got 'x'");
    expect_error(SCAN "roi: {offset: {z: 0}}\n", "f.yaml:3:15",
                 "roi.offset: expected a list of non-negative integers");
    char text[512];
    int n = snprintf(text, sizeof(text), SCAN "tile: [");
    for (int i = 0; i < 33; i++) {
        n += snprintf(text + n, sizeof(text) - (size_t)n, "%s1", i ? ", " : "");
    }
    snprintf(text + n, sizeof(text) - (size_t)n, "]\n");
    expect_error(text, "f.yaml:3:7", "tile: 33 dimensions, at most 32");
}

static void test_range_values(void **state)
{
    (void)state;
    struct sm_job_config c;
    load_ok(SCAN "histogram: {bins: 100, range: [-1024, 3071.5]}\n", &c);
    assert_true(c.histogram.range_set);
    assert_true(c.histogram.lo == -1024.0);
    assert_true(c.histogram.hi == 3071.5);
    sm_config_destroy(&c);
    expect_error(SCAN "histogram: {range: [256, 0]}\n", "f.yaml:3:20",
                 "histogram.range: lo 256 must be below hi 0");
    expect_error(SCAN "histogram: {range: [1, 1]}\n", "f.yaml:3:20", "must be below");
    expect_error(SCAN "histogram: {range: [1]}\n", "f.yaml:3:20",
                 "histogram.range: expected a pair [lo, hi], got 1 values");
    expect_error(SCAN "histogram: {range: [0, big]}\n", "f.yaml:3:24",
                 "histogram.range[1]: expected a finite number, got 'big'");
    expect_error(SCAN "histogram: {range: 256}\n", "f.yaml:3:20",
                 "histogram.range: expected a pair [lo, hi] of finite numbers, got '256'");
}

/* ---- keys ---- */

static void test_unknown_keys_suggest_the_closest(void **state)
{
    (void)state;
    expect_error("job: scan\ninput:\n  store: x.zarr\n  cahce: {enabled: true}\n", "f.yaml:4:3",
                 "unknown key 'input.cahce' (did you mean 'input.cache'?)");
    expect_error(SCAN "input.cache: {max_byte: 1}\n", "f.yaml:3:15",
                 "unknown key 'input.cache.max_byte' (did you mean 'input.cache.max_bytes'?)");
    expect_error(SCAN "tiles: [1]\n", "f.yaml:3:1", "unknown key 'tiles' (did you mean 'tile'?)");
    expect_error(SCAN "colour: red\n", "f.yaml:3:1", "unknown key 'colour' (see docs/CONFIG.md)");
    expect_error("job: scan\ninput: {store: x, bogus_key_name: 1}\n", "f.yaml:2:19",
                 "unknown key 'input.bogus_key_name' (see");
    expect_error(SCAN "? [a, b]\n: 1\n", "f.yaml:3:3", "expected a key name, got a sequence");
}

static void test_duplicate_keys(void **state)
{
    (void)state;
    expect_error(SCAN "tile: [1]\ntile: [2]\n", "f.yaml:4:1",
                 "duplicate key 'tile' (first at 3:1)");
    expect_error("job: scan\ninput: {store: a, store: b}\n", "f.yaml:2:19",
                 "duplicate key 'input.store' (first at 2:9)");
    expect_error("job: scan\ninput:\n  store: a\ninput:\n  array: b\n", "f.yaml:4:1",
                 "duplicate key 'input' (first at 2:1)");
    expect_error("job: scan\ninput: {store: a, cache: {enabled: true}}\n"
                 "input.cache.enabled: false\n",
                 "f.yaml:3:1", "duplicate key 'input.cache.enabled' (first at 2:27)");
}

static void test_error_line_and_column(void **state)
{
    (void)state;
    expect_error("job: scan\n"
                 "input: {store: x.zarr,\n"
                 "    cache: {enabled: 12}}\n",
                 "f.yaml:3:22", "input.cache.enabled");
    expect_error("job: scan\n"
                 "input: {store: x.zarr}\n"
                 "roi:\n"
                 "    offset: [0, 0, 0]\n"
                 "    shape: [1, 2]\n",
                 "f.yaml:5:5", "roi.shape has 2 axes but roi.offset has 3");
    expect_error("job: scan\n"
                 "input:\n"
                 "    store: x.zarr\n"
                 "    cahce: 1\n",
                 "f.yaml:4:5", "unknown key 'input.cahce'");
    expect_error("job: scan\n"
                 "input: {store: x.zarr}\n"
                 "tile:\n"
                 "  - 1\n"
                 "  - zero\n",
                 "f.yaml:5:5", "tile[1]");
    expect_error("job: scan\n# a comment\n\ninput: {store: x.zarr}\nhistogram:\n    bins: -3\n",
                 "f.yaml:6:11", "histogram.bins");
}

static void test_exact_position_3_5(void **state)
{
    (void)state;
    expect_error("job: scan\ninput: {store: x.zarr}\ntile: [64, x]\n", "f.yaml:3:12", "tile[1]");
    expect_error("job: scan\n"
                 "input:\n"
                 "    store: [x]\n",
                 "f.yaml:3:12", "input.store: expected a string");
    expect_error("job: scan\n"
                 "input:\n"
                 "    strore: x\n",
                 "f.yaml:3:5", "unknown key 'input.strore' (did you mean 'input.store'?)");
}

/* ---- --set ---- */

static void test_set_overrides_nested_keys(void **state)
{
    (void)state;
    const char *sets[] = {"input.cache.max_bytes=1GiB",
                          "tile=[32, 32, 32]",
                          "input.cache={enabled: false}",
                          "passes=3",
                          "passes=4",
                          "report=null",
                          "input.array=\"0\""};
    struct sm_job_config c;
    struct sm_err err;
    assert_ok(load_sets(SCAN "report: r.json\npasses: 2\n", sets, 7, &c, &err), &err);
    assert_int_equal(c.input.cache_max_bytes, 1ull << 30);
    assert_false(c.input.cache_enabled);
    assert_int_equal(c.tile.n, 3);
    assert_int_equal(c.tile.v[0], 32);
    assert_int_equal(c.passes, 4); /* the last --set wins */
    assert_null(c.report);
    assert_string_equal(c.input.array, "0");
    sm_config_destroy(&c);
    const char *store[] = {"input.store=http://127.0.0.1:8080/a.zarr"};
    assert_ok(load_sets("job: scan\n", store, 1, &c, &err), &err);
    assert_string_equal(c.input.store, "http://127.0.0.1:8080/a.zarr");
    sm_config_destroy(&c);
    const char *job[] = {"job=convert", "output.path=o.zarr"};
    assert_ok(load_sets(SCAN, job, 2, &c, &err), &err);
    assert_int_equal(c.job, SM_JOB_CONVERT);
    sm_config_destroy(&c);
}

static void test_set_errors_name_the_set(void **state)
{
    (void)state;
    expect_set_error(SCAN, "input.cahce.enabled=false", "--set input.cahce.enabled",
                     "unknown key 'input.cahce.enabled' (did you mean 'input.cache.enabled'?)");
    expect_set_error(SCAN, "passes=many", "--set passes",
                     "passes: expected a non-negative integer, got 'many'");
    expect_set_error(SCAN, "passes", "--set passes", "expected key.path=value, got 'passes'");
    expect_set_error(SCAN, "=3", "--set ", "expected key.path=value");
    expect_set_error(SCAN, "tile=[64, 64", "--set tile", "malformed YAML");
    expect_set_error(SCAN, "tile=*a", "--set tile", "YAML aliases (*a) are not supported");
    expect_set_error(SCAN, "input=x", "--set input", "input: expected a mapping, got 'x'");
    expect_set_error(SCAN, "input.cache={enabled: maybe}", "--set input.cache",
                     "input.cache.enabled: expected true or false, got 'maybe'");
    expect_set_error(SCAN, "input.store=", "--set input.store",
                     "input.store: expected a string, got null");
    expect_set_error(SCAN, "roi.shape=[0]", "--set roi.shape",
                     "roi.shape[0]: expected a positive integer, got '0'");
    /* A later check blames the --set that gave the key. */
    const char *two[] = {"roi.offset=[0, 0]", "roi.shape=[1, 2, 3]"};
    expect_error_sets(SCAN, two, 2, "--set roi.shape", "roi.shape has 3 axes but roi.offset has 2");
}

/* ---- required keys ---- */

static void test_required_keys_per_job(void **state)
{
    (void)state;
    expect_error("input: {store: x.zarr}\n", "f.yaml:1:1",
                 "missing required key 'job' (one of scan, convert, ingest, read-bench)");
    expect_error("job: scan\n", "f.yaml:1:1",
                 "missing required key 'input.store' (required by the scan job)");
    expect_error("job: read-bench\ninput:\n  array: a\n", "f.yaml:2:1",
                 "missing required key 'input.store' (required by the read-bench job)");
    expect_error("job: convert\ninput: {store: x.zarr}\n", "f.yaml:1:1",
                 "missing required key 'output.path' (required by the convert job)");
    expect_error("job: convert\ninput: {store: x.zarr}\noutput: {exists: overwrite}\n",
                 "f.yaml:3:1", "missing required key 'output.path' (required by the convert job)");
    expect_error("job: convert\ninput: {store: x.zarr}\noutput: {path: null}\n", "f.yaml:3:10",
                 "missing required key 'output.path'");
    expect_error("job: ingest\ninput: {store: v.nii.gz}\n", "f.yaml:1:1",
                 "missing required key 'output.path' (required by the ingest job)");
    expect_error("job: ingest\ninput: {store: v.raw, raw: {shape: [2, 2]}}\noutput: {path: o}\n",
                 "f.yaml:2:23",
                 "missing required key 'input.raw.dtype' (required to read raw input)");
    expect_error("job: ingest\ninput: {store: v.raw, raw: {dtype: uint8}}\noutput: {path: o}\n",
                 "f.yaml:2:23", "missing required key 'input.raw.shape'");
    struct sm_job_config c;
    load_ok(SCAN, &c); /* scan and read-bench need no output */
    assert_null(c.output.path);
    sm_config_destroy(&c);
    load_ok("job: read-bench\ninput: {store: x.zarr}\n", &c);
    sm_config_destroy(&c);
    load_ok("job: ingest\ninput: {store: brain.nii.gz}\noutput: {path: o.zarr}\n", &c);
    sm_config_destroy(&c);
}

/* ---- checks across keys, job-dependent defaults ---- */

static void test_job_dependent_defaults(void **state)
{
    (void)state;
    struct sm_job_config c;
    load_ok(SCAN, &c);
    assert_string_equal(c.input.format, "zarr");
    assert_string_equal(c.output.dtype, "float32");
    sm_config_destroy(&c);
    load_ok("job: ingest\ninput: {store: brain.nii.gz}\noutput: {path: o.zarr}\n", &c);
    assert_string_equal(c.input.format, "nifti");
    assert_null(c.output.dtype); /* the input's type */
    sm_config_destroy(&c);
    load_ok("job: ingest\ninput: {store: brain.nii}\noutput: {path: o.zarr, dtype: uint8}\n", &c);
    assert_string_equal(c.input.format, "nifti");
    assert_string_equal(c.output.dtype, "uint8");
    sm_config_destroy(&c);
    load_ok("job: ingest\ninput: {store: ct.dat, raw: {dtype: int16, shape: [108, 256, 256]}}\n"
            "output: {path: o.zarr}\n",
            &c);
    assert_string_equal(c.input.format, "raw");
    assert_string_equal(c.input.raw_dtype, "int16");
    assert_int_equal(c.input.raw_shape.v[0], 108);
    sm_config_destroy(&c);
    /* HDF5: inferred from .h5, .hdf5 and .nxs; the dataset is kept as written */
    load_ok("job: ingest\ninput: {store: scan.h5, hdf5: {dataset: /exchange/data}}\n"
            "output: {path: o.zarr}\n",
            &c);
    assert_string_equal(c.input.format, "hdf5");
    assert_string_equal(c.input.hdf5_dataset, "/exchange/data");
    sm_config_destroy(&c);
    load_ok("job: ingest\ninput: {store: scan.nxs, hdf5: {dataset: /entry/data/data}}\n"
            "output: {path: o.zarr}\n",
            &c);
    assert_string_equal(c.input.format, "hdf5");
    sm_config_destroy(&c);
    load_ok("job: ingest\ninput: {store: scan.bin, format: hdf5, hdf5: {dataset: /d}}\n"
            "output: {path: o.zarr}\n",
            &c);
    assert_string_equal(c.input.format, "hdf5");
    sm_config_destroy(&c);
}

static void test_hdf5_dataset_rules(void **state)
{
    (void)state;
    expect_error("job: ingest\ninput: {store: scan.hdf5}\noutput: {path: o.zarr}\n", "f.yaml:2:1",
                 "missing required key 'input.hdf5.dataset' (required to read hdf5 input)");
    static const char *const bad[] = {"exchange/data", "/", "/a//b", "/a/./b", "/a/../b", "/a/"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[256];
        snprintf(text, sizeof(text),
                 "job: ingest\ninput: {store: s.h5, hdf5: {dataset: \"%s\"}}\n"
                 "output: {path: o.zarr}\n",
                 bad[i]);
        expect_error(text, "f.yaml:2:29", "is not an absolute HDF5 dataset path");
    }
}

static void test_checks_across_keys(void **state)
{
    (void)state;
    expect_error(SCAN "input.format: raw\n", "f.yaml:3:1",
                 "input.format: the scan job reads zarr or n5 input (raw is read by convert)");
    /* ingest is convert with normalize none: of any input, and no other normalization */
    expect_ok_text("job: ingest\ninput: {store: a.zarr, format: zarr}\noutput: {path: o}\n");
    expect_error(
        "job: ingest\ninput: {store: a.n5, format: n5}\noutput: {path: o}\n"
        "normalize.mode: percentile\n",
        "f.yaml:4:1",
        "normalize.mode: job ingest is convert with normalize.mode none (the values kept); "
        "to normalize, write job: convert");
    expect_ok_text("job: convert\ninput: {store: v.tif}\noutput: {path: o}\n"); /* a source */
    expect_ok_text(SCAN "input.format: n5\n"); /* scan, convert, read-bench read N5 too */
    expect_error(CONVERT "output.chunk: [3, 16, 16]\noutput.shard: [8, 32, 32]\n", "f.yaml:4:1",
                 "output.chunk [3, 16, 16] does not divide output.shard [8, 32, 32] (axis 0)");
    expect_error(CONVERT "output.shard: [64, 64]\noutput.chunk: [2, 16, 16]\n", "f.yaml:5:1",
                 "output.chunk [2, 16, 16] must have as many axes as output.shard [64, 64]");
    /* auto on either side: the job chooses a layout that fits (SPEC §2) */
    expect_ok_text(CONVERT "output.shard: [64, 64]\n");
    expect_ok_text(CONVERT "output.chunk: [3, 16, 16]\n");
    expect_error(CONVERT "normalize: {mode: window, lo: 5}\n", "f.yaml:4:13",
                 "missing required key 'normalize.hi' (required by normalize.mode window)");
    expect_error(CONVERT "normalize: {mode: percentile}\n", "f.yaml:4:13",
                 "missing required key 'normalize.lo' (required by normalize.mode percentile)");
    expect_error(CONVERT "normalize: {mode: window, lo: 5, hi: 5}\n", "f.yaml:4:34",
                 "normalize.hi (5) must be above normalize.lo (5)");
    expect_error(CONVERT "normalize: {mode: percentile, lo: -1, hi: 99}\n", "f.yaml:4:31",
                 "normalize.lo: percentile -1 is out of range (0 to 100)");
    expect_error(CONVERT "output.codec: {name: blosc, level: 10}\n", "f.yaml:4:29",
                 "output.codec.level: blosc level 10 is out of range (0 to 9)");
    expect_error(CONVERT "output.codec: {level: 12, name: gzip}\n", "f.yaml:4:16",
                 "gzip level 12 is out of range");
    expect_error(CONVERT "output.dtype: int16\n", "f.yaml:4:1",
                 "output.dtype: a normalized convert writes float32, uint8 or uint16 (SPEC §2), "
                 "not int16");
    expect_error(CONVERT "normalize: {mode: window, lo: 0, hi: 1}\noutput.dtype: float64\n",
                 "f.yaml:5:1",
                 "output.dtype: a normalized convert writes float32, uint8 or uint16 (SPEC §2), "
                 "not float64");
    /* a normalization to uint8 or uint16 (SPEC §2: rint(w * MAX), half to even) */
    struct sm_job_config u;
    load_ok(CONVERT "output.dtype: uint16\n", &u);
    assert_string_equal(u.output.dtype, "uint16");
    sm_config_destroy(&u);
    load_ok(CONVERT "normalize: {mode: percentile, lo: 1, hi: 99}\noutput.dtype: uint8\n", &u);
    assert_string_equal(u.output.dtype, "uint8");
    sm_config_destroy(&u);
    /* normalize none: the input's type by default, any type given (checked against the input
     * when the run opens it), no HDF5 export (float32 only) */
    struct sm_job_config n;
    load_ok(CONVERT "normalize: {mode: none}\n", &n);
    assert_int_equal(n.normalize.mode, SM_NORM_NONE);
    assert_null(n.output.dtype);
    sm_config_destroy(&n);
    load_ok(CONVERT "normalize: {mode: none}\noutput.dtype: int32\n", &n);
    assert_string_equal(n.output.dtype, "int32");
    sm_config_destroy(&n);
    expect_error(CONVERT "normalize: {mode: none}\nexport: {hdf5: {path: out/x.h5}}\n",
                 "f.yaml:5:17", "export.hdf5: the export writes float32");
    expect_error(SCAN "input.http: {backoff_base_ms: 6000}\n", "f.yaml:3:14",
                 "input.http.backoff_base_ms (6000) is above input.http.backoff_max_ms (5000)");
    struct sm_job_config c;
    load_ok(CONVERT "normalize: {mode: percentile, lo: 1, hi: 99}\noutput.shard: []\n"
                    "output.chunk: [7, 9, 11]\noutput.dtype: float32\n"
                    "output.codec: {name: none, level: -9}\n",
            &c);
    assert_int_equal(c.normalize.mode, SM_NORM_PERCENTILE);
    assert_true(c.normalize.lo == 1 && c.normalize.hi == 99);
    sm_config_destroy(&c);
}

/* ---- document shape ---- */

static void test_flow_and_block_styles_are_equivalent(void **state)
{
    (void)state;
    static const char block[] = "job: convert\n"
                                "input:\n"
                                "  store: http://127.0.0.1:8080/ct.zarr\n"
                                "  array: \"0\"\n"
                                "  cache:\n"
                                "    enabled: true\n"
                                "    max_bytes: 256MiB\n"
                                "roi:\n"
                                "  offset:\n"
                                "    - 0\n"
                                "    - 0\n"
                                "    - 0\n"
                                "  shape: [128, 128, 128]\n"
                                "histogram:\n"
                                "  bins: 256\n"
                                "  range: [0, 256]\n"
                                "normalize:\n"
                                "  mode: scale\n"
                                "  divisor: 255\n"
                                "output:\n"
                                "  path: out/ct.zarr\n"
                                "  codec:\n"
                                "    name: zstd\n"
                                "    level: 3\n"
                                "parallel:\n"
                                "  threads: auto\n";
    static const char flow[] =
        "{job: convert, input: {store: \"http://127.0.0.1:8080/ct.zarr\", array: '0',"
        " cache: {enabled: true, max_bytes: 268435456}},"
        " roi: {offset: [0, 0, 0], shape: [128, 128, 128]},"
        " histogram: {bins: 256, range: [0.0, 256.0]}, normalize: {mode: scale, divisor: 255.0},"
        " output: {path: out/ct.zarr, codec: {name: zstd, level: 3}}, parallel: {threads: auto}}";
    static const char dotted[] = "job: convert\n"
                                 "input.store: http://127.0.0.1:8080/ct.zarr\n"
                                 "input.array: '0'\n"
                                 "input.cache: {enabled: true, max_bytes: 256MiB}\n"
                                 "roi.offset: [0, 0, 0]\n"
                                 "roi.shape: [128, 128, 128]\n"
                                 "histogram.bins: 256\n"
                                 "histogram.range: [0, 256]\n"
                                 "output.path: out/ct.zarr\n";
    struct sm_job_config a, b, d;
    load_ok(block, &a);
    load_ok(flow, &b);
    load_ok(dotted, &d);
    assert_string_equal(a.effective, b.effective);
    assert_string_equal(a.effective, d.effective);
    sm_config_destroy(&a);
    sm_config_destroy(&b);
    sm_config_destroy(&d);
}

static void test_empty_and_misshapen_documents(void **state)
{
    (void)state;
    expect_error("", "f.yaml:1:1", "missing required key 'job'");
    expect_error("# only a comment\n\n", "f.yaml:1:1", "missing required key 'job'");
    expect_error("---\n", "f.yaml:1:1", "missing required key 'job'");
    expect_error("~\n", "f.yaml:1:1", "missing required key 'job'");
    expect_error("job: scan\ninput: [x.zarr, \"0\"]\n", "f.yaml:2:8",
                 "input: expected a mapping, got a sequence");
    expect_error("job: scan\ninput: x.zarr\n", "f.yaml:2:8",
                 "input: expected a mapping, got 'x.zarr'");
    expect_error("- job: scan\n", "f.yaml:1:1",
                 "expected a mapping of configuration keys, got a sequence");
    expect_error("just text\n", "f.yaml:1:1",
                 "expected a mapping of configuration keys, got "
                 "'just text'");
    /* a group with every key commented out names no export: refused, not ignored (issue 32
     * #18); `path: null` says "no export" and loads */
    expect_error(CONVERT "export:\n", "f.yaml:4:1",
                 "`export` is empty: it names no export.hdf5.path");
    expect_error(CONVERT "export: {hdf5: {}}\n", "f.yaml:4:10",
                 "`export.hdf5` is empty: it names no export.hdf5.path");
    /* ... and is still a group the job does not use (a scan writes nothing to export) */
    expect_error(SCAN "export:\n", "f.yaml:3:1",
                 "`export` applies to convert and ingest jobs only (job: scan)");
}

static void test_malformed_yaml(void **state)
{
    (void)state;
    expect_error("job: scan\ntile: [64, 64\npasses: 1\n", "f.yaml:3:7",
                 "malformed YAML: did not find expected ',' or ']' (while parsing a flow "
                 "sequence at 2:7)");
    expect_error("job: scan\ninput:\n\tstore: x\n", "f.yaml:3:1",
                 "malformed YAML: found character that cannot start any token");
    expect_error("job: scan\n  input: x\n", "f.yaml:2:8", "malformed YAML");
    expect_error("job: \"scan\n", "f.yaml:2:1", "malformed YAML");
    expect_error("job: scan\n\xff\xfe\n", "f.yaml:2:1", "malformed YAML: invalid");
    expect_error(SCAN "tile: &t [1, 2]\n", "f.yaml:3:7", "YAML anchors (&t) are not supported");
    expect_error(SCAN "a: &x 1\n", "f.yaml:3:4", "YAML anchors (&x)");
    expect_error("job: scan\ninput: {store: x}\n"
                 "x: *y\n",
                 "f.yaml:3:4", "YAML aliases (*y) are not supported");
    expect_error(SCAN "passes: !!int 3\n", "f.yaml:3:9", "YAML tags (tag:yaml.org,2002:int)");
    expect_error(SCAN "---\njob: convert\n", "f.yaml:3:1", "a second YAML document");
    char deep[400];
    size_t n = 0;
    n += (size_t)snprintf(deep, sizeof(deep), "tile: ");
    for (int i = 0; i < 70; i++) {
        deep[n++] = '[';
    }
    for (int i = 0; i < 70; i++) {
        deep[n++] = ']';
    }
    deep[n++] = '\n';
    deep[n] = '\0';
    expect_error(deep, "f.yaml:1:71", "YAML nested deeper than 64 levels");
}

/* ---- the effective text ---- */

static void test_effective_text_is_canonical_and_sorted(void **state)
{
    (void)state;
    struct sm_job_config a, b;
    load_ok(SCAN "input.cache: {max_bytes: 256MiB}\nparallel: {threads: auto}\n", &a);
    load_ok("input: {cache: {max_bytes: 268435456}, store: x.zarr}\njob: scan\n", &b);
    assert_string_equal(a.effective, b.effective);
    assert_string_equal(a.source_path, "f.yaml");
    assert_contains(a.effective, "input.cache.max_bytes=268435456\n");
    assert_contains(a.effective, "input.store=\"x.zarr\"\n");
    assert_contains(a.effective, "job=scan\n");
    assert_contains(a.effective, "parallel.threads=auto\n");
    assert_contains(a.effective, "report=null\n");
    assert_contains(a.effective, "output.shard=auto\n");
    assert_contains(a.effective, "normalize.divisor=255\n");
    /* One line per key, sorted. */
    unsigned lines = 0;
    const char *prev = NULL;
    size_t prev_len = 0;
    for (const char *s = a.effective; *s != '\0';) {
        const char *eq = strchr(s, '=');
        const char *nl = strchr(s, '\n');
        assert_non_null(eq);
        assert_non_null(nl);
        size_t len = (size_t)(eq - s);
        if (prev != NULL) {
            int cmp = strncmp(prev, s, prev_len < len ? prev_len : len);
            assert_true(cmp < 0 || (cmp == 0 && prev_len < len));
        }
        prev = s;
        prev_len = len;
        lines++;
        s = nl + 1;
    }
    assert_int_equal(lines, sm_cfg_nkeys);
    sm_config_destroy(&a);
    load_ok(SCAN "passes: 2\n", &a);
    assert_string_not_equal(a.effective, b.effective);
    sm_config_destroy(&a);
    sm_config_destroy(&b);
}

/* ---- files and lifecycle ---- */

static void test_load_from_file(void **state)
{
    (void)state;
    char dir[PATH_MAX], path[PATH_MAX + 16];
    assert_int_equal(sm_test_tmpdir("cfg", dir, sizeof(dir)), 0);
    snprintf(path, sizeof(path), "%s/c.yaml", dir);
    static const char text[] = "job: scan\ninput:\n  store: x.zarr\n  bogus: 1\n";
    assert_int_equal(sm_test_write_file(path, text, strlen(text)), 0);
    struct sm_job_config c;
    struct sm_err err;
    sm_err_clear(&err);
    assert_status(sm_config_load(path, NULL, 0, &c, &err), SM_E_USAGE, &err);
    char where[PATH_MAX + 32];
    snprintf(where, sizeof(where), "%s:4:3", path);
    assert_string_equal(err.where, where);
    assert_contains(err.what, "unknown key 'input.bogus'");
    static const char good[] = "job: scan\ninput: {store: x.zarr}\n";
    assert_int_equal(sm_test_write_file(path, good, strlen(good)), 0);
    const char *sets[] = {"passes=5"};
    sm_err_clear(&err);
    assert_ok(sm_config_load(path, sets, 1, &c, &err), &err);
    assert_string_equal(c.source_path, path);
    assert_int_equal(c.passes, 5);
    sm_config_destroy(&c);
    sm_config_destroy(&c); /* twice is harmless */
    snprintf(path, sizeof(path), "%s/missing.yaml", dir);
    sm_err_clear(&err);
    assert_status(sm_config_load(path, NULL, 0, &c, &err), SM_E_USAGE, &err);
    assert_string_equal(err.where, path);
    assert_contains(err.what, "cannot open configuration");
    sm_err_clear(&err);
    assert_status(sm_config_load(dir, NULL, 0, &c, &err), SM_E_USAGE, &err);
    assert_contains(err.what, "not a regular file");
    assert_int_equal(sm_test_rm_rf(dir), 0);
}

/* Every allocation of a load may fail: the load then reports SM_E_NOMEM and leaks nothing. */
static void test_allocation_failures(void **state)
{
    (void)state;
    static const char text[] = "job: convert\ninput: {store: x.zarr, cache: {max_bytes: 1GiB}}\n"
                               "tile: [8, 32, 32]\noutput: {path: o.zarr, codec: {name: gzip}}\n"
                               "report: r.json\n";
    const char *sets[] = {"input.array=a", "tile=[1, 2, 3]"};
    unsigned failures = 0;
    for (uint64_t n = 1; n < 10000; n++) {
        uint64_t before = sm_alloc_current();
        struct sm_job_config c;
        struct sm_err err;
        sm_err_clear(&err);
        sm_alloc_fail_at(n);
        sm_status st = sm_config_load_string("f.yaml", text, strlen(text), sets, 2, &c, &err);
        sm_alloc_fail_at(0);
        if (st == SM_OK) {
            assert_string_equal(c.input.array, "a");
            sm_config_destroy(&c);
            assert_int_equal(sm_alloc_current(), before);
            break;
        }
        assert_status(st, SM_E_NOMEM, &err);
        assert_int_equal(sm_alloc_current(), before);
        failures++;
    }
    assert_true(failures > 5);
}

/* read_bench: defaults, ranges, and extents excluding roi.shape (a cross-key rule). */
static void test_read_bench_keys(void **state)
{
    (void)state;
    struct sm_job_config c;
#define RB "job: read-bench\ninput: {store: x.zarr}\n"
    load_ok(RB, &c);
    assert_false(c.read_bench.extents.set);
    assert_int_equal(c.read_bench.repeats, 5);
    assert_int_equal(c.read_bench.warmup, 1);
    sm_config_destroy(&c);
    load_ok(RB
            "roi: {offset: [7, 11]}\nread_bench: {extents: [256, 1024], repeats: 3, warmup: 0}\n",
            &c);
    assert_int_equal(c.read_bench.extents.n, 2);
    assert_int_equal(c.read_bench.extents.v[1], 1024);
    assert_int_equal(c.read_bench.repeats, 3);
    assert_int_equal(c.read_bench.warmup, 0);
    sm_config_destroy(&c);
    expect_error(RB "read_bench: {repeats: 0}\n", "f.yaml:3:23",
                 "read_bench.repeats: 0 is out of range (1 to 100000)");
    expect_error(RB "read_bench: {extents: [0]}\n", "f.yaml:3:24",
                 "read_bench.extents[0]: expected a positive integer");
    expect_error(RB "read_bench: {extents: []}\n", "f.yaml:3:23", "read_bench.extents");
    expect_error(RB "roi: {shape: [4, 4]}\nread_bench: {extents: [2]}\n", "f.yaml:4:14",
                 "read_bench.extents and roi.shape exclude each other");
    expect_set_error(RB "roi: {shape: [4, 4]}\n", "read_bench.extents=[2]",
                     "--set read_bench.extents", "exclude each other");
#undef RB
}

/* export.hdf5: the keys, their defaults and ranges, and convert only. */
static void test_export_hdf5_keys(void **state)
{
    (void)state;
    struct sm_job_config c;
    load_ok(CONVERT "export: {hdf5: {path: out/x.h5}}\n", &c);
    assert_string_equal(c.export_.hdf5_path, "out/x.h5");
    assert_string_equal(c.export_.hdf5_dataset, "/data");
    assert_false(c.export_.hdf5_chunk.set);
    assert_int_equal(c.export_.hdf5_deflate, 0);
    assert_int_equal(c.export_.hdf5_exists, SM_EXPORT_EXISTS_ERROR);
    sm_config_destroy(&c);
    load_ok(CONVERT "export:\n  hdf5:\n    path: x.h5\n    dataset: /ct/volume\n"
                    "    chunk: [4, 64, 64]\n    deflate: 9\n    exists: overwrite\n",
            &c);
    assert_string_equal(c.export_.hdf5_dataset, "/ct/volume");
    assert_true(c.export_.hdf5_chunk.set);
    assert_int_equal(c.export_.hdf5_chunk.n, 3);
    assert_int_equal(c.export_.hdf5_chunk.v[2], 64);
    assert_int_equal(c.export_.hdf5_deflate, 9);
    assert_int_equal(c.export_.hdf5_exists, SM_EXPORT_EXISTS_OVERWRITE);
    sm_config_destroy(&c);
    expect_error(CONVERT "export: {hdf5: {path: x.h5, deflate: 10}}\n", "f.yaml:4:38",
                 "export.hdf5.deflate: 10 is out of range (0 to 9)");
    expect_error(CONVERT "export: {hdf5: {path: x.h5, deflate: true}}\n", "f.yaml:4:38",
                 "export.hdf5.deflate");
    expect_error(CONVERT "export: {hdf5: {exists: resume}}\n", "f.yaml:4:25", "export.hdf5.exists");
    expect_error(CONVERT "export: {hdf5: {chunk: [4, 0, 4]}}\n", "f.yaml:4:28",
                 "export.hdf5.chunk");
    expect_error(CONVERT "export: {hdf5: {dataset: \"\"}}\n", "f.yaml:4:26",
                 "export.hdf5.dataset: must not be empty");
    expect_error(SCAN "export: {hdf5: {path: x.h5}}\n", "f.yaml:3:1",
                 "`export` applies to convert and ingest jobs only (job: scan)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bool_values),
        cmocka_unit_test(test_uint_values),
        cmocka_unit_test(test_int_values),
        cmocka_unit_test(test_float_values),
        cmocka_unit_test(test_size_values),
        cmocka_unit_test(test_string_values),
        cmocka_unit_test(test_enum_values),
        cmocka_unit_test(test_threads_auto_or_count),
        cmocka_unit_test(test_dims_values),
        cmocka_unit_test(test_range_values),
        cmocka_unit_test(test_unknown_keys_suggest_the_closest),
        cmocka_unit_test(test_duplicate_keys),
        cmocka_unit_test(test_error_line_and_column),
        cmocka_unit_test(test_exact_position_3_5),
        cmocka_unit_test(test_set_overrides_nested_keys),
        cmocka_unit_test(test_set_errors_name_the_set),
        cmocka_unit_test(test_required_keys_per_job),
        cmocka_unit_test(test_job_dependent_defaults),
        cmocka_unit_test(test_checks_across_keys),
        cmocka_unit_test(test_hdf5_dataset_rules),
        cmocka_unit_test(test_flow_and_block_styles_are_equivalent),
        cmocka_unit_test(test_empty_and_misshapen_documents),
        cmocka_unit_test(test_malformed_yaml),
        cmocka_unit_test(test_effective_text_is_canonical_and_sorted),
        cmocka_unit_test(test_load_from_file),
        cmocka_unit_test(test_allocation_failures),
        cmocka_unit_test(test_export_hdf5_keys),
        cmocka_unit_test(test_read_bench_keys),
    };
    return cmocka_run_group_tests_name("config_yaml", tests, NULL, NULL);
}
