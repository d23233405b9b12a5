/* The pipeline of a run (SPEC §1), as an engine API: a scan and a convert (of any source) that take
 * plain structs and return their results and timings, so any C program, or an MPI application on a
 * communicator of its own, runs them exactly as `shardmill run` does (jobs/ maps YAML to these
 * structs, prints, reports and picks the exit code: STYLE B10). Module run/ (engine/run/).
 *
 * The phases belong here (docs/internals/pipeline.md). A convert whose normalization needs no
 * statistics before writing (scale, window, none) runs ONE PASS: open (the output first, then
 * the input: rank 0 fetches the metadata and broadcasts it) → plan (tiles and shards per rank,
 * parallel.partition) → begin (zarr.json with its provenance histogram pending) → write (each
 * rank its run of shards, each read once from the input region it covers, its histogram and
 * checksums counted on the way; shards resume keeps are read and counted too) → flush (every
 * rank) → allreduce of the statistics → restate zarr.json with them (rank 0) → the `flushed`
 * hook → completion marker (rank 0, only after every rank flushed) → agree. With percentile,
 * or with an OME-Zarr output (output.ome: its group document is not restated), it runs TWO PASSES:
 * open → scan (each rank its run of tiles) → allreduce → window → keep the decoded input or re-read
 * it (SPEC §1) → begin → write → flush → hook → marker. Both give the same bytes for the same
 * configuration. A wider integer or float input without histogram.range reads its ROI once more
 * before the scan (or the one-pass write): the min/max pass of SPEC §5 (run/run_range.c). Every
 * phase ends with an agreement, so all ranks go on or all return the same error
 * (docs/internals/ranks.md). A phase added after the write (the pyramid, the HDF5 export of
 * `export`: run_export.c) goes between the flush (and, in one pass, the restate) and the marker.
 *
 * Ranks: with `mpi_comm` NULL the run uses the ranks that are current (sm_par_init of par.h, as
 * jobs/ does under a launcher; one rank when none are). With `mpi_comm` pointing to an MPI_Comm,
 * the run initialises par/ on a duplicate of that communicator for its duration (MPI_Init only if
 * MPI is not initialised, the thread level checked: sm_par_init_comm) and releases it before it
 * returns; ranks must not be initialised already then. The header needs no <mpi.h>.
 *
 * output.exists: auto (write.h SM_OUTPUT_EXISTS_AUTO): once the input is open, rank 0 compares the
 * output's zarr.json with this job's identity (engine, config_sha256, input) and, over a complete
 * output, verifies it; every rank takes the decision: write, resume, or (this job's complete,
 * verified output) end the run there with nothing written (res->output_found COMPLETE).
 *
 * Errors as everywhere (status.h): SM_E_USAGE names the field in YAML terms (`roi.shape`,
 * `output.shard`, ...), the same text `shardmill run` prints. A set stop flag ends the run at the
 * next tile or shard with SM_E_STOPPED and no marker (finished shards are flushed for resume). */
#ifndef SM_RUN_PIPELINE_H
#define SM_RUN_PIPELINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shardmill/array.h"
#include "shardmill/export.h"
#include "shardmill/source.h"
#include "shardmill/stats.h"
#include "shardmill/status.h"
#include "shardmill/store.h"
#include "shardmill/tile.h"
#include "shardmill/write.h"

struct json_t;

/* A shape or offset the caller may leave out (set false: the documented default). */
struct sm_run_dims {
    bool set;
    unsigned n;
    uint64_t v[SM_MAX_DIMS];
};

