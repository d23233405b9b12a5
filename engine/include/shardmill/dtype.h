/* Element data types shared by every layer (SPEC §2). In memory, decoded arrays are C-order and
 * native (little-endian) byte order. */
#ifndef SM_CORE_DTYPE_H
#define SM_CORE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
/* The bit patterns of an element of at most 16 bits (bool read as its byte: 256), which tables
 * indexed by value (the histogram's raw counts, the normalization's lookup table) hold; 0 for
 * wider and floating types. */
size_t sm_dtype_patterns(enum sm_dtype dt);

/* The one per-type dispatch: runs the statement(s) `...` with T a typedef of the C type that holds
 * one element of dt (bool as uint8_t), so a kernel is written once as a macro or block on T and
 * instantiated for every type. Nothing runs for an invalid dt. The statements must not `break`
 * or `continue` out of the dispatch (a loop of their own is fine); they may `return`. Dispatches
 * nest with different names for T:
 *     SM_DTYPE_DISPATCH(from, F, SM_DTYPE_DISPATCH(to, O, cast_loop(F, O)));
 */
#define SM_DTYPE_DISPATCH(dt, T, ...)                                                              \
    do {                                                                                           \
        switch (dt) {                                                                              \
        case SM_DT_BOOL:                                                                           \
        case SM_DT_UINT8: {                                                                        \
            typedef uint8_t T;                                                                     \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case SM_DT_INT8: {                                                                         \
            typedef int8_t T;                                                                      \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case SM_DT_UINT16: {                                                                       \
            typedef uint16_t T;                                                                    \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case SM_DT_INT16: {                                                                        \
            typedef int16_t T;                                                                     \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case SM_DT_UINT32: {                                                                       \
            typedef uint32_t T;                                                                    \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case SM_DT_INT32: {                                                                        \
            typedef int32_t T;                                                                     \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case SM_DT_UINT64: {                                                                       \
            typedef uint64_t T;                                                                    \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case SM_DT_INT64: {                                                                        \
            typedef int64_t T;                                                                     \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case SM_DT_FLOAT32: {                                                                      \
            typedef float T;                                                                       \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case SM_DT_FLOAT64: {                                                                      \
            typedef double T;                                                                      \
            __VA_ARGS__;                                                                           \
        } break;                                                                                   \
        case SM_DT_COUNT:                                                                          \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

#endif
