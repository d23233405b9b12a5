/* Unit tests of engine/write/write_journal.c: the 24-byte self-checking record, a torn last record,
 * batched appends (one file per rank, written every SM_JOURNAL_BATCH records and at flush), the
 * load that skips this run's own rank journals, and the shard-index check of resume. */
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

#include "sm_test.h"
#include "write_int.h"
#include "write_test.h"

static void test_journal_record_round_trip_and_torn_tail(void **state)
{
    (void)state;
    uint8_t buf[3 * SM_JREC_BYTES];
    const struct sm_shard_rec a = {123, 0xdeadbeefu, true}, b = {7, 1, true};
    sm_jrec_encode(buf, 4, &a);
    sm_jrec_encode(buf + SM_JREC_BYTES, 9, &b);
    sm_jrec_encode(buf + 2 * SM_JREC_BYTES, 4, &b); /* a later record of shard 4 supersedes */
    struct sm_shard_rec recs[10];
    memset(recs, 0, sizeof(recs));
    assert_int_equal(sm_jrec_scan(sm_bytes_of(buf, sizeof(buf)), 10, recs), 3);
    assert_true(recs[4].set && recs[4].size == 7 && recs[4].crc32c == 1);
    assert_true(recs[9].set && recs[9].size == 7);
    /* torn: the last record cut short is ignored, the ones before it kept */
    memset(recs, 0, sizeof(recs));
    assert_int_equal(sm_jrec_scan(sm_bytes_of(buf, 2 * SM_JREC_BYTES + 10), 10, recs), 2);
    assert_true(recs[4].set && recs[4].size == 123 && recs[4].crc32c == 0xdeadbeefu);
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
    const struct sm_output_opts opts = {SM_OUTPUT_EXISTS_ERROR, SM_OUTPUT_SYNC_NONE, NULL};
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    assert_true(sm_writer_nshards(w) > SM_JOURNAL_BATCH + 10);
    assert_ok(sm_output_open(dir, &opts, &o, &err), &err);
    assert_ok(sm_output_begin(o, w, &err), &err);
    sm_output_set_run(o, 0x1234, 3);
    const uint8_t bytes[3] = {1, 2, 3};
    for (uint64_t i = 0; i < SM_JOURNAL_BATCH - 1; i++) {
        assert_ok(sm_output_put_shard(o, i, sm_bytes_of(bytes, 3), &err), &err);
    }
    char jfile[4300];
    snprintf(jfile, sizeof(jfile), "%s/0000000000001234.3.jnl", jdir);
    assert_int_not_equal(access(jfile, F_OK), 0); /* still buffered */
    assert_ok(sm_output_put_shard(o, SM_JOURNAL_BATCH - 1, sm_bytes_of(bytes, 3), &err), &err);
    struct stat sb;
    assert_int_equal(stat(jfile, &sb), 0); /* one full batch written */
    assert_int_equal(sb.st_size, SM_JOURNAL_BATCH * SM_JREC_BYTES);
    assert_ok(sm_output_put_shard(o, SM_JOURNAL_BATCH, sm_bytes_of(bytes, 3), &err), &err);
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
    free(recs);
    sm_output_close(o);
    sm_writer_free(w);
    assert_int_equal(sm_test_rm_rf(tmpl), 0);
}

static void test_journal_shard_index_check(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_output_spec s = wt_spec(20, 70, 45);
    struct sm_writer *w;
    assert_ok(sm_writer_new(&s, &w, &err), &err);
    struct wt_pattern p = wt_pattern_of(&s, 1000);
    const size_t n = sm_writer_shard_bytes(w, 0);
    uint8_t *vals = malloc(n);
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    sm_writer_shard_box(w, 0, off, shape);
    assert_ok(wt_fill(&p, 0, 0, off, shape, vals, n, &err), &err);
    struct sm_write_scratch *ws;
    assert_ok(sm_write_scratch_new(&ws, &err), &err);
    struct sm_buf enc = SM_BUF_INIT;
    assert_ok(sm_writer_encode_shard(w, 0, sm_bytes_of(vals, n), &enc, ws, &err), &err);
    assert_true(sm_shard_index_ok(w, sm_buf_bytes(&enc)));
    assert_true(sm_shard_bytes_ok(w, sm_buf_bytes(&enc)));
    enc.ptr[2] ^= 0xff; /* inside the first chunk: the index still passes, the bytes do not */
    assert_true(sm_shard_index_ok(w, sm_buf_bytes(&enc)));
    assert_false(sm_shard_bytes_ok(w, sm_buf_bytes(&enc)));
    enc.ptr[2] ^= 0xff;
    assert_false(sm_shard_index_ok(w, sm_bytes_of(enc.ptr, enc.len - 1))); /* cut short */
    enc.ptr[enc.len - 10] ^= 1; /* the index altered: its CRC32C fails */
    assert_false(sm_shard_index_ok(w, sm_buf_bytes(&enc)));
    enc.ptr[enc.len - 10] ^= 1;
    assert_false(sm_shard_index_ok(w, sm_bytes_of(enc.ptr + 1, enc.len - 1))); /* ranges outside */
    sm_buf_free(&enc);
    sm_write_scratch_free(ws);
    free(vals);
    sm_writer_free(w);
    /* without a CRC32C index nothing can be checked: never kept by index */
    struct sm_output_spec nocrc = s;
    nocrc.index_crc32c = false;
    assert_ok(sm_writer_new(&nocrc, &w, &err), &err);
    const uint8_t junk[64] = {0};
    assert_false(sm_shard_index_ok(w, sm_bytes_of(junk, sizeof(junk))));
    sm_writer_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_journal_record_round_trip_and_torn_tail),
        cmocka_unit_test(test_journal_batches_into_one_file_per_rank),
        cmocka_unit_test(test_journal_shard_index_check),
    };
    return cmocka_run_group_tests_name("write_journal", tests, NULL, NULL);
}
