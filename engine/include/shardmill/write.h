/* Writing Zarr v3 outputs (SPEC §2 "Output", §6 output safety and provenance): the output array's
 * zarr.json and prepared chain, shard assembly, atomic object writes into an output directory with
 * an exists policy, the completion marker, `verify` and `resume`, and an OpenMP shard driver.
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html
 * Invariant: the bytes written are exactly what zarr.json declares (the chain is the one a reader
 * builds from the written zarr.json), and the same input gives the same bytes for any thread or
 * rank count, so a resumed output is byte-identical to a clean one. */
#ifndef SM_WRITE_WRITE_H
#define SM_WRITE_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/buf.h"
#include "shardmill/codec.h"
#include "shardmill/dtype.h"
#include "shardmill/meta.h"
#include "shardmill/progress.h"
#include "shardmill/status.h"

struct json_t;

/* ==== the output array ==== */

/* What to write (SPEC §2 defaults in SM_OUTPUT_SPEC_DEFAULTS; `shape` must be set). */
struct sm_output_spec {
    unsigned ndim; /* 1..SM_MAX_DIMS */
    uint64_t shape[SM_MAX_DIMS];
    enum sm_dtype dtype;
    bool sharded;                /* false: plain chunks of `chunk`, codecs [bytes, codec] */
    uint64_t shard[SM_MAX_DIMS]; /* shard shape (the chunk grid); each a multiple of chunk */
    uint64_t chunk[SM_MAX_DIMS]; /* inner chunk shape (sharded) or the chunk shape */
    const char *codec;           /* a writable codec (sm_codec_ops.writer) or "none" */
    int level;                   /* within the codec's writer level_min..level_max */
    const char *blosc_cname;     /* the writer's variant (blosc: its cname; NULL: default) */
    bool index_crc32c;           /* index codecs [bytes little, crc32c] (else [bytes little]) */
    enum sm_shard_index_location index_location;
    uint8_t fill[8];                 /* fill value: little-endian bytes of dtype */
    const struct json_t *attributes; /* borrowed; an object (provenance: the caller's) or NULL */
    bool dimension_names;            /* write "dimension_names" (the last ndim of z, y, x) */
    /* A Zarr v2 array (OME-NGFF 0.4, issue 35): .zarray (C order, dimension_separator "/", the
     * codec as a v2 compressor) instead of zarr.json, chunk keys "i/j/k" in the array's own
     * directory; never sharded. A group of such levels writes .zgroup and .zattrs (the
     * attributes themselves) instead of the group's zarr.json. */
    bool zarr_v2;
    /* NULL, or "member/key" (several separated by spaces): attributes[member][key] is pending
     * (a one-pass convert knows its statistics only after the shards): begin writes zarr.json
     * without it, resume and join accept a zarr.json that differs from w's in those keys only,
     * and sm_output_restate later puts the final document. A static string. */
    const char *pending;
};
#define SM_OUTPUT_SPEC_DEFAULTS                                                                    \
    {                                                                                              \
        .ndim = 3, .dtype = SM_DT_FLOAT32, .sharded = true, .shard = {8, 32, 32},                  \
        .chunk = {2, 16, 16}, .codec = "zstd", .level = 3, .blosc_cname = "lz4",                   \
        .index_crc32c = true, .index_location = SM_SHARD_INDEX_END                                 \
    }

/* The default layout of SPEC §2 (`output.chunk: auto`, `output.shard: auto`) for an array of
 * `shape` with values of elem_size bytes: inner chunks of SM_AUTO_CHUNK voxels per axis, clipped
 * to the shape; shards the inner chunk times powers of two, an axis doubled at a time (z first,
 * then y, x, round robin) while the shard still ends short of the array on that axis, until a
 * full shard holds at least SM_AUTO_SHARD_TARGET bytes of values (so at most twice that) or
 * covers the array. A volume of N bytes thus makes about N / 32 MiB shards, a small one a single
 * shard. chunk_auto / shard_auto say which of the two to choose (the other is left as given, and
 * an automatic shard is then a multiple of the given chunk). SM_E_USAGE if ndim is out of range,
 * an extent or elem_size is 0, or a given chunk is 0. */
