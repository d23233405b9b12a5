/* Exact unsigned 64-bit numbers in printed JSON (see meta.h): jansson stores int64 only, so values
 * above INT64_MAX travel as a marked string and are unmarked in the dumped text. */
#include "shardmill/meta.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define MARK "\001u64:"
#define MARK_DUMPED "\"\\u0001u64:" /* how json_dumps escapes the mark, with the opening quote */

json_t *sm_json_u64(uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX) {
        return json_integer((json_int_t)v);
    }
    char text[40];
    snprintf(text, sizeof(text), MARK "%" PRIu64, v);
    return json_string(text);
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
            while (*r >= '0' && *r <= '9') {
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
