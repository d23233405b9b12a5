/* The output directory (SPEC §6): path checks, the exists policy (error | overwrite | resume),
 * zarr.json, atomic shard puts with their journal records, directory fsync or one syncfs, and the
 * completion marker written last. Every object is written through the output's file store
 * (stage / commit / sync, store.h). See write.h for the layout and the durability modes.
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html
 * Invariant: an existing output is never touched unless the policy says so, nothing outside the
 * output path is written, and the marker exists only over a complete, durable output. */
#include "shardmill/sm_config.h"

#include "write_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/crc32c.h"
#include "shardmill/fs.h"
#include "shardmill/path.h"

enum out_state {
    OUT_ABSENT,    /* nothing at the path */
    OUT_EMPTY,     /* an empty directory */
    OUT_SHARDMILL, /* holds .shardmill/ or the marker */
    OUT_FOREIGN,   /* anything else */
};

#define PATH_CAP 4096

/* Records a usage error about the output path, then returns it. */
#define FAIL_PATH(err, path, ...)                                                                  \
    do {                                                                                           \
        sm_err_set((err), SM_E_USAGE, __FILE__, __LINE__, __VA_ARGS__);                            \
        sm_err_where((err), "%s", (path));                                                         \
        return (err)->status;                                                                      \
    } while (0)

static sm_status io_fail(struct sm_err *err, const char *what, const char *path, int e)
{
    sm_err_set(err, SM_E_IO, __FILE__, __LINE__, "%s: %s", what, strerror(e));
    sm_err_cause(err, "errno", e);
    sm_err_where(err, "%s", path);
    return err->status;
}

/* ---- the path ---- */

static sm_status resolve(const char *path, const char *base, char **out, struct sm_err *err)
{
    static const struct sm_path_names names = {"output.path", "output", "directory"};
    return sm_path_resolve(path, base, &names, out, err);
}

/* ---- recognising an output ---- */

static int open_root(const char *root)
{
    return open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
}

