/* The xz codec (bytes -> bytes) on liblzma, loaded with dlopen the first time an xz configuration
 * is parsed (an N5 dataset with "compression": {"type": "xz"}), so the binary maps no extra
 * library at start-up. Decoder memory goes through sm_malloc and is capped at XZ_MEMLIMIT.
 * Spec: https://tukaani.org/xz/xz-file-format.txt ; N5: org.janelia.saalfeldlab.n5.XzCompression.
 * v3 name "xz" (shardmill-internal, used inside n5_block); no numcodecs id.
 * Configuration: {"preset": 6} (0-9, used when encoding).
 * Invariant: decodes into the known size and requires exactly it; of unknown size, never past
 * the scratch's decode bound. One stream; trailing bytes are an error. */
#include "codec_int.h"

#include <lzma.h>
#include <pthread.h>
#include <stdio.h>

#include "shardmill/alloc.h"
#include "shardmill/library.h"

/* xz -9 needs 65 MiB to decode; a stream asking for more is refused, not allocated. */
#define XZ_MEMLIMIT ((uint64_t)128 << 20)

static struct {
    lzma_ret (*stream_decoder)(lzma_stream *, uint64_t, uint32_t);
    lzma_ret (*easy_encoder)(lzma_stream *, uint32_t, lzma_check);
    lzma_ret (*code)(lzma_stream *, lzma_action);
    void (*end)(lzma_stream *);
    size_t (*bound)(size_t);
} xz;
static char xz_load_error[200];
static pthread_once_t xz_once = PTHREAD_ONCE_INIT;

static void xz_init_once(void)
{
    static const struct sm_library_sym syms[] = {
        {"lzma_easy_encoder", (void **)&xz.easy_encoder},
        {"lzma_code", (void **)&xz.code},
        {"lzma_end", (void **)&xz.end},
        {"lzma_stream_buffer_bound", (void **)&xz.bound},
        {"lzma_stream_decoder", (void **)&xz.stream_decoder}, /* last: non-NULL means loaded */
    };
    if (!sm_library_load("liblzma.so.5", syms, sizeof(syms) / sizeof(syms[0]), xz_load_error,
                         sizeof(xz_load_error))) {
        return;
    }
}

static void *xz_alloc(void *opaque, size_t nmemb, size_t size)
{
    (void)opaque;
    return nmemb != 0 && size > SIZE_MAX / nmemb ? NULL : sm_malloc(nmemb * size);
}

static void xz_release(void *opaque, void *ptr)
{
    (void)opaque;
    sm_free(ptr);
}

static const lzma_allocator xz_allocator = {xz_alloc, xz_release, NULL};

struct xz_prep {
    uint32_t preset;
    size_t dec_len;
};

static sm_status xz_parse(const struct json_t *cfg, void **conf, struct sm_err *err)
{
    static const char *const keys[] = {"preset", NULL};
    SM_TRY(sm_codec_cfg_keys(cfg, "xz", keys, err));
    long long preset;
    SM_TRY(sm_codec_cfg_int(cfg, "xz", "preset", false, 0, 9, 6, &preset, err));
    pthread_once(&xz_once, xz_init_once);
    if (xz.stream_decoder == NULL) {
        SM_FAIL(err, SM_E_DATA,
                "xz compression needs liblzma (liblzma.so.5, Debian package liblzma5): %s",
                xz_load_error);
    }
    uint32_t *c = sm_malloc(sizeof(*c));
    if (c == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate an xz configuration");
    }
    *c = (uint32_t)preset;
    *conf = c;
    return SM_OK;
}

static sm_status xz_prepare(const void *conf, const struct sm_repr *in, struct sm_repr *out,
                            void **prep, struct sm_err *err)
{
    struct xz_prep *p = sm_malloc(sizeof(*p));
    if (p == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a prepared xz codec");
    }
    p->preset = *(const uint32_t *)conf;
    p->dec_len = in->len;
    sm_repr_bytes(out, in, SM_LEN_VARIABLE);
    *prep = p;
    return SM_OK;
}

