/* The store conformance suite (see store_suite.h): range semantics (ALL / SPAN / SUFFIX), absence
 * as "not found", the errors of SPEC §3/§5 (past-end ranges name the key, ".." keys are usage
 * errors, max_object_bytes is a limit checked before allocating), writes, listing, sizes,
 * get_many, staged writes (stage / commit / abort / sync, by capability), per-class request/byte
 * counters, and concurrent use for THREADSAFE stores.
 *
 * tests/CMakeLists.txt builds one .c per unit test, so this file is #included by
 * tests/unit/store/test_store.c rather than linked. Include <cmocka.h> and sm_test.h first. */
#include "store_suite.h"

#include <pthread.h>
#include <string.h>

#include "shardmill/alloc.h"

struct suite_fixture {
    const struct sm_store_suite_target *t;
    struct sm_store *s;
    void *ctx;
    struct sm_err err;
};

static int suite_setup(void **state)
{
    const struct sm_store_suite_target *t = *state;
    struct suite_fixture *f = test_calloc(1, sizeof(*f));
    f->t = t;
    sm_err_clear(&f->err);
    if (t->create(&f->s, &f->ctx, &f->err) != SM_OK) {
        print_error("cannot create a %s store: %s: %s\n", t->name, f->err.where, f->err.what);
        test_free(f);
        return -1;
    }
    sm_err_clear(&f->err);
    *state = f;
    return 0;
}

static int suite_teardown(void **state)
{
    struct suite_fixture *f = *state;
    sm_alloc_fail_at(0);
    f->t->destroy(f->s, f->ctx);
    test_free(f);
    return 0;
}

static bool can(const struct suite_fixture *f, unsigned caps)
{
    return (f->s->ops->caps & caps) == caps;
}

/* Writes an object through the target's seeding path. */
static void seed(struct suite_fixture *f, const char *key, const void *data, size_t len)
{
    if (f->t->seed != NULL) {
        assert_int_equal(f->t->seed(f->ctx, key, data, len), 0);
        return;
    }
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_store_put_atomic(f->s, key, sm_bytes_of(data, len), &err), &err);
}

/* Stores need to be writable one way or the other for the data cases. */
static void need_data(const struct suite_fixture *f)
{
    if (f->t->seed == NULL && !can(f, SM_STORE_WRITE)) {
        skip();
    }
}

/* Object content: byte i of object `tag` (so misplaced ranges show up). */
static uint8_t pattern(unsigned tag, size_t i)
{
    return (uint8_t)(tag * 37u + i * 13u + (i >> 8));
}

static void seed_pattern(struct suite_fixture *f, const char *key, unsigned tag, size_t len)
{
    uint8_t *data = test_malloc(len == 0 ? 1 : len);
    for (size_t i = 0; i < len; i++) {
        data[i] = pattern(tag, i);
    }
    seed(f, key, data, len);
    test_free(data);
}

static void assert_pattern(const struct sm_buf *b, unsigned tag, size_t off, size_t len)
{
    assert_int_equal(b->len, len);
    for (size_t i = 0; i < len; i++) {
        if (b->ptr[i] != pattern(tag, off + i)) {
            fail_msg("byte %zu of the range at %zu: got %u, want %u", i, off, b->ptr[i],
                     pattern(tag, off + i));
        }
    }
}

static void get_ok(struct suite_fixture *f, const char *key, struct sm_range r, struct sm_buf *out,
                   bool expect_found)
{
    bool found = !expect_found;
    sm_err_clear(&f->err);
    assert_ok(sm_store_get(f->s, key, r, SM_IO_PAYLOAD, out, &found, &f->err), &f->err);
    assert_int_equal(found, expect_found);
}

/* ---- capabilities ---- */

static void test_store_advertises_expected_caps(void **state)
{
    struct suite_fixture *f = *state;
    assert_int_equal(f->s->ops->caps, f->t->caps);
    assert_non_null(f->s->ops->scheme);
    assert_non_null(f->s->url);
}

/* ---- ranges ---- */

static void test_store_get_all_returns_whole_object(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "obj", 1, 1000);
    struct sm_buf b = SM_BUF_INIT;
    get_ok(f, "obj", sm_range_all(), &b, true);
    assert_pattern(&b, 1, 0, 1000);
    assert_int_equal(b.cap, 1000); /* exact reservation (STYLE B6) */
    sm_buf_free(&b);
}

static void test_store_get_span_returns_exact_bytes(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "obj", 2, 5000);
    struct sm_buf b = SM_BUF_INIT;
    get_ok(f, "obj", sm_range_span(0, 1), &b, true);
    assert_pattern(&b, 2, 0, 1);
    get_ok(f, "obj", sm_range_span(1234, 777), &b, true);
    assert_pattern(&b, 2, 1234, 777);
    get_ok(f, "obj", sm_range_span(4000, 1000), &b, true); /* ends exactly at the end */
    assert_pattern(&b, 2, 4000, 1000);
    get_ok(f, "obj", sm_range_span(0, 5000), &b, true);
    assert_pattern(&b, 2, 0, 5000);
    sm_buf_free(&b);
}

static void test_store_get_empty_span_at_end_is_empty(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "obj", 3, 100);
    struct sm_buf b = SM_BUF_INIT;
    get_ok(f, "obj", sm_range_span(100, 0), &b, true);
    assert_int_equal(b.len, 0);
    sm_buf_free(&b);
}

