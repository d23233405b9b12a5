/* The input's identity (SPEC §6.3, §6.5; issue 32): the one description of the input that the
 * provenance, resume (zarr.json byte for byte) and output.exists: auto compare. It holds what a
 * user cannot set back and keys on the resolved input, never on the path's spelling: realpath,
 * then device, inode, size, st_ctim and st_mtim of every file read (a directory of files or a Zarr
 * file store: a SHA-256 over the sorted per-file records). */
#include "shardmill/sm_config.h"

#include "run_convert_int.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shardmill/alloc.h"
#include "shardmill/meta.h"
#include "shardmill/par.h"
#include "shardmill/path.h"
#include "shardmill/url.h"
#include "shardmill/write.h"

#define ID_MARKER "shardmill.complete.json" /* a shardmill output's completion marker */
#define ID_BATCH 65536                      /* records hashed per fold */
#define ID_DEPTH 64                         /* directory levels walked (a link loop ends here) */

/* ---- the records of a directory tree, folded into one SHA-256 ---- */

struct walk {
    uint8_t state[32];    /* SHA-256(state || batch) per full batch */
    char batch[ID_BATCH]; /* records not yet folded */
    size_t len;
    uint64_t files, bytes; /* regular files, their sizes summed */
    int64_t mtime_ns;      /* the latest */
    bool skip_dot;         /* a TIFF directory: dot files are no slices */
};

static int64_t ts_ns(struct timespec t)
{
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void fold(struct walk *w)
{
    uint8_t all[32 + ID_BATCH];
    memcpy(all, w->state, 32);
    memcpy(all + 32, w->batch, w->len);
    sm_sha256(all, 32 + w->len, w->state);
    w->len = 0;
}

/* One record: relative name, type, size, device, inode, ctime, mtime (ns), NUL-separated. */
static void add_record(struct walk *w, const char *rel, const struct stat *sb)
{
    char rec[PATH_MAX + 160];
    const int n = snprintf(
        rec, sizeof(rec),
        "%s%c%c%c%" PRIu64 "%c%" PRIu64 "%c%" PRIu64 "%c%" PRId64 "%c%" PRId64 "\n", rel, 0,
        S_ISDIR(sb->st_mode) ? 'd' : 'f', 0, (uint64_t)sb->st_size, 0, (uint64_t)sb->st_dev, 0,
        (uint64_t)sb->st_ino, 0, ts_ns(sb->st_ctim), 0, ts_ns(sb->st_mtim));
    const size_t len = n < 0 ? 0 : (size_t)n < sizeof(rec) ? (size_t)n : sizeof(rec) - 1;
    if (w->len + len > sizeof(w->batch)) {
        fold(w);
    }
    memcpy(w->batch + w->len, rec, len);
    w->len += len;
    if (S_ISREG(sb->st_mode)) {
        w->files++;
        w->bytes += (uint64_t)sb->st_size;
        w->mtime_ns = ts_ns(sb->st_mtim) > w->mtime_ns ? ts_ns(sb->st_mtim) : w->mtime_ns;
    }
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sm_free(v[i]);
    }
    sm_free(v);
}

/* The names in dir (no "." or ".."), sorted bytewise. */
static sm_status list_sorted(const char *dir, char ***out, size_t *count, struct sm_err *err)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (d == NULL) {
        return SM_ERRNO(err, errno, dir, "cannot list the input");
    }
    char **v = NULL;
    size_t n = 0, cap = 0;
    sm_status st = SM_OK;
    for (struct dirent *de; st == SM_OK && (de = readdir(d)) != NULL;) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            continue;
        }
        if (n == cap) {
            cap = cap == 0 ? 64 : cap * 2;
            char **nv = sm_realloc(v, cap * sizeof(*v));
            if (nv == NULL) {
                st = SM_ERR(err, SM_E_NOMEM, "cannot list %s", dir);
                break;
            }
            v = nv;
        }
        const size_t len = strlen(de->d_name) + 1;
        v[n] = sm_malloc(len);
        if (v[n] == NULL) {
            st = SM_ERR(err, SM_E_NOMEM, "cannot list %s", dir);
            break;
        }
        memcpy(v[n++], de->d_name, len);
    }
    closedir(d);
    if (st != SM_OK) {
        names_free(v, n);
        return st;
    }
    if (n > 0) {
        qsort(v, n, sizeof(*v), name_cmp);
    }
    *out = v;
    *count = n;
    return SM_OK;
}

