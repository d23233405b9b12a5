/* Fill values: JSON <-> little-endian bytes of the data type (SPEC §2).
 * https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html#fill-value
 * https://zarr-specs.readthedocs.io/en/latest/v2/v2.0.html#fill-value-encoding
 * Invariant: fill[size..8) is always zero, and a value that does not fit the type is an error,
 * never silently wrapped or rounded to infinity. */
#include "format_int.h"

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F32_NAN_BITS UINT32_C(0x7fc00000)
#define F32_INF_BITS UINT32_C(0x7f800000)
#define F64_NAN_BITS UINT64_C(0x7ff8000000000000)
#define F64_INF_BITS UINT64_C(0x7ff0000000000000)

static void store_le(uint8_t fill[8], uint64_t v, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        fill[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint64_t load_le(const uint8_t fill[8], size_t size)
{
    uint64_t v = 0;
    for (size_t i = 0; i < size; i++) {
        v |= (uint64_t)fill[i] << (8 * i);
    }
    return v;
}

static uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof(b));
    return b;
}

static uint64_t f64_bits(double d)
{
    uint64_t b;
    memcpy(&b, &d, sizeof(b));
    return b;
}

/* "0x" followed by exactly 2 * size hex digits: the v3 encoding of a float's bit pattern. */
static bool parse_hex_bits(const char *s, size_t n, size_t size, uint64_t *bits)
{
    if (n != 2 + 2 * size || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) {
        return false;
    }
    uint64_t v = 0;
    for (size_t i = 2; i < n; i++) {
        const char c = s[i];
        unsigned d;
        if (c >= '0' && c <= '9') {
            d = (unsigned)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            d = (unsigned)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            d = (unsigned)(c - 'A' + 10);
        } else {
            return false;
        }
        v = (v << 4) | d;
    }
    *bits = v;
    return true;
}

static sm_status fill_float(const json_t *v, enum sm_dtype dt, uint8_t fill[8], struct sm_err *err)
{
    const size_t size = sm_dtype_size(dt);
    const char *name = sm_dtype_name(dt);
    const char *digits;
    double d;
    if (json_is_integer(v)) {
        d = (double)json_integer_value(v);
    } else if (json_is_real(v)) {
        d = json_real_value(v);
    } else if (sm_fmt_json_bigint(v, &digits)) {
        d = strtod(digits, NULL);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        const size_t n = json_string_length(v);
        uint64_t bits;
        if (strcmp(s, "NaN") == 0) {
            d = NAN;
        } else if (strcmp(s, "Infinity") == 0) {
            d = INFINITY;
        } else if (strcmp(s, "-Infinity") == 0) {
            d = -INFINITY;
        } else if (parse_hex_bits(s, n, size, &bits)) {
            store_le(fill, bits, size);
            return SM_OK;
        } else {
            SM_FAIL(err, SM_E_DATA,
                    "fill_value \"%s\" is not valid for %s (expected a number, \"NaN\", "
                    "\"Infinity\", \"-Infinity\" or \"0x\" and %zu hex digits)",
                    s, name, 2 * size);
        }
    } else {
        SM_FAIL(err, SM_E_DATA, "fill_value for %s must be a number or a string", name);
    }
    if (dt == SM_DT_FLOAT32) {
        uint32_t bits;
        if (isnan(d)) {
            bits = F32_NAN_BITS;
        } else if (isinf(d)) {
            bits = F32_INF_BITS | (d < 0 ? UINT32_C(0x80000000) : 0);
        } else if (fabs(d) > FLT_MAX) {
            SM_FAIL(err, SM_E_DATA, "fill_value %.17g is out of range for float32", d);
        } else {
            bits = f32_bits((float)d);
        }
        store_le(fill, bits, 4);
    } else {
        store_le(fill, isnan(d) ? F64_NAN_BITS : f64_bits(d), 8);
    }
    return SM_OK;
}

