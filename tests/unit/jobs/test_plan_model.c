/* Unit tests of jobs/plan_model.c: the rates document, the time model's terms computed by hand
 * (scaling/MODEL.md's local model) and the peak-RSS bound's parts and caps. */
#include <shardmill/sm_config.h>

#include <setjmp.h>
#include <stdarg.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "plan_model.h"

static const char RATES[] =
    "{\"calibrated_utc\": \"20261204T000000Z\", \"machine\": \"2 cores test\", "
    "\"filesystem\": \"ext4\", \"cache\": \"warm\", \"rates\": {"
    "\"cores\": 2, \"scan_s_per_byte\": 1e-9, \"decode_s_per_byte\": 5e-10, "
    "\"write_s_per_byte\": 2e-9, \"shard_fixed_s\": 0.001, \"pyramid_s_per_byte\": 4e-9, "
    "\"syncfs_bytes_per_s\": 1e9, \"syncfs_fixed_s\": 0.01, \"rename_s\": 0.0001, "
    "\"finish_s_per_shard\": 1e-6, \"start_plain_s\": 0.001, \"start_mpi_s\": 0.3, "
    "\"start_mpi_s_per_rank\": 0.05, \"allreduce_s\": 0.0003, \"baseline_rss_bytes\": 1000, "
    "\"baseline_rss_mpi_bytes\": 3000}}";

static void test_rates_parse(void **state)
{
    (void)state;
    struct sm_plan_rates r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_plan_rates_parse(RATES, strlen(RATES), "r.json", &r, &err), SM_OK);
    assert_true(r.cores == 2.0);
    assert_true(r.write_s_per_byte == 2e-9);
    assert_int_equal(r.baseline_rss_mpi_bytes, 3000);
    assert_true(r.inner_efficiency == 1.0); /* absent: every thread counts */
    assert_string_equal(r.filesystem, "ext4");
    assert_string_equal(r.calibrated, "20261204T000000Z");
}

static void test_rates_refused(void **state)
{
    (void)state;
    struct sm_plan_rates r;
    struct sm_err err;
    char bad[sizeof(RATES) + 16];
    /* a member missing, one negative, not JSON: each names the file and the member */
    const char *cases[][2] = {{"\"write_s_per_byte\": 2e-9, ", ""},
                              {"\"rename_s\": 0.0001", "\"rename_s\": -1"},
                              {"{\"calibrated_utc\"", "[\"calibrated_utc\""}};
    const char *want[] = {"write_s_per_byte", "rename_s", "not a rates document"};
    for (size_t i = 0; i < 3; i++) {
        const char *at = strstr(RATES, cases[i][0]);
        assert_non_null(at);
        snprintf(bad, sizeof(bad), "%.*s%s%s", (int)(at - RATES), RATES, cases[i][1],
                 at + strlen(cases[i][0]));
        sm_err_clear(&err);
        assert_int_equal(sm_plan_rates_parse(bad, strlen(bad), "r.json", &r, &err), SM_E_USAGE);
        assert_non_null(strstr(err.what, want[i]));
        assert_string_equal(err.where, "r.json");
    }
}

static struct sm_plan_rates rates(void)
{
    struct sm_plan_rates r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_plan_rates_parse(RATES, strlen(RATES), "r.json", &r, &err), SM_OK);
    return r;
}

