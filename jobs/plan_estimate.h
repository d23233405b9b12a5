/* The estimate of `shardmill plan` (SPEC §4, issue 22 item 4): seconds, a rank's peak RSS, the
 * output's bytes and files of a convert, from the metadata, a few sampled input chunks and the
 * calibrated rates (plan_model.h). */
#ifndef SM_JOBS_PLAN_ESTIMATE_H
#define SM_JOBS_PLAN_ESTIMATE_H

#include <shardmill/array.h>
#include <shardmill/pipeline.h>
#include <shardmill/source.h>
#include <shardmill/tile.h>

#include "config.h"
#include "jobs_run.h"
#include "plan_model.h"

/* At most this many output chunks are sampled (each reads the input chunks it covers), and
 * together they read at most SM_PLAN_SAMPLE_UNITS input read units: the sample boxes that would
 * go past it are left out, and when not even the first fits (an input of [1,1,1] chunks: 2^18
 * per 64^3 output chunk) nothing is read and the ratio is the values' bytes (`metadata`). */
#define SM_PLAN_SAMPLES 4u
#define SM_PLAN_SAMPLE_UNITS 4096u

/* One phase's plan (the scan's tiles or the convert's shards) over `ranks` ranks: the shares
 * that hold items, in rank order (sm_job_plan); the ranks not listed get nothing. */
struct sm_plan_phase {
    const struct sm_rank_part *shares;
    size_t n;
    uint64_t items;
};

/* Rank r's share of ph: its listed share, or an empty run where the next listed share begins
 * (items after the last), as sm_partition_tiles gives an idle rank. *cursor (start at 0) walks
 * the list: call with ranks in increasing order. */
struct sm_part sm_plan_phase_share(const struct sm_plan_phase *ph, int r, size_t *cursor);

/* The input a plan opened: a Zarr/N5 array or a file source, and its metadata. */
struct sm_plan_input {
    struct sm_array *array; /* NULL for a source */
    struct sm_source *src;  /* NULL for an array */
    const struct sm_array_meta *m;
};

/* The job a plan estimates, as the engine's parameters the run gets (sm_job_convert_params):
 * the input, ROI, tile, partition and limits.memory_bytes (run.c), normalize, output, the export
 * and a file source's parameters; a scan reads run.c alone. `run`'s ceiling check plans from the
 * very parameters it then runs with, never from the configuration again. */
struct sm_plan_job {
    bool convert; /* convert or ingest (else a scan) */
    int passes;   /* a scan's passes */
    bool ceiling; /* limits.memory_ceiling */
    struct sm_convert_run run;
};

/* The memory ceiling (limits.memory_bytes, SPEC §1) as `plan` prints it and `run` checks it
 * (jobs/plan_memory.c): the bound of a rank's peak RSS as configured and, when over the ceiling,
 * as adapted: the input re-read instead of kept, then fewer threads (fewer shards in flight). */
struct sm_plan_fit {
    bool checked;                   /* a convert with limits.memory_ceiling */
    bool fits;                      /* the adapted bound is within the limit */
    uint64_t limit;                 /* limits.memory_bytes */
    int threads_asked, threads;     /* as configured; as adapted */
    bool kept_asked;                /* as configured, some rank keeps its decoded input */
    bool reread;                    /* adapted: the input re-read, not kept */
    uint64_t bound_asked, bound;    /* as configured; adapted (or the least any adaptation gets) */
    struct sm_plan_rss_parts parts; /* of `bound` */
    char adapted[160];              /* what the run does differently ("none": nothing) */
};

