/* Internal pieces of run/ shared by the scan and the convert. */
#ifndef SM_RUN_RUN_INT_H
#define SM_RUN_RUN_INT_H

#include <pthread.h>

#include "shardmill/pipeline.h"

/* Ranks for a run: with mpi_comm set, par/ on a duplicate of it for the run's duration. *entered
 * says whether sm_run_ranks_leave must release it. */
sm_status sm_run_ranks_enter(const void *mpi_comm, bool *entered, struct sm_err *err);
void sm_run_ranks_leave(bool entered);

/* st, or SM_E_STOPPED when st is SM_OK and the stop flag is set. */
sm_status sm_run_stop_check(const atomic_int *stop, sm_status st, struct sm_err *err);

/* This rank's share of the plan (every rank computes the same plan). */
sm_status sm_run_rank_part(enum sm_part_kind kind, const struct sm_array_meta *m,
                           const struct sm_tiling *t, struct sm_part *mine, struct sm_err *err);
/* Sums histogram counts, underflow/overflow/nan, checksums, voxels and tiles over ranks. */
sm_status sm_run_reduce_scan(struct sm_scan_result *r, struct sm_err *err);
/* The last reduction of every run (collective): res->timing over ranks into timing_max and
 * timing_mean, then sm_run_reduce_usage. */
sm_status sm_run_reduce_timings(struct sm_run_result *res, struct sm_err *err);
/* res->io (the input's counters: res->store, res->array) and res->peak_rss_bytes (this rank's
 * peak so far) over ranks (collective; run_result.c). */
sm_status sm_run_reduce_usage(struct sm_run_result *res, struct sm_err *err);
/* The encoded bytes this rank's input reads fetched so far: a source's counter
 * (sm_source_bytes_read), a Zarr input's store bytes (below its cache), 0 before the input is
 * open (run_result.c). */
uint64_t sm_run_input_read(const struct sm_run_result *res);
/* This process's /proc/self/io rchar (bytes its read calls returned, as the kernel counts them);
 * false when the file cannot be read (no /proc). */
bool sm_run_rchar(uint64_t *rchar);

/* Where part k of `parts` starts in a run of n indices of axis 0 beginning at `first`: the k/parts
 * point rounded down to a multiple of `unit` (0 for k = 0, n for k >= parts), so that parts cut
 * at a source's read blocks never share one. Parts may round away (empty). */
uint64_t sm_run_part_start(uint64_t first, uint64_t n, uint64_t parts, uint64_t unit, uint64_t k);
/* How many parts to cut such a run into: its units (+1 for an unaligned start), at most 4 per
 * thread. */
uint64_t sm_run_part_count(uint64_t first, uint64_t n, uint64_t unit, int threads);

/* A group's window (run_window.c, docs/internals/reading.md): the decoded input box of a group of
 * shards that share input read blocks, read once per pass and cut into each of them. */
struct sm_run_window {
    unsigned ndim;
    size_t elem;
    uint64_t block0; /* the source's read block on axis 0: the loads split there */
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    uint8_t *buf;
    size_t cap;
    bool valid; /* holds the box [off, off + shape) */
};
void sm_run_window_init(struct sm_run_window *w, unsigned ndim, size_t elem,
                        const uint64_t *block0);
void sm_run_window_free(struct sm_run_window *w);
/* The box [off, off + shape) of src into the window, split on axis 0 at the source's blocks over
 * `threads` (outside any parallel region), so each block is read by one thread once. */
sm_status sm_run_window_load_source(struct sm_run_window *w, struct sm_source *src, int threads,
                                    const atomic_int *stop, const uint64_t *off,
                                    const uint64_t *shape, struct sm_err *err);
/* The box [off, off + shape) of an array into the window (one region read: each chunk decoded
 * once, parallel outside a parallel region). */
sm_status sm_run_window_load_array(struct sm_run_window *w, struct sm_array *a, const uint64_t *off,
                                   const uint64_t *shape, struct sm_err *err);
