/* Fuzz target: the HTTP store's response handling (engine/store/store_http_parse.c), driven the
 * way store_http.c's curl callbacks drive it: header lines (not NUL-terminated, each passed with
 * its exact length in a buffer of exactly that size, so ASan catches a parser reading past it)
 * into sm_http_header_line; then the body, in pieces, through sm_http_body_plan and
 * sm_http_body_step into a buffer sized as the store sizes it; then the 206 check
 * (sm_http_check_partial) or, for a 200, the slice of the whole object (sm_http_slice), copied
 * out. Invariants that must hold for any input abort() when broken.
 * Input:
 *   [0]      bits 0-1: range kind (0 all, 1 span, 2 suffix, 3 span at a large offset);
 *            bit 2: a byte limit (max_object_bytes) from [5..7], else none (bodies are bounded by
 *            the input anyway); bits 3-7: body piece size - 1 (the size curl hands over)
 *   [1..2]   range offset (little-endian)   [3..4] range length   [5..7] limit
 *   then the header block up to the first empty line ("\r\n\r\n" or "\n\n"), split after each
 *   '\n'; the rest is the body. The status is the one the last status line gives (as curl's
 *   CURLINFO_RESPONSE_CODE). */
#include "shardmill/sm_config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shardmill/alloc.h"
#include "store_http_int.h" /* checksrc: allow int-header (the pure parsers it fuzzes) */
#include "fuzz_common.h"

/* Feeds one header line from a heap copy of exactly n bytes (reads past it are caught). */
static void feed_line(struct sm_http_resp *r, const uint8_t *p, size_t n)
{
    char *copy = sm_malloc(n == 0 ? 1 : n);
    if (copy == NULL) {
        return;
    }
    if (n > 0) {
        memcpy(copy, p, n);
    }
    sm_http_header_line(r, copy, n);
    sm_free(copy);
}

