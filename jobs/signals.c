/* Signals (SPEC §1, STYLE B10: jobs/ owns them). SIGTERM and SIGINT -- what Slurm sends at the
 * time limit or on scancel, what mpirun forwards, Ctrl-C -- only set a flag: the drivers check it
 * before every tile, shard and export round, the jobs at every phase boundary, and the run ends
 * with SM_E_STOPPED (exit 128 + signal) without a completion marker. SIGPIPE is ignored, so a
 * closed pipe is a write error (EPIPE, exit 4), never a silent death. See docs/internals/ranks.md
 * "Stopping". Invariant: the handler does nothing but a lock-free atomic store. */
#include <shardmill/sm_config.h>

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "jobs.h"

/* The first stop signal's number, 0 while none arrived. */
static atomic_int stop_signal;

static void on_stop(int sig)
{
    int none = 0;
    atomic_compare_exchange_strong(&stop_signal, &none,
                                   sig); /* the first signal is the one named */
}

void sm_signals_ignore_pipe(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    (void)sigaction(SIGPIPE, &sa, NULL);
}

void sm_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* I/O in progress goes on; the drivers look at the flag */
    (void)sigaction(SIGTERM, &sa, NULL);
    /* A second Ctrl-C kills at once (the default action), for a stop that takes too long.
     * SIGTERM stays cooperative: srun and slurmd may both deliver it to a rank. */
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    (void)sigaction(SIGINT, &sa, NULL);
}

const atomic_int *sm_signals_flag(void)
{
    return &stop_signal;
}

const char *sm_signal_name(int sig)
{
    switch (sig) {
    case SIGTERM:
        return "SIGTERM";
    case SIGINT:
        return "SIGINT";
    case SIGHUP:
        return "SIGHUP";
    case SIGQUIT:
        return "SIGQUIT";
    case SIGUSR1:
        return "SIGUSR1";
    case SIGUSR2:
        return "SIGUSR2";
    default:
        return NULL;
    }
}

void sm_stop_explain(struct sm_err *err, const char *where, const char *hint)
{
    if (err->status != SM_E_STOPPED) {
        return;
    }
    const char *name = sm_signal_name(err->cause);
    char num[32];
    if (name == NULL) {
        snprintf(num, sizeof(num), "signal %d", err->cause);
        name = num;
    }
    snprintf(err->where, sizeof(err->where), "%s", where);
    snprintf(err->what, sizeof(err->what), "stopped by %s%s%s%s", name, hint != NULL ? " (" : "",
             hint != NULL ? hint : "", hint != NULL ? ")" : "");
}
