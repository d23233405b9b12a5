/* Unit tests of engine/write/write_output.c (SPEC §6): a written output reads back through
 * sm_array_open + sm_array_read_region; atomic puts leave no temporary files; exists=error refuses
 * and leaves the output untouched; overwrite refuses directories that are not shardmill outputs
 * and replaces previous ones; path checks against a base; the three sync modes write the same
 * bytes; resume rewrites only missing or damaged shards and ends byte-identical to a clean run;
 * the marker is written only over a complete output; a second "rank" joins and writes its part. */
#include "shardmill/sm_config.h"

#include <inttypes.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "shardmill/alloc.h"
#include "shardmill/meta.h"
#include "sm_test.h"
#include "write_int.h"
#include "write_test.h"

static char base[1024];

static int setup(void **state)
{
    (void)state;
    return sm_test_tmpdir("write-output", base, sizeof(base));
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

static const struct sm_output_opts OPTS_NONE = {SM_OUTPUT_EXISTS_ERROR, SM_OUTPUT_SYNC_NONE, NULL,
                                                true};

/* Writes the pattern output of `s` at base/name with exists policy `ex`. */
static sm_status write_named(const char *name, const struct sm_output_spec *s,
                             enum sm_output_exists ex, int threads, struct sm_write_result *res,
                             struct sm_err *err)
{
    char dir[4096];
    path_of(dir, name);
    struct sm_output_opts o = OPTS_NONE;
    o.exists = ex;
    struct wt_pattern p = wt_pattern_of(s, 1000);
    return wt_write(dir, s, &o, &p, threads, res, err);
}

static void check_reads_back(const char *name, const struct sm_output_spec *s)
{
    char dir[4096];
    path_of(dir, name);
    struct sm_err err;
    sm_err_clear(&err);
    struct wt_pattern p = wt_pattern_of(s, 1000);
    size_t len = 0;
    uint8_t *ref = wt_reference(&p, &len);
    uint8_t *got = wt_read_back(dir, len, &err);
    if (got == NULL) {
        fail_msg("read back failed: %s: %s", err.where, err.what);
    }
    assert_memory_equal(got, ref, len);
    free(ref);
    free(got);
}

static void test_output_write_reads_back(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_output_spec s = wt_spec(20, 70, 45);
    struct sm_write_result res;
    assert_ok(write_named("a.zarr", &s, SM_OUTPUT_EXISTS_ERROR, 2, &res, &err), &err);
    assert_int_equal(res.written, 18);
    assert_int_equal(res.kept, 0);
    check_reads_back("a.zarr", &s);
    char dir[4096], p[4200];
    path_of(dir, "a.zarr");
    assert_int_equal(wt_count_files(dir, ".tmp."), 0);
    snprintf(p, sizeof(p), "%s/c", dir);
    assert_int_equal(wt_count_files(p, ""), 18); /* every shard, edge shards included */
    /* A completed output holds zarr.json, the shards and the marker only (no journal). */
    assert_int_equal(wt_count_files(dir, ""), 18 + 2);
    snprintf(p, sizeof(p), "%s/.shardmill", dir);
    assert_int_not_equal(access(p, F_OK), 0);
    snprintf(p, sizeof(p), "%s/shardmill.complete.json", dir);
    assert_int_equal(access(p, F_OK), 0);
    snprintf(p, sizeof(p), "%s/c/2/2/1", dir);
    assert_int_equal(access(p, F_OK), 0);
}

static void test_output_fill_only_shards_are_written(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output_spec s = wt_spec(16, 32, 64);
    char dir[4096];
    path_of(dir, "fill.zarr");
    struct wt_pattern p = wt_pattern_of(&s, 16 * 32 * 64); /* everything is the fill value */
    assert_ok(wt_write(dir, &s, &OPTS_NONE, &p, 1, NULL, &err), &err);
    char c[4200];
    snprintf(c, sizeof(c), "%s/c", dir);
    assert_int_equal(wt_count_files(c, ""), 4);
    snprintf(c, sizeof(c), "%s/c/1/0/1", dir);
    size_t len = 0;
    uint8_t *b = wt_slurp(c, &len);
    assert_non_null(b);
    assert_int_equal(len, 16 * 16 + 4); /* the index alone */
    free(b);
}

static void test_output_exists_error_refuses_untouched(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_output_spec s = wt_spec(20, 70, 45);
    assert_ok(write_named("x.zarr", &s, SM_OUTPUT_EXISTS_ERROR, 1, NULL, &err), &err);
    assert_ok(write_named("ref.zarr", &s, SM_OUTPUT_EXISTS_ERROR, 1, NULL, &err), &err);
    char dir[4096], ref[4096];
    path_of(dir, "x.zarr");
    path_of(ref, "ref.zarr");
    struct sm_output *o = NULL;
    assert_status(sm_output_open(dir, &OPTS_NONE, &o, &err), SM_E_USAGE, &err);
    assert_null(o);
    assert_string_equal(err.what, "output exists (set output.exists: overwrite or resume)");
    assert_string_equal(err.where, dir);
    /* A different writer does not get in either, and nothing changed. */
    sm_err_clear(&err);
    struct sm_output_spec other = wt_spec(4, 4, 4);
    assert_status(write_named("x.zarr", &other, SM_OUTPUT_EXISTS_ERROR, 1, NULL, &err), SM_E_USAGE,
                  &err);
    assert_int_equal(wt_trees_differ(dir, ref), 0);
    /* A foreign directory and a plain file are refused too; an empty directory is fine. */
    char foreign[4096], file[4096], empty[4096];
    path_of(foreign, "foreign");
    path_of(file, "file");
    path_of(empty, "empty");
    assert_int_equal(mkdir(foreign, 0777), 0);
    char note[4200];
    snprintf(note, sizeof(note), "%s/notes.txt", foreign);
    assert_int_equal(sm_test_write_file(note, "keep", 4), 0);
    assert_int_equal(sm_test_write_file(file, "f", 1), 0);
    mkdir(empty, 0777);
    sm_err_clear(&err);
    assert_status(sm_output_open(foreign, &OPTS_NONE, &o, &err), SM_E_USAGE, &err);
    sm_err_clear(&err);
    assert_status(sm_output_open(file, &OPTS_NONE, &o, &err), SM_E_USAGE, &err);
    sm_err_clear(&err);
    assert_ok(write_named("empty", &other, SM_OUTPUT_EXISTS_ERROR, 1, NULL, &err), &err);
}

static void test_output_overwrite_refuses_foreign_directories(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    char dir[4096], note[4200];
    path_of(dir, "notmine");
    snprintf(note, sizeof(note), "%s/notes.txt", dir);
    assert_int_equal(sm_test_write_file(note, "keep", 4), 0);
    struct sm_output_opts o = OPTS_NONE;
    o.exists = SM_OUTPUT_EXISTS_OVERWRITE;
    struct sm_output *out = NULL;
    assert_status(sm_output_open(dir, &o, &out, &err), SM_E_USAGE, &err);
    assert_contains(err.what, "not a shardmill output");
    assert_contains(err.what, "refusing to overwrite");
    o.exists = SM_OUTPUT_EXISTS_RESUME;
    sm_err_clear(&err);
    assert_status(sm_output_open(dir, &o, &out, &err), SM_E_USAGE, &err);
    assert_contains(err.what, "refusing to resume");
    assert_int_equal(access(note, F_OK), 0);

    /* A foreign zarr array (zarr.json and c/, but no .shardmill/) is not ours either. */
    char zdir[4096], zj[4200], ck[4200];
    path_of(zdir, "theirs.zarr");
    snprintf(zj, sizeof(zj), "%s/zarr.json", zdir);
    snprintf(ck, sizeof(ck), "%s/c/0/0/0", zdir);
    assert_int_equal(sm_test_write_file(zj, "{}", 2), 0);
    assert_int_equal(sm_test_write_file(ck, "x", 1), 0);
    o.exists = SM_OUTPUT_EXISTS_OVERWRITE;
    sm_err_clear(&err);
    assert_status(sm_output_open(zdir, &o, &out, &err), SM_E_USAGE, &err);
    assert_int_equal(access(ck, F_OK), 0);

    /* A shardmill output with a stranger inside c/ is refused before anything is deleted. */
    const struct sm_output_spec s = wt_spec(20, 70, 45);
    sm_err_clear(&err);
    assert_ok(write_named("mixed.zarr", &s, SM_OUTPUT_EXISTS_ERROR, 1, NULL, &err), &err);
    char mdir[4096], stranger[4200], marker[4200];
    path_of(mdir, "mixed.zarr");
    snprintf(stranger, sizeof(stranger), "%s/c/0/README", mdir);
    snprintf(marker, sizeof(marker), "%s/shardmill.complete.json", mdir);
    assert_int_equal(sm_test_write_file(stranger, "hi", 2), 0);
    sm_err_clear(&err);
    assert_status(sm_output_open(mdir, &o, &out, &err), SM_E_USAGE, &err);
    assert_contains(err.what, "unexpected entry 'c/0/README'");
    assert_int_equal(access(marker, F_OK), 0);

    /* A symbolic link as the output path is refused. */
    char link[4096];
    path_of(link, "link.zarr");
    assert_int_equal(symlink(mdir, link), 0);
    sm_err_clear(&err);
    assert_status(sm_output_open(link, &o, &out, &err), SM_E_USAGE, &err);
    assert_contains(err.what, "symbolic link");
}

static void test_output_overwrite_replaces_a_previous_output(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_output_spec big = wt_spec(20, 70, 45);
    assert_ok(write_named("ow.zarr", &big, SM_OUTPUT_EXISTS_ERROR, 1, NULL, &err), &err);
    struct sm_output_spec small = wt_spec(8, 40, 20);
    small.codec = "gzip";
    small.level = 5;
    assert_ok(write_named("ow.zarr", &small, SM_OUTPUT_EXISTS_OVERWRITE, 2, NULL, &err), &err);
    check_reads_back("ow.zarr", &small);
    assert_ok(write_named("ow-ref.zarr", &small, SM_OUTPUT_EXISTS_ERROR, 1, NULL, &err), &err);
    char a[4096], b[4096];
    path_of(a, "ow.zarr");
    path_of(b, "ow-ref.zarr");
    assert_int_equal(wt_trees_differ(a, b), 0); /* no stale shard or journal entry survived */
}

static void test_output_path_checks_against_a_base(void **state)
{
    (void)state;
    struct sm_err err;
    struct sm_output *o = NULL;
    struct sm_output_opts opts = OPTS_NONE;
    opts.base = base;
    static const char *const bad[] = {
        "../escape.zarr", "a/../../escape.zarr", "/etc/x.zarr", "", ".", "a/.."};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sm_err_clear(&err);
        assert_status(sm_output_open(bad[i], &opts, &o, &err), SM_E_USAGE, &err);
        assert_null(o);
    }
    char up[4200];
    snprintf(up, sizeof(up), "%s/../escape.zarr", base);
    sm_err_clear(&err);
    assert_status(sm_output_open(up, &opts, &o, &err), SM_E_USAGE, &err);
    sm_err_clear(&err);
    assert_status(sm_output_open(base, &opts, &o, &err), SM_E_USAGE, &err); /* base itself */
    /* Inside the base, relative or absolute; missing parents are created inside it. */
    sm_err_clear(&err);
    assert_ok(sm_output_open("sub/dir/in.zarr", &opts, &o, &err), &err);
    char want[4200];
    snprintf(want, sizeof(want), "%s/sub/dir/in.zarr", base);
    assert_string_equal(sm_output_path(o), want);
    const struct sm_output_spec s = wt_spec(4, 4, 4);
    struct sm_writer *w;
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    assert_ok(sm_output_begin(o, w, &err), &err);
    char zj[4300];
    snprintf(zj, sizeof(zj), "%s/zarr.json", want);
    assert_int_equal(access(zj, F_OK), 0);
    sm_output_close(o);
    sm_writer_free(w);
    assert_status(sm_output_open(want, &opts, &o, &err), SM_E_USAGE, &err); /* exists now */
    sm_err_clear(&err);
    opts.exists = SM_OUTPUT_EXISTS_OVERWRITE;
    assert_ok(sm_output_open(want, &opts, &o, &err), &err);
    sm_output_close(o);
    /* Without a base, ".." is the user's business; "/" never is an output. */
    struct sm_output_opts plain = OPTS_NONE;
    sm_err_clear(&err);
    assert_status(sm_output_open("/", &plain, &o, &err), SM_E_USAGE, &err);
}

