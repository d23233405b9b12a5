/* The checks across configuration keys (SPEC §4, STYLE B10), run once the file and every `--set`
 * are applied: a key or group the job does not use is refused (issue 20: no setting is ever
 * ignored), required keys are present, keys that must agree do (input and its source, shapes and
 * axes, normalization, output type and codec, the export, report and output paths), and the
 * defaults that depend on the job are filled in (input.format, output.dtype, output.ome.method).
 * Each error is placed at the key to change (where_key). docs/CONFIG.md "Rules between keys"
 * lists every rule (md_rules in config_doc.c). The values come from config_parse.c. */
#include <shardmill/sm_config.h>

#include "config_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <shardmill/alloc.h>
#include <shardmill/codec.h>
#include <shardmill/path.h>
#include <shardmill/source.h>

/* ==== checks across keys and job-dependent defaults ==== */

/* The key node of a dotted path in the document (dotted keys included), or NULL. */
static const struct ynode *find_key(const struct ynode *map, const char *prefix, const char *path)
{
    if (map == NULL || map->kind != Y_MAP) {
        return NULL;
    }
    for (const struct ynode *key = map->kids; key != NULL; key = key->next->next) {
        if (key->kind != Y_SCALAR) {
            continue;
        }
        char full[MAX_PATH_LEN];
        snprintf(full, sizeof(full), "%s%s%s", prefix, prefix[0] ? "." : "", key->text);
        size_t n = strlen(full);
        if (strcmp(full, path) == 0) {
            return key;
        }
        if (strncmp(full, path, n) == 0 && path[n] == '.') {
            const struct ynode *r = find_key(key->next, full, path);
            if (r != NULL) {
                return r;
            }
        }
    }
    return NULL;
}

/* Places an error about key `path`: where it was set, else at the key of its nearest group in
 * the file, else at the start of the document. */
static void where_key(struct lctx *cx, const char *path)
{
    const struct sm_cfg_key *k = sm_cfg_find(path);
    const struct origin *o = k != NULL ? &cx->orig[row_index(k)] : NULL;
    if (o != NULL && o->kind == ORIGIN_SET) {
        sm_cfg_where_set(cx, o->set);
        return;
    }
    if (o != NULL && o->kind == ORIGIN_FILE) {
        sm_err_where(cx->err, "%s:%d:%d", cx->name, o->line, o->col);
        return;
    }
    char group[MAX_PATH_LEN];
    snprintf(group, sizeof(group), "%s", path);
    for (char *dot = strrchr(group, '.'); dot != NULL; dot = strrchr(group, '.')) {
        *dot = '\0';
        const struct ynode *g = find_key(cx->root, "", group);
        if (g != NULL) {
            sm_err_where(cx->err, "%s:%d:%d", cx->name, g->line, g->col);
            return;
        }
    }
    if (cx->root != NULL) {
        sm_err_where(cx->err, "%s:%d:%d", cx->name, cx->root->line, cx->root->col);
    } else {
        sm_err_where(cx->err, "%s:1:1", cx->name);
    }
}

static sm_status fail_key(struct lctx *cx, const char *path, const char *file, int line,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static sm_status fail_key(struct lctx *cx, const char *path, const char *file, int line,
                          const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sm_err_vset(cx->err, SM_E_USAGE, file, line, fmt, ap);
    va_end(ap);
    where_key(cx, path);
    return cx->err->status;
}

/* fail_key at this file and line, as an expression (the status recorded); FAIL_KEY returns it. */
#define KEY_ERR(cx, path, ...) fail_key((cx), (path), __FILE__, __LINE__, __VA_ARGS__)
#define FAIL_KEY(cx, path, ...) return KEY_ERR((cx), (path), __VA_ARGS__)

static bool given(const struct lctx *cx, const char *path)
{
    const struct sm_cfg_key *k = sm_cfg_find(path);
    return k != NULL && cx->orig[row_index(k)].kind != ORIGIN_DEFAULT;
}

/* A required key has a value: given and not null. */
static bool present(const struct lctx *cx, const struct sm_cfg_key *k)
{
    const char *p = (const char *)cx->cfg + k->off;
    switch (k->type) {
    case SM_CFG_STRING:
    case SM_CFG_NAME: {
        const char *s;
        memcpy(&s, p, sizeof(s));
        return s != NULL;
    }
    case SM_CFG_DIMS:
        return ((const struct sm_cfg_dims *)(const void *)p)->set;
    case SM_CFG_FLOATS:
        return ((const struct sm_cfg_floats *)(const void *)p)->set;
    case SM_CFG_RANGE: {
        bool set;
        memcpy(&set, (const char *)cx->cfg + k->off_set, sizeof(set));
        return set;
    }
    default:
        return cx->orig[row_index(k)].kind != ORIGIN_DEFAULT;
    }
}

static void dims_text(const struct sm_cfg_dims *d, char *buf, size_t cap)
{
    if (d->is_auto) {
        snprintf(buf, cap, "auto");
        return;
    }
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (unsigned i = 0; i < d->n && n < cap; i++) {
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRIu64, i ? ", " : "", d->v[i]);
    }
    if (n < cap) {
        snprintf(buf + n, cap - n, "]");
    }
}

