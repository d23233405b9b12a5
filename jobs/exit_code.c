/* Status -> exit code (SPEC §4; a stop: 128 + the signal, SPEC §1) and the single error line every
 * failure prints. */
#include "jobs.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>

#include <shardmill/url.h>

int sm_exit_code(sm_status st)
{
    switch (st) {
    case SM_OK:
        return 0;
    case SM_E_USAGE:
        return 2;
    case SM_E_DATA:
        return 3;
    case SM_E_IO:
        return 4;
    case SM_E_LIMIT:
        return 5;
    case SM_E_NOMEM:
    case SM_E_INTERNAL:
        return 1;
    case SM_E_STOPPED:
        return 128 + SIGTERM;
    }
    return 1;
}

int sm_exit_code_of(const struct sm_err *err)
{
    if (err->status == SM_E_STOPPED && err->cause > 0 && err->cause < 128) {
        return 128 + err->cause; /* SPEC §1: the shell's convention for a signal */
    }
    return sm_exit_code(err->status);
}

int sm_report_error(const struct sm_err *err)
{
    const char *where = err->where[0] != '\0' ? err->where : "shardmill";
    char w[SM_URL_REDACT_MAX], t[SM_URL_REDACT_MAX]; /* a URL anywhere in the line: redacted */
    fprintf(stderr, "shardmill: error: %s: %s\n", sm_url_redact(where, w, sizeof(w)),
            sm_url_redact(err->what, t, sizeof(t)));
    return sm_exit_code_of(err);
}

int sm_usage_error(const char *where, const char *fmt, ...)
{
    char what[SM_URL_REDACT_MAX], w[SM_URL_REDACT_MAX], t[SM_URL_REDACT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    fprintf(stderr, "shardmill: error: %s: %s\n", sm_url_redact(where, w, sizeof(w)),
            sm_url_redact(what, t, sizeof(t)));
    return 2;
}
