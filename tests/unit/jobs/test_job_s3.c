/* Unit tests for jobs/job_s3.c: the S3 settings of an s3:// input from input.s3.*, the AWS
 * environment variables and the AWS credentials / config files (written to a temporary HOME). */
#include <shardmill/sm_config.h>

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

#include "job_s3.h"
#include "sm_test.h"

static const char *vars[] = {"AWS_ACCESS_KEY_ID",  "AWS_SECRET_ACCESS_KEY",
                             "AWS_SESSION_TOKEN",  "AWS_REGION",
                             "AWS_DEFAULT_REGION", "AWS_PROFILE",
                             "AWS_ENDPOINT_URL",   "AWS_ENDPOINT_URL_S3",
                             "AWS_CONFIG_FILE",    "AWS_SHARED_CREDENTIALS_FILE"};

struct fx {
    char home[256];
    char cred[300], conf[300];
    struct sm_err err;
    struct sm_job_s3 s3;
};

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    snprintf(f->home, sizeof(f->home), "/tmp/sm_job_s3_XXXXXX");
    if (mkdtemp(f->home) == NULL) {
        return -1;
    }
    char aws[300];
    snprintf(aws, sizeof(aws), "%s/.aws", f->home);
    if (mkdir(aws, 0700) != 0) {
        return -1;
    }
    snprintf(f->cred, sizeof(f->cred), "%s/credentials", aws);
    snprintf(f->conf, sizeof(f->conf), "%s/config", aws);
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        unsetenv(vars[i]);
    }
    setenv("HOME", f->home, 1);
    sm_err_clear(&f->err);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    sm_job_s3_destroy(&f->s3);
    unlink(f->cred);
    unlink(f->conf);
    char aws[300];
    snprintf(aws, sizeof(aws), "%s/.aws", f->home);
    rmdir(aws);
    rmdir(f->home);
    free(f);
    return 0;
}

static void test_not_s3_is_inactive(void **state)
{
    struct fx *f = *state;
    setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
    assert_ok(sm_job_s3_resolve("http://h/x", NULL, NULL, false, &f->s3, &f->err), &f->err);
    assert_false(f->s3.active);
    assert_null(f->s3.opts.access_key_id);
}

static void test_environment_wins(void **state)
{
    struct fx *f = *state;
    write_file(f->cred, "[default]\naws_access_key_id = FROMFILE\naws_secret_access_key = x\n");
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "secretenv", 1);
    setenv("AWS_SESSION_TOKEN", "tok", 1);
    setenv("AWS_DEFAULT_REGION", "eu-west-1", 1);
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1", 1);
    assert_ok(sm_job_s3_resolve("s3://b/x", NULL, NULL, true, &f->s3, &f->err), &f->err);
    assert_true(f->s3.active);
    assert_string_equal(f->s3.opts.access_key_id, "AKIDENV");
    assert_string_equal(f->s3.opts.secret_access_key, "secretenv");
    assert_string_equal(f->s3.opts.session_token, "tok");
    assert_string_equal(f->s3.opts.region, "eu-west-1");
    assert_string_equal(f->s3.opts.endpoint, "http://127.0.0.1:1");
    assert_true(f->s3.opts.path_style);
    sm_job_s3_destroy(&f->s3);
    /* the config keys win over the environment; AWS_REGION over AWS_DEFAULT_REGION */
    setenv("AWS_REGION", "ap-south-1", 1);
    assert_ok(sm_job_s3_resolve("s3://b/x", NULL, NULL, false, &f->s3, &f->err), &f->err);
    assert_string_equal(f->s3.opts.region, "ap-south-1");
    sm_job_s3_destroy(&f->s3);
    assert_ok(sm_job_s3_resolve("s3://b/x", "http://h:2", "r1", false, &f->s3, &f->err), &f->err);
    assert_string_equal(f->s3.opts.region, "r1");
    assert_string_equal(f->s3.opts.endpoint, "http://h:2");
}

static void test_key_id_without_secret_is_usage_error(void **state)
{
    struct fx *f = *state;
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    assert_int_equal(sm_job_s3_resolve("s3://b/x", NULL, NULL, false, &f->s3, &f->err), SM_E_USAGE);
    assert_contains(f->err.what, "AWS_SECRET_ACCESS_KEY");
}

