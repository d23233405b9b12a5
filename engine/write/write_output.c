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
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/crc32c.h"
#include "shardmill/fs.h"
#include "shardmill/path.h"

/* ---- the path ---- */

static sm_status resolve(const char *path, const char *base, char **out, struct sm_err *err)
{
    static const struct sm_path_names names = {"output.path", "output", "directory"};
    return sm_path_resolve(path, base, &names, out, err);
}

/* ---- recognising an output ---- */

int sm_output_open_root(const char *root)
{
    return open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
}

/* Classifies the path; `fd` (if the path is a directory) is left open in *dfd. */
sm_status sm_output_classify(const char *root, int *state, struct sm_err *err)
{
    struct stat sb;
    if (lstat(root, &sb) != 0) {
        if (errno == ENOENT) {
            *state = OUT_ABSENT;
            return SM_OK;
        }
        return SM_ERRNO(err, errno, root, "cannot stat the output");
    }
    if (S_ISLNK(sb.st_mode)) {
        SM_FAIL_AT(err, SM_E_USAGE, root,
                   "the output path is a symbolic link (give the directory itself)");
    }
    if (!S_ISDIR(sb.st_mode)) {
        *state = OUT_FOREIGN;
        return SM_OK;
    }
    const int fd = sm_output_open_root(root);
    if (fd < 0) {
        return SM_ERRNO(err, errno, root, "cannot open the output");
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

/* name is `doc` or one of its temporary names ("<doc>.tmp.*"). */
static bool doc_or_tmp(const char *name, const char *doc)
{
    const size_t n = strlen(doc);
    return strncmp(name, doc, n) == 0 &&
           (name[n] == '\0' || strncmp(name + n, ".tmp.", strlen(".tmp.")) == 0);
}

static bool root_name_ok(const char *name, const struct stat *sb)
{
    if (S_ISDIR(sb->st_mode)) { /* a decimal name: a level of an OME-Zarr image */
        return strcmp(name, "c") == 0 || strcmp(name, SM_PRIV_DIR) == 0 ||
               sm_wfs_decimal(name, NULL);
    }
    if (!S_ISREG(sb->st_mode)) {
        return false;
    }
    return doc_or_tmp(name, SM_ZARR_JSON) || doc_or_tmp(name, SM_MARKER_NAME) ||
           doc_or_tmp(name, SM_ZGROUP) || doc_or_tmp(name, SM_ZATTRS);
}

/* The level directories "k" (k >= from) of an OME-Zarr image output (SPEC §2): each holds
 * zarr.json (or its temporary names) and the c/ tree; a Zarr v2 image's (.zgroup at the root)
 * .zarray and the chunk tree itself. CHECK fails on anything else, SWEEP_TMP removes temporary
 * files, REMOVE removes the level directories. */
sm_status sm_output_level_dirs(int fd, unsigned from, enum sm_wfs_walk mode, const atomic_int *stop,
                               struct sm_err *err)
{
    const bool v2 = sm_wfs_is_v2(fd);
    const char *ldoc = v2 ? SM_ZARRAY : SM_ZARR_JSON;
    struct sm_strv names = {NULL, 0, 0};
    SM_TRY(sm_wfs_list(fd, "", &names, err));
    sm_status st = SM_OK;
    for (size_t i = 0; i < names.n && st == SM_OK; i++) {
        struct stat sb;
        const char *lv = names.v[i];
        uint64_t k;
        if (!sm_wfs_decimal(lv, &k) || k < from || fstatat(fd, lv, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISDIR(sb.st_mode)) {
            continue;
        }
        char rel[PATH_CAP];
        snprintf(rel, sizeof(rel), v2 ? "%s" : "%s/c", lv);
        st = v2 ? sm_wfs_walk_doc(fd, rel, SM_ZARRAY, mode, stop, err)
                : sm_wfs_walk_stop(fd, rel, true, mode, stop, err);
        if (st == SM_OK && !v2 && mode == SM_WFS_REMOVE &&
            sm_fs_unlink_beneath(fd, rel, AT_REMOVEDIR) != 0 && errno != ENOENT) {
            st = SM_ERRNO(err, errno, rel, "cannot remove directory");
        }
        struct sm_strv inner = {NULL, 0, 0};
        if (st == SM_OK) {
            st = sm_wfs_list(fd, lv, &inner, err);
        }
        for (size_t j = 0; j < inner.n && st == SM_OK; j++) {
            const char *n = inner.v[j];
            snprintf(rel, sizeof(rel), "%s/%s", lv, n);
            const bool doc = strcmp(n, ldoc) == 0;
            const bool tmp = !doc && doc_or_tmp(n, ldoc);
            /* v2: the chunk tree lies beside .zarray (the walk above checked it) */
            const bool chunks =
                v2 ? sm_wfs_chunk_name(n, true, true) != SM_WFS_NAME_FOREIGN : strcmp(n, "c") == 0;
            if (mode == SM_WFS_CHECK && !tmp && !doc && !chunks) {
                st = SM_ERR(err, SM_E_USAGE,
                            "not a shardmill output: unexpected entry '%s' (refusing to touch "
                            "the directory)",
                            rel);
            } else if (((mode == SM_WFS_REMOVE && (tmp || doc)) ||
                        (mode == SM_WFS_SWEEP_TMP && tmp)) &&
                       sm_fs_unlink_beneath(fd, rel, 0) != 0 && errno != ENOENT) {
                st = SM_ERRNO(err, errno, rel, "cannot remove");
            }
        }
        sm_strv_free(&inner);
        if (st == SM_OK && mode == SM_WFS_REMOVE && unlinkat(fd, lv, AT_REMOVEDIR) != 0 &&
            errno != ENOENT) {
            st = SM_ERRNO(err, errno, lv, "cannot remove directory");
        }
    }
    sm_strv_free(&names);
    return st;
}

/* Fails (SM_E_USAGE) on any entry a shardmill output cannot contain; changes nothing. */
sm_status sm_output_check_tree(int fd, const char *root, struct sm_err *err)
{
    struct sm_strv names = {NULL, 0, 0};
    SM_TRY(sm_wfs_list(fd, "", &names, err));
    sm_status st = SM_OK;
    for (size_t i = 0; i < names.n && st == SM_OK; i++) {
        struct stat sb;
        if (fstatat(fd, names.v[i], &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            st = SM_ERRNO(err, errno, names.v[i], "cannot stat");
        } else if (!root_name_ok(names.v[i], &sb)) {
            st = SM_ERR(err, SM_E_USAGE,
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
    if (st == SM_OK) {
        st = sm_output_level_dirs(fd, 0, SM_WFS_CHECK, NULL, err);
    }
    if (st != SM_OK) {
        sm_err_where(err, "%s", root);
    }
    return st;
}

/* Removes the files at the root whose names satisfy `pick`. */
sm_status sm_output_remove_root_files(struct sm_output *o, bool tmp_only, struct sm_err *err)
{
    struct sm_strv names = {NULL, 0, 0};
    SM_TRY(sm_wfs_list(o->rootfd, "", &names, err));
    sm_status st = SM_OK;
    for (size_t i = 0; i < names.n && st == SM_OK; i++) {
        const char *n = names.v[i];
        const bool tmp = sm_fs_is_tmp(n);
        const bool pick =
            tmp || (!tmp_only && (strcmp(n, SM_ZARR_JSON) == 0 || strcmp(n, SM_MARKER_NAME) == 0 ||
                                  strcmp(n, SM_ZGROUP) == 0 || strcmp(n, SM_ZATTRS) == 0));
        if (pick && unlinkat(o->rootfd, n, 0) != 0 && errno != ENOENT) {
            st = SM_ERRNO(err, errno, n, "cannot remove");
        }
    }
    sm_strv_free(&names);
    return st;
}

bool sm_output_syncing(const struct sm_output *o)
{
    return o->opts.sync != SM_OUTPUT_SYNC_NONE;
}

sm_status sm_output_fsync_dir(struct sm_output *o, const char *rel, struct sm_err *err)
{
    return sm_store_sync(o->store, SM_STORE_SYNC_DIR, rel, err);
}

/* Removes the marker, durably, before anything of a finished output changes. */
sm_status sm_output_drop_marker(struct sm_output *o, struct sm_err *err)
{
    if (unlinkat(o->rootfd, SM_MARKER_NAME, 0) != 0) {
        return errno == ENOENT ? SM_OK : SM_ERRNO(err, errno, SM_MARKER_NAME, "cannot remove");
    }
    return sm_output_syncing(o) ? sm_output_fsync_dir(o, "", err) : SM_OK;
}

/* OVERWRITE (and a RESUME without zarr.json): the marker first, then shards, journal, zarr.json.
 * .shardmill/ (with the owner record begin wrote) stays until the marker of the new run: an
 * overwrite killed or failing half-way leaves a directory a later overwrite or resume still
 * recognises as shardmill's, and finishes. */
sm_status sm_output_clear(struct sm_output *o, struct sm_err *err)
{
    SM_TRY(sm_output_drop_marker(o, err));
    SM_TRY(sm_wfs_walk_stop(o->rootfd, "c", true, SM_WFS_REMOVE, o->stop, err));
    if (unlinkat(o->rootfd, "c", AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return SM_ERRNO(err, errno, "c", "cannot remove directory");
    }
    SM_TRY(sm_output_level_dirs(o->rootfd, 0, SM_WFS_REMOVE, o->stop, err));
    SM_TRY(sm_wfs_walk(o->rootfd, SM_JOURNAL_DIR, false, SM_WFS_REMOVE, err));
    return sm_output_remove_root_files(o, false, err);
}

/* ---- the owner record and the lock ---- */

#define OWNER_KEY SM_PRIV_DIR "/owner"

/* The primary holds an exclusive flock(2) on the output directory from begin to close: a second
 * run on the same output (overwrite or resume) is refused before it deletes or writes anything,
 * naming the holder from .shardmill/owner (host, pid, start time). The kernel drops the lock
 * when the holder dies, so a killed run leaves no stale lock. */
sm_status sm_output_take_lock(struct sm_output *o, struct sm_err *err)
{
    if (flock(o->rootfd, LOCK_EX | LOCK_NB) == 0) {
        return SM_OK;
    }
    if (errno == EBADF || errno == ENOLCK || errno == EOPNOTSUPP || errno == ENOSYS ||
        errno == EINVAL) {
        /* a file system without flock on directories (NFS emulates it with byte-range locks,
         * which need a writable file; Lustre without -o flock): no lock, the owner record
         * still names the run */
        return SM_OK;
    }
    if (errno != EWOULDBLOCK) {
        return SM_ERRNO(err, errno, o->root, "cannot lock the output");
    }
    struct sm_buf b = SM_BUF_INIT;
    bool found = false;
    struct sm_err ignored;
    sm_err_clear(&ignored);
    (void)sm_wfs_read(o->rootfd, OWNER_KEY, &b, &found, &ignored);
    char holder[160] = "another process";
    if (found && b.len > 0) {
        size_t n = 0;
        for (size_t i = 0; i < b.len && n + 1 < sizeof(holder); i++) {
            const char c = (char)b.ptr[i];
            holder[n++] = c >= ' ' && c <= '~' ? c : ' ';
        }
        holder[n] = '\0';
        while (n > 0 && holder[n - 1] == ' ') {
            holder[--n] = '\0';
        }
    }
    sm_buf_free(&b);
    SM_FAIL(err, SM_E_USAGE,
            "the output is in use by another shardmill run (%s); wait for it or stop it first",
            holder);
}

/* Writes .shardmill/owner: who holds the output now. Written before anything is deleted. */
sm_status sm_output_put_owner(struct sm_output *o, struct sm_err *err)
{
    char host[128] = "?";
    if (gethostname(host, sizeof(host)) != 0) {
        snprintf(host, sizeof(host), "?");
    }
    host[sizeof(host) - 1] = '\0';
    char when[32] = "?"; /* ISO 8601 UTC, for the message that names the holder */
    const time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm) != NULL) {
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    char text[256];
    const int n =
        snprintf(text, sizeof(text), "host %s pid %ld started %s\n", host, (long)getpid(), when);
    SM_TRY(sm_fs_mkdirs(o->rootfd, SM_PRIV_DIR, err));
    return sm_store_put(o->store, OWNER_KEY, sm_bytes_of(text, (size_t)n), sm_output_syncing(o),
                        err);
}

/* ---- lifecycle ---- */

sm_status sm_output_open(const char *path, const struct sm_output_opts *opts,
                         struct sm_output **out, struct sm_err *err)
{
    *out = NULL;
    char *root;
    SM_TRY(resolve(path, opts->base, &root, err));
    int state = OUT_ABSENT;
    sm_status st = sm_output_classify(root, &state, err);
    if (st == SM_OK && opts->exists == SM_OUTPUT_EXISTS_ERROR && state != OUT_ABSENT &&
        state != OUT_EMPTY) {
        st = SM_ERR_AT(err, SM_E_USAGE, root,
                       "output exists (set output.exists: overwrite or resume)");
    } else if (st == SM_OK && state == OUT_FOREIGN) {
        st = SM_ERR_AT(err, SM_E_USAGE, root,
                       "not a shardmill output (no %s/ or %s): refusing to %s it", SM_PRIV_DIR,
                       SM_MARKER_NAME,
                       opts->exists == SM_OUTPUT_EXISTS_RESUME ? "resume"
                       : opts->exists == SM_OUTPUT_EXISTS_AUTO ? "write into"
                                                               : "overwrite");
    } else if (st == SM_OK && state == OUT_SHARDMILL) {
        const int fd = sm_output_open_root(root);
        if (fd < 0) {
            st = SM_ERRNO(err, errno, root, "cannot open the output");
        } else {
            st = sm_output_check_tree(fd, root, err);
            close(fd);
        }
    }
    struct sm_output *o = st == SM_OK ? sm_calloc(1, sizeof(*o)) : NULL;
    if (st == SM_OK && o == NULL) {
        st = SM_ERR(err, SM_E_NOMEM, "cannot allocate an output");
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
    o->jfd = -1;
    pthread_mutex_init(&o->jmu, NULL);
    pthread_mutex_init(&o->smu, NULL);
    o->jbuf = sm_malloc((size_t)SM_JOURNAL_BATCH * SM_JREC_BYTES);
    if (o->jbuf == NULL) {
        sm_output_close(o);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate an output");
    }
    *out = o;
    return SM_OK;
}

void sm_output_close(struct sm_output *o)
{
    if (o == NULL) {
        return;
    }
    for (size_t i = 0; o->w != NULL && i < o->nstaged; i++) {
        char key[SM_KEY_MAX];
        struct sm_err ignored;
        sm_err_clear(&ignored);
        if (sm_writer_shard_key(o->w, o->staged[i].shard, key, sizeof(key), &ignored) == SM_OK) {
            sm_store_abort(o->store, key, o->staged[i].ticket); /* never committed: a failed run */
        }
    }
    if (o->jfd >= 0 || (o->jlen > 0 && o->rootfd >= 0)) {
        struct sm_err ignored;
        sm_err_clear(&ignored);
        (void)sm_journal_flush(o, &ignored); /* a failed run: keep what resume can use */
    }
    if (o->jfd >= 0) {
        close(o->jfd);
    }
    if (o->rootfd >= 0) {
        close(o->rootfd);
    }
    pthread_mutex_destroy(&o->jmu);
    pthread_mutex_destroy(&o->smu);
    sm_free(o->jbuf);
    sm_free(o->prev);
    sm_store_close(o->store);
    sm_free(o->recs);
    sm_free(o->staged);
    sm_free(o->dirs);
    sm_free(o->dir_base);
    sm_free(o->root);
    sm_free(o);
}

void sm_output_set_stop(struct sm_output *o, const atomic_int *stop)
{
    o->stop = stop;
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
    out->shards_changed = atomic_load(&o->shards_changed);
    out->fsyncs = o->store != NULL ? sm_store_fsyncs(o->store) : 0;
    out->put_ns = atomic_load(&o->put_ns);
    out->sync_ns = atomic_load(&o->sync_ns);
    out->total_shards = o->total_shards;
    out->total_bytes = o->total_bytes;
}

/* zarr.json and the marker are fsynced in both durable modes: a crash during a SYNCFS run must
 * leave a zarr.json that resume can compare. */
sm_status sm_output_put_doc(struct sm_output *o, const char *key, struct sm_bytes data,
                            struct sm_err *err)
{
    return sm_store_put(o->store, key, data, sm_output_syncing(o), err);
}

/* ---- shards ---- */

static sm_status key_of(const struct sm_output *o, uint64_t shard, char *key, struct sm_err *err)
{
    if (o->w == NULL || shard >= o->w->nshards) {
        SM_FAIL(err, SM_E_INTERNAL, "shard %" PRIu64 " of an output that did not begin", shard);
    }
    return sm_writer_shard_key(o->w, shard, key, SM_KEY_MAX, err);
}

/* RESUME: the records of the previous runs, loaded once per process at its first check. */
static sm_status load_prev(struct sm_output *o, struct sm_err *err)
{
    pthread_mutex_lock(&o->jmu);
    sm_status st = SM_OK;
    if (!o->prev_loaded) {
        const uint64_t n = o->w->nshards;
        o->prev = sm_calloc(n == 0 ? 1 : (size_t)n, sizeof(*o->prev));
        st = o->prev == NULL
                 ? SM_ERR(err, SM_E_NOMEM, "cannot hold the records of %" PRIu64 " shards", n)
                 : sm_journal_load(o->rootfd, o->token, n, o->prev, err);
        o->prev_loaded = st == SM_OK;
    }
    pthread_mutex_unlock(&o->jmu);
    return st;
}

sm_status sm_output_shard_needed(struct sm_output *o, uint64_t shard, bool *need, uint64_t *values,
                                 struct sm_err *err)
{
    *need = true;
    *values = 0;
    if (o->opts.exists != SM_OUTPUT_EXISTS_RESUME) {
        return SM_OK;
    }
    char key[SM_KEY_MAX];
    SM_TRY(key_of(o, shard, key, err));
    SM_TRY(load_prev(o, err));
    /* A shard under its final name appeared by rename, whole; its bytes must match its record
     * (size and CRC32C: damage and a swap with another key are caught). Without a record (lost
     * with its batch) nothing ties the bytes to this key: rewritten. */
    const struct sm_shard_rec rec = o->prev[shard];
    struct stat sb;
    if (!rec.set || fstatat(o->rootfd, key, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != rec.size) {
        return SM_OK;
    }
    struct sm_buf b = SM_BUF_INIT;
    bool found;
    sm_status st = sm_wfs_read(o->rootfd, key, &b, &found, err);
    if (st == SM_OK && found && b.len == rec.size && sm_crc32c(0, b.ptr, b.len) == rec.crc32c) {
        *need = false;
        *values = rec.values;
    }
    sm_buf_free(&b);
    if (st != SM_OK) {
        sm_err_where(err, "%s/%s", o->root, key);
    }
    return st;
}

void sm_output_shard_kept(struct sm_output *o, uint64_t shard, bool kept)
{
    if (kept) {
        o->recs[shard] = o->prev[shard];
        atomic_fetch_add(&o->shards_kept, 1);
    } else {
        atomic_fetch_add(&o->shards_changed, 1);
    }
}

/* Flags the directories that receive an entry when `shard` is created. */
static void mark_dirs(struct sm_output *o, uint64_t shard)
{
    uint64_t idx[SM_MAX_DIMS];
    unsigned k;
    const struct sm_writer *lw = sm_writer_locate(o->w, shard, &k, NULL);
    const uint64_t *base = o->dir_base + (size_t)k * (SM_MAX_DIMS + 1);
    sm_writer_shard_coords(o->w, shard, idx);
    uint64_t p = 0;
    for (unsigned l = 0; l < lw->ndim; l++) {
        atomic_store_explicit(&o->dirs[base[l] + p], 1, memory_order_relaxed);
        p = p * lw->grid[l] + idx[l];
    }
    atomic_store_explicit(&o->root_dirty, true, memory_order_relaxed);
}

/* SYNCFS: notes a staged shard for the commit in flush; on failure the staged object goes. */
static sm_status remember_staged(struct sm_output *o, uint64_t shard, uint64_t ticket,
                                 const char *key, struct sm_err *err)
{
    pthread_mutex_lock(&o->smu);
    sm_status st = SM_OK;
    if (o->nstaged == o->staged_cap) {
        const size_t cap = o->staged_cap == 0 ? 256 : o->staged_cap * 2;
        struct sm_staged *v = sm_realloc(o->staged, cap * sizeof(*v));
        if (v == NULL) {
            st = SM_ERR(err, SM_E_NOMEM, "cannot track %zu staged shards", cap);
        } else {
            o->staged = v;
            o->staged_cap = cap;
        }
    }
    if (st == SM_OK) {
        o->staged[o->nstaged++] = (struct sm_staged){shard, ticket};
    }
    pthread_mutex_unlock(&o->smu);
    if (st != SM_OK) {
        sm_store_abort(o->store, key, ticket);
    }
    return st;
}

void sm_output_set_read_back(struct sm_output *o, unsigned first, unsigned last)
{
    for (unsigned k = first; k <= last && k < 64; k++) {
        o->read_back |= (uint64_t)1 << k;
    }
}

void sm_output_set_size(struct sm_output *o, uint64_t value_bytes)
{
    o->large = sm_fs_beyond_cache(value_bytes); /* once per run, not once per shard */
}

/* A shard goes past the page cache (output.direct_io: always, or auto for an output of half the
 * memory or more, which the page cache could not keep anyway) unless this run reads its level
 * back. */
static unsigned direct_flag(const struct sm_output *o, uint64_t shard)
{
    const bool on = o->opts.direct == SM_OUTPUT_DIRECT_ALWAYS ||
                    (o->opts.direct == SM_OUTPUT_DIRECT_AUTO && o->large);
    unsigned level = 0;
    uint64_t local;
    (void)sm_writer_locate(o->w, shard, &level, &local);
    const bool back = level < 64 && (o->read_back >> level & 1) != 0;
    return on && !back ? SM_STAGE_DIRECT : 0;
}

sm_status sm_output_put_shard(struct sm_output *o, uint64_t shard, struct sm_bytes data,
                              uint64_t values, struct sm_err *err)
{
    char key[SM_KEY_MAX];
    SM_TRY(key_of(o, shard, key, err));
    const uint64_t t0 = sm_clock_ns();
    const struct sm_shard_rec rec = {data.len, values, sm_crc32c(0, data.ptr, data.len), true};
    const unsigned direct = direct_flag(o, shard);
    sm_status st;
    if (o->opts.sync == SM_OUTPUT_SYNC_SYNCFS) {
        /* staged under its temporary name; committed in sm_output_flush after one syncfs */
        uint64_t ticket = 0;
        st = sm_store_stage(o->store, key, data, direct, &ticket, err);
        if (st == SM_OK) {
            st = remember_staged(o, shard, ticket, key, err);
        }
    } else {
        const bool sync = o->opts.sync == SM_OUTPUT_SYNC_FSYNC;
        st = sm_store_put(o->store, key, data, direct | (sync ? SM_STAGE_SYNC : 0), err);
    }
    if (st == SM_OK) {
        mark_dirs(o, shard);
        o->recs[shard] = rec;
        /* The journal needs no fsync: a lost or torn record only makes resume rewrite the
         * shard. */
        st = sm_journal_append(o, shard, &rec, err);
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

/* "[prefix]c/i0/.../i(l-1)" for directory p of depth l of array w. */
static void dir_path(const struct sm_writer *w, const char *prefix, unsigned l, uint64_t p,
                     char *buf, size_t cap)
{
    uint64_t idx[SM_MAX_DIMS];
    for (unsigned d = l; d-- > 0;) {
        idx[d] = p % w->grid[d];
        p /= w->grid[d];
    }
    size_t n = w->v2 ? (size_t)snprintf(buf, cap, "%.*s", (int)strlen(prefix) - 1, prefix)
                     : (size_t)snprintf(buf, cap, "%sc", prefix); /* v2: "k", the level itself */
    for (unsigned d = 0; d < l && n < cap; d++) {
        n += (size_t)snprintf(buf + n, cap - n, "/%" PRIu64, idx[d]);
    }
}

static sm_status flush(struct sm_output *o, struct sm_err *err)
{
    if (o->w != NULL) {
        SM_TRY(sm_journal_flush(o, err));
    }
    if (o->opts.sync == SM_OUTPUT_SYNC_SYNCFS) {
        if (o->store == NULL) {
            SM_FAIL(err, SM_E_INTERNAL, "flush of an output that did not begin");
        }
        /* 1. every staged shard's bytes durable, 2. renamed over their keys, 3. the directory
         * entries durable: a reader never sees a partial object, and the marker comes after. */
        SM_TRY(sm_store_sync(o->store, SM_STORE_SYNC_ALL, "", err));
        /* only the shards this process staged (not a pass over the whole grid), in put order */
        size_t i = 0;
        sm_status st = SM_OK;
        for (; o->w != NULL && i < o->nstaged && st == SM_OK; i++) {
            char key[SM_KEY_MAX];
            st = sm_writer_shard_key(o->w, o->staged[i].shard, key, sizeof(key), err);
            if (st == SM_OK) { /* a failed commit removed the staged object */
                st = sm_store_commit(o->store, key, o->staged[i].ticket, err);
            }
        }
        if (i > 0) { /* the committed ones (and a failed one) are no longer staged */
            memmove(o->staged, o->staged + i, (o->nstaged - i) * sizeof(*o->staged));
            o->nstaged -= i;
        }
        SM_TRY(st);
        return sm_store_sync(o->store, SM_STORE_SYNC_ALL, "", err);
    }
    if (o->opts.sync != SM_OUTPUT_SYNC_FSYNC || o->w == NULL) {
        return SM_OK;
    }
    const unsigned nlev = o->w->nlevels > 0 ? o->w->nlevels : 1;
    for (unsigned k = 0; k < nlev; k++) {
        const struct sm_writer *lw = o->w->nlevels > 0 ? o->w->lv[k] : o->w;
        const uint64_t *base = o->dir_base + (size_t)k * (SM_MAX_DIMS + 1);
        char prefix[16] = "";
        if (o->w->nlevels > 0) {
            snprintf(prefix, sizeof(prefix), "%u/", k);
        }
        for (unsigned l = lw->ndim; l-- > 0;) { /* deepest first, the root last */
            for (uint64_t p = 0; p < base[l + 1] - base[l]; p++) {
                if (!atomic_load_explicit(&o->dirs[base[l] + p], memory_order_relaxed)) {
                    continue;
                }
                char rel[PATH_CAP];
                dir_path(lw, prefix, l, p, rel, sizeof(rel));
                SM_TRY(sm_output_fsync_dir(o, rel, err));
                if (l == 0 && o->w->nlevels > 0) { /* the level directory holds c/ */
                    snprintf(rel, sizeof(rel), "%u", k);
                    SM_TRY(sm_output_fsync_dir(o, rel, err));
                }
            }
        }
    }
    return atomic_load(&o->root_dirty) ? sm_output_fsync_dir(o, "", err) : SM_OK;
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

/* Removes the journals (this run's and any a crashed run left) once the marker is durable: a
 * completed output holds zarr.json, the shards and the marker only. */
static sm_status drop_journals(struct sm_output *o, struct sm_err *err)
{
    pthread_mutex_lock(&o->jmu);
    if (o->jfd >= 0) {
        close(o->jfd);
        o->jfd = -1;
    }
    o->jlen = 0;
    pthread_mutex_unlock(&o->jmu);
    SM_TRY(sm_wfs_walk(o->rootfd, SM_PRIV_DIR, false, SM_WFS_REMOVE, err));
    if (unlinkat(o->rootfd, SM_PRIV_DIR, AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return SM_ERRNO(err, errno, SM_PRIV_DIR, "cannot remove directory");
    }
    return SM_OK;
}

static sm_status finish(struct sm_output *o, struct sm_err *err)
{
    const struct sm_writer *w = o->w;
    if (w == NULL) {
        SM_FAIL(err, SM_E_INTERNAL, "finish of an output that did not begin");
    }
    sm_status st = SM_OK;
    uint64_t total = 0;
    for (uint64_t i = 0; st == SM_OK && i < w->nshards; i++) {
        if (!o->recs[i].set) { /* neither written here nor adopted from another rank */
            char key[SM_KEY_MAX];
            st = key_of(o, i, key, err);
            if (st == SM_OK) {
                st = SM_ERR(err, SM_E_INTERNAL,
                            "shard %s has no record (never written): no completion marker", key);
            }
        }
        total += o->recs[i].size;
    }
    struct sm_buf b = SM_BUF_INIT;
    if (st == SM_OK) { /* no marker over a tree holding a link planted during the run */
        st = sm_wfs_refuse_links(o->rootfd, err);
    }
    if (st == SM_OK) {
        st = sm_marker_build(w, o->recs, &b, err);
    }
    if (st == SM_OK) {
        st = sm_output_put_doc(o, SM_MARKER_NAME, sm_buf_bytes(&b), err);
    }
    sm_buf_free(&b);
    if (st == SM_OK && sm_output_syncing(o)) {
        st = sm_output_fsync_dir(o, "", err);
    }
    if (st == SM_OK) {
        st = drop_journals(o, err);
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

/* ---- the run and its records ---- */

uint64_t sm_output_run_token(const struct sm_output *o)
{
    return o->token;
}

void sm_output_set_run(struct sm_output *o, uint64_t token, int rank)
{
    pthread_mutex_lock(&o->jmu);
    if (o->jfd < 0) { /* no record appended yet */
        o->token = token == 0 ? sm_journal_token() : token;
        o->rank = rank < 0 ? 0 : rank;
    }
    pthread_mutex_unlock(&o->jmu);
}

sm_status sm_output_records_export(const struct sm_output *o, struct sm_buf *out,
                                   struct sm_err *err)
{
    out->len = 0;
    for (uint64_t i = 0; o->w != NULL && i < o->w->nshards; i++) {
        if (o->recs[i].set) {
            SM_TRY(sm_buf_reserve(out, out->len + SM_JREC_BYTES, err));
            sm_jrec_encode(out->ptr + out->len, i, &o->recs[i]);
            out->len += SM_JREC_BYTES;
        }
    }
    return SM_OK;
}

sm_status sm_output_records_adopt(struct sm_output *o, struct sm_bytes recs, struct sm_err *err)
{
    if (o->w == NULL || recs.len % SM_JREC_BYTES != 0) {
        SM_FAIL(err, SM_E_INTERNAL, "gathered shard records: %zu bytes, not whole records",
                recs.len);
    }
    for (size_t off = 0; off < recs.len; off += SM_JREC_BYTES) {
        uint64_t shard;
        struct sm_shard_rec r;
        if (!sm_jrec_decode(recs.ptr + off, o->w->nshards, &shard, &r)) {
            SM_FAIL(err, SM_E_INTERNAL, "gathered shard record %zu is corrupt",
                    off / SM_JREC_BYTES);
        }
        o->recs[shard] = r;
    }
    return SM_OK;
}
