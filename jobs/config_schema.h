/* The configuration schema (SPEC §4, STYLE B10): one row per YAML key, after IOR's option_help
 * table. The rows in config_schema.c drive defaults, parsing, range checks, `--set`,
 * `shardmill validate` and docs/CONFIG.md, so none of them can drift from the others; values
 * as text are config_format.c's, docs/CONFIG.md is config_doc.c's. Internal to jobs/ (the
 * loader, cmd_validate.c and the unit tests). */
#ifndef SM_JOBS_CONFIG_SCHEMA_H
#define SM_JOBS_CONFIG_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

enum sm_cfg_type {
    SM_CFG_BOOL,   /* true | false */
    SM_CFG_UINT,   /* unsigned integer; field of 4 or 8 bytes */
    SM_CFG_INT,    /* signed integer; field of 4 or 8 bytes */
    SM_CFG_FLOAT,  /* finite double */
    SM_CFG_SIZE,   /* uint64_t bytes: 123, 64KiB, 2MiB, 1GiB (binary units) */
    SM_CFG_STRING, /* char * owned by the config */
    SM_CFG_ENUM,   /* a C enum (int): the index of the name in `choices` */
    SM_CFG_NAME,   /* char * restricted to the names in `choices` */
    SM_CFG_DIMS,   /* struct sm_cfg_dims */
    SM_CFG_RANGE,  /* [lo, hi] of finite doubles, lo < hi: off = lo, off2 = hi, off_set = bool */
    SM_CFG_FLOATS, /* struct sm_cfg_floats: a list of finite doubles (POSITIVE: each > 0) */
};

/* Row flags. */
#define SM_CFGF_NULLABLE 0x01u   /* null, ~ or an empty value leaves the key unset */
#define SM_CFGF_AUTO 0x02u       /* UINT: the word `auto` means 0; DIMS: `auto` sets is_auto */
#define SM_CFGF_NONZERO 0x04u    /* FLOAT: must not be 0 */
#define SM_CFGF_NONEMPTY 0x08u   /* STRING: not ""; DIMS: at least one element */
#define SM_CFGF_POSITIVE 0x10u   /* DIMS: every element >= 1 */
#define SM_CFGF_SPACE_UNIT 0x20u /* STRING: a space unit of <shardmill/unit.h> */

#define SM_CFG_JOB(kind) (1u << (kind))
#define SM_CFG_ALL_JOBS                                                                            \
    (SM_CFG_JOB(SM_JOB_SCAN) | SM_CFG_JOB(SM_JOB_CONVERT) | SM_CFG_JOB(SM_JOB_INGEST) |            \
     SM_CFG_JOB(SM_JOB_READ_BENCH))

/* A row whose names, help or default text come from an engine registry (config_tables.c), so
 * that jobs/ restates no list of sources, codecs or modes. */
enum sm_cfg_from {
    SM_CFG_FROM_ROW = 0,  /* the row's own strings */
    SM_CFG_FROM_FORMAT,   /* input.format: "zarr|n5|" + the sources (shardmill/source.h) */
    SM_CFG_FROM_CODEC,    /* output.codec.name: the writable codecs (shardmill/codec.h) + none */
    SM_CFG_FROM_LEVEL,    /* output.codec.level: the writers' level ranges */
    SM_CFG_FROM_MODE,     /* normalize.mode: the modes' descriptors (shardmill/stats.h) */
    SM_CFG_FROM_MODE_KEY, /* normalize.*: the modes whose descriptor reads the key */
};

struct sm_cfg_key {
    const char *path; /* dotted path: "input.cache.max_bytes" */
    enum sm_cfg_type type;
    /* ENUM/NAME: "scan|convert|ingest|read-bench", in enum order; read through sm_cfg_choices */
    const char *choices;
    const char *def;     /* default, in the syntax a user writes; NULL = unset */
    const char *def_doc; /* what an unset/default value means, when `def` alone does not say */
    int64_t min;         /* UINT/INT/SIZE: inclusive range (every numeric row has one) */
    uint64_t max;
    unsigned flags;    /* SM_CFGF_* */
    unsigned required; /* SM_CFG_JOB() bits of the jobs that need the key */
    unsigned applies;  /* SM_CFG_JOB() bits of the jobs that use it (a superset of required);
                          any other job refuses the key (issue 20: no setting is ignored) */
    enum sm_path_class path_class; /* every STRING row declares one (SM_PATHC_NONE: no
                                      path); INPUT, OUTPUT and REPORT rows are what the output
                                      rule of jobs/job_paths.c compares */
    const char *path_noun;         /* INPUT/OUTPUT/REPORT: the path in messages, "the output" */
    const char *help;              /* one line */
    const char *example;           /* a valid value, in YAML syntax */
    size_t off, size;              /* offsetof/sizeof the field in struct sm_job_config */
    size_t off2, off_set;          /* RANGE: offset of hi, and of the bool "given" */
    enum sm_cfg_from from;         /* where choices, help and def_doc come from */
};

