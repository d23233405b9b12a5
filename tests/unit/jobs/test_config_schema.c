/* Unit tests for jobs/config_schema.c: the table of configuration keys (SPEC §4, STYLE B10), and
 * its views (config_format.c, config_doc.c). Every field of struct sm_job_config has a row, rows
 * are unique and grouped, every numeric row has a range that holds its default, every row names
 * the jobs that use it, every default and example loads, the defaults equal the values SPEC
 * §2-§4 and config.h document, and the YAML and Markdown views cover every key (the YAML view:
 * every key its job uses). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "config_schema.h"
#include "shardmill/codec.h"
#include "shardmill/source.h"
#include "shardmill/alloc.h"
#include "shardmill/store.h"
#include "sm_test.h"

static const char base_convert[] = "job: convert\n"
                                   "input: {store: data/ct.zarr}\n"
                                   "normalize: {mode: window, lo: 1, hi: 99}\n"
                                   "output: {path: out/x.zarr}\n";
static const char base_scale[] = "job: convert\n"
                                 "input: {store: data/ct.zarr}\n"
                                 "output: {path: out/x.zarr}\n";
static const char base_ingest[] = "job: ingest\n"
                                  "input: {store: data/ct/matrix.dat, format: raw,\n"
                                  "        raw: {dtype: int16, shape: [108, 256, 256]}}\n"
                                  "output: {path: out/x.zarr}\n";
/* histogram.range needs histogram.bins (a rule between keys) */
static const char base_binned[] = "job: scan\n"
                                  "input: {store: data/ct.zarr}\n"
                                  "histogram: {bins: 256}\n";
static const char base_read_bench[] = "job: read-bench\n"
                                      "input: {store: data/ct.zarr}\n";
/* the keys of one source, of an s3:// store and of an export are used with those alone */
static const char base_hdf5[] = "job: ingest\n"
                                "input: {store: data/ct.h5, hdf5: {dataset: /d}}\n"
                                "output: {path: out/x.zarr}\n";
static const char base_s3[] = "job: scan\n"
                              "input: {store: s3://bucket/ct.zarr}\n";
static const char base_export[] = "job: convert\n"
                                  "input: {store: data/ct.zarr}\n"
                                  "normalize: {mode: window, lo: 1, hi: 99}\n"
                                  "output: {path: out/x.zarr}\n"
                                  "export: {hdf5: {path: out/x.h5}}\n";

/* A configuration of a job that uses row k (any other refuses it). */
static const char *base_for(const struct sm_cfg_key *k)
{
    if (strcmp(k->path, "normalize.divisor") == 0 || strcmp(k->path, "normalize.mode") == 0) {
        return base_scale; /* no window's lo and hi: any mode's keys may be set */
    }
    if (strncmp(k->path, "input.raw.", 10) == 0) {
        return base_ingest;
    }
    if (strncmp(k->path, "input.hdf5.", 11) == 0) {
        return base_hdf5;
    }
    if (strncmp(k->path, "input.s3.", 9) == 0) {
        return base_s3;
    }
    if (strncmp(k->path, "export.hdf5.", 12) == 0) {
        return base_export;
    }
    if ((k->applies & SM_CFG_JOB(SM_JOB_CONVERT)) != 0) {
        return base_convert;
    }
    return (k->applies & SM_CFG_JOB(SM_JOB_SCAN)) != 0 ? base_binned : base_read_bench;
}

static sm_status load_with(const char *text, const char *set, struct sm_job_config *c,
                           struct sm_err *err)
{
    const char *sets[1] = {set};
    sm_err_clear(err);
    return sm_config_load_string("f.yaml", text, strlen(text), sets, set != NULL ? 1 : 0, c, err);
}

/* The current value of a row as canonical text (sm_malloc'd). */
static char *value_text(const struct sm_cfg_key *k, const struct sm_job_config *c)
{
    struct sm_cfg_sb sb = {NULL, 0, 0, false};
    sm_cfg_format_value(&sb, k, c, true);
    assert_false(sb.oom);
    return sb.p;
}

static void test_paths_are_unique_and_groups_contiguous(void **state)
{
    (void)state;
    assert_true(sm_cfg_nkeys >= 40);
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const char *p = sm_cfg_keys[i].path;
        assert_true(strlen(p) > 0 && strlen(p) < 64);
        assert_ptr_equal(sm_cfg_find(p), &sm_cfg_keys[i]);
        assert_false(sm_cfg_is_group(p)); /* a key is never also a group */
        for (unsigned j = i + 1; j < sm_cfg_nkeys; j++) {
            assert_string_not_equal(p, sm_cfg_keys[j].path);
        }
        /* Every proper prefix of this key: once left, a group never comes back. */
        for (const char *dot = strchr(p, '.'); dot != NULL; dot = strchr(dot + 1, '.')) {
            size_t n = (size_t)(dot - p);
            bool left = false;
            for (unsigned j = i + 1; j < sm_cfg_nkeys; j++) {
                bool in = strncmp(sm_cfg_keys[j].path, p, n) == 0 && sm_cfg_keys[j].path[n] == '.';
                if (!in) {
                    left = true;
                } else if (left) {
                    fail_msg("group of %s is not contiguous (%s)", p, sm_cfg_keys[j].path);
                }
            }
        }
    }
    /* Every first component has a documentation section. */
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const char *p = sm_cfg_keys[i].path;
        size_t n = strcspn(p, ".");
        bool found = false;
        for (const struct sm_cfg_group *g = sm_cfg_groups; g->name != NULL; g++) {
            found = found || (strlen(g->name) == n && strncmp(g->name, p, n) == 0);
        }
        assert_true(found);
    }
}

