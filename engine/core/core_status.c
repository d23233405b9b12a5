/* Error context: first failure wins, `where` filled by the innermost layer that knows the object
 * (STYLE B5). */
#include "shardmill/status.h"

#include <stdio.h>
#include <string.h>

void sm_err_clear(struct sm_err *err)
{
    memset(err, 0, sizeof(*err));
}

sm_status sm_err_vset(struct sm_err *err, sm_status st, const char *file, int line, const char *fmt,
                      va_list ap)
{
    if (err->status != SM_OK) {
        return err->status;
    }
    err->status = st;
    err->file = file;
    err->line = line;
    vsnprintf(err->what, sizeof(err->what), fmt, ap);
    return st;
}

sm_status sm_err_set(struct sm_err *err, sm_status st, const char *file, int line, const char *fmt,
                     ...)
{
    va_list ap;
    va_start(ap, fmt);
    sm_status r = sm_err_vset(err, st, file, line, fmt, ap);
    va_end(ap);
    return r;
}

sm_status sm_err_set_at(struct sm_err *err, sm_status st, const char *where, const char *file,
                        int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sm_err_vset(err, st, file, line, fmt, ap);
    va_end(ap);
    if (where != NULL) {
        sm_err_where(err, "%s", where);
    }
    return err->status;
}

sm_status sm_err_errno(struct sm_err *err, int e, const char *where, const char *file, int line,
                       const char *fmt, ...)
{
    char what[sizeof(err->what)]; /* the whole message is cut where err->what would cut it */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    sm_err_set(err, SM_E_IO, file, line, "%s: %s", what, strerror(e));
    sm_err_cause(err, "errno", e);
    if (where != NULL) {
        sm_err_where(err, "%s", where);
    }
    return err->status;
}

void sm_err_cause(struct sm_err *err, const char *lib, int cause)
{
    if (err->status != SM_OK && err->cause_lib == NULL) {
        err->cause_lib = lib;
        err->cause = cause;
    }
}

void sm_err_where(struct sm_err *err, const char *fmt, ...)
{
    if (err->where[0] != '\0') {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->where, sizeof(err->where), fmt, ap);
    va_end(ap);
}

sm_status sm_stop_check(const atomic_int *stop, struct sm_err *err)
{
    const int sig = stop != NULL ? atomic_load_explicit(stop, memory_order_relaxed) : 0;
    if (sig == 0) {
        return SM_OK;
    }
    SM_ERR(err, SM_E_STOPPED, "stopped by signal %d", sig);
    sm_err_cause(err, "signal", sig);
    return err->status;
}

const char *sm_status_name(sm_status st)
{
    switch (st) {
    case SM_OK:
        return "ok";
    case SM_E_USAGE:
        return "usage";
    case SM_E_DATA:
        return "data";
    case SM_E_IO:
        return "io";
    case SM_E_LIMIT:
        return "limit";
    case SM_E_NOMEM:
        return "nomem";
    case SM_E_INTERNAL:
        return "internal";
    case SM_E_STOPPED:
        return "stopped";
    }
    return "unknown";
}