/* 2 ranks x 2 threads on 2 cores: stretch 2; busiest thread ceil(ceil(10/2)/2) = 3 tiles */
static void test_seconds_by_hand(void **state)
{
    (void)state;
    const struct sm_plan_rates r = rates();
    const struct sm_plan_work w = {.ranks = 2,
                                   .threads = 2,
                                   .mpi = true,
                                   .two_pass = true,
                                   .kept = false,
                                   .tiles = 10,
                                   .in_bytes = 10000000,
                                   .shards = 4,
                                   .out_value_bytes = 20000000,
                                   .pyr_shards = 2,
                                   .pyr_value_bytes = 2000000,
                                   .out_bytes = 5000000};
    struct sm_plan_terms t;
    sm_plan_seconds(&r, &w, &t);
    assert_true(fabs(t.start - (0.3 + 0.1)) < 1e-12);
    assert_true(fabs(t.scan - 3 * 1e6 * 1e-9 * 2) < 1e-12);
    assert_true(t.allreduce == 0.0003);
    /* per shard: 2.5 MB read again (5e-10) + 5 MB written (2e-9) + 1 ms; 1 shard per thread */
    assert_true(fabs(t.write - (2.5e6 * 5e-10 + 5e6 * 2e-9 + 0.001) * 2) < 1e-12);
    assert_true(fabs(t.pyramid - (1e6 * 4e-9 + 0.001) * 2) < 1e-12);
    assert_true(fabs(t.sync - (5e6 / 1e9 + 0.01 + 6 * 0.0001 / 2)) < 1e-12);
    assert_true(fabs(t.finish - 6e-6) < 1e-15);
    assert_true(fabs(t.total - (t.start + t.scan + t.allreduce + t.write + t.pyramid + t.sync +
                                t.finish)) < 1e-12);
    /* a level made from the spill file: its shards cost the write's rate, not the read-back's */
    struct sm_plan_work sp = w;
    sp.spill_shards = 2;
    sp.spill_value_bytes = 2000000;
    struct sm_plan_terms ts;
    sm_plan_seconds(&r, &sp, &ts);
    assert_true(fabs(ts.pyramid - t.pyramid - (1e6 * 2e-9 + 0.001) * 2) < 1e-12);
    assert_true(fabs(ts.sync - t.sync - 2 * 0.0001 / 2) < 1e-12); /* 2 more files renamed */
    /* one pass: no scan, each shard's input read while writing; a plain process starts */
    struct sm_plan_work one = w;
    one.ranks = 1;
    one.threads = 1;
    one.mpi = false;
    one.two_pass = false;
    one.pyr_shards = 0;
    sm_plan_seconds(&r, &one, &t);
    assert_true(t.scan == 0.0 && t.allreduce == 0.0 && t.pyramid == 0.0);
    assert_true(fabs(t.start - 0.001) < 1e-12);
    assert_true(fabs(t.write - 4 * (2.5e6 * 1e-9 + 5e6 * 2e-9 + 0.001)) < 1e-12);
    /* kept: no second read */
    struct sm_plan_work kept = w;
    kept.kept = true;
    sm_plan_seconds(&r, &kept, &t);
    assert_true(fabs(t.write - (5e6 * 2e-9 + 0.001) * 2) < 1e-12);
    /* one shard on a rank of 2 threads: both work on it (write_driver.c), half of it each */
    struct sm_plan_work few = kept;
    few.ranks = 1;
    few.mpi = false;
    few.shards = 1;
    few.out_value_bytes = 5000000;
    few.pyr_shards = 0;
    sm_plan_seconds(&r, &few, &t);
    assert_true(fabs(t.write - (5e6 * 2e-9 + 0.001) / 2) < 1e-12);
    struct sm_plan_rates half = r; /* each thread past the first adds half a thread */
    half.inner_efficiency = 0.5;
    sm_plan_seconds(&half, &few, &t);
    assert_true(fabs(t.write - (5e6 * 2e-9 + 0.001) / 1.5) < 1e-12);
    /* two nodes of one core: one rank per node, its 2 threads stretched 2x; the launch of one
     * rank per node; each node flushes half the output */
    struct sm_plan_work wide = w;
    wide.nodes = 2;
    wide.cores_per_node = 1;
    sm_plan_seconds(&r, &wide, &t);
    assert_true(fabs(t.start - 0.35) < 1e-12);
    assert_true(fabs(t.scan - 3 * 1e6 * 1e-9 * 2) < 1e-12);
    assert_true(fabs(t.sync - (5e6 / 2 / 1e9 + 0.01 + 6 * 0.0001 / 2)) < 1e-12);
    wide.cores_per_node = 4; /* enough cores: no stretch */
    sm_plan_seconds(&r, &wide, &t);
    assert_true(fabs(t.scan - 3 * 1e6 * 1e-9) < 1e-12);
    /* files of 1 MiB and more go to the disk as they are put: the flush waits for what the write
     * and pyramid stages (0.0345 s at 1 GB/s: 34.5 MB) did not cover, at least the file each of
     * the node's 4 threads put last */
    const double renames = 0.01 + 6 * 0.0001 / 2, covered = (0.0245 + 0.01) * 1e9;
    struct sm_plan_work big = w;
    big.out_bytes = 6 * 2097152; /* all covered: 4 files of 2 MiB left */
    sm_plan_seconds(&r, &big, &t);
    assert_true(fabs(t.write + t.pyramid - 0.0345) < 1e-12);
    assert_true(fabs(t.sync - (4 * 2097152 / 1e9 + renames)) < 1e-12);
    big.out_bytes = 6 * 67108864; /* 64 MiB files: more than is covered */
    sm_plan_seconds(&r, &big, &t);
    assert_true(fabs(t.sync - ((6 * 67108864 - covered) / 1e9 + renames)) < 1e-9);
}

/* The read bandwidths are optional members (rates files calibrated before issue 33 have none:
 * 0, no I/O term); present, they must be positive. */
static void test_rates_fs_read(void **state)
{
    (void)state;
    struct sm_plan_rates r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_plan_rates_parse(RATES, strlen(RATES), "r.json", &r, &err), SM_OK);
    assert_true(r.fs_read_cold_bytes_per_s == 0.0 && r.fs_read_warm_bytes_per_s == 0.0);
    char doc[sizeof(RATES) + 128];
    const char *at = strstr(RATES, "\"cores\"");
    assert_non_null(at);
    snprintf(doc, sizeof(doc),
             "%.*s\"fs_read_cold_bytes_per_s\": 2.5e8, \"fs_read_warm_bytes_per_s\": 3e9, %s",
             (int)(at - RATES), RATES, at);
    assert_int_equal(sm_plan_rates_parse(doc, strlen(doc), "r.json", &r, &err), SM_OK);
    assert_true(r.fs_read_cold_bytes_per_s == 2.5e8);
    assert_true(r.fs_read_warm_bytes_per_s == 3e9);
    snprintf(doc, sizeof(doc), "%.*s\"fs_read_warm_bytes_per_s\": 0, %s", (int)(at - RATES), RATES,
             at);
    sm_err_clear(&err);
    assert_int_equal(sm_plan_rates_parse(doc, strlen(doc), "r.json", &r, &err), SM_E_USAGE);
    assert_non_null(strstr(err.what, "fs_read_warm_bytes_per_s"));
    assert_string_equal(err.where, "r.json");
}