/* Every row names the jobs that use it (at least one; every job that requires it), and a group
 * is used by the jobs of its keys. */
static void test_rows_name_the_jobs_that_use_them(void **state)
{
    (void)state;
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        if (k->applies == 0 || (k->applies & ~SM_CFG_ALL_JOBS) != 0 ||
            (k->required & ~k->applies) != 0) {
            fail_msg("%s: applies 0x%x, required 0x%x", k->path, k->applies, k->required);
        }
        assert_int_equal(sm_cfg_applies(k->path), k->applies);
    }
    const unsigned scan = SM_CFG_JOB(SM_JOB_SCAN), rb = SM_CFG_JOB(SM_JOB_READ_BENCH);
    const unsigned ci = SM_CFG_JOB(SM_JOB_CONVERT) | SM_CFG_JOB(SM_JOB_INGEST);
    assert_int_equal(sm_cfg_applies("input"), SM_CFG_ALL_JOBS);
    assert_int_equal(sm_cfg_applies("input.raw"), ci);
    assert_int_equal(sm_cfg_applies("output"), ci);
    assert_int_equal(sm_cfg_applies("output.codec"), ci);
    assert_int_equal(sm_cfg_applies("export"), ci);
    assert_int_equal(sm_cfg_applies("read_bench"), rb);
    assert_int_equal(sm_cfg_applies("passes"), scan);
    assert_int_equal(sm_cfg_applies("histogram"), scan | ci);
    assert_int_equal(sm_cfg_applies("limits"), SM_CFG_ALL_JOBS);
    assert_int_equal(sm_cfg_applies("outpu"), 0);
    assert_int_equal(sm_cfg_applies(""), 0);
    char buf[64];
    assert_string_equal(sm_cfg_jobs_text(scan, buf, sizeof(buf)), "scan");
    assert_string_equal(sm_cfg_jobs_text(ci, buf, sizeof(buf)), "convert and ingest");
    assert_string_equal(sm_cfg_jobs_text(scan | ci, buf, sizeof(buf)), "scan, convert and ingest");
    assert_string_equal(sm_cfg_jobs_text(SM_CFG_ALL_JOBS, buf, sizeof(buf)),
                        "scan, convert, ingest and read-bench");
    assert_string_equal(sm_cfg_jobs_text(rb, buf, 5), "read"); /* cut, terminated */
}

/* Issue 32, path classes: every row that holds a string declares whether it names a path and
 * what is done with it (the output rule of jobs/job_paths.c compares the INPUT, OUTPUT and
 * REPORT rows), a row named like a path (…path, …store, …report, …dir, …file) is one, and only
 * string rows have a class. A new string key without a class fails here. */
static void test_path_keys_have_a_class(void **state)
{
    (void)state;
    unsigned inputs = 0, written = 0;
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        const char *last = strrchr(k->path, '.');
        last = last != NULL ? last + 1 : k->path;
        if (k->type != SM_CFG_STRING) {
            if (k->path_class != SM_PATHC_UNSET) {
                fail_msg("%s: a path class on a row that holds no string", k->path);
            }
            continue;
        }
        if (k->path_class == SM_PATHC_UNSET) {
            fail_msg("%s: a string row without a path class (config.h enum sm_path_class)",
                     k->path);
        }
        const bool named = strcmp(last, "path") == 0 || strcmp(last, "store") == 0 ||
                           strcmp(last, "report") == 0 || strcmp(last, "dir") == 0 ||
                           strcmp(last, "file") == 0;
        if (named && k->path_class == SM_PATHC_NONE &&
            strcmp(k->path, "export.hdf5.dataset") != 0) {
            fail_msg("%s: named like a path, declared as none", k->path);
        }
        if (k->path_class != SM_PATHC_NONE && (k->path_noun == NULL || k->path_noun[0] == '\0')) {
            fail_msg("%s: a path row without a noun for messages", k->path);
        }
        inputs += k->path_class == SM_PATHC_INPUT;
        written += k->path_class == SM_PATHC_OUTPUT || k->path_class == SM_PATHC_REPORT ||
                   k->path_class == SM_PATHC_LOG_DIR;
    }
    assert_int_equal(inputs, 1);  /* input.store */
    assert_int_equal(written, 3); /* output.path, export.hdf5.path, report */
    assert_int_equal(sm_cfg_find("report")->path_class, SM_PATHC_REPORT);
    assert_int_equal(sm_cfg_find("output.path")->path_class, SM_PATHC_OUTPUT);
    assert_int_equal(sm_cfg_find("export.hdf5.path")->path_class, SM_PATHC_OUTPUT);
}

