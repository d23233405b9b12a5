/* Fuzz target: the reader of AWS's credentials and config files (sm_job_aws_ini_get in
 * jobs/job_s3.c): INI text from a heap copy of exactly its size, not NUL-terminated (ASan catches
 * a read past it), looked up for a section and key taken from the input. Invariants that must hold
 * for any input abort() when broken: a found value is NUL-terminated inside the buffer, holds no
 * newline and no leading or trailing blank; a found value implies its section exists.
 * Input: [0] value buffer size - 1 (mod 64); then "section\0key\0" (each at most 64 bytes, else
 * "default" / "aws_access_key_id"); the rest is the file. */
#include <shardmill/sm_config.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <shardmill/alloc.h>

#include "job_s3.h"
#include "fuzz_common.h"

/* The NUL-terminated string at data[*at] of at most 64 bytes, or NULL (then *at is unchanged). */
static const char *take(const uint8_t *data, size_t size, size_t *at)
{
    const uint8_t *z = memchr(data + *at, 0, size - *at < 65 ? size - *at : 65);
    if (z == NULL) {
        return NULL;
    }
    const char *s = (const char *)data + *at;
    *at = (size_t)(z - data) + 1;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    const size_t cap = (size_t)(data[0] % 64) + 1;
    size_t at = 1;
    const char *section = take(data, size, &at);
    const char *key = section != NULL ? take(data, size, &at) : NULL;
    if (section == NULL || key == NULL) {
        section = "default";
        key = "aws_access_key_id";
        at = 1;
    }
    const size_t n = size - at;
    char *text = sm_malloc(n == 0 ? 1 : n);
    char *out = sm_malloc(cap);
    if (text != NULL && out != NULL) {
        if (n > 0) {
            memcpy(text, data + at, n);
        }
        bool have = false;
        if (sm_job_aws_ini_get(text, n, section, key, out, cap, &have)) {
            const size_t len = strnlen(out, cap);
            CHECK(len < cap);
            CHECK(have);
            CHECK(memchr(out, '\n', len) == NULL);
            CHECK(len == 0 || (out[0] != ' ' && out[0] != '\t' && out[len - 1] != ' ' &&
                               out[len - 1] != '\t' && out[len - 1] != '\r'));
        }
    }
    sm_free(text);
    sm_free(out);
    return 0;
}