/* SYNCFS: shards stay staged until the flush; a run closed without it (a failure) removes every
 * staged object, and a flush commits exactly the staged ones, once (the list is per process). */
static void test_output_syncfs_staged_shards(void **state)
{
    (void)state;
    const struct sm_output_spec s = wt_spec(20, 70, 45);
    for (int flush = 0; flush < 2; flush++) {
        struct sm_err err;
        sm_err_clear(&err);
        char dir[4096], c[4200];
        path_of(dir, flush ? "staged-flush.zarr" : "staged-close.zarr");
        snprintf(c, sizeof(c), "%s/c", dir);
        struct sm_writer *w;
        struct sm_output *o;
        struct sm_output_opts opts = OPTS_NONE;
        opts.sync = SM_OUTPUT_SYNC_SYNCFS;
        struct wt_pattern p = wt_pattern_of(&s, 1000);
        assert_ok(sm_writer_new(&s, &w, &err), &err);
        assert_ok(sm_output_open(dir, &opts, &o, &err), &err);
        assert_ok(sm_output_begin(o, w, &err), &err);
        /* shards 3..12 of 18, in two jobs */
        struct sm_write_job job = {
            .first = 3, .count = 5, .threads = 2, .fill = wt_fill, .user = &p};
        struct sm_write_result res;
        assert_ok(sm_write_shards(w, o, &job, &res, &err), &err);
        job.first = 8;
        assert_ok(sm_write_shards(w, o, &job, &res, &err), &err);
        assert_int_equal(wt_count_files(c, ".tmp."), 10);
        if (flush) {
            assert_ok(sm_output_flush(o, &err), &err);
            assert_ok(sm_output_flush(o, &err), &err); /* nothing left to commit */
            assert_int_equal(wt_count_files(c, ".tmp."), 0);
            assert_int_equal(wt_count_files(c, ""), 10);
        }
        sm_output_close(o);
        sm_writer_free(w);
        assert_int_equal(wt_count_files(c, ".tmp."), 0);
        assert_int_equal(wt_count_files(c, ""), flush ? 10 : 0);
    }
}