static void test_store_get_suffix_returns_last_bytes(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "shard", 4, 3000);
    struct sm_buf b = SM_BUF_INIT;
    get_ok(f, "shard", sm_range_suffix(20), &b, true);
    assert_pattern(&b, 4, 2980, 20);
    get_ok(f, "shard", sm_range_suffix(3000), &b, true); /* exactly the whole object */
    assert_pattern(&b, 4, 0, 3000);
    sm_buf_free(&b);
}

static void test_store_get_reuses_a_large_enough_buffer(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "obj", 5, 64);
    struct sm_buf b = SM_BUF_INIT;
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_buf_reserve(&b, 4096, &err), &err);
    uint8_t *p = b.ptr;
    get_ok(f, "obj", sm_range_span(8, 16), &b, true);
    assert_ptr_equal(b.ptr, p);
    assert_pattern(&b, 5, 8, 16);
    sm_buf_free(&b);
}

static void test_store_get_missing_key_is_not_found_and_ok(void **state)
{
    struct suite_fixture *f = *state;
    struct sm_buf b = SM_BUF_INIT;
    const struct sm_range ranges[] = {sm_range_all(), sm_range_span(0, 10), sm_range_suffix(16)};
    const char *keys[] = {"nothing", "c/0/0", "deep/er/key"};
    for (size_t k = 0; k < 3; k++) {
        for (size_t i = 0; i < 3; i++) {
            get_ok(f, keys[k], ranges[i], &b, false);
            assert_int_equal(b.len, 0);
            assert_int_equal(f->err.status, SM_OK);
            assert_string_equal(f->err.what, "");
        }
    }
    sm_buf_free(&b);
}

static void test_store_get_below_an_object_is_not_found(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "c/0", 6, 10); /* "c/0" is an object, so "c/0/1" cannot exist */
    struct sm_buf b = SM_BUF_INIT;
    get_ok(f, "c/0/1", sm_range_all(), &b, false);
    sm_buf_free(&b);
}

static void test_store_get_span_past_end_is_data_error_naming_key(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "arr/c/1/2", 7, 100);
    const struct sm_range bad[] = {sm_range_span(90, 20), sm_range_span(100, 1),
                                   sm_range_span(500, 10), sm_range_span(0, 101)};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct sm_buf b = SM_BUF_INIT;
        bool found;
        sm_err_clear(&f->err);
        assert_int_equal(
            sm_store_get(f->s, "arr/c/1/2", bad[i], SM_IO_PAYLOAD, &b, &found, &f->err), SM_E_DATA);
        assert_contains(f->err.where, "arr/c/1/2");
        assert_contains(f->err.what, "past the end");
        sm_buf_free(&b);
    }
}

static void test_store_get_suffix_longer_than_object_is_data_error(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "s/0", 8, 10);
    struct sm_buf b = SM_BUF_INIT;
    bool found;
    assert_int_equal(
        sm_store_get(f->s, "s/0", sm_range_suffix(11), SM_IO_INDEX, &b, &found, &f->err),
        SM_E_DATA);
    assert_contains(f->err.where, "s/0");
    assert_contains(f->err.what, "10 bytes");
    sm_buf_free(&b);
}

static void test_store_get_sized_reports_object_size(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "obj", 9, 321);
    struct sm_buf b = SM_BUF_INIT;
    const struct sm_range ranges[] = {sm_range_all(), sm_range_span(3, 4), sm_range_suffix(16)};
    for (size_t i = 0; i < 3; i++) {
        bool found = false;
        uint64_t size = 0;
        assert_ok(
            sm_store_get_sized(f->s, "obj", ranges[i], SM_IO_INDEX, &b, &found, &size, &f->err),
            &f->err);
        assert_true(found);
        assert_true(size == 321 || size == UINT64_MAX); /* UINT64_MAX: cannot tell */
    }
    bool found = true;
    uint64_t size = 0;
    assert_ok(sm_store_get_sized(f->s, "missing", sm_range_suffix(16), SM_IO_INDEX, &b, &found,
                                 &size, &f->err),
              &f->err);
    assert_false(found);
    assert_true(size == UINT64_MAX);
    sm_buf_free(&b);
}

/* ---- keys ---- */

static void test_store_key_with_dotdot_is_usage_error(void **state)
{
    struct suite_fixture *f = *state;
    static const char *bad[] = {"..", "../x", "a/../b", "a/..", "/etc/passwd", "../../../etc"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct sm_buf b = SM_BUF_INIT, outs[1] = {SM_BUF_INIT};
        bool found = true;
        uint64_t size;
        struct sm_range r = sm_range_all();
        struct sm_strv names = {NULL, 0, 0};

        sm_err_clear(&f->err);
        assert_int_equal(sm_store_get(f->s, bad[i], r, SM_IO_META, &b, &found, &f->err),
                         SM_E_USAGE);
        assert_false(found);
        assert_contains(f->err.what, bad[i]);
        sm_err_clear(&f->err);
        assert_int_equal(sm_store_get_many(f->s, bad[i], &r, 1, SM_IO_META, outs, &found, &f->err),
                         SM_E_USAGE);
        sm_err_clear(&f->err);
        assert_int_equal(sm_store_size(f->s, bad[i], &size, &found, &f->err), SM_E_USAGE);
        sm_err_clear(&f->err);
        assert_int_equal(sm_store_put_atomic(f->s, bad[i], sm_bytes_of("x", 1), &f->err),
                         SM_E_USAGE);
        sm_err_clear(&f->err);
        assert_int_equal(sm_store_list(f->s, bad[i], &names, &f->err), SM_E_USAGE);
        sm_strv_free(&names);
        sm_buf_free(&b);
        sm_buf_free(&outs[0]);
    }
}