/* A window read ahead on a thread of its own (sm_run_window_load_source there), so that the next
 * group's input is read while the current group is scanned or written. Nothing else may read
 * the source until the join. */
struct sm_run_prefetch {
    pthread_t thread;
    bool running;
    struct sm_run_window *w;
    struct sm_source *src;
    int threads;
    const atomic_int *stop;
    uint64_t off[SM_MAX_DIMS], shape[SM_MAX_DIMS];
    sm_status st;
    struct sm_err err;
};
/* Starts reading the box into w (when no thread can be started, reads it here, now). */
sm_status sm_run_prefetch_start(struct sm_run_prefetch *p, struct sm_run_window *w,
                                struct sm_source *src, int threads, const atomic_int *stop,
                                const uint64_t *off, const uint64_t *shape, struct sm_err *err);
/* Waits for a started read (none: SM_OK); its status and error. */
sm_status sm_run_prefetch_join(struct sm_run_prefetch *p, struct sm_err *err);
/* True when the window holds the box. */
bool sm_run_window_covers(const struct sm_run_window *w, const uint64_t *off,
                          const uint64_t *shape);
/* The box (inside the window) into out, C order. */
void sm_run_window_copy(const struct sm_run_window *w, const uint64_t *off, const uint64_t *shape,
                        void *out);

/* A driver called once per group reports progress as one run: the items and bytes of the groups
 * before (base) added to what the current call reports (sm_run_progress_based as its callback,
 * this struct as its user). */
struct sm_run_progress_base {
    sm_progress_fn fn;
    void *user;
    uint64_t done, bytes;           /* of the calls before */
    uint64_t last_done, last_bytes; /* the current call's so far */
};
/* After a call: its items and bytes join the base. */
void sm_run_progress_next(struct sm_run_progress_base *b);
void sm_run_progress_based(void *user, uint64_t done, uint64_t bytes);

/* The levels of an OME-Zarr group written with level 0 (sm_write_job.levels, run_pyramid.c):
 * each level's block per axis (2 where it halves the axis, 1 elsewhere; 2-D padded to z = 1) and
 * the method (SPEC §5.9). */
struct sm_run_levels {
    enum sm_dtype dtype;
    unsigned nd;
    bool nearest;
    int threads; /* a shard derived outside a parallel region is cut over these */
    uint64_t block[SM_MAX_LEVELS][3];
};
void sm_run_levels_init(struct sm_run_levels *rl, const struct sm_writer *w,
                        enum sm_run_ome_method method, int threads);
/* Level `level`'s values of a shard from level-1's (the write driver's derive): exactly the
 * read-back pyramid's values for that box. SM_E_INTERNAL if the boxes do not match. */
sm_status sm_run_levels_derive(const struct sm_run_levels *rl, unsigned level,
                               const struct sm_level_box *parent, const struct sm_level_box *child,
                               struct sm_err *err);

/* The spilled level (run_spill.c): the first read-back level of an OME-Zarr image made while
 * the write phase holds the level above, through the output's spill file (write.h). */
struct sm_run_spill {
    unsigned level;             /* sm_writer_spill_level */
    const struct sm_writer *pw; /* the level above it (the last written with level 0) */
    struct sm_level_reduce red;
    unsigned nd;
    size_t elem, block_bytes;
    uint64_t cshard[3]; /* a full parent shard's block of the level (3 axes) */
    struct sm_spill *file;
    struct sm_buf *bufs; /* one block per thread */
    int nthreads;
};
/* red: the level's reduction (its type, blocks and method, as the read-back's). */
sm_status sm_run_spill_init(struct sm_run_spill *s, const struct sm_writer *w, unsigned level,
                            const struct sm_level_reduce *red, int threads, struct sm_err *err);
void sm_run_spill_free(struct sm_run_spill *s); /* closes s->file too */
/* The write driver's spill: the level's block of the parent shard `shard` (box), into the file. */
sm_status sm_run_spill_put(struct sm_run_spill *s, int thread, uint64_t shard,
                           const struct sm_level_box *box, struct sm_err *err);
