/* `shardmill verify` (SPEC §4, §6): re-reads the completion marker (a known format version) and
 * checks zarr.json's SHA-256, that the marker lists exactly the shards of zarr.json's grid, every
 * shard's existence, size and CRC32C, the marker's byte total against the files, and that the
 * tree holds nothing else (no file outside the grid, no link, no leftover temporary file).
 * Problems are collected, not raised: a damaged output is a result, not an error.
 * Spec: https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html
 * Invariant: verify only reads; problems are listed in grid order, so the report is stable. */
#include "shardmill/sm_config.h"

#include "write_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardmill/alloc.h"
#include "shardmill/crc32c.h"
#include "shardmill/fs.h"

void sm_verify_report_destroy(struct sm_verify_report *rep)
{
    sm_free(rep->problems);
    memset(rep, 0, sizeof(*rep));
}

static sm_status problem(struct sm_verify_report *rep, const char *key, struct sm_err *err,
                         const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static sm_status problem(struct sm_verify_report *rep, const char *key, struct sm_err *err,
                         const char *fmt, ...)
{
    if (rep->nproblems == rep->cap) {
        const size_t cap = rep->cap == 0 ? 8 : rep->cap * 2;
        struct sm_verify_problem *p = sm_realloc(rep->problems, cap * sizeof(*p));
        if (p == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "cannot list %zu verify problems", cap);
        }
        rep->problems = p;
        rep->cap = cap;
    }
    struct sm_verify_problem *p = &rep->problems[rep->nproblems++];
    snprintf(p->key, sizeof(p->key), "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->what, sizeof(p->what), fmt, ap);
    va_end(ap);
    return SM_OK;
}

/* Checks every shard of w against recs; *files sums the sizes of the shard files read. */
static sm_status check_shards(int fd, const struct sm_writer *w, const struct sm_shard_rec *recs,
                              uint64_t *files, struct sm_verify_report *rep, struct sm_err *err)
{
    struct sm_buf b = SM_BUF_INIT;
    sm_status st = SM_OK;
    *files = 0;
    for (uint64_t i = 0; st == SM_OK && i < w->nshards; i++) {
        char key[SM_KEY_MAX];
        st = sm_writer_shard_key(w, i, key, sizeof(key), err);
        if (st != SM_OK) {
            break;
        }
        if (!recs[i].set) {
            st = problem(rep, key, err, "not listed in the completion marker");
            continue;
        }
        bool found;
        st = sm_wfs_read(fd, key, &b, &found, err);
        if (st != SM_OK) {
            break;
        }
        rep->checked++;
        *files += found ? b.len : 0;
        if (!found) {
            st = problem(rep, key, err, "missing");
        } else if (b.len != recs[i].size) {
            st = problem(rep, key, err, "size %zu bytes, the marker says %" PRIu64, b.len,
                         recs[i].size);
        } else {
            const uint32_t crc = sm_crc32c(0, b.ptr, b.len);
            if (crc != recs[i].crc32c) {
                st = problem(rep, key, err, "crc32c %08" PRIx32 ", the marker says %08" PRIx32, crc,
                             recs[i].crc32c);
            }
        }
    }
    sm_buf_free(&b);
    return st;
}

#define REL_MAX 512

/* Lists `rel` (a directory of the output) for the tree check; a listing failure is a problem. */
static sm_status list_dir(int fd, const char *rel, struct sm_strv *names,
                          struct sm_verify_report *rep, struct sm_err *err)
{
    struct sm_err le;
    sm_err_clear(&le);
    if (sm_wfs_list(fd, rel, names, &le) != SM_OK) {
        return le.status == SM_E_NOMEM ? SM_ERR(err, SM_E_NOMEM, "%s", le.what)
                                       : problem(rep, rel, err, "cannot list: %s", le.what);
    }
    return SM_OK;
}

/* Every entry under the chunk directory `rel` ("c" or "<level>/c", component d of array lw's
 * keys) must lead to a shard of lw's grid, by the rule resume and the open check apply too
 * (sm_wfs_chunk_name, sm_wfs_in_grid): a name no output holds ("01", a "*.tmp.*" directory), a
 * temporary file of an unfinished write, and a key-like name outside the grid (c/0/0/7, a
 * directory where a shard belongs) are problems. A link is reported once, before. */
static sm_status check_chunk_tree(int fd, const struct sm_writer *lw, const char *rel, unsigned d,
                                  struct sm_verify_report *rep, struct sm_err *err)
{
    struct sm_strv names = {NULL, 0, 0};
    SM_TRY(list_dir(fd, rel, &names, rep, err));
    sm_status st = SM_OK;
    for (size_t i = 0; i < names.n && st == SM_OK; i++) {
        char path[REL_MAX];
        struct stat sb;
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", rel, names.v[i]) >= sizeof(path)) {
            st = problem(rep, rel, err, "an entry name too long for a shard key");
            continue;
        }
        if (fstatat(fd, path, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            st = problem(rep, path, err, "cannot stat: %s", strerror(errno));
            continue;
        }
        if (S_ISLNK(sb.st_mode)) {
            continue; /* reported once, before the marker is read (sm_wfs_find_link) */
        }
        if (d == 0 && lw->v2 && S_ISREG(sb.st_mode) && strcmp(names.v[i], SM_ZARRAY) == 0) {
            continue; /* a Zarr v2 level: its .zarray lies beside its chunks */
        }
        const bool dir = S_ISDIR(sb.st_mode);
        switch (sm_wfs_chunk_name(names.v[i], dir, S_ISREG(sb.st_mode))) {
        case SM_WFS_NAME_TMP:
            st = problem(rep, path, err, "a temporary file of an unfinished write");
            break;
        case SM_WFS_NAME_FOREIGN:
            st = problem(rep, path, err,
                         "not part of a shardmill output (no shard key has such a %s)",
                         dir ? "directory" : "file");
            break;
        case SM_WFS_NAME_KEY:
            if (!sm_wfs_in_grid(lw, d, names.v[i], dir)) {
                st = problem(rep, path, err, "%s not a shard of zarr.json's grid",
                             dir ? "a directory," : "a file,");
            } else if (dir) {
                st = check_chunk_tree(fd, lw, path, d + 1, rep, err);
            }
            break;
        }
    }
    sm_strv_free(&names);
    return st;
}

/* The names a complete output holds at its root (and in an OME-Zarr level directory). */
static bool level_name(const char *n, unsigned nlevels, unsigned *level)
{
    uint64_t k;
    if (!sm_wfs_decimal(n, &k) || k >= nlevels) {
        return false;
    }
    *level = (unsigned)k;
    return true;
}

/* The tree of a complete output: the root holds zarr.json, the marker and c/ (an OME-Zarr image:
 * its level directories, each with zarr.json and c/), and every chunk tree only shards. */
static sm_status check_tree(int fd, const struct sm_writer *w, struct sm_verify_report *rep,
                            struct sm_err *err)
{
    struct sm_strv names = {NULL, 0, 0};
    SM_TRY(list_dir(fd, "", &names, rep, err));
    const unsigned nlev = w->nlevels;
    sm_status st = SM_OK;
    for (size_t i = 0; i < names.n && st == SM_OK; i++) {
        const char *n = names.v[i];
        struct stat sb;
        if (fstatat(fd, n, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            st = problem(rep, n, err, "cannot stat: %s", strerror(errno));
            continue;
        }
        const bool file = S_ISREG(sb.st_mode), dir = S_ISDIR(sb.st_mode);
        unsigned lvl = 0;
        if (file && (strcmp(n, sm_writer_doc_name(w)) == 0 || strcmp(n, SM_MARKER_NAME) == 0 ||
                     (w->v2 && strcmp(n, SM_ZGROUP) == 0))) {
            continue;
        }
        if (dir && nlev == 0 && strcmp(n, "c") == 0) {
            st = check_chunk_tree(fd, w, "c", 0, rep, err);
        } else if (dir && w->v2 && level_name(n, nlev, &lvl)) {
            st = check_chunk_tree(fd, w->lv[lvl], n, 0, rep, err); /* .zarray and the chunks */
        } else if (dir && level_name(n, nlev, &lvl)) {
            struct sm_strv inner = {NULL, 0, 0};
            st = list_dir(fd, n, &inner, rep, err);
            for (size_t j = 0; j < inner.n && st == SM_OK; j++) {
                char rel[REL_MAX];
                snprintf(rel, sizeof(rel), "%s/%s", n, inner.v[j]);
                const bool doc = strcmp(inner.v[j], SM_ZARR_JSON) == 0;
                const bool c = strcmp(inner.v[j], "c") == 0;
                if (fstatat(fd, rel, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
                    st = problem(rep, rel, err, "cannot stat: %s", strerror(errno));
                } else if (c && S_ISDIR(sb.st_mode)) {
                    st = check_chunk_tree(fd, w->lv[lvl], rel, 0, rep, err);
                } else if ((!doc || !S_ISREG(sb.st_mode)) && !S_ISLNK(sb.st_mode)) {
                    st = problem(rep, rel, err, "not part of a shardmill output");
                }
            }
            sm_strv_free(&inner);
        } else if (!S_ISLNK(sb.st_mode)) { /* a link: reported by sm_wfs_find_link */
            st = problem(rep, n, err, "not part of a shardmill output");
        }
    }
    sm_strv_free(&names);
    return st;
}

/* With the marker read: zarr.json, the grid, the shards. */
static sm_status check_marker(int fd, struct sm_bytes marker, struct sm_verify_report *rep,
                              struct sm_err *err)
{
    struct sm_buf zj = SM_BUF_INIT;
    bool found;
    const char *doc = sm_wfs_root_doc(fd); /* .zattrs for a Zarr v2 image */
    SM_TRY(sm_wfs_read(fd, doc, &zj, &found, err));
    if (!found) {
        sm_buf_free(&zj);
        struct stat sb; /* .zattrs there: a Zarr v2 image that lost its .zgroup */
        const bool v2 = fstatat(fd, SM_ZATTRS, &sb, AT_SYMLINK_NOFOLLOW) == 0;
        return problem(rep, v2 ? SM_ZGROUP : doc, err, "missing");
    }
    struct sm_writer *w = NULL;
    struct sm_err pe;
    sm_err_clear(&pe);
    sm_status st = SM_OK;
    if (sm_writer_from_output(fd, sm_buf_bytes(&zj), &w, &pe) != SM_OK) {
        st = pe.status == SM_E_NOMEM ? SM_ERR(err, SM_E_NOMEM, "%s", pe.what)
                                     : problem(rep, doc, err, "%s", pe.what);
        sm_buf_free(&zj);
        return st;
    }
    rep->shards = w->nshards;
    struct sm_shard_rec *recs = sm_calloc(w->nshards == 0 ? 1 : (size_t)w->nshards, sizeof(*recs));
    char sha[65], why[160];
    struct sm_marker_head head;
    if (recs == NULL) {
        st = SM_ERR(err, SM_E_NOMEM, "cannot verify %" PRIu64 " shards", w->nshards);
    } else if (!sm_marker_parse(w, marker, recs, &head, why, sizeof(why))) {
        st = problem(rep, SM_MARKER_NAME, err, "%s", why);
    } else {
        rep->bytes = head.bytes;
        sm_writer_docs_sha256(w, sha); /* zarr.json (and a group's level documents) */
        if (strcmp(sha, head.zarr_sha) != 0) {
            st = problem(rep, doc, err, "SHA-256 %.16s..., the marker says %.16s...", sha,
                         head.zarr_sha);
        }
        uint64_t listed = 0, files = 0;
        for (uint64_t i = 0; i < w->nshards; i++) {
            listed += recs[i].size;
        }
        const size_t before = rep->nproblems;
        if (st == SM_OK) {
            st = check_shards(fd, w, recs, &files, rep, err);
        }
        /* the last word when every shard passed: a total that disagrees is a doctored marker */
        if (st == SM_OK && rep->nproblems == before &&
            (head.bytes != listed || head.bytes != files)) {
            st = problem(rep, SM_MARKER_NAME, err,
                         "'bytes' is %" PRIu64 ", the records sum to %" PRIu64
                         " and the shard files to %" PRIu64,
                         head.bytes, listed, files);
        }
        if (st == SM_OK) {
            st = check_tree(fd, w, rep, err);
        }
    }
    sm_free(recs);
    sm_writer_free(w);
    sm_buf_free(&zj);
    return st;
}

static sm_status verify(const char *path, struct sm_verify_report *rep, struct sm_err *err)
{
    const int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            SM_FAIL(err, SM_E_DATA, "not a shardmill output (no such directory)");
        }
        return SM_ERRNO(err, errno, NULL, "cannot open");
    }
    struct sm_buf marker = SM_BUF_INIT;
    char link[SM_KEY_MAX];
    bool found;
    sm_status st = sm_wfs_find_link(fd, link, sizeof(link), &found, err);
    if (st == SM_OK && found) { /* never followed: what lies behind it is not the output */
        st = problem(rep, link, err, "a symbolic link (shardmill never makes one)");
    }
    if (st == SM_OK) {
        st = sm_wfs_read(fd, SM_MARKER_NAME, &marker, &found, err);
    }
    if (st == SM_OK && !found) {
        struct stat sb;
        if (fstatat(fd, SM_PRIV_DIR, &sb, 0) == 0 && S_ISDIR(sb.st_mode)) {
            st = problem(rep, SM_MARKER_NAME, err, "missing: the run did not complete");
        } else {
            st = SM_ERR(err, SM_E_DATA, "not a shardmill output (no " SM_MARKER_NAME ")");
        }
    } else if (st == SM_OK) {
        st = check_marker(fd, sm_buf_bytes(&marker), rep, err);
    }
    sm_buf_free(&marker);
    close(fd);
    return st;
}

sm_status sm_output_verify(const char *path, struct sm_verify_report *rep, struct sm_err *err)
{
    memset(rep, 0, sizeof(*rep));
    const sm_status st = verify(path, rep, err);
    if (st != SM_OK) {
        sm_err_where(err, "%s", path);
    }
    return st;
}