/* Every entry under dir (rel: its name relative to the walk's root), sorted, files followed
 * through symbolic links (a link flipped to another file is another inode). recurse false: the
 * directory's own files only (a TIFF stack). */
static sm_status walk_dir(struct walk *w, const char *dir, const char *rel, unsigned depth,
                          bool recurse, struct sm_err *err)
{
    if (depth > ID_DEPTH) {
        SM_FAIL_AT(err, SM_E_DATA, dir, "more than %d directory levels (a link loop?)", ID_DEPTH);
    }
    char **names;
    size_t n;
    SM_TRY(list_sorted(dir, &names, &n, err));
    sm_status st = SM_OK;
    for (size_t i = 0; i < n && st == SM_OK; i++) {
        const char *nm = names[i];
        if ((w->skip_dot && nm[0] == '.') || (depth == 0 && strcmp(nm, ".shardmill") == 0)) {
            continue; /* not slices; an output's bookkeeping, not its data */
        }
        char full[PATH_MAX], sub[PATH_MAX];
        if ((size_t)snprintf(full, sizeof(full), "%s/%s", dir, nm) >= sizeof(full) ||
            (size_t)snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] != '\0' ? "/" : "", nm) >=
                sizeof(sub)) {
            st = SM_ERR(err, SM_E_DATA, "path too long");
            sm_err_where(err, "%s/%s", dir, nm);
            break;
        }
        struct stat sb;
        if (stat(full, &sb) != 0) {
            if (errno == ENOENT) { /* a dangling link, or removed meanwhile: named, no file */
                const struct stat none = {0};
                add_record(w, sub, &none);
                continue;
            }
            st = SM_ERRNO(err, errno, full, "cannot stat the input");
            break;
        }
        if (S_ISDIR(sb.st_mode) && !recurse) {
            continue;
        }
        add_record(w, sub, &sb);
        if (S_ISDIR(sb.st_mode)) {
            st = walk_dir(w, full, sub, depth + 1, recurse, err);
        }
    }
    names_free(names, n);
    return st;
}

/* Decimal strings: every JSON reader keeps them exact (a document read with integers as reals,
 * one holding a u64 above 2^63, would round a nanosecond time to 256 ns). */
static void hex32(const uint8_t d[32], char out[65])
{
    static const char hex[] = "0123456789abcdef";
    for (unsigned i = 0; i < 32; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[64] = '\0';
}

/* {files, bytes, mtime_ns, records_sha256} of the tree at root/sub (sub "" or a relative path
 * without "." or ".." components): first the files (not the directories) directly in root and in
 * each directory on the way to sub (a group's documents, which give an array its geometry), then
 * every entry under root/sub (recurse false: its files only). */
static sm_status tree_json(const char *root, const char *sub, bool recurse, bool skip_dot,
                           json_t **out, struct sm_err *err)
{
    struct walk *w = sm_calloc(1, sizeof(*w));
    if (w == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot walk %s", root);
    }
    w->skip_dot = skip_dot;
    char dir[PATH_MAX], rel[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", root);
    rel[0] = '\0';
    sm_status st = SM_OK;
    for (const char *p = sub; st == SM_OK && *p != '\0';) {
        st = walk_dir(w, dir, rel, 1, false, err); /* depth 1: an ancestor's .shardmill is a dir */
        const char *slash = strchr(p, '/');
        const size_t n = slash != NULL ? (size_t)(slash - p) : strlen(p);
        const size_t dl = strlen(dir), rl = strlen(rel);
        if (st == SM_OK && (dl + 1 + n >= sizeof(dir) || rl + 1 + n >= sizeof(rel))) {
            st = SM_ERR(err, SM_E_DATA, "path too long");
            sm_err_where(err, "%s/%s", root, sub);
        }
        if (st == SM_OK) {
            snprintf(dir + dl, sizeof(dir) - dl, "/%.*s", (int)n, p);
            snprintf(rel + rl, sizeof(rel) - rl, "%s%.*s", rl > 0 ? "/" : "", (int)n, p);
        }
        p += n;
        while (*p == '/') {
            p++;
        }
    }
    if (st == SM_OK) {
        st = walk_dir(w, dir, rel, 0, recurse, err);
    }
    if (st == SM_OK) {
        fold(w);
        char hex[65];
        hex32(w->state, hex);
        *out = json_pack("{s:o,s:o,s:o,s:s}", "files", sm_json_checksum_u64(w->files), "bytes",
                         sm_json_checksum_u64(w->bytes), "mtime_ns",
                         sm_json_checksum_i64(w->mtime_ns), "records_sha256", hex);
    }
    sm_free(w);
    return st;
}

/* ---- the identity ---- */

sm_status sm_run_file_identity(const char *path, char *resolved, size_t cap, json_t **out,
                               struct sm_err *err)
{
    *out = NULL;
    char *canon = NULL;
    SM_TRY(sm_path_canonical(path, &canon, err));
    char rp[PATH_MAX];
    snprintf(rp, sizeof(rp), "%s", canon);
    sm_free(canon);
    snprintf(resolved, cap, "%s", rp);
    struct stat sb;
    if (stat(rp, &sb) != 0) {
        return SM_ERRNO(err, errno, path, "cannot stat the input");
    }
    if (S_ISDIR(sb.st_mode)) { /* a TIFF stack: each slice's record */
        return tree_json(rp, "", false, true, out, err);
    }
    *out = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o}", "files", sm_json_checksum_u64(1), "bytes",
                     sm_json_checksum_u64((uint64_t)sb.st_size), "mtime_ns",
                     sm_json_checksum_i64(ts_ns(sb.st_mtim)), "dev",
                     sm_json_checksum_u64((uint64_t)sb.st_dev), "ino",
                     sm_json_checksum_u64((uint64_t)sb.st_ino), "ctime_ns",
                     sm_json_checksum_i64(ts_ns(sb.st_ctim)));
    return *out != NULL ? SM_OK : SM_ERR(err, SM_E_NOMEM, "out of memory");
}

