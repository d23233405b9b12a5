/* The estimate's arithmetic (plan_model.h): scaling/MODEL.md's local model over calibrated
 * rates, and the peak-RSS bound. */
#include "plan_model.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <shardmill/meta.h>
#include <shardmill/store.h>

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return b == 0 ? 0 : a / b + (a % b != 0);
}

static sm_status need_number(json_t *o, const char *key, bool positive, double *out,
                             const char *where, struct sm_err *err)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v) || json_number_value(v) < 0 || (positive && json_number_value(v) <= 0)) {
        SM_FAIL_AT(err, SM_E_USAGE, where, "rates member '%s' is %s", key,
                   v == NULL  ? "missing"
                   : positive ? "not a positive number"
                              : "not a number >= 0");
    }
    *out = json_number_value(v);
    return SM_OK;
}

static void copy_text(json_t *o, const char *key, char *dst, size_t cap)
{
    const char *s = json_string_value(json_object_get(o, key));
    snprintf(dst, cap, "%s", s != NULL ? s : "unknown");
}

/* A member of rates.sources.<name> or rates.by_dtype.<name>: a number >= 0 when present. */
static sm_status kind_number(json_t *o, const char *kind, const char *name, const char *key,
                             double *out, const char *where, struct sm_err *err)
{
    json_t *v = json_object_get(o, key);
    if (v == NULL) {
        return SM_OK;
    }
    if (!json_is_number(v) || json_number_value(v) < 0) {
        SM_FAIL_AT(err, SM_E_USAGE, where, "rates member '%s.%s.%s' is %s", kind, name, key,
                   "not a number >= 0");
    }
    *out = json_number_value(v);
    return SM_OK;
}

/* The optional objects rates.sources and rates.by_dtype (at most SM_PLAN_RATE_KINDS each). */
static sm_status parse_kinds(json_t *rt, struct sm_plan_rates *r, const char *where,
                             struct sm_err *err)
{
    const char *name;
    json_t *v;
    size_t i = 0;
    json_object_foreach(json_object_get(rt, "sources"), name, v)
    {
        if (i >= SM_PLAN_RATE_KINDS || !json_is_object(v)) {
            continue;
        }
        struct sm_plan_source_rates *s = &r->sources[i++];
        snprintf(s->name, sizeof(s->name), "%s", name);
        SM_TRY(kind_number(v, "sources", name, "scan_s_per_byte", &s->scan_s_per_byte, where, err));
        SM_TRY(kind_number(v, "sources", name, "decode_s_per_byte", &s->decode_s_per_byte, where,
                           err));
        SM_TRY(kind_number(v, "sources", name, "read_s_per_byte", &s->read_s_per_byte, where, err));
    }
    i = 0;
    json_object_foreach(json_object_get(rt, "by_dtype"), name, v)
    {
        if (i >= SM_PLAN_RATE_KINDS || !json_is_object(v)) {
            continue;
        }
        struct sm_plan_dtype_rates *d = &r->dtypes[i++];
        snprintf(d->name, sizeof(d->name), "%s", name);
        SM_TRY(
            kind_number(v, "by_dtype", name, "write_s_per_byte", &d->write_s_per_byte, where, err));
        SM_TRY(kind_number(v, "by_dtype", name, "pyramid_s_per_byte", &d->pyramid_s_per_byte, where,
                           err));
    }
    return SM_OK;
}

static double or_else(double v, double fallback)
{
    return v > 0 ? v : fallback;
}

const char *sm_plan_source_rates_name(const char *format, bool random_access)
{
    if (format != NULL && random_access &&
        (strcmp(format, "tiff") == 0 || strcmp(format, "hdf5") == 0)) {
        return "raw";
    }
    return format;
}

