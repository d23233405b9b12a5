/* Unit tests of output.exists: auto (engine/write/write_exists.c sm_output_decide and
 * sm_output_settle, issue 22): nothing or an empty directory is NEW and written as by `error`; a
 * directory that is no shardmill output is refused at open; this job's output (the same
 * attributes.shardmill identity) without a marker is UNFINISHED and resumed to the clean bytes; a
 * complete one that verifies is COMPLETE, with the marker's counts, and is left untouched (begin
 * refuses to write it); a complete one with a damaged shard is DAMAGED and resuming it repairs
 * it; another identity (configuration, input, a missing provenance) is SM_E_USAGE naming the
 * member, and nothing is touched. */
#include "shardmill/sm_config.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "sm_test.h"
#include "write_int.h"
#include "write_test.h"

static char base[1024];

static int setup(void **state)
{
    (void)state;
    return sm_test_tmpdir("write-auto", base, sizeof(base));
}

static int teardown(void **state)
{
    (void)state;
    return sm_test_rm_rf(base);
}

static void path_of(char *buf, const char *name)
{
    snprintf(buf, 4096, "%.1000s/%.1000s", base, name);
}

/* The provenance of a job: {"shardmill": {"config_sha256": cfg, "input": {"store": input}}}. */
static json_t *prov_of(const char *cfg, const char *input)
{
    return json_pack("{s:{s:s,s:{s:s},s:i}}", "shardmill", "config_sha256", cfg, "input", "store",
                     input, "roi", 7);
}

/* The identity auto compares: the provenance's config_sha256 and input (not roi). */
static json_t *id_of(const char *cfg, const char *input)
{
    return json_pack("{s:s,s:{s:s}}", "config_sha256", cfg, "input", "store", input);
}

static struct sm_output_spec spec_of(const json_t *attrs)
{
    struct sm_output_spec s = wt_spec(20, 70, 45);
    s.attributes = attrs;
    return s;
}

static uint64_t nshards_of(const struct sm_output_spec *s)
{
    struct sm_writer *w = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_writer_new(s, &w, &err), &err);
    const uint64_t n = sm_writer_nshards(w);
    sm_writer_free(w);
    return n;
}

static const struct sm_output_opts AUTO = {SM_OUTPUT_EXISTS_AUTO, SM_OUTPUT_SYNC_NONE, NULL,
                                           SM_OUTPUT_DIRECT_ALWAYS};
static const struct sm_output_opts ERROR = {SM_OUTPUT_EXISTS_ERROR, SM_OUTPUT_SYNC_NONE, NULL,
                                            true};

/* Opens dir with auto and decides against identity; the output stays open in *out. */
static sm_status decide_at(const char *dir, const json_t *identity, struct sm_output **out,
                           struct sm_output_decision *d, struct sm_err *err)
{
    *out = NULL;
    sm_status st = sm_output_open(dir, &AUTO, out, err);
    if (st == SM_OK) {
        st = sm_output_decide(*out, identity, d, err);
    }
    return st;
}

/* The whole auto run a job does: open, decide, settle, then (unless complete) write it all. */
static sm_status auto_run(const char *dir, const struct sm_output_spec *s, const json_t *identity,
                          struct sm_output_decision *d, struct sm_write_result *res,
                          struct sm_err *err)
{
    struct sm_output *o = NULL;
    memset(res, 0, sizeof(*res));
    const sm_status st = decide_at(dir, identity, &o, d, err);
    if (st != SM_OK || d->found == SM_OUTPUT_FOUND_COMPLETE) {
        sm_output_close(o); /* NULL-safe: open may have failed */
        return st;
    }
    sm_output_settle(o, d->found);
    struct wt_pattern p = wt_pattern_of(s, 1000);
    return wt_write_open(o, s, &p, 2, res, err);
}

/* base/name written with `error` (the reference, or the output a later auto run meets). */
static void write_plain(const char *name, const struct sm_output_spec *s)
{
    char dir[4096];
    path_of(dir, name);
    struct sm_err err;
    sm_err_clear(&err);
    struct wt_pattern p = wt_pattern_of(s, 1000);
    assert_ok(wt_write(dir, s, &ERROR, &p, 1, NULL, &err), &err);
}

