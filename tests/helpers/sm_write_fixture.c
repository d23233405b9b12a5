/* sm_write_fixture: a hidden test helper that writes a deterministic pattern array with the
 * engine's writer (engine/write/), for the interop tests (tests/interop/test_write_zarrita.py) that
 * read it back with zarrita.js and `shardmill verify`, before the convert job exists.
 *
 * Usage: sm_write_fixture OUT [--dtype T] [--shape a,b,c] [--shard a,b,c | --shard none]
 *        [--chunk a,b,c] [--codec zstd|gzip|blosc|none] [--level N] [--index end|start]
 *        [--no-index-crc] [--fill V|nan] [--zero-below N] [--threads N]
 *        [--exists error|overwrite|resume] [--sync fsync|syncfs|none] [--raw FILE]
 *        [--fail-shard K]
 * Element i (linear C-order index) is the fill value when i < zero-below or i % 7 == 3, else a
 * hash of i cast to the dtype. --raw writes the whole array as little-endian C-order values.
 * Prints {"shards": N, "written": W, "kept": K, "bytes": B} on success; exit 1 on failure. */
#include "shardmill/sm_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shardmill/write.h>

struct pattern {
    enum sm_dtype dt;
    unsigned ndim;
    uint64_t shape[SM_MAX_DIMS];
    uint64_t zero_below, fail_shard;
    uint8_t fill[8];
};

/* The value of element i as little-endian bytes of the dtype. */
static void value(const struct pattern *p, uint64_t i, uint8_t *out)
{
    const size_t n = sm_dtype_size(p->dt);
    if (i < p->zero_below || i % 7 == 3) {
        memcpy(out, p->fill, n);
        return;
    }
    const uint64_t h = (i * 2654435761u) ^ (i >> 3);
    switch (p->dt) {
    case SM_DT_FLOAT32: {
        const float f = (float)(h % 100000) / 7.0f - 1000.0f;
        memcpy(out, &f, 4);
        return;
    }
    case SM_DT_FLOAT64: {
        const double d = (double)(h % 1000000) / 7.0 - 5000.0;
        memcpy(out, &d, 8);
        return;
    }
    case SM_DT_BOOL:
        out[0] = (uint8_t)(h & 1);
        return;
    default:
        for (size_t k = 0; k < n; k++) {
            out[k] = (uint8_t)(h >> (8 * k));
        }
        return;
    }
}

static sm_status fill_fn(void *user, int thread, uint64_t shard, const uint64_t *off,
                         const uint64_t *shape, void *data, size_t len, struct sm_err *err)
{
    (void)thread;
    const struct pattern *p = user;
    if (shard == p->fail_shard) {
        SM_FAIL(err, SM_E_DATA, "injected failure at shard %llu", (unsigned long long)shard);
    }
    const size_t elem = sm_dtype_size(p->dt);
    uint64_t c[SM_MAX_DIMS] = {0};
    for (size_t k = 0; k < len / elem; k++) {
        uint64_t lin = 0;
        for (unsigned d = 0; d < p->ndim; d++) {
            lin = lin * p->shape[d] + off[d] + c[d];
        }
        value(p, lin, (uint8_t *)data + k * elem);
        for (unsigned d = p->ndim; d-- > 0;) {
            if (++c[d] < shape[d]) {
                break;
            }
            c[d] = 0;
        }
    }
    return SM_OK;
}

static unsigned parse_list(const char *s, uint64_t *v)
{
    unsigned n = 0;
    for (;;) {
        char *end;
        v[n++] = strtoull(s, &end, 10);
        if (*end != ',' || n == SM_MAX_DIMS) {
            return n;
        }
        s = end + 1;
    }
}

/* The fill value as little-endian bytes of dt. */
static void fill_bytes(enum sm_dtype dt, const char *text, uint8_t *out)
{
    const double v = strcmp(text, "nan") == 0 ? NAN : strtod(text, NULL);
    memset(out, 0, 8);
    switch (dt) {
    case SM_DT_FLOAT32: {
        const float f = (float)v;
        memcpy(out, &f, 4);
        return;
    }
    case SM_DT_FLOAT64:
        memcpy(out, &v, 8);
        return;
    default: {
        const int64_t i = (int64_t)v;
        memcpy(out, &i, sm_dtype_size(dt)); /* little-endian host */
        return;
    }
    }
}

static int write_raw(const char *path, const struct pattern *p)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        return -1;
    }
    uint64_t n = 1;
    for (unsigned d = 0; d < p->ndim; d++) {
        n *= p->shape[d];
    }
    uint8_t v[8];
    const size_t elem = sm_dtype_size(p->dt);
    for (uint64_t i = 0; i < n; i++) {
        value(p, i, v);
        if (fwrite(v, 1, elem, f) != elem) {
            fclose(f);
            return -1;
        }
    }
    return fclose(f);
}

