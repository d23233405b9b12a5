/* Unit tests for engine/export/export_hdf5.c with one rank (no launcher, so the sec2 driver; the
 * MPI-IO path is tested under mpirun by tests/hdf5): a float32 array in a mem store is exported and
 * read back with the HDF5 C library value for value, with its chunking, deflate filter,
 * attributes and auxiliary dataset; the exists policy and directory checks refuse what they must
 * before anything is written; a failure in the middle of the writes leaves no file at the path
 * and no temporary file beside it, and an existing file untouched. uint8 and uint16 arrays (the
 * integer outputs of a normalized convert) keep their type; any other type is refused. */
#include "shardmill/sm_config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <hdf5.h>

#include "shardmill/alloc.h"
#include "shardmill/array.h"
#include "shardmill/export.h"
#include "shardmill/store.h"
#include "sm_test.h"
#include "sm_test_zarr.h"

/* A [20, 33, 47] float32 array, chunks [8, 16, 16] raw little-endian, in a mem store. */
static const uint64_t SHAPE[3] = {20, 33, 47};
static const uint64_t CHUNKS[3] = {8, 16, 16};
static const uint64_t UNIT[3] = {8, 32, 32}; /* the "shards" the work is cut in: 3 x 2 x 2 */

static const char ZARR_JSON[] =
    "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[20,33,47],\"data_type\":\"float32\","
    "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[8,16,16]}},"
    "\"chunk_key_encoding\":{\"name\":\"default\",\"configuration\":{\"separator\":\"/\"}},"
    "\"fill_value\":0.0,\"codecs\":[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}]"
    "}";

struct fx {
    struct sm_store *s;
    struct sm_array *a;
    struct sm_scratch *scratch;
    struct sm_test_ref ref;
    char dir[256], path[320], tmp[340];
    struct sm_err err;
};

