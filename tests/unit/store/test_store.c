/* Unit tests for engine/store/store.c (the dispatch layer, STYLE B7) and the entry point of the
 * store conformance suite (tests/suites/store_suite.c, included below because tests/CMakeLists.txt
 * builds one source per unit test). The suite runs on every store in `targets`; a new store joins
 * by adding one entry there. The dispatch cases use a scripted fake driver to check what the
 * layer does on its own: capability checks, defaults for NULL slots, counting, the returned-length
 * check, and naming the object on error. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/alloc.h"
#include "shardmill/store.h"
#include "sm_test.h"

#include "../../suites/store_suite.c"

/* ==== conformance targets ==== */

struct file_target {
    char dir[512];
};

static sm_status file_create(struct sm_store **out, void **ctx, struct sm_err *err)
{
    struct file_target *t = test_calloc(1, sizeof(*t));
    if (sm_test_tmpdir("store-suite", t->dir, sizeof(t->dir)) != 0) {
        test_free(t);
        SM_FAIL(err, SM_E_IO, "mkdtemp failed");
    }
    *ctx = t;
    return sm_store_file_open(t->dir, out, err);
}

static void file_destroy(struct sm_store *s, void *ctx)
{
    struct file_target *t = ctx;
    sm_store_close(s);
    sm_test_rm_rf(t->dir);
    test_free(t);
}

static sm_status mem_create(struct sm_store **out, void **ctx, struct sm_err *err)
{
    *ctx = NULL;
    return sm_store_mem_new(out, err);
}

static void mem_destroy(struct sm_store *s, void *ctx)
{
    (void)ctx;
    sm_store_close(s);
}

#define ALL_CAPS (SM_STORE_RANGE | SM_STORE_WRITE | SM_STORE_LIST | SM_STORE_THREADSAFE)

static const struct sm_store_suite_target targets[] = {
    {"file", ALL_CAPS, file_create, NULL, file_destroy},
    {"mem", ALL_CAPS, mem_create, NULL, mem_destroy},
    {NULL, 0, NULL, NULL, NULL},
};

/* ==== a scripted fake driver for the dispatch cases ==== */

struct fake_store {
    struct sm_store base;
    const uint8_t *data; /* the one object, under key "obj" */
    size_t len;
    size_t short_by;    /* deliver this many bytes fewer than asked (a broken driver) */
    sm_status fail;     /* get fails with this status (what only: no where) */
    int gets, closes;   /* calls seen */
    int *closed_flag;   /* set by close (the store is gone by then) */
    uint64_t report_sz; /* objsize reported by get when non-zero */
};

static sm_status fake_get(struct sm_store *s, const char *key, struct sm_range r,
                          enum sm_io_class cls, struct sm_buf *out, bool *found, uint64_t *objsize,
                          struct sm_err *err)
{
    (void)cls;
    struct fake_store *fs = (struct fake_store *)s;
    fs->gets++;
    if (fs->fail != SM_OK) {
        SM_FAIL(err, fs->fail, "scripted failure");
    }
    if (strcmp(key, "obj") != 0) {
        return SM_OK;
    }
    *found = true;
    if (objsize != NULL && fs->report_sz != 0) {
        *objsize = fs->report_sz;
    }
    size_t off = 0, n = fs->len;
    if (r.kind == SM_RANGE_SPAN) {
        off = r.offset < fs->len ? (size_t)r.offset : fs->len;
        n = r.len < fs->len - off ? (size_t)r.len : fs->len - off;
    } else if (r.kind == SM_RANGE_SUFFIX) {
        n = r.len < fs->len ? (size_t)r.len : fs->len;
        off = fs->len - n;
    }
    n = n > fs->short_by ? n - fs->short_by : 0;
    return sm_buf_set(out, sm_bytes_of(fs->data + off, n), err);
}

static void fake_close(struct sm_store *s)
{
    struct fake_store *fs = (struct fake_store *)s;
    if (fs->closed_flag != NULL) {
        *fs->closed_flag = 1;
    }
    test_free(fs);
}

/* Read-only, no list, no size, no get_many: every optional slot NULL. */
static const struct sm_store_ops fake_ops = {
    .scheme = "fake",
    .caps = SM_STORE_RANGE,
    .get = fake_get,
    .get_many = NULL,
    .size = NULL,
    .put_atomic = NULL,
    .list = NULL,
    .close = fake_close,
};

static const uint8_t fake_bytes[] = "0123456789abcdefghijklmnopqrstuvwxyz";

static struct fake_store *fake_new(void)
{
    struct fake_store *fs = test_calloc(1, sizeof(*fs));
    fs->base.ops = &fake_ops;
    fs->base.url = sm_strdup("fake://host/root");
    fs->data = fake_bytes;
    fs->len = 36;
    return fs;
}

static void test_dispatch_close_accepts_null(void **state)
{
    (void)state;
    sm_store_close(NULL);
}

static void test_dispatch_close_calls_driver_and_frees_url(void **state)
{
    (void)state;
    const uint64_t base = sm_alloc_current();
    struct fake_store *fs = fake_new();
    int closed = 0;
    fs->closed_flag = &closed;
    sm_store_close(&fs->base);
    assert_int_equal(closed, 1);
    assert_int_equal(sm_alloc_current(), base);
}