static void test_output_sync_modes_write_the_same_bytes(void **state)
{
    (void)state;
    const struct sm_output_spec s = wt_spec(20, 70, 45);
    static const enum sm_output_sync modes[] = {SM_OUTPUT_SYNC_FSYNC, SM_OUTPUT_SYNC_SYNCFS,
                                                SM_OUTPUT_SYNC_NONE};
    static const char *const names[] = {"fsync.zarr", "syncfs.zarr", "none.zarr"};
    uint64_t fsyncs[3];
    for (int i = 0; i < 3; i++) {
        struct sm_err err;
        sm_err_clear(&err);
        char dir[4096];
        path_of(dir, names[i]);
        struct sm_writer *w;
        struct sm_output *o;
        struct sm_output_opts opts = OPTS_NONE;
        opts.sync = modes[i];
        struct wt_pattern p = wt_pattern_of(&s, 1000);
        assert_ok(sm_writer_new(&s, &w, &err), &err);
        assert_ok(sm_output_open(dir, &opts, &o, &err), &err);
        assert_ok(sm_output_begin(o, w, &err), &err);
        struct sm_write_job job = {
            .first = 0, .count = sm_writer_nshards(w), .threads = 2, .fill = wt_fill, .user = &p};
        struct sm_write_result res;
        assert_ok(sm_write_shards(w, o, &job, &res, &err), &err);
        assert_ok(sm_output_flush(o, &err), &err);
        assert_ok(sm_output_finish(o, &err), &err);
        struct sm_output_stats st;
        sm_output_stats(o, &st);
        assert_int_equal(st.shards_written, 18);
        assert_int_equal(st.total_shards, 18);
        assert_int_equal(st.bytes_written, res.bytes);
        assert_int_equal(st.total_bytes, res.bytes);
        fsyncs[i] = st.fsyncs;
        sm_output_close(o);
        sm_writer_free(w);
        assert_int_equal(wt_count_files(dir, ".tmp."), 0);
    }
    /* fsync: 18 shards + zarr.json + marker + directories; syncfs: the owner record, zarr.json,
     * .shardmill/ and the root at begin, two syncfs around the renames, the marker and the root
     * at the end; none: nothing. */
    assert_true(fsyncs[0] > 18 + 2 + 3 * 3 + 1);
    assert_int_equal(fsyncs[1], 8);
    assert_int_equal(fsyncs[2], 0);
    char a[4096], b[4096], c[4096];
    path_of(a, names[0]);
    path_of(b, names[1]);
    path_of(c, names[2]);
    assert_int_equal(wt_trees_differ(a, b), 0);
    assert_int_equal(wt_trees_differ(a, c), 0);
}

