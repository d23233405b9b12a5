/* SPEC §6, the output rule: a path that is written (a configuration key or option of the
 * output, report or log-directory class, config.h) may not be an input, lie inside it or contain
 * it, nor overlap another written path, compared after resolving links (engine
 * sm_path_relation); a log directory may hold the others. One check for every class, run before
 * anything is created or deleted, by validate, run (the engine's prepare step of scan and
 * convert, sm_job_prepare; read-bench in cmd_run.c), read and render (through validate), so
 * `exists: overwrite` can never delete the input and a report never replaces the output. Also the
 * SPEC §4 words for a file input that is no store at all: missing, or not a directory (exit 3). */
#include <shardmill/sm_config.h>

#include "jobs_run.h"

#include <stdbool.h>
#include <string.h>

#include <shardmill/par.h>

#include "config_schema.h"

const char *sm_job_input_file(const char *store)
{
    if (store == NULL || store[0] == '\0') {
        return NULL;
    }
    if (strncmp(store, "file://", strlen("file://")) == 0) {
        return store + strlen("file://");
    }
    return strstr(store, "://") != NULL ? NULL : store; /* http(s): nothing local to protect */
}

const char *sm_job_path_rel_words(enum sm_path_rel r)
{
    return r == SM_PATH_SAME ? "is" : r == SM_PATH_INSIDE ? "lies inside" : "contains";
}

static bool writes(enum sm_path_class c)
{
    return c == SM_PATHC_OUTPUT || c == SM_PATHC_REPORT || c == SM_PATHC_LOG_DIR;
}

/* The local path a use names, or NULL: an input given as a URL (nothing local to protect), an
 * empty path (the key's own check names it), the report's "-" (standard output). */
static const char *local_path(const struct sm_path_use *u)
{
    if (u->path == NULL || u->path[0] == '\0') {
        return NULL;
    }
    if (u->cls == SM_PATHC_INPUT) {
        return sm_job_input_file(u->path);
    }
    return u->cls == SM_PATHC_REPORT && strcmp(u->path, "-") == 0 ? NULL : u->path;
}

sm_status sm_job_check_path_uses(const struct sm_path_use *uses, unsigned n, struct sm_err *err)
{
    for (unsigned i = 0; i < n; i++) {
        const char *w = local_path(&uses[i]);
        if (!writes(uses[i].cls) || w == NULL) {
            continue;
        }
        /* against every input, and every writing path before it (each pair once: the later
         * one, a command-line path after the configuration's, is named) */
        for (unsigned j = 0; j < n; j++) {
            const char *o = local_path(&uses[j]);
            if (j == i || o == NULL ||
                !(uses[j].cls == SM_PATHC_INPUT || (writes(uses[j].cls) && j < i))) {
                continue;
            }
            enum sm_path_rel r = SM_PATH_DISJOINT;
            if (sm_path_relation(w, o, &r, err) != SM_OK) {
                sm_err_where(err, "%s", uses[i].key);
                return err->status;
            }
            /* a log directory only receives new files of its own names: it may hold the
             * input or an output (a scaling run's outputs are made in it), not lie in one */
            if (r == SM_PATH_DISJOINT ||
                (r == SM_PATH_CONTAINS && uses[i].cls == SM_PATHC_LOG_DIR) ||
                (r == SM_PATH_INSIDE && uses[j].cls == SM_PATHC_LOG_DIR)) {
                continue;
            }
            SM_FAIL_AT(err, SM_E_USAGE, uses[i].key, "%s %s the %s %s (after resolving links)", w,
                       sm_job_path_rel_words(r), uses[j].noun, o);
        }
    }
    return SM_OK;
}

/* Most paths a job names: its configuration's path rows, then the command line's. */
#define MAX_USES 16

sm_status sm_job_check_paths(const struct sm_job_config *c, const struct sm_path_use *extra,
                             unsigned nextra, struct sm_err *err)
{
    struct sm_path_use uses[MAX_USES];
    unsigned n = 0;
    bool report_flag = false; /* a command-line report replaces the configuration's */
    for (unsigned i = 0; i < nextra; i++) {
        report_flag = report_flag || extra[i].cls == SM_PATHC_REPORT;
    }
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        if (k->path_class == SM_PATHC_UNSET || k->path_class == SM_PATHC_NONE ||
            !sm_cfg_used(k, c) || (report_flag && k->path_class == SM_PATHC_REPORT)) {
            continue;
        }
        const char *v;
        memcpy(&v, (const char *)c + k->off, sizeof(v));
        if (n == MAX_USES) {
            SM_FAIL(err, SM_E_INTERNAL, "more than %d paths to compare", MAX_USES);
        }
        uses[n++] = (struct sm_path_use){k->path, k->path_noun, k->path_class, v};
    }
    for (unsigned i = 0; i < nextra; i++) {
        if (n == MAX_USES) {
            SM_FAIL(err, SM_E_INTERNAL, "more than %d paths to compare", MAX_USES);
        }
        uses[n++] = extra[i];
    }
    return sm_job_check_path_uses(uses, n, err);
}

sm_status sm_job_check_input_store(const char *store, struct sm_err *err)
{
    return sm_run_check_input_store(store, err);
}

sm_status sm_job_prepare(void *user, struct sm_err *err)
{
    const struct sm_job_prepare *p = user;
    /* rank 0 writes the report: its view of the path is the one that counts */
    const struct sm_path_use flag = {"--report", "report", SM_PATHC_REPORT, p->report_flag};
    if (p->report_flag != NULL && sm_par_rank() == 0) {
        SM_TRY(sm_config_check_report(p->report_flag, "--report", err));
    }
    /* every rank compares the same paths (--report in place of `report`): the engine agrees */
    return sm_job_check_paths(p->c, p->report_flag != NULL ? &flag : NULL,
                              p->report_flag != NULL ? 1 : 0, err);
}
