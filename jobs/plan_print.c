/* The estimate of `shardmill plan` as JSON (`estimate`) and as the human lines (plan_estimate.h):
 * seconds and their terms, the groups and reads, the peak RSS bound and its parts, the memory
 * ceiling's check, the output's bytes and files, the export. The numbers are plan_estimate.c's. */
#include "plan_estimate.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <shardmill/meta.h>
#include <shardmill/pipeline.h>

/* The layout of the reads (the read plan of the pass whose boxes are the shards, else the
 * scan's tiles). */
static const struct sm_read_plan *layout_plan(const struct sm_plan_estimate *e)
{
    return e->convert ? &e->rp_write : &e->rp_scan;
}

/* `read`: the report's io.source members as the plan expects them (docs/internals/report.md):
 * input_bytes, passes [{pass, bytes_read, ratio, seconds}], read_ratio, layout. */
static json_t *read_json(const struct sm_plan_estimate *e)
{
    const struct sm_read_plan *rp = layout_plan(e);
    json_t *passes = json_array();
    double worst = 0;
    for (int p = 0; p < SM_PLAN_PASSES; p++) {
        if (!e->reads[p]) {
            continue;
        }
        const double ratio =
            e->disk_bytes > 0 ? (double)e->read_bytes[p] / (double)e->disk_bytes : 0.0;
        worst = ratio > worst ? ratio : worst;
        json_t *pj =
            json_pack("{s:s,s:o,s:f,s:f}", "pass", sm_plan_pass_name(p), "bytes_read",
                      sm_json_u64(e->read_bytes[p]), "ratio", ratio, "read_s", e->t.read[p]);
        if (e->remote) {
            json_object_set_new(pj, "requests", sm_json_u64(e->read_requests[p]));
        }
        json_array_append_new(passes, pj);
    }
    json_t *layout =
        json_pack("{s:o,s:o,s:b,s:i,s:s}", "groups", sm_json_u64(rp->groups.ntiles), "window_bytes",
                  sm_json_u64(rp->window_bytes), "windowed", rp->windowed, "windows",
                  rp->windowed ? (int)(rp->windows > 1 ? 2 : 1) : 0, "why", rp->why);
    json_t *bw = e->fs_read_bytes_per_s > 0 ? json_real(e->fs_read_bytes_per_s) : json_null();
    /* an http(s) or s3 input priced at the rates' HTTP fetch (null: the file system's read) */
    json_t *http = e->http ? json_pack("{s:f,s:f}", "request_s", e->rates.http_request_s,
                                       "bytes_per_s_per_connection", e->rates.http_bytes_per_s)
                           : json_null();
    return json_pack("{s:o,s:s,s:o,s:f,s:o,s:s,s:o,s:o}", "input_bytes", sm_json_u64(e->disk_bytes),
                     "input_bytes_from", e->disk_from, "passes", passes, "read_ratio", worst,
                     "fs_read_bytes_per_s", bw, "fs_read_from", e->fs_read_from, "http", http,
                     "layout", layout);
}

