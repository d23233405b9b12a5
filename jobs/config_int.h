/* What the files of the YAML configuration loader share (SPEC §4, STYLE B10), internal to them:
 * config_yaml.c (libyaml -> a node tree with the line:col of every node; where an error is),
 * config_parse.c (a node -> the value of a schema row; defaults; the document and `--set` walked
 * against the schema), config_rules.c (checks across keys, job-dependent defaults) and
 * config_load.c (the entry points of config.h: file, sequence, effective text). Invariant: every
 * error is SM_E_USAGE (or SM_E_NOMEM) with `where` = "FILE:LINE:COL" or "--set KEY" and `what`
 * naming the key. */
#ifndef SM_JOBS_CONFIG_INT_H
#define SM_JOBS_CONFIG_INT_H

#include <stdbool.h>

#include <shardmill/status.h>

#include "config.h"
#include "config_schema.h"

#define MAX_PATH_LEN 128 /* longest dotted key considered */

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

/* Frees n, its children and its following siblings; accepts NULL. */
void sm_cfg_node_free(struct ynode *n);

/* A plain scalar "", "~", "null", "Null" or "NULL". */
bool sm_cfg_node_is_null(const struct ynode *n);

/* "'text'" (shortened), "null", "a mapping" or "a sequence": what a value was (may use buf). */
const char *sm_cfg_node_describe(const struct ynode *n, char *buf, size_t cap);

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

/* The index of row k in sm_cfg_keys (and in lctx.orig). */
static inline unsigned row_index(const struct sm_cfg_key *k)
{
    return (unsigned)(k - sm_cfg_keys);
}

/* Sets `where` to "--set KEY" of sets[i]. */
void sm_cfg_where_set(struct lctx *cx, unsigned i);

/* Records the error and places it: at the --set being applied, else at node n ("FILE:LINE:COL"),
 * else at the file. Returns the status recorded. */
sm_status sm_cfg_fail_at(struct lctx *cx, const struct ynode *n, sm_status st, const char *file,
                         int line, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* sm_cfg_fail_at at this file and line, as an expression (the status recorded); FAIL_AT and
 * FAIL_NOMEM return it. */
#define SM_CFG_ERR(cx, node, st, ...)                                                              \
    sm_cfg_fail_at((cx), (node), (st), __FILE__, __LINE__, __VA_ARGS__)
#define FAIL_AT(cx, node, ...) return SM_CFG_ERR((cx), (node), SM_E_USAGE, __VA_ARGS__)
#define FAIL_NOMEM(cx, node) return SM_CFG_ERR((cx), (node), SM_E_NOMEM, "out of memory")

/* ==== the steps of a load ==== */

/* config_yaml.c: parses one YAML document; *root is NULL for an empty stream. Loads libyaml on
 * the first call (SM_E_IO when it is missing). */
sm_status sm_cfg_yaml_parse(struct lctx *cx, const char *text, size_t len, struct ynode **root);

/* config_parse.c: applies every key of a mapping under the dotted `prefix` ("" for the document)
 * to cx->cfg, recording where each was given. */
sm_status sm_cfg_walk_map(struct lctx *cx, const char *prefix, const struct ynode *map);

/* config_parse.c: applies `--set` argument sets[i] ("key.path=value", the value parsed as YAML). */
sm_status sm_cfg_apply_set(struct lctx *cx, unsigned i);

/* config_rules.c: once the file and the `nsets` --set arguments are applied, refuses keys the job
 * does not use and missing required ones, checks the keys that must agree, and fills the defaults
 * that depend on the job (input.format, output.dtype, ...). */
sm_status sm_cfg_check_keys(struct lctx *cx, unsigned nsets);

#endif
