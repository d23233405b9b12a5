/* Helpers shared by the write/ unit tests: a deterministic value pattern (with runs equal to the
 * fill value, so inner chunks are stored empty), a fill callback for sm_write_shards, the whole
 * write pipeline in one call, reading an output back through the engine's read path, and
 * byte-for-byte tree comparison. Header-only, `static inline`. Include after <cmocka.h>, sm_test.h.
 */
#ifndef SM_TESTS_UNIT_WRITE_WRITE_TEST_H
#define SM_TESTS_UNIT_WRITE_WRITE_TEST_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shardmill/array.h"
#include "shardmill/store.h"
#include "shardmill/write.h"

/* Value of element i (linear C-order index in the whole array): 0 (the default fill) for the first
 * `zero_below` elements and every 7th, else a dtype-specific pattern. */
static inline void wt_value(enum sm_dtype dt, uint64_t i, uint64_t zero_below, uint8_t *out)
{
    const size_t n = sm_dtype_size(dt);
    memset(out, 0, n);
    if (i < zero_below || i % 7 == 3) {
        return;
    }
    const uint64_t h = (i * 2654435761u) ^ (i >> 3);
    switch (dt) {
    case SM_DT_FLOAT32: {
        const float f = (float)(h % 100000) / 7.0f + 0.5f;
        memcpy(out, &f, 4);
        break;
    }
    case SM_DT_FLOAT64: {
        const double d = (double)(h % 100000) / 7.0 + 0.5;
        memcpy(out, &d, 8);
        break;
    }
    case SM_DT_BOOL:
        out[0] = (uint8_t)(h & 1);
        break;
    default:
        for (size_t k = 0; k < n; k++) {
            out[k] = (uint8_t)(h >> (8 * k));
        }
        out[0] |= 1; /* never the zero fill */
        break;
    }
}

struct wt_pattern {
    enum sm_dtype dt;
    unsigned ndim;
    uint64_t shape[SM_MAX_DIMS];
    uint64_t zero_below;
    uint64_t fail_shard; /* UINT64_MAX: never fail */
};

static inline sm_status wt_fill(void *user, int thread, uint64_t shard, const uint64_t *off,
                                const uint64_t *shape, void *data, size_t len, struct sm_err *err)
{
    (void)thread;
    const struct wt_pattern *p = (const struct wt_pattern *)user;
    if (shard == p->fail_shard) {
        SM_FAIL(err, SM_E_DATA, "injected failure at shard %llu", (unsigned long long)shard);
    }
    const size_t elem = sm_dtype_size(p->dt);
    uint64_t c[SM_MAX_DIMS] = {0};
    uint8_t *o = (uint8_t *)data;
    const size_t n = len / elem;
    for (size_t k = 0; k < n; k++) {
        uint64_t lin = 0;
        for (unsigned d = 0; d < p->ndim; d++) {
            lin = lin * p->shape[d] + off[d] + c[d];
        }
        wt_value(p->dt, lin, p->zero_below, o + k * elem);
        for (unsigned d = p->ndim; d-- > 0;) {
            if (++c[d] < shape[d]) {
                break;
            }
            c[d] = 0;
        }
    }
    return SM_OK;
}

/* The whole array of the pattern (malloc'd). */
static inline uint8_t *wt_reference(const struct wt_pattern *p, size_t *len)
{
    size_t n = 1;
    for (unsigned d = 0; d < p->ndim; d++) {
        n *= (size_t)p->shape[d];
    }
    const size_t elem = sm_dtype_size(p->dt);
    uint8_t *r = (uint8_t *)malloc(n * elem + 1);
    for (size_t i = 0; i < n; i++) {
        wt_value(p->dt, i, p->zero_below, r + i * elem);
    }
    *len = n * elem;
    return r;
}

static inline struct wt_pattern wt_pattern_of(const struct sm_output_spec *s, uint64_t zero_below)
{
    struct wt_pattern p;
    memset(&p, 0, sizeof(p));
    p.dt = s->dtype;
    p.ndim = s->ndim;
    memcpy(p.shape, s->shape, sizeof(p.shape));
    p.zero_below = zero_below;
    p.fail_shard = UINT64_MAX;
    return p;
}

/* begin -> write all shards -> flush -> finish on an open output o, then o is closed. Returns
 * the first failing status. */
static inline sm_status wt_write_open(struct sm_output *o, const struct sm_output_spec *spec,
                                      struct wt_pattern *p, int threads,
                                      struct sm_write_result *res, struct sm_err *err)
{
    struct sm_writer *w = NULL;
    struct sm_write_result local;
    if (res == NULL) {
        res = &local;
    }
    sm_status st = sm_writer_new(spec, &w, err);
    if (st == SM_OK) {
        st = sm_output_begin(o, w, err);
    }
    if (st == SM_OK) {
        struct sm_write_job job = {.first = 0,
                                   .count = sm_writer_nshards(w),
                                   .threads = threads,
                                   .fill = wt_fill,
                                   .user = p};
        st = sm_write_shards(w, o, &job, res, err);
    }
    if (st == SM_OK) {
        st = sm_output_flush(o, err);
    }
    if (st == SM_OK) {
        st = sm_output_finish(o, err);
    }
    sm_output_close(o);
    sm_writer_free(w);
    return st;
}

