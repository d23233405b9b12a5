/* Shard reads by range (SPEC §2 sharding_indexed, §3; STYLE B8): read the shard index by suffix
 * (index at end) or prefix (index at start) through the index cache, then only the inner chunks
 * the box touches, merging byte-adjacent chunks into one ranged read. Nested sharding recurses
 * with the inner chunk's byte range as the new base. The pure index decoding is codec_sharding.c.
 */
#include "array_int.h"

#include <inttypes.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/clock.h"

/* Largest merged read: bounds the memory of one batch of inner chunks. */
#define MERGE_MAX_BYTES (8u << 20)
/* Inner chunk references held at once (24 bytes each): a region of single-element inner chunks
 * would otherwise need 24 bytes of references per element it reads. Runs are merged across
 * batches, except a run of more than this many chunks, which is split. */
#define REFS_BATCH 65536u

struct inner_ref {
    uint64_t lin;      /* C-order index in the inner grid */
    uint64_t off, len; /* bytes in the object (absolute) */
};

/* A loaded shard index: pairs borrowed from the index cache (ent), or held in the top-level index
 * buffer of the scratch, or (nested shards, uncached) in an allocation of their own. */
struct index_hold {
    const uint64_t *pairs;
    struct sm_index_entry *ent;
    uint64_t *owned;
};

static void index_release(struct sm_array *a, struct index_hold *h)
{
    if (h->ent != NULL) {
        sm_index_cache_release(a->icache, h->ent);
    }
    sm_free(h->owned);
    *h = (struct index_hold){NULL, NULL, NULL};
}

/* Fetches and decodes the index of the shard at [base, base + base_len) of `key` into pairs (2 *
 * n_inner values). The index size follows from the metadata alone (up to 2^59 entries), so nothing
 * is allocated for it before it is checked against limits.max_object_bytes and the shard's own
 * size: the encoded index is fetched first (a store never returns more than the object holds), and
 * the decoded pairs take no more than that. `pairs` NULL: *get_pairs supplies the buffer once the
 * index is known to exist (the scratch buffer or an allocation). */
static sm_status fetch_index(struct sm_array *a, const char *key, uint64_t base, uint64_t base_len,
                             const struct sm_shard_codec *sc, uint64_t *pairs,
                             struct index_hold *hold, bool *found, uint64_t *shard_len_out,
                             struct sm_read_bufs *bufs, struct sm_scratch *scratch,
                             struct sm_err *err)
{
    const struct sm_shard_layout *L = sm_shard_layout(sc);
    const size_t nvals = 2 * (size_t)L->n_inner; /* layout_of: 16 * n_inner fits a size_t */
    uint64_t shard_len = base_len;
    *found = true;
    sm_status st = SM_OK;
    const uint64_t max_object = a->opts.limits.max_object_bytes;
    if (max_object != 0 && L->index_len > max_object) {
        SM_FAIL(err, SM_E_LIMIT,
                "an index of %" PRIu64 " inner chunks (%zu bytes) exceeds "
                "limits.max_object_bytes (%" PRIu64 ")",
                L->n_inner, L->index_len, max_object);
    }
    struct sm_range r = sm_range_all();
    if (base_len == UINT64_MAX) {
        r = L->location == SM_SHARD_INDEX_END ? sm_range_suffix(L->index_len)
                                              : sm_range_span(0, L->index_len);
    } else {
        if (base_len < L->index_len) {
            SM_FAIL(err, SM_E_DATA,
                    "nested shard of %" PRIu64 " bytes is shorter than its %zu-byte index",
                    base_len, L->index_len);
        }
        r = sm_range_span(L->location == SM_SHARD_INDEX_END ? base + base_len - L->index_len : base,
                          L->index_len);
    }
    uint64_t objsize = UINT64_MAX;
    uint64_t t = sm_clock_ns();
    SM_TRY(sm_store_get_sized(a->store, key, r, SM_IO_INDEX, bufs->enc, found, &objsize, err));
    t = sm_array_lap(&a->fetch_ns, t);
    if (!*found) {
        return SM_OK;
    }
    if (pairs == NULL) {
        if (base_len == UINT64_MAX) { /* top level: the scratch's index buffer */
            SM_TRY(sm_buf_reserve(bufs->pairs, nvals * sizeof(uint64_t), err));
            pairs = (uint64_t *)(void *)bufs->pairs->ptr;
        } else { /* nested levels are on the stack at once: a buffer each */
            hold->owned = sm_malloc(nvals * sizeof(uint64_t)); /* no larger than the index read */
            if (hold->owned == NULL) {
                SM_FAIL(err, SM_E_NOMEM, "cannot allocate a shard index of %zu entries", nvals / 2);
            }
            pairs = hold->owned;
        }
    }
    if (base_len == UINT64_MAX) {
        shard_len = objsize;
        if (shard_len == UINT64_MAX) { /* the store cannot tell: trust only what the index says */
            shard_len = UINT64_MAX - 1;
        }
    }
    st = sm_shard_index_decode(sc, sm_buf_bytes(bufs->enc), shard_len, pairs, scratch, err);
    sm_array_lap(&a->decode_ns, t);
    if (st != SM_OK) {
        return st;
    }
    if (base != 0) { /* nested: entries are relative to the inner shard's start */
        for (size_t i = 0; i < nvals; i += 2) {
            if (pairs[i] != SM_SHARD_EMPTY) {
                pairs[i] += base;
            }
        }
    }
    hold->pairs = pairs;
    *shard_len_out = shard_len;
    return SM_OK;
}

