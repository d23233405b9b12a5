/* The estimate of `shardmill plan` (SPEC §4, issue 22): the scaling model of scaling/MODEL.md
 * (predict_local of scaling/model.py) as plain arithmetic over per-stage rates calibrated on a
 * machine (scaling/calibrate writes them; scaling/rates.json is compiled in as the default), and
 * an upper bound of a rank's peak resident set from the engine's own buffers. Pure functions: no
 * I/O, so tests/unit/jobs/test_plan_model.c checks them directly. */
#ifndef SM_JOBS_PLAN_MODEL_H
#define SM_JOBS_PLAN_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <shardmill/status.h>

/* Entries of a rates file's `sources` and `by_dtype` objects that are read. */
#define SM_PLAN_RATE_KINDS 8

/* Per-stage rates of one thread on the calibrated machine (scaling/rates.json's members). */
struct sm_plan_rates {
    char machine[128];         /* what was calibrated: cores, CPU */
    char filesystem[64];       /* the output file system of the calibration */
    char cache[32];            /* "warm" or "cold" page cache of the input when measured */
    char calibrated[32];       /* UTC time of the calibration */
    double cores;              /* cores of the calibrated machine (oversubscription stretch) */
    double scan_s_per_byte;    /* fetch, decode, histogram, checksums per decoded input byte */
    double decode_s_per_byte;  /* a second fetch + decode when the input is not kept */
    double write_s_per_byte;   /* normalize, encode, stage per output value byte */
    double shard_fixed_s;      /* per shard file: create, index, journal record */
    double pyramid_s_per_byte; /* per output value byte of levels >= 1 (read back, mean, encode) */
    double syncfs_bytes_per_s; /* flush of the dirty output */
    double syncfs_fixed_s;     /* the second syncfs and the marker */
    double rename_s;           /* one commit rename */
    double finish_s_per_shard; /* rank 0's marker per shard record */
    double start_plain_s;      /* launch of one process without MPI */
    double start_mpi_s;        /* launch -> MPI_Init done, fixed part */
    double start_mpi_s_per_rank; /* and per rank */
    double allreduce_s;          /* the histogram's allreduce */
    /* A run's own fixed work, whatever its size: opening the input, creating the output, the
     * first buffers (a 64³ run's engine time less its bytes' work; optional, 0 when absent). The
     * start term counts it. */
    double run_fixed_s;
    /* What each thread past the first adds to a rank's write when the rank has fewer shards than
     * threads and all of them work on one shard at a time (write_driver.c `inner`): the speedup
     * is 1 + (T - 1) x inner_efficiency (0..1; optional, 1 when absent). */
    double inner_efficiency;
    uint64_t baseline_rss_bytes;     /* binary + libraries + a tiny run, no MPI */
    uint64_t baseline_rss_mpi_bytes; /* the same under mpirun (Open MPI's share included) */
    /* The input file system's read bandwidth (bytes/s) from a cold page cache (the pages evicted
     * first) and a warm one (read again at once); optional members, 0 when the rates file has
     * none (calibrated before issue 33): the model then has no I/O term. */
    double fs_read_cold_bytes_per_s, fs_read_warm_bytes_per_s;
    /* An http(s) or s3 input's fetch (issue 34): one request's fixed cost (seconds) and the bytes/s
     * of one connection, each thread fetching its own objects one request at a time (store_http.c);
     * optional members, 0 when absent (calibrated before): remote reads are then priced at the
     * file system's read bandwidth above. */
    double http_request_s, http_bytes_per_s;
    /* Optional members (issue 34 item 2; 0 when absent: the general rate above is used). A one
     * pass convert's read, decode and count per input byte in its write phase (else
     * scan_s_per_byte); a scan job's per byte of each pass (else scan_s_per_byte); the HDF5
     * export per level-0 value byte on one thread per rank, its flush included (else a decode,
     * a write when deflated, and the flush at syncfs_bytes_per_s). */
    double read_s_per_byte, scan_job_s_per_byte, export_s_per_byte;
    /* rates.sources.<format> (raw, tiff, hdf5, nifti): a file source's own scan, second decode
     * and one-pass read per decoded byte; rates.by_dtype.<type> (uint8, uint16...): an output
     * type's own write and pyramid per output value byte. name "" ends each list. */
    struct sm_plan_source_rates {
        char name[8];
        double scan_s_per_byte, decode_s_per_byte, read_s_per_byte;
    } sources[SM_PLAN_RATE_KINDS];
    struct sm_plan_dtype_rates {
        char name[12];
        double write_s_per_byte, pyramid_s_per_byte;
    } dtypes[SM_PLAN_RATE_KINDS];
};

/* The rates of one job: r with a file source's own rates (source: its format; NULL or a format
 * the file has none for: the Zarr input's), an output type's (out_dtype: its name; NULL: the
 * general ones, float32's) and a scan job's in place of the general ones; a member the file
 * lacks keeps the general rate (a source's second decode and one-pass read fall back to its
 * scan, then to the general). */
