/* The per-thread memo of decoded input read units (tile.h): a tile or shard smaller than an input
 * chunk reads the chunk once and the neighbours that share it copy from the memo, instead of each
 * decoding it again (a 64^3 chunk under [8,32,32] tiles: 32 decodes before, 1 now). A unit that
 * the region covers whole is nobody else's (tiles and shards do not overlap): it is read through
 * a spare buffer, not memoized. A region that covers every unit it touches whole is read by one
 * sm_array_read_region call, exactly as without a memo. Least recently used slot goes first. */
#include "shardmill/tile.h"

#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/box.h"

#define MEMO_MAX_SLOTS 16

struct slot {
    uint64_t unit; /* linear index in the unit grid; UINT64_MAX: empty */
    uint64_t used; /* last use (LRU) */
    uint8_t *data; /* the unit's box, clipped to the array, C order */
};

struct sm_chunk_memo {
    unsigned nd;
    size_t elem;
    uint64_t ashape[SM_MAX_DIMS], ushape[SM_MAX_DIMS], ugrid[SM_MAX_DIMS];
    uint64_t unit_bytes;
    unsigned nslots;
    uint64_t clock;
    uint64_t hits, misses;
    uint8_t *spare; /* a unit read for this region only */
    struct slot slots[MEMO_MAX_SLOTS];
};

unsigned sm_chunk_memo_slots(const struct sm_array_meta *m, uint64_t max_bytes)
{
    struct sm_read_unit u;
    sm_read_unit_of(m, &u);
    if (m->ndim == 0 || u.bytes == 0) {
        return 0;
    }
    /* the spare buffer counts too: slots + 1 units within max_bytes */
    const uint64_t n = max_bytes / u.bytes;
    if (n < 2) {
        return 0;
    }
    return n - 1 < MEMO_MAX_SLOTS ? (unsigned)(n - 1) : MEMO_MAX_SLOTS;
}

sm_status sm_chunk_memo_new(const struct sm_array_meta *m, uint64_t max_bytes,
                            struct sm_chunk_memo **out, struct sm_err *err)
{
    *out = NULL;
    const unsigned nslots = sm_chunk_memo_slots(m, max_bytes);
    if (nslots == 0) {
        return SM_OK; /* no memo: every read goes straight to the array */
    }
    struct sm_chunk_memo *mo = sm_calloc(1, sizeof(*mo));
    if (mo == NULL) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate a chunk memo");
    }
    struct sm_read_unit u;
    sm_read_unit_of(m, &u);
    mo->nd = m->ndim;
    mo->elem = sm_dtype_size(m->dtype);
    mo->unit_bytes = u.bytes;
    mo->nslots = nslots;
    for (unsigned d = 0; d < m->ndim; d++) {
        mo->ashape[d] = m->shape[d];
        mo->ushape[d] = u.shape[d];
        mo->ugrid[d] = (m->shape[d] + u.shape[d] - 1) / u.shape[d];
    }
    for (unsigned i = 0; i < MEMO_MAX_SLOTS; i++) {
        mo->slots[i].unit = UINT64_MAX;
    }
    *out = mo;
    return SM_OK;
}

void sm_chunk_memo_free(struct sm_chunk_memo *mo)
{
    if (mo == NULL) {
        return;
    }
    for (unsigned i = 0; i < MEMO_MAX_SLOTS; i++) {
        sm_free(mo->slots[i].data);
    }
    sm_free(mo->spare);
    sm_free(mo);
}

void sm_chunk_memo_counts(const struct sm_chunk_memo *mo, uint64_t *hits, uint64_t *misses)
{
    *hits = mo != NULL ? mo->hits : 0;
    *misses = mo != NULL ? mo->misses : 0;
}

static uint8_t *alloc_unit(struct sm_chunk_memo *mo, uint8_t **p, struct sm_err *err)
{
    if (*p == NULL) {
        *p = sm_malloc((size_t)mo->unit_bytes);
        if (*p == NULL) {
            SM_ERR(err, SM_E_NOMEM, "cannot allocate a %llu-byte chunk memo slot",
                   (unsigned long long)mo->unit_bytes);
        }
    }
    return *p;
}