static void test_store_dots_inside_names_are_plain_keys(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    static const char *keys[] = {".zarray", "a..b", "...", "x/.zattrs", "..c"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        seed_pattern(f, keys[i], (unsigned)i, 5 + i);
    }
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        struct sm_buf b = SM_BUF_INIT;
        get_ok(f, keys[i], sm_range_all(), &b, true);
        assert_pattern(&b, (unsigned)i, 0, 5 + i);
        sm_buf_free(&b);
    }
}

/* ---- writes ---- */

static void test_store_put_atomic_then_get(void **state)
{
    struct suite_fixture *f = *state;
    if (!can(f, SM_STORE_WRITE)) {
        skip();
    }
    const char doc[] = "{\"zarr_format\":3,\"node_type\":\"group\"}";
    assert_ok(sm_store_put_atomic(f->s, "out/g/zarr.json", sm_bytes_of(doc, strlen(doc)), &f->err),
              &f->err);
    struct sm_buf b = SM_BUF_INIT;
    get_ok(f, "out/g/zarr.json", sm_range_all(), &b, true);
    assert_int_equal(b.len, strlen(doc));
    assert_memory_equal(b.ptr, doc, b.len);
    sm_buf_free(&b);
}

static void test_store_put_overwrites_existing_object(void **state)
{
    struct suite_fixture *f = *state;
    if (!can(f, SM_STORE_WRITE)) {
        skip();
    }
    seed_pattern(f, "c/0/0", 10, 4000);
    seed_pattern(f, "c/0/0", 11, 30); /* shorter: nothing of the old object may remain */
    struct sm_buf b = SM_BUF_INIT;
    get_ok(f, "c/0/0", sm_range_all(), &b, true);
    assert_pattern(&b, 11, 0, 30);
    uint64_t size = 0;
    bool found = false;
    assert_ok(sm_store_size(f->s, "c/0/0", &size, &found, &f->err), &f->err);
    assert_true(found);
    assert_int_equal(size, 30);
    sm_buf_free(&b);
}

static void test_store_put_empty_object_exists_with_size_zero(void **state)
{
    struct suite_fixture *f = *state;
    if (!can(f, SM_STORE_WRITE)) {
        skip();
    }
    assert_ok(sm_store_put_atomic(f->s, "empty", sm_bytes_of(NULL, 0), &f->err), &f->err);
    bool exists = false;
    assert_ok(sm_store_exists(f->s, "empty", &exists, &f->err), &f->err);
    assert_true(exists);
    struct sm_buf b = SM_BUF_INIT;
    get_ok(f, "empty", sm_range_all(), &b, true);
    assert_int_equal(b.len, 0);
    sm_buf_free(&b);
}

static void test_store_put_counts_puts_and_bytes(void **state)
{
    struct suite_fixture *f = *state;
    if (!can(f, SM_STORE_WRITE)) {
        skip();
    }
    const uint64_t p0 = atomic_load(&f->s->stats.puts), b0 = atomic_load(&f->s->stats.put_bytes);
    seed_pattern(f, "a", 1, 100);
    seed_pattern(f, "b/c", 1, 23);
    assert_int_equal(atomic_load(&f->s->stats.puts), p0 + 2);
    assert_int_equal(atomic_load(&f->s->stats.put_bytes), b0 + 123);
    /* Writes are not read requests. */
    for (int c = 0; c < SM_IO_NCLASS; c++) {
        assert_int_equal(sm_store_requests(f->s, (enum sm_io_class)c), 0);
    }
}

static void test_store_put_on_read_only_store_is_usage_error(void **state)
{
    struct suite_fixture *f = *state;
    if (can(f, SM_STORE_WRITE)) {
        skip();
    }
    assert_int_equal(sm_store_put_atomic(f->s, "x", sm_bytes_of("x", 1), &f->err), SM_E_USAGE);
    assert_contains(f->err.what, "read-only");
}

/* ---- list, size, exists ---- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists prefix and compares with the expected names in any order. */
static void assert_list(struct suite_fixture *f, const char *prefix, const char *const *want,
                        size_t nwant)
{
    struct sm_strv names = {NULL, 0, 0};
    sm_err_clear(&f->err);
    assert_ok(sm_store_list(f->s, prefix, &names, &f->err), &f->err);
    if (names.n != nwant) {
        for (size_t i = 0; i < names.n; i++) {
            print_error("  listed '%s'\n", names.v[i]);
        }
        fail_msg("list('%s'): %zu names, want %zu", prefix, names.n, nwant);
    }
    if (names.n > 0) {
        assert_null(names.v[names.n]); /* NULL-terminated */
        qsort(names.v, names.n, sizeof(char *), cmp_str);
    }
    const char *sorted[16];
    if (nwant > 0) {
        memcpy(sorted, want, nwant * sizeof(char *));
        qsort(sorted, nwant, sizeof(char *), cmp_str);
    }
    for (size_t i = 0; i < nwant; i++) {
        assert_string_equal(names.v[i], sorted[i]);
    }
    sm_strv_free(&names);
    assert_null(names.v);
    assert_int_equal(names.n, 0);
}

/* ---- staged writes: stage / commit / abort / sync (SPEC §6) ---- */

