/* Unit tests of engine/write/write_marker.c: journal keys, the record line, journal parsing (a
 * torn or foreign record is ignored), and the completion marker's build/parse round trip and its
 * malformed cases (SPEC §6). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    char line[200];
    struct sm_buf b = {(uint8_t *)line, 0, sizeof(line)};
    const struct sm_shard_rec r = {123456789012ull, 0x00ff00ff00ff00ffu, 0xfedcba98u, true};
    sm_err_clear(&err);
    assert_ok(sm_rec_append(&b, "c/1/2/3", &r, &err), &err);
    line[b.len] = '\0';
    assert_string_equal(line,
                        "{\"key\": \"c/1/2/3\", \"size\": 123456789012, \"crc32c\": 4275878552, "
                        "\"values\": \"00ff00ff00ff00ff\"}");
}

static void test_marker_round_trip(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_writer *w = small_writer();
    struct sm_shard_rec recs[4] = {
        {10, 11, 1, true}, {20, 22, 2, true}, {30, 33, 3, true}, {40, 0, 0, true}};
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
    char why[160];
    struct sm_marker_head head;
    assert_true(sm_marker_parse(w, sm_buf_bytes(&m), back, &head, why, sizeof(why)));
    assert_string_equal(head.zarr_sha, sha);
    assert_int_equal(head.version, SM_MARKER_VERSION);
    assert_int_equal(head.bytes, 100);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(back[i].size, recs[i].size);
        assert_int_equal(back[i].crc32c, recs[i].crc32c);
        assert_true(back[i].values == recs[i].values);
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
    char why[160];
    struct sm_marker_head head;
    assert_false(sm_marker_parse(w, sm_bytes_of(doc, strlen(doc)), back, &head, why, sizeof(why)));
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
             "\"bytes\": 0, "
             "\"shards\": []}",
             sha);
    expect_bad(w, doc, "'shard_count' is 2 but 0 shards listed");
    snprintf(doc, sizeof(doc),
             "{\"shardmill_complete\": 1, \"zarr_json_sha256\": \"%s\", \"shard_count\": 1, "
             "\"bytes\": 0, "
             "\"shards\": [{\"key\": \"c/5/0/0\", \"size\": 1, \"crc32c\": 1}]}",
             sha);
    expect_bad(w, doc, "not a shard of zarr.json");
    snprintf(doc, sizeof(doc),
             "{\"shardmill_complete\": 1, \"zarr_json_sha256\": \"%s\", \"shard_count\": 2, "
             "\"bytes\": 0, "
             "\"shards\": [{\"key\": \"c/0/0/0\", \"size\": 1, \"crc32c\": 1}, "
             "{\"key\": \"c/0/0/0\", \"size\": 1, \"crc32c\": 1}]}",
             sha);
    expect_bad(w, doc, "twice");
    snprintf(doc, sizeof(doc),
             "{\"shardmill_complete\": 1, \"zarr_json_sha256\": \"%s\", \"shard_count\": 1, "
             "\"bytes\": 0, "
             "\"shards\": [{\"key\": \"c/0/0/0\"}]}",
             sha);
    expect_bad(w, doc, "not a {key, size, crc32c} record");
    /* an unknown format version: its records' meaning is unknown */
    snprintf(doc, sizeof(doc),
             "{\"shardmill_complete\": 3, \"zarr_json_sha256\": \"%s\", \"shard_count\": 0, "
             "\"bytes\": 0, \"shards\": []}",
             sha);
    expect_bad(w, doc, "unknown marker format version 3");
    snprintf(doc, sizeof(doc),
             "{\"shardmill_complete\": 0, \"zarr_json_sha256\": \"%s\", \"shard_count\": 0, "
             "\"bytes\": 0, \"shards\": []}",
             sha);
    expect_bad(w, doc, "unknown marker format version 0");
    /* no byte total */
    snprintf(doc, sizeof(doc),
             "{\"shardmill_complete\": 2, \"zarr_json_sha256\": \"%s\", \"shard_count\": 0, "
             "\"shards\": []}",
             sha);
    expect_bad(w, doc, "'bytes'");
    /* version 2 records carry the values digest */
    snprintf(doc, sizeof(doc),
             "{\"shardmill_complete\": 2, \"zarr_json_sha256\": \"%s\", \"shard_count\": 1, "
             "\"bytes\": 1, \"shards\": [{\"key\": \"c/0/0/0\", \"size\": 1, \"crc32c\": 1}]}",
             sha);
    expect_bad(w, doc, "not a {key, size, crc32c, values} record");
    snprintf(doc, sizeof(doc),
             "{\"shardmill_complete\": 2, \"zarr_json_sha256\": \"%s\", \"shard_count\": 1, "
             "\"bytes\": 1, \"shards\": [{\"key\": \"c/0/0/0\", \"size\": 1, \"crc32c\": 1, "
             "\"values\": \"12345678abcdefXX\"}]}",
             sha);
    expect_bad(w, doc, "not a {key, size, crc32c, values} record");
    sm_writer_free(w);
}

