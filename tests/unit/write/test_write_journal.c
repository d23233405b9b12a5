/* Unit tests of engine/write/write_journal.c: the 32-byte self-checking record (with the values'
 * digest), a torn last record, an old 24-byte journal ignored, batched appends (one file per
 * rank, written every SM_JOURNAL_BATCH records and at flush), the load that skips this run's own
 * rank journals, and the values digest. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "shardmill/crc32c.h"
#include "shardmill/write.h"
#include "sm_test.h"
#include "write_int.h"
#include "write_test.h"

static void test_journal_record_round_trip_and_torn_tail(void **state)
{
    (void)state;
    uint8_t buf[3 * SM_JREC_BYTES];
    const struct sm_shard_rec a = {123, 0x0123456789abcdefu, 0xdeadbeefu, true};
    const struct sm_shard_rec b = {7, 5, 1, true};
    sm_jrec_encode(buf, 4, &a);
    sm_jrec_encode(buf + SM_JREC_BYTES, 9, &b);
    sm_jrec_encode(buf + 2 * SM_JREC_BYTES, 4, &b); /* a later record of shard 4 supersedes */
    struct sm_shard_rec recs[10];
    memset(recs, 0, sizeof(recs));
    assert_int_equal(sm_jrec_scan(sm_bytes_of(buf, sizeof(buf)), 10, recs), 3);
    assert_true(recs[4].set && recs[4].size == 7 && recs[4].crc32c == 1 && recs[4].values == 5);
    assert_true(recs[9].set && recs[9].size == 7);
    /* torn: the last record cut short is ignored, the ones before it kept */
    memset(recs, 0, sizeof(recs));
    assert_int_equal(sm_jrec_scan(sm_bytes_of(buf, 2 * SM_JREC_BYTES + 10), 10, recs), 2);
    assert_true(recs[4].set && recs[4].size == 123 && recs[4].crc32c == 0xdeadbeefu &&
                recs[4].values == 0x0123456789abcdefu);
    /* a flipped bit fails the record's check: nothing from it on is applied */
    buf[SM_JREC_BYTES + 3] ^= 0x10;
    memset(recs, 0, sizeof(recs));
    assert_int_equal(sm_jrec_scan(sm_bytes_of(buf, sizeof(buf)), 10, recs), 1);
    assert_false(recs[9].set);
    /* a shard outside the grid is refused */
    uint64_t shard;
    struct sm_shard_rec r;
    sm_jrec_encode(buf, 10, &a);
    assert_false(sm_jrec_decode(buf, 10, &shard, &r));
}