/* The pyramid's fill (sm_shard_fill_fn, user: the spill): a shard of the level from the file. */
sm_status sm_run_spill_fill(void *user, int thread, uint64_t shard, const uint64_t *offset,
                            const uint64_t *shape, void *data, size_t len, struct sm_err *err);

/* Phase export of a convert with p->export.path (run_export.c), after the flush agreement and
 * before the marker: every rank writes its block of the output f describes into the HDF5 file.
 * Collective; the status is the same on every rank, except when sm_par_stuck() is true after it:
 * then the ranks can no longer communicate, the caller calls no further collective (sm_run_agree
 * does not) and returns, and jobs/ ends the job (sm_par_abort). Its timings (SM_RUN_T_EXPORT*)
 * and what it wrote (res->export) go to res. */
sm_status sm_run_export(const struct sm_convert_run *p, const struct sm_run_flushed *f,
                        struct sm_run_result *res, struct sm_err *err);

/* The agreement of a phase boundary: while every rank still succeeds, every rank learns whether
 * one failed (then all hold the lowest failing rank's error). A failure that is already every
 * rank's (*agreed) is not agreed again, nor one after which the ranks are stuck (sm_par_stuck). */
sm_status sm_run_agree(bool *agreed, sm_status st, struct sm_err *err);

/* Phase begin of a write (SPEC §6), after st: rank 0 prepares the output directory (policy,
 * zarr.json), then the others join, each step agreed; then every rank takes rank 0's run token,
 * which names the per-rank journal files. Collective. */
sm_status sm_run_begin(struct sm_output *out, const struct sm_writer *w, sm_status st, bool *agreed,
                       struct sm_err *err);

/* Phase finish of a write (SPEC §6), once every rank wrote and flushed: every rank exports the
 * shard records it wrote or kept, rank 0 gathers them (one MPI gather, agreed) and writes the
 * completion marker from them unless the stop flag was set after the last agreement. Collective;
 * the marker's status is rank 0's: the caller's phase agreement follows. */
sm_status sm_run_finish(struct sm_output *out, const atomic_int *stop, struct sm_err *err);

/* Progress helpers: NULL members are skipped. */
void sm_run_progress_begin(const struct sm_run_progress *p, const char *phase, const char *unit,
                           uint64_t total);
void sm_run_progress_end(const struct sm_run_progress *p, bool ok);

/* Fills what ome lacks (spacing, origin, unit) from the input: with `read` (an OME-Zarr output)
 * the OME-Zarr multiscales of the group that holds input.array (collective: rank 0 reads the
 * group document, all ranks get the values), then the `shardmill` provenance in the input
 * array's own attributes (input_attrs; no request). The origin is moved to the ROI's first voxel.
 * unit_buf holds a unit read. SM_E_USAGE when input.spacing/origin do not have nd values. */
sm_status sm_run_ome_geometry(struct sm_store *store, const char *array,
                              const struct json_t *input_attrs, unsigned nd,
                              const uint64_t *roi_off, bool read, struct sm_run_ome *ome,
                              char *unit_buf, size_t unit_cap, struct sm_err *err);
/* Adds "spacing" (and "unit") to attrs.shardmill when output.ome or input.spacing gives them. */
void sm_run_provenance_spacing(struct json_t *attrs, const struct sm_run_ome *ome, unsigned nd);
/* The rank's budget for the per-thread chunk memos (tile.h): an eighth of limits.memory_bytes,
 * taken from the half the kept input may use. */
static inline uint64_t run_memo_total(uint64_t memory_bytes)
{
    return memory_bytes / 8;
}

/* sm_run_open_input, and with meta_sha256 non-NULL (65 bytes) the hex SHA-256 of the metadata
 * documents the array was opened from (the same bytes on every rank). */
sm_status sm_run_open_input_sha(const struct sm_run_input *in, uint64_t memory_bytes,
                                struct sm_store **store, struct sm_array **array, char *meta_sha256,
                                struct sm_err *err);

