/* YAML text -> a node tree for the configuration loader (SPEC §4, STYLE B10): libyaml events ->
 * nodes that keep the 1-based line:column of each, refusing anchors, aliases, tags, a second
 * document and nesting deeper than 64; and where a loader error is placed (at a node, a
 * `--set KEY` or the file). libyaml is loaded with dlopen by the first configuration parsed:
 * `--version`, `info`, `read` and the other commands without a YAML file do not map it
 * (docs/BENCHMARKS.md "Start-up"). The compiler checks every entry point against <yaml.h> (the
 * _Static_asserts below). The rest of the loader: config_parse.c, config_rules.c, config_load.c. */
#include <shardmill/sm_config.h>

#include "config_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <yaml.h>

#include <shardmill/alloc.h>
#include <shardmill/library.h>

#define MAX_DEPTH 64 /* nesting of YAML collections */

/* ==== the node tree ==== */

void sm_cfg_node_free(struct ynode *n)
{
    while (n != NULL) {
        struct ynode *next = n->next;
        sm_cfg_node_free(n->kids);
        sm_free(n->text);
        sm_free(n);
        n = next;
    }
}

bool sm_cfg_node_is_null(const struct ynode *n)
{
    if (n->kind != Y_SCALAR || !n->plain) {
        return false;
    }
    const char *t = n->text;
    return t[0] == '\0' || strcmp(t, "~") == 0 || strcmp(t, "null") == 0 ||
           strcmp(t, "Null") == 0 || strcmp(t, "NULL") == 0;
}

/* "'text'" (shortened), "null", "a mapping" or "a sequence": what a value was. */
const char *sm_cfg_node_describe(const struct ynode *n, char *buf, size_t cap)
{
    if (n->kind == Y_MAP) {
        return "a mapping";
    }
    if (n->kind == Y_SEQ) {
        return "a sequence";
    }
    if (sm_cfg_node_is_null(n)) {
        return "null";
    }
    size_t len = strlen(n->text);
    snprintf(buf, cap, "'%.48s%s'", n->text, len > 48 ? "..." : "");
    return buf;
}

/* ==== error placement ==== */

/* The key part of "key=value" (up to '='). */
static int set_key_len(const char *set)
{
    const char *eq = strchr(set, '=');
    return eq != NULL ? (int)(eq - set) : (int)strlen(set);
}

void sm_cfg_where_set(struct lctx *cx, unsigned i)
{
    sm_err_where(cx->err, "--set %.*s", set_key_len(cx->sets[i]), cx->sets[i]);
}

static void where_node(struct lctx *cx, const struct ynode *n)
{
    if (cx->in_set) {
        sm_cfg_where_set(cx, cx->cur_set);
    } else if (n != NULL) {
        sm_err_where(cx->err, "%s:%d:%d", cx->name, n->line, n->col);
    } else {
        sm_err_where(cx->err, "%s", cx->name);
    }
}

sm_status sm_cfg_fail_at(struct lctx *cx, const struct ynode *n, sm_status st, const char *file,
                         int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sm_err_vset(cx->err, st, file, line, fmt, ap);
    va_end(ap);
    where_node(cx, n);
    return cx->err->status;
}

/* ==== libyaml, loaded on first use ==== */

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
        SM_FAIL(b->cx->err, SM_E_INTERNAL, "unexpected YAML event %d", type);
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
            st = SM_CFG_ERR(b->cx, &at, SM_E_NOMEM, "out of memory");
        } else {
            memcpy(n->text, ev->data.scalar.value, len);
            n->text[len] = '\0';
            if (strlen(n->text) != len) {
                st = SM_CFG_ERR(b->cx, &at, SM_E_USAGE, "a NUL character in a YAML scalar");
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
        sm_cfg_node_free(n);
        return st;
    }
    *out = n;
    return SM_OK;
}

/* Parses one YAML document; *root is NULL for an empty stream. */
sm_status sm_cfg_yaml_parse(struct lctx *cx, const char *text, size_t len, struct ynode **root)
{
    struct ybuild b = {.cx = cx, .text = text, .len = len};
    *root = NULL;
    pthread_once(&y_once, y_load);
    if (y.parser_initialize == NULL) {
        return SM_CFG_ERR(cx, NULL, SM_E_IO,
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
            st = SM_CFG_ERR(cx, &at, SM_E_USAGE,
                            "a second YAML document: a configuration is one document");
        }
    }
    if (st == SM_OK) {
        y.event_delete(&ev); /* STREAM-END */
    }
    y.parser_delete(&b.parser);
    if (st != SM_OK) {
        sm_cfg_node_free(*root);
        *root = NULL;
    }
    return st;
}
