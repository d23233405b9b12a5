/* Beginning an output (SPEC §6, write.h): the directory flags and shard records of a writer's grid,
 * the policy's preparation (error, overwrite, resume: zarr.json compared, the journals compacted),
 * zarr.json put, the join of the other ranks and the restatement of zarr.json after the write. */
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
            st = SM_ERR(err, SM_E_NOMEM, "cannot read the shard records");
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
        st = sm_store_put(o->store, rel, sm_buf_bytes(&jb), sm_output_syncing(o), err);
    }
    if (st == SM_OK) {
        st = remove_journals_but(o, rel, err);
    }
    if (st == SM_OK && sm_output_syncing(o)) {
        st = sm_output_fsync_dir(o, SM_JOURNAL_DIR, err);
    }
    sm_free(recs);
    sm_buf_free(&doc);
    sm_buf_free(&jb);
    return st == SM_OK ? sm_output_drop_marker(o, err) : st;
}

/* Removes the pending attributes ("member/key" words, write.h) from a zarr.json document (a Zarr
 * v2 .zattrs: "ome/key" is the top-level key, where OME-NGFF 0.4 keeps omero). */
static void drop_pending(json_t *doc, const char *pending)
{
    json_t *attrs = sm_output_attrs_of(doc);
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
    json_t *a = sm_output_load_doc(have, &e);
    json_t *b = sm_output_load_doc(want, &e);
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

/* Names the first member of zarr.json where the existing document and this job's differ (the
 * pending member left out): "attributes.shardmill.input.metadata_sha256" says the input changed,
 * "attributes.shardmill.config_sha256" the configuration. */
static void zarr_diff(const char *pending, struct sm_bytes have, struct sm_bytes want, char *path,
                      size_t cap)
{
    struct sm_err e;
    json_t *a = sm_output_load_doc(have, &e);
    snprintf(path, cap, "its bytes%s%.160s%s", a == NULL ? " (" : "", a == NULL ? e.what : "",
             a == NULL ? ")" : "");
    json_t *b = sm_output_load_doc(want, &e);
    if (a != NULL && b != NULL) {
        if (pending != NULL) {
            drop_pending(a, pending);
            drop_pending(b, pending);
        }
        path[0] = '\0';
        if (!sm_output_first_diff(a, b, path, cap) || path[0] == '\0') {
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
        return sm_output_level_dirs(o->rootfd, 0, SM_WFS_REMOVE, o->stop,
                                    err); /* an array has none */
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
    return sm_output_level_dirs(o->rootfd, w->nlevels, SM_WFS_REMOVE, o->stop, err);
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
        st = sm_output_put_owner(o, err);
        if (st == SM_OK) {
            st = sm_output_clear(o, err); /* no zarr.json: nothing can be trusted */
        }
    } else if (st == SM_OK) {
        if (!same_zarr(w->spec.pending, sm_buf_bytes(&have), sm_buf_bytes(&w->text))) {
            char what[256];
            zarr_diff(w->spec.pending, sm_buf_bytes(&have), sm_buf_bytes(&w->text), what,
                      sizeof(what));
            st = SM_ERR(err, SM_E_USAGE,
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
                st = SM_ERR(err, SM_E_USAGE,
                            "output.exists: %s: the existing %s differs from this "
                            "job's (another configuration or input); use overwrite",
                            policy_name(o), key);
            }
        }
        if (st == SM_OK) {
            st = sm_output_put_owner(o, err); /* checked: from here on the directory changes */
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
        st = sm_output_remove_root_files(o, true, err);
    }
    if (st == SM_OK) {
        st = sm_wfs_walk(o->rootfd, "c", true, SM_WFS_SWEEP_TMP, err);
    }
    if (st == SM_OK) {
        st = sm_output_level_dirs(o->rootfd, 0, SM_WFS_SWEEP_TMP, o->stop, err);
    }
    if (st == SM_OK && *keep_zarr) { /* zarr.json kept: what lies outside its grid goes */
        st = prune_grid(o, w, err);
    }
    if (st == SM_OK) {
        st = sm_wfs_walk(o->rootfd, SM_PRIV_DIR, false, SM_WFS_SWEEP_TMP, err);
    }
    return st;
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
    o->rootfd = sm_output_open_root(o->root);
    if (o->rootfd < 0) {
        return SM_ERRNO(err, errno, o->root, "cannot open the output");
    }
    SM_TRY(open_store(o, err));
    SM_TRY(sm_output_take_lock(o, err));
    /* The path may have changed since open: decide again, and check before changing anything. */
    int state;
    SM_TRY(sm_output_classify(o->root, &state, err));
    if (state == OUT_FOREIGN || (o->opts.exists == SM_OUTPUT_EXISTS_ERROR && state != OUT_EMPTY)) {
        SM_FAIL(err, SM_E_USAGE, "output exists (set output.exists: overwrite or resume)");
    }
    bool keep_zarr = false;
    bool missing[SM_MAX_LEVELS] = {false};
    if (state == OUT_SHARDMILL) {
        SM_TRY(sm_output_check_tree(o->rootfd, o->root, err));
    } else {
        SM_TRY(sm_output_put_owner(o, err));
    }
    if (state == OUT_SHARDMILL) {
        if (o->opts.exists == SM_OUTPUT_EXISTS_OVERWRITE) {
            SM_TRY(
                sm_output_put_owner(o, err)); /* shardmill's until the marker, whatever happens */
            SM_TRY(sm_output_clear(o, err));
        } else {
            SM_TRY(prepare_resume(o, w, &keep_zarr, missing, err));
        }
    }
    SM_TRY(journal_dir(o, err));
    SM_TRY(setup(o, w, err));
    if (w->v2 && !keep_zarr) { /* a Zarr v2 group: .zgroup first, it says the tree is v2 */
        SM_TRY(sm_output_put_doc(o, SM_ZGROUP, sm_bytes_of(SM_ZGROUP_TEXT, strlen(SM_ZGROUP_TEXT)),
                                 err));
    }
    if (!keep_zarr) {
        SM_TRY(sm_output_put_doc(o, sm_writer_doc_name(w), sm_buf_bytes(&w->text), err));
    }
    for (unsigned k = 0; k < w->nlevels; k++) { /* an OME-Zarr image's levels */
        if (keep_zarr && !missing[k]) {
            continue;
        }
        char key[32];
        snprintf(key, sizeof(key), "%u/%s", k, sm_writer_doc_name(w->lv[k]));
        SM_TRY(sm_output_put_doc(o, key, sm_buf_bytes(&w->lv[k]->text), err));
        if (sm_output_syncing(o)) {
            snprintf(key, sizeof(key), "%u", k);
            SM_TRY(sm_output_fsync_dir(o, key, err));
        }
    }
    if (sm_output_syncing(o)) {
        SM_TRY(sm_output_fsync_dir(o, SM_PRIV_DIR, err));
        SM_TRY(sm_output_fsync_dir(o, "", err));
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
    o->rootfd = sm_output_open_root(o->root);
    if (o->rootfd < 0) {
        return SM_ERRNO(err, errno, o->root, "cannot open the output");
    }
    struct sm_buf have = SM_BUF_INIT;
    bool found;
    sm_status st = sm_wfs_read(o->rootfd, sm_writer_doc_name(w), &have, &found, err);
    if (st == SM_OK &&
        (!found || !same_zarr(w->spec.pending, sm_buf_bytes(&have), sm_buf_bytes(&w->text)))) {
        st = SM_ERR(err, SM_E_DATA,
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
        const sm_status st =
            sm_output_put_doc(o, sm_writer_doc_name(w), sm_buf_bytes(&w->text), err);
        if (st != SM_OK) {
            sm_err_where(err, "%s", o->root);
            return st;
        }
    }
    o->w = w;
    return SM_OK;
}