/* The automatic chunk of an unsharded Zarr v2 array (OME-NGFF 0.4: one file per chunk; issue 35
 * item 3): SM_OUTPUT_V2_DEPTH on the axes before y and x (clipped to the shape); on y and x (the
 * last two axes) the largest power of two up to SM_OUTPUT_V2_PLANE and the extent whose chunks
 * span at most 4/3 of the extent (sm_output_pad_over): the CT's 256 -> 256, 320 -> 128,
 * 108 -> 64.
 * Viewers tile planes by powers of two, so each tile fetches each file once; a plane view
 * fetches at most 4 x (4/3)^2 times the plane's values; a file holds up to 1-4 MiB of 1-4 byte
 * values (docs/VIEWING.md "Read amplification"). */
#define SM_OUTPUT_V2_PLANE 512u
#define SM_OUTPUT_V2_DEPTH 4u
void sm_output_chunk_v2(unsigned ndim, const uint64_t *shape, size_t elem_size, uint64_t *chunk);
/* True when chunks of extent c cover an axis of n voxels with more than 4/3 of n (the last chunk
 * mostly padding). */
bool sm_output_pad_over(uint64_t n, uint64_t c);
#define SM_AUTO_CHUNK 64u
#define SM_AUTO_SHARD_TARGET ((uint64_t)32 << 20)
sm_status sm_output_layout_auto(unsigned ndim, const uint64_t *shape, size_t elem_size,
                                bool chunk_auto, bool shard_auto, uint64_t *chunk, uint64_t *shard,
                                struct sm_err *err);

/* A prepared output array: its zarr.json text, the same document parsed back (whose chain is what
 * encodes), and the shard grid. Immutable after sm_writer_new: shared by threads. Shards are named
 * by their linear index in C order over the shard grid. */
struct sm_writer;

/* Validates the spec and prepares the writer. zarr.json: v3 array, regular grid of the shard shape
 * (or the chunk shape unsharded), default key encoding "/", codecs [sharding_indexed{chunk_shape,
 * codecs [bytes little, <codec>], index_codecs, index_location}] or [bytes little, <codec>];
 * zstd is written with "checksum": false, blosc with shuffle "shuffle" and typesize = element size.
 * SM_E_USAGE naming the field (`output.shard`, `output.chunk`, `output.codec`...) when dimensions
 * disagree, an extent is 0, a shard is not a multiple of the inner chunk, the codec or level is
 * unknown or the attributes are not an object; SM_E_NOMEM. */
sm_status sm_writer_new(const struct sm_output_spec *spec, struct sm_writer **out,
                        struct sm_err *err);
void sm_writer_free(struct sm_writer *w);

/* An OME-Zarr image group (SPEC §2 "OME-Zarr output"): the output directory holds the group's
 * zarr.json ({zarr_format 3, node_type group, attributes: `attrs`, the caller's OME metadata and
 * provenance}) and the arrays "0" .. "nlevels-1", level k written as sm_writer_new(&levels[k])
 * would write it (its zarr.json at "k/zarr.json", its shards at "k/c/..."). The group's shards
 * are the levels' shards one after the other (level 0 first, each in its own C order):
 * sm_writer_level_first gives where a level starts; box, bytes, key and encode of a group shard
 * are those of its level. sm_writer_meta and sm_writer_grid answer for level 0. SM_E_USAGE as
 * sm_writer_new, naming the level; nlevels 1..SM_MAX_LEVELS. The group's zarr.json has the
 * pending attribute of levels[0] (spec.pending; the levels' own documents hold no provenance). */
#define SM_MAX_LEVELS 32u
sm_status sm_writer_new_group(const struct sm_output_spec *levels, unsigned nlevels,
                              const struct json_t *attrs, struct sm_writer **out,
                              struct sm_err *err);
/* 0 for an array writer; the number of levels of a group writer. */
unsigned sm_writer_levels(const struct sm_writer *w);
/* Levels 0 .. n-1 of a group writer share level 0's shard grid: level k's shard i covers
 * exactly the level-k values made from level 0's shard i (the SPEC §5.9 blocks never cross a
 * level-0 shard boundary), so they can be written with it (sm_write_job.levels). n is the
 * largest such count: 1 for an array writer or a group whose level 1 has a grid of its own. */
