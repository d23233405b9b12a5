/* Unit tests for engine/codec/codec_registry.c, and the codec conformance suite over every row of
 * tests/suites/codec_suite.c: lookups by v3 name and numcodecs id, and a spec round trip, a data
 * round trip and corrupt input for every registered codec (STYLE B11). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sm_test.h"
#include "codec_test.h"
#include "../../suites/codec_suite.c"

static void test_registry_finds_every_v3_name(void **state)
{
    (void)state;
    const char *names[] = {"bytes", "transpose", "gzip",   "zlib",
                           "zstd",  "blosc",     "crc32c", "sharding_indexed"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const struct sm_codec_ops *o = sm_codec_find(names[i]);
        assert_non_null(o);
        assert_string_equal(o->name, names[i]);
        assert_non_null(o->parse);
        assert_non_null(o->prepare);
        assert_non_null(o->decode);
        assert_non_null(o->encode);
        assert_non_null(o->free_conf);
        assert_non_null(o->free_prep);
    }
}

static void test_registry_finds_numcodecs_ids(void **state)
{
    (void)state;
    assert_ptr_equal(sm_codec_find_v2("gzip"), &sm_codec_gzip_ops);
    assert_ptr_equal(sm_codec_find_v2("zlib"), &sm_codec_zlib_ops);
    assert_ptr_equal(sm_codec_find_v2("zstd"), &sm_codec_zstd_ops);
    assert_ptr_equal(sm_codec_find_v2("blosc"), &sm_codec_blosc_ops);
    assert_null(sm_codec_find_v2("bytes")); /* v3-only codecs have no numcodecs id */
    assert_ptr_equal(sm_codec_find_v2("lz4"), &sm_codec_lz4_ops); /* numcodecs.lz4 in v3 */
    assert_ptr_equal(sm_codec_find_writer("lz4"), &sm_codec_lz4_ops);
    assert_null(sm_codec_find_writer("bytes")); /* read only: no writer slots */
    assert_null(sm_codec_find_v2("lz5"));
}

static void test_registry_unknown_names_are_null(void **state)
{
    (void)state;
    assert_null(sm_codec_find("foo"));
    assert_null(sm_codec_find(""));
    assert_null(sm_codec_find("GZIP")); /* names are case-sensitive */
}

static void test_registry_kinds_match_the_spec(void **state)
{
    (void)state;
    assert_int_equal(sm_codec_find("bytes")->kind, SM_CODEC_A2B);
    assert_int_equal(sm_codec_find("sharding_indexed")->kind, SM_CODEC_A2B);
    assert_int_equal(sm_codec_find("transpose")->kind, SM_CODEC_A2A);
    assert_int_equal(sm_codec_find("crc32c")->kind, SM_CODEC_B2B);
    assert_int_equal(sm_codec_find("zstd")->kind, SM_CODEC_B2B);
}

static void test_every_registered_codec_has_a_suite_case(void **state)
{
    (void)state;
    for (size_t i = 0; sm_codec_registry[i] != NULL; i++) {
        bool found = false;
        for (size_t k = 0; k < codec_suite_ncases; k++) {
            found = found || strcmp(codec_suite_cases[k].codec, sm_codec_registry[i]->name) == 0;
        }
        if (!found) {
            fail_msg("codec '%s' has no row in tests/suites/codec_suite.c",
                     sm_codec_registry[i]->name);
        }
    }
}

static void test_suite_spec_roundtrip(void **state)
{
    (void)state;
    for (size_t k = 0; k < codec_suite_ncases; k++) {
        codec_suite_spec_roundtrip(&codec_suite_cases[k]);
    }
}

static void test_suite_data_roundtrip(void **state)
{
    (void)state;
    for (size_t k = 0; k < codec_suite_ncases; k++) {
        codec_suite_data_roundtrip(&codec_suite_cases[k]);
    }
}

static void test_suite_corrupt_input(void **state)
{
    (void)state;
    for (size_t k = 0; k < codec_suite_ncases; k++) {
        codec_suite_corrupt_input(&codec_suite_cases[k]);
    }
}

static void test_suite_leaves_no_allocation_behind(void **state)
{
    (void)state;
    const uint64_t before = sm_alloc_current();
    for (size_t k = 0; k < codec_suite_ncases; k++) {
        codec_suite_data_roundtrip(&codec_suite_cases[k]);
    }
    assert_int_equal(sm_alloc_current(), before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_finds_every_v3_name),
        cmocka_unit_test(test_registry_finds_numcodecs_ids),
        cmocka_unit_test(test_registry_unknown_names_are_null),
        cmocka_unit_test(test_registry_kinds_match_the_spec),
        cmocka_unit_test(test_every_registered_codec_has_a_suite_case),
        cmocka_unit_test(test_suite_spec_roundtrip),
        cmocka_unit_test(test_suite_data_roundtrip),
        cmocka_unit_test(test_suite_corrupt_input),
        cmocka_unit_test(test_suite_leaves_no_allocation_behind),
    };
    return cmocka_run_group_tests_name("codec_registry", tests, NULL, NULL);
}