static sm_status set_default_name(struct lctx *cx, char **field, const char *name)
{
    if (*field != NULL) {
        return SM_OK;
    }
    *field = sm_strdup(name);
    if (*field == NULL) {
        FAIL_NOMEM(cx, NULL);
    }
    return SM_OK;
}

/* ---- keys the job does not use (issue 20: no setting is ever ignored) ---- */

/* Refuses `path` (a key or a group, given as `val` at node `at`) when the job uses none of it,
 * else the first key or group inside it that the job does not use. */
static sm_status check_applies_node(struct lctx *cx, const char *path, const struct ynode *at,
                                    const struct ynode *val)
{
    const unsigned jobs = sm_cfg_applies(path);
    if (jobs != 0 && (jobs & SM_CFG_JOB(cx->cfg->job)) == 0) {
        char names[64];
        FAIL_AT(cx, at, "`%s` applies to %s jobs only (job: %s)", path,
                sm_cfg_jobs_text(jobs, names, sizeof(names)), sm_config_job_name(cx->cfg->job));
    }
    if (val->kind != Y_MAP || !sm_cfg_is_group(path)) {
        return SM_OK;
    }
    for (const struct ynode *key = val->kids; key != NULL; key = key->next->next) {
        char sub[MAX_PATH_LEN];
        snprintf(sub, sizeof(sub), "%s.%s", path, key->text); /* walk_map checked the length */
        SM_TRY(check_applies_node(cx, sub, key, key->next));
    }
    return SM_OK;
}

/* Every key and group the file and the --set arguments give, checked against the job once it is
 * known (`job:` may come last, or from a --set): the file's in document order, then each --set. A
 * group counts even when empty, as `output:` under a scan. Shared by `validate` and `run` (both
 * load through here). */
static sm_status check_applies(struct lctx *cx, const struct ynode *root, unsigned nsets)
{
    if (!given(cx, "job")) {
        return SM_OK; /* check_required names the missing job */
    }
    if (root != NULL && root->kind == Y_MAP) {
        for (const struct ynode *key = root->kids; key != NULL; key = key->next->next) {
            SM_TRY(check_applies_node(cx, key->text, key, key->next));
        }
    }
    sm_status st = SM_OK;
    for (unsigned i = 0; st == SM_OK && i < nsets; i++) {
        /* the value again as a tree: apply() kept only the rows, not the groups it named */
        const char *eq = strchr(cx->sets[i], '=');
        char path[MAX_PATH_LEN];
        snprintf(path, sizeof(path), "%.*s", (int)(eq - cx->sets[i]), cx->sets[i]);
        struct ynode *val = NULL;
        cx->in_set = true;
        cx->cur_set = i;
        st = sm_cfg_yaml_parse(cx, eq + 1, strlen(eq + 1), &val);
        static const struct ynode empty = {.kind = Y_SCALAR, .plain = true, .text = (char *)""};
        if (st == SM_OK) {
            st = check_applies_node(cx, path, NULL, val != NULL ? val : &empty);
        }
        sm_cfg_node_free(val);
    }
    cx->in_set = false;
    return st;
}

static sm_status check_required(struct lctx *cx)
{
    struct sm_job_config *c = cx->cfg;
    char exp[160];
    if (!given(cx, "job")) {
        FAIL_KEY(cx, "job", "missing required key 'job' (%s)",
                 sm_cfg_expected(sm_cfg_find("job"), exp, sizeof(exp)));
    }
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        if ((k->required & SM_CFG_JOB(c->job)) != 0 && !present(cx, k)) {
            FAIL_KEY(cx, k->path, "missing required key '%s' (required by the %s job)", k->path,
                     sm_config_job_name(c->job));
        }
    }
    return SM_OK;
}