static int usage(void)
{
    fprintf(stderr, "usage: sm_write_fixture OUT [--dtype T] [--shape ...] [--shard ...|none] "
                    "[--chunk ...] [--codec C] [--level N] [--index end|start] [--no-index-crc] "
                    "[--fill V] [--zero-below N] [--threads N] [--exists E] [--sync S] "
                    "[--raw FILE] [--fail-shard K]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        return usage();
    }
    struct sm_output_spec s = SM_OUTPUT_SPEC_DEFAULTS;
    s.shape[0] = 20;
    s.shape[1] = 70;
    s.shape[2] = 45;
    struct sm_output_opts oo = SM_OUTPUT_OPTS_DEFAULTS;
    struct pattern p;
    memset(&p, 0, sizeof(p));
    p.fail_shard = UINT64_MAX;
    const char *raw = NULL, *fill = "0";
    int threads = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--no-index-crc") == 0) {
            s.index_crc32c = false;
            continue;
        }
        if (v == NULL) {
            return usage();
        }
        i++;
        if (strcmp(a, "--dtype") == 0) {
            if (!sm_dtype_from_name(v, &s.dtype)) {
                return usage();
            }
        } else if (strcmp(a, "--shape") == 0) {
            s.ndim = parse_list(v, s.shape);
        } else if (strcmp(a, "--shard") == 0) {
            s.sharded = strcmp(v, "none") != 0;
            if (s.sharded) {
                parse_list(v, s.shard);
            }
        } else if (strcmp(a, "--chunk") == 0) {
            parse_list(v, s.chunk);
        } else if (strcmp(a, "--codec") == 0) {
            s.codec = v;
        } else if (strcmp(a, "--level") == 0) {
            s.level = (int)strtol(v, NULL, 10);
        } else if (strcmp(a, "--index") == 0) {
            s.index_location = strcmp(v, "start") == 0 ? SM_SHARD_INDEX_START : SM_SHARD_INDEX_END;
        } else if (strcmp(a, "--fill") == 0) {
            fill = v;
        } else if (strcmp(a, "--zero-below") == 0) {
            p.zero_below = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--threads") == 0) {
            threads = (int)strtol(v, NULL, 10);
        } else if (strcmp(a, "--exists") == 0) {
            oo.exists = strcmp(v, "overwrite") == 0 ? SM_OUTPUT_EXISTS_OVERWRITE
                        : strcmp(v, "resume") == 0  ? SM_OUTPUT_EXISTS_RESUME
                                                    : SM_OUTPUT_EXISTS_ERROR;
        } else if (strcmp(a, "--sync") == 0) {
            oo.sync = strcmp(v, "syncfs") == 0 ? SM_OUTPUT_SYNC_SYNCFS
                      : strcmp(v, "none") == 0 ? SM_OUTPUT_SYNC_NONE
                                               : SM_OUTPUT_SYNC_FSYNC;
        } else if (strcmp(a, "--raw") == 0) {
            raw = v;
        } else if (strcmp(a, "--fail-shard") == 0) {
            p.fail_shard = strtoull(v, NULL, 10);
        } else {
            return usage();
        }
    }
    fill_bytes(s.dtype, fill, s.fill);
    p.dt = s.dtype;
    p.ndim = s.ndim;
    memcpy(p.shape, s.shape, sizeof(p.shape));
    memcpy(p.fill, s.fill, sizeof(p.fill));
    if (raw != NULL && write_raw(raw, &p) != 0) {
        fprintf(stderr, "sm_write_fixture: cannot write %s\n", raw);
        return 1;
    }

    struct sm_err err;
    sm_err_clear(&err);
    struct sm_writer *w = NULL;
    struct sm_output *o = NULL;
    struct sm_write_result res = {0};
    sm_status st = sm_writer_new(&s, &w, &err);
    if (st == SM_OK) {
        st = sm_output_open(argv[1], &oo, &o, &err);
    }
    if (st == SM_OK) {
        st = sm_output_begin(o, w, &err);
    }
    if (st == SM_OK) {
        const struct sm_write_job job = {.first = 0,
                                         .count = sm_writer_nshards(w),
                                         .threads = threads,
                                         .fill = fill_fn,
                                         .user = &p};
        st = sm_write_shards(w, o, &job, &res, &err);
    }
    if (st == SM_OK) {
        st = sm_output_flush(o, &err);
    }
    if (st == SM_OK) {
        st = sm_output_finish(o, &err);
    }
    if (st == SM_OK) {
        printf("{\"shards\": %llu, \"written\": %llu, \"kept\": %llu, \"bytes\": %llu}\n",
               (unsigned long long)sm_writer_nshards(w), (unsigned long long)res.written,
               (unsigned long long)res.kept, (unsigned long long)res.bytes);
    } else {
        fprintf(stderr, "sm_write_fixture: error: %s: %s\n", err.where, err.what);
    }
    sm_output_close(o);
    sm_writer_free(w);
    return st == SM_OK ? 0 : 1;
}
