/* `shardmill plan CONFIG.yaml --ranks N [--threads T] [--json]` (SPEC §4): the rank plan of a
 * scan, convert or ingest job (every source, OME-Zarr, the HDF5 export) and its estimate. It opens
 * the input's metadata only (the same documents a run fetches once, or a source's header), derives
 * the tiling of the scan phase and, for convert, the output shard grid, and prints each rank's run
 * of tiles and shards with its cost (the decoded input bytes it touches, what `balanced` evens out)
 * and the imbalance max/mean; then the estimate of plan_estimate.c (time, peak RSS per rank, output
 * bytes and files), which reads at most a few sample chunks. */
#include "jobs.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shardmill/alloc.h>
#include <shardmill/array.h>
#include <shardmill/meta.h>
#include <shardmill/store.h>
#include <shardmill/url.h>
#include <shardmill/write.h>

#include "config.h"
#include "job_s3.h"
#include "jobs_run.h"
#include "plan_estimate.h"
#include "report.h"

#define PLAN_MAX_RANKS 1048576
#define PLAN_MAX_THREADS 4096

struct phase {
    const char *name; /* "scan" (tiles) or "write" (shards) */
    struct sm_tiling grid;
    /* what the ranks split: the grid, or the groups of shards that share input blocks when the
     * run reads them through windows (docs/internals/reading.md): then first/count are groups */
    struct sm_tiling part;
    bool grouped;
    struct sm_rank_part *shares; /* the ranks that get items (sm_run_plan_shares), in rank order */
    struct sm_plan_phase plan;
};

/* Every rank is listed when there are no more ranks than items (an idle rank as an empty run);
 * beyond that only the ranks that get items: O(items), whatever --ranks. */
static bool list_all(const struct phase *ph, int n)
{
    return (uint64_t)n <= ph->part.ntiles;
}

static double imbalance(const struct phase *ph, int n)
{
    uint64_t max = 0;
    double sum = 0;
    for (size_t k = 0; k < ph->plan.n; k++) {
        const uint64_t cost = ph->shares[k].part.cost;
        max = cost > max ? cost : max;
        sum += (double)cost;
    }
    return sum > 0 ? (double)max * n / sum : 1.0;
}

static json_t *share_json(int r, const struct sm_part *p)
{
    return json_pack("{s:i,s:o,s:o,s:o}", "rank", r, "first", sm_json_u64(p->first), "count",
                     sm_json_u64(p->count), "cost_bytes", sm_json_u64(p->cost));
}

static json_t *phase_json(const struct phase *ph, int n)
{
    json_t *ranks = json_array();
    if (list_all(ph, n)) {
        size_t cur = 0;
        for (int r = 0; r < n; r++) {
            const struct sm_part p = sm_plan_phase_share(&ph->plan, r, &cur);
            json_array_append_new(ranks, share_json(r, &p));
        }
    } else {
        for (size_t k = 0; k < ph->plan.n; k++) {
            json_array_append_new(ranks, share_json(ph->shares[k].rank, &ph->shares[k].part));
        }
    }
    json_t *o = json_pack("{s:o,s:o,s:o,s:f,s:i,s:b,s:o}", "items", sm_json_u64(ph->grid.ntiles),
                          "shape", sm_json_u64_array(ph->grid.tile, ph->grid.ndim), "grid",
                          sm_json_u64_array(ph->grid.grid, ph->grid.ndim), "imbalance",
                          imbalance(ph, n), "idle_ranks", n - (int)ph->plan.n, "idle_listed",
                          list_all(ph, n), "ranks", ranks);
    if (o != NULL && ph->grouped) { /* the ranks' first/count are groups */
        json_object_set_new(o, "groups",
                            json_pack("{s:o,s:o,s:o}", "items", sm_json_u64(ph->part.ntiles),
                                      "shape", sm_json_u64_array(ph->part.tile, ph->part.ndim),
                                      "grid", sm_json_u64_array(ph->part.grid, ph->part.ndim)));
    }
    return o;
}

static void print_dims(const uint64_t *v, unsigned n)
{
    for (unsigned d = 0; d < n; d++) {
        printf("%s%llu", d ? "," : "[", (unsigned long long)v[d]);
    }
    printf("]");
}

