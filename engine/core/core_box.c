/* N-d box copy and fill between C-order arrays (see box.h): an odometer over the outer axes with
 * precomputed byte strides, one memcpy per last-axis run. Runs are merged across trailing axes
 * that the box covers completely, so a box that is contiguous in both arrays is a single memcpy. */
#include "shardmill/box.h"

#include <stdbool.h>
#include <string.h>

#define MAXD 32

/* Byte strides of a C-order array. */
static void strides_of(const struct sm_box_view *v, uint64_t *st)
{
    uint64_t s = v->elem;
    for (unsigned d = v->ndim; d-- > 0;) {
        st[d] = s;
        s *= v->shape[d];
    }
}

/* Number of trailing axes (beyond the last) that can be folded into one run: axis d folds when
 * the box spans it fully in both arrays. Returns the outer axis count and the run length. */
static unsigned fold(unsigned ndim, const uint64_t *ext, const uint64_t *a_shape,
                     const uint64_t *b_shape, size_t elem, uint64_t *run)
{
    unsigned outer = ndim - 1;
    *run = ext[ndim - 1] * elem;
    while (outer > 0 && ext[outer] == a_shape[outer] &&
           (b_shape == NULL || ext[outer] == b_shape[outer])) {
        outer--;
        *run *= ext[outer];
    }
    return outer;
}

void sm_box_copy(const struct sm_box_view *sv, const void *src, const uint64_t *src_off,
                 const struct sm_box_view *dv, void *dst, const uint64_t *dst_off,
                 const uint64_t *ext)
{
    const unsigned nd = sv->ndim;
    if (nd == 0) {
        memcpy(dst, src, sv->elem);
        return;
    }
    for (unsigned d = 0; d < nd; d++) {
        if (ext[d] == 0) {
            return;
        }
    }
    uint64_t ss[MAXD], ds[MAXD];
    strides_of(sv, ss);
    strides_of(dv, ds);
    const uint8_t *s = (const uint8_t *)src;
    uint8_t *t = (uint8_t *)dst;
    for (unsigned d = 0; d < nd; d++) {
        s += src_off[d] * ss[d];
        t += dst_off[d] * ds[d];
    }
    uint64_t run;
    const unsigned outer = fold(nd, ext, sv->shape, dv->shape, sv->elem, &run);
    uint64_t ctr[MAXD] = {0};
    for (;;) {
        memcpy(t, s, run);
        unsigned d = outer;
        while (d-- > 0) {
            s += ss[d];
            t += ds[d];
            if (++ctr[d] < ext[d]) {
                break;
            }
            s -= ss[d] * ext[d];
            t -= ds[d] * ext[d];
            ctr[d] = 0;
        }
        if (d == (unsigned)-1) {
            return;
        }
    }
}

/* Fills n bytes with the elem-byte pattern by doubling copies. */
static void fill_run(uint8_t *t, uint64_t n, const uint8_t *fill, size_t elem, bool uniform)
{
    if (uniform) {
        memset(t, fill[0], n);
        return;
    }
    uint64_t done = elem < n ? elem : n;
    memcpy(t, fill, done);
    while (done < n) {
        uint64_t k = done < n - done ? done : n - done;
        memcpy(t + done, t, k);
        done += k;
    }
}

void sm_box_fill(const struct sm_box_view *dv, void *dst, const uint64_t *dst_off,
                 const uint64_t *ext, const uint8_t *fill)
{
    const unsigned nd = dv->ndim;
    bool uniform = true;
    for (size_t i = 1; i < dv->elem; i++) {
        uniform = uniform && fill[i] == fill[0];
    }
    if (nd == 0) {
        memcpy(dst, fill, dv->elem);
        return;
    }
    for (unsigned d = 0; d < nd; d++) {
        if (ext[d] == 0) {
            return;
        }
    }
    uint64_t ds[MAXD];
    strides_of(dv, ds);
    uint8_t *t = (uint8_t *)dst;
    for (unsigned d = 0; d < nd; d++) {
        t += dst_off[d] * ds[d];
    }
    uint64_t run;
    const unsigned outer = fold(nd, ext, dv->shape, NULL, dv->elem, &run);
    uint64_t ctr[MAXD] = {0};
    for (;;) {
        fill_run(t, run, fill, dv->elem, uniform);
        unsigned d = outer;
        while (d-- > 0) {
            t += ds[d];
            if (++ctr[d] < ext[d]) {
                break;
            }
            t -= ds[d] * ext[d];
            ctr[d] = 0;
        }
        if (d == (unsigned)-1) {
            return;
        }
    }
}
