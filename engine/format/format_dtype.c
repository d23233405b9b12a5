/* Data types of Zarr v2 (NumPy typestr) and v3 (core data type names), SPEC §2.
 * https://zarr-specs.readthedocs.io/en/latest/v2/v2.0.html#data-type-encoding
 * https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html#data-types
 * Only the SPEC's eleven types are supported; anything else is SM_E_DATA naming the type. */
#include "format_int.h"

#include <string.h>

/* What NumPy kind characters mean, for messages about the kinds we do not support. */
static const char *v2_kind_name(char kind)
{
    switch (kind) {
    case 'c':
        return "complex";
    case 'S':
        return "byte string";
    case 'U':
        return "unicode string";
    case 'V':
        return "raw/void";
    case 'O':
        return "Python object";
    case 'M':
        return "datetime";
    case 'm':
        return "timedelta";
    default:
        return NULL;
    }
}

sm_status sm_fmt_dtype_v2(const json_t *v, enum sm_dtype *dt, bool *big_endian, struct sm_err *err)
{
    if (json_is_array(v)) {
        SM_FAIL(err, SM_E_DATA, "unsupported v2 structured dtype (field 'dtype' is a list)");
    }
    if (!json_is_string(v)) {
        SM_FAIL(err, SM_E_DATA, "field 'dtype' must be a string");
    }
    const char *s = json_string_value(v);
    const size_t n = json_string_length(v);
    if (n < 3 || strlen(s) != n || (s[0] != '<' && s[0] != '>' && s[0] != '|')) {
        SM_FAIL(err, SM_E_DATA,
                "unsupported v2 dtype '%s' (expected a byte order '<', '>' or '|', a kind and a "
                "size, e.g. '<u2')",
                s);
    }
    const char order = s[0], kind = s[1];
    unsigned size = 0;
    for (size_t i = 2; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || size > 1000) {
            SM_FAIL(err, SM_E_DATA, "unsupported v2 dtype '%s' (malformed size)", s);
        }
        size = size * 10 + (unsigned)(s[i] - '0');
    }
    bool ok = false;
    switch (kind) {
    case 'b':
        ok = size == 1;
        *dt = SM_DT_BOOL;
        break;
    case 'i':
    case 'u': {
        static const enum sm_dtype ints[2][4] = {
            {SM_DT_INT8, SM_DT_INT16, SM_DT_INT32, SM_DT_INT64},
            {SM_DT_UINT8, SM_DT_UINT16, SM_DT_UINT32, SM_DT_UINT64},
        };
        const int u = kind == 'u';
        ok = true;
        switch (size) {
        case 1:
            *dt = ints[u][0];
            break;
        case 2:
            *dt = ints[u][1];
            break;
        case 4:
            *dt = ints[u][2];
            break;
        case 8:
            *dt = ints[u][3];
            break;
        default:
            ok = false;
        }
        break;
    }
    case 'f':
        ok = size == 4 || size == 8;
        *dt = size == 4 ? SM_DT_FLOAT32 : SM_DT_FLOAT64;
        break;
    default: {
        const char *what = v2_kind_name(kind);
        if (what != NULL) {
            SM_FAIL(err, SM_E_DATA, "unsupported v2 dtype '%s' (%s)", s, what);
        }
        SM_FAIL(err, SM_E_DATA, "unsupported v2 dtype '%s' (unknown kind '%c')", s, kind);
    }
    }
    if (!ok) {
        SM_FAIL(err, SM_E_DATA, "unsupported v2 dtype '%s' (no %u-byte %s type)", s, size,
                kind == 'b'   ? "bool"
                : kind == 'f' ? "float"
                              : "integer");
    }
    if (order == '|' && size != 1) {
        SM_FAIL(err, SM_E_DATA,
                "malformed v2 dtype '%s': byte order '|' is only valid for 1-byte types", s);
    }
    *big_endian = order == '>' && size > 1;
    return SM_OK;
}

sm_status sm_fmt_dtype_v3(const json_t *v, enum sm_dtype *dt, struct sm_err *err)
{
    if (json_is_object(v)) {
        /* Extension data types are objects {"name": ..., "configuration": ...}. */
        const json_t *name = json_object_get(v, "name");
        if (json_is_string(name)) {
            SM_FAIL(err, SM_E_DATA, "unsupported data type '%s'", json_string_value(name));
        }
        SM_FAIL(err, SM_E_DATA, "field 'data_type' must be a string");
    }
    if (!json_is_string(v)) {
        SM_FAIL(err, SM_E_DATA, "field 'data_type' must be a string");
    }
    const char *s = json_string_value(v);
    if (strlen(s) != json_string_length(v) || !sm_dtype_from_name(s, dt)) {
        SM_FAIL(err, SM_E_DATA, "unsupported data type '%s'", s);
    }
    return SM_OK;
}
