/* W4 block codecs (SPEC §8 W4): decode and encode of 64^3 int32 blocks through shardmill's codec
 * chains (raw = bytes only, gzip level 6, blosc lz4 shuffle clevel 5, zstd level 3), "smooth"
 * (v = x + y + z) and "random" (splitmix64, seed 42) content; min / median / max microseconds per
 * block, compression ratio, and a byte-for-byte check of every decoded block. One JSON object on
 * stdout. Driven, with the numcodecs peer, by bench/block_codecs.py. */
#include "shardmill/sm_config.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"
#include "shardmill/codec.h"

#define SIDE 64
#define NVOX (SIDE * SIDE * SIDE)
#define LE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"

struct codec_row {
    const char *name;
    const char *codecs; /* the v3 chain */
    bool extra;         /* engine-only row, run only when asked for by --codec */
};

static const struct codec_row codecs[] = {
    {"raw", "[" LE "]", false},
    {"gzip", "[" LE ",{\"name\":\"gzip\",\"configuration\":{\"level\":6}}]", false},
    {"blosc",
     "[" LE ",{\"name\":\"blosc\",\"configuration\":{\"cname\":\"lz4\",\"clevel\":5,"
     "\"shuffle\":\"shuffle\",\"typesize\":4,\"blocksize\":0}}]",
     false},
    {"zstd", "[" LE ",{\"name\":\"zstd\",\"configuration\":{\"level\":3,\"checksum\":false}}]",
     false},
    /* Not part of W4: the transpose kernel on the same block (v2 order "F"), for docs. */
    {"transpose", "[{\"name\":\"transpose\",\"configuration\":{\"order\":[2,1,0]}}," LE "]", true},
};
#define NCODECS (sizeof(codecs) / sizeof(codecs[0]))

static const char *const contents[] = {"smooth", "random"};

/* The same generators as bench/block_codecs.py (the peer checks them against each other). */
static void fill_block(int32_t *v, const char *content)
{
    if (strcmp(content, "smooth") == 0) {
        for (int z = 0; z < SIDE; z++) {
            for (int y = 0; y < SIDE; y++) {
                for (int x = 0; x < SIDE; x++) {
                    v[(z * SIDE + y) * SIDE + x] = x + y + z;
                }
            }
        }
        return;
    }
    uint64_t s = 42;
    for (size_t i = 0; i < NVOX; i++) {
        uint64_t t = (s += 0x9E3779B97F4A7C15ull);
        t = (t ^ (t >> 30)) * 0xBF58476D1CE4E5B9ull;
        t = (t ^ (t >> 27)) * 0x94D049BB133111EBull;
        t ^= t >> 31;
        v[i] = (int32_t)(uint32_t)(t >> 32);
    }
}

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* {"min", "median", "max"} in microseconds, plus every sample (for the driver's pooled stats). */
static json_t *stats_json(uint64_t *ns, size_t n)
{
    json_t *samples = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(samples, json_real((double)ns[i] / 1e3));
    }
    qsort(ns, n, sizeof(*ns), cmp_u64);
    const double med = n % 2 ? (double)ns[n / 2] : ((double)ns[n / 2 - 1] + (double)ns[n / 2]) / 2;
    return json_pack("{s:f, s:f, s:f, s:o}", "min", (double)ns[0] / 1e3, "median", med / 1e3, "max",
                     (double)ns[n - 1] / 1e3, "samples_us", samples);
}

static int fail(const char *what, const struct sm_err *err)
{
    fprintf(stderr, "bench_codecs: %s: %s\n", what, err != NULL ? err->what : strerror(errno));
    return 1;
}

/* Decodes another implementation's encoding of the same block (DIR/<codec>-<content>.bin, if the
 * file exists) and compares it with the block. 0 when equal or absent, 1 on any difference. */
