/* The `scan` job (SPEC §4, §5, §7): tiles over the ROI in C order, `passes` traversals without
 * reopening metadata, OpenMP threads over tiles; histogram, checksum and weighted checksum per
 * SPEC §5; every pass must agree. Stage times in the report: `open` is the wall time of opening
 * store and metadata; `hydrate`, `decode` and `process` are the time threads spent fetching
 * encoded bytes, running codecs, and computing statistics, summed over threads and divided by the
 * thread count (so they compare with wall time); `total` is the wall time of the whole job.
 * Under MPI (docs/internals/ranks.md) each rank scans its run of tiles (parallel.partition) and
 * the results are summed over ranks; rank 0 writes the report, with counters summed over ranks
 * and timings as the maximum over ranks (flat fields) plus timing_ms.max and timing_ms.mean. */
#include "jobs_run.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include <shardmill/clock.h>
#include <shardmill/par.h>
#include <shardmill/tile.h>

#include "jobs.h"
#include "progress.h"
#include "report.h"

static bool same_result(const struct sm_scan_result *a, const struct sm_scan_result *b)
{
    return a->sums.sum == b->sums.sum && a->sums.weighted == b->sums.weighted &&
           a->voxels == b->voxels && a->hist.underflow == b->hist.underflow &&
           a->hist.overflow == b->hist.overflow && a->hist.nan == b->hist.nan &&
           memcmp(a->hist.counts, b->hist.counts, a->hist.bins * sizeof(uint64_t)) == 0;
}

sm_status sm_job_scan(const struct sm_job_config *c, const char *report_path, struct sm_err *err)
{
    const uint64_t t_start = sm_clock_ns();
    struct sm_store *store = NULL;
    struct sm_array *a = NULL;
    /* phase: open (agreed, so a rank that cannot open its input stops every rank) */
    SM_TRY(sm_par_agree(sm_job_open_input(c, &store, &a, err), err));
    const uint64_t t_open = sm_clock_ns() - t_start;
    const struct sm_array_meta *m = sm_array_meta(a);

    struct sm_scan_setup su;
    struct sm_scan_result first = {0}, r = {0};
    sm_status st = sm_par_agree(sm_job_scan_setup(c, m, &su, err), err);
    const bool agreed_failure = st != SM_OK;
    const struct sm_tiling t = su.tiling;
    struct sm_scan_params p = su.params;
    const uint64_t *off = su.off, *shape = su.shape, *tile = su.tile;
    struct sm_part mine = {0, 0, 0};
    if (st == SM_OK) {
        st = sm_job_rank_part(c, m, &t, &mine, err); /* local: the failure is agreed below */
    }
    const uint64_t tfirst = mine.first, tcount = mine.count;
    uint64_t process_ns = 0;
    struct sm_progress pg;
    sm_progress_begin(&pg, c, "scan", "scan", "tiles", t.ntiles * c->passes);
    p.progress = sm_progress_update;
    p.progress_user = &pg;
    p.stop = sm_signals_flag();
    for (uint64_t pass = 0; st == SM_OK && pass < c->passes; pass++) {
        sm_progress_next_call(&pg);
        st = sm_scan_tiles(a, &t, tfirst, tcount, &p, pass == 0 ? &first : &r, err);
        process_ns += pass == 0 ? first.process_ns : r.process_ns;
        if (st == SM_OK && pass > 0) {
            if (!same_result(&first, &r)) {
                sm_err_set(err, SM_E_INTERNAL, __FILE__, __LINE__,
                           "pass %llu disagrees with pass 1", (unsigned long long)pass + 1);
                st = err->status;
            }
            sm_scan_result_destroy(&r);
        }
    }
    sm_progress_end(&pg, st == SM_OK); /* every rank, success or not */
    /* phase: scan */
    const uint64_t t_red = sm_clock_ns();
    if (!agreed_failure) {
        st = sm_par_agree(sm_job_stop_check(st, err), err);
    }
    if (st == SM_OK) {
        st = sm_job_reduce_scan(&first, err);
    }
    const uint64_t allreduce_ns = sm_clock_ns() - t_red;
    const uint64_t t_total = sm_clock_ns() - t_start;
    if (st == SM_OK) {
        const int threads = p.threads > 0 ? p.threads : sm_tile_default_threads();
        struct sm_array_stats as;
        sm_array_stats(a, &as);
        json_t *rep = json_object();
        json_object_set_new(rep, "engine", sm_json_engine());
        json_object_set_new(rep, "job", json_string("scan"));
        json_object_set_new(rep, "ranks", json_integer(sm_par_size()));
        json_object_set_new(rep, "threads", json_integer(threads));
        json_object_set_new(rep, "input", sm_job_input_json(c, m));
        json_object_set_new(rep, "roi",
                            json_pack("{s:o,s:o}", "offset", sm_json_dims(off, m->ndim), "shape",
                                      sm_json_dims(shape, m->ndim)));
        json_object_set_new(rep, "tile", sm_json_dims(tile, m->ndim));
        json_object_set_new(rep, "passes", sm_json_u64(c->passes));
        json_t *res = json_object();
        json_object_set_new(res, "voxels", sm_json_u64(first.voxels));
        json_object_set_new(res, "voxels_processed", sm_json_u64(first.voxels * c->passes));
        json_object_set_new(res, "tiles", sm_json_u64(first.tiles));
        json_object_set_new(res, "checksum", json_integer((json_int_t)first.sums.sum));
        json_object_set_new(res, "weighted_checksum", sm_json_u64(first.sums.weighted));
        json_object_set_new(res, "histogram", sm_json_hist(&first.hist));
        /* SPEC §7: what a scan does not do is null, not missing */
        json_object_set_new(res, "normalization", json_null());
        json_object_set_new(res, "output_checksum", json_null());
        json_object_set_new(res, "output_weighted_checksum", json_null());
        json_object_set_new(rep, "result", res);
        json_t *io = sm_json_io(store, &as);
        json_object_set_new(rep, "io", io);
        const double per = (double)threads;
        json_t *timing = json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "total", sm_ms(t_total), "open",
                                   sm_ms(t_open), "hydrate", sm_ms(as.fetch_ns) / per, "decode",
                                   sm_ms(as.decode_ns) / per, "process", sm_ms(process_ns) / per,
                                   "allreduce", sm_ms(allreduce_ns), "write", 0.0);
        json_object_set_new(rep, "timing_ms", timing);
        uint64_t peak = sm_peak_rss_bytes();
        st = sm_job_reduce_counters(io, err);
        if (st == SM_OK) {
            st = sm_job_reduce_timings(timing, err);
        }
        if (st == SM_OK) {
            st = sm_par_max_u64(&peak, 1, err);
        }
        json_object_set_new(rep, "memory", json_pack("{s:o}", "peak_rss_bytes", sm_json_u64(peak)));
        json_object_set_new(rep, "output", json_null());
        const double secs = json_number_value(json_object_get(timing, "total")) / 1e3;
        json_object_set_new(rep, "figure_of_merit",
                            json_pack("{s:f}", "voxels_per_s",
                                      secs > 0 ? (double)(first.voxels * c->passes) / secs : 0.0));
        const char *path = report_path != NULL ? report_path : c->report;
        if (st == SM_OK && sm_par_rank() == 0) {
            st = sm_report_emit(path, rep, err); /* the JSON to `path`, a summary to stdout */
        }
        json_decref(rep);
        /* phase: report (rank 0's write failure fails every rank) */
        st = sm_par_agree(st, err);
    }
    sm_scan_result_destroy(&first);
    sm_array_close(a);
    sm_store_close(store);
    return st;
}
