/* The HDF5 reader's fast path for gzip datasets (part of libshardmill_h5source.so): a box of a
 * chunked dataset whose filters are [deflate] or [shuffle, deflate] and whose stored type is the
 * native one is read chunk by chunk: the chunk's stored bytes come from H5Dread_chunk under the
 * reader's lock (no filter runs there), and the inflate (libdeflate, zlib format as HDF5 writes
 * it), the unshuffle and the copy into the box run outside it. Debian's HDF5 is not thread-safe,
 * so through H5Dread the inflate of every chunk ran under the one lock and the threads of a rank
 * decoded one chunk at a time; here they decode in parallel. The byte shuffle is undone by hand:
 * HDF5 exposes no call for it, and it is one transposition.
 * Anything the fast path does not cover -- a chunk never written (HDF5 reads its fill value), a
 * chunk stored with a filter skipped, a chunk that does not inflate to its size -- answers
 * "fall back", and the caller reads the box through H5Dread, which applies HDF5's own rules and
 * names its own errors. A chunk stored with its filters whose bytes are no zlib stream is
 * corrupt: SM_E_DATA naming its offset (H5Dread's error would name no chunk). */
#include "source_hdf5_raw.h"

#include <libdeflate.h>
#include <pthread.h>
#include <string.h>

#include <hdf5.h>

#include "shardmill/alloc.h"

#define FILTER_SHUFFLE 2 /* H5Z_FILTER_SHUFFLE */
#define FILTER_DEFLATE 1 /* H5Z_FILTER_DEFLATE */

bool sm_h5raw_plan(hid_t dset, hid_t mtype, unsigned ndim, struct sm_h5raw *raw)
{
    memset(raw, 0, sizeof(*raw));
    const hid_t dcpl = H5Dget_create_plist(dset);
    const hid_t t = H5Dget_type(dset);
    bool ok = dcpl >= 0 && t >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED && H5Tequal(t, mtype) > 0 &&
              ndim <= SM_MAX_DIMS;
    hsize_t chunk[H5S_MAX_RANK];
    ok = ok && H5Pget_chunk(dcpl, (int)ndim, chunk) == (int)ndim;
    const int n = ok ? H5Pget_nfilters(dcpl) : 0;
    ok = ok && (n == 1 || n == 2);
    for (int i = 0; ok && i < n; i++) {
        unsigned flags = 0;
        size_t nvals = 0;
        const H5Z_filter_t id =
            H5Pget_filter2(dcpl, (unsigned)i, &flags, &nvals, NULL, 0, NULL, NULL);
        ok = id == (i == n - 1 ? FILTER_DEFLATE : FILTER_SHUFFLE);
    }
    if (ok) {
        raw->on = true;
        raw->shuffle = n == 2;
        raw->elem = H5Tget_size(t);
        raw->ndim = ndim;
        raw->chunk_bytes = raw->elem;
        for (unsigned d = 0; d < ndim; d++) {
            raw->chunk[d] = chunk[d];
            raw->chunk_bytes *= chunk[d];
        }
    }
    if (t >= 0) {
        H5Tclose(t);
    }
    if (dcpl >= 0) {
        H5Pclose(dcpl);
    }
    H5Eclear2(H5E_DEFAULT);
    return ok;
}

/* HDF5's shuffle stores byte j of every element together: n elements of `elem` bytes in src as
 * elem planes of n bytes. Back into elements in dst. */
static void unshuffle(const uint8_t *src, uint8_t *dst, size_t n, size_t elem)
{
    for (size_t j = 0; j < elem; j++) {
        const uint8_t *plane = src + j * n;
        for (size_t i = 0; i < n; i++) {
            dst[i * elem + j] = plane[i];
        }
    }
}

/* A growing buffer of the module's own: it uses only the engine calls the reader already
 * needs (the program that loads the module resolves them; sm_buf's may not be linked in). */
struct bytes {
    uint8_t *ptr;
    size_t len, cap;
};

static bool bytes_room(struct bytes *b, size_t n)
{
    if (n <= b->cap) {
        return true;
    }
    sm_free(b->ptr);
    b->ptr = sm_calloc(1, n);
    b->cap = b->ptr != NULL ? n : 0;
    return b->ptr != NULL;
}

/* The stored bytes of the chunk at coff under the lock: false when it has none (never written),
 * was stored with a filter skipped, claims more bytes than deflate can make of `most` bytes of
 * values (a damaged file: nothing that large is allocated) or its buffer cannot be allocated;
 * H5Dread then decides. */
static bool fetch(hid_t dset, pthread_mutex_t *lock, const hsize_t *coff, size_t most,
                  struct bytes *stored)
{
    hsize_t nbytes = 0;
    uint32_t mask = 0;
    /* deflate's worst case: 5 bytes per 16 KiB stored block, plus the zlib wrapper */
    const hsize_t bound = (hsize_t)most + (hsize_t)most / 1024 + 4096;
    pthread_mutex_lock(lock);
    const bool ok = H5Dget_chunk_storage_size(dset, coff, &nbytes) >= 0 && nbytes > 0 &&
                    nbytes <= bound && bytes_room(stored, (size_t)nbytes) &&
                    H5Dread_chunk(dset, H5P_DEFAULT, coff, &mask, stored->ptr) >= 0 && mask == 0;
    H5Eclear2(H5E_DEFAULT);
    pthread_mutex_unlock(lock);
    stored->len = ok ? (size_t)nbytes : 0;
    return ok;
}