void sm_plan_rates_for(const struct sm_plan_rates *r, bool scan_job, const char *source,
                       const char *out_dtype, struct sm_plan_rates *eff);

/* The entry of a rates file's `sources` a file source is priced by: a TIFF or HDF5 file whose
 * boxes read just their own bytes (random_access: uncompressed strips or tiles, contiguous or
 * unfiltered chunks; sm_source_info.access) reads as a raw file does, with nothing to inflate, so
 * it takes "raw"'s rates (the calibration's TIFF and HDF5 files are compressed); any other source
 * its own format's. */
const char *sm_plan_source_rates_name(const char *format, bool random_access);

/* Parses a rates document (JSON text of scaling/calibrate). SM_E_USAGE naming `where` (the file)
 * and the member when one is missing, not a number or not positive where it must be. */
sm_status sm_plan_rates_parse(const char *text, size_t len, const char *where,
                              struct sm_plan_rates *r, struct sm_err *err);

/* The passes that read the input, in order (the report's io.source.passes[].pass). */
enum sm_plan_pass { SM_PLAN_PASS_RANGE, SM_PLAN_PASS_SCAN, SM_PLAN_PASS_WRITE, SM_PLAN_PASSES };

/* "range", "scan", "write". */
const char *sm_plan_pass_name(enum sm_plan_pass p);

/* The bytes a pass reads from storage: the input's size on disk (disk_bytes, the ROI's share)
 * times the pass's decoded bytes over the ROI's (sm_read_plan pass_bytes / roi_bytes); a block
 * decoded twice is fetched twice. disk_bytes when roi_bytes is 0. */
uint64_t sm_plan_pass_read_bytes(uint64_t pass_bytes, uint64_t roi_bytes, uint64_t disk_bytes);

/* What one run does, from the plan (metadata only) and the sampled compression ratio. */
struct sm_plan_work {
    int ranks, threads;
    int nodes;                /* the ranks spread evenly over them (>= 1) */
    double cores_per_node;    /* 0: the calibrated machine's cores */
    bool mpi;                 /* started by a launcher (ranks > 1 always is) */
    bool two_pass;            /* percentile: scan, reduce, then write */
    bool kept;                /* two passes: every rank keeps its decoded input */
    uint64_t tiles;           /* scan tiles (two passes) */
    uint64_t in_bytes;        /* decoded input bytes of the ROI */
    uint64_t shards;          /* level 0 shards */
    unsigned levels_with;     /* shards written per level-0 shard: 1 + its aligned levels' */
    uint64_t out_value_bytes; /* values of level 0 and the aligned levels (size x voxels) */
    uint64_t pyr_shards;      /* shards of the levels read back */
    uint64_t pyr_value_bytes; /* values of the levels read back */
    uint64_t spill_shards;    /* shards of the level made from the spill file (0: none) */
    uint64_t spill_value_bytes;
    uint64_t out_bytes; /* the estimated output bytes (encoded) */
    /* What each pass reads from storage, summed over ranks (sm_plan_pass_read_bytes), and its
     * amplification: the decoded bytes it decodes over the ROI's (sm_read_plan pass_bytes /
     * roi_bytes; 0 counts as 1). The range pass (a float input's min/max) costs its read only. */
    uint64_t read_bytes[SM_PLAN_PASSES];
    double read_amp[SM_PLAN_PASSES];
    /* a source read group by group through two windows (rp.windows 2, sm_cv_groups): the busiest
     * rank's groups, the next of which is read while the current one is scanned or written
     * (0: each read waits, with_reads) */
    uint64_t ahead_groups;
    double fs_read_bytes_per_s; /* the file system's aggregate read bandwidth (0: no I/O term) */
    /* an http(s) or s3 input (rates with http_bytes_per_s): each thread fetches its share of a
     * pass's read_requests and read_bytes over its own connection (the pass's items split as its
     * work: the busiest thread's share), at most at fs_read_bytes_per_s together when that is set
     * (--fs-read-bandwidth: the server's or the link's aggregate) */
    bool remote;
    uint64_t read_requests[SM_PLAN_PASSES]; /* requests of each pass, summed over ranks */
    /* a shared (parallel) file system's aggregate bandwidth, --fs-bandwidth (0: none): the nodes'
     * flushes of the output and the export together go no faster */
    double fs_bytes_per_s;
    unsigned scan_passes; /* a scan job's `passes` (0 counts as 1): each reads the input */
    /* The HDF5 export (export.hdf5.path; 0 bytes: none): after the write, each rank reads its
     * block of level-0 shards back (decode) on one thread and writes their values into the one
     * shared file, deflating them first when export_deflate. */
    uint64_t export_value_bytes; /* level 0's values */
    uint64_t export_file_bytes;  /* the HDF5 file's estimated size */
    bool export_deflate;
};