static void test_store_staged_object_is_invisible_until_commit(void **state)
{
    struct suite_fixture *f = *state;
    if (!can(f, SM_STORE_WRITE)) {
        skip();
    }
    seed_pattern(f, "s/c/0", 3, 50);
    uint8_t data[200];
    for (size_t i = 0; i < sizeof(data); i++) {
        data[i] = (uint8_t)(i * 5 + 1);
    }
    uint64_t t1 = 0, t2 = 0;
    assert_ok(sm_store_stage(f->s, "s/c/0", sm_bytes_of(data, sizeof(data)), false, &t1, &f->err),
              &f->err);
    assert_ok(sm_store_stage(f->s, "s/c/1", sm_bytes_of(data, 10), true, &t2, &f->err), &f->err);
    assert_true(t1 != t2);
    /* Before commit: the old object stays whole, the new key is absent. */
    struct sm_buf b = SM_BUF_INIT;
    get_ok(f, "s/c/0", sm_range_all(), &b, true);
    assert_pattern(&b, 3, 0, 50);
    get_ok(f, "s/c/1", sm_range_all(), &b, false);
    assert_ok(sm_store_commit(f->s, "s/c/0", t1, &f->err), &f->err);
    assert_ok(sm_store_commit(f->s, "s/c/1", t2, &f->err), &f->err);
    get_ok(f, "s/c/0", sm_range_all(), &b, true);
    assert_int_equal(b.len, sizeof(data));
    assert_memory_equal(b.ptr, data, sizeof(data));
    get_ok(f, "s/c/1", sm_range_all(), &b, true);
    assert_int_equal(b.len, 10);
    assert_memory_equal(b.ptr, data, 10);
    sm_buf_free(&b);
    if (can(f, SM_STORE_LIST)) { /* no temporary entry is left beside the committed objects */
        static const char *const want[] = {"0", "1"};
        assert_list(f, "s/c", want, 2);
    }
}

static void test_store_abort_discards_a_staged_object(void **state)
{
    struct suite_fixture *f = *state;
    if (!can(f, SM_STORE_WRITE)) {
        skip();
    }
    uint64_t t = 0;
    assert_ok(sm_store_stage(f->s, "ab/x", sm_bytes_of("staged", 6), false, &t, &f->err), &f->err);
    sm_store_abort(f->s, "ab/x", t);
    struct sm_buf b = SM_BUF_INIT;
    get_ok(f, "ab/x", sm_range_all(), &b, false);
    sm_buf_free(&b);
    /* The ticket is gone: committing it now fails and creates nothing. */
    assert_int_not_equal(sm_store_commit(f->s, "ab/x", t, &f->err), SM_OK);
    bool exists = true;
    sm_err_clear(&f->err);
    assert_ok(sm_store_exists(f->s, "ab/x", &exists, &f->err), &f->err);
    assert_false(exists);
    if (can(f, SM_STORE_LIST)) {
        assert_list(f, "ab", NULL, 0);
    }
    assert_int_equal(atomic_load(&f->s->stats.aborts), 1);
}

static void test_store_stage_commit_sync_count(void **state)
{
    struct suite_fixture *f = *state;
    if (!can(f, SM_STORE_WRITE)) {
        skip();
    }
    uint64_t t = 0;
    assert_ok(sm_store_stage(f->s, "k/a", sm_bytes_of("abc", 3), false, &t, &f->err), &f->err);
    assert_ok(sm_store_commit(f->s, "k/a", t, &f->err), &f->err);
    assert_ok(sm_store_put(f->s, "k/b", sm_bytes_of("de", 2), false, &f->err), &f->err);
    assert_int_equal(atomic_load(&f->s->stats.stages), 2);
    assert_int_equal(atomic_load(&f->s->stats.commits), 2);
    assert_int_equal(atomic_load(&f->s->stats.puts), 2);
    assert_int_equal(atomic_load(&f->s->stats.put_bytes), 5);
    /* sync of a directory and of the whole store succeeds on every writable store */
    assert_ok(sm_store_sync(f->s, SM_STORE_SYNC_DIR, "k", &f->err), &f->err);
    assert_ok(sm_store_sync(f->s, SM_STORE_SYNC_DIR, "", &f->err), &f->err);
    assert_ok(sm_store_sync(f->s, SM_STORE_SYNC_ALL, "", &f->err), &f->err);
    for (int c = 0; c < SM_IO_NCLASS; c++) { /* writes are not read requests */
        assert_int_equal(sm_store_requests(f->s, (enum sm_io_class)c), 0);
    }
}

static void test_store_stage_on_read_only_store_is_usage_error(void **state)
{
    struct suite_fixture *f = *state;
    if (can(f, SM_STORE_WRITE)) {
        skip();
    }
    uint64_t t = 7;
    assert_int_equal(sm_store_stage(f->s, "x", sm_bytes_of("x", 1), true, &t, &f->err), SM_E_USAGE);
    assert_contains(f->err.what, "read-only");
    sm_err_clear(&f->err);
    assert_int_equal(sm_store_commit(f->s, "x", t, &f->err), SM_E_USAGE);
    sm_err_clear(&f->err);
    assert_int_equal(sm_store_sync(f->s, SM_STORE_SYNC_ALL, "", &f->err), SM_E_USAGE);
    sm_store_abort(f->s, "x", t); /* a no-op, never a crash */
    assert_int_equal(atomic_load(&f->s->stats.stages), 0);
}

static void test_store_stage_key_with_dotdot_is_usage_error(void **state)
{
    struct suite_fixture *f = *state;
    uint64_t t = 0;
    assert_int_equal(sm_store_stage(f->s, "a/../../x", sm_bytes_of("x", 1), false, &t, &f->err),
                     SM_E_USAGE);
    assert_contains(f->err.what, "escapes the store root");
    sm_err_clear(&f->err);
    assert_int_equal(sm_store_sync(f->s, SM_STORE_SYNC_DIR, "../", &f->err), SM_E_USAGE);
}

