/* write/ internals shared by its sources and unit tests (STYLE B4, B11): the writer and output
 * structs, the file-system primitives of the output directory (all relative to its root
 * descriptor), and the shard record format shared by the journal and the completion marker.
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html
 * Invariant: nothing outside the output root is written; every object appears by rename. */
#ifndef SM_WRITE_WRITE_INT_H
#define SM_WRITE_WRITE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/buf.h"
#include "shardmill/status.h"
#include "shardmill/store.h"
#include "shardmill/write.h"

#define SM_MARKER_NAME "shardmill.complete.json"
#define SM_ZARR_JSON "zarr.json"
/* Zarr v2 (OME-NGFF 0.4): a group's .zgroup (fixed text) and .zattrs, an array's .zarray. */
#define SM_ZGROUP ".zgroup"
#define SM_ZATTRS ".zattrs"
#define SM_ZARRAY ".zarray"
#define SM_ZGROUP_TEXT "{\n  \"zarr_format\": 2\n}\n"
#define SM_PRIV_DIR ".shardmill"
#define SM_JOURNAL_DIR ".shardmill/journal"
#define SM_KEY_MAX 96
/* Room for one marker record line (key, size, crc32c, values; newline and separator included). */
#define SM_MARKER_REC_MAX (SM_KEY_MAX + 128)

struct sm_writer {
    struct sm_output_spec spec; /* attributes pointer cleared: borrowed only during new */
    struct sm_buf text;         /* zarr.json */
    struct sm_array_meta *meta; /* text parsed back: the chain */
    unsigned ndim;
    uint64_t obj[SM_MAX_DIMS];  /* stored object (shard or chunk) shape */
    uint64_t grid[SM_MAX_DIMS]; /* objects per axis */
    uint64_t nshards;
    size_t elem, obj_bytes;
    /* An OME-Zarr image group (SPEC §2; sm_writer_new_group): `text` is the group's zarr.json,
     * level k is the array "k" (lv[k], its own zarr.json and grid) and its shards are numbered
     * lv_base[k] .. lv_base[k + 1] - 1 of the group's shards, so the journal, resume, the marker
     * and verify see one shard numbering. nlevels 0: a plain array. */
    unsigned nlevels;
    struct sm_writer **lv;
    uint64_t *lv_base; /* nlevels + 1 */
    bool v2;           /* Zarr v2 (spec.zarr_v2): text is .zarray, or a group's .zattrs */
};

/* The array writer holding `shard` of w (w itself for a plain array), and its index there. */
const struct sm_writer *sm_writer_locate(const struct sm_writer *w, uint64_t shard, unsigned *level,
                                         uint64_t *local);
/* A writer for an existing output whose root zarr.json is `text`: an array (as
 * sm_writer_from_json), or an OME-Zarr image group written by shardmill, whose levels' zarr.json
 * are read from dirfd. SM_E_DATA naming what is wrong. */
/* The hex SHA-256 the marker records for w's documents: of zarr.json for an array; of the
 * group's zarr.json followed by every level's zarr.json for an OME-Zarr image. */
void sm_writer_docs_sha256(const struct sm_writer *w, char out[65]);
sm_status sm_writer_from_output(int dirfd, struct sm_bytes text, struct sm_writer **out,
                                struct sm_err *err);
/* true when the output tree of dirfd is a Zarr v2 image (a regular .zgroup at its root). */
bool sm_wfs_is_v2(int dirfd);
/* The root document of the output tree of dirfd: .zattrs for a Zarr v2 image, else zarr.json. */
const char *sm_wfs_root_doc(int dirfd);
/* The chunk tree of level k of group w (k < nlevels) or of array w (prefix ""): "c", "<k>/c";
 * a Zarr v2 level's chunks lie in its own directory "<k>" (beside its .zarray). */
void sm_writer_tree(const struct sm_writer *w, unsigned k, char *buf, size_t cap);

/* What a shard record says about an object: its encoded size and CRC32C, and the digest of the
 * values it was encoded from (sm_write_values_digest; 0: not recorded, as in a version 1 marker). A
 * resumed run keeps a shard only when its file matches size and CRC32C and the values this run
 * computes for its key have the recorded digest: key, bytes and values are bound together. */
struct sm_shard_rec {
    uint64_t size;
    uint64_t values;
    uint32_t crc32c;
    bool set;
};

struct sm_staged {
    uint64_t shard, ticket;
};