static void test_dispatch_short_driver_read_is_data_error(void **state)
{
    (void)state;
    struct fake_store *fs = fake_new();
    fs->short_by = 3;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf b = SM_BUF_INIT;
    bool found;
    assert_int_equal(
        sm_store_get(&fs->base, "obj", sm_range_span(2, 10), SM_IO_PAYLOAD, &b, &found, &err),
        SM_E_DATA);
    assert_contains(err.what, "returned 7 bytes");
    assert_string_equal(err.where, "fake://host/root/obj");
    /* ALL has no expected length: whatever the driver returns is the object. */
    sm_err_clear(&err);
    assert_ok(sm_store_get(&fs->base, "obj", sm_range_all(), SM_IO_PAYLOAD, &b, &found, &err),
              &err);
    assert_int_equal(b.len, 33);
    sm_buf_free(&b);
    sm_store_close(&fs->base);
}

static void test_dispatch_driver_error_is_named_and_counted(void **state)
{
    (void)state;
    struct fake_store *fs = fake_new();
    fs->fail = SM_E_IO;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf b = SM_BUF_INIT;
    bool found = true;
    assert_int_equal(
        sm_store_get(&fs->base, "c/0/1", sm_range_all(), SM_IO_PAYLOAD, &b, &found, &err), SM_E_IO);
    assert_false(found);
    assert_string_equal(err.what, "scripted failure");
    assert_string_equal(err.where, "fake://host/root/c/0/1");
    assert_int_equal(sm_store_requests(&fs->base, SM_IO_PAYLOAD), 1);
    assert_int_equal(sm_store_bytes(&fs->base, SM_IO_PAYLOAD), 0);
    sm_buf_free(&b);
    sm_store_close(&fs->base);
}

static void test_dispatch_get_many_defaults_to_a_loop_over_get(void **state)
{
    (void)state;
    struct fake_store *fs = fake_new();
    struct sm_err err;
    sm_err_clear(&err);
    const struct sm_range r[3] = {sm_range_span(0, 3), sm_range_suffix(2), sm_range_all()};
    struct sm_buf outs[3] = {SM_BUF_INIT, SM_BUF_INIT, SM_BUF_INIT};
    bool found = false;
    assert_ok(sm_store_get_many(&fs->base, "obj", r, 3, SM_IO_INDEX, outs, &found, &err), &err);
    assert_true(found);
    assert_int_equal(fs->gets, 3);
    assert_memory_equal(outs[0].ptr, "012", 3);
    assert_memory_equal(outs[1].ptr, "yz", 2);
    assert_int_equal(outs[2].len, 36);
    assert_int_equal(sm_store_requests(&fs->base, SM_IO_INDEX), 3);
    assert_int_equal(sm_store_bytes(&fs->base, SM_IO_INDEX), 41);
    for (int i = 0; i < 3; i++) {
        sm_buf_free(&outs[i]);
    }
    sm_store_close(&fs->base);
}

static void test_dispatch_put_on_store_without_write_cap_is_usage_error(void **state)
{
    (void)state;
    struct fake_store *fs = fake_new();
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_store_put_atomic(&fs->base, "out/x", sm_bytes_of("x", 1), &err),
                     SM_E_USAGE);
    assert_contains(err.what, "'fake' is read-only");
    assert_string_equal(err.where, "fake://host/root/out/x");
    assert_int_equal(atomic_load(&fs->base.stats.puts), 0);
    sm_store_close(&fs->base);
}

static void test_dispatch_list_without_list_cap_is_usage_error(void **state)
{
    (void)state;
    struct fake_store *fs = fake_new();
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_strv names = {NULL, 0, 0};
    assert_int_equal(sm_store_list(&fs->base, "", &names, &err), SM_E_USAGE);
    assert_contains(err.what, "cannot list");
    assert_int_equal(names.n, 0);
    sm_store_close(&fs->base);
}

static void test_dispatch_size_without_slot_is_internal_error(void **state)
{
    (void)state;
    struct fake_store *fs = fake_new();
    struct sm_err err;
    sm_err_clear(&err);
    uint64_t size = 5;
    bool found = true;
    assert_int_equal(sm_store_size(&fs->base, "obj", &size, &found, &err), SM_E_INTERNAL);
    assert_false(found);
    assert_int_equal(size, 0);
    sm_store_close(&fs->base);
}

static void test_dispatch_limit_is_checked_before_calling_the_driver(void **state)
{
    (void)state;
    struct fake_store *fs = fake_new();
    fs->base.max_object_bytes = 8;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf b = SM_BUF_INIT;
    bool found;
    assert_int_equal(
        sm_store_get(&fs->base, "obj", sm_range_span(0, 9), SM_IO_PAYLOAD, &b, &found, &err),
        SM_E_LIMIT);
    assert_int_equal(fs->gets, 0);
    assert_contains(err.what, "9 bytes exceeds limits.max_object_bytes (8)");
    assert_string_equal(err.where, "fake://host/root/obj");
    assert_int_equal(sm_store_requests(&fs->base, SM_IO_PAYLOAD), 0);
    sm_buf_free(&b);
    sm_store_close(&fs->base);
}

