/* Fuzz target: the s3 store's parse of S3 XML error bodies (sm_s3_parse_error in
 * engine/store/store_s3_sign.c), fed as store_http.c feeds it: the first bytes of an error
 * response's body (at most SM_HTTP_ERRBODY_MAX), not NUL-terminated, from a heap copy of exactly
 * that size (ASan catches a read past it). Invariants that must hold for any input abort() when
 * broken: both outputs are NUL-terminated inside their buffers and hold printable ASCII only;
 * without a Code element both are empty.
 * Input: [0] code buffer size - 1 (mod 64), [1] message buffer size - 1; the rest is the body. */
#include "shardmill/sm_config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "store_http_int.h" /* checksrc: allow int-header (SM_HTTP_ERRBODY_MAX) */
#include "store_s3_int.h"   /* checksrc: allow int-header (the pure parser it fuzzes) */
#include "fuzz_common.h"

static void check_text(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    CHECK(n < cap);
    for (size_t i = 0; i < n; i++) {
        CHECK((unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x7f);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) {
        return 0;
    }
    const size_t code_cap = (size_t)(data[0] % 64) + 1, msg_cap = (size_t)data[1] + 1;
    size_t n = size - 2;
    if (n > SM_HTTP_ERRBODY_MAX) {
        n = SM_HTTP_ERRBODY_MAX;
    }
    char *body = sm_malloc(n == 0 ? 1 : n);
    char *code = sm_malloc(code_cap);
    char *msg = sm_malloc(msg_cap);
    if (body != NULL && code != NULL && msg != NULL) {
        if (n > 0) {
            memcpy(body, data + 2, n);
        }
        const bool have = sm_s3_parse_error(body, n, code, code_cap, msg, msg_cap);
        check_text(code, code_cap);
        check_text(msg, msg_cap);
        if (!have) {
            CHECK(code[0] == '\0' && msg[0] == '\0');
        }
    }
    sm_free(body);
    sm_free(code);
    sm_free(msg);
    return 0;
}
