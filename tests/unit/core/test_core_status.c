/* Unit tests for engine/core/core_status.c: the error context of STYLE B5. The first error wins,
 * `where` is filled once by the innermost layer that knows the object, SM_ERR and SM_FAIL record
 * file and line (SM_ERR as an expression), SM_TRY forwards a failure without running the rest of
 * the caller. */
#include "shardmill/sm_config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/status.h"
#include "sm_test.h"

static int fail_line; /* the line of the SM_FAIL in fail_data() */

static sm_status fail_data(struct sm_err *err, int n)
{
    fail_line = __LINE__ + 1; /* checksrc: allow err-at -- the macros' own test */
    SM_FAIL(err, SM_E_DATA, "crc32c mismatch: stored %08x, computed %08x", n, n + 1);
}

static int err_line;  /* the line of the SM_ERR in err_then_go_on() */
static int after_err; /* set when the code after that SM_ERR runs */

static sm_status err_then_go_on(struct sm_err *err)
{
    after_err = 0;
    err_line = __LINE__ + 1; /* checksrc: allow err-at -- the macros' own test */
    sm_status st = SM_ERR(err, SM_E_LIMIT, "%d shards over the limit", 3);
    after_err = 1; /* an expression: the caller cleans up, then returns st */
    return st;
}

static sm_status succeed(struct sm_err *err)
{
    (void)err;
    return SM_OK;
}

static int after_try; /* set when the code after an SM_TRY runs */

static sm_status try_then_mark(sm_status (*inner)(struct sm_err *, int), struct sm_err *err)
{
    after_try = 0;
    SM_TRY(inner(err, 1));
    after_try = 1;
    return SM_OK;
}

static sm_status ok_inner(struct sm_err *err, int n)
{
    (void)n;
    return succeed(err);
}

static sm_status vset_wrapper(struct sm_err *err, sm_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sm_status r = sm_err_vset(err, st, "wrapper.c", 7, fmt, ap);
    va_end(ap);
    return r;
}

static void test_err_clear_resets_everything(void **state)
{
    (void)state;
    struct sm_err err;
    memset(&err, 0x5a, sizeof(err));
    sm_err_clear(&err);
    assert_int_equal(err.status, SM_OK);
    assert_int_equal(err.cause, 0);
    assert_null(err.cause_lib);
    assert_string_equal(err.where, "");
    assert_string_equal(err.what, "");
    assert_null(err.file);
    assert_int_equal(err.line, 0);
}

static void test_fail_records_what_file_and_line(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(fail_data(&err, 0x10), SM_E_DATA);
    assert_int_equal(err.status, SM_E_DATA);
    assert_string_equal(err.what, "crc32c mismatch: stored 00000010, computed 00000011");
    assert_string_equal(err.file, __FILE__); /* checksrc: allow err-at -- the macros' own test */
    assert_int_equal(err.line, fail_line);
    assert_string_equal(err.where, "");
}

static void test_err_records_file_and_line_and_returns_nothing(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(err_then_go_on(&err), SM_E_LIMIT);
    assert_int_equal(after_err, 1);
    assert_string_equal(err.what, "3 shards over the limit");
    assert_string_equal(err.file, __FILE__); /* checksrc: allow err-at -- the macros' own test */
    assert_int_equal(err.line, err_line);
    assert_string_equal(err.where, "");
    /* the first error wins: a later SM_ERR returns the recorded status and changes nothing */
    assert_int_equal(SM_ERR(&err, SM_E_IO, "later"), SM_E_LIMIT);
    assert_string_equal(err.what, "3 shards over the limit");
    assert_int_equal(err.line, err_line);
}

static void test_first_error_wins(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_err_set(&err, SM_E_IO, "a.c", 1, "first %d", 1), SM_E_IO);
    /* A later failure returns the recorded status and changes nothing. */
    assert_int_equal(sm_err_set(&err, SM_E_LIMIT, "b.c", 2, "second"), SM_E_IO);
    assert_int_equal(fail_data(&err, 3), SM_E_IO);
    assert_int_equal(err.status, SM_E_IO);
    assert_string_equal(err.what, "first 1");
    assert_string_equal(err.file, "a.c");
    assert_int_equal(err.line, 1);
}