static sm_status xz_fail(struct sm_err *err, lzma_ret r, size_t at)
{
    if (r == LZMA_MEMLIMIT_ERROR) {
        SM_ERR(err, SM_E_DATA, "xz: the stream needs more than %llu MiB of decoder memory",
               (unsigned long long)(XZ_MEMLIMIT >> 20));
    } else if (r == LZMA_MEM_ERROR) {
        SM_ERR(err, SM_E_NOMEM, "xz: cannot allocate decoder memory");
    } else {
        SM_ERR(err, SM_E_DATA, "xz: corrupt stream at byte %zu", at);
    }
    sm_err_cause(err, "liblzma", (int)r);
    return err->status;
}

static sm_status xz_decode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                           struct sm_scratch *scratch, struct sm_err *err)
{
    const struct xz_prep *p = prep;
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
    lzma_stream s = LZMA_STREAM_INIT;
    s.allocator = &xz_allocator;
    lzma_ret r = xz.stream_decoder(&s, XZ_MEMLIMIT, 0);
    if (r != LZMA_OK) {
        return xz_fail(err, r, 0);
    }
    s.next_in = in.ptr;
    s.avail_in = in.len;
    s.next_out = out->ptr;
    s.avail_out = cap;
    sm_status st = SM_OK;
    for (;;) {
        r = xz.code(&s, LZMA_FINISH);
        if (r == LZMA_STREAM_END) {
            break;
        }
        if (r != LZMA_OK && r != LZMA_BUF_ERROR) {
            st = xz_fail(err, r, in.len - s.avail_in);
            break;
        }
        if (s.avail_out != 0) { /* input exhausted before the end of the stream */
            st = SM_ERR(err, SM_E_DATA, "xz: stream truncated after %zu bytes", in.len);
            break;
        }
        const size_t got = (size_t)s.total_out;
        const size_t next = sm_codec_grow(cap, bound);
        if (next == 0) {
            st = known
                     ? SM_ERR(err, SM_E_DATA,
                              "xz: stream decodes to more than the expected %zu bytes", p->dec_len)
                     : SM_ERR(err, SM_E_LIMIT,
                              "xz: stream decodes to more than the decode limit of %zu "
                              "bytes (limits.max_chunk_bytes)",
                              bound);
            break;
        }
        st = sm_buf_reserve(out, next, err);
        if (st != SM_OK) {
            break;
        }
        cap = next;
        s.next_out = out->ptr + got;
        s.avail_out = cap - got;
    }
    if (st == SM_OK && s.avail_in != 0) {
        st = SM_ERR(err, SM_E_DATA, "xz: %zu bytes follow the end of the stream",
                    (size_t)s.avail_in);
    }
    out->len = st == SM_OK ? (size_t)s.total_out : 0;
    xz.end(&s);
    if (st == SM_OK && known && out->len != p->dec_len) {
        SM_FAIL(err, SM_E_DATA, "xz: decoded size %zu, expected %zu", out->len, p->dec_len);
    }
    return st;
}

static sm_status xz_encode(const void *prep, struct sm_bytes in, struct sm_buf *out,
                           struct sm_scratch *scratch, struct sm_err *err)
{
    (void)scratch;
    const struct xz_prep *p = prep;
    const size_t bound = xz.bound(in.len);
    if (bound == 0) {
        SM_FAIL(err, SM_E_INTERNAL, "xz: no output bound for %zu bytes", in.len);
    }
    SM_TRY(sm_codec_renew(out, bound, err));
    lzma_stream s = LZMA_STREAM_INIT;
    s.allocator = &xz_allocator;
    lzma_ret r = xz.easy_encoder(&s, p->preset, LZMA_CHECK_CRC64);
    if (r == LZMA_OK) {
        s.next_in = in.ptr;
        s.avail_in = in.len;
        s.next_out = out->ptr;
        s.avail_out = bound;
        r = xz.code(&s, LZMA_FINISH);
    }
    out->len = (size_t)s.total_out;
    xz.end(&s);
    if (r != LZMA_STREAM_END) {
        SM_ERR(err, r == LZMA_MEM_ERROR ? SM_E_NOMEM : SM_E_INTERNAL,
               "xz: encoding %zu bytes failed", in.len);
        sm_err_cause(err, "liblzma", (int)r);
        return err->status;
    }
    return SM_OK;
}

const struct sm_codec_ops sm_codec_xz_ops = {
    .name = "xz",
    .v2_id = NULL,
    .kind = SM_CODEC_B2B,
    .parse = xz_parse,
    .prepare = xz_prepare,
    .decode = xz_decode,
    .encode = xz_encode,
    .free_conf = sm_free,
    .free_prep = sm_free,
};
