/* The store conformance suite (STYLE B11, after tensorstore's kvstore test_util and zarrs'
 * storage tests): the same cases run on every store driver through the public dispatch
 * (sm_store_get & co.), so file, mem and later HTTP/cache behave — and count — alike.
 *
 * A store joins by adding one sm_store_suite_target entry to the table in
 * tests/unit/store/test_store.c. Cases that need a capability the target lacks are skipped. */
#ifndef SM_TESTS_SUITES_STORE_SUITE_H
#define SM_TESTS_SUITES_STORE_SUITE_H

#include <stddef.h>

#include "shardmill/store.h"

struct sm_store_suite_target {
    const char *name; /* group name suffix: "store_suite.<name>" */
    unsigned caps;    /* SM_STORE_* bits the driver must advertise (checked by the suite) */
    /* Creates a fresh, empty store for one case; *ctx is handed back to seed and destroy. */
    sm_status (*create)(struct sm_store **out, void **ctx, struct sm_err *err);
    /* Writes an object behind the store's back, for stores without SM_STORE_WRITE (e.g. a file
     * tree served by nginx); 0 on success. NULL: objects are written with sm_store_put_atomic. */
    int (*seed)(void *ctx, const char *key, const void *data, size_t len);
    /* Closes the store and removes everything create made. */
    void (*destroy)(struct sm_store *s, void *ctx);
};

/* Runs every case on `t` as one cmocka group; returns the number of failed cases. */
int sm_store_suite_run(const struct sm_store_suite_target *t);

#endif