void sm_plan_rates_for(const struct sm_plan_rates *r, bool scan_job, const char *source,
                       const char *out_dtype, struct sm_plan_rates *eff)
{
    *eff = *r;
    eff->read_s_per_byte = or_else(r->read_s_per_byte, r->scan_s_per_byte);
    if (scan_job) {
        eff->scan_s_per_byte = or_else(r->scan_job_s_per_byte, r->scan_s_per_byte);
    }
    for (int i = 0; source != NULL && i < SM_PLAN_RATE_KINDS && r->sources[i].name[0]; i++) {
        const struct sm_plan_source_rates *s = &r->sources[i];
        if (strcmp(s->name, source) == 0) {
            eff->scan_s_per_byte = or_else(s->scan_s_per_byte, r->scan_s_per_byte);
            eff->decode_s_per_byte = or_else(s->decode_s_per_byte, r->decode_s_per_byte);
            eff->read_s_per_byte = or_else(s->read_s_per_byte, eff->scan_s_per_byte);
        }
    }
    for (int i = 0; out_dtype != NULL && i < SM_PLAN_RATE_KINDS && r->dtypes[i].name[0]; i++) {
        const struct sm_plan_dtype_rates *d = &r->dtypes[i];
        if (strcmp(d->name, out_dtype) == 0) {
            eff->write_s_per_byte = or_else(d->write_s_per_byte, r->write_s_per_byte);
            eff->pyramid_s_per_byte = or_else(d->pyramid_s_per_byte, r->pyramid_s_per_byte);
        }
    }
}

sm_status sm_plan_rates_parse(const char *text, size_t len, const char *where,
                              struct sm_plan_rates *r, struct sm_err *err)
{
    memset(r, 0, sizeof(*r));
    json_t *o = NULL; /* meta.h's one JSON reader; a rates file is configuration: exit 2 */
    struct sm_err je;
    sm_err_clear(&je);
    if (sm_json_load(text, len, where, &o, &je) != SM_OK) {
        SM_FAIL_AT(err, SM_E_USAGE, where, "not a rates document: %s", je.what);
    }
    json_t *rt = json_object_get(o, "rates");
    const struct {
        const char *key;
        bool positive;
        double *dst;
    } nums[] = {{"cores", true, &r->cores},
                {"scan_s_per_byte", true, &r->scan_s_per_byte},
                {"decode_s_per_byte", false, &r->decode_s_per_byte},
                {"write_s_per_byte", true, &r->write_s_per_byte},
                {"shard_fixed_s", false, &r->shard_fixed_s},
                {"pyramid_s_per_byte", false, &r->pyramid_s_per_byte},
                {"syncfs_bytes_per_s", true, &r->syncfs_bytes_per_s},
                {"syncfs_fixed_s", false, &r->syncfs_fixed_s},
                {"rename_s", false, &r->rename_s},
                {"finish_s_per_shard", false, &r->finish_s_per_shard},
                {"start_plain_s", false, &r->start_plain_s},
                {"start_mpi_s", false, &r->start_mpi_s},
                {"start_mpi_s_per_rank", false, &r->start_mpi_s_per_rank},
                {"allreduce_s", false, &r->allreduce_s}};
    sm_status st = json_is_object(rt)
                       ? SM_OK
                       : SM_ERR(err, SM_E_USAGE, "rates document has no 'rates' object");
    if (st != SM_OK) {
        sm_err_where(err, "%s", where);
    }
    for (size_t i = 0; st == SM_OK && i < sizeof(nums) / sizeof(nums[0]); i++) {
        st = need_number(rt, nums[i].key, nums[i].positive, nums[i].dst, where, err);
    }
    double base = 0, base_mpi = 0;
    if (st == SM_OK) {
        st = need_number(rt, "baseline_rss_bytes", true, &base, where, err);
    }
    if (st == SM_OK) {
        st = need_number(rt, "baseline_rss_mpi_bytes", true, &base_mpi, where, err);
    }
    r->baseline_rss_bytes = (uint64_t)base;
    r->baseline_rss_mpi_bytes = (uint64_t)base_mpi;
    /* optional members (rates files calibrated before issue 33, or before the HTTP fetch rate,
     * have no read bandwidths or HTTP rates: those positive when present; the others >= 0) */
    const struct {
        const char *key;
        bool positive;
        double *dst;
    } opt[] = {
        {"fs_read_cold_bytes_per_s", true, &r->fs_read_cold_bytes_per_s},
        {"fs_read_warm_bytes_per_s", true, &r->fs_read_warm_bytes_per_s},
        {"http_request_s", true, &r->http_request_s},
        {"http_bytes_per_s", true, &r->http_bytes_per_s},
        {"read_s_per_byte", false, &r->read_s_per_byte},
        {"scan_job_s_per_byte", false, &r->scan_job_s_per_byte},
        {"export_s_per_byte", false, &r->export_s_per_byte},
        {"run_fixed_s", false, &r->run_fixed_s},
        {"inner_efficiency", false, &r->inner_efficiency},
    };
    r->inner_efficiency = 1.0;
    for (size_t i = 0; st == SM_OK && i < sizeof(opt) / sizeof(opt[0]); i++) {
        if (json_object_get(rt, opt[i].key) != NULL) {
            st = need_number(rt, opt[i].key, opt[i].positive, opt[i].dst, where, err);
        }
    }
    if (st == SM_OK) {
        st = parse_kinds(rt, r, where, err);
    }
    copy_text(o, "machine", r->machine, sizeof(r->machine));
    copy_text(o, "filesystem", r->filesystem, sizeof(r->filesystem));
    copy_text(o, "cache", r->cache, sizeof(r->cache));
    copy_text(o, "calibrated_utc", r->calibrated, sizeof(r->calibrated));
    json_decref(o);
    return st;
}