/* The input array (SPEC §3, `input.*` and `limits.*` of docs/CONFIG.md). */
struct sm_run_input {
    const char *store;            /* path, file:// or http(s):// URL (required) */
    const char *array;            /* node path inside the store (NULL or "": the store) */
    struct sm_http_opts http;     /* http(s) stores only */
    bool cache_enabled;           /* the encoded-object cache in front of the store */
    uint64_t cache_max_bytes;     /* capped at half of memory_bytes */
    uint64_t index_cache_bytes;   /* shard-index cache (0 disables) */
    uint64_t index_cache_entries; /* (0 disables) */
    uint64_t max_object_bytes;    /* limits.max_object_bytes */
    uint64_t max_chunk_bytes;     /* limits.max_chunk_bytes */
    uint64_t max_requests;        /* limits.max_requests: of the store opened (0: no limit) */
    /* NULL, or the metadata documents kept across opens of the same input (rank 0's; borrowed):
     * empty (SM_META_DOCS_NONE), the open fetches them and keeps a copy there; holding a kind,
     * rank 0 opens from them instead of fetching again (jobs/: the memory ceiling's check
     * fetches, the run reuses: the metadata is read once) */
    struct sm_meta_docs *docs;
    /* NULL, or called on rank 0 by the open with the store and the array's path (a local input's
     * files' size: jobs/' memory ceiling prices its cache by it), the answer broadcast with the
     * metadata into *files_bytes on every rank (collective, never a walk per rank) */
    uint64_t (*files_size)(const char *store, const char *array);
    uint64_t *files_bytes;
};
#define SM_RUN_INPUT_DEFAULTS                                                                      \
    {                                                                                              \
        .store = NULL, .array = NULL, .http = SM_HTTP_OPTS_DEFAULTS, .cache_enabled = true,        \
        .cache_max_bytes = (uint64_t)256 << 20, .index_cache_bytes = (uint64_t)16 << 20,           \
        .index_cache_entries = 64, .max_object_bytes = (uint64_t)512 << 20,                        \
        .max_chunk_bytes = (uint64_t)1 << 30, .max_requests = 0, .docs = NULL, .files_size = NULL, \
        .files_bytes = NULL                                                                        \
    }

/* Progress of the phases (jobs/progress.c prints rank 0's line). Every member may be NULL. Called
 * from the main thread of every rank: begin and end by every rank (end also on failure), update by
 * the drivers (sm_progress_fn), next_call between the passes of a scan. */
struct sm_run_progress {
    void (*begin)(void *user, const char *phase, const char *unit, uint64_t total);
    sm_progress_fn update;
    void (*next_call)(void *user);
    void (*end)(void *user, bool ok);
    void *user;
    /* NULL, or told every transition of the run's phase table (docs/internals/pipeline.md), on
     * every rank: `what` is "begin" (the phase starts), "ok" or "failed" (after its agreement),
     * "skipped" (its `when` says it is not part of this run, e.g. scan in one pass), "ended" (the
     * run ended early: output.exists: auto over a complete output) or "cleanup" (after a failure).
     */
    void (*trace)(void *user, const char *phase, const char *what);
};

/* Where a histogram's range comes from (SPEC §5): histogram.range (config), the type's exact
 * default (type: 8/16-bit), or, for wider integers and floats without histogram.range, the
 * min/max pass before the scan (minmax: sm_run_minmax_range). */
enum sm_hist_range_from { SM_HIST_RANGE_CONFIG, SM_HIST_RANGE_TYPE, SM_HIST_RANGE_MINMAX };

/* What scan and convert share: the input, the region, the statistics and the resources. */
struct sm_run_common {
    struct sm_run_input input;
    struct sm_run_dims roi_offset; /* roi.offset (zeros) */
    struct sm_run_dims roi_shape;  /* roi.shape (to the end of the array) */
    struct sm_run_dims tile;       /* tile (the input's stored chunk shape) */
    uint32_t hist_bins;            /* histogram.bins (0: the type's default, SPEC §5) */
    bool hist_range_set;           /* histogram.range given (then hist_bins is required) */
    double hist_lo, hist_hi;       /* histogram.range: [lo, hi) */
    int threads;                   /* parallel.threads (<= 0: OMP_NUM_THREADS or the cores) */
    enum sm_part_kind partition;   /* parallel.partition (SM_PART_BALANCED) */
    uint64_t memory_bytes;         /* limits.memory_bytes: the rank's budget (SPEC §1) */
    bool reread; /* a convert re-reads its input for the write pass, never keeps it (the memory
                  * ceiling's first adaptation: jobs/plan_memory.c) */
    /* The requests this rank's caller made on the input before the run (jobs/: the memory
     * ceiling's metadata read), counted in the result's io with the run's own; NULL: none. */
    const struct sm_run_io *preflight;
    struct sm_run_progress progress;
    const atomic_int *stop; /* cooperative stop flag (status.h), or NULL */
    const void *mpi_comm;   /* NULL, or a pointer to the MPI_Comm to run on (see above) */
};
#define SM_RUN_COMMON_DEFAULTS                                                                     \
    {                                                                                              \
        .input = SM_RUN_INPUT_DEFAULTS, .partition = SM_PART_BALANCED,                             \
        .memory_bytes = (uint64_t)2 << 30                                                          \
    }

struct sm_scan_run {
    struct sm_run_common c;
    uint64_t passes; /* traversals without reopening (>= 1; every pass must agree) */
    /* The caller's check before the input is opened (NULL: none), as a convert's hooks.prepare:
     * called on every rank, its status agreed over the ranks (jobs/: the --report path, rank 0). */
    sm_status (*prepare)(void *user, struct sm_err *err);
    void *user;
};
#define SM_SCAN_RUN_DEFAULTS                                                                       \
    {                                                                                              \
        .c = SM_RUN_COMMON_DEFAULTS, .passes = 1                                                   \
    }

