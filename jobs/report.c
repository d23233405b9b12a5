/* The JSON report of `run` (SPEC §7; docs/internals/report.md), built in this one place: the
 * sections every job shares (sm_report_new) and the report of a scan or convert from the engine's
 * result (sm_report_run), whose counters, peaks and timings the engine already reduced over the
 * ranks; read-bench adds its own result and cases to sm_report_new's. Only rank 0 builds it. */
#include <shardmill/sm_config.h>

#include "report.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <shardmill/par.h>
#include <shardmill/sm_version.h>

#include <shardmill/source.h>
#include <shardmill/url.h>

json_t *sm_json_hist(const struct sm_hist *h)
{
    json_t *counts = json_array();
    for (uint32_t i = 0; i < h->bins; i++) {
        json_array_append_new(counts, sm_json_u64(h->counts[i]));
    }
    json_t *o = json_object();
    json_object_set_new(o, "bins", json_integer(h->bins));
    json_object_set_new(o, "range", json_pack("[f,f]", h->lo, h->hi));
    json_object_set_new(o, "counts", counts);
    json_object_set_new(o, "underflow", sm_json_u64(h->underflow));
    json_object_set_new(o, "overflow", sm_json_u64(h->overflow));
    json_object_set_new(o, "nan", sm_json_u64(h->nan));
    /* +-inf also sit in overflow and underflow; min and max are of the finite values (null when
     * there is none) */
    json_object_set_new(o, "inf_pos", sm_json_u64(h->inf_pos));
    json_object_set_new(o, "inf_neg", sm_json_u64(h->inf_neg));
    const bool any = h->min <= h->max;
    json_object_set_new(o, "min", any ? json_real(h->min) : json_null());
    json_object_set_new(o, "max", any ? json_real(h->max) : json_null());
    return o;
}

static const char *range_from_name(enum sm_hist_range_from k)
{
    return k == SM_HIST_RANGE_CONFIG ? "config" : k == SM_HIST_RANGE_TYPE ? "type" : "minmax";
}

static json_t *per_class(const uint64_t *v)
{
    static const char *const names[SM_IO_NCLASS] = {"metadata", "payload", "index"};
    json_t *o = json_object();
    for (int c = 0; c < SM_IO_NCLASS; c++) {
        json_object_set_new(o, names[c], sm_json_u64(v[c]));
    }
    return o;
}

static json_t *http_json(const struct sm_run_io *io)
{
    if (!io->http) {
        return json_null();
    }
    return json_pack("{s:b,s:o,s:o}", "range_ignored", io->range_ignored, "whole_objects",
                     sm_json_u64(io->whole_objects), "kept_slices", sm_json_u64(io->kept_slices));
}

json_t *sm_json_http(struct sm_store *store)
{
    struct sm_run_io io;
    sm_run_io_of(store, NULL, &io);
    return http_json(&io);
}

json_t *sm_json_io(const struct sm_run_io *io)
{
    json_t *o = json_object();
    json_object_set_new(o, "requests", per_class(io->requests));
    json_object_set_new(o, "bytes", per_class(io->bytes));
    /* why it is off: the run found no input object read twice, or the configuration */
    const char *why = io->cache_enabled   ? NULL
                      : io->cache_skipped ? "no input object is read twice"
                                          : "off in the configuration";
    json_object_set_new(o, "cache",
                        json_pack("{s:o,s:o,s:o,s:o,s:b,s:o}", "hits", sm_json_u64(io->cache_hits),
                                  "misses", sm_json_u64(io->cache_misses), "evictions",
                                  sm_json_u64(io->cache_evictions), "peak_bytes",
                                  sm_json_u64(io->cache_peak_bytes), "enabled", io->cache_enabled,
                                  "why", why != NULL ? json_string(why) : json_null()));
    json_object_set_new(o, "index_cache",
                        json_pack("{s:o,s:o,s:o}", "hits", sm_json_u64(io->index_hits), "misses",
                                  sm_json_u64(io->index_misses), "peak_bytes",
                                  sm_json_u64(io->index_peak_bytes)));
    json_object_set_new(o, "http", http_json(io));
    return o;
}

