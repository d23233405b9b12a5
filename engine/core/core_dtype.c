/* Element data types (SPEC §2): sizes and Zarr v3 names. */
#include "shardmill/dtype.h"

#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[SM_DT_COUNT] = {
    [SM_DT_BOOL] = {"bool", 1},       [SM_DT_INT8] = {"int8", 1},
    [SM_DT_INT16] = {"int16", 2},     [SM_DT_INT32] = {"int32", 4},
    [SM_DT_INT64] = {"int64", 8},     [SM_DT_UINT8] = {"uint8", 1},
    [SM_DT_UINT16] = {"uint16", 2},   [SM_DT_UINT32] = {"uint32", 4},
    [SM_DT_UINT64] = {"uint64", 8},   [SM_DT_FLOAT32] = {"float32", 4},
    [SM_DT_FLOAT64] = {"float64", 8},
};

size_t sm_dtype_size(enum sm_dtype dt)
{
    return (unsigned)dt < SM_DT_COUNT ? dtypes[dt].size : 0;
}

size_t sm_dtype_patterns(enum sm_dtype dt)
{
    const size_t size = sm_dtype_size(dt);
    return size != 0 && size <= 2 && !sm_dtype_is_float(dt) ? (size_t)1 << (8 * size) : 0;
}

const char *sm_dtype_name(enum sm_dtype dt)
{
    return (unsigned)dt < SM_DT_COUNT ? dtypes[dt].name : "invalid";
}

bool sm_dtype_from_name(const char *name, enum sm_dtype *out)
{
    for (int i = 0; i < SM_DT_COUNT; i++) {
        if (strcmp(name, dtypes[i].name) == 0) {
            *out = (enum sm_dtype)i;
            return true;
        }
    }
    return false;
}

bool sm_dtype_is_float(enum sm_dtype dt)
{
    return dt == SM_DT_FLOAT32 || dt == SM_DT_FLOAT64;
}

bool sm_dtype_is_signed(enum sm_dtype dt)
{
    return dt == SM_DT_INT8 || dt == SM_DT_INT16 || dt == SM_DT_INT32 || dt == SM_DT_INT64 ||
           sm_dtype_is_float(dt);
}
