/* Store registry: URL scheme -> driver constructor, a NULL-terminated table (STYLE B7). A plain
 * path is a file store; `file://` URLs are stripped to their path. */
#include "shardmill/store.h"

#include <string.h>

typedef sm_status (*sm_store_open_fn)(const char *url, const struct sm_http_opts *http,
                                      struct sm_store **out, struct sm_err *err);

static sm_status open_file_url(const char *url, const struct sm_http_opts *http,
                               struct sm_store **out, struct sm_err *err)
{
    (void)http;
    return sm_store_file_open(url + strlen("file://"), out, err);
}

static const struct {
    const char *prefix; /* matched case-sensitively at the start of the URL */
    sm_store_open_fn open;
} registry[] = {
    {"file://", open_file_url},
    {"http://", sm_store_http_open},
    {"https://", sm_store_http_open},
    {"s3://", sm_store_s3_open},
    {NULL, NULL},
};

sm_status sm_store_open(const char *url, struct sm_store **out, struct sm_err *err)
{
    const struct sm_http_opts http = SM_HTTP_OPTS_DEFAULTS;
    return sm_store_open_with(url, &http, out, err);
}

sm_status sm_store_open_with(const char *url, const struct sm_http_opts *http,
                             struct sm_store **out, struct sm_err *err)
{
    *out = NULL;
    for (size_t i = 0; registry[i].prefix != NULL; i++) {
        size_t n = strlen(registry[i].prefix);
        if (strncmp(url, registry[i].prefix, n) == 0) {
            return registry[i].open(url, http, out, err);
        }
    }
    const char *colon = strstr(url, "://");
    if (colon != NULL) {
        SM_FAIL_AT(err, SM_E_USAGE, url, "unsupported store scheme '%.*s'", (int)(colon - url),
                   url);
    }
    if (url[0] == '\0') {
        SM_FAIL(err, SM_E_USAGE, "empty store path");
    }
    return sm_store_file_open(url, out, err);
}
