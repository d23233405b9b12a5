/* Progress lines of rank 0 (progress.h). Only the main thread calls in here (the drivers call
 * back from OpenMP thread 0), so MPI stays funneled and nothing needs a lock. */
#include <shardmill/sm_config.h>

#include "progress.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <shardmill/alloc.h>
#include <shardmill/clock.h>
#include <shardmill/par.h>

#define MS 1000000ull
#define POST_EVERY (200 * MS)  /* other ranks: at most five posts a second */
#define TTY_FIRST (1000 * MS)  /* a live line appears once a phase has run this long */
#define TTY_REFRESH (250 * MS) /* and is redrawn this often */

void sm_progress_begin(struct sm_progress *p, const struct sm_job_config *c, const char *job,
                       const char *phase, const char *unit, uint64_t total)
{
    memset(p, 0, sizeof(*p));
    p->enabled = c->progress && sm_par_rank() == 0;
    p->tty = p->enabled && isatty(STDERR_FILENO);
    p->job = job;
    p->phase = phase;
    p->unit = unit;
    p->total = total;
    p->t0 = sm_clock_ns();
    /* a terminal is redrawn often, a log gets a line every interval (0: every item, both) */
    const uint64_t every = c->progress_interval * 1000 * MS;
    p->interval_ns = p->tty && every > TTY_REFRESH ? TTY_REFRESH : every;
    p->next_print = p->t0 + (p->tty && every > TTY_FIRST ? TTY_FIRST : every);
    p->next_post = c->progress ? p->t0 : UINT64_MAX; /* no periodic posts when nobody prints */
    if (sm_par_rank() == 0 && sm_par_size() > 1) {
        p->all = sm_calloc(3 * (size_t)sm_par_size(), sizeof(uint64_t)); /* NULL: own counts */
    }
}

/* Items and bytes over every rank, as far as rank 0 has heard. */
static void totals(struct sm_progress *p, uint64_t *done, uint64_t *bytes)
{
    *done = p->done;
    *bytes = p->bytes;
    for (int r = 1; p->all != NULL && r < sm_par_size(); r++) {
        *done += p->all[3 * r];
        *bytes += p->all[3 * r + 1];
    }
}

static void print_line(struct sm_progress *p, uint64_t now, bool last, bool ok)
{
    uint64_t done, bytes;
    totals(p, &done, &bytes);
    if (!last && p->printed && done == p->shown) {
        return; /* nothing new to say */
    }
    p->shown = done;
    const double secs = (double)(now - p->t0) / 1e9;
    const double mbs = secs > 0 ? (double)bytes / 1e6 / secs : 0.0;
    char tail[64] = "";
    if (last) {
        snprintf(tail, sizeof(tail), ", %.1f s%s", secs, ok ? "" : ", failed");
    } else if (done > 0 && done < p->total) {
        const double eta = secs * (double)(p->total - done) / (double)done;
        snprintf(tail, sizeof(tail), ", ETA %d:%02d", (int)(eta / 60), (int)eta % 60);
    }
    const double pct = p->total > 0 ? 100.0 * (double)done / (double)p->total : 100.0;
    fprintf(stderr, "%sshardmill: %s %s: %llu/%llu %s (%.0f%%), %.1f MB/s%s%s", p->tty ? "\r" : "",
            p->job, p->phase, (unsigned long long)done, (unsigned long long)p->total, p->unit, pct,
            mbs, tail, p->tty && !last ? "\033[K" : "\n");
    if (p->tty && last) {
        fputs("\033[K", stderr);
    }
    fflush(stderr);
    p->printed = true;
}

void sm_progress_update(void *user, uint64_t done, uint64_t bytes)
{
    struct sm_progress *p = user;
    p->done = p->base_done + done;
    p->bytes = p->base_bytes + bytes;
    const uint64_t now = sm_clock_ns();
    if (sm_par_rank() != 0) {
        if (now >= p->next_post) {
            const uint64_t v[2] = {p->done, p->bytes};
            sm_par_progress_post(v, false);
            p->next_post = now + POST_EVERY;
        }
        return;
    }
    if (p->enabled && now >= p->next_print) {
        if (p->all != NULL) {
            sm_par_progress_poll(p->all);
        }
        print_line(p, now, false, true);
        p->next_print = now + p->interval_ns;
    }
}

void sm_progress_next_call(struct sm_progress *p)
{
    p->base_done = p->done;
    p->base_bytes = p->bytes;
}

void sm_progress_end(struct sm_progress *p, bool ok)
{
    if (sm_par_rank() != 0) {
        const uint64_t v[2] = {p->done, p->bytes};
        sm_par_progress_post(v, true);
        return;
    }
    /* Every other rank's last post is collected, so no post is left in flight when the next
     * phase (or the end of MPI) begins. A rank that died is mpirun's to report: it ends the job. */
    const int others = sm_par_size() - 1;
    while (others > 0 && sm_par_progress_poll(p->all) < others) {
        const uint64_t now = sm_clock_ns();
        if (p->enabled && now >= p->next_print) {
            print_line(p, now, false, true);
            p->next_print = now + p->interval_ns;
        }
        const struct timespec ts = {0, 5 * (long)MS};
        nanosleep(&ts, NULL);
    }
    if (p->enabled && (p->printed || p->interval_ns == 0)) {
        print_line(p, sm_clock_ns(), true, ok);
    }
    sm_free(p->all);
    p->all = NULL;
}

static void hook_begin(void *user, const char *phase, const char *unit, uint64_t total)
{
    struct sm_job_progress *jp = user;
    sm_progress_begin(&jp->pg, jp->c, jp->job, phase, unit, total);
}

static void hook_next_call(void *user)
{
    sm_progress_next_call(&((struct sm_job_progress *)user)->pg);
}

static void hook_end(void *user, bool ok)
{
    sm_progress_end(&((struct sm_job_progress *)user)->pg, ok);
}

struct sm_run_progress sm_job_progress_hooks(struct sm_job_progress *jp,
                                             const struct sm_job_config *c, const char *job)
{
    memset(jp, 0, sizeof(*jp));
    jp->c = c;
    jp->job = job;
    const struct sm_run_progress p = {hook_begin, sm_progress_update, hook_next_call, hook_end, jp,
                                      NULL};
    return p;
}