/* Integer types: the value as two's complement in 64 bits, range-checked for dt. */
static sm_status fill_int(const json_t *v, enum sm_dtype dt, uint8_t fill[8], struct sm_err *err)
{
    const size_t size = sm_dtype_size(dt);
    const unsigned bits = (unsigned)(8 * size);
    const bool is_signed = sm_dtype_is_signed(dt);
    const char *name = sm_dtype_name(dt);
    /* Exact bounds: smallest value and largest value + 1 (powers of two, exact as doubles). */
    const int64_t lo = is_signed ? (bits == 64 ? INT64_MIN : -(INT64_C(1) << (bits - 1))) : 0;
    const uint64_t hi = is_signed ? (UINT64_C(1) << (bits - 1)) - 1
                                  : (bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1);
    const char *digits;
    uint64_t raw;
    if (json_is_integer(v)) {
        const json_int_t i = json_integer_value(v);
        if (i < lo || (i > 0 && (uint64_t)i > hi)) {
            SM_FAIL(err, SM_E_DATA, "fill_value %" JSON_INTEGER_FORMAT " is out of range for %s", i,
                    name);
        }
        raw = (uint64_t)i;
    } else if (json_is_real(v)) {
        const double d = json_real_value(v);
        const double hi_excl = ldexp(1.0, is_signed ? (int)bits - 1 : (int)bits);
        if (d != floor(d)) {
            SM_FAIL(err, SM_E_DATA, "fill_value %.17g is not an integer (data type %s)", d, name);
        }
        if (d < (double)lo || d >= hi_excl) {
            SM_FAIL(err, SM_E_DATA, "fill_value %.17g is out of range for %s", d, name);
        }
        raw = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
    } else if (sm_fmt_json_bigint(v, &digits)) {
        /* Only integers outside int64 arrive here: the one valid case is uint64 above 2^63-1. */
        errno = 0;
        raw = digits[0] == '-' ? 0 : strtoull(digits, NULL, 10);
        if (digits[0] == '-' || errno == ERANGE || raw > hi) {
            SM_FAIL(err, SM_E_DATA, "fill_value %s is out of range for %s", digits, name);
        }
    } else if (json_is_string(v)) {
        SM_FAIL(err, SM_E_DATA, "fill_value \"%s\" is not valid for %s (expected an integer)",
                json_string_value(v), name);
    } else {
        SM_FAIL(err, SM_E_DATA, "fill_value for %s must be an integer", name);
    }
    store_le(fill, raw, size);
    return SM_OK;
}

sm_status sm_fmt_fill_parse(const json_t *v, enum sm_dtype dt, uint8_t fill[8], bool *is_null,
                            struct sm_err *err)
{
    memset(fill, 0, 8);
    *is_null = false;
    if (v == NULL || json_is_null(v)) {
        /* zarr-python 2 writes null when no fill value was given (and zarrita.js may): the
         * chunks of such arrays read as zeros where missing. */
        *is_null = true;
        return SM_OK;
    }
    if (dt == SM_DT_BOOL) {
        if (json_is_boolean(v)) {
            fill[0] = json_is_true(v) ? 1 : 0;
            return SM_OK;
        }
        if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1)) {
            fill[0] = (uint8_t)json_integer_value(v);
            return SM_OK;
        }
        SM_FAIL(err, SM_E_DATA, "fill_value for bool must be true or false");
    }
    if (json_is_boolean(v)) {
        SM_FAIL(err, SM_E_DATA, "fill_value %s is not valid for %s",
                json_is_true(v) ? "true" : "false", sm_dtype_name(dt));
    }
    if (sm_dtype_is_float(dt)) {
        return fill_float(v, dt, fill, err);
    }
    return fill_int(v, dt, fill, err);
}

/* A float fill as v3 writes it: "NaN" for the canonical NaN, other NaN payloads as hex so the
 * bits survive, "Infinity"/"-Infinity", else the number. */
static json_t *float_json(bool is_nan, bool is_inf, bool neg, double d, uint64_t bits,
                          bool canonical_nan, int hex_digits)
{
    if (is_nan) {
        if (canonical_nan) {
            return json_string("NaN");
        }
        char hex[24];
        (void)snprintf(hex, sizeof(hex), "0x%0*" PRIx64, hex_digits, bits);
        return json_string(hex);
    }
    if (is_inf) {
        return json_string(neg ? "-Infinity" : "Infinity");
    }
    return json_real(d);
}

json_t *sm_fmt_fill_to_json(enum sm_dtype dt, const uint8_t fill[8], bool is_null)
{
    if (is_null) {
        return json_null();
    }
    const size_t size = sm_dtype_size(dt);
    const uint64_t raw = load_le(fill, size);
    switch (dt) {
    case SM_DT_BOOL:
        return json_boolean(raw != 0);
    case SM_DT_INT8:
        return json_integer((int8_t)raw);
    case SM_DT_INT16:
        return json_integer((int16_t)raw);
    case SM_DT_INT32:
        return json_integer((int32_t)raw);
    case SM_DT_INT64:
        return json_integer((json_int_t)(int64_t)raw);
    case SM_DT_UINT8:
    case SM_DT_UINT16:
    case SM_DT_UINT32:
    case SM_DT_UINT64:
        /* jansson integers are int64: a uint64 above 2^63-1 can only be shown as a real. */
        return sm_json_u64(raw);
    case SM_DT_FLOAT32: {
        float f;
        const uint32_t b = (uint32_t)raw;
        memcpy(&f, &b, sizeof(f));
        return float_json(isnan(f), isinf(f), f < 0, (double)f, raw, b == F32_NAN_BITS, 8);
    }
    case SM_DT_FLOAT64: {
        double d;
        memcpy(&d, &raw, sizeof(d));
        return float_json(isnan(d), isinf(d), d < 0, d, raw, raw == F64_NAN_BITS, 16);
    }
    case SM_DT_COUNT:
        break;
    }
    return json_null();
}

json_t *sm_meta_fill_json(const struct sm_array_meta *m)
{
    return sm_fmt_fill_to_json(m->dtype, m->fill, m->fill_is_null);
}
