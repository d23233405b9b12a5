/* The state of one convert run, shared by its phases (run_convert*.c). */
#ifndef SM_RUN_RUN_CONVERT_INT_H
#define SM_RUN_RUN_CONVERT_INT_H

#include "run_int.h"

#include "shardmill/source.h"

struct json_t;

/* One pass: the provenance member zarr.json gets only once the statistics are reduced, and an
 * OME-Zarr image of the input's values also its omero window (their p1..p99). */
#define CV_PENDING_ATTR "shardmill/histogram shardmill/input_state"
#define CV_PENDING_OME_NONE "shardmill/histogram ome/omero shardmill/input_state"
/* Two passes: the input's state alone (restated after the write, so a resume of a changed input
 * ends with this run's). */
#define CV_PENDING_STATE "shardmill/input_state"

struct cv_thread {
    struct sm_scratch *scratch;
    struct sm_chunk_memo *memo;
    struct sm_buf in;
    struct sm_checksums sums; /* of the output values */
    uint64_t norm_ns;
    /* one pass: the statistics of the input this thread read */
    struct sm_hist hist;
    struct sm_checksums in_sums;
    uint64_t voxels, scan_ns;
};

struct cv {
    const struct sm_convert_run *p;
    struct sm_run_result *res;
    uint64_t t_start;
    int rank, nranks, nthreads;
    /* open */
    struct sm_output *out;
    bool done; /* output.exists: auto found this job's complete output: the run ends early */
    /* output.exists: auto finishes this job's output over an HDF5 file at export.hdf5.path (its
     * own export: renamed into place before the marker, so a kill between the two leaves it):
     * the export phase replaces it, whatever export.hdf5.exists says */
    bool replace_export;
    uint64_t done_shards, done_bytes; /* the complete output's, from its marker */
    struct sm_source *src;            /* p->source, or NULL: a Zarr/N5 array (res->array) */
    struct sm_array_meta src_meta;    /* a source's shape and type as array metadata */
    struct sm_box_reader reader;      /* a source's boxes for the scan */
    const struct sm_array_meta *m;    /* the input's */
    char meta_sha[65];                /* of a Zarr input's metadata documents */
    struct json_t *input_id;          /* the input's identity (rank 0's, on every rank) */
    struct sm_run_setup su;
    /* plan */
    bool one_pass;
    struct sm_tiling grid; /* the output shard grid as a tiling of the ROI */
    struct sm_output_spec layout;
    struct sm_part shards, mine; /* this rank's shards (not grouped) and scan tiles */
    /* the read plan (run_read_plan.c, docs/internals/reading.md); grouped: the ranks take whole
     * groups of shards that share input blocks (gmine), each read once per pass into win */
    struct sm_read_plan rp;
    bool grouped;
    struct sm_part gmine;
    uint64_t *order;  /* grouped: this rank's shards, group after group (C order in each) */
    uint64_t *gstart; /* grouped: where each of gmine's groups starts in order (count + 1) */
    uint64_t nmine;   /* this rank's shards */
    struct sm_run_window win;
    struct sm_run_window ahead; /* rp.windows 2: the next group's, read while win is processed */
    /* scan */
    uint8_t *keep; /* the decoded input box of this rank's tiles, or NULL */
    size_t keep_bytes;
    uint64_t allreduce_ns, t_scan;
    /* begin */
    enum sm_dtype out_dt;
    struct sm_norm_lut lut; /* the normalization prepared once (a table for <= 16-bit input) */
    struct json_t *attrs;
    struct sm_output_spec spec;
    struct sm_run_output oo; /* output.ome with the input's geometry where unset */
    char unit[48];
    struct sm_writer *w, *w_final; /* w_final: one pass, w with the statistics in zarr.json */
    /* write */
    const struct sm_writer *final;
    size_t in_elem, out_elem;
    bool keep_values; /* normalize none */
    uint64_t astride[SM_MAX_DIMS], ostride[SM_MAX_DIMS];
    struct cv_thread *ts;
    unsigned levels_with; /* OME-Zarr levels written with level 0 (1: level 0 only) */
    struct sm_run_levels levels;
    unsigned spill_level; /* 0, or the pyramid's level made in the write phase (run_spill.c) */
    struct sm_run_spill spill;
    struct sm_write_result wr;
    uint64_t t_finish;
};

