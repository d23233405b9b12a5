/* Lenient loading of Zarr metadata JSON (SPEC §2).
 * https://zarr-specs.readthedocs.io/en/latest/v2/v2.0.html (fill_value),
 * https://zarr-specs.readthedocs.io/en/latest/v3/core/index.html (fill_value)
 * Invariant: a document jansson accepts is parsed unchanged; only the tokens below are rewritten,
 * and every error position is reported in the coordinates of the original text. */
#include "format_int.h"

#include <stdlib.h>
#include <string.h>

#include "shardmill/alloc.h"

/* Why a rewriting pass: Python's json module (zarr-python 2.x, numcodecs) writes float fill
 * values as the bare tokens NaN, Infinity and -Infinity, which RFC 8259 does not allow and
 * jansson rejects. And Zarr allows uint64 fill values up to 2^64-1, which jansson cannot hold
 * (json_int_t is int64; it fails with "too big integer"). So before parsing we tokenize the
 * document just enough to tell strings from the rest, and outside strings we
 *   - quote NaN / Infinity / -Infinity (the strings mean the same in Zarr v2 and v3), and
 *   - turn an integer literal outside int64 into the string "\u0000<digits>": no genuine string
 *     can start with NUL because we reject the escape \u0000 in the input (as jansson does by
 *     default), so after parsing with JSON_ALLOW_NUL such a string is unambiguously a number.
 * Everything else, valid or not, is copied byte for byte for jansson to judge. */

#define BIGINT_OPEN "\"\\u0000"
#define BIGINT_OPEN_LEN 7 /* '"', '\', 'u', '0', '0', '0', '0' */

/* One rewritten token: where it ends in the output, how many bytes it grew, on which line. */
struct rewrite_mark {
    size_t out_end;
    size_t growth;
    int line;
};

struct scan {
    const char *doc; /* message prefix */
    const char *in;
    size_t len;
    char *out;                  /* NULL on the counting pass */
    struct rewrite_mark *marks; /* NULL on the counting pass */
    size_t pos, out_len, n_marks;
    int line;
    size_t line_start;
};

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_word_char(char c)
{
    return is_alpha(c) || is_digit(c) || c == '_';
}

static bool is_number_char(char c)
{
    return is_digit(c) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-';
}

static void emit(struct scan *s, const char *p, size_t n)
{
    if (s->out != NULL) {
        memcpy(s->out + s->out_len, p, n);
    }
    s->out_len += n;
}

static void mark(struct scan *s, size_t growth)
{
    if (s->marks != NULL) {
        s->marks[s->n_marks] = (struct rewrite_mark){s->out_len, growth, s->line};
    }
    s->n_marks++;
}

/* Copies in[pos, end) and keeps the line count jansson will report. */
static void copy_to(struct scan *s, size_t end)
{
    for (size_t i = s->pos; i < end; i++) {
        if (s->in[i] == '\n') {
            s->line++;
            s->line_start = i + 1;
        }
    }
    emit(s, s->in + s->pos, end - s->pos);
    s->pos = end;
}

/* Column of in[i] counted in characters from 1, the way jansson counts (UTF-8 lead bytes). */
static int column_of(const struct scan *s, size_t i)
{
    int col = 0;
    for (size_t k = s->line_start; k <= i && k < s->len; k++) {
        if (((unsigned char)s->in[k] & 0xC0) != 0x80) {
            col++;
        }
    }
    return col;
}

/* True for -?(0|[1-9][0-9]*) whose value lies outside int64. */
static bool is_big_integer(const char *p, size_t n)
{
    size_t i = (n > 0 && p[0] == '-') ? 1 : 0;
    const size_t digits = n - i;
    if (digits == 0 || (p[i] == '0' && digits > 1)) {
        return false;
    }
    for (size_t k = i; k < n; k++) {
        if (!is_digit(p[k])) {
            return false;
        }
    }
    const char *limit = i == 1 ? "9223372036854775808" : "9223372036854775807";
    const size_t limit_len = 19;
    if (digits != limit_len) {
        return digits > limit_len;
    }
    return memcmp(p + i, limit, limit_len) > 0;
}

