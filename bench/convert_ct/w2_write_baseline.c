/* w2_write_baseline: the cost of encoding and durably writing the 256 shard files of a W2
 * output, with nothing else (bench/convert_ct, SPEC §8 W2). Built by bench/convert_ct/w2.py with
 * the system C compiler and -lzstd -lpthread; independent of the engine's code.
 *
 *   w2_write_baseline --values F32 --shape D,H,W --out DIR --result R.json
 *                     [--shard 8,32,32] [--chunk 2,16,16] [--level 3] [--threads N]
 *                     [--sync fsync|fsync-batch|syncfs-batch|syncfs|none] [--encode-only]
 *
 * F32 holds the normalized output (float32 little-endian, C order, D*H*W values), produced by
 * the driver with NumPy outside the timed interval. The program reads it, then times:
 *   per shard (N threads, dynamic assignment like the engine's OpenMP driver): gather the
 *   shard's values (padding edge shards with 0.0f), cut the inner chunks in C order over the
 *   inner grid, store an all-0.0f inner chunk as empty (offset = nbytes = 2^64-1), compress the
 *   others with ZSTD_compress2 (level, checksum off), append the index (offset, nbytes pairs,
 *   uint64 little-endian) and its CRC-32C (4 bytes little-endian): the zarr v3
 *   sharding_indexed layout of SPEC §2's default. Then (unless --encode-only) mkdir -p the
 *   key's directory (c/i/j), create KEY.tmp.PID.N (O_EXCL), write, fsync (--sync fsync),
 *   close, rename to c/i/j/k;
 *   after all shards: --sync fsync fsyncs every directory that received an entry (deepest
 *   first, then c, then DIR); --sync syncfs calls syncfs(2) once; none does nothing.
 *   --sync fsync-batch keeps the guarantee of fsync (no object is renamed into place before
 *   its data is durable) with the fsyncs deferred: every shard is written to its temporary
 *   name and left open, then (N threads again) each is fsynced, closed and renamed, then the
 *   directories are fsynced as for fsync.
 *   --sync syncfs-batch is the engine's SYNCFS discipline (same guarantee): every shard is
 *   written to its temporary name and closed, then syncfs(2), then every shard is renamed into
 *   place (one thread, in shard order), then syncfs(2) again.
 *   --sync syncfs (weaker: a crash may leave a partial object under its final name): each
 *   shard is written and renamed, then one syncfs(2).
 * Nothing else: no zarr.json, journal, completion marker, checksums or normalization.
 *
 * The result JSON: wall_ns of the timed interval, encode_ns / io_ns summed over threads,
 * sync_ns (directory fsyncs or syncfs), files, bytes, fsync calls, empty inner chunks, and the
 * threads used. Exit 0, or 1 with a message on stderr. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#define ND 3
#define EMPTY UINT64_MAX

enum sync_mode { SYNC_FSYNC, SYNC_SYNCFS, SYNC_NONE, SYNC_BATCH, SYNC_SYNCFS_BATCH };

struct cfg {
    const char *values_path, *out, *result;
    uint64_t shape[ND], shard[ND], chunk[ND];
    int level, threads;
    enum sync_mode sync;
    int encode_only;
};

struct shared {
    const struct cfg *c;
    const float *values;
    int rootfd;
    uint64_t grid[ND], nshards, inner_grid[ND], n_inner;
    atomic_uint_fast64_t next;
    atomic_uint_fast64_t tmp_counter;
    atomic_int failed;
    uint8_t *dir_used; /* per directory of levels c/i and c/i/j: 1 if it received an entry */
    int *batch_fd;     /* fsync-batch: the open temporary file of each shard */
    char (*batch_tmp)[224], (*batch_key)[160];
    int phase2; /* fsync-batch: the threads now fsync + rename */
};

struct worker {
    struct shared *s;
    pthread_t tid;
    uint64_t encode_ns, io_ns, files, bytes, fsyncs, empty_inner;
    char msg[512];
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t crc_table[256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        crc_table[i] = c;
    }
}

static uint32_t crc32c(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    }
    return c ^ 0xFFFFFFFFu;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int k = 0; k < 8; k++) {
        p[k] = (uint8_t)(v >> (8 * k));
    }
}