static void test_output_failed_put_leaves_no_temp_file(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    char dir[4096], blocker[4200];
    path_of(dir, "blocked.zarr");
    const struct sm_output_spec s = wt_spec(20, 70, 45);
    struct sm_writer *w;
    struct sm_output *o;
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    assert_ok(sm_output_open(dir, &OPTS_NONE, &o, &err), &err);
    assert_ok(sm_output_begin(o, w, &err), &err);
    snprintf(blocker, sizeof(blocker), "%s/c/0/0/1", dir); /* a directory where shard 1 goes */
    assert_int_equal(sm_test_mkdir_parents(blocker), 0);
    assert_int_equal(mkdir(blocker, 0777), 0);
    const uint8_t bytes[3] = {1, 2, 3};
    assert_ok(sm_output_put_shard(o, 0, sm_bytes_of(bytes, 3), 1, &err), &err);
    assert_status(sm_output_put_shard(o, 1, sm_bytes_of(bytes, 3), 1, &err), SM_E_IO, &err);
    assert_contains(err.where, "c/0/0/1");
    assert_int_equal(wt_count_files(dir, ".tmp."), 0);
    /* Not every shard was written: no marker. */
    sm_err_clear(&err);
    assert_status(sm_output_finish(o, &err), SM_E_INTERNAL, &err);
    assert_contains(err.what, "c/0/0/1 has no record");
    char marker[4200];
    snprintf(marker, sizeof(marker), "%s/shardmill.complete.json", dir);
    assert_int_not_equal(access(marker, F_OK), 0);
    sm_output_close(o);
    sm_writer_free(w);
}

static uint64_t nshards_of(const struct sm_output_spec *s)
{
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_writer *w;
    assert_ok(sm_writer_new(s, &w, &err), &err);
    const uint64_t n = sm_writer_nshards(w);
    sm_writer_free(w);
    return n;
}

/* Swaps two files of the output dir. */
static void swap_files(const char *dir, const char *a, const char *b)
{
    char pa[4200], pb[4200], pt[4200];
    snprintf(pa, sizeof(pa), "%s/%s", dir, a);
    snprintf(pb, sizeof(pb), "%s/%s", dir, b);
    snprintf(pt, sizeof(pt), "%s/%s.swap", dir, a);
    assert_int_equal(rename(pa, pt), 0);
    assert_int_equal(rename(pb, pa), 0);
    assert_int_equal(rename(pt, pb), 0);
}

/* Resumes base/name and compares it with base/clean.zarr. */
static void resume_and_compare(const char *name, const struct sm_output_spec *s,
                               uint64_t want_written)
{
    struct sm_err err;
    sm_err_clear(&err);
    char a[4096], ref[4096];
    path_of(a, name);
    path_of(ref, "clean.zarr");
    if (want_written > 0) {
        assert_int_not_equal(wt_trees_differ(a, ref), 0); /* the damage is there */
    }
    struct sm_write_result res;
    assert_ok(write_named(name, s, SM_OUTPUT_EXISTS_RESUME, 2, &res, &err), &err);
    assert_int_equal(res.written, want_written);
    assert_int_equal(res.kept, nshards_of(s) - want_written);
    assert_int_equal(wt_trees_differ(a, ref), 0);
}