static size_t header_end(const uint8_t *p, size_t n, size_t *body)
{
    for (size_t i = 0; i + 1 < n; i++) {
        if (p[i] == '\n' && p[i + 1] == '\n') {
            *body = i + 2;
            return i + 1;
        }
        if (i + 3 < n && memcmp(p + i, "\r\n\r\n", 4) == 0) {
            *body = i + 4;
            return i + 2;
        }
    }
    *body = n;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8) {
        return 0;
    }
    const unsigned kind = data[0] & 3u;
    const bool with_limit = (data[0] & 4u) != 0;
    const size_t piece = (size_t)(data[0] >> 3) + 1;
    uint64_t off = (uint64_t)data[1] | (uint64_t)data[2] << 8;
    const uint64_t len = (uint64_t)data[3] | (uint64_t)data[4] << 8;
    const uint64_t limit =
        with_limit ? ((uint64_t)data[5] | (uint64_t)data[6] << 8 | (uint64_t)data[7] << 16) : 0;
    struct sm_range asked;
    switch (kind) {
    case 0:
        asked = sm_range_all();
        break;
    case 1:
        asked = sm_range_span(off, len);
        break;
    case 2:
        asked = sm_range_suffix(len);
        break;
    default:
        off = UINT64_MAX - off; /* near the top: sums must not wrap */
        asked = sm_range_span(off, len);
        break;
    }
    const bool ranged = asked.kind != SM_RANGE_ALL;
    data += 8;
    size -= 8;

    /* headers */
    struct sm_http_resp resp;
    sm_http_resp_reset(&resp);
    size_t body_at;
    const size_t hdr_len = header_end(data, size, &body_at);
    for (size_t i = 0; i < hdr_len;) {
        size_t j = i;
        while (j < hdr_len && data[j] != '\n') {
            j++;
        }
        if (j < hdr_len) {
            j++; /* the line keeps its '\n', as curl passes it */
        }
        feed_line(&resp, data + i, j - i);
        i = j;
    }
    CHECK(!resp.have_crange || resp.cr_first <= resp.cr_last);
    CHECK(!resp.have_crange || !resp.cr_total_known || resp.cr_last < resp.cr_total);
    CHECK(resp.retry_after_s >= -1 && resp.retry_after_s <= 3600);
    CHECK(memchr(resp.location, '\0', sizeof(resp.location)) != NULL);
    CHECK(resp.status >= 0 && resp.status <= 999);

    /* body, as on_body sees it */
    const uint8_t *body = data + body_at;
    const size_t body_len = size - body_at;
    struct sm_http_body plan;
    sm_http_body_plan(resp.status, &resp, ranged, asked.len, &plan);
    if (!plan.keep) {
        return 0; /* an error page: dropped */
    }
    CHECK(!(resp.status == 206 && ranged) || (plan.have_expect && plan.expect == asked.len));
    uint8_t *buf = NULL;
    uint64_t have = 0, cap = 0;
    bool aborted = false;
    if (plan.have_expect && plan.expect > 0) {
        if ((limit != 0 && plan.expect > limit) || plan.expect > (64u << 20)) {
            return 0; /* the store refuses it (SM_E_LIMIT) before allocating */
        }
        buf = sm_malloc((size_t)plan.expect);
        if (buf == NULL) {
            return 0;
        }
        cap = plan.expect;
    }
    for (size_t i = 0; i < body_len && !aborted; i += piece) {
        const size_t n = body_len - i < piece ? body_len - i : piece;
        uint64_t grow_to = 0;
        switch (sm_http_body_step(&plan, limit, have, cap, n, &grow_to)) {
        case SM_HTTP_APPEND:
            CHECK(have + n <= cap);
            break;
        case SM_HTTP_GROW: {
            CHECK(grow_to >= have + n);
            CHECK(limit == 0 || grow_to <= limit);
            CHECK(!plan.have_expect || grow_to == plan.expect);
            if (grow_to > (64u << 20)) {
                aborted = true;
                continue;
            }
            uint8_t *p = sm_realloc(buf, (size_t)grow_to);
            if (p == NULL) {
                aborted = true;
                continue;
            }
            buf = p;
            cap = grow_to;
            break;
        }
        case SM_HTTP_OVERFLOW:
            CHECK(plan.have_expect && have + n > plan.expect);
            aborted = true;
            continue;
        case SM_HTTP_LIMIT:
            CHECK(limit != 0 || n > UINT64_MAX - have);
            aborted = true;
            continue;
        }
        memcpy(buf + have, body + i, n);
        have += n;
    }
    CHECK(!plan.have_expect || have <= plan.expect);

    /* judge: a complete body only (a truncated one is retried, never decoded) */
    if (!aborted && !(resp.have_clen && have != resp.clen)) {
        if (resp.status == 206 && ranged) {
            uint64_t objsize = UINT64_MAX;
            if (sm_http_check_partial(asked, &resp, have, &objsize) == SM_HTTP_PARTIAL_OK) {
                CHECK(have <= asked.len);
                CHECK(have == resp.cr_last - resp.cr_first + 1);
                CHECK(asked.kind != SM_RANGE_SPAN || resp.cr_first == asked.offset);
                CHECK(objsize == UINT64_MAX || (resp.cr_total_known && objsize == resp.cr_total));
                CHECK(!resp.cr_total_known ||
                      (asked.kind == SM_RANGE_SUFFIX ? resp.cr_last + 1 == resp.cr_total
                                                     : resp.cr_last < resp.cr_total));
            }
        } else if (resp.status == 200 || resp.status == 206) {
            uint64_t o, n;
            sm_http_slice(asked, have, &o, &n);
            CHECK(o <= have && n <= have - o);
            CHECK(!ranged || n <= asked.len);
            if (n > 0) {
                uint8_t *out = sm_malloc((size_t)n);
                if (out != NULL) {
                    memcpy(out, buf + o, (size_t)n);
                    CHECK(memcmp(out, body + o, (size_t)n) == 0);
                    sm_free(out);
                }
            }
        }
    }
    sm_free(buf);
    return 0;
}