static int parse3(const char *s, uint64_t *out)
{
    char *end;
    for (int d = 0; d < ND; d++) {
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno != 0 || end == s || v == 0 || (d < ND - 1 && *end != ',') ||
            (d == ND - 1 && *end != '\0')) {
            return -1;
        }
        out[d] = v;
        s = end + 1;
    }
    return 0;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int mkdir_p(int rootfd, const char *rel)
{
    char p[256];
    snprintf(p, sizeof(p), "%s", rel);
    for (char *c = p;; c++) {
        if (*c != '/' && *c != '\0') {
            continue;
        }
        const char saved = *c;
        *c = '\0';
        if (mkdirat(rootfd, p, 0777) != 0 && errno != EEXIST) {
            return -1;
        }
        *c = saved;
        if (saved == '\0') {
            return 0;
        }
    }
}

/* Encodes shard `sh` into *out (grown as needed); returns its length or 0 on failure. */
static size_t encode_shard(struct worker *wk, ZSTD_CCtx *cc, uint64_t sh, float *shard_buf,
                           float *chunk_buf, uint8_t **out, size_t *cap)
{
    struct shared *s = wk->s;
    const struct cfg *c = s->c;
    uint64_t idx[ND], org[ND], ext[ND];
    uint64_t r = sh;
    for (int d = ND; d-- > 0;) {
        idx[d] = r % s->grid[d];
        r /= s->grid[d];
    }
    int edge = 0;
    for (int d = 0; d < ND; d++) {
        org[d] = idx[d] * c->shard[d];
        ext[d] = c->shape[d] - org[d] < c->shard[d] ? c->shape[d] - org[d] : c->shard[d];
        edge |= ext[d] != c->shard[d];
    }
    /* gather the shard box (padded with 0.0f at the array's edge) */
    if (edge) {
        memset(shard_buf, 0, sizeof(float) * c->shard[0] * c->shard[1] * c->shard[2]);
    }
    for (uint64_t z = 0; z < ext[0]; z++) {
        for (uint64_t y = 0; y < ext[1]; y++) {
            const float *src =
                s->values + ((org[0] + z) * c->shape[1] + org[1] + y) * c->shape[2] + org[2];
            memcpy(shard_buf + (z * c->shard[1] + y) * c->shard[2], src, ext[2] * sizeof(float));
        }
    }
    const size_t inner_vals = (size_t)(c->chunk[0] * c->chunk[1] * c->chunk[2]);
    const size_t bound = ZSTD_compressBound(inner_vals * sizeof(float));
    const size_t index_len = (size_t)s->n_inner * 16 + 4;
    const size_t need = (size_t)s->n_inner * bound + index_len;
    if (*cap < need) {
        uint8_t *p = realloc(*out, need);
        if (p == NULL) {
            snprintf(wk->msg, sizeof(wk->msg), "out of memory");
            return 0;
        }
        *out = p;
        *cap = need;
    }
    uint8_t index[16 * 4096 + 4];
    if (s->n_inner > 4096) {
        snprintf(wk->msg, sizeof(wk->msg), "too many inner chunks");
        return 0;
    }
    size_t len = 0;
    uint64_t ii[ND] = {0};
    for (uint64_t i = 0; i < s->n_inner; i++) {
        int nonzero = 0;
        for (uint64_t z = 0; z < c->chunk[0]; z++) {
            for (uint64_t y = 0; y < c->chunk[1]; y++) {
                const float *src =
                    shard_buf +
                    ((ii[0] * c->chunk[0] + z) * c->shard[1] + ii[1] * c->chunk[1] + y) *
                        c->shard[2] +
                    ii[2] * c->chunk[2];
                memcpy(chunk_buf + (z * c->chunk[1] + y) * c->chunk[2], src,
                       c->chunk[2] * sizeof(float));
            }
        }
        const uint32_t *bits = (const uint32_t *)chunk_buf;
        for (size_t k = 0; k < inner_vals && !nonzero; k++) {
            nonzero = bits[k] != 0; /* fill 0.0f, compared bit for bit */
        }
        uint64_t off = EMPTY, n = EMPTY;
        if (nonzero) {
            size_t z =
                ZSTD_compress2(cc, *out + len, *cap - len, chunk_buf, inner_vals * sizeof(float));
            if (ZSTD_isError(z)) {
                snprintf(wk->msg, sizeof(wk->msg), "zstd: %s", ZSTD_getErrorName(z));
                return 0;
            }
            off = len;
            n = z;
            len += z;
        } else {
            wk->empty_inner++;
        }
        put64(index + 16 * i, off);
        put64(index + 16 * i + 8, n);
        for (int d = ND; d-- > 0;) { /* next inner chunk, C order */
            if (++ii[d] < s->inner_grid[d]) {
                break;
            }
            ii[d] = 0;
        }
    }
    const uint32_t crc = crc32c(index, (size_t)s->n_inner * 16);
    for (int k = 0; k < 4; k++) {
        index[s->n_inner * 16 + (uint64_t)k] = (uint8_t)(crc >> (8 * k));
    }
    memcpy(*out + len, index, index_len);
    return len + index_len;
}