/* normalize.* (SPEC §5): the mode (enum sm_norm_mode of stats.h), the divisor of scale, lo and hi
 * of window (values) and percentile (0..100). */
struct sm_run_norm {
    enum sm_norm_mode mode;
    double divisor;
    double lo, hi;
};
#define SM_RUN_NORM_DEFAULTS                                                                       \
    {                                                                                              \
        .mode = SM_NORM_SCALE, .divisor = 255.0                                                    \
    }

/* The normalization a convert applied as zarr.json's provenance and the report state it (SPEC
 * §5): {"mode", "lo", "hi"} (null for none; scale as the window it equals, [0, divisor], plus
 * "divisor"), and "percentiles" [lo, hi] for percentile. cfg is what was asked, nm what was
 * applied (the resolved window). A new reference. */
struct json_t *sm_run_norm_json(const struct sm_run_norm *cfg, const struct sm_norm *nm);

/* The output (SPEC §2, §6, `output.*`): a float32 Zarr v3 array (normalize none: the input's
 * type, or `dtype` when dtype_set, which must hold every input value: sm_cast_lossless, else
 * SM_E_USAGE naming output.dtype). shard unset: SPEC §2's automatic
 * layout (sm_output_layout_auto); shard set with n = 0: not sharded; chunk unset: automatic (64
 * where it divides an explicit shard, else the shard's extent). `policy` holds output.exists and
 * output.sync/fsync. */
/* output.ome (SPEC §2 "OME-Zarr output"): levels 0 writes a plain array; otherwise the output
 * is an OME-Zarr 0.5 image group with arrays "0" .. levels-1 (SM_RUN_OME_AUTO: down to the first
 * level whose largest axis is <= 256). Level k+1 halves some axes of level k (size ceil(n/2)):
 * `downsample` AUTO halves the axes whose spacing at level k is below 3/4 of the largest (axes of
 * one voxel left out), every axis when none is; ALL halves every axis; YX halves y and x only
 * (the last two axes, those of one voxel left out), never z, and SM_RUN_OME_AUTO and the most
 * levels count y and x alone. Each value of level k+1 is
 * `method` over the block of level k it covers: MEAN (SPEC §2: float64 sum of the float32 values in
 * the block's C order, divided by the count, rounded once) or NEAREST (the block's first value in
 * C order, for labels). spacing (voxel size per axis, z y x; unset: 1), origin (the position of
 * voxel 0; unset: 0) and unit (a UDUNITS-2 name, or NULL) go to the axes and to each level's
 * `scale` (spacing x the level's factor per axis) and `translation` (levels >= 1, and level 0 when
 * origin is set: origin + (factor - 1) / 2 x spacing, so voxel centres line up). */
#define SM_RUN_OME_AUTO 0xffffffffu
enum sm_run_ome_downsample { SM_RUN_OME_DOWN_AUTO, SM_RUN_OME_DOWN_ALL, SM_RUN_OME_DOWN_YX };
enum sm_run_ome_method { SM_RUN_OME_MEAN, SM_RUN_OME_NEAREST };
/* `version` V04 (issue 35): OME-NGFF 0.4, Zarr v2 arrays, one file per chunk (never sharded). */
enum sm_run_ome_version { SM_RUN_OME_V05, SM_RUN_OME_V04 };
struct sm_run_ome {
    unsigned levels;
    struct sm_run_spacing {
        bool set;
        unsigned n; /* values given (must be the input's dimensions) */
        double v[SM_MAX_DIMS];
    } spacing, origin;
    const char *unit;
    enum sm_run_ome_downsample downsample;
    enum sm_run_ome_method method;
    enum sm_run_ome_version version;
};
struct sm_run_output {
    const char *path; /* required */
    struct sm_run_dims shard, chunk;
    const char *codec; /* zstd | gzip | blosc | none (NULL: zstd) */
    int level;
    struct sm_output_opts policy;
    struct sm_run_ome ome;
    bool dtype_set; /* output.dtype */
    enum sm_dtype dtype;
    /* the automatic shard's depth on axis 0 when the read plan made it shallower (run_read_plan.c:
     * a group's window within the memory limit); 0: the default. Set by the run, not by users. */
    uint64_t shard_depth;
};
#define SM_RUN_OUTPUT_DEFAULTS                                                                     \
    {                                                                                              \
        .codec = "zstd", .level = 3,                                                               \
        .policy = {.exists = SM_OUTPUT_EXISTS_ERROR, .sync = SM_OUTPUT_SYNC_SYNCFS},               \
        .ome = {.downsample = SM_RUN_OME_DOWN_AUTO, .method = SM_RUN_OME_MEAN},                    \
        .dtype = SM_DT_FLOAT32                                                                     \
    }