const char *sm_plan_pass_name(enum sm_plan_pass p)
{
    return p == SM_PLAN_PASS_RANGE ? "range" : p == SM_PLAN_PASS_SCAN ? "scan" : "write";
}

uint64_t sm_plan_pass_read_bytes(uint64_t pass_bytes, uint64_t roi_bytes, uint64_t disk_bytes)
{
    if (roi_bytes == 0) {
        return disk_bytes;
    }
    return (uint64_t)((double)disk_bytes * ((double)pass_bytes / (double)roi_bytes) + 0.5);
}

/* A pass's compute and its reads (each of them the busiest thread's): a worker reads its input
 * synchronously (the hydrate of engine/run is inside the worker's time), so with no more threads
 * than cores a wait adds to the compute; with k threads a core, the others' compute fills all but
 * 1/k of it. ome-u8-1024 (2x1, input read from the disk at 0.45 GB/s): hydrate 2.4 s + compute
 * 6.0 s each rank, where max() counted the compute alone (plan -33 %). */
static double with_reads(double cpu, double io, double k)
{
    return fmax(cpu, io) + fmin(cpu, io) / k;
}

/* with_reads() for a pass that reads the next of its `groups` groups while it works on the
 * current one (sm_cv_groups): only the first group's read waits, and each later read overlaps
 * the group before it, (cpu + io) / G + (G - 1) / G * max(cpu, io). */
static double with_reads_ahead(double cpu, double io, double k, uint64_t groups)
{
    if (groups < 2) {
        return with_reads(cpu, io, k);
    }
    const double g = (double)groups;
    return (cpu + io) / g + (g - 1.0) / g * fmax(cpu, io);
}

/* Work items of the busiest thread: ⌈⌈n/R⌉/T⌉ (the engine splits in blocks, then threads). */
static double busiest(uint64_t n, int ranks, int threads)
{
    return (double)ceil_div(ceil_div(n, (uint64_t)ranks), (uint64_t)threads);
}

/* The write's work items of the busiest thread: a rank with fewer shards than threads writes one
 * shard at a time with every thread on its fill and inner chunks (write_driver.c `inner`), at a
 * speedup of 1 + (T - 1) x the calibrated inner_efficiency; otherwise busiest(). W7's head CT is
 * one shard: at 1x2 its write took 0.148 s against 0.20 s planned for one thread. */
static double write_items(uint64_t shards, int ranks, int threads, double efficiency)
{
    const uint64_t mine = ceil_div(shards, (uint64_t)ranks);
    if (mine >= (uint64_t)threads) {
        return busiest(shards, ranks, threads);
    }
    const double e = efficiency < 0 ? 0.0 : efficiency > 1 ? 1.0 : efficiency;
    return (double)mine / (1.0 + (threads - 1) * e);
}