/* ---- the phase driver (run_phase.c) ----
 * One row per phase: the driver checks the stop flag, `run` does the phase's work on every rank,
 * the driver agrees on the lowest failing rank's error (all ranks go on, or all stop with it) and
 * adds the wall time to timing_ms[timing] (timing < 0: none). With `unit` set the phase shows
 * progress (`total` gives its count; UINT64_MAX: the phase has nothing to do in this run and is
 * not shown). `when` (NULL: always) says whether the phase is part of this run, asked when its
 * turn comes (e.g. "two passes only", once the plan decided): a phase it rules out is neither
 * run, checked, agreed nor timed. After a failure the later phases do not run; those with a
 * `cleanup` call it instead (as does a phase whose own run failed), e.g. to flush the shards
 * written so far. Every transition goes to the progress hook's `trace` when it is set. Rows are
 * written with designated initializers. */
struct run_phase {
    const char *name;
    sm_status (*run)(void *ctx, struct sm_err *err);
    void (*cleanup)(void *ctx);
    const char *unit;
    uint64_t (*total)(void *ctx);
    bool (*when)(const void *ctx);
    int timing;
    unsigned flags;
};
#define RUN_PHASE_NO_STOP 1u /* runs even when the stop flag is set (after the marker) */
#define RUN_PHASE_ALWAYS 2u  /* runs also after the run ended early (*done) */
struct run_phase_env {
    const struct sm_run_progress *progress;
    const atomic_int *stop;
    double *timing_ms; /* SM_RUN_NTIMINGS, or NULL */
    /* NULL, or set by a phase when the run has nothing more to do (every rank sets it alike,
     * e.g. from rank 0's broadcast decision): the later phases without RUN_PHASE_ALWAYS are
     * skipped, and the run succeeds. */
    const bool *done;
    /* NULL, or the result whose pass counters (sm_run_result.pass) the driver fills: around each
     * phase named range, scan or write (and plan, whose reads count to the next pass that runs)
     * the input's counter (sm_run_input_read) and /proc/self/io rchar. */
    struct sm_run_result *res;
};
sm_status sm_run_phases(const struct run_phase *ph, size_t n, void *ctx,
                        const struct run_phase_env *env, struct sm_err *err);

static inline double run_ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* ---- declared here, not in pipeline.h: only run/ (and its unit tests) calls them ---- */

/* The largest axis of the last level output.ome.levels auto makes (SM_RUN_OME_AUTO). */
#define SM_RUN_OME_AUTO_MAX 256u

/* The export's checks of the open phase, local (no collective): export.hdf5.path resolved and
 * checked against export.hdf5.exists, its directory (which may be one the output at output_path
 * creates), the dataset name and the deflate level (sm_export_hdf5_check), and refused when it
 * is the output, lies inside it or holds it. SM_OK when x->path is NULL. A convert runs it in its
 * output phase, so a refused export path fails the run before any conversion, and the export
 * phase checks again. Errors as sm_export_hdf5_check; SM_E_USAGE naming the path. */
sm_status sm_run_export_check(const struct sm_run_export *x, const char *output_path,
                              struct sm_err *err);

/* The min/max pass (SPEC §5; collective): with s->range_from SM_HIST_RANGE_MINMAX, reads this
 * rank's tiles [first, first + count) of s->tiling once (threads over tiles, as the scan: `a`, or
 * s->params.reader), agrees, reduces the finite min and max over the ranks and sets s->params'
 * range (sm_hist_minmax_range). Otherwise a no-op. */
sm_status sm_run_minmax_range(struct sm_array *a, struct sm_run_setup *s, uint64_t first,
                              uint64_t count, struct sm_err *err);

/* ---- OME-Zarr output (SPEC §2) ---- */

/* The cumulative factor of each axis at level k (1 at level 0; doubled on every axis halved on
 * the way, output.ome.downsample), for levels 0 .. nlevels-1 of a level 0 of `shape`. */
void sm_run_ome_factors(const struct sm_run_ome *ome, unsigned nd, const uint64_t *shape,
                        unsigned nlevels, uint64_t (*factor)[SM_MAX_DIMS]);
