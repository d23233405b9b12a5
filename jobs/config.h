/* The effective job configuration (SPEC §4): what the YAML loader (config_load.c, driven by the
 * schema table in config_schema.c) fills and what the jobs read. Every field has a documented
 * default (docs/CONFIG.md is generated from the schema table). Strings are owned by the config
 * and released by sm_config_destroy(). The engine never sees this struct: jobs translate it into
 * the engine's parameter structs. */
#ifndef SM_JOBS_CONFIG_H
#define SM_JOBS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <shardmill/export.h>   /* enum sm_export_exists (export.hdf5.exists) */
#include <shardmill/pipeline.h> /* enum sm_run_ome_downsample, sm_run_ome_version */
#include <shardmill/tile.h>     /* enum sm_part_kind (parallel.partition) */
#include <shardmill/stats.h>    /* enum sm_norm_mode */
#include <shardmill/write.h>    /* enum sm_output_exists, sm_output_sync (output.sync) */
#include <shardmill/status.h>
#include <shardmill/store.h>

#define SM_CFG_MAX_DIMS 32

/* A list of non-negative integers (shapes, offsets); set=false means "not given". */
/* A list of numbers (input.spacing, input.origin). */
struct sm_cfg_floats {
    bool set;
    unsigned n;
    double v[SM_CFG_MAX_DIMS];
};

struct sm_cfg_dims {
    bool set;
    bool is_auto; /* the word `auto` (keys with SM_CFGF_AUTO): n = 0, the job picks (SPEC §2) */
    unsigned n;
    uint64_t v[SM_CFG_MAX_DIMS];
};

enum sm_job_kind { SM_JOB_SCAN, SM_JOB_CONVERT, SM_JOB_INGEST, SM_JOB_READ_BENCH };
/* output.exists, output.sync, output.ome.downsample, output.ome.version, export.hdf5.exists and
 * parallel.partition are the engine's own enums (their YAML choices in enum order;
 * test_config_schema.c checks every value). */

struct sm_job_config {
    enum sm_job_kind job; /* job: scan | convert | ingest | read-bench (required) */

    struct {
        char *store; /* input.store: path, file:// or http(s):// URL (required) */
        char *array; /* input.array: node path inside the store ("" = the store) */
        struct sm_cfg_floats
            spacing; /* input.spacing: voxel size z, y, x (from the input, else 1) */
        char *unit;  /* input.unit: UDUNITS-2 name (from the input, else none) */
        struct sm_cfg_floats origin;  /* input.origin: position of voxel 0 (from the input) */
        bool cache_enabled;           /* input.cache.enabled (true) */
        uint64_t cache_max_bytes;     /* input.cache.max_bytes (256MiB) */
        uint64_t index_cache_bytes;   /* input.index_cache.max_bytes (16MiB; 0 disables) */
        uint64_t index_cache_entries; /* input.index_cache.max_entries (64; 0 disables) */
        struct sm_http_opts http;     /* input.http.{connect_timeout_ms, low_speed_bytes,
                                         low_speed_time_s, request_timeout_ms, retries,
                                         backoff_base_ms, backoff_max_ms, verify_tls} */
        char *s3_endpoint;            /* input.s3.endpoint (AWS_ENDPOINT_URL, else AWS) */
        char *s3_region;              /* input.s3.region (AWS_REGION, ..., else us-east-1) */
        bool s3_path_style;           /* input.s3.path_style (false) */
        /* ingest only */
        char *format;    /* input.format: zarr | raw | nifti | tiff | hdf5 (see sm_config_load) */
        char *raw_dtype; /* input.raw.dtype: v3 data type name */
        struct sm_cfg_dims raw_shape;    /* input.raw.shape: [z, y, x] */
        char *raw_byte_order;            /* input.raw.byte_order: little | big (little) */
        uint64_t raw_header_bytes;       /* input.raw.header_bytes (0) */
        char *hdf5_dataset;              /* input.hdf5.dataset: absolute HDF5 path (hdf5 input) */
        enum sm_source_direct direct_io; /* input.direct_io: auto | always | never (auto) */
        bool hdf5_allow_external;        /* input.hdf5.allow_external (false) */
    } input;