static void expect_recs(const struct sm_writer *w, const char *doc, const uint64_t *sizes)
{
    struct sm_shard_rec back[4];
    memset(back, 0, sizeof(back));
    char why[160] = "";
    struct sm_marker_head head;
    assert_true(sm_marker_parse(w, sm_bytes_of(doc, strlen(doc)), back, &head, why, sizeof(why)));
    for (int i = 0; i < 4; i++) {
        assert_true(back[i].set);
        assert_int_equal(back[i].size, sizes[i]);
        assert_int_equal(back[i].crc32c, (uint32_t)(sizes[i] / 10));
    }
}

/* The records are read in place when the marker has the layout sm_marker_build writes, and
 * through the JSON DOM otherwise: both give the same records, and either rejects what is not
 * JSON or not a marker. */
static void test_marker_parse_layouts(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_writer *w = small_writer();
    const struct sm_shard_rec recs[4] = {
        {10, 1, 1, true}, {20, 2, 2, true}, {30, 3, 3, true}, {40, 4, 4, true}};
    const uint64_t sizes[4] = {10, 20, 30, 40};
    struct sm_buf m = SM_BUF_INIT;
    assert_ok(sm_marker_build(w, recs, &m, &err), &err);
    char own[4096];
    snprintf(own, sizeof(own), "%.*s", (int)m.len, (const char *)m.ptr);
    expect_recs(w, own, sizes);
    const char *sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    char doc[2048];
    /* another key order, escapes and whitespace: the DOM path */
    snprintf(doc, sizeof(doc),
             "{\"shards\":[{\"crc32c\":2,\"size\":20,\"key\":\"c\\/0\\/1\\/0\"},\n"
             "{\"key\": \"c/0/0/0\", \"size\": 10, \"crc32c\": 1},"
             "{\"key\": \"c/1/0/0\", \"crc32c\": 3, \"size\": 30},"
             "{\"key\": \"c/1/1/0\", \"size\": 40, \"crc32c\": 4}],"
             "\"shard_count\": 4, \"bytes\": 0, \"zarr_json_sha256\": \"%s\", "
             "\"shardmill_complete\": 1}",
             sha);
    expect_recs(w, doc, sizes);
    /* the own layout with extra whitespace between records still reads */
    snprintf(doc, sizeof(doc),
             "{\"shardmill_complete\": 1, \"zarr_json_sha256\": \"%s\", \"shard_count\": 4, "
             "\"bytes\": 0, "
             "\"shards\": [ {\"key\": \"c/0/0/0\", \"size\": 10, \"crc32c\": 1} ,\n\t"
             "{\"key\": \"c/0/1/0\", \"size\": 20, \"crc32c\": 2},"
             "{\"key\": \"c/1/0/0\", \"size\": 30, \"crc32c\": 3},"
             "{\"key\": \"c/1/1/0\", \"size\": 40, \"crc32c\": 4} ] }\n",
             sha);
    expect_recs(w, doc, sizes);
    /* not JSON, though the records read: a leading zero, trailing bytes, a truncated marker */
    snprintf(doc, sizeof(doc), "%.*s", (int)m.len, (const char *)m.ptr);
    char *ten = strstr(doc, "\"size\": 10,");
    assert_non_null(ten);
    memcpy(ten, "\"size\": 01,", strlen("\"size\": 01,"));
    expect_bad(w, doc, "malformed JSON");
    snprintf(doc, sizeof(doc), "%.*s]", (int)m.len, (const char *)m.ptr);
    expect_bad(w, doc, "malformed JSON");
    snprintf(doc, sizeof(doc), "%.*s", (int)m.len - 4, (const char *)m.ptr);
    expect_bad(w, doc, "malformed JSON");
    /* a crc32c past 32 bits and a negative count: not a marker */
    snprintf(doc, sizeof(doc), "%.*s", (int)m.len, (const char *)m.ptr);
    char *crc = strstr(doc, "\"crc32c\": 1,");
    assert_non_null(crc);
    char big[4096];
    snprintf(big, sizeof(big), "%.*s\"crc32c\": 4294967296,%s", (int)(crc - doc), doc,
             crc + strlen("\"crc32c\": 1,"));
    expect_bad(w, big, "not a {key, size, crc32c, values} record");
    snprintf(doc, sizeof(doc),
             "{\"shardmill_complete\": 1, \"zarr_json_sha256\": \"%s\", \"shard_count\": -1, "
             "\"bytes\": 0, "
             "\"shards\": []}",
             sha);
    expect_bad(w, doc, "'shard_count' and 'shards' are required");
    sm_buf_free(&m);
    sm_writer_free(w);
}