json_t *sm_json_engine(void)
{
    return json_pack("{s:s,s:s}", "version", SM_VERSION_STRING, "commit", SM_GIT_COMMIT);
}

static json_t *or_null(json_t *v)
{
    return v != NULL ? v : json_null();
}

json_t *sm_report_new(const struct sm_report_parts *p)
{
    json_t *rep = json_object();
    if (rep == NULL) { /* the taken sections go too */
        json_t *taken[] = {p->input, p->tile,   p->passes, p->result,
                           p->io,    p->timing, p->export, p->output};
        for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++) {
            json_decref(taken[i]);
        }
        return NULL;
    }
    json_object_set_new(rep, "engine", sm_json_engine());
    json_object_set_new(rep, "job", json_string(p->job));
    json_object_set_new(rep, "ranks", json_integer(p->ranks));
    json_object_set_new(rep, "threads", json_integer(p->threads));
    json_object_set_new(rep, "input", or_null(p->input));
    json_object_set_new(rep, "roi",
                        json_pack("{s:o,s:o}", "offset", sm_json_u64_array(p->roi_offset, p->ndim),
                                  "shape", sm_json_u64_array(p->roi_shape, p->ndim)));
    json_object_set_new(rep, "tile", or_null(p->tile));
    json_object_set_new(rep, "passes", or_null(p->passes));
    json_object_set_new(rep, "result", or_null(p->result));
    json_object_set_new(rep, "io", or_null(p->io));
    json_object_set_new(rep, "timing_ms", or_null(p->timing));
    if (p->export != NULL) {
        json_object_set_new(rep, "export", p->export);
    }
    json_object_set_new(rep, "memory",
                        json_pack("{s:o}", "peak_rss_bytes", sm_json_u64(p->peak_rss_bytes)));
    json_object_set_new(rep, "output", or_null(p->output));
    json_object_set_new(rep, "figure_of_merit",
                        json_pack("{s:f}", "voxels_per_s", p->voxels_per_s));
    return rep;
}

/* ---- the input section ---- */

json_t *sm_report_array_input(const char *store, const char *array, const struct sm_array_meta *m)
{
    json_t *o = json_object();
    char shown[SM_URL_REDACT_MAX]; /* reports and summaries never carry credentials */
    json_object_set_new(o, "store", json_string(sm_url_redact(store, shown, sizeof(shown))));
    json_object_set_new(o, "array", json_string(array != NULL ? array : ""));
    if (m->zarr_format == 0) { /* an N5 dataset */
        json_object_set_new(o, "format", json_string("n5"));
    }
    json_object_set_new(o, "zarr_format",
                        m->zarr_format != 0 ? json_integer(m->zarr_format) : json_null());
    json_object_set_new(o, "shape", sm_json_u64_array(m->shape, m->ndim));
    json_object_set_new(o, "dtype", json_string(sm_dtype_name(m->dtype)));
    if (m->inner_ndim != 0) {
        json_object_set_new(o, "chunks", sm_json_u64_array(m->inner_chunk_shape, m->inner_ndim));
        json_object_set_new(o, "shards", sm_json_u64_array(m->chunk_shape, m->ndim));
    } else {
        json_object_set_new(o, "chunks", sm_json_u64_array(m->chunk_shape, m->ndim));
        json_object_set_new(o, "shards", json_null());
    }
    return o;
}

/* The report's `input` of a source: the run's input identity (identity, the provenance's
 * `input`, its path resolved; NULL: the source's description), the path the source names as
 * `store`, its shape and type. */