/* input.hdf5.dataset: required for hdf5 input; an absolute HDF5 path, not the root, without
 * empty, "." or ".." components, shorter than 256 bytes. */
static sm_status check_h5_dataset(struct lctx *cx, const char *ds)
{
    if (ds == NULL) {
        FAIL_KEY(cx, "input.hdf5.dataset",
                 "missing required key 'input.hdf5.dataset' (required to read hdf5 input)");
    }
    const size_t n = strlen(ds);
    bool bad = ds[0] != '/' || n < 2 || n > 255 || ds[n - 1] == '/';
    for (const char *p = ds; !bad && *p != '\0'; p++) {
        if (*p == '/') {
            const char *q = p + 1;
            const size_t len = strcspn(q, "/");
            bad = len == 0 || (len == 1 && q[0] == '.') || (len == 2 && q[0] == '.' && q[1] == '.');
        }
    }
    if (bad) {
        FAIL_KEY(cx, "input.hdf5.dataset",
                 "input.hdf5.dataset: '%s' is not an absolute HDF5 dataset path such as "
                 "/exchange/data (no empty, '.' or '..' components, at most 255 bytes)",
                 ds);
    }
    return SM_OK;
}

/* input.format of a job that writes (convert, ingest): zarr, n5 or a source of the registry
 * (shardmill/source.h), by default the one its extensions name (ingest: the first, raw; convert:
 * zarr), with the keys the source requires. */
static sm_status check_source(struct lctx *cx)
{
    struct sm_job_config *c = cx->cfg;
    const struct sm_source_format *inferred = sm_source_format_infer(c->input.store);
    SM_TRY(set_default_name(cx, &c->input.format,
                            inferred != NULL          ? inferred->name
                            : c->job == SM_JOB_INGEST ? sm_source_formats[0].name
                                                      : "zarr"));
    const struct sm_source_format *f = sm_source_format_find(c->input.format);
    for (const char *e = f != NULL ? f->required : ""; *e != '\0';) {
        char key[64];
        const size_t len = strcspn(e, "|");
        snprintf(key, sizeof(key), "%.*s", (int)len, e);
        const struct sm_cfg_key *rk = sm_cfg_find(key);
        if (rk == NULL || !present(cx, rk)) {
            FAIL_KEY(cx, key, "missing required key '%s' (required to read %s input)", key,
                     f->name);
        }
        e += len + (e[len] == '|');
    }
    if (c->input.hdf5_dataset != NULL && strcmp(c->input.format, "hdf5") == 0) {
        SM_TRY(check_h5_dataset(cx, c->input.hdf5_dataset));
    }
    return SM_OK;
}

static sm_status check_input(struct lctx *cx)
{
    struct sm_job_config *c = cx->cfg;
    if (c->job == SM_JOB_INGEST || c->job == SM_JOB_CONVERT) {
        SM_TRY(check_source(cx));
    } else {
        if (c->input.format != NULL && strcmp(c->input.format, "zarr") != 0 &&
            strcmp(c->input.format, "n5") != 0) {
            FAIL_KEY(cx, "input.format",
                     "input.format: the %s job reads zarr or n5 input (%s is read by convert)",
                     sm_config_job_name(c->job), c->input.format);
        }
        SM_TRY(set_default_name(cx, &c->input.format, "zarr"));
    }
    if (c->input.http.backoff_base_ms > c->input.http.backoff_max_ms) {
        const char *blame = given(cx, "input.http.backoff_max_ms") ? "input.http.backoff_max_ms"
                                                                   : "input.http.backoff_base_ms";
        FAIL_KEY(cx, blame,
                 "input.http.backoff_base_ms (%u) is above input.http.backoff_max_ms (%u)",
                 c->input.http.backoff_base_ms, c->input.http.backoff_max_ms);
    }
    const char *ep = c->input.s3_endpoint; /* the s3 store's check (store_s3.c), before any run */
    if (ep != NULL && strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0) {
        FAIL_KEY(cx, "input.s3.endpoint",
                 "input.s3.endpoint: '%s' is not an http:// or https:// URL", ep);
    }
    return SM_OK;
}