unsigned sm_writer_aligned_levels(const struct sm_writer *w);
/* The first level after the aligned ones when the write phase can make it from their last one's
 * shards (the spill file, docs/internals/pyramid.md "The spilled level"): every such shard starts
 * on an even offset of each axis the level halves, so its values reduce to a box of the level on
 * their own. 0 when there is no such level or an odd shard extent splits a block. */
unsigned sm_writer_spill_level(const struct sm_writer *w);
/* Level k's array writer (w itself for an array writer and k 0). */
const struct sm_writer *sm_writer_level(const struct sm_writer *w, unsigned k);
/* The group shard number of level k's shard 0 (0 for an array writer). */
uint64_t sm_writer_level_first(const struct sm_writer *w, unsigned k);

/* The name of w's document: "zarr.json"; a Zarr v2 array ".zarray", a v2 group ".zattrs". */
const char *sm_writer_doc_name(const struct sm_writer *w);
/* The zarr.json text (UTF-8, ends with a newline; a Zarr v2 writer's .zarray or .zattrs); valid
 * while w lives. */
struct sm_bytes sm_writer_zarr_json(const struct sm_writer *w);
/* zarr.json parsed back by sm_meta_parse_v3: m->chain is the chain shards are encoded with. */
const struct sm_array_meta *sm_writer_meta(const struct sm_writer *w);
/* Number of shards (stored objects) of the grid, and shards per axis. */
uint64_t sm_writer_nshards(const struct sm_writer *w);
const uint64_t *sm_writer_grid(const struct sm_writer *w);
/* Grid coordinates of shard `shard` (< nshards). */
void sm_writer_shard_coords(const struct sm_writer *w, uint64_t shard, uint64_t *idx);
/* The part of the array shard `shard` covers: offset and extent clipped to the array shape. */
void sm_writer_shard_box(const struct sm_writer *w, uint64_t shard, uint64_t *offset,
                         uint64_t *shape);
/* Bytes of the decoded values sm_writer_encode_shard expects for `shard` (the clipped box). */
size_t sm_writer_shard_bytes(const struct sm_writer *w, uint64_t shard);
/* The store key of `shard` ("c/0/1/2"). SM_E_INTERNAL if it does not fit in cap bytes. */
sm_status sm_writer_shard_key(const struct sm_writer *w, uint64_t shard, char *buf, size_t cap,
                              struct sm_err *err);

/* Per-thread state of shard encoding: the codec scratch (compression contexts, reused) and the
 * padding buffer of edge shards. Not thread-safe: one per thread. */
struct sm_write_scratch;
sm_status sm_write_scratch_new(struct sm_write_scratch **out, struct sm_err *err);
void sm_write_scratch_free(struct sm_write_scratch *ws);
/* Threads one shard's encode on ws may use for its inner chunks (sm_scratch_set_threads). */
void sm_write_scratch_set_threads(struct sm_write_scratch *ws, unsigned threads);

/* Encodes shard `shard` into out (the caller's buffer; replaced). `data` holds the shard's values
 * clipped to the array (sm_writer_shard_box), C order, native little-endian dtype values, exactly
 * sm_writer_shard_bytes() long: an edge shard is padded with the fill value by this call (into the
 * scratch), an interior shard is encoded in place. Inner chunks whose values all equal the fill
 * value bit for bit are stored empty (offset = nbytes = 2^64-1); so are the padded parts outside
 * the array. Deterministic: the same values give the same bytes. Thread-safe with distinct
 * scratches. SM_E_INTERNAL for a wrong data length or shard index; codec failures as the codec
 * reports them (SM_E_NOMEM, SM_E_INTERNAL), `where` naming the key. */
sm_status sm_writer_encode_shard(const struct sm_writer *w, uint64_t shard, struct sm_bytes data,
                                 struct sm_buf *out, struct sm_write_scratch *ws,
                                 struct sm_err *err);

/* ==== the output directory (SPEC §6) ==== */

/* output.exists */
enum sm_output_exists {
    SM_OUTPUT_EXISTS_ERROR,     /* refuse an existing output (an empty directory is not one) */
    SM_OUTPUT_EXISTS_OVERWRITE, /* remove a previous shardmill output's files, then write */
    SM_OUTPUT_EXISTS_RESUME,    /* keep the intact shards of a previous identical run */
    /* a batch script's choice (sm_output_decide): write a new output, resume this job's
     * unfinished (or damaged) one, leave this job's complete one alone, refuse anything else */
    SM_OUTPUT_EXISTS_AUTO,
};