/* Classifies the path; `fd` (if the path is a directory) is left open in *dfd. */
static sm_status classify(const char *root, int *state, struct sm_err *err)
{
    struct stat sb;
    if (lstat(root, &sb) != 0) {
        if (errno == ENOENT) {
            *state = OUT_ABSENT;
            return SM_OK;
        }
        return io_fail(err, "cannot stat the output", root, errno);
    }
    if (S_ISLNK(sb.st_mode)) {
        FAIL_PATH(err, root, "the output path is a symbolic link (give the directory itself)");
    }
    if (!S_ISDIR(sb.st_mode)) {
        *state = OUT_FOREIGN;
        return SM_OK;
    }
    const int fd = open_root(root);
    if (fd < 0) {
        return io_fail(err, "cannot open the output", root, errno);
    }
    struct sm_strv names = {NULL, 0, 0};
    sm_status st = sm_wfs_list(fd, "", &names, err);
    if (st == SM_OK) {
        *state = names.n == 0 ? OUT_EMPTY : OUT_FOREIGN;
        struct stat eb;
        if (fstatat(fd, SM_PRIV_DIR, &eb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(eb.st_mode)) {
            *state = OUT_SHARDMILL;
        }
        if (fstatat(fd, SM_MARKER_NAME, &eb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(eb.st_mode)) {
            *state = OUT_SHARDMILL;
        }
    }
    sm_strv_free(&names);
    close(fd);
    return st;
}

static bool root_name_ok(const char *name, const struct stat *sb)
{
    if (S_ISDIR(sb->st_mode)) {
        return strcmp(name, "c") == 0 || strcmp(name, SM_PRIV_DIR) == 0;
    }
    if (!S_ISREG(sb->st_mode)) {
        return false;
    }
    return strcmp(name, SM_ZARR_JSON) == 0 || strcmp(name, SM_MARKER_NAME) == 0 ||
           strncmp(name, SM_ZARR_JSON ".tmp.", strlen(SM_ZARR_JSON ".tmp.")) == 0 ||
           strncmp(name, SM_MARKER_NAME ".tmp.", strlen(SM_MARKER_NAME ".tmp.")) == 0;
}

/* Fails (SM_E_USAGE) on any entry a shardmill output cannot contain; changes nothing. */
static sm_status check_tree(int fd, const char *root, struct sm_err *err)
{
    struct sm_strv names = {NULL, 0, 0};
    SM_TRY(sm_wfs_list(fd, "", &names, err));
    sm_status st = SM_OK;
    for (size_t i = 0; i < names.n && st == SM_OK; i++) {
        struct stat sb;
        if (fstatat(fd, names.v[i], &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            st = io_fail(err, "cannot stat", names.v[i], errno);
        } else if (!root_name_ok(names.v[i], &sb)) {
            st = sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                            "not a shardmill output: unexpected entry '%s' (refusing to touch "
                            "the directory)",
                            names.v[i]);
        }
    }
    sm_strv_free(&names);
    if (st == SM_OK) {
        st = sm_wfs_walk(fd, "c", true, SM_WFS_CHECK, err);
    }
    if (st == SM_OK) {
        st = sm_wfs_walk(fd, SM_PRIV_DIR, false, SM_WFS_CHECK, err);
    }
    if (st != SM_OK) {
        sm_err_where(err, "%s", root);
    }
    return st;
}

/* Removes the files at the root whose names satisfy `pick`. */
static sm_status remove_root_files(struct sm_output *o, bool tmp_only, struct sm_err *err)
{
    struct sm_strv names = {NULL, 0, 0};
    SM_TRY(sm_wfs_list(o->rootfd, "", &names, err));
    sm_status st = SM_OK;
    for (size_t i = 0; i < names.n && st == SM_OK; i++) {
        const char *n = names.v[i];
        const bool tmp = sm_wfs_is_tmp(n);
        const bool pick =
            tmp || (!tmp_only && (strcmp(n, SM_ZARR_JSON) == 0 || strcmp(n, SM_MARKER_NAME) == 0));
        if (pick && unlinkat(o->rootfd, n, 0) != 0 && errno != ENOENT) {
            st = io_fail(err, "cannot remove", n, errno);
        }
    }
    sm_strv_free(&names);
    return st;
}

static bool syncing(const struct sm_output *o)
{
    return o->opts.sync != SM_OUTPUT_SYNC_NONE;
}

static sm_status fsync_dir(struct sm_output *o, const char *rel, struct sm_err *err)
{
    return sm_store_sync(o->store, SM_STORE_SYNC_DIR, rel, err);
}

/* Removes the marker, durably, before anything of a finished output changes. */
static sm_status drop_marker(struct sm_output *o, struct sm_err *err)
{
    if (unlinkat(o->rootfd, SM_MARKER_NAME, 0) != 0) {
        return errno == ENOENT ? SM_OK : io_fail(err, "cannot remove", SM_MARKER_NAME, errno);
    }
    return syncing(o) ? fsync_dir(o, "", err) : SM_OK;
}

/* OVERWRITE (and a RESUME without zarr.json): the marker first, then shards, journal, zarr.json. */
static sm_status clear(struct sm_output *o, struct sm_err *err)
{
    SM_TRY(drop_marker(o, err));
    SM_TRY(sm_wfs_walk(o->rootfd, "c", true, SM_WFS_REMOVE, err));
    if (unlinkat(o->rootfd, "c", AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return io_fail(err, "cannot remove directory", "c", errno);
    }
    SM_TRY(sm_wfs_walk(o->rootfd, SM_PRIV_DIR, false, SM_WFS_REMOVE, err));
    return remove_root_files(o, false, err);
}

/* ---- lifecycle ---- */

sm_status sm_output_open(const char *path, const struct sm_output_opts *opts,
                         struct sm_output **out, struct sm_err *err)
{
    *out = NULL;
    char *root;
    SM_TRY(resolve(path, opts->base, &root, err));
    int state = OUT_ABSENT;
    sm_status st = classify(root, &state, err);
    if (st == SM_OK && opts->exists == SM_OUTPUT_EXISTS_ERROR && state != OUT_ABSENT &&
        state != OUT_EMPTY) {
        st = sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                        "output exists (set output.exists: overwrite or resume)");
        sm_err_where(err, "%s", root);
    } else if (st == SM_OK && state == OUT_FOREIGN) {
        st = sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                        "not a shardmill output (no %s/ or %s): refusing to %s it", SM_PRIV_DIR,
                        SM_MARKER_NAME,
                        opts->exists == SM_OUTPUT_EXISTS_RESUME ? "resume" : "overwrite");
        sm_err_where(err, "%s", root);
    } else if (st == SM_OK && state == OUT_SHARDMILL) {
        const int fd = open_root(root);
        if (fd < 0) {
            st = io_fail(err, "cannot open the output", root, errno);
        } else {
            st = check_tree(fd, root, err);
            close(fd);
        }
    }
    struct sm_output *o = st == SM_OK ? sm_calloc(1, sizeof(*o)) : NULL;
    if (st == SM_OK && o == NULL) {
        st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot allocate an output");
    }
    if (st != SM_OK) {
        sm_free(root);
        return st;
    }
    o->root = root;
    o->opts = *opts;
    o->opts.base = NULL;
    o->state = state;
    o->rootfd = -1;
    *out = o;
    return SM_OK;
}

/* Directory flags and records for w's grid. */
static sm_status setup(struct sm_output *o, const struct sm_writer *w, struct sm_err *err)
{
    o->w = w;
    const uint64_t n = w->nshards;
    uint64_t total = 0, level = 1;
    for (unsigned l = 0; l < w->ndim; l++) { /* n > 0: every grid extent is >= 1 */
        o->dir_base[l] = total;
        total += n == 0 ? 0 : level;
        level *= n == 0 ? 1 : w->grid[l];
    }
    o->dir_base[w->ndim] = total;
    if (n > SIZE_MAX / sizeof(*o->recs)) {
        SM_FAIL(err, SM_E_NOMEM, "cannot track %" PRIu64 " shards", n);
    }
    o->recs = sm_calloc(n == 0 ? 1 : (size_t)n, sizeof(*o->recs));
    o->staged = sm_calloc(n == 0 ? 1 : (size_t)n, sizeof(*o->staged));
    o->dirs = sm_calloc(total == 0 ? 1 : (size_t)total, sizeof(*o->dirs));
    if (o->recs == NULL || o->staged == NULL || o->dirs == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot track %" PRIu64 " shards", n);
    }
    return SM_OK;
}

/* The file store at the root: every object of the output is staged and committed through it. */
static sm_status open_store(struct sm_output *o, struct sm_err *err)
{
    return o->store != NULL ? SM_OK : sm_store_file_open(o->root, &o->store, err);
}

/* Makes sure every record of a previous marker is in the journal, then drops the marker. */
static sm_status marker_to_journal(struct sm_output *o, const struct sm_writer *w,
                                   struct sm_err *err)
{
    struct sm_buf doc = SM_BUF_INIT, jb = SM_BUF_INIT;
    bool found;
    sm_status st = sm_wfs_read(o->rootfd, SM_MARKER_NAME, &doc, &found, err);
    struct sm_shard_rec *recs = NULL;
    if (st == SM_OK && found) {
        recs = sm_calloc(w->nshards == 0 ? 1 : (size_t)w->nshards, sizeof(*recs));
        char sha[65], why[160];
        if (recs == NULL) {
            st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot read the marker");
        } else if (!sm_marker_parse(w, sm_buf_bytes(&doc), recs, sha, why, sizeof(why))) {
            memset(recs, 0, (size_t)w->nshards * sizeof(*recs)); /* unusable: trust the journal */
        }
    }
    for (uint64_t i = 0; st == SM_OK && recs != NULL && i < w->nshards; i++) {
        if (!recs[i].set) {
            continue;
        }
        char key[SM_KEY_MAX], jkey[SM_KEY_MAX + 32], line[SM_KEY_MAX + 64];
        struct sm_shard_rec have;
        st = sm_writer_shard_key(w, i, key, sizeof(key), err);
        if (st == SM_OK) {
            st = sm_journal_key(key, jkey, sizeof(jkey), err);
        }
        if (st == SM_OK) {
            st = sm_wfs_read(o->rootfd, jkey, &jb, &found, err);
        }
        if (st != SM_OK || (found && sm_rec_parse_journal(sm_buf_bytes(&jb), key, &have) &&
                            have.size == recs[i].size && have.crc32c == recs[i].crc32c)) {
            continue;
        }
        struct sm_buf lb = {(uint8_t *)line, 0, sizeof(line)};
        st = sm_rec_append(&lb, key, &recs[i], err);
        if (st == SM_OK) {
            line[lb.len++] = '\n';
            st = sm_store_put(o->store, jkey, sm_buf_bytes(&lb), false, err);
        }
    }
    sm_free(recs);
    sm_buf_free(&doc);
    sm_buf_free(&jb);
    return st == SM_OK ? drop_marker(o, err) : st;
}

/* RESUME of an existing shardmill output. *keep_zarr tells zarr.json is already w's. */
static sm_status prepare_resume(struct sm_output *o, const struct sm_writer *w, bool *keep_zarr,
                                struct sm_err *err)
{
    struct sm_buf have = SM_BUF_INIT;
    bool found;
    sm_status st = sm_wfs_read(o->rootfd, SM_ZARR_JSON, &have, &found, err);
    if (st == SM_OK && !found) {
        st = clear(o, err); /* no zarr.json: nothing can be trusted */
    } else if (st == SM_OK) {
        if (have.len != w->text.len || memcmp(have.ptr, w->text.ptr, have.len) != 0) {
            st = sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                            "output.exists: resume: the existing zarr.json differs from this "
                            "job's (another configuration or input); use overwrite");
        } else {
            *keep_zarr = true;
            st = marker_to_journal(o, w, err);
        }
    }
    sm_buf_free(&have);
    if (st == SM_OK) {
        st = remove_root_files(o, true, err);
    }
    if (st == SM_OK) {
        st = sm_wfs_walk(o->rootfd, "c", true, SM_WFS_SWEEP_TMP, err);
    }
    if (st == SM_OK) {
        st = sm_wfs_walk(o->rootfd, SM_PRIV_DIR, false, SM_WFS_SWEEP_TMP, err);
    }
    return st;
}