/* The model's terms (seconds), launch to marker; start is the launch and the run's fixed work. A
 * pass that reads the input (scan, write) lasts max(its compute, its read bytes /
 * fs_read_bytes_per_s) (a remote input: its busiest thread's requests x http_request_s + bytes /
 * http_bytes_per_s); its compute decodes read_amp times the input (each decode past the first at
 * decode_s_per_byte). Per node: ⌈R/nodes⌉ ranks of T threads share cores_per_node cores
 * (time-slicing beyond), launch costs grow with the ranks of a node (srun and mpirun start nodes in
 * parallel), and each node flushes its own dirty output at the calibrated syncfs bandwidth, the
 * nodes together at most at fs_bytes_per_s when it is set. */
struct sm_plan_terms {
    double start, scan, allreduce, write, pyramid, sync, hdf5, finish, total; /* hdf5: export */
    /* the reads of each pass at fs_read_bytes_per_s (seconds): a pass takes the longer of its
     * compute and its read (they overlap across threads); range adds its read to the total */
    double read[SM_PLAN_PASSES], range;
};

void sm_plan_seconds(const struct sm_plan_rates *r, const struct sm_plan_work *w,
                     struct sm_plan_terms *t);

/* A rank's buffers (bytes), the engine's own (docs/internals/ranks.md, SPEC §1). */
struct sm_plan_mem {
    uint64_t baseline;     /* binary + libraries (rates) */
    uint64_t memory_bytes; /* limits.memory_bytes */
    int threads;
    bool two_pass, kept, source_loads; /* source_loads: the source inflates its box (NIfTI) */
    bool kept_some;         /* kept false: some ranks keep their input, the others memoize chunks */
    bool source;            /* a file source: no chunk memo, no cache */
    bool grouped;           /* the shards are read group by group through windows: no memo */
    bool aligned;           /* an image's levels made with each level-0 shard (float means) */
    uint64_t rank_in_bytes; /* decoded input of the busiest rank's box */
    uint64_t rank_stored_bytes; /* its encoded bytes (what the cache may hold) */
    uint64_t cache_max_bytes;   /* input.cache.max_bytes (0: disabled) */
    uint64_t index_cache_bytes; /* what the index cache can hold of this input */
    uint64_t tile_bytes;        /* one scan tile buffer */
    uint64_t chunk_bytes;       /* one decoded input chunk (decode scratch) */
    uint64_t shard_voxels;      /* voxels of a level 0 shard */
    /* the most scan tiles and level 0 shards a rank has (0: unknown, `threads` of each in
     * flight): a rank holds at most min(threads, these) tile and shard buffers at once */
    uint64_t rank_tiles, rank_shards;
    uint64_t pyr_shard_voxels; /* voxels of a level 1 shard (0: no pyramid) */
    uint64_t pyr_slab_voxels;  /* a pyramid thread's slab of the level below (0: 8 shards) */
    size_t in_elem, out_elem;
    uint64_t hist_bytes;    /* one histogram (per thread) */
    uint64_t shard_records; /* the output's shard records (sm_output_track_bytes) */
    uint64_t codec_bytes;   /* per thread: compression and decompression contexts */
    uint64_t window_bytes;  /* a group's decoded window (sm_read_plan; 0: not windowed) */
    /* the HDF5 export (0: none): a rank's value buffer (run_export.c: min(64 MiB, memory_bytes
     * / 4), at least a shard) and one chunk of the export's dataset (values) */
    uint64_t export_buffer_bytes, export_chunk_bytes;
    bool scan_job; /* a scan: no write phase, no kept input; its threads decode (scratch, codecs) */
    /* every level-0 shard's box is whole in the input's read units (it starts on a unit boundary
     * and ends on one or at the array's end): read straight into the shard, no chunk memo
     * (engine/tile/tile_memo.c) */
    bool units_whole;
    bool padded; /* output chunks without a shard codec, some at an edge: a padded copy each */
    /* the encoded shard's resident share of its values (its buffer's untouched pages cost no
     * memory): the sampled ratio with a margin, 1 when not sampled (at most 1) */
    double enc_share;
};

/* Slots of a thread's chunk memo plus its spare unit (engine/tile/tile_memo.c MEMO_MAX_SLOTS). */
#define SM_PLAN_MEMO_SLOTS 17u

/* The bound's parts (bytes): baseline (+ shard records), caches (encoded-object cache, index
 * cache, chunk memos), input (kept or loaded, and a group's window), scan workers, write workers,
 * pyramid workers, the HDF5 export's buffers. */
struct sm_plan_rss_parts {
    uint64_t baseline, caches, input, scan, write, pyramid, hdf5, total;
};

/* The upper bound of the peak RSS of a rank: the baseline plus every buffer the engine may hold
 * at the same time, each capped by what it can contain; parts (may be NULL) gets the terms. */
uint64_t sm_plan_peak_rss(const struct sm_plan_mem *m, struct sm_plan_rss_parts *parts);

#endif