static void test_profile_from_files(void **state)
{
    struct fx *f = *state;
    write_file(f->cred, "# comment\n[default]\naws_access_key_id=DEF\naws_secret_access_key=d\n"
                        "\n[ work ]\r\n  aws_access_key_id =  WORK  \r\naws_secret_access_key = "
                        "w/+=s\n; c\naws_session_token = T\n");
    write_file(f->conf, "[default]\nregion = us-west-2\n[profile work]\nregion = eu-north-1\n"
                        "[profile cfgonly]\naws_access_key_id = CFG\naws_secret_access_key = c\n");
    assert_ok(sm_job_s3_resolve("s3://b/x", NULL, NULL, false, &f->s3, &f->err), &f->err);
    assert_string_equal(f->s3.opts.access_key_id, "DEF");
    assert_string_equal(f->s3.opts.region, "us-west-2");
    assert_null(f->s3.opts.session_token);
    assert_null(f->s3.opts.endpoint);
    sm_job_s3_destroy(&f->s3);
    setenv("AWS_PROFILE", "work", 1);
    assert_ok(sm_job_s3_resolve("s3://b/x", NULL, NULL, false, &f->s3, &f->err), &f->err);
    assert_string_equal(f->s3.opts.access_key_id, "WORK");
    assert_string_equal(f->s3.opts.secret_access_key, "w/+=s");
    assert_string_equal(f->s3.opts.session_token, "T");
    assert_string_equal(f->s3.opts.region, "eu-north-1");
    assert_contains(f->s3.opts.credentials_from, "profile 'work' in ");
    sm_job_s3_destroy(&f->s3);
    setenv("AWS_PROFILE", "cfgonly", 1);
    assert_ok(sm_job_s3_resolve("s3://b/x", NULL, NULL, false, &f->s3, &f->err), &f->err);
    assert_string_equal(f->s3.opts.access_key_id, "CFG");
    assert_string_equal(f->s3.opts.region, "us-east-1");
    sm_job_s3_destroy(&f->s3);
    setenv("AWS_PROFILE", "nowhere", 1);
    assert_int_equal(sm_job_s3_resolve("s3://b/x", NULL, NULL, false, &f->s3, &f->err), SM_E_USAGE);
    assert_contains(f->err.what, "'nowhere'");
}

static void test_no_credentials_is_anonymous(void **state)
{
    struct fx *f = *state;
    assert_ok(sm_job_s3_resolve("s3://b/x", NULL, NULL, false, &f->s3, &f->err), &f->err);
    assert_true(f->s3.active);
    assert_null(f->s3.opts.access_key_id);
    assert_string_equal(f->s3.opts.region, "us-east-1");
}

static void test_ini_get(void **state)
{
    (void)state;
    static const char t[] = "[a]\nk = 1\n[b]\nk=2\nk = 3\nlong = 0123456789\n[c";
    char v[8];
    bool have = false;
    assert_true(sm_job_aws_ini_get(t, sizeof(t) - 1, "a", "k", v, sizeof(v), &have));
    assert_string_equal(v, "1");
    assert_true(have);
    assert_true(sm_job_aws_ini_get(t, sizeof(t) - 1, "b", "k", v, sizeof(v), &have));
    assert_string_equal(v, "3"); /* the last one wins */
    assert_false(sm_job_aws_ini_get(t, sizeof(t) - 1, "b", "long", v, sizeof(v), &have));
    assert_false(sm_job_aws_ini_get(t, sizeof(t) - 1, "d", "k", v, sizeof(v), &have));
    assert_false(have);
    assert_false(sm_job_aws_ini_get(t, sizeof(t) - 1, "c", "k", v, sizeof(v), &have));
    assert_true(have); /* "[c" without ']' still opens section c */
    /* n bounds the text: a key past it is not seen */
    assert_false(sm_job_aws_ini_get(t, 6, "a", "k", v, sizeof(v), &have));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_not_s3_is_inactive),
        T(test_environment_wins),
        T(test_key_id_without_secret_is_usage_error),
        T(test_profile_from_files),
        T(test_no_credentials_is_anonymous),
        T(test_ini_get),
    };
    return cmocka_run_group_tests_name("job_s3", tests, NULL, NULL);
}