static int put_file(struct worker *wk, uint64_t sh, const uint8_t *data, size_t len)
{
    struct shared *s = wk->s;
    uint64_t idx[ND];
    uint64_t r = sh;
    for (int d = ND; d-- > 0;) {
        idx[d] = r % s->grid[d];
        r /= s->grid[d];
    }
    char dir[128], key[160], tmp[224];
    snprintf(dir, sizeof(dir), "c/%" PRIu64 "/%" PRIu64, idx[0], idx[1]);
    snprintf(key, sizeof(key), "%s/%" PRIu64, dir, idx[2]);
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld.%" PRIuFAST64, key, (long)getpid(),
             atomic_fetch_add(&s->tmp_counter, 1));
    if (mkdir_p(s->rootfd, dir) != 0) {
        snprintf(wk->msg, sizeof(wk->msg), "mkdir %s: %s", dir, strerror(errno));
        return -1;
    }
    int fd = openat(s->rootfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        snprintf(wk->msg, sizeof(wk->msg), "create %s: %s", tmp, strerror(errno));
        return -1;
    }
    int rc = write_all(fd, data, len);
    if (rc == 0 && s->c->sync == SYNC_SYNCFS_BATCH) { /* syncfs, rename, syncfs at the end */
        rc = close(fd);
        memcpy(s->batch_tmp[sh], tmp, sizeof(tmp));
        memcpy(s->batch_key[sh], key, sizeof(key));
        if (rc != 0) {
            snprintf(wk->msg, sizeof(wk->msg), "close %s: %s", tmp, strerror(errno));
            return -1;
        }
        s->dir_used[idx[0]] = 1;
        s->dir_used[s->grid[0] + idx[0] * s->grid[1] + idx[1]] = 1;
        wk->files++;
        wk->bytes += len;
        return 0;
    }
    if (rc == 0 && s->c->sync == SYNC_BATCH) { /* fsync, close and rename in phase 2 */
        s->batch_fd[sh] = fd;
        memcpy(s->batch_tmp[sh], tmp, sizeof(tmp));
        memcpy(s->batch_key[sh], key, sizeof(key));
        s->dir_used[idx[0]] = 1;
        s->dir_used[s->grid[0] + idx[0] * s->grid[1] + idx[1]] = 1;
        wk->files++;
        wk->bytes += len;
        return 0;
    }
    if (rc == 0 && s->c->sync == SYNC_FSYNC) {
        rc = fsync(fd);
        wk->fsyncs++;
    }
    if (close(fd) != 0) {
        rc = -1;
    }
    if (rc == 0) {
        rc = renameat(s->rootfd, tmp, s->rootfd, key);
    }
    if (rc != 0) {
        snprintf(wk->msg, sizeof(wk->msg), "write %s: %s", key, strerror(errno));
        return -1;
    }
    s->dir_used[idx[0]] = 1;                                    /* c/i received c/i/j */
    s->dir_used[s->grid[0] + idx[0] * s->grid[1] + idx[1]] = 1; /* c/i/j received the file */
    wk->files++;
    wk->bytes += len;
    return 0;
}

/* fsync-batch phase 2: fsync, close and rename every shard's temporary file. */
static void run_phase2(struct worker *wk)
{
    struct shared *s = wk->s;
    while (!atomic_load(&s->failed)) {
        const uint64_t sh = atomic_fetch_add(&s->next, 1);
        if (sh >= s->nshards) {
            return;
        }
        const uint64_t t0 = now_ns();
        const int fd = s->batch_fd[sh];
        int rc = fsync(fd);
        wk->fsyncs++;
        if (close(fd) != 0) {
            rc = -1;
        }
        if (rc == 0) {
            rc = renameat(s->rootfd, s->batch_tmp[sh], s->rootfd, s->batch_key[sh]);
        }
        if (rc != 0) {
            snprintf(wk->msg, sizeof(wk->msg), "fsync/rename %s: %s", s->batch_key[sh],
                     strerror(errno));
            atomic_store(&s->failed, 1);
            return;
        }
        wk->io_ns += now_ns() - t0;
    }
}