    struct {
        struct sm_cfg_dims offset; /* roi.offset (zeros) */
        struct sm_cfg_dims shape;  /* roi.shape (to the end of the array) */
    } roi;

    struct sm_cfg_dims tile; /* tile (the input's chunk shape) */
    uint64_t passes;         /* passes (1; scan only) */

    struct {
        struct sm_cfg_dims extents; /* read_bench.extents (unset: one case, the ROI) */
        uint64_t repeats;           /* read_bench.repeats (5): timed reads per case */
        uint64_t warmup;            /* read_bench.warmup (1): untimed reads before them */
    } read_bench;

    struct {
        uint64_t bins;  /* histogram.bins (0 = the type default, SPEC §5) */
        bool range_set; /* histogram.range given */
        double lo, hi;  /* histogram.range: [lo, hi) */
    } histogram;

    struct {
        enum sm_norm_mode mode; /* normalize.mode (scale) */
        double divisor;         /* normalize.divisor (255) */
        double lo, hi;          /* normalize.lo / .hi: window values or percentiles (0..100);
                                   required by window and percentile */
    } normalize;

    struct {
        char *path;                      /* output.path (required for convert and ingest) */
        struct sm_cfg_dims shard;        /* output.shard (auto; [] = not sharded) */
        struct sm_cfg_dims chunk;        /* output.chunk (auto) */
        char *codec;                     /* output.codec.name: zstd | gzip | blosc | none (zstd) */
        int64_t codec_level;             /* output.codec.level (3) */
        char *dtype;                     /* output.dtype (float32; ingest: the input's type) */
        enum sm_output_exists exists;    /* output.exists (error) */
        bool fsync;                      /* output.fsync (true) */
        enum sm_output_sync sync;        /* output.sync: fsync | syncfs (syncfs); never NONE:
                                            output.fsync false is the engine's NONE */
        enum sm_output_direct direct_io; /* output.direct_io: auto | always | never (auto) */
        uint64_t ome_levels;             /* output.ome.levels (0 = auto) */
        char *ome_method;                /* output.ome.method (NULL: no OME-Zarr image) */
        enum sm_run_ome_downsample
            ome_downsample;                  /* output.ome.downsample: auto | all | yx (auto) */
        enum sm_run_ome_version ome_version; /* output.ome.version: "0.5" | "0.4" ("0.5") */
    } output;

    struct {
        char *hdf5_path;                   /* export.hdf5.path (none: no export) */
        char *hdf5_dataset;                /* export.hdf5.dataset ("/data") */
        struct sm_cfg_dims hdf5_chunk;     /* export.hdf5.chunk (the output's shard shape) */
        int64_t hdf5_deflate;              /* export.hdf5.deflate (0 = off, 1..9) */
        enum sm_export_exists hdf5_exists; /* export.hdf5.exists (error) */
        uint64_t hdf5_timeout_s;           /* export.hdf5.collective_timeout_s (60) */
    } export_;

    struct {
        uint64_t threads;            /* parallel.threads (0 = auto: OMP_NUM_THREADS or the cores) */
        enum sm_part_kind partition; /* parallel.partition (balanced) */
    } parallel;

    struct {
        uint64_t memory_bytes;     /* limits.memory_bytes (2GiB) */
        bool memory_ceiling;       /* limits.memory_ceiling (true): memory_bytes bounds the RSS */
        uint64_t max_object_bytes; /* limits.max_object_bytes (512MiB) */
        uint64_t max_chunk_bytes;  /* limits.max_chunk_bytes (1GiB) */
        uint64_t max_requests;     /* limits.max_requests (1000000) */
    } limits;

    char *report;               /* report: path of the JSON report (none) */
    bool progress;              /* progress (true): progress lines on stderr from rank 0 */
    uint64_t progress_interval; /* progress_interval (10): seconds between lines off a tty */