/* A group the file gives with nothing in it (`export:`, `export: {}`): it sets nothing. */
static bool empty_group(const struct ynode *key)
{
    const struct ynode *v = key != NULL ? key->next : NULL;
    return v != NULL && ((v->kind == Y_MAP && v->kids == NULL) || sm_cfg_node_is_null(v));
}

/* Keys the job's input or export would not read (issue 32 #18: no setting is ignored): a
 * source's keys with another input.format (input.raw.*, input.hdf5.*), input.s3.* with a store
 * that is not s3://, export.hdf5.* without export.hdf5.path (sm_cfg_used says which), and an
 * empty `export` or `export.hdf5` group, which names no export file. */
static sm_status check_unused(struct lctx *cx)
{
    const struct sm_job_config *c = cx->cfg;
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        if ((k->applies & SM_CFG_JOB(c->job)) == 0 || strncmp(k->path, "normalize.", 10) == 0 ||
            !given(cx, k->path) || sm_cfg_used(k, c)) {
            continue; /* another job's keys: check_applies; normalize's: check_mode_keys */
        }
        if (strncmp(k->path, "input.s3.", 9) == 0) {
            FAIL_KEY(cx, k->path,
                     "`%s` is used by an s3:// input.store only (input.store is '%.200s')", k->path,
                     c->input.store);
        }
        if (strncmp(k->path, "export.", 7) == 0) {
            FAIL_KEY(cx, k->path,
                     "`%s` is used by the HDF5 export only, and export.hdf5.path is not given "
                     "(no export is written)",
                     k->path);
        }
        /* input.<source>.*: the source's name is the path's second component */
        const int n = (int)strcspn(k->path + 6, ".");
        FAIL_KEY(cx, k->path, "`%s` is used by input.format %.*s only (the input's format is %s)",
                 k->path, n, k->path + 6, c->input.format);
    }
    if (c->export_.hdf5_path == NULL) {
        static const char *const groups[] = {"export", "export.hdf5"};
        for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
            const struct ynode *g = find_key(cx->root, "", groups[i]);
            if (empty_group(g)) {
                FAIL_AT(cx, g,
                        "`%s` is empty: it names no export.hdf5.path, so no export would be "
                        "written (give the path, or remove the group)",
                        groups[i]);
            }
        }
    }
    return SM_OK;
}

static sm_status check_shapes(struct lctx *cx)
{
    struct sm_job_config *c = cx->cfg;
    char a[160], b[160];
    if (c->roi.offset.set && c->roi.shape.set && c->roi.offset.n != c->roi.shape.n) {
        FAIL_KEY(cx, given(cx, "roi.shape") ? "roi.shape" : "roi.offset",
                 "roi.shape has %u axes but roi.offset has %u", c->roi.shape.n, c->roi.offset.n);
    }
    if (c->read_bench.extents.set && c->roi.shape.set) {
        FAIL_KEY(cx, "read_bench.extents",
                 "read_bench.extents and roi.shape exclude each other (each extent is a region "
                 "of that length along every axis, from roi.offset)");
    }
    const struct sm_cfg_dims *s = &c->output.shard, *k = &c->output.chunk;
    if (s->set && s->n > 0 && k->set && !k->is_auto) {
        const char *blame = given(cx, "output.chunk") ? "output.chunk" : "output.shard";
        dims_text(k, a, sizeof(a));
        dims_text(s, b, sizeof(b));
        if (s->n != k->n) {
            FAIL_KEY(cx, blame, "output.chunk %s must have as many axes as output.shard %s", a, b);
        }
        for (unsigned i = 0; i < s->n; i++) {
            if (s->v[i] % k->v[i] != 0) {
                FAIL_KEY(cx, blame, "output.chunk %s does not divide output.shard %s (axis %u)", a,
                         b, i);
            }
        }
    }
    return SM_OK;
}

/* `job: ingest` is convert with normalize.mode none (SPEC §4): it sets exactly that and refuses
 * any other normalization rather than ignore it. */