json_t *sm_plan_estimate_json(const struct sm_plan_estimate *e, int ranks)
{
    const struct sm_plan_terms *t = &e->t;
    json_t *terms =
        json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "start", t->start, "range", t->range,
                  "scan", t->scan, "allreduce", t->allreduce, "write", t->write, "pyramid",
                  t->pyramid, "sync", t->sync, "export", t->hdf5, "finish", t->finish);
    json_t *sample =
        json_pack("{s:s,s:i,s:o,s:o,s:o,s:f}", "ratio_from", e->ratio_from, "output_chunks",
                  (int)e->samples, "input_chunks_read", sm_json_u64(e->sample_in_chunks),
                  "raw_bytes", sm_json_u64(e->sample_raw), "encoded_bytes",
                  sm_json_u64(e->sample_encoded), "ratio", e->ratio);
    json_t *assumes = json_pack(
        "{s:s,s:s,s:s,s:s,s:s,s:s,s:b,s:b,s:i,s:f}", "rates", e->rates_from, "calibrated",
        e->rates.calibrated, "machine", e->rates.machine, "filesystem", e->rates.filesystem,
        "cache", e->rates.cache, "launcher",
        ranks > 1 ? "mpirun/srun (MPI start-up measured at calibration)" : "a plain process",
        "kept_input", e->kept, "two_pass", e->two_pass, "nodes", e->nodes, "cores_per_node",
        e->cores_per_node > 0 ? e->cores_per_node : e->rates.cores);
    const struct sm_plan_rss_parts *p = &e->rss;
    json_t *rss = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "baseline", sm_json_u64(p->baseline),
                            "caches", sm_json_u64(p->caches), "input", sm_json_u64(p->input),
                            "scan", sm_json_u64(p->scan), "write", sm_json_u64(p->write), "pyramid",
                            sm_json_u64(p->pyramid), "export", sm_json_u64(p->hdf5));
    json_object_set_new(sample, "input_stored_ratio", json_real(e->in_ratio));
    json_object_set_new(sample, "levels_ratio", json_real(e->level_ratio));
    if (strcmp(e->ratio_from, "metadata") == 0) {
        json_object_set_new(sample, "input_chunks_needed", sm_json_u64(e->sample_units_needed));
    }
    json_object_set_new(assumes, "page_cache", json_string(e->warm ? "warm" : "cold"));
    json_object_set_new(assumes, "fs_bandwidth_bytes_per_s",
                        e->fs_given > 0 ? json_real(e->fs_given) : json_null());
    json_t *x = json_null(); /* the HDF5 export: one file beside the output */
    if (e->export_path != NULL) {
        x = json_pack("{s:s,s:o,s:i,s:o,s:i,s:o,s:f}", "path", e->export_path, "bytes",
                      sm_json_u64(e->export_bytes), "files", 1, "chunks",
                      sm_json_u64(e->export_chunks), "deflate", e->export_deflate,
                      "buffer_bytes_per_rank", sm_json_u64(e->export_buffer_bytes), "seconds",
                      t->hdf5);
    }
    json_t *j = json_pack("{s:f,s:o,s:o,s:o,s:i,s:i,s:o,s:o,s:o,s:o,s:o}", "seconds", t->total,
                          "peak_rss_bytes_per_rank", sm_json_u64(e->peak_rss_bytes), "output_bytes",
                          sm_json_u64(e->output_bytes), "files", sm_json_u64(e->files), "threads",
                          e->threads, "levels", (int)e->levels, "terms_s", terms, "rss_parts_bytes",
                          rss, "sample", sample, "assumes", assumes, "read", read_json(e));
    json_object_set_new(j, "export", x);
    if (e->fit.checked) {
        json_object_set_new(j, "memory_ceiling", sm_plan_fit_json(&e->fit));
    }
    return j;
}

static void human(double v, char *buf, size_t cap)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    unsigned i = 0;
    while (v >= 1024.0 && i + 1 < sizeof(u) / sizeof(u[0])) {
        v /= 1024.0;
        i++;
    }
    snprintf(buf, cap, "%.1f %s", v, u[i]);
}