/* What a convert hands to its `flushed` hook: the output written and flushed by every rank. */
struct sm_run_flushed {
    const struct sm_writer *writer;
    const char *output_path;
    const struct sm_hist *hist;      /* the global histogram */
    const struct json_t *attributes; /* zarr.json's attributes (the provenance) */
};

/* The HDF5 export (SPEC §2 "Export", `export.hdf5.*`; docs/internals/export.md): a phase of the
 * convert after the flush (and the pyramid), before the marker. Every rank reads its block of the
 * output's shards back and writes it into one HDF5 dataset (parallel HDF5 over MPI-IO, or sec2
 * with one rank), with the histogram as /histogram and the provenance as attributes; the file is
 * renamed into place by rank 0. A failure leaves no marker and no file. path NULL: no export. */
struct sm_run_export {
    const char *path;              /* export.hdf5.path (NULL: no export) */
    const char *dataset;           /* export.hdf5.dataset (absolute HDF5 path, "/data") */
    struct sm_run_dims chunk;      /* export.hdf5.chunk (unset: the output's chunk shape) */
    int deflate;                   /* export.hdf5.deflate (0: none, 1..9) */
    enum sm_export_exists exists;  /* export.hdf5.exists */
    uint64_t collective_timeout_s; /* export.hdf5.collective_timeout_s (export.h timeout_ms) */
};
#define SM_RUN_EXPORT_DEFAULTS                                                                     \
    {                                                                                              \
        .dataset = "/data", .exists = SM_EXPORT_EXISTS_ERROR, .collective_timeout_s = 60           \
    }

/* Optional steps of the caller inside a convert (all may be NULL). `prepare` runs first (jobs/:
 * the SPEC §6 path checks and, on rank 0, the report's path), `opened` once the output is open
 * (its resolved path; the export's own checks ran just before); the engine
 * agrees on their statuses. `layout`
 * runs on rank 0 once the output layout is known (jobs/ warns about very many shards). `flushed`
 * is collective: every rank calls it after the flush agreement and the export, before the
 * marker, and it returns a status that is the same on every rank; a failure leaves no marker. */
struct sm_run_hooks {
    sm_status (*prepare)(void *user, struct sm_err *err);
    sm_status (*opened)(void *user, const char *output_path, struct sm_err *err);
    void (*layout)(void *user, const struct sm_output_spec *spec, uint64_t nshards);
    sm_status (*flushed)(void *user, const struct sm_run_flushed *f, struct sm_err *err);
    void *user;
};

struct sm_convert_run {
    struct sm_run_common c;
    struct sm_run_norm normalize;
    struct sm_run_output output;
    /* provenance.config_sha256 of zarr.json: the hex SHA-256 of the configuration that made the
     * output (jobs/: the effective YAML without the keys that do not change the bytes). NULL:
     * the SHA-256 of the empty text. */
    const char *config_sha256;
    struct sm_run_hooks hooks;
    /* The input when it is not a Zarr/N5 array (source.h: raw, NIfTI, TIFF, HDF5, or the
     * caller's own; borrowed, every rank its own handle of the same volume): c.input then names
     * no store and input.array must be empty. NULL: c.input is read. */
    struct sm_source *source;
    /* Or the parameters of an engine file source (raw, NIfTI, TIFF, HDF5) the run opens on every
     * rank in its input phase (agreed, so a file one rank cannot read stops all) and keeps open in
     * the result (res->source). Ignored when `source` is set. */
    const struct sm_source_params *source_params;
    struct sm_run_export export; /* export.hdf5 (path NULL: none) */
};
#define SM_CONVERT_RUN_DEFAULTS                                                                    \
    {                                                                                              \
        .c = SM_RUN_COMMON_DEFAULTS, .normalize = SM_RUN_NORM_DEFAULTS,                            \
        .output = SM_RUN_OUTPUT_DEFAULTS, .export = SM_RUN_EXPORT_DEFAULTS                         \
    }

/* Stage times in milliseconds (SPEC §7 timing_ms): thread sums divided by the thread count, so
 * they compare with wall time; total and scan_wall are wall times. */