static sm_status check_ingest_alias(struct lctx *cx)
{
    struct sm_job_config *c = cx->cfg;
    static const char *const keys[] = {"normalize.mode", "normalize.divisor", "normalize.lo",
                                       "normalize.hi"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (given(cx, keys[i]) && (i > 0 || c->normalize.mode != SM_NORM_NONE)) {
            FAIL_KEY(cx, keys[i],
                     "%s: job ingest is convert with normalize.mode none (the values kept); to "
                     "normalize, write job: convert",
                     keys[i]);
        }
    }
    c->normalize.mode = SM_NORM_NONE;
    return SM_OK;
}

/* A normalize.* key belongs to the modes whose descriptor (shardmill/stats.h) reads it: given
 * with another mode it would be ignored, so it is refused. */
static sm_status check_mode_keys(struct lctx *cx)
{
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        if (strncmp(k->path, "normalize.", 10) != 0 || !given(cx, k->path) ||
            sm_cfg_used(k, cx->cfg)) {
            continue;
        }
        char modes[128] = ""; /* "window and percentile" */
        unsigned n = 0, count = 0;
        for (unsigned m = 0; m < SM_NORM_NMODES; m++) {
            count += strstr(sm_norm_modes[m].keys, k->path) != NULL;
        }
        for (unsigned m = 0; m < SM_NORM_NMODES; m++) {
            if (strstr(sm_norm_modes[m].keys, k->path) != NULL) {
                const size_t len = strlen(modes);
                snprintf(modes + len, sizeof(modes) - len, "%s%s",
                         n == 0           ? ""
                         : n + 1 == count ? " and "
                                          : ", ",
                         sm_norm_modes[m].name);
                n++;
            }
        }
        FAIL_KEY(cx, k->path, "`%s` is used by normalize.mode %s only (the mode is %s)", k->path,
                 modes, sm_norm_mode_name(cx->cfg->normalize.mode));
    }
    return SM_OK;
}

static sm_status check_normalize(struct lctx *cx)
{
    struct sm_job_config *c = cx->cfg;
    if (c->job == SM_JOB_INGEST) {
        SM_TRY(check_ingest_alias(cx));
    }
    if (c->job == SM_JOB_INGEST || c->job == SM_JOB_CONVERT) {
        SM_TRY(check_mode_keys(cx));
    }
    const struct sm_norm_desc *d = sm_norm_desc(c->normalize.mode);
    if (d->window != SM_NORM_WIN_VALUES && d->window != SM_NORM_WIN_PERCENTILE) {
        return SM_OK; /* lo and hi are the window's */
    }
    const char *mode = d->name;
    static const char *const ends[] = {"normalize.lo", "normalize.hi"};
    for (size_t i = 0; i < 2; i++) {
        if (!given(cx, ends[i])) {
            FAIL_KEY(cx, "normalize.mode", "missing required key '%s' (required by %s %s)", ends[i],
                     "normalize.mode", mode);
        }
    }
    double lo = c->normalize.lo, hi = c->normalize.hi;
    if (d->window == SM_NORM_WIN_PERCENTILE) {
        if (lo < 0 || lo > 100) {
            FAIL_KEY(cx, "normalize.lo", "normalize.lo: percentile %g is out of range (0 to 100)",
                     lo);
        }
        if (hi < 0 || hi > 100) {
            FAIL_KEY(cx, "normalize.hi", "normalize.hi: percentile %g is out of range (0 to 100)",
                     hi);
        }
    }
    if (!(lo < hi)) {
        FAIL_KEY(cx, "normalize.hi", "normalize.hi (%g) must be above normalize.lo (%g)", hi, lo);
    }
    return SM_OK;
}