/* Loads the decoded index of a shard into *hold (nothing held when the shard is missing): through
 * the index cache when it may hold it (a hit borrows the entry; a miss fills a new entry, once,
 * however many threads miss it together), else fetched into the scratch. */
static sm_status load_index(struct sm_array *a, const char *key, uint64_t base, uint64_t base_len,
                            const struct sm_shard_codec *sc, struct index_hold *hold, bool *found,
                            struct sm_read_bufs *bufs, struct sm_scratch *scratch,
                            struct sm_err *err)
{
    const struct sm_shard_layout *L = sm_shard_layout(sc);
    const size_t nvals = 2 * (size_t)L->n_inner;
    *hold = (struct index_hold){NULL, NULL, NULL};
    uint64_t shard_len = 0;
    sm_status st;
    if (a->icache != NULL && sm_index_cache_may_hold(a->icache, nvals)) {
        struct sm_index_entry *e = NULL;
        switch (sm_index_cache_acquire(a->icache, key, base, base_len, nvals, &e)) {
        case SM_ICACHE_HIT:
            *found = true;
            hold->ent = e;
            hold->pairs = sm_index_entry_pairs(e, &shard_len);
            return SM_OK;
        case SM_ICACHE_FILL:
            st = fetch_index(a, key, base, base_len, sc, sm_index_entry_fill_buf(e), hold, found,
                             &shard_len, bufs, scratch, err);
            sm_index_cache_complete(a->icache, e, st == SM_OK && *found, shard_len);
            if (st == SM_OK && *found) {
                hold->ent = e;
                return SM_OK;
            }
            sm_index_cache_release(a->icache, e);
            hold->pairs = NULL;
            if (st != SM_OK) {
                sm_err_where(err, "%s/%s (shard index)", a->store->url, key);
            }
            return st;
        case SM_ICACHE_NONE:
            break;
        }
    }
    st = fetch_index(a, key, base, base_len, sc, NULL, hold, found, &shard_len, bufs, scratch, err);
    if (st != SM_OK) {
        sm_err_where(err, "%s/%s (shard index)", a->store->url, key);
        index_release(a, hold);
    }
    return st;
}

/* Decodes inner chunk i of a fetched run and places it. */
static sm_status place_piece(struct sm_array *a, const char *key, const struct sm_shard_codec *sc,
                             const uint64_t *origin, const uint64_t *lo, const uint64_t *hi,
                             const struct sm_region_dst *dst, const struct inner_ref *ref,
                             const uint8_t *run, uint64_t run_off, struct sm_buf *dec,
                             struct sm_scratch *scratch, struct sm_err *err)
{
    const struct sm_shard_layout *L = sm_shard_layout(sc);
    const unsigned nd = L->ndim;
    const uint64_t t = sm_clock_ns();
    struct sm_bytes piece = sm_bytes_of(run + (ref->off - run_off), ref->len);
    const uint8_t *block;
    sm_status st = sm_codec_chain_decode_view(sm_shard_inner(sc), piece, dec, &block, scratch, err);
    sm_array_lap(&a->decode_ns, t);
    if (st != SM_OK) {
        sm_err_where(err, "%s/%s (inner chunk at byte %" PRIu64 ")", a->store->url, key, ref->off);
        return st;
    }
    uint64_t io[SM_MAX_DIMS], ilo[SM_MAX_DIMS], ihi[SM_MAX_DIMS];
    uint64_t lin = ref->lin;
    for (unsigned d = nd; d-- > 0;) {
        io[d] = origin[d] + (lin % L->chunks_per_shard[d]) * L->inner_shape[d];
        lin /= L->chunks_per_shard[d];
    }
    for (unsigned d = 0; d < nd; d++) {
        ilo[d] = io[d] > lo[d] ? io[d] : lo[d];
        ihi[d] = io[d] + L->inner_shape[d] < hi[d] ? io[d] + L->inner_shape[d] : hi[d];
    }
    sm_region_put(dst, block, io, L->inner_shape, ilo, ihi, NULL);
    return SM_OK;
}