struct sm_plan_estimate {
    int nodes;              /* in: --nodes (>= 1) */
    bool reread;            /* in: the input is re-read, never kept (sm_run_common.reread) */
    bool memory_only;       /* in: no sample is read or encoded (the ratio is 1): run's check */
    struct sm_plan_fit fit; /* out of the plan command: the ceiling's check */
    double cores_per_node;  /* in: --cores-per-node (0: the calibrated machine's) */
    double ratio_given;     /* in: --ratio (0: measured on the sample) */
    double fs_read_given;   /* in: --fs-read-bandwidth, bytes/s (0: the rates') */
    double fs_given;        /* in: --fs-bandwidth, the shared file system's aggregate (0: none) */
    bool warm;              /* in: --cache warm: the rates' warm read bandwidth, not the cold */
    /* in: a local Zarr/N5 input's payload bytes (sm_report_zarr_input_bytes) when the caller
     * has them (run's ceiling check: rank 0 walks the files and broadcasts the sum); else plan
     * walks them itself */
    bool input_files_given;
    uint64_t input_files_bytes;
    /* in: how the scan's tiles and the write's shards read the input (sm_run_read_plan; the
     * write's from sm_run_input_layout, the layout the run chooses) */
    struct sm_read_plan rp_scan, rp_write;
    int threads;
    bool convert;
    struct sm_plan_terms t;
    uint64_t peak_rss_bytes; /* per rank, upper bound */
    struct sm_plan_rss_parts rss;
    uint64_t output_bytes;
    uint64_t files;
    unsigned levels; /* 1, or the OME-Zarr levels */
    uint64_t shards; /* every level's */
    /* the HDF5 export of export.hdf5.path (NULL: none): one more file, beside the output; its
     * bytes (level 0's values, at the output codec's sampled ratio when deflated, plus its
     * metadata: not in output_bytes), its chunks and a rank's value buffer */
    const char *export_path;
    int export_deflate;
    uint64_t export_bytes, export_chunks, export_buffer_bytes, export_chunk_bytes;
    /* the sample */
    unsigned samples;          /* output chunks encoded (0: none, see ratio_from) */
    uint64_t sample_in_chunks; /* input chunks (read units) they read */
    uint64_t sample_raw, sample_encoded;
    uint64_t sample_units_needed; /* ratio_from "metadata": the read units one sample needs */
    double ratio;                 /* encoded / raw */
    /* the levels below level 0 (an OME image): each sample box reduced to level 1 as the pyramid
     * would and encoded with its spec (their values compress worse than level 0's clamped ones:
     * 0.53 against 0.34 on the head CT); the level-0 ratio when nothing was sampled */
    uint64_t level_sample_raw, level_sample_encoded;
    double level_ratio;
    double in_ratio;        /* the input's stored / decoded bytes in the sample (1: unknown) */
    const char *ratio_from; /* "sample", "metadata", "--ratio", "codec none" or "no output" */
    uint64_t rank_tiles, rank_shards; /* the most scan tiles, shards a rank has */
    bool kept;                        /* every rank keeps its decoded input (two passes) */
    bool kept_some;                   /* some ranks keep it (their RSS holds it) */
    bool two_pass;
    /* the reads: the input's size on disk (the ROI's share) and where it came from ("files": the
     * source's files; "sample": the sampled chunks' stored/decoded ratio; "decoded": unknown,
     * the decoded bytes), what each pass fetches from storage, at which bandwidth */
    uint64_t disk_bytes;
    const char *disk_from;
    bool reads[SM_PLAN_PASSES];
    uint64_t read_bytes[SM_PLAN_PASSES];
    double read_ratio[SM_PLAN_PASSES];
    /* the job's aggregate read bandwidth: --fs-read-bandwidth, else the rates' (one node's) times
     * the nodes, at most --fs-bandwidth; from "--fs-read-bandwidth", "rates (cold)", "rates
     * (warm)", "--fs-bandwidth" (it set the bound) or "none" (0) */
    double fs_read_bytes_per_s;
    const char *fs_read_from;
    /* an http(s) or s3 input: the requests each pass makes (its read units, and a sharded input's
     * shard indexes in the first pass; summed over ranks); http: priced at the rates'
     * http_request_s and http_bytes_per_s (each thread its own connection), fs_read_bytes_per_s
     * then only --fs-read-bandwidth's aggregate; in_sampled: a remote scan's stored/decoded
     * ratio (in_ratio) from its sample */
    bool remote, http, in_sampled;
    uint64_t read_requests[SM_PLAN_PASSES];
    char rates_from[300]; /* "built in (scaling/rates.json)" or the file */
    struct sm_plan_rates rates;
};

/* Loads the rates: `path` (--rates), else $SHARDMILL_RATES, else the built-in ones. SM_E_USAGE
 * naming the file when it cannot be read or parsed. */
