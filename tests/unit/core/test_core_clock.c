/* Unit tests for engine/core/core_clock.c: the monotonic stage-timing clock never goes backwards
 * and advances by at least a requested sleep. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "shardmill/clock.h"
#include "sm_test.h"

static void test_clock_is_monotonic(void **state)
{
    (void)state;
    uint64_t prev = sm_clock_ns();
    for (int i = 0; i < 100000; i++) {
        uint64_t now = sm_clock_ns();
        assert_true(now >= prev);
        prev = now;
    }
}

static void test_clock_advances_across_a_sleep(void **state)
{
    (void)state;
    const uint64_t t0 = sm_clock_ns();
    struct timespec ts = {0, 5 * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
    const uint64_t dt = sm_clock_ns() - t0;
    assert_true(dt >= 5u * 1000 * 1000);
    assert_true(dt < 5ull * 1000 * 1000 * 1000); /* nanoseconds, not a coarser unit */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clock_is_monotonic),
        cmocka_unit_test(test_clock_advances_across_a_sleep),
    };
    return cmocka_run_group_tests_name("core_clock", tests, NULL, NULL);
}