/* zarr.json and the marker are fsynced in both durable modes: a crash during a SYNCFS run must
 * leave a zarr.json that resume can compare. */
static sm_status put_doc(struct sm_output *o, const char *key, struct sm_bytes data,
                         struct sm_err *err)
{
    return sm_store_put(o->store, key, data, syncing(o), err);
}

static sm_status begin(struct sm_output *o, const struct sm_writer *w, struct sm_err *err)
{
    SM_TRY(sm_fs_mkdirs(AT_FDCWD, o->root, err));
    o->rootfd = open_root(o->root);
    if (o->rootfd < 0) {
        return io_fail(err, "cannot open the output", o->root, errno);
    }
    SM_TRY(open_store(o, err));
    /* The path may have changed since open: decide again, and check before changing anything. */
    int state;
    SM_TRY(classify(o->root, &state, err));
    if (state == OUT_FOREIGN || (o->opts.exists == SM_OUTPUT_EXISTS_ERROR && state != OUT_EMPTY)) {
        SM_FAIL(err, SM_E_USAGE, "output exists (set output.exists: overwrite or resume)");
    }
    bool keep_zarr = false;
    if (state == OUT_SHARDMILL) {
        SM_TRY(check_tree(o->rootfd, o->root, err));
        if (o->opts.exists == SM_OUTPUT_EXISTS_OVERWRITE) {
            SM_TRY(clear(o, err));
        } else {
            SM_TRY(prepare_resume(o, w, &keep_zarr, err));
        }
    }
    SM_TRY(sm_fs_mkdirs(o->rootfd, SM_JOURNAL_DIR, err));
    SM_TRY(setup(o, w, err));
    if (!keep_zarr) {
        SM_TRY(put_doc(o, SM_ZARR_JSON, sm_buf_bytes(&w->text), err));
    }
    if (syncing(o)) {
        SM_TRY(fsync_dir(o, SM_PRIV_DIR, err));
        SM_TRY(fsync_dir(o, "", err));
    }
    return SM_OK;
}