static void test_groups_are_recognized(void **state)
{
    (void)state;
    assert_true(sm_cfg_is_group("input"));
    assert_true(sm_cfg_is_group("input.cache"));
    assert_true(sm_cfg_is_group("output.codec"));
    assert_true(sm_cfg_is_group("export.hdf5"));
    assert_false(sm_cfg_is_group("input.store"));
    assert_false(sm_cfg_is_group("inp"));
    assert_false(sm_cfg_is_group(""));
    assert_false(sm_cfg_is_group("tile"));
    assert_null(sm_cfg_find("input"));
    assert_null(sm_cfg_find("input.cache"));
}

/* Marks bytes [off, off + n) as covered. */
static void cover(unsigned char *map, size_t off, size_t n)
{
    assert_true(off + n <= sizeof(struct sm_job_config));
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(map[off + i], 0); /* no two rows share a field */
        map[off + i] = 1;
    }
}

static void test_every_field_has_a_row(void **state)
{
    (void)state;
    unsigned char map[sizeof(struct sm_job_config)];
    memset(map, 0, sizeof(map));
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        switch (k->type) {
        case SM_CFG_DIMS:
            assert_int_equal(k->size, sizeof(struct sm_cfg_dims));
            break;
        case SM_CFG_FLOATS:
            assert_int_equal(k->size, sizeof(struct sm_cfg_floats));
            break;
        case SM_CFG_RANGE:
            cover(map, k->off2, sizeof(double));
            cover(map, k->off_set, sizeof(bool));
            break;
        case SM_CFG_STRING:
        case SM_CFG_NAME:
            assert_int_equal(k->size, sizeof(char *));
            break;
        case SM_CFG_ENUM:
            assert_int_equal(k->size, sizeof(int));
            break;
        case SM_CFG_BOOL:
            assert_int_equal(k->size, sizeof(bool));
            break;
        case SM_CFG_FLOAT:
            assert_int_equal(k->size, sizeof(double));
            break;
        case SM_CFG_UINT:
        case SM_CFG_INT:
        case SM_CFG_SIZE:
            assert_true(k->size == 4 || k->size == 8);
            break;
        }
        cover(map, k->off, k->size);
    }
    cover(map, offsetof(struct sm_job_config, source_path), sizeof(char *));
    cover(map, offsetof(struct sm_job_config, effective), sizeof(char *));
    /* set by `run` from the AWS environment for an s3:// input, never from the YAML file */
    cover(map, offsetof(struct sm_job_config, input.http.s3), sizeof(void *));
    /* the stop flag of the process, set by the jobs, never from the YAML file */
    cover(map, offsetof(struct sm_job_config, input.http.stop), sizeof(void *));
    /* What is left is padding: shorter than 8 bytes and ending where an 8-byte-aligned field (or
     * the struct) starts. A new field of 8 bytes or more, or one before a smaller field, shows. */
    for (size_t i = 0; i < sizeof(map);) {
        if (map[i] != 0) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < sizeof(map) && map[j] == 0) {
            j++;
        }
        if (j - i >= 8 || (j % 8 != 0 && j != sizeof(map))) {
            fail_msg("bytes %zu..%zu of struct sm_job_config have no schema row", i, j - 1);
        }
        i = j;
    }
    /* And the fields config.h names, one by one. */
    assert_int_equal(sm_cfg_find("input.http.retries")->off,
                     offsetof(struct sm_job_config, input.http.max_retries));
    assert_int_equal(sm_cfg_find("export.hdf5.path")->off,
                     offsetof(struct sm_job_config, export_.hdf5_path));
    assert_int_equal(sm_cfg_find("output.codec.name")->off,
                     offsetof(struct sm_job_config, output.codec));
    assert_int_equal(sm_cfg_find("histogram.range")->off_set,
                     offsetof(struct sm_job_config, histogram.range_set));
}

static void test_numeric_rows_have_ranges_holding_defaults(void **state)
{
    (void)state;
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        const char *help = sm_cfg_help(k);
        assert_non_null(help);
        assert_non_null(k->example);
        assert_true(help[0] != '\0' && help[strlen(help) - 1] != '.');
        assert_null(strchr(help, '|')); /* Markdown table cells */
        if (sm_cfg_def_doc(k) != NULL) {
            assert_null(strchr(sm_cfg_def_doc(k), '|'));
        }
        if (k->type == SM_CFG_ENUM || k->type == SM_CFG_NAME) {
            assert_non_null(sm_cfg_choices(k));
        } else {
            assert_null(sm_cfg_choices(k));
        }
        if (k->type != SM_CFG_UINT && k->type != SM_CFG_INT && k->type != SM_CFG_SIZE) {
            assert_int_equal(k->min, 0);
            assert_int_equal(k->max, 0);
            continue;
        }
        assert_true(k->max > 0);
        assert_true(k->min <= 0 || (uint64_t)k->min <= k->max);
        if (k->type != SM_CFG_INT) {
            assert_true(k->min >= 0);
        } else {
            assert_true(k->max <= (uint64_t)INT64_MAX);
        }
        if (k->size == 4) {
            assert_true(k->max <= (k->type == SM_CFG_INT ? (uint64_t)INT32_MAX : UINT32_MAX));
        }
        /* A default outside the range would only be reachable by not writing the key. */
        if (k->def != NULL && strcmp(k->def, "auto") != 0) {
            char set[128];
            struct sm_job_config c;
            struct sm_err err;
            snprintf(set, sizeof(set), "%s=%s", k->path, k->def);
            assert_ok(load_with(base_for(k), set, &c, &err), &err);
            sm_config_destroy(&c);
        }
    }
}