static void *run(void *arg)
{
    struct worker *wk = arg;
    struct shared *s = wk->s;
    if (s->phase2) {
        run_phase2(wk);
        return NULL;
    }
    const struct cfg *c = s->c;
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    float *shard_buf = malloc(sizeof(float) * c->shard[0] * c->shard[1] * c->shard[2]);
    float *chunk_buf = malloc(sizeof(float) * c->chunk[0] * c->chunk[1] * c->chunk[2]);
    uint8_t *out = NULL;
    size_t cap = 0;
    if (cc == NULL || shard_buf == NULL || chunk_buf == NULL) {
        snprintf(wk->msg, sizeof(wk->msg), "out of memory");
        atomic_store(&s->failed, 1);
    } else {
        ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, c->level);
        ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 0);
    }
    while (!atomic_load(&s->failed)) {
        const uint64_t sh = atomic_fetch_add(&s->next, 1);
        if (sh >= s->nshards) {
            break;
        }
        const uint64_t t0 = now_ns();
        const size_t len = encode_shard(wk, cc, sh, shard_buf, chunk_buf, &out, &cap);
        const uint64_t t1 = now_ns();
        wk->encode_ns += t1 - t0;
        if (len == 0) {
            atomic_store(&s->failed, 1);
            break;
        }
        if (!c->encode_only) {
            if (put_file(wk, sh, out, len) != 0) {
                atomic_store(&s->failed, 1);
                break;
            }
            wk->io_ns += now_ns() - t1;
        } else {
            wk->bytes += len;
        }
    }
    ZSTD_freeCCtx(cc);
    free(shard_buf);
    free(chunk_buf);
    free(out);
    return NULL;
}