sm_status sm_output_begin(struct sm_output *o, const struct sm_writer *w, struct sm_err *err)
{
    const sm_status st = begin(o, w, err);
    if (st != SM_OK) {
        sm_err_where(err, "%s", o->root);
    }
    return st;
}

sm_status sm_output_join(struct sm_output *o, const struct sm_writer *w, struct sm_err *err)
{
    o->rootfd = open_root(o->root);
    if (o->rootfd < 0) {
        return io_fail(err, "cannot open the output", o->root, errno);
    }
    struct sm_buf have = SM_BUF_INIT;
    bool found;
    sm_status st = sm_wfs_read(o->rootfd, SM_ZARR_JSON, &have, &found, err);
    if (st == SM_OK &&
        (!found || have.len != w->text.len || memcmp(have.ptr, w->text.ptr, have.len) != 0)) {
        st = sm_err_set(err, SM_E_DATA, __FILE__, __LINE__,
                        "zarr.json is missing or not this job's (the primary did not begin it)");
    }
    sm_buf_free(&have);
    if (st == SM_OK) {
        st = open_store(o, err);
    }
    if (st == SM_OK) {
        st = setup(o, w, err);
    }
    if (st != SM_OK) {
        sm_err_where(err, "%s", o->root);
    }
    return st;
}