/* Durability of the writes. FSYNC and SYNCFS give the same guarantee, the one of SPEC §6: a
 * reader never sees a partial object under its final name, even after a crash, and when the
 * marker exists every shard, zarr.json and directory entry listed by it was on disk before the
 * marker was written. FSYNC: each object is written to a temporary name, fsynced and renamed,
 * and each directory that received entries is fsynced in sm_output_flush. SYNCFS: each shard is
 * written to its temporary name only; sm_output_flush calls syncfs(2) once (the data of every
 * staged shard durable), renames them all into place, and calls syncfs again (the entries
 * durable) -- two file-system flushes instead of one fsync per shard and directory. syncfs covers
 * the calling node's view of the file system: every rank must flush (Linux >= 5.8 reports
 * write-back errors through it). NONE: no fsync (tests, benchmark baselines); the marker is still
 * written last. In FSYNC and SYNCFS, zarr.json and the marker are always fsynced. The journal is
 * never fsynced: a lost or torn record only makes resume rewrite that shard. */
enum sm_output_sync { SM_OUTPUT_SYNC_FSYNC, SM_OUTPUT_SYNC_SYNCFS, SM_OUTPUT_SYNC_NONE };

/* Writes past the page cache (sm_output_opts.direct; output.direct_io's choices, in order). */
enum sm_output_direct { SM_OUTPUT_DIRECT_AUTO, SM_OUTPUT_DIRECT_ALWAYS, SM_OUTPUT_DIRECT_NEVER };

struct sm_output_opts {
    enum sm_output_exists exists;
    enum sm_output_sync sync;
    /* If non-NULL, the output path is resolved against this directory and must stay inside it:
     * a path with a ".." component or an absolute path outside base is refused. */
    const char *base;
    /* output.direct_io: whether shards of 1 MiB or more are written with O_DIRECT, past the page
     * cache (sm_fs_stage), but those of the levels the run reads back (sm_output_set_read_back).
     * AUTO: when the output's values (every level) hold at least half of the machine's memory
     * (sm_output_set_size). */
    enum sm_output_direct direct;
};
#define SM_OUTPUT_OPTS_DEFAULTS                                                                    \
    {                                                                                              \
        .exists = SM_OUTPUT_EXISTS_ERROR, .sync = SM_OUTPUT_SYNC_FSYNC                             \
    }

/* An output directory being written. Layout: zarr.json, c/... (the shards), during a run the
 * journal .shardmill/journal/<run token>.<rank>.jnl (one append-only file per rank and run: a
 * 32-byte {shard, size, values digest, crc32c} record per written shard, appended after the shards:
 * what `resume` trusts when there is no marker), and the completion marker
 * shardmill.complete.json, written last; once it is durable the journals are removed, so a
 * completed output holds zarr.json, the shards and the marker only. A directory "looks like a
 * shardmill output" when it holds .shardmill/ or the marker; overwrite and resume refuse anything
 * else (and any entry that a shardmill output cannot contain), before deleting anything. */
struct sm_output;

/* Resolves and checks the output path against the exists policy; writes nothing, so a job can call
 * it before its expensive phases. SM_E_USAGE (`where` = the path): "output exists (set
 * output.exists: overwrite or resume)" for ERROR and an existing path other than an empty
 * directory; "not a shardmill output ..." for OVERWRITE/RESUME/AUTO of a directory that does not
 * look like one (or is a file or a symbolic link); a path escaping `base`. SM_E_IO; SM_E_NOMEM. */
sm_status sm_output_open(const char *path, const struct sm_output_opts *opts,
                         struct sm_output **out, struct sm_err *err);

/* What output.exists: auto finds at the output path (sm_output_decide). */
enum sm_output_found {
    SM_OUTPUT_FOUND_NEW,        /* nothing, or an empty directory: written as with ERROR */
    SM_OUTPUT_FOUND_UNFINISHED, /* this job's output without its marker: resumed */
    SM_OUTPUT_FOUND_DAMAGED,    /* this job's, with its marker, but verify finds problems: resumed,
                                   which rewrites the damaged shards */
    SM_OUTPUT_FOUND_COMPLETE,   /* this job's, complete, and it verifies: nothing to write */
};
struct sm_output_decision {
    enum sm_output_found found;
    uint64_t shards, bytes;  /* COMPLETE: the marker's shard count and byte total */
    uint64_t problems;       /* DAMAGED: the problems verify found */
    char first_problem[272]; /* DAMAGED: "<key>: <what>" of the first */
};

