/* Unit tests of engine/write/write_syncfs.c: syncfs on a directory succeeds, a bad descriptor is
 * SM_E_IO with errno as the cause. */
#include "shardmill/sm_config.h"

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#include <cmocka.h>

#include "sm_test.h"
#include "write_int.h"

static void test_syncfs_directory_and_bad_fd(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    char dir[1024];
    assert_int_equal(sm_test_tmpdir("write-syncfs", dir, sizeof(dir)), 0);
    const int fd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    assert_ok(sm_wfs_syncfs(fd, &err), &err);
    close(fd);
    assert_status(sm_wfs_syncfs(-1, &err), SM_E_IO, &err);
    assert_string_equal(err.cause_lib, "errno");
    assert_contains(err.what, "syncfs");
    assert_int_equal(sm_test_rm_rf(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_syncfs_directory_and_bad_fd),
    };
    return cmocka_run_group_tests_name("write_syncfs", tests, NULL, NULL);
}
