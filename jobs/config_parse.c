/* A YAML node -> the value of a schema row in struct sm_job_config (SPEC §4, STYLE B10): every
 * type's syntax (booleans, integers and sizes in range, finite decimals, strings, enum names with
 * a suggestion, lists, pairs, null for a key that may be unset), the table's defaults (parsed by
 * the same code from the text the table gives), and the document and each `--set key.path=value`
 * walked against the schema (unknown keys with the closest known one, duplicates, groups). The
 * node tree comes from config_yaml.c; the checks across keys are config_rules.c's. */
#include <shardmill/sm_config.h>

#include "config_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shardmill/alloc.h>
#include <shardmill/unit.h>

#include "jobs.h"

/* ==== scalar parsing ==== */

static bool parse_bool(const char *s, bool *out)
{
    if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0) {
        *out = true;
        return true;
    }
    if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 || strcmp(s, "FALSE") == 0) {
        *out = false;
        return true;
    }
    return false;
}

static bool parse_uint(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9') {
        return false;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

static bool parse_int(const char *s, int64_t *out)
{
    const char *d = (*s == '-' || *s == '+') ? s + 1 : s;
    if (*d < '0' || *d > '9') {
        return false;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0') {
        return false;
    }
    *out = (int64_t)v;
    return true;
}

/* Decimal numbers only: no inf, nan, hex floats or trailing text. */
static bool parse_float(const char *s, double *out)
{
    if (s[0] == '\0' || strspn(s, "0123456789+-.eE") != strlen(s)) {
        return false;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end != '\0' || !isfinite(v)) {
        return false;
    }
    *out = v;
    return true;
}

/* Index of name in "a|b|c", or -1. */
static int choice_index(const char *choices, const char *name)
{
    size_t n = strlen(name);
    int i = 0;
    for (const char *s = choices; s != NULL; i++) {
        const char *e = strchr(s, '|');
        size_t len = e != NULL ? (size_t)(e - s) : strlen(s);
        if (len == n && memcmp(s, name, n) == 0) {
            return i;
        }
        s = e != NULL ? e + 1 : NULL;
    }
    return -1;
}

/* The choice closest to name (distance <= 2) into buf, or false. */
static bool choice_suggest(const char *choices, const char *name, char *buf, size_t cap)
{
    unsigned best = 3;
    for (const char *s = choices; s != NULL;) {
        const char *e = strchr(s, '|');
        size_t len = e != NULL ? (size_t)(e - s) : strlen(s);
        char c[64];
        snprintf(c, sizeof(c), "%.*s", (int)len, s);
        unsigned d = sm_cfg_distance(name, c);
        if (d < best) {
            best = d;
            snprintf(buf, cap, "%s", c);
        }
        s = e != NULL ? e + 1 : NULL;
    }
    return best <= 2;
}

/* ==== values ==== */

static void put_uint(char *p, size_t size, uint64_t v)
{
    if (size == sizeof(uint32_t)) {
        uint32_t x = (uint32_t)v;
        memcpy(p, &x, sizeof(x));
    } else {
        memcpy(p, &v, sizeof(v));
    }
}

static void put_int(char *p, size_t size, int64_t v)
{
    if (size == sizeof(int32_t)) {
        int32_t x = (int32_t)v;
        memcpy(p, &x, sizeof(x));
    } else {
        memcpy(p, &v, sizeof(v));
    }
}

static void put_string(char *p, char *s)
{
    char *old;
    memcpy(&old, p, sizeof(old));
    sm_free(old);
    memcpy(p, &s, sizeof(s));
}

static sm_status range_error(struct lctx *cx, const struct sm_cfg_key *k, const struct ynode *n)
{
    struct sm_cfg_sb sb = {NULL, 0, 0, false};
    sm_cfg_format_range(&sb, k);
    char range[96];
    snprintf(range, sizeof(range), "%s", sb.p != NULL && !sb.oom ? sb.p : "?");
    sm_free(sb.p);
    FAIL_AT(cx, n, "%s: %s is out of range (%s)", k->path, n->text, range);
}

static sm_status type_error(struct lctx *cx, const struct sm_cfg_key *k, const struct ynode *n)
{
    char exp[160], got[64];
    FAIL_AT(cx, n, "%s: expected %s, got %s", k->path, sm_cfg_expected(k, exp, sizeof(exp)),
            sm_cfg_node_describe(n, got, sizeof(got)));
}

static sm_status parse_dims(struct lctx *cx, const struct sm_cfg_key *k, const struct ynode *n,
                            struct sm_cfg_dims *d)
{
    if (n->kind == Y_SCALAR && (k->flags & SM_CFGF_AUTO) != 0 && strcmp(n->text, "auto") == 0) {
        memset(d, 0, sizeof(*d));
        d->set = true;
        d->is_auto = true;
        return SM_OK;
    }
    if (n->kind != Y_SEQ) {
        return type_error(cx, k, n);
    }
    if (n->nkids > SM_CFG_MAX_DIMS) {
        FAIL_AT(cx, n, "%s: %u dimensions, at most %d", k->path, n->nkids, SM_CFG_MAX_DIMS);
    }
    if (n->nkids == 0 && (k->flags & SM_CFGF_NONEMPTY) != 0) {
        FAIL_AT(cx, n, "%s: expected at least one dimension, got []", k->path);
    }
    memset(d, 0, sizeof(*d));
    unsigned i = 0;
    for (const struct ynode *e = n->kids; e != NULL; e = e->next, i++) {
        uint64_t v;
        bool pos = (k->flags & SM_CFGF_POSITIVE) != 0;
        if (e->kind != Y_SCALAR || !parse_uint(e->text, &v) || (pos && v == 0)) {
            char got[64];
            FAIL_AT(cx, e, "%s[%u]: expected %s integer, got %s", k->path, i,
                    pos ? "a positive" : "a non-negative",
                    sm_cfg_node_describe(e, got, sizeof(got)));
        }
        d->v[i] = v;
    }
    d->n = i;
    d->set = true;
    return SM_OK;
}

/* Parses node n as the value of row k and stores it in cx->cfg. */
/* A null value: the key unset (NULLABLE keys only). */
static sm_status parse_null(struct lctx *cx, const struct sm_cfg_key *k, const struct ynode *n)
{
    char *p = (char *)cx->cfg + k->off;
    if ((k->flags & SM_CFGF_NULLABLE) == 0) {
        return type_error(cx, k, n);
    }
    if (k->type == SM_CFG_STRING || k->type == SM_CFG_NAME) {
        put_string(p, NULL);
    } else if (k->type == SM_CFG_DIMS) {
        memset(p, 0, sizeof(struct sm_cfg_dims));
    } else if (k->type == SM_CFG_FLOATS) {
        memset(p, 0, sizeof(struct sm_cfg_floats));
    } else if (k->type == SM_CFG_RANGE) {
        bool f = false;
        double z = 0;
        memcpy((char *)cx->cfg + k->off_set, &f, sizeof(f));
        memcpy(p, &z, sizeof(z));
        memcpy((char *)cx->cfg + k->off2, &z, sizeof(z));
    }
    return SM_OK;
}

/* FLOATS: a list of finite (POSITIVE: > 0) numbers. */
static sm_status parse_floats(struct lctx *cx, const struct sm_cfg_key *k, const struct ynode *n)
{
    char *p = (char *)cx->cfg + k->off;
    struct sm_cfg_floats f;
    memset(&f, 0, sizeof(f));
    if (n->kind != Y_SEQ) {
        return type_error(cx, k, n);
    }
    if (n->nkids > SM_CFG_MAX_DIMS) {
        FAIL_AT(cx, n, "%s: %u values, at most %d", k->path, n->nkids, SM_CFG_MAX_DIMS);
    }
    const bool pos = (k->flags & SM_CFGF_POSITIVE) != 0;
    for (const struct ynode *e = n->kids; e != NULL; e = e->next, f.n++) {
        if (e->kind != Y_SCALAR || !parse_float(e->text, &f.v[f.n]) || (pos && !(f.v[f.n] > 0))) {
            char got[64];
            FAIL_AT(cx, e, "%s[%u]: expected a %s number, got %s", k->path, f.n,
                    pos ? "positive" : "finite", sm_cfg_node_describe(e, got, sizeof(got)));
        }
    }
    f.set = true;
    memcpy(p, &f, sizeof(f));
    return SM_OK;
}

/* RANGE: a pair [lo, hi] of finite numbers, lo < hi. */
static sm_status parse_range(struct lctx *cx, const struct sm_cfg_key *k, const struct ynode *n)
{
    char *p = (char *)cx->cfg + k->off;
    double v[2];
    if (n->kind != Y_SEQ || n->nkids != 2) {
        if (n->kind == Y_SEQ) {
            FAIL_AT(cx, n, "%s: expected a pair [lo, hi], got %u values", k->path, n->nkids);
        }
        return type_error(cx, k, n);
    }
    unsigned i = 0;
    for (const struct ynode *e = n->kids; e != NULL; e = e->next, i++) {
        if (e->kind != Y_SCALAR || !parse_float(e->text, &v[i])) {
            char got[64];
            FAIL_AT(cx, e, "%s[%u]: expected a finite number, got %s", k->path, i,
                    sm_cfg_node_describe(e, got, sizeof(got)));
        }
    }
    if (!(v[0] < v[1])) {
        FAIL_AT(cx, n, "%s: lo %s must be below hi %s", k->path, n->kids->text,
                n->kids->next->text);
    }
    bool t = true;
    memcpy(p, &v[0], sizeof(v[0]));
    memcpy((char *)cx->cfg + k->off2, &v[1], sizeof(v[1]));
    memcpy((char *)cx->cfg + k->off_set, &t, sizeof(t));
    return SM_OK;
}

/* A scalar key: bool, integers and sizes in range, float, string, enum or name. */
static sm_status parse_scalar(struct lctx *cx, const struct sm_cfg_key *k, const struct ynode *n)
{
    char *p = (char *)cx->cfg + k->off;
    const char *t = n->text;
    switch (k->type) {
    case SM_CFG_BOOL: {
        bool v;
        if (!parse_bool(t, &v)) {
            return type_error(cx, k, n);
        }
        memcpy(p, &v, sizeof(v));
        return SM_OK;
    }
    case SM_CFG_UINT:
    case SM_CFG_SIZE: {
        uint64_t v;
        if ((k->flags & SM_CFGF_AUTO) != 0 && strcmp(t, "auto") == 0) {
            put_uint(p, k->size, 0);
            return SM_OK;
        }
        bool ok = k->type == SM_CFG_SIZE ? sm_parse_size(t, &v) : parse_uint(t, &v);
        if (!ok) {
            if (k->type == SM_CFG_UINT && t[0] == '-' && parse_uint(t + 1, &v)) {
                return range_error(cx, k, n);
            }
            return type_error(cx, k, n);
        }
        if (v < (uint64_t)k->min || v > k->max) {
            return range_error(cx, k, n);
        }
        put_uint(p, k->size, v);
        return SM_OK;
    }
    case SM_CFG_INT: {
        int64_t v;
        if (!parse_int(t, &v)) {
            return type_error(cx, k, n);
        }
        if (v < k->min || (v > 0 && (uint64_t)v > k->max)) {
            return range_error(cx, k, n);
        }
        put_int(p, k->size, v);
        return SM_OK;
    }
    case SM_CFG_FLOAT: {
        double v;
        if (!parse_float(t, &v)) {
            return type_error(cx, k, n);
        }
        if ((k->flags & SM_CFGF_NONZERO) != 0 && v == 0) {
            FAIL_AT(cx, n, "%s: must not be 0", k->path);
        }
        memcpy(p, &v, sizeof(v));
        return SM_OK;
    }
    case SM_CFG_STRING: {
        if ((k->flags & SM_CFGF_NONEMPTY) != 0 && t[0] == '\0') {
            FAIL_AT(cx, n, "%s: must not be empty", k->path);
        }
        if ((k->flags & SM_CFGF_SPACE_UNIT) != 0 && sm_unit_space_name(t) == NULL) {
            char why[SM_UNIT_REFUSAL_MAX];
            FAIL_AT(cx, n, "%s: %s", k->path, sm_unit_space_refusal(t, why, sizeof(why)));
        }
        char *s = sm_strdup(t);
        if (s == NULL) {
            FAIL_NOMEM(cx, n);
        }
        put_string(p, s);
        return SM_OK;
    }
    case SM_CFG_ENUM:
    case SM_CFG_NAME: {
        int i = choice_index(sm_cfg_choices(k), t);
        if (i < 0) {
            char exp[160], got[64], near[64];
            if (choice_suggest(sm_cfg_choices(k), t, near, sizeof(near))) {
                FAIL_AT(cx, n, "%s: expected %s, got %s (did you mean '%s'?)", k->path,
                        sm_cfg_expected(k, exp, sizeof(exp)),
                        sm_cfg_node_describe(n, got, sizeof(got)), near);
            }
            return type_error(cx, k, n);
        }
        if (k->type == SM_CFG_ENUM) {
            memcpy(p, &i, sizeof(i));
            return SM_OK;
        }
        char *s = sm_strdup(t);
        if (s == NULL) {
            FAIL_NOMEM(cx, n);
        }
        put_string(p, s);
        return SM_OK;
    }
    case SM_CFG_DIMS:
    case SM_CFG_RANGE:
    case SM_CFG_FLOATS:
        break; /* handled above */
    }
    return SM_OK;
}

static sm_status parse_value(struct lctx *cx, const struct sm_cfg_key *k, const struct ynode *n)
{
    if (sm_cfg_node_is_null(n)) {
        return parse_null(cx, k, n);
    }
    if (k->type == SM_CFG_DIMS) {
        struct sm_cfg_dims d;
        SM_TRY(parse_dims(cx, k, n, &d));
        memcpy((char *)cx->cfg + k->off, &d, sizeof(d));
        return SM_OK;
    }
    if (k->type == SM_CFG_FLOATS) {
        return parse_floats(cx, k, n);
    }
    if (k->type == SM_CFG_RANGE) {
        return parse_range(cx, k, n);
    }
    if (n->kind != Y_SCALAR) {
        return type_error(cx, k, n);
    }
    return parse_scalar(cx, k, n);
}

/* ==== defaults ==== */

/* Builds a node from a default's text: a scalar, a "quoted" string or a "[a, b, c]" list. */
static void default_node(const char *def, char *buf, size_t cap, struct ynode *n,
                         struct ynode *kids, unsigned maxkids)
{
    memset(n, 0, sizeof(*n));
    snprintf(buf, cap, "%s", def);
    size_t len = strlen(buf);
    if (buf[0] == '[') {
        n->kind = Y_SEQ;
        char *s = buf + 1;
        while (*s != '\0' && *s != ']' && n->nkids < maxkids) {
            s += strspn(s, " ");
            struct ynode *e = &kids[n->nkids];
            memset(e, 0, sizeof(*e));
            e->kind = Y_SCALAR;
            e->plain = true;
            e->text = s;
            s += strcspn(s, ",]");
            char stop = *s;
            *s = '\0';
            if (n->nkids > 0) {
                kids[n->nkids - 1].next = e;
            } else {
                n->kids = e;
            }
            n->nkids++;
            if (stop != ',') {
                break;
            }
            s++;
        }
        return;
    }
    n->kind = Y_SCALAR;
    if (len >= 2 && buf[0] == '"' && buf[len - 1] == '"') {
        buf[len - 1] = '\0';
        n->text = buf + 1;
        n->plain = false;
    } else {
        n->text = buf;
        n->plain = true;
    }
}

void sm_config_defaults(struct sm_job_config *c)
{
    memset(c, 0, sizeof(*c));
    struct sm_err err;
    sm_err_clear(&err);
    struct lctx cx = {.cfg = c, .name = "<default>", .err = &err};
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        if (k->def == NULL) {
            continue;
        }
        char buf[128];
        struct ynode n, kids[SM_CFG_MAX_DIMS];
        default_node(k->def, buf, sizeof(buf), &n, kids, SM_CFG_MAX_DIMS);
        sm_status st = parse_value(&cx, k, &n);
        SM_ASSERT(st == SM_OK || st == SM_E_NOMEM); /* the table's defaults are valid */
        (void)st;
        sm_err_clear(&err);
    }
}