/* Every default equals what loading the table's default text gives, and what SPEC/config.h say. */
static void test_defaults_equal_the_documented_values(void **state)
{
    (void)state;
    struct sm_job_config d;
    sm_config_defaults(&d);
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        struct sm_job_config c;
        struct sm_err err;
        char *want = NULL;
        if (k->def != NULL) {
            char set[160];
            snprintf(set, sizeof(set), "%s=%s", k->path, k->def);
            assert_ok(load_with(base_for(k), set, &c, &err), &err);
            want = value_text(k, &c);
            sm_config_destroy(&c);
        }
        char *got = value_text(k, &d);
        if (want != NULL) {
            if (strcmp(got, want) != 0) {
                fail_msg("%s: default %s, table says %s (%s)", k->path, got, want, k->def);
            }
        } else if (k->type == SM_CFG_STRING || k->type == SM_CFG_NAME || k->type == SM_CFG_DIMS ||
                   k->type == SM_CFG_RANGE) {
            assert_string_equal(got, "null"); /* no default: unset */
        }
        sm_free(want);
        sm_free(got);
    }
    /* The values themselves, from SPEC §2-§4 and the comments of config.h. */
    const struct sm_http_opts http = SM_HTTP_OPTS_DEFAULTS;
    assert_null(d.input.store);
    assert_string_equal(d.input.array, "");
    assert_true(d.input.cache_enabled);
    assert_int_equal(d.input.cache_max_bytes, 256u << 20);
    assert_int_equal(d.input.index_cache_bytes, 16u << 20);
    assert_int_equal(d.input.index_cache_entries, 64);
    assert_int_equal(d.input.http.connect_timeout_ms, http.connect_timeout_ms);
    assert_int_equal(d.input.http.low_speed_bytes, http.low_speed_bytes);
    assert_int_equal(d.input.http.low_speed_time_s, http.low_speed_time_s);
    assert_int_equal(d.input.http.request_timeout_ms, http.request_timeout_ms);
    assert_int_equal(d.input.http.max_retries, http.max_retries);
    assert_int_equal(d.input.http.backoff_base_ms, http.backoff_base_ms);
    assert_int_equal(d.input.http.backoff_max_ms, http.backoff_max_ms);
    assert_true(d.input.http.verify_tls);
    assert_null(d.input.format); /* resolved per job by the loader */
    assert_string_equal(d.input.raw_byte_order, "little");
    assert_int_equal(d.input.raw_header_bytes, 0);
    assert_false(d.input.raw_shape.set);
    assert_false(d.roi.offset.set);
    assert_false(d.roi.shape.set);
    assert_false(d.tile.set);
    assert_int_equal(d.passes, 1);
    assert_false(d.read_bench.extents.set);
    assert_int_equal(d.read_bench.repeats, 5);
    assert_int_equal(d.read_bench.warmup, 1);
    assert_int_equal(d.histogram.bins, 0);
    assert_false(d.histogram.range_set);
    assert_int_equal(d.normalize.mode, SM_NORM_SCALE);
    assert_true(d.normalize.divisor == 255.0);
    assert_null(d.output.path);
    /* SPEC §2: the default layout is chosen from the output's shape */
    assert_true(d.output.shard.set);
    assert_true(d.output.shard.is_auto);
    assert_int_equal(d.output.shard.n, 0);
    assert_true(d.output.chunk.set);
    assert_true(d.output.chunk.is_auto);
    assert_string_equal(d.output.codec, "zstd");
    assert_int_equal(d.output.codec_level, 3);
    assert_int_equal(d.output.exists, SM_OUTPUT_EXISTS_ERROR);
    assert_true(d.output.fsync);
    assert_null(d.export_.hdf5_path);
    assert_int_equal(d.export_.hdf5_deflate, 0);
    assert_string_equal(d.export_.hdf5_dataset, "/data");
    assert_false(d.export_.hdf5_chunk.set);
    assert_int_equal(d.export_.hdf5_exists, SM_EXPORT_EXISTS_ERROR);
    assert_int_equal(d.parallel.threads, 0);
    assert_int_equal(d.parallel.partition, SM_PART_BALANCED);
    assert_int_equal(d.output.sync, SM_OUTPUT_SYNC_SYNCFS);
    assert_int_equal(d.limits.memory_bytes, 2ull << 30);
    assert_int_equal(d.limits.max_object_bytes, 512u << 20);
    assert_int_equal(d.limits.max_chunk_bytes, 1u << 30);
    assert_int_equal(d.limits.max_requests, 1000000);
    assert_null(d.report);
    assert_true(d.progress);
    sm_config_destroy(&d);
}

/* Every row's example is a valid value (over a convert, an ingest, a scan or a read-bench
 * configuration). */