enum {
    SM_RUN_T_TOTAL,
    SM_RUN_T_OPEN,
    SM_RUN_T_HYDRATE,
    SM_RUN_T_DECODE,
    SM_RUN_T_PROCESS,
    SM_RUN_T_ALLREDUCE,
    SM_RUN_T_WRITE,
    SM_RUN_T_SCAN_WALL, /* convert only */
    SM_RUN_T_FINISH,    /* convert only: records gathered to rank 0, the marker written */
    /* convert with an export (wall): the phase (opening the output to the rename), and its
     * parts: reading the boxes back, the H5Dwrite rounds, flush + close + fsync + rename */
    SM_RUN_T_EXPORT,
    SM_RUN_T_EXPORT_READ,
    SM_RUN_T_EXPORT_WRITE,
    SM_RUN_T_EXPORT_FINISH,
    SM_RUN_T_RANGE, /* wall: the min/max pass of SPEC §5 (only when the histogram's range came
                       from it: sm_run_result.hist_range_from) */
    SM_RUN_NTIMINGS
};
/* "total", "open", ... as the report names them. */
const char *sm_run_timing_name(int i);

/* The passes over the input a convert records (sm_run_result.pass), in order. */
enum { SM_RUN_PASS_RANGE, SM_RUN_PASS_SCAN, SM_RUN_PASS_WRITE, SM_RUN_NPASSES };
/* "range", "scan", "write". */
const char *sm_run_pass_name(int i);

/* The I/O counters of an input (SPEC §7 `io`): requests and bytes per class of the store that
 * performs them (below the cache), the encoded-object cache's and the shard-index cache's
 * counters, and an HTTP or S3 store's own. Over several ranks or stores (sm_run_io_add) counters
 * are summed, peaks take the maximum and range_ignored is true if it is for any. */
struct sm_run_io {
    uint64_t requests[SM_IO_NCLASS], bytes[SM_IO_NCLASS];
    bool cache_enabled; /* a cache decorator is in front of the store */
    bool cache_skipped; /* ... bypassed: no input object is read twice (sm_run_cache_useful) */
    uint64_t cache_hits, cache_misses, cache_evictions, cache_peak_bytes;
    uint64_t index_hits, index_misses, index_peak_bytes; /* the shard-index cache */
    bool http;          /* an HTTP or S3 store: the next members count */
    bool range_ignored; /* the server answered a Range request with the whole object */
    uint64_t whole_objects, kept_slices;
};
/* The counters of this process's store and array (either may be NULL: its counters are zero). */
void sm_run_io_of(struct sm_store *store, const struct sm_array *array, struct sm_run_io *io);
/* sum += x, by the rule above. */
void sm_run_io_add(struct sm_run_io *sum, const struct sm_run_io *x);

/* What the export phase wrote (the same on every rank). */
struct sm_run_export_result {
    bool done;      /* written and renamed into place */
    char *path;     /* the resolved path (owned by the result) */
    char driver[8]; /* "mpio" or "sec2" */
    unsigned ndim;
    uint64_t chunk[SM_MAX_DIMS]; /* the HDF5 chunk shape (clipped to the array) */
    uint64_t bytes;              /* of the file */
    uint64_t rounds;             /* collective write rounds */
    const char *dataset;         /* the run's export.hdf5.dataset (borrowed from the run) */
    int deflate;                 /* the run's export.hdf5.deflate */
};

/* How a convert reads its input. The output's shards are grouped by the input read blocks they
 * share (m->chunk_shape: a source's slab, an array's chunk or inner chunk); whole groups go to
 * one rank, and a group of several shards whose blocks decode whole is read once per pass into a
 * window that every shard of the group is cut from. */
struct sm_read_plan {
    struct sm_tiling groups; /* the groups as tiles of the ROI, each a box of whole shards */
    uint64_t window_bytes;   /* decoded input bytes of the largest group's box */
    uint64_t window_budget;  /* what one window may hold: a share of limits.memory_bytes */
    bool windowed;           /* groups of several shards are read through a window */
    /* windows a windowed rank holds: 2 when two fit half the budget, so that the next group is read
     * while the current one is scanned or written (sm_run_read_windows), else 1 */
    unsigned windows;
    /* decoded input bytes one pass reads from storage, summed over ranks (blocks whole), and the
     * ROI's own decoded bytes: pass_bytes / roi_bytes is the pass's read amplification (1 when
     * windowed, aligned or random access) */
    uint64_t pass_bytes, roi_bytes;
    /* output.shard auto: how the shard shape was chosen, for the plan and the report ("" for an
     * explicit shard) */
    char why[200];
};