/* A pass's bytes from storage: the size on disk times its decoded bytes over the ROI's. */
static void test_pass_read_bytes(void **state)
{
    (void)state;
    assert_int_equal(sm_plan_pass_read_bytes(100, 100, 50), 50);       /* read once */
    assert_int_equal(sm_plan_pass_read_bytes(1600, 100, 1000), 16000); /* 16 boxes a block */
    assert_int_equal(sm_plan_pass_read_bytes(0, 0, 70), 70);           /* nothing known: once */
    assert_int_equal(sm_plan_pass_read_bytes(3, 2, 3), 5);             /* 4.5, rounded */
    assert_string_equal(sm_plan_pass_name(SM_PLAN_PASS_RANGE), "range");
    assert_string_equal(sm_plan_pass_name(SM_PLAN_PASS_SCAN), "scan");
    assert_string_equal(sm_plan_pass_name(SM_PLAN_PASS_WRITE), "write");
}

/* The I/O term: a pass lasts max(compute, reads) + min(compute, reads) / k (a worker reads
 * synchronously: on k threads a core the others' compute fills all but 1/k of a wait; k = 1 adds
 * them); the decodes past the first of an amplified pass cost decode_s_per_byte each; the range
 * pass adds its read. */
/* --fs-bandwidth: a shared file system's aggregate caps the nodes' flushes of the output and of
 * the export together; above the nodes' own it changes nothing */
static void test_fs_bandwidth(void **state)
{
    (void)state;
    const struct sm_plan_rates r = rates();
    struct sm_plan_work w = {.ranks = 8,
                             .threads = 1,
                             .nodes = 4,
                             .mpi = true,
                             .shards = 8,
                             .out_value_bytes = 16000000000,
                             .out_bytes = 8000000000,
                             .export_value_bytes = 16000000000,
                             .export_file_bytes = 4000000000};
    struct sm_plan_terms own, wide, narrow;
    sm_plan_seconds(&r, &w, &own);
    /* 4 nodes at 1 GB/s each: 8 GB in 2 s, the export's 4 GB in 1 s */
    const double rest = 0.01 + 8 * 0.0001 / 8;
    assert_true(fabs(own.sync - (2.0 + rest)) < 1e-9);
    w.fs_bytes_per_s = 10e9; /* wider than the nodes' 4 GB/s: no change */
    sm_plan_seconds(&r, &w, &wide);
    assert_true(fabs(wide.sync - own.sync) < 1e-12 && fabs(wide.hdf5 - own.hdf5) < 1e-12);
    w.fs_bytes_per_s = 1e9; /* 1 GB/s shared by the 4 nodes: 8 s and 4 s */
    sm_plan_seconds(&r, &w, &narrow);
    assert_true(fabs(narrow.sync - (8.0 + rest)) < 1e-9);
    assert_true(fabs((narrow.hdf5 - own.hdf5) - 3.0) < 1e-9);
    assert_true(fabs((narrow.total - own.total) - 9.0) < 1e-9);
}

