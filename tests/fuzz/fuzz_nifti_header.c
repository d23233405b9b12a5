/* libFuzzer target: the NIfTI-1 header parser (engine/source/source_nifti_hdr.c, issue 10). The
 * input is the header bytes (seeds: 348-byte headers written by nibabel,
 * tests/fuzz/corpus/nifti_header/). Beyond "no crash, no sanitizer report", a parsed header must be
 * self-consistent: 1..7 axes of at least one voxel whose product times the element size is
 * data_bytes (< 2^62, no wrap), a vox_offset of at least 348, and the [z, y, x] spacing the reverse
 * of pixdim. */
#include "shardmill/sm_config.h"

#include <stddef.h>
#include <stdint.h>

#include "source_nifti_int.h" /* checksrc: allow int-header (the pure parser it fuzzes) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sm_nifti_hdr h;
    struct sm_err err;
    sm_err_clear(&err);
    if (sm_nifti_parse_header(data, size, &h, &err) != SM_OK) {
        if (err.status != SM_E_DATA || err.what[0] == '\0' || err.where[0] == '\0') {
            __builtin_trap(); /* every refusal is SM_E_DATA naming the field */
        }
        return 0;
    }
    if (h.ndim < 1 || h.ndim > SM_NIFTI_MAX_DIMS || h.vox_offset < SM_NIFTI_HEADER_BYTES) {
        __builtin_trap();
    }
    unsigned __int128 n = sm_dtype_size(h.dtype);
    for (unsigned d = 0; d < h.ndim; d++) {
        if (h.shape[d] < 1) {
            __builtin_trap();
        }
        n *= h.shape[d];
        if (h.spacing[d] != h.pixdim[h.ndim - 1 - d] &&
            !(h.spacing[d] != h.spacing[d] &&
              h.pixdim[h.ndim - 1 - d] != h.pixdim[h.ndim - 1 - d])) {
            __builtin_trap();
        }
    }
    if (n != h.data_bytes || n >= ((unsigned __int128)1 << 62)) {
        __builtin_trap();
    }
    return 0;
}