/* A remote input's fetch in one pass by its busiest thread (seconds): each thread fetches the
 * objects of its own items one request at a time over its own connection (store_http.c's pooled
 * handles), so it takes its share of the pass's requests at http_request_s each and of its bytes
 * at http_bytes_per_s; the share is the busiest thread's items over the pass's (tiles for the
 * range and scan passes, shards for the write; 1/(R·T) without items). scan-http (512³ over
 * nginx on 127.0.0.1, 1x2): 76 ms of fetch a thread, where the file system's cold read of the
 * decoded bytes counted 0.25 s. */
static double http_read(const struct sm_plan_rates *r, const struct sm_plan_work *w,
                        enum sm_plan_pass p, int R, int T)
{
    const uint64_t items = p == SM_PLAN_PASS_WRITE ? w->shards : w->tiles;
    const double share = items > 0 ? busiest(items, R, T) / (double)items : 1.0 / ((double)R * T);
    return share * ((double)w->read_requests[p] * r->http_request_s +
                    (double)w->read_bytes[p] / r->http_bytes_per_s);
}

void sm_plan_seconds(const struct sm_plan_rates *r, const struct sm_plan_work *w,
                     struct sm_plan_terms *t)
{
    memset(t, 0, sizeof(*t));
    const int R = w->ranks > 0 ? w->ranks : 1, T = w->threads > 0 ? w->threads : 1;
    const int N = w->nodes > 0 && w->nodes <= R ? w->nodes : 1;
    const double per_node = (double)ceil_div((uint64_t)R, (uint64_t)N); /* ranks on a node */
    const double cores = w->cores_per_node > 0 ? w->cores_per_node : r->cores > 0 ? r->cores : 1.0;
    const double k = fmax(1.0, per_node * T / cores); /* time-slicing */
    const double per_tile = w->tiles ? (double)w->in_bytes / (double)w->tiles : 0.0;
    /* the output's flush: each node at the calibrated syncfs bandwidth, all of them at most at the
     * shared file system's aggregate */
    double flush = N * r->syncfs_bytes_per_s;
    if (w->fs_bytes_per_s > 0 && w->fs_bytes_per_s < flush) {
        flush = w->fs_bytes_per_s;
    }
    const double in_shard = w->shards ? (double)w->in_bytes / (double)w->shards : 0.0;
    const double out_shard = w->shards ? (double)w->out_value_bytes / (double)w->shards : 0.0;
    t->start =
        (w->mpi || R > 1 ? r->start_mpi_s + r->start_mpi_s_per_rank * per_node : r->start_plain_s) +
        r->run_fixed_s;
    /* each pass's read at the file system's bandwidth, and the decodes past the first (a block
     * that several boxes decode whole, once each) */
    double again[SM_PLAN_PASSES];
    const bool http = w->remote && r->http_bytes_per_s > 0;
    for (int p = 0; p < SM_PLAN_PASSES; p++) {
        t->read[p] =
            w->fs_read_bytes_per_s > 0 ? (double)w->read_bytes[p] / w->fs_read_bytes_per_s : 0.0;
        if (http) {
            t->read[p] = fmax(t->read[p], http_read(r, w, (enum sm_plan_pass)p, R, T));
        }
        again[p] = w->read_amp[p] > 1.0 ? w->read_amp[p] - 1.0 : 0.0;
    }
    if (w->two_pass) {
        t->scan = busiest(w->tiles, R, T) * per_tile *
                  (r->scan_s_per_byte + again[SM_PLAN_PASS_SCAN] * r->decode_s_per_byte) * k;
        t->scan = with_reads_ahead(t->scan, t->read[SM_PLAN_PASS_SCAN], k, w->ahead_groups) *
                  (w->scan_passes > 1 ? (double)w->scan_passes : 1.0);
    }
    t->range = t->read[SM_PLAN_PASS_RANGE]; /* its compute (min/max only) is not modelled */
    t->allreduce = R > 1 ? r->allreduce_s : 0.0;
    /* one pass reads and counts each shard's input while writing it; two passes read it again
     * unless the rank kept it from the scan */
    const double again_w = again[SM_PLAN_PASS_WRITE] * r->decode_s_per_byte;
    const double read = !w->two_pass ? or_else(r->read_s_per_byte, r->scan_s_per_byte) + again_w
                        : w->kept    ? 0.0
                                     : r->decode_s_per_byte + again_w;
    const double per_shard = in_shard * read + out_shard * r->write_s_per_byte +
                             r->shard_fixed_s * (w->levels_with > 1 ? w->levels_with : 1);
    t->write = write_items(w->shards, R, T, r->inner_efficiency) * per_shard * k;
    t->write = with_reads_ahead(t->write, t->read[SM_PLAN_PASS_WRITE], k, w->ahead_groups);
    if (w->pyr_shards > 0) {
        const double per = (double)w->pyr_value_bytes / (double)w->pyr_shards;
        t->pyramid =
            busiest(w->pyr_shards, R, T) * (per * r->pyramid_s_per_byte + r->shard_fixed_s) * k;
    }
    if (w->spill_shards > 0) { /* its values come made: each shard is encoded and put, as the
                                * write phase's are (docs/internals/pyramid.md) */
        const double per = (double)w->spill_value_bytes / (double)w->spill_shards;
        t->pyramid +=
            busiest(w->spill_shards, R, T) * (per * r->write_s_per_byte + r->shard_fixed_s) * k;
    }
    if (w->export_value_bytes > 0) {
        /* one thread per rank reads its block of shards back and writes it (deflated first),
         * then the file's bytes reach storage at the flush bandwidth of each node */
        const double per = w->shards ? (double)w->export_value_bytes / (double)w->shards : 0.0;
        const double k1 = fmax(1.0, per_node / cores);
        const double deflate = w->export_deflate ? r->write_s_per_byte : 0.0;
        if (r->export_s_per_byte > 0) { /* calibrated: the read back, write and flush */
            t->hdf5 = busiest(w->shards, R, 1) * per * (r->export_s_per_byte + deflate) * k1;
        } else {
            t->hdf5 = busiest(w->shards, R, 1) * per * (r->decode_s_per_byte + deflate) * k1 +
                      (double)w->export_file_bytes / flush;
        }
    }
    const double files = (double)(w->shards * (w->levels_with > 1 ? w->levels_with : 1) +
                                  w->pyr_shards + w->spill_shards);
    /* a file of the early write-out's size starts going to the disk when it is put (the file
     * store's stage): the flush at the end waits for what the write and pyramid stages did not
     * cover, and at least for the file each thread of a node put last */
    const double file_bytes = files > 0 ? (double)w->out_bytes / files : 0.0;
    double tail = (double)w->out_bytes;
    if (file_bytes >= (double)sm_store_file_early_writeback()) {
        tail = fmax(file_bytes * T * per_node * N, tail - (t->write + t->pyramid) * flush);
        tail = fmin(tail, (double)w->out_bytes);
    }
    t->sync = tail / flush + r->syncfs_fixed_s + files * r->rename_s / R;
    t->finish = files * r->finish_s_per_shard;
    t->total = t->start + t->range + t->scan + t->allreduce + t->write + t->pyramid + t->sync +
               t->hdf5 + t->finish;
}