static void test_seconds_reads(void **state)
{
    (void)state;
    const struct sm_plan_rates r = rates();
    const struct sm_plan_work w = {.ranks = 2,
                                   .threads = 2,
                                   .mpi = true,
                                   .two_pass = true,
                                   .kept = false,
                                   .tiles = 10,
                                   .in_bytes = 10000000,
                                   .shards = 4,
                                   .out_value_bytes = 20000000,
                                   .out_bytes = 5000000};
    struct sm_plan_terms base, t;
    sm_plan_seconds(&r, &w, &base);
    const double scan_cpu = 3 * 1e6 * 1e-9 * 2;
    const double write_cpu = (2.5e6 * 5e-10 + 5e6 * 2e-9 + 0.001) * 2;
    assert_true(fabs(base.scan - scan_cpu) < 1e-12 && fabs(base.write - write_cpu) < 1e-12);
    assert_true(base.read[SM_PLAN_PASS_SCAN] == 0.0 && base.range == 0.0);
    /* storage slower than the compute: the reads set both passes (1 GB and 4 GB at 1 GB/s) */
    struct sm_plan_work io = w;
    io.fs_read_bytes_per_s = 1e9;
    io.read_bytes[SM_PLAN_PASS_RANGE] = 200000000;
    io.read_bytes[SM_PLAN_PASS_SCAN] = 1000000000;
    io.read_bytes[SM_PLAN_PASS_WRITE] = 4000000000;
    io.read_amp[SM_PLAN_PASS_SCAN] = 1.0;
    io.read_amp[SM_PLAN_PASS_WRITE] = 4.0;
    sm_plan_seconds(&r, &io, &t);
    assert_true(fabs(t.read[SM_PLAN_PASS_SCAN] - 1.0) < 1e-12);
    assert_true(fabs(t.read[SM_PLAN_PASS_WRITE] - 4.0) < 1e-12);
    assert_true(fabs(t.range - 0.2) < 1e-12);
    /* 2 x 2 threads on 2 cores: k = 2, half the compute beside the reads */
    const double write_amp = (2.5e6 * 5e-10 * 4 + 5e6 * 2e-9 + 0.001) * 2;
    assert_true(fabs(t.scan - (1.0 + scan_cpu / 2)) < 1e-12);
    assert_true(fabs(t.write - (4.0 + write_amp / 2)) < 1e-12);
    struct sm_plan_work twice = io; /* a scan job of `passes: 2` reads and counts twice */
    twice.scan_passes = 2;
    struct sm_plan_terms t2;
    sm_plan_seconds(&r, &twice, &t2);
    assert_true(fabs(t2.scan - 2 * (1.0 + scan_cpu / 2)) < 1e-12);
    assert_true(fabs(t.total - (base.total + 0.2 + (t.scan - scan_cpu) + (t.write - write_cpu))) <
                1e-9);
    /* fast storage: the compute sets the passes; the write's 3 decodes past the first cost */
    io.fs_read_bytes_per_s = 1e15;
    sm_plan_seconds(&r, &io, &t);
    assert_true(fabs(t.scan - (scan_cpu + 1e-6 / 2)) < 1e-12);
    assert_true(fabs(t.write - (write_amp + 4e-6 / 2)) < 1e-12);
    /* no bandwidth (rates without one): no read time, the amplified decode stays */
    io.fs_read_bytes_per_s = 0;
    sm_plan_seconds(&r, &io, &t);
    assert_true(t.read[SM_PLAN_PASS_WRITE] == 0.0 && t.range == 0.0);
    assert_true(fabs(t.scan - scan_cpu) < 1e-12);
    /* one pass: the write pass reads (scan rate for the first decode, decode rate after) */
    struct sm_plan_work one = io;
    one.two_pass = false;
    one.ranks = 1;
    one.threads = 1;
    one.mpi = false;
    one.read_bytes[SM_PLAN_PASS_RANGE] = 0;
    one.read_bytes[SM_PLAN_PASS_SCAN] = 0;
    one.read_amp[SM_PLAN_PASS_WRITE] = 2.0;
    one.fs_read_bytes_per_s = 1e9;
    one.read_bytes[SM_PLAN_PASS_RANGE] = 300000000; /* a float input's min/max pass: 0.3 s */
    sm_plan_seconds(&r, &one, &t);
    assert_true(t.scan == 0.0 && fabs(t.range - 0.3) < 1e-12);
    one.read_bytes[SM_PLAN_PASS_RANGE] = 0;
    sm_plan_seconds(&r, &one, &t);
    assert_true(t.scan == 0.0 && t.range == 0.0);
    const double one_cpu = 4 * (2.5e6 * (1e-9 + 5e-10) + 5e6 * 2e-9 + 0.001);
    /* one thread on 2 cores (k = 1): the reads add to the compute (ome-u8-1024: -33 % with
     * max()) */
    assert_true(fabs(t.write - (one_cpu + 4.0)) < 1e-12);
    /* a source's next group read ahead (4 groups): the first read waits, the rest overlap */
    struct sm_plan_work ahead = one;
    ahead.ahead_groups = 4;
    sm_plan_seconds(&r, &ahead, &t);
    assert_true(fabs(t.write - ((one_cpu + 4.0) / 4 + 0.75 * fmax(one_cpu, 4.0))) < 1e-12);
    ahead.ahead_groups = 1; /* one group: nothing to read ahead */
    sm_plan_seconds(&r, &ahead, &t);
    assert_true(fabs(t.write - (one_cpu + 4.0)) < 1e-12);
    one.read_bytes[SM_PLAN_PASS_WRITE] = 10000;
    sm_plan_seconds(&r, &one, &t);
    assert_true(fabs(t.write - (one_cpu + 1e-5)) < 1e-12);
}

