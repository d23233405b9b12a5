/* Unit tests for the HDF5 source (engine/source/source_hdf5_load.c, and the reader
 * source_hdf5.c in the module libshardmill_hdf5.so) over a file written here with the HDF5 C
 * library: a chunked, gzip-filtered big-endian dataset and a contiguous one. Values of a box, info
 * (the chunk as the slab, a plane for a contiguous dataset), the provenance (dataset, stored type,
 * layout, filters), the access (a filtered chunk decodes whole: BLOCKS; contiguous: RANDOM),
 * sm_source_bytes_read = the encoded bytes fetched (the stored bytes of every gzip chunk a box
 * touches, read back here with H5Dget_chunk_storage_size; a contiguous box's own bytes), and a
 * missing dataset named. */
#include "shardmill/sm_config.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>

#include "shardmill/source.h"

enum { Z = 4, Y = 6, X = 8 };

static char path[64];

static uint16_t value(uint64_t z, uint64_t y, uint64_t x)
{
    return (uint16_t)(1000 * z + 10 * y + x);
}

static void write_dataset(hid_t f, const char *name, bool chunked)
{
    static uint16_t v[Z * Y * X];
    for (uint64_t i = 0; i < Z * Y * X; i++) {
        v[i] = value(i / (Y * X), i / X % Y, i % X);
    }
    const hsize_t dims[3] = {Z, Y, X}, chunk[3] = {2, 3, X};
    const hid_t space = H5Screate_simple(3, dims, NULL);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunked) {
        assert_true(H5Pset_chunk(dcpl, 3, chunk) >= 0);
        assert_true(H5Pset_deflate(dcpl, 4) >= 0);
    }
    const hid_t d = H5Dcreate2(f, name, H5T_STD_U16BE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    assert_true(d >= 0);
    assert_true(H5Dwrite(d, H5T_NATIVE_USHORT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
}

static int make_file(void **state)
{
    (void)state;
    snprintf(path, sizeof(path), "/tmp/sm_src_h5_XXXXXX");
    const int fd = mkstemp(path);
    if (fd < 0) {
        return -1;
    }
    close(fd);
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) {
        return -1;
    }
    const hid_t g = H5Gcreate2(f, "/scan", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    write_dataset(f, "/scan/chunked", true);
    write_dataset(f, "/scan/plain", false);
    H5Gclose(g);
    H5Fclose(f);
    return 0;
}

static int remove_file(void **state)
{
    (void)state;
    return unlink(path);
}

/* The stored bytes of the chunks of /scan/chunked at chunk offsets [z, y, 0] for z in zs, y in ys.
 */
static uint64_t chunks_stored(const hsize_t *zs, size_t nz, const hsize_t *ys, size_t ny)
{
    const hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t d = H5Dopen2(f, "/scan/chunked", H5P_DEFAULT);
    assert_true(d >= 0);
    uint64_t sum = 0;
    for (size_t i = 0; i < nz; i++) {
        for (size_t j = 0; j < ny; j++) {
            const hsize_t off[3] = {zs[i], ys[j], 0};
            hsize_t n = 0;
            assert_true(H5Dget_chunk_storage_size(d, off, &n) >= 0);
            sum += n;
        }
    }
    H5Dclose(d);
    H5Fclose(f);
    return sum;
}

static struct sm_source *open_dataset(const char *dataset, struct sm_err *err)
{
    struct sm_source *s = NULL;
    sm_err_clear(err);
    const struct sm_source_params p = {.format = "hdf5", .path = path, .hdf5_dataset = dataset};
    sm_source_open(&p, &s, err);
    return s;
}

static void test_chunked(void **state)
{
    (void)state;
    /* read back first: the source holds the file open */
    const hsize_t zs[2] = {0, 2}, ys[2] = {0, 3}; /* the box below touches 2 x 2 chunks */
    const uint64_t want = chunks_stored(zs, 2, ys, 2);
    struct sm_err err;
    struct sm_source *s = open_dataset("/scan/chunked", &err);
    if (s == NULL) {
        fail_msg("open: %s: %s", err.where, err.what);
    }
    const struct sm_source_info *in = sm_source_info(s);
    assert_string_equal(in->format, "hdf5");
    assert_int_equal(in->dtype, SM_DT_UINT16);
    assert_int_equal(in->shape[0], Z);
    assert_int_equal(in->slab[0], 2); /* the chunk */
    assert_int_equal(in->slab[1], 3);
    assert_int_equal(in->slab[2], X);
    assert_int_equal(in->access, SM_SOURCE_BLOCKS);
    uint16_t out[2 * 4 * 5];
    const uint64_t off[3] = {1, 2, 3}, shape[3] = {2, 4, 5};
    assert_int_equal(sm_source_read_box(s, 0, off, shape, out, &err), SM_OK);
    assert_int_equal(out[0], value(1, 2, 3));
    assert_int_equal(out[39], value(2, 5, 7));
    assert_int_equal(sm_source_bytes_read(s), want);
    assert_true(want < 4 * 2 * 3 * X * 2); /* stored, not decoded (nor the box's) bytes */
    json_t *d = sm_source_describe(s);
    assert_string_equal(json_string_value(json_object_get(d, "dataset")), "/scan/chunked");
    assert_string_equal(json_string_value(json_object_get(d, "stored_dtype")), "uint16 big-endian");
    assert_string_equal(json_string_value(json_object_get(d, "layout")), "chunked");
    assert_non_null(strstr(json_string_value(json_object_get(d, "filters")), "deflate"));
    assert_string_equal(json_string_value(json_object_get(d, "path")), path);
    json_decref(d);
    sm_source_close(s);
}

static void test_contiguous_and_missing(void **state)
{
    (void)state;
    struct sm_err err;
    struct sm_source *s = open_dataset("/scan/plain", &err);
    assert_non_null(s);
    const struct sm_source_info *in = sm_source_info(s);
    assert_int_equal(in->slab[0], 1); /* a plane */
    assert_int_equal(in->slab[1], Y);
    assert_int_equal(in->access, SM_SOURCE_RANDOM);
    uint16_t out[Y * X];
    const uint64_t off[3] = {3, 0, 0}, shape[3] = {1, Y, X};
    assert_int_equal(sm_source_read_box(s, 0, off, shape, out, &err), SM_OK);
    assert_int_equal(out[Y * X - 1], value(3, Y - 1, X - 1));
    assert_int_equal(sm_source_bytes_read(s), sizeof(out));
    sm_source_close(s);

    assert_null(open_dataset("/scan/none", &err));
    assert_int_equal(err.status, SM_E_DATA);
    assert_non_null(strstr(err.where, "/scan/none"));
    assert_non_null(strstr(err.what, "no dataset"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunked),
        cmocka_unit_test(test_contiguous_and_missing),
    };
    return cmocka_run_group_tests(tests, make_file, remove_file);
}
