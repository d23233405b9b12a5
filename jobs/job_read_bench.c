/* The `read-bench` job (SPEC §4, §8 W3): timed typed region reads (sm_array_read_region) with the
 * read counters. A case is one region: roi.offset plus, for each value e of read_bench.extents, a
 * shape of e along every axis (without extents, the one ROI). Each case opens store and array
 * afresh (the first reuses the open that validated the cases), so its caches start cold and its
 * counters are its own; it reads the region read_bench.warmup times untimed, then
 * read_bench.repeats times timed (read_ns: the call alone, min / median / max), and checks that
 * every read returns the same SPEC §5 checksums (a self-verifying run). Stage times: `open` (store
 * and metadata, every case), `hydrate` and `decode` (fetch and codec time inside the reads,
 * warm-ups included), `read` (the timed reads); `total` is wall. One process: ranks would contend
 * for the same I/O and blur the timings. */
#include "jobs_run.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shardmill/alloc.h>
#include <shardmill/clock.h>
#include <shardmill/codec.h>
#include <shardmill/stats.h>

#include "jobs.h"
#include "progress.h"
#include "report.h"

struct rb_case {
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    uint64_t voxels, bytes;
};

/* "[7, 11]" */
static const char *dims_str(const uint64_t *v, unsigned n, char *buf, size_t cap)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (unsigned i = 0; i < n && k < cap; i++) {
        k += (size_t)snprintf(buf + k, cap - k, "%s%" PRIu64, i == 0 ? "" : ", ", v[i]);
    }
    if (k < cap) {
        snprintf(buf + k, cap - k, "]");
    }
    return buf;
}

/* The cases of the config for this array, checked against its shape and limits.memory_bytes
 * before any payload is read. SM_E_USAGE naming the key for a region outside the array. */
static sm_status make_cases(const struct sm_job_config *c, const struct sm_array_meta *m,
                            struct rb_case *cases, unsigned *ncases, struct sm_err *err)
{
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    SM_TRY(sm_job_roi(c, m, off, shape, err));
    const bool ext = c->read_bench.extents.set;
    const unsigned n = ext ? c->read_bench.extents.n : 1;
    const char *key = ext ? "read_bench.extents" : c->roi.shape.set ? "roi.shape" : "roi.offset";
    for (unsigned i = 0; i < n; i++) {
        struct rb_case *k = &cases[i];
        k->voxels = 1;
        bool inside = true, overflow = false;
        for (unsigned d = 0; d < m->ndim; d++) {
            k->off[d] = off[d];
            k->shape[d] = ext ? c->read_bench.extents.v[i] : shape[d];
            inside = inside && k->shape[d] > 0 && k->off[d] < m->shape[d] &&
                     k->shape[d] <= m->shape[d] - k->off[d];
            overflow = overflow || __builtin_mul_overflow(k->voxels, k->shape[d], &k->voxels);
        }
        if (!inside) {
            char a[200], b[200], s[200];
            SM_FAIL_AT(err, SM_E_USAGE, key, "the region %s + %s is outside the array of shape %s",
                       dims_str(k->off, m->ndim, a, sizeof(a)),
                       dims_str(k->shape, m->ndim, b, sizeof(b)),
                       dims_str(m->shape, m->ndim, s, sizeof(s)));
        }
        const uint64_t elem = sm_dtype_size(m->dtype);
        if (overflow || __builtin_mul_overflow(k->voxels, elem, &k->bytes) ||
            k->bytes > c->limits.memory_bytes || k->bytes > SIZE_MAX) {
            char b[200];
            SM_FAIL_AT(err, SM_E_LIMIT, key,
                       "a region of shape %s does not fit in limits.memory_bytes (%" PRIu64
                       " bytes)",
                       dims_str(k->shape, m->ndim, b, sizeof(b)), c->limits.memory_bytes);
        }
    }
    *ncases = n;
    return SM_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* {"min", "median", "max", "mean", "samples"}: the median of an even count is the mean of the
 * two middle samples (rounded down). */
static json_t *ns_json(const uint64_t *ns, uint64_t n, uint64_t *median)
{
    uint64_t *s = sm_malloc(n * sizeof(uint64_t));
    json_t *samples = json_array();
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        json_array_append_new(samples, sm_json_u64(ns[i]));
        sum += ns[i];
    }
    uint64_t lo = 0, med = 0, hi = 0;
    if (s != NULL) {
        memcpy(s, ns, n * sizeof(uint64_t));
        qsort(s, n, sizeof(uint64_t), cmp_u64);
        lo = s[0];
        hi = s[n - 1];
        med = n % 2 == 1 ? s[n / 2] : s[n / 2 - 1] + (s[n / 2] - s[n / 2 - 1]) / 2;
        sm_free(s);
    }
    *median = med;
    return json_pack("{s:o,s:o,s:o,s:o,s:o}", "min", sm_json_u64(lo), "median", sm_json_u64(med),
                     "max", sm_json_u64(hi), "mean", sm_json_u64(sum / n), "samples", samples);
}

