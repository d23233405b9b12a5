/* The JSON number policy of shardmill's documents (see meta.h): exact integers outside int64 (held
 * as a NUL-led string, the form sm_fmt_json_rewrite gives a parsed one, and dumped bare),
 * checksums as decimal strings, and the readers of both forms. */
#include "shardmill/meta.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "format_int.h"

/* How json_dumps escapes the leading NUL, with the opening quote. */
#define MARK_DUMPED "\"\\u0000"

json_t *sm_json_u64(uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX) {
        return json_integer((json_int_t)v);
    }
    char text[40];
    const int n = snprintf(text, sizeof(text), "%c%" PRIu64, '\0', v);
    return json_stringn(text, (size_t)n);
}

json_t *sm_json_u64_array(const uint64_t *v, unsigned n)
{
    json_t *a = json_array();
    for (unsigned i = 0; a != NULL && i < n; i++) {
        if (json_array_append_new(a, sm_json_u64(v[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *sm_json_checksum_u64(uint64_t v)
{
    char text[32];
    snprintf(text, sizeof(text), "%" PRIu64, v);
    return json_string(text);
}

json_t *sm_json_checksum_i64(int64_t v)
{
    char text[32];
    snprintf(text, sizeof(text), "%" PRId64, v);
    return json_string(text);
}

/* Decimal digits s[0..n) (after an optional '-' when `sign`) as a magnitude up to `max`. */
static bool decimal(const char *s, size_t n, bool sign, bool *neg, uint64_t max, uint64_t *mag)
{
    size_t i = 0;
    *neg = false;
    if (sign && n > 0 && s[0] == '-') {
        *neg = true;
        i = 1;
    }
    if (i == n || n - i > 20 || (s[i] == '0' && n - i > 1)) {
        return false;
    }
    uint64_t x = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        const uint64_t d = (uint64_t)(s[i] - '0');
        if (x > (max - d) / 10) {
            return false;
        }
        x = x * 10 + d;
    }
    *mag = x;
    return true;
}

/* The text of a big integer or a decimal string, or NULL. */
static const char *number_text(const json_t *v, size_t *n)
{
    const char *digits;
    if (sm_fmt_json_bigint(v, &digits)) {
        *n = strlen(digits);
        return digits;
    }
    if (json_is_string(v)) {
        *n = json_string_length(v);
        return json_string_value(v);
    }
    return NULL;
}

bool sm_json_get_u64(const json_t *v, uint64_t *out)
{
    if (json_is_integer(v)) {
        const json_int_t x = json_integer_value(v);
        if (x < 0) {
            return false;
        }
        *out = (uint64_t)x;
        return true;
    }
    size_t n;
    const char *s = number_text(v, &n);
    bool neg;
    return s != NULL && decimal(s, n, false, &neg, UINT64_MAX, out);
}

bool sm_json_get_i64(const json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return true;
    }
    size_t n;
    const char *s = number_text(v, &n);
    bool neg;
    uint64_t mag;
    if (s == NULL || !decimal(s, n, true, &neg, (uint64_t)INT64_MAX + 1, &mag) ||
        (!neg && mag > (uint64_t)INT64_MAX)) {
        return false;
    }
    *out = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
    return true;
}

sm_status sm_json_load(const char *text, size_t len, const char *where, json_t **out,
                       struct sm_err *err)
{
    const sm_status st = sm_fmt_json_load(text, len, "", out, err);
    if (st != SM_OK) {
        sm_err_where(err, "%s", where);
    }
    return st;
}

char *sm_json_dumps(const json_t *j, size_t flags)
{
    char *text = json_dumps(j, flags);
    if (text == NULL) {
        return NULL;
    }
    const size_t mlen = strlen(MARK_DUMPED);
    char *r = text, *w = text;
    while (*r != '\0') {
        if (strncmp(r, MARK_DUMPED, mlen) == 0) {
            r += mlen;
            while ((*r >= '0' && *r <= '9') || *r == '-') {
                *w++ = *r++;
            }
            r++; /* the closing quote */
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
    return text;
}

void sm_json_free_text(char *text)
{
    json_malloc_t m;
    json_free_t release;
    json_get_alloc_funcs(&m, &release);
    release(text);
}
