/* The floor of a convert (issue 23 #4): what its codecs and the disk alone cost on this machine,
 * so a benchmark can print convert / floor. From an input array and the output a convert wrote
 * from it (the same codecs, shapes and bytes):
 *   decode  every stored object of the input, decoded by its chain on one thread (the encoded
 *           bytes are read into memory first, untimed);
 *   encode  every stored object of the output, decoded (untimed) and encoded again by its chain
 *           on one thread;
 *   write   the output's encoded bytes written to a new file next to it and fsynced, then removed.
 * floor = (decode + encode) / threads + write: the codec work spread perfectly over the threads,
 * plus one write of the same bytes. Reading the input's files, the histogram, the normalization
 * and the metadata are left out, so the floor is below any real convert. One JSON object on
 * stdout: seconds of each part, the bytes, the object counts and the floor.
 *
 *   bench_floor INPUT_ARRAY_DIR OUTPUT_ARRAY_DIR [--threads N] [--reps N]
 *
 * Each timed part runs --reps times (default 3) and keeps its minimum: the floor is a bound. */
#include "shardmill/sm_config.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardmill/alloc.h"
#include "shardmill/array.h"
#include "shardmill/buf.h"
#include "shardmill/clock.h"
#include "shardmill/codec.h"
#include "shardmill/meta.h"
#include "shardmill/store.h"

/* Every stored object of an array, encoded, in C order of its grid (missing ones left out). */
struct objects {
    struct sm_store *store;
    struct sm_array *array;
    const struct sm_array_meta *m;
    struct sm_buf *enc;
    size_t n;
    uint64_t bytes;
};

static int fail(const char *what, const struct sm_err *err)
{
    fprintf(stderr, "bench_floor: %s: %s%s%s\n", what, err->what, err->where[0] ? " at " : "",
            err->where);
    return 1;
}

static int load(const char *dir, struct objects *o, struct sm_err *err)
{
    memset(o, 0, sizeof(*o));
    const struct sm_array_opts opts = SM_ARRAY_OPTS_DEFAULTS;
    if (sm_store_file_open(dir, &o->store, err) != SM_OK ||
        sm_array_open(o->store, "", &opts, &o->array, err) != SM_OK) {
        return fail(dir, err);
    }
    o->m = sm_array_meta(o->array);
    uint64_t grid[SM_MAX_DIMS], total = 1;
    for (unsigned d = 0; d < o->m->ndim; d++) {
        grid[d] = (o->m->shape[d] + o->m->chunk_shape[d] - 1) / o->m->chunk_shape[d];
        total *= grid[d];
    }
    o->enc = calloc((size_t)total, sizeof(*o->enc));
    if (o->enc == NULL) {
        fprintf(stderr, "bench_floor: out of memory\n");
        return 1;
    }
    for (uint64_t k = 0; k < total; k++) {
        uint64_t idx[SM_MAX_DIMS], rest = k;
        for (unsigned d = o->m->ndim; d-- > 0;) {
            idx[d] = rest % grid[d];
            rest /= grid[d];
        }
        char key[1024];
        bool found = false;
        struct sm_buf *b = &o->enc[o->n];
        if (sm_meta_chunk_key(o->m, idx, key, sizeof(key), err) != SM_OK ||
            sm_store_get(o->store, key, sm_range_all(), SM_IO_PAYLOAD, b, &found, err) != SM_OK) {
            return fail(dir, err);
        }
        if (found) {
            o->bytes += b->len;
            o->n++;
        }
    }
    return 0;
}

static void unload(struct objects *o)
{
    for (size_t i = 0; o->enc != NULL && i < o->n; i++) {
        sm_buf_free(&o->enc[i]);
    }
    free(o->enc);
    sm_array_close(o->array);
    sm_store_close(o->store);
}

/* Seconds to decode every object once on one thread. */
static int time_decode(const struct objects *o, struct sm_scratch *s, double *sec,
                       struct sm_err *err)
{
    struct sm_buf dec = SM_BUF_INIT;
    const uint64_t t0 = sm_clock_ns();
    for (size_t i = 0; i < o->n; i++) {
        if (sm_codec_chain_decode(o->m->chain, sm_buf_bytes(&o->enc[i]), &dec, s, err) != SM_OK) {
            sm_buf_free(&dec);
            return fail("decode", err);
        }
    }
    *sec = (double)(sm_clock_ns() - t0) / 1e9;
    sm_buf_free(&dec);
    return 0;
}

/* Seconds to encode every object's decoded values once on one thread (decoding them is not
 * timed), and the bytes encoded. */
