/* Unit tests for engine/par/par_hdf5_{mpi,serial}.c with one rank (no launcher, so no MPI_Init
 * even in an MPI build, SPEC §1): the export file is not shared, a file-access list gets the sec2
 * driver and a transfer list keeps HDF5's default (independent) mode. Several ranks (MPI-IO,
 * collective transfers) are tested under mpirun by tests/hdf5. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <hdf5.h>

#include "shardmill/par.h"
#include "shardmill/par_hdf5.h"
#include "sm_test.h"

static void test_one_rank_uses_sec2_and_default_transfers(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    assert_ok(sm_par_init(false, NULL, NULL, &err), &err);
    assert_false(sm_par_h5_shared());
    assert_string_equal(sm_par_h5_driver(), "sec2");
    const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    assert_true(fapl >= 0);
    assert_ok(sm_par_h5_fapl((int64_t)fapl, &err), &err);
    assert_true(H5Pget_driver(fapl) == H5FD_SEC2);
    const hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    assert_ok(sm_par_h5_dxpl((int64_t)dxpl, &err), &err);
    H5Pclose(dxpl);
    H5Pclose(fapl);
    assert_false(sm_par_active()); /* nothing above started MPI */
    sm_par_finalize();
}

static void test_a_bad_list_is_an_internal_error(void **state)
{
    (void)state;
    struct sm_err err;
    sm_err_clear(&err);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    assert_status(sm_par_h5_fapl((int64_t)H5I_INVALID_HID, &err), SM_E_INTERNAL, &err);
    assert_contains(err.what, "H5Pset_fapl_sec2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rank_uses_sec2_and_default_transfers),
        cmocka_unit_test(test_a_bad_list_is_an_internal_error),
    };
    return cmocka_run_group_tests_name("par_hdf5", tests, NULL, NULL);
}