/* run_convert_boxes.c: the box [off, off + shape) of the input into cv->win (a grouped rank's
 * group, read once per pass), unless the window holds it already. */
sm_status sm_cv_window_load(struct cv *cv, const uint64_t *off, const uint64_t *shape,
                            struct sm_err *err);

/* The boxes a grouped rank reads through its window, one after another (run_convert_boxes.c):
 * its groups (gmine), or, for the scan of a source read at any box, the union of its groups cut
 * into slabs of whole planes (sm_cv_planes). */
struct cv_boxes {
    uint64_t count;
    bool planes;
    unsigned nrun; /* planes: the boxes of the rank's run of groups (sm_tiling_run_boxes) */
    uint64_t off[SM_TILING_RUN_BOXES][SM_MAX_DIMS], shape[SM_TILING_RUN_BOXES][SM_MAX_DIMS];
    uint64_t depth[SM_TILING_RUN_BOXES];      /* planes per slab of each run box */
    uint64_t before[SM_TILING_RUN_BOXES + 1]; /* slabs before each run box */
    uint64_t voxels;                          /* of the run's boxes */
};
/* This rank's groups as boxes. */
void sm_cv_group_boxes(const struct cv *cv, struct cv_boxes *b);
/* The scan of a grouped rank whose source reads any box (SM_SOURCE_RANDOM: uncompressed TIFF
 * strips, raw, NIfTI, contiguous HDF5) and whose groups are narrower than the rank's run of them
 * on an axis after the first: that run's boxes in slabs of whole planes, each at most a group's
 * window (rp.window_bytes), so that each plane (a slice file) is read whole and in order. A
 * group of [256, 256, 2048] of a stack of 2048^2 slices reads 1 MiB of each of 256 files, which
 * a disk serves at about half the bandwidth of whole files (issue 33). The histogram and the
 * checksums do not depend on the order. False (b untouched) when it does not apply. */
bool sm_cv_planes(const struct cv *cv, struct cv_boxes *b);
/* Box k of b. */
void sm_cv_box(const struct cv *cv, const struct cv_boxes *b, uint64_t k, uint64_t *off,
               uint64_t *shape);

/* run_convert_boxes.c: each box of b read into cv->win, then fn(cv, user, k, the box); with
 * rp.windows 2 and a source, the next box is read into cv->ahead on a thread of its own while fn
 * runs (windows swapped after). fn must not read the source. sm_cv_groups: the rank's groups. */
typedef sm_status (*sm_cv_group_fn)(struct cv *cv, void *user, uint64_t k, const uint64_t *off,
                                    const uint64_t *shape, struct sm_err *err);
sm_status sm_cv_each_box(struct cv *cv, const struct cv_boxes *b, sm_cv_group_fn fn, void *user,
                         struct sm_err *err);
sm_status sm_cv_groups(struct cv *cv, sm_cv_group_fn fn, void *user, struct sm_err *err);

/* run_convert_write.c: the phases write, flush (with its cleanup) and statistics */
sm_status sm_cv_write(void *ctx, struct sm_err *err);
uint64_t sm_cv_write_total(void *ctx);
sm_status sm_cv_flush(void *ctx, struct sm_err *err);
void sm_cv_flush_kept(void *ctx);
sm_status sm_cv_statistics(void *ctx, struct sm_err *err);
void sm_cv_threads_free(struct cv *cv);

/* run_convert_collect.c: the phase collect (the result) */
sm_status sm_cv_collect(void *ctx, struct sm_err *err);

/* run_convert_meta.c: what zarr.json says of the run, and the output's type */
struct json_t *sm_cv_provenance(const struct cv *cv, const struct sm_scan_result *r);
/* The job's identity: the members engine, config_sha256 and input that open the provenance
 * (known once the input is open), which output.exists: auto compares (sm_output_decide). */