/* Outer chunks (shards when sharded) and inner chunks a box touches. */
static void touched(const struct sm_array_meta *m, const struct rb_case *k, uint64_t *outer,
                    uint64_t *inner)
{
    *outer = 1;
    *inner = m->inner_ndim != 0 ? 1 : 0;
    for (unsigned d = 0; d < m->ndim; d++) {
        const uint64_t end = k->off[d] + k->shape[d] - 1;
        *outer *= end / m->chunk_shape[d] - k->off[d] / m->chunk_shape[d] + 1;
        if (m->inner_ndim != 0) {
            *inner *= end / m->inner_chunk_shape[d] - k->off[d] / m->inner_chunk_shape[d] + 1;
        }
    }
}

/* Totals over the cases, for the report's top level. */
struct rb_totals {
    uint64_t open_ns, fetch_ns, decode_ns, read_ns, voxels, voxels_read;
    struct sm_checksums sums;
    struct sm_run_io io; /* counters summed, peaks the maximum */
};

/* One case: warm-ups, timed reads, the same checksums from each; its report entry in *out. */
static sm_status run_case(const struct sm_job_config *c, struct sm_store *store, struct sm_array *a,
                          const struct rb_case *k, uint64_t open_ns, struct sm_progress *pg,
                          uint64_t *reads_done, struct rb_totals *tot, json_t **out,
                          struct sm_err *err)
{
    const struct sm_array_meta *m = sm_array_meta(a);
    const uint64_t reps = c->read_bench.repeats, warm = c->read_bench.warmup;
    uint64_t stride[SM_MAX_DIMS];
    for (unsigned d = m->ndim; d-- > 0;) {
        stride[d] = d + 1 < m->ndim ? stride[d + 1] * m->shape[d + 1] : 1;
    }
    struct sm_scratch *scratch = NULL;
    uint8_t *buf = sm_malloc((size_t)k->bytes);
    uint64_t *ns = sm_calloc(reps, sizeof(uint64_t));
    sm_status st = SM_OK;
    if (buf == NULL || ns == NULL) {
        st = SM_ERR(err, SM_E_NOMEM, "cannot allocate a region of %" PRIu64 " bytes", k->bytes);
    }
    if (st == SM_OK) {
        st = sm_scratch_new(&scratch, err);
    }
    struct sm_checksums ref = {0, 0};
    for (uint64_t r = 0; st == SM_OK && r < warm + reps; r++) {
        st = sm_stop_check(sm_signals_flag(), err); /* SIGTERM/SIGINT: stop before the next read */
        if (st != SM_OK) {
            break;
        }
        const uint64_t t0 = sm_clock_ns();
        st = sm_array_read_region(a, k->off, k->shape, buf, (size_t)k->bytes, scratch, err);
        const uint64_t dt = sm_clock_ns() - t0;
        if (st != SM_OK) {
            break;
        }
        if (r >= warm) {
            ns[r - warm] = dt;
        }
        struct sm_checksums cs = {0, 0}; /* SPEC §5, i = the linear index in the whole array */
        sm_checksums_add_box(&cs, m->dtype, buf, m->ndim, stride, k->off, k->shape);
        if (r == 0) {
            ref = cs;
        } else if (cs.sum != ref.sum || cs.weighted != ref.weighted) {
            st = SM_ERR(err, SM_E_INTERNAL,
                        "read %" PRIu64 " of the region returned other values than read 1 "
                        "(checksum %" PRId64 ", not %" PRId64 ")",
                        r + 1, (int64_t)cs.sum, (int64_t)ref.sum);
        }
        ++*reads_done;
        sm_progress_update(pg, *reads_done, *reads_done * k->bytes);
    }
    sm_scratch_free(scratch);
    sm_free(buf);
    if (st != SM_OK) {
        sm_free(ns);
        return st;
    }
    struct sm_array_stats as;
    sm_array_stats(a, &as);
    uint64_t median = 0, read_sum = 0, outer = 0, inner = 0;
    for (uint64_t r = 0; r < reps; r++) {
        read_sum += ns[r];
    }
    json_t *times = ns_json(ns, reps, &median);
    sm_free(ns);
    touched(m, k, &outer, &inner);
    const double med_s = (double)median / 1e9;
    json_t *o = json_object();
    json_object_set_new(o, "offset", sm_json_u64_array(k->off, m->ndim));
    json_object_set_new(o, "shape", sm_json_u64_array(k->shape, m->ndim));
    json_object_set_new(o, "voxels", sm_json_u64(k->voxels));
    json_object_set_new(o, "bytes", sm_json_u64(k->bytes));
    json_object_set_new(o, "warmup", sm_json_u64(warm));
    json_object_set_new(o, "repetitions", sm_json_u64(reps));
    json_object_set_new(o, "read_ns", times);
    json_object_set_new(o, "voxels_per_s", json_real(med_s > 0 ? (double)k->voxels / med_s : 0));
    json_object_set_new(o, "bytes_per_s", json_real(med_s > 0 ? (double)k->bytes / med_s : 0));
    json_object_set_new(o, "checksum", sm_json_checksum_i64((int64_t)ref.sum));
    json_object_set_new(o, "weighted_checksum", sm_json_checksum_u64(ref.weighted));
    json_object_set_new(o, "open_ms", json_real(sm_ms(open_ns)));
    json_object_set_new(o, "chunks_touched", sm_json_u64(outer));
    json_object_set_new(o, "inner_chunks_touched",
                        m->inner_ndim != 0 ? sm_json_u64(inner) : json_null());
    json_object_set_new(o, "chunks",
                        json_pack("{s:o,s:o,s:o,s:o}", "read", sm_json_u64(as.chunks_read),
                                  "missing", sm_json_u64(as.chunks_missing), "inner_read",
                                  sm_json_u64(as.inner_chunks_read), "inner_missing",
                                  sm_json_u64(as.inner_chunks_missing)));
    struct sm_run_io io;
    sm_run_io_of(store, a, &io);
    json_object_set_new(o, "io", sm_json_io(&io));
    sm_run_io_add(&tot->io, &io);
    *out = o;
    tot->open_ns += open_ns;
    tot->fetch_ns += as.fetch_ns;
    tot->decode_ns += as.decode_ns;
    tot->read_ns += read_sum;
    tot->voxels += k->voxels;
    tot->voxels_read += k->voxels * reps;
    tot->sums.sum += ref.sum;
    tot->sums.weighted += ref.weighted;
    return SM_OK;
}