/* output.exists: auto (o opened with it; the primary only, before begin): decides what the path
 * holds. Nothing or an empty directory: NEW. A shardmill output (sm_output_open refused anything
 * else): its zarr.json must carry this job's identity -- every member of `identity` (an object,
 * e.g. {"engine", "config_sha256", "input"}) equal to the member of the same name in its
 * attributes.shardmill -- else SM_E_USAGE "output.exists: auto: another job's output: its
 * zarr.json differs from this job's in attributes.shardmill.<member>; ..." (the first member that
 * differs). No zarr.json (a run killed before it wrote one): UNFINISHED. Without the
 * completion marker: UNFINISHED; with it, sm_output_verify's check of every shard against it:
 * COMPLETE when it passes, else DAMAGED. Reads only. SM_E_IO; SM_E_NOMEM. */
sm_status sm_output_decide(const struct sm_output *o, const struct json_t *identity,
                           struct sm_output_decision *d, struct sm_err *err);
/* The identity check of sm_output_decide, on the text of an existing zarr.json `have` (any bytes:
 * a document that does not parse, or has no attributes.shardmill object, differs): true when every
 * member of `identity` (an object) equals the member of the same name in its
 * attributes.shardmill; else false and `what` (cap >= 24) names the first member that differs
 * ("attributes.shardmill.input.objects"), or "its bytes". Reads only; thread-safe. */
bool sm_output_identity_same(struct sm_bytes have, const struct json_t *identity, char *what,
                             size_t cap);
/* Every process of the run, with the primary's decision: NEW writes as ERROR would (begin still
 * refuses an output that appeared meanwhile), UNFINISHED and DAMAGED resume (resume's own check of
 * zarr.json follows in begin, its errors naming output.exists: auto), COMPLETE leaves the output
 * alone (begin is then SM_E_INTERNAL: nothing may be written). */
void sm_output_settle(struct sm_output *o, enum sm_output_found found);
/* "written", "resumed", "repaired" (DAMAGED) or "complete": the report's output.action. */
const char *sm_output_found_action(enum sm_output_found found);

/* Bytes an output tracking `nshards` shards holds (a record and a directory flag per shard,
 * allocated by sm_output_begin / sm_output_join): O(shards), so a run checks it against its memory
 * budget before it plans a grid a tiny input can make astronomically large. Saturates. */
uint64_t sm_output_track_bytes(uint64_t nshards);

/* The primary (rank 0) prepares the directory for writer w (borrowed; must outlive o): creates it
 * (and missing parent directories, never files outside it), applies the policy (OVERWRITE: removes
 * the marker first, then the shards, journal and zarr.json; RESUME: the existing zarr.json must
 * equal w's byte for byte, the marker's records are moved into the journal and the marker is
 * removed before anything is rewritten, stale temporary files are removed; a previous output
 * without zarr.json is cleared as by OVERWRITE), then writes zarr.json atomically. SM_E_USAGE
 * "output.exists: resume: ..." when zarr.json differs (another configuration or input); SM_E_IO;
 * SM_E_NOMEM. */
sm_status sm_output_begin(struct sm_output *o, const struct sm_writer *w, struct sm_err *err);
/* Other ranks, after the primary's begin: attach to the prepared directory. SM_E_DATA if its
 * zarr.json is not w's. */
sm_status sm_output_join(struct sm_output *o, const struct sm_writer *w, struct sm_err *err);
/* A one-pass convert, after the shards: w (the begun writer's array with its pending attribute
 * filled in; SM_E_INTERNAL otherwise) becomes the output's writer; the primary puts its
 * zarr.json atomically (fsynced). Every rank calls it before the marker, which covers w's
 * zarr.json. */
sm_status sm_output_restate(struct sm_output *o, const struct sm_writer *w, bool primary,
                            struct sm_err *err);