/* The first level transform that is no finite number (sm_run_ome_finite). */
struct sm_run_ome_bad {
    unsigned level, axis;
    bool translation; /* else the scale */
    double value;
};
/* Whether every level's scale (spacing x factor) and translation (origin + spacing x (factor -
 * 1) / 2), as sm_run_ome_attrs writes them, is a finite number: levels 0 .. ome->levels - 1
 * (SM_RUN_OME_AUTO resolved as sm_run_ome_levels does; 0, no OME output: level 0 alone, the
 * spacing and origin the provenance states). False with the first that is not in *bad
 * (issue 32 item 11: JSON has no inf, and a dropped value left a short scale list). */
bool sm_run_ome_finite(const struct sm_run_ome *ome, unsigned nd, const uint64_t *shape,
                       struct sm_run_ome_bad *bad);
/* attributes.ome.omero's channel window {start, end, min, max}, in output values (SPEC §2). */
struct sm_run_omero {
    bool set; /* false: no omero member */
    double start, end, min, max;
};
/* The group writer (sm_writer_new_group) of the OME-Zarr image output.ome asks for, whose level 0
 * has `shape` and `dtype`; its attributes are the OME metadata (o->ome: spacing, origin, unit;
 * omero, may be NULL) plus the members of `attrs` (the provenance); `pending` (NULL or
 * "member/key" words of them, sm_output_spec.pending) is left out of resume's comparison of the
 * group document until sm_output_restate puts the final one. Errors as sm_run_ome_levels. */
sm_status sm_run_ome_writer(const struct sm_run_output *o, unsigned nd, const uint64_t *shape,
                            enum sm_dtype dtype, const struct sm_run_omero *omero,
                            const struct json_t *attrs, const char *pending, struct sm_writer **w,
                            struct sm_err *err);
/* The group attributes of an OME-Zarr image of `nlevels` levels whose level 0 has `shape`:
 * {"ome": {"version": "0.5", "multiscales": [{"name", "axes", "datasets" with scale (and
 * translation) per level, "type": "mean" | "nearest", "metadata": {"method": "shardmill.mean" |
 * "shardmill.nearest", "description", "version"}}], "omero" (when omero->set)}} plus every member
 * of `extra` (the provenance, copied). NULL if it cannot be allocated. */
struct json_t *sm_run_ome_attrs(const struct sm_run_ome *ome, unsigned nd, const uint64_t *shape,
                                unsigned nlevels, const struct sm_run_omero *omero,
                                const struct json_t *extra);
/* The pyramid of a group writer whose level 0 every rank wrote and flushed (collective): for
 * k = done .. levels-1 (the levels not written with level 0), each rank its block of level k's
 * shards, each shard the mean (SPEC §2) of the level-(k-1) values it covers, read back from the
 * output through array/ slab by slab (no whole-volume buffer; the slabs of all threads stay within
 * half of memory_bytes where a slab of two planes allows), OpenMP threads over shards; then every
 * rank flushes and agrees before the next level. Byte-identical for any ranks x threads.
 * SM_E_STOPPED on a stop (finished shards flushed). The result's write counters accumulate in *wr.
 */
struct sm_run_pyramid {
    const struct sm_writer *writer; /* a group writer (sm_writer_new_group) */
    struct sm_output *output;       /* begun or joined with it */
    enum sm_run_ome_method method;
    int threads; /* <= 0: the OpenMP default */
    uint64_t memory_bytes;
    uint64_t max_chunk_bytes; /* limits.max_chunk_bytes of the read-back */
    struct sm_run_progress progress;
    const atomic_int *stop;
    unsigned done;      /* levels 0 .. done-1 already written (with level 0: sm_write_job.levels) */
    unsigned spill;     /* 0, or level `done` made from the spill file (sm_writer_spill_level) */
    uint64_t *spill_ns; /* if non-NULL, receives the spilled level's wall time */
};
sm_status sm_run_pyramid(const struct sm_run_pyramid *p, struct sm_write_result *wr,
                         struct sm_err *err);

#endif
