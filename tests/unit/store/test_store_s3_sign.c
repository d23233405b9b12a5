/* Unit tests for engine/store/store_s3_sign.c: AWS Signature Version 4 against AWS's published
 * vectors, and the parse of S3 XML error bodies.
 * Vectors: "get-vanilla" of the AWS SigV4 test suite
 * (https://docs.aws.amazon.com/general/latest/gr/signature-v4-test-suite.html) and the "GET
 * Object" example of https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html
 * (both published with their canonical request, string to sign and signature). Each request's
 * signature is also recomputed by botocore at test time (tests/s3: the verifying proxy). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sm_test.h"
#include "store_s3_int.h"

static void test_get_vanilla(void **state)
{
    (void)state;
    const struct sm_s3_hdr h[] = {{"host", "example.amazonaws.com"},
                                  {"x-amz-date", "20150830T123600Z"}};
    char creq[1024], sts[512], sig[65], auth[512];
    assert_true(
        sm_s3_canonical_request(creq, sizeof(creq), "GET", "/", "", h, 2, SM_S3_EMPTY_SHA256));
    assert_string_equal(creq, "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n"
                              "\nhost;x-amz-date\n"
                              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    assert_true(
        sm_s3_string_to_sign(sts, sizeof(sts), "20150830T123600Z", "us-east-1", "service", creq));
    assert_string_equal(sts, "AWS4-HMAC-SHA256\n20150830T123600Z\n"
                             "20150830/us-east-1/service/aws4_request\n"
                             "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
    sm_s3_signature(sig, "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830T123600Z",
                    "us-east-1", "service", sts);
    assert_string_equal(sig, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
    assert_true(sm_s3_authorization(
        auth, sizeof(auth), "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1",
        "service", "20150830T123600Z", "GET", "/", "", h, 2, SM_S3_EMPTY_SHA256));
    assert_string_equal(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"
                              "aws4_request, SignedHeaders=host;x-amz-date, "
                              "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d"
                              "763fbf31");
}

static void test_s3_get_object_example(void **state)
{
    (void)state;
    const struct sm_s3_hdr h[] = {{"host", "examplebucket.s3.amazonaws.com"},
                                  {"range", "bytes=0-9"},
                                  {"x-amz-content-sha256", SM_S3_EMPTY_SHA256},
                                  {"x-amz-date", "20130524T000000Z"}};
    char creq[1024], sts[512], sig[65];
    assert_true(sm_s3_canonical_request(creq, sizeof(creq), "GET", "/test.txt", "", h, 4,
                                        SM_S3_EMPTY_SHA256));
    assert_true(
        sm_s3_string_to_sign(sts, sizeof(sts), "20130524T000000Z", "us-east-1", "s3", creq));
    assert_string_equal(sts, "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/"
                             "aws4_request\n"
                             "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
    sm_s3_signature(sig, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "20130524T000000Z",
                    "us-east-1", "s3", sts);
    assert_string_equal(sig, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

static void test_sha256_of_empty_payload(void **state)
{
    (void)state;
    char h[65];
    sm_s3_sha256_hex("", 0, h);
    assert_string_equal(h, SM_S3_EMPTY_SHA256);
}

static void test_too_small_buffers_fail(void **state)
{
    (void)state;
    const struct sm_s3_hdr h[] = {{"host", "example.amazonaws.com"}};
    char small[40];
    assert_false(
        sm_s3_canonical_request(small, sizeof(small), "GET", "/", "", h, 1, SM_S3_EMPTY_SHA256));
    char auth[60];
    assert_false(sm_s3_authorization(auth, sizeof(auth), "AKID", "s", "us-east-1", "s3",
                                     "20150830T123600Z", "GET", "/", "", h, 1, SM_S3_EMPTY_SHA256));
}

static void test_amz_date(void **state)
{
    (void)state;
    char d[17];
    sm_s3_amz_date(1440938160, d); /* 2015-08-30 12:36:00 UTC */
    assert_string_equal(d, "20150830T123600Z");
}

