/* N-d box copies between C-order arrays: the one place that moves voxels between chunk and region
 * buffers. Runs along the last axis are copied with memcpy and strides are computed once, so there
 * is no per-element coordinate math (the inner loop is one memcpy per row). */
#ifndef SM_CORE_BOX_H
#define SM_CORE_BOX_H

#include <stddef.h>
#include <stdint.h>

/* A C-order array view: `ndim` extents and the element size. */
struct sm_box_view {
    unsigned ndim;
    size_t elem;
    const uint64_t *shape; /* extents of the whole array the pointer addresses */
};

/* Copies the box of extent `ext` at `src_off` in src to `dst_off` in dst. Both views must share
 * ndim and elem; the box must lie inside both arrays (checked by the caller). ndim 0 copies one
 * element. */
void sm_box_copy(const struct sm_box_view *src_view, const void *src, const uint64_t *src_off,
                 const struct sm_box_view *dst_view, void *dst, const uint64_t *dst_off,
                 const uint64_t *ext);

/* The greatest common divisor (gcd(a, 0) = a): where two grids of extents a and b line up (their
 * boundaries meet every lcm(a, b) = a / gcd(a, b) * b). */
static inline uint64_t sm_gcd_u64(uint64_t a, uint64_t b)
{
    while (b != 0) {
        const uint64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* Fills the box of extent `ext` at `dst_off` with the element pattern `fill` (elem bytes). */
void sm_box_fill(const struct sm_box_view *dst_view, void *dst, const uint64_t *dst_off,
                 const uint64_t *ext, const uint8_t *fill);

#endif