static int setup(void **state)
{
    struct fx *f = test_calloc(1, sizeof(*f));
    sm_err_clear(&f->err);
    if (sm_store_mem_new(&f->s, &f->err) != SM_OK || sm_test_tmpdir("export", f->dir, 256) != 0) {
        return -1;
    }
    snprintf(f->path, sizeof(f->path), "%s/ct.h5", f->dir);
    snprintf(f->tmp, sizeof(f->tmp), "%s/.ct.h5.shardmill-tmp", f->dir);
    sm_test_ref_init(&f->ref, 3, SHAPE, 4, 42);
    /* finite values only (random bits could be NaN, which HDF5 copies as well, but keep the
     * comparison plain): v = i * 0.25 - 1000 */
    float *v = (float *)f->ref.data;
    for (size_t i = 0; i < f->ref.nelem; i++) {
        v[i] = (float)i * 0.25f - 1000.0f;
    }
    sm_test_put_str(f->s, "zarr.json", ZARR_JSON);
    uint64_t grid[3], c[3] = {0, 0, 0};
    for (unsigned d = 0; d < 3; d++) {
        grid[d] = (SHAPE[d] + CHUNKS[d] - 1) / CHUNKS[d];
    }
    uint8_t chunk[8 * 16 * 16 * 4];
    do {
        uint64_t origin[3];
        for (unsigned d = 0; d < 3; d++) {
            origin[d] = c[d] * CHUNKS[d];
        }
        sm_test_ref_chunk(&f->ref, origin, CHUNKS, chunk);
        char key[64];
        sm_test_chunk_key(key, sizeof(key), "", "c", '/', 3, c);
        sm_test_put(f->s, key, chunk, sizeof(chunk));
    } while (sm_test_next(3, grid, c));
    const struct sm_array_opts o = SM_ARRAY_OPTS_DEFAULTS;
    if (sm_array_open(f->s, "", &o, &f->a, &f->err) != SM_OK ||
        sm_scratch_new(&f->scratch, &f->err) != SM_OK) {
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    sm_scratch_free(f->scratch);
    sm_array_close(f->a);
    sm_store_close(f->s);
    sm_test_ref_free(&f->ref);
    sm_test_rm_rf(f->dir);
    test_free(f);
    return 0;
}

static bool exists(const char *p)
{
    struct stat sb;
    return lstat(p, &sb) == 0;
}

static const double LOHI[2] = {13.0, 192.0};
static const uint64_t ROI[3] = {20, 33, 47};
static const uint64_t COUNTS[4] = {5, 0, UINT64_MAX, 7};
static const uint64_t ONE = 1;

static const struct sm_export_attr DATA_ATTRS[] = {
    {.name = "normalization_mode", .kind = SM_EXPORT_ATTR_STRING, .str = "percentile"},
    {.name = "normalization_lo", .kind = SM_EXPORT_ATTR_F64, .f64 = &LOHI[0]},
    {.name = "window", .kind = SM_EXPORT_ATTR_F64, .array = true, .n = 2, .f64 = LOHI},
    {.name = "roi_shape", .kind = SM_EXPORT_ATTR_U64, .array = true, .n = 3, .u64 = ROI},
};
static const struct sm_export_attr HIST_ATTRS[] = {
    {.name = "overflow", .kind = SM_EXPORT_ATTR_U64, .u64 = &ONE},
};
static const struct sm_export_aux HIST = {"/histogram", COUNTS, 4, HIST_ATTRS, 1};

static struct sm_export_spec spec_of(int deflate)
{
    struct sm_export_spec sp = SM_EXPORT_SPEC_DEFAULTS;
    sp.dataset = "/g/data";
    memcpy(sp.chunk, UNIT, sizeof(UNIT));
    sp.deflate = deflate;
    sp.attrs = DATA_ATTRS;
    sp.nattrs = sizeof(DATA_ATTRS) / sizeof(DATA_ATTRS[0]);
    sp.aux = &HIST;
    sp.naux = 1;
    return sp;
}

static sm_status export_all(struct fx *f, const struct sm_export_spec *sp,
                            const struct sm_export_opts *o, struct sm_export_result *res)
{
    const struct sm_export_work work = {UNIT, 0, 12, NULL, NULL, NULL};
    return sm_export_hdf5_write(f->path, o, sp, f->a, &work, f->scratch, res, &f->err);
}

static void read_attr(hid_t obj, const char *name, hid_t mtype, void *out)
{
    const hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    assert_true(a >= 0);
    assert_true(H5Aread(a, mtype, out) >= 0);
    H5Aclose(a);
}

/* The file holds exactly the reference values, chunked as asked, with the attributes. */
static void check_file(const struct fx *f, const uint64_t *chunk, int deflate)
{
    const hid_t file = H5Fopen(f->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(file >= 0);
    const hid_t ds = H5Dopen2(file, "/g/data", H5P_DEFAULT);
    assert_true(ds >= 0);
    const hid_t space = H5Dget_space(ds);
    hsize_t dims[3];
    assert_int_equal(H5Sget_simple_extent_dims(space, dims, NULL), 3);
    for (unsigned d = 0; d < 3; d++) {
        assert_int_equal(dims[d], SHAPE[d]);
    }
    const hid_t type = H5Dget_type(ds);
    assert_true(H5Tequal(type, H5T_IEEE_F32LE) > 0);
    const hid_t dcpl = H5Dget_create_plist(ds);
    hsize_t cd[3];
    assert_int_equal(H5Pget_layout(dcpl), H5D_CHUNKED);
    assert_int_equal(H5Pget_chunk(dcpl, 3, cd), 3);
    for (unsigned d = 0; d < 3; d++) {
        assert_int_equal(cd[d], chunk[d]);
    }
    assert_int_equal(H5Pget_nfilters(dcpl), deflate > 0 ? 1 : 0);
    if (deflate > 0) {
        unsigned flags = 0, cv[1] = {0};
        size_t ncv = 1;
        assert_int_equal(H5Pget_filter2(dcpl, 0, &flags, &ncv, cv, 0, NULL, NULL),
                         H5Z_FILTER_DEFLATE);
        assert_int_equal(cv[0], (unsigned)deflate);
    }
    float *got = test_malloc(f->ref.nbytes);
    assert_true(H5Dread(ds, H5T_IEEE_F32LE, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
    assert_memory_equal(got, f->ref.data, f->ref.nbytes);
    test_free(got);

    const hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, H5T_VARIABLE);
    H5Tset_cset(str, H5T_CSET_UTF8);
    char *mode = NULL;
    read_attr(ds, "normalization_mode", str, &mode);
    assert_string_equal(mode, "percentile");
    H5free_memory(mode);
    double lo = 0, win[2] = {0, 0};
    read_attr(ds, "normalization_lo", H5T_NATIVE_DOUBLE, &lo);
    assert_true(lo == 13.0);
    read_attr(ds, "window", H5T_NATIVE_DOUBLE, win);
    assert_true(win[0] == 13.0 && win[1] == 192.0);
    uint64_t roi[3];
    read_attr(ds, "roi_shape", H5T_NATIVE_UINT64, roi);
    assert_memory_equal(roi, ROI, sizeof(roi));

    const hid_t h = H5Dopen2(file, "/histogram", H5P_DEFAULT);
    assert_true(h >= 0);
    uint64_t counts[4];
    assert_true(H5Dread(h, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, counts) >= 0);
    assert_memory_equal(counts, COUNTS, sizeof(counts));
    uint64_t over = 0;
    read_attr(h, "overflow", H5T_NATIVE_UINT64, &over);
    assert_int_equal(over, 1);
    H5Dclose(h);
    H5Tclose(str);
    H5Pclose(dcpl);
    H5Tclose(type);
    H5Sclose(space);
    H5Dclose(ds);
    H5Fclose(file);
}

static void test_export_round_trip_plain_and_deflate(void **state)
{
    struct fx *f = *state;
    for (int deflate = 0; deflate <= 6; deflate += 6) {
        sm_test_rm_rf(f->path);
        const struct sm_export_spec sp = spec_of(deflate);
        const struct sm_export_opts o = SM_EXPORT_OPTS_DEFAULTS;
        char *resolved = NULL;
        assert_ok(sm_export_hdf5_check(f->path, &o, &sp, &resolved, &f->err), &f->err);
        assert_string_equal(resolved, f->path);
        sm_free(resolved);
        struct sm_export_result res;
        assert_ok(export_all(f, &sp, &o, &res), &f->err);
        assert_string_equal(res.driver, "sec2");
        assert_int_equal(res.rounds, 12); /* one rank (sec2): one box per unit */
        assert_int_equal(res.boxes, 12);
        assert_int_equal(res.values, 20 * 33 * 47);
        struct stat sb;
        assert_int_equal(stat(f->path, &sb), 0);
        assert_int_equal(res.bytes, (uint64_t)sb.st_size);
        assert_false(exists(f->tmp));
        const uint64_t want[3] = {8, 32, 32};
        assert_memory_equal(res.chunk, want, sizeof(want));
        check_file(f, want, deflate);
    }
}

static void test_export_small_buffer_writes_unit_by_unit(void **state)
{
    struct fx *f = *state;
    struct sm_export_spec sp = spec_of(1);
    sp.buffer_bytes = 1; /* below one unit: one unit per round */
    const uint64_t big[3] = {100, 100, 100};
    memcpy(sp.chunk, big, sizeof(big)); /* clipped to the shape */
    const struct sm_export_opts o = SM_EXPORT_OPTS_DEFAULTS;
    struct sm_export_result res;
    assert_ok(export_all(f, &sp, &o, &res), &f->err);
    assert_int_equal(res.rounds, 12);
    assert_int_equal(res.boxes, 12);
    assert_memory_equal(res.chunk, SHAPE, sizeof(SHAPE));
    check_file(f, SHAPE, 1);
}

static void test_export_partial_work_writes_only_its_units(void **state)
{
    struct fx *f = *state;
    const struct sm_export_spec sp = spec_of(0);
    const struct sm_export_opts o = SM_EXPORT_OPTS_DEFAULTS;
    const struct sm_export_work work = {UNIT, 5,    4,
                                        NULL, NULL, NULL}; /* units 5..8, one box each (sec2) */
    struct sm_export_result res;
    assert_ok(sm_export_hdf5_write(f->path, &o, &sp, f->a, &work, f->scratch, &res, &f->err),
              &f->err);
    assert_int_equal(res.boxes, 4);
    assert_int_equal(res.rounds, 4);
    assert_int_equal(res.values, 8 * 32 * 15 + 8 * 1 * 32 + 8 * 1 * 15 + 4 * 32 * 32);
}

static void write_file(const char *p, const char *text)
{
    FILE *fp = fopen(p, "wb");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void test_check_applies_the_policy_before_writing(void **state)
{
    struct fx *f = *state;
    const struct sm_export_spec sp = spec_of(0);
    struct sm_export_opts o = SM_EXPORT_OPTS_DEFAULTS;
    char *resolved = NULL;
    /* an existing file: refused under error, also when it is HDF5 */
    write_file(f->path, "not hdf5");
    assert_status(sm_export_hdf5_check(f->path, &o, &sp, &resolved, &f->err), SM_E_USAGE, &f->err);
    assert_contains(f->err.what, "export exists (set export.hdf5.exists: overwrite)");
    assert_string_equal(f->err.where, f->path);
    assert_null(resolved);
    /* overwrite refuses a file that is not HDF5 ... */
    o.exists = SM_EXPORT_EXISTS_OVERWRITE;
    sm_err_clear(&f->err);
    assert_status(sm_export_hdf5_check(f->path, &o, &sp, &resolved, &f->err), SM_E_USAGE, &f->err);
    assert_contains(f->err.what, "not an HDF5 file");
    struct sm_export_result res;
    sm_err_clear(&f->err);
    assert_status(export_all(f, &sp, &o, &res), SM_E_USAGE, &f->err); /* checked again */
    assert_false(exists(f->tmp));
    /* ... and replaces an HDF5 file */
    unlink(f->path);
    sm_err_clear(&f->err);
    assert_ok(export_all(f, &sp, &o, &res), &f->err);
    assert_ok(sm_export_hdf5_check(f->path, &o, &sp, &resolved, &f->err), &f->err);
    sm_free(resolved);
    assert_ok(export_all(f, &sp, &o, &res), &f->err);
    check_file(f, UNIT, 0);
    /* a directory, a symbolic link, a missing directory, a taken temporary name */
    char p[400];
    snprintf(p, sizeof(p), "%s/sub", f->dir);
    assert_int_equal(mkdir(p, 0755), 0);
    sm_err_clear(&f->err);
    assert_status(sm_export_hdf5_check(p, &o, &sp, &resolved, &f->err), SM_E_USAGE, &f->err);
    assert_contains(f->err.what, "is a directory");
    snprintf(p, sizeof(p), "%s/link.h5", f->dir);
    assert_int_equal(symlink(f->path, p), 0);
    sm_err_clear(&f->err);
    assert_status(sm_export_hdf5_check(p, &o, &sp, &resolved, &f->err), SM_E_USAGE, &f->err);
    assert_contains(f->err.what, "symbolic link");
    snprintf(p, sizeof(p), "%s/missing/ct.h5", f->dir);
    sm_err_clear(&f->err);
    assert_status(sm_export_hdf5_check(p, &o, &sp, &resolved, &f->err), SM_E_IO, &f->err);
    assert_contains(f->err.what, "the export directory is missing: No such file or directory");
    /* ... unless the caller creates it with the Zarr output it writes first */
    char later[400];
    snprintf(later, sizeof(later), "%s/missing/deeper/out.zarr", f->dir);
    o.created_by_caller = later;
    sm_err_clear(&f->err);
    assert_ok(sm_export_hdf5_check(p, &o, &sp, &resolved, &f->err), &f->err);
    sm_free(resolved);
    struct sm_export_result r2;
    const struct sm_export_work work = {UNIT, 0, 12, NULL, NULL, NULL};
    assert_status(sm_export_hdf5_write(p, &o, &sp, f->a, &work, f->scratch, &r2, &f->err), SM_E_IO,
                  &f->err); /* the write itself needs the directory */
    assert_contains(f->err.what, "the export directory is missing");
    o.created_by_caller = NULL;
    assert_int_equal(mkdir(f->tmp, 0755), 0);
    sm_err_clear(&f->err);
    assert_status(sm_export_hdf5_check(f->path, &o, &sp, &resolved, &f->err), SM_E_USAGE, &f->err);
    assert_contains(f->err.what, "temporary name");
    rmdir(f->tmp);
    sm_err_clear(&f->err);
    assert_status(sm_export_hdf5_check("a/../x.h5", &o, &sp, &resolved, &f->err), SM_E_USAGE,
                  &f->err);
    assert_contains(f->err.what, "'..' component");
}

static void test_bad_spec_is_usage_naming_the_key(void **state)
{
    struct fx *f = *state;
    const struct sm_export_opts o = SM_EXPORT_OPTS_DEFAULTS;
    struct sm_export_result res;
    struct sm_export_spec sp = spec_of(0);
    sp.dataset = "data";
    assert_status(export_all(f, &sp, &o, &res), SM_E_USAGE, &f->err);
    assert_string_equal(f->err.where, "export.hdf5.dataset");
    sp = spec_of(0);
    sp.dataset = "/histogram/x";
    sm_err_clear(&f->err);
    assert_status(export_all(f, &sp, &o, &res), SM_E_USAGE, &f->err);
    assert_contains(f->err.what, "collides");
    sp = spec_of(10);
    sm_err_clear(&f->err);
    assert_status(export_all(f, &sp, &o, &res), SM_E_USAGE, &f->err);
    assert_string_equal(f->err.where, "export.hdf5.deflate");
    sp = spec_of(0);
    sp.chunk[1] = 0;
    sm_err_clear(&f->err);
    assert_status(export_all(f, &sp, &o, &res), SM_E_USAGE, &f->err);
    assert_string_equal(f->err.where, "export.hdf5.chunk");
    assert_false(exists(f->path));
    assert_false(exists(f->tmp));
}

static void test_failure_mid_write_leaves_nothing(void **state)
{
    struct fx *f = *state;
    /* an old export stays untouched when the new one fails (overwrite) */
    struct sm_export_spec sp = spec_of(0);
    struct sm_export_opts o = SM_EXPORT_OPTS_DEFAULTS;
    o.exists = SM_EXPORT_EXISTS_OVERWRITE;
    struct sm_export_result res;
    assert_ok(export_all(f, &sp, &o, &res), &f->err);
    struct stat before;
    assert_int_equal(stat(f->path, &before), 0);
    /* a chunk of the last unit row is truncated: the read of a later round fails */
    sm_test_put(f->s, "c/2/2/2", "short", 5);
    sp.buffer_bytes = 1;
    sm_err_clear(&f->err);
    assert_status(export_all(f, &sp, &o, &res), SM_E_DATA, &f->err);
    assert_true(res.rounds > 1 && res.boxes >= 1); /* it failed after writing something */
    assert_false(exists(f->tmp));
    struct stat after;
    assert_int_equal(stat(f->path, &after), 0);
    assert_int_equal(after.st_ino, before.st_ino);
    assert_int_equal(after.st_size, before.st_size);
    /* and with no old file, nothing at the path */
    unlink(f->path);
    sm_err_clear(&f->err);
    assert_status(export_all(f, &sp, &o, &res), SM_E_DATA, &f->err);
    assert_false(exists(f->path));
    assert_false(exists(f->tmp));
}

/* A progress callback that raises the stop flag after the first round (a signal mid-export). */
static void stop_after_first_round(void *user, uint64_t done, uint64_t bytes)
{
    (void)done;
    (void)bytes;
    atomic_store((atomic_int *)user, 15);
}

static void test_a_stop_ends_the_rounds_and_leaves_nothing(void **state)
{
    struct fx *f = *state;
    struct sm_export_spec sp = spec_of(0);
    sp.buffer_bytes = 1; /* one unit per round: 12 rounds */
    struct sm_export_opts o = SM_EXPORT_OPTS_DEFAULTS;
    atomic_int flag = 0;
    const struct sm_export_work work = {UNIT, 0, 12, stop_after_first_round, &flag, &flag};
    struct sm_export_result res;
    assert_status(sm_export_hdf5_write(f->path, &o, &sp, f->a, &work, f->scratch, &res, &f->err),
                  SM_E_STOPPED, &f->err);
    assert_string_equal(f->err.what, "stopped by signal 15");
    assert_int_equal(res.rounds, 1); /* the round after the flag was never written */
    assert_false(exists(f->path));
    assert_false(exists(f->tmp));
}

/* A 1-D array [4] of `dtype` in a new mem store, its one chunk `bytes` (raw little-endian). */
static struct sm_array *small_array(struct fx *f, struct sm_store **s, const char *dtype,
                                    const void *bytes, size_t n)
{
    struct sm_array *a = NULL;
    char doc[512];
    snprintf(doc, sizeof(doc),
             "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[4],\"data_type\":\"%s\","
             "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[4]}},"
             "\"chunk_key_encoding\":{\"name\":\"default\"},\"fill_value\":0,"
             "\"codecs\":[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}]}",
             dtype);
    assert_ok(sm_store_mem_new(s, &f->err), &f->err);
    sm_test_put_str(*s, "zarr.json", doc);
    sm_test_put(*s, "c/0", bytes, n);
    const struct sm_array_opts ao = SM_ARRAY_OPTS_DEFAULTS;
    assert_ok(sm_array_open(*s, "", &ao, &a, &f->err), &f->err);
    return a;
}

/* The integer outputs of a normalized convert (SPEC §2: uint8, uint16) are exported in their
 * type: an unsigned little-endian integer dataset of the same values. */
static void test_integer_sources_keep_their_type(void **state)
{
    struct fx *f = *state;
    static const uint8_t u8[4] = {0, 1, 128, 255};
    static const uint8_t u16[8] = {0, 0, 1, 0, 0, 128, 255, 255}; /* 0, 1, 32768, 65535 LE */
    const struct {
        const char *name;
        const void *bytes;
        size_t size;
    } cases[] = {{"uint8", u8, 1}, {"uint16", u16, 2}};
    for (size_t k = 0; k < 2; k++) {
        struct sm_store *s = NULL;
        struct sm_array *a = small_array(f, &s, cases[k].name, cases[k].bytes, 4 * cases[k].size);
        const struct sm_export_spec sp = spec_of(0);
        struct sm_export_opts o = SM_EXPORT_OPTS_DEFAULTS;
        o.exists = SM_EXPORT_EXISTS_OVERWRITE;
        const uint64_t unit[1] = {4};
        const struct sm_export_work work = {unit, 0, 1, NULL, NULL, NULL};
        struct sm_export_result res;
        assert_ok(sm_export_hdf5_write(f->path, &o, &sp, a, &work, f->scratch, &res, &f->err),
                  &f->err);
        const hid_t file = H5Fopen(f->path, H5F_ACC_RDONLY, H5P_DEFAULT);
        assert_true(file >= 0);
        const hid_t ds = H5Dopen2(file, sp.dataset, H5P_DEFAULT);
        const hid_t t = H5Dget_type(ds);
        assert_int_equal(H5Tget_class(t), H5T_INTEGER);
        assert_int_equal(H5Tget_sign(t), H5T_SGN_NONE);
        assert_int_equal(H5Tget_size(t), cases[k].size);
        assert_int_equal(H5Tget_order(t), H5T_ORDER_LE);
        uint8_t got[8];
        assert_true(H5Dread(ds, k == 0 ? H5T_STD_U8LE : H5T_STD_U16LE, H5S_ALL, H5S_ALL,
                            H5P_DEFAULT, got) >= 0);
        assert_memory_equal(got, cases[k].bytes, 4 * cases[k].size);
        assert_int_equal(res.values, 4);
        H5Tclose(t);
        H5Dclose(ds);
        H5Fclose(file);
        sm_array_close(a);
        sm_store_close(s);
    }
}

static void test_another_type_is_refused(void **state)
{
    struct fx *f = *state;
    static const int16_t v[4] = {0, -1, 2, 3};
    struct sm_store *s = NULL;
    struct sm_array *a = small_array(f, &s, "int16", v, sizeof(v));
    const struct sm_export_spec sp = spec_of(0);
    const struct sm_export_opts o = SM_EXPORT_OPTS_DEFAULTS;
    const uint64_t unit[1] = {4};
    const struct sm_export_work work = {unit, 0, 1, NULL, NULL, NULL};
    struct sm_export_result res;
    assert_status(sm_export_hdf5_write(f->path, &o, &sp, a, &work, f->scratch, &res, &f->err),
                  SM_E_USAGE, &f->err);
    assert_contains(f->err.what, "float32, uint8 or uint16");
    assert_false(exists(f->path));
    sm_array_close(a);
    sm_store_close(s);
}

int main(void)
{
    assert_true(sm_export_hdf5_available());
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_export_round_trip_plain_and_deflate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_export_small_buffer_writes_unit_by_unit, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_export_partial_work_writes_only_its_units, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_check_applies_the_policy_before_writing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_bad_spec_is_usage_naming_the_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_mid_write_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_stop_ends_the_rounds_and_leaves_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_integer_sources_keep_their_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_another_type_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests_name("export_hdf5", tests, NULL, NULL);
}