struct sm_output {
    char *root; /* resolved path, no trailing '/' */
    struct sm_output_opts opts;
    bool was_auto;          /* opts.exists was AUTO before sm_output_settle (for messages) */
    const atomic_int *stop; /* sm_output_set_stop: ends overwrite's delete walk */
    int state;              /* enum out_state */
    int rootfd;             /* -1 until begin/join */
    const struct sm_writer *w;
    struct sm_store *store; /* file store at root: every object is staged and committed here */
    uint64_t read_back;     /* levels this run reads back (bit k): never written O_DIRECT */
    bool large;             /* sm_output_set_size: values of half the memory or more */
    struct sm_shard_rec *recs;
    /* SYNCFS: the shards this process staged and has not committed yet, with their store
     * tickets, in put order: O(shards of this rank), never the whole grid (issue 11). */
    struct sm_staged *staged;
    size_t nstaged, staged_cap;
    pthread_mutex_t smu; /* guards staged */
    /* One flag per directory of the c/ tree: level L (c/i0/.../i(L-1), L = 0..ndim-1) starts at
     * dir_base[L]; set when a put created an entry in it. An OME-Zarr image (w->nlevels > 0)
     * has one c/ tree per level: level k's bases are dir_base[k * (SM_MAX_DIMS + 1) + L]. */
    atomic_uchar *dirs;
    uint64_t *dir_base;
    atomic_bool root_dirty;
    /* The run journal (write_journal.c): this rank's file, opened at its first batch. */
    pthread_mutex_t jmu;
    uint8_t *jbuf; /* SM_JOURNAL_BATCH records */
    size_t jlen;
    int jfd, rank;
    uint64_t token;
    struct sm_shard_rec *prev; /* RESUME: the previous runs' records, loaded at the first check */
    bool prev_loaded;
    atomic_uint_fast64_t journal_bytes, shards_changed;
    atomic_uint_fast64_t shards_written, bytes_written, shards_kept, put_ns, sync_ns;
    uint64_t total_shards, total_bytes;
};

/* ---- file-system reads (write_fs.c); paths are relative to a directory descriptor. Every write
 * goes through the output's store (stage / commit / sync, store.h). ---- */

/* Reads a whole file; *found false (SM_OK) when it does not exist or a symbolic link is on its
 * path (never followed: a link is not an object). */
sm_status sm_wfs_read(int dirfd, const char *key, struct sm_buf *out, bool *found,
                      struct sm_err *err);
/* Lists the entries of directory `rel` (names; no "." or ".."). A missing directory lists empty;
 * a symbolic link on the path is SM_E_IO naming it. On failure `out` is released. */
sm_status sm_wfs_list(int dirfd, const char *rel, struct sm_strv *out, struct sm_err *err);

/* How a tree of the output is walked. */
enum sm_wfs_walk {
    SM_WFS_CHECK,     /* fail on an entry an output cannot contain; change nothing */
    SM_WFS_REMOVE,    /* remove every entry (files, then directories) */
    SM_WFS_SWEEP_TMP, /* remove temporary files only */
};
/* Walks directory `rel` of dirfd recursively. `chunks` selects the c/ grammar (directories and
 * files named by decimal digits, and temporary files); otherwise any file or directory is allowed
 * (the private .shardmill tree). Symbolic links are never followed, also one swapped in during the
 * walk: in CHECK they are foreign, else SM_E_IO naming the link.
 * SM_E_USAGE "not a shardmill output: unexpected entry '<path>'" in CHECK; SM_E_IO. */
sm_status sm_wfs_walk(int dirfd, const char *rel, bool chunks, enum sm_wfs_walk mode,
                      struct sm_err *err);
/* sm_wfs_walk that ends with SM_E_STOPPED once *stop (if non-NULL) is set. */
sm_status sm_wfs_walk_stop(int dirfd, const char *rel, bool chunks, enum sm_wfs_walk mode,
                           const atomic_int *stop, struct sm_err *err);
/* sm_wfs_walk_stop of a chunk tree that also holds the regular file `doc` at its top (a Zarr v2
 * level directory: .zarray), which the walk leaves alone. */
sm_status sm_wfs_walk_doc(int dirfd, const char *rel, const char *doc, enum sm_wfs_walk mode,
                          const atomic_int *stop, struct sm_err *err);
