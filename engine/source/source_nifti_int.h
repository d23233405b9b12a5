/* Internal to source/: the NIfTI-1 header
 * (https://nifti.nimh.nih.gov/nifti-1/documentation/nifti1fields), parsed by a pure function over
 * a byte buffer (source_nifti_hdr.c): no I/O, no allocation, every size overflow-checked, so the
 * bytes of any file (or a fuzzer's) can be handed to it (tests/fuzz/fuzz_nifti_header.c). The
 * NIfTI source (source_nifti.c) reads the header, checks the data size against the file and
 * limits.memory_bytes, and applies scl_slope/scl_inter (SPEC §2: applied or refused, never
 * ignored). */
#ifndef SM_SOURCE_SOURCE_NIFTI_INT_H
#define SM_SOURCE_SOURCE_NIFTI_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shardmill/dtype.h"
#include "shardmill/status.h"

#define SM_NIFTI_HEADER_BYTES 348
#define SM_NIFTI_MAX_DIMS 7

struct sm_nifti_hdr {
    bool swap;                         /* the header (and data) are big-endian */
    enum sm_dtype dtype;               /* the stored values */
    unsigned ndim;                     /* dim[0] less trailing axes of size 1 (>= 1) */
    uint64_t shape[SM_NIFTI_MAX_DIMS]; /* C order: [z, y, x] for 3-D (NIfTI stores x fastest) */
    uint64_t data_bytes;               /* product(shape) * element size (checked, < 2^62) */
    uint64_t vox_offset;               /* first data byte in the file (>= 348) */
    double pixdim[SM_NIFTI_MAX_DIMS];  /* pixdim[1..7] as stored: x, y, z, t, ... */
    double spacing[SM_NIFTI_MAX_DIMS]; /* voxel size per array axis, C order ([z, y, x]) */
    int xyzt_units;                    /* the byte as stored */
    const char *unit;                  /* spatial unit: "meter" | "millimeter" |
                                          "micrometer", or NULL when unknown (code 0) */
    double scl_slope, scl_inter;       /* as stored (NaN possible) */
    bool scaled;                       /* slope finite, != 0, and (slope, inter) != (1, 0) */
    int qform_code, sform_code;
    bool have_origin;        /* sform_code > 0 (srow_*[3]) or qform_code > 0
                                (qoffset_*) */
    const char *origin_from; /* "sform" | "qform" when have_origin */
    double origin[3];        /* world coordinates of voxel (0,0,0): [z, y, x] */
};

/* Parses the first 348 bytes of buf (len >= 348). The magic must be "n+1" (a single-file
 * NIfTI-1; "ni1" pairs with a separate .img file and is refused). SM_E_DATA naming the field
 * (where = "sizeof_hdr", "magic", "dim", "datatype", "vox_offset", "scl_slope", ...):
 * a short buffer, a bad sizeof_hdr or magic, dim[0] outside 1..7, a dim < 1, an unsupported
 * datatype, a volume of 2^62 bytes or more, a vox_offset below 348 or not a whole number of
 * bytes, a non-finite scl_slope (other than NaN, which means "unscaled") or scl_inter. */
sm_status sm_nifti_parse_header(const uint8_t *buf, size_t len, struct sm_nifti_hdr *h,
                                struct sm_err *err);

#endif
