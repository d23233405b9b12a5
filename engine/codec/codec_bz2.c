/* The bzip2 codec (bytes -> bytes) on libbz2, loaded with dlopen the first time a bzip2
 * configuration is parsed (an N5 dataset with "compression": {"type": "bzip2"}), so the binary
 * maps no extra library at start-up. The library's memory goes through sm_malloc.
 * Spec: https://sourceware.org/bzip2/manual/manual.html ; N5: Bzip2Compression.
 * v3 name "bz2" (shardmill-internal, used inside n5_block); no numcodecs id.
 * Configuration: {"level": 9} (1-9: the block size in 100 kB, used when encoding).
 * Invariant: decodes into the known size and requires exactly it; of unknown size, never past
 * the scratch's decode bound. One stream; trailing bytes are an error. */
#include "codec_int.h"

#include <bzlib.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/library.h"

static struct {
    int (*compress_init)(bz_stream *, int, int, int);
    int (*compress)(bz_stream *, int);
    int (*compress_end)(bz_stream *);
    int (*decompress)(bz_stream *);
    int (*decompress_end)(bz_stream *);
    int (*decompress_init)(bz_stream *, int, int);
} bz;
static char bz_load_error[200];
static pthread_once_t bz_once = PTHREAD_ONCE_INIT;

static void bz_init_once(void)
{
    static const struct sm_library_sym syms[] = {
        {"BZ2_bzCompressInit", (void **)&bz.compress_init},
        {"BZ2_bzCompress", (void **)&bz.compress},
        {"BZ2_bzCompressEnd", (void **)&bz.compress_end},
        {"BZ2_bzDecompress", (void **)&bz.decompress},
        {"BZ2_bzDecompressEnd", (void **)&bz.decompress_end},
        {"BZ2_bzDecompressInit", (void **)&bz.decompress_init}, /* last: non-NULL means loaded */
    };
    if (!sm_library_load("libbz2.so.1.0", syms, sizeof(syms) / sizeof(syms[0]), bz_load_error,
                         sizeof(bz_load_error))) {
        return;
    }
}

static void *bz_alloc(void *opaque, int n, int m)
{
    (void)opaque;
    return n < 0 || m < 0 ? NULL : sm_calloc((size_t)n, (size_t)m);
}

static void bz_release(void *opaque, void *ptr)
{
    (void)opaque;
    sm_free(ptr);
}

static void bz_stream_init(bz_stream *s)
{
    memset(s, 0, sizeof(*s));
    s->bzalloc = bz_alloc;
    s->bzfree = bz_release;
}

struct bz2_prep {
    int level;
    size_t dec_len;
};

static sm_status bz2_parse(const struct json_t *cfg, void **conf, struct sm_err *err)
{
    static const char *const keys[] = {"level", NULL};
    SM_TRY(sm_codec_cfg_keys(cfg, "bz2", keys, err));
    long long level;
    SM_TRY(sm_codec_cfg_int(cfg, "bz2", "level", false, 1, 9, 9, &level, err));
    pthread_once(&bz_once, bz_init_once);
    if (bz.decompress_init == NULL) {
        SM_FAIL(err, SM_E_DATA,
                "bzip2 compression needs libbz2 (libbz2.so.1.0, Debian package libbz2-1.0): %s",
                bz_load_error);
    }
    int *c = sm_malloc(sizeof(*c));
    if (c == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a bz2 configuration");
    }
    *c = (int)level;
    *conf = c;
    return SM_OK;
}

static sm_status bz2_prepare(const void *conf, const struct sm_repr *in, struct sm_repr *out,
                             void **prep, struct sm_err *err)
{
    struct bz2_prep *p = sm_malloc(sizeof(*p));
    if (p == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a prepared bz2 codec");
    }
    p->level = *(const int *)conf;
    p->dec_len = in->len;
    sm_repr_bytes(out, in, SM_LEN_VARIABLE);
    *prep = p;
    return SM_OK;
}

/* libbz2 counts in unsigned int: feed at most this much per call. */
static unsigned piece(size_t n)
{
    return n > UINT_MAX ? UINT_MAX : (unsigned)n;
}