/* The one rule for the names of a chunk tree ("c" or "<level>/c"), applied by verify, by the check
 * of sm_output_open and begin, and by resume's prune, so what verify flags auto either refuses
 * or removes. A key component is a canonical decimal ("0", "17"; never "01" or "00"). */
enum sm_wfs_name {
    SM_WFS_NAME_KEY,     /* a directory or a regular file named by a canonical decimal */
    SM_WFS_NAME_TMP,     /* a regular file with a temporary name: an unfinished write */
    SM_WFS_NAME_FOREIGN, /* anything else (a "*.tmp.*" directory, "01", a link): no output's */
};
/* dir / reg: the entry is a directory / a regular file (neither: a link or another kind). */
enum sm_wfs_name sm_wfs_chunk_name(const char *name, bool dir, bool reg);
/* true if name is a canonical decimal (no sign, no leading zero but "0"), its value in *v (if
 * non-NULL). Level directories of an OME-Zarr image follow the same rule. */
bool sm_wfs_decimal(const char *name, uint64_t *v);
/* true if the entry `name` (a directory if dir, else a regular file) at component d of array lw's
 * chunk tree (c/ is d 0) leads to a key of lw's grid: a directory below the last component, a
 * regular file at it, its index below the grid's extent. */
bool sm_wfs_in_grid(const struct sm_writer *lw, unsigned d, const char *name, bool dir);
/* Resume (under the lock): removes every entry of chunk tree `rel` of array lw that is named
 * like a key (SM_WFS_NAME_KEY) but leads to none of lw's grid (c/0/0/7 past the grid, a
 * directory where a shard belongs, a file where a directory belongs), with everything under it,
 * never through a link; *removed counts the entries removed. Temporary files are left to the
 * sweep; foreign names were refused by the check before. SM_E_IO, SM_E_STOPPED. */
sm_status sm_wfs_prune(int dirfd, const char *rel, const struct sm_writer *lw,
                       const atomic_int *stop, uint64_t *removed, struct sm_err *err);
/* Looks for a symbolic link anywhere in the tree of dirfd (never following one): *found, and its
 * path relative to dirfd ("c/13") in `where`. SM_E_IO. */
sm_status sm_wfs_find_link(int dirfd, char *where, size_t cap, bool *found, struct sm_err *err);
/* SM_E_IO "output.path: 'c/13' is a symbolic link ..." when the output tree of rootfd holds one
 * (shardmill never makes one: it was planted during the run), else SM_OK. */
sm_status sm_wfs_refuse_links(int rootfd, struct sm_err *err);

/* ---- shard records (write_marker.c): the journal and the completion marker ---- */

/* ---- the run journal (write_journal.c) ---- */

#define SM_JREC_BYTES 32
#define SM_JOURNAL_BATCH 256 /* records buffered before one write(2) */

/* One record: u64 shard, u64 size, u64 values digest, u32 crc32c, u32 crc32c of the first 28
 * bytes (little-endian). */
void sm_jrec_encode(uint8_t out[SM_JREC_BYTES], uint64_t shard, const struct sm_shard_rec *r);
/* false if the check fails or the shard is not below nshards. */
bool sm_jrec_decode(const uint8_t in[SM_JREC_BYTES], uint64_t nshards, uint64_t *shard,
                    struct sm_shard_rec *r);
/* Applies the records of one journal file to recs, in order, up to the first bad one (a torn
 * tail); returns how many were applied. */
size_t sm_jrec_scan(struct sm_bytes data, uint64_t nshards, struct sm_shard_rec *recs);
/* ".shardmill/journal/<token as 16 hex digits>.<rank>.jnl"; rank < 0: "merged.jnl" (the records
 * of a previous marker and previous journals, merged by a resuming primary; a fixed name, so
 * repeated failed resumes replace it rather than pile up files). */
void sm_journal_name(uint64_t token, int rank, char *buf, size_t cap);
/* Applies every journal file of the output to recs, except the rank journals of run skip_token
 * (being written now). */
sm_status sm_journal_load(int rootfd, uint64_t skip_token, uint64_t nshards,
                          struct sm_shard_rec *recs, struct sm_err *err);
/* Buffers a record (thread-safe); a full batch is appended to this rank's journal. SM_E_IO. */
sm_status sm_journal_append(struct sm_output *o, uint64_t shard, const struct sm_shard_rec *r,
                            struct sm_err *err);