static size_t json_allocs;

static void assert_recs_equal(const struct sm_shard_rec *a, const struct sm_shard_rec *b,
                              uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        assert_int_equal(a[i].size, b[i].size);
        assert_int_equal(a[i].crc32c, b[i].crc32c);
        assert_true(a[i].values == b[i].values);
        assert_int_equal(a[i].set, b[i].set);
    }
}

static void *counting_malloc(size_t n)
{
    json_allocs++;
    return malloc(n);
}

/* Reading the marker of 2,048 shards allocates for its header only, not per record (a jansson
 * DOM would make several objects per record: about 70 MB at 131,072 shards, issue 11). */
static void test_marker_parse_does_not_grow_per_record(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output_spec s = wt_spec(128, 512, 256); /* [8,32,32] shards: grid 16 x 16 x 8 */
    struct sm_writer *w;
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    const uint64_t n = sm_writer_nshards(w);
    assert_int_equal(n, 2048);
    struct sm_shard_rec *recs = calloc(n, sizeof(*recs));
    struct sm_shard_rec *back = calloc(n, sizeof(*back));
    assert_non_null(recs);
    assert_non_null(back);
    for (uint64_t i = 0; i < n; i++) {
        recs[i] = (struct sm_shard_rec){1000 + i, i * 0x9e3779b97f4a7c15u,
                                        (uint32_t)(i * 2654435761u), true};
    }
    struct sm_buf m = SM_BUF_INIT;
    assert_ok(sm_marker_build(w, recs, &m, &err), &err);
    char why[160];
    struct sm_marker_head head;
    json_allocs = 0;
    json_set_alloc_funcs(counting_malloc, free);
    const bool ok = sm_marker_parse(w, sm_buf_bytes(&m), back, &head, why, sizeof(why));
    json_set_alloc_funcs(malloc, free);
    assert_true(ok);
    assert_true(json_allocs < 100);
    assert_recs_equal(recs, back, n);
    /* the same records in another layout (no space after ':') take the DOM: still equal */
    struct sm_buf d = SM_BUF_INIT;
    assert_ok(sm_buf_reserve(&d, m.len, &err), &err);
    for (size_t i = 0; i < m.len; i++) {
        if (!(m.ptr[i] == ' ' && i > 0 && m.ptr[i - 1] == ':')) {
            d.ptr[d.len++] = m.ptr[i];
        }
    }
    memset(back, 0, n * sizeof(*back));
    json_allocs = 0;
    json_set_alloc_funcs(counting_malloc, free);
    const bool ok2 = sm_marker_parse(w, sm_buf_bytes(&d), back, &head, why, sizeof(why));
    json_set_alloc_funcs(malloc, free);
    assert_true(ok2);
    assert_true(json_allocs > n); /* the DOM: at least one object per record */
    assert_recs_equal(recs, back, n);
    sm_buf_free(&d);
    sm_buf_free(&m);
    free(recs);
    free(back);
    sm_writer_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_marker_record_line),
        cmocka_unit_test(test_marker_round_trip),
        cmocka_unit_test(test_marker_parse_rejects_malformed),
        cmocka_unit_test(test_marker_parse_layouts),
        cmocka_unit_test(test_marker_parse_does_not_grow_per_record),
    };
    return cmocka_run_group_tests_name("write_marker", tests, NULL, NULL);
}