/* A string token starting at pos (the opening quote). Unterminated strings are copied as they
 * are; jansson reports them. */
static sm_status scan_string(struct scan *s, struct sm_err *err)
{
    size_t i = s->pos + 1;
    while (i < s->len && s->in[i] != '"') {
        if (s->in[i] == '\\') {
            if (i + 5 < s->len && s->in[i + 1] == 'u' && memcmp(s->in + i + 2, "0000", 4) == 0) {
                copy_to(s, i);
                SM_FAIL(err, SM_E_DATA,
                        "%smalformed JSON at line %d column %d: \\u0000 is not allowed in strings",
                        s->doc, s->line, column_of(s, i));
            }
            i += 2;
            continue;
        }
        i++;
    }
    copy_to(s, i < s->len ? i + 1 : s->len);
    return SM_OK;
}

/* A bare word (true, false, null, NaN, Infinity, or garbage), optionally after a '-'. */
static void scan_word(struct scan *s)
{
    size_t end = s->pos + (s->in[s->pos] == '-' ? 1 : 0);
    while (end < s->len && is_word_char(s->in[end])) {
        end++;
    }
    const char *w = s->in + s->pos;
    const size_t n = end - s->pos;
    if ((n == 3 && memcmp(w, "NaN", 3) == 0) || (n == 8 && memcmp(w, "Infinity", 8) == 0) ||
        (n == 9 && memcmp(w, "-Infinity", 9) == 0)) {
        emit(s, "\"", 1);
        emit(s, w, n);
        emit(s, "\"", 1);
        mark(s, 2);
        s->pos = end;
        return;
    }
    copy_to(s, end);
}

/* A number-like run of characters; integers outside int64 become big-integer strings. */
static void scan_number(struct scan *s)
{
    size_t end = s->pos;
    while (end < s->len && is_number_char(s->in[end])) {
        end++;
    }
    const char *w = s->in + s->pos;
    const size_t n = end - s->pos;
    if (is_big_integer(w, n)) {
        emit(s, BIGINT_OPEN, BIGINT_OPEN_LEN);
        emit(s, w, n);
        emit(s, "\"", 1);
        mark(s, BIGINT_OPEN_LEN + 1);
        s->pos = end;
        return;
    }
    copy_to(s, end);
}

static sm_status scan_all(struct scan *s, struct sm_err *err)
{
    while (s->pos < s->len) {
        const char c = s->in[s->pos];
        if (c == '"') {
            SM_TRY(scan_string(s, err));
        } else if (is_alpha(c) ||
                   (c == '-' && s->pos + 1 < s->len && is_alpha(s->in[s->pos + 1]))) {
            scan_word(s);
        } else if (c == '-' || is_digit(c)) {
            scan_number(s);
        } else {
            copy_to(s, s->pos + 1);
        }
    }
    return SM_OK;
}

static void scan_init(struct scan *s, const char *doc, const char *text, size_t len)
{
    memset(s, 0, sizeof(*s));
    s->doc = doc;
    s->in = text;
    s->len = len;
    s->line = 1;
}

/* Two passes: the first counts (so the output is reserved at its exact size), the second
 * writes the output and the marks used to map error columns back. */
static sm_status rewrite(const char *doc, const char *text, size_t len, char **out, size_t *out_len,
                         struct rewrite_mark **marks, size_t *n_marks, struct sm_err *err)
{
    struct scan s;
    *out = NULL;
    *out_len = len;
    *marks = NULL;
    *n_marks = 0;
    scan_init(&s, doc, text, len);
    SM_TRY(scan_all(&s, err));
    if (s.n_marks == 0) {
        return SM_OK;
    }
    const size_t total = s.out_len, count = s.n_marks;
    char *buf = sm_malloc(total > 0 ? total : 1);
    struct rewrite_mark *mk = sm_malloc(count * sizeof(*mk));
    if (buf == NULL || mk == NULL) {
        sm_free(buf);
        sm_free(mk);
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate %zu bytes to rewrite JSON", total);
    }
    scan_init(&s, doc, text, len);
    s.out = buf;
    s.marks = mk;
    SM_TRY(scan_all(&s, err)); /* cannot fail: the first pass accepted the same text */
    SM_ASSERT(s.out_len == total && s.n_marks == count);
    *out = buf;
    *out_len = total;
    *marks = mk;
    *n_marks = count;
    return SM_OK;
}