static void test_output_resume_rewrites_only_damaged_shards(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_output_spec s = wt_spec(20, 70, 45);
    assert_ok(write_named("clean.zarr", &s, SM_OUTPUT_EXISTS_ERROR, 1, NULL, &err), &err);

    /* A complete output, then damage: a truncated, an altered and a deleted shard. */
    assert_ok(write_named("r1.zarr", &s, SM_OUTPUT_EXISTS_ERROR, 2, NULL, &err), &err);
    char dir[4096], p[4200];
    path_of(dir, "r1.zarr");
    snprintf(p, sizeof(p), "%s/c/0/1/0", dir);
    assert_int_equal(truncate(p, 10), 0);
    snprintf(p, sizeof(p), "%s/c/1/2/1", dir);
    size_t len = 0;
    uint8_t *b = wt_slurp(p, &len);
    b[len / 2] ^= 0x40;
    assert_int_equal(sm_test_write_file(p, b, len), 0);
    free(b);
    snprintf(p, sizeof(p), "%s/c/2/0/0", dir);
    assert_int_equal(unlink(p), 0);
    snprintf(p, sizeof(p), "%s/c/0/0/0.tmp.99.7", dir); /* a killed put's leftover */
    assert_int_equal(sm_test_write_file(p, "junk", 4), 0);
    resume_and_compare("r1.zarr", &s, 3);

    /* Resume of an intact output rewrites nothing and stays identical. */
    resume_and_compare("r1.zarr", &s, 0);

    /* A killed run: shard 10 fails (one thread: 0..9 are written), no marker; resume writes the
     * 8 missing shards only. */
    struct wt_pattern pat = wt_pattern_of(&s, 1000);
    pat.fail_shard = 10;
    char kdir[4096];
    path_of(kdir, "killed.zarr");
    sm_err_clear(&err);
    assert_status(wt_write(kdir, &s, &OPTS_NONE, &pat, 1, NULL, &err), SM_E_DATA, &err);
    assert_contains(err.what, "injected failure at shard 10");
    snprintf(p, sizeof(p), "%s/shardmill.complete.json", kdir);
    assert_int_not_equal(access(p, F_OK), 0);
    resume_and_compare("killed.zarr", &s, 8);

    /* A completed output has no journal: resume trusts the marker's records. */
    assert_ok(write_named("nojournal.zarr", &s, SM_OUTPUT_EXISTS_ERROR, 1, NULL, &err), &err);
    char ndir[4096], jdir[4200];
    path_of(ndir, "nojournal.zarr");
    snprintf(p, sizeof(p), "%s/c/1/1/1", ndir);
    assert_int_equal(truncate(p, 0), 0);
    resume_and_compare("nojournal.zarr", &s, 1);

    /* Neither journal records nor marker (a crash that lost every batch): nothing ties a shard's
     * bytes to its key (two intact shards swapped pass their own indexes), so every shard is
     * rewritten -- issue 19: swapped shards were kept. */
    snprintf(jdir, sizeof(jdir), "%s/.shardmill/journal", ndir);
    assert_int_equal(sm_test_mkdir_parents(jdir), 0);
    assert_int_equal(mkdir(jdir, 0777), 0);
    snprintf(p, sizeof(p), "%s/shardmill.complete.json", ndir);
    assert_int_equal(unlink(p), 0);
    swap_files(ndir, "c/0/0/0", "c/0/0/1");
    resume_and_compare("nojournal.zarr", &s, nshards_of(&s));

    /* With the marker's records a swap fails both shards' size or CRC32C: both rewritten. */
    swap_files(ndir, "c/0/0/0", "c/0/0/1");
    resume_and_compare("nojournal.zarr", &s, 2);
}

static void test_output_resume_refuses_another_configuration(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_output_spec s = wt_spec(20, 70, 45);
    assert_ok(write_named("cfg.zarr", &s, SM_OUTPUT_EXISTS_ERROR, 1, NULL, &err), &err);
    assert_ok(write_named("cfg-ref.zarr", &s, SM_OUTPUT_EXISTS_ERROR, 1, NULL, &err), &err);
    struct sm_output_spec other = s;
    other.level = 5;
    assert_status(write_named("cfg.zarr", &other, SM_OUTPUT_EXISTS_RESUME, 1, NULL, &err),
                  SM_E_USAGE, &err);
    assert_contains(err.what, "output.exists: resume: the existing zarr.json differs");
    assert_contains(err.what, "in codecs"); /* the member that differs is named */
    char a[4096], b[4096];
    path_of(a, "cfg.zarr");
    path_of(b, "cfg-ref.zarr");
    assert_int_equal(wt_trees_differ(a, b), 0); /* untouched, marker included */
    /* Resume of a path that does not exist is a fresh write. */
    sm_err_clear(&err);
    assert_ok(write_named("fresh.zarr", &s, SM_OUTPUT_EXISTS_RESUME, 1, NULL, &err), &err);
    path_of(a, "fresh.zarr");
    assert_int_equal(wt_trees_differ(a, b), 0);
}

