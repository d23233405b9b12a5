/* Configuration values as text (SPEC §4, STYLE B10): the value of a schema row as YAML (sizes in
 * the largest exact binary unit, or in bytes for the canonical text the provenance hashes; strings
 * quoted JSON-style, a URL's credentials redacted, unset values `null`), the effective
 * configuration as a YAML document (`shardmill validate`, loading back to the same values), the
 * range of a numeric row ("1 to 1024TiB") and what a key's value must look like. */
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

const char *sm_cfg_expected(const struct sm_cfg_key *k, char *buf, size_t cap)
{
    switch (k->type) {
    case SM_CFG_BOOL:
        return "true or false";
    case SM_CFG_UINT:
        if ((k->flags & SM_CFGF_AUTO) != 0) {
            snprintf(buf, cap, "'auto' or an integer >= %" PRId64, k->min);
            return buf;
        }
        return "a non-negative integer";
    case SM_CFG_INT:
        return "an integer";
    case SM_CFG_FLOAT:
        return "a finite number";
    case SM_CFG_SIZE:
        return "a size like 256MiB";
    case SM_CFG_STRING:
        return "a string";
    case SM_CFG_ENUM:
    case SM_CFG_NAME: {
        size_t n = (size_t)snprintf(buf, cap, "one of ");
        for (const char *c = sm_cfg_choices(k); *c != '\0' && n + 3 < cap; c++) {
            if (*c == '|') {
                buf[n++] = ',';
                buf[n++] = ' ';
            } else {
                buf[n++] = *c;
            }
        }
        buf[n] = '\0';
        return buf;
    }
    case SM_CFG_DIMS:
        if ((k->flags & SM_CFGF_AUTO) != 0) {
            return "`auto` or a list of positive integers like [64, 64, 64]";
        }
        return (k->flags & SM_CFGF_POSITIVE) != 0
                   ? "a list of positive integers like [64, 64, 64]"
                   : "a list of non-negative integers like [0, 0, 0]";
    case SM_CFG_RANGE:
        return "a pair [lo, hi] of finite numbers";
    case SM_CFG_FLOATS:
        return (k->flags & SM_CFGF_POSITIVE) != 0 ? "a list of positive numbers like [1.5, 1, 1]"
                                                  : "a list of finite numbers like [0, 0, 0]";
    }
    return "?";
}