static int time_encode(const struct objects *o, struct sm_scratch *s, double *sec, uint64_t *bytes,
                       struct sm_err *err)
{
    struct sm_buf dec = SM_BUF_INIT, enc = SM_BUF_INIT;
    uint64_t ns = 0;
    *bytes = 0;
    int rc = 0;
    for (size_t i = 0; i < o->n && rc == 0; i++) {
        if (sm_codec_chain_decode(o->m->chain, sm_buf_bytes(&o->enc[i]), &dec, s, err) != SM_OK) {
            rc = fail("decode", err);
            break;
        }
        const uint64_t t0 = sm_clock_ns();
        if (sm_codec_chain_encode(o->m->chain, sm_buf_bytes(&dec), &enc, s, err) != SM_OK) {
            rc = fail("encode", err);
        }
        ns += sm_clock_ns() - t0;
        *bytes += enc.len;
    }
    *sec = (double)ns / 1e9;
    sm_buf_free(&dec);
    sm_buf_free(&enc);
    return rc;
}

/* Seconds to write the objects' bytes into one new file in dir and fsync it (then removed). */
static int time_write(const struct objects *o, const char *dir, double *sec)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/.bench-floor.%ld", dir, (long)getpid());
    const uint64_t t0 = sm_clock_ns();
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd < 0;
    for (size_t i = 0; i < o->n && rc == 0; i++) {
        const uint8_t *p = o->enc[i].ptr;
        size_t left = o->enc[i].len;
        while (left > 0 && rc == 0) {
            const ssize_t w = write(fd, p, left);
            rc = w < 0;
            p += w > 0 ? w : 0;
            left -= w > 0 ? (size_t)w : 0;
        }
    }
    rc = rc || fsync(fd) != 0;
    *sec = (double)(sm_clock_ns() - t0) / 1e9;
    if (fd >= 0) {
        close(fd);
    }
    unlink(path);
    if (rc != 0) {
        fprintf(stderr, "bench_floor: write %s: %s\n", path, strerror(errno));
    }
    return rc;
}

/* A whole positive number of at most 1024, or -1. */
static int count_arg(const char *s)
{
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    return errno != 0 || end == s || *end != '\0' || v < 1 || v > 1024 ? -1 : (int)v;
}

int main(int argc, char **argv)
{
    int threads = 1, reps = 3;
    const char *dirs[2] = {NULL, NULL};
    unsigned ndirs = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            threads = count_arg(argv[++i]);
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = count_arg(argv[++i]);
        } else if (argv[i][0] != '-' && ndirs < 2) {
            dirs[ndirs++] = argv[i];
        } else {
            fprintf(stderr, "usage: bench_floor INPUT_ARRAY_DIR OUTPUT_ARRAY_DIR [--threads N] "
                            "[--reps N]\n");
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (ndirs != 2 || threads < 1 || reps < 1) {
        fprintf(stderr, "usage: bench_floor INPUT_ARRAY_DIR OUTPUT_ARRAY_DIR [--threads N] "
                        "[--reps N]\n");
        return 2;
    }
    struct sm_err err;
    sm_err_clear(&err);
    struct objects in, out;
    struct sm_scratch *s = NULL;
    int rc = load(dirs[0], &in, &err);
    rc = rc || load(dirs[1], &out, &err);
    if (rc == 0 && sm_scratch_new(&s, &err) != SM_OK) {
        rc = fail("scratch", &err);
    }
    double dec = 1e300, enc = 1e300, wr = 1e300;
    uint64_t enc_bytes = 0;
    for (int r = 0; r < reps && rc == 0; r++) {
        double a = 0, b = 0, c = 0;
        rc = time_decode(&in, s, &a, &err) || time_encode(&out, s, &b, &enc_bytes, &err) ||
             time_write(&out, dirs[1], &c);
        dec = a < dec ? a : dec;
        enc = b < enc ? b : enc;
        wr = c < wr ? c : wr;
    }
    if (rc == 0) {
        const double floor_s = (dec + enc) / threads + wr;
        json_t *o =
            json_pack("{s:f,s:f,s:f,s:f,s:i,s:I,s:I,s:I,s:I,s:I}", "decode_s", dec, "encode_s", enc,
                      "write_s", wr, "floor_s", floor_s, "threads", threads, "input_objects",
                      (json_int_t)in.n, "input_bytes", (json_int_t)in.bytes, "output_objects",
                      (json_int_t)out.n, "output_bytes", (json_int_t)out.bytes, "reencoded_bytes",
                      (json_int_t)enc_bytes);
        char *text = json_dumps(o, JSON_COMPACT);
        printf("%s\n", text);
        free(text);
        json_decref(o);
    }
    sm_scratch_free(s);
    unload(&in);
    unload(&out);
    return rc;
}