static void test_every_example_loads(void **state)
{
    (void)state;
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        char set[160];
        snprintf(set, sizeof(set), "%s=%s", k->path, k->example);
        struct sm_job_config c;
        struct sm_err err;
        sm_status st = load_with(base_convert, set, &c, &err);
        if (st != SM_OK) {
            st = load_with(base_scale, set, &c, &err);
        }
        if (st != SM_OK) {
            st = load_with(base_ingest, set, &c, &err);
        }
        if (st != SM_OK) {
            st = load_with(base_binned, set, &c, &err);
        }
        if (st != SM_OK) {
            st = load_with(base_read_bench, set, &c, &err);
        }
        if (st != SM_OK) {
            st = load_with(base_for(k), set, &c, &err);
        }
        if (st != SM_OK) {
            fail_msg("example of %s (%s) does not load: %s: %s", k->path, k->example, err.where,
                     err.what);
        }
        sm_config_destroy(&c);
    }
}

static void test_enum_names_follow_the_c_enums(void **state)
{
    (void)state;
    static const struct {
        const char *set;
        size_t off;
        int want;
    } cases[] = {
        {"job=scan", offsetof(struct sm_job_config, job), SM_JOB_SCAN},
        {"job=convert", offsetof(struct sm_job_config, job), SM_JOB_CONVERT},
        {"job=read-bench", offsetof(struct sm_job_config, job), SM_JOB_READ_BENCH},
        {"normalize.mode=scale", offsetof(struct sm_job_config, normalize.mode), SM_NORM_SCALE},
        {"normalize.mode=window", offsetof(struct sm_job_config, normalize.mode), SM_NORM_WINDOW},
        {"normalize.mode=percentile", offsetof(struct sm_job_config, normalize.mode),
         SM_NORM_PERCENTILE},
        {"output.exists=error", offsetof(struct sm_job_config, output.exists),
         SM_OUTPUT_EXISTS_ERROR},
        {"output.exists=overwrite", offsetof(struct sm_job_config, output.exists),
         SM_OUTPUT_EXISTS_OVERWRITE},
        {"output.exists=resume", offsetof(struct sm_job_config, output.exists),
         SM_OUTPUT_EXISTS_RESUME},
        {"output.exists=auto", offsetof(struct sm_job_config, output.exists),
         SM_OUTPUT_EXISTS_AUTO},
        {"parallel.partition=balanced", offsetof(struct sm_job_config, parallel.partition),
         SM_PART_BALANCED},
        {"parallel.partition=block", offsetof(struct sm_job_config, parallel.partition),
         SM_PART_BLOCK},
        {"output.sync=syncfs", offsetof(struct sm_job_config, output.sync), SM_OUTPUT_SYNC_SYNCFS},
        {"output.sync=fsync", offsetof(struct sm_job_config, output.sync), SM_OUTPUT_SYNC_FSYNC},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sm_job_config c;
        struct sm_err err;
        /* a scan or read-bench takes no output: switch jobs on a configuration without one */
        const bool plain =
            strcmp(cases[i].set, "job=scan") == 0 || strcmp(cases[i].set, "job=read-bench") == 0;
        /* modes without lo and hi switch on a configuration without them */
        const bool bare = strcmp(cases[i].set, "normalize.mode=scale") == 0 ||
                          strcmp(cases[i].set, "normalize.mode=none") == 0;
        assert_ok(load_with(plain  ? base_read_bench
                            : bare ? base_scale
                                   : base_convert,
                            cases[i].set, &c, &err),
                  &err);
        int v;
        memcpy(&v, (const char *)&c + cases[i].off, sizeof(v));
        if (v != cases[i].want) {
            fail_msg("%s gives %d, expected %d", cases[i].set, v, cases[i].want);
        }
        sm_config_destroy(&c);
    }
    struct sm_job_config c;
    struct sm_err err;
    assert_ok(load_with(base_ingest, "job=ingest", &c, &err), &err);
    assert_int_equal(c.job, SM_JOB_INGEST);
    sm_config_destroy(&c);
    static const char *const codecs[] = {"zstd", "gzip", "blosc", "none"};
    for (size_t i = 0; i < 4; i++) {
        char set[64];
        snprintf(set, sizeof(set), "output.codec.name=%s", codecs[i]);
        assert_ok(load_with(base_convert, set, &c, &err), &err);
        assert_string_equal(c.output.codec, codecs[i]);
        sm_config_destroy(&c);
    }
}

static void test_distance_and_suggestions(void **state)
{
    (void)state;
    char buf[128];
    assert_int_equal(sm_cfg_distance("input.cahce", "input.cache"), 1); /* transposition */
    assert_int_equal(sm_cfg_distance("tile", "tile"), 0);
    assert_int_equal(sm_cfg_distance("tiles", "tile"), 1);
    assert_int_equal(sm_cfg_distance("abc", "xyz"), 3);
    assert_true(sm_cfg_distance("a", "abcdefgh") > 3);
    assert_true(sm_cfg_suggest("input.cahce", buf, sizeof(buf)));
    assert_string_equal(buf, "input.cache");
    assert_true(sm_cfg_suggest("input.cache.max_byte", buf, sizeof(buf)));
    assert_string_equal(buf, "input.cache.max_bytes");
    assert_true(sm_cfg_suggest("ouput.path", buf, sizeof(buf)));
    assert_string_equal(buf, "output.path");
    assert_true(sm_cfg_suggest("histogramm", buf, sizeof(buf)));
    assert_string_equal(buf, "histogram");
    assert_false(sm_cfg_suggest("colour", buf, sizeof(buf)));
    assert_false(sm_cfg_suggest("input.cache", buf, sizeof(buf))); /* known: nothing to suggest */
    assert_false(sm_cfg_suggest("input.cahce", buf, 4));           /* does not fit */
}

