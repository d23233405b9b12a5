/* The lookups on the configuration schema (config_schema.h): a key by path, whether a path is a
 * group, the jobs a key applies to, the nearest key to a misspelt one and a job's name. */
#include <shardmill/sm_config.h>

#include "config_schema.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- lookups ---- */

const struct sm_cfg_key *sm_cfg_find(const char *path)
{
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        if (strcmp(sm_cfg_keys[i].path, path) == 0) {
            return &sm_cfg_keys[i];
        }
    }
    return NULL;
}

bool sm_cfg_is_group(const char *path)
{
    size_t n = strlen(path);
    if (n == 0) {
        return false;
    }
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const char *p = sm_cfg_keys[i].path;
        if (strncmp(p, path, n) == 0 && p[n] == '.') {
            return true;
        }
    }
    return false;
}

unsigned sm_cfg_applies(const char *path)
{
    const struct sm_cfg_key *k = sm_cfg_find(path);
    if (k != NULL) {
        return k->applies;
    }
    unsigned jobs = 0;
    size_t n = strlen(path);
    for (unsigned i = 0; n > 0 && i < sm_cfg_nkeys; i++) {
        const char *p = sm_cfg_keys[i].path;
        if (strncmp(p, path, n) == 0 && p[n] == '.') {
            jobs |= sm_cfg_keys[i].applies;
        }
    }
    return jobs;
}

const char *sm_cfg_jobs_text(unsigned jobs, char *buf, size_t cap)
{
    unsigned left = 0;
    for (int j = SM_JOB_SCAN; j <= SM_JOB_READ_BENCH; j++) {
        left += (jobs & SM_CFG_JOB(j)) != 0;
    }
    size_t n = 0;
    buf[0] = '\0';
    for (int j = SM_JOB_SCAN; j <= SM_JOB_READ_BENCH && n < cap; j++) {
        if ((jobs & SM_CFG_JOB(j)) == 0) {
            continue;
        }
        left--;
        const char *sep = n == 0 ? "" : left == 0 ? " and " : ", ";
        int w = snprintf(buf + n, cap - n, "%s%s", sep, sm_config_job_name((enum sm_job_kind)j));
        n += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

unsigned sm_cfg_distance(const char *a, const char *b)
{
    enum { MAXLEN = 64, CUT = 3 };
    size_t n = strlen(a), m = strlen(b);
    if (n > MAXLEN || m > MAXLEN) {
        return CUT + 1;
    }
    if ((n > m ? n - m : m - n) > CUT) {
        return CUT + 1;
    }
    unsigned d[MAXLEN + 1][MAXLEN + 1];
    for (size_t i = 0; i <= n; i++) {
        d[i][0] = (unsigned)i;
    }
    for (size_t j = 0; j <= m; j++) {
        d[0][j] = (unsigned)j;
    }
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            unsigned cost = a[i - 1] == b[j - 1] ? 0u : 1u;
            unsigned best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) {
                best = d[i][j - 1] + 1;
            }
            if (d[i - 1][j - 1] + cost < best) {
                best = d[i - 1][j - 1] + cost;
            }
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best) {
                best = d[i - 2][j - 2] + 1; /* transposition */
            }
            d[i][j] = best;
        }
    }
    return d[n][m] > CUT ? CUT + 1 : d[n][m];
}

/* Tries `cand` as a suggestion: keeps the first candidate of the smallest distance. */
static void consider(const char *path, const char *cand, size_t cand_len, const char **best,
                     size_t *best_len, unsigned *best_d)
{
    char buf[128];
    if (cand_len >= sizeof(buf)) {
        return;
    }
    memcpy(buf, cand, cand_len);
    buf[cand_len] = '\0';
    unsigned d = sm_cfg_distance(path, buf);
    if (d < *best_d) {
        *best_d = d;
        *best = cand;
        *best_len = cand_len;
    }
}

bool sm_cfg_suggest(const char *path, char *buf, size_t cap)
{
    const char *best = NULL;
    size_t best_len = 0;
    unsigned best_d = 3; /* accept at most 2 */
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const char *p = sm_cfg_keys[i].path;
        for (const char *dot = strchr(p, '.'); dot != NULL; dot = strchr(dot + 1, '.')) {
            consider(path, p, (size_t)(dot - p), &best, &best_len, &best_d); /* a group */
        }
        consider(path, p, strlen(p), &best, &best_len, &best_d);
    }
    if (best == NULL || best_d == 0 || best_len >= cap) {
        return false;
    }
    memcpy(buf, best, best_len);
    buf[best_len] = '\0';
    return true;
}

const char *sm_config_job_name(enum sm_job_kind job)
{
    switch (job) {
    case SM_JOB_SCAN:
        return "scan";
    case SM_JOB_CONVERT:
        return "convert";
    case SM_JOB_INGEST:
        return "ingest";
    case SM_JOB_READ_BENCH:
        return "read-bench";
    }
    return "?";
}