/* The report (SPEC §7): the sections of every job (report.c), null where read-bench has nothing
 * to say, with its own `result` and timings, plus `read_bench` with the cases. */
static json_t *make_report(const struct sm_job_config *c, const struct sm_array_meta *m,
                           const struct rb_case *cases, unsigned ncases, json_t *case_list,
                           const struct rb_totals *tot, uint64_t total_ns)
{
    uint64_t box[SM_MAX_DIMS] = {0}; /* the ROI: the box holding every case */
    for (unsigned i = 0; i < ncases; i++) {
        for (unsigned d = 0; d < m->ndim; d++) {
            const uint64_t e = cases[i].shape[d];
            box[d] = e > box[d] ? e : box[d];
        }
    }
    json_t *res = json_object();
    json_object_set_new(res, "voxels", sm_json_u64(tot->voxels));
    json_object_set_new(res, "voxels_processed", sm_json_u64(tot->voxels_read));
    json_object_set_new(res, "tiles", json_null());
    json_object_set_new(res, "checksum", sm_json_checksum_i64((int64_t)tot->sums.sum));
    json_object_set_new(res, "weighted_checksum", sm_json_checksum_u64(tot->sums.weighted));
    json_object_set_new(res, "histogram", json_null());
    json_object_set_new(res, "normalization", json_null());
    json_object_set_new(res, "output_checksum", json_null());
    json_object_set_new(res, "output_weighted_checksum", json_null());
    const double secs = (double)tot->read_ns / 1e9;
    const struct sm_report_parts p = {
        .job = "read-bench",
        .ranks = 1,
        .threads = 1, /* one read call at a time */
        .input = sm_report_array_input(c->input.store, c->input.array, m),
        .ndim = m->ndim,
        .roi_offset = cases[0].off,
        .roi_shape = box,
        .passes = sm_json_u64(c->read_bench.repeats),
        .result = res,
        .io = sm_json_io(&tot->io),
        .timing = json_pack("{s:f,s:f,s:f,s:f,s:n,s:n,s:n,s:f}", "total", sm_ms(total_ns), "open",
                            sm_ms(tot->open_ns), "hydrate", sm_ms(tot->fetch_ns), "decode",
                            sm_ms(tot->decode_ns), "process", "allreduce", "write", "read",
                            sm_ms(tot->read_ns)),
        .peak_rss_bytes = sm_peak_rss_bytes(),
        .voxels_per_s = secs > 0 ? (double)tot->voxels_read / secs : 0.0,
    };
    json_t *rep = sm_report_new(&p);
    const bool icache = c->input.index_cache_bytes > 0 && c->input.index_cache_entries > 0;
    json_object_set_new(
        rep, "read_bench",
        json_pack("{s:o,s:o,s:{s:b,s:o},s:{s:b,s:o,s:o},s:o}", "repeats",
                  sm_json_u64(c->read_bench.repeats), "warmup", sm_json_u64(c->read_bench.warmup),
                  "cache", "enabled", c->input.cache_enabled, "max_bytes",
                  sm_json_u64(c->input.cache_max_bytes), "index_cache", "enabled", icache,
                  "max_bytes", sm_json_u64(c->input.index_cache_bytes), "max_entries",
                  sm_json_u64(c->input.index_cache_entries), "cases", json_incref(case_list)));
    return rep;
}