static void test_peak_rss_parts(void **state)
{
    (void)state;
    struct sm_plan_mem m = {.baseline = 1000,
                            .memory_bytes = 1 << 30,
                            .threads = 2,
                            .two_pass = false,
                            .rank_in_bytes = 4000,
                            .rank_stored_bytes = 1500,
                            .cache_max_bytes = 256 << 20,
                            .index_cache_bytes = 100,
                            .tile_bytes = 512,
                            .chunk_bytes = 64,
                            .shard_voxels = 10,
                            .in_elem = 2,
                            .out_elem = 4,
                            .hist_bytes = 8,
                            .shard_records = 50,
                            .codec_bytes = 1};
    /* one pass: baseline + records; cache (the rank's stored bytes: 1500) + index + memos (17
     * units of 64 bytes per thread: 2176, under the input and the eighth); per shard in flight (2
     * threads, the rank's shards unknown): its input (20), values (40) and encoded shard (at most
     * the values) and 64 KiB of codec bound; per thread: histogram (one pass), decode scratch (2
     * chunks), codec contexts */
    struct sm_plan_rss_parts p;
    const uint64_t shard = 20 + 2 * 40 + 65536, decode = 2 * (128 + 1);
    const uint64_t write = 2 * shard + 2 * 8 + decode;
    const uint64_t one = 1000 + 50 + 1500 + 100 + 2176 + write;
    assert_int_equal(sm_plan_peak_rss(&m, &p), one);
    assert_int_equal(p.baseline, 1050);
    assert_int_equal(p.caches, 1500 + 100 + 2176);
    assert_int_equal(p.write, write);
    assert_int_equal(p.total, one);
    m.rank_shards = 1; /* one shard on the rank: one shard in flight, whatever the threads */
    assert_int_equal(sm_plan_peak_rss(&m, &p), one - shard);
    m.aligned = true; /* an image's levels made with the shard: their values and float32 means */
    assert_int_equal(sm_plan_peak_rss(&m, &p), one - shard + 40 / 7 + 10 * 4 / 7);
    m.aligned = false;
    m.padded = true; /* chunks without a shard codec at an edge: a padded copy in flight */
    assert_int_equal(sm_plan_peak_rss(&m, &p), one - shard + 40);
    m.padded = false;
    m.units_whole = true; /* every shard whole in read units: read straight in, no memo */
    assert_int_equal(sm_plan_peak_rss(&m, &p), one - shard - 2176);
    m.units_whole = false;
    m.rank_shards = 0;
    m.two_pass = true; /* scan workers: freed before the write, the larger phase counts; the
                        * write's threads have no histogram */
    const uint64_t write2 = write - 2 * 8, two = one - 2 * 8;
    assert_int_equal(sm_plan_peak_rss(&m, &p), two);
    assert_int_equal(p.scan, 2 * (512 + 8) + decode);
    m.tile_bytes = 100000; /* a scan larger than the write */
    assert_int_equal(sm_plan_peak_rss(&m, &p), two - write2 + 2 * (100000 + 8) + decode);
    m.rank_tiles = 1; /* one tile in flight, a histogram per thread: the write counts again */
    assert_int_equal(sm_plan_peak_rss(&m, &p), two);
    assert_int_equal(p.scan, 100000 + 2 * 8 + decode);
    m.rank_tiles = 0;
    m.tile_bytes = 512;
    m.kept_some = true; /* some ranks keep (4000), the others memoize: a rank may hold either */
    assert_int_equal(sm_plan_peak_rss(&m, NULL), two + 4000);
    struct sm_plan_mem sj = m; /* a scan job keeps nothing and writes nothing */
    sj.scan_job = true;
    sm_plan_peak_rss(&sj, &p);
    assert_int_equal(p.input, 0);
    assert_int_equal(p.write, 0);
    assert_int_equal(p.caches, 1500 + 100);
    assert_int_equal(p.total, 1050 + 1500 + 100 + 2 * (512 + 8) + decode);
    m.kept_some = false;
    m.kept = true; /* every rank keeps (4000): no memo */
    assert_int_equal(sm_plan_peak_rss(&m, &p), two - 2176 + 4000);
    assert_int_equal(p.input, 4000);
    m.cache_max_bytes = 1000; /* a cache under the rank's stored bytes evicts: + a tenth */
    sm_plan_peak_rss(&m, &p);
    assert_int_equal(p.caches, 1000 + 100 + 100);
    m.cache_max_bytes = 0; /* a disabled cache holds nothing */
    const uint64_t kept = two - 2176 + 4000 - 1500;
    assert_int_equal(sm_plan_peak_rss(&m, NULL), kept);
    m.pyr_shard_voxels = 5; /* a slab of 8 level-1 shards and 3 buffers per thread: under the
                             * write's, which counts */
    assert_int_equal(sm_plan_peak_rss(&m, &p), kept);
    assert_int_equal(p.pyramid, 2 * (160 + 60));
    m.memory_bytes = 400; /* the slab is capped by half the budget per thread: 100 */
    sm_plan_peak_rss(&m, &p);
    assert_int_equal(p.pyramid, 2 * (100 + 60));
    m.pyr_slab_voxels = 20; /* a slab of a chunk's depth: 20 voxels of 4 bytes */
    sm_plan_peak_rss(&m, &p);
    assert_int_equal(p.pyramid, 2 * (80 + 60));
    m.pyr_shard_voxels = 50000; /* a pyramid larger than the write counts instead */
    m.pyr_slab_voxels = 0;
    m.memory_bytes = 1 << 30;
    sm_plan_peak_rss(&m, &p);
    assert_int_equal(p.total, kept - write2 + p.pyramid);
    m.pyr_shard_voxels = 0;
    /* a source: no cache, no index cache, no memo; a NIfTI source's inflated box */
    struct sm_plan_mem s = m;
    s.memory_bytes = 1 << 30;
    s.two_pass = false;
    s.kept = false;
    s.pyr_shard_voxels = 0;
    s.source = true;
    s.cache_max_bytes = 256 << 20;
    assert_int_equal(sm_plan_peak_rss(&s, NULL), 1050 + write);
    s.source_loads = true;
    assert_int_equal(sm_plan_peak_rss(&s, NULL), 1050 + 4000 + write);
    s.window_bytes = 7000; /* a group's window (issue 33): held while its shards are cut */
    assert_int_equal(sm_plan_peak_rss(&s, &p), 1050 + 4000 + 7000 + write);
    assert_int_equal(p.input, 4000 + 7000);
    s.export_buffer_bytes = 300; /* the export's buffers add to the largest phase */
    s.export_chunk_bytes = 10;
    assert_int_equal(sm_plan_peak_rss(&s, &p), 1050 + 4000 + 7000 + write + 300 + 40 + 1);
}

/* The HDF5 export (issue 34 item 3): one thread per rank reads its block of level-0 shards back
 * (decode) and writes it, deflating first when asked; the file reaches storage at the flush
 * bandwidth per node. Its buffers are a part of the RSS bound. */