void sm_output_close(struct sm_output *o)
{
    if (o == NULL) {
        return;
    }
    for (uint64_t i = 0; o->staged != NULL && o->w != NULL && i < o->w->nshards; i++) {
        char key[SM_KEY_MAX];
        struct sm_err ignored;
        sm_err_clear(&ignored);
        if (o->staged[i] != 0 &&
            sm_writer_shard_key(o->w, i, key, sizeof(key), &ignored) == SM_OK) {
            sm_store_abort(o->store, key, o->staged[i] - 1); /* never committed: a failed run */
        }
    }
    if (o->rootfd >= 0) {
        close(o->rootfd);
    }
    sm_store_close(o->store);
    sm_free(o->recs);
    sm_free(o->staged);
    sm_free(o->dirs);
    sm_free(o->root);
    sm_free(o);
}

const char *sm_output_path(const struct sm_output *o)
{
    return o->root;
}

void sm_output_stats(const struct sm_output *o, struct sm_output_stats *out)
{
    out->shards_written = atomic_load(&o->shards_written);
    out->bytes_written = atomic_load(&o->bytes_written);
    out->shards_kept = atomic_load(&o->shards_kept);
    out->fsyncs = o->store != NULL ? sm_store_fsyncs(o->store) : 0;
    out->put_ns = atomic_load(&o->put_ns);
    out->sync_ns = atomic_load(&o->sync_ns);
    out->total_shards = o->total_shards;
    out->total_bytes = o->total_bytes;
}

/* ---- shards ---- */

static sm_status keys_of(const struct sm_output *o, uint64_t shard, char *key, char *jkey,
                         struct sm_err *err)
{
    if (o->w == NULL || shard >= o->w->nshards) {
        SM_FAIL(err, SM_E_INTERNAL, "shard %" PRIu64 " of an output that did not begin", shard);
    }
    SM_TRY(sm_writer_shard_key(o->w, shard, key, SM_KEY_MAX, err));
    return sm_journal_key(key, jkey, SM_KEY_MAX + 32, err);
}

sm_status sm_output_shard_needed(struct sm_output *o, uint64_t shard, bool *need,
                                 struct sm_err *err)
{
    *need = true;
    if (o->opts.exists != SM_OUTPUT_EXISTS_RESUME) {
        return SM_OK;
    }
    char key[SM_KEY_MAX], jkey[SM_KEY_MAX + 32];
    SM_TRY(keys_of(o, shard, key, jkey, err));
    struct sm_buf b = SM_BUF_INIT;
    bool found;
    struct sm_shard_rec rec;
    sm_status st = sm_wfs_read(o->rootfd, jkey, &b, &found, err);
    if (st == SM_OK && found && sm_rec_parse_journal(sm_buf_bytes(&b), key, &rec)) {
        struct stat sb;
        if (fstatat(o->rootfd, key, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode) &&
            (uint64_t)sb.st_size == rec.size) {
            st = sm_wfs_read(o->rootfd, key, &b, &found, err);
            if (st == SM_OK && found && b.len == rec.size &&
                sm_crc32c(0, b.ptr, b.len) == rec.crc32c) {
                *need = false;
                o->recs[shard] = rec;
                atomic_fetch_add(&o->shards_kept, 1);
            }
        }
    }
    sm_buf_free(&b);
    if (st != SM_OK) {
        sm_err_where(err, "%s/%s", o->root, key);
    }
    return st;
}

