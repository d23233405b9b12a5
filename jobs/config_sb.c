/* A growing string buffer for configuration text (config_schema.h): printf onto it, a JSON-style
 * quoted string, the result handed over. A leaf: the schema's text builders (config_format.c,
 * config_tables.c, config_doc.c) all write through it. */
#include <shardmill/sm_config.h>

#include "config_schema.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shardmill/alloc.h>

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