/* The local path of a file store, or NULL (a URL). */
static const char *store_file(const char *store)
{
    if (strncmp(store, "file://", strlen("file://")) == 0) {
        return store + strlen("file://");
    }
    return strstr(store, "://") != NULL ? NULL : store;
}

/* A Zarr input: its resolved store, array, metadata digest, and what binds its values. */
static sm_status zarr_identity(const struct cv *cv, json_t **out, struct sm_err *err)
{
    const struct sm_run_input *in = &cv->p->c.input;
    const char *array = in->array != NULL ? in->array : "";
    while (array[0] == '/') {
        array++;
    }
    char arr[PATH_MAX];
    snprintf(arr, sizeof(arr), "%s", array);
    for (size_t n = strlen(arr); n > 0 && arr[n - 1] == '/'; n--) {
        arr[n - 1] = '\0';
    }
    const char *local = store_file(in->store);
    json_t *o = NULL;
    if (local != NULL) {
        char *canon = NULL;
        SM_TRY(sm_path_canonical(local, &canon, err));
        char rp[PATH_MAX];
        snprintf(rp, sizeof(rp), "%s", canon);
        sm_free(canon);
        json_t *tree = NULL;
        SM_TRY(tree_json(rp, arr, true, false, &tree, err));
        o = json_pack("{s:s,s:s,s:s,s:o}", "store", rp, "array", arr, "metadata_sha256",
                      cv->meta_sha, "objects", tree);
    } else {
        char shown[SM_URL_REDACT_MAX], url[SM_URL_REDACT_MAX];
        snprintf(url, sizeof(url), "%s", sm_url_redact(in->store, shown, sizeof(shown)));
        for (size_t n = strlen(url); n > 0 && url[n - 1] == '/'; n--) {
            url[n - 1] = '\0';
        }
        /* a shardmill output's marker binds every shard's size and CRC32C; without one nothing
         * read cheaply binds the values: "values": "re-read" (auto resumes, which checks every
         * shard against its values digest) */
        /* through the input's own store: one more metadata request, counted like the others
         * (SPEC §3: every request sent is counted) */
        struct sm_buf mk = SM_BUF_INIT;
        bool found = false;
        sm_status st =
            sm_store_get(cv->res->store, ID_MARKER, sm_range_all(), SM_IO_META, &mk, &found, err);
        if (st != SM_OK) { /* a store that refuses the key (S3 without ListBucket: 403) has no
                            * marker to offer: the values are re-read */
            sm_err_clear(err);
            found = false;
        }
        char hex[65];
        if (found) {
            sm_sha256_hex(mk.ptr, mk.len, hex);
        }
        sm_buf_free(&mk);
        o = json_pack("{s:s,s:s,s:s}", "store", url, "array", arr, "metadata_sha256", cv->meta_sha);
        if (o != NULL) {
            json_object_set_new(o, found ? "marker_sha256" : "values",
                                json_string(found ? hex : SM_RUN_INPUT_REREAD));
        }
    }
    if (o == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot describe the input");
    }
    *out = o;
    return SM_OK;
}