struct piece_job {
    struct sm_array *a;
    const char *key;
    const struct sm_shard_codec *sc;
    const uint64_t *origin, *lo, *hi;
    const struct sm_region_dst *dst;
    const struct inner_ref *refs;
    const uint8_t *run;
    uint64_t run_off;
};

static sm_status piece_run(void *ctx, uint64_t k, struct sm_scratch *scratch, struct sm_err *err)
{
    const struct piece_job *j = ctx;
    struct sm_read_bufs b;
    sm_read_bufs_of(scratch, 1, &b);
    return place_piece(j->a, j->key, j->sc, j->origin, j->lo, j->hi, j->dst, &j->refs[k], j->run,
                       j->run_off, b.dec, scratch, err);
}

/* Decodes the inner chunks of one merged byte run and places them: serially, or with
 * bufs->threads OpenMP threads (each on its worker scratch and decode buffer; the chunks write
 * disjoint parts of dst; on failure the error of the first failing chunk in run order wins, as
 * serially). */
static sm_status place_run(struct sm_array *a, const char *key, const struct sm_shard_codec *sc,
                           const uint64_t *origin, const uint64_t *lo, const uint64_t *hi,
                           const struct sm_region_dst *dst, const struct inner_ref *refs, size_t n,
                           struct sm_read_bufs *bufs, struct sm_scratch *scratch,
                           struct sm_err *err)
{
    const uint64_t run_off = refs[0].off;
    const uint64_t run_len = refs[n - 1].off + refs[n - 1].len - run_off;
    bool found;
    struct sm_bytes enc;
    void *ref; /* an object-cache entry lent to us, or NULL (enc is then bufs->enc) */
    uint64_t t = sm_clock_ns();
    SM_TRY(sm_store_get_borrow(a->store, key, sm_range_span(run_off, run_len), SM_IO_PAYLOAD,
                               bufs->enc, &enc, &ref, &found, err));
    sm_array_lap(&a->fetch_ns, t);
    if (!found) {
        SM_ERR(err, SM_E_DATA, "shard disappeared while reading it");
        sm_err_where(err, "%s/%s", a->store->url, key);
        return err->status;
    }
    const uint8_t *run = enc.ptr;
    unsigned threads = bufs->threads;
    if (threads > n) {
        threads = (unsigned)n;
    }
    sm_status st = SM_OK;
    if (threads <= 1) {
        for (size_t i = 0; i < n && st == SM_OK; i++) {
            st = place_piece(a, key, sc, origin, lo, hi, dst, &refs[i], run, run_off, bufs->dec,
                             scratch, err);
        }
    } else {
        struct piece_job j = {a, key, sc, origin, lo, hi, dst, refs, run, run_off};
        st = sm_read_parallel(threads, n, piece_run, &j, scratch, err);
    }
    sm_store_release(a->store, ref);
    if (st == SM_OK) {
        atomic_fetch_add_explicit(&a->inner_read, n, memory_order_relaxed);
    }
    return st;
}

/* Merges byte-adjacent references (in visiting order) into runs, each one ranged read, and places
 * them. With `keep_tail`, the last run stays in refs (moved to the front) since the next batch
 * may continue it, unless it fills the whole batch; *n is what is left. */
static sm_status place_refs(struct sm_array *a, const char *key, const struct sm_shard_codec *sc,
                            const uint64_t *origin, const uint64_t *lo, const uint64_t *hi,
                            const struct sm_region_dst *dst, struct inner_ref *refs, size_t *n,
                            bool keep_tail, struct sm_read_bufs *bufs, struct sm_scratch *scratch,
                            struct sm_err *err)
{
    size_t s = 0;
    while (s < *n) {
        size_t e = s + 1;
        while (e < *n && refs[e].off == refs[e - 1].off + refs[e - 1].len &&
               refs[e].off + refs[e].len - refs[s].off <= MERGE_MAX_BYTES) {
            e++;
        }
        if (keep_tail && e == *n && s > 0) {
            break;
        }
        SM_TRY(place_run(a, key, sc, origin, lo, hi, dst, refs + s, e - s, bufs, scratch, err));
        s = e;
    }
    memmove(refs, refs + s, (*n - s) * sizeof(*refs));
    *n -= s;
    return SM_OK;
}

