/* Unit tests for engine/core/core_unit.c (shardmill/unit.h): the 26 space units OME-NGFF 0.5
 * lists are names, nothing else is; the spellings files and users write map to the right name
 * (SI symbols case-sensitive: Pm is not pm); the refusal message hints the name or lists them
 * all; factors between units are exact powers of ten between metric ones. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/unit.h"

static const char *const ome[] = {
    "angstrom",  "attometer",  "centimeter", "decimeter",  "exameter",  "femtometer", "foot",
    "gigameter", "hectometer", "inch",       "kilometer",  "megameter", "meter",      "micrometer",
    "mile",      "millimeter", "nanometer",  "parsec",     "petameter", "picometer",  "terameter",
    "yard",      "yoctometer", "yottameter", "zeptometer", "zettameter"};

static void test_unit_names_are_omes_list(void **state)
{
    (void)state;
    char names[SM_UNIT_NAMES_MAX];
    sm_unit_space_names(names, sizeof(names));
    size_t listed = 0;
    for (size_t i = 0; i < sizeof(ome) / sizeof(ome[0]); i++) {
        assert_string_equal(sm_unit_space_name(ome[i]), ome[i]);
        assert_string_equal(sm_unit_space_lookup(ome[i]), ome[i]);
        assert_null(sm_unit_space_alias(ome[i])); /* a name is no alias */
        assert_true(sm_unit_space_meters(ome[i]) > 0);
        assert_non_null(strstr(names, ome[i]));
        listed += strlen(ome[i]) + (i > 0 ? 2 : 0);
    }
    assert_int_equal(strlen(names), listed); /* those 26 and no other */
    const char *not_names[] = {"", "um", "micron", "Meter", "meters", "second", "pixel", "m "};
    for (size_t i = 0; i < sizeof(not_names) / sizeof(not_names[0]); i++) {
        assert_null(sm_unit_space_name(not_names[i]));
    }
    assert_null(sm_unit_space_name(NULL));
}

static void test_unit_aliases(void **state)
{
    (void)state;
    static const char *const pairs[][2] = {
        {"um", "micrometer"},
        {"\xc2\xb5m", "micrometer"},
        {"\xce\xbcm", "micrometer"},
        {"micron", "micrometer"},
        {"microns", "micrometer"},
        {"Micrometer", "micrometer"},
        {"micrometers", "micrometer"},
        {"micrometre", "micrometer"},
        {"MILLIMETRES", "millimeter"},
        {"mm", "millimeter"},
        {"nm", "nanometer"},
        {"cm", "centimeter"},
        {"m", "meter"},
        {"km", "kilometer"},
        {"pm", "picometer"},
        {"Pm", "petameter"},
        {"A", "angstrom"},
        {"\xc3\x85", "angstrom"},
        {"\xe2\x84\xab", "angstrom"},
        {"in", "inch"},
        {"inches", "inch"},
        {"ft", "foot"},
        {"feet", "foot"},
        {"yd", "yard"},
        {"mi", "mile"},
        {"pc", "parsec"},
        {"Meters", "meter"},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        assert_string_equal(sm_unit_space_alias(pairs[i][0]), pairs[i][1]);
        assert_string_equal(sm_unit_space_lookup(pairs[i][0]), pairs[i][1]);
        assert_null(sm_unit_space_name(pairs[i][0]));
    }
    const char *none[] = {"furlongs", "pixel",        "s",      "",    "a",
                          "PM",       "micrometerss", "second", "mmm", "\xc2\xb5"};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        assert_null(sm_unit_space_lookup(none[i]));
    }
    char longer[64];
    memset(longer, 'm', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    assert_null(sm_unit_space_lookup(longer));
}

static void test_unit_refusal_text(void **state)
{
    (void)state;
    char b[SM_UNIT_REFUSAL_MAX];
    assert_string_equal(sm_unit_space_refusal("um", b, sizeof(b)),
                        "'um' is not a UDUNITS-2 space unit: did you mean micrometer?");
    assert_string_equal(sm_unit_space_refusal("nm", b, sizeof(b)),
                        "'nm' is not a UDUNITS-2 space unit: did you mean nanometer?");
    sm_unit_space_refusal("furlongs", b, sizeof(b));
    assert_non_null(strstr(b, "'furlongs' is not a UDUNITS-2 space unit (OME-NGFF 0.5): one of "
                              "angstrom, attometer,"));
    assert_non_null(strstr(b, "zeptometer, zettameter"));
    char small[16];
    sm_unit_space_refusal("furlongs", small, sizeof(small));
    assert_int_equal(strlen(small), sizeof(small) - 1);
}

static void test_unit_factors(void **state)
{
    (void)state;
    assert_true(sm_unit_space_factor("micrometer", "nanometer") == 1000.0);
    assert_true(2.0 * sm_unit_space_factor("micrometer", "nanometer") == 2000.0);
    assert_true(500.0 * sm_unit_space_factor("nanometer", "micrometer") == 0.5);
    assert_true(sm_unit_space_factor("millimeter", "millimeter") == 1.0);
    assert_true(sm_unit_space_factor("meter", "yoctometer") == 1e24);
    assert_true(sm_unit_space_factor("inch", "centimeter") > 2.5399999 &&
                sm_unit_space_factor("inch", "centimeter") < 2.5400001);
    assert_true(sm_unit_space_factor("foot", "inch") > 11.9999999 &&
                sm_unit_space_factor("foot", "inch") < 12.0000001);
    assert_true(sm_unit_space_factor("um", "nanometer") == 0.0); /* names only */
    assert_true(sm_unit_space_meters("furlong") == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unit_names_are_omes_list),
        cmocka_unit_test(test_unit_aliases),
        cmocka_unit_test(test_unit_refusal_text),
        cmocka_unit_test(test_unit_factors),
    };
    return cmocka_run_group_tests_name("core_unit", tests, NULL, NULL);
}