/* Whether `shard` must be (re)written: always true unless the policy is RESUME. With RESUME (the
 * journals of previous runs, including the records of a previous marker, are loaded at the first
 * call) false only when the object exists under its final name with a record whose size and
 * CRC32C it matches; *values is then the recorded digest of the values it encodes (0: none
 * recorded). A shard without a record is rewritten. The caller computes the shard's values and
 * keeps it only when their sm_write_values_digest equals *values (sm_output_shard_kept).
 * Thread-safe for distinct shards. SM_E_IO. */
sm_status sm_output_shard_needed(struct sm_output *o, uint64_t shard, bool *need, uint64_t *values,
                                 struct sm_err *err);
/* After sm_output_shard_needed said not needed: kept true adopts the previous record (the shard
 * counts as kept); false counts a shard whose values changed, which the caller then puts. */
void sm_output_shard_kept(struct sm_output *o, uint64_t shard, bool kept);
/* Levels [first, last] of the output are read back by this run (an OME pyramid's parents of the
 * levels not made in memory, a level an export copies): their shards are written through the page
 * cache even with opts.direct, since the run reads them again at once. */
void sm_output_set_read_back(struct sm_output *o, unsigned first, unsigned last);
/* The bytes of values the run writes (every level), for opts.direct AUTO. */
void sm_output_set_size(struct sm_output *o, uint64_t value_bytes);
/* Writes the encoded shard atomically (temporary name in the target directory, [fsync], rename),
 * then buffers its journal record -- size, CRC32C and `values`, the sm_write_values_digest of the
 * values encoded -- (appended to this rank's journal file every SM_JOURNAL_BATCH records and at
 * flush). Thread-safe for distinct shards. SM_E_IO naming the path. */
sm_status sm_output_put_shard(struct sm_output *o, uint64_t shard, struct sm_bytes data,
                              uint64_t values, struct sm_err *err);
/* Every rank, after its last put: appends the buffered journal records; FSYNC fsyncs every
 * directory that received entries from this process (the shard directories, their parents, the
 * root); SYNCFS calls syncfs once. SM_E_IO. */
sm_status sm_output_flush(struct sm_output *o, struct sm_err *err);
/* The primary, only when every rank reported success (after their flushes): writes the completion
 * marker shardmill.complete.json atomically and fsyncs the root (except with NONE). The marker
 * holds the engine version and commit, the SHA-256 of zarr.json, the shard count, the total bytes
 * and, per shard in grid order, {"key", "size", "crc32c"}; it is deterministic (no time stamps).
 * Records of shards this process did not write must have been adopted first
 * (sm_output_records_adopt; no file of another rank is read). After the marker is durable the
 * .shardmill/ tree (every journal, also those a crashed run left) is removed. SM_E_INTERNAL if a
 * shard has no record (it was never written); SM_E_IO. */
sm_status sm_output_finish(struct sm_output *o, struct sm_err *err);
/* The run token the primary's begin drew (jobs/ broadcasts it to every rank). */
uint64_t sm_output_run_token(const struct sm_output *o);
/* Names this process's journal: .shardmill/journal/<token>.<rank>.jnl. Call after begin/join and
 * before the first put (ignored once a record was appended); without it the primary uses its own
 * token and rank 0, another process a fresh token. Token and rank keep a resumed run with another
 * number of ranks from appending to a journal it has not read. */
void sm_output_set_run(struct sm_output *o, uint64_t token, int rank);
/* The records of the shards this process wrote or kept, as bytes to gather on the primary
 * (SM_JREC_BYTES each, self-checking). out is replaced. SM_E_NOMEM. */
sm_status sm_output_records_export(const struct sm_output *o, struct sm_buf *out,
                                   struct sm_err *err);
/* The primary adopts gathered records (concatenated exports of every rank) before finish.
 * SM_E_INTERNAL if they are not whole, valid records of this output's grid. */
sm_status sm_output_records_adopt(struct sm_output *o, struct sm_bytes recs, struct sm_err *err);

/* Releases o. Shards this process staged (SYNCFS) but never renamed into place -- a run that
 * failed or was stopped before its flush -- are removed first, so no temporary name is left; the
 * writer o began or joined with must still be alive (it names them): close o before freeing it. */
void sm_output_close(struct sm_output *o);

/* The cooperative stop flag (status.h) for begin's delete of a previous output (overwrite): a
 * walk over a huge tree ends with SM_E_STOPPED once it is set, leaving an output a later
 * overwrite or resume finishes. NULL: none. */