/* The first rank after r that gets tiles or shards (n when none): a binary search per phase. */
static int next_rank(const struct phase *ph, unsigned nph, int r, int n)
{
    int best = n;
    for (unsigned i = 0; i < nph; i++) {
        size_t lo = 0, hi = ph[i].plan.n;
        while (lo < hi) {
            const size_t mid = lo + (hi - lo) / 2;
            if (ph[i].shares[mid].rank <= r) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if (lo < ph[i].plan.n && ph[i].shares[lo].rank < best) {
            best = ph[i].shares[lo].rank;
        }
    }
    return best;
}

static void print_text(const struct sm_job_config *c, const struct sm_run_setup *su,
                       const struct phase *ph, unsigned nph, int n, unsigned nd)
{
    char shown[SM_URL_REDACT_MAX];
    printf("plan: %s of %s, roi ", sm_config_job_name(c->job),
           sm_url_redact(c->input.store, shown, sizeof(shown)));
    print_dims(su->off, nd);
    printf("+");
    print_dims(su->shape, nd);
    printf(", partition %s, %d rank%s\n",
           c->parallel.partition == SM_PART_BLOCK ? "block" : "balanced", n, n > 1 ? "s" : "");
    bool all = true;
    for (unsigned i = 0; i < nph; i++) {
        printf("  %s: %llu %s of ", ph[i].name, (unsigned long long)ph[i].grid.ntiles,
               i == 0 ? "tiles" : "shards");
        print_dims(ph[i].grid.tile, nd);
        printf(" (grid ");
        print_dims(ph[i].grid.grid, nd);
        printf("), imbalance max/mean %.3f\n", imbalance(&ph[i], n));
        if (ph[i].grouped) {
            printf("    ranks take whole groups of %s sharing input blocks: %llu groups of ",
                   i == 0 ? "tiles" : "shards", (unsigned long long)ph[i].part.ntiles);
            print_dims(ph[i].part.tile, nd);
            printf("; first and count below are groups\n");
        }
        if (!list_all(&ph[i], n)) {
            all = false;
            printf("    %d of the %d ranks get no %s (more ranks than %s): they are not listed\n",
                   n - (int)ph[i].plan.n, n, i == 0 ? "tiles" : "shards",
                   i == 0 ? "tiles" : "shards");
        }
    }
    printf("  %6s", "rank");
    for (unsigned i = 0; i < nph; i++) {
        printf(" | %-6s %10s %10s %12s", ph[i].name, "first", "count", "input MiB");
    }
    printf("\n");
    size_t cur[2] = {0, 0};
    for (int r = all ? 0 : next_rank(ph, nph, -1, n); r < n;) {
        printf("  %6d", r);
        for (unsigned i = 0; i < nph; i++) {
            const struct sm_part p = sm_plan_phase_share(&ph[i].plan, r, &cur[i]);
            printf(" | %-6s %10llu %10llu %12.2f", "", (unsigned long long)p.first,
                   (unsigned long long)p.count, (double)p.cost / 1048576.0);
        }
        printf("\n");
        r = all ? r + 1 : next_rank(ph, nph, r, n);
    }
}

/* The input as the run opens it: a Zarr/N5 array (metadata only), or a file source whose header
 * describes the volume (its read unit as the chunk shape, as engine/run/run_convert.c does). */
static sm_status open_input(const struct sm_plan_job *j, struct sm_store **store,
                            struct sm_plan_input *in, struct sm_array_meta *src_meta,
                            struct sm_meta_docs *docs, uint64_t *files_bytes, struct sm_err *err)
{
    if (j->run.source_params == NULL) {
        struct sm_run_input ri = j->run.c.input;
        ri.docs = docs;
        ri.files_size = files_bytes != NULL && ri.cache_enabled ? sm_report_zarr_input_bytes : NULL;
        ri.files_bytes = files_bytes;
        SM_TRY(sm_run_open_input(&ri, j->run.c.memory_bytes, store, &in->array, err));
        in->m = sm_array_meta(in->array);
        return SM_OK;
    }
    SM_TRY(sm_source_open(j->run.source_params, &in->src, err));
    const struct sm_source_info *si = sm_source_info(in->src);
    memset(src_meta, 0, sizeof(*src_meta));
    src_meta->ndim = si->ndim;
    src_meta->dtype = si->dtype;
    memcpy(src_meta->shape, si->shape, sizeof(src_meta->shape));
    memcpy(src_meta->chunk_shape, si->slab, sizeof(src_meta->chunk_shape));
    in->m = src_meta;
    return SM_OK;
}

struct plan_opts {
    int ranks, threads, nodes;
    double cores_per_node, ratio;
    bool as_json;
    const char *rates;
    double fs_read;       /* --fs-read-bandwidth (0: the rates') */
    double fs;            /* --fs-bandwidth (0: no shared file system's limit) */
    bool warm;            /* --cache warm */
    bool memory_only;     /* run's ceiling check: the fit alone, nothing read or printed */
    struct sm_run_io *io; /* memory_only: the input's requests for it (the run counts them) */
    /* memory_only: a local input's payload bytes are walked on rank 0 by the engine's open and
     * broadcast with the metadata (sm_run_input.files_size) */
    bool files_given;
    struct sm_meta_docs *docs; /* memory_only: the metadata rank 0 fetched, kept for the run */
};

/* How the input's read blocks read: a source says; an array's chunks decode whole. */
static enum sm_source_access input_access(const struct sm_plan_input *in)
{
    return in->src != NULL ? sm_source_info(in->src)->access : SM_SOURCE_BLOCKS;
}

/* The output's shard grid as the run lays it out (sm_run_input_layout: an automatic shard made
 * shallow enough for a group's window to fit the memory budget) and the write's read plan. */

static sm_status read_layout(const struct sm_plan_job *j, const struct sm_plan_input *in,
                             const struct sm_run_setup *su, struct sm_tiling *grid,
                             struct sm_output_spec *spec, struct sm_plan_estimate *est,
                             struct sm_err *err)
{
    const struct sm_array_meta *m = in->m;
    struct sm_run_output o = j->run.output; /* the output's type: output.dtype, else the input's */
    o.dtype_set = true;
    o.dtype = j->run.output.dtype_set ? j->run.output.dtype : m->dtype;
    return sm_run_input_layout(&o, m, input_access(in), su, j->run.c.memory_bytes, grid, spec,
                               &est->rp_write, err);
}

/* The scan's read plan, once its tiles are known (a source's are the shards). */
static void scan_read_plan(const struct sm_plan_job *j, const struct sm_plan_input *in,
                           const struct sm_run_setup *su, struct sm_plan_estimate *est)
{
    sm_run_read_plan(in->m, input_access(in), &su->tiling, j->run.c.memory_bytes, &est->rp_scan);
}

static sm_status emit(const struct sm_job_config *c, const struct plan_opts *o,
                      const struct sm_run_setup *su, const struct phase *ph, unsigned nph,
                      const struct sm_output_spec *spec, const struct sm_plan_estimate *est,
                      unsigned nd, struct sm_err *err)
{
    const int nranks = o->ranks;
    char shown[SM_URL_REDACT_MAX];
    if (o->as_json) {
        json_t *j = json_pack(
            "{s:s,s:s,s:i,s:s,s:{s:o,s:o}}", "job", sm_config_job_name(c->job), "input",
            sm_url_redact(c->input.store, shown, sizeof(shown)), "ranks", nranks, "partition",
            c->parallel.partition == SM_PART_BLOCK ? "block" : "balanced", "roi", "offset",
            sm_json_u64_array(su->off, nd), "shape", sm_json_u64_array(su->shape, nd));
        for (unsigned i = 0; i < nph; i++) {
            json_object_set_new(j, i == 0 ? "tiles" : "shards", phase_json(&ph[i], nranks));
        }
        json_object_set_new(j, "estimate", sm_plan_estimate_json(est, nranks));
        const sm_status st = sm_report_write("-", j, err);
        json_decref(j);
        return st;
    }
    print_text(c, su, ph, nph, nranks, nd);
    if (nph == 2) {
        char line[512];
        sm_job_layout_text(c, spec, ph[1].grid.ntiles, line, sizeof(line));
        printf("  layout: %s\n", line);
    }
    sm_plan_estimate_print(est, nranks);
    return SM_OK;
}

/* The job c as the engine's parameters plan estimates from (the run's own, sm_job_convert_params;
 * *keep outlives j). SM_E_USAGE for a job plan does not apply to. */
static sm_status plan_job(const struct sm_job_config *c, struct sm_plan_job *j,
                          struct sm_job_convert_keep *keep, struct sm_err *err)
{
    const bool writes = c->job == SM_JOB_CONVERT || c->job == SM_JOB_INGEST; /* ingest: convert */
    if (c->job != SM_JOB_SCAN && !writes) {
        SM_FAIL_AT(err, SM_E_USAGE, "job",
                   "plan applies to scan, convert and ingest jobs (this is %s: a benchmark of "
                   "the reads, not planned)",
                   sm_config_job_name(c->job));
    }
    j->convert = writes;
    j->passes = (int)c->passes;
    j->ceiling = c->limits.memory_ceiling;
    return sm_job_convert_params(c, &j->run, keep, err);
}

/* The plan of job j; printed (c: the configuration it came from, for the text) unless
 * o->memory_only (c NULL: the run's ceiling check, *fit alone). */
static sm_status plan(const struct sm_plan_job *j, const struct sm_job_config *c,
                      const struct plan_opts *o, struct sm_plan_fit *fit, struct sm_err *err)
{
    const int nranks = o->ranks;
    struct sm_plan_estimate est;
    memset(&est, 0, sizeof(est));
    est.nodes = o->nodes;
    est.cores_per_node = o->cores_per_node;
    est.ratio_given = o->ratio;
    est.fs_read_given = o->fs_read;
    est.fs_given = o->fs;
    est.warm = o->warm;
    est.input_files_given = o->files_given;
    SM_TRY(sm_plan_rates_load(o->rates, &est.rates, est.rates_from, sizeof(est.rates_from), err));
    struct sm_store *store = NULL;
    struct sm_plan_input in = {NULL, NULL, NULL};
    struct sm_array_meta src_meta;
    SM_TRY(open_input(j, &store, &in, &src_meta, o->docs,
                      o->files_given ? &est.input_files_bytes : NULL, err));
    const struct sm_array_meta *m = in.m;
    struct sm_run_setup su;
    struct sm_output_spec spec;
    struct phase ph[2] = {{.name = "scan"}, {.name = "write"}};
    unsigned nph = j->convert ? 2 : 1;
    sm_status st = sm_run_setup(&j->run.c, m, &su, err);
    if (st == SM_OK) {
        ph[0].grid = su.tiling;
    }
    if (st == SM_OK && nph == 2) {
        st = read_layout(j, &in, &su, &ph[1].grid, &spec, &est, err);
    }
    if (st == SM_OK && nph == 2 && o->memory_only) { /* a grid the run refuses: it says why */
        st = sm_run_check_shards(ph[1].grid.ntiles, j->run.c.memory_bytes, err);
    }
    if (st == SM_OK && nph == 2 && in.src != NULL && !j->run.c.tile.set) {
        ph[0].grid = ph[1].grid; /* a source's tiles are the shards (run_convert.c ph_plan) */
        su.tiling = ph[1].grid;
    }
    if (st == SM_OK) {
        scan_read_plan(j, &in, &su, &est);
    }
    for (unsigned i = 0; i < nph; i++) { /* grouped: both passes go group by group */
        ph[i].grouped = nph == 2 && est.rp_write.windowed;
        ph[i].part = ph[i].grouped ? est.rp_write.groups : ph[i].grid;
    }
    for (unsigned i = 0; st == SM_OK && i < nph; i++) {
        /* the ranks that get items: min(ranks, items) at most, never an entry per rank */
        const uint64_t room =
            (uint64_t)nranks < ph[i].part.ntiles ? (uint64_t)nranks : ph[i].part.ntiles;
        ph[i].shares = sm_calloc((size_t)(room > 0 ? room : 1), sizeof(struct sm_rank_part));
        if (ph[i].shares == NULL) {
            st = SM_ERR(err, SM_E_NOMEM, "cannot allocate the plan of %llu shares",
                        (unsigned long long)room);
            break;
        }
        ph[i].plan.shares = ph[i].shares;
        ph[i].plan.n = sm_run_plan_shares(j->run.c.partition, m, &ph[i].part, nranks, ph[i].shares);
        ph[i].plan.items = ph[i].part.ntiles;
    }
    memset(fit, 0, sizeof(*fit));
    /* the ceiling (plan_memory.c): the run checks this same bound, and adapts as it says */
    if (st == SM_OK && nph == 2 && j->ceiling) {
        st = sm_plan_memory_fit(j, &in, &su, &ph[0].plan, &ph[1].grid, &ph[1].plan, nranks,
                                o->threads, &est, fit, err);
    }
    const bool adapt = fit->checked && fit->fits;
    est.reread = adapt && fit->reread;
    est.memory_only = o->memory_only;
    if (st == SM_OK && !o->memory_only) {
        st = sm_plan_estimate(j, &in, &su, &ph[0].plan, nph == 2 ? &ph[1].grid : NULL,
                              nph == 2 ? &ph[1].plan : NULL, nranks,
                              adapt ? fit->threads : o->threads, &est, err);
        est.fit = *fit;
    }
    if (st == SM_OK && !o->memory_only) {
        st = emit(c, o, &su, ph, nph, &spec, &est, m->ndim, err);
    }
    if (st == SM_OK && nph == 2 && !o->memory_only) {
        sm_job_layout_warn(&spec, ph[1].grid.ntiles);
    }
    for (unsigned i = 0; i < nph; i++) {
        sm_free(ph[i].shares);
    }
    if (o->io != NULL) {
        sm_run_io_of(store, in.array, o->io);
    }
    sm_array_close(in.array);
    sm_source_close(in.src);
    sm_store_close(store);
    return st;
}

sm_status sm_plan_memory_run(const struct sm_convert_run *p, int ranks, int threads,
                             struct sm_plan_fit *fit, struct sm_run_io *io,
                             struct sm_meta_docs *docs, struct sm_err *err)
{
    memset(fit, 0, sizeof(*fit));
    memset(io, 0, sizeof(*io));
    const struct sm_plan_job j = {.convert = true, .passes = 1, .ceiling = true, .run = *p};
    struct plan_opts po = {.ranks = ranks > 0 ? ranks : 1,
                           .threads = threads > 0 ? threads : sm_write_default_threads(),
                           .nodes = 1,
                           .memory_only = true,
                           .io = io,
                           .files_given = true,
                           .docs = docs};
    struct sm_err ignored;
    sm_err_clear(&ignored);
    /* a setup that fails here fails the run the same way, which reports it itself */
    if (plan(&j, NULL, &po, fit, &ignored) != SM_OK) {
        memset(fit, 0, sizeof(*fit));
    }
    (void)err;
    return SM_OK;
}

/* plan --help: what it prints */
static const char PLAN_ABOUT[] =
    "Prints how a scan, convert or ingest job (a Zarr/N5 array or a source of "
    "input.format; read-bench is not planned) splits its work over N ranks "
    "(parallel.partition): "
    "each "
    "rank's contiguous run of scan tiles and of output shards, with the decoded input bytes "
    "it touches, and the imbalance max/mean; then an estimate (JSON `estimate`): seconds "
    "from launch to the completion marker (scaling/MODEL.md's model over per-stage rates "
    "calibrated by scaling/calibrate), an upper bound of each rank's peak RSS (the engine's "
    "buffers, caches and limits.memory_bytes) and, for a convert, the `ceiling` line that "
    "`run` acts on (JSON `memory_ceiling`: within limits.memory_bytes, adapted to it by "
    "re-reading the input or running fewer threads, or over it: run exits 5 before "
    "writing), the output's bytes (the codec's ratio "
    "measured on at most 4 sampled output chunks of input, or the values' bytes with codec "
    "none) and its exact number of files; with export.hdf5.path, the HDF5 file's bytes, "
    "seconds and buffer (JSON `export`). The groups line names the groups of shards that "
    "share input blocks and the window each is read into (and why an automatic shard has "
    "its depth); the reads line gives the bytes each pass fetches from storage, their ratio "
    "to the input's size on disk and their time at the file system's read bandwidth: a "
    "pass lasts the longer of its compute and its read. Reads the input's metadata and "
    "those few sample chunks only (a chunk that does not exist reads as the fill value). "
    "See docs/internals/ranks.md and docs/SLURM.md \"Sizing a large run\".";

int sm_cmd_plan(int argc, char **argv)
{
    struct sm_str_list sets = {0};
    uint64_t ranks = 1, threads = 0, nodes = 1, cores = 0;
    bool as_json = false;
    const char *rates = NULL, *ratio = NULL, *cache = NULL, *fs_read_s = NULL, *fs_s = NULL;
    const struct sm_opt opts[] = {
        {"ranks", 'n', SM_OPT_U64, "N", "ranks to plan for (default 1)", &ranks, SM_PATHC_NONE},
        {"threads", 't', SM_OPT_U64, "T",
         "threads per rank (default parallel.threads, else OMP_NUM_THREADS or the cores)", &threads,
         SM_PATHC_NONE},
        {"nodes", 0, SM_OPT_U64, "M",
         "nodes the ranks spread over, for the estimate's time (default 1)", &nodes, SM_PATHC_NONE},
        {"cores-per-node", 0, SM_OPT_U64, "C",
         "cores of a node, for the estimate's time (default: the calibrated machine's)", &cores,
         SM_PATHC_NONE},
        {"set", 0, SM_OPT_STRINGS, "KEY=VALUE",
         "override a configuration key (repeatable), e.g. --set parallel.partition=block", &sets,
         SM_PATHC_NONE /* each value: its key's row */},
        {"rates", 0, SM_OPT_STRING, "FILE",
         "per-stage rates of scaling/calibrate (default $SHARDMILL_RATES, else the rates built in "
         "from scaling/rates.json)",
         &rates, SM_PATHC_INPUT},
        {"ratio", 0, SM_OPT_STRING, "X",
         "assume the codec's encoded/raw ratio X (0 < X <= 2) instead of sampling chunks: for "
         "sizing from metadata alone",
         &ratio, SM_PATHC_NONE},
        {"fs-read-bandwidth", 0, SM_OPT_STRING, "BYTES",
         "the input file system's aggregate read bandwidth in bytes per second (e.g. 20GiB for a "
         "parallel file system), for the estimate's read time (default: the rates' cold or warm "
         "bandwidth, measured by scaling/calibrate; an http(s) or s3 input: the rates' HTTP "
         "fetch rate per connection, which this caps together)",
         &fs_read_s, SM_PATHC_NONE},
        {"fs-bandwidth", 0, SM_OPT_STRING, "BYTES",
         "a shared (parallel) file system's aggregate bandwidth in bytes per second (e.g. "
         "100GiB), divided among the job's nodes: the nodes' reads of the input and flushes of "
         "the output together go at most this fast (default: no such limit; each node reads and "
         "flushes at the rates' bandwidths); --fs-read-bandwidth, when given, sets the reads",
         &fs_s, SM_PATHC_NONE},
        {"cache", 0, SM_OPT_STRING, "cold|warm",
         "the input's page cache the estimate assumes (default cold: read from storage at the "
         "rates' cold bandwidth; warm: just read, at their warm one)",
         &cache, SM_PATHC_NONE},
        {"json", 0, SM_OPT_FLAG, NULL, "print the plan as JSON", &as_json, SM_PATHC_NONE},
        {NULL, 0, SM_OPT_FLAG, NULL, NULL, NULL, SM_PATHC_NONE},
    };
    const struct sm_cmd_spec spec = {
        "plan",
        "CONFIG.yaml --ranks N [--threads T] [--nodes M] [--set KEY=VALUE]... [--rates FILE] "
        "[--ratio X] [--fs-bandwidth BYTES] [--fs-read-bandwidth BYTES] [--cache cold|warm] "
        "[--json]",
        PLAN_ABOUT,
        opts,
        1,
        1};
    const char *pos[1];
    unsigned npos = 0;
    int rc = sm_cli_parse(&spec, argc, argv, pos, &npos);
    if (rc >= 0) {
        return rc;
    }
    if (ranks < 1 || ranks > PLAN_MAX_RANKS) {
        return sm_usage_error("--ranks", "%llu is out of range 1..%d", (unsigned long long)ranks,
                              PLAN_MAX_RANKS);
    }
    if (nodes < 1 || nodes > ranks) {
        return sm_usage_error("--nodes", "%llu is out of range 1..%llu (--ranks)",
                              (unsigned long long)nodes, (unsigned long long)ranks);
    }
    if (cores > PLAN_MAX_THREADS) {
        return sm_usage_error("--cores-per-node", "%llu is out of range 1..%d",
                              (unsigned long long)cores, PLAN_MAX_THREADS);
    }
    if (threads > PLAN_MAX_THREADS) {
        return sm_usage_error("--threads", "%llu is out of range 1..%d",
                              (unsigned long long)threads, PLAN_MAX_THREADS);
    }
    if (cache != NULL && strcmp(cache, "cold") != 0 && strcmp(cache, "warm") != 0) {
        return sm_usage_error("--cache", "'%s' is not cold or warm", cache);
    }
    uint64_t fs_read = 0;
    if (fs_read_s != NULL && (!sm_parse_size(fs_read_s, &fs_read) || fs_read == 0)) {
        return sm_usage_error("--fs-read-bandwidth",
                              "'%s' is not a positive size (bytes per second, e.g. 20GiB)",
                              fs_read_s);
    }
    uint64_t fs = 0;
    if (fs_s != NULL && (!sm_parse_size(fs_s, &fs) || fs == 0)) {
        return sm_usage_error("--fs-bandwidth",
                              "'%s' is not a positive size (bytes per second, e.g. 100GiB)", fs_s);
    }
    double ratio_v = 0;
    if (ratio != NULL) {
        char *end = NULL;
        ratio_v = strtod(ratio, &end);
        if (end == ratio || *end != '\0' || !(ratio_v > 0 && ratio_v <= 2)) {
            return sm_usage_error("--ratio", "'%s' is not a number in (0, 2]", ratio);
        }
    }
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_job_config c;
    sm_status st = sm_config_load(pos[0], sets.v, sets.n, &c, &err);
    if (st != SM_OK) {
        return sm_report_error(&err);
    }
    if (threads > 0) {
        c.parallel.threads = threads; /* the scan's and the write's threads, as --set would */
    }
    const struct plan_opts po = {.ranks = (int)ranks,
                                 .threads = c.parallel.threads > 0 ? (int)c.parallel.threads
                                                                   : sm_write_default_threads(),
                                 .nodes = (int)nodes,
                                 .cores_per_node = (double)cores,
                                 .ratio = ratio_v,
                                 .as_json = as_json,
                                 .rates = rates,
                                 .fs_read = (double)fs_read,
                                 .fs = (double)fs,
                                 .warm = cache != NULL && strcmp(cache, "warm") == 0};
    struct sm_job_s3 s3; /* an s3:// input's endpoint, region and credentials */
    st = sm_job_s3_resolve(c.input.store, c.input.s3_endpoint, c.input.s3_region,
                           c.input.s3_path_style, &s3, &err);
    if (s3.active) {
        c.input.http.s3 = &s3.opts;
    }
    struct sm_plan_job j;
    struct sm_job_convert_keep keep; /* what j.run points to */
    if (st == SM_OK) {
        st = plan_job(&c, &j, &keep, &err);
    }
    if (st == SM_OK) {
        struct sm_plan_fit fit;
        st = plan(&j, &c, &po, &fit, &err);
    }
    if (st == SM_OK && (fflush(stdout) != 0 || ferror(stdout))) {
        st = SM_ERR_AT(&err, SM_E_IO, "standard output", "cannot write the plan");
    }
    sm_job_s3_destroy(&s3);
    sm_config_destroy(&c);
    return st == SM_OK ? 0 : sm_report_error(&err);
}