static sm_status check_output(struct lctx *cx)
{
    struct sm_job_config *c = cx->cfg;
    const char *codec = c->output.codec;
    const struct sm_codec_ops *ops = sm_codec_find_writer(codec); /* its writer's level range */
    const struct sm_codec_writer *w = ops != NULL ? ops->writer : NULL;
    if (w != NULL &&
        (c->output.codec_level < w->level_min || c->output.codec_level > w->level_max)) {
        FAIL_KEY(cx, given(cx, "output.codec.level") ? "output.codec.level" : "output.codec.name",
                 "output.codec.level: %s level %" PRId64 " is out of range (%d to %d)", codec,
                 c->output.codec_level, w->level_min, w->level_max);
    }
    if (c->output.ome_version == SM_RUN_OME_V04) { /* OME-NGFF 0.4: Zarr v2, no shards */
        if (c->output.shard.set && c->output.shard.n > 0) {
            FAIL_KEY(cx, "output.shard",
                     "output.shard: OME-NGFF 0.4 (output.ome.version) has no shards; give "
                     "output.chunk, or output.shard: []");
        }
        if (c->export_.hdf5_path != NULL) {
            FAIL_KEY(cx, "export.hdf5.path",
                     "export.hdf5.path: the HDF5 export reads a Zarr v3 level 0; it is not "
                     "available with output.ome.version \"0.4\"");
        }
        if (!given(cx, "output.codec.name")) { /* as bioformats2raw writes it */
            sm_free(c->output.codec);
            c->output.codec = NULL;
            SM_TRY(set_default_name(cx, &c->output.codec, "blosc"));
            c->output.codec_level = given(cx, "output.codec.level") ? c->output.codec_level : 5;
        }
    }
    if ((given(cx, "output.ome.levels") || given(cx, "output.ome.downsample") ||
         given(cx, "output.ome.version")) &&
        !given(cx, "output.ome.method")) {
        /* output.ome: {levels: N}: an OME-Zarr image, by mean (an explicit method: null, as the
         * YAML view prints an unset one, keeps the plain array) */
        SM_TRY(set_default_name(cx, &c->output.ome_method, "mean"));
    }
    const bool writes = c->job == SM_JOB_CONVERT || c->job == SM_JOB_INGEST;
    const bool keep = writes && c->normalize.mode == SM_NORM_NONE;
    if (!keep) { /* none: the input's type, known when it opens */
        SM_TRY(set_default_name(cx, &c->output.dtype, "float32"));
    }
    if (keep && c->export_.hdf5_path != NULL) {
        FAIL_KEY(cx, "export.hdf5.path",
                 "export.hdf5: the export writes float32; normalize.mode none keeps the input's "
                 "type");
    }
    if (writes && !keep && strcmp(c->output.dtype, "float32") != 0 &&
        strcmp(c->output.dtype, "uint8") != 0 && strcmp(c->output.dtype, "uint16") != 0) {
        FAIL_KEY(cx, "output.dtype",
                 "output.dtype: a normalized convert writes float32, uint8 or uint16 (SPEC §2), "
                 "not %s",
                 c->output.dtype);
    }
    return SM_OK;
}

static sm_status check_export(struct lctx *cx)
{
    const struct sm_job_config *c = cx->cfg;
    if (c->export_.hdf5_path != NULL && c->job != SM_JOB_CONVERT) {
        FAIL_KEY(cx, "export.hdf5.path", "export.hdf5.path: only the convert job exports (not %s)",
                 sm_config_job_name(c->job));
    }
    return SM_OK;
}

/* ---- rules between keys that the jobs applied only once the input was open (issue 10): every
 * one a job would refuse without reading data is checked here, so `validate` and `run` share it
 * (docs/CONFIG.md "Rules between keys" lists them, from md_rules in config_doc.c) ---- */

/* input.spacing and input.origin give one value per axis: `want` axes, as `from` says (a run
 * would otherwise find the mismatch only after opening the input, or write a short OME scale). */
static sm_status check_geometry_axes(struct lctx *cx, unsigned want, const char *from)
{
    const struct sm_job_config *c = cx->cfg;
    const struct {
        const char *path;
        const struct sm_cfg_floats *f;
    } keys[] = {{"input.spacing", &c->input.spacing}, {"input.origin", &c->input.origin}};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (keys[i].f->set && keys[i].f->n != want) {
            FAIL_KEY(cx, keys[i].path, "%s has %u values but %s has %u axes (one value per axis)",
                     keys[i].path, keys[i].f->n, from, want);
        }
    }
    return SM_OK;
}