/* One pass: zarr.json begun without its pending member, restated with it; a weighted checksum
 * above 2^63 in that member (no jansson integer) must not make the documents differ. */
static void test_output_restate_pending_member_with_a_huge_sum(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    json_t *begun = json_pack("{s:{s:s}}", "shardmill", "config_sha256", "abc");
    json_t *final = json_pack("{s:{s:s,s:{s:I}}}", "shardmill", "config_sha256", "abc", "histogram",
                              "checksum", (json_int_t)-5);
    /* 18446739692013135678 = 2^64 - 4381696415938: written as the JSON integer it is */
    json_object_set_new(json_object_get(json_object_get(final, "shardmill"), "histogram"),
                        "weighted_checksum", sm_json_u64(UINT64_C(18446739692013135678)));
    struct sm_output_spec s = wt_spec(20, 70, 45), s2;
    s.attributes = begun;
    s.pending = "shardmill/histogram";
    s2 = s;
    s2.attributes = final;
    struct sm_writer *w, *w2, *other;
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    assert_ok(sm_writer_new(&s2, &w2, &err), &err);
    char dir[4096];
    path_of(dir, "restate.zarr");
    struct sm_output *o;
    assert_ok(sm_output_open(dir, &OPTS_NONE, &o, &err), &err);
    assert_ok(sm_output_begin(o, w, &err), &err);
    assert_ok(sm_output_restate(o, w2, true, &err), &err);
    /* anything else that differs is refused */
    struct sm_output_spec s3 = s2;
    s3.level = 5;
    assert_ok(sm_writer_new(&s3, &other, &err), &err);
    assert_status(sm_output_restate(o, other, true, &err), SM_E_INTERNAL, &err);
    sm_output_close(o);
    sm_writer_free(other);
    sm_writer_free(w2);
    sm_writer_free(w);
    json_decref(begun);
    json_decref(final);
}

static void test_output_second_rank_joins(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_output_spec s = wt_spec(20, 70, 45);
    char dir[4096];
    path_of(dir, "ranks.zarr");
    struct sm_writer *w;
    struct sm_output *r0, *r1;
    struct sm_output_opts opts = OPTS_NONE;
    opts.sync = SM_OUTPUT_SYNC_FSYNC;
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    assert_ok(sm_output_open(dir, &opts, &r0, &err), &err);
    assert_ok(sm_output_begin(r0, w, &err), &err);
    assert_status(sm_output_open(dir, &opts, &r1, &err), SM_E_USAGE, &err);
    opts.exists = SM_OUTPUT_EXISTS_OVERWRITE; /* the open check is the primary's business */
    sm_err_clear(&err);
    assert_ok(sm_output_open(dir, &opts, &r1, &err), &err);
    assert_ok(sm_output_join(r1, w, &err), &err);
    const uint64_t token = sm_output_run_token(r0);
    assert_int_not_equal(token, 0);
    sm_output_set_run(r0, token, 0);
    sm_output_set_run(r1, token, 1);
    struct wt_pattern p = wt_pattern_of(&s, 1000);
    struct sm_write_job j0 = {.first = 0, .count = 9, .threads = 1, .fill = wt_fill, .user = &p},
                        j1 = {.first = 9, .count = 9, .threads = 2, .fill = wt_fill, .user = &p};
    struct sm_write_result res;
    assert_ok(sm_write_shards(w, r1, &j1, &res, &err), &err);
    assert_ok(sm_write_shards(w, r0, &j0, &res, &err), &err);
    assert_ok(sm_output_flush(r1, &err), &err);
    assert_ok(sm_output_flush(r0, &err), &err);
    /* One journal file per rank, named by the run token and the rank. */
    char jdir[4200], jname[64];
    snprintf(jdir, sizeof(jdir), "%s/.shardmill/journal", dir);
    assert_int_equal(sm_test_count_entries(jdir, ".jnl"), 2);
    snprintf(jname, sizeof(jname), "%016" PRIx64 ".1.jnl", token);
    assert_int_equal(sm_test_count_entries(jdir, jname), 1);
    /* Without r1's records r0 cannot finish; it adopts them as gathered bytes (no file read). */
    assert_status(sm_output_finish(r0, &err), SM_E_INTERNAL, &err);
    assert_contains(err.what, "has no record");
    sm_err_clear(&err);
    struct sm_buf recs = SM_BUF_INIT;
    assert_ok(sm_output_records_export(r1, &recs, &err), &err);
    assert_int_equal(recs.len, 9 * SM_JREC_BYTES);
    recs.ptr[5] ^= 1; /* a corrupt record is refused */
    assert_status(sm_output_records_adopt(r0, sm_buf_bytes(&recs), &err), SM_E_INTERNAL, &err);
    recs.ptr[5] ^= 1;
    sm_err_clear(&err);
    assert_ok(sm_output_records_adopt(r0, sm_buf_bytes(&recs), &err), &err);
    sm_buf_free(&recs);
    assert_ok(sm_output_finish(r0, &err), &err);
    assert_int_not_equal(access(jdir, F_OK), 0); /* journals gone with the marker durable */
    sm_output_close(r0);
    sm_output_close(r1);
    assert_ok(write_named("ranks-ref.zarr", &s, SM_OUTPUT_EXISTS_ERROR, 1, NULL, &err), &err);
    char ref[4096];
    path_of(ref, "ranks-ref.zarr");
    assert_int_equal(wt_trees_differ(dir, ref), 0);
    /* Joining an output of another writer fails. */
    struct sm_output_spec other = wt_spec(3, 3, 3);
    struct sm_writer *w2;
    assert_ok(sm_writer_new(&other, &w2, &err), &err);
    assert_ok(sm_output_open(dir, &opts, &r1, &err), &err);
    assert_status(sm_output_join(r1, w2, &err), SM_E_DATA, &err);
    sm_output_close(r1);
    sm_writer_free(w2);
    sm_writer_free(w);
}