static sm_status bz2_decode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                            struct sm_scratch *scratch, struct sm_err *err)
{
    const struct bz2_prep *p = prep;
    const bool known = p->dec_len != SM_LEN_VARIABLE;
    /* A known size gets one spare byte, so a stream that goes on past it is seen as such. */
    const size_t bound = known ? p->dec_len + 1 : scratch->max_decoded;
    const size_t min = (size_t)64 << 10;
    size_t cap = bound;
    if (!known) { /* no size up front: start at 4x the input, at least 64 KiB, within the bound */
        cap = in.len < bound / 4 ? in.len * 4 : bound;
        cap = cap >= min ? cap : (min < bound ? min : bound);
    }
    SM_TRY(sm_codec_renew(out, cap, err));
    bz_stream s;
    bz_stream_init(&s);
    int r = bz.decompress_init(&s, 0, 0);
    if (r != BZ_OK) {
        SM_FAIL(err, r == BZ_MEM_ERROR ? SM_E_NOMEM : SM_E_INTERNAL,
                "bzip2: cannot start a decoder (%d)", r);
    }
    size_t pos = 0, got = 0;
    sm_status st = SM_OK;
    for (;;) {
        s.next_in = (char *)(uintptr_t)(in.ptr + pos);
        s.avail_in = piece(in.len - pos);
        s.next_out = (char *)(out->ptr + got);
        s.avail_out = piece(cap - got);
        const unsigned in0 = s.avail_in, out0 = s.avail_out;
        r = bz.decompress(&s);
        pos += in0 - s.avail_in;
        got += out0 - s.avail_out;
        if (r == BZ_STREAM_END) {
            break;
        }
        if (r != BZ_OK) {
            st = SM_ERR(err, r == BZ_MEM_ERROR ? SM_E_NOMEM : SM_E_DATA,
                        "bzip2: corrupt stream at byte %zu", pos);
            sm_err_cause(err, "libbz2", r);
            break;
        }
        if (got < cap) {
            if (pos == in.len && in0 == s.avail_in) { /* no progress, no input left */
                st = SM_ERR(err, SM_E_DATA, "bzip2: stream truncated after %zu bytes", in.len);
                break;
            }
            continue;
        }
        const size_t next = sm_codec_grow(cap, bound);
        if (next == 0) {
            st = known ? SM_ERR(err, SM_E_DATA,
                                "bzip2: stream decodes to more than the expected %zu bytes",
                                p->dec_len)
                       : SM_ERR(err, SM_E_LIMIT,
                                "bzip2: stream decodes to more than the decode limit of %zu "
                                "bytes (limits.max_chunk_bytes)",
                                bound);
            break;
        }
        st = sm_buf_reserve(out, next, err);
        if (st != SM_OK) {
            break;
        }
        cap = next;
    }
    bz.decompress_end(&s);
    if (st == SM_OK && pos != in.len) {
        st = SM_ERR(err, SM_E_DATA, "bzip2: %zu bytes follow the end of the stream", in.len - pos);
    }
    out->len = st == SM_OK ? got : 0;
    if (st == SM_OK && known && got != p->dec_len) {
        SM_FAIL(err, SM_E_DATA, "bzip2: decoded size %zu, expected %zu", got, p->dec_len);
    }
    return st;
}

static sm_status bz2_encode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                            struct sm_scratch *scratch, struct sm_err *err)
{
    (void)scratch;
    const struct bz2_prep *p = prep;
    if (in.len > UINT_MAX / 2) {
        SM_FAIL(err, SM_E_INTERNAL, "bzip2: %zu bytes are too many to encode at once", in.len);
    }
    const size_t bound = in.len + in.len / 100 + 600; /* the manual's bound */
    SM_TRY(sm_codec_renew(out, bound, err));
    bz_stream s;
    bz_stream_init(&s);
    int r = bz.compress_init(&s, p->level, 0, 0);
    if (r == BZ_OK) {
        s.next_in = (char *)(uintptr_t)in.ptr;
        s.avail_in = (unsigned)in.len;
        s.next_out = (char *)out->ptr;
        s.avail_out = (unsigned)bound;
        r = bz.compress(&s, BZ_FINISH);
        out->len = bound - s.avail_out;
        bz.compress_end(&s);
    }
    if (r != BZ_STREAM_END) {
        out->len = 0;
        SM_ERR(err, r == BZ_MEM_ERROR ? SM_E_NOMEM : SM_E_INTERNAL,
               "bzip2: encoding %zu bytes failed", in.len);
        sm_err_cause(err, "libbz2", r);
        return err->status;
    }
    return SM_OK;
}

const struct sm_codec_ops sm_codec_bz2_ops = {
    .name = "bz2",
    .v2_id = NULL,
    .kind = SM_CODEC_B2B,
    .parse = bz2_parse,
    .prepare = bz2_prepare,
    .decode = bz2_decode,
    .encode = bz2_encode,
    .free_conf = sm_free,
    .free_prep = sm_free,
};