sm_status sm_job_read_bench(const struct sm_job_config *c, const char *report_path,
                            struct sm_err *err)
{
    const uint64_t t_start = sm_clock_ns();
    struct sm_store *store = NULL;
    struct sm_array *a = NULL;
    SM_TRY(sm_job_open_input(c, &store, &a, err));
    uint64_t open_ns = sm_clock_ns() - t_start;
    struct rb_case cases[SM_CFG_MAX_DIMS];
    unsigned ncases = 0;
    sm_status st = make_cases(c, sm_array_meta(a), cases, &ncases, err);
    const uint64_t per_case = c->read_bench.warmup + c->read_bench.repeats;
    struct sm_progress pg;
    sm_progress_begin(&pg, c, "read-bench", "read", "reads", (uint64_t)ncases * per_case);
    json_t *case_list = json_array();
    struct rb_totals tot;
    memset(&tot, 0, sizeof(tot));
    uint64_t reads = 0;
    for (unsigned i = 0; st == SM_OK && i < ncases; i++) {
        if (i > 0) { /* a fresh store and array: cold caches, the case's own counters */
            sm_array_close(a);
            sm_store_close(store);
            a = NULL;
            store = NULL;
            const uint64_t t0 = sm_clock_ns();
            st = sm_job_open_input(c, &store, &a, err);
            open_ns = sm_clock_ns() - t0;
        }
        json_t *o = NULL;
        if (st == SM_OK) {
            st = run_case(c, store, a, &cases[i], open_ns, &pg, &reads, &tot, &o, err);
        }
        if (st == SM_OK) {
            json_array_append_new(case_list, o);
        }
    }
    sm_progress_end(&pg, st == SM_OK);
    if (st == SM_OK) {
        json_t *rep = make_report(c, sm_array_meta(a), cases, ncases, case_list, &tot,
                                  sm_clock_ns() - t_start);
        st = rep != NULL ? sm_report_emit(report_path != NULL ? report_path : c->report, rep, err)
                         : SM_ERR(err, SM_E_NOMEM, "cannot build the report");
        json_decref(rep);
    }
    json_decref(case_list);
    sm_array_close(a);
    sm_store_close(store);
    return st;
}
