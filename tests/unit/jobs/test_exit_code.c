/* Unit tests of jobs/exit_code.c (SPEC §4, §1): each status category maps to its exit status, a
 * stop (SM_E_STOPPED) exits 128 + the signal it carries, and the error line's status is the one
 * returned. */
#include <shardmill/sm_config.h>

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "jobs.h"

static void test_exit_codes_of_the_categories(void **state)
{
    (void)state;
    assert_int_equal(sm_exit_code(SM_OK), 0);
    assert_int_equal(sm_exit_code(SM_E_USAGE), 2);
    assert_int_equal(sm_exit_code(SM_E_DATA), 3);
    assert_int_equal(sm_exit_code(SM_E_IO), 4);
    assert_int_equal(sm_exit_code(SM_E_LIMIT), 5);
    assert_int_equal(sm_exit_code(SM_E_NOMEM), 1);
    assert_int_equal(sm_exit_code(SM_E_INTERNAL), 1);
    assert_int_equal(sm_exit_code(SM_E_STOPPED), 143); /* no signal known: SIGTERM's */
}

static void test_a_stop_exits_128_plus_its_signal(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    atomic_int flag = SIGINT;
    assert_int_equal(sm_stop_check(&flag, &err), SM_E_STOPPED);
    assert_int_equal(sm_exit_code_of(&err), 130);
    sm_err_clear(&err);
    atomic_store(&flag, SIGTERM);
    assert_int_equal(sm_stop_check(&flag, &err), SM_E_STOPPED);
    assert_int_equal(sm_exit_code_of(&err), 143);
    err.cause = 0; /* a stop whose signal got lost: still a signal's status, never 0 or 1 */
    assert_int_equal(sm_exit_code_of(&err), 143);
    sm_err_clear(&err);
    SM_ERR(&err, SM_E_DATA, "bad");
    err.cause = 15; /* a cause of another failure is not a signal */
    assert_int_equal(sm_exit_code_of(&err), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_codes_of_the_categories),
        cmocka_unit_test(test_a_stop_exits_128_plus_its_signal),
    };
    return cmocka_run_group_tests_name("exit_code", tests, NULL, NULL);
}