/* open -> wt_write_open. Returns the first failing status. */
static inline sm_status wt_write(const char *dir, const struct sm_output_spec *spec,
                                 const struct sm_output_opts *opts, struct wt_pattern *p,
                                 int threads, struct sm_write_result *res, struct sm_err *err)
{
    struct sm_output *o = NULL;
    SM_TRY(sm_output_open(dir, opts, &o, err));
    return wt_write_open(o, spec, p, threads, res, err);
}

/* Reads the whole array at dir through sm_array_open + sm_array_read_region (malloc'd). */
static inline uint8_t *wt_read_back(const char *dir, size_t len, struct sm_err *err)
{
    struct sm_store *s = NULL;
    struct sm_array *a = NULL;
    uint8_t *buf = NULL;
    struct sm_scratch *sc = NULL;
    const struct sm_array_opts ao = SM_ARRAY_OPTS_DEFAULTS;
    if (sm_store_file_open(dir, &s, err) != SM_OK || sm_array_open(s, "", &ao, &a, err) != SM_OK ||
        sm_scratch_new(&sc, err) != SM_OK) {
        goto done;
    }
    const struct sm_array_meta *m = sm_array_meta(a);
    const uint64_t zero[SM_MAX_DIMS] = {0};
    buf = (uint8_t *)malloc(len + 1);
    if (sm_array_read_region(a, zero, m->shape, buf, len, sc, err) != SM_OK) {
        free(buf);
        buf = NULL;
    }
done:
    sm_scratch_free(sc);
    sm_array_close(a);
    sm_store_close(s);
    return buf;
}

/* Reads a file wholly (malloc'd); NULL if missing. */
static inline uint8_t *wt_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = (uint8_t *)malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    b[*len] = 0;
    return b;
}

/* Counts regular files under dir whose name contains needle (recursively). */
static inline int wt_count_files(const char *dir, const char *needle)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        return 0;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        char p[4096];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) != 0) {
            continue;
        }
        if (S_ISDIR(sb.st_mode)) {
            n += wt_count_files(p, needle);
        } else if (strstr(e->d_name, needle) != NULL) {
            n++;
        }
    }
    closedir(d);
    return n;
}

/* 0 if the trees a and b hold the same names with the same bytes; else prints the difference. */
static inline int wt_trees_differ(const char *a, const char *b)
{
    DIR *d = opendir(a);
    if (d == NULL) {
        printf("cannot open %s\n", a);
        return 1;
    }
    int diff = 0;
    int na = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        na++;
        char pa[4096], pb[4096];
        snprintf(pa, sizeof(pa), "%s/%s", a, e->d_name);
        snprintf(pb, sizeof(pb), "%s/%s", b, e->d_name);
        struct stat sa, sb;
        if (lstat(pa, &sa) != 0 || lstat(pb, &sb) != 0) {
            printf("only in %s: %s\n", a, e->d_name);
            diff = 1;
            continue;
        }
        if (S_ISDIR(sa.st_mode)) {
            diff |= S_ISDIR(sb.st_mode) ? wt_trees_differ(pa, pb) : 1;
            continue;
        }
        size_t la = 0, lb = 0;
        uint8_t *ba = wt_slurp(pa, &la), *bb = wt_slurp(pb, &lb);
        if (ba == NULL || bb == NULL || la != lb || memcmp(ba, bb, la) != 0) {
            printf("differs: %s\n", pa);
            diff = 1;
        }
        free(ba);
        free(bb);
    }
    closedir(d);
    if (sm_test_count_entries(b, "") != na) {
        printf("%s and %s hold different numbers of entries\n", a, b);
        diff = 1;
    }
    return diff;
}

/* A spec of `ndim` dims with the SPEC §2 defaults (3-d) or scaled-down ones. */
/* The output at path, overwritten and begun with writer w (no syncs). */
static inline struct sm_output *wt_begin_image(const char *path, const struct sm_writer *w)
{
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_output_opts oo = SM_OUTPUT_OPTS_DEFAULTS;
    oo.sync = SM_OUTPUT_SYNC_NONE;
    oo.exists = SM_OUTPUT_EXISTS_OVERWRITE;
    struct sm_output *o;
    assert_ok(sm_output_open(path, &oo, &o, &err), &err);
    assert_ok(sm_output_begin(o, w, &err), &err);
    return o;
}

static inline struct sm_output_spec wt_spec(uint64_t z, uint64_t y, uint64_t x)
{
    struct sm_output_spec s = SM_OUTPUT_SPEC_DEFAULTS;
    s.shape[0] = z;
    s.shape[1] = y;
    s.shape[2] = x;
    return s;
}

#endif