static void test_store_list_names_direct_children_once(void **state)
{
    struct suite_fixture *f = *state;
    if (!can(f, SM_STORE_LIST)) {
        skip();
    }
    need_data(f);
    seed_pattern(f, "a/x", 1, 3);
    seed_pattern(f, "a/y", 1, 3);
    seed_pattern(f, "a/sub/z", 1, 3);
    seed_pattern(f, "a/sub/w", 1, 3);
    seed_pattern(f, "b", 1, 3);
    const char *root[] = {"a", "b"};
    assert_list(f, "", root, 2);
    const char *a[] = {"x", "y", "sub"};
    assert_list(f, "a", a, 3);
    const char *sub[] = {"z", "w"};
    assert_list(f, "a/sub", sub, 2);
}

static void test_store_list_missing_prefix_is_empty(void **state)
{
    struct suite_fixture *f = *state;
    if (!can(f, SM_STORE_LIST)) {
        skip();
    }
    assert_list(f, "", NULL, 0);
    assert_list(f, "nope", NULL, 0);
    need_data(f);
    seed_pattern(f, "ab/x", 1, 3);
    seed_pattern(f, "obj", 1, 3);
    assert_list(f, "a", NULL, 0);   /* a prefix matches whole path segments only */
    assert_list(f, "obj", NULL, 0); /* an object has no children */
}

static void test_store_list_without_capability_is_usage_error(void **state)
{
    struct suite_fixture *f = *state;
    if (can(f, SM_STORE_LIST)) {
        skip();
    }
    struct sm_strv names = {NULL, 0, 0};
    assert_int_equal(sm_store_list(f->s, "", &names, &f->err), SM_E_USAGE);
    sm_strv_free(&names);
}

static void test_store_size_and_exists(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "c/1/2/3", 1, 4321);
    uint64_t size = 7;
    bool found = false, exists = false;
    assert_ok(sm_store_size(f->s, "c/1/2/3", &size, &found, &f->err), &f->err);
    assert_true(found);
    assert_int_equal(size, 4321);
    assert_ok(sm_store_exists(f->s, "c/1/2/3", &exists, &f->err), &f->err);
    assert_true(exists);
    found = true;
    assert_ok(sm_store_size(f->s, "c/1/2/4", &size, &found, &f->err), &f->err);
    assert_false(found);
    assert_int_equal(size, 0);
    exists = true;
    assert_ok(sm_store_exists(f->s, "nothing/here", &exists, &f->err), &f->err);
    assert_false(exists);
}

/* ---- get_many ---- */

static void test_store_get_many_returns_each_range(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "shard", 12, 2048);
    const struct sm_range r[4] = {sm_range_span(0, 100), sm_range_suffix(48), sm_range_all(),
                                  sm_range_span(1000, 1)};
    struct sm_buf outs[4] = {SM_BUF_INIT, SM_BUF_INIT, SM_BUF_INIT, SM_BUF_INIT};
    bool found = false;
    assert_ok(sm_store_get_many(f->s, "shard", r, 4, SM_IO_PAYLOAD, outs, &found, &f->err),
              &f->err);
    assert_true(found);
    assert_pattern(&outs[0], 12, 0, 100);
    assert_pattern(&outs[1], 12, 2000, 48);
    assert_pattern(&outs[2], 12, 0, 2048);
    assert_pattern(&outs[3], 12, 1000, 1);
    for (int i = 0; i < 4; i++) {
        sm_buf_free(&outs[i]);
    }
}

static void test_store_get_many_missing_key_is_not_found(void **state)
{
    struct suite_fixture *f = *state;
    const struct sm_range r[2] = {sm_range_span(0, 10), sm_range_suffix(4)};
    struct sm_buf outs[2] = {SM_BUF_INIT, SM_BUF_INIT};
    bool found = true;
    assert_ok(sm_store_get_many(f->s, "missing", r, 2, SM_IO_PAYLOAD, outs, &found, &f->err),
              &f->err);
    assert_false(found);
    assert_int_equal(outs[0].len, 0);
    assert_int_equal(outs[1].len, 0);
    sm_buf_free(&outs[0]);
    sm_buf_free(&outs[1]);
}

static void test_store_get_many_range_past_end_is_data_error(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "shard", 13, 64);
    const struct sm_range r[2] = {sm_range_span(0, 10), sm_range_span(60, 10)};
    struct sm_buf outs[2] = {SM_BUF_INIT, SM_BUF_INIT};
    bool found;
    assert_int_equal(sm_store_get_many(f->s, "shard", r, 2, SM_IO_PAYLOAD, outs, &found, &f->err),
                     SM_E_DATA);
    assert_contains(f->err.where, "shard");
    sm_buf_free(&outs[0]);
    sm_buf_free(&outs[1]);
}

/* ---- counters (SPEC §5: every request counts, 404s included) ---- */

static void assert_counts(const struct sm_store *s, const uint64_t *req, const uint64_t *bytes)
{
    for (int c = 0; c < SM_IO_NCLASS; c++) {
        if (sm_store_requests(s, (enum sm_io_class)c) != req[c] ||
            sm_store_bytes(s, (enum sm_io_class)c) != bytes[c]) {
            fail_msg("class %d: %llu requests / %llu bytes, want %llu / %llu", c,
                     (unsigned long long)sm_store_requests(s, (enum sm_io_class)c),
                     (unsigned long long)sm_store_bytes(s, (enum sm_io_class)c),
                     (unsigned long long)req[c], (unsigned long long)bytes[c]);
        }
    }
}

