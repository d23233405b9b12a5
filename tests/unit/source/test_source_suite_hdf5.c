/* Runs the source conformance suite (tests/suites/source_suite.c) on every source of the
 * registry; named *_hdf5 so that it links HDF5, which writes the HDF5 case's file. */
#include "../../suites/source_suite.c"

#include <jansson.h>

static void test_suite_covers_every_source(void **state)
{
    (void)state;
    source_suite_covers_the_registry();
}

static void test_suite_runs_every_source(void **state)
{
    (void)state;
    for (size_t i = 0; i < SOURCE_SUITE_N; i++) {
        source_suite_run(&source_suite_cases[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suite_covers_every_source),
        cmocka_unit_test(test_suite_runs_every_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
