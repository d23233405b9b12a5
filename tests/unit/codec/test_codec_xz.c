/* Unit tests for engine/codec/codec_xz.c (liblzma, dlopen()ed on the first parse): the shared
 * stream-codec tests (stream_codec_test.h) with preset 0, and bad configurations. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sm_test.h"
/* after sm_test.h */
#include "codec_test.h"

#define STREAM_CODEC "xz"
#define STREAM_WORD "xz"
#define STREAM_CFG "{\"preset\":0}"
#include "stream_codec_test.h"

static void test_xz_rejects_bad_configurations(void **state)
{
    (void)state;
    struct sm_repr r;
    ct_repr(&r, SM_DT_INT32, 3, sc_shape);
    struct sm_codec_chain *c = NULL;
    struct sm_err err;
    assert_status(ct_chain_try("[" SC_LE ",{\"name\":\"xz\",\"configuration\":{\"preset\":10}}]",
                               &r, &c, &err),
                  SM_E_DATA, &err);
    assert_contains(err.what, "'preset' is 10");
    assert_status(
        ct_chain_try("[" SC_LE ",{\"name\":\"xz\",\"configuration\":{\"level\":1}}]", &r, &c, &err),
        SM_E_DATA, &err);
    assert_contains(err.what, "unknown configuration key 'level'");
    assert_null(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_round_trips_and_rejects_damage),
        cmocka_unit_test(test_stream_unknown_size_stops_at_the_decode_bound),
        cmocka_unit_test(test_xz_rejects_bad_configurations),
    };
    return cmocka_run_group_tests_name("codec_xz", tests, NULL, NULL);
}