/* A source: its description with the resolved path and every file's record. */
static sm_status source_identity(const struct cv *cv, json_t **out, struct sm_err *err)
{
    json_t *o = sm_source_describe(cv->src);
    if (o == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot describe the input");
    }
    const char *path = json_string_value(json_object_get(o, "path"));
    if (path != NULL) {
        char rp[PATH_MAX];
        json_t *file = NULL;
        const sm_status st = sm_run_file_identity(path, rp, sizeof(rp), &file, err);
        if (st != SM_OK) {
            json_decref(o);
            return st;
        }
        json_object_set_new(o, "path", json_string(rp));
        json_object_set_new(o, "file", file);
    }
    /* HDF5 data in other files (external storage, links, virtual sources) is read too, and
     * those files have no record here: nothing binds their values */
    const struct sm_source_params *sp = cv->p->source == NULL ? cv->p->source_params : NULL;
    if (path == NULL || (sp != NULL && sp->hdf5_allow_external && sp->format != NULL &&
                         strcmp(sp->format, "hdf5") == 0)) { /* or a caller's source: no file */
        json_object_set_new(o, "values", json_string(SM_RUN_INPUT_REREAD));
    }
    *out = o;
    return SM_OK;
}

sm_status sm_cv_input_identity(struct cv *cv, struct sm_err *err)
{
    struct sm_buf text = SM_BUF_INIT;
    sm_status st = SM_OK;
    if (cv->rank == 0) { /* one view of the files (a device number is a node's): rank 0's */
        json_t *id = NULL;
        st = cv->src != NULL ? source_identity(cv, &id, err) : zarr_identity(cv, &id, err);
        char *t = st == SM_OK ? json_dumps(id, JSON_COMPACT) : NULL; /* u64 marks kept */
        json_decref(id);
        if (st == SM_OK && t == NULL) {
            st = SM_ERR(err, SM_E_NOMEM, "cannot describe the input");
        }
        if (t != NULL) {
            const size_t n = strlen(t);
            text.ptr = sm_malloc(n + 1);
            if (text.ptr == NULL) {
                st = SM_ERR(err, SM_E_NOMEM, "cannot describe the input");
            } else {
                memcpy(text.ptr, t, n);
                text.len = n;
                text.cap = n + 1;
            }
        }
        sm_json_free_text(t);
        if (st != SM_OK) {
            sm_err_where(err, "input");
        }
    }
    st = sm_par_agree(st, err);
    if (st == SM_OK) {
        st = sm_par_bcast_buf(&text, 0, err);
    }
    if (st == SM_OK) {
        cv->input_id = json_loadb((const char *)text.ptr, text.len, 0, NULL);
        if (!json_is_object(cv->input_id)) {
            st = SM_ERR(err, SM_E_INTERNAL, "rank 0's input identity does not parse");
        }
    }
    sm_buf_free(&text);
    return st;
}

bool sm_run_input_reread(const json_t *input_id)
{
    const char *v = json_string_value(json_object_get(input_id, "values"));
    return v != NULL && strcmp(v, SM_RUN_INPUT_REREAD) == 0;
}

json_t *sm_run_input_part(json_t *input_id, bool state)
{
    static const char *const volatile_keys[] = {"file", "objects", "marker_sha256", "values", NULL};
    json_t *o = json_object();
    const char *key;
    json_t *v;
    json_object_foreach(input_id, key, v)
    {
        bool vol = false;
        for (unsigned i = 0; volatile_keys[i] != NULL && !vol; i++) {
            vol = strcmp(key, volatile_keys[i]) == 0;
        }
        if (vol == state) {
            json_object_set_new(o, key, json_deep_copy(v));
        }
    }
    return o;
}
