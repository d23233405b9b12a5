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

enum out_state {
    OUT_ABSENT,    /* nothing at the path */
    OUT_EMPTY,     /* an empty directory */
    OUT_SHARDMILL, /* holds .shardmill/ or the marker */
    OUT_FOREIGN,   /* anything else */
};

#define PATH_CAP 4096

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
    const int fd = open_root(root);
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
static sm_status level_dirs(int fd, unsigned from, enum sm_wfs_walk mode, const atomic_int *stop,
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
                st = sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
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
static sm_status check_tree(int fd, const char *root, struct sm_err *err)
{
    struct sm_strv names = {NULL, 0, 0};
    SM_TRY(sm_wfs_list(fd, "", &names, err));
    sm_status st = SM_OK;
    for (size_t i = 0; i < names.n && st == SM_OK; i++) {
        struct stat sb;
        if (fstatat(fd, names.v[i], &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            st = SM_ERRNO(err, errno, names.v[i], "cannot stat");
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
    if (st == SM_OK) {
        st = level_dirs(fd, 0, SM_WFS_CHECK, NULL, err);
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
        return errno == ENOENT ? SM_OK : SM_ERRNO(err, errno, SM_MARKER_NAME, "cannot remove");
    }
    return syncing(o) ? fsync_dir(o, "", err) : SM_OK;
}

/* OVERWRITE (and a RESUME without zarr.json): the marker first, then shards, journal, zarr.json.
 * .shardmill/ (with the owner record begin wrote) stays until the marker of the new run: an
 * overwrite killed or failing half-way leaves a directory a later overwrite or resume still
 * recognises as shardmill's, and finishes. */
static sm_status clear(struct sm_output *o, struct sm_err *err)
{
    SM_TRY(drop_marker(o, err));
    SM_TRY(sm_wfs_walk_stop(o->rootfd, "c", true, SM_WFS_REMOVE, o->stop, err));
    if (unlinkat(o->rootfd, "c", AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return SM_ERRNO(err, errno, "c", "cannot remove directory");
    }
    SM_TRY(level_dirs(o->rootfd, 0, SM_WFS_REMOVE, o->stop, err));
    SM_TRY(sm_wfs_walk(o->rootfd, SM_JOURNAL_DIR, false, SM_WFS_REMOVE, err));
    return remove_root_files(o, false, err);
}

/* ---- the owner record and the lock ---- */

#define OWNER_KEY SM_PRIV_DIR "/owner"

/* The primary holds an exclusive flock(2) on the output directory from begin to close: a second
 * run on the same output (overwrite or resume) is refused before it deletes or writes anything,
 * naming the holder from .shardmill/owner (host, pid, start time). The kernel drops the lock
 * when the holder dies, so a killed run leaves no stale lock. */
static sm_status take_lock(struct sm_output *o, struct sm_err *err)
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
static sm_status put_owner(struct sm_output *o, struct sm_err *err)
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
    return sm_store_put(o->store, OWNER_KEY, sm_bytes_of(text, (size_t)n), syncing(o), err);
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
                        opts->exists == SM_OUTPUT_EXISTS_RESUME ? "resume"
                        : opts->exists == SM_OUTPUT_EXISTS_AUTO ? "write into"
                                                                : "overwrite");
        sm_err_where(err, "%s", root);
    } else if (st == SM_OK && state == OUT_SHARDMILL) {
        const int fd = open_root(root);
        if (fd < 0) {
            st = SM_ERRNO(err, errno, root, "cannot open the output");
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

/* ---- output.exists: auto ---- */

#define SM_PROVENANCE_KEY "shardmill" /* zarr.json attributes.shardmill: the provenance */

static bool first_diff(json_t *a, json_t *b, char *path, size_t cap);

/* A JSON document read under meta.h's number policy (every integer exact); NULL when it does not
 * parse, with the reason in *e. */
static json_t *load_doc(struct sm_bytes b, struct sm_err *e)
{
    json_t *j = NULL;
    sm_err_clear(e);
    (void)sm_json_load((const char *)b.ptr, b.len, SM_ZARR_JSON, &j, e);
    return j;
}

/* The attributes of a document: zarr.json's "attributes" object (whether or not the document
 * says zarr_format); a Zarr v2 .zattrs, which has none, is the attributes itself. */
static json_t *attrs_of(json_t *doc)
{
    json_t *a = json_object_get(doc, "attributes");
    return json_is_object(a) ? a : doc;
}

/* {"attributes": {"shardmill": {m: v}}} for every member m of `identity`, v taken from `prov`
 * (the existing provenance; a member it lacks stays out) or from identity itself. */
static json_t *identity_doc(json_t *identity, json_t *prov)
{
    json_t *sub = json_object();
    const char *key;
    json_t *v;
    json_object_foreach(identity, key, v)
    {
        json_t *have = prov != NULL ? json_object_get(prov, key) : v;
        if (have != NULL) {
            json_object_set(sub, key, have);
        }
    }
    return json_pack("{s:{s:o}}", "attributes", SM_PROVENANCE_KEY, sub);
}

bool sm_output_identity_same(struct sm_bytes have, const json_t *identity, char *what, size_t cap)
{
    struct sm_err e;
    json_t *doc = load_doc(have, &e);
    if (doc == NULL) { /* same_identity refuses it first: a parse failure is an error */
        snprintf(what, cap, "its bytes (not JSON)");
        return false;
    }
    /* compare like with like: this job's identity as text, read back the way the existing
     * document was read */
    char *text = sm_json_dumps(identity, JSON_COMPACT);
    json_t *want_id = text != NULL ? load_doc(sm_bytes_of(text, strlen(text)), &e) : NULL;
    sm_json_free_text(text);
    json_t *prov = json_object_get(attrs_of(doc), SM_PROVENANCE_KEY);
    json_t *none = json_object(); /* no provenance: every member of the identity differs */
    json_t *a =
        json_is_object(want_id) ? identity_doc(want_id, json_is_object(prov) ? prov : none) : NULL;
    json_t *b = json_is_object(want_id) ? identity_doc(want_id, NULL) : NULL;
    what[0] = '\0';
    const bool differ = a == NULL || b == NULL || first_diff(a, b, what, cap);
    json_decref(a);
    json_decref(b);
    json_decref(none);
    json_decref(want_id);
    json_decref(doc);
    if (differ && what[0] == '\0') {
        snprintf(what, cap, "its bytes");
    }
    return !differ;
}

/* SM_OK when the existing zarr.json `have` carries `identity` in attributes.shardmill, else
 * SM_E_USAGE naming the first member that differs. */
static sm_status same_identity(const struct sm_output *o, const char *name, struct sm_bytes have,
                               const json_t *identity, struct sm_err *err)
{
    json_t *doc = load_doc(have, err);
    if (doc == NULL) { /* a document that does not parse is an error, never "another job's" */
        sm_err_where(err, "%s/%s", o->root, name);
        return err->status;
    }
    json_decref(doc);
    char what[256];
    if (sm_output_identity_same(have, identity, what, sizeof(what))) {
        return SM_OK;
    }
    sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
               "output.exists: auto: another job's output: its %s differs from this "
               "job's in %s; use overwrite or another output.path",
               name, what);
    sm_err_where(err, "%s", o->root);
    return err->status;
}

/* The marker's verdict: COMPLETE when sm_output_verify finds nothing, else DAMAGED. */
static sm_status verdict(const struct sm_output *o, struct sm_output_decision *d,
                         struct sm_err *err)
{
    struct sm_verify_report rep;
    SM_TRY(sm_output_verify(o->root, &rep, err));
    d->found = rep.nproblems == 0 ? SM_OUTPUT_FOUND_COMPLETE : SM_OUTPUT_FOUND_DAMAGED;
    d->shards = rep.shards;
    d->bytes = rep.bytes;
    d->problems = rep.nproblems;
    if (rep.nproblems > 0) {
        snprintf(d->first_problem, sizeof(d->first_problem), "%s: %s", rep.problems[0].key,
                 rep.problems[0].what);
    }
    sm_verify_report_destroy(&rep);
    return SM_OK;
}

sm_status sm_output_decide(const struct sm_output *o, const json_t *identity,
                           struct sm_output_decision *d, struct sm_err *err)
{
    memset(d, 0, sizeof(*d));
    d->found = SM_OUTPUT_FOUND_NEW;
    if (o->opts.exists != SM_OUTPUT_EXISTS_AUTO || !json_is_object(identity)) {
        SM_FAIL(err, SM_E_INTERNAL,
                "sm_output_decide: an output opened with output.exists auto "
                "and an identity object");
    }
    if (o->state != OUT_SHARDMILL) { /* open refused a foreign one */
        return SM_OK;
    }
    const int fd = open_root(o->root);
    if (fd < 0) {
        return SM_ERRNO(err, errno, o->root, "cannot open the output");
    }
    struct sm_buf zj = SM_BUF_INIT;
    bool found = false, marked = false;
    const char *name = sm_wfs_root_doc(fd);
    sm_status st = sm_wfs_read(fd, name, &zj, &found, err);
    struct stat sb;
    if (st == SM_OK) {
        marked = fstatat(fd, SM_MARKER_NAME, &sb, AT_SYMLINK_NOFOLLOW) == 0;
    }
    close(fd);
    d->found = SM_OUTPUT_FOUND_UNFINISHED; /* no zarr.json: nothing to keep, resume clears it */
    if (st == SM_OK && found) {
        st = same_identity(o, name, sm_buf_bytes(&zj), identity, err);
    }
    if (st == SM_OK && found && marked) {
        st = verdict(o, d, err);
    }
    sm_buf_free(&zj);
    if (st != SM_OK) {
        sm_err_where(err, "%s", o->root);
    }
    return st;
}

void sm_output_settle(struct sm_output *o, enum sm_output_found found)
{
    if (o->opts.exists != SM_OUTPUT_EXISTS_AUTO) {
        return;
    }
    o->was_auto = true;
    if (found == SM_OUTPUT_FOUND_NEW) {
        o->opts.exists = SM_OUTPUT_EXISTS_ERROR;
    } else if (found != SM_OUTPUT_FOUND_COMPLETE) {
        o->opts.exists = SM_OUTPUT_EXISTS_RESUME;
    }
}

const char *sm_output_found_action(enum sm_output_found found)
{
    switch (found) {
    case SM_OUTPUT_FOUND_NEW:
        return "written";
    case SM_OUTPUT_FOUND_UNFINISHED:
        return "resumed";
    case SM_OUTPUT_FOUND_DAMAGED:
        return "repaired";
    case SM_OUTPUT_FOUND_COMPLETE:
        return "complete";
    }
    return "written";
}

uint64_t sm_output_track_bytes(uint64_t nshards)
{
    /* this run's records, a resume's previous ones and its merge, the records gathered on rank
     * 0, the marker's text (SM_MARKER_REC_MAX a record line) and the directory flags */
    const uint64_t per =
        3 * sizeof(struct sm_shard_rec) + SM_JREC_BYTES + SM_MARKER_REC_MAX + sizeof(atomic_uchar);
    return nshards > UINT64_MAX / per ? UINT64_MAX : nshards * per;
}

/* Directory flags and records for w's grid. */
static sm_status setup(struct sm_output *o, const struct sm_writer *w, struct sm_err *err)
{
    o->w = w;
    const uint64_t n = w->nshards;
    const unsigned nlev = w->nlevels > 0 ? w->nlevels : 1;
    o->dir_base = sm_calloc((size_t)nlev * (SM_MAX_DIMS + 1), sizeof(*o->dir_base));
    if (o->dir_base == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot track %" PRIu64 " shards", n);
    }
    uint64_t total = 0;
    for (unsigned k = 0; k < nlev; k++) { /* each level (array) its own c/ tree */
        const struct sm_writer *lw = w->nlevels > 0 ? w->lv[k] : w;
        uint64_t *base = o->dir_base + (size_t)k * (SM_MAX_DIMS + 1);
        uint64_t level = 1;
        for (unsigned l = 0; l < lw->ndim; l++) { /* n > 0: every grid extent is >= 1 */
            base[l] = total;
            total += lw->nshards == 0 ? 0 : level;
            level *= lw->nshards == 0 ? 1 : lw->grid[l];
        }
        base[lw->ndim] = total;
    }
    if (n > SIZE_MAX / sizeof(*o->recs)) {
        SM_FAIL(err, SM_E_NOMEM, "cannot track %" PRIu64 " shards", n);
    }
    o->recs = sm_calloc(n == 0 ? 1 : (size_t)n, sizeof(*o->recs));
    o->dirs = sm_calloc(total == 0 ? 1 : (size_t)total, sizeof(*o->dirs));
    if (o->recs == NULL || o->dirs == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot track %" PRIu64 " shards", n);
    }
    return SM_OK;
}

/* The file store at the root: every object of the output is staged and committed through it. */
static sm_status open_store(struct sm_output *o, struct sm_err *err)
{
    return o->store != NULL ? SM_OK : sm_store_file_open(o->root, &o->store, err);
}

/* Removes every journal file of the output but `keep` (a name inside the journal directory). */
static sm_status remove_journals_but(struct sm_output *o, const char *keep, struct sm_err *err)
{
    struct sm_strv names = {NULL, 0, 0};
    SM_TRY(sm_wfs_list(o->rootfd, SM_JOURNAL_DIR, &names, err));
    sm_status st = SM_OK;
    for (size_t i = 0; i < names.n && st == SM_OK; i++) {
        char rel[SM_KEY_MAX + 64];
        snprintf(rel, sizeof(rel), SM_JOURNAL_DIR "/%s", names.v[i]);
        if (strcmp(rel, keep) != 0 && sm_fs_unlink_beneath(o->rootfd, rel, 0) != 0 &&
            errno != ENOENT) {
            st = SM_ERRNO(err, errno, rel, "cannot remove");
        }
    }
    sm_strv_free(&names);
    return st;
}

/* RESUME: merges the records of a previous marker and of every journal left by previous runs into
 * one journal file, merged.jnl (which every rank of this run loads), durably,
 * removes the files it merged, then drops the marker. So journals never pile up over repeated
 * resumes; this reads one record per shard once. */
static sm_status compact_journals(struct sm_output *o, const struct sm_writer *w,
                                  struct sm_err *err)
{
    struct sm_buf doc = SM_BUF_INIT, jb = SM_BUF_INIT;
    bool found;
    sm_status st = sm_wfs_read(o->rootfd, SM_MARKER_NAME, &doc, &found, err);
    struct sm_shard_rec *recs = NULL;
    if (st == SM_OK) {
        recs = sm_calloc(w->nshards == 0 ? 1 : (size_t)w->nshards, sizeof(*recs));
        if (recs == NULL) {
            st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot read the shard records");
        }
    }
    if (st == SM_OK && found) {
        char why[160];
        struct sm_marker_head head;
        if (!sm_marker_parse(w, sm_buf_bytes(&doc), recs, &head, why, sizeof(why))) {
            memset(recs, 0, (size_t)w->nshards * sizeof(*recs)); /* unusable: trust the journal */
        }
    }
    if (st == SM_OK) {
        st = sm_journal_load(o->rootfd, o->token, w->nshards, recs, err);
    }
    for (uint64_t i = 0; st == SM_OK && i < w->nshards; i++) {
        if (recs[i].set) {
            st = sm_buf_reserve(&jb, jb.len + SM_JREC_BYTES, err);
            if (st == SM_OK) {
                sm_jrec_encode(jb.ptr + jb.len, i, &recs[i]);
                jb.len += SM_JREC_BYTES;
            }
        }
    }
    char rel[SM_KEY_MAX + 64];
    sm_journal_name(o->token, -1, rel, sizeof(rel));
    if (st == SM_OK && jb.len > 0) {
        /* durable before the marker goes: else a crash between the two loses every record */
        st = sm_store_put(o->store, rel, sm_buf_bytes(&jb), syncing(o), err);
    }
    if (st == SM_OK) {
        st = remove_journals_but(o, rel, err);
    }
    if (st == SM_OK && syncing(o)) {
        st = fsync_dir(o, SM_JOURNAL_DIR, err);
    }
    sm_free(recs);
    sm_buf_free(&doc);
    sm_buf_free(&jb);
    return st == SM_OK ? drop_marker(o, err) : st;
}

/* Removes the pending attributes ("member/key" words, write.h) from a zarr.json document (a Zarr
 * v2 .zattrs: "ome/key" is the top-level key, where OME-NGFF 0.4 keeps omero). */
static void drop_pending(json_t *doc, const char *pending)
{
    json_t *attrs = attrs_of(doc);
    for (const char *p = pending; attrs != NULL && *p != '\0';) {
        const size_t n = strcspn(p, " ");
        const char *slash = memchr(p, '/', n);
        if (slash != NULL) {
            char member[64], key[64];
            snprintf(member, sizeof(member), "%.*s", (int)(slash - p), p);
            snprintf(key, sizeof(key), "%.*s", (int)(p + n - slash - 1), slash + 1);
            json_t *m = json_object_get(attrs, member);
            if (json_is_object(m)) {
                json_object_del(m, key);
            } else if (attrs == doc && strcmp(member, "ome") == 0) {
                json_object_del(attrs, key); /* a Zarr v2 .zattrs (OME-NGFF 0.4): no "ome" */
            }
        }
        p += n + (p[n] == ' ');
    }
}

/* zarr.json `have` is the document `want`: byte for byte, or, with a pending attribute, equal as
 * JSON once that attribute is dropped from both. */
static bool same_zarr(const char *pending, struct sm_bytes have, struct sm_bytes want)
{
    if (have.len == want.len && memcmp(have.ptr, want.ptr, have.len) == 0) {
        return true;
    }
    if (pending == NULL) {
        return false;
    }
    struct sm_err e;
    json_t *a = load_doc(have, &e);
    json_t *b = load_doc(want, &e);
    bool eq = a != NULL && b != NULL;
    if (eq) {
        drop_pending(a, pending);
        drop_pending(b, pending);
        eq = json_equal(a, b) != 0;
    }
    json_decref(a);
    json_decref(b);
    return eq;
}

/* Appends to path (dotted) the first member where a and b differ; false if they are equal. */
static bool first_diff(json_t *a, json_t *b, char *path, size_t cap)
{
    if (json_equal(a, b)) {
        return false;
    }
    if (!json_is_object(a) || !json_is_object(b)) {
        return true; /* a differing value (or type): this is the member */
    }
    const char *key;
    json_t *v;
    const size_t at = strlen(path);
    json_object_foreach(a, key, v)
    {
        snprintf(path + at, cap - at, "%s%s", at == 0 ? "" : ".", key);
        json_t *w = json_object_get(b, key);
        if (w == NULL || first_diff(v, w, path, cap)) {
            return true;
        }
    }
    json_object_foreach(b, key, v)
    {
        if (json_object_get(a, key) == NULL) {
            snprintf(path + at, cap - at, "%s%s", at == 0 ? "" : ".", key);
            return true;
        }
    }
    path[at] = '\0';
    return true;
}

/* Names the first member of zarr.json where the existing document and this job's differ (the
 * pending member left out): "attributes.shardmill.input.metadata_sha256" says the input changed,
 * "attributes.shardmill.config_sha256" the configuration. */
static void zarr_diff(const char *pending, struct sm_bytes have, struct sm_bytes want, char *path,
                      size_t cap)
{
    struct sm_err e;
    json_t *a = load_doc(have, &e);
    snprintf(path, cap, "its bytes%s%.160s%s", a == NULL ? " (" : "", a == NULL ? e.what : "",
             a == NULL ? ")" : "");
    json_t *b = load_doc(want, &e);
    if (a != NULL && b != NULL) {
        if (pending != NULL) {
            drop_pending(a, pending);
            drop_pending(b, pending);
        }
        path[0] = '\0';
        if (!first_diff(a, b, path, cap) || path[0] == '\0') {
            snprintf(path, cap, "its bytes");
        }
    }
    json_decref(a);
    json_decref(b);
}

/* The policy the user chose, for messages: a settled AUTO resumes under its own name. */
static const char *policy_name(const struct sm_output *o)
{
    return o->was_auto ? "auto" : "resume";
}

/* RESUME (under the lock, zarr.json this job's): removes the entries named like the output's but
 * of no key of w's grid, which verify reports and a repair would otherwise keep for ever
 * (`c/0/0/7` past the grid, a directory where a shard belongs, a level directory past the
 * image's levels, c/ at an image's root). Names no output holds were refused by check_tree. */
static sm_status prune_grid(struct sm_output *o, const struct sm_writer *w, struct sm_err *err)
{
    uint64_t removed = 0;
    if (w->nlevels == 0) {
        SM_TRY(sm_wfs_prune(o->rootfd, "c", w, o->stop, &removed, err));
        return level_dirs(o->rootfd, 0, SM_WFS_REMOVE, o->stop, err); /* an array has none */
    }
    SM_TRY(sm_wfs_walk_stop(o->rootfd, "c", true, SM_WFS_REMOVE, o->stop, err));
    if (unlinkat(o->rootfd, "c", AT_REMOVEDIR) != 0 && errno != ENOENT) {
        return SM_ERRNO(err, errno, "c", "cannot remove directory");
    }
    for (unsigned k = 0; k < w->nlevels; k++) {
        char rel[32];
        sm_writer_tree(w, k, rel, sizeof(rel));
        SM_TRY(sm_wfs_prune(o->rootfd, rel, w->lv[k], o->stop, &removed, err));
    }
    return level_dirs(o->rootfd, w->nlevels, SM_WFS_REMOVE, o->stop, err);
}

/* .shardmill/journal, made again when missing (or not a directory): .shardmill/ is shardmill's
 * own bookkeeping, and a damaged marker's repair or an overwrite stopped half-way leaves it
 * without its journal directory. Called under the lock, after the owner record. */
static sm_status journal_dir(struct sm_output *o, struct sm_err *err)
{
    struct stat sb;
    if (fstatat(o->rootfd, SM_JOURNAL_DIR, &sb, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(sb.st_mode) &&
        sm_fs_unlink_beneath(o->rootfd, SM_JOURNAL_DIR, 0) != 0 && errno != ENOENT) {
        return SM_ERRNO(err, errno, SM_JOURNAL_DIR, "cannot remove");
    }
    return sm_fs_mkdirs(o->rootfd, SM_JOURNAL_DIR, err);
}

/* RESUME of an existing shardmill output. *keep_zarr tells zarr.json is already w's; missing[k]
 * that level k's zarr.json is missing (a run killed between the level documents): begin writes
 * it, the others are this job's byte for byte. */
static sm_status prepare_resume(struct sm_output *o, const struct sm_writer *w, bool *keep_zarr,
                                bool *missing, struct sm_err *err)
{
    struct sm_buf have = SM_BUF_INIT;
    bool found;
    sm_status st = sm_wfs_read(o->rootfd, sm_writer_doc_name(w), &have, &found, err);
    if (st == SM_OK && found && w->v2 != sm_wfs_is_v2(o->rootfd)) {
        found = false; /* a document of the other Zarr version's tree: nothing to keep */
    }
    if (st == SM_OK && !found) {
        st = put_owner(o, err);
        if (st == SM_OK) {
            st = clear(o, err); /* no zarr.json: nothing can be trusted */
        }
    } else if (st == SM_OK) {
        if (!same_zarr(w->spec.pending, sm_buf_bytes(&have), sm_buf_bytes(&w->text))) {
            char what[256];
            zarr_diff(w->spec.pending, sm_buf_bytes(&have), sm_buf_bytes(&w->text), what,
                      sizeof(what));
            st = sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                            "output.exists: %s: the existing %s differs from this "
                            "job's in %s (another configuration or input); use overwrite",
                            policy_name(o), sm_writer_doc_name(w), what);
        } else {
            *keep_zarr = true;
        }
        for (unsigned k = 0; st == SM_OK && k < w->nlevels; k++) { /* each level's too */
            char key[32];
            snprintf(key, sizeof(key), "%u/%s", k, sm_writer_doc_name(w->lv[k]));
            const struct sm_buf *want = &w->lv[k]->text;
            st = sm_wfs_read(o->rootfd, key, &have, &found, err);
            missing[k] = st == SM_OK && !found;
            if (st == SM_OK && found &&
                (have.len != want->len || memcmp(have.ptr, want->ptr, have.len) != 0)) {
                st = sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                                "output.exists: %s: the existing %s differs from this "
                                "job's (another configuration or input); use overwrite",
                                policy_name(o), key);
            }
        }
        if (st == SM_OK) {
            st = put_owner(o, err); /* checked: from here on the directory changes */
        }
        if (st == SM_OK) {
            st = journal_dir(o, err);
        }
        if (st == SM_OK) {
            st = compact_journals(o, w, err);
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
        st = level_dirs(o->rootfd, 0, SM_WFS_SWEEP_TMP, o->stop, err);
    }
    if (st == SM_OK && *keep_zarr) { /* zarr.json kept: what lies outside its grid goes */
        st = prune_grid(o, w, err);
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
    if (o->opts.exists == SM_OUTPUT_EXISTS_AUTO) { /* unsettled, or settled COMPLETE */
        SM_FAIL(err, SM_E_INTERNAL,
                "output.exists: auto: begin before sm_output_settle, or of "
                "a complete output");
    }
    SM_TRY(sm_fs_mkdirs(AT_FDCWD, o->root, err));
    o->token = sm_journal_token(); /* sm_output_set_run may replace it before any record */
    o->rootfd = open_root(o->root);
    if (o->rootfd < 0) {
        return SM_ERRNO(err, errno, o->root, "cannot open the output");
    }
    SM_TRY(open_store(o, err));
    SM_TRY(take_lock(o, err));
    /* The path may have changed since open: decide again, and check before changing anything. */
    int state;
    SM_TRY(classify(o->root, &state, err));
    if (state == OUT_FOREIGN || (o->opts.exists == SM_OUTPUT_EXISTS_ERROR && state != OUT_EMPTY)) {
        SM_FAIL(err, SM_E_USAGE, "output exists (set output.exists: overwrite or resume)");
    }
    bool keep_zarr = false;
    bool missing[SM_MAX_LEVELS] = {false};
    if (state == OUT_SHARDMILL) {
        SM_TRY(check_tree(o->rootfd, o->root, err));
    } else {
        SM_TRY(put_owner(o, err));
    }
    if (state == OUT_SHARDMILL) {
        if (o->opts.exists == SM_OUTPUT_EXISTS_OVERWRITE) {
            SM_TRY(put_owner(o, err)); /* shardmill's until the marker, whatever happens */
            SM_TRY(clear(o, err));
        } else {
            SM_TRY(prepare_resume(o, w, &keep_zarr, missing, err));
        }
    }
    SM_TRY(journal_dir(o, err));
    SM_TRY(setup(o, w, err));
    if (w->v2 && !keep_zarr) { /* a Zarr v2 group: .zgroup first, it says the tree is v2 */
        SM_TRY(put_doc(o, SM_ZGROUP, sm_bytes_of(SM_ZGROUP_TEXT, strlen(SM_ZGROUP_TEXT)), err));
    }
    if (!keep_zarr) {
        SM_TRY(put_doc(o, sm_writer_doc_name(w), sm_buf_bytes(&w->text), err));
    }
    for (unsigned k = 0; k < w->nlevels; k++) { /* an OME-Zarr image's levels */
        if (keep_zarr && !missing[k]) {
            continue;
        }
        char key[32];
        snprintf(key, sizeof(key), "%u/%s", k, sm_writer_doc_name(w->lv[k]));
        SM_TRY(put_doc(o, key, sm_buf_bytes(&w->lv[k]->text), err));
        if (syncing(o)) {
            snprintf(key, sizeof(key), "%u", k);
            SM_TRY(fsync_dir(o, key, err));
        }
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
        return SM_ERRNO(err, errno, o->root, "cannot open the output");
    }
    struct sm_buf have = SM_BUF_INIT;
    bool found;
    sm_status st = sm_wfs_read(o->rootfd, sm_writer_doc_name(w), &have, &found, err);
    if (st == SM_OK &&
        (!found || !same_zarr(w->spec.pending, sm_buf_bytes(&have), sm_buf_bytes(&w->text)))) {
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

sm_status sm_output_restate(struct sm_output *o, const struct sm_writer *w, bool primary,
                            struct sm_err *err)
{
    const struct sm_writer *was = o->w;
    if (was == NULL || was->nshards != w->nshards ||
        !same_zarr(was->spec.pending, sm_buf_bytes(&w->text), sm_buf_bytes(&was->text))) {
        SM_FAIL(err, SM_E_INTERNAL, "the restated zarr.json is not the begun array's");
    }
    if (primary) {
        const sm_status st = put_doc(o, sm_writer_doc_name(w), sm_buf_bytes(&w->text), err);
        if (st != SM_OK) {
            sm_err_where(err, "%s", o->root);
            return st;
        }
    }
    o->w = w;
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
        st = o->prev == NULL ? sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__,
                                          "cannot hold the records of %" PRIu64 " shards", n)
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
            st = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "cannot track %zu staged shards",
                            cap);
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

sm_status sm_output_put_shard(struct sm_output *o, uint64_t shard, struct sm_bytes data,
                              uint64_t values, struct sm_err *err)
{
    char key[SM_KEY_MAX];
    SM_TRY(key_of(o, shard, key, err));
    const uint64_t t0 = sm_clock_ns();
    const struct sm_shard_rec rec = {data.len, values, sm_crc32c(0, data.ptr, data.len), true};
    sm_status st;
    if (o->opts.sync == SM_OUTPUT_SYNC_SYNCFS) {
        /* staged under its temporary name; committed in sm_output_flush after one syncfs */
        uint64_t ticket = 0;
        st = sm_store_stage(o->store, key, data, false, &ticket, err);
        if (st == SM_OK) {
            st = remember_staged(o, shard, ticket, key, err);
        }
    } else {
        st = sm_store_put(o->store, key, data, o->opts.sync == SM_OUTPUT_SYNC_FSYNC, err);
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
                SM_TRY(fsync_dir(o, rel, err));
                if (l == 0 && o->w->nlevels > 0) { /* the level directory holds c/ */
                    snprintf(rel, sizeof(rel), "%u", k);
                    SM_TRY(fsync_dir(o, rel, err));
                }
            }
        }
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
                st =
                    sm_err_set(err, SM_E_INTERNAL, __FILE__, __LINE__,
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
        st = put_doc(o, SM_MARKER_NAME, sm_buf_bytes(&b), err);
    }
    sm_buf_free(&b);
    if (st == SM_OK && syncing(o)) {
        st = fsync_dir(o, "", err);
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
