/* The YAML configuration loader's entry points (SPEC §4, STYLE B10; declared in config.h): a file
 * read whole (a regular file of at most 16 MiB) -> the schema's defaults -> the YAML document
 * (config_yaml.c) walked against the schema (config_parse.c) -> the `--set key.path=value`
 * overrides in order -> the checks across keys and job-dependent defaults (config_rules.c) -> the
 * canonical effective text (sorted key=value lines, what the provenance hashes). On failure the
 * configuration is released and `err` holds one error placed at the key to change. */
#include <shardmill/sm_config.h>

#include "config_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <shardmill/alloc.h>

#define MAX_FILE_BYTES (16u << 20) /* a configuration is small; refuse anything huge */

/* ==== the effective text ==== */

static int cmp_rows(const void *a, const void *b)
{
    return strcmp(sm_cfg_keys[*(const unsigned *)a].path, sm_cfg_keys[*(const unsigned *)b].path);
}

static sm_status build_effective(struct lctx *cx)
{
    unsigned order[256];
    SM_ASSERT(sm_cfg_nkeys <= 256);
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        order[i] = i;
    }
    qsort(order, sm_cfg_nkeys, sizeof(order[0]), cmp_rows);
    struct sm_cfg_sb sb = {NULL, 0, 0, false};
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[order[i]];
        sm_cfg_sb_printf(&sb, "%s=", k->path);
        sm_cfg_format_value(&sb, k, cx->cfg, true);
        sm_cfg_sb_printf(&sb, "\n");
    }
    if (sb.oom || sb.p == NULL) {
        sm_free(sb.p);
        FAIL_NOMEM(cx, NULL);
    }
    cx->cfg->effective = sb.p;
    return SM_OK;
}

/* ==== entry points ==== */

static sm_status load(struct lctx *cx, const char *text, size_t len, unsigned nsets)
{
    struct sm_job_config *c = cx->cfg;
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        if ((k->type == SM_CFG_STRING || k->type == SM_CFG_NAME) && k->def != NULL) {
            const char *s;
            memcpy(&s, (const char *)c + k->off, sizeof(s));
            if (s == NULL) {
                FAIL_NOMEM(cx, NULL); /* sm_config_defaults could not allocate it */
            }
        }
    }
    c->source_path = sm_strdup(cx->name);
    if (c->source_path == NULL) {
        FAIL_NOMEM(cx, NULL);
    }
    struct ynode *root = NULL;
    SM_TRY(sm_cfg_yaml_parse(cx, text, len, &root));
    cx->root =
        root != NULL && !sm_cfg_node_is_null(root) ? root : NULL; /* "---" alone: no document */
    sm_status st = SM_OK;
    if (root != NULL && root->kind == Y_MAP) {
        st = sm_cfg_walk_map(cx, "", root);
    } else if (root != NULL && !sm_cfg_node_is_null(root)) {
        char got[64];
        st = SM_CFG_ERR(cx, root, SM_E_USAGE, "expected a mapping of configuration keys, got %s",
                        sm_cfg_node_describe(root, got, sizeof(got)));
    }
    for (unsigned i = 0; st == SM_OK && i < nsets; i++) {
        st = sm_cfg_apply_set(cx, i);
    }
    cx->in_set = false;
    if (st == SM_OK) {
        st = sm_cfg_check_keys(cx, nsets);
    }
    if (st == SM_OK) {
        st = build_effective(cx);
    }
    cx->root = NULL;
    sm_cfg_node_free(root);
    return st;
}

sm_status sm_config_load_string(const char *name, const char *text, size_t len,
                                const char *const *sets, unsigned nsets, struct sm_job_config *out,
                                struct sm_err *err)
{
    sm_config_defaults(out);
    struct lctx cx = {.cfg = out, .name = name, .sets = sets, .err = err};
    cx.orig = sm_calloc(sm_cfg_nkeys, sizeof(*cx.orig));
    sm_status st;
    if (cx.orig == NULL) {
        st = SM_CFG_ERR(&cx, NULL, SM_E_NOMEM, "out of memory");
    } else {
        st = load(&cx, text, len, nsets);
    }
    sm_free(cx.orig);
    if (st != SM_OK) {
        sm_config_destroy(out);
    }
    return st;
}

/* Reads a whole regular file into an exactly sized, NUL-terminated buffer. */
static sm_status read_file(const char *path, char **out, size_t *len, struct sm_err *err)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        int e = errno;
        SM_ERR(err, SM_E_USAGE, "cannot open configuration: %s", strerror(e));
        sm_err_cause(err, "errno", e);
        sm_err_where(err, "%s", path);
        return err->status;
    }
    struct stat st;
    sm_status rc = SM_OK;
    char *buf = NULL;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = SM_ERR(err, SM_E_USAGE, "cannot read configuration: not a regular file");
    } else if ((uint64_t)st.st_size > MAX_FILE_BYTES) {
        rc = SM_ERR(err, SM_E_USAGE, "configuration of %lld bytes is larger than %u",
                    (long long)st.st_size, MAX_FILE_BYTES);
    } else if ((buf = sm_malloc((size_t)st.st_size + 1)) == NULL) {
        rc = SM_ERR(err, SM_E_NOMEM, "out of memory");
    } else {
        size_t n = fread(buf, 1, (size_t)st.st_size, f);
        if (n != (size_t)st.st_size || ferror(f)) {
            int e = errno;
            rc = SM_ERR(err, SM_E_IO, "cannot read configuration: %s", strerror(e));
        }
        buf[n] = '\0';
        *len = n;
    }
    fclose(f);
    if (rc != SM_OK) {
        sm_free(buf);
        sm_err_where(err, "%s", path);
        return rc;
    }
    *out = buf;
    return SM_OK;
}

sm_status sm_config_load(const char *path, const char *const *sets, unsigned nsets,
                         struct sm_job_config *out, struct sm_err *err)
{
    char *text = NULL;
    size_t len = 0;
    sm_status st = read_file(path, &text, &len, err);
    if (st != SM_OK) {
        memset(out, 0, sizeof(*out));
        return st;
    }
    st = sm_config_load_string(path, text, len, sets, nsets, out, err);
    sm_free(text);
    return st;
}