static void test_auto_new_and_empty_are_written(void **state)
{
    (void)state;
    json_t *attrs = prov_of("c1", "in.zarr"), *id = id_of("c1", "in.zarr");
    const struct sm_output_spec s = spec_of(attrs);
    write_plain("ref.zarr", &s);
    char dir[4096], ref[4096];
    path_of(ref, "ref.zarr");
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output_decision d;
    struct sm_write_result res;
    path_of(dir, "new.zarr"); /* nothing there */
    assert_ok(auto_run(dir, &s, id, &d, &res, &err), &err);
    assert_int_equal(d.found, SM_OUTPUT_FOUND_NEW);
    assert_int_equal(res.written, nshards_of(&s));
    assert_int_equal(wt_trees_differ(dir, ref), 0);
    path_of(dir, "empty.zarr"); /* an empty directory */
    assert_int_equal(mkdir(dir, 0777), 0);
    assert_ok(auto_run(dir, &s, id, &d, &res, &err), &err);
    assert_int_equal(d.found, SM_OUTPUT_FOUND_NEW);
    assert_int_equal(wt_trees_differ(dir, ref), 0);
    assert_string_equal(sm_output_found_action(SM_OUTPUT_FOUND_NEW), "written");
    json_decref(attrs);
    json_decref(id);
}

static void test_auto_refuses_a_foreign_directory(void **state)
{
    (void)state;
    char dir[4096], p[4200];
    path_of(dir, "foreign");
    assert_int_equal(mkdir(dir, 0777), 0);
    snprintf(p, sizeof(p), "%s/notes.txt", dir);
    assert_int_equal(sm_test_write_file(p, "mine", 4), 0);
    struct sm_output *o = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    assert_status(sm_output_open(dir, &AUTO, &o, &err), SM_E_USAGE, &err);
    assert_contains(err.what, "not a shardmill output");
    assert_contains(err.what, "refusing to write into it");
    assert_null(o);
    size_t len = 0;
    uint8_t *b = wt_slurp(p, &len);
    assert_int_equal(len, 4); /* untouched */
    free(b);
}