static void test_store_counters_are_kept_per_class(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "zarr.json", 1, 300);
    seed_pattern(f, "c/0", 2, 1000);
    uint64_t req[SM_IO_NCLASS] = {0}, bytes[SM_IO_NCLASS] = {0};
    assert_counts(f->s, req, bytes);
    struct sm_buf b = SM_BUF_INIT;
    bool found;
    assert_ok(sm_store_get(f->s, "zarr.json", sm_range_all(), SM_IO_META, &b, &found, &f->err),
              &f->err);
    req[SM_IO_META] = 1;
    bytes[SM_IO_META] = 300;
    assert_counts(f->s, req, bytes);
    assert_ok(sm_store_get(f->s, "c/0", sm_range_suffix(40), SM_IO_INDEX, &b, &found, &f->err),
              &f->err);
    req[SM_IO_INDEX] = 1;
    bytes[SM_IO_INDEX] = 40;
    assert_counts(f->s, req, bytes);
    assert_ok(sm_store_get(f->s, "c/0", sm_range_span(10, 90), SM_IO_PAYLOAD, &b, &found, &f->err),
              &f->err);
    assert_ok(sm_store_get(f->s, "c/0", sm_range_all(), SM_IO_PAYLOAD, &b, &found, &f->err),
              &f->err);
    req[SM_IO_PAYLOAD] = 2;
    bytes[SM_IO_PAYLOAD] = 1090;
    assert_counts(f->s, req, bytes);
    /* size/exists probes are not reads */
    bool exists;
    assert_ok(sm_store_exists(f->s, "c/0", &exists, &f->err), &f->err);
    assert_counts(f->s, req, bytes);
    sm_buf_free(&b);
}

static void test_store_missing_object_counts_one_request_zero_bytes(void **state)
{
    struct suite_fixture *f = *state;
    uint64_t req[SM_IO_NCLASS] = {0}, bytes[SM_IO_NCLASS] = {0};
    struct sm_buf b = SM_BUF_INIT;
    bool found;
    assert_ok(sm_store_get(f->s, "c/9/9", sm_range_all(), SM_IO_PAYLOAD, &b, &found, &f->err),
              &f->err);
    req[SM_IO_PAYLOAD] = 1;
    assert_counts(f->s, req, bytes);
    assert_ok(sm_store_get(f->s, "c/9/9", sm_range_suffix(20), SM_IO_INDEX, &b, &found, &f->err),
              &f->err);
    req[SM_IO_INDEX] = 1;
    assert_counts(f->s, req, bytes);
    assert_ok(sm_store_get(f->s, ".zarray", sm_range_all(), SM_IO_META, &b, &found, &f->err),
              &f->err);
    req[SM_IO_META] = 1;
    assert_counts(f->s, req, bytes);
    sm_buf_free(&b);
}

static void test_store_get_many_counts_one_request_per_range(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "shard", 1, 500);
    const struct sm_range r[3] = {sm_range_span(0, 10), sm_range_span(100, 20),
                                  sm_range_suffix(30)};
    struct sm_buf outs[3] = {SM_BUF_INIT, SM_BUF_INIT, SM_BUF_INIT};
    bool found;
    assert_ok(sm_store_get_many(f->s, "shard", r, 3, SM_IO_PAYLOAD, outs, &found, &f->err),
              &f->err);
    uint64_t req[SM_IO_NCLASS] = {0}, bytes[SM_IO_NCLASS] = {0};
    req[SM_IO_PAYLOAD] = 3;
    bytes[SM_IO_PAYLOAD] = 60;
    assert_counts(f->s, req, bytes);
    for (int i = 0; i < 3; i++) {
        sm_buf_free(&outs[i]);
    }
}

static void test_store_get_many_of_missing_object_counts_like_get(void **state)
{
    struct suite_fixture *f = *state;
    /* The dispatch default (a loop over get) stops at the first "not found": one request, 0
     * bytes. A driver's own get_many must report the same numbers (STYLE B7: the dispatch layer
     * makes every store count alike). */
    const struct sm_range r[3] = {sm_range_span(0, 10), sm_range_span(100, 20),
                                  sm_range_suffix(30)};
    struct sm_buf outs[3] = {SM_BUF_INIT, SM_BUF_INIT, SM_BUF_INIT};
    bool found = true;
    assert_ok(sm_store_get_many(f->s, "missing", r, 3, SM_IO_PAYLOAD, outs, &found, &f->err),
              &f->err);
    assert_false(found);
    uint64_t req[SM_IO_NCLASS] = {0}, bytes[SM_IO_NCLASS] = {0};
    req[SM_IO_PAYLOAD] = 1;
    assert_counts(f->s, req, bytes);
    for (int i = 0; i < 3; i++) {
        sm_buf_free(&outs[i]);
    }
}

/* ---- limits ---- */

static void test_store_max_object_bytes_is_limit_before_allocating(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    const size_t big = 1u << 20;
    seed_pattern(f, "big", 1, big);
    f->s->max_object_bytes = 1000;
    const struct sm_range bad[] = {sm_range_all(), sm_range_span(0, 1001), sm_range_suffix(4096)};
    for (size_t i = 0; i < 3; i++) {
        struct sm_buf b = SM_BUF_INIT;
        bool found;
        sm_err_clear(&f->err);
        sm_alloc_reset_peak();
        const uint64_t before = sm_alloc_peak();
        assert_int_equal(sm_store_get(f->s, "big", bad[i], SM_IO_PAYLOAD, &b, &found, &f->err),
                         SM_E_LIMIT);
        assert_true(sm_alloc_peak() - before < big / 2); /* never reserved the object */
        assert_contains(f->err.what, "limits.max_object_bytes");
        assert_contains(f->err.where, "big");
        assert_null(b.ptr);
        sm_buf_free(&b);
    }
    /* Ranges within the limit still work. */
    struct sm_buf b = SM_BUF_INIT;
    get_ok(f, "big", sm_range_span(5000, 1000), &b, true);
    assert_pattern(&b, 1, 5000, 1000);
    get_ok(f, "big", sm_range_suffix(10), &b, true);
    assert_pattern(&b, 1, big - 10, 10);
    sm_buf_free(&b);
    f->s->max_object_bytes = 0; /* 0: unlimited */
    get_ok(f, "big", sm_range_all(), &b, true);
    assert_int_equal(b.len, big);
    sm_buf_free(&b);
}