    char *source_path; /* the YAML file loaded (for messages and provenance) */
    char *effective;   /* canonical text of the effective configuration (for its SHA-256): one
                          "key=value\n" line per schema key, sorted by key; sizes in bytes,
                          strings JSON-quoted, unset values `null` */
};

/* Fills every field with its documented default (the `def` column of the schema table; keys
 * without a default are zero/NULL/unset). Owned strings are allocated; if an allocation fails the
 * string stays NULL and sm_config_load reports SM_E_NOMEM. */
void sm_config_defaults(struct sm_job_config *c);

/* Loads a YAML file, applies `--set key.path=value` overrides (in order), validates. Errors are
 * SM_E_USAGE with `where` = "FILE:LINE:COL" (or "--set KEY") and `what` naming the key: unknown
 * keys, wrong types, out-of-range values, missing required keys. Defaults that depend on the job
 * are resolved here: input.format (zarr; ingest: nifti for .nii/.nii.gz, else raw) and
 * output.dtype (float32; ingest: NULL = the input's type). `out` need not be initialized; on
 * success release it with sm_config_destroy(), on failure it is already released (zeroed).
 * Other statuses: SM_E_NOMEM. A missing or unreadable file is SM_E_USAGE naming the path. */
sm_status sm_config_load(const char *path, const char *const *sets, unsigned nsets,
                         struct sm_job_config *out, struct sm_err *err);

/* sm_config_load on YAML text held in memory; `name` stands for the file in messages and in
 * source_path. */
sm_status sm_config_load_string(const char *name, const char *text, size_t len,
                                const char *const *sets, unsigned nsets, struct sm_job_config *out,
                                struct sm_err *err);

/* Releases the owned strings and zeroes c; accepts a zeroed or already destroyed config. */
void sm_config_destroy(struct sm_job_config *c);

/* Name of a job kind as written in YAML ("read-bench"). */
const char *sm_config_job_name(enum sm_job_kind job);

/* The effective configuration as YAML that loads back to the same values: every key the job
 * uses (its schema row's `applies`), in schema order, nested. An sm_malloc'd string (sm_free it),
 * or NULL when out of memory. */
char *sm_config_format_yaml(const struct sm_job_config *c);

/* docs/CONFIG.md, generated from the schema table. sm_malloc'd; NULL when out of memory. */
char *sm_config_markdown(void);
/* Path classes (issue 32): every configuration key (its schema row), command-line option (struct
 * sm_opt) and slurm/render flag that holds a string declares whether it names a path and what is
 * done with it, so that one rule (sm_job_check_path_uses, jobs/job_paths.c) applies to every path
 * that is written. UNSET is "not declared": the schema test and sm_cli_parse refuse a string row
 * or option left so. */
enum sm_path_class {
    SM_PATHC_UNSET = 0,
    SM_PATHC_NONE,    /* no file-system path: a name, a URL endpoint, a node inside a store */
    SM_PATHC_INPUT,   /* read, never written */
    SM_PATHC_OUTPUT,  /* written: the output tree, the HDF5 export, a file of `read` */
    SM_PATHC_REPORT,  /* written: the JSON report */
    SM_PATHC_LOG_DIR, /* written: a directory that receives new, uniquely named log files */
};

/* One path a command names, with its class, for sm_job_check_path_uses: `key` names it in
 * messages (a configuration key or an option such as "--report"), `noun` in the other path's
 * message ("input", "output", "export", "report", "log directory"). */
struct sm_path_use {
    const char *key;
    const char *noun;
    enum sm_path_class cls;
    const char *path;
};

/* The JSON report's path (`report`, or run's `--report`, named by `key`), checked before any
 * work so a run does not fail only after its job: SM_E_USAGE (where = key) when the path is a
 * directory, an ancestor is no directory, or the nearest existing ancestor of its directory is
 * not writable. Missing directories are fine: the report writer creates them (as the output's
 * are). NULL and "-" (standard output) pass. Creates nothing. sm_config_load checks `report`
 * with it. */
sm_status sm_config_check_report(const char *path, const char *key, struct sm_err *err);

#endif