static void test_export_term(void **state)
{
    (void)state;
    const struct sm_plan_rates r = rates();
    struct sm_plan_work w = {.ranks = 2,
                             .threads = 2,
                             .mpi = true,
                             .shards = 4,
                             .in_bytes = 8000000,
                             .out_value_bytes = 8000000,
                             .out_bytes = 4000000};
    struct sm_plan_terms t0, t;
    sm_plan_seconds(&r, &w, &t0);
    assert_true(t0.hdf5 == 0.0); /* no export */
    w.export_value_bytes = 8000000;
    w.export_file_bytes = 8100000;
    sm_plan_seconds(&r, &w, &t);
    /* 2 of the 4 shards per rank, 2 MB each, decoded at 5e-10 s/B on one thread (2 ranks on 2
     * cores: no stretch); 8.1 MB at 1e9 B/s */
    const double plain = 2 * 2e6 * 5e-10 + 8.1e6 / 1e9;
    assert_true(fabs(t.hdf5 - plain) < 1e-12);
    assert_true(fabs(t.total - (t0.total + plain)) < 1e-12);
    assert_true(t.write == t0.write && t.sync == t0.sync); /* the other terms unchanged */
    w.export_deflate = true;                               /* + the deflate at the encode rate */
    w.export_file_bytes = 4100000;
    sm_plan_seconds(&r, &w, &t);
    assert_true(fabs(t.hdf5 - (2 * 2e6 * (5e-10 + 2e-9) + 4.1e6 / 1e9)) < 1e-12);
    w.ranks = 4; /* 4 ranks on 2 cores: one shard each, stretched 2x */
    sm_plan_seconds(&r, &w, &t);
    assert_true(fabs(t.hdf5 - (2e6 * (5e-10 + 2e-9) * 2 + 4.1e6 / 1e9)) < 1e-12);

    struct sm_plan_mem m = {.baseline = 1000,
                            .memory_bytes = 1 << 30,
                            .threads = 2,
                            .source = true,
                            .shard_voxels = 10,
                            .in_elem = 2,
                            .out_elem = 4,
                            .hist_bytes = 8,
                            .codec_bytes = 1};
    struct sm_plan_rss_parts p;
    const uint64_t none = sm_plan_peak_rss(&m, &p);
    assert_int_equal(p.hdf5, 0);
    m.export_buffer_bytes = 5000; /* the buffer, 4 chunks (decoded, HDF5's filter) and a codec */
    m.export_chunk_bytes = 64;
    assert_int_equal(sm_plan_peak_rss(&m, &p), none + 5000 + 4 * 64 + 1);
    assert_int_equal(p.hdf5, 5000 + 4 * 64 + 1);
}

/* The encoded shard (issue 34: the RSS bound within 1.3x the peak): its buffer's untouched pages
 * cost nothing, so with a sampled ratio it counts the values at that share (the margin is the
 * caller's) in whole 2 MiB pages, never more than the values; unsampled (0), all of them. */
static void test_encoded_share(void **state)
{
    (void)state;
    const uint64_t MiB = (uint64_t)1 << 20;
    struct sm_plan_mem m = {.baseline = 1000,
                            .memory_bytes = (uint64_t)1 << 32,
                            .threads = 1,
                            .source = true,
                            .shard_voxels = 4 * MiB, /* a W5 shard: [64,256,256] */
                            .in_elem = 2,
                            .out_elem = 4,
                            .hist_bytes = 8,
                            .codec_bytes = 1};
    struct sm_plan_rss_parts p;
    const uint64_t full = sm_plan_peak_rss(&m, &p); /* values + encoded at 16 MiB each */
    const uint64_t fixed = 8 * MiB + 16 * MiB + (64u << 10) + 8 + 1; /* in, values, spare, hist */
    assert_int_equal(p.write, fixed + 16 * MiB);
    m.enc_share = 0.37 * 1.3; /* 7.7 MiB: 4 pages */
    assert_int_equal(sm_plan_peak_rss(&m, &p), full - 8 * MiB);
    assert_int_equal(p.write, fixed + 8 * MiB);
    m.enc_share = 0.25; /* exactly 2 pages */
    sm_plan_peak_rss(&m, &p);
    assert_int_equal(p.write, fixed + 4 * MiB);
    m.enc_share = 0.99; /* 15.84 MiB rounds to 16: never above the values */
    sm_plan_peak_rss(&m, &p);
    assert_int_equal(p.write, fixed + 16 * MiB);
    m.shard_voxels = 1000; /* a small shard: at most its values */
    m.enc_share = 0.1;
    sm_plan_peak_rss(&m, &p);
    assert_int_equal(p.write, 1000 * 2 + 2 * 4000 + (64u << 10) + 8 + 1);
}

/* Issue 34 item 2: the optional rates (one pass's read, a scan job's, the export's, a source's
 * and an output type's own) are read, picked for the job, and used by the terms. */
