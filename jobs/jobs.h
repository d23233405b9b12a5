/* Internal interface of the shardmill binary: commands, option tables, error printing and exit
 * codes. jobs/ owns the process (printing, exit codes, env vars); the engine takes plain structs.
 */
#ifndef SM_JOBS_JOBS_H
#define SM_JOBS_JOBS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <shardmill/clock.h> /* sm_peak_rss_bytes */
#include <shardmill/status.h>

#include "config.h" /* enum sm_path_class */

/* A command of the command table in main.c. run() returns the process exit status. */
struct sm_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
};

int sm_cmd_info(int argc, char **argv);
int sm_cmd_plan(int argc, char **argv);
int sm_cmd_read(int argc, char **argv);
int sm_cmd_run(int argc, char **argv);
int sm_cmd_validate(int argc, char **argv);
int sm_cmd_verify(int argc, char **argv);

/* SPEC §4 exit status of a status category (SM_E_STOPPED: 128 + SIGTERM, without the signal). */
int sm_exit_code(sm_status st);
/* The exit status of an error: SPEC §4's for its status, 128 + the signal (err->cause) for a
 * stop (SPEC §1). */
int sm_exit_code_of(const struct sm_err *err);

/* Prints the one error line "shardmill: error: <where>: <what>" and returns the exit code. */
int sm_report_error(const struct sm_err *err);

/* Prints "shardmill: error: <where>: <what>" for a usage error and returns 2. */
int sm_usage_error(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- signals (signals.c, SPEC §1, docs/internals/ranks.md "Stopping") ---- */
/* main(), before any command: SIGPIPE ignored (a closed pipe becomes EPIPE, an I/O error). */
void sm_signals_ignore_pipe(void);
/* `run`: SIGTERM and SIGINT set the stop flag (a second SIGINT kills at once). */
void sm_signals_install(void);
/* The flag the handlers set (the first signal's number; 0 while none arrived), for the drivers'
 * `stop` fields. */
const atomic_int *sm_signals_flag(void);
/* "SIGTERM", "SIGINT", ... or NULL for a signal without a name here. */
const char *sm_signal_name(int sig);
/* For a stop (SM_E_STOPPED; otherwise nothing): the line becomes "<where>: stopped by SIGTERM
 * (<hint>)" (the hint may be NULL). */
void sm_stop_explain(struct sm_err *err, const char *where, const char *hint);

/* ---- option tables (cli.c) ---- */
/* SM_OPT_STRINGS is repeatable: every occurrence appends to a struct sm_str_list (--set). */
enum sm_opt_kind {
    SM_OPT_FLAG,
    SM_OPT_STRING,
    SM_OPT_U64,
    SM_OPT_SIZE,
    SM_OPT_LIST,
    SM_OPT_STRINGS
};

struct sm_opt {
    const char *name; /* long name without "--" */
    char short_name;  /* 0 if none */
    enum sm_opt_kind kind;
    const char *arg; /* metavar for --help, e.g. "z,y,x" */
    const char *help;
    void *dst; /* bool*, const char**, uint64_t*, uint64_t* (size), struct sm_u64_list*,
                  struct sm_str_list* */
    enum sm_path_class path_class; /* STRING, STRINGS: declared (config.h), else sm_cli_parse
                                      refuses the table (exit 1) */
};

#define SM_LIST_MAX 32
struct sm_u64_list {
    unsigned n;
    uint64_t v[SM_LIST_MAX];
    bool set;
};

/* The values of a repeatable option, in command-line order (borrowed from argv). */
#define SM_STR_LIST_MAX 64
struct sm_str_list {
    unsigned n;
    const char *v[SM_STR_LIST_MAX];
};

struct sm_cmd_spec {
    const char *name;          /* "read" */
    const char *usage;         /* "STORE --offset z,y,x --shape d,h,w -o FILE [options]" */
    const char *about;         /* one paragraph */
    const struct sm_opt *opts; /* terminated by {NULL} */
    unsigned min_pos, max_pos;
};

/* Parses argv (argv[0] is the command name). Fills option destinations and positionals.
 * Returns -1 on success, or the exit status to return (0 after --help, 2 on a usage error). */
int sm_cli_parse(const struct sm_cmd_spec *spec, int argc, char **argv, const char **pos,
                 unsigned *npos);

/* Parses "123", "64KiB", "2MiB", "1GiB", "512B". */
bool sm_parse_size(const char *s, uint64_t *out);
/* Parses "7,11" into a list. */
bool sm_parse_u64_list(const char *s, struct sm_u64_list *out);

#endif