/* Chunk ci's part of the box [off, off + shape) into out, from its decoded values, one memcpy
 * per row. (By hand rather than core's sm_box_copy: this module resolves the engine's functions
 * from the program, and a program need not link box.c.) */
static void copy_part(const struct sm_h5raw *raw, const uint64_t *ci, const uint8_t *values,
                      const uint64_t *off, const uint64_t *shape, uint8_t *out)
{
    const unsigned nd = raw->ndim;
    uint64_t src[SM_MAX_DIMS], dst[SM_MAX_DIMS], ext[SM_MAX_DIMS], at[SM_MAX_DIMS];
    for (unsigned d = 0; d < nd; d++) {
        const uint64_t c0 = ci[d] * raw->chunk[d];
        const uint64_t a = off[d] > c0 ? off[d] : c0;
        const uint64_t end = off[d] + shape[d], cend = c0 + raw->chunk[d];
        src[d] = a - c0;
        dst[d] = a - off[d];
        ext[d] = (end < cend ? end : cend) - a;
        at[d] = 0;
    }
    const size_t row = (size_t)ext[nd - 1] * raw->elem;
    for (bool more = true; more;) {
        uint64_t si = 0, di = 0; /* linear indices of the row's first element */
        for (unsigned d = 0; d < nd; d++) {
            si = si * raw->chunk[d] + src[d] + (d + 1 < nd ? at[d] : 0);
            di = di * shape[d] + dst[d] + (d + 1 < nd ? at[d] : 0);
        }
        memcpy(out + di * raw->elem, values + si * raw->elem, row);
        more = false;
        for (unsigned d = nd - 1; d-- > 0 && !more;) {
            more = ++at[d] < ext[d];
            at[d] = more ? at[d] : 0;
        }
    }
}

/* SM_E_DATA naming the chunk at coff whose stored bytes are no zlib stream; the caller adds the
 * file and dataset as where. */
static sm_status bad_chunk(const struct sm_h5raw *raw, const hsize_t *coff, size_t len,
                           struct sm_err *err)
{
    char at[SM_MAX_DIMS * 24 + 4];
    size_t n = (size_t)snprintf(at, sizeof(at), "[");
    for (unsigned d = 0; d < raw->ndim && n < sizeof(at); d++) {
        n += (size_t)snprintf(at + n, sizeof(at) - n, "%s%llu", d == 0 ? "" : ", ",
                              (unsigned long long)coff[d]);
    }
    if (n < sizeof(at)) {
        snprintf(at + n, sizeof(at) - n, "]");
    }
    SM_FAIL(err, SM_E_DATA,
            "the gzip chunk at offset %s (%zu stored bytes) is corrupt: it does not "
            "inflate",
            at, len);
}

sm_status sm_h5raw_read_box(const struct sm_h5raw *raw, hid_t dset, pthread_mutex_t *lock,
                            const uint64_t *off, const uint64_t *shape, void *out, bool *fallback,
                            uint64_t *read, struct sm_err *err)
{
    *fallback = false;
    uint64_t first[SM_MAX_DIMS], last[SM_MAX_DIMS], ci[SM_MAX_DIMS];
    for (unsigned d = 0; d < raw->ndim; d++) {
        first[d] = off[d] / raw->chunk[d];
        last[d] = (off[d] + shape[d] - 1) / raw->chunk[d];
        ci[d] = first[d];
    }
    struct libdeflate_decompressor *dz = libdeflate_alloc_decompressor();
    struct bytes stored = {0}, values = {0}, shuffled = {0};
    sm_status st = SM_OK;
    if (dz == NULL || !bytes_room(&values, raw->chunk_bytes) ||
        (raw->shuffle && !bytes_room(&shuffled, raw->chunk_bytes))) {
        st = SM_ERR(err, SM_E_NOMEM, "cannot allocate the buffers of a %zu-byte HDF5 chunk",
                    raw->chunk_bytes);
    }
    for (bool more = true; st == SM_OK && more && !*fallback;) {
        hsize_t coff[SM_MAX_DIMS];
        for (unsigned d = 0; d < raw->ndim; d++) {
            coff[d] = ci[d] * raw->chunk[d];
        }
        size_t got = 0;
        uint8_t *inflated = raw->shuffle ? shuffled.ptr : values.ptr;
        if (!fetch(dset, lock, coff, raw->chunk_bytes, &stored)) {
            *fallback = true; /* H5Dread decides: the fill value, or HDF5's own error */
            break;
        }
        *read += stored.len;
        const enum libdeflate_result r = libdeflate_zlib_decompress(
            dz, stored.ptr, stored.len, inflated, raw->chunk_bytes, &got);
        if (r == LIBDEFLATE_BAD_DATA) { /* stored with its filters, and no zlib stream */
            st = bad_chunk(raw, coff, stored.len, err);
            break;
        }
        if (r != LIBDEFLATE_SUCCESS || got != raw->chunk_bytes) {
            *fallback = true;
            break;
        }
        if (raw->shuffle) {
            unshuffle(shuffled.ptr, values.ptr, raw->chunk_bytes / raw->elem, raw->elem);
        }
        copy_part(raw, ci, values.ptr, off, shape, out);
        more = false; /* the next chunk in C order, if any */
        for (unsigned d = raw->ndim; d-- > 0 && !more;) {
            more = ci[d] < last[d];
            ci[d] = more ? ci[d] + 1 : first[d];
        }
    }
    libdeflate_free_decompressor(dz);
    sm_free(stored.ptr);
    sm_free(values.ptr);
    sm_free(shuffled.ptr);
    return st;
}