/* Flags the directories that receive an entry when `shard` is created. */
static void mark_dirs(struct sm_output *o, uint64_t shard)
{
    uint64_t idx[SM_MAX_DIMS];
    sm_writer_shard_coords(o->w, shard, idx);
    uint64_t p = 0;
    for (unsigned l = 0; l < o->w->ndim; l++) {
        atomic_store_explicit(&o->dirs[o->dir_base[l] + p], 1, memory_order_relaxed);
        p = p * o->w->grid[l] + idx[l];
    }
    atomic_store_explicit(&o->root_dirty, true, memory_order_relaxed);
}

sm_status sm_output_put_shard(struct sm_output *o, uint64_t shard, struct sm_bytes data,
                              struct sm_err *err)
{
    char key[SM_KEY_MAX], jkey[SM_KEY_MAX + 32], line[SM_KEY_MAX + 64];
    SM_TRY(keys_of(o, shard, key, jkey, err));
    const uint64_t t0 = sm_clock_ns();
    const struct sm_shard_rec rec = {data.len, sm_crc32c(0, data.ptr, data.len), true};
    sm_status st;
    if (o->opts.sync == SM_OUTPUT_SYNC_SYNCFS) {
        /* staged under its temporary name; committed in sm_output_flush after one syncfs */
        uint64_t ticket = 0;
        st = sm_store_stage(o->store, key, data, false, &ticket, err);
        o->staged[shard] = st == SM_OK ? ticket + 1 : 0;
    } else {
        st = sm_store_put(o->store, key, data, o->opts.sync == SM_OUTPUT_SYNC_FSYNC, err);
    }
    if (st == SM_OK) {
        mark_dirs(o, shard);
        o->recs[shard] = rec;
        /* The journal needs no fsync: a lost or torn record only makes resume rewrite a shard. */
        struct sm_buf lb = {(uint8_t *)line, 0, sizeof(line)};
        st = sm_rec_append(&lb, key, &rec, err);
        if (st == SM_OK) {
            line[lb.len++] = '\n';
            st = sm_store_put(o->store, jkey, sm_buf_bytes(&lb), false, err);
            atomic_store_explicit(&o->journal_dirty, true, memory_order_relaxed);
        }
    }
    if (st != SM_OK) {
        sm_err_where(err, "%s/%s", o->root, key);
        return st;
    }
    atomic_fetch_add(&o->shards_written, 1);
    atomic_fetch_add(&o->bytes_written, data.len);
    atomic_fetch_add(&o->put_ns, sm_clock_ns() - t0);
    return SM_OK;
}

/* ---- durability and the marker ---- */

/* "c/i0/.../i(l-1)" for directory p of level l. */
static void dir_path(const struct sm_writer *w, unsigned l, uint64_t p, char *buf, size_t cap)
{
    uint64_t idx[SM_MAX_DIMS];
    for (unsigned d = l; d-- > 0;) {
        idx[d] = p % w->grid[d];
        p /= w->grid[d];
    }
    size_t n = (size_t)snprintf(buf, cap, "c");
    for (unsigned d = 0; d < l && n < cap; d++) {
        n += (size_t)snprintf(buf + n, cap - n, "/%" PRIu64, idx[d]);
    }
}

