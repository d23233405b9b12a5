/* Element data types shared by every layer (SPEC §2). In memory, decoded arrays are C-order and
 * native (little-endian) byte order. */
#ifndef SM_CORE_DTYPE_H
#define SM_CORE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

enum sm_dtype {
    SM_DT_BOOL,
    SM_DT_INT8,
    SM_DT_INT16,
    SM_DT_INT32,
    SM_DT_INT64,
    SM_DT_UINT8,
    SM_DT_UINT16,
    SM_DT_UINT32,
    SM_DT_UINT64,
    SM_DT_FLOAT32,
    SM_DT_FLOAT64,
    SM_DT_COUNT
};

/* Size in bytes of one element (0 for an invalid value). */
size_t sm_dtype_size(enum sm_dtype dt);
/* Zarr v3 data type name ("uint16", "float32", "bool"). */
const char *sm_dtype_name(enum sm_dtype dt);
/* Parses a Zarr v3 data type name; false if unknown. */
bool sm_dtype_from_name(const char *name, enum sm_dtype *out);
bool sm_dtype_is_float(enum sm_dtype dt);
bool sm_dtype_is_signed(enum sm_dtype dt);

#endif