static void test_err_vset_formats_like_set(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(vset_wrapper(&err, SM_E_USAGE, "bad %s=%u", "tile", 7u), SM_E_USAGE);
    assert_string_equal(err.what, "bad tile=7");
    assert_string_equal(err.file, "wrapper.c");
    assert_int_equal(err.line, 7);
    assert_int_equal(vset_wrapper(&err, SM_E_IO, "later"), SM_E_USAGE);
    assert_string_equal(err.what, "bad tile=7");
}

static void test_what_is_truncated_not_overflowed(void **state)
{
    (void)state;
    struct sm_err err;
    char big[1000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    sm_err_clear(&err);
    SM_ERR(&err, SM_E_DATA, "%s", big);
    assert_int_equal(strlen(err.what), sizeof(err.what) - 1);
    sm_err_where(&err, "%s", big);
    assert_int_equal(strlen(err.where), sizeof(err.where) - 1);
}

static int fail_at_line; /* the line of the SM_FAIL_AT in fail_key() */

static sm_status fail_key(struct sm_err *err, const char *key)
{
    fail_at_line = __LINE__ + 1; /* checksrc: allow err-at -- the macros' own test */
    SM_FAIL_AT(err, SM_E_USAGE, key, "must be positive, got %d", -3);
}

static void test_fail_at_records_what_where_file_and_line(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(fail_key(&err, "tile.shape"), SM_E_USAGE);
    assert_string_equal(err.what, "must be positive, got -3");
    assert_string_equal(err.where, "tile.shape");
    assert_string_equal(err.file, __FILE__); /* checksrc: allow err-at -- the macros' own test */
    assert_int_equal(err.line, fail_at_line);
    assert_null(err.cause_lib);
}

static void test_fail_at_keeps_the_first_error_and_its_where(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    sm_err_where(&err, "outer");
    assert_int_equal(SM_ERR_AT(&err, SM_E_DATA, "inner", "first"), SM_E_DATA);
    assert_string_equal(err.where, "outer"); /* an earlier where stays */
    assert_int_equal(fail_key(&err, "later"), SM_E_DATA);
    assert_string_equal(err.what, "first");
    assert_string_equal(err.where, "outer");
    sm_err_clear(&err);
    assert_int_equal(SM_ERR_AT(&err, SM_E_LIMIT, NULL, "no object"), SM_E_LIMIT);
    assert_string_equal(err.where, "");
}

static void test_errno_appends_strerror_and_records_the_cause(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    errno = 0; /* the saved value counts, not errno */
    assert_int_equal(SM_ERRNO(&err, ENOENT, NULL, "cannot stat '%s'", "a/b"), SM_E_IO);
    char want[256];
    snprintf(want, sizeof(want), "cannot stat 'a/b': %s", strerror(ENOENT));
    assert_string_equal(err.what, want);
    assert_string_equal(err.cause_lib, "errno");
    assert_int_equal(err.cause, ENOENT);
    assert_string_equal(err.where, "");
    assert_string_equal(err.file, __FILE__); /* checksrc: allow err-at -- the macros' own test */

    sm_err_clear(&err);
    assert_int_equal(SM_ERRNO(&err, EACCES, "out.zarr", "cannot open the output"), SM_E_IO);
    snprintf(want, sizeof(want), "cannot open the output: %s", strerror(EACCES));
    assert_string_equal(err.what, want);
    assert_string_equal(err.where, "out.zarr");
    /* a later failure changes nothing, its cause included */
    assert_int_equal(SM_ERRNO(&err, EIO, "other", "later"), SM_E_IO);
    assert_string_equal(err.what, want);
    assert_int_equal(err.cause, EACCES);
    assert_string_equal(err.where, "out.zarr");
}

static void test_errno_message_is_cut_like_what(void **state)
{
    (void)state;
    struct sm_err err;
    char big[1000];
    memset(big, 'p', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    sm_err_clear(&err);
    SM_ERRNO(&err, ENOSPC, NULL, "cannot write '%s'", big);
    char want[sizeof(err.what)];
    snprintf(want, sizeof(want), "cannot write '%s': %s", big, strerror(ENOSPC));
    assert_string_equal(err.what, want);
}

static void test_where_is_filled_once(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    fail_data(&err, 0);
    sm_err_where(&err, "%s/%s", "store", "c/0/1");
    sm_err_where(&err, "outer layer %d", 2);
    assert_string_equal(err.where, "store/c/0/1");
}

static void test_where_before_failure_is_kept(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    sm_err_where(&err, "config.yaml:3:7");
    fail_data(&err, 0);
    assert_int_equal(err.status, SM_E_DATA);
    assert_string_equal(err.where, "config.yaml:3:7");
}

static void test_cause_needs_a_failure_and_first_cause_wins(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    sm_err_cause(&err, "errno", 2);
    assert_null(err.cause_lib);
    assert_int_equal(err.cause, 0);
    SM_ERR(&err, SM_E_IO, "open failed");
    sm_err_cause(&err, "errno", 13);
    sm_err_cause(&err, "zstd", 99);
    assert_string_equal(err.cause_lib, "errno");
    assert_int_equal(err.cause, 13);
}

static void test_try_forwards_failure_and_skips_rest(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(try_then_mark(fail_data, &err), SM_E_DATA);
    assert_int_equal(after_try, 0);
    assert_int_equal(err.line, fail_line);
}

static void test_try_passes_ok_through(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(try_then_mark(ok_inner, &err), SM_OK);
    assert_int_equal(after_try, 1);
    assert_int_equal(err.status, SM_OK);
}

static void test_status_names_are_short_and_lowercase(void **state)
{
    (void)state;
    assert_string_equal(sm_status_name(SM_OK), "ok");
    assert_string_equal(sm_status_name(SM_E_USAGE), "usage");
    assert_string_equal(sm_status_name(SM_E_DATA), "data");
    assert_string_equal(sm_status_name(SM_E_IO), "io");
    assert_string_equal(sm_status_name(SM_E_LIMIT), "limit");
    assert_string_equal(sm_status_name(SM_E_NOMEM), "nomem");
    assert_string_equal(sm_status_name(SM_E_INTERNAL), "internal");
    assert_string_equal(sm_status_name(SM_E_STOPPED), "stopped");
    assert_string_equal(sm_status_name((sm_status)42), "unknown");
}

static void test_stop_check_records_the_signal_only_once_set(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_stop_check(NULL, &err), SM_OK); /* no flag: never stops */
    atomic_int flag = 0;
    assert_int_equal(sm_stop_check(&flag, &err), SM_OK);
    assert_int_equal(err.status, SM_OK);
    atomic_store(&flag, 15);
    assert_int_equal(sm_stop_check(&flag, &err), SM_E_STOPPED);
    assert_int_equal(err.status, SM_E_STOPPED);
    assert_string_equal(err.what, "stopped by signal 15");
    assert_string_equal(err.cause_lib, "signal");
    assert_int_equal(err.cause, 15);
    assert_string_equal(err.where, "");
    /* the first error wins: a stop does not replace an earlier failure */
    sm_err_clear(&err);
    SM_ERR(&err, SM_E_DATA, "bad chunk");
    assert_int_equal(sm_stop_check(&flag, &err), SM_E_DATA);
    assert_string_equal(err.what, "bad chunk");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_err_clear_resets_everything),
        cmocka_unit_test(test_stop_check_records_the_signal_only_once_set),
        cmocka_unit_test(test_fail_records_what_file_and_line),
        cmocka_unit_test(test_err_records_file_and_line_and_returns_nothing),
        cmocka_unit_test(test_first_error_wins),
        cmocka_unit_test(test_err_vset_formats_like_set),
        cmocka_unit_test(test_what_is_truncated_not_overflowed),
        cmocka_unit_test(test_fail_at_records_what_where_file_and_line),
        cmocka_unit_test(test_fail_at_keeps_the_first_error_and_its_where),
        cmocka_unit_test(test_errno_appends_strerror_and_records_the_cause),
        cmocka_unit_test(test_errno_message_is_cut_like_what),
        cmocka_unit_test(test_where_is_filled_once),
        cmocka_unit_test(test_where_before_failure_is_kept),
        cmocka_unit_test(test_cause_needs_a_failure_and_first_cause_wins),
        cmocka_unit_test(test_try_forwards_failure_and_skips_rest),
        cmocka_unit_test(test_try_passes_ok_through),
        cmocka_unit_test(test_status_names_are_short_and_lowercase),
    };
    return cmocka_run_group_tests_name("core_status", tests, NULL, NULL);
}
