/* The YAML configuration loader (SPEC §4, STYLE B10): libyaml events -> a small node tree that
 * keeps the 1-based line:column of every node -> walked against the schema table -> struct
 * sm_job_config; then `--set key.path=value` overrides, checks across keys, job-dependent
 * defaults and the canonical effective text. Invariant: every error is SM_E_USAGE (or
 * SM_E_NOMEM) with `where` = "FILE:LINE:COL" or "--set KEY" and `what` naming the key.
 * libyaml is loaded with dlopen by the first configuration parsed: `--version`, `info`, `read`
 * and the other commands without a YAML file do not map it (docs/BENCHMARKS.md "Start-up"). The
 * compiler checks every entry point against <yaml.h> (the _Static_asserts below). */
#include <shardmill/sm_config.h>

#include "config_schema.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include <shardmill/alloc.h>
#include <shardmill/module.h>
#include <shardmill/path.h>
#include <shardmill/unit.h>

#include "config.h"
#include "jobs.h"

#define MAX_DEPTH 64               /* nesting of YAML collections */
#define MAX_FILE_BYTES (16u << 20) /* a configuration is small; refuse anything huge */
#define MAX_PATH_LEN 128           /* longest dotted key considered */

/* ==== the node tree ==== */

enum ykind { Y_SCALAR, Y_MAP, Y_SEQ };

struct ynode {
    enum ykind kind;
    int line, col;  /* 1-based */
    bool plain;     /* scalar written without quotes: only plain scalars can be null */
    char *text;     /* scalar text, NUL-terminated (owned) */
    unsigned nkids; /* map: keys and values alternate; seq: items */
    struct ynode *kids, *last, *next;
};

static void ynode_free(struct ynode *n)
{
    while (n != NULL) {
        struct ynode *next = n->next;
        ynode_free(n->kids);
        sm_free(n->text);
        sm_free(n);
        n = next;
    }
}

static bool is_null(const struct ynode *n)
{
    if (n->kind != Y_SCALAR || !n->plain) {
        return false;
    }
    const char *t = n->text;
    return t[0] == '\0' || strcmp(t, "~") == 0 || strcmp(t, "null") == 0 ||
           strcmp(t, "Null") == 0 || strcmp(t, "NULL") == 0;
}

/* ==== loader context and error placement ==== */

enum origin_kind { ORIGIN_DEFAULT, ORIGIN_FILE, ORIGIN_SET };

struct origin {
    enum origin_kind kind;
    int line, col; /* ORIGIN_FILE: the key's position */
    unsigned set;  /* ORIGIN_SET: index of the --set */
};

struct lctx {
    struct sm_job_config *cfg;
    const char *name; /* the file, in messages */
    const char *const *sets;
    bool in_set; /* applying sets[cur_set] */
    unsigned cur_set;
    struct origin *orig;      /* one per schema row (NULL while applying defaults) */
    const struct ynode *root; /* the file's document, for placing errors on missing keys */
    struct sm_err *err;
};

/* The key part of "key=value" (up to '='). */
static int set_key_len(const char *set)
{
    const char *eq = strchr(set, '=');
    return eq != NULL ? (int)(eq - set) : (int)strlen(set);
}

static void where_set(struct lctx *cx, unsigned i)
{
    sm_err_where(cx->err, "--set %.*s", set_key_len(cx->sets[i]), cx->sets[i]);
}

static void where_node(struct lctx *cx, const struct ynode *n)
{
    if (cx->in_set) {
        where_set(cx, cx->cur_set);
    } else if (n != NULL) {
        sm_err_where(cx->err, "%s:%d:%d", cx->name, n->line, n->col);
    } else {
        sm_err_where(cx->err, "%s", cx->name);
    }
}