static void test_rates_kinds(void **state)
{
    (void)state;
    char doc[sizeof(RATES) + 512];
    const char *at = strstr(RATES, "\"cores\"");
    snprintf(doc, sizeof(doc),
             "%.*s\"read_s_per_byte\": 3e-9, \"scan_job_s_per_byte\": 7e-10, "
             "\"export_s_per_byte\": 6e-10, \"sources\": {\"tiff\": {\"scan_s_per_byte\": 9e-9, "
             "\"decode_s_per_byte\": 8e-9}, \"raw\": {\"read_s_per_byte\": 1e-10}}, "
             "\"by_dtype\": {\"uint8\": {\"write_s_per_byte\": 5e-9, "
             "\"pyramid_s_per_byte\": 6e-9}}, %s",
             (int)(at - RATES), RATES, at);
    struct sm_plan_rates r, e;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_plan_rates_parse(doc, strlen(doc), "r.json", &r, &err), SM_OK);
    assert_true(r.read_s_per_byte == 3e-9 && r.export_s_per_byte == 6e-10);
    sm_plan_rates_for(&r, false, "tiff", "uint8", &e);
    assert_true(e.scan_s_per_byte == 9e-9 && e.decode_s_per_byte == 8e-9);
    assert_true(e.read_s_per_byte == 9e-9); /* the source has none: its scan */
    assert_true(e.write_s_per_byte == 5e-9 && e.pyramid_s_per_byte == 6e-9);
    sm_plan_rates_for(&r, false, "raw", "float32", &e);
    assert_true(e.scan_s_per_byte == 1e-9 && e.decode_s_per_byte == 5e-10); /* the general */
    assert_true(e.read_s_per_byte == 1e-10 && e.write_s_per_byte == 2e-9);
    sm_plan_rates_for(&r, true, NULL, NULL, &e);
    assert_true(e.scan_s_per_byte == 7e-10 && e.read_s_per_byte == 3e-9);
    /* one pass: each shard's input at read_s_per_byte; the export at its own rate */
    struct sm_plan_work w = {.ranks = 1,
                             .threads = 1,
                             .shards = 2,
                             .in_bytes = 1000000,
                             .out_value_bytes = 2000000,
                             .out_bytes = 1000000,
                             .export_value_bytes = 2000000,
                             .export_file_bytes = 2000000};
    struct sm_plan_terms t;
    sm_plan_seconds(&r, &w, &t);
    assert_true(fabs(t.write - (1e6 * 3e-9 + 2e6 * 2e-9 + 2 * 0.001)) < 1e-12);
    assert_true(fabs(t.hdf5 - 2e6 * 6e-10) < 1e-12); /* its flush is in the rate */
    /* refused: a negative member of a kind */
    snprintf(doc, sizeof(doc), "%.*s\"sources\": {\"raw\": {\"scan_s_per_byte\": -1}}, %s",
             (int)(at - RATES), RATES, at);
    sm_err_clear(&err);
    assert_int_equal(sm_plan_rates_parse(doc, strlen(doc), "r.json", &r, &err), SM_E_USAGE);
    assert_non_null(strstr(err.what, "sources.raw.scan_s_per_byte"));
}

/* Issue 33's W9: an uncompressed TIFF stack read in place was priced at the calibration's deflate
 * TIFF's rates (plan +32 %); a TIFF or HDF5 file that reads its boxes in place takes raw's. */
static void test_source_rates_name(void **state)
{
    (void)state;
    assert_string_equal(sm_plan_source_rates_name("tiff", true), "raw");
    assert_string_equal(sm_plan_source_rates_name("hdf5", true), "raw");
    assert_string_equal(sm_plan_source_rates_name("tiff", false), "tiff");
    assert_string_equal(sm_plan_source_rates_name("hdf5", false), "hdf5");
    assert_string_equal(sm_plan_source_rates_name("nifti", true), "nifti");
    assert_string_equal(sm_plan_source_rates_name("raw", true), "raw");
    assert_null(sm_plan_source_rates_name(NULL, true));
}

/* A run's fixed work (rates run_fixed_s, optional): the start term counts it, one pass or two,
 * plain or MPI; absent it is 0. At 256³ the calibration spread it over the bytes (a 64³ run's
 * engine took 52 ms for 9 ms of its bytes' work), at 512³ the rates no longer carry it. */
static void test_run_fixed(void **state)
{
    (void)state;
    struct sm_plan_rates r;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_plan_rates_parse(RATES, strlen(RATES), "r.json", &r, &err), SM_OK);
    assert_true(r.run_fixed_s == 0.0);
    struct sm_plan_work w = {.ranks = 1,
                             .threads = 1,
                             .shards = 1,
                             .in_bytes = 1000,
                             .out_value_bytes = 2000,
                             .out_bytes = 1000};
    struct sm_plan_terms t0, t1;
    sm_plan_seconds(&r, &w, &t0);
    char doc[sizeof(RATES) + 64];
    const char *at = strstr(RATES, "\"cores\"");
    snprintf(doc, sizeof(doc), "%.*s\"run_fixed_s\": 0.04, %s", (int)(at - RATES), RATES, at);
    assert_int_equal(sm_plan_rates_parse(doc, strlen(doc), "r.json", &r, &err), SM_OK);
    assert_true(r.run_fixed_s == 0.04);
    sm_plan_seconds(&r, &w, &t1);
    assert_true(fabs(t1.start - (t0.start + 0.04)) < 1e-12);
    assert_true(fabs(t1.total - (t0.total + 0.04)) < 1e-12);
    w.ranks = 2;
    w.two_pass = true;
    w.tiles = 2;
    sm_plan_seconds(&r, &w, &t1);
    assert_true(fabs(t1.start - (r.start_mpi_s + 2 * r.start_mpi_s_per_rank + 0.04)) < 1e-12);
    snprintf(doc, sizeof(doc), "%.*s\"run_fixed_s\": -1, %s", (int)(at - RATES), RATES, at);
    sm_err_clear(&err);
    assert_int_equal(sm_plan_rates_parse(doc, strlen(doc), "r.json", &r, &err), SM_E_USAGE);
    assert_non_null(strstr(err.what, "run_fixed_s"));
}

/* An http(s) or s3 input's reads (rates http_request_s, http_bytes_per_s; optional, positive when
 * present): each thread fetches its share of a pass's requests and bytes over its own connection,
 * the busiest thread's items over the pass's; the compute adds to it on a thread a core (k = 1).
 * The same work from a local input, or remote with rates that have no HTTP fetch rate, keeps the
 * file system's read term; --fs-read-bandwidth caps the connections together. */