/* Allocation-failure torture (STYLE B6): the Nth allocation of the whole pipeline fails, for
 * every N until it succeeds; each run ends in SM_OK or SM_E_NOMEM, never another status, a crash
 * or (under ASan) a leak, and leaves no marker behind a failure. */
/* Issue 19: two runs on one output. The first holds it from begin to close; the second's begin
 * is refused (SM_E_USAGE naming the holder's pid) before it deletes or writes anything. */
static void test_output_second_writer_is_refused(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_output_spec s = wt_spec(20, 70, 45);
    assert_ok(write_named("locked.zarr", &s, SM_OUTPUT_EXISTS_ERROR, 1, NULL, &err), &err);
    char dir[4096], marker[4200];
    path_of(dir, "locked.zarr");
    snprintf(marker, sizeof(marker), "%s/shardmill.complete.json", dir);
    struct sm_writer *w;
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    struct sm_output_opts opts = OPTS_NONE;
    opts.exists = SM_OUTPUT_EXISTS_RESUME;
    struct sm_output *first, *second;
    assert_ok(sm_output_open(dir, &opts, &first, &err), &err);
    assert_ok(sm_output_begin(first, w, &err), &err);
    opts.exists = SM_OUTPUT_EXISTS_OVERWRITE;
    assert_ok(sm_output_open(dir, &opts, &second, &err), &err);
    assert_status(sm_output_begin(second, w, &err), SM_E_USAGE, &err);
    assert_contains(err.what, "in use by another shardmill run");
    char pid[32];
    snprintf(pid, sizeof(pid), "pid %ld", (long)getpid());
    assert_contains(err.what, pid);
    /* the holder's start time in ISO 8601 UTC, not epoch seconds */
    const char *at = strstr(err.what, "started ");
    assert_non_null(at);
    int y, mo, dd, h, mi, sec;
    char z = '\0';
    assert_int_equal(
        sscanf(at, "started %4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &dd, &h, &mi, &sec, &z), 7);
    assert_true(y >= 2024 && z == 'Z');
    sm_output_close(second);
    /* nothing of the first run's output was deleted by the refused one */
    assert_true(wt_count_files(dir, "") >= 18);
    sm_output_close(first);
    /* the lock goes with the holder: a later overwrite proceeds */
    sm_err_clear(&err);
    assert_ok(write_named("locked.zarr", &s, SM_OUTPUT_EXISTS_OVERWRITE, 1, NULL, &err), &err);
    assert_int_equal(access(marker, F_OK), 0);
    sm_writer_free(w);
}

/* Issue 19: an overwrite that fails at any point of its delete (an allocation failure at every
 * step in turn stands for a kill or a permission error) leaves a directory that the next
 * overwrite still recognises as shardmill's and finishes, and so does a resume. */
static void test_output_interrupted_overwrite_is_finished_later(void **state)
{
    (void)state;
    const struct sm_output_spec s = wt_spec(9, 40, 20);
    struct wt_pattern p = wt_pattern_of(&s, 1000);
    char dir[4096];
    path_of(dir, "interrupted.zarr");
    for (uint64_t n = 1;; n++) {
        struct sm_err err;
        sm_err_clear(&err);
        struct sm_output_opts o = OPTS_NONE;
        o.exists = SM_OUTPUT_EXISTS_OVERWRITE;
        assert_ok(wt_write(dir, &s, &o, &p, 1, NULL, &err), &err); /* a complete output */
        sm_alloc_fail_at(n);
        const sm_status st = wt_write(dir, &s, &o, &p, 1, NULL, &err);
        sm_alloc_fail_at(0);
        if (st == SM_OK) {
            break;
        }
        o.exists = (n % 2 == 0) ? SM_OUTPUT_EXISTS_RESUME : SM_OUTPUT_EXISTS_OVERWRITE;
        sm_err_clear(&err);
        assert_ok(wt_write(dir, &s, &o, &p, 1, NULL, &err), &err);
        check_reads_back("interrupted.zarr", &s);
        assert_true(n < 10000);
    }
}

/* Issue 19: overwrite's delete of a previous output ends at a stop (a huge tree would hold SIGTERM
 * for as long as it takes), and what it leaves is finished by the next overwrite. */
static void test_output_overwrite_delete_ends_at_a_stop(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_output_spec s = wt_spec(20, 70, 45);
    assert_ok(write_named("stopped.zarr", &s, SM_OUTPUT_EXISTS_ERROR, 1, NULL, &err), &err);
    char dir[4096];
    path_of(dir, "stopped.zarr");
    struct sm_writer *w;
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    struct sm_output_opts opts = OPTS_NONE;
    opts.exists = SM_OUTPUT_EXISTS_OVERWRITE;
    struct sm_output *o;
    atomic_int stop = 1;
    assert_ok(sm_output_open(dir, &opts, &o, &err), &err);
    sm_output_set_stop(o, &stop);
    assert_status(sm_output_begin(o, w, &err), SM_E_STOPPED, &err);
    sm_output_close(o);
    assert_true(wt_count_files(dir, "") > 0); /* the walk ended before deleting every shard */
    sm_err_clear(&err);
    assert_ok(write_named("stopped.zarr", &s, SM_OUTPUT_EXISTS_OVERWRITE, 1, NULL, &err), &err);
    check_reads_back("stopped.zarr", &s);
    sm_writer_free(w);
}

static void test_output_survives_every_allocation_failure(void **state)
{
    (void)state;
    struct sm_output_spec s = wt_spec(9, 40, 20);
    char dir[4096], marker[4200];
    path_of(dir, "nomem.zarr");
    snprintf(marker, sizeof(marker), "%s/shardmill.complete.json", dir);
    struct sm_output_opts o = OPTS_NONE;
    o.exists = SM_OUTPUT_EXISTS_OVERWRITE;
    struct wt_pattern p = wt_pattern_of(&s, 1000);
    for (uint64_t n = 1;; n++) {
        struct sm_err err;
        sm_err_clear(&err);
        sm_alloc_fail_at(n);
        const sm_status st = wt_write(dir, &s, &o, &p, 1, NULL, &err);
        sm_alloc_fail_at(0);
        if (st == SM_OK) {
            assert_true(n > 5);
            break;
        }
        assert_status(st, SM_E_NOMEM, &err);
        assert_int_not_equal(access(marker, F_OK), 0);
        assert_true(n < 10000);
    }
    check_reads_back("nomem.zarr", &s);

    /* Resume under the same torture, damage renewed before every attempt: it converges to the
     * clean bytes. */
    char ref[4096], shard[4200];
    path_of(ref, "nomem-ref.zarr");
    snprintf(shard, sizeof(shard), "%s/c/0/1/0", dir);
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output_opts plain = OPTS_NONE;
    assert_ok(wt_write(ref, &s, &plain, &p, 1, NULL, &err), &err);
    o.exists = SM_OUTPUT_EXISTS_RESUME;
    for (uint64_t n = 1;; n++) {
        assert_int_equal(truncate(shard, 3), 0);
        sm_err_clear(&err);
        sm_alloc_fail_at(n);
        const sm_status st = wt_write(dir, &s, &o, &p, 1, NULL, &err);
        sm_alloc_fail_at(0);
        if (st == SM_OK) {
            break;
        }
        assert_status(st, SM_E_NOMEM, &err);
        assert_true(n < 10000);
    }
    assert_int_equal(wt_trees_differ(dir, ref), 0);

    /* Verify under the torture: SM_OK with the one problem, or SM_E_NOMEM. */
    assert_int_equal(truncate(shard, 3), 0);
    for (uint64_t n = 1;; n++) {
        struct sm_verify_report rep;
        sm_err_clear(&err);
        sm_alloc_fail_at(n);
        const sm_status st = sm_output_verify(dir, &rep, &err);
        sm_alloc_fail_at(0);
        if (st == SM_OK) {
            assert_int_equal(rep.nproblems, 1);
            sm_verify_report_destroy(&rep);
            break;
        }
        assert_status(st, SM_E_NOMEM, &err);
        sm_verify_report_destroy(&rep);
        assert_true(n < 10000);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_output_write_reads_back),
        cmocka_unit_test(test_output_fill_only_shards_are_written),
        cmocka_unit_test(test_output_exists_error_refuses_untouched),
        cmocka_unit_test(test_output_overwrite_refuses_foreign_directories),
        cmocka_unit_test(test_output_overwrite_replaces_a_previous_output),
        cmocka_unit_test(test_output_path_checks_against_a_base),
        cmocka_unit_test(test_output_syncfs_staged_shards),
        cmocka_unit_test(test_output_sync_modes_write_the_same_bytes),
        cmocka_unit_test(test_output_failed_put_leaves_no_temp_file),
        cmocka_unit_test(test_output_resume_rewrites_only_damaged_shards),
        cmocka_unit_test(test_output_resume_refuses_another_configuration),
        cmocka_unit_test(test_output_restate_pending_member_with_a_huge_sum),
        cmocka_unit_test(test_output_second_rank_joins),
        cmocka_unit_test(test_output_second_writer_is_refused),
        cmocka_unit_test(test_output_interrupted_overwrite_is_finished_later),
        cmocka_unit_test(test_output_overwrite_delete_ends_at_a_stop),
        cmocka_unit_test(test_output_survives_every_allocation_failure),
    };
    return cmocka_run_group_tests_name("write_output", tests, setup, teardown);
}