/* The keys giving one value per array axis, for the job: the first given one sets the count. */
static sm_status check_axes(struct lctx *cx)
{
    const struct sm_job_config *c = cx->cfg;
    struct {
        const char *path;
        const struct sm_cfg_dims *d;
    } keys[8];
    unsigned n = 0;
    const bool writes = c->job == SM_JOB_CONVERT || c->job == SM_JOB_INGEST;
    const struct sm_source_format *src = writes ? sm_source_format_find(c->input.format) : NULL;
    if (src != NULL && src->shape_key != NULL) { /* the source's shape key sets the axes first */
        keys[n].path = src->shape_key;
        keys[n++].d = (const struct sm_cfg_dims *)(const void *)((const char *)c +
                                                                 sm_cfg_find(src->shape_key)->off);
    }
    keys[n].path = "roi.offset", keys[n++].d = &c->roi.offset;
    keys[n].path = "roi.shape", keys[n++].d = &c->roi.shape;
    keys[n].path = "tile", keys[n++].d = &c->tile;
    if (writes) {
        if (c->output.shard.n > 0) { /* [] = unsharded */
            keys[n].path = "output.shard", keys[n++].d = &c->output.shard;
        }
        keys[n].path = "output.chunk", keys[n++].d = &c->output.chunk;
    }
    if (c->job == SM_JOB_CONVERT && c->export_.hdf5_path != NULL) {
        keys[n].path = "export.hdf5.chunk", keys[n++].d = &c->export_.hdf5_chunk;
    }
    int ref = -1;
    for (unsigned i = 0; i < n; i++) { /* the reference: the first key given (raw.shape first) */
        if (keys[i].d->set && !keys[i].d->is_auto && given(cx, keys[i].path)) {
            ref = (int)i;
            break;
        }
    }
    if (ref < 0) {
        /* a source of a fixed axis count (a TIFF stack: z, y, x): input.spacing/origin are
         * checked anyway */
        return src != NULL && src->ndim != 0 ? check_geometry_axes(cx, src->ndim, src->noun)
                                             : SM_OK;
    }
    const unsigned want = keys[ref].d->n;
    for (unsigned i = 0; i < n; i++) {
        if (!keys[i].d->set || keys[i].d->is_auto || keys[i].d->n == want) {
            continue;
        }
        /* blame a key the user wrote: this one, or the reference when this one is a default */
        const char *blame = given(cx, keys[i].path) ? keys[i].path : keys[ref].path;
        FAIL_KEY(cx, blame,
                 "%s has %u axes but %s has %u (every shape key needs one value per axis)",
                 keys[i].path, keys[i].d->n, keys[ref].path, want);
    }
    return check_geometry_axes(cx, want, keys[ref].path);
}

/* export.hdf5.dataset: what the HDF5 export accepts (engine/export/export_plan.c). */
static const char *h5_name_problem(const char *name)
{
    if (name[0] != '/') {
        return "must be an absolute HDF5 path such as /data";
    }
    if (strlen(name) > 255) {
        return "is longer than 255 bytes";
    }
    if (name[1] == '\0') {
        return "names the root group, not a dataset";
    }
    for (const char *p = name + 1;;) {
        const char *e = strchr(p, '/');
        const size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
        if (len == 0) {
            return "has an empty component";
        }
        if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.')) {
            return "has a '.' or '..' component";
        }
        if (e == NULL) {
            return NULL;
        }
        p = e + 1;
    }
}

/* A path a writer resolves (sm_path_resolve): refused here with the key's line and column. */
static sm_status check_path(struct lctx *cx, const char *key, const char *noun, const char *kind,
                            const char *path, char **resolved)
{
    const struct sm_path_names names = {key, noun, kind};
    struct sm_err e;
    sm_err_clear(&e);
    if (sm_path_resolve(path, NULL, &names, resolved, &e) == SM_OK) {
        return SM_OK;
    }
    if (e.status == SM_E_NOMEM) {
        FAIL_NOMEM(cx, NULL);
    }
    FAIL_KEY(cx, key, "%s '%s': %s", key, path, e.what);
}

/* SM_E_USAGE naming the report's key and path. */
static sm_status report_fail(const char *key, const char *path, const char *why, const char *dir,
                             struct sm_err *err)
{
    SM_FAIL_AT(err, SM_E_USAGE, key, "cannot write the report '%s': %s%s%s", path, why,
               dir != NULL ? " " : "", dir != NULL ? dir : "");
}