void sm_config_destroy(struct sm_job_config *c)
{
    if (c == NULL) {
        return;
    }
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        if (k->type == SM_CFG_STRING || k->type == SM_CFG_NAME) {
            put_string((char *)c + k->off, NULL);
        }
    }
    sm_free(c->source_path);
    sm_free(c->effective);
    memset(c, 0, sizeof(*c));
}

/* ==== walking the document against the schema ==== */

static sm_status apply(struct lctx *cx, const char *path, const struct ynode *key,
                       const struct ynode *val);

sm_status sm_cfg_walk_map(struct lctx *cx, const char *prefix, const struct ynode *map)
{
    for (const struct ynode *key = map->kids; key != NULL; key = key->next->next) {
        const struct ynode *val = key->next;
        char got[64];
        if (key->kind != Y_SCALAR || sm_cfg_node_is_null(key)) {
            FAIL_AT(cx, key, "expected a key name%s%s, got %s", prefix[0] ? " in " : "", prefix,
                    sm_cfg_node_describe(key, got, sizeof(got)));
        }
        for (const struct ynode *k2 = map->kids; k2 != key; k2 = k2->next->next) {
            if (k2->kind == Y_SCALAR && strcmp(k2->text, key->text) == 0) {
                FAIL_AT(cx, key, "duplicate key '%s%s%s' (first at %d:%d)", prefix,
                        prefix[0] ? "." : "", key->text, k2->line, k2->col);
            }
        }
        char path[MAX_PATH_LEN];
        int n = snprintf(path, sizeof(path), "%s%s%s", prefix, prefix[0] ? "." : "", key->text);
        if (n < 0 || (size_t)n >= sizeof(path)) {
            FAIL_AT(cx, key, "unknown key '%.60s...' (too long)", path);
        }
        SM_TRY(apply(cx, path, key, val));
    }
    return SM_OK;
}

