/* Unit tests for par.h with one rank (no launcher, so no MPI_Init even in an MPI build, SPEC §1):
 * every collective is the single-rank identity, sm_par_agree returns the local status and keeps
 * the error text, sm_par_abort returns. Several ranks are tested by tests/mpi/. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shardmill/par.h"

static void test_one_rank_without_mpi_init(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_par_init(false, NULL, NULL, &err), SM_OK);
    assert_int_equal(sm_par_rank(), 0);
    assert_int_equal(sm_par_size(), 1);
    assert_false(sm_par_active());
    sm_par_barrier();

    uint64_t v[3] = {1, UINT64_MAX, 7};
    assert_int_equal(sm_par_sum_u64(v, 3, &err), SM_OK);
    assert_int_equal(sm_par_max_u64(v, 3, &err), SM_OK);
    assert_true(v[0] == 1 && v[1] == UINT64_MAX && v[2] == 7);
    double d[2] = {1.5, -2.0};
    assert_int_equal(sm_par_sum_f64(d, 2, &err), SM_OK);
    assert_true(d[0] == 1.5 && d[1] == -2.0);

    char text[6] = "hello";
    assert_int_equal(sm_par_bcast(text, sizeof(text), 0, &err), SM_OK);
    assert_string_equal(text, "hello");
    struct sm_buf b = SM_BUF_INIT;
    assert_int_equal(sm_buf_set(&b, (struct sm_bytes){(const uint8_t *)"abc", 3}, &err), SM_OK);
    assert_int_equal(sm_par_bcast_buf(&b, 0, &err), SM_OK);
    assert_int_equal(b.len, 3);
    assert_memory_equal(b.ptr, "abc", 3);
    sm_buf_free(&b);
    sm_par_finalize();
}

static void test_gatherv_with_one_rank_copies_the_bytes(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    const uint8_t mine[5] = {1, 2, 3, 4, 5};
    struct sm_buf all = SM_BUF_INIT;
    assert_int_equal(sm_par_gatherv_bytes(sm_bytes_of(mine, 5), &all, 0, &err), SM_OK);
    assert_int_equal(all.len, 5);
    assert_memory_equal(all.ptr, mine, 5);
    /* replaced, not appended; an empty contribution gives an empty result */
    assert_int_equal(sm_par_gatherv_bytes(sm_bytes_of(mine, 0), &all, 0, &err), SM_OK);
    assert_int_equal(all.len, 0);
    sm_buf_free(&all);
}

static void test_agree_with_one_rank_is_the_local_status(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_par_agree(SM_OK, &err), SM_OK);
    SM_ERR_AT(&err, SM_E_DATA, "in.zarr/2.2.3", "bad chunk");
    assert_int_equal(sm_par_agree(err.status, &err), SM_E_DATA);
    assert_string_equal(err.what, "bad chunk");
    assert_string_equal(err.where, "in.zarr/2.2.3");
    sm_par_abort(3); /* returns without MPI: jobs/ ends the process */
}

static void test_agree_within_with_one_rank_is_the_local_status(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    assert_int_equal(sm_par_agree_within(SM_OK, 1, &err), SM_OK);
    SM_ERR(&err, SM_E_IO, "H5Fflush failed");
    assert_int_equal(sm_par_agree_within(err.status, 1, &err), SM_E_IO);
    assert_string_equal(err.what, "H5Fflush failed"); /* nothing appended: no timeout */
    assert_false(sm_par_stuck());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rank_without_mpi_init),
        cmocka_unit_test(test_gatherv_with_one_rank_copies_the_bytes),
        cmocka_unit_test(test_agree_with_one_rank_is_the_local_status),
        cmocka_unit_test(test_agree_within_with_one_rank_is_the_local_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