struct sm_run_result {
    int ranks, threads;
    unsigned ndim;
    uint64_t roi_offset[SM_MAX_DIMS], roi_shape[SM_MAX_DIMS], tile[SM_MAX_DIMS];
    uint64_t passes;
    struct sm_scan_result scan;     /* global (summed over ranks): histogram, checksums, voxels */
    struct sm_norm norm;            /* convert: the normalization applied (window or scale) */
    struct sm_run_norm norm_config; /* convert: the normalization the run was asked for */
    /* The run's input.store and input.array (borrowed from the run's parameters: valid while
     * they are), what the report names a Zarr/N5 input by; NULL for a source. */
    const char *input_store, *input_array;
    /* convert: SPEC §5 checksums of the written values (float32: bit patterns; uint8/uint16 and
     * the integers of normalize none: the values), summed over ranks; the output's type */
    uint64_t output_checksum, output_weighted_checksum;
    enum sm_dtype output_dtype;
    /* convert: the whole output (rank 0 knows it after the marker; summed here), shards written
     * by this run over every rank, and the ranks that kept their decoded input and its bytes */
    char *output_path; /* owned by the result */
    uint64_t output_shards, output_bytes, shards_written;
    uint64_t kept_input_ranks, kept_input_bytes;
    uint64_t shards_kept; /* shards a resume kept (summed over ranks) */
    bool no_histogram;    /* normalize none of a type with no default range: scan.hist is empty */
    enum sm_hist_range_from hist_range_from; /* where scan.hist's range came from */
    /* a source's reads: bytes summed over ranks, the most one rank read, the most one rank read
     * beyond the input bytes of its own shards, and the bytes of the source's slab */
    uint64_t source_bytes, source_bytes_max, source_excess_max, source_slab_bytes;
    /* convert: how the input was read (the shard groups, their window, what a pass reads) */
    struct sm_read_plan read_plan;
    /* convert: the input's reads per pass (SPEC §7 io.source.passes, docs/internals/report.md):
     * the phases range, scan and write, in that order (SM_RUN_PASS_*), each with the encoded bytes
     * the input's reads fetched from storage (a source's counter, sm_source_bytes_read; a Zarr
     * input's store bytes) and the delta of /proc/self/io rchar over the phase, summed over
     * ranks and the most one rank's (before the run's last reduction: this rank's own). A
     * source's plan phase (a .nii.gz stream inflated once) counts to the first pass that runs.
     * pass_ran: the pass read something on some rank. rchar_known: /proc/self/io was readable
     * on every rank. input_bytes: the input's size on disk (a source's files, sum of st_size; a
     * Zarr input's payload objects), 0 when unknown. */
    struct sm_run_pass {
        bool ran;
        uint64_t bytes_read, bytes_read_max, rchar, rchar_max;
    } pass[SM_RUN_NPASSES];
    bool rchar_known;
    uint64_t input_bytes;
    uint64_t sync_ns; /* this rank's flush */
    /* convert: the voxel geometry the output got (OME scale and translation, provenance) and
     * where each part came from: "config" (the caller's output.ome: input.spacing/unit/origin),
     * "ome-zarr" (an OME-Zarr input's multiscales), "shardmill" (a shardmill array's provenance),
     * a source's geometry_from ("nifti", "imagej", "ome-xml", "tiff-resolution", ...), or
     * "default" (spacing 1, no unit, no origin). An input's unit is written as its UDUNITS-2
     * name (shardmill/unit.h: "um" -> micrometer); one that is no space unit is dropped
     * (unit_dropped). */
    struct sm_run_geometry {
        bool origin_set;
        double spacing[SM_MAX_DIMS], origin[SM_MAX_DIMS];
        char unit[48], unit_dropped[48]; /* "": none */
        char spacing_from[16], unit_from[16], origin_from[16];
    } geometry;
    /* convert: what output.exists found at the output (write.h): NEW for a new output (and
     * every error or overwrite run), UNFINISHED for a resume; with output.exists: auto also
     * DAMAGED (complete, but verify found output_problems problems, the first in
     * output_problem: resumed) and COMPLETE (this job's output, complete and verified: nothing
     * after the input phase ran, nothing was written; output_shards and output_bytes are the
     * marker's, the statistics and checksums are empty). */
    enum sm_output_found output_found;
    uint64_t output_problems;
    char output_problem[272];
    unsigned levels;     /* convert: OME-Zarr levels written (0: a plain array) */
    uint64_t pyramid_ns; /* convert: this rank's levels 1.. (wall) */
    /* convert: the level made in the write phase through the spill file (0: none) and the file's
     * size, what the output's file system held on top of the image during the run */
    unsigned spill_level;
    uint64_t spill_bytes;
    uint64_t spill_ns; /* this rank's pyramid time of the spilled level (part of pyramid_ns) */
    double timing[SM_RUN_NTIMINGS];      /* this rank */
    double timing_max[SM_RUN_NTIMINGS];  /* over ranks */
    double timing_mean[SM_RUN_NTIMINGS]; /* over ranks */
    /* The last reduction of a run: the input's counters summed over ranks (zeros for a source:
     * source_bytes above), the largest peak resident set of any rank (VmHWM, measured at the end
     * of the run), and the export (convert with export.path). */
    struct sm_run_io io;
    uint64_t peak_rss_bytes;
    struct sm_run_io preflight; /* the engine's: sm_run_common.preflight, reduced with io */
    struct sm_run_export_result export;
    /* The input, still open for its counters and metadata (sm_store_stats, sm_array_stats,
     * sm_array_meta); released by sm_run_result_destroy. */
    struct sm_store *store;
    struct sm_array *array;
    /* convert: the input's identity as the provenance's `input` member names it (rank 0's view,
     * on every rank; SPEC §6.3, §6.5): a source's description with its path resolved, a Zarr
     * input's resolved store, array and metadata_sha256 (what binds its bytes, input_state, is
     * the provenance's alone). NULL when the run stopped before its input phase. Released by
     * sm_run_result_destroy. */
    struct json_t *input_identity;
    /* The source read (the caller's, or opened from source_params: released by
     * sm_run_result_destroy then), for its description and counters; NULL for an array. */
    struct sm_source *source;
    bool owns_source_; /* the engine's */
    void *priv_;       /* the engine's */
};