sm_status sm_shard_read_box(struct sm_array *a, const char *key, uint64_t base, uint64_t base_len,
                            const struct sm_shard_codec *sc, const uint64_t *origin,
                            const uint64_t *lo, const uint64_t *hi, const struct sm_region_dst *dst,
                            struct sm_read_bufs *bufs, struct sm_scratch *scratch,
                            struct sm_err *err)
{
    const struct sm_shard_layout *L = sm_shard_layout(sc);
    const struct sm_codec_chain *inner = sm_shard_inner(sc);
    const struct sm_shard_codec *nested = sm_codec_chain_shard(inner);
    const struct sm_repr *irepr = sm_codec_chain_repr(inner);
    const unsigned nd = L->ndim;

    /* The index is borrowed from the cache or held apart from bufs->enc: nested reads reuse it. */
    struct index_hold hold;
    struct inner_ref *refs = NULL;
    bool found;
    sm_status st = load_index(a, key, base, base_len, sc, &hold, &found, bufs, scratch, err);
    if (st != SM_OK || !found) {
        if (st == SM_OK) {
            atomic_fetch_add_explicit(&a->chunks_missing, 1, memory_order_relaxed);
            sm_region_put(dst, NULL, origin, NULL, lo, hi, irepr->fill);
        }
        return st;
    }
    if (base_len == UINT64_MAX) { /* the stored object itself, not a nested shard inside it */
        atomic_fetch_add_explicit(&a->chunks_read, 1, memory_order_relaxed);
    }

    /* Inner chunks touched, in C order of the inner grid. */
    uint64_t i0[SM_MAX_DIMS], i1[SM_MAX_DIMS], ii[SM_MAX_DIMS];
    size_t ntouched = 1;
    for (unsigned d = 0; d < nd; d++) {
        i0[d] = (lo[d] - origin[d]) / L->inner_shape[d];
        i1[d] = (hi[d] - 1 - origin[d]) / L->inner_shape[d];
        ii[d] = i0[d];
        ntouched *= (size_t)(i1[d] - i0[d] + 1);
    }
    /* Only the innermost level collects references, so one scratch buffer serves every level. */
    const size_t cap = nested != NULL ? 0 : ntouched < REFS_BATCH ? ntouched : REFS_BATCH;
    if (nested == NULL) {
        st = sm_buf_reserve(bufs->refs, cap * sizeof(*refs), err);
        if (st != SM_OK) {
            index_release(a, &hold);
            return st;
        }
        refs = (struct inner_ref *)(void *)bufs->refs->ptr;
    }
    const uint64_t *pairs = hold.pairs;
    size_t nrefs = 0;
    for (;;) {
        uint64_t lin = 0;
        for (unsigned d = 0; d < nd; d++) {
            lin = lin * L->chunks_per_shard[d] + ii[d];
        }
        const uint64_t off = pairs[2 * lin], len = pairs[2 * lin + 1];
        uint64_t io[SM_MAX_DIMS], ilo[SM_MAX_DIMS], ihi[SM_MAX_DIMS];
        for (unsigned d = 0; d < nd; d++) {
            io[d] = origin[d] + ii[d] * L->inner_shape[d];
            ilo[d] = io[d] > lo[d] ? io[d] : lo[d];
            ihi[d] = io[d] + L->inner_shape[d] < hi[d] ? io[d] + L->inner_shape[d] : hi[d];
        }
        if (off == SM_SHARD_EMPTY && len == SM_SHARD_EMPTY) {
            atomic_fetch_add_explicit(&a->inner_missing, 1, memory_order_relaxed);
            sm_region_put(dst, NULL, io, NULL, ilo, ihi, irepr->fill);
        } else if (nested != NULL) {
            st = sm_shard_read_box(a, key, off, len, nested, io, ilo, ihi, dst, bufs, scratch, err);
        } else {
            refs[nrefs++] = (struct inner_ref){lin, off, len};
            if (nrefs == cap) {
                st = place_refs(a, key, sc, origin, lo, hi, dst, refs, &nrefs, true, bufs, scratch,
                                err);
            }
        }
        if (st != SM_OK) {
            break;
        }
        unsigned d = nd;
        while (d-- > 0) {
            if (++ii[d] <= i1[d]) {
                break;
            }
            ii[d] = i0[d];
        }
        if (d == (unsigned)-1) {
            break;
        }
    }
    if (st == SM_OK && nested == NULL) {
        st = place_refs(a, key, sc, origin, lo, hi, dst, refs, &nrefs, false, bufs, scratch, err);
    }
    index_release(a, &hold);
    return st;
}