static json_t *source_input(const struct sm_source *s, const json_t *identity)
{
    /* the provenance's input (its path resolved) when the run got that far, else the source's
     * own description */
    json_t *named = sm_source_describe(s);
    json_t *o = json_is_object(identity) ? json_deep_copy(identity) : json_incref(named);
    const struct sm_source_info *in = sm_source_info(s);
    if (o != NULL) { /* SPEC §7: input.store is the path the config named */
        const char *path = json_string_value(json_object_get(named, "path"));
        json_object_set_new(o, "store", json_string(path != NULL ? path : ""));
        json_object_set_new(o, "shape", sm_json_u64_array(in->shape, in->ndim));
        json_object_set_new(o, "dtype", json_string(sm_dtype_name(in->dtype)));
        json_object_set_new(o, "chunks", json_null());
        json_object_set_new(o, "shards", json_null());
    }
    json_decref(named);
    return o;
}

/* ---- scan and convert ---- */

static json_t *result_json(const struct sm_run_result *r, bool convert)
{
    json_t *res = json_object();
    json_object_set_new(res, "voxels", sm_json_u64(r->scan.voxels));
    json_object_set_new(res, "voxels_processed", sm_json_u64(r->scan.voxels * r->passes));
    json_object_set_new(res, "tiles", sm_json_u64(r->scan.tiles));
    json_object_set_new(res, "checksum", sm_json_checksum_i64((int64_t)r->scan.sums.sum));
    json_object_set_new(res, "weighted_checksum", sm_json_checksum_u64(r->scan.sums.weighted));
    json_t *h = r->no_histogram ? json_null() : sm_json_hist(&r->scan.hist);
    if (!r->no_histogram) { /* SPEC §5: histogram.range, the type's default or the min/max pass */
        json_object_set_new(h, "range_from", json_string(range_from_name(r->hist_range_from)));
    }
    json_object_set_new(res, "histogram", h);
    /* SPEC §7: what a scan does not do is null, not missing */
    json_object_set_new(res, "normalization",
                        convert ? sm_run_norm_json(&r->norm_config, &r->norm) : json_null());
    json_object_set_new(res, "output_checksum",
                        convert ? sm_json_checksum_i64((int64_t)r->output_checksum) : json_null());
    json_object_set_new(res, "output_weighted_checksum",
                        convert ? sm_json_checksum_u64(r->output_weighted_checksum) : json_null());
    return res;
}

/* Stage times [0, last] and, after a convert's export, the export's: the maximum over ranks as
 * flat fields and in "max", the mean in "mean". */
static json_t *timing_json(const struct sm_run_result *r, int last)
{
    json_t *t = json_object(), *mx = json_object(), *mean = json_object();
    for (int i = 0; i < SM_RUN_NTIMINGS; i++) {
        const bool export = i >= SM_RUN_T_EXPORT && i <= SM_RUN_T_EXPORT_FINISH;
        const bool range = i == SM_RUN_T_RANGE; /* only when the min/max pass ran */
        if (export  ? !r->export.done
            : range ? r->no_histogram || r->hist_range_from != SM_HIST_RANGE_MINMAX
                    : i > last) {
            continue;
        }
        json_object_set_new(t, sm_run_timing_name(i), json_real(r->timing_max[i]));
        json_object_set_new(mx, sm_run_timing_name(i), json_real(r->timing_max[i]));
        json_object_set_new(mean, sm_run_timing_name(i), json_real(r->timing_mean[i]));
    }
    json_object_set_new(t, "max", mx);
    json_object_set_new(t, "mean", mean);
    return t;
}

/* The "export" section: what was written, its dataset and deflate level. */
static json_t *export_json(const struct sm_run_export_result *x)
{
    json_t *o = json_object();
    json_object_set_new(o, "path", json_string(x->path));
    json_object_set_new(o, "bytes", sm_json_u64(x->bytes));
    json_object_set_new(o, "dataset", json_string(x->dataset));
    json_object_set_new(o, "chunk", sm_json_u64_array(x->chunk, x->ndim));
    json_object_set_new(o, "deflate", json_integer(x->deflate));
    json_object_set_new(o, "driver", json_string(x->driver));
    json_object_set_new(o, "rounds", sm_json_u64(x->rounds));
    json_object_set_new(o, "complete", json_boolean(x->done));
    return o;
}