/* ---- threads ---- */

enum { SUITE_THREADS = 4, SUITE_ITERS = 250, SUITE_OBJS = 6 };

struct suite_thread {
    struct sm_store *s;
    unsigned id;
    int failures;
    char msg[1024];
};

static size_t obj_len(unsigned k)
{
    return 100 + (size_t)k * 997;
}

static void *suite_reader(void *arg)
{
    struct suite_thread *t = arg;
    struct sm_test_rng rng = {t->id * 7919u + 1};
    struct sm_buf b = SM_BUF_INIT;
    struct sm_err err;
    for (int i = 0; i < SUITE_ITERS && t->failures == 0; i++) {
        const unsigned k = (unsigned)sm_test_rng_below(&rng, SUITE_OBJS);
        const size_t len = obj_len(k);
        char key[32];
        snprintf(key, sizeof(key), "t/%u", k);
        size_t off = 0, n = len;
        struct sm_range r = sm_range_all();
        switch (i % 3) {
        case 1:
            off = (size_t)sm_test_rng_below(&rng, len);
            n = 1 + (size_t)sm_test_rng_below(&rng, len - off);
            r = sm_range_span(off, n);
            break;
        case 2:
            n = 1 + (size_t)sm_test_rng_below(&rng, len);
            off = len - n;
            r = sm_range_suffix(n);
            break;
        default:
            break;
        }
        bool found = false;
        sm_err_clear(&err);
        if (sm_store_get(t->s, key, r, SM_IO_PAYLOAD, &b, &found, &err) != SM_OK || !found ||
            b.len != n) {
            t->failures++;
            snprintf(t->msg, sizeof(t->msg), "%s: status %s found %d len %zu want %zu (%.300s)",
                     key, sm_status_name(err.status), found, b.len, n, err.what);
            break;
        }
        for (size_t j = 0; j < n; j++) {
            if (b.ptr[j] != pattern(k, off + j)) {
                t->failures++;
                snprintf(t->msg, sizeof(t->msg), "%s: wrong byte at %zu", key, off + j);
                break;
            }
        }
    }
    sm_buf_free(&b);
    return NULL;
}

static void test_store_concurrent_gets_from_threads(void **state)
{
    struct suite_fixture *f = *state;
    if (!can(f, SM_STORE_THREADSAFE)) {
        skip();
    }
    need_data(f);
    for (unsigned k = 0; k < SUITE_OBJS; k++) {
        char key[32];
        snprintf(key, sizeof(key), "t/%u", k);
        seed_pattern(f, key, k, obj_len(k));
    }
    struct suite_thread t[SUITE_THREADS];
    pthread_t th[SUITE_THREADS];
    for (unsigned i = 0; i < SUITE_THREADS; i++) {
        t[i] = (struct suite_thread){f->s, i, 0, ""};
        assert_int_equal(pthread_create(&th[i], NULL, suite_reader, &t[i]), 0);
    }
    for (unsigned i = 0; i < SUITE_THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    for (unsigned i = 0; i < SUITE_THREADS; i++) {
        if (t[i].failures != 0) {
            fail_msg("thread %u: %s", i, t[i].msg);
        }
    }
    assert_int_equal(sm_store_requests(f->s, SM_IO_PAYLOAD), SUITE_THREADS * SUITE_ITERS);
}

static void *suite_writer(void *arg)
{
    struct suite_thread *t = arg;
    struct sm_err err;
    uint8_t data[300];
    for (int i = 0; i < 40 && t->failures == 0; i++) {
        char key[48];
        snprintf(key, sizeof(key), "w/%u/%d", t->id, i);
        const size_t n = 1 + (size_t)(i * 7) % sizeof(data);
        for (size_t j = 0; j < n; j++) {
            data[j] = pattern(t->id + (unsigned)i, j);
        }
        sm_err_clear(&err);
        if (sm_store_put_atomic(t->s, key, sm_bytes_of(data, n), &err) != SM_OK) {
            t->failures++;
            snprintf(t->msg, sizeof(t->msg), "put %s: %.300s", key, err.what);
        }
        /* overwrite a shared key too */
        sm_err_clear(&err);
        if (sm_store_put_atomic(t->s, "w/shared", sm_bytes_of(data, n), &err) != SM_OK) {
            t->failures++;
            snprintf(t->msg, sizeof(t->msg), "put w/shared: %.300s", err.what);
        }
    }
    return NULL;
}

static void test_store_concurrent_puts_from_threads(void **state)
{
    struct suite_fixture *f = *state;
    if (!can(f, SM_STORE_THREADSAFE | SM_STORE_WRITE)) {
        skip();
    }
    struct suite_thread t[SUITE_THREADS];
    pthread_t th[SUITE_THREADS];
    for (unsigned i = 0; i < SUITE_THREADS; i++) {
        t[i] = (struct suite_thread){f->s, i, 0, ""};
        assert_int_equal(pthread_create(&th[i], NULL, suite_writer, &t[i]), 0);
    }
    for (unsigned i = 0; i < SUITE_THREADS; i++) {
        pthread_join(th[i], NULL);
    }
    for (unsigned i = 0; i < SUITE_THREADS; i++) {
        if (t[i].failures != 0) {
            fail_msg("thread %u: %s", i, t[i].msg);
        }
    }
    struct sm_buf b = SM_BUF_INIT;
    for (unsigned id = 0; id < SUITE_THREADS; id++) {
        for (int i = 0; i < 40; i++) {
            char key[48];
            snprintf(key, sizeof(key), "w/%u/%d", id, i);
            get_ok(f, key, sm_range_all(), &b, true);
            assert_pattern(&b, id + (unsigned)i, 0, 1 + (size_t)(i * 7) % 300);
        }
    }
    sm_buf_free(&b);
}

/* ---- robustness ---- */

static void test_store_failed_read_leaves_store_usable(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "obj", 14, 50);
    struct sm_buf b = SM_BUF_INIT;
    bool found;
    assert_int_equal(
        sm_store_get(f->s, "obj", sm_range_span(40, 20), SM_IO_PAYLOAD, &b, &found, &f->err),
        SM_E_DATA);
    get_ok(f, "obj", sm_range_span(40, 10), &b, true);
    assert_pattern(&b, 14, 40, 10);
    sm_buf_free(&b);
}