static void test_journal_batches_into_one_file_per_rank(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    char dir[4096], jdir[4200];
    char tmpl[] = "/tmp/shardmill-journal-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    snprintf(dir, sizeof(dir), "%s/batch.zarr", tmpl);
    snprintf(jdir, sizeof(jdir), "%s/.shardmill/journal", dir);
    /* 9 * 64 * 64 shards of one inner chunk each: more than a batch */
    struct sm_output_spec s = wt_spec(18, 2048, 2048);
    s.dtype = SM_DT_UINT8;
    s.shard[0] = 2, s.shard[1] = 32, s.shard[2] = 32;
    s.chunk[0] = 2, s.chunk[1] = 32, s.chunk[2] = 32;
    struct sm_writer *w;
    struct sm_output *o;
    const struct sm_output_opts opts = {SM_OUTPUT_EXISTS_ERROR, SM_OUTPUT_SYNC_NONE, NULL,
                                        SM_OUTPUT_DIRECT_ALWAYS};
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    assert_true(sm_writer_nshards(w) > SM_JOURNAL_BATCH + 10);
    assert_ok(sm_output_open(dir, &opts, &o, &err), &err);
    assert_ok(sm_output_begin(o, w, &err), &err);
    sm_output_set_run(o, 0x1234, 3);
    const uint8_t bytes[3] = {1, 2, 3};
    for (uint64_t i = 0; i < SM_JOURNAL_BATCH - 1; i++) {
        assert_ok(sm_output_put_shard(o, i, sm_bytes_of(bytes, 3), 7, &err), &err);
    }
    char jfile[4300];
    snprintf(jfile, sizeof(jfile), "%s/0000000000001234.3.jnl", jdir);
    assert_int_not_equal(access(jfile, F_OK), 0); /* still buffered */
    assert_ok(sm_output_put_shard(o, SM_JOURNAL_BATCH - 1, sm_bytes_of(bytes, 3), 7, &err), &err);
    struct stat sb;
    assert_int_equal(stat(jfile, &sb), 0); /* one full batch written */
    assert_int_equal(sb.st_size, SM_JOURNAL_BATCH * SM_JREC_BYTES);
    assert_ok(sm_output_put_shard(o, SM_JOURNAL_BATCH, sm_bytes_of(bytes, 3), 7, &err), &err);
    assert_ok(sm_output_flush(o, &err), &err);
    assert_int_equal(stat(jfile, &sb), 0);
    assert_int_equal(sb.st_size, (SM_JOURNAL_BATCH + 1) * SM_JREC_BYTES);
    assert_int_equal(sm_test_count_entries(jdir, ""), 1); /* one file for all the records */
    /* A load skips this run's rank journals and reads the others (a previous run's). */
    struct sm_shard_rec *recs = calloc(sm_writer_nshards(w), sizeof(*recs));
    assert_ok(sm_journal_load(o->rootfd, 0x1234, sm_writer_nshards(w), recs, &err), &err);
    assert_false(recs[0].set);
    assert_ok(sm_journal_load(o->rootfd, 0x9999, sm_writer_nshards(w), recs, &err), &err);
    assert_true(recs[0].set && recs[SM_JOURNAL_BATCH].set && !recs[SM_JOURNAL_BATCH + 1].set);
    assert_int_equal(recs[5].size, 3);
    assert_int_equal(recs[5].values, 7);
    free(recs);
    sm_output_close(o);
    sm_writer_free(w);
    assert_int_equal(sm_test_rm_rf(tmpl), 0);
}

static void test_journal_old_24_byte_records_are_ignored(void **state)
{
    (void)state;
    /* the format before the values digest: u64 shard, u64 size, u32 crc32c, u32 check of 20 */
    uint8_t old[2 * 24];
    memset(old, 0, sizeof(old));
    for (int k = 0; k < 2; k++) {
        uint8_t *r = old + 24 * k;
        r[0] = (uint8_t)k;
        r[8] = 3;
        const uint32_t c = sm_crc32c(0, r, 20);
        memcpy(r + 20, &c, 4);
    }
    struct sm_shard_rec recs[4];
    memset(recs, 0, sizeof(recs));
    assert_int_equal(sm_jrec_scan(sm_bytes_of(old, sizeof(old)), 4, recs), 0);
    assert_false(recs[0].set || recs[1].set);
}

static void test_values_digest_is_both_crcs(void **state)
{
    (void)state;
    /* the check values of CRC-32C and CRC-32 (IEEE) of "123456789" */
    assert_true(sm_write_values_digest("123456789", 9) == 0xE3069283CBF43926u);
    uint8_t v[4096];
    for (size_t i = 0; i < sizeof(v); i++) {
        v[i] = (uint8_t)(i * 7);
    }
    const uint64_t d = sm_write_values_digest(v, sizeof(v));
    v[1000] ^= 1;
    assert_true(sm_write_values_digest(v, sizeof(v)) != d);
    v[1000] ^= 1;
    assert_true(sm_write_values_digest(v, sizeof(v)) == d);
    /* the length is part of it: trailing zeros change the digest */
    assert_true(sm_write_values_digest(v, 10) != sm_write_values_digest(v, 11) || v[10] != 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_journal_record_round_trip_and_torn_tail),
        cmocka_unit_test(test_journal_batches_into_one_file_per_rank),
        cmocka_unit_test(test_journal_old_24_byte_records_are_ignored),
        cmocka_unit_test(test_values_digest_is_both_crcs),
    };
    return cmocka_run_group_tests_name("write_journal", tests, NULL, NULL);
}
