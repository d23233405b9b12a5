/* Unit tests of engine/write/write_verify.c (SPEC §4 `verify`, §6): a clean output verifies; a
 * truncated shard, a flipped byte, a missing shard, a missing or malformed marker, an altered
 * zarr.json and a marker that leaves a shard out are each reported with the key; so are (issue 19)
 * a marker of an unknown format version, a byte total that disagrees with the files, a swap of
 * two shards, and an extra file, a link or a leftover temporary file in the tree; a directory
 * that is not a shardmill output is SM_E_DATA. */
#include "shardmill/sm_config.h"

#include <sys/stat.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sm_test.h"
#include "write_int.h"
#include "write_test.h"

static char base[1024];
static char out[2048];

static int setup(void **state)
{
    (void)state;
    return sm_test_tmpdir("write-verify", base, sizeof(base));
}

static int teardown(void **state)
{
    (void)state;
    return sm_test_rm_rf(base);
}

/* A fresh clean output at base/<name> (kept in `out`). */
static void fresh(const char *name)
{
    struct sm_err err;
    sm_err_clear(&err);
    snprintf(out, sizeof(out), "%s/%s", base, name);
    const struct sm_output_spec s = wt_spec(20, 70, 45);
    struct wt_pattern p = wt_pattern_of(&s, 1000);
    const struct sm_output_opts o = {SM_OUTPUT_EXISTS_ERROR, SM_OUTPUT_SYNC_NONE, NULL,
                                     SM_OUTPUT_DIRECT_ALWAYS};
    assert_ok(wt_write(out, &s, &o, &p, 2, NULL, &err), &err);
}

static void file_of(char *buf, size_t cap, const char *rel)
{
    snprintf(buf, cap, "%s/%s", out, rel);
}

/* Verifies `out` and expects exactly one problem on `key` whose text contains `what`. */
static void expect_one(const char *key, const char *what)
{
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_verify_report rep;
    assert_ok(sm_output_verify(out, &rep, &err), &err);
    if (rep.nproblems != 1) {
        for (size_t i = 0; i < rep.nproblems; i++) {
            printf("problem: %s: %s\n", rep.problems[i].key, rep.problems[i].what);
        }
        fail_msg("%zu problems, expected 1", rep.nproblems);
    }
    assert_string_equal(rep.problems[0].key, key);
    assert_contains(rep.problems[0].what, what);
    sm_verify_report_destroy(&rep);
}

static void test_verify_clean_output_is_ok(void **state)
{
    (void)state;
    fresh("ok.zarr");
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_verify_report rep;
    assert_ok(sm_output_verify(out, &rep, &err), &err);
    assert_int_equal(rep.nproblems, 0);
    assert_int_equal(rep.shards, 18);
    assert_int_equal(rep.checked, 18);
    sm_verify_report_destroy(&rep);
}

static void test_verify_detects_a_truncated_shard(void **state)
{
    (void)state;
    fresh("trunc.zarr");
    char p[4096];
    file_of(p, sizeof(p), "c/1/0/1");
    assert_int_equal(truncate(p, 17), 0);
    expect_one("c/1/0/1", "size 17 bytes, the marker says");
}

static void test_verify_detects_a_flipped_byte(void **state)
{
    (void)state;
    fresh("flip.zarr");
    char p[4096];
    file_of(p, sizeof(p), "c/2/1/0");
    size_t len = 0;
    uint8_t *b = wt_slurp(p, &len);
    b[3] ^= 1;
    assert_int_equal(sm_test_write_file(p, b, len), 0);
    free(b);
    expect_one("c/2/1/0", "crc32c");
}

static void test_verify_detects_a_missing_shard(void **state)
{
    (void)state;
    fresh("missing.zarr");
    char p[4096];
    file_of(p, sizeof(p), "c/0/2/1");
    assert_int_equal(unlink(p), 0);
    expect_one("c/0/2/1", "missing");
}

/* Replaces the first `from` in the marker by `to`. */
static void edit_marker(const char *from, const char *to)
{
    char p[4096];
    file_of(p, sizeof(p), "shardmill.complete.json");
    size_t len = 0;
    uint8_t *b = wt_slurp(p, &len);
    char *doc = calloc(1, len + strlen(to) + 1);
    memcpy(doc, b, len);
    char *at = strstr(doc, from);
    assert_non_null(at);
    const size_t cap = len + strlen(to) + 1;
    char *edited = calloc(1, cap);
    snprintf(edited, cap, "%.*s%s%s", (int)(at - doc), doc, to, at + strlen(from));
    assert_int_equal(sm_test_write_file(p, edited, strlen(edited)), 0);
    free(edited);
    free(doc);
    free(b);
}