static json_t *output_json(const struct sm_run_result *r)
{
    json_t *o = json_pack("{s:s,s:s,s:o,s:o,s:o,s:b}", "path", r->output_path, "dtype",
                          sm_dtype_name(r->output_dtype), "shards", sm_json_u64(r->output_shards),
                          "bytes", sm_json_u64(r->output_bytes), "written",
                          sm_json_u64(r->shards_written), "complete", true);
    if (o == NULL) {
        return NULL;
    }
    /* what output.exists found and did (docs/internals/report.md): written, resumed, repaired
     * (complete but not verifying: resumed), or complete (nothing to do, nothing written) */
    json_object_set_new(o, "action", json_string(sm_output_found_action(r->output_found)));
    json_object_set_new(o, "skipped", json_boolean(r->output_found == SM_OUTPUT_FOUND_COMPLETE));
    json_object_set_new(o, "found_problem",
                        r->output_problem[0] != '\0' ? json_string(r->output_problem)
                                                     : json_null());
    if (r->levels > 0) { /* output.ome: the levels and rank 0's pyramid (wall) */
        json_object_set_new(o, "levels", json_integer(r->levels));
        json_object_set_new(o, "pyramid_ms", json_real((double)r->pyramid_ns / 1e6));
        json_object_set_new(o, "spill",
                            r->spill_level == 0
                                ? json_null()
                                : json_pack("{s:i,s:o}", "level", (int)r->spill_level, "bytes",
                                            sm_json_u64(r->spill_bytes)));
    }
    return o;
}

/* A source is read with pread, zlib, libtiff or HDF5, not through a store: no requests or caches;
 * its bytes read (summed over ranks by the engine) are the payload (SPEC §7's io.bytes object),
 * with the most one rank read, beyond its share, and the source's slab. */
static json_t *source_io(const struct sm_run_result *r)
{
    return json_pack("{s:n,s:{s:i,s:o,s:i},s:n,s:n,s:{s:o,s:o,s:o,s:o}}", "requests", "bytes",
                     "metadata", 0, "payload", sm_json_u64(r->source_bytes), "index", 0, "cache",
                     "index_cache", "source", "bytes_read", sm_json_u64(r->source_bytes),
                     "bytes_read_max_rank", sm_json_u64(r->source_bytes_max),
                     "beyond_share_max_rank", sm_json_u64(r->source_excess_max), "slab_bytes",
                     sm_json_u64(r->source_slab_bytes));
}