static void test_store_allocation_failure_is_nomem_without_leaks(void **state)
{
    struct suite_fixture *f = *state;
    need_data(f);
    seed_pattern(f, "obj", 15, 4096);
    const uint64_t base = sm_alloc_current();
    for (uint64_t n = 1; n < 8; n++) {
        struct sm_buf b = SM_BUF_INIT;
        bool found;
        sm_err_clear(&f->err);
        sm_alloc_fail_at(n);
        sm_status st =
            sm_store_get(f->s, "obj", sm_range_all(), SM_IO_PAYLOAD, &b, &found, &f->err);
        sm_alloc_fail_at(0);
        assert_true(st == SM_OK || st == SM_E_NOMEM);
        if (st == SM_OK) {
            assert_pattern(&b, 15, 0, 4096);
        }
        sm_buf_free(&b);
        assert_int_equal(sm_alloc_current(), base);
    }
}

#define SUITE_CASE(fn) cmocka_unit_test_setup_teardown(fn, suite_setup, suite_teardown)

int sm_store_suite_run(const struct sm_store_suite_target *t)
{
    struct CMUnitTest tests[] = {
        SUITE_CASE(test_store_advertises_expected_caps),
        SUITE_CASE(test_store_get_all_returns_whole_object),
        SUITE_CASE(test_store_get_span_returns_exact_bytes),
        SUITE_CASE(test_store_get_empty_span_at_end_is_empty),
        SUITE_CASE(test_store_get_suffix_returns_last_bytes),
        SUITE_CASE(test_store_get_reuses_a_large_enough_buffer),
        SUITE_CASE(test_store_get_missing_key_is_not_found_and_ok),
        SUITE_CASE(test_store_get_below_an_object_is_not_found),
        SUITE_CASE(test_store_get_span_past_end_is_data_error_naming_key),
        SUITE_CASE(test_store_get_suffix_longer_than_object_is_data_error),
        SUITE_CASE(test_store_get_sized_reports_object_size),
        SUITE_CASE(test_store_key_with_dotdot_is_usage_error),
        SUITE_CASE(test_store_dots_inside_names_are_plain_keys),
        SUITE_CASE(test_store_put_atomic_then_get),
        SUITE_CASE(test_store_put_overwrites_existing_object),
        SUITE_CASE(test_store_put_empty_object_exists_with_size_zero),
        SUITE_CASE(test_store_put_counts_puts_and_bytes),
        SUITE_CASE(test_store_put_on_read_only_store_is_usage_error),
        SUITE_CASE(test_store_staged_object_is_invisible_until_commit),
        SUITE_CASE(test_store_abort_discards_a_staged_object),
        SUITE_CASE(test_store_stage_commit_sync_count),
        SUITE_CASE(test_store_stage_on_read_only_store_is_usage_error),
        SUITE_CASE(test_store_stage_key_with_dotdot_is_usage_error),
        SUITE_CASE(test_store_list_names_direct_children_once),
        SUITE_CASE(test_store_list_missing_prefix_is_empty),
        SUITE_CASE(test_store_list_without_capability_is_usage_error),
        SUITE_CASE(test_store_size_and_exists),
        SUITE_CASE(test_store_get_many_returns_each_range),
        SUITE_CASE(test_store_get_many_missing_key_is_not_found),
        SUITE_CASE(test_store_get_many_range_past_end_is_data_error),
        SUITE_CASE(test_store_counters_are_kept_per_class),
        SUITE_CASE(test_store_missing_object_counts_one_request_zero_bytes),
        SUITE_CASE(test_store_get_many_counts_one_request_per_range),
        SUITE_CASE(test_store_get_many_of_missing_object_counts_like_get),
        SUITE_CASE(test_store_max_object_bytes_is_limit_before_allocating),
        SUITE_CASE(test_store_concurrent_gets_from_threads),
        SUITE_CASE(test_store_concurrent_puts_from_threads),
        SUITE_CASE(test_store_failed_read_leaves_store_usable),
        SUITE_CASE(test_store_allocation_failure_is_nomem_without_leaks),
    };
    const size_t n = sizeof(tests) / sizeof(tests[0]);
    for (size_t i = 0; i < n; i++) {
        tests[i].initial_state = (void *)(uintptr_t)t;
    }
    char group[64];
    snprintf(group, sizeof(group), "store_suite.%s", t->name);
    return _cmocka_run_group_tests(group, tests, n, NULL, NULL);
}