static void test_verify_refuses_an_unknown_marker_version(void **state)
{
    (void)state;
    fresh("version.zarr");
    edit_marker("\"shardmill_complete\": 2", "\"shardmill_complete\": 7");
    expect_one("shardmill.complete.json", "unknown marker format version 7");
}

static void test_verify_checks_the_byte_total(void **state)
{
    (void)state;
    fresh("bytes.zarr");
    edit_marker("\"bytes\": ", "\"bytes\": 1");
    expect_one("shardmill.complete.json", "'bytes' is 1");
}

static void test_verify_detects_swapped_shards(void **state)
{
    (void)state;
    fresh("swap.zarr");
    char a[4096], b[4096], t[4096];
    file_of(a, sizeof(a), "c/0/0/0");
    file_of(b, sizeof(b), "c/0/0/1");
    file_of(t, sizeof(t), "swap.tmp");
    assert_int_equal(rename(a, t), 0);
    assert_int_equal(rename(b, a), 0);
    assert_int_equal(rename(t, b), 0);
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_verify_report rep;
    assert_ok(sm_output_verify(out, &rep, &err), &err);
    assert_int_equal(rep.nproblems, 2);
    assert_string_equal(rep.problems[0].key, "c/0/0/0");
    assert_string_equal(rep.problems[1].key, "c/0/0/1");
    sm_verify_report_destroy(&rep);
}

static void test_verify_flags_entries_outside_the_grid(void **state)
{
    (void)state;
    char p[4096];
    fresh("extra.zarr");
    file_of(p, sizeof(p), "c/99");
    assert_int_equal(mkdir(p, 0777), 0);
    file_of(p, sizeof(p), "c/99/0");
    assert_int_equal(sm_test_write_file(p, "x", 1), 0);
    expect_one("c/99", "a directory, not a shard of zarr.json's grid");
    fresh("tmpfile.zarr");
    file_of(p, sizeof(p), "c/0/0/1.tmp.5.1");
    assert_int_equal(sm_test_write_file(p, "x", 1), 0);
    expect_one("c/0/0/1.tmp.5.1", "temporary file");
    fresh("link.zarr");
    file_of(p, sizeof(p), "c/2/9");
    assert_int_equal(symlink("/tmp", p), 0);
    expect_one("c/2/9", "symbolic link");
    fresh("rootfile.zarr");
    file_of(p, sizeof(p), "notes.txt");
    assert_int_equal(sm_test_write_file(p, "x", 1), 0);
    expect_one("notes.txt", "not part of a shardmill output");
}

/* One rule with resume and the open check (issue 32 item 13): names no shard key has (zero-padded,
 * a "*.tmp.*" directory) and directories named like shards are problems, not passed over. */
