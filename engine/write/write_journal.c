/* The run journal (SPEC §6): one append-only file per rank and run,
 * .shardmill/journal/<token>.<rank>.jnl, of fixed 32-byte binary records written in batches.
 * Record (little-endian): u64 shard index, u64 encoded size, u64 digest of the values encoded
 * (sm_write_values_digest), u32 CRC32C of the encoded bytes, u32 CRC32C of the 28 bytes before it
 * (a torn or foreign record, or one of the older 24-byte format, fails it and is ignored). Spec:
 * https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html Invariant: a
 * record only says what a shard's bytes and values should be; resume still reads the shard and
 * computes its values, so a lost, torn or stale record costs at most a rewrite, never a wrong keep.
 * A shard without a record is always rewritten. */
#include "shardmill/sm_config.h"

#include "write_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shardmill/codec.h"
#include "shardmill/crc32c.h"
#include "shardmill/fs.h"

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint64_t get_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = n; i-- > 0;) {
        v = (v << 8) | p[i];
    }
    return v;
}

void sm_jrec_encode(uint8_t out[SM_JREC_BYTES], uint64_t shard, const struct sm_shard_rec *r)
{
    put_le(out, shard, 8);
    put_le(out + 8, r->size, 8);
    put_le(out + 16, r->values, 8);
    put_le(out + 24, r->crc32c, 4);
    put_le(out + 28, sm_crc32c(0, out, 28), 4);
}

bool sm_jrec_decode(const uint8_t in[SM_JREC_BYTES], uint64_t nshards, uint64_t *shard,
                    struct sm_shard_rec *r)
{
    if ((uint32_t)get_le(in + 28, 4) != sm_crc32c(0, in, 28)) {
        return false;
    }
    *shard = get_le(in, 8);
    r->size = get_le(in + 8, 8);
    r->values = get_le(in + 16, 8);
    r->crc32c = (uint32_t)get_le(in + 24, 4);
    r->set = true;
    return *shard < nshards;
}

size_t sm_jrec_scan(struct sm_bytes data, uint64_t nshards, struct sm_shard_rec *recs)
{
    size_t n = 0;
    for (size_t off = 0; off + SM_JREC_BYTES <= data.len; off += SM_JREC_BYTES) {
        uint64_t shard;
        struct sm_shard_rec r;
        if (!sm_jrec_decode(data.ptr + off, nshards, &shard, &r)) {
            break; /* torn: a crash mid-append; nothing after it was written by this file's run */
        }
        recs[shard] = r; /* a later record of the same file supersedes an earlier one */
        n++;
    }
    return n;
}

void sm_journal_name(uint64_t token, int rank, char *buf, size_t cap)
{
    if (rank < 0) {
        snprintf(buf, cap, SM_JOURNAL_DIR "/merged.jnl");
    } else {
        snprintf(buf, cap, SM_JOURNAL_DIR "/%016" PRIx64 ".%d.jnl", token, rank);
    }
}

sm_status sm_journal_load(int rootfd, uint64_t skip_token, uint64_t nshards,
                          struct sm_shard_rec *recs, struct sm_err *err)
{
    struct sm_strv names = {NULL, 0, 0};
    SM_TRY(sm_wfs_list(rootfd, SM_JOURNAL_DIR, &names, err));
    char skip[32];
    snprintf(skip, sizeof(skip), "%016" PRIx64 ".", skip_token);
    struct sm_buf b = SM_BUF_INIT;
    sm_status st = SM_OK;
    for (size_t i = 0; i < names.n && st == SM_OK; i++) {
        const char *n = names.v[i];
        const size_t len = strlen(n);
        if (len < 4 || strcmp(n + len - 4, ".jnl") != 0) {
            continue;
        }
        /* this run's rank journals are being appended by their ranks: not a previous run's */
        if (strncmp(n, skip, strlen(skip)) == 0) {
            continue;
        }
        char rel[SM_KEY_MAX + 64];
        snprintf(rel, sizeof(rel), SM_JOURNAL_DIR "/%s", n);
        bool found;
        st = sm_wfs_read(rootfd, rel, &b, &found, err);
        if (st == SM_OK && found) {
            (void)sm_jrec_scan(sm_buf_bytes(&b), nshards, recs);
        }
    }
    sm_buf_free(&b);
    sm_strv_free(&names);
    return st;
}

/* ---- batched appends ---- */

static sm_status jflush_locked(struct sm_output *o, struct sm_err *err)
{
    if (o->jlen == 0) {
        return SM_OK;
    }
    if (o->jfd < 0) {
        if (o->token == 0) {
            o->token = sm_journal_token();
        }
        char rel[SM_KEY_MAX + 64];
        sm_journal_name(o->token, o->rank, rel, sizeof(rel));
        o->jfd =
            sm_fs_open_beneath(o->rootfd, rel, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (o->jfd < 0) {
            return SM_ERRNO(err, errno, rel, "cannot open the journal");
        }
    }
    size_t done = 0;
    while (done < o->jlen) {
        const ssize_t k = write(o->jfd, o->jbuf + done, o->jlen - done);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            const int e = k < 0 ? errno : EIO;
            o->jlen = 0; /* dropped: resume rewrites those shards */
            return SM_ERRNO(err, e, NULL, "cannot append to the journal");
        }
        done += (size_t)k;
    }
    atomic_fetch_add(&o->journal_bytes, o->jlen);
    o->jlen = 0;
    return SM_OK;
}

sm_status sm_journal_append(struct sm_output *o, uint64_t shard, const struct sm_shard_rec *r,
                            struct sm_err *err)
{
    pthread_mutex_lock(&o->jmu);
    sm_jrec_encode(o->jbuf + o->jlen, shard, r);
    o->jlen += SM_JREC_BYTES;
    /* FSYNC: each shard is durable on its own, so its record goes out at once (a shard killed
     * without a record is rewritten); otherwise whole batches (SYNCFS commits at the flush). */
    const bool now =
        o->opts.sync == SM_OUTPUT_SYNC_FSYNC || o->jlen >= (size_t)SM_JOURNAL_BATCH * SM_JREC_BYTES;
    const sm_status st = now ? jflush_locked(o, err) : SM_OK;
    pthread_mutex_unlock(&o->jmu);
    return st;
}

sm_status sm_journal_flush(struct sm_output *o, struct sm_err *err)
{
    pthread_mutex_lock(&o->jmu);
    const sm_status st = jflush_locked(o, err);
    pthread_mutex_unlock(&o->jmu);
    return st;
}

uint64_t sm_journal_token(void)
{
    static atomic_uint_fast64_t seq;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    t ^= (uint64_t)getpid() << 40;
    t += atomic_fetch_add(&seq, 1) * 0x9e3779b97f4a7c15u;
    return t == 0 ? 1 : t;
}

/* CRC-32C in the high half, CRC-32 (IEEE, another polynomial) in the low half: an accidental
 * change passes both with odds of 2^-64; both run at memory speed (SSE4.2, PCLMUL). Not
 * cryptographic: it catches a changed or stale input, not a forger who can write both. */
uint64_t sm_write_values_digest(const void *values, size_t len)
{
    return (uint64_t)sm_crc32c(0, values, len) << 32 | sm_codec_crc32(0, values, len);
}