sm_status sm_fmt_json_rewrite(const char *text, size_t len, char **out, size_t *out_len,
                              struct sm_err *err)
{
    struct rewrite_mark *marks;
    size_t n_marks;
    SM_TRY(rewrite("", text, len, out, out_len, &marks, &n_marks, err));
    sm_free(marks);
    return SM_OK;
}

sm_status sm_fmt_json_load(const char *text, size_t len, const char *doc, json_t **out,
                           struct sm_err *err)
{
    *out = NULL;
    char *buf;
    size_t buf_len, n_marks;
    struct rewrite_mark *marks;
    SM_TRY(rewrite(doc, text, len, &buf, &buf_len, &marks, &n_marks, err));
    json_error_t je;
    json_t *root =
        json_loadb(buf != NULL ? buf : text, buf_len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (root == NULL) {
        int column = je.column;
        /* Inserted bytes are ASCII on the error's line: subtract those before the error. */
        for (size_t i = 0; i < n_marks; i++) {
            if (marks[i].line == je.line && je.position >= 0 &&
                marks[i].out_end <= (size_t)je.position) {
                column -= (int)marks[i].growth;
            }
        }
        sm_free(buf);
        sm_free(marks);
        if (json_error_code(&je) == json_error_out_of_memory) {
            SM_FAIL(err, SM_E_NOMEM, "%scannot allocate while parsing JSON", doc);
        }
        SM_FAIL(err, SM_E_DATA, "%smalformed JSON at line %d column %d: %s", doc, je.line,
                column < 0 ? 0 : column, je.text);
    }
    sm_free(buf);
    sm_free(marks);
    if (!json_is_object(root)) {
        json_decref(root);
        SM_FAIL(err, SM_E_DATA, "%smetadata document is not a JSON object", doc);
    }
    *out = root;
    return SM_OK;
}

sm_status sm_fmt_set(json_t *obj, const char *key, json_t *value, struct sm_err *err)
{
    /* json_object_set_new consumes value even when it fails. */
    if (value == NULL || json_object_set_new(obj, key, value) != 0) {
        SM_FAIL(err, SM_E_NOMEM, "cannot allocate JSON for '%s'", key);
    }
    return SM_OK;
}

bool sm_fmt_json_bigint(const json_t *v, const char **digits)
{
    if (!json_is_string(v) || json_string_length(v) < 2) {
        return false;
    }
    const char *s = json_string_value(v);
    if (s[0] != '\0') {
        return false;
    }
    *digits = s + 1;
    return true;
}

sm_status sm_fmt_json_restore(json_t *v, struct sm_err *err)
{
    if (json_is_object(v)) {
        const char *key;
        json_t *child;
        json_object_foreach(v, key, child)
        {
            const char *digits;
            if (sm_fmt_json_bigint(child, &digits)) {
                /* Replacing the value of an existing key keeps the iteration valid. */
                SM_TRY(sm_fmt_set(v, key, json_real(strtod(digits, NULL)), err));
            } else {
                SM_TRY(sm_fmt_json_restore(child, err));
            }
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            json_t *child = json_array_get(v, i);
            const char *digits;
            if (sm_fmt_json_bigint(child, &digits)) {
                if (json_array_set_new(v, i, json_real(strtod(digits, NULL))) != 0) {
                    SM_FAIL(err, SM_E_NOMEM, "cannot allocate JSON");
                }
            } else {
                SM_TRY(sm_fmt_json_restore(child, err));
            }
        }
    }
    return SM_OK;
}

sm_status sm_meta_parse_attrs(const char *json, size_t len, json_t **out, struct sm_err *err)
{
    SM_TRY(sm_fmt_json_load(json, len, "", out, err));
    const sm_status st = sm_fmt_json_restore(*out, err);
    if (st != SM_OK) {
        json_decref(*out);
        *out = NULL;
    }
    return st;
}
