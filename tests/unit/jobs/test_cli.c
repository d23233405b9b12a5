/* Unit tests of jobs/cli.c's sm_cli_parse, the option parser of every subcommand (issue 19): "--"
 * ends the options, so a positional such as an output named "-x" can be given (`shardmill verify
 * -- -x`), and a flag given a value (--quiet=yes) is a usage error, not silently taken. */
#include <shardmill/sm_config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "jobs.h"

struct parsed {
    bool quiet;
    uint64_t n;
    const char *pos[2];
    unsigned npos;
};

/* A command like verify: one or two positionals, a flag -q/--quiet and a value option --n. */
static int parse(int argc, char **argv, struct parsed *p)
{
    *p = (struct parsed){0};
    const struct sm_opt opts[] = {
        {"quiet", 'q', SM_OPT_FLAG, NULL, "quiet", &p->quiet, SM_PATHC_NONE},
        {"n", 0, SM_OPT_U64, "N", "a number", &p->n, SM_PATHC_NONE},
        {NULL, 0, SM_OPT_FLAG, NULL, NULL, NULL, SM_PATHC_NONE},
    };
    const struct sm_cmd_spec spec = {"verify", "OUTPUT", "test", opts, 1, 2};
    return sm_cli_parse(&spec, argc, argv, p->pos, &p->npos);
}

static void test_double_dash_makes_a_dash_name_positional(void **state)
{
    (void)state;
    struct parsed p;
    char *argv[] = {"verify", "--", "-x"};
    assert_int_equal(parse(3, argv, &p), -1);
    assert_int_equal(p.npos, 1);
    assert_string_equal(p.pos[0], "-x");
    assert_false(p.quiet);
}

static void test_options_before_double_dash_still_parse(void **state)
{
    (void)state;
    struct parsed p;
    char *argv[] = {"verify", "-q", "--n", "7", "--", "--quiet", "-h"};
    assert_int_equal(parse(7, argv, &p), -1);
    assert_true(p.quiet);
    assert_int_equal(p.n, 7);
    assert_int_equal(p.npos, 2);
    assert_string_equal(p.pos[0], "--quiet"); /* after "--": names, not options */
    assert_string_equal(p.pos[1], "-h");      /* not --help */
}

static void test_a_second_double_dash_is_positional(void **state)
{
    (void)state;
    struct parsed p;
    char *argv[] = {"verify", "--", "--"};
    assert_int_equal(parse(3, argv, &p), -1);
    assert_int_equal(p.npos, 1);
    assert_string_equal(p.pos[0], "--");
}

static void test_dash_name_without_double_dash_is_unknown_option(void **state)
{
    (void)state;
    struct parsed p;
    char *argv[] = {"verify", "-x"};
    assert_int_equal(parse(2, argv, &p), 2);
}

static void test_double_dash_alone_leaves_the_positional_missing(void **state)
{
    (void)state;
    struct parsed p;
    char *argv[] = {"verify", "--"};
    assert_int_equal(parse(2, argv, &p), 2);
}

static void test_too_many_positionals_after_double_dash(void **state)
{
    (void)state;
    struct parsed p;
    char *argv[] = {"verify", "--", "a", "b", "c"};
    assert_int_equal(parse(5, argv, &p), 2);
}

static void test_flag_with_a_value_is_a_usage_error(void **state)
{
    (void)state;
    struct parsed p;
    char *argv[] = {"verify", "--quiet=no", "out"};
    assert_int_equal(parse(3, argv, &p), 2);
    char *ok[] = {"verify", "--n=5", "out"};
    assert_int_equal(parse(3, ok, &p), -1);
    assert_int_equal(p.n, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_double_dash_makes_a_dash_name_positional),
        cmocka_unit_test(test_options_before_double_dash_still_parse),
        cmocka_unit_test(test_a_second_double_dash_is_positional),
        cmocka_unit_test(test_dash_name_without_double_dash_is_unknown_option),
        cmocka_unit_test(test_double_dash_alone_leaves_the_positional_missing),
        cmocka_unit_test(test_too_many_positionals_after_double_dash),
        cmocka_unit_test(test_flag_with_a_value_is_a_usage_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