void sm_output_set_stop(struct sm_output *o, const atomic_int *stop);

/* The resolved output directory path. */
const char *sm_output_path(const struct sm_output *o);

/* Counters of this process (times summed over threads). */
struct sm_output_stats {
    uint64_t shards_written, bytes_written; /* puts by this process */
    uint64_t shards_kept;                   /* resume: intact shards not rewritten */
    uint64_t shards_changed;  /* resume: intact shards rewritten because their values changed */
    uint64_t fsyncs;          /* fsync/syncfs calls on files and directories */
    uint64_t put_ns, sync_ns; /* in puts; in flush and finish */
    uint64_t total_shards, total_bytes; /* of the whole output, set by sm_output_finish */
};
void sm_output_stats(const struct sm_output *o, struct sm_output_stats *out);

/* ==== verify (SPEC §4 `shardmill verify`) ==== */

struct sm_verify_problem {
    char key[96];   /* "c/0/1/2", "zarr.json", "shardmill.complete.json" */
    char what[160]; /* "missing", "size 120 bytes, the marker says 130", ... */
};

struct sm_verify_report {
    uint64_t shards;  /* in the marker's grid (0 if unknown) */
    uint64_t checked; /* shards read and compared */
    uint64_t bytes;   /* the marker's byte total (0 if unknown) */
    size_t nproblems, cap;
    struct sm_verify_problem *problems; /* owned: sm_verify_report_destroy */
};

/* Re-checks an output against its completion marker: zarr.json's SHA-256, that the marker lists
 * exactly the shards of zarr.json's grid, and for every shard that it exists with the recorded
 * size and CRC32C. Problems (a missing marker of a shardmill output, a malformed marker, missing,
 * truncated or altered shards...) are listed in rep (initialised by the call) and the call
 * returns SM_OK: verify failed iff rep->nproblems > 0. SM_E_DATA "not a shardmill output" when the
 * path is not a directory holding the marker or .shardmill/; SM_E_IO; SM_E_NOMEM. */
sm_status sm_output_verify(const char *path, struct sm_verify_report *rep, struct sm_err *err);
void sm_verify_report_destroy(struct sm_verify_report *rep);

/* ==== the pyramid's spill file (write_spill.c) ==== */

/* .shardmill/spill-<level> of a begun or joined output: the values of one OME-Zarr level made
 * while the write phase holds the level above in memory, as raw blocks of block_bytes, block i at
 * i * block_bytes, so the pyramid reads them instead of reading back and decoding the level above
 * (docs/internals/pyramid.md "The spilled level"). Every rank opens it (create: for writing) and
 * puts the blocks of its own shards; any rank gets any block once the writers closed it and
 * agreed. SM_E_IO (with the path) on a failed open, write or read; a short file is SM_E_IO too. */
struct sm_spill;
sm_status sm_spill_open(struct sm_output *o, unsigned level, size_t block_bytes, bool create,
                        struct sm_spill **out, struct sm_err *err);
sm_status sm_spill_put(struct sm_spill *s, uint64_t block, const void *data, size_t len,
                       struct sm_err *err);
sm_status sm_spill_get(struct sm_spill *s, uint64_t block, void *data, size_t len,
                       struct sm_err *err);
void sm_spill_close(struct sm_spill *s); /* NULL: nothing */
/* Removes the file (one rank, after every rank closed it); a missing file is SM_OK. */
sm_status sm_spill_remove(struct sm_output *o, unsigned level, struct sm_err *err);

/* ==== the shard driver (on the one work driver of work.h) ==== */

/* Produces the decoded values of `shard`: the box [offset, offset + shape) of the output array
 * (already clipped), C order, into data (len bytes). Called concurrently from `thread` in
 * [0, threads): keep per-thread state indexed by it. Fail with err filled. */
typedef sm_status (*sm_shard_fill_fn)(void *user, int thread, uint64_t shard,
                                      const uint64_t *offset, const uint64_t *shape, void *data,
                                      size_t len, struct sm_err *err);

/* Makes the values of a shard of level k (>= 1) from those of the same shard of level k-1 (a
 * group writer's aligned levels): `parent` holds the level-(k-1) box [poff, poff + pshape) and
 * `child` receives the level-k box [coff, coff + cshape), both C order. Called like the fill,
 * from `thread`. */
