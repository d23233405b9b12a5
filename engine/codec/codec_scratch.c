/* Per-thread codec state (STYLE B6): zstd contexts (allocated through sm_malloc, so allocation
 * failures are injectable and counted), libdeflate contexts (one compressor per level), and the
 * nesting-level temp buffers chains ping-pong between. Everything is created lazily and kept, so
 * decodes in steady state do not allocate. Not thread-safe: one scratch per thread. */
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_createDCtx_advanced: route zstd's memory to sm_malloc */
#include "codec_int.h"

#include <string.h>

#include <libdeflate.h>
#include <zstd.h>

#include "shardmill/alloc.h"

static void *zstd_alloc(void *opaque, size_t n)
{
    (void)opaque;
    return sm_malloc(n);
}

static void zstd_free(void *opaque, void *p)
{
    (void)opaque;
    sm_free(p);
}

static const ZSTD_customMem zstd_mem = {zstd_alloc, zstd_free, NULL};

sm_status sm_scratch_new(struct sm_scratch **out, struct sm_err *err)
{
    *out = sm_calloc(1, sizeof(**out));
    if (*out == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate codec scratch of %zu bytes",
                sizeof(struct sm_scratch));
    }
    sm_scratch_set_max_decoded(*out, SM_SCRATCH_MAX_DECODED_DEFAULT);
    return SM_OK;
}

void sm_scratch_set_max_decoded(struct sm_scratch *s, uint64_t max_bytes)
{
    s->max_decoded = max_bytes == 0 || max_bytes > SIZE_MAX ? SIZE_MAX : (size_t)max_bytes;
}

void sm_scratch_set_threads(struct sm_scratch *s, unsigned threads)
{
    s->threads = threads < SM_SCRATCH_MAX_WORKERS ? threads : SM_SCRATCH_MAX_WORKERS;
}

void sm_scratch_free(struct sm_scratch *s)
{
    if (s == NULL) {
        return;
    }
    ZSTD_freeDCtx(s->zstd_d);
    ZSTD_freeCCtx(s->zstd_c);
    libdeflate_free_decompressor(s->deflate_d);
    for (int i = 0; i < SM_DEFLATE_LEVELS; i++) {
        libdeflate_free_compressor(s->deflate_c[i]);
    }
    for (unsigned l = 0; l < SM_SCRATCH_LEVELS; l++) {
        for (unsigned i = 0; i < 2; i++) {
            sm_buf_free(&s->lv[l].tmp[i]);
        }
        for (unsigned i = 0; i < 3; i++) {
            sm_buf_free(&s->lv[l].aux[i]);
        }
    }
    for (unsigned i = 0; i < SM_SCRATCH_USER_BUFS; i++) {
        sm_buf_free(&s->user[i]);
    }
    for (unsigned i = 1; i < SM_SCRATCH_MAX_WORKERS; i++) {
        sm_scratch_free(s->workers[i]);
    }
    sm_free(s);
}

struct sm_buf *sm_scratch_user_buf(struct sm_scratch *s, unsigned i)
{
    return &s->user[i < SM_SCRATCH_USER_BUFS ? i : SM_SCRATCH_USER_BUFS - 1];
}

sm_status sm_scratch_worker(struct sm_scratch *s, unsigned i, struct sm_scratch **out,
                            struct sm_err *err)
{
    *out = NULL;
    if (i == 0) {
        *out = s;
        return SM_OK;
    }
    if (i >= SM_SCRATCH_MAX_WORKERS) {
        SM_FAIL(err, SM_E_INTERNAL, "helper scratch %u of at most %u", i, SM_SCRATCH_MAX_WORKERS);
    }
    if (s->workers[i] == NULL) {
        SM_TRY(sm_scratch_new(&s->workers[i], err));
    }
    s->workers[i]->max_decoded = s->max_decoded;
    *out = s->workers[i];
    return SM_OK;
}

sm_status sm_scratch_zstd_d(struct sm_scratch *s, struct ZSTD_DCtx_s **out, struct sm_err *err)
{
    if (s->zstd_d == NULL) {
        s->zstd_d = ZSTD_createDCtx_advanced(zstd_mem);
        if (s->zstd_d == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "zstd: cannot allocate a decompression context");
        }
    }
    *out = s->zstd_d;
    return SM_OK;
}

sm_status sm_scratch_zstd_c(struct sm_scratch *s, struct ZSTD_CCtx_s **out, struct sm_err *err)
{
    if (s->zstd_c == NULL) {
        s->zstd_c = ZSTD_createCCtx_advanced(zstd_mem);
        if (s->zstd_c == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "zstd: cannot allocate a compression context");
        }
    }
    *out = s->zstd_c;
    return SM_OK;
}

sm_status sm_scratch_deflate_d(struct sm_scratch *s, struct libdeflate_decompressor **out,
                               struct sm_err *err)
{
    if (s->deflate_d == NULL) {
        s->deflate_d = libdeflate_alloc_decompressor();
        if (s->deflate_d == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "libdeflate: cannot allocate a decompressor");
        }
    }
    *out = s->deflate_d;
    return SM_OK;
}

sm_status sm_scratch_deflate_c(struct sm_scratch *s, int level, struct libdeflate_compressor **out,
                               struct sm_err *err)
{
    if (level < 0 || level >= SM_DEFLATE_LEVELS) {
        SM_FAIL(err, SM_E_INTERNAL, "deflate level %d outside 0..%d", level, SM_DEFLATE_LEVELS - 1);
    }
    if (s->deflate_c[level] == NULL) {
        s->deflate_c[level] = libdeflate_alloc_compressor(level);
        if (s->deflate_c[level] == NULL) {
            SM_FAIL(err, SM_E_NOMEM, "libdeflate: cannot allocate a level-%d compressor", level);
        }
    }
    *out = s->deflate_c[level];
    return SM_OK;
}

sm_status sm_scratch_level(struct sm_scratch *s, unsigned lv, struct sm_scratch_level **out,
                           struct sm_err *err)
{
    if (lv >= SM_SCRATCH_LEVELS) {
        SM_FAIL(err, SM_E_INTERNAL, "codec nesting level %u exceeds the scratch's %d levels", lv,
                SM_SCRATCH_LEVELS);
    }
    *out = &s->lv[lv];
    return SM_OK;
}

sm_status sm_codec_append(struct sm_buf *b, const void *p, size_t n, struct sm_err *err)
{
    if (n > SIZE_MAX - b->len) {
        SM_FAIL(err, SM_E_NOMEM, "buffer of %zu bytes cannot grow by %zu", b->len, n);
    }
    const size_t need = b->len + n;
    if (need > b->cap) {
        size_t grow = b->cap > SIZE_MAX / 2 ? SIZE_MAX : b->cap * 2;
        SM_TRY(sm_buf_reserve(b, grow > need ? grow : need, err));
    }
    if (n != 0) {
        memcpy(b->ptr + b->len, p, n);
    }
    b->len = need;
    return SM_OK;
}

size_t sm_codec_grow(size_t cap, size_t bound)
{
    if (cap >= bound) {
        return 0;
    }
    const size_t min = (size_t)64 << 10;
    size_t next = cap > SIZE_MAX / 2 ? SIZE_MAX : 2 * cap;
    next = next < min ? min : next;
    return next < bound ? next : bound;
}

sm_status sm_codec_renew(struct sm_buf *b, size_t n, struct sm_err *err)
{
    if (b->cap < n) {
        sm_buf_free(b);
    }
    b->len = 0;
    return sm_buf_reserve(b, n != 0 ? n : 1, err);
}