static void test_dispatch_check_len_names_the_object(void **state)
{
    (void)state;
    struct fake_store *fs = fake_new();
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_store_check_len(&fs->base, "k", UINT64_MAX, &err), &err); /* 0: unlimited */
    fs->base.max_object_bytes = 100;
    assert_ok(sm_store_check_len(&fs->base, "k", 100, &err), &err);
    assert_int_equal(sm_store_check_len(&fs->base, "k", 101, &err), SM_E_LIMIT);
    assert_string_equal(err.where, "fake://host/root/k");
    sm_store_close(&fs->base);
}

static void test_dispatch_max_requests_refuses_the_request_past_it(void **state)
{
    (void)state;
    struct fake_store *fs = fake_new();
    fs->base.max_requests = 2;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf b = SM_BUF_INIT;
    bool found;
    for (int i = 0; i < 2; i++) {
        assert_ok(
            sm_store_get(&fs->base, "obj", sm_range_span(0, 4), SM_IO_PAYLOAD, &b, &found, &err),
            &err);
    }
    assert_int_equal(
        sm_store_get(&fs->base, "obj", sm_range_span(0, 4), SM_IO_PAYLOAD, &b, &found, &err),
        SM_E_LIMIT);
    assert_int_equal(fs->gets, 2); /* refused before the driver was called */
    assert_contains(err.what, "request 3 would exceed limits.max_requests (2)");
    assert_string_equal(err.where, "fake://host/root/obj");
    assert_int_equal(sm_store_requests(&fs->base, SM_IO_PAYLOAD), 2);
    sm_err_clear(&err);
    assert_int_equal(sm_store_admit(&fs->base, 1, "k", &err), SM_E_LIMIT); /* stays refused */
    fs->base.max_requests = 0;                                             /* 0: no limit */
    assert_ok(sm_store_admit(&fs->base, 1000, "k", &err), &err);
    sm_buf_free(&b);
    sm_store_close(&fs->base);
}

static void test_dispatch_get_sized_defaults_to_unknown_size(void **state)
{
    (void)state;
    struct fake_store *fs = fake_new();
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf b = SM_BUF_INIT;
    bool found;
    uint64_t size = 0;
    assert_ok(sm_store_get_sized(&fs->base, "obj", sm_range_suffix(4), SM_IO_INDEX, &b, &found,
                                 &size, &err),
              &err);
    assert_int_equal(size, UINT64_MAX); /* the driver did not say */
    fs->report_sz = 36;
    assert_ok(sm_store_get_sized(&fs->base, "obj", sm_range_suffix(4), SM_IO_INDEX, &b, &found,
                                 &size, &err),
              &err);
    assert_int_equal(size, 36);
    sm_buf_free(&b);
    sm_store_close(&fs->base);
}

static void test_dispatch_root_key_names_store_without_slash(void **state)
{
    (void)state;
    struct fake_store *fs = fake_new();
    fs->fail = SM_E_IO;
    struct sm_err err;
    sm_err_clear(&err);
    struct sm_buf b = SM_BUF_INIT;
    bool found;
    assert_int_equal(sm_store_get(&fs->base, "", sm_range_all(), SM_IO_META, &b, &found, &err),
                     SM_E_IO);
    assert_string_equal(err.where, "fake://host/root");
    sm_buf_free(&b);
    sm_store_close(&fs->base);
}

static void test_dispatch_strv_free_accepts_empty(void **state)
{
    (void)state;
    struct sm_strv s = {NULL, 0, 0};
    sm_strv_free(&s);
    assert_null(s.v);
}

int main(void)
{
    int failed = 0;
    for (size_t i = 0; targets[i].name != NULL; i++) {
        failed += sm_store_suite_run(&targets[i]);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch_close_accepts_null),
        cmocka_unit_test(test_dispatch_close_calls_driver_and_frees_url),
        cmocka_unit_test(test_dispatch_short_driver_read_is_data_error),
        cmocka_unit_test(test_dispatch_driver_error_is_named_and_counted),
        cmocka_unit_test(test_dispatch_get_many_defaults_to_a_loop_over_get),
        cmocka_unit_test(test_dispatch_put_on_store_without_write_cap_is_usage_error),
        cmocka_unit_test(test_dispatch_list_without_list_cap_is_usage_error),
        cmocka_unit_test(test_dispatch_size_without_slot_is_internal_error),
        cmocka_unit_test(test_dispatch_limit_is_checked_before_calling_the_driver),
        cmocka_unit_test(test_dispatch_check_len_names_the_object),
        cmocka_unit_test(test_dispatch_max_requests_refuses_the_request_past_it),
        cmocka_unit_test(test_dispatch_get_sized_defaults_to_unknown_size),
        cmocka_unit_test(test_dispatch_root_key_names_store_without_slash),
        cmocka_unit_test(test_dispatch_strv_free_accepts_empty),
    };
    failed += cmocka_run_group_tests_name("store_dispatch", tests, NULL, NULL);
    return failed;
}