/* Applies value `val` to dotted `path` (a key or a group); `key` is its key node (NULL for
 * --set). */
static sm_status apply(struct lctx *cx, const char *path, const struct ynode *key,
                       const struct ynode *val)
{
    const struct ynode *at = key != NULL ? key : val;
    const struct sm_cfg_key *k = sm_cfg_find(path);
    if (k != NULL) {
        struct origin *o = &cx->orig[row_index(k)];
        if (!cx->in_set && o->kind == ORIGIN_FILE) {
            FAIL_AT(cx, at, "duplicate key '%s' (first at %d:%d)", path, o->line, o->col);
        }
        SM_TRY(parse_value(cx, k, val));
        o->kind = cx->in_set ? ORIGIN_SET : ORIGIN_FILE;
        o->line = at->line;
        o->col = at->col;
        o->set = cx->cur_set;
        return SM_OK;
    }
    if (sm_cfg_is_group(path)) {
        if (val->kind == Y_MAP) {
            return sm_cfg_walk_map(cx, path, val);
        }
        if (sm_cfg_node_is_null(val)) {
            return SM_OK; /* "export:" with every key commented out */
        }
        char got[64];
        FAIL_AT(cx, val, "%s: expected a mapping, got %s", path,
                sm_cfg_node_describe(val, got, sizeof(got)));
    }
    char near[MAX_PATH_LEN];
    if (sm_cfg_suggest(path, near, sizeof(near))) {
        FAIL_AT(cx, at, "unknown key '%s' (did you mean '%s'?)", path, near);
    }
    FAIL_AT(cx, at, "unknown key '%s' (see docs/CONFIG.md)", path);
}

sm_status sm_cfg_apply_set(struct lctx *cx, unsigned i)
{
    const char *s = cx->sets[i];
    const char *eq = strchr(s, '=');
    cx->in_set = true;
    cx->cur_set = i;
    if (eq == NULL || eq == s) {
        FAIL_AT(cx, NULL, "expected key.path=value, got '%.60s'", s);
    }
    char path[MAX_PATH_LEN];
    if ((size_t)(eq - s) >= sizeof(path)) {
        FAIL_AT(cx, NULL, "unknown key '%.60s...' (too long)", s);
    }
    memcpy(path, s, (size_t)(eq - s));
    path[eq - s] = '\0';
    struct ynode *val = NULL;
    SM_TRY(sm_cfg_yaml_parse(cx, eq + 1, strlen(eq + 1), &val));
    static const struct ynode empty = {.kind = Y_SCALAR, .plain = true, .text = (char *)""};
    sm_status st = apply(cx, path, NULL, val != NULL ? val : &empty);
    sm_cfg_node_free(val);
    return st;
}