static void test_auto_complete_is_left_alone(void **state)
{
    (void)state;
    json_t *attrs = prov_of("c1", "in.zarr"), *id = id_of("c1", "in.zarr");
    const struct sm_output_spec s = spec_of(attrs);
    write_plain("done.zarr", &s);
    write_plain("done-ref.zarr", &s);
    char dir[4096], ref[4096], marker[4200];
    path_of(dir, "done.zarr");
    path_of(ref, "done-ref.zarr");
    snprintf(marker, sizeof(marker), "%s/shardmill.complete.json", dir);
    struct stat before, after;
    assert_int_equal(stat(marker, &before), 0);
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output *o = NULL;
    struct sm_output_decision d;
    assert_ok(decide_at(dir, id, &o, &d, &err), &err);
    assert_int_equal(d.found, SM_OUTPUT_FOUND_COMPLETE);
    assert_int_equal(d.shards, nshards_of(&s));
    assert_true(d.bytes > 0);
    assert_int_equal(d.problems, 0);
    /* settled complete, the output cannot be begun: nothing may be written */
    sm_output_settle(o, d.found);
    struct sm_writer *w = NULL;
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    assert_status(sm_output_begin(o, w, &err), SM_E_INTERNAL, &err);
    sm_output_close(o);
    sm_writer_free(w);
    assert_int_equal(stat(marker, &after), 0);
    assert_int_equal(before.st_ino, after.st_ino);
    assert_int_equal(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
    assert_int_equal(wt_trees_differ(dir, ref), 0);
    assert_string_equal(sm_output_found_action(SM_OUTPUT_FOUND_COMPLETE), "complete");
    json_decref(attrs);
    json_decref(id);
}

static void test_auto_damaged_complete_is_repaired(void **state)
{
    (void)state;
    json_t *attrs = prov_of("c1", "in.zarr"), *id = id_of("c1", "in.zarr");
    const struct sm_output_spec s = spec_of(attrs);
    write_plain("hurt.zarr", &s);
    write_plain("hurt-ref.zarr", &s);
    char dir[4096], ref[4096], p[4200];
    path_of(dir, "hurt.zarr");
    path_of(ref, "hurt-ref.zarr");
    snprintf(p, sizeof(p), "%s/c/1/2/1", dir);
    size_t len = 0;
    uint8_t *b = wt_slurp(p, &len);
    b[len / 2] ^= 0x40;
    assert_int_equal(sm_test_write_file(p, b, len), 0);
    free(b);
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output_decision d;
    struct sm_write_result res;
    assert_ok(auto_run(dir, &s, id, &d, &res, &err), &err);
    assert_int_equal(d.found, SM_OUTPUT_FOUND_DAMAGED);
    assert_int_equal(d.problems, 1);
    assert_contains(d.first_problem, "c/1/2/1: crc32c");
    assert_int_equal(res.written, 1); /* only the damaged shard */
    assert_int_equal(wt_trees_differ(dir, ref), 0);
    struct sm_verify_report rep;
    assert_ok(sm_output_verify(dir, &rep, &err), &err);
    assert_int_equal(rep.nproblems, 0);
    sm_verify_report_destroy(&rep);
    assert_string_equal(sm_output_found_action(SM_OUTPUT_FOUND_DAMAGED), "repaired");
    json_decref(attrs);
    json_decref(id);
}

static void test_auto_unfinished_is_resumed(void **state)
{
    (void)state;
    json_t *attrs = prov_of("c1", "in.zarr"), *id = id_of("c1", "in.zarr");
    const struct sm_output_spec s = spec_of(attrs);
    write_plain("unf-ref.zarr", &s);
    char dir[4096], ref[4096];
    path_of(dir, "unf.zarr");
    path_of(ref, "unf-ref.zarr");
    struct sm_err err;
    sm_err_clear(&err);
    struct wt_pattern pat = wt_pattern_of(&s, 1000);
    pat.fail_shard = 10; /* a run that died at shard 10: no marker */
    assert_status(wt_write(dir, &s, &ERROR, &pat, 1, NULL, &err), SM_E_DATA, &err);
    sm_err_clear(&err);
    struct sm_output_decision d;
    struct sm_write_result res;
    assert_ok(auto_run(dir, &s, id, &d, &res, &err), &err);
    assert_int_equal(d.found, SM_OUTPUT_FOUND_UNFINISHED);
    assert_int_equal(res.kept, 10);
    assert_int_equal(wt_trees_differ(dir, ref), 0);
    /* and now it is complete: a third run has nothing to do */
    assert_ok(auto_run(dir, &s, id, &d, &res, &err), &err);
    assert_int_equal(d.found, SM_OUTPUT_FOUND_COMPLETE);
    assert_string_equal(sm_output_found_action(SM_OUTPUT_FOUND_UNFINISHED), "resumed");
    json_decref(attrs);
    json_decref(id);
}

/* A shardmill directory without zarr.json (killed before begin wrote it): nothing to keep. */
static void test_auto_without_zarr_json_is_unfinished(void **state)
{
    (void)state;
    json_t *attrs = prov_of("c1", "in.zarr"), *id = id_of("c1", "in.zarr");
    const struct sm_output_spec s = spec_of(attrs);
    write_plain("nz-ref.zarr", &s);
    char dir[4096], ref[4096], p[4200];
    path_of(dir, "nz.zarr");
    path_of(ref, "nz-ref.zarr");
    snprintf(p, sizeof(p), "%s/.shardmill/journal", dir);
    assert_int_equal(sm_test_mkdir_parents(p), 0);
    assert_int_equal(mkdir(p, 0777), 0);
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output_decision d;
    struct sm_write_result res;
    assert_ok(auto_run(dir, &s, id, &d, &res, &err), &err);
    assert_int_equal(d.found, SM_OUTPUT_FOUND_UNFINISHED);
    assert_int_equal(wt_trees_differ(dir, ref), 0);
    json_decref(attrs);
    json_decref(id);
}

/* Another job's output: exit 2 material naming the member, the tree untouched (compared with ref
 * unless NULL), for a complete and an unfinished output alike. */
static void refused(const char *dir, const char *ref, const json_t *id, const char *member)
{
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output *o = NULL;
    struct sm_output_decision d;
    assert_status(decide_at(dir, id, &o, &d, &err), SM_E_USAGE, &err);
    assert_contains(err.what, "output.exists: auto: another job's output: its zarr.json differs");
    assert_contains(err.what, member);
    assert_contains(err.where, dir);
    sm_output_close(o);
    if (ref != NULL) {
        assert_int_equal(wt_trees_differ(dir, ref), 0);
    }
}

static void test_auto_refuses_another_job(void **state)
{
    (void)state;
    json_t *attrs = prov_of("c1", "in.zarr");
    const struct sm_output_spec s = spec_of(attrs);
    write_plain("other.zarr", &s);
    write_plain("other-ref.zarr", &s);
    char dir[4096], ref[4096];
    path_of(dir, "other.zarr");
    path_of(ref, "other-ref.zarr");
    json_t *cfg = id_of("c2", "in.zarr"), *in = id_of("c1", "elsewhere.zarr");
    refused(dir, ref, cfg, "in attributes.shardmill.config_sha256");
    refused(dir, ref, in, "in attributes.shardmill.input.store");
    /* a member the existing provenance lacks (an older engine's output) */
    json_t *more = id_of("c1", "in.zarr");
    json_object_set_new(more, "engine", json_pack("{s:s}", "version", "9.9"));
    refused(dir, ref, more, "in attributes.shardmill.engine");
    /* an output without any provenance */
    const struct sm_output_spec bare = wt_spec(20, 70, 45);
    write_plain("bare.zarr", &bare);
    write_plain("bare-ref.zarr", &bare);
    path_of(dir, "bare.zarr");
    path_of(ref, "bare-ref.zarr");
    json_t *id = id_of("c1", "in.zarr");
    refused(dir, ref, id, "in attributes");
    /* an unfinished output of another configuration */
    path_of(dir, "other-unf.zarr");
    struct wt_pattern pat = wt_pattern_of(&s, 1000);
    pat.fail_shard = 3;
    struct sm_err err;
    sm_err_clear(&err);
    assert_status(wt_write(dir, &s, &ERROR, &pat, 1, NULL, &err), SM_E_DATA, &err);
    refused(dir, NULL, cfg, "in attributes.shardmill.config_sha256");
    assert_int_equal(wt_count_files(dir, ".jnl"), 1); /* its journal kept */
    json_decref(attrs);
    json_decref(cfg);
    json_decref(in);
    json_decref(more);
    json_decref(id);
}

static void test_auto_decide_needs_auto(void **state)
{
    (void)state;
    char dir[4096];
    path_of(dir, "plain.zarr");
    struct sm_output *o = NULL;
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_output_open(dir, &ERROR, &o, &err), &err);
    json_t *id = id_of("c1", "in.zarr");
    struct sm_output_decision d;
    assert_status(sm_output_decide(o, id, &d, &err), SM_E_INTERNAL, &err);
    sm_output_settle(o, SM_OUTPUT_FOUND_COMPLETE); /* no effect on a policy other than auto */
    sm_output_close(o);
    json_decref(id);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_new_and_empty_are_written),
        cmocka_unit_test(test_auto_refuses_a_foreign_directory),
        cmocka_unit_test(test_auto_complete_is_left_alone),
        cmocka_unit_test(test_auto_damaged_complete_is_repaired),
        cmocka_unit_test(test_auto_unfinished_is_resumed),
        cmocka_unit_test(test_auto_without_zarr_json_is_unfinished),
        cmocka_unit_test(test_auto_refuses_another_job),
        cmocka_unit_test(test_auto_decide_needs_auto),
    };
    return cmocka_run_group_tests_name("write_auto", tests, setup, teardown);
}