/* The YAML view lists every key the job uses and no other (one "leaf: value" line each), and
 * loads back to the same effective configuration. */
static void test_yaml_view_round_trips(void **state)
{
    (void)state;
    static const char *const texts[] = {base_convert, base_ingest,
                                        "job: scan\n"
                                        "input: {store: \"we\\\"ird\\npath\", array: '0'}\n"
                                        "roi: {offset: [1, 2, 3], shape: [4, 5, 6]}\n"
                                        "histogram: {bins: 10, range: [-0.5, 1e300]}\n"
                                        "passes: 3\n"
                                        "parallel: {threads: 3}\n"
                                        "limits: {memory_bytes: 1000, max_chunk_bytes: 3GiB}\n"
                                        "report: r.json\n",
                                        base_read_bench};
    for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
        struct sm_job_config a, b;
        struct sm_err err;
        assert_ok(load_with(texts[t], NULL, &a, &err), &err);
        char *yaml = sm_config_format_yaml(&a);
        assert_non_null(yaml);
        unsigned used = 0, leaves = 0;
        for (const char *l = yaml; *l != '\0'; l = strchr(l, '\n') + 1) {
            leaves += strchr(l, '\n')[-1] != ':'; /* a group's line ends in its colon */
        }
        for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
            if (!sm_cfg_used(&sm_cfg_keys[i], &a)) {
                continue;
            }
            used++;
            const char *leaf = strrchr(sm_cfg_keys[i].path, '.');
            char line[96];
            snprintf(line, sizeof(line), " %s: ", leaf != NULL ? leaf + 1 : sm_cfg_keys[i].path);
            if (leaf == NULL) {
                snprintf(line, sizeof(line), "\n%s: ", sm_cfg_keys[i].path);
            }
            if (i > 0) {
                assert_contains(yaml, line);
            }
        }
        assert_int_equal(leaves, used);
        assert_ok(sm_config_load_string("round.yaml", yaml, strlen(yaml), NULL, 0, &b, &err), &err);
        assert_string_equal(a.effective, b.effective);
        sm_free(yaml);
        sm_config_destroy(&a);
        sm_config_destroy(&b);
    }
}

/* The n-th name of "a|b|c" (into buf), or "" past the last. */
static const char *nth_choice(const char *choices, unsigned n, char *buf, size_t cap)
{
    for (; n > 0 && choices != NULL; n--) {
        choices = strchr(choices, '|');
        choices = choices != NULL ? choices + 1 : NULL;
    }
    snprintf(buf, cap, "%.*s", choices != NULL ? (int)strcspn(choices, "|") : 0,
             choices != NULL ? choices : "");
    return buf;
}

/* The engine's enums that config.h fields are (issue 36): each value with its YAML name. */
struct engine_enum {
    const char *path;
    unsigned nchoices; /* the values that are YAML choices: 0 .. nchoices-1 */
    struct {
        int value;
        const char *name; /* "" for a value that is no choice */
    } values[6];
};
static const struct engine_enum engine_enums[] = {
    {"output.exists",
     4,
     {{SM_OUTPUT_EXISTS_ERROR, "error"},
      {SM_OUTPUT_EXISTS_OVERWRITE, "overwrite"},
      {SM_OUTPUT_EXISTS_RESUME, "resume"},
      {SM_OUTPUT_EXISTS_AUTO, "auto"},
      {0, NULL}}},
    {"output.sync",
     2,
     {{SM_OUTPUT_SYNC_FSYNC, "fsync"},
      {SM_OUTPUT_SYNC_SYNCFS, "syncfs"},
      {SM_OUTPUT_SYNC_NONE, ""},
      {0, NULL}}},
    {"output.ome.downsample",
     3,
     {{SM_RUN_OME_DOWN_AUTO, "auto"},
      {SM_RUN_OME_DOWN_ALL, "all"},
      {SM_RUN_OME_DOWN_YX, "yx"},
      {0, NULL}}},
    {"output.ome.version", 2, {{SM_RUN_OME_V05, "0.5"}, {SM_RUN_OME_V04, "0.4"}, {0, NULL}}},
    {"export.hdf5.exists",
     2,
     {{SM_EXPORT_EXISTS_ERROR, "error"}, {SM_EXPORT_EXISTS_OVERWRITE, "overwrite"}, {0, NULL}}},
    {"parallel.partition",
     2,
     {{SM_PART_BLOCK, "block"}, {SM_PART_BALANCED, "balanced"}, {0, NULL}}},
    {"input.direct_io",
     3,
     {{SM_SOURCE_DIRECT_AUTO, "auto"},
      {SM_SOURCE_DIRECT_ALWAYS, "always"},
      {SM_SOURCE_DIRECT_NEVER, "never"},
      {0, NULL}}},
    {"output.direct_io",
     3,
     {{SM_OUTPUT_DIRECT_AUTO, "auto"},
      {SM_OUTPUT_DIRECT_ALWAYS, "always"},
      {SM_OUTPUT_DIRECT_NEVER, "never"},
      {0, NULL}}},
};

