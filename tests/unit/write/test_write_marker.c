/* Unit tests of engine/write/write_marker.c: journal keys, the record line, journal parsing (a
 * torn or foreign record is ignored), and the completion marker's build/parse round trip and its
 * malformed cases (SPEC §6). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jansson.h>

#include "sm_test.h"
#include "write_int.h"
#include "write_test.h"

static struct sm_writer *small_writer(void)
{
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output_spec s = wt_spec(16, 40, 32); /* grid 2 x 2 x 1 */
    struct sm_writer *w;
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    return w;
}

static void test_marker_record_line(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    char line[160];
    struct sm_buf b = {(uint8_t *)line, 0, sizeof(line)};
    const struct sm_shard_rec r = {123456789012ull, 0xfedcba98u, true};
    sm_err_clear(&err);
    assert_ok(sm_rec_append(&b, "c/1/2/3", &r, &err), &err);
    line[b.len] = '\0';
    assert_string_equal(line,
                        "{\"key\": \"c/1/2/3\", \"size\": 123456789012, \"crc32c\": 4275878552}");
}

static void test_marker_round_trip(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_writer *w = small_writer();
    struct sm_shard_rec recs[4] = {{10, 1, true}, {20, 2, true}, {30, 3, true}, {40, 0, true}};
    struct sm_buf m = SM_BUF_INIT;
    assert_ok(sm_marker_build(w, recs, &m, &err), &err);
    json_t *j = json_loadb((const char *)m.ptr, m.len, 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "shard_count")), 4);
    assert_int_equal(json_integer_value(json_object_get(j, "bytes")), 100);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "engine"), "version")),
                        "0.1.0");
    char sha[65];
    const struct sm_bytes zj = sm_writer_zarr_json(w);
    sm_sha256_hex(zj.ptr, zj.len, sha);
    assert_string_equal(json_string_value(json_object_get(j, "zarr_json_sha256")), sha);
    json_decref(j);

    struct sm_shard_rec back[4];
    memset(back, 0, sizeof(back));
    char got_sha[65], why[160];
    assert_true(sm_marker_parse(w, sm_buf_bytes(&m), back, got_sha, why, sizeof(why)));
    assert_string_equal(got_sha, sha);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(back[i].size, recs[i].size);
        assert_int_equal(back[i].crc32c, recs[i].crc32c);
        assert_true(back[i].set);
    }

    /* Deterministic text. */
    struct sm_buf m2 = SM_BUF_INIT;
    assert_ok(sm_marker_build(w, recs, &m2, &err), &err);
    assert_int_equal(m.len, m2.len);
    assert_memory_equal(m.ptr, m2.ptr, m.len);
    sm_buf_free(&m);
    sm_buf_free(&m2);
    sm_writer_free(w);
}

static void expect_bad(const struct sm_writer *w, const char *doc, const char *why_part)
{
    struct sm_shard_rec back[4];
    memset(back, 0, sizeof(back));
    char sha[65], why[160];
    assert_false(sm_marker_parse(w, sm_bytes_of(doc, strlen(doc)), back, sha, why, sizeof(why)));
    assert_contains(why, why_part);
}

static void test_marker_parse_rejects_malformed(void **state)
{
    (void)state;
    struct sm_writer *w = small_writer();
    const char *sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    char doc[1024];
    expect_bad(w, "{", "malformed JSON");
    expect_bad(w, "{\"x\": 1}", "not a shardmill completion marker");
    snprintf(doc, sizeof(doc), "{\"shardmill_complete\": 1, \"zarr_json_sha256\": \"ab\"}");
    expect_bad(w, doc, "64-digit");
    snprintf(doc, sizeof(doc),
             "{\"shardmill_complete\": 1, \"zarr_json_sha256\": \"%s\", \"shard_count\": 2, "
             "\"shards\": []}",
             sha);
    expect_bad(w, doc, "'shard_count' is 2 but 0 shards listed");
    snprintf(doc, sizeof(doc),
             "{\"shardmill_complete\": 1, \"zarr_json_sha256\": \"%s\", \"shard_count\": 1, "
             "\"shards\": [{\"key\": \"c/5/0/0\", \"size\": 1, \"crc32c\": 1}]}",
             sha);
    expect_bad(w, doc, "not a shard of zarr.json");
    snprintf(doc, sizeof(doc),
             "{\"shardmill_complete\": 1, \"zarr_json_sha256\": \"%s\", \"shard_count\": 2, "
             "\"shards\": [{\"key\": \"c/0/0/0\", \"size\": 1, \"crc32c\": 1}, "
             "{\"key\": \"c/0/0/0\", \"size\": 1, \"crc32c\": 1}]}",
             sha);
    expect_bad(w, doc, "twice");
    snprintf(doc, sizeof(doc),
             "{\"shardmill_complete\": 1, \"zarr_json_sha256\": \"%s\", \"shard_count\": 1, "
             "\"shards\": [{\"key\": \"c/0/0/0\"}]}",
             sha);
    expect_bad(w, doc, "not a {key, size, crc32c} record");
    sm_writer_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_marker_record_line),
        cmocka_unit_test(test_marker_round_trip),
        cmocka_unit_test(test_marker_parse_rejects_malformed),
    };
    return cmocka_run_group_tests_name("write_marker", tests, NULL, NULL);
}
