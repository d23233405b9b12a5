/* Configuration values as text (SPEC §4, STYLE B10): a growing string buffer, the value of a
 * schema row as YAML (sizes in the largest exact binary unit, or in bytes for the canonical text
 * the provenance hashes; strings quoted JSON-style, a URL's credentials redacted, unset values
 * `null`), the effective configuration as a YAML document (`shardmill validate`, loading back to
 * the same values) and the range of a numeric row ("1 to 1024TiB"). */
#include <shardmill/sm_config.h>

#include "config_schema.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shardmill/alloc.h>
#include <shardmill/url.h>

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define TIB (UINT64_C(1) << 40)

/* ---- string building ---- */

void sm_cfg_sb_printf(struct sm_cfg_sb *sb, const char *fmt, ...)
{
    if (sb->oom) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        sb->oom = true;
        return;
    }
    size_t need = sb->len + (size_t)n + 1;
    if (need > sb->cap) {
        size_t cap = sb->cap == 0 ? 256 : sb->cap;
        while (cap < need) {
            cap *= 2;
        }
        char *p = sm_realloc(sb->p, cap);
        if (p == NULL) {
            sb->oom = true;
            return;
        }
        sb->p = p;
        sb->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(sb->p + sb->len, sb->cap - sb->len, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

void sm_cfg_sb_quote(struct sm_cfg_sb *sb, const char *s)
{
    sm_cfg_sb_printf(sb, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++) {
        switch (*c) {
        case '"':
            sm_cfg_sb_printf(sb, "\\\"");
            break;
        case '\\':
            sm_cfg_sb_printf(sb, "\\\\");
            break;
        case '\n':
            sm_cfg_sb_printf(sb, "\\n");
            break;
        case '\t':
            sm_cfg_sb_printf(sb, "\\t");
            break;
        case '\r':
            sm_cfg_sb_printf(sb, "\\r");
            break;
        default:
            if (*c < 0x20 || *c == 0x7f) {
                sm_cfg_sb_printf(sb, "\\u%04x", (unsigned)*c);
            } else {
                sm_cfg_sb_printf(sb, "%c", (char)*c);
            }
        }
    }
    sm_cfg_sb_printf(sb, "\"");
}

char *sm_cfg_sb_finish(struct sm_cfg_sb *sb)
{
    if (sb->oom || sb->p == NULL) {
        sm_free(sb->p);
        return NULL;
    }
    return sb->p;
}

/* ---- values ---- */

static uint64_t get_uint(const struct sm_job_config *c, const struct sm_cfg_key *k)
{
    const char *p = (const char *)c + k->off;
    if (k->size == sizeof(uint32_t)) {
        uint32_t v;
        memcpy(&v, p, sizeof(v));
        return v;
    }
    uint64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static int64_t get_int(const struct sm_job_config *c, const struct sm_cfg_key *k)
{
    const char *p = (const char *)c + k->off;
    if (k->size == sizeof(int32_t)) {
        int32_t v;
        memcpy(&v, p, sizeof(v));
        return v;
    }
    int64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* The enum-th name of "a|b|c" into buf. */
static const char *choice_name(const char *choices, int index, char *buf, size_t cap)
{
    const char *s = choices;
    for (int i = 0; i < index && s != NULL; i++) {
        s = strchr(s, '|');
        if (s != NULL) {
            s++;
        }
    }
    if (s == NULL) {
        return "?";
    }
    const char *e = strchr(s, '|');
    size_t n = e != NULL ? (size_t)(e - s) : strlen(s);
    snprintf(buf, cap, "%.*s", (int)n, s);
    return buf;
}

static void format_double(struct sm_cfg_sb *sb, double v)
{
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, v);
        if (strtod(buf, NULL) == v) {
            break;
        }
    }
    sm_cfg_sb_printf(sb, "%s", buf);
}

static void format_size(struct sm_cfg_sb *sb, uint64_t v, bool canonical)
{
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {{"TiB", TIB}, {"GiB", GIB}, {"MiB", MIB}, {"KiB", KIB}};
    if (!canonical && v != 0) {
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
            if (v % units[i].mult == 0) {
                sm_cfg_sb_printf(sb, "%" PRIu64 "%s", v / units[i].mult, units[i].unit);
                return;
            }
        }
    }
    sm_cfg_sb_printf(sb, "%" PRIu64, v);
}

void sm_cfg_format_value(struct sm_cfg_sb *sb, const struct sm_cfg_key *k,
                         const struct sm_job_config *c, bool canonical)
{
    const char *p = (const char *)c + k->off;
    switch (k->type) {
    case SM_CFG_BOOL: {
        bool v;
        memcpy(&v, p, sizeof(v));
        sm_cfg_sb_printf(sb, "%s", v ? "true" : "false");
        return;
    }
    case SM_CFG_UINT:
        if ((k->flags & SM_CFGF_AUTO) != 0 && get_uint(c, k) == 0) {
            sm_cfg_sb_printf(sb, "auto");
            return;
        }
        sm_cfg_sb_printf(sb, "%" PRIu64, get_uint(c, k));
        return;
    case SM_CFG_INT:
        sm_cfg_sb_printf(sb, "%" PRId64, get_int(c, k));
        return;
    case SM_CFG_SIZE:
        format_size(sb, get_uint(c, k), canonical);
        return;
    case SM_CFG_FLOAT: {
        double v;
        memcpy(&v, p, sizeof(v));
        format_double(sb, v);
        return;
    }
    case SM_CFG_STRING:
    case SM_CFG_NAME: {
        const char *s;
        memcpy(&s, p, sizeof(s));
        if (s == NULL) {
            sm_cfg_sb_printf(sb, "null");
        } else if (k->type == SM_CFG_NAME) {
            sm_cfg_sb_printf(sb, "%s", s);
        } else if (canonical) {
            sm_cfg_sb_quote(sb, s); /* the text hashed for provenance, never printed */
        } else {
            char shown[SM_URL_REDACT_MAX]; /* `validate` prints no credentials of a URL */
            sm_cfg_sb_quote(sb, sm_url_redact(s, shown, sizeof(shown)));
        }
        return;
    }
    case SM_CFG_ENUM: {
        int v;
        char buf[64];
        memcpy(&v, p, sizeof(v));
        sm_cfg_sb_printf(sb, "%s", choice_name(sm_cfg_choices(k), v, buf, sizeof(buf)));
        return;
    }
    case SM_CFG_DIMS: {
        const struct sm_cfg_dims *d = (const struct sm_cfg_dims *)(const void *)p;
        if (!d->set) {
            sm_cfg_sb_printf(sb, "null");
            return;
        }
        if (d->is_auto) {
            sm_cfg_sb_printf(sb, "auto");
            return;
        }
        sm_cfg_sb_printf(sb, "[");
        for (unsigned i = 0; i < d->n; i++) {
            sm_cfg_sb_printf(sb, "%s%" PRIu64, i == 0 ? "" : ", ", d->v[i]);
        }
        sm_cfg_sb_printf(sb, "]");
        return;
    }
    case SM_CFG_FLOATS: {
        const struct sm_cfg_floats *f = (const struct sm_cfg_floats *)(const void *)p;
        if (!f->set) {
            sm_cfg_sb_printf(sb, "null");
            return;
        }
        sm_cfg_sb_printf(sb, "[");
        for (unsigned i = 0; i < f->n; i++) {
            sm_cfg_sb_printf(sb, "%s", i == 0 ? "" : ", ");
            format_double(sb, f->v[i]);
        }
        sm_cfg_sb_printf(sb, "]");
        return;
    }
    case SM_CFG_RANGE: {
        bool set;
        double lo, hi;
        memcpy(&set, (const char *)c + k->off_set, sizeof(set));
        if (!set) {
            sm_cfg_sb_printf(sb, "null");
            return;
        }
        memcpy(&lo, p, sizeof(lo));
        memcpy(&hi, (const char *)c + k->off2, sizeof(hi));
        sm_cfg_sb_printf(sb, "[");
        format_double(sb, lo);
        sm_cfg_sb_printf(sb, ", ");
        format_double(sb, hi);
        sm_cfg_sb_printf(sb, "]");
        return;
    }
    }
}

/* ---- the effective configuration as YAML ---- */

/* Splits a dotted path into at most `max` components (start, length). Returns the count. */
static unsigned split_path(const char *path, const char **part, size_t *len, unsigned max)
{
    unsigned n = 0;
    const char *s = path;
    while (n < max) {
        const char *dot = strchr(s, '.');
        part[n] = s;
        len[n] = dot != NULL ? (size_t)(dot - s) : strlen(s);
        n++;
        if (dot == NULL) {
            break;
        }
        s = dot + 1;
    }
    return n;
}

char *sm_config_format_yaml(const struct sm_job_config *c)
{
    enum { MAXPARTS = 8 };
    struct sm_cfg_sb sb = {NULL, 0, 0, false};
    const char *prev[MAXPARTS];
    size_t prev_len[MAXPARTS];
    unsigned nprev = 0;
    for (unsigned i = 0; i < sm_cfg_nkeys; i++) {
        const struct sm_cfg_key *k = &sm_cfg_keys[i];
        if (!sm_cfg_used(k, c)) {
            continue; /* the job would refuse it when the view is loaded back */
        }
        const char *part[MAXPARTS];
        size_t len[MAXPARTS];
        unsigned n = split_path(k->path, part, len, MAXPARTS);
        /* Groups shared with the previous key are open already (the rows of a group are
         * contiguous); open the rest. */
        unsigned common = 0;
        while (common + 1 < n && common + 1 < nprev && len[common] == prev_len[common] &&
               memcmp(part[common], prev[common], len[common]) == 0) {
            common++;
        }
        for (unsigned g = common; g + 1 < n; g++) {
            sm_cfg_sb_printf(&sb, "%*s%.*s:\n", (int)(2 * g), "", (int)len[g], part[g]);
        }
        sm_cfg_sb_printf(&sb, "%*s%.*s: ", (int)(2 * (n - 1)), "", (int)len[n - 1], part[n - 1]);
        sm_cfg_format_value(&sb, k, c, false);
        sm_cfg_sb_printf(&sb, "\n");
        for (unsigned g = 0; g < n; g++) {
            prev[g] = part[g];
            prev_len[g] = len[g];
        }
        nprev = n;
    }
    return sm_cfg_sb_finish(&sb);
}

/* ---- ranges ---- */

static void format_bound(struct sm_cfg_sb *sb, const struct sm_cfg_key *k, uint64_t v,
                         bool negative)
{
    if (negative) {
        sm_cfg_sb_printf(sb, "-%" PRIu64, v);
    } else if (k->type == SM_CFG_SIZE) {
        format_size(sb, v, false);
    } else {
        sm_cfg_sb_printf(sb, "%" PRIu64, v);
    }
}

void sm_cfg_format_range(struct sm_cfg_sb *sb, const struct sm_cfg_key *k)
{
    format_bound(sb, k, k->min < 0 ? (uint64_t)(-(k->min + 1)) + 1 : (uint64_t)k->min, k->min < 0);
    sm_cfg_sb_printf(sb, " to ");
    format_bound(sb, k, k->max, false);
}