/* issue 36: an enum's YAML choices are its registry, value for value, and the keys of rows that
 * read a registry agree with it (a mode's keys are rows; the level row spans every writer). */
static void test_choices_match_the_registries(void **state)
{
    (void)state;
    char buf[64];
    const struct sm_cfg_key *mode = sm_cfg_find("normalize.mode");
    for (unsigned m = 0; m < SM_NORM_NMODES; m++) {
        assert_string_equal(nth_choice(sm_cfg_choices(mode), m, buf, sizeof(buf)),
                            sm_norm_mode_name((enum sm_norm_mode)m));
        for (const char *e = sm_norm_modes[m].keys; *e != '\0';) {
            snprintf(buf, sizeof(buf), "%.*s", (int)strcspn(e, "|"), e);
            assert_non_null(sm_cfg_find(buf));
            e += strcspn(e, "|") + (e[strcspn(e, "|")] == '|');
        }
    }
    assert_string_equal(nth_choice(sm_cfg_choices(mode), SM_NORM_NMODES, buf, sizeof(buf)), "");
    assert_int_equal(sm_norm_desc(SM_NORM_PERCENTILE)->needs_statistics, true);
    const struct sm_cfg_key *fmt = sm_cfg_find("input.format");
    unsigned n = 0;
    for (const struct sm_source_format *f = sm_source_formats; f->name != NULL; f++, n++) {
        assert_string_equal(nth_choice(sm_cfg_choices(fmt), 2 + n, buf, sizeof(buf)), f->name);
        for (const char *e = f->required; *e != '\0';) {
            snprintf(buf, sizeof(buf), "%.*s", (int)strcspn(e, "|"), e);
            assert_non_null(sm_cfg_find(buf));
            e += strcspn(e, "|") + (e[strcspn(e, "|")] == '|');
        }
        assert_true(f->shape_key == NULL || sm_cfg_find(f->shape_key)->type == SM_CFG_DIMS);
    }
    const struct sm_cfg_key *codec = sm_cfg_find("output.codec.name");
    const struct sm_cfg_key *level = sm_cfg_find("output.codec.level");
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    n = 0;
    for (size_t i = 0; sm_codec_at(i) != NULL; i++) {
        const struct sm_codec_writer *w = sm_codec_at(i)->writer;
        if (w != NULL) {
            assert_string_equal(nth_choice(sm_cfg_choices(codec), n++, buf, sizeof(buf)),
                                sm_codec_choice(sm_codec_at(i)));
            lo = w->level_min < lo ? w->level_min : lo;
            hi = w->level_max > hi ? w->level_max : hi;
        }
    }
    assert_string_equal(nth_choice(sm_cfg_choices(codec), n, buf, sizeof(buf)), "none");
    /* the engine enums config.h uses directly: their YAML choices are in enum order, every
     * value of the enum a choice and no choice past its last value (output.sync's NONE is
     * output.fsync false, not a choice) */
    for (size_t i = 0; i < sizeof(engine_enums) / sizeof(engine_enums[0]); i++) {
        const struct engine_enum *e = &engine_enums[i];
        const struct sm_cfg_key *k = sm_cfg_find(e->path);
        assert_non_null(k);
        assert_int_equal(k->type, SM_CFG_ENUM);
        unsigned count = 0;
        for (; e->values[count].name != NULL; count++) {
            if (strcmp(nth_choice(sm_cfg_choices(k), (unsigned)e->values[count].value, buf,
                                  sizeof(buf)),
                       e->values[count].name) != 0) {
                fail_msg("%s: choice %d is '%s', the enum's value is %s", e->path,
                         e->values[count].value, buf, e->values[count].name);
            }
        }
        assert_string_equal(nth_choice(sm_cfg_choices(k), e->nchoices, buf, sizeof(buf)), "");
        assert_true(e->nchoices <= count);
    }
    assert_int_equal(level->min, lo);
    assert_int_equal((int64_t)level->max, hi);
}

static void test_markdown_documents_every_key(void **state)
{
    (void)state;
    char *md = sm_config_markdown();
    assert_non_null(md);
    assert_contains(md, "# Configuration reference");
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        char h[96];
        snprintf(h, sizeof(h), "\n### %s\n", k->path);
        assert_contains(md, h);
        snprintf(h, sizeof(h), "| [`%s`]", k->path);
        assert_contains(md, h);
        assert_contains(md, sm_cfg_help(k) + 1);
        if (k->def != NULL) {
            snprintf(h, sizeof(h), "- default: `%s`", k->def);
            assert_contains(md, h);
        }
    }
    assert_contains(md, "- type: one of `scan`, `convert`, `ingest`, `read-bench`");
    /* the jobs that use each key, in its section and in the table */
    assert_contains(md, "\n### passes\n");
    assert_contains(strstr(md, "\n### passes\n"), "\n- jobs: `scan`\n");
    assert_contains(strstr(md, "\n### job\n"), "\n- jobs: every job\n");
    assert_contains(strstr(md, "\n### tile\n"), "\n- jobs: `scan`, `convert` and `ingest`\n");
    assert_contains(strstr(md, "\n### output.path\n"), "\n- jobs: `convert` and `ingest`\n");
    assert_contains(md,
                    "| [`read_bench.warmup`](#read_benchwarmup) | uint | `1` | `read-bench` |\n");
    assert_contains(md, "1 to 1024TiB");
    assert_contains(md,
                    "`input: {cache: {max_bytes: 1GiB}}` or `--set input.cache.max_bytes=1GiB`");
    sm_free(md);
}

