/* Unit tests for engine/store/store_registry.c: a plain path and a file:// URL open the file
 * store at that path; an unknown scheme is a usage error that names the scheme (and the URL). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/store.h"
#include "sm_test.h"

struct fx {
    char dir[512];
    char url[1100];
    struct sm_store *s;
    struct sm_err err;
};

static int setup(void **state)
{
    struct fx *f = test_calloc(1, sizeof(*f));
    if (sm_test_tmpdir("store-registry", f->dir, sizeof(f->dir)) != 0) {
        test_free(f);
        return -1;
    }
    char path[1100];
    snprintf(path, sizeof(path), "%s/obj", f->dir);
    if (sm_test_write_file(path, "registry", 8) != 0) {
        return -1;
    }
    sm_err_clear(&f->err);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    sm_store_close(f->s);
    sm_test_rm_rf(f->dir);
    test_free(f);
    return 0;
}

static void assert_reads_obj(struct fx *f)
{
    struct sm_buf b = SM_BUF_INIT;
    bool found = false;
    assert_ok(sm_store_get(f->s, "obj", sm_range_all(), SM_IO_META, &b, &found, &f->err), &f->err);
    assert_true(found);
    assert_int_equal(b.len, 8);
    assert_memory_equal(b.ptr, "registry", 8);
    sm_buf_free(&b);
}

static void test_registry_plain_path_opens_file_store(void **state)
{
    struct fx *f = *state;
    assert_ok(sm_store_open(f->dir, &f->s, &f->err), &f->err);
    assert_string_equal(f->s->ops->scheme, "file");
    assert_string_equal(f->s->url, f->dir);
    assert_reads_obj(f);
}

static void test_registry_relative_path_opens_file_store(void **state)
{
    struct fx *f = *state;
    char cwd[1024];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(f->dir), 0);
    sm_status st = sm_store_open(".", &f->s, &f->err);
    assert_int_equal(chdir(cwd), 0);
    assert_ok(st, &f->err);
    assert_string_equal(f->s->ops->scheme, "file");
    /* the root descriptor was opened before the chdir back */
    assert_reads_obj(f);
}

static void test_registry_file_url_opens_file_store_at_its_path(void **state)
{
    struct fx *f = *state;
    snprintf(f->url, sizeof(f->url), "file://%s", f->dir);
    assert_ok(sm_store_open(f->url, &f->s, &f->err), &f->err);
    assert_string_equal(f->s->ops->scheme, "file");
    assert_string_equal(f->s->url, f->dir);
    assert_reads_obj(f);
}

static void test_registry_file_url_ignores_http_options(void **state)
{
    struct fx *f = *state;
    const struct sm_http_opts http = {1, 1, 1, 0, 1, 1, false, NULL, 0, NULL};
    snprintf(f->url, sizeof(f->url), "file://%s/", f->dir);
    assert_ok(sm_store_open_with(f->url, &http, &f->s, &f->err), &f->err);
    assert_reads_obj(f);
}

static void test_registry_unknown_scheme_is_usage_error_naming_it(void **state)
{
    struct fx *f = *state;
    static const char *urls[] = {"ftp://host/volume.zarr", "gs://b/x", "zip+file:///a.zip"};
    static const char *schemes[] = {"'ftp'", "'gs'", "'zip+file'"};
    for (size_t i = 0; i < 3; i++) {
        struct sm_store *s = (struct sm_store *)&f->err; /* must be reset to NULL */
        sm_err_clear(&f->err);
        assert_int_equal(sm_store_open(urls[i], &s, &f->err), SM_E_USAGE);
        assert_null(s);
        assert_contains(f->err.what, schemes[i]);
        assert_string_equal(f->err.where, urls[i]);
    }
}

/* s3:// is the HTTP store on the bucket's URL: opening sends nothing; malformed URLs and
 * endpoints are usage errors naming them. */
static void test_registry_s3_opens_and_checks_its_url(void **state)
{
    struct fx *f = *state;
    struct sm_s3_opts s3 = {0};
    s3.endpoint = "http://127.0.0.1:9/";
    s3.access_key_id = "AKIDEXAMPLE";
    s3.secret_access_key = "secret";
    struct sm_http_opts http = SM_HTTP_OPTS_DEFAULTS;
    http.s3 = &s3;
    struct sm_store *s = NULL;
    assert_ok(sm_store_open_with("s3://bucket/a/b.zarr/", &http, &s, &f->err), &f->err);
    assert_string_equal(s->ops->scheme, "s3");
    assert_string_equal(s->url, "s3://bucket/a/b.zarr"); /* errors name the s3:// URL */
    struct sm_http_stats hst;
    assert_true(sm_store_http_stats(s, &hst)); /* the HTTP store's counters and report */
    sm_store_close(s);
    static const char *bad[] = {"s3://", "s3:///key", "s3://bu$ket/x"};
    for (size_t i = 0; i < 3; i++) {
        sm_err_clear(&f->err);
        s = (struct sm_store *)&f->err;
        assert_int_equal(sm_store_open_with(bad[i], &http, &s, &f->err), SM_E_USAGE);
        assert_null(s);
        assert_string_equal(f->err.where, bad[i]);
    }
    sm_err_clear(&f->err);
    s3.endpoint = "ftp://127.0.0.1";
    assert_int_equal(sm_store_open_with("s3://b/x", &http, &s, &f->err), SM_E_USAGE);
    assert_string_equal(f->err.where, "input.s3.endpoint");
    sm_err_clear(&f->err);
    s3.endpoint = NULL;
    s3.secret_access_key = NULL; /* a key id without a secret */
    assert_int_equal(sm_store_open_with("s3://b/x", &http, &s, &f->err), SM_E_USAGE);
    assert_contains(f->err.what, "secret");
}

static void test_registry_empty_path_is_usage_error(void **state)
{
    struct fx *f = *state;
    struct sm_store *s = NULL;
    assert_int_equal(sm_store_open("", &s, &f->err), SM_E_USAGE);
    assert_null(s);
}

static void test_registry_missing_path_opens_an_empty_store(void **state)
{
    struct fx *f = *state;
    char path[1100];
    snprintf(path, sizeof(path), "%s/not/yet", f->dir);
    assert_ok(sm_store_open(path, &f->s, &f->err), &f->err);
    struct sm_buf b = SM_BUF_INIT;
    bool found = true;
    assert_ok(sm_store_get(f->s, "zarr.json", sm_range_all(), SM_IO_META, &b, &found, &f->err),
              &f->err);
    assert_false(found);
    sm_buf_free(&b);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_registry_plain_path_opens_file_store),
        T(test_registry_relative_path_opens_file_store),
        T(test_registry_file_url_opens_file_store_at_its_path),
        T(test_registry_file_url_ignores_http_options),
        T(test_registry_unknown_scheme_is_usage_error_naming_it),
        T(test_registry_s3_opens_and_checks_its_url),
        T(test_registry_empty_path_is_usage_error),
        T(test_registry_missing_path_opens_an_empty_store),
    };
    return cmocka_run_group_tests_name("store_registry", tests, NULL, NULL);
}