static int fsync_dir(int rootfd, const char *rel)
{
    int fd = openat(rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static void usage(void)
{
    fputs("usage: w2_write_baseline --values F32 --shape D,H,W --out DIR --result R.json\n"
          "       [--shard 8,32,32] [--chunk 2,16,16] [--level 3] [--threads N]\n"
          "       [--sync fsync|fsync-batch|syncfs-batch|syncfs|none] [--encode-only]\n",
          stderr);
}

int main(int argc, char **argv)
{
    struct cfg c = {0};
    c.shard[0] = 8, c.shard[1] = 32, c.shard[2] = 32;
    c.chunk[0] = 2, c.chunk[1] = 16, c.chunk[2] = 16;
    c.level = 3;
    c.threads = 1;
    c.sync = SYNC_FSYNC;
    int have_shape = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--encode-only") == 0) {
            c.encode_only = 1;
            continue;
        }
        if (v == NULL) {
            usage();
            return 2;
        }
        i++;
        if (strcmp(a, "--values") == 0) {
            c.values_path = v;
        } else if (strcmp(a, "--out") == 0) {
            c.out = v;
        } else if (strcmp(a, "--result") == 0) {
            c.result = v;
        } else if (strcmp(a, "--shape") == 0 && parse3(v, c.shape) == 0) {
            have_shape = 1;
        } else if (strcmp(a, "--shard") == 0 && parse3(v, c.shard) == 0) {
        } else if (strcmp(a, "--chunk") == 0 && parse3(v, c.chunk) == 0) {
        } else if (strcmp(a, "--level") == 0) {
            c.level = (int)strtol(v, NULL, 10);
        } else if (strcmp(a, "--threads") == 0) {
            c.threads = (int)strtol(v, NULL, 10);
        } else if (strcmp(a, "--sync") == 0 && strcmp(v, "fsync") == 0) {
            c.sync = SYNC_FSYNC;
        } else if (strcmp(a, "--sync") == 0 && strcmp(v, "syncfs") == 0) {
            c.sync = SYNC_SYNCFS;
        } else if (strcmp(a, "--sync") == 0 && strcmp(v, "none") == 0) {
            c.sync = SYNC_NONE;
        } else if (strcmp(a, "--sync") == 0 && strcmp(v, "fsync-batch") == 0) {
            c.sync = SYNC_BATCH;
        } else if (strcmp(a, "--sync") == 0 && strcmp(v, "syncfs-batch") == 0) {
            c.sync = SYNC_SYNCFS_BATCH;
        } else {
            usage();
            return 2;
        }
    }
    if (c.values_path == NULL || c.out == NULL || c.result == NULL || !have_shape ||
        c.threads < 1 || c.threads > 256) {
        usage();
        return 2;
    }
    for (int d = 0; d < ND; d++) {
        if (c.shard[d] % c.chunk[d] != 0) {
            fputs("w2_write_baseline: the chunk must divide the shard\n", stderr);
            return 2;
        }
    }
    crc_init();
    /* input, outside the timed interval */
    const size_t n = (size_t)(c.shape[0] * c.shape[1] * c.shape[2]);
    float *values = malloc(n * sizeof(float));
    FILE *f = fopen(c.values_path, "rb");
    if (values == NULL || f == NULL || fread(values, sizeof(float), n, f) != n) {
        fprintf(stderr, "w2_write_baseline: cannot read %zu float32 values from %s\n", n,
                c.values_path);
        return 1;
    }
    fclose(f);
    struct shared s = {0};
    s.c = &c;
    s.values = values;
    s.nshards = 1;
    s.n_inner = 1;
    for (int d = 0; d < ND; d++) {
        s.grid[d] = (c.shape[d] + c.shard[d] - 1) / c.shard[d];
        s.inner_grid[d] = c.shard[d] / c.chunk[d];
        s.nshards *= s.grid[d];
        s.n_inner *= s.inner_grid[d];
    }
    s.dir_used = calloc((size_t)(s.grid[0] + s.grid[0] * s.grid[1]), 1);
    struct worker *wk = calloc((size_t)c.threads, sizeof(*wk));
    s.batch_fd = calloc((size_t)s.nshards, sizeof(*s.batch_fd));
    s.batch_tmp = calloc((size_t)s.nshards, sizeof(*s.batch_tmp));
    s.batch_key = calloc((size_t)s.nshards, sizeof(*s.batch_key));
    if (s.dir_used == NULL || wk == NULL || s.batch_fd == NULL || s.batch_tmp == NULL ||
        s.batch_key == NULL) {
        fputs("w2_write_baseline: out of memory\n", stderr);
        return 1;
    }

    const uint64_t t0 = now_ns();
    s.rootfd = -1;
    if (!c.encode_only) {
        if (mkdir(c.out, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "w2_write_baseline: mkdir %s: %s\n", c.out, strerror(errno));
            return 1;
        }
        s.rootfd = open(c.out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s.rootfd < 0) {
            fprintf(stderr, "w2_write_baseline: open %s: %s\n", c.out, strerror(errno));
            return 1;
        }
    }
    for (int i = 0; i < c.threads; i++) {
        wk[i].s = &s;
        if (pthread_create(&wk[i].tid, NULL, run, &wk[i]) != 0) {
            fputs("w2_write_baseline: pthread_create failed\n", stderr);
            return 1;
        }
    }
    for (int i = 0; i < c.threads; i++) {
        pthread_join(wk[i].tid, NULL);
    }
    if (!c.encode_only && c.sync == SYNC_BATCH && !atomic_load(&s.failed)) {
        s.phase2 = 1;
        atomic_store(&s.next, 0);
        for (int i = 0; i < c.threads; i++) {
            if (pthread_create(&wk[i].tid, NULL, run, &wk[i]) != 0) {
                fputs("w2_write_baseline: pthread_create failed\n", stderr);
                return 1;
            }
        }
        for (int i = 0; i < c.threads; i++) {
            pthread_join(wk[i].tid, NULL);
        }
    }
    for (int i = 0; i < c.threads; i++) {
        if (wk[i].msg[0] != '\0') {
            fprintf(stderr, "w2_write_baseline: %s\n", wk[i].msg);
            return 1;
        }
    }
    const uint64_t t_sync = now_ns();
    uint64_t dir_fsyncs = 0;
    if (!c.encode_only && (c.sync == SYNC_FSYNC || c.sync == SYNC_BATCH)) {
        char rel[128];
        for (uint64_t i = 0; i < s.grid[0]; i++) { /* deepest first: c/i/j, then c/i, c, root */
            for (uint64_t j = 0; j < s.grid[1]; j++) {
                if (s.dir_used[s.grid[0] + i * s.grid[1] + j]) {
                    snprintf(rel, sizeof(rel), "c/%" PRIu64 "/%" PRIu64, i, j);
                    if (fsync_dir(s.rootfd, rel) != 0) {
                        fprintf(stderr, "w2_write_baseline: fsync %s: %s\n", rel, strerror(errno));
                        return 1;
                    }
                    dir_fsyncs++;
                }
            }
        }
        for (uint64_t i = 0; i < s.grid[0]; i++) {
            if (s.dir_used[i]) {
                snprintf(rel, sizeof(rel), "c/%" PRIu64, i);
                if (fsync_dir(s.rootfd, rel) != 0) {
                    fprintf(stderr, "w2_write_baseline: fsync %s: %s\n", rel, strerror(errno));
                    return 1;
                }
                dir_fsyncs++;
            }
        }
        if (fsync_dir(s.rootfd, "c") != 0 || fsync_dir(s.rootfd, ".") != 0) {
            fprintf(stderr, "w2_write_baseline: fsync c or .: %s\n", strerror(errno));
            return 1;
        }
        dir_fsyncs += 2;
    } else if (!c.encode_only && c.sync == SYNC_SYNCFS_BATCH) {
        if (syncfs(s.rootfd) != 0) {
            fprintf(stderr, "w2_write_baseline: syncfs: %s\n", strerror(errno));
            return 1;
        }
        for (uint64_t i = 0; i < s.nshards; i++) {
            if (renameat(s.rootfd, s.batch_tmp[i], s.rootfd, s.batch_key[i]) != 0) {
                fprintf(stderr, "w2_write_baseline: rename %s: %s\n", s.batch_key[i],
                        strerror(errno));
                return 1;
            }
        }
        if (syncfs(s.rootfd) != 0) {
            fprintf(stderr, "w2_write_baseline: syncfs: %s\n", strerror(errno));
            return 1;
        }
        dir_fsyncs = 2;
    } else if (!c.encode_only && c.sync == SYNC_SYNCFS) {
        if (syncfs(s.rootfd) != 0) {
            fprintf(stderr, "w2_write_baseline: syncfs: %s\n", strerror(errno));
            return 1;
        }
        dir_fsyncs = 1;
    }
    const uint64_t t1 = now_ns();
    uint64_t enc = 0, io = 0, files = 0, bytes = 0, fsyncs = dir_fsyncs, empty = 0;
    for (int i = 0; i < c.threads; i++) {
        enc += wk[i].encode_ns;
        io += wk[i].io_ns;
        files += wk[i].files;
        bytes += wk[i].bytes;
        fsyncs += wk[i].fsyncs;
        empty += wk[i].empty_inner;
    }
    if (s.rootfd >= 0) {
        close(s.rootfd);
    }
    FILE *r = fopen(c.result, "w");
    if (r == NULL) {
        perror("w2_write_baseline: result");
        return 1;
    }
    static const char *const modes[] = {"fsync", "syncfs", "none", "fsync-batch", "syncfs-batch"};
    fprintf(r,
            "{\"wall_ns\": %" PRIu64 ", \"encode_ns\": %" PRIu64 ", \"io_ns\": %" PRIu64
            ", \"sync_ns\": %" PRIu64 ", \"files\": %" PRIu64 ", \"bytes\": %" PRIu64
            ", \"shards\": %" PRIu64 ", \"fsyncs\": %" PRIu64 ", \"empty_inner_chunks\": %" PRIu64
            ", \"threads\": %d, \"sync\": \"%s\", \"encode_only\": %s, \"zstd\": \"%s\"}\n",
            t1 - t0, enc, io, t1 - t_sync, files, bytes, s.nshards, fsyncs, empty, c.threads,
            modes[c.sync], c.encode_only ? "true" : "false", ZSTD_versionString());
    if (fclose(r) != 0) {
        perror("w2_write_baseline: result");
        return 1;
    }
    free(values);
    free(wk);
    free(s.dir_used);
    free(s.batch_fd);
    free(s.batch_tmp);
    free(s.batch_key);
    return 0;
}