/* Row k's choices, help and default text: its own strings, or those its `from` registry gives
 * (built once, kept for the process; the configuration is loaded by one thread). */
const char *sm_cfg_choices(const struct sm_cfg_key *k);
const char *sm_cfg_help(const struct sm_cfg_key *k);
const char *sm_cfg_def_doc(const struct sm_cfg_key *k);
/* The lines of docs/CONFIG.md's "Rules between keys" that the registries make (one string of
 * "| keys | rule |\n" rows), for config_doc.c. */
const char *sm_cfg_registry_rules(void);

/* Sections of docs/CONFIG.md: the first path component and what its keys are about. */
struct sm_cfg_group {
    const char *name;
    const char *help;
};

extern const struct sm_cfg_key sm_cfg_keys[];
extern const unsigned sm_cfg_nkeys;
extern const struct sm_cfg_group sm_cfg_groups[]; /* terminated by {NULL, NULL} */

/* Whether the config's job uses row k: it applies to the job and, for normalize.divisor /
 * normalize.lo / normalize.hi, to the job's normalize.mode (divisor: scale; lo, hi: window and
 * percentile); input.raw.* and input.hdf5.* to that input.format, input.s3.* to an s3://
 * input.store, export.hdf5.* other than the path to a config with export.hdf5.path. A key given
 * that is not used is exit 2 (config_rules.c). */
bool sm_cfg_used(const struct sm_cfg_key *k, const struct sm_job_config *c);

/* The row of a dotted path, or NULL. */
const struct sm_cfg_key *sm_cfg_find(const char *path);

/* True if `path` is a proper prefix (at a dot) of some key: "input", "input.cache". */
bool sm_cfg_is_group(const char *path);

/* The jobs that use a key (its `applies`) or a group (those of any of its keys): SM_CFG_JOB()
 * bits; 0 for an unknown path. */
unsigned sm_cfg_applies(const char *path);

/* The jobs of an SM_CFG_JOB() mask as words, "scan", "convert and ingest", "scan, convert and
 * ingest" (into buf, which is returned). */
const char *sm_cfg_jobs_text(unsigned jobs, char *buf, size_t cap);

/* The known key or group closest to `path` by edit distance (transpositions count 1), if that
 * distance is at most 2 (copied into buf); false otherwise. */
bool sm_cfg_suggest(const char *path, char *buf, size_t cap);

/* Optimal-string-alignment distance between a and b (cut off above 3). */
unsigned sm_cfg_distance(const char *a, const char *b);

/* What a value of row k must look like, for messages ("a size like 256MiB"); may use buf. */
const char *sm_cfg_expected(const struct sm_cfg_key *k, char *buf, size_t cap);

/* Appends the current value of row k in c to a string buffer. canonical: sizes in bytes, for the
 * SHA-256 of the effective configuration; otherwise sizes in the largest exact binary unit. Every
 * value is valid YAML (strings are double-quoted JSON-style, unset values are `null`). */
struct sm_cfg_sb {
    char *p;
    size_t len, cap;
    bool oom;
};
void sm_cfg_sb_printf(struct sm_cfg_sb *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void sm_cfg_sb_quote(struct sm_cfg_sb *sb, const char *s);
/* The buffer's string (the caller frees it), or NULL (and nothing to free) when it ran out of
 * memory or holds nothing. */
char *sm_cfg_sb_finish(struct sm_cfg_sb *sb);
/* "1 to 1024TiB": the inclusive range of a numeric row. */
void sm_cfg_format_range(struct sm_cfg_sb *sb, const struct sm_cfg_key *k);
void sm_cfg_format_value(struct sm_cfg_sb *sb, const struct sm_cfg_key *k,
                         const struct sm_job_config *c, bool canonical);

#endif
