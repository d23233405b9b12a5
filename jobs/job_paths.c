/* SPEC §6, output vs input: a run's output.path and export.hdf5.path may not be the input, lie
 * inside it or contain it, and neither may hold the other, compared after resolving links
 * (engine sm_path_relation). Checked before anything is created or deleted — by convert, ingest
 * and validate — so `exists: overwrite` can never delete the input it is about to read. With the
 * --report path rank 0 will write, they are the engine's prepare step of scan and convert
 * (sm_job_prepare). Also the SPEC §4 words for a file input that is no store at all: missing, or
 * not a directory (exit 3). */
#include <shardmill/sm_config.h>

#include "jobs_run.h"

#include <string.h>

#include <shardmill/par.h>

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

/* Fails (SM_E_USAGE, where = key) when `path` is, lies inside or contains `other`. */
static sm_status refuse_overlap(const char *key, const char *path, const char *noun,
                                const char *other, struct sm_err *err)
{
    enum sm_path_rel r = SM_PATH_DISJOINT;
    sm_status st = sm_path_relation(path, other, &r, err);
    if (st != SM_OK) {
        sm_err_where(err, "%s", key);
        return st;
    }
    if (r == SM_PATH_DISJOINT) {
        return SM_OK;
    }
    sm_err_set(err, SM_E_USAGE, __FILE__, __LINE__, "%s %s the %s %s (after resolving links)", path,
               sm_job_path_rel_words(r), noun, other);
    sm_err_where(err, "%s", key);
    return err->status;
}

sm_status sm_job_check_paths(const struct sm_job_config *c, struct sm_err *err)
{
    if (c->job != SM_JOB_CONVERT && c->job != SM_JOB_INGEST) {
        return SM_OK;
    }
    const char *in = sm_job_input_file(c->input.store);
    const char *out = c->output.path, *exp = c->export_.hdf5_path;
    if (in != NULL && out != NULL && out[0] != '\0') {
        SM_TRY(refuse_overlap("output.path", out, "input", in, err));
    }
    if (exp != NULL && exp[0] != '\0') {
        if (in != NULL) {
            SM_TRY(refuse_overlap("export.hdf5.path", exp, "input", in, err));
        }
        if (out != NULL && out[0] != '\0') {
            SM_TRY(refuse_overlap("export.hdf5.path", exp, "output", out, err));
        }
    }
    return SM_OK;
}

sm_status sm_job_check_input_store(const char *store, struct sm_err *err)
{
    return sm_run_check_input_store(store, err);
}

sm_status sm_job_prepare(void *user, struct sm_err *err)
{
    const struct sm_job_prepare *p = user;
    /* rank 0 writes the report: its view of the path is the one that counts */
    if (p->report_flag != NULL && sm_par_rank() == 0) {
        SM_TRY(sm_config_check_report(p->report_flag, "--report", err));
    }
    return sm_job_check_paths(p->c, err);
}
