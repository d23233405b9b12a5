/* Unit tests of engine/write/write_sha256.c: FIPS 180-4 test vectors through nettle. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/write.h"

static void test_sha256_known_vectors(void **state)
{
    (void)state;
    char hex[65];
    sm_sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sm_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sm_sha256_hex(two, strlen(two), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    uint8_t raw[32];
    sm_sha256("abc", 3, raw);
    assert_int_equal(raw[0], 0xba);
    assert_int_equal(raw[31], 0xad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_known_vectors),
    };
    return cmocka_run_group_tests_name("write_sha256", tests, NULL, NULL);
}