/* Appends the buffered records. SM_E_IO. */
sm_status sm_journal_flush(struct sm_output *o, struct sm_err *err);
/* A fresh nonzero run token (time, pid, a counter). */
uint64_t sm_journal_token(void);

/* One record line: {"key": "c/0/1/2", "size": 123, "crc32c": 456}. Appended to out. */
sm_status sm_rec_append(struct sm_buf *out, const char *key, const struct sm_shard_rec *r,
                        struct sm_err *err);
/* The marker document for writer w with every record set (grid order). */
sm_status sm_marker_build(const struct sm_writer *w, const struct sm_shard_rec *recs,
                          struct sm_buf *out, struct sm_err *err);
/* The marker's format: 2 binds each record to the digest of its shard's values; 1 (before) has
 * none. Any other version is refused: its meaning is unknown. */
#define SM_MARKER_VERSION 2
/* The header of a parsed marker. */
struct sm_marker_head {
    char zarr_sha[65]; /* the documents' SHA-256 (sm_writer_docs_sha256) */
    int version;       /* 1 or SM_MARKER_VERSION */
    uint64_t bytes;    /* the "bytes" total it states */
};
/* Parses a marker: fills recs (nshards entries, indexed by the shard's linear index; entries not
 * listed stay unset) and the header. On a malformed marker (an unknown version included) returns
 * false with a message in why. */
bool sm_marker_parse(const struct sm_writer *w, struct sm_bytes doc, struct sm_shard_rec *recs,
                     struct sm_marker_head *head, char *why, size_t why_cap);
/* Linear shard index of a key of w's grid; false if it is not one. */
bool sm_writer_key_index(const struct sm_writer *w, const char *key, uint64_t *shard);

/* A writer for an existing zarr.json text (verify reads outputs it did not write). SM_E_DATA if
 * the text is not a v3 array. */
sm_status sm_writer_from_json(struct sm_bytes text, struct sm_writer **out, struct sm_err *err);

/* ---- the output directory, split in three files: write_output.c (path, lock, shards, flush,
 * marker), write_exists.c (output.exists: auto), write_resume.c (begin, join, resume) ---- */
enum out_state {
    OUT_ABSENT,    /* nothing at the path */
    OUT_EMPTY,     /* an empty directory */
    OUT_SHARDMILL, /* holds .shardmill/ or the marker */
    OUT_FOREIGN,   /* anything else */
};
#define PATH_CAP 4096

/* write_output.c: the root's descriptor (O_NOFOLLOW directory), -1 on failure */
int sm_output_open_root(const char *root);
/* *state (enum out_state) of the path root */
sm_status sm_output_classify(const char *root, int *state, struct sm_err *err);
/* The level directories of c/ under fd from depth `from` on, checked or removed (mode) */
sm_status sm_output_level_dirs(int fd, unsigned from, enum sm_wfs_walk mode, const atomic_int *stop,
                               struct sm_err *err);
/* SM_E_USAGE unless the tree under fd holds only what an output holds */
sm_status sm_output_check_tree(int fd, const char *root, struct sm_err *err);
/* Removes the root's files (tmp_only: only temporary ones) */
sm_status sm_output_remove_root_files(struct sm_output *o, bool tmp_only, struct sm_err *err);
/* Whether the output's sync mode syncs at all */
bool sm_output_syncing(const struct sm_output *o);
sm_status sm_output_fsync_dir(struct sm_output *o, const char *rel, struct sm_err *err);
sm_status sm_output_drop_marker(struct sm_output *o, struct sm_err *err);
/* The marker, then every object of the output: an output to write anew */
sm_status sm_output_clear(struct sm_output *o, struct sm_err *err);
sm_status sm_output_take_lock(struct sm_output *o, struct sm_err *err);
sm_status sm_output_put_owner(struct sm_output *o, struct sm_err *err);
/* One metadata document put (staged, committed, synced) */
sm_status sm_output_put_doc(struct sm_output *o, const char *key, struct sm_bytes data,
                            struct sm_err *err);
/* write_exists.c: a JSON document under meta.h's number policy (NULL: does not parse, why in *e);
 * a document's attributes; the dotted first member where a and b differ (false: equal) */
struct json_t *sm_output_load_doc(struct sm_bytes b, struct sm_err *e);
struct json_t *sm_output_attrs_of(struct json_t *doc);
bool sm_output_first_diff(struct json_t *a, struct json_t *b, char *path, size_t cap);

#endif