sm_status sm_config_check_report(const char *path, const char *key, struct sm_err *err)
{
    if (path == NULL || strcmp(path, "-") == 0) {
        return SM_OK;
    }
    struct stat sb;
    if (path[0] == '\0' || path[strlen(path) - 1] == '/') {
        return report_fail(key, path, "the path names no file", NULL, err);
    }
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        return report_fail(key, path, "it is a directory", NULL, err);
    }
    /* the report is written as <path>.tmp.<pid> and renamed: its directory must take a file */
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        snprintf(dir, sizeof(dir), ".");
    } else if (slash == path) {
        snprintf(dir, sizeof(dir), "/");
    } else if ((size_t)(slash - path) >= sizeof(dir)) {
        return report_fail(key, path, "the path is too long", NULL, err);
    } else {
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    }
    if (stat(dir, &sb) != 0 && errno == ENOENT) {
        /* the report writer creates it: the nearest directory that exists must take new ones */
        while (stat(dir, &sb) != 0 && errno == ENOENT) {
            char *cut = strrchr(dir, '/');
            if (cut == NULL) {
                snprintf(dir, sizeof(dir), ".");
                break;
            }
            cut[cut == dir ? 1 : 0] = '\0'; /* "/x" -> "/", "a/b" -> "a" */
            if (cut == dir) {
                break;
            }
        }
    }
    if (stat(dir, &sb) != 0) {
        return report_fail(
            key, path, errno == ENOENT ? "no such directory:" : "cannot reach the directory:", dir,
            err);
    }
    if (!S_ISDIR(sb.st_mode)) {
        return report_fail(key, path, "not a directory:", dir, err);
    }
    if (access(dir, W_OK | X_OK) != 0) {
        return report_fail(key, path, "the directory is not writable:", dir, err);
    }
    return SM_OK;
}

static sm_status check_rules(struct lctx *cx)
{
    const struct sm_job_config *c = cx->cfg;
    if (c->report != NULL) { /* checked before any work: a run fails here, not after its job */
        struct sm_err e;
        sm_err_clear(&e);
        if (sm_config_check_report(c->report, "report", &e) != SM_OK) {
            FAIL_KEY(cx, "report", "report: %s", e.what);
        }
    }
    if (c->histogram.range_set && c->histogram.bins == 0) {
        FAIL_KEY(cx, "histogram.range",
                 "histogram.range needs histogram.bins (how many bins divide the range)");
    }
    SM_TRY(check_axes(cx));
    if (c->job != SM_JOB_CONVERT && c->job != SM_JOB_INGEST) {
        return SM_OK;
    }
    char *out = NULL, *ex = NULL;
    SM_TRY(check_path(cx, "output.path", "output", "directory", c->output.path, &out));
    sm_status st = SM_OK;
    if (c->job == SM_JOB_CONVERT && c->export_.hdf5_path != NULL) {
        const char *why = h5_name_problem(c->export_.hdf5_dataset);
        if (why != NULL) {
            st = KEY_ERR(cx, "export.hdf5.dataset",
                         "export.hdf5.dataset: the dataset name %s (got '%.100s')", why,
                         c->export_.hdf5_dataset);
        } else if (strcmp(c->export_.hdf5_dataset, "/histogram") == 0 ||
                   strncmp(c->export_.hdf5_dataset, "/histogram/", 11) == 0) {
            st = KEY_ERR(cx, "export.hdf5.dataset",
                         "export.hdf5.dataset: '%s' collides with the dataset '/histogram' the "
                         "export also writes",
                         c->export_.hdf5_dataset);
        }
        if (st == SM_OK) {
            st = check_path(cx, "export.hdf5.path", "export", "file", c->export_.hdf5_path, &ex);
        }
        if (st == SM_OK && (sm_path_is_within(ex, out) || sm_path_is_within(out, ex))) {
            st = KEY_ERR(cx, "export.hdf5.path",
                         "export.hdf5.path '%s' %s the output '%s' (output.path; give a path "
                         "beside it)",
                         ex, sm_path_is_within(ex, out) ? "lies inside" : "contains", out);
        }
    }
    sm_free(ex);
    sm_free(out);
    return st;
}

/* ==== the sequence ==== */

sm_status sm_cfg_check_keys(struct lctx *cx, unsigned nsets)
{
    sm_status st = check_applies(cx, cx->root, nsets);
    if (st == SM_OK) {
        st = check_required(cx);
    }
    if (st == SM_OK) {
        st = check_input(cx);
    }
    if (st == SM_OK) {
        st = check_unused(cx);
    }
    if (st == SM_OK) {
        st = check_shapes(cx);
    }
    if (st == SM_OK) {
        st = check_normalize(cx);
    }
    if (st == SM_OK) {
        st = check_output(cx);
    }
    if (st == SM_OK) {
        st = check_export(cx);
    }
    if (st == SM_OK) {
        st = check_rules(cx);
    }
    return st;
}