uint64_t sm_plan_peak_rss(const struct sm_plan_mem *m, struct sm_plan_rss_parts *parts)
{
    struct sm_plan_rss_parts p = {0};
    const uint64_t T = m->threads > 0 ? (uint64_t)m->threads : 1;
    const uint64_t half = m->memory_bytes / 2;
    p.baseline = m->baseline + m->shard_records;
    /* the encoded-object cache: within half the budget, never more than the rank's input */
    if (!m->source) {
        const uint64_t cap = min_u64(m->cache_max_bytes, half);
        p.caches = min_u64(cap, m->rank_stored_bytes);
        if (m->rank_stored_bytes > cap) {
            /* a cache that evicts leaves holes of other sizes in the heap: 1/10 of it more */
            p.caches += cap / 10;
        }
        p.caches += m->index_cache_bytes;
    }
    if (m->source_loads) {
        p.input = m->rank_in_bytes; /* the source's inflated box */
    }
    /* the tiles and shards in flight: one per thread, never more than the rank has */
    const uint64_t Ts = m->rank_tiles > 0 ? min_u64(T, m->rank_tiles) : T;
    const uint64_t Tw = m->rank_shards > 0 ? min_u64(T, m->rank_shards) : T;
    /* per thread that decodes: the scratch of an input chunk (decoded and encoded) and the codec
     * contexts */
    const uint64_t decode = T * (2 * m->chunk_bytes + m->codec_bytes);
    if (m->two_pass) {
        p.scan = Ts * m->tile_bytes + T * m->hist_bytes + decode; /* scan workers */
    }
    if (m->two_pass && !m->scan_job && (m->kept || m->kept_some)) {
        p.input += m->rank_in_bytes; /* the kept decoded input (a convert's) */
    }
    p.input += m->window_bytes; /* the group's window a pass cuts its shards from */
    if (!(m->two_pass && m->kept) && !m->source && !m->grouped && !m->units_whole && !m->scan_job) {
        /* the chunk memos: an eighth of the budget, at most SM_PLAN_MEMO_SLOTS read units and a
         * spare per thread (engine/tile/tile_memo.c); none when the shards are cut from windows
         * (engine/run/run_convert_write.c) or every shard's box is whole in read units (read
         * straight into the shard) */
        const uint64_t slots = T * SM_PLAN_MEMO_SLOTS * m->chunk_bytes;
        p.caches += min_u64(min_u64(m->memory_bytes / 8, m->rank_in_bytes), slots);
    }
    /* per writing thread: the shard's input box, its values, the encoded shard (the pages of
     * its buffer the encode touches: the values at the sampled ratio with a margin, all of them
     * when not sampled; engine/codec/codec_sharding.c reserve_shard), an edge chunk's padded copy
     * without a shard codec, the shards of an image's aligned levels made from them (their values
     * under 1/7 of the shard's: 1/8 + 1/64 + ..., and their float32 means); per thread a histogram
     * in one pass and the decode scratch */
    const uint64_t vox = m->shard_voxels, vals = vox * m->out_elem;
    const uint64_t levels = m->aligned ? vals / 7 + vox * 4 / 7 : 0;
    const double share = m->enc_share > 0 && m->enc_share < 1 ? m->enc_share : 1.0;
    /* one buffer for the shard and its levels' (the level 0 shard's the largest), touched in huge
     * pages (core_alloc_huge.c): whole 2 MiB pages */
    const uint64_t page = (uint64_t)2 << 20;
    const uint64_t enc =
        share < 1.0 ? min_u64(vals, ((uint64_t)((double)vals * share) + page - 1) / page * page)
                    : vals;
    if (!m->scan_job) {
        p.write =
            Tw * (vox * m->in_elem + vals + enc + (m->padded ? vals : 0) + levels + (64u << 10)) +
            T * (m->two_pass ? 0 : m->hist_bytes) + decode;
    }
    if (m->pyr_shard_voxels > 0) {
        /* a thread's slab of the level below (engine/run/run_pyramid.c slab_step: at most 8
         * shards' worth, at most a level chunk's depth of planes) and its shard buffers */
        const uint64_t sv = m->pyr_slab_voxels ? m->pyr_slab_voxels : 8 * m->pyr_shard_voxels;
        const uint64_t slab = min_u64(sv * m->out_elem, half / T);
        p.pyramid = T * (slab + 3 * m->pyr_shard_voxels * m->out_elem);
    }
    if (m->export_buffer_bytes > 0) {
        /* the export's value buffer, and a chunk decoded from the output and one HDF5 holds
         * for its filter (deflated and not) */
        p.hdf5 = m->export_buffer_bytes + 4 * m->export_chunk_bytes + m->codec_bytes;
    }
    /* the scan's, the write's and the pyramid's buffers are freed when their phase ends (blocks of
     * 2 MiB and more are their own mappings: core_alloc_huge.c): the largest of them counts */
    const uint64_t phase = max_u64(p.scan, max_u64(p.write, p.pyramid));
    p.total = p.baseline + p.caches + p.input + phase + p.hdf5;
    if (parts != NULL) {
        *parts = p;
    }
    return p.total;
}
