/* Fuzz target: sm_url_redact (engine/core/core_url.c), which rewrites any text holding URLs --
 * among them a redirect's Location header, straight from a server. Input: [0] the buffer size
 * - 16 (mod 256); the rest, NUL-terminated, is the text. Invariants that must hold for any input
 * abort() when broken: the result is the input itself or the buffer, NUL-terminated inside it;
 * the input is returned only if unchanged; and redacting is idempotent (what is left holds no
 * secret the function would still find) unless the result was cut at the buffer's end. */
#include "shardmill/sm_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "shardmill/url.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 8192) {
        return 0;
    }
    const size_t cap = (size_t)data[0] + 16;
    char *text = sm_malloc(size);
    char *buf = sm_malloc(cap);
    char *again = sm_malloc(cap);
    if (text != NULL && buf != NULL && again != NULL) {
        memcpy(text, data + 1, size - 1);
        text[size - 1] = '\0';
        const char *r = sm_url_redact(text, buf, cap);
        CHECK(r == text || r == buf);
        const size_t n = strnlen(r, r == buf ? cap : size);
        CHECK(r == text ? n < size : n < cap);
        if (r == buf && n + 1 < cap) { /* not cut: a second pass finds nothing new */
            const char *r2 = sm_url_redact(buf, again, cap);
            CHECK(strcmp(r2, buf) == 0);
        }
    }
    sm_free(text);
    sm_free(buf);
    sm_free(again);
    return 0;
}