static int check_foreign(const char *dir, const struct codec_row *row, const char *content,
                         const struct sm_codec_chain *chain, const int32_t *block, size_t len,
                         struct sm_buf *dec, struct sm_scratch *scratch)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s-%s.bin", dir, row->name, content);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return 0;
    }
    struct sm_buf enc = SM_BUF_INIT;
    struct sm_err err;
    sm_err_clear(&err);
    int rc = 1;
    if (fseek(f, 0, SEEK_END) == 0) {
        const long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
            sm_buf_reserve(&enc, (size_t)n, &err) == SM_OK &&
            fread(enc.ptr, 1, (size_t)n, f) == (size_t)n) {
            enc.len = (size_t)n;
            rc = sm_codec_chain_decode(chain, sm_buf_bytes(&enc), dec, scratch, &err) != SM_OK ||
                 dec->len != len || memcmp(dec->ptr, block, len) != 0;
        }
    }
    fclose(f);
    sm_buf_free(&enc);
    if (rc != 0) {
        fprintf(stderr, "bench_codecs: %s does not decode to the %s block%s%s\n", path, content,
                err.what[0] != '\0' ? ": " : "", err.what);
    }
    return rc;
}

static int write_file(const char *dir, const char *codec, const char *content,
                      const struct sm_buf *b)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s-%s.bin", dir, codec, content);
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        return -1;
    }
    const size_t w = fwrite(b->ptr, 1, b->len, f);
    return fclose(f) == 0 && w == b->len ? 0 : -1;
}

/* Runs one (codec, content) case; appends its result to `results`. Returns 0 or 1 (failure). */
static int run_case(const struct codec_row *row, const char *content, int reps, int warmup,
                    const char *dump, const char *check, struct sm_scratch *scratch,
                    json_t *results)
{
    struct sm_err err;
    sm_err_clear(&err);
    json_error_t je;
    json_t *j = json_loads(row->codecs, 0, &je);
    struct sm_repr r;
    memset(&r, 0, sizeof(r));
    r.dtype = SM_DT_INT32;
    r.ndim = 3;
    r.shape[0] = r.shape[1] = r.shape[2] = SIDE;
    r.len = NVOX * sizeof(int32_t);
    struct sm_codec_chain *chain = NULL;
    if (j == NULL || sm_codec_chain_new(j, &r, &chain, &err) != SM_OK) {
        json_decref(j);
        return fail(row->name, &err);
    }
    json_decref(j);
    int32_t *block = sm_malloc(r.len);
    uint64_t *enc_ns = sm_malloc(sizeof(uint64_t) * (size_t)reps);
    uint64_t *dec_ns = sm_malloc(sizeof(uint64_t) * (size_t)reps);
    struct sm_buf enc = SM_BUF_INIT, dec = SM_BUF_INIT;
    int rc = 0;
    if (block == NULL || enc_ns == NULL || dec_ns == NULL) {
        rc = fail("out of memory", NULL);
        goto out;
    }
    fill_block(block, content);
    const struct sm_bytes in = sm_bytes_of(block, r.len);
    for (int i = -warmup; i < reps; i++) {
        const uint64_t t0 = sm_clock_ns();
        sm_status st = sm_codec_chain_encode(chain, in, &enc, scratch, &err);
        const uint64_t t1 = sm_clock_ns();
        if (st == SM_OK) {
            st = sm_codec_chain_decode(chain, sm_buf_bytes(&enc), &dec, scratch, &err);
        }
        const uint64_t t2 = sm_clock_ns();
        if (st != SM_OK) {
            rc = fail(row->name, &err);
            goto out;
        }
        if (dec.len != r.len || memcmp(dec.ptr, block, r.len) != 0) { /* every block is checked */
            fprintf(stderr, "bench_codecs: %s/%s: decoded block differs\n", row->name, content);
            rc = 1;
            goto out;
        }
        memset(dec.ptr, 0, dec.len); /* the next decode must rewrite every byte */
        if (i >= 0) {
            enc_ns[i] = t1 - t0;
            dec_ns[i] = t2 - t1;
        }
    }
    if (check != NULL && check_foreign(check, row, content, chain, block, r.len, &dec, scratch)) {
        rc = 1;
        goto out;
    }
    if (dump != NULL && write_file(dump, row->name, content, &enc) != 0) {
        rc = fail(dump, NULL);
        goto out;
    }
    json_array_append_new(
        results, json_pack("{s:s, s:s, s:s, s:I, s:I, s:f, s:o, s:o, s:b}", "codec", row->name,
                           "content", content, "chain", row->codecs, "decoded_bytes",
                           (json_int_t)r.len, "encoded_bytes", (json_int_t)enc.len, "ratio",
                           (double)r.len / (double)enc.len, "decode_us", stats_json(dec_ns, reps),
                           "encode_us", stats_json(enc_ns, reps), "verified", 1));
out:
    sm_buf_free(&enc);
    sm_buf_free(&dec);
    sm_free(block);
    sm_free(enc_ns);
    sm_free(dec_ns);
    sm_codec_chain_free(chain);
    return rc;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_codecs [--quick] [--reps N] [--warmup N]\n"
            "                    [--codec raw|gzip|blosc|zstd|transpose]\n"
            "                    [--content smooth|random] [--dump DIR] [--check DIR]\n"
            "W4: encode/decode 64^3 int32 blocks; prints one JSON object (times in us/block).\n"
            "--dump writes DIR/<codec>-<content>.bin; --check decodes such files from a peer.\n");
}