sm_status sm_plan_rates_load(const char *path, struct sm_plan_rates *r, char *from, size_t cap,
                             struct sm_err *err);

/* The estimate of job j on `in` over `ranks` ranks of `threads` threads: su and tiles are the
 * scan's setup and plan; for a convert, grid and shards are the level 0 shard grid and its plan
 * (else NULL); e->nodes and e->cores_per_node are set by the caller. O(listed shares) whatever
 * `ranks`. Reads at most SM_PLAN_SAMPLES output chunks' input. */
sm_status sm_plan_estimate(const struct sm_plan_job *j, const struct sm_plan_input *in,
                           const struct sm_run_setup *su, const struct sm_plan_phase *tiles,
                           const struct sm_tiling *grid, const struct sm_plan_phase *shards,
                           int ranks, int threads, struct sm_plan_estimate *e, struct sm_err *err);

/* The output's work by level as the model counts it (sm_plan_work): level 0's shards, the levels
 * written with each level-0 shard (1: level 0 alone) and their value bytes, the shards and value
 * bytes of the levels read back (the pyramid), for a convert with the output parameters o (the
 * run's, sm_convert_run.output) over an ROI of `shape`, written as out_dt. The report's per-stage
 * rates use it (report_rates.c). SM_E_USAGE as the plan for an output it cannot lay out. */
struct sm_plan_level_work {
    unsigned levels, levels_with;
    uint64_t shards, level0_value_bytes, out_value_bytes, pyr_shards, pyr_value_bytes;
    uint64_t spill_shards, spill_value_bytes; /* the level made from the spill file */
};
sm_status sm_plan_level_work(const struct sm_run_output *o, unsigned nd, const uint64_t *shape,
                             enum sm_dtype out_dt, struct sm_plan_level_work *lw,
                             struct sm_err *err);
/* The ceiling's check of a convert whose phases are set up (the arguments of sm_plan_estimate;
 * proto: an estimate's inputs, left as they are): the bound as configured and, while over
 * j->run.c.memory_bytes (limits.memory_bytes), re-read instead of kept, then the most threads (at
 * most `threads`) whose bound fits. No sample is read. */
sm_status sm_plan_memory_fit(const struct sm_plan_job *j, const struct sm_plan_input *in,
                             const struct sm_run_setup *su, const struct sm_plan_phase *tiles,
                             const struct sm_tiling *grid, const struct sm_plan_phase *shards,
                             int ranks, int threads, const struct sm_plan_estimate *proto,
                             struct sm_plan_fit *fit, struct sm_err *err);
/* SM_E_LIMIT, where limits.memory_bytes, naming the least bound and its parts. */
sm_status sm_plan_memory_refuse(const struct sm_plan_fit *fit, struct sm_err *err);
/* {limit_bytes, bound_bytes, bound_as_configured_bytes, fits, threads, threads_asked, reread,
 * adapted} */
struct json_t *sm_plan_fit_json(const struct sm_plan_fit *fit);
/* The ceiling's check for `run` of a convert with limits.memory_ceiling, over `ranks` ranks of
 * `threads` threads: cmd_plan.c's plan of the run's own parameters p (sm_job_convert_params),
 * memory only. fit->checked false when the setup fails (the run then reports the failure itself).
 * *io: the requests its metadata read made on the input (a Zarr/N5 array's store), which the run
 * counts (sm_run_common.preflight); *docs (empty on entry): the metadata documents that read
 * fetched on rank 0, for the run to open the input from (sm_run_input.docs) instead of fetching
 * them again. A local input's files are walked on rank 0 by the engine's open and their sum
 * broadcast (sm_run_input.files_size). */
sm_status sm_plan_memory_run(const struct sm_convert_run *p, int ranks, int threads,
                             struct sm_plan_fit *fit, struct sm_run_io *io,
                             struct sm_meta_docs *docs, struct sm_err *err);

/* The JSON member `estimate`, and the human lines. */
struct json_t *sm_plan_estimate_json(const struct sm_plan_estimate *e, int ranks);
void sm_plan_estimate_print(const struct sm_plan_estimate *e, int ranks);

#endif