static void test_verify_flags_names_no_shard_has(void **state)
{
    (void)state;
    static const struct {
        const char *make, *key, *what;
        bool dir;
    } cases[] = {
        {"c/0/0/01", "c/0/0/01", "no shard key has such a file", false},
        {"c/00", "c/00", "no shard key has such a directory", true},
        {"c/0/00", "c/0/00", "no shard key has such a directory", true},
        {"c/0/0/0.tmp.1.2", "c/0/0/0.tmp.1.2", "no shard key has such a directory", true},
        {"c/0/0/99", "c/0/0/99", "a directory, not a shard of zarr.json's grid", true},
        {"c/0/99", "c/0/99", "a directory, not a shard of zarr.json's grid", true},
        {"c/0/98", "c/0/98", "a file, not a shard of zarr.json's grid", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char p[4096], name[32];
        snprintf(name, sizeof(name), "names%zu.zarr", i);
        fresh(name);
        file_of(p, sizeof(p), cases[i].make);
        if (cases[i].dir) {
            assert_int_equal(mkdir(p, 0777), 0);
        } else {
            assert_int_equal(sm_test_write_file(p, "x", 1), 0);
        }
        expect_one(cases[i].key, cases[i].what);
    }
}

static void test_verify_detects_a_missing_marker(void **state)
{
    (void)state;
    fresh("nomarker.zarr");
    char p[4096];
    file_of(p, sizeof(p), "shardmill.complete.json");
    assert_int_equal(unlink(p), 0);
    /* a run killed before its marker still has its journal directory (a completed output has
     * none: without the marker it is no longer recognisable) */
    file_of(p, sizeof(p), ".shardmill");
    assert_int_equal(mkdir(p, 0777), 0);
    expect_one("shardmill.complete.json", "missing: the run did not complete");
}

static void test_verify_detects_an_altered_zarr_json(void **state)
{
    (void)state;
    fresh("zj.zarr");
    char p[4096];
    file_of(p, sizeof(p), "zarr.json");
    size_t len = 0;
    uint8_t *b = wt_slurp(p, &len);
    uint8_t *c = malloc(len + 2);
    memcpy(c, b, len);
    c[len] = '\n'; /* still valid JSON, same array: only the hash tells */
    assert_int_equal(sm_test_write_file(p, c, len + 1), 0);
    free(b);
    free(c);
    expect_one("zarr.json", "SHA-256");
    assert_int_equal(unlink(p), 0);
    expect_one("zarr.json", "missing");
}

static void test_verify_detects_a_bad_marker(void **state)
{
    (void)state;
    fresh("badmarker.zarr");
    char p[4096];
    file_of(p, sizeof(p), "shardmill.complete.json");
    size_t len = 0;
    uint8_t *b = wt_slurp(p, &len);
    assert_int_equal(sm_test_write_file(p, b, len / 2), 0); /* torn */
    expect_one("shardmill.complete.json", "malformed JSON");
    /* A marker that leaves the last shard out (count adjusted): that shard is reported. */
    char *text = (char *)b;
    char *last = strstr(text, ",\n    {\"key\": \"c/2/2/1\"");
    assert_non_null(last);
    char *end = strstr(last, "}");
    memmove(last, end + 1, strlen(end + 1) + 1);
    char *cnt = strstr(text, "\"shard_count\": 18");
    assert_non_null(cnt);
    memcpy(cnt, "\"shard_count\": 17", 17);
    assert_int_equal(sm_test_write_file(p, text, strlen(text)), 0);
    expect_one("c/2/2/1", "not listed in the completion marker");
    free(b);
}

static void test_verify_rejects_what_is_not_an_output(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_verify_report rep;
    char p[2048];
    snprintf(p, sizeof(p), "%s/nothing-here", base);
    assert_status(sm_output_verify(p, &rep, &err), SM_E_DATA, &err);
    assert_contains(err.what, "not a shardmill output");
    assert_string_equal(err.where, p);
    sm_verify_report_destroy(&rep);
    snprintf(p, sizeof(p), "%s/plain", base);
    assert_int_equal(mkdir(p, 0777), 0);
    sm_err_clear(&err);
    assert_status(sm_output_verify(p, &rep, &err), SM_E_DATA, &err);
    assert_contains(err.what, "no shardmill.complete.json");
    sm_verify_report_destroy(&rep);
}

static void test_verify_lists_every_problem_in_grid_order(void **state)
{
    (void)state;
    fresh("many.zarr");
    char p[4096];
    static const char *const gone[] = {"c/2/2/1", "c/0/0/0", "c/1/1/1"};
    for (int i = 0; i < 3; i++) {
        file_of(p, sizeof(p), gone[i]);
        assert_int_equal(unlink(p), 0);
    }
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_verify_report rep;
    assert_ok(sm_output_verify(out, &rep, &err), &err);
    assert_int_equal(rep.nproblems, 3);
    assert_string_equal(rep.problems[0].key, "c/0/0/0");
    assert_string_equal(rep.problems[1].key, "c/1/1/1");
    assert_string_equal(rep.problems[2].key, "c/2/2/1");
    sm_verify_report_destroy(&rep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify_clean_output_is_ok),
        cmocka_unit_test(test_verify_detects_a_truncated_shard),
        cmocka_unit_test(test_verify_detects_a_flipped_byte),
        cmocka_unit_test(test_verify_detects_a_missing_shard),
        cmocka_unit_test(test_verify_detects_a_missing_marker),
        cmocka_unit_test(test_verify_refuses_an_unknown_marker_version),
        cmocka_unit_test(test_verify_checks_the_byte_total),
        cmocka_unit_test(test_verify_detects_swapped_shards),
        cmocka_unit_test(test_verify_flags_entries_outside_the_grid),
        cmocka_unit_test(test_verify_flags_names_no_shard_has),
        cmocka_unit_test(test_verify_detects_an_altered_zarr_json),
        cmocka_unit_test(test_verify_detects_a_bad_marker),
        cmocka_unit_test(test_verify_rejects_what_is_not_an_output),
        cmocka_unit_test(test_verify_lists_every_problem_in_grid_order),
    };
    return cmocka_run_group_tests_name("write_verify", tests, setup, teardown);
}