int main(int argc, char **argv)
{
    int reps = 200, warmup = 10;
    const char *only_codec = NULL, *only_content = NULL, *dump = NULL, *check = NULL;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = true;
            reps = 5;
            warmup = 1;
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = (int)strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc) {
            warmup = (int)strtol(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--codec") == 0 && i + 1 < argc) {
            only_codec = argv[++i];
        } else if (strcmp(argv[i], "--content") == 0 && i + 1 < argc) {
            only_content = argv[++i];
        } else if (strcmp(argv[i], "--dump") == 0 && i + 1 < argc) {
            dump = argv[++i];
        } else if (strcmp(argv[i], "--check") == 0 && i + 1 < argc) {
            check = argv[++i];
        } else {
            usage();
            return strcmp(argv[i], "--help") == 0 ? 0 : 2;
        }
    }
    if (reps < 1 || warmup < 0) {
        usage();
        return 2;
    }
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_scratch *scratch = NULL;
    if (sm_scratch_new(&scratch, &err) != SM_OK) {
        return fail("scratch", &err);
    }
    json_t *results = json_array();
    int rc = 0;
    size_t ran = 0;
    for (size_t c = 0; c < NCODECS && rc == 0; c++) {
        for (size_t k = 0; k < 2 && rc == 0; k++) {
            if ((only_codec == NULL && codecs[c].extra) ||
                (only_codec != NULL && strcmp(only_codec, codecs[c].name) != 0) ||
                (only_content != NULL && strcmp(only_content, contents[k]) != 0)) {
                continue;
            }
            rc = run_case(&codecs[c], contents[k], reps, warmup, dump, check, scratch, results);
            ran++;
        }
    }
    sm_scratch_free(scratch);
    if (rc == 0 && ran == 0) {
        fprintf(stderr, "bench_codecs: no case matches the filters\n");
        rc = 2;
    }
    if (rc == 0) {
        json_t *doc = json_pack("{s:s, s:s, s:[i,i,i], s:s, s:b, s:i, s:i, s:o}", "workload", "W4",
                                "impl", "shardmill", "block", SIDE, SIDE, SIDE, "dtype", "int32",
                                "quick", quick, "reps", reps, "warmup", warmup, "results", results);
        if (json_dumpf(doc, stdout, JSON_COMPACT) != 0 || putchar('\n') == EOF) {
            rc = 1;
        }
        json_decref(doc);
    } else {
        json_decref(results);
    }
    return rc;
}