/* The layout's groups and window, then what each pass reads and how long at which bandwidth. */
static void print_reads(const struct sm_plan_estimate *e)
{
    const struct sm_read_plan *rp = layout_plan(e);
    char win[32], disk[32], bw[32];
    human((double)rp->window_bytes, win, sizeof(win));
    human((double)e->disk_bytes, disk, sizeof(disk));
    printf("    groups   %llu group%s of ", (unsigned long long)rp->groups.ntiles,
           rp->groups.ntiles != 1 ? "s" : "");
    for (unsigned d = 0; d < rp->groups.ndim; d++) {
        printf("%s%llu", d ? "," : "[", (unsigned long long)rp->groups.tile[d]);
    }
    printf("%s sharing input blocks; ", rp->groups.ndim > 0 ? "]" : "[]");
    if (rp->windowed) {
        printf("each read once per pass into a window of %s", win);
    } else if (rp->window_bytes > 0) {
        char budget[32];
        human((double)rp->window_budget, budget, sizeof(budget));
        printf("no window (a group's %s is over %s, half of limits.memory_bytes): each box "
               "decodes its blocks whole",
               win, budget);
    } else {
        printf("no two boxes share an input block");
    }
    printf("; %s\n", rp->why[0] != '\0' ? rp->why
                     : e->convert       ? "output.shard as given"
                                        : "the scan's tiles");
    printf("    reads    input %s on disk (%s);", disk,
           strcmp(e->disk_from, "files") == 0    ? "its files"
           : strcmp(e->disk_from, "sample") == 0 ? "the sampled chunks' stored bytes"
                                                 : "its decoded bytes: stored size unknown");
    bool first = true;
    for (int p = 0; p < SM_PLAN_PASSES; p++) {
        if (e->reads[p]) {
            char b[32];
            human((double)e->read_bytes[p], b, sizeof(b));
            printf("%s %s %s", first ? "" : ",", sm_plan_pass_name(p), b);
            if (e->remote) {
                printf(" in %llu requests", (unsigned long long)e->read_requests[p]);
            }
            printf(" (%.2fx",
                   e->disk_bytes > 0 ? (double)e->read_bytes[p] / (double)e->disk_bytes : 0.0);
            if (e->fs_read_bytes_per_s > 0 || e->http) {
                printf(", %.1f s", e->t.read[p]);
            }
            printf(")");
            first = false;
        }
    }
    if (e->http) {
        human(e->rates.http_bytes_per_s, bw, sizeof(bw));
        printf(" over HTTP, each thread its own connection at %s/s and %.3f ms a request (rates "
               "(http))",
               bw, e->rates.http_request_s * 1e3);
        if (e->fs_read_bytes_per_s > 0) {
            human(e->fs_read_bytes_per_s, bw, sizeof(bw));
            printf(", together at most %s/s (%s)", bw, e->fs_read_from);
        }
        printf("\n");
    } else if (e->fs_read_bytes_per_s > 0) {
        human(e->fs_read_bytes_per_s, bw, sizeof(bw));
        printf(" at %s/s (%s%s)\n", bw, e->fs_read_from,
               e->fs_read_given > 0 || e->nodes <= 1 || e->fs_read_from[0] == '-'
                   ? ""
                   : ", per node x nodes");
    } else {
        printf("; read time not modelled (the rates have no read bandwidth: "
               "--fs-read-bandwidth B sets it)\n");
    }
    if (e->fs_given > 0) {
        human(e->fs_given, bw, sizeof(bw));
        printf("    storage  a shared file system of %s/s aggregate (--fs-bandwidth): the nodes' "
               "reads and output flush together at most at it\n",
               bw);
    }
}

/* The ceiling's line: within limits.memory_bytes, adapted to it, or over it (run: exit 5). */
static void print_fit(const struct sm_plan_fit *f)
{
    if (!f->checked) {
        return;
    }
    char lim[32], b[32], asked[32];
    human((double)f->limit, lim, sizeof(lim));
    human((double)f->bound, b, sizeof(b));
    human((double)f->bound_asked, asked, sizeof(asked));
    if (!f->fits) {
        printf("    ceiling  over limits.memory_bytes %s even with 1 thread and the input re-read "
               "(%s): run stops with exit 5 before writing\n",
               lim, b);
    } else if (strcmp(f->adapted, "none") == 0) {
        printf("    ceiling  within limits.memory_bytes %s\n", lim);
    } else {
        printf("    ceiling  limits.memory_bytes %s: run adapts (%s), bound %s (as configured "
               "%s)\n",
               lim, f->adapted, b, asked);
    }
}