/* The YAML form of every example in docs/CONFIG.md loads as written (with the other required
 * keys from --set: a convert, else a raw ingest, a scan or a read-bench). */
static void test_markdown_examples_load(void **state)
{
    (void)state;
    static const char *const convert[] = {"job=convert",
                                          "input.store=x.zarr",
                                          "output.path=o",
                                          "normalize.lo=1",
                                          "normalize.hi=99",
                                          "histogram.bins=256",
                                          "normalize.mode=percentile"};
    /* mode scale's divisor: a convert without a window's lo and hi */
    static const char *const convert_scale[] = {"job=convert", "input.store=x.zarr",
                                                "output.path=o", "histogram.bins=256"};
    static const char *const ingest[] = {"job=ingest",
                                         "input.store=ct.dat",
                                         "input.format=raw",
                                         "input.raw.dtype=int16",
                                         "input.raw.shape=[4, 4, 4]",
                                         "output.path=o"};
    static const char *const scan[] = {"job=scan", "input.store=x.zarr", "histogram.bins=256"};
    static const char *const read_bench[] = {"job=read-bench", "input.store=x.zarr"};
    static const char *const hdf5[] = {"job=ingest", "input.store=x.h5", "input.hdf5.dataset=/d",
                                       "output.path=o"};
    static const char *const s3[] = {"job=scan", "input.store=s3://b/x.zarr"};
    static const char *const export[] = {"job=convert", "input.store=x.zarr", "output.path=o",
                                         "normalize.mode=scale", "export.hdf5.path=e.h5"};
    char *md = sm_config_markdown();
    assert_non_null(md);
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        char head[96];
        snprintf(head, sizeof(head), "\n### %s\n", sm_cfg_keys[i].path);
        const char *sec = strstr(md, head);
        assert_non_null(sec);
        const char *ex = strstr(sec, "\n- example: `");
        assert_non_null(ex);
        ex += strlen("\n- example: `");
        const char *end = strstr(ex, "` or `--set ");
        assert_non_null(end);
        char yaml[256];
        snprintf(yaml, sizeof(yaml), "%.*s\n", (int)(end - ex), ex);
        struct sm_job_config c;
        struct sm_err err;
        sm_err_clear(&err);
        sm_status st = sm_config_load_string("ex.yaml", yaml, strlen(yaml), convert, 7, &c, &err);
        if (st != SM_OK) {
            sm_err_clear(&err);
            st = sm_config_load_string("ex.yaml", yaml, strlen(yaml), convert_scale, 4, &c, &err);
        }
        if (st != SM_OK) {
            sm_err_clear(&err);
            st = sm_config_load_string("ex.yaml", yaml, strlen(yaml), ingest, 6, &c, &err);
        }
        if (st != SM_OK) {
            sm_err_clear(&err);
            st = sm_config_load_string("ex.yaml", yaml, strlen(yaml), scan, 3, &c, &err);
        }
        if (st != SM_OK) {
            sm_err_clear(&err);
            st = sm_config_load_string("ex.yaml", yaml, strlen(yaml), read_bench, 2, &c, &err);
        }
        if (st != SM_OK) {
            sm_err_clear(&err);
            st = sm_config_load_string("ex.yaml", yaml, strlen(yaml), hdf5, 4, &c, &err);
        }
        if (st != SM_OK) {
            sm_err_clear(&err);
            st = sm_config_load_string("ex.yaml", yaml, strlen(yaml), s3, 2, &c, &err);
        }
        if (st != SM_OK) {
            sm_err_clear(&err);
            st = sm_config_load_string("ex.yaml", yaml, strlen(yaml), export, 5, &c, &err);
        }
        if (st != SM_OK) {
            fail_msg("example '%s' of docs/CONFIG.md: %s: %s", yaml, err.where, err.what);
        }
        sm_config_destroy(&c);
    }
    sm_free(md);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paths_are_unique_and_groups_contiguous),
        cmocka_unit_test(test_rows_name_the_jobs_that_use_them),
        cmocka_unit_test(test_groups_are_recognized),
        cmocka_unit_test(test_path_keys_have_a_class),
        cmocka_unit_test(test_every_field_has_a_row),
        cmocka_unit_test(test_numeric_rows_have_ranges_holding_defaults),
        cmocka_unit_test(test_defaults_equal_the_documented_values),
        cmocka_unit_test(test_every_example_loads),
        cmocka_unit_test(test_enum_names_follow_the_c_enums),
        cmocka_unit_test(test_distance_and_suggestions),
        cmocka_unit_test(test_yaml_view_round_trips),
        cmocka_unit_test(test_choices_match_the_registries),
        cmocka_unit_test(test_markdown_documents_every_key),
        cmocka_unit_test(test_markdown_examples_load),
    };
    return cmocka_run_group_tests_name("config_schema", tests, NULL, NULL);
}