struct sm_level_box {
    const uint64_t *offset, *shape;
    void *data;
    size_t len;
};
typedef sm_status (*sm_shard_derive_fn)(void *user, int thread, unsigned level,
                                        const struct sm_level_box *parent,
                                        const struct sm_level_box *child, struct sm_err *err);
/* Receives the values of the last level a job shard writes (level `levels` - 1 of the job, box of
 * its shard `shard`, numbered as level 0's), after it is kept or put. Called like the fill. */
typedef sm_status (*sm_shard_spill_fn)(void *user, int thread, uint64_t shard,
                                       const struct sm_level_box *last, struct sm_err *err);

struct sm_write_job {
    uint64_t first, count; /* shards [first, first + count) ... */
    const uint64_t *list;  /* ... or, if non-NULL, the `count` shards listed here */
    int threads;           /* <= 0: the OpenMP default */
    sm_shard_fill_fn fill;
    void *user;
    /* If non-NULL, called after each shard with the shards done (written or kept) and the
     * encoded bytes written so far. */
    sm_progress_fn progress;
    void *progress_user;
    /* If non-NULL, the cooperative stop flag (status.h): checked before every shard by every
     * thread; once set, the remaining shards are skipped (a shard being put is finished: puts
     * stay atomic) and the driver returns SM_E_STOPPED. */
    const atomic_int *stop;
    /* A group writer: levels 0 .. levels-1 (<= sm_writer_aligned_levels) are written together,
     * the job's shards numbering level 0's: after level 0's shard i, `derive` makes level k's
     * shard i from level k-1's values, and each is kept or put as level 0's is. 0 or 1: level 0
     * only. */
    unsigned levels;
    sm_shard_derive_fn derive;
    /* If non-NULL, given each job shard's last level (run_spill.c: the pyramid's next level). */
    sm_shard_spill_fn spill;
    /* If non-NULL, the driver's per-thread state (a write scratch with its codec contexts, one
     * shard's values per level, the encoded shard) is taken from here and left here for the next
     * call (sm_write_crew_new); NULL: made and freed by this call. */
    struct sm_write_crew *crew;
};

/* What sm_write_shards' threads hold, kept from call to call: a caller writing its shards in
 * several calls (a run's groups, a pyramid's levels) makes its buffers and codec contexts once
 * instead of once per call. A large block is a fresh mapping whose pages the kernel zeroes on
 * first touch (core_alloc_huge.c), so a buffer made per call costs a page clear per 4 KiB. The
 * buffers grow to the largest call's; one crew serves one call at a time. */
struct sm_write_crew;
sm_status sm_write_crew_new(struct sm_write_crew **out, struct sm_err *err);
void sm_write_crew_free(struct sm_write_crew *crew); /* NULL: nothing */

struct sm_write_result {
    uint64_t written, kept, bytes;         /* shards put, resume-kept shards, bytes put */
    uint64_t fill_ns, encode_ns, write_ns; /* summed over threads */
};

/* For each shard of the job, with OpenMP threads (dynamic schedule): fill, then (resume) keep it
 * if its file matches its record and the values filled have the recorded digest, else encode ->
 * put (the record carries the values' digest); then the same for each derived level's shard.
 * Every shard is filled (or derived), a kept one too. Each thread
 * owns a scratch and buffers. On failure the error of the lowest failing shard index is reported,
 * so the message does not depend on the thread count; shards past it may be skipped. A stop
 * (job->stop) is SM_E_STOPPED unless a shard failed. Does not flush. */
sm_status sm_write_shards(const struct sm_writer *w, struct sm_output *o,
                          const struct sm_write_job *job, struct sm_write_result *res,
                          struct sm_err *err);

/* Threads the driver uses when none are configured (OpenMP's default, 1 without OpenMP). */
int sm_write_default_threads(void);

/* The 64-bit digest of a shard's decoded values that its record keeps (CRC-32C and CRC-32 of the
 * bytes): resume keeps a shard only when the values it computes for it have that digest. */
uint64_t sm_write_values_digest(const void *values, size_t len);

/* ==== SHA-256 (provenance: zarr.json in the marker, the effective configuration) ==== */

void sm_sha256(const void *data, size_t len, uint8_t out[32]);
/* Lowercase hex, NUL-terminated. */
void sm_sha256_hex(const void *data, size_t len, char out[65]);

#endif