void sm_plan_estimate_print(const struct sm_plan_estimate *e, int ranks)
{
    const struct sm_plan_terms *t = &e->t;
    char rss[32], out[32];
    human((double)e->peak_rss_bytes, rss, sizeof(rss));
    human((double)e->output_bytes, out, sizeof(out));
    printf("  estimate (%d thread%s per rank, %d node%s of %g cores; rates %s, calibrated %s on "
           "%s, output on %s, compute with a %s page cache; %s):\n",
           e->threads, e->threads > 1 ? "s" : "", e->nodes, e->nodes > 1 ? "s" : "",
           e->cores_per_node > 0 ? e->cores_per_node : e->rates.cores, e->rates_from,
           e->rates.calibrated, e->rates.machine, e->rates.filesystem, e->rates.cache,
           ranks > 1 ? "ranks started by mpirun/srun" : "one plain process");
    char range[48] = "";
    if (t->range > 0) {
        snprintf(range, sizeof(range), "range read %.2f, ", t->range);
    }
    char xs[48] = "";
    if (e->export_path != NULL) {
        snprintf(xs, sizeof(xs), "export %.2f, ", t->hdf5);
    }
    printf("    seconds  %.1f (start %.2f, %sscan %.2f, allreduce %.3f, write %.2f, pyramid %.2f, "
           "sync %.2f, %sfinish %.2f)%s, %s page cache\n",
           t->total, t->start, range, t->scan, t->allreduce, t->write, t->pyramid, t->sync, xs,
           t->finish,
           !e->convert   ? ", the input read each scan pass"
           : e->kept     ? ", input kept"
           : e->two_pass ? ", input read twice"
                         : ", one pass",
           e->warm ? "warm" : "cold");
    print_reads(e);
    char parts[7][32];
    const uint64_t pv[7] = {e->rss.baseline, e->rss.caches,  e->rss.input, e->rss.scan,
                            e->rss.write,    e->rss.pyramid, e->rss.hdf5};
    for (int i = 0; i < 7; i++) {
        human((double)pv[i], parts[i], sizeof(parts[i]));
    }
    printf("    memory   %s peak RSS per rank (upper bound: baseline %s, caches %s, input %s, scan "
           "%s, write %s, pyramid %s, export %s)\n",
           rss, parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], parts[6]);
    print_fit(&e->fit);
    if (!e->convert) {
        return;
    }
    printf("    output   %s in %llu files (%llu shards, %u level%s)\n", out,
           (unsigned long long)e->files, (unsigned long long)e->shards, e->levels,
           e->levels > 1 ? "s" : "");
    if (e->export_path != NULL) {
        char xb[32];
        human((double)e->export_bytes, xb, sizeof(xb));
        printf("    export   %s in 1 HDF5 file %s (%llu chunks, %s; %.1f s)\n", xb, e->export_path,
               (unsigned long long)e->export_chunks,
               e->export_deflate > 0 ? "deflated: at the output codec's sampled ratio"
                                     : "the values' bytes",
               t->hdf5);
    }
    if (e->ratio_given > 0) {
        printf("    ratio    %.3f of the values, as given by --ratio (no chunk read)\n", e->ratio);
    } else if (e->samples > 0) {
        printf("    ratio    %.3f of the values, measured on %u sampled output chunk%s (%llu input "
               "chunk%s read)\n",
               e->ratio, e->samples, e->samples > 1 ? "s" : "",
               (unsigned long long)e->sample_in_chunks, e->sample_in_chunks != 1 ? "s" : "");
    } else if (strcmp(e->ratio_from, "metadata") == 0) {
        printf("    ratio    1 (the values' bytes: not sampled, one output chunk reads %llu input "
               "chunks, over %u; --ratio X sets it)\n",
               (unsigned long long)e->sample_units_needed, SM_PLAN_SAMPLE_UNITS);
    } else {
        printf("    ratio    1 (codec none: the values' bytes)\n");
    }
}
