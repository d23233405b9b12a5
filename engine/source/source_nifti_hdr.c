/* NIfTI-1 header parsing (see source_nifti_int.h): a pure function over a byte buffer. */
#include "shardmill/sm_config.h"

#include "source_nifti_int.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static uint16_t get16(const uint8_t *p, bool swap)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return swap ? (uint16_t)((v >> 8) | (v << 8)) : v;
}

static uint32_t get32(const uint8_t *p, bool swap)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return swap ? __builtin_bswap32(v) : v;
}

static int16_t gets16(const uint8_t *p, bool swap)
{
    const uint16_t u = get16(p, swap);
    int16_t v;
    memcpy(&v, &u, 2);
    return v;
}

static double getf(const uint8_t *p, bool swap)
{
    const uint32_t u = get32(p, swap);
    float f;
    memcpy(&f, &u, 4);
    return (double)f;
}

/* NIfTI-1 datatype codes this reader supports. */
static bool nifti_dtype(int code, enum sm_dtype *dt)
{
    static const struct {
        int code;
        enum sm_dtype dt;
    } map[] = {{2, SM_DT_UINT8},    {4, SM_DT_INT16},    {8, SM_DT_INT32},    {16, SM_DT_FLOAT32},
               {64, SM_DT_FLOAT64}, {256, SM_DT_INT8},   {512, SM_DT_UINT16}, {768, SM_DT_UINT32},
               {1024, SM_DT_INT64}, {1280, SM_DT_UINT64}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (map[i].code == code) {
            *dt = map[i].dt;
            return true;
        }
    }
    return false;
}

/* Data larger than this is refused before any size arithmetic can wrap (4 EiB). */
#define DATA_BYTES_MAX (UINT64_C(1) << 62)

sm_status sm_nifti_parse_header(const uint8_t *buf, size_t len, struct sm_nifti_hdr *h,
                                struct sm_err *err)
{
    memset(h, 0, sizeof(*h));
    if (buf == NULL || len < SM_NIFTI_HEADER_BYTES) {
        SM_FAIL_AT(err, SM_E_DATA, "sizeof_hdr",
                   "the file has %zu bytes, a NIfTI-1 header needs 348", len);
    }
    bool swap = false;
    uint32_t hsize = get32(buf, false);
    if (hsize != 348) {
        swap = true;
        hsize = get32(buf, true);
    }
    if (hsize != 348) {
        SM_FAIL_AT(err, SM_E_DATA, "sizeof_hdr",
                   "not a NIfTI-1 file (sizeof_hdr is %" PRIu32 ", not 348)", get32(buf, false));
    }
    if (memcmp(buf + 344, "ni1\0", 4) == 0) {
        SM_FAIL_AT(err, SM_E_DATA, "magic",
                   "a NIfTI-1 header whose data is in a separate .img file (magic \"ni1\") is not "
                   "supported: convert it to a single .nii file");
    }
    if (memcmp(buf + 344, "n+1\0", 4) != 0) {
        SM_FAIL_AT(err, SM_E_DATA, "magic",
                   "not a NIfTI-1 file (magic at byte 344 is not \"n+1\")");
    }
    h->swap = swap;
    const int ndim = gets16(buf + 40, swap);
    if (ndim < 1 || ndim > SM_NIFTI_MAX_DIMS) {
        SM_FAIL_AT(err, SM_E_DATA, "dim", "dim[0] is %d (expected 1..7)", ndim);
    }
    const int code = gets16(buf + 70, swap);
    if (!nifti_dtype(code, &h->dtype)) {
        SM_FAIL_AT(err, SM_E_DATA, "datatype", "unsupported NIfTI datatype %d", code);
    }
    int64_t dim[SM_NIFTI_MAX_DIMS + 1];
    for (int i = 1; i <= ndim; i++) {
        dim[i] = gets16(buf + 40 + 2 * i, swap);
        if (dim[i] < 1) {
            SM_FAIL_AT(err, SM_E_DATA, "dim",
                       "dim[%d] is %" PRId64 " (every axis needs at least 1 voxel)", i, dim[i]);
        }
    }
    /* axes past the third of size 1 are dropped (a 4-D file of one volume is 3-D) */
    int nd = ndim;
    while (nd > 3 && dim[nd] == 1) {
        nd--;
    }
    h->ndim = (unsigned)nd;
    uint64_t n = sm_dtype_size(h->dtype);
    for (int i = 1; i <= nd; i++) {
        h->shape[nd - i] = (uint64_t)dim[i];
        if (__builtin_mul_overflow(n, (uint64_t)dim[i], &n) || n >= DATA_BYTES_MAX) {
            SM_FAIL_AT(err, SM_E_DATA, "dim",
                       "the volume's size overflows (dim[1..%d] of %d-byte values)", nd,
                       (int)sm_dtype_size(h->dtype));
        }
    }
    h->data_bytes = n;
    for (int i = 0; i < SM_NIFTI_MAX_DIMS; i++) {
        h->pixdim[i] = getf(buf + 80 + 4 * i, swap); /* pixdim[1..7] at bytes 80..107 */
    }
    for (int d = 0; d < nd; d++) {
        h->spacing[d] = h->pixdim[nd - 1 - d];
    }
    const double vox = getf(buf + 108, swap);
    if (!(vox >= 348.0) || !(vox < (double)DATA_BYTES_MAX) || vox != floor(vox)) {
        SM_FAIL_AT(err, SM_E_DATA, "vox_offset",
                   "vox_offset %g is not a byte offset of at least 348", vox);
    }
    h->vox_offset = (uint64_t)vox;
    h->scl_slope = getf(buf + 112, swap);
    h->scl_inter = getf(buf + 116, swap);
    if (isinf(h->scl_slope)) {
        SM_FAIL_AT(err, SM_E_DATA, "scl_slope", "scl_slope is %g", h->scl_slope);
    }
    const bool slope_on = !isnan(h->scl_slope) && h->scl_slope != 0.0;
    if (slope_on && !isfinite(h->scl_inter) && !isnan(h->scl_inter)) {
        SM_FAIL_AT(err, SM_E_DATA, "scl_inter", "scl_inter is %g", h->scl_inter);
    }
    const double inter = isnan(h->scl_inter) ? 0.0 : h->scl_inter;
    h->scaled = slope_on && !(h->scl_slope == 1.0 && inter == 0.0);
    h->xyzt_units = buf[123];
    static const char *const units[] = {NULL, "meter", "millimeter", "micrometer"};
    const int su = h->xyzt_units & 0x07;
    h->unit = su <= 3 ? units[su] : NULL;
    h->qform_code = gets16(buf + 252, swap);
    h->sform_code = gets16(buf + 254, swap);
    if (h->sform_code > 0) {
        h->have_origin = true;
        h->origin_from = "sform";
        h->origin[2] = getf(buf + 280 + 12, swap); /* srow_x[3] */
        h->origin[1] = getf(buf + 296 + 12, swap); /* srow_y[3] */
        h->origin[0] = getf(buf + 312 + 12, swap); /* srow_z[3] */
    } else if (h->qform_code > 0) {
        h->have_origin = true;
        h->origin_from = "qform";
        h->origin[2] = getf(buf + 268, swap); /* qoffset_x */
        h->origin[1] = getf(buf + 272, swap);
        h->origin[0] = getf(buf + 276, swap);
    }
    return SM_OK;
}