/* Runs a scan (SPEC §4 `scan`): collective over the ranks. On success *res holds the result
 * (release it with sm_run_result_destroy, also after a failure: it is always initialised). */
sm_status sm_run_scan(const struct sm_scan_run *p, struct sm_run_result *res, struct sm_err *err);
/* Runs a convert (SPEC §1, §2, §5, §6): collective over the ranks. */
sm_status sm_run_convert(const struct sm_convert_run *p, struct sm_run_result *res,
                         struct sm_err *err);
void sm_run_result_destroy(struct sm_run_result *res);

/* ---- the pieces, for `plan`, `validate` and read-bench (jobs/) ---- */

/* SPEC §4: SM_E_DATA (where = store) when a file input's path does not exist ("the store path
 * does not exist") or is no directory ("not a Zarr store directory"); SM_OK otherwise (http(s)
 * stores are not looked at). sm_run_open_input checks it first. */
sm_status sm_run_check_input_store(const char *store, struct sm_err *err);
/* Opens the store (+ cache within half of memory_bytes) and the array; with several ranks rank 0
 * fetches the metadata and broadcasts it (collective). On failure nothing stays open. */
sm_status sm_run_open_input(const struct sm_run_input *in, uint64_t memory_bytes,
                            struct sm_store **store, struct sm_array **array, struct sm_err *err);
/* roi.offset / roi.shape for this array (default: the whole array). SM_E_USAGE naming the key. */
sm_status sm_run_roi(const struct sm_run_common *c, const struct sm_array_meta *m, uint64_t *off,
                     uint64_t *shape, struct sm_err *err);

/* What scan and convert derive from the parameters and the array before reading payload; with
 * range_from SM_HIST_RANGE_MINMAX, params has the bins (histogram.bins, else SM_HIST_MINMAX_BINS)
 * and a placeholder range [0, 1) until the min/max pass of the run sets [min, nextafter(max)). */
struct sm_run_setup {
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS], tile[SM_MAX_DIMS];
    struct sm_tiling tiling;
    struct sm_scan_params params;
    enum sm_hist_range_from range_from;
};
sm_status sm_run_setup(const struct sm_run_common *c, const struct sm_array_meta *m,
                       struct sm_run_setup *s, struct sm_err *err);
/* The output layout (output.shard, output.chunk, output.codec; SPEC §2 defaults) of an array of
 * `shape` and `dtype`. SM_E_USAGE naming the key. */
sm_status sm_run_output_spec(const struct sm_run_output *o, unsigned nd, const uint64_t *shape,
                             enum sm_dtype dtype, const struct json_t *attrs,
                             struct sm_output_spec *spec, struct sm_err *err);
/* The output shard grid of a convert as a tiling of the ROI (the writer's C order), in the layout
 * of o->dtype when o->dtype_set (the writer's type: an automatic shard depends on it), else of
 * float32. */