static void test_error_body_code_and_message(void **state)
{
    (void)state;
    static const char body[] =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SignatureDoesNotMatch</Code>"
        "<Message>The request signature we calculated does not match &amp; so on &lt;x&gt;"
        "</Message><RequestId>1</RequestId></Error>";
    char code[32], msg[128];
    assert_true(sm_s3_parse_error(body, sizeof(body) - 1, code, sizeof(code), msg, sizeof(msg)));
    assert_string_equal(code, "SignatureDoesNotMatch");
    assert_string_equal(msg, "The request signature we calculated does not match & so on <x>");
    /* truncated to the buffers, control bytes replaced */
    static const char b2[] = "<Error><Code>NoSuch\nBucket</Code></Error>";
    char c4[5];
    assert_true(sm_s3_parse_error(b2, sizeof(b2) - 1, c4, sizeof(c4), msg, sizeof(msg)));
    assert_string_equal(c4, "NoSu");
    assert_true(sm_s3_parse_error(b2, sizeof(b2) - 1, code, sizeof(code), msg, sizeof(msg)));
    assert_string_equal(code, "NoSuch?Bucket");
    assert_string_equal(msg, "");
}

static void test_error_body_without_code(void **state)
{
    (void)state;
    char code[32] = "x", msg[32] = "y";
    static const char *bodies[] = {"", "<html>403 Forbidden</html>", "<Error><Code>Unclosed",
                                   "<Code"};
    for (size_t i = 0; i < 4; i++) {
        assert_false(
            sm_s3_parse_error(bodies[i], strlen(bodies[i]), code, sizeof(code), msg, sizeof(msg)));
        assert_string_equal(code, "");
        assert_string_equal(msg, "");
    }
    /* the body ends where n says: a Code closed only past n is not read */
    static const char cut[] = "<Code>AccessDenied</Code>";
    assert_false(sm_s3_parse_error(cut, sizeof(cut) - 3, code, sizeof(code), msg, sizeof(msg)));
}

/* s3://bucket/prefix -> the HTTP URL of the prefix, path-style or virtual-hosted */
static void test_map_url(void **state)
{
    (void)state;
    struct sm_s3_url u;
    struct sm_err err;
    struct sm_s3_opts o = {0};
    sm_err_clear(&err);
    assert_ok(sm_s3_map_url("s3://bkt/a/b.zarr/", &o, &u, &err), &err);
    assert_string_equal(u.base, "https://bkt.s3.us-east-1.amazonaws.com/a/b.zarr");
    assert_string_equal(u.display, "s3://bkt/a/b.zarr");
    assert_string_equal(u.bucket, "bkt");
    assert_string_equal(u.region, "us-east-1");
    o.region = "eu-central-1";
    o.path_style = true;
    assert_ok(sm_s3_map_url("s3://bkt", &o, &u, &err), &err);
    assert_string_equal(u.base, "https://s3.eu-central-1.amazonaws.com/bkt");
    assert_string_equal(u.display, "s3://bkt");
    o.path_style = false;
    o.endpoint = "http://127.0.0.1:9000/";
    assert_ok(sm_s3_map_url("s3://bkt/p q/caf\xc3\xa9+;#?", &o, &u, &err), &err);
    assert_string_equal(u.base, "http://127.0.0.1:9000/bkt/p%20q/caf%C3%A9%2B%3B%23%3F");
    o.endpoint = "http://localhost:9000";
    assert_ok(sm_s3_map_url("s3://bkt/x", &o, &u, &err), &err);
    assert_string_equal(u.base, "http://localhost:9000/bkt/x");
    o.endpoint = "https://minio.example.org:9000";
    assert_ok(sm_s3_map_url("s3://bkt/x", &o, &u, &err), &err);
    assert_string_equal(u.base, "https://bkt.minio.example.org:9000/x");
    static const char *bad[] = {"s3://", "s3:///x", "s3://a b/x", "http://bkt/x"};
    for (size_t i = 0; i < 4; i++) {
        sm_err_clear(&err);
        assert_int_equal(sm_s3_map_url(bad[i], &o, &u, &err), SM_E_USAGE);
        assert_string_equal(err.where, bad[i]);
    }
    static const char *bad_ep[] = {"ftp://h", "http://", "h:9000", "http://h/?x=1"};
    for (size_t i = 0; i < 4; i++) {
        sm_err_clear(&err);
        o.endpoint = bad_ep[i];
        assert_int_equal(sm_s3_map_url("s3://bkt/x", &o, &u, &err), SM_E_USAGE);
        assert_string_equal(err.where, "input.s3.endpoint");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_vanilla),
        cmocka_unit_test(test_s3_get_object_example),
        cmocka_unit_test(test_sha256_of_empty_payload),
        cmocka_unit_test(test_too_small_buffers_fail),
        cmocka_unit_test(test_amz_date),
        cmocka_unit_test(test_error_body_code_and_message),
        cmocka_unit_test(test_error_body_without_code),
        cmocka_unit_test(test_map_url),
    };
    return cmocka_run_group_tests_name("store_s3_sign", tests, NULL, NULL);
}