static sm_status fail_at(struct lctx *cx, const struct ynode *n, sm_status st, const char *file,
                         int line, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static sm_status fail_at(struct lctx *cx, const struct ynode *n, sm_status st, const char *file,
                         int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sm_err_vset(cx->err, st, file, line, fmt, ap);
    va_end(ap);
    where_node(cx, n);
    return cx->err->status;
}

#define YAML_LIB "libyaml-0.so.2"

/* The libyaml entry points used here, resolved once by dlsym; each type is the type of the
 * function <yaml.h> declares (checked unevaluated: no link reference). */
typedef int (*parser_initialize_fn)(yaml_parser_t *parser);
typedef void (*parser_set_input_string_fn)(yaml_parser_t *parser, const unsigned char *input,
                                           size_t size);
typedef int (*parser_parse_fn)(yaml_parser_t *parser, yaml_event_t *event);
typedef void (*parser_delete_fn)(yaml_parser_t *parser);
typedef void (*event_delete_fn)(yaml_event_t *event);
#define SAME_TYPE(fn, type)                                                                        \
    _Static_assert(_Generic(&fn, type: 1, default: 0), #fn " differs from <yaml.h>")
SAME_TYPE(yaml_parser_initialize, parser_initialize_fn);
SAME_TYPE(yaml_parser_set_input_string, parser_set_input_string_fn);
SAME_TYPE(yaml_parser_parse, parser_parse_fn);
SAME_TYPE(yaml_parser_delete, parser_delete_fn);
SAME_TYPE(yaml_event_delete, event_delete_fn);

static struct {
    parser_set_input_string_fn parser_set_input_string;
    parser_parse_fn parser_parse;
    parser_delete_fn parser_delete;
    event_delete_fn event_delete;
    parser_initialize_fn parser_initialize; /* last: non-NULL means all loaded */
} y;
static char y_error[200];
static pthread_once_t y_once = PTHREAD_ONCE_INIT;

static void y_load(void)
{
    static const struct sm_library_sym syms[] = {
        {"yaml_parser_set_input_string", (void **)&y.parser_set_input_string},
        {"yaml_parser_parse", (void **)&y.parser_parse},
        {"yaml_parser_delete", (void **)&y.parser_delete},
        {"yaml_event_delete", (void **)&y.event_delete},
        {"yaml_parser_initialize", (void **)&y.parser_initialize},
    };
    if (!sm_library_load(YAML_LIB, syms, sizeof(syms) / sizeof(syms[0]), y_error,
                         sizeof(y_error))) {
        return;
    }
}

#define FAIL_AT(cx, node, ...)                                                                     \
    return fail_at((cx), (node), SM_E_USAGE, __FILE__, __LINE__, __VA_ARGS__)
#define FAIL_NOMEM(cx, node)                                                                       \
    return fail_at((cx), (node), SM_E_NOMEM, __FILE__, __LINE__, "out of memory")

/* "'text'" (shortened), "null", "a mapping" or "a sequence": what a value was. */
static const char *describe(const struct ynode *n, char *buf, size_t cap)
{
    if (n->kind == Y_MAP) {
        return "a mapping";
    }
    if (n->kind == Y_SEQ) {
        return "a sequence";
    }
    if (is_null(n)) {
        return "null";
    }
    size_t len = strlen(n->text);
    snprintf(buf, cap, "'%.48s%s'", n->text, len > 48 ? "..." : "");
    return buf;
}

/* ==== YAML text -> node tree ==== */

struct ybuild {
    yaml_parser_t parser;
    struct lctx *cx;
    const char *text; /* for turning a reader error's byte offset into line:col */
    size_t len;
};

/* Line and column (1-based) of a byte offset. */
static void offset_to_mark(const char *text, size_t len, size_t off, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static sm_status parser_error(struct ybuild *b)
{
    const yaml_parser_t *p = &b->parser;
    struct ynode at = {.kind = Y_SCALAR};
    if (p->error == YAML_MEMORY_ERROR) {
        FAIL_NOMEM(b->cx, NULL);
    }
    const char *problem = p->problem != NULL ? p->problem : "unknown libyaml error";
    if (p->error == YAML_READER_ERROR) {
        offset_to_mark(b->text, b->len, p->problem_offset, &at.line, &at.col);
        FAIL_AT(b->cx, &at, "malformed YAML: %s", problem);
    }
    at.line = (int)p->problem_mark.line + 1;
    at.col = (int)p->problem_mark.column + 1;
    if (p->context != NULL) {
        FAIL_AT(b->cx, &at, "malformed YAML: %s (%s at %d:%d)", problem, p->context,
                (int)p->context_mark.line + 1, (int)p->context_mark.column + 1);
    }
    FAIL_AT(b->cx, &at, "malformed YAML: %s", problem);
}

static sm_status next_event(struct ybuild *b, yaml_event_t *ev)
{
    if (!y.parser_parse(&b->parser, ev)) {
        return parser_error(b);
    }
    return SM_OK;
}

static sm_status build_node(struct ybuild *b, yaml_event_t *ev, unsigned depth, struct ynode **out);

/* Reads the items of a collection up to its end event, appending them to n. */
static sm_status build_items(struct ybuild *b, struct ynode *n, yaml_event_type_t end,
                             unsigned depth)
{
    for (;;) {
        yaml_event_t ev;
        SM_TRY(next_event(b, &ev));
        if (ev.type == end) {
            y.event_delete(&ev);
            return SM_OK;
        }
        struct ynode *kid = NULL;
        SM_TRY(build_node(b, &ev, depth + 1, &kid));
        if (n->last == NULL) {
            n->kids = kid;
        } else {
            n->last->next = kid;
        }
        n->last = kid;
        n->nkids++;
    }
}

/* Builds the node that starts with event ev (consumed). */
static sm_status build_node(struct ybuild *b, yaml_event_t *ev, unsigned depth, struct ynode **out)
{
    struct ynode at = {.kind = Y_SCALAR,
                       .line = (int)ev->start_mark.line + 1,
                       .col = (int)ev->start_mark.column + 1};
    const yaml_char_t *anchor = NULL, *tag = NULL;
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        anchor = ev->data.scalar.anchor;
        tag = ev->data.scalar.tag;
        break;
    case YAML_SEQUENCE_START_EVENT:
        anchor = ev->data.sequence_start.anchor;
        tag = ev->data.sequence_start.tag;
        break;
    case YAML_MAPPING_START_EVENT:
        anchor = ev->data.mapping_start.anchor;
        tag = ev->data.mapping_start.tag;
        break;
    case YAML_ALIAS_EVENT: {
        char name[64];
        snprintf(name, sizeof(name), "%s", (const char *)ev->data.alias.anchor);
        y.event_delete(ev);
        FAIL_AT(b->cx, &at, "YAML aliases (*%s) are not supported: write the value out", name);
    }
    default: {
        int type = (int)ev->type;
        y.event_delete(ev);
        return sm_err_set(b->cx->err, SM_E_INTERNAL, __FILE__, __LINE__, "unexpected YAML event %d",
                          type);
    }
    }
    if (anchor != NULL || tag != NULL) {
        char name[64];
        snprintf(name, sizeof(name), "%s", (const char *)(anchor != NULL ? anchor : tag));
        y.event_delete(ev);
        if (anchor != NULL) {
            FAIL_AT(b->cx, &at, "YAML anchors (&%s) are not supported", name);
        }
        FAIL_AT(b->cx, &at, "YAML tags (%s) are not supported", name);
    }
    if (depth > MAX_DEPTH) {
        y.event_delete(ev);
        FAIL_AT(b->cx, &at, "YAML nested deeper than %d levels", MAX_DEPTH);
    }
    struct ynode *n = sm_calloc(1, sizeof(*n));
    if (n == NULL) {
        y.event_delete(ev);
        FAIL_NOMEM(b->cx, &at);
    }
    n->line = at.line;
    n->col = at.col;
    sm_status st = SM_OK;
    if (ev->type == YAML_SCALAR_EVENT) {
        size_t len = ev->data.scalar.length;
        n->kind = Y_SCALAR;
        n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        n->text = sm_malloc(len + 1);
        if (n->text == NULL) {
            st = fail_at(b->cx, &at, SM_E_NOMEM, __FILE__, __LINE__, "out of memory");
        } else {
            memcpy(n->text, ev->data.scalar.value, len);
            n->text[len] = '\0';
            if (strlen(n->text) != len) {
                st = fail_at(b->cx, &at, SM_E_USAGE, __FILE__, __LINE__,
                             "a NUL character in a YAML scalar");
            }
        }
        y.event_delete(ev);
    } else {
        bool map = ev->type == YAML_MAPPING_START_EVENT;
        n->kind = map ? Y_MAP : Y_SEQ;
        y.event_delete(ev);
        st = build_items(b, n, map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT, depth);
    }
    if (st != SM_OK) {
        ynode_free(n);
        return st;
    }
    *out = n;
    return SM_OK;
}

/* Parses one YAML document; *root is NULL for an empty stream. */
static sm_status parse_yaml(struct lctx *cx, const char *text, size_t len, struct ynode **root)
{
    struct ybuild b = {.cx = cx, .text = text, .len = len};
    *root = NULL;
    pthread_once(&y_once, y_load);
    if (y.parser_initialize == NULL) {
        return fail_at(cx, NULL, SM_E_IO, __FILE__, __LINE__,
                       "reading a YAML configuration needs libyaml (%s, Debian package "
                       "libyaml-0-2): %s",
                       YAML_LIB, y_error);
    }
    if (!y.parser_initialize(&b.parser)) {
        FAIL_NOMEM(cx, NULL);
    }
    y.parser_set_input_string(&b.parser, (const unsigned char *)text, len);
    yaml_event_t ev;
    sm_status st = next_event(&b, &ev); /* STREAM-START */
    if (st == SM_OK) {
        y.event_delete(&ev);
        st = next_event(&b, &ev);
    }
    if (st == SM_OK && ev.type == YAML_DOCUMENT_START_EVENT) {
        y.event_delete(&ev);
        st = next_event(&b, &ev);
        if (st == SM_OK) {
            st = build_node(&b, &ev, 0, root);
        }
        if (st == SM_OK) {
            st = next_event(&b, &ev); /* DOCUMENT-END */
        }
        if (st == SM_OK) {
            y.event_delete(&ev);
            st = next_event(&b, &ev);
        }
        if (st == SM_OK && ev.type == YAML_DOCUMENT_START_EVENT) {
            struct ynode at = {.kind = Y_SCALAR,
                               .line = (int)ev.start_mark.line + 1,
                               .col = (int)ev.start_mark.column + 1};
            y.event_delete(&ev);
            st = fail_at(cx, &at, SM_E_USAGE, __FILE__, __LINE__,
                         "a second YAML document: a configuration is one document");
        }
    }
    if (st == SM_OK) {
        y.event_delete(&ev); /* STREAM-END */
    }
    y.parser_delete(&b.parser);
    if (st != SM_OK) {
        ynode_free(*root);
        *root = NULL;
    }
    return st;
}

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
            describe(n, got, sizeof(got)));
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
                    pos ? "a positive" : "a non-negative", describe(e, got, sizeof(got)));
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
                    pos ? "positive" : "finite", describe(e, got, sizeof(got)));
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
                    describe(e, got, sizeof(got)));
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
        int i = choice_index(k->choices, t);
        if (i < 0) {
            char exp[160], got[64], near[64];
            if (choice_suggest(k->choices, t, near, sizeof(near))) {
                FAIL_AT(cx, n, "%s: expected %s, got %s (did you mean '%s'?)", k->path,
                        sm_cfg_expected(k, exp, sizeof(exp)), describe(n, got, sizeof(got)), near);
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
    if (is_null(n)) {
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

static unsigned row_index(const struct sm_cfg_key *k)
{
    return (unsigned)(k - sm_cfg_keys);
}

static sm_status apply(struct lctx *cx, const char *path, const struct ynode *key,
                       const struct ynode *val);

static sm_status walk_map(struct lctx *cx, const char *prefix, const struct ynode *map)
{
    for (const struct ynode *key = map->kids; key != NULL; key = key->next->next) {
        const struct ynode *val = key->next;
        char got[64];
        if (key->kind != Y_SCALAR || is_null(key)) {
            FAIL_AT(cx, key, "expected a key name%s%s, got %s", prefix[0] ? " in " : "", prefix,
                    describe(key, got, sizeof(got)));
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
            return walk_map(cx, path, val);
        }
        if (is_null(val)) {
            return SM_OK; /* "export:" with every key commented out */
        }
        char got[64];
        FAIL_AT(cx, val, "%s: expected a mapping, got %s", path, describe(val, got, sizeof(got)));
    }
    char near[MAX_PATH_LEN];
    if (sm_cfg_suggest(path, near, sizeof(near))) {
        FAIL_AT(cx, at, "unknown key '%s' (did you mean '%s'?)", path, near);
    }
    FAIL_AT(cx, at, "unknown key '%s' (see docs/CONFIG.md)", path);
}

static sm_status apply_set(struct lctx *cx, unsigned i)
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
    SM_TRY(parse_yaml(cx, eq + 1, strlen(eq + 1), &val));
    static const struct ynode empty = {.kind = Y_SCALAR, .plain = true, .text = (char *)""};
    sm_status st = apply(cx, path, NULL, val != NULL ? val : &empty);
    ynode_free(val);
    return st;
}

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
        where_set(cx, o->set);
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

#define FAIL_KEY(cx, path, ...) return fail_key((cx), (path), __FILE__, __LINE__, __VA_ARGS__)

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

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
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
        st = parse_yaml(cx, eq + 1, strlen(eq + 1), &val);
        static const struct ynode empty = {.kind = Y_SCALAR, .plain = true, .text = (char *)""};
        if (st == SM_OK) {
            st = check_applies_node(cx, path, NULL, val != NULL ? val : &empty);
        }
        ynode_free(val);
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

/* input.format of a job that writes (convert, ingest): zarr, n5 or a source (raw, nifti, tiff,
 * hdf5), by default from the file's name (ingest: raw; convert: zarr), with the source's keys. */
static sm_status check_source(struct lctx *cx)
{
    struct sm_job_config *c = cx->cfg;
    const char *s = c->input.store;
    bool nifti = ends_with(s, ".nii") || ends_with(s, ".nii.gz");
    bool tiff = ends_with(s, ".tif") || ends_with(s, ".tiff") || ends_with(s, ".TIF") ||
                ends_with(s, ".TIFF");
    bool hdf5 = ends_with(s, ".h5") || ends_with(s, ".hdf5") || ends_with(s, ".nxs");
    SM_TRY(set_default_name(cx, &c->input.format,
                            nifti                     ? "nifti"
                            : tiff                    ? "tiff"
                            : hdf5                    ? "hdf5"
                            : c->job == SM_JOB_INGEST ? "raw"
                                                      : "zarr"));
    if (strcmp(c->input.format, "hdf5") == 0) {
        SM_TRY(check_h5_dataset(cx, c->input.hdf5_dataset));
    }
    if (strcmp(c->input.format, "raw") == 0) {
        if (c->input.raw_dtype == NULL) {
            FAIL_KEY(cx, "input.raw.dtype",
                     "missing required key 'input.raw.dtype' (required to read raw input)");
        }
        if (!c->input.raw_shape.set) {
            FAIL_KEY(cx, "input.raw.shape",
                     "missing required key 'input.raw.shape' (required to read raw input)");
        }
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

/* normalize.divisor belongs to mode scale, normalize.lo and .hi to window and percentile: given
 * with another mode they would be ignored, so they are refused. */
static sm_status check_mode_keys(struct lctx *cx)
{
    static const char *const keys[] = {"normalize.divisor", "normalize.lo", "normalize.hi"};
    static const char *const modes[] = {"scale", "window and percentile", "window and percentile"};
    static const char *const names[] = {"scale", "window", "percentile", "none"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (given(cx, keys[i]) && !sm_cfg_used(sm_cfg_find(keys[i]), cx->cfg)) {
            FAIL_KEY(cx, keys[i], "`%s` is used by normalize.mode %s only (the mode is %s)",
                     keys[i], modes[i], names[cx->cfg->normalize.mode]);
        }
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
    if (c->normalize.mode == SM_NORM_SCALE || c->normalize.mode == SM_NORM_NONE) {
        return SM_OK;
    }
    const char *mode = sm_norm_mode_name(c->normalize.mode);
    static const char *const ends[] = {"normalize.lo", "normalize.hi"};
    for (size_t i = 0; i < 2; i++) {
        if (!given(cx, ends[i])) {
            FAIL_KEY(cx, "normalize.mode", "missing required key '%s' (required by %s %s)", ends[i],
                     "normalize.mode", mode);
        }
    }
    double lo = c->normalize.lo, hi = c->normalize.hi;
    if (c->normalize.mode == SM_NORM_PERCENTILE) {
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
    if ((strcmp(codec, "gzip") == 0 || strcmp(codec, "blosc") == 0) &&
        (c->output.codec_level < 0 || c->output.codec_level > 9)) {
        FAIL_KEY(cx, given(cx, "output.codec.level") ? "output.codec.level" : "output.codec.name",
                 "output.codec.level: %s level %" PRId64 " is out of range (0 to 9)", codec,
                 c->output.codec_level);
    }
    if ((given(cx, "output.ome.levels") || given(cx, "output.ome.downsample")) &&
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
 * (docs/CONFIG.md "Rules between keys" lists them, from sm_cfg_rules in config_schema.c) ---- */

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
    const bool raw = writes && strcmp(c->input.format, "raw") == 0;
    if (raw) {
        keys[n].path = "input.raw.shape", keys[n++].d = &c->input.raw_shape;
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
    const bool tiff = writes && strcmp(c->input.format, "tiff") == 0;
    if (ref < 0) {
        /* a TIFF volume always has 3 axes (z, y, x): input.spacing/origin are checked anyway */
        return tiff ? check_geometry_axes(cx, 3, "a TIFF input") : SM_OK;
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
    sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "cannot write the report '%s': %s%s%s", path,
               why, dir != NULL ? " " : "", dir != NULL ? dir : "");
    sm_err_where(err, "%s", key);
    return err->status;
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
            st = fail_key(cx, "export.hdf5.dataset", __FILE__, __LINE__,
                          "export.hdf5.dataset: the dataset name %s (got '%.100s')", why,
                          c->export_.hdf5_dataset);
        } else if (strcmp(c->export_.hdf5_dataset, "/histogram") == 0 ||
                   strncmp(c->export_.hdf5_dataset, "/histogram/", 11) == 0) {
            st = fail_key(cx, "export.hdf5.dataset", __FILE__, __LINE__,
                          "export.hdf5.dataset: '%s' collides with the dataset '/histogram' the "
                          "export also writes",
                          c->export_.hdf5_dataset);
        }
        if (st == SM_OK) {
            st = check_path(cx, "export.hdf5.path", "export", "file", c->export_.hdf5_path, &ex);
        }
        if (st == SM_OK && (sm_path_is_within(ex, out) || sm_path_is_within(out, ex))) {
            st = fail_key(cx, "export.hdf5.path", __FILE__, __LINE__,
                          "export.hdf5.path '%s' %s the output '%s' (output.path; give a path "
                          "beside it)",
                          ex, sm_path_is_within(ex, out) ? "lies inside" : "contains", out);
        }
    }
    sm_free(ex);
    sm_free(out);
    return st;
}

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
    SM_TRY(parse_yaml(cx, text, len, &root));
    cx->root = root != NULL && !is_null(root) ? root : NULL; /* "---" alone: no document */
    sm_status st = SM_OK;
    if (root != NULL && root->kind == Y_MAP) {
        st = walk_map(cx, "", root);
    } else if (root != NULL && !is_null(root)) {
        char got[64];
        st = fail_at(cx, root, SM_E_USAGE, __FILE__, __LINE__,
                     "expected a mapping of configuration keys, got %s",
                     describe(root, got, sizeof(got)));
    }
    for (unsigned i = 0; st == SM_OK && i < nsets; i++) {
        st = apply_set(cx, i);
    }
    cx->in_set = false;
    if (st == SM_OK) {
        st = check_applies(cx, cx->root, nsets);
    }
    if (st == SM_OK) {
        st = check_required(cx);
    }
    if (st == SM_OK) {
        st = check_input(cx);
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
    if (st == SM_OK) {
        st = build_effective(cx);
    }
    cx->root = NULL;
    ynode_free(root);
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
        st = fail_at(&cx, NULL, SM_E_NOMEM, __FILE__, __LINE__, "out of memory");
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
        sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "cannot open configuration: %s",
                   strerror(e));
        sm_err_cause(err, "errno", e);
        sm_err_where(err, "%s", path);
        return err->status;
    }
    struct stat st;
    sm_status rc = SM_OK;
    char *buf = NULL;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                        "cannot read configuration: not a regular file");
    } else if ((uint64_t)st.st_size > MAX_FILE_BYTES) {
        rc = sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__,
                        "configuration of %lld bytes is larger than %u", (long long)st.st_size,
                        MAX_FILE_BYTES);
    } else if ((buf = sm_malloc((size_t)st.st_size + 1)) == NULL) {
        rc = sm_err_set(err, SM_E_NOMEM, __FILE__, __LINE__, "out of memory");
    } else {
        size_t n = fread(buf, 1, (size_t)st.st_size, f);
        if (n != (size_t)st.st_size || ferror(f)) {
            int e = errno;
            rc = sm_err_set(err, SM_E_IO, __FILE__, __LINE__, "cannot read configuration: %s",
                            strerror(e));
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