sm_status sm_run_shard_grid(const struct sm_run_output *o, const struct sm_array_meta *m,
                            const struct sm_run_setup *s, struct sm_tiling *grid,
                            struct sm_output_spec *spec, struct sm_err *err);
/* The plan of `kind` over the tiles of t for nranks ranks: parts[nranks]. Metadata only. */
void sm_run_plan(enum sm_part_kind kind, const struct sm_array_meta *m, const struct sm_tiling *t,
                 int nranks, struct sm_part *parts);
/* The same plan as the shares that hold tiles, by rank (sm_partition_shares): out has room for
 * min(nranks, t->ntiles); returns their number. O(shares) memory for any nranks. */
size_t sm_run_plan_shares(enum sm_part_kind kind, const struct sm_array_meta *m,
                          const struct sm_tiling *t, int nranks, struct sm_rank_part *out);
/* ---- reading each input byte once per pass (docs/internals/reading.md; struct sm_read_plan
 * above) ---- */

/* SM_E_LIMIT where output.shard when tracking nshards output shards would not fit
 * limits.memory_bytes (run_bounds.c; memory_bytes 0: unchecked): the run's check of a grid before
 * it commits to it, which the memory ceiling's check (jobs/) makes first. */
sm_status sm_run_check_shards(uint64_t nshards, uint64_t memory_bytes, struct sm_err *err);
/* The output's shard grid and the read plan of a convert whose input m is read with `access`,
 * in memory_bytes (0: unbounded). Like sm_run_shard_grid, except that an automatic shard
 * (output.shard unset) is made shallower (whole inner chunks) until a group's window fits
 * window_budget, and say so in rp->why. Metadata only; every rank computes the same. */
sm_status sm_run_input_layout(const struct sm_run_output *o, const struct sm_array_meta *m,
                              enum sm_source_access access, const struct sm_run_setup *s,
                              uint64_t memory_bytes, struct sm_tiling *grid,
                              struct sm_output_spec *spec, struct sm_read_plan *rp,
                              struct sm_err *err);
/* The read plan of an existing shard grid (sm_run_input_layout without choosing the shard). */
void sm_run_read_plan(const struct sm_array_meta *m, enum sm_source_access access,
                      const struct sm_tiling *grid, uint64_t memory_bytes, struct sm_read_plan *rp);
/* Whether a convert may read one stored input object twice, so that the encoded-object cache
 * (SPEC §3) can hit: false only when sure it cannot -- one pass (no percentile scan, no min/max
 * range pass), no group windows, and every boundary between the output shards' boxes inside the
 * ROI (grid) falls on the input's stored object grid (m->chunk_shape: a sharded input's outer
 * shard), so each object lies in one shard's box and is read once. The run skips the cache when
 * false (run_common.c) and `plan`'s memory bound counts no cache then, so both agree. */
bool sm_run_cache_useful(const struct sm_array_meta *m, const struct sm_tiling *grid, bool two_pass,
                         enum sm_hist_range_from range_from, bool windowed);
/* Windows a windowed rank holds (rp->windows): 2 when two windows of window_bytes fit half of
 * window_budget (the next group is read while the current one is processed), else 1. */
unsigned sm_run_read_windows(uint64_t window_bytes, uint64_t window_budget);

/* ---- OME-Zarr output (SPEC §2) ---- */

/* The number of levels output.ome asks for a level 0 of `shape` (auto resolved), the shape of
 * each and their output specs (levels[k] as sm_run_output_spec would make it for level k's shape,
 * with dimension_names; the auto layout is chosen per level). levels must hold SM_MAX_LEVELS.
 * SM_E_USAGE naming output.ome.levels (more levels than halvings to one voxel allow, or than
 * SM_MAX_LEVELS) or output.ome (not 2 or 3 dimensions). */
sm_status sm_run_ome_levels(const struct sm_run_output *o, unsigned nd, const uint64_t *shape,
                            enum sm_dtype dtype, struct sm_output_spec *levels, unsigned *nlevels,
                            struct sm_err *err);
/* The inner chunk of a sharded 3-D OME level (spec's shape and shard) when output.chunk is
 * automatic: 4 planes deep, y and x square powers of two (64 doubled up to 128 KiB of values
 * within the shard, halved while the chunks span more than 4/3 of the level), so that a plane
 * view fetches at most 4 x (4/3)^2 planes per plane shown (issue 35, docs/VIEWING.md). No
 * change for a plain array, an explicit chunk, an unsharded (0.4) or a 2-D level. The shard is
 * kept. sm_run_ome_levels applies it to every level. */
void sm_run_ome_chunk(const struct sm_run_output *o, struct sm_output_spec *s);

#endif
