/* The representations a codec stage sees on its two sides (codec_int.h): what every codec's
 * prepare and the chain share, kept apart from the chain so that a codec depends on this file,
 * not on the chain that runs it. */
#include "codec_int.h"

#include <string.h>

void sm_repr_bytes(struct sm_repr *out, const struct sm_repr *from, size_t len)
{
    struct sm_repr r;
    memset(&r, 0, sizeof(r));
    r.dtype = from->dtype;
    r.ndim = 1;
    r.shape[0] = len == SM_LEN_VARIABLE ? 0 : (uint64_t)len;
    r.len = len;
    memcpy(r.fill, from->fill, sizeof(r.fill));
    *out = r;
}

bool sm_repr_array_len(const struct sm_repr *r, size_t *len)
{
    size_t n = sm_dtype_size(r->dtype);
    if (n == 0 || r->ndim > SM_MAX_DIMS) {
        return false;
    }
    for (unsigned d = 0; d < r->ndim; d++) {
        if (r->shape[d] > SIZE_MAX || (r->shape[d] != 0 && n > SIZE_MAX / (size_t)r->shape[d])) {
            return false;
        }
        n *= (size_t)r->shape[d];
    }
    *len = n;
    return true;
}