static sm_status flush(struct sm_output *o, struct sm_err *err)
{
    if (o->opts.sync == SM_OUTPUT_SYNC_SYNCFS) {
        if (o->store == NULL) {
            SM_FAIL(err, SM_E_INTERNAL, "flush of an output that did not begin");
        }
        /* 1. every staged shard's bytes durable, 2. renamed over their keys, 3. the directory
         * entries durable: a reader never sees a partial object, and the marker comes after. */
        SM_TRY(sm_store_sync(o->store, SM_STORE_SYNC_ALL, "", err));
        for (uint64_t i = 0; o->w != NULL && i < o->w->nshards; i++) {
            if (o->staged[i] != 0) {
                char key[SM_KEY_MAX];
                SM_TRY(sm_writer_shard_key(o->w, i, key, sizeof(key), err));
                const uint64_t ticket = o->staged[i] - 1;
                o->staged[i] = 0; /* a failed commit removed the staged object */
                SM_TRY(sm_store_commit(o->store, key, ticket, err));
            }
        }
        return sm_store_sync(o->store, SM_STORE_SYNC_ALL, "", err);
    }
    if (o->opts.sync != SM_OUTPUT_SYNC_FSYNC || o->w == NULL) {
        return SM_OK;
    }
    for (unsigned l = o->w->ndim; l-- > 0;) { /* deepest first, the root last */
        for (uint64_t p = 0; p < o->dir_base[l + 1] - o->dir_base[l]; p++) {
            if (!atomic_load_explicit(&o->dirs[o->dir_base[l] + p], memory_order_relaxed)) {
                continue;
            }
            char rel[PATH_CAP];
            dir_path(o->w, l, p, rel, sizeof(rel));
            SM_TRY(fsync_dir(o, rel, err));
        }
    }
    if (atomic_load(&o->journal_dirty)) {
        SM_TRY(fsync_dir(o, SM_JOURNAL_DIR, err));
    }
    return atomic_load(&o->root_dirty) ? fsync_dir(o, "", err) : SM_OK;
}

sm_status sm_output_flush(struct sm_output *o, struct sm_err *err)
{
    const uint64_t t0 = sm_clock_ns();
    const sm_status st = flush(o, err);
    atomic_fetch_add(&o->sync_ns, sm_clock_ns() - t0);
    if (st != SM_OK) {
        sm_err_where(err, "%s", o->root);
    }
    return st;
}

static sm_status finish(struct sm_output *o, struct sm_err *err)
{
    const struct sm_writer *w = o->w;
    if (w == NULL) {
        SM_FAIL(err, SM_E_INTERNAL, "finish of an output that did not begin");
    }
    struct sm_buf b = SM_BUF_INIT;
    sm_status st = SM_OK;
    uint64_t total = 0;
    for (uint64_t i = 0; st == SM_OK && i < w->nshards; i++) {
        if (!o->recs[i].set) { /* written by another rank, or kept by resume elsewhere */
            char key[SM_KEY_MAX], jkey[SM_KEY_MAX + 32];
            bool found = false;
            st = keys_of(o, i, key, jkey, err);
            if (st == SM_OK) {
                st = sm_wfs_read(o->rootfd, jkey, &b, &found, err);
            }
            if (st == SM_OK &&
                (!found || !sm_rec_parse_journal(sm_buf_bytes(&b), key, &o->recs[i]))) {
                st =
                    sm_err_set(err, SM_E_INTERNAL, __FILE__, __LINE__,
                               "shard %s has no record (never written): no completion marker", key);
            }
        }
        total += o->recs[i].size;
    }
    if (st == SM_OK) {
        st = sm_marker_build(w, o->recs, &b, err);
    }
    if (st == SM_OK) {
        st = put_doc(o, SM_MARKER_NAME, sm_buf_bytes(&b), err);
    }
    sm_buf_free(&b);
    if (st == SM_OK && syncing(o)) {
        st = fsync_dir(o, "", err);
    }
    if (st == SM_OK) {
        o->total_shards = w->nshards;
        o->total_bytes = total;
    }
    return st;
}

sm_status sm_output_finish(struct sm_output *o, struct sm_err *err)
{
    const uint64_t t0 = sm_clock_ns();
    const sm_status st = finish(o, err);
    atomic_fetch_add(&o->sync_ns, sm_clock_ns() - t0);
    if (st != SM_OK) {
        sm_err_where(err, "%s", o->root);
    }
    return st;
}