static void test_http_term(void **state)
{
    (void)state;
    struct sm_plan_rates r;
    struct sm_err err;
    sm_err_clear(&err);
    char doc[sizeof(RATES) + 128];
    const char *at = strstr(RATES, "\"cores\"");
    assert_non_null(at);
    snprintf(doc, sizeof(doc),
             "%.*s\"fs_read_cold_bytes_per_s\": 1e9, \"http_request_s\": 0.001, "
             "\"http_bytes_per_s\": 1e8, %s",
             (int)(at - RATES), RATES, at);
    assert_int_equal(sm_plan_rates_parse(doc, strlen(doc), "r.json", &r, &err), SM_OK);
    assert_true(r.http_request_s == 0.001 && r.http_bytes_per_s == 1e8);
    /* a scan job: 10 tiles on 1 rank x 2 threads (busiest 5 of 10), 20 requests, 50 MB */
    struct sm_plan_work w = {.ranks = 1,
                             .threads = 2,
                             .two_pass = true,
                             .tiles = 10,
                             .in_bytes = 100000000,
                             .fs_read_bytes_per_s = 0};
    w.read_bytes[SM_PLAN_PASS_SCAN] = 50000000;
    w.read_requests[SM_PLAN_PASS_SCAN] = 20;
    w.read_amp[SM_PLAN_PASS_SCAN] = 1.0;
    struct sm_plan_terms local, remote, capped, none;
    sm_plan_seconds(&r, &w, &local); /* not remote: no bandwidth given, no read term */
    const double cpu = 5 * 1e7 * 1e-9;
    assert_true(local.read[SM_PLAN_PASS_SCAN] == 0.0 && fabs(local.scan - cpu) < 1e-12);
    w.remote = true;
    sm_plan_seconds(&r, &w, &remote);
    const double fetch = 0.5 * (20 * 0.001 + 5e7 / 1e8); /* 0.26 s */
    assert_true(fabs(remote.read[SM_PLAN_PASS_SCAN] - fetch) < 1e-12);
    assert_true(fabs(remote.scan - (cpu + fetch)) < 1e-12); /* k = 1: they add */
    assert_true(fabs(remote.total - (local.total + fetch)) < 1e-12);
    /* 1 x 4 threads on 2 cores (k = 2): the busiest thread's 3 of 10 tiles, its compute half
     * hidden behind the others' waits */
    w.threads = 4;
    struct sm_plan_terms four;
    sm_plan_seconds(&r, &w, &four);
    const double fetch4 = 0.3 * (20 * 0.001 + 5e7 / 1e8); /* busiest 3 of 10 tiles */
    assert_true(fabs(four.read[SM_PLAN_PASS_SCAN] - fetch4) < 1e-12);
    assert_true(fabs(four.scan - (fmax(3 * 1e7 * 1e-9 * 2, fetch4) +
                                  fmin(3 * 1e7 * 1e-9 * 2, fetch4) / 2)) < 1e-12);
    w.threads = 2;
    /* an aggregate cap (--fs-read-bandwidth) slower than the connections sets the read */
    w.fs_read_bytes_per_s = 1e7;
    sm_plan_seconds(&r, &w, &capped);
    assert_true(fabs(capped.read[SM_PLAN_PASS_SCAN] - 5.0) < 1e-12);
    /* the write pass of a one-pass convert: its shards' share (1 of 2 shards on 2 ranks) */
    struct sm_plan_work cw = {.ranks = 2,
                              .threads = 1,
                              .mpi = true,
                              .remote = true,
                              .shards = 2,
                              .in_bytes = 1000,
                              .out_value_bytes = 2000};
    cw.read_bytes[SM_PLAN_PASS_WRITE] = 1000000;
    cw.read_requests[SM_PLAN_PASS_WRITE] = 8;
    struct sm_plan_terms ct;
    sm_plan_seconds(&r, &cw, &ct);
    assert_true(fabs(ct.read[SM_PLAN_PASS_WRITE] - 0.5 * (8 * 0.001 + 1e6 / 1e8)) < 1e-12);
    /* rates without the HTTP members: the file system's read, as before */
    struct sm_plan_rates old = r;
    old.http_request_s = old.http_bytes_per_s = 0;
    w.fs_read_bytes_per_s = 1e9;
    sm_plan_seconds(&old, &w, &none);
    assert_true(fabs(none.read[SM_PLAN_PASS_SCAN] - 0.05) < 1e-12);
    /* present, the members must be positive */
    snprintf(doc, sizeof(doc), "%.*s\"http_bytes_per_s\": 0, %s", (int)(at - RATES), RATES, at);
    sm_err_clear(&err);
    assert_int_equal(sm_plan_rates_parse(doc, strlen(doc), "r.json", &r, &err), SM_E_USAGE);
    assert_non_null(strstr(err.what, "http_bytes_per_s"));
    snprintf(doc, sizeof(doc), "%.*s\"http_request_s\": -1, %s", (int)(at - RATES), RATES, at);
    sm_err_clear(&err);
    assert_int_equal(sm_plan_rates_parse(doc, strlen(doc), "r.json", &r, &err), SM_E_USAGE);
    assert_non_null(strstr(err.what, "http_request_s"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rates_parse),       cmocka_unit_test(test_rates_refused),
        cmocka_unit_test(test_seconds_by_hand),   cmocka_unit_test(test_rates_fs_read),
        cmocka_unit_test(test_pass_read_bytes),   cmocka_unit_test(test_seconds_reads),
        cmocka_unit_test(test_fs_bandwidth),      cmocka_unit_test(test_peak_rss_parts),
        cmocka_unit_test(test_export_term),       cmocka_unit_test(test_rates_kinds),
        cmocka_unit_test(test_source_rates_name), cmocka_unit_test(test_run_fixed),
        cmocka_unit_test(test_encoded_share),     cmocka_unit_test(test_http_term),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