struct json_t *sm_cv_identity(const struct cv *cv);
/* run_input_id.c: the input's identity, the provenance's `input` member (SPEC §6.3, §6.5): a
 * source's description with its resolved path and "file", the records of every file read
 * (sm_run_file_identity); a Zarr input's resolved store (a URL redacted), array,
 * metadata_sha256, and "objects" (a file store: the records of every file under the array),
 * "marker_sha256" (a shardmill output's marker over HTTP/S3) or "values": SM_RUN_INPUT_REREAD
 * (nothing cheap binds the values: auto resumes, checking every shard against its values digest).
 * Rank 0 computes it and broadcasts it into cv->input_id (collective). SM_E_IO naming a file that
 * cannot be listed or stat'ed; SM_E_NOMEM. */
#define SM_RUN_INPUT_REREAD "re-read"
sm_status sm_cv_input_identity(struct cv *cv, struct sm_err *err);
/* The provenance's two members of the identity (a new object): state false, `input` -- what the
 * input is (path or store resolved, array, format, shape, type, header, metadata_sha256), which
 * resume and auto require unchanged (else exit 2 naming the member); state true,
 * `input_state` -- what binds its bytes now ("file", "objects", "marker_sha256", "values"), a
 * pending member (CV_PENDING_STATE): resume accepts another one and checks every shard against
 * its values digest, and auto resumes instead of declaring the output complete. */
struct json_t *sm_run_input_part(struct json_t *input_id, bool state);
/* True when the identity binds no values (its "values" member is SM_RUN_INPUT_REREAD). */
bool sm_run_input_reread(const struct json_t *input_id);
/* path's identity: `resolved` its realpath; *out {files, bytes, mtime_ns, dev, ino, ctime_ns}
 * of a file (dev, ino and the sizes as decimal strings), {files, bytes, mtime_ns,
 * records_sha256} of a directory: the SHA-256 over its files' sorted records (name, size, dev,
 * ino, ctime, mtime). SM_E_IO naming path. */
sm_status sm_run_file_identity(const char *path, char *resolved, size_t cap, struct json_t **out,
                               struct sm_err *err);
sm_status sm_cv_make_norm(const struct sm_run_norm *cfg, const struct sm_hist *h,
                          struct sm_norm *nm, struct sm_err *err);
/* attributes.ome.omero's window in output values (SPEC §2), once out_dt and the norm are known: a
 * normalized output's full range (0..1 for float32, 0..MAX for an integer type), with min/max the
 * values a float32 scale can reach; with normalize none the input's p1 and p99 when a histogram
 * was computed, else the type's range. */
void sm_cv_omero(const struct cv *cv, struct sm_run_omero *w);
sm_status sm_cv_output_dtype(const struct sm_run_norm *nm, const struct sm_run_output *o,
                             enum sm_dtype in, enum sm_dtype *out, struct sm_err *err);
/* SPEC §1's keep-or-re-read rule: the scan copies this rank's tiles into a kept box when they
 * hold its shards' input and it fits; NULL: the write reads again. */
uint8_t *sm_cv_keep_plan(uint64_t memory_bytes, const struct sm_array_meta *m,
                         struct sm_run_setup *su, const struct sm_part *tiles,
                         const struct sm_tiling *grid, const struct sm_part *shards, size_t *bytes);
/* A source's geometry (spacing, unit, origin) as the `shardmill` attributes sm_run_ome_geometry
 * reads from an input, or NULL when it states none. */
struct json_t *sm_cv_source_geometry(const struct sm_source_info *info);

/* run_convert_geom.c: the geometry output.ome lacks, from the input (an OME-Zarr input's
 * multiscales, collective; a shardmill array's provenance; what a source's header states), the
 * unit as a UDUNITS-2 name, and res->geometry saying where each part came from. SM_E_USAGE naming
 * input.unit when the caller's unit is no space unit (shardmill/unit.h). */
sm_status sm_cv_input_geometry(struct cv *cv, struct sm_err *err);

#endif