/* Metadata documents of Zarr v2/v3 and N5, not counted as the array's payload. */
static bool metadata_name(const char *n)
{
    static const char *const names[] = {"zarr.json", ".zarray",    ".zattrs",
                                        ".zgroup",   ".zmetadata", "attributes.json"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(n, names[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* The payload objects' sizes under dir (chunks or shards), depth-first; hidden names skipped. */
static uint64_t payload_bytes(const char *dir, unsigned depth)
{
    DIR *d = depth < 40 ? opendir(dir) : NULL;
    uint64_t sum = 0;
    for (struct dirent *de; d != NULL && (de = readdir(d)) != NULL;) {
        char p[4096];
        struct stat sb;
        if (de->d_name[0] == '.') {
            continue; /* ".", "..", and temporary or hidden files */
        }
        if ((size_t)snprintf(p, sizeof(p), "%s/%s", dir, de->d_name) >= sizeof(p) ||
            lstat(p, &sb) != 0) {
            continue;
        }
        if (S_ISDIR(sb.st_mode)) {
            sum += payload_bytes(p, depth + 1);
        } else if (S_ISREG(sb.st_mode) && !metadata_name(de->d_name)) {
            sum += (uint64_t)sb.st_size;
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    return sum;
}

/* A Zarr or N5 input's size on disk: its array's payload objects (the whole array, not only the
 * ROI's) in a local store; 0 (unknown) for an HTTP or S3 store, which would take a request per
 * object. */
uint64_t sm_report_zarr_input_bytes(const char *store, const char *array)
{
    if (store == NULL || (strstr(store, "://") != NULL && strncmp(store, "file://", 7) != 0)) {
        return 0;
    }
    if (strncmp(store, "file://", 7) == 0) {
        store += 7;
    }
    char dir[4096];
    if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", store, array != NULL ? array : "") >=
        sizeof(dir)) {
        return 0;
    }
    return payload_bytes(dir, 0);
}

/* A convert's reads per pass into io.source (SPEC §7, issue 33): the input's size on disk, one
 * entry per pass that read the input (range, scan, write, in order) with the encoded bytes its
 * reads fetched and the kernel's rchar over the phase (summed over ranks, and the most of one
 * rank), their ratio to the input's size, and the largest ratio. A number that is unknown (no
 * /proc, an input of unknown size) is null. */
static void add_passes(json_t *src, const struct sm_run_result *r, uint64_t input_bytes)
{
    json_t *passes = json_array();
    double worst = 0.0;
    for (int i = 0; i < SM_RUN_NPASSES; i++) {
        const struct sm_run_pass *p = &r->pass[i];
        if (!p->ran || p->bytes_read == 0) {
            continue; /* this pass did not read the input (kept, or not needed) */
        }
        const double ratio = input_bytes > 0 ? (double)p->bytes_read / (double)input_bytes : 0.0;
        worst = ratio > worst ? ratio : worst;
        json_array_append_new(
            passes,
            json_pack("{s:s,s:o,s:o,s:o,s:o,s:o}", "pass", sm_run_pass_name(i), "bytes_read",
                      sm_json_u64(p->bytes_read), "bytes_read_max_rank",
                      sm_json_u64(p->bytes_read_max), "rchar",
                      r->rchar_known ? sm_json_u64(p->rchar) : json_null(), "rchar_max_rank",
                      r->rchar_known ? sm_json_u64(p->rchar_max) : json_null(), "ratio",
                      input_bytes > 0 ? json_real(ratio) : json_null()));
    }
    json_object_set_new(src, "input_bytes",
                        input_bytes > 0 ? sm_json_u64(input_bytes) : json_null());
    json_object_set_new(src, "passes", passes);
    json_object_set_new(src, "read_ratio", input_bytes > 0 ? json_real(worst) : json_null());
    /* how the shards were grouped to read each block once (docs/internals/reading.md) */
    const struct sm_read_plan *rp = &r->read_plan;
    json_object_set_new(
        src, "layout",
        json_pack(
            "{s:o,s:o,s:b,s:o,s:s}", "groups", sm_json_u64(rp->groups.ntiles), "window_bytes",
            sm_json_u64(rp->window_bytes), "windowed", rp->windowed, "amplification",
            json_real(rp->roi_bytes > 0 ? (double)rp->pass_bytes / (double)rp->roi_bytes : 1.0),
            "why", rp->why));
}

static json_t *doubles(const double *v, unsigned n)
{
    json_t *a = json_array();
    for (unsigned i = 0; i < n; i++) {
        json_array_append_new(a, json_real(v[i]));
    }
    return a;
}

/* A convert's input.geometry (what the output got) and input.geometry_from (where each part came
 * from: docs/internals/report.md). */
static void add_geometry(json_t *input, const struct sm_run_result *r)
{
    const struct sm_run_geometry *g = &r->geometry;
    const unsigned nd = r->ndim;
    json_t *geo = json_object();
    json_object_set_new(geo, "spacing", doubles(g->spacing, nd));
    json_object_set_new(geo, "unit", g->unit[0] != '\0' ? json_string(g->unit) : json_null());
    json_object_set_new(geo, "origin", g->origin_set ? doubles(g->origin, nd) : json_null());
    json_object_set_new(geo, "unit_dropped",
                        g->unit_dropped[0] != '\0' ? json_string(g->unit_dropped) : json_null());
    json_object_set_new(input, "geometry", geo);
    json_object_set_new(input, "geometry_from",
                        json_pack("{s:s,s:s,s:s}", "spacing", g->spacing_from, "unit", g->unit_from,
                                  "origin", g->origin_from));
}

json_t *sm_report_run(const char *job, bool convert, const struct sm_run_result *r)
{
    const bool skipped = convert && r->output_found == SM_OUTPUT_FOUND_COMPLETE;
    const double secs = r->timing_max[SM_RUN_T_TOTAL] / 1e3;
    const struct sm_report_parts p = {
        .job = job,
        .ranks = r->ranks,
        .threads = r->threads,
        .input = r->source != NULL ? source_input(r->source, r->input_identity)
                                   : sm_report_array_input(r->input_store, r->input_array,
                                                           sm_array_meta(r->array)),
        .ndim = r->ndim,
        .roi_offset = r->roi_offset,
        .roi_shape = r->roi_shape,
        .tile = sm_json_u64_array(r->tile, r->ndim),
        .passes = sm_json_u64(r->passes),
        /* a complete output left alone: no statistics were computed */
        .result = skipped ? NULL : result_json(r, convert),
        .io = r->source != NULL ? source_io(r) : sm_json_io(&r->io),
        .timing = timing_json(r, convert ? SM_RUN_T_FINISH : SM_RUN_T_WRITE), /* no scan_wall */
        .export = convert && r->export.done ? export_json(&r->export) : NULL,
        .output = convert ? output_json(r) : NULL,
        .peak_rss_bytes = r->peak_rss_bytes,
        .voxels_per_s = secs > 0 ? (double)(r->scan.voxels * r->passes) / secs : 0.0,
    };
    /* the geometry the output got: none for a complete output left alone */
    if (convert && !skipped && json_is_object(p.input) && r->geometry.spacing_from[0] != '\0') {
        add_geometry(p.input, r);
    }
    if (convert && json_is_object(p.io)) { /* a Zarr input's io gets the same io.source */
        json_t *src = json_object_get(p.io, "source");
        if (!json_is_object(src)) {
            src = json_object();
            json_object_set_new(p.io, "source", src);
        }
        add_passes(src, r,
                   r->source != NULL ? r->input_bytes
                                     : sm_report_zarr_input_bytes(r->input_store, r->input_array));
    }
    json_t *rep = sm_report_new(&p);
    if (rep != NULL && convert) { /* the ranks that kept their decoded input (SPEC §1) */
        json_t *mem = json_object_get(rep, "memory");
        json_object_set_new(mem, "kept_input",
                            json_boolean(r->kept_input_ranks == (uint64_t)r->ranks));
        json_object_set_new(mem, "kept_input_ranks", sm_json_u64(r->kept_input_ranks));
        json_object_set_new(mem, "kept_input_bytes", sm_json_u64(r->kept_input_bytes));
    }
    return rep;
}

sm_status sm_report_run_emit(const struct sm_report_to *to, bool convert,
                             const struct sm_run_result *r, json_t *ceiling, json_t *rates,
                             struct sm_err *err)
{
    if (sm_par_rank() != 0) {
        json_decref(ceiling);
        json_decref(rates);
        return SM_OK;
    }
    json_t *rep = sm_report_run(to->job, convert, r);
    if (rep != NULL && ceiling != NULL) { /* the memory ceiling: checked, adapted (SPEC §1) */
        json_object_set(json_object_get(rep, "memory"), "ceiling", ceiling);
    }
    if (rep != NULL && rates != NULL) { /* per-stage rates (report_rates.c), for calibrate */
        json_object_set(rep, "rates", rates);
    }
    json_decref(ceiling);
    json_decref(rates);
    if (rep == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot build the report");
    }
    const sm_status st = sm_report_emit(to->path, rep, err); /* the JSON, a summary */
    json_decref(rep);
    return st;
}