sm_status sm_chunk_memo_read(struct sm_chunk_memo *mo, struct sm_array *a, const uint64_t *off,
                             const uint64_t *shape, void *dst, size_t len,
                             struct sm_scratch *scratch, struct sm_err *err)
{
    if (mo == NULL) {
        return sm_array_read_region(a, off, shape, dst, len, scratch, err);
    }
    const unsigned nd = mo->nd;
    uint64_t lo[SM_MAX_DIMS], hi[SM_MAX_DIMS], idx[SM_MAX_DIMS];
    bool whole = true;
    size_t n = mo->elem;
    for (unsigned d = 0; d < nd; d++) {
        n *= (size_t)shape[d];
        if (shape[d] == 0) {
            return sm_array_read_region(a, off, shape, dst, len, scratch, err);
        }
        lo[d] = off[d] / mo->ushape[d];
        hi[d] = (off[d] + shape[d] - 1) / mo->ushape[d];
        const uint64_t ulo = lo[d] * mo->ushape[d];
        uint64_t uhi = (hi[d] + 1) * mo->ushape[d];
        uhi = uhi < mo->ashape[d] ? uhi : mo->ashape[d];
        whole = whole && ulo == off[d] && uhi == off[d] + shape[d];
        idx[d] = lo[d];
    }
    if (whole || len != n) {
        return sm_array_read_region(a, off, shape, dst, len, scratch, err);
    }
    const struct sm_box_view dv = {nd, mo->elem, shape};
    for (;;) { /* every unit the region touches, C order */
        uint64_t uoff[SM_MAX_DIMS], ushp[SM_MAX_DIMS], src[SM_MAX_DIMS], at[SM_MAX_DIMS],
            cnt[SM_MAX_DIMS];
        uint64_t lin = 0;
        bool covered = true;
        for (unsigned d = 0; d < nd; d++) {
            uoff[d] = idx[d] * mo->ushape[d];
            const uint64_t end = uoff[d] + mo->ushape[d];
            ushp[d] = (end < mo->ashape[d] ? end : mo->ashape[d]) - uoff[d];
            const uint64_t b = off[d] > uoff[d] ? off[d] : uoff[d];
            const uint64_t e0 = off[d] + shape[d], e1 = uoff[d] + ushp[d];
            const uint64_t e = e0 < e1 ? e0 : e1;
            src[d] = b - uoff[d];
            at[d] = b - off[d];
            cnt[d] = e - b;
            covered = covered && cnt[d] == ushp[d];
            lin = lin * mo->ugrid[d] + idx[d];
        }
        size_t ubytes = mo->elem;
        for (unsigned d = 0; d < nd; d++) {
            ubytes *= (size_t)ushp[d];
        }
        const uint8_t *data = NULL;
        if (covered) { /* nobody else needs it */
            if (alloc_unit(mo, &mo->spare, err) == NULL) {
                return err->status;
            }
            SM_TRY(sm_array_read_region(a, uoff, ushp, mo->spare, ubytes, scratch, err));
            data = mo->spare;
        } else {
            struct slot *hit = NULL, *victim = NULL;
            for (unsigned i = 0; i < mo->nslots && hit == NULL; i++) {
                struct slot *s = &mo->slots[i];
                if (s->unit == lin) {
                    hit = s;
                } else if (victim == NULL || (victim->unit != UINT64_MAX &&
                                              (s->unit == UINT64_MAX || s->used < victim->used))) {
                    victim = s;
                }
            }
            if (hit == NULL) {
                mo->misses++;
                if (alloc_unit(mo, &victim->data, err) == NULL) {
                    return err->status;
                }
                victim->unit = UINT64_MAX; /* invalid until the read succeeds */
                SM_TRY(sm_array_read_region(a, uoff, ushp, victim->data, ubytes, scratch, err));
                victim->unit = lin;
                hit = victim;
            } else {
                mo->hits++;
            }
            hit->used = ++mo->clock;
            data = hit->data;
        }
        const struct sm_box_view uv = {nd, mo->elem, ushp};
        sm_box_copy(&uv, data, src, &dv, dst, at, cnt);
        bool more = false;
        for (unsigned d = nd; d-- > 0 && !more;) {
            if (++idx[d] <= hi[d]) {
                more = true;
            } else {
                idx[d] = lo[d];
            }
        }
        if (!more) {
            return SM_OK;
        }
    }
}
