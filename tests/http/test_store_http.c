/* The store conformance suite (tests/suites/store_suite.c, STYLE B11) on the HTTP driver through
 * a real nginx, and on the encoded-object cache stacked on it. Each case gets a fresh directory
 * under the served root; objects are seeded as files behind the store's back (HTTP is read-only).
 *
 * The server comes from the environment (ctest starts nginx as a FIXTURES_SETUP):
 *   SM_TEST_HTTP_ROOT       the directory nginx serves (required)
 *   SM_TEST_HTTP_URL        http://127.0.0.1:PORT serving it, or
 *   SM_TEST_HTTP_PORT_FILE  a file holding PORT (written by shardmill_test/nginx_server.py)
 * Without them the program prints why and exits 77 (ctest SKIP_RETURN_CODE). */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/alloc.h"
#include "shardmill/store.h"
#include "sm_test.h"

#include "../suites/store_suite.c"

static char http_root[1024];
static char http_url[1024];

struct http_target {
    char dir[1200]; /* the case's directory under http_root */
};

static sm_status http_create_with(struct sm_store **out, void **ctx, bool cached,
                                  struct sm_err *err)
{
    struct http_target *t = test_calloc(1, sizeof(*t));
    int n = snprintf(t->dir, sizeof(t->dir), "%s/case-XXXXXX", http_root);
    if (n < 0 || (size_t)n >= sizeof(t->dir) || mkdtemp(t->dir) == NULL) {
        test_free(t);
        SM_FAIL(err, SM_E_IO, "mkdtemp under %s failed", http_root);
    }
    chmod(t->dir, 0755);
    char url[2400];
    snprintf(url, sizeof(url), "%s/%s", http_url, strrchr(t->dir, '/') + 1);
    *ctx = t;
    struct sm_store *s = NULL;
    sm_status st = sm_store_open(url, &s, err);
    if (st == SM_OK && cached) {
        st = sm_store_cache_new(s, 1u << 20, out, err);
        return st;
    }
    *out = s;
    return st;
}

static sm_status http_create(struct sm_store **out, void **ctx, struct sm_err *err)
{
    return http_create_with(out, ctx, false, err);
}

static sm_status http_cache_create(struct sm_store **out, void **ctx, struct sm_err *err)
{
    return http_create_with(out, ctx, true, err);
}

static int http_seed(void *ctx, const char *key, const void *data, size_t len)
{
    struct http_target *t = ctx;
    char path[2400], tmp[2500];
    snprintf(path, sizeof(path), "%s/%s", t->dir, key);
    snprintf(tmp, sizeof(tmp), "%s.seed-tmp", path);
    if (sm_test_write_file(tmp, data, len) != 0) {
        return -1;
    }
    return rename(tmp, path);
}

static void http_destroy(struct sm_store *s, void *ctx)
{
    struct http_target *t = ctx;
    sm_store_close(s);
    sm_test_rm_rf(t->dir);
    test_free(t);
}

static const struct sm_store_suite_target targets[] = {
    {"http", SM_STORE_RANGE | SM_STORE_THREADSAFE | SM_STORE_SELF_COUNTED, http_create, http_seed,
     http_destroy},
    {"http_cache", SM_STORE_RANGE | SM_STORE_THREADSAFE, http_cache_create, http_seed,
     http_destroy},
    {NULL, 0, NULL, NULL, NULL},
};

static int read_env(void)
{
    const char *root = getenv("SM_TEST_HTTP_ROOT");
    const char *url = getenv("SM_TEST_HTTP_URL");
    const char *port_file = getenv("SM_TEST_HTTP_PORT_FILE");
    if (root == NULL || root[0] == '\0') {
        fprintf(stderr, "SM_TEST_HTTP_ROOT is not set: skipped\n");
        return -1;
    }
    snprintf(http_root, sizeof(http_root), "%s", root);
    if (url != NULL && url[0] != '\0') {
        snprintf(http_url, sizeof(http_url), "%s", url);
        return 0;
    }
    if (port_file == NULL || port_file[0] == '\0') {
        fprintf(stderr, "neither SM_TEST_HTTP_URL nor SM_TEST_HTTP_PORT_FILE is set: skipped\n");
        return -1;
    }
    FILE *f = fopen(port_file, "r");
    unsigned port = 0;
    if (f == NULL || fscanf(f, "%u", &port) != 1 || port == 0 || port > 65535) {
        fprintf(stderr, "cannot read a port from %s (is the nginx fixture running?)\n", port_file);
        if (f != NULL) {
            fclose(f);
        }
        return -1;
    }
    fclose(f);
    snprintf(http_url, sizeof(http_url), "http://127.0.0.1:%u", port);
    return 0;
}

int main(int argc, char **argv)
{
    if (read_env() != 0) {
        return 77;
    }
    fprintf(stderr, "store suite over %s (root %s)\n", http_url, http_root);
    int failed = 0;
    for (size_t i = 0; targets[i].name != NULL; i++) {
        if (argc > 1 && strcmp(argv[1], targets[i].name) != 0) {
            continue;
        }
        failed += sm_store_suite_run(&targets[i]);
    }
    return failed == 0 ? 0 : 1;
}
